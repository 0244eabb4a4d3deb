/* The profiling backend (backend_prof.h). The forwarders below are one per compute op of
 * core/backend.h's table, in its order: the wrapped backend's op, timed, then the counting
 * backend's (kernels/cost) record of its FLOPs and bytes, which takes the time. */
#include "backend_prof.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend_cost.h"
#include "timer.h"

typedef struct {
    ab_backend *inner, *cost;
    ab_backend_ops ops; /* this instance's table: the optional ops only where the inner has them */
    FILE *report;       /* where the table goes when the backend ends (ab_prof_report_at_destroy), or NULL */
} prof_state;

static prof_state *st_of(ab_backend *be) {
    return (prof_state *)be->impl;
}

/* the op just recorded by the counting backend takes the measured time (a host backend's op has
 * finished when it returns; a device's is only enqueued: see backend_prof.h) */
static int timed(prof_state *st, int rc, double dt) {
    if (rc != 0) return rc;
    ab_op_cost *op = ab_cost_last(st->cost);
    if (op) op->time_s = dt;
    return 0;
}

static int p_gemm(ab_backend *be, int ta, int tb, int M, int N, int K, float alpha, ab_dtype at, const void *A, int lda,
                  ab_dtype bt, const void *B, int ldb, const void *bias, ab_epilogue epi, float beta, ab_dtype ct,
                  void *C, int ldc) {
    prof_state *st = st_of(be);
    const double t0 = ab_now();
    const int rc =
        st->inner->ops->gemm(st->inner, ta, tb, M, N, K, alpha, at, A, lda, bt, B, ldb, bias, epi, beta, ct, C, ldc);
    return rc != 0 ? rc
                   : timed(st,
                           st->cost->ops->gemm(st->cost, ta, tb, M, N, K, alpha, at, A, lda, bt, B, ldb, bias, epi,
                                               beta, ct, C, ldc),
                           ab_now() - t0);
}
static int p_cast(ab_backend *be, size_t n, ab_dtype stype, const void *src, ab_dtype dt, void *dst) {
    prof_state *st = st_of(be);
    const double t0 = ab_now();
    const int rc = st->inner->ops->cast(st->inner, n, stype, src, dt, dst);
    return rc != 0 ? rc : timed(st, st->cost->ops->cast(st->cost, n, stype, src, dt, dst), ab_now() - t0);
}
static int p_accumulate(ab_backend *be, size_t n, ab_dtype stype, const void *src, float *dst, int accumulate) {
    prof_state *st = st_of(be);
    const double t0 = ab_now();
    const int rc = st->inner->ops->accumulate(st->inner, n, stype, src, dst, accumulate);
    return rc != 0 ? rc : timed(st, st->cost->ops->accumulate(st->cost, n, stype, src, dst, accumulate), ab_now() - t0);
}
static int p_relu_forward(ab_backend *be, size_t n, ab_dtype t, const void *x, void *y) {
    prof_state *st = st_of(be);
    const double t0 = ab_now();
    const int rc = st->inner->ops->relu_forward(st->inner, n, t, x, y);
    return rc != 0 ? rc : timed(st, st->cost->ops->relu_forward(st->cost, n, t, x, y), ab_now() - t0);
}
static int p_relu_backward(ab_backend *be, size_t n, ab_dtype t, const void *y, const void *dy, void *dx) {
    prof_state *st = st_of(be);
    const double t0 = ab_now();
    const int rc = st->inner->ops->relu_backward(st->inner, n, t, y, dy, dx);
    return rc != 0 ? rc : timed(st, st->cost->ops->relu_backward(st->cost, n, t, y, dy, dx), ab_now() - t0);
}
static int p_col_sum(ab_backend *be, int M, int N, ab_dtype xt, const void *X, float beta, ab_dtype ot, void *out) {
    prof_state *st = st_of(be);
    const double t0 = ab_now();
    const int rc = st->inner->ops->col_sum(st->inner, M, N, xt, X, beta, ot, out);
    return rc != 0 ? rc : timed(st, st->cost->ops->col_sum(st->cost, M, N, xt, X, beta, ot, out), ab_now() - t0);
}
static int p_softmax_xent(ab_backend *be, int B, int C, ab_dtype lt, const void *logits, const int32_t *labels,
                          float grad_scale, ab_dtype dt, void *dlogits, float *loss_sum, int32_t *correct) {
    prof_state *st = st_of(be);
    const double t0 = ab_now();
    const int rc =
        st->inner->ops->softmax_xent(st->inner, B, C, lt, logits, labels, grad_scale, dt, dlogits, loss_sum, correct);
    return rc != 0 ? rc
                   : timed(st,
                           st->cost->ops->softmax_xent(st->cost, B, C, lt, logits, labels, grad_scale, dt, dlogits,
                                                       loss_sum, correct),
                           ab_now() - t0);
}
static int p_unscale_check(ab_backend *be, size_t n, float *g, float inv_scale, int32_t *found_inf) {
    prof_state *st = st_of(be);
    const double t0 = ab_now();
    const int rc = st->inner->ops->unscale_check(st->inner, n, g, inv_scale, found_inf);
    return rc != 0 ? rc : timed(st, st->cost->ops->unscale_check(st->cost, n, g, inv_scale, found_inf), ab_now() - t0);
}
static int p_sgd_step(ab_backend *be, size_t n, float *w, const float *g, float *buf, float lr, float momentum,
                      float weight_decay, int first_step) {
    prof_state *st = st_of(be);
    const double t0 = ab_now();
    const int rc = st->inner->ops->sgd_step(st->inner, n, w, g, buf, lr, momentum, weight_decay, first_step);
    return rc != 0 ? rc
                   : timed(st, st->cost->ops->sgd_step(st->cost, n, w, g, buf, lr, momentum, weight_decay, first_step),
                           ab_now() - t0);
}
static int p_adamw_step(ab_backend *be, size_t n, float *w, const float *g, float *m, float *v, float lr, float beta1,
                        float beta2, float eps, float weight_decay, int step) {
    prof_state *st = st_of(be);
    const double t0 = ab_now();
    const int rc = st->inner->ops->adamw_step(st->inner, n, w, g, m, v, lr, beta1, beta2, eps, weight_decay, step);
    return rc != 0
               ? rc
               : timed(st,
                       st->cost->ops->adamw_step(st->cost, n, w, g, m, v, lr, beta1, beta2, eps, weight_decay, step),
                       ab_now() - t0);
}
static int p_gather_normalize(ab_backend *be, int B, int D, const uint8_t *data, const uint8_t *labels,
                              const int32_t *idx, float mean, float std, ab_dtype ot, void *out, int32_t *labels_out) {
    prof_state *st = st_of(be);
    const double t0 = ab_now();
    const int rc = st->inner->ops->gather_normalize(st->inner, B, D, data, labels, idx, mean, std, ot, out, labels_out);
    return rc != 0 ? rc
                   : timed(st,
                           st->cost->ops->gather_normalize(st->cost, B, D, data, labels, idx, mean, std, ot, out,
                                                           labels_out),
                           ab_now() - t0);
}
static int p_gather_images(ab_backend *be, int B, const ab_image_layout *L, const ab_image_aug *aug,
                           const uint8_t *data, const uint8_t *labels, const int32_t *idx, ab_dtype ot, void *out,
                           int32_t *labels_out) {
    prof_state *st = st_of(be);
    const double t0 = ab_now();
    const int rc = st->inner->ops->gather_images(st->inner, B, L, aug, data, labels, idx, ot, out, labels_out);
    return rc != 0
               ? rc
               : timed(st, st->cost->ops->gather_images(st->cost, B, L, aug, data, labels, idx, ot, out, labels_out),
                       ab_now() - t0);
}
static int p_conv2d_forward(ab_backend *be, const ab_conv_shape *s, ab_dtype t, const void *x, const void *w, void *y) {
    prof_state *st = st_of(be);
    const double t0 = ab_now();
    const int rc = st->inner->ops->conv2d_forward(st->inner, s, t, x, w, y);
    return rc != 0 ? rc : timed(st, st->cost->ops->conv2d_forward(st->cost, s, t, x, w, y), ab_now() - t0);
}
static int p_conv2d_backward_data(ab_backend *be, const ab_conv_shape *s, ab_dtype t, const void *dy, const void *w,
                                  void *dx) {
    prof_state *st = st_of(be);
    const double t0 = ab_now();
    const int rc = st->inner->ops->conv2d_backward_data(st->inner, s, t, dy, w, dx);
    return rc != 0 ? rc : timed(st, st->cost->ops->conv2d_backward_data(st->cost, s, t, dy, w, dx), ab_now() - t0);
}
static int p_conv2d_backward_filter(ab_backend *be, const ab_conv_shape *s, ab_dtype t, const void *x, const void *dy,
                                    float beta, void *dw) {
    prof_state *st = st_of(be);
    const double t0 = ab_now();
    const int rc = st->inner->ops->conv2d_backward_filter(st->inner, s, t, x, dy, beta, dw);
    return rc != 0 ? rc
                   : timed(st, st->cost->ops->conv2d_backward_filter(st->cost, s, t, x, dy, beta, dw), ab_now() - t0);
}
static int p_batchnorm_forward_train(ab_backend *be, int M, int C, ab_dtype t, const void *x, const float *gamma,
                                     const float *beta, float eps, float momentum, float *running_mean,
                                     float *running_var, float *save_mean, float *save_invstd, int relu, void *y) {
    prof_state *st = st_of(be);
    const double t0 = ab_now();
    const int rc = st->inner->ops->batchnorm_forward_train(st->inner, M, C, t, x, gamma, beta, eps, momentum,
                                                           running_mean, running_var, save_mean, save_invstd, relu, y);
    return rc != 0 ? rc
                   : timed(st,
                           st->cost->ops->batchnorm_forward_train(st->cost, M, C, t, x, gamma, beta, eps, momentum,
                                                                  running_mean, running_var, save_mean, save_invstd,
                                                                  relu, y),
                           ab_now() - t0);
}
static int p_batchnorm_forward_eval(ab_backend *be, int M, int C, ab_dtype t, const void *x, const float *gamma,
                                    const float *beta, const float *running_mean, const float *running_var, float eps,
                                    int relu, void *y) {
    prof_state *st = st_of(be);
    const double t0 = ab_now();
    const int rc = st->inner->ops->batchnorm_forward_eval(st->inner, M, C, t, x, gamma, beta, running_mean, running_var,
                                                          eps, relu, y);
    return rc != 0 ? rc
                   : timed(st,
                           st->cost->ops->batchnorm_forward_eval(st->cost, M, C, t, x, gamma, beta, running_mean,
                                                                 running_var, eps, relu, y),
                           ab_now() - t0);
}
static int p_batchnorm_backward(ab_backend *be, int M, int C, ab_dtype t, const void *x, const void *dy,
                                const float *gamma, const float *save_mean, const float *save_invstd, float acc,
                                float *dgamma, float *dbeta, void *dx) {
    prof_state *st = st_of(be);
    const double t0 = ab_now();
    const int rc = st->inner->ops->batchnorm_backward(st->inner, M, C, t, x, dy, gamma, save_mean, save_invstd, acc,
                                                      dgamma, dbeta, dx);
    return rc != 0 ? rc
                   : timed(st,
                           st->cost->ops->batchnorm_backward(st->cost, M, C, t, x, dy, gamma, save_mean, save_invstd,
                                                             acc, dgamma, dbeta, dx),
                           ab_now() - t0);
}
static int p_maxpool_forward(ab_backend *be, const ab_pool_shape *s, ab_dtype t, const void *x, void *y) {
    prof_state *st = st_of(be);
    const double t0 = ab_now();
    const int rc = st->inner->ops->maxpool_forward(st->inner, s, t, x, y);
    return rc != 0 ? rc : timed(st, st->cost->ops->maxpool_forward(st->cost, s, t, x, y), ab_now() - t0);
}
static int p_maxpool_backward(ab_backend *be, const ab_pool_shape *s, ab_dtype t, const void *x, const void *y,
                              const void *dy, void *dx) {
    prof_state *st = st_of(be);
    const double t0 = ab_now();
    const int rc = st->inner->ops->maxpool_backward(st->inner, s, t, x, y, dy, dx);
    return rc != 0 ? rc : timed(st, st->cost->ops->maxpool_backward(st->cost, s, t, x, y, dy, dx), ab_now() - t0);
}
static int p_avgpool_forward(ab_backend *be, int N, int HW, int C, ab_dtype t, const void *x, void *y) {
    prof_state *st = st_of(be);
    const double t0 = ab_now();
    const int rc = st->inner->ops->avgpool_forward(st->inner, N, HW, C, t, x, y);
    return rc != 0 ? rc : timed(st, st->cost->ops->avgpool_forward(st->cost, N, HW, C, t, x, y), ab_now() - t0);
}
static int p_avgpool_backward(ab_backend *be, int N, int HW, int C, ab_dtype t, const void *dy, void *dx) {
    prof_state *st = st_of(be);
    const double t0 = ab_now();
    const int rc = st->inner->ops->avgpool_backward(st->inner, N, HW, C, t, dy, dx);
    return rc != 0 ? rc : timed(st, st->cost->ops->avgpool_backward(st->cost, N, HW, C, t, dy, dx), ab_now() - t0);
}
static int p_add(ab_backend *be, size_t n, ab_dtype t, const void *a, const void *b, int relu, void *y) {
    prof_state *st = st_of(be);
    const double t0 = ab_now();
    const int rc = st->inner->ops->add(st->inner, n, t, a, b, relu, y);
    return rc != 0 ? rc : timed(st, st->cost->ops->add(st->cost, n, t, a, b, relu, y), ab_now() - t0);
}
static int p_gemm_batched(ab_backend *be, int ta, int tb, int M, int N, int K, float alpha, ab_dtype at, const void *A,
                          int lda, long long sa, ab_dtype bt, const void *B, int ldb, long long sb, float beta,
                          ab_dtype ct, void *C, int ldc, long long sc, int batch) {
    prof_state *st = st_of(be);
    const double t0 = ab_now();
    const int rc = st->inner->ops->gemm_batched(st->inner, ta, tb, M, N, K, alpha, at, A, lda, sa, bt, B, ldb, sb, beta,
                                                ct, C, ldc, sc, batch);
    return rc != 0 ? rc
                   : timed(st,
                           st->cost->ops->gemm_batched(st->cost, ta, tb, M, N, K, alpha, at, A, lda, sa, bt, B, ldb, sb,
                                                       beta, ct, C, ldc, sc, batch),
                           ab_now() - t0);
}
static int p_layernorm_forward(ab_backend *be, int R, int C, ab_dtype xt, const void *x, const float *gamma,
                               const float *beta, float eps, float *mean, float *rstd, ab_dtype yt, void *y) {
    prof_state *st = st_of(be);
    const double t0 = ab_now();
    const int rc = st->inner->ops->layernorm_forward(st->inner, R, C, xt, x, gamma, beta, eps, mean, rstd, yt, y);
    return rc != 0
               ? rc
               : timed(st, st->cost->ops->layernorm_forward(st->cost, R, C, xt, x, gamma, beta, eps, mean, rstd, yt, y),
                       ab_now() - t0);
}
static int p_layernorm_backward(ab_backend *be, int R, int C, ab_dtype xt, const void *x, ab_dtype yt, const void *dy,
                                const float *gamma, const float *mean, const float *rstd, float acc, float *dgamma,
                                float *dbeta, void *dx) {
    prof_state *st = st_of(be);
    const double t0 = ab_now();
    const int rc =
        st->inner->ops->layernorm_backward(st->inner, R, C, xt, x, yt, dy, gamma, mean, rstd, acc, dgamma, dbeta, dx);
    return rc != 0 ? rc
                   : timed(st,
                           st->cost->ops->layernorm_backward(st->cost, R, C, xt, x, yt, dy, gamma, mean, rstd, acc,
                                                             dgamma, dbeta, dx),
                           ab_now() - t0);
}
static int p_gelu_forward(ab_backend *be, size_t n, ab_dtype t, const void *x, void *y) {
    prof_state *st = st_of(be);
    const double t0 = ab_now();
    const int rc = st->inner->ops->gelu_forward(st->inner, n, t, x, y);
    return rc != 0 ? rc : timed(st, st->cost->ops->gelu_forward(st->cost, n, t, x, y), ab_now() - t0);
}
static int p_gelu_backward(ab_backend *be, size_t n, ab_dtype t, const void *x, const void *dy, void *dx) {
    prof_state *st = st_of(be);
    const double t0 = ab_now();
    const int rc = st->inner->ops->gelu_backward(st->inner, n, t, x, dy, dx);
    return rc != 0 ? rc : timed(st, st->cost->ops->gelu_backward(st->cost, n, t, x, dy, dx), ab_now() - t0);
}
static int p_tanh_forward(ab_backend *be, size_t n, ab_dtype t, const void *x, void *y) {
    prof_state *st = st_of(be);
    const double t0 = ab_now();
    const int rc = st->inner->ops->tanh_forward(st->inner, n, t, x, y);
    return rc != 0 ? rc : timed(st, st->cost->ops->tanh_forward(st->cost, n, t, x, y), ab_now() - t0);
}
static int p_tanh_backward(ab_backend *be, size_t n, ab_dtype t, const void *y, const void *dy, void *dx) {
    prof_state *st = st_of(be);
    const double t0 = ab_now();
    const int rc = st->inner->ops->tanh_backward(st->inner, n, t, y, dy, dx);
    return rc != 0 ? rc : timed(st, st->cost->ops->tanh_backward(st->cost, n, t, y, dy, dx), ab_now() - t0);
}
static int p_softmax_forward(ab_backend *be, int B, int heads, int L, ab_dtype t, float scale, const void *x,
                             const int32_t *mask, void *p) {
    prof_state *st = st_of(be);
    const double t0 = ab_now();
    const int rc = st->inner->ops->softmax_forward(st->inner, B, heads, L, t, scale, x, mask, p);
    return rc != 0
               ? rc
               : timed(st, st->cost->ops->softmax_forward(st->cost, B, heads, L, t, scale, x, mask, p), ab_now() - t0);
}
static int p_softmax_backward(ab_backend *be, int rows, int L, ab_dtype t, float scale, const void *p, const void *dp,
                              void *dx) {
    prof_state *st = st_of(be);
    const double t0 = ab_now();
    const int rc = st->inner->ops->softmax_backward(st->inner, rows, L, t, scale, p, dp, dx);
    return rc != 0 ? rc
                   : timed(st, st->cost->ops->softmax_backward(st->cost, rows, L, t, scale, p, dp, dx), ab_now() - t0);
}
static int p_dropout_forward(ab_backend *be, size_t n, ab_dtype t, float rate, uint64_t seed, const void *x, void *y) {
    prof_state *st = st_of(be);
    const double t0 = ab_now();
    const int rc = st->inner->ops->dropout_forward(st->inner, n, t, rate, seed, x, y);
    return rc != 0 ? rc : timed(st, st->cost->ops->dropout_forward(st->cost, n, t, rate, seed, x, y), ab_now() - t0);
}
static int p_dropout_backward(ab_backend *be, size_t n, ab_dtype t, float rate, uint64_t seed, const void *dy,
                              void *dx) {
    prof_state *st = st_of(be);
    const double t0 = ab_now();
    const int rc = st->inner->ops->dropout_backward(st->inner, n, t, rate, seed, dy, dx);
    return rc != 0 ? rc : timed(st, st->cost->ops->dropout_backward(st->cost, n, t, rate, seed, dy, dx), ab_now() - t0);
}
static int p_embedding_forward(ab_backend *be, int R, int L, int C, const int32_t *ids, const int32_t *types,
                               const float *word, int vocab, const float *pos, const float *type, int n_types,
                               float *y) {
    prof_state *st = st_of(be);
    const double t0 = ab_now();
    const int rc =
        st->inner->ops->embedding_forward(st->inner, R, L, C, ids, types, word, vocab, pos, type, n_types, y);
    return rc != 0 ? rc
                   : timed(st,
                           st->cost->ops->embedding_forward(st->cost, R, L, C, ids, types, word, vocab, pos, type,
                                                            n_types, y),
                           ab_now() - t0);
}
static int p_embedding_backward(ab_backend *be, int R, int L, int C, const int32_t *ids, const int32_t *types,
                                const float *dy, int vocab, int n_types, int acc, float *dword, float *dpos,
                                float *dtype) {
    prof_state *st = st_of(be);
    const double t0 = ab_now();
    const int rc =
        st->inner->ops->embedding_backward(st->inner, R, L, C, ids, types, dy, vocab, n_types, acc, dword, dpos, dtype);
    return rc != 0 ? rc
                   : timed(st,
                           st->cost->ops->embedding_backward(st->cost, R, L, C, ids, types, dy, vocab, n_types, acc,
                                                             dword, dpos, dtype),
                           ab_now() - t0);
}
static int p_gather_rows(ab_backend *be, int B, size_t row_bytes, const void *rows, const int32_t *idx, void *out) {
    prof_state *st = st_of(be);
    const double t0 = ab_now();
    const int rc = st->inner->ops->gather_rows(st->inner, B, row_bytes, rows, idx, out);
    return rc != 0 ? rc : timed(st, st->cost->ops->gather_rows(st->cost, B, row_bytes, rows, idx, out), ab_now() - t0);
}
static int p_sum_squares(ab_backend *be, size_t n, const float *x, float *out) {
    prof_state *st = st_of(be);
    const double t0 = ab_now();
    const int rc = st->inner->ops->sum_squares(st->inner, n, x, out);
    return rc != 0 ? rc : timed(st, st->cost->ops->sum_squares(st->cost, n, x, out), ab_now() - t0);
}
static int p_scale(ab_backend *be, size_t n, float *x, float s) {
    prof_state *st = st_of(be);
    const double t0 = ab_now();
    const int rc = st->inner->ops->scale(st->inner, n, x, s);
    return rc != 0 ? rc : timed(st, st->cost->ops->scale(st->cost, n, x, s), ab_now() - t0);
}
static int p_log2_hist(ab_backend *be, size_t n, ab_dtype t, const void *x, int log2_min, int nbins, int64_t *counts) {
    prof_state *st = st_of(be);
    const double t0 = ab_now();
    const int rc = st->inner->ops->log2_hist(st->inner, n, t, x, log2_min, nbins, counts);
    return rc != 0 ? rc
                   : timed(st, st->cost->ops->log2_hist(st->cost, n, t, x, log2_min, nbins, counts), ab_now() - t0);
}

/* ---- memory and the rest: forwarded, memory charged here too (the trainer reads this
 * backend's accounting and sets its cap here) ---- */

static void *p_alloc(ab_backend *be, ab_mem_category cat, size_t bytes) {
    if (ab_mem_admit(&be->mem, cat, bytes) != 0) return NULL;
    prof_state *st = st_of(be);
    void *p = st->inner->ops->alloc(st->inner, cat, bytes);
    if (p) ab_mem_charge(&be->mem, cat, bytes);
    return p;
}
static void p_release(ab_backend *be, ab_mem_category cat, void *p, size_t bytes) {
    if (!p) return;
    prof_state *st = st_of(be);
    st->inner->ops->release(st->inner, cat, p, bytes);
    ab_mem_release(&be->mem, cat, bytes);
}
static int p_upload(ab_backend *be, void *dst, const void *src, size_t bytes) {
    prof_state *st = st_of(be);
    return st->inner->ops->upload(st->inner, dst, src, bytes);
}
static int p_download(ab_backend *be, void *dst, const void *src, size_t bytes) {
    prof_state *st = st_of(be);
    const double t0 = ab_now();
    const int rc = st->inner->ops->download(st->inner, dst, src, bytes);
    return rc != 0 ? rc : timed(st, ab_cost_record(st->cost, "download", AB_OPC_SYNC, (double)bytes, 0), ab_now() - t0);
}
static int p_zero(ab_backend *be, void *p, size_t bytes) {
    prof_state *st = st_of(be);
    const double t0 = ab_now();
    const int rc = st->inner->ops->zero(st->inner, p, bytes);
    return rc != 0 ? rc : timed(st, st->cost->ops->zero(st->cost, p, bytes), ab_now() - t0);
}
static int p_sync(ab_backend *be) {
    prof_state *st = st_of(be);
    return st->inner->ops->sync(st->inner);
}
static void *p_stream(ab_backend *be) {
    prof_state *st = st_of(be);
    return st->inner->ops->stream(st->inner);
}
static int p_map_data(ab_backend *be, const void *host, size_t bytes, const void **mapped) {
    prof_state *st = st_of(be);
    return st->inner->ops->map_data(st->inner, host, bytes, mapped);
}
static void p_unmap_data(ab_backend *be, const void *mapped, size_t bytes) {
    prof_state *st = st_of(be);
    st->inner->ops->unmap_data(st->inner, mapped, bytes);
}
static int p_describe(ab_backend *be, ab_device_info *info) {
    prof_state *st = st_of(be);
    return st->inner->ops->describe(st->inner, info);
}
static void p_data_mark(ab_backend *be, int begin) {
    prof_state *st = st_of(be);
    st->inner->ops->data_mark(st->inner, begin);
}
static int p_data_time(ab_backend *be, double *seconds) {
    prof_state *st = st_of(be);
    return st->inner->ops->data_time(st->inner, seconds);
}

static void p_destroy(ab_backend *be) {
    if (!be) return;
    prof_state *st = st_of(be);
    if (st && st->report) {
        size_t n;
        const ab_op_cost *ops = ab_cost_ops(st->cost, &n);
        ab_prof_report(st->report, ops, n, st->inner);
    }
    if (st) {
        if (st->inner) st->inner->ops->destroy(st->inner);
        if (st->cost) st->cost->ops->destroy(st->cost);
        free(st);
    }
    free(be);
}

ab_backend *ab_backend_prof_create(ab_backend *inner) {
    if (!inner) return NULL;
    ab_backend *be = calloc(1, sizeof *be);
    prof_state *st = calloc(1, sizeof *st);
    ab_backend *cost = ab_backend_cost_create();
    if (!be || !st || !cost) {
        free(be);
        free(st);
        if (cost) cost->ops->destroy(cost);
        ab_errorf("out of host memory creating the profiling backend");
        return NULL;
    }
    st->inner = inner, st->cost = cost;
    ab_backend_ops *o = &st->ops;
    *o = *inner->ops; /* name, is_host; every entry is replaced below */
    o->destroy = p_destroy;
    o->alloc = p_alloc;
    o->release = p_release;
    o->upload = p_upload;
    o->download = p_download;
    o->zero = p_zero;
    o->sync = p_sync;
    o->stream = inner->ops->stream ? p_stream : NULL;
    o->map_data = p_map_data;
    o->unmap_data = p_unmap_data;
    o->describe = inner->ops->describe ? p_describe : NULL;
    o->data_mark = inner->ops->data_mark ? p_data_mark : NULL;
    o->data_time = inner->ops->data_time ? p_data_time : NULL;
    o->gemm = p_gemm;
    o->cast = p_cast;
    o->accumulate = p_accumulate;
    o->relu_forward = p_relu_forward;
    o->relu_backward = p_relu_backward;
    o->col_sum = p_col_sum;
    o->softmax_xent = p_softmax_xent;
    o->unscale_check = p_unscale_check;
    o->sgd_step = p_sgd_step;
    o->adamw_step = p_adamw_step;
    o->gather_normalize = p_gather_normalize;
    o->gather_images = p_gather_images;
    o->conv2d_forward = p_conv2d_forward;
    o->conv2d_backward_data = p_conv2d_backward_data;
    o->conv2d_backward_filter = p_conv2d_backward_filter;
    o->batchnorm_forward_train = p_batchnorm_forward_train;
    o->batchnorm_forward_eval = p_batchnorm_forward_eval;
    o->batchnorm_backward = p_batchnorm_backward;
    o->maxpool_forward = p_maxpool_forward;
    o->maxpool_backward = p_maxpool_backward;
    o->avgpool_forward = p_avgpool_forward;
    o->avgpool_backward = p_avgpool_backward;
    o->add = p_add;
    o->gemm_batched = p_gemm_batched;
    o->layernorm_forward = p_layernorm_forward;
    o->layernorm_backward = p_layernorm_backward;
    o->gelu_forward = p_gelu_forward;
    o->gelu_backward = p_gelu_backward;
    o->tanh_forward = p_tanh_forward;
    o->tanh_backward = p_tanh_backward;
    o->softmax_forward = p_softmax_forward;
    o->softmax_backward = p_softmax_backward;
    o->dropout_forward = p_dropout_forward;
    o->dropout_backward = p_dropout_backward;
    o->embedding_forward = p_embedding_forward;
    o->embedding_backward = p_embedding_backward;
    o->gather_rows = p_gather_rows;
    o->sum_squares = p_sum_squares;
    o->scale = p_scale;
    o->log2_hist = p_log2_hist;
    be->ops = o;
    be->impl = st;
    return be;
}

ab_backend *ab_backend_prof_inner(ab_backend *be) {
    return st_of(be)->inner;
}

const ab_op_cost *ab_prof_ops(ab_backend *be, size_t *n) {
    return ab_cost_ops(st_of(be)->cost, n);
}

void ab_prof_clear(ab_backend *be) {
    ab_cost_clear(st_of(be)->cost);
}

void ab_prof_report_at_destroy(ab_backend *be, FILE *f) {
    st_of(be)->report = f;
}

/* the kind an op's time is counted under */
static const char *kind_of(const char *op) {
    static const struct {
        const char *prefix, *kind;
    } kinds[] = {
        {"gemm", "GEMM (linear, attention products)"},
        {"conv2d", "convolution"},
        {"batchnorm", "normalisation (batch, layer)"},
        {"layernorm", "normalisation (batch, layer)"},
        {"softmax_xent", "loss (softmax cross-entropy)"},
        {"softmax", "attention softmax"},
        {"gelu", "activation (ReLU, GELU, tanh)"},
        {"relu", "activation (ReLU, GELU, tanh)"},
        {"tanh", "activation (ReLU, GELU, tanh)"},
        {"dropout", "dropout"},
        {"add", "residual add"},
        {"maxpool", "pooling"},
        {"avgpool", "pooling"},
        {"embedding", "embedding"},
        {"gather", "data (batch assembly)"},
        {"sgd", "optimizer, unscale, norm, clip"},
        {"adamw", "optimizer, unscale, norm, clip"},
        {"unscale", "optimizer, unscale, norm, clip"},
        {"sum_squares", "optimizer, unscale, norm, clip"},
        {"scale", "optimizer, unscale, norm, clip"},
        {"cast", "fp16/bf16 conversion, gradient folding"},
        {"accumulate", "fp16/bf16 conversion, gradient folding"},
        {"col_sum", "bias gradients (column sums)"},
        {"log2_hist", "gradient census"},
        {"zero", "zeroing"},
        {"download", "read-back of the step's scalars"},
    };
    for (size_t i = 0; i < sizeof kinds / sizeof kinds[0]; i++)
        if (strncmp(op, kinds[i].prefix, strlen(kinds[i].prefix)) == 0) return kinds[i].kind;
    return op;
}

/* one GEMM shape alone on the backend, dense operands of type t (best of 3, GFLOP/s; 0 when the
 * buffers cannot be had) */
static double shape_rate(ab_backend *inner, const ab_op_cost *g) {
    const size_t es = ab_dtype_size(g->dtype), z = (size_t)(g->batch > 0 ? g->batch : 1);
    const size_t na = (size_t)g->M * g->K * z, nb = (size_t)g->K * g->N * z, nc = (size_t)g->M * g->N * z;
    void *a = inner->ops->alloc(inner, AB_MEM_WORKSPACE, na * es),
         *b = inner->ops->alloc(inner, AB_MEM_WORKSPACE, nb * es);
    void *c = inner->ops->alloc(inner, AB_MEM_WORKSPACE, nc * es);
    double best = 0.0;
    const int lda = g->ta ? g->M : g->K, ldb = g->tb ? g->K : g->N;
    if (a && b && c && inner->ops->zero(inner, a, na * es) == 0 && inner->ops->zero(inner, b, nb * es) == 0)
        for (int r = 0; r < 3; r++) {
            const double t0 = ab_now();
            const int rc =
                g->batch > 1
                    ? inner->ops->gemm_batched(inner, g->ta, g->tb, g->M, g->N, g->K, 1.0f, g->dtype, a, lda,
                                               (long long)g->M * g->K, g->dtype, b, ldb, (long long)g->K * g->N, 0.0f,
                                               g->dtype, c, g->N, (long long)g->M * g->N, g->batch)
                    : inner->ops->gemm(inner, g->ta, g->tb, g->M, g->N, g->K, 1.0f, g->dtype, a, lda, g->dtype, b, ldb,
                                       NULL, AB_EPI_NONE, 0.0f, g->dtype, c, g->N);
            if (rc != 0 || inner->ops->sync(inner) != 0) break;
            const double rate = g->flops / (ab_now() - t0);
            if (rate > best) best = rate;
        }
    inner->ops->release(inner, AB_MEM_WORKSPACE, a, na * es);
    inner->ops->release(inner, AB_MEM_WORKSPACE, b, nb * es);
    inner->ops->release(inner, AB_MEM_WORKSPACE, c, nc * es);
    return best;
}

/* the backend's own fp32 GEMM at 2048^3 (best of 3): the rate its products could reach here */
static double gemm_reference(ab_backend *inner) {
    enum { S = 2048 };
    const ab_op_cost g = {
        .dtype = AB_F32, .M = S, .N = S, .K = S, .batch = 1, .tb = 1, .flops = 2.0 * S * S * (double)S};
    return shape_rate(inner, &g);
}

/* the GEMM shapes that took the most time: in the run, and alone (the practical peak at the
 * workload's own shapes) */
static void top_shapes(FILE *f, const ab_op_cost *ops, size_t n, ab_backend *inner) {
    enum { TOP = 4, MAXS = 256 };
    ab_op_cost agg[MAXS];
    size_t na = 0;
    for (size_t i = 0; i < n; i++) {
        const ab_op_cost *o = &ops[i];
        if (o->cls != AB_OPC_MATMUL || o->M <= 0) continue;
        size_t j = 0;
        while (j < na && !(agg[j].M == o->M && agg[j].N == o->N && agg[j].K == o->K && agg[j].batch == o->batch &&
                           agg[j].ta == o->ta && agg[j].tb == o->tb && agg[j].dtype == o->dtype))
            j++;
        if (j == na) {
            if (na == MAXS) continue;
            agg[na] = *o;
            agg[na].time_s = 0.0;
            agg[na].kernels = 0; /* calls */
            na++;
        }
        agg[j].time_s += o->time_s;
        agg[j].kernels++;
    }
    for (size_t i = 1; i < na; i++)
        for (size_t j = i; j > 0 && agg[j].time_s > agg[j - 1].time_s; j--) {
            const ab_op_cost t = agg[j];
            agg[j] = agg[j - 1];
            agg[j - 1] = t;
        }
    if (na)
        fprintf(f, "  the GEMM shapes that took the most time, in the run and alone on this backend (best of 3):\n");
    for (size_t j = 0; j < na && j < TOP; j++) {
        const ab_op_cost *g = &agg[j];
        const double run = g->time_s > 0 ? g->flops * g->kernels / g->time_s : 0.0;
        const double alone = inner->ops->is_host ? shape_rate(inner, g) : 0.0;
        char dims[64];
        if (g->batch > 1)
            snprintf(dims, sizeof dims, "%d x (%d x %d x %d)", g->batch, g->M, g->N, g->K);
        else
            snprintf(dims, sizeof dims, "%d x %d x %d", g->M, g->N, g->K);
        fprintf(f, "    %-7s %-24s %s%s %-4s: %6d calls, %7.1f GFLOP/s in the run, %7.1f alone\n",
                g->batch > 1 ? "batched" : "gemm", dims, g->ta ? "T" : "N", g->tb ? "T" : "N", ab_dtype_name(g->dtype),
                g->kernels, run / 1e9, alone / 1e9);
    }
}

void ab_prof_report(FILE *f, const ab_op_cost *ops, size_t n, ab_backend *inner) {
    typedef struct {
        const char *kind;
        long calls;
        double time, flops, bytes;
    } row;
    row rows[32];
    size_t nr = 0;
    double total = 0.0, flops = 0.0;
    for (size_t i = 0; i < n; i++) {
        const char *k = kind_of(ops[i].op);
        size_t j = 0;
        while (j < nr && strcmp(rows[j].kind, k) != 0) j++;
        if (j == nr) {
            if (nr == sizeof rows / sizeof rows[0]) continue;
            rows[nr++] = (row){.kind = k};
        }
        rows[j].calls++;
        rows[j].time += ops[i].time_s;
        rows[j].flops += ops[i].flops;
        rows[j].bytes += ops[i].bytes;
        total += ops[i].time_s;
        flops += ops[i].flops;
    }
    for (size_t i = 1; i < nr; i++) /* by time, largest first */
        for (size_t j = i; j > 0 && rows[j].time > rows[j - 1].time; j--) {
            const row t = rows[j];
            rows[j] = rows[j - 1];
            rows[j - 1] = t;
        }
    fprintf(f, "profile: every op the run issued (training and evaluation), its wall time on the %s backend\n",
            inner->ops->name);
    fprintf(f, "  %-42s %8s %10s %7s %10s %9s %9s %8s\n", "op kind", "calls", "seconds", "share", "GFLOP", "GFLOP/s",
            "GB", "GB/s");
    for (size_t j = 0; j < nr; j++) {
        const row *r = &rows[j];
        char fl[32] = "-", rate[32] = "-";
        if (r->flops > 0) {
            snprintf(fl, sizeof fl, "%.2f", r->flops / 1e9);
            if (r->time > 0) snprintf(rate, sizeof rate, "%.1f", r->flops / r->time / 1e9);
        }
        fprintf(f, "  %-42s %8ld %10.4f %6.1f%% %10s %9s %9.3f %8.2f\n", r->kind, r->calls, r->time,
                total > 0 ? 100.0 * r->time / total : 0.0, fl, rate, r->bytes / 1e9,
                r->time > 0 ? r->bytes / r->time / 1e9 : 0.0);
    }
    top_shapes(f, ops, n, inner);
    const double peak = inner->ops->is_host ? gemm_reference(inner) : 0.0;
    fprintf(f, "  all ops: %.4f s, %.2f GFLOP, %.1f GFLOP/s over the ops' time", total, flops / 1e9,
            total > 0 ? flops / total / 1e9 : 0.0);
    if (peak > 0)
        fprintf(f, "; this backend's fp32 GEMM at 2048^3: %.1f GFLOP/s (best of 3): the ops reached %.0f%% of it\n",
                peak / 1e9, total > 0 ? 100.0 * flops / total / peak : 0.0);
    else
        fprintf(f, "\n");
}
