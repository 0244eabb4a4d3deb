/* Tracked allocation helpers over a backend's op table, and the op table's names. */
#include "backend.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

void *ab_alloc(ab_backend *be, ab_mem_category cat, size_t bytes) { return be->ops->alloc(be, cat, bytes); }

void *ab_alloc_for(ab_backend *be, ab_mem_category cat, size_t bytes, const char *fmt, ...) {
    char saved[sizeof be->mem.label];
    memcpy(saved, be->mem.label, sizeof saved);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(be->mem.label, sizeof be->mem.label, fmt, ap);
    va_end(ap);
    void *p = be->ops->alloc(be, cat, bytes);
    memcpy(be->mem.label, saved, sizeof saved);
    return p;
}
void ab_release(ab_backend *be, ab_mem_category cat, void *p, size_t bytes) { be->ops->release(be, cat, p, bytes); }

const char *ab_op_name(int op) {
    static const char *const names[AB_OP_COUNT] = {
#define AB_OP(name, params, args) #name,
#include "backend_ops.def"
    };
    return op >= 0 && op < AB_OP_COUNT ? names[op] : NULL;
}

const void *ab_backend_op(const ab_backend_ops *o, int op) {
    switch (op) {
#define AB_OP(name, params, args)                                                                                      \
    case AB_OP_##name:                                                                                                 \
        return (const void *)o->name;
#include "backend_ops.def"
    default:
        return NULL;
    }
}

int ab_conv_shape_init(ab_conv_shape *s) {
    if (s->N < 1 || s->H < 1 || s->W < 1 || s->C < 1 || s->K < 1 || s->R < 1 || s->S < 1 || s->stride_h < 1 ||
        s->stride_w < 1 || s->pad_h < 0 || s->pad_w < 0)
        return ab_errorf("convolution: bad shape N=%d H=%d W=%d C=%d K=%d R=%d S=%d stride %dx%d pad %dx%d", s->N, s->H,
                         s->W, s->C, s->K, s->R, s->S, s->stride_h, s->stride_w, s->pad_h, s->pad_w);
    if (s->H + 2 * s->pad_h < s->R || s->W + 2 * s->pad_w < s->S)
        return ab_errorf("convolution: a %dx%d filter does not fit a %dx%d input padded by %dx%d", s->R, s->S, s->H,
                         s->W, s->pad_h, s->pad_w);
    s->P = (s->H + 2 * s->pad_h - s->R) / s->stride_h + 1;
    s->Q = (s->W + 2 * s->pad_w - s->S) / s->stride_w + 1;
    return 0;
}

int ab_gemm_batched_args(int ta, int tb, int M, int N, int K, int lda, int ldb, int ldc, int batch) {
    if (M <= 0 || N <= 0 || K <= 0 || batch < 0)
        return ab_errorf("gemm_batched: bad shape M=%d N=%d K=%d batch %d", M, N, K, batch);
    if (lda < (ta ? M : K) || ldb < (tb ? K : N) || ldc < N)
        return ab_errorf("gemm_batched: leading dimensions lda=%d ldb=%d ldc=%d too small for M=%d N=%d K=%d "
                         "(ta=%d tb=%d)", lda, ldb, ldc, M, N, K, ta, tb);
    return 0;
}

int ab_pool_shape_init(ab_pool_shape *s) {
    if (s->N < 1 || s->H < 1 || s->W < 1 || s->C < 1 || s->R < 1 || s->S < 1 || s->stride_h < 1 || s->stride_w < 1 ||
        s->pad_h < 0 || s->pad_w < 0 || 2 * s->pad_h > s->R || 2 * s->pad_w > s->S)
        return ab_errorf("pooling: bad shape N=%d H=%d W=%d C=%d window %dx%d stride %dx%d pad %dx%d", s->N, s->H, s->W,
                         s->C, s->R, s->S, s->stride_h, s->stride_w, s->pad_h, s->pad_w);
    if (s->H + 2 * s->pad_h < s->R || s->W + 2 * s->pad_w < s->S)
        return ab_errorf("pooling: a %dx%d window does not fit a %dx%d input", s->R, s->S, s->H, s->W);
    s->P = (s->H + 2 * s->pad_h - s->R) / s->stride_h + 1;
    s->Q = (s->W + 2 * s->pad_w - s->S) / s->stride_w + 1;
    return 0;
}
