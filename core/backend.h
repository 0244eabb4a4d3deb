/* The backend interface: a table of operations plus a context. The CPU backend
 * (kernels/cpu) is the reference every other backend is checked against. Pointers handed to
 * an op live in the backend's memory space (the host's when is_host, else the device's). The
 * core asks the table what a backend can do and never names one. Matrices are
 * row-major. Element types are explicit per operand; matrix products accumulate in fp32 and
 * round once to the output type, as tensor-core GEMMs with fp32 accumulation do. */
#ifndef AB_BACKEND_H
#define AB_BACKEND_H

#include <stddef.h>
#include <stdint.h>

#include "ab.h"
#include "mem.h"

typedef enum { AB_EPI_NONE = 0, AB_EPI_RELU = 1 } ab_epilogue;

typedef struct ab_backend ab_backend;

/* A 2-D convolution (cross-correlation, as every framework computes it), no bias, no groups or
 * dilation. Activations are channels-last: x (N, H, W, C), y (N, P, Q, K); filters are
 * (K, R, S, C) ("OHWI"), the layout cuDNN wants for NHWC tensor-core convolutions. The
 * checkpoint code permutes to and from PyTorch's (K, C, R, S). */
typedef struct {
    int N, H, W, C;    /* input */
    int K, R, S;       /* output channels, filter height and width */
    int stride_h, stride_w, pad_h, pad_w;
    int P, Q;          /* output height and width: (H + 2 pad_h - R) / stride_h + 1, ... */
} ab_conv_shape;

/* Fills P and Q from the rest; -1 (with ab_error) when a size is not positive or the filter
 * does not fit the padded input. */
int ab_conv_shape_init(ab_conv_shape *s);

/* A pooling window over channels-last x (N, H, W, C) -> y (N, P, Q, C). */
typedef struct {
    int N, H, W, C;
    int R, S, stride_h, stride_w, pad_h, pad_w;
    int P, Q;
} ab_pool_shape;
int ab_pool_shape_init(ab_pool_shape *s);

/* How a data set stores one image, and how a batch of them is assembled: pixels are uint8;
 * planar = channel planes (C, H, W) as CIFAR-10 stores them, else interleaved (H, W, C) (with
 * C = 1 the two are the same). out[b, y, x, c] = (p / 255 - mean[c]) / std[c], where p is the
 * pixel of sample idx[b] after the crop and flip of aug (below); pixels of the zero padding read
 * as p = 0, as torchvision's RandomCrop(padding) pads the image before normalising. */
#define AB_MAX_CHANNELS 4
typedef struct {
    int C, H, W, planar;
    float mean[AB_MAX_CHANNELS], std[AB_MAX_CHANNELS];
} ab_image_layout;
/* Per-sample augmentation (host memory, 3 ints a sample): crop offsets dy, dx in [0, 2 pad]
 * into the image zero-padded by pad on every side, and flip (1 = mirror left-right after the
 * crop). aug NULL = no augmentation. */
typedef struct {
    int pad;
    const int32_t *aug; /* (B, 3): dy, dx, flip */
} ab_image_aug;

/* What a backend reports about itself (the describe op), for the record: what computes, with
 * which libraries, and for a device the driver's view of its memory (bytes). A host backend
 * fills is_host, name, blas and note and leaves the device fields 0. */
typedef struct {
    int is_host;                         /* as the backend's ops->is_host: name is the host CPU's */
    char name[160];                      /* "AMD EPYC 7B13" (/proc/cpuinfo's model name), "NVIDIA H200" */
    char blas[160], dnn[32];             /* "OpenBLAS 0.3.21 ..., single-threaded calls in a pool of 2 threads",
                                            "cuBLASLt 13.0.0"; "cuDNN 9.13.0" ("" when none) */
    char note[256];                      /* a set-up that costs speed, in one line (OpenBLAS on
                                            generic kernels), or "" */
    char driver[32], runtime[32];        /* CUDA driver and runtime versions, "13.0" */
    int cc_major, cc_minor;              /* compute capability */
    size_t mem_total;                    /* device memory, as the driver counts it */
    size_t mem_used_start;               /* in use (all processes) when the backend started */
    size_t mem_used_peak;                /* most seen in use at any sample (allocations, syncs) */
    size_t data_bytes;                   /* data sets resident on the device (map_data) */
    int graph_used;                      /* 1 if a CUDA graph replays the training step */
} ab_device_info;

typedef struct ab_backend_ops {
    const char *name; /* for people (the record's backend field); the core never compares it */
    /* 1: the backend's memory is the host's, so the host reads and writes its buffers directly
     * (upload and download are copies); 0: device memory, reached through upload and download */
    int is_host;
    void (*destroy)(ab_backend *be);

    /* memory: every allocation is charged to a category of be->mem */
    void *(*alloc)(ab_backend *be, ab_mem_category cat, size_t bytes);
    void (*release)(ab_backend *be, ab_mem_category cat, void *p, size_t bytes);
    int (*upload)(ab_backend *be, void *dst, const void *host_src, size_t bytes);
    int (*download)(ab_backend *be, void *host_dst, const void *src, size_t bytes);
    int (*zero)(ab_backend *be, void *p, size_t bytes);
    int (*sync)(ab_backend *be);
    /* Optional (NULL: none). The device stream every op runs on, in order (a cudaStream_t), or
     * NULL for a host backend: an engine that communicates on a stream of its own orders itself
     * after the work queued so far with an event on it, instead of a sync that would stop the
     * host from queueing the rest of backward (comm/comm_nccl.cu). */
    void *(*stream)(ab_backend *be);
    /* Makes a host data set readable by gather_normalize: the CPU backend uses the host bytes
     * as they are; a device backend copies them once to device memory. Not charged to the
     * training categories (a data set is not training memory); backends report it apart. */
    int (*map_data)(ab_backend *be, const void *host, size_t bytes, const void **mapped);
    void (*unmap_data)(ab_backend *be, const void *mapped, size_t bytes);

    /* C[M,N] = epi(alpha * op(A)[M,K] op(B)[K,N] + bias[N]) + beta * C, accumulated in fp32 and
     * rounded once to ct. op(X) = X^T when tX != 0. bias (type bt, may be NULL) is per column. */
    int (*gemm)(ab_backend *be, int ta, int tb, int M, int N, int K, float alpha, ab_dtype at,
                const void *A, int lda, ab_dtype bt, const void *B, int ldb, const void *bias,
                ab_epilogue epi, float beta, ab_dtype ct, void *C, int ldc);

    /* dst = src converted (with rounding) between element types */
    int (*cast)(ab_backend *be, size_t n, ab_dtype st, const void *src, ab_dtype dt, void *dst);
    /* dst(fp32) = src (accumulate = 0) or dst + src (accumulate = 1) */
    int (*accumulate)(ab_backend *be, size_t n, ab_dtype st, const void *src, float *dst, int accumulate);
    /* y = max(x, 0) */
    int (*relu_forward)(ab_backend *be, size_t n, ab_dtype t, const void *x, void *y);
    /* dx = dy * (y > 0); dx may alias dy */
    int (*relu_backward)(ab_backend *be, size_t n, ab_dtype t, const void *y, const void *dy, void *dx);
    /* out[N] = beta * out + sum over rows of X[M,N] (fp32 accumulation) */
    int (*col_sum)(ab_backend *be, int M, int N, ab_dtype xt, const void *X, float beta, ab_dtype ot, void *out);

    /* Softmax cross-entropy, fused forward and backward, computed in fp32 whatever lt is.
     * logits[B,C], labels[B] (int32). Adds sum over the batch of the loss to *loss_sum (fp32,
     * backend memory) and the number of argmax hits to *correct (int32, may be NULL). When
     * dlogits is not NULL writes dlogits = grad_scale * (softmax - onehot) / B in type dt;
     * dlogits may be the logits buffer itself (dt == lt), overwritten in place. */
    int (*softmax_xent)(ab_backend *be, int B, int C, ab_dtype lt, const void *logits,
                        const int32_t *labels, float grad_scale, ab_dtype dt, void *dlogits,
                        float *loss_sum, int32_t *correct);

    /* g *= inv_scale; *found_inf = 1 if any element of the result is inf or NaN (never reset) */
    int (*unscale_check)(ab_backend *be, size_t n, float *g, float inv_scale, int32_t *found_inf);

    /* SGD, PyTorch semantics: g += wd*w; buf = momentum*buf + g (buf = g on the first step);
     * w -= lr * buf. buf may be NULL when momentum == 0. */
    int (*sgd_step)(ab_backend *be, size_t n, float *w, const float *g, float *buf, float lr,
                    float momentum, float weight_decay, int first_step);
    /* AdamW, PyTorch semantics (decoupled weight decay, bias correction; step is 1-based) */
    int (*adamw_step)(ab_backend *be, size_t n, float *w, const float *g, float *m, float *v,
                      float lr, float beta1, float beta2, float eps, float weight_decay, int step);

    /* Batch assembly from a resident uint8 data set: out[b, d] = (data[idx[b], d] / 255 - mean) / std,
     * and labels_out[b] = labels[idx[b]]. idx lives in host memory. */
    int (*gather_normalize)(ab_backend *be, int B, int D, const uint8_t *data, const uint8_t *labels,
                            const int32_t *idx, float mean, float std, ab_dtype ot, void *out,
                            int32_t *labels_out);

    /* Batch assembly of images, channels-last: out (B, H, W, C) in ot as ab_image_layout says,
     * labels_out[b] = labels[idx[b]]. data is the mapped (map_data) uint8 set of (n, C*H*W)
     * samples, labels the mapped (n) uint8 labels; idx (B) and aug live in host memory. */
    int (*gather_images)(ab_backend *be, int B, const ab_image_layout *L, const ab_image_aug *aug,
                         const uint8_t *data, const uint8_t *labels, const int32_t *idx, ab_dtype ot, void *out,
                         int32_t *labels_out);

    /* ---- convolutional layers (channels-last; t = the compute type of x, w, y and their
     * gradients; fp32 accumulation, one rounding of each stored result) ---- */
    /* y (N,P,Q,K) = conv(x (N,H,W,C), w (K,R,S,C)) */
    int (*conv2d_forward)(ab_backend *be, const ab_conv_shape *s, ab_dtype t, const void *x, const void *w, void *y);
    /* dx (N,H,W,C) = the gradient of conv wrt x for dy (N,P,Q,K) */
    int (*conv2d_backward_data)(ab_backend *be, const ab_conv_shape *s, ab_dtype t, const void *dy, const void *w,
                                void *dx);
    /* dw (K,R,S,C) = beta * dw + the gradient of conv wrt w for x, dy; beta is 0 or 1 (the sum
     * over micro-batches, taken in fp32 before the one rounding) */
    int (*conv2d_backward_filter)(ab_backend *be, const ab_conv_shape *s, ab_dtype t, const void *x, const void *dy,
                                  float beta, void *dw);

    /* Batch normalisation over the rows of x (M, C) (M = N*H*W for channels-last images), per
     * channel, statistics in fp32 whatever t is; gamma, beta and the statistics are fp32.
     * Training: mean and biased variance of the batch normalise; save_mean and save_invstd (C)
     * keep mean and 1/sqrt(var + eps) for backward; running_mean/var (may be NULL) become
     * (1 - momentum) * running + momentum * batch, the variance unbiased (M / (M - 1)) there, as
     * PyTorch does. y = (x - mean) * invstd * gamma + beta, rounded once to t; y may alias x.
     * relu != 0 fuses the ReLU that follows (y = max(y, 0) before the rounding: the same bits as
     * relu_forward on the rounded y, one pass fewer over the activations). */
    int (*batchnorm_forward_train)(ab_backend *be, int M, int C, ab_dtype t, const void *x, const float *gamma,
                                   const float *beta, float eps, float momentum, float *running_mean,
                                   float *running_var, float *save_mean, float *save_invstd, int relu, void *y);
    /* Evaluation: the running statistics normalise; y may alias x; relu as above. */
    int (*batchnorm_forward_eval)(ab_backend *be, int M, int C, ab_dtype t, const void *x, const float *gamma,
                                  const float *beta, const float *running_mean, const float *running_var, float eps,
                                  int relu, void *y);
    /* Backward of the training forward: with xhat = (x - save_mean) * save_invstd,
     * dgamma = acc * dgamma + sum(dy * xhat), dbeta = acc * dbeta + sum(dy) (fp32, acc 0 or 1),
     * dx = gamma * invstd * (dy - mean(dy) - xhat * mean(dy * xhat)) rounded to t; dx may alias dy. */
    int (*batchnorm_backward)(ab_backend *be, int M, int C, ab_dtype t, const void *x, const void *dy,
                              const float *gamma, const float *save_mean, const float *save_invstd, float acc,
                              float *dgamma, float *dbeta, void *dx);

    /* Max pooling (channels-last, padding never wins): y = max over the window. */
    int (*maxpool_forward)(ab_backend *be, const ab_pool_shape *s, ab_dtype t, const void *x, void *y);
    /* dx = 0, then each dy goes to the first position in the window (row-major scan) whose x
     * equals y, as PyTorch routes it. */
    int (*maxpool_backward)(ab_backend *be, const ab_pool_shape *s, ab_dtype t, const void *x, const void *y,
                            const void *dy, void *dx);
    /* Global average pooling: y (N, C) = mean over HW rows of x (N, HW, C), fp32 sum, one rounding. */
    int (*avgpool_forward)(ab_backend *be, int N, int HW, int C, ab_dtype t, const void *x, void *y);
    /* dx (N, HW, C) = dy (N, C) / HW */
    int (*avgpool_backward)(ab_backend *be, int N, int HW, int C, ab_dtype t, const void *dy, void *dx);
    /* y = a + b element-wise, computed in fp32 and rounded once to t; y may alias a or b; relu
     * != 0 fuses a ReLU after the add, as in batchnorm_forward_train */
    int (*add)(ab_backend *be, size_t n, ab_dtype t, const void *a, const void *b, int relu, void *y);

    /* ---- transformer ops (BERT). Rows are contiguous vectors of C values; statistics and
     * transcendental functions in fp32 whatever the storage type; one rounding of each stored
     * result. ---- */
    /* batch strided products: for i < batch, C_i = alpha op(A_i) op(B_i) + beta C_i with
     * A_i = A + i * sa elements (B_i, C_i likewise), each as gemm (fp32 accumulation, one
     * rounding to ct), no bias or epilogue */
    int (*gemm_batched)(ab_backend *be, int ta, int tb, int M, int N, int K, float alpha, ab_dtype at, const void *A,
                        int lda, long long sa, ab_dtype bt, const void *B, int ldb, long long sb, float beta,
                        ab_dtype ct, void *C, int ldc, long long sc, int batch);
    /* Layer normalisation over each of R rows of C: y = (x - mean) * rstd * gamma + beta with the
     * biased variance and rstd = 1/sqrt(var + eps), x of type xt, y of type yt (fp32 gamma,
     * beta); mean and rstd (R, fp32) kept for backward. y may alias x when xt == yt. */
    int (*layernorm_forward)(ab_backend *be, int R, int C, ab_dtype xt, const void *x, const float *gamma,
                             const float *beta, float eps, float *mean, float *rstd, ab_dtype yt, void *y);
    /* dx (type xt) = the gradient wrt x of dy (type yt); dgamma = acc * dgamma + sum(dy * xhat),
     * dbeta = acc * dbeta + sum(dy) (fp32, acc 0 or 1); dx may alias dy when xt == yt */
    int (*layernorm_backward)(ab_backend *be, int R, int C, ab_dtype xt, const void *x, ab_dtype yt, const void *dy,
                              const float *gamma, const float *mean, const float *rstd, float acc, float *dgamma,
                              float *dbeta, void *dx);
    /* exact GELU (BERT's "gelu"): y = x * Phi(x) = 0.5 x (1 + erf(x / sqrt 2)); y may alias x */
    int (*gelu_forward)(ab_backend *be, size_t n, ab_dtype t, const void *x, void *y);
    /* dx = dy * (Phi(x) + x phi(x)), from the forward's input x; dx may alias dy */
    int (*gelu_backward)(ab_backend *be, size_t n, ab_dtype t, const void *x, const void *dy, void *dx);
    /* y = tanh(x); backward from the output: dx = dy * (1 - y^2); in place allowed */
    int (*tanh_forward)(ab_backend *be, size_t n, ab_dtype t, const void *x, void *y);
    int (*tanh_backward)(ab_backend *be, size_t n, ab_dtype t, const void *y, const void *dy, void *dx);
    /* Attention probabilities: x holds B * heads score matrices of L x L (row i: query i), p the
     * same layout; p[b, h, i, :] = softmax_j(scale * x[b, h, i, j]) over the keys j with
     * mask[b, j] != 0 (int32 (B, L)); masked keys get probability 0, a row with no key left is
     * all 0. Computed in fp32; p may alias x. */
    int (*softmax_forward)(ab_backend *be, int B, int heads, int L, ab_dtype t, float scale, const void *x,
                           const int32_t *mask, void *p);
    /* dx = scale * p * (dp - sum_j(dp * p)) per row, from the forward's output p; dx may alias dp */
    int (*softmax_backward)(ab_backend *be, int rows, int L, ab_dtype t, float scale, const void *p, const void *dp,
                            void *dx);
    /* Dropout with a counter-based mask, the same on every backend: element i of a call is kept
     * when hash(seed, i) >= rate * 2^32 (ab_dropout_keep in core/kernel_math.h), then scaled by
     * 1/(1 - rate); dropped elements become 0. Backward regenerates the mask from (seed, rate),
     * so none is stored. rate 0 copies; y may alias x. */
    int (*dropout_forward)(ab_backend *be, size_t n, ab_dtype t, float rate, uint64_t seed, const void *x, void *y);
    int (*dropout_backward)(ab_backend *be, size_t n, ab_dtype t, float rate, uint64_t seed, const void *dy, void *dx);
    /* BERT's embeddings: y[r, :] = word[ids[r], :] + pos[r % L, :] + type[types[r], :] for
     * R = B * L rows of C, summed in fp32 from fp32 tables and stored in fp32 (layer norm
     * follows); ids and types (R, int32) in backend memory; an id outside [0, vocab) or a type
     * outside [0, n_types) makes its row NaN. */
    int (*embedding_forward)(ab_backend *be, int R, int L, int C, const int32_t *ids, const int32_t *types,
                             const float *word, int vocab, const float *pos, const float *type, int n_types, float *y);
    /* the tables' gradients: dword[ids[r]] += dy[r], dpos[r % L] += dy[r], dtype[types[r]] += dy[r]
     * (fp32, the tables first zeroed unless acc; rows with a bad id or type are skipped) */
    int (*embedding_backward)(ab_backend *be, int R, int L, int C, const int32_t *ids, const int32_t *types,
                              const float *dy, int vocab, int n_types, int acc, float *dword, float *dpos,
                              float *dtype);
    /* out[b] = rows[idx[b]] for B rows of row_bytes bytes of any backend memory (a batch of token
     * sequences from a mapped (map_data) set, or rows of an activation); idx (B) in host memory */
    int (*gather_rows)(ab_backend *be, int B, size_t row_bytes, const void *rows, const int32_t *idx, void *out);
    /* *out += sum of x[i]^2 (fp32 device scalar, summed in fp32 pairs then double), for the
     * gradient norm */
    int (*sum_squares)(ab_backend *be, size_t n, const float *x, float *out);
    /* x *= s */
    int (*scale)(ab_backend *be, size_t n, float *x, float s);
    /* The gradient census's histogram: ADDS into counts (int64, backend memory, nbins + 2) the
     * binary exponents of x (n elements of type t, read as stored): counts[b] += the finite non-zero
     * values with floor(log2 |x|) == log2_min + b, those below 2^log2_min going to counts[0] and
     * those at or above 2^(log2_min + nbins - 1) to counts[nbins - 1]; counts[nbins] += the zeros
     * (+0 and -0), counts[nbins + 1] += the infinities and NaNs. Subnormals count by their own
     * exponent (fp16's smallest, 2^-24, in the bin of -24): ab_log2_slot, core/kernel_math.h.
     * Adding lets tensors be pooled. 1 <= nbins <= AB_LOG2_HIST_MAX_BINS and |log2_min| <= 256. */
    int (*log2_hist)(ab_backend *be, size_t n, ab_dtype t, const void *x, int log2_min, int nbins, int64_t *counts);

    /* fills info (above); 0 or -1 */
    int (*describe)(ab_backend *be, ab_device_info *info);
    /* Optional timing of batch assembly on the device's own clock (NULL: the caller times with
     * the host clock). data_mark(be, 1) / data_mark(be, 0) bracket one batch's gather; data_time
     * waits for the device, returns the seconds spent inside brackets since its previous call,
     * and starts a new count. */
    void (*data_mark)(ab_backend *be, int begin);
    int (*data_time)(ab_backend *be, double *seconds);
} ab_backend_ops;

struct ab_backend {
    const ab_backend_ops *ops;
    ab_mem mem;
    void *impl; /* backend-private state */
};

/* Tracked helpers over be->ops */
void *ab_alloc(ab_backend *be, ab_mem_category cat, size_t bytes);
/* ab_alloc, with what the memory is for said in an out-of-memory message ("the AdamW state of N
 * parameters"); the label holds for this allocation alone, whatever it returns */
void *ab_alloc_for(ab_backend *be, ab_mem_category cat, size_t bytes, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 4, 5)))
#endif
    ;
void ab_release(ab_backend *be, ab_mem_category cat, void *p, size_t bytes);

#endif
