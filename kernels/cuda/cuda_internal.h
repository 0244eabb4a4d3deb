/* Private to kernels/cuda: what layers_cuda.cu (the convolutional-layer ops) and
 * transformer_cuda.cu (the transformer ops) need from backend_cuda.cu (the backend's state:
 * device, stream, cuDNN handle, the pinned index staging ring, the GEMM engine over its
 * cuBLAS(Lt) handles, plans and scratch), and the ops they hand back for
 * the op table. Device memory comes from the tracked
 * allocator of core/backend.h (ab_alloc / ab_release, charged to be->mem). Both files are C++
 * (nvcc); nothing here is seen from C. */
#ifndef AB_CUDA_INTERNAL_H
#define AB_CUDA_INTERNAL_H

#include <stdint.h>

#include <cuda_runtime.h>
#include <cudnn.h>

extern "C" {
#include "backend.h"
}

/* ---- shared by the three .cu files ---- */

/* Every CUDA runtime call names itself, the file and the line. */
#define CU_CHECK(call)                                                                              \
    do {                                                                                            \
        const cudaError_t e_ = (call);                                                              \
        if (e_ != cudaSuccess)                                                                      \
            return ab_errorf("%s failed at %s:%d: %s (%s)", #call, __FILE__, __LINE__,              \
                             cudaGetErrorName(e_), cudaGetErrorString(e_));                         \
    } while (0)

/* after a kernel launch: configuration errors here, execution errors at the next synchronising
 * call (checked too); cudaGetLastError also clears the error it reads */
#define LAUNCH_CHECK(what)                                                                          \
    do {                                                                                            \
        const cudaError_t e_ = cudaGetLastError();                                                  \
        if (e_ != cudaSuccess)                                                                      \
            return ab_errorf("kernel launch of %s failed at %s:%d: %s (%s)", what, __FILE__, __LINE__, \
                             cudaGetErrorName(e_), cudaGetErrorString(e_));                         \
    } while (0)

/* element-wise kernels: THREADS a block, blocks_for(n) blocks, a grid-stride loop over n */
static const int THREADS = 256;
static inline unsigned blocks_for(size_t n) {
    size_t b = (n + THREADS - 1) / THREADS;
    if (b > 65535u * 16u) b = 65535u * 16u; /* grid-stride loops cover the rest */
    return (unsigned)(b ? b : 1);
}
#define GRID_STRIDE(i, n) for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < (n); i += (size_t)gridDim.x * blockDim.x)

static inline int dtype_ok(ab_dtype t) { return t == AB_F32 || t == AB_F16 || t == AB_BF16; }

/* Every cuDNN call names itself, the file and the line; cuDNN's own last message says why. */
#define CUDNN_CHECK(call)                                                                           \
    do {                                                                                            \
        const cudnnStatus_t s_ = (call);                                                            \
        if (s_ != CUDNN_STATUS_SUCCESS) {                                                           \
            char m_[256];                                                                           \
            cudnnGetLastErrorString(m_, sizeof m_);                                                 \
            return ab_errorf("%s failed at %s:%d: %s (%s)", #call, __FILE__, __LINE__,              \
                             cudnnGetErrorString(s_), m_);                                          \
        }                                                                                           \
    } while (0)

/* layers_cuda.cu's state (convolution plans, cuDNN workspace, batch-norm partial sums), made on
 * first use and freed by ab_cuda_layers_free from the backend's destroy */
typedef struct ab_cuda_layers ab_cuda_layers;

/* ---- from backend_cuda.cu ---- */
/* Makes the backend's GPU current (cudaSetDevice only when another one is): first thing in every
 * entry point. 0 or -1 (ab_error). */
int ab_cuda_use_device(ab_backend *be);
static inline int use_device(ab_backend *be) { return ab_cuda_use_device(be); }
cudaStream_t ab_cuda_stream(ab_backend *be); /* the one stream every op is queued on */
/* The backend's cuDNN handle, bound to that stream; created on first use (on the backend's GPU),
 * NULL with ab_error() when cuDNN cannot be started. Destroyed by the backend's destroy. */
cudnnHandle_t ab_cuda_dnn(ab_backend *be);
ab_cuda_layers **ab_cuda_layers_slot(ab_backend *be);
/* The GEMM engine of the backend's gemm, for gemm_batched: for z < batch (>= 1),
 * C_z = alpha op(A_z) op(B_z) + beta C_z with X_z = X + z * sx elements, strides >= 0, row-major
 * as core/backend.h's gemm (fp32 accumulation, one rounding to ct, beta 0 never reads C). Through
 * the backend's cuBLASLt handle, plan cache and workspace (strided-batch layouts), or, where
 * cuBLASLt has no algorithm or cannot express the types, cublasGemmStridedBatchedEx into the
 * backend's fp32 scratch and a finishing kernel. 0 or -1 (ab_error). */
int ab_cuda_gemm_strided(ab_backend *be, int ta, int tb, int M, int N, int K, float alpha, ab_dtype at, const void *A,
                         int lda, long long sa, ab_dtype bt, const void *B, int ldb, long long sb, float beta,
                         ab_dtype ct, void *C, int ldc, long long sc, int batch);
/* Copies a (na ints) then b (nb ints, b may be NULL when nb is 0) from host memory to device
 * memory through the pinned staging ring of gather_normalize, queued on the stream: *dev points
 * at a on the device, b follows at *dev + na. The host arrays may be reused once this returns;
 * the device copy stays valid for the kernels queued before the ring comes round again. */
int ab_cuda_stage_ints(ab_backend *be, const int32_t *a, int na, const int32_t *b, int nb, const int32_t **dev);

/* layers_cuda.cu's cuDNN state, freed before the stream and the cuDNN handle go */
void ab_cuda_layers_free(ab_backend *be);

/* ---- from transformer_cuda.cu ---- */
/* unscale_check with sum_sq: one kernel multiplies, checks and sums the squares over
 * sum_squares's grid and order (its block sums), the second adds them as sum_squares does */
int ab_cuda_unscale_squares(ab_backend *be, size_t n, float *g, float inv_scale, int32_t *found_inf, float *sum_sq);

/* Every compute op of core/backend_ops.def, as ab_cuda_<op>: backend_cuda.cu (GEMM, element-wise,
 * loss, optimizer, gathers, census), layers_cuda.cu (cuDNN convolutions, batch norm, pooling,
 * image assembly), transformer_cuda.cu; backend_cuda.cu's table is built from this list. */
#define AB_OP(name, params, args) int ab_cuda_##name AB_OP_PARAMS params;
#include "backend_ops.def"

#endif
