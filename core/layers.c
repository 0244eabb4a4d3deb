/* Linear, convolution and batch-norm layers over the backend's ops and the parameter buffers. */
#include "layers.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

void ab_linear_specs(ab_param_spec *w, ab_param_spec *b, const char *wname, const char *bname, int in, int out) {
    *w = (ab_param_spec){.name = wname, .ndim = 2, .shape = {out, in}, .init = AB_INIT_UNIFORM_FAN_IN, .fan_in = in};
    *b = (ab_param_spec){.name = bname, .ndim = 1, .shape = {out}, .init = AB_INIT_UNIFORM_FAN_IN, .fan_in = in,
                         .no_decay = 1};
}

void ab_linear_bind(ab_linear *l, const ab_param_spec *w, const ab_param_spec *b) {
    l->in = w->shape[1];
    l->out = w->shape[0];
    l->w = w;
    l->b = b;
}


int ab_linear_forward(const ab_params *p, const ab_linear *l, int B, const void *x, void *y, ab_epilogue epi) {
    const ab_dtype t = p->compute_type;
    return p->be->ops->gemm(p->be, 0, 1, B, l->out, l->in, 1.0f, t, x, l->in, t, ab_param_weight(p, l->w), l->in,
                            ab_param_weight(p, l->b), epi, 0.0f, t, y, l->out);
}

int ab_linear_backward(const ab_params *p, const ab_grad_sink *g, const ab_linear *l, int B, const void *x, const void *dy, void *dx) {
    const ab_dtype t = p->compute_type;
    const ab_backend_ops *ops = p->be->ops;
    AB_TRY(ab_grad_observe(g, l->w, t, (size_t)B * l->out, dy));
    /* d_weight (out, in) = dy^T (out, B) @ x (B, in); under amp/bf16 rounded to the compute type and
     * folded into the fp32 gradient by the product itself (the scratch is the backend's to use) */
    if (ab_param_via_scratch(p, l->w)) {
        AB_TRY(ops->gemm_fold(p->be, 1, 0, l->out, l->in, B, t, dy, l->out, t, x, l->in, t, p->compute_grad,
                              p->grad + l->w->offset, g->mode == AB_GRAD_ACCUMULATE, g->found_inf));
        AB_TRY(ab_grad_folded(p, g, l->w));
    } else {
        AB_TRY(ops->gemm(p->be, 1, 0, l->out, l->in, B, 1.0f, t, dy, l->out, t, x, l->in, NULL, AB_EPI_NONE,
                         ab_param_grad_beta(p, g, l->w), t, ab_param_grad_at(p, l->w), l->in));
        AB_TRY(ab_param_grad_done(p, g, l->w));
    }
    /* d_bias (out) = sum over the batch of dy */
    AB_TRY(ops->col_sum(p->be, B, l->out, t, dy, ab_param_grad_beta(p, g, l->b), t, ab_param_grad_at(p, l->b)));
    AB_TRY(ab_param_grad_done(p, g, l->b));
    /* dx (B, in) = dy (B, out) @ W (out, in) */
    if (dx)
        AB_TRY(ops->gemm(p->be, 0, 0, B, l->in, l->out, 1.0f, t, dy, l->out, t, ab_param_weight(p, l->w), l->in, NULL,
                         AB_EPI_NONE, 0.0f, t, dx, l->in));
    return 0;
}

int ab_linear_column_parallel(ab_param_spec *w, ab_param_spec *b, const ab_tp *tp) {
    AB_TRY(ab_spec_split(w, 0, ab_tp_size(tp), ab_tp_rank(tp)));
    return ab_spec_split(b, 0, ab_tp_size(tp), ab_tp_rank(tp));
}

int ab_linear_row_parallel(ab_param_spec *w, const ab_tp *tp) {
    return ab_spec_split(w, 1, ab_tp_size(tp), ab_tp_rank(tp));
}

int ab_linear_row_forward(const ab_params *p, const ab_linear *l, ab_tp *tp, int B, const void *x, void *y,
                          const void *ones) {
    if (ab_tp_size(tp) == 1) return ab_linear_forward(p, l, B, x, y, AB_EPI_NONE);
    const ab_dtype t = p->compute_type;
    const ab_backend_ops *ops = p->be->ops;
    AB_TRY(ops->gemm(p->be, 0, 1, B, l->out, l->in, 1.0f, t, x, l->in, t, ab_param_weight(p, l->w), l->in, NULL,
                     AB_EPI_NONE, 0.0f, t, y, l->out));
    AB_TRY(ab_tp_allreduce(tp, y, (size_t)B * l->out, t));
    /* y += ones (B, 1) b (1, out): the sum plus the bias, in fp32, rounded once */
    return ops->gemm(p->be, 0, 0, B, l->out, 1, 1.0f, t, ones, 1, t, ab_param_weight(p, l->b), l->out, NULL,
                     AB_EPI_NONE, 1.0f, t, y, l->out);
}

int ab_fill_ones(const ab_params *p, size_t n, void *dst) {
    const ab_dtype t = p->compute_type;
    const size_t es = ab_dtype_size(t);
    unsigned char *h = malloc(n * es + 1);
    if (!h) return ab_errorf("out of host memory");
    for (size_t i = 0; i < n; i++) {
        if (t == AB_F32) ((float *)h)[i] = 1.0f;
        else ((uint16_t *)h)[i] = t == AB_F16 ? 0x3C00 : 0x3F80; /* 1.0 in fp16, in bf16 */
    }
    const int rc = p->be->ops->upload(p->be, dst, h, n * es);
    free(h);
    return rc;
}

void ab_conv_spec(ab_param_spec *w, const char *name, int C, int K, int R, int S) {
    *w = (ab_param_spec){.name = name, .ndim = 4, .shape = {K, R, S, C}, .init = AB_INIT_KAIMING_NORMAL_OUT,
                         .fan_out = K * R * S, .layout = AB_LAYOUT_OHWI};
}

int ab_conv_bind(ab_conv *c, const ab_param_spec *w, int max_batch, int H, int W, int C, int stride, int pad) {
    if (w->shape[3] != C) return ab_errorf("%s: the filter takes %d channels, the input has %d", w->name, w->shape[3], C);
    c->w = w;
    c->shape = (ab_conv_shape){.N = max_batch, .H = H, .W = W, .C = C, .K = w->shape[0], .R = w->shape[1],
                               .S = w->shape[2], .stride_h = stride, .stride_w = stride, .pad_h = pad, .pad_w = pad};
    return ab_conv_shape_init(&c->shape);
}

int ab_conv_forward(const ab_params *p, const ab_conv *c, int B, const void *x, void *y) {
    ab_conv_shape s = c->shape;
    s.N = B;
    return p->be->ops->conv2d_forward(p->be, &s, p->compute_type, x, ab_param_weight(p, c->w), y);
}

int ab_conv_backward(const ab_params *p, const ab_grad_sink *g, const ab_conv *c, int B, const void *x, const void *dy, void *dx) {
    ab_conv_shape s = c->shape;
    s.N = B;
    AB_TRY(ab_grad_observe(g, c->w, p->compute_type, (size_t)B * s.P * s.Q * s.K, dy));
    if (ab_param_via_scratch(p, c->w)) { /* rounded and folded by the op itself, as the linear layers' */
        AB_TRY(p->be->ops->conv2d_backward_filter_fold(p->be, &s, p->compute_type, x, dy, p->compute_grad,
                                                       p->grad + c->w->offset, g->mode == AB_GRAD_ACCUMULATE,
                                                       g->found_inf));
        AB_TRY(ab_grad_folded(p, g, c->w));
    } else {
        AB_TRY(p->be->ops->conv2d_backward_filter(p->be, &s, p->compute_type, x, dy, ab_param_grad_beta(p, g, c->w),
                                                  ab_param_grad_at(p, c->w)));
        AB_TRY(ab_param_grad_done(p, g, c->w));
    }
    if (dx) AB_TRY(p->be->ops->conv2d_backward_data(p->be, &s, p->compute_type, dy, ab_param_weight(p, c->w), dx));
    return 0;
}

double ab_conv_macs(const ab_conv *c) {
    const ab_conv_shape *s = &c->shape;
    return (double)s->K * s->R * s->S * s->C * s->P * s->Q;
}

void ab_batchnorm_specs(ab_param_spec s[4], char names[4][64], const char *prefix, int C) {
    static const char *const suffix[4] = {"weight", "bias", "running_mean", "running_var"};
    for (int i = 0; i < 4; i++) snprintf(names[i], 64, "%s.%s", prefix, suffix[i]);
    s[0] = (ab_param_spec){.name = names[0], .ndim = 1, .shape = {C}, .init = AB_INIT_ONE, .region = AB_REGION_FP32,
                           .no_decay = 1};
    s[1] = (ab_param_spec){.name = names[1], .ndim = 1, .shape = {C}, .init = AB_INIT_ZERO, .region = AB_REGION_FP32,
                           .no_decay = 1};
    s[2] = (ab_param_spec){.name = names[2], .ndim = 1, .shape = {C}, .init = AB_INIT_ZERO, .region = AB_REGION_BUFFER};
    s[3] = (ab_param_spec){.name = names[3], .ndim = 1, .shape = {C}, .init = AB_INIT_ONE, .region = AB_REGION_BUFFER};
}

void ab_batchnorm_bind(ab_batchnorm *bn, const ab_param_spec s[4]) {
    bn->C = s[0].shape[0];
    bn->eps = 1e-5f;
    bn->momentum = 0.1f;
    bn->gamma = &s[0];
    bn->beta = &s[1];
    bn->mean = &s[2];
    bn->var = &s[3];
}

int ab_batchnorm_forward(const ab_params *p, const ab_batchnorm *bn, int M, const void *x, void *y, int training,
                         int relu) {
    ab_backend *be = p->be;
    const float *g = ab_param_weight(p, bn->gamma), *b = ab_param_weight(p, bn->beta);
    if (training)
        return be->ops->batchnorm_forward_train(be, M, bn->C, p->compute_type, x, g, b, bn->eps, bn->momentum,
                                                ab_param_buf(p, bn->mean), ab_param_buf(p, bn->var), bn->save_mean,
                                                bn->save_invstd, relu, y);
    return be->ops->batchnorm_forward_eval(be, M, bn->C, p->compute_type, x, g, b, ab_param_buf(p, bn->mean),
                                           ab_param_buf(p, bn->var), bn->eps, relu, y);
}

int ab_batchnorm_backward(const ab_params *p, const ab_grad_sink *g, const ab_batchnorm *bn, int M, const void *x,
                          const void *dy, void *dx) {
    AB_TRY(ab_grad_observe(g, bn->gamma, p->compute_type, (size_t)M * bn->C, dy));
    AB_TRY(p->be->ops->batchnorm_backward(p->be, M, bn->C, p->compute_type, x, dy, ab_param_weight(p, bn->gamma),
                                          bn->save_mean, bn->save_invstd, ab_param_grad_beta(p, g, bn->gamma),
                                          ab_param_grad_at(p, bn->gamma), ab_param_grad_at(p, bn->beta), dx));
    AB_TRY(ab_grad_ready(g, bn->gamma));
    return ab_grad_ready(g, bn->beta);
}

void ab_layernorm_specs(ab_param_spec s[2], char names[2][96], const char *prefix, int C) {
    snprintf(names[0], 96, "%s.weight", prefix);
    snprintf(names[1], 96, "%s.bias", prefix);
    s[0] = (ab_param_spec){.name = names[0], .ndim = 1, .shape = {C}, .init = AB_INIT_ONE, .region = AB_REGION_FP32,
                           .no_decay = 1};
    s[1] = (ab_param_spec){.name = names[1], .ndim = 1, .shape = {C}, .init = AB_INIT_ZERO, .region = AB_REGION_FP32,
                           .no_decay = 1};
}

void ab_layernorm_bind(ab_layernorm *ln, const ab_param_spec s[2], float eps) {
    ln->C = s[0].shape[0];
    ln->eps = eps;
    ln->gamma = &s[0];
    ln->beta = &s[1];
}

int ab_layernorm_forward(const ab_params *p, const ab_layernorm *ln, int R, ab_dtype xt, const void *x, float *mean,
                         float *rstd, ab_dtype yt, void *y) {
    return p->be->ops->layernorm_forward(p->be, R, ln->C, xt, x, ab_param_weight(p, ln->gamma),
                                         ab_param_weight(p, ln->beta), ln->eps, mean, rstd, yt, y);
}

int ab_layernorm_backward(const ab_params *p, const ab_grad_sink *g, const ab_layernorm *ln, int R, ab_dtype xt, const void *x, ab_dtype yt,
                          const void *dy, const float *mean, const float *rstd, void *dx) {
    AB_TRY(ab_grad_observe(g, ln->gamma, yt, (size_t)R * ln->C, dy));
    AB_TRY(p->be->ops->layernorm_backward(p->be, R, ln->C, xt, x, yt, dy, ab_param_weight(p, ln->gamma), mean, rstd,
                                          ab_param_grad_beta(p, g, ln->gamma), ab_param_grad_at(p, ln->gamma),
                                          ab_param_grad_at(p, ln->beta), dx));
    AB_TRY(ab_grad_ready(g, ln->gamma));
    return ab_grad_ready(g, ln->beta);
}

/* Attention, per sequence b: the heads are strided views of the (L, H) rows (head h starts at
 * column h D, leading dimension H; one head to the next is D elements apart), so each product
 * is one batched call over the heads. */
int ab_attention_forward(const ab_params *p, const ab_attention *a, int B, int L, int H, const void *q, const void *k,
                         const void *v, const int32_t *mask, int training, uint64_t seed, void *probs, void *drop,
                         void *ctx) {
    ab_backend *be = p->be;
    const ab_dtype t = p->compute_type;
    const int A = a->heads, D = H / A;
    if (A < 1 || H % A) return ab_errorf("attention: %d columns do not split into %d heads", H, A);
    const size_t es = ab_dtype_size(t), LH = (size_t)L * H, LL = (size_t)L * L;
    for (int b = 0; b < B; b++) /* scores_h (L, L) = q_h (L, D) k_h^T */
        AB_TRY(be->ops->gemm_batched(be, 0, 1, L, L, D, 1.0f, t, (const char *)q + b * LH * es, H, D, t,
                                     (const char *)k + b * LH * es, H, D, 0.0f, t,
                                     (char *)probs + (size_t)b * A * LL * es, L, (long long)LL, A));
    AB_TRY(be->ops->softmax_forward(be, B, A, L, t, 1.0f / sqrtf((float)D), probs, mask, probs));
    const void *pv = probs;
    if (training && a->dropout > 0.0f) {
        if (!drop) return ab_errorf("attention: dropout needs a buffer for the dropped probabilities");
        AB_TRY(be->ops->dropout_forward(be, (size_t)B * A * LL, t, a->dropout, seed, probs, drop));
        pv = drop;
    }
    for (int b = 0; b < B; b++) /* ctx_h (L, D) = probs_h (L, L) v_h (L, D) */
        AB_TRY(be->ops->gemm_batched(be, 0, 0, L, D, L, 1.0f, t, (const char *)pv + (size_t)b * A * LL * es, L,
                                     (long long)LL, t, (const char *)v + b * LH * es, H, D, 0.0f, t,
                                     (char *)ctx + b * LH * es, H, D, A));
    return 0;
}

int ab_attention_backward(const ab_params *p, const ab_attention *a, int B, int L, int H, const void *q, const void *k,
                          const void *v, const void *probs, const void *drop, int training, uint64_t seed,
                          const void *dctx, void *scratch, void *dq, void *dk, void *dv) {
    ab_backend *be = p->be;
    const ab_dtype t = p->compute_type;
    const int A = a->heads, D = H / A;
    const size_t es = ab_dtype_size(t), LH = (size_t)L * H, LL = (size_t)L * L;
    const int dropped = training && a->dropout > 0.0f;
    const void *pv = dropped ? drop : probs;
    for (int b = 0; b < B; b++) {
        /* dv_h (L, D) = probs_h^T (L, L) dctx_h (L, D); dprobs_h (L, L) = dctx_h v_h^T */
        AB_TRY(be->ops->gemm_batched(be, 1, 0, L, D, L, 1.0f, t, (const char *)pv + (size_t)b * A * LL * es, L,
                                     (long long)LL, t, (const char *)dctx + b * LH * es, H, D, 0.0f, t,
                                     (char *)dv + b * LH * es, H, D, A));
        AB_TRY(be->ops->gemm_batched(be, 0, 1, L, L, D, 1.0f, t, (const char *)dctx + b * LH * es, H, D, t,
                                     (const char *)v + b * LH * es, H, D, 0.0f, t,
                                     (char *)scratch + (size_t)b * A * LL * es, L, (long long)LL, A));
    }
    const size_t n = (size_t)B * A * LL;
    if (dropped) AB_TRY(be->ops->dropout_backward(be, n, t, a->dropout, seed, scratch, scratch));
    /* dscores = scale * p * (dp - sum(dp * p)), the scale of the forward's scores */
    AB_TRY(be->ops->softmax_backward(be, B * A * L, L, t, 1.0f / sqrtf((float)D), probs, scratch, scratch));
    for (int b = 0; b < B; b++) {
        /* dq_h (L, D) = dscores_h (L, L) k_h (L, D); dk_h = dscores_h^T q_h */
        AB_TRY(be->ops->gemm_batched(be, 0, 0, L, D, L, 1.0f, t, (const char *)scratch + (size_t)b * A * LL * es, L,
                                     (long long)LL, t, (const char *)k + b * LH * es, H, D, 0.0f, t,
                                     (char *)dq + b * LH * es, H, D, A));
        AB_TRY(be->ops->gemm_batched(be, 1, 0, L, D, L, 1.0f, t, (const char *)scratch + (size_t)b * A * LL * es, L,
                                     (long long)LL, t, (const char *)q + b * LH * es, H, D, 0.0f, t,
                                     (char *)dk + b * LH * es, H, D, A));
    }
    return 0;
}
