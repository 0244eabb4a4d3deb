/* Private to kernels/cpu: the ops of layers_cpu.c and transformer_cpu.c that backend_cpu.c puts
 * in its table. All three files stand on the runtime of runtime_cpu.h. */
#ifndef AB_CPU_INTERNAL_H
#define AB_CPU_INTERNAL_H

#include "backend.h"
#include "runtime_cpu.h"

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
