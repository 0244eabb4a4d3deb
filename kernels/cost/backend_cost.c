/* The counting backend (backend_cost.h). Each op records what a GPU kernel doing it must at least
 * do: a matrix product 2 M N K operations and its operands read once and its result written once;
 * any other op its inputs read and its outputs written once (a kernel that reads an input twice,
 * as batch and layer normalisation's statistics then their output, is counted so). Kernel counts
 * are the CUDA backend's launches for the op. */
#include "backend_cost.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    ab_op_cost *ops;
    size_t n, cap;
    const char *phase;
    uintptr_t next; /* the next address handed out: never read, only told apart */
} cost_state;

static cost_state *st_of(const ab_backend *be) { return (cost_state *)be->impl; }

static double es(ab_dtype t) { return (double)ab_dtype_size(t); }

static int record(ab_backend *be, const char *op, ab_op_class cls, ab_dtype t, double flops, double bytes,
                  double tiles, int kernels) {
    cost_state *st = st_of(be);
    if (st->n == st->cap) {
        const size_t cap = st->cap ? 2 * st->cap : 1024;
        ab_op_cost *p = realloc(st->ops, cap * sizeof *p);
        if (!p) return ab_errorf("out of host memory recording %zu ops", st->n);
        st->ops = p;
        st->cap = cap;
    }
    st->ops[st->n++] = (ab_op_cost){.op = op, .phase = st->phase, .cls = cls, .dtype = t, .flops = flops,
                                    .bytes = bytes, .tiles = tiles, .kernels = kernels};
    return 0;
}
/* the last recorded product's shape */
static int shape(ab_backend *be, int M, int N, int K, int batch, int ta, int tb) {
    cost_state *st = st_of(be);
    ab_op_cost *op = &st->ops[st->n - 1];
    op->M = M, op->N = N, op->K = K, op->batch = batch, op->ta = ta != 0, op->tb = tb != 0;
    return 0;
}
static int mem_op(ab_backend *be, const char *op, double bytes, int kernels) {
    return record(be, op, AB_OPC_MEMORY, AB_F32, 0.0, bytes, 0.0, kernels);
}
/* A product's parallel work: output tiles of 128 x 128, and its reduction split in chunks of 4,096
 * (as split-K and stream-K kernels split a long one: a weight gradient's reduction over every
 * position of the batch fills a GPU that its few output tiles would not) */
static double tiles_of(double M, double N, double K, double batch) {
    return ceil(M / 128.0) * ceil(N / 128.0) * ceil(K / 4096.0) * batch;
}
/* the input type a product runs at: mixed operands are widened to fp32 (as the CUDA backend does) */
static ab_dtype product_type(ab_dtype at, ab_dtype bt) { return at == bt ? at : AB_F32; }

/* ---- memory: charged as a GPU's, never touched ---- */

static void *cost_alloc(ab_backend *be, ab_mem_category cat, size_t bytes) {
    if (ab_mem_admit(&be->mem, cat, bytes) != 0) return NULL;
    cost_state *st = st_of(be);
    void *p = (void *)st->next;
    st->next += (bytes + 255) & ~(uintptr_t)255;
    if (!bytes) st->next += 256;
    ab_mem_charge(&be->mem, cat, bytes);
    return p;
}
static void cost_release(ab_backend *be, ab_mem_category cat, void *p, size_t bytes) {
    if (p) ab_mem_release(&be->mem, cat, bytes);
}
static int cost_upload(ab_backend *be, void *dst, const void *src, size_t bytes) {
    (void)be, (void)dst, (void)src, (void)bytes;
    return 0;
}
static int cost_download(ab_backend *be, void *dst, const void *src, size_t bytes) {
    (void)src;
    memset(dst, 0, bytes);
    return record(be, "download", AB_OPC_SYNC, AB_F32, 0.0, (double)bytes, 0.0, 0);
}
static int cost_zero(ab_backend *be, void *p, size_t bytes) {
    (void)p;
    return mem_op(be, "zero", (double)bytes, 1);
}
static int cost_sync(ab_backend *be) {
    (void)be;
    return 0;
}
static int cost_map_data(ab_backend *be, const void *host, size_t bytes, const void **mapped) {
    (void)be, (void)bytes;
    *mapped = host;
    return 0;
}
static void cost_unmap_data(ab_backend *be, const void *mapped, size_t bytes) { (void)be, (void)mapped, (void)bytes; }

/* ---- matrix products ---- */

static int ab_cost_gemm(ab_backend *be, int ta, int tb, int M, int N, int K, float alpha, ab_dtype at, const void *A,
                        int lda, ab_dtype bt, const void *B, int ldb, const void *bias, ab_epilogue epi, float beta,
                        ab_dtype ct, void *C, int ldc) {
    (void)alpha, (void)A, (void)lda, (void)B, (void)ldb, (void)epi, (void)C, (void)ldc;
    const double m = M, n = N, k = K;
    const double bytes = m * k * es(at) + k * n * es(bt) + m * n * es(ct) * (beta != 0.0f ? 2.0 : 1.0) +
                         (bias ? n * es(bt) : 0.0);
    AB_TRY(record(be, "gemm", AB_OPC_MATMUL, product_type(at, bt), 2.0 * m * n * k, bytes, tiles_of(m, n, k, 1.0), 1));
    return shape(be, M, N, K, 1, ta, tb);
}
static int ab_cost_gemm_batched(ab_backend *be, int ta, int tb, int M, int N, int K, float alpha, ab_dtype at,
                                const void *A, int lda, long long sa, ab_dtype bt, const void *B, int ldb, long long sb,
                                float beta, ab_dtype ct, void *C, int ldc, long long sc, int batch) {
    (void)alpha, (void)A, (void)lda, (void)sa, (void)B, (void)ldb, (void)sb, (void)C, (void)ldc, (void)sc;
    const double m = M, n = N, k = K, z = batch;
    const double bytes = z * (m * k * es(at) + k * n * es(bt) + m * n * es(ct) * (beta != 0.0f ? 2.0 : 1.0));
    AB_TRY(record(be, "gemm_batched", AB_OPC_MATMUL, product_type(at, bt), 2.0 * m * n * k * z, bytes,
                  tiles_of(m, n, k, z), 1));
    return shape(be, M, N, K, batch, ta, tb);
}

/* ---- convolutions: implicit GEMMs of (N P Q) x K x (R S C) ---- */

static double conv_flops(const ab_conv_shape *s) {
    return 2.0 * s->N * (double)s->P * s->Q * s->K * (double)s->R * s->S * s->C;
}
static double conv_x(const ab_conv_shape *s) { return (double)s->N * s->H * s->W * s->C; }
static double conv_y(const ab_conv_shape *s) { return (double)s->N * s->P * s->Q * s->K; }
static double conv_w(const ab_conv_shape *s) { return (double)s->K * s->R * s->S * s->C; }

static int ab_cost_conv2d_forward(ab_backend *be, const ab_conv_shape *s, ab_dtype t, const void *x, const void *w,
                                  void *y) {
    (void)x, (void)w, (void)y;
    return record(be, "conv2d_forward", AB_OPC_MATMUL, t, conv_flops(s), (conv_x(s) + conv_w(s) + conv_y(s)) * es(t),
                  tiles_of((double)s->N * s->P * s->Q, s->K, (double)s->R * s->S * s->C, 1.0), 1);
}
static int ab_cost_conv2d_backward_data(ab_backend *be, const ab_conv_shape *s, ab_dtype t, const void *dy,
                                        const void *w, void *dx) {
    (void)dy, (void)w, (void)dx;
    return record(be, "conv2d_backward_data", AB_OPC_MATMUL, t, conv_flops(s),
                  (conv_y(s) + conv_w(s) + conv_x(s)) * es(t),
                  tiles_of((double)s->N * s->H * s->W, s->C, (double)s->R * s->S * s->K, 1.0), 1);
}
static int ab_cost_conv2d_backward_filter(ab_backend *be, const ab_conv_shape *s, ab_dtype t, const void *x,
                                          const void *dy, float beta, void *dw) {
    (void)x, (void)dy, (void)dw;
    return record(be, "conv2d_backward_filter", AB_OPC_MATMUL, t, conv_flops(s),
                  (conv_x(s) + conv_y(s) + conv_w(s) * (beta != 0.0f ? 2.0 : 1.0)) * es(t),
                  tiles_of(s->K, (double)s->R * s->S * s->C, (double)s->N * s->P * s->Q, 1.0), 1);
}

/* ---- a weight gradient folded: a GPU's product into ws, then the fold (two records, as the two
 * kernels it runs; the profiling backend gives the measured time to the first) ---- */

static int ab_cost_accumulate(ab_backend *be, size_t n, ab_dtype st, const void *src, float *dst, int acc,
                              int32_t *found_inf);

static int ab_cost_gemm_fold(ab_backend *be, int ta, int tb, int M, int N, int K, ab_dtype at, const void *A, int lda,
                             ab_dtype bt, const void *B, int ldb, ab_dtype ct, void *ws, float *G, int accumulate,
                             int32_t *found_inf) {
    AB_TRY(ab_cost_gemm(be, ta, tb, M, N, K, 1.0f, at, A, lda, bt, B, ldb, NULL, AB_EPI_NONE, 0.0f, ct, ws, N));
    return ab_cost_accumulate(be, (size_t)M * N, ct, ws, G, accumulate, found_inf);
}
static int ab_cost_conv2d_backward_filter_fold(ab_backend *be, const ab_conv_shape *s, ab_dtype t, const void *x,
                                               const void *dy, void *ws, float *dw, int accumulate,
                                               int32_t *found_inf) {
    AB_TRY(ab_cost_conv2d_backward_filter(be, s, t, x, dy, 0.0f, ws));
    return ab_cost_accumulate(be, (size_t)conv_w(s), t, ws, dw, accumulate, found_inf);
}

/* ---- element-wise and reductions: bytes in and out ---- */

static int ab_cost_cast(ab_backend *be, size_t n, ab_dtype st, const void *src, ab_dtype dt, void *dst) {
    (void)src, (void)dst;
    return mem_op(be, "cast", (double)n * (es(st) + es(dt)), 1);
}
/* the check (found_inf) is the values the kernel stores, tested in its registers: no bytes more */
static int ab_cost_accumulate(ab_backend *be, size_t n, ab_dtype st, const void *src, float *dst, int acc,
                              int32_t *found_inf) {
    (void)src, (void)dst, (void)found_inf;
    return mem_op(be, "accumulate", (double)n * (es(st) + 4.0 * (acc ? 2.0 : 1.0)), 1);
}
static int ab_cost_relu_forward(ab_backend *be, size_t n, ab_dtype t, const void *x, void *y) {
    (void)x, (void)y;
    return mem_op(be, "relu_forward", 2.0 * (double)n * es(t), 1);
}
static int ab_cost_relu_backward(ab_backend *be, size_t n, ab_dtype t, const void *y, const void *dy, void *dx) {
    (void)y, (void)dy, (void)dx;
    return mem_op(be, "relu_backward", 3.0 * (double)n * es(t), 1);
}
static int ab_cost_col_sum(ab_backend *be, int M, int N, ab_dtype xt, const void *X, float beta, ab_dtype ot,
                           void *out) {
    (void)X, (void)out;
    return mem_op(be, "col_sum", (double)M * N * es(xt) + (double)N * es(ot) * (beta != 0.0f ? 2.0 : 1.0), 1);
}
static int ab_cost_softmax_xent(ab_backend *be, int B, int C, ab_dtype lt, const void *logits, const int32_t *labels,
                                float gs, ab_dtype dt, void *dlogits, float *loss_sum, int32_t *correct) {
    (void)logits, (void)labels, (void)gs, (void)loss_sum, (void)correct;
    return mem_op(be, "softmax_xent", (double)B * C * (es(lt) + (dlogits ? es(dt) : 0.0)) + 4.0 * B, 1);
}
/* at factor 1 the check alone: it reads; the squares ride in the same pass (a second kernel adds
 * the block sums, as sum_squares's) */
static int ab_cost_unscale_check(ab_backend *be, size_t n, float *g, float inv, int32_t *found_inf, float *sum_sq) {
    (void)g, (void)found_inf;
    return mem_op(be, "unscale_check", (inv == 1.0f ? 4.0 : 8.0) * (double)n, sum_sq ? 2 : 1);
}
/* the optimizers: with a working copy, its stores too */
static int ab_cost_sgd_step(ab_backend *be, size_t n, float *w, const float *g, float *buf, float lr, float momentum,
                            float wd, int first, float gs, ab_dtype ct, void *wc) {
    (void)w, (void)g, (void)lr, (void)momentum, (void)wd, (void)first, (void)gs;
    return mem_op(be, "sgd_step", (double)n * (4.0 * (buf ? 5.0 : 3.0) + (wc ? es(ct) : 0.0)), 1);
}
static int ab_cost_adamw_step(ab_backend *be, size_t n, float *w, const float *g, float *m, float *v, float lr,
                              float b1, float b2, float eps, float wd, int step, float gs, ab_dtype ct, void *wc) {
    (void)w, (void)g, (void)m, (void)v, (void)lr, (void)b1, (void)b2, (void)eps, (void)wd, (void)step, (void)gs;
    return mem_op(be, "adamw_step", (double)n * (4.0 * 7.0 + (wc ? es(ct) : 0.0)), 1);
}
static int ab_cost_gather_normalize(ab_backend *be, int B, int D, const uint8_t *data, const uint8_t *labels,
                                    const int32_t *idx, float mean, float std, ab_dtype ot, void *out, int32_t *lo) {
    (void)data, (void)labels, (void)idx, (void)mean, (void)std, (void)out, (void)lo;
    return mem_op(be, "gather_normalize", (double)B * D * (1.0 + es(ot)), 1);
}
static int ab_cost_gather_images(ab_backend *be, int B, const ab_image_layout *L, const ab_image_aug *aug,
                                 const uint8_t *data, const uint8_t *labels, const int32_t *idx, ab_dtype ot, void *out,
                                 int32_t *lo) {
    (void)aug, (void)data, (void)labels, (void)idx, (void)out, (void)lo;
    return mem_op(be, "gather_images", (double)B * L->C * L->H * L->W * (1.0 + es(ot)), 1);
}
static int ab_cost_batchnorm_forward_train(ab_backend *be, int M, int C, ab_dtype t, const void *x, const float *gamma,
                                           const float *beta, float eps, float momentum, float *rm, float *rv,
                                           float *sm, float *si, int relu, void *y) {
    (void)x, (void)gamma, (void)beta, (void)eps, (void)momentum, (void)rm, (void)rv, (void)sm, (void)si, (void)relu,
        (void)y;
    return mem_op(be, "batchnorm_forward_train", 3.0 * (double)M * C * es(t), 2); /* statistics, then y */
}
static int ab_cost_batchnorm_forward_eval(ab_backend *be, int M, int C, ab_dtype t, const void *x, const float *gamma,
                                          const float *beta, const float *rm, const float *rv, float eps, int relu,
                                          void *y) {
    (void)x, (void)gamma, (void)beta, (void)rm, (void)rv, (void)eps, (void)relu, (void)y;
    return mem_op(be, "batchnorm_forward_eval", 2.0 * (double)M * C * es(t), 1);
}
static int ab_cost_batchnorm_backward(ab_backend *be, int M, int C, ab_dtype t, const void *x, const void *dy,
                                      const float *gamma, const float *sm, const float *si, float acc, float *dg,
                                      float *db, void *dx) {
    (void)x, (void)dy, (void)gamma, (void)sm, (void)si, (void)acc, (void)dg, (void)db, (void)dx;
    return mem_op(be, "batchnorm_backward", 5.0 * (double)M * C * es(t), 2); /* sums, then dx */
}
static int ab_cost_maxpool_forward(ab_backend *be, const ab_pool_shape *s, ab_dtype t, const void *x, void *y) {
    (void)x, (void)y;
    return mem_op(be, "maxpool_forward", ((double)s->N * s->H * s->W * s->C + (double)s->N * s->P * s->Q * s->C) * es(t),
                  1);
}
static int ab_cost_maxpool_backward(ab_backend *be, const ab_pool_shape *s, ab_dtype t, const void *x, const void *y,
                                    const void *dy, void *dx) {
    (void)x, (void)y, (void)dy, (void)dx;
    return mem_op(be, "maxpool_backward",
                  (2.0 * s->N * s->H * s->W * s->C + 2.0 * s->N * s->P * s->Q * s->C) * es(t), 1);
}
static int ab_cost_avgpool_forward(ab_backend *be, int N, int HW, int C, ab_dtype t, const void *x, void *y) {
    (void)x, (void)y;
    return mem_op(be, "avgpool_forward", ((double)N * HW * C + (double)N * C) * es(t), 1);
}
static int ab_cost_avgpool_backward(ab_backend *be, int N, int HW, int C, ab_dtype t, const void *dy, void *dx) {
    (void)dy, (void)dx;
    return mem_op(be, "avgpool_backward", ((double)N * HW * C + (double)N * C) * es(t), 1);
}
static int ab_cost_add(ab_backend *be, size_t n, ab_dtype t, const void *a, const void *b, int relu, void *y) {
    (void)a, (void)b, (void)relu, (void)y;
    return mem_op(be, "add", 3.0 * (double)n * es(t), 1);
}
static int ab_cost_layernorm_forward(ab_backend *be, int R, int C, ab_dtype xt, const void *x, const float *gamma,
                                     const float *beta, float eps, float *mean, float *rstd, ab_dtype yt, void *y) {
    (void)x, (void)gamma, (void)beta, (void)eps, (void)mean, (void)rstd, (void)y;
    return mem_op(be, "layernorm_forward", (double)R * C * (2.0 * es(xt) + es(yt)), 1);
}
static int ab_cost_layernorm_backward(ab_backend *be, int R, int C, ab_dtype xt, const void *x, ab_dtype yt,
                                      const void *dy, const float *gamma, const float *mean, const float *rstd,
                                      float acc, float *dg, float *db, void *dx) {
    (void)x, (void)dy, (void)gamma, (void)mean, (void)rstd, (void)acc, (void)dg, (void)db, (void)dx;
    /* the parameters' sums read x and dy; dx reads them again and writes dx */
    return mem_op(be, "layernorm_backward", (double)R * C * (3.0 * es(xt) + 2.0 * es(yt)), 2);
}
static int ab_cost_gelu_forward(ab_backend *be, size_t n, ab_dtype t, const void *x, void *y) {
    (void)x, (void)y;
    return mem_op(be, "gelu_forward", 2.0 * (double)n * es(t), 1);
}
static int ab_cost_gelu_backward(ab_backend *be, size_t n, ab_dtype t, const void *x, const void *dy, void *dx) {
    (void)x, (void)dy, (void)dx;
    return mem_op(be, "gelu_backward", 3.0 * (double)n * es(t), 1);
}
static int ab_cost_tanh_forward(ab_backend *be, size_t n, ab_dtype t, const void *x, void *y) {
    (void)x, (void)y;
    return mem_op(be, "tanh_forward", 2.0 * (double)n * es(t), 1);
}
static int ab_cost_tanh_backward(ab_backend *be, size_t n, ab_dtype t, const void *y, const void *dy, void *dx) {
    (void)y, (void)dy, (void)dx;
    return mem_op(be, "tanh_backward", 3.0 * (double)n * es(t), 1);
}
static int ab_cost_softmax_forward(ab_backend *be, int B, int heads, int L, ab_dtype t, float scale, const void *x,
                                   const int32_t *mask, void *p) {
    (void)scale, (void)x, (void)mask, (void)p;
    return mem_op(be, "softmax_forward", 2.0 * (double)B * heads * L * L * es(t) + 4.0 * B * L, 1);
}
static int ab_cost_softmax_backward(ab_backend *be, int rows, int L, ab_dtype t, float scale, const void *p,
                                    const void *dp, void *dx) {
    (void)scale, (void)p, (void)dp, (void)dx;
    return mem_op(be, "softmax_backward", 3.0 * (double)rows * L * es(t), 1);
}
static int ab_cost_dropout_forward(ab_backend *be, size_t n, ab_dtype t, float rate, uint64_t seed, const void *x,
                                   void *y) {
    (void)rate, (void)seed, (void)x, (void)y;
    return mem_op(be, "dropout_forward", 2.0 * (double)n * es(t), 1);
}
static int ab_cost_dropout_backward(ab_backend *be, size_t n, ab_dtype t, float rate, uint64_t seed, const void *dy,
                                    void *dx) {
    (void)rate, (void)seed, (void)dy, (void)dx;
    return mem_op(be, "dropout_backward", 2.0 * (double)n * es(t), 1);
}
static int ab_cost_embedding_forward(ab_backend *be, int R, int L, int C, const int32_t *ids, const int32_t *types,
                                     const float *word, int vocab, const float *pos, const float *type, int n_types,
                                     float *y) {
    (void)L, (void)ids, (void)types, (void)word, (void)vocab, (void)pos, (void)type, (void)n_types, (void)y;
    return mem_op(be, "embedding_forward", 4.0 * (double)R * C * 4.0 + 8.0 * R, 1); /* 3 table rows in, y out */
}
static int ab_cost_embedding_backward(ab_backend *be, int R, int L, int C, const int32_t *ids, const int32_t *types,
                                      const float *dy, int vocab, int n_types, int acc, float *dword, float *dpos,
                                      float *dtype) {
    (void)ids, (void)types, (void)dy, (void)dword, (void)dpos, (void)dtype;
    /* dy read by each table's kernel, each touched row read and written; the word table is a
     * scatter into its rows; without acc the three tables are first cleared (memsets over them) */
    const double rows = (double)R * C * 4.0;
    const double tables = ((double)vocab + L + n_types) * C * 4.0;
    const double bytes = 3.0 * rows + 2.0 * rows + 2.0 * ((double)L + n_types) * C * 4.0 + 8.0 * R + (acc ? 0.0 : tables);
    return mem_op(be, "embedding_backward", bytes, (n_types > 0 ? 3 : 2) + (acc ? 0 : 3));
}
static int ab_cost_gather_rows(ab_backend *be, int B, size_t row_bytes, const void *rows, const int32_t *idx,
                               void *out) {
    (void)rows, (void)idx, (void)out;
    return mem_op(be, "gather_rows", 2.0 * (double)B * (double)row_bytes, 1);
}
static int ab_cost_sum_squares(ab_backend *be, size_t n, const float *x, float *out) {
    (void)x, (void)out;
    return mem_op(be, "sum_squares", 4.0 * (double)n, 2);
}
static int ab_cost_scale(ab_backend *be, size_t n, float *x, float s) {
    (void)x, (void)s;
    return mem_op(be, "scale", 8.0 * (double)n, 1);
}
static int ab_cost_log2_hist(ab_backend *be, size_t n, ab_dtype t, const void *x, int lo, int nb, int64_t *counts) {
    (void)x, (void)lo, (void)nb, (void)counts;
    return mem_op(be, "log2_hist", (double)n * es(t), 1);
}
static int cost_describe(ab_backend *be, ab_device_info *info) {
    (void)be;
    memset(info, 0, sizeof *info);
    snprintf(info->name, sizeof info->name, "%s", "counting backend (runs nothing)");
    return 0;
}

static void cost_destroy(ab_backend *be) {
    if (!be) return;
    cost_state *st = st_of(be);
    if (st) free(st->ops);
    free(st);
    free(be);
}

static const ab_backend_ops cost_ops = {
    .name = "cost",
    .is_host = 0,
    .destroy = cost_destroy,
    .alloc = cost_alloc,
    .release = cost_release,
    .upload = cost_upload,
    .download = cost_download,
    .zero = cost_zero,
    .sync = cost_sync,
    .map_data = cost_map_data,
    .unmap_data = cost_unmap_data,
#define AB_OP(name, params, args) .name = ab_cost_##name,
#include "backend_ops.def"
    .describe = cost_describe,
};

ab_backend *ab_backend_cost_create(void) {
    ab_backend *be = calloc(1, sizeof *be);
    cost_state *st = calloc(1, sizeof *st);
    if (!be || !st) {
        free(be);
        free(st);
        ab_errorf("out of host memory creating the counting backend");
        return NULL;
    }
    st->next = (uintptr_t)1 << 40; /* far from anything the host maps */
    st->phase = "step";
    be->ops = &cost_ops;
    be->impl = st;
    return be;
}

void ab_cost_phase(ab_backend *be, const char *phase) { st_of(be)->phase = phase; }

const ab_op_cost *ab_cost_ops(const ab_backend *be, size_t *n) {
    *n = st_of(be)->n;
    return st_of(be)->ops;
}

void ab_cost_clear(ab_backend *be) { st_of(be)->n = 0; }

size_t ab_cost_count(const ab_backend *be) { return st_of(be)->n; }

ab_op_cost *ab_cost_at(ab_backend *be, size_t n0) {
    cost_state *st = st_of(be);
    return n0 < st->n ? &st->ops[n0] : NULL;
}

void ab_cost_merge_since(ab_backend *be, size_t n0) {
    cost_state *st = st_of(be);
    if (n0 + 1 >= st->n) return;
    ab_op_cost *first = &st->ops[n0];
    for (size_t i = n0 + 1; i < st->n; i++) {
        first->flops += st->ops[i].flops;
        first->bytes += st->ops[i].bytes;
        first->kernels += st->ops[i].kernels;
    }
    st->n = n0 + 1;
}

int ab_cost_record(ab_backend *be, const char *op, ab_op_class cls, double bytes, int kernels) {
    return record(be, op, cls, AB_F32, 0.0, bytes, 0.0, kernels);
}

