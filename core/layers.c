/* Linear layer over the backend's GEMM. */
#include "layers.h"

void ab_linear_specs(ab_param_spec *w, ab_param_spec *b, const char *wname, const char *bname, int in, int out) {
    *w = (ab_param_spec){.name = wname, .ndim = 2, .shape = {out, in}, .init = AB_INIT_UNIFORM_FAN_IN, .fan_in = in};
    *b = (ab_param_spec){.name = bname, .ndim = 1, .shape = {out}, .init = AB_INIT_UNIFORM_FAN_IN, .fan_in = in};
}

void ab_linear_bind(ab_linear *l, const ab_param_spec *w, const ab_param_spec *b) {
    l->in = w->shape[1];
    l->out = w->shape[0];
    l->w = w->offset;
    l->b = b->offset;
}

int ab_linear_forward(const ab_params *p, const ab_linear *l, int B, const void *x, void *y, ab_epilogue epi) {
    const ab_dtype t = p->cdt;
    return p->be->ops->gemm(p->be, 0, 1, B, l->out, l->in, 1.0f, t, x, l->in, t, ab_cat(p->wc, t, l->w), l->in,
                            ab_cat(p->wc, t, l->b), epi, 0.0f, t, y, l->out);
}

int ab_linear_backward(const ab_params *p, const ab_linear *l, int B, const void *x, const void *dy, void *dx) {
    const ab_dtype t = p->cdt;
    const ab_backend_ops *ops = p->be->ops;
    const float beta = p->grad_beta ? 1.0f : 0.0f;
    /* d_weight (out, in) = dy^T (out, B) @ x (B, in) */
    AB_TRY(ops->gemm(p->be, 1, 0, l->out, l->in, B, 1.0f, t, dy, l->out, t, x, l->in, NULL, AB_EPI_NONE, beta, t,
                     ab_at(p->gradc, t, l->w), l->in));
    /* d_bias (out) = sum over the batch of dy */
    AB_TRY(ops->col_sum(p->be, B, l->out, t, dy, beta, t, ab_at(p->gradc, t, l->b)));
    /* dx (B, in) = dy (B, out) @ W (out, in) */
    if (dx)
        AB_TRY(ops->gemm(p->be, 0, 0, B, l->in, l->out, 1.0f, t, dy, l->out, t, ab_cat(p->wc, t, l->w), l->in, NULL,
                         AB_EPI_NONE, 0.0f, t, dx, l->in));
    return 0;
}
