/* Private to kernels/cpu: the CPU backend's state and what its two files share: scratch buffers
 * charged to AB_MEM_CPU_SCRATCH (allocated once, grown, kept until destroy), the exact
 * fp16/bf16 <-> fp32 conversions, a small thread pool for the loops around the GEMMs, and the
 * convolutional-layer ops of layers_cpu.c. */
#ifndef AB_CPU_INTERNAL_H
#define AB_CPU_INTERNAL_H

#include "backend.h"

typedef struct {
    void *p;
    size_t bytes;
} scratch_buf;

/* Scratch slots. 0-4 belong to backend_cpu.c (gemm: widened A, widened B, fp32 product,
 * widened bias, old C row; col_sum and gather_normalize reuse 2 and 4); the rest to
 * layers_cpu.c, one per role so that an op's buffers never alias each other. */
enum {
    CPU_SLOT_LAYER_X = 5,  /* fp32 input chunk (widened x, or dy for backward_filter's x) */
    CPU_SLOT_LAYER_COL,    /* im2col columns / dcol */
    CPU_SLOT_LAYER_W,      /* widened filter */
    CPU_SLOT_LAYER_OUT,    /* fp32 result chunk before the one rounding */
    CPU_SLOT_LAYER_DY,     /* widened dy chunk */
    CPU_SLOT_LAYER_ACC,    /* fp32 accumulators: dw, per-thread partial sums */
    CPU_SCRATCH_COUNT
};

typedef struct cpu_pool cpu_pool;

typedef struct {
    scratch_buf scratch[CPU_SCRATCH_COUNT];
    int threads;    /* threads for the loops around the GEMMs (OpenBLAS's own count) */
    cpu_pool *pool; /* started on first use, NULL with one thread */
} cpu_state;

/* fp32 scratch of at least n elements in slot (grown, never shrunk); NULL with ab_error. */
float *cpu_scratch_get(ab_backend *be, int slot, size_t n);
/* dst = src exactly (fp16/bf16 -> fp32) */
void cpu_widen(size_t n, ab_dtype t, const void *src, float *dst);
/* dst = src rounded once to nearest even (fp32 -> fp16/bf16), F16C where the CPU has it */
void cpu_narrow(size_t n, const float *src, ab_dtype t, void *dst);

/* Runs fn(ctx, part, lo, hi) over [0, n) cut into `part`s 0, 1, ... of contiguous ranges, at
 * most st->threads of them and none under min_per_thread items, the calling thread taking part 0;
 * returns when all are done. part indexes per-thread scratch. The split depends only on n and the
 * thread count, and callers keep their sums independent of it. */
typedef void (*cpu_range_fn)(void *ctx, int part, size_t lo, size_t hi);
void cpu_parallel_for(ab_backend *be, size_t n, size_t min_per_thread, cpu_range_fn fn, void *ctx);
void cpu_pool_free(cpu_state *st);

/* C = alpha op(A) op(B) + beta C, row-major, over the pool: OpenBLAS itself runs single-threaded
 * (its spinning workers would otherwise compete with the pool's for the same cores) and each part
 * of the pool takes a block of C's rows, or of its columns when there are few rows, so that every
 * element comes from one sgemm call. */
void cpu_sgemm(ab_backend *be, int ta, int tb, int M, int N, int K, float alpha, const float *A, int lda,
               const float *B, int ldb, float beta, float *C, int ldc);

/* layers_cpu.c: the convolutional-layer ops, as core/backend.h describes them */
int cpu_gather_images(ab_backend *be, int B, const ab_image_layout *L, const ab_image_aug *aug, const uint8_t *data,
                      const uint8_t *labels, const int32_t *idx, ab_dtype ot, void *out, int32_t *labels_out);
int cpu_conv2d_forward(ab_backend *be, const ab_conv_shape *s, ab_dtype t, const void *x, const void *w, void *y);
int cpu_conv2d_backward_data(ab_backend *be, const ab_conv_shape *s, ab_dtype t, const void *dy, const void *w,
                             void *dx);
int cpu_conv2d_backward_filter(ab_backend *be, const ab_conv_shape *s, ab_dtype t, const void *x, const void *dy,
                               float beta, void *dw);
int cpu_batchnorm_forward_train(ab_backend *be, int M, int C, ab_dtype t, const void *x, const float *gamma,
                                const float *beta, float eps, float momentum, float *running_mean, float *running_var,
                                float *save_mean, float *save_invstd, int relu, void *y);
int cpu_batchnorm_forward_eval(ab_backend *be, int M, int C, ab_dtype t, const void *x, const float *gamma,
                               const float *beta, const float *running_mean, const float *running_var, float eps,
                               int relu, void *y);
int cpu_batchnorm_backward(ab_backend *be, int M, int C, ab_dtype t, const void *x, const void *dy, const float *gamma,
                           const float *save_mean, const float *save_invstd, float acc, float *dgamma, float *dbeta,
                           void *dx);
int cpu_maxpool_forward(ab_backend *be, const ab_pool_shape *s, ab_dtype t, const void *x, void *y);
int cpu_maxpool_backward(ab_backend *be, const ab_pool_shape *s, ab_dtype t, const void *x, const void *y,
                         const void *dy, void *dx);
int cpu_avgpool_forward(ab_backend *be, int N, int HW, int C, ab_dtype t, const void *x, void *y);
int cpu_avgpool_backward(ab_backend *be, int N, int HW, int C, ab_dtype t, const void *dy, void *dx);
int cpu_add(ab_backend *be, size_t n, ab_dtype t, const void *a, const void *b, int relu, void *y);

/* transformer_cpu.c: the transformer ops, as core/backend.h describes them */
int cpu_gemm_batched(ab_backend *be, int ta, int tb, int M, int N, int K, float alpha, ab_dtype at, const void *A,
                     int lda, long long sa, ab_dtype bt, const void *B, int ldb, long long sb, float beta, ab_dtype ct,
                     void *C, int ldc, long long sc, int batch);
int cpu_layernorm_forward(ab_backend *be, int R, int C, ab_dtype xt, const void *x, const float *gamma,
                          const float *beta, float eps, float *mean, float *rstd, ab_dtype yt, void *y);
int cpu_layernorm_backward(ab_backend *be, int R, int C, ab_dtype xt, const void *x, ab_dtype yt, const void *dy,
                           const float *gamma, const float *mean, const float *rstd, float acc, float *dgamma,
                           float *dbeta, void *dx);
int cpu_gelu_forward(ab_backend *be, size_t n, ab_dtype t, const void *x, void *y);
int cpu_gelu_backward(ab_backend *be, size_t n, ab_dtype t, const void *x, const void *dy, void *dx);
int cpu_tanh_forward(ab_backend *be, size_t n, ab_dtype t, const void *x, void *y);
int cpu_tanh_backward(ab_backend *be, size_t n, ab_dtype t, const void *y, const void *dy, void *dx);
int cpu_softmax_forward(ab_backend *be, int B, int heads, int L, ab_dtype t, float scale, const void *x,
                        const int32_t *mask, void *p);
int cpu_softmax_backward(ab_backend *be, int rows, int L, ab_dtype t, float scale, const void *p, const void *dp,
                         void *dx);
int cpu_dropout_forward(ab_backend *be, size_t n, ab_dtype t, float rate, uint64_t seed, const void *x, void *y);
int cpu_dropout_backward(ab_backend *be, size_t n, ab_dtype t, float rate, uint64_t seed, const void *dy, void *dx);
int cpu_embedding_forward(ab_backend *be, int R, int L, int C, const int32_t *ids, const int32_t *types,
                          const float *word, int vocab, const float *pos, const float *type, int n_types, float *y);
int cpu_embedding_backward(ab_backend *be, int R, int L, int C, const int32_t *ids, const int32_t *types,
                           const float *dy, int vocab, int n_types, int acc, float *dword, float *dpos, float *dtype);
int cpu_gather_rows(ab_backend *be, int B, size_t row_bytes, const void *rows, const int32_t *idx, void *out);
int cpu_sum_squares(ab_backend *be, size_t n, const float *x, float *out);
int cpu_scale(ab_backend *be, size_t n, float *x, float s);

#endif
