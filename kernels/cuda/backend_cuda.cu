/* The CUDA backend: every op of core/backend.h on one GPU and one stream.
 * GEMMs go to cuBLASLt (row-major C[M,N] is computed as column-major C^T = op(B)^T op(A)^T, fp32
 * compute type whatever the storage type, bias/ReLU epilogues where they mean what the op means),
 * strided batches too (transformer_cuda.cu's gemm_batched calls the same engine);
 * element-wise ops are small kernels over the same AB_HD math as the CPU backend (core/half.h,
 * core/kernel_math.h), so the CPU tests cover their arithmetic. The convolutional-layer ops
 * (convolutions through cuDNN, batch norm, pooling, add, image assembly) live in layers_cuda.cu,
 * which reaches this file's state through cuda_internal.h. Device memory comes from one tracked
 * allocator that charges be->mem and samples the driver's view (cudaMemGetInfo). Every entry point
 * first makes the backend's GPU current, so backends on two GPUs can share a process. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cublasLt.h>
#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <cudnn.h>

#include "cuda_internal.h"

extern "C" {
#include "backend.h"
#include "backend_cuda.h"
#include "kernel_math.h"
#include "timer.h"
}

/* ---- error checking: every library call names itself, the file and the line ------------------ */

/* CU_CHECK (cuda_internal.h), running cleanup (which must not call ab_errorf) after the message is
 * recorded */
#define CU_CHECK_OR(call, cleanup)                                                                  \
    do {                                                                                            \
        const cudaError_t e_ = (call);                                                              \
        if (e_ != cudaSuccess) {                                                                    \
            const int rc_ = ab_errorf("%s failed at %s:%d: %s (%s)", #call, __FILE__, __LINE__,     \
                                      cudaGetErrorName(e_), cudaGetErrorString(e_));                \
            cleanup;                                                                                \
            return rc_;                                                                             \
        }                                                                                           \
    } while (0)

#define CUBLAS_CHECK(call)                                                                          \
    do {                                                                                            \
        const cublasStatus_t s_ = (call);                                                           \
        if (s_ != CUBLAS_STATUS_SUCCESS)                                                            \
            return ab_errorf("%s failed at %s:%d: %s", #call, __FILE__, __LINE__,                   \
                             cublasGetStatusName(s_));                                              \
    } while (0)

/* ---- state ---------------------------------------------------------------------------------- */

/* A BERT step asks for a few dozen distinct plans (counted from the call sites: five linear
 * shapes, each with its forward, dW with and without gradient accumulation and dx, times the
 * pointer alignments met, and attention's six batched products), near 32: the round-robin cache
 * would then rebuild plans every step. 64 holds them with room to spare. */
enum { GEMM_CACHE = 64, DATA_PAIRS = 64 };

/* what a GEMM's cuBLASLt plan depends on: shapes, types, epilogue, the batch (count and strides;
 * 1 and 0 for a plain gemm) and the alignment of every pointer the heuristic is told about (A, B,
 * C/D and the bias; for a batch, the alignment every product's matrices share). Compared with
 * memcmp: always memset first, and the static_assert below keeps the struct free of padding. */
typedef struct {
    int ta, tb, M, N, K, lda, ldb, ldc, at, bt, ct, epi, has_bias, beta_nz, batch;
    unsigned align_a, align_b, align_c, align_bias, pad_; /* pad_ (0): no compiler padding before sa */
    long long sa, sb, sc;
} gemm_key;
static_assert(sizeof(gemm_key) == 20 * sizeof(int) + 3 * sizeof(long long), "gemm_key has padding memcmp would read");

/* A cache slot. used: it holds a finished answer for key, positive (lt_ok: descriptors, layouts
 * and algorithm, all valid) or negative (lt_ok = 0: cuBLASLt has no algorithm, so the fallback is
 * taken without asking again). A slot is only ever filled with a complete answer. */
typedef struct {
    int used, lt_ok;
    gemm_key key;
    cublasLtMatmulDesc_t op;
    cublasLtMatrixLayout_t la, lb, lc;
    cublasLtMatmulAlgo_t algo;
} gemm_plan;

typedef struct {
    int device;
    cudaStream_t stream;
    cudnnHandle_t dnn;      /* made on first use (ab_cuda_dnn), bound to stream */
    ab_cuda_layers *layers; /* layers_cuda.cu's state, made on first use */
    cublasLtHandle_t lt;
    cublasHandle_t blas; /* cublasGemmStridedBatchedEx: the fallback that takes any alignment */
    void *lt_ws;         /* workspace of both, shared: they run on one stream */
    size_t lt_ws_bytes;
    float *acc; /* fp32 scratch for GEMMs whose epilogue or types cuBLASLt cannot express */
    size_t acc_bytes;
    void *cvt[2]; /* scratch for operands widened to fp32 (mixed input types) */
    size_t cvt_bytes[2];
    void *mv; /* scratch for a same-type cast between overlapping buffers */
    size_t mv_bytes;
    gemm_plan plans[GEMM_CACHE];
    int next_plan;
    /* what the GEMM engine did, printed to stderr when the backend ends if AB_CUDA_STATS is set:
     * calls, their host time (enqueueing, not running), plans built and the host time that took,
     * products by cuBLASLt, by the fallback, and calls whose operands were first widened */
    int stats; /* AB_CUDA_STATS set when the backend was made: only then are the GEMMs timed */
    long long n_gemm, n_lt, n_fallback, n_widen, n_plan_build;
    double host_gemm_s, host_plan_s;
    /* gather_normalize: idx (host) -> pinned staging ring -> device */
    int32_t *idx_host[2], *idx_dev[2];
    size_t idx_cap[2];
    cudaEvent_t idx_done[2];
    int idx_slot;
    /* data-time brackets, resolved lazily so timing never stalls the queue */
    cudaEvent_t dbeg[DATA_PAIRS], dend[DATA_PAIRS];
    int dpending[DATA_PAIRS];
    int dnext;
    double dsum_ms;
    char dmark_err[512]; /* the first failure inside data_mark (which cannot return one) */
    ab_device_info info;
} cuda_state;

static cuda_state *st_of(ab_backend *be) { return (cuda_state *)be->impl; }


/* Makes the backend's GPU current. The stream, the cuBLAS(Lt) handles and the memory belong to
 * it; a kernel or a library call issued while another GPU is current (a second backend, the nccl
 * engine, the caller) would go to the wrong device or fail. */
static int on_device(const cuda_state *st) {
    int cur = -1;
    CU_CHECK(cudaGetDevice(&cur));
    if (cur != st->device) CU_CHECK(cudaSetDevice(st->device));
    return 0;
}

/* for entry points that cannot return a status: the next checked call reports a failure */
static void on_device_quiet(const cuda_state *st) {
    if (on_device(st) != 0) (void)cudaGetLastError();
}

/* the driver's view of device memory in use (all processes), kept as a running maximum; the
 * backend's GPU is current (every caller has made it so) */
static void sample_driver_mem(cuda_state *st) {
    size_t free_b = 0, total_b = 0;
    if (cudaMemGetInfo(&free_b, &total_b) != cudaSuccess) {
        (void)cudaGetLastError();
        return;
    }
    const size_t used = total_b - free_b;
    if (used > st->info.mem_used_peak) st->info.mem_used_peak = used;
}

/* ---- memory --------------------------------------------------------------------------------- */

static void *cuda_alloc(ab_backend *be, ab_mem_category cat, size_t bytes) {
    if (on_device(st_of(be)) != 0) return NULL;
    if (ab_mem_admit(&be->mem, cat, bytes) != 0) return NULL;
    void *p = NULL;
    const cudaError_t e = cudaMalloc(&p, bytes ? bytes : 1);
    if (e == cudaErrorMemoryAllocation) { /* the device's own limit: recorded as --memory-limit's is */
        (void)cudaGetLastError();
        ab_mem_refused(&be->mem, cat, bytes, "cudaMalloc: out of memory");
        return NULL;
    }
    if (e != cudaSuccess) {
        ab_errorf("cudaMalloc(%zu bytes for %s) failed at %s:%d: %s", bytes, ab_mem_category_name(cat), __FILE__,
                  __LINE__, cudaGetErrorString(e));
        (void)cudaGetLastError();
        return NULL;
    }
    ab_mem_charge(&be->mem, cat, bytes);
    sample_driver_mem(st_of(be));
    return p;
}

static void cuda_release(ab_backend *be, ab_mem_category cat, void *p, size_t bytes) {
    if (!p) return;
    on_device_quiet(st_of(be));
    cudaFree(p); /* an error here leaves nothing to undo; a sticky one shows at the next call */
    ab_mem_release(&be->mem, cat, bytes);
}

/* workspace scratch that grows on demand (charged to workspace) */
static void *scratch(ab_backend *be, void **p, size_t *cap, size_t bytes) {
    if (*cap >= bytes) return *p;
    if (*p) { /* a queued kernel may still read the old buffer */
        const cudaError_t e = cudaStreamSynchronize(st_of(be)->stream);
        if (e != cudaSuccess) {
            ab_errorf("cudaStreamSynchronize before growing scratch failed at %s:%d: %s (%s)", __FILE__, __LINE__,
                      cudaGetErrorName(e), cudaGetErrorString(e));
            return NULL;
        }
    }
    cuda_release(be, AB_MEM_WORKSPACE, *p, *cap);
    *cap = 0;
    *p = cuda_alloc(be, AB_MEM_WORKSPACE, bytes);
    if (*p) *cap = bytes;
    return *p;
}

static int cuda_upload(ab_backend *be, void *dst, const void *host_src, size_t bytes) {
    cuda_state *st = st_of(be);
    if (!bytes) return 0;
    AB_TRY(on_device(st));
    CU_CHECK(cudaMemcpyAsync(dst, host_src, bytes, cudaMemcpyHostToDevice, st->stream));
    /* the host buffer may be gone once we return (a stack variable, say) */
    CU_CHECK(cudaStreamSynchronize(st->stream));
    return 0;
}

static int cuda_download(ab_backend *be, void *host_dst, const void *src, size_t bytes) {
    cuda_state *st = st_of(be);
    if (!bytes) return 0;
    AB_TRY(on_device(st));
    CU_CHECK(cudaMemcpyAsync(host_dst, src, bytes, cudaMemcpyDeviceToHost, st->stream));
    CU_CHECK(cudaStreamSynchronize(st->stream));
    return 0;
}

static int cuda_zero(ab_backend *be, void *p, size_t bytes) {
    cuda_state *st = st_of(be);
    if (!bytes) return 0;
    AB_TRY(on_device(st));
    CU_CHECK(cudaMemsetAsync(p, 0, bytes, st->stream));
    return 0;
}

static int cuda_sync(ab_backend *be) {
    cuda_state *st = st_of(be);
    AB_TRY(on_device(st));
    CU_CHECK(cudaStreamSynchronize(st->stream));
    sample_driver_mem(st);
    return 0;
}

static void *cuda_stream(ab_backend *be) { return st_of(be)->stream; }

/* The copy goes on the backend's stream and is waited for, as upload's: a plain cudaMemcpy from
 * pageable memory may return once the bytes are staged, before the DMA lands, and the backend's
 * stream is non-blocking, so a gather queued on it would not wait for the legacy stream. */
static int cuda_map_data(ab_backend *be, const void *host, size_t bytes, const void **mapped) {
    cuda_state *st = st_of(be);
    AB_TRY(on_device(st));
    void *p = NULL;
    CU_CHECK(cudaMalloc(&p, bytes ? bytes : 1));
    if (bytes) {
        CU_CHECK_OR(cudaMemcpyAsync(p, host, bytes, cudaMemcpyHostToDevice, st->stream), cudaFree(p));
        CU_CHECK_OR(cudaStreamSynchronize(st->stream), cudaFree(p));
    }
    st->info.data_bytes += bytes;
    sample_driver_mem(st);
    *mapped = p;
    return 0;
}

static void cuda_unmap_data(ab_backend *be, const void *mapped, size_t bytes) {
    if (!mapped) return;
    cuda_state *st = st_of(be);
    on_device_quiet(st);
    cudaFree((void *)mapped);
    st->info.data_bytes -= bytes < st->info.data_bytes ? bytes : st->info.data_bytes;
}

/* ---- element-wise kernels -------------------------------------------------------------------- */

__global__ void k_cast(size_t n, ab_dtype st, const void *src, ab_dtype dt, void *dst) {
    GRID_STRIDE(i, n) ab_store(dst, i, dt, ab_load(src, i, st));
}

/* with found_inf: set to 1 where a stored value is infinite or NaN (k_unscale_check's test) */
__global__ void k_accumulate(size_t n, ab_dtype st, const void *src, float *dst, int accumulate, int32_t *found_inf) {
    int bad = 0;
    GRID_STRIDE(i, n) {
        const float v = ab_load(src, i, st);
        const float d = accumulate ? dst[i] + v : v;
        dst[i] = d;
        bad |= !ab_is_finite(d);
    }
    if (found_inf && __any_sync(0xffffffffu, bad) && (threadIdx.x & 31) == 0) *found_inf = 1; /* same value */
}

/* relu on the stored bits, as the CPU backend does: fp32 keeps NaN; fp16/bf16 zero a set sign
 * bit unless the value is NaN */
__global__ void k_relu_f32(size_t n, const float *x, float *y) {
    GRID_STRIDE(i, n) {
        const float v = x[i];
        y[i] = v > 0.0f ? v : (v != v ? v : 0.0f);
    }
}

__global__ void k_relu_16(size_t n, uint16_t expmask, const uint16_t *x, uint16_t *y) {
    GRID_STRIDE(i, n) {
        const uint16_t h = x[i];
        const int nan = (h & expmask) == expmask && (h & (uint16_t)~expmask & 0x7fffu);
        y[i] = ((h & 0x8000u) && !nan) ? (uint16_t)0 : h;
    }
}

__global__ void k_relu_bwd_f32(size_t n, const float *y, const float *dy, float *dx) {
    GRID_STRIDE(i, n) dx[i] = y[i] > 0.0f ? dy[i] : 0.0f;
}

__global__ void k_relu_bwd_16(size_t n, uint16_t expmask, const uint16_t *y, const uint16_t *dy, uint16_t *dx) {
    GRID_STRIDE(i, n) {
        const uint16_t h = y[i];
        const int nan = (h & expmask) == expmask && (h & (uint16_t)~expmask & 0x7fffu);
        dx[i] = (!(h & 0x8000u) && h != 0 && !nan) ? dy[i] : (uint16_t)0;
    }
}

/* Column sums over a (CS_TX x CS_TY) block per CS_TX columns: thread (tx, ty) adds rows ty,
 * ty + CS_TY, ... of its column in fp32 (four loads in flight before the adds, whose order stays
 * the row order of the slice), and the slices are added in ty order: a fixed order, so every run
 * gives the same bits, though not the CPU's (row after row; test_backend_ops compares by NMSE). Reads
 * are coalesced across the columns of a row. One thread per column over all the rows, as this
 * kernel was, put BERT-base's bias gradients (4096 rows, 768 columns: three blocks) at 79% of an
 * AMP step's GPU time on an H200 (ncu, results/gpu/2026-12-04-h200-4's notes). */
enum { CS_TX = 32, CS_TY = 32 };

__global__ void __launch_bounds__(CS_TX * CS_TY) k_col_sum(int M, int N, ab_dtype xt, const void *X, float beta, ab_dtype ot, void *out) {
    __shared__ float s_part[CS_TY][CS_TX + 1];
    const int tx = threadIdx.x, ty = threadIdx.y, j = blockIdx.x * CS_TX + tx;
    float acc = 0.0f;
    if (j < N) {
        const size_t ld = (size_t)N, step = (size_t)CS_TY * ld;
        size_t o = (size_t)ty * ld + (size_t)j;
        int i = ty;
        for (; i + 3 * CS_TY < M; i += 4 * CS_TY, o += 4 * step) {
            const float a0 = ab_load(X, o, xt), a1 = ab_load(X, o + step, xt);
            const float a2 = ab_load(X, o + 2 * step, xt), a3 = ab_load(X, o + 3 * step, xt);
            acc += a0;
            acc += a1;
            acc += a2;
            acc += a3;
        }
        for (; i < M; i += CS_TY, o += step) acc += ab_load(X, o, xt);
    }
    s_part[ty][tx] = acc;
    __syncthreads();
    if (ty != 0 || j >= N) return;
    for (int r = 1; r < CS_TY; r++) acc += s_part[r][tx];
    const float v = beta != 0.0f ? acc + beta * ab_load(out, (size_t)j, ot) : acc;
    ab_store(out, (size_t)j, ot, v);
}

/* one thread per row through the shared ab_xent_row; the batch's loss and hits are summed per
 * warp, then one atomic each. A label outside [0, C) makes the row's loss NaN and, when dlogits
 * is given, every element of its dlogits row NaN, as the CPU backend does: in place, the raw
 * logits would otherwise be taken for the gradient. */
__global__ void k_softmax_xent(int B, int C, ab_dtype lt, const void *logits, const int32_t *labels, float gs,
                               ab_dtype dt, void *dlogits, float *loss_sum, int32_t *correct) {
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    float loss = 0.0f;
    int hit = 0;
    if (i < B) {
        const int y = labels[i];
        const size_t lsz = lt == AB_F32 ? 4 : 2, dsz = dt == AB_F32 ? 4 : 2;
        void *drow = dlogits ? (char *)dlogits + (size_t)i * C * dsz : NULL;
        if (y < 0 || y >= C) {
            loss = __int_as_float(0x7fc00000);
            if (drow)
                for (int j = 0; j < C; j++) ab_store(drow, (size_t)j, dt, loss);
        } else {
            int am;
            loss = ab_xent_row(C, lt, (const char *)logits + (size_t)i * C * lsz, y, gs, dt, drow, &am);
            hit = am == y;
        }
    }
    for (int o = 16; o > 0; o >>= 1) {
        loss += __shfl_down_sync(0xffffffffu, loss, o);
        hit += __shfl_down_sync(0xffffffffu, hit, o);
    }
    if ((threadIdx.x & 31) == 0) {
        atomicAdd(loss_sum, loss);
        if (correct) atomicAdd(correct, hit);
    }
}

__global__ void k_unscale_check(size_t n, float *g, float inv_scale, int32_t *found_inf) {
    int bad = 0;
    GRID_STRIDE(i, n) {
        const float v = g[i] * inv_scale;
        if (inv_scale != 1.0f) g[i] = v; /* at 1 the check alone: no stores */
        bad |= !ab_is_finite(v);
    }
    if (__any_sync(0xffffffffu, bad) && (threadIdx.x & 31) == 0) *found_inf = 1; /* same value: no race */
}

/* with wc: the updated weight also rounded into the working copy (k_cast's ab_store) */
__global__ void k_sgd(size_t n, float *w, const float *g, float *buf, float lr, float momentum, float wd, int first,
                      float gs, ab_dtype ct, void *wc) {
    GRID_STRIDE(i, n) {
        ab_sgd_update(&w[i], g[i] * gs, buf ? &buf[i] : NULL, lr, momentum, wd, first);
        if (wc) ab_store(wc, i, ct, w[i]);
    }
}

__global__ void k_adamw(size_t n, float *w, const float *g, float *m, float *v, float b1, float b2, float eps,
                        ab_adamw_scalars k, float gs, ab_dtype ct, void *wc) {
    GRID_STRIDE(i, n) {
        ab_adamw_update(&w[i], g[i] * gs, &m[i], &v[i], b1, b2, eps, k.decay, k.step_size, k.inv_bc2);
        if (wc) ab_store(wc, i, ct, w[i]);
    }
}

/* out[b, d] = (data[idx[b], d] / 255 - mean) / std: the expression of the CPU's table, so the
 * values are bit-identical */
__global__ void k_gather(int B, int D, const uint8_t *data, const uint8_t *labels, const int32_t *idx, float mean,
                         float std, ab_dtype ot, void *out, int32_t *labels_out) {
    const size_t n = (size_t)B * (size_t)D;
    GRID_STRIDE(i, n) {
        const int b = (int)(i / (size_t)D), d = (int)(i % (size_t)D);
        const int32_t s = idx[b];
        const float v = ((float)data[(size_t)s * (size_t)D + (size_t)d] / 255.0f - mean) / std;
        ab_store(out, i, ot, v);
        if (d == 0 && labels_out) labels_out[b] = labels[s];
    }
}

/* GEMM epilogue for the cases cuBLASLt cannot express: acc (fp32, batch products of [M,N] dense,
 * one after the other) -> C_z = epi(acc_z + bias) + beta * C_z, rounded once to ct; C_z starts
 * sc elements after C_(z-1) (sc >= 0) */
__global__ void k_gemm_finish(int M, int N, int batch, const float *acc, ab_dtype bt, const void *bias, int relu,
                              float beta, ab_dtype ct, void *C, int ldc, long long sc) {
    const size_t mn = (size_t)M * (size_t)N, n = mn * (size_t)batch;
    GRID_STRIDE(k, n) {
        const size_t z = k / mn, r = k % mn;
        const int i = (int)(r / (size_t)N), j = (int)(r % (size_t)N);
        float v = acc[k];
        if (bias) v += ab_load(bias, (size_t)j, bt);
        if (relu && v < 0.0f) v = 0.0f; /* the CPU's test: NaN and -0 stay as they are */
        const size_t off = z * (size_t)sc + (size_t)i * (size_t)ldc + (size_t)j;
        if (beta != 0.0f) v += beta * ab_load(C, off, ct);
        ab_store(C, off, ct, v);
    }
}

/* ---- launches of the element-wise ops ------------------------------------------------------- */

int ab_cuda_cast(ab_backend *be, size_t n, ab_dtype st, const void *src, ab_dtype dt, void *dst) {
    if (!n) return 0;
    cuda_state *cs = st_of(be);
    AB_TRY(on_device(cs));
    cudaStream_t s = cs->stream;
    if (st == dt) { /* a copy with memmove's meaning, as the CPU backend's */
        const size_t bytes = n * ab_dtype_size(st);
        const uintptr_t a = (uintptr_t)src, d = (uintptr_t)dst;
        if (a == d) return 0;
        if (a + bytes <= d || d + bytes <= a) {
            CU_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, s));
        } else { /* cudaMemcpy* leaves overlapping areas undefined: through scratch */
            void *tmp = scratch(be, &cs->mv, &cs->mv_bytes, bytes);
            if (!tmp) return -1;
            CU_CHECK(cudaMemcpyAsync(tmp, src, bytes, cudaMemcpyDeviceToDevice, s));
            CU_CHECK(cudaMemcpyAsync(dst, tmp, bytes, cudaMemcpyDeviceToDevice, s));
        }
        return 0;
    }
    k_cast<<<blocks_for(n), THREADS, 0, s>>>(n, st, src, dt, dst);
    LAUNCH_CHECK("k_cast");
    return 0;
}

int ab_cuda_accumulate(ab_backend *be, size_t n, ab_dtype st, const void *src, float *dst, int accumulate,
                       int32_t *found_inf) {
    if (!n) return 0;
    AB_TRY(on_device(st_of(be)));
    k_accumulate<<<blocks_for(n), THREADS, 0, st_of(be)->stream>>>(n, st, src, dst, accumulate, found_inf);
    LAUNCH_CHECK("k_accumulate");
    return 0;
}

static uint16_t expmask_of(ab_dtype t) { return t == AB_F16 ? (uint16_t)0x7c00u : (uint16_t)0x7f80u; }

int ab_cuda_relu_forward(ab_backend *be, size_t n, ab_dtype t, const void *x, void *y) {
    if (!n) return 0;
    AB_TRY(on_device(st_of(be)));
    cudaStream_t s = st_of(be)->stream;
    if (t == AB_F32)
        k_relu_f32<<<blocks_for(n), THREADS, 0, s>>>(n, (const float *)x, (float *)y);
    else
        k_relu_16<<<blocks_for(n), THREADS, 0, s>>>(n, expmask_of(t), (const uint16_t *)x, (uint16_t *)y);
    LAUNCH_CHECK("k_relu");
    return 0;
}

int ab_cuda_relu_backward(ab_backend *be, size_t n, ab_dtype t, const void *y, const void *dy, void *dx) {
    if (!n) return 0;
    AB_TRY(on_device(st_of(be)));
    cudaStream_t s = st_of(be)->stream;
    if (t == AB_F32)
        k_relu_bwd_f32<<<blocks_for(n), THREADS, 0, s>>>(n, (const float *)y, (const float *)dy, (float *)dx);
    else
        k_relu_bwd_16<<<blocks_for(n), THREADS, 0, s>>>(n, expmask_of(t), (const uint16_t *)y, (const uint16_t *)dy,
                                                         (uint16_t *)dx);
    LAUNCH_CHECK("k_relu_bwd");
    return 0;
}

int ab_cuda_col_sum(ab_backend *be, int M, int N, ab_dtype xt, const void *X, float beta, ab_dtype ot, void *out) {
    if (M <= 0 || N <= 0) return ab_errorf("col_sum: bad shape M=%d N=%d", M, N);
    AB_TRY(on_device(st_of(be)));
    k_col_sum<<<(unsigned)((N + CS_TX - 1) / CS_TX), dim3(CS_TX, CS_TY), 0, st_of(be)->stream>>>(M, N, xt, X, beta, ot,
                                                                                                 out);
    LAUNCH_CHECK("k_col_sum");
    return 0;
}

int ab_cuda_softmax_xent(ab_backend *be, int B, int C, ab_dtype lt, const void *logits, const int32_t *labels,
                         float grad_scale, ab_dtype dt, void *dlogits, float *loss_sum, int32_t *correct) {
    if (B <= 0 || C <= 0) return ab_errorf("softmax_xent: bad shape B=%d C=%d", B, C);
    AB_TRY(on_device(st_of(be)));
    const unsigned blocks = (unsigned)((B + THREADS - 1) / THREADS);
    k_softmax_xent<<<blocks, THREADS, 0, st_of(be)->stream>>>(B, C, lt, logits, labels, grad_scale / (float)B, dt,
                                                               dlogits, loss_sum, correct);
    LAUNCH_CHECK("k_softmax_xent");
    return 0;
}

int ab_cuda_unscale_check(ab_backend *be, size_t n, float *g, float inv_scale, int32_t *found_inf, float *sum_sq) {
    if (sum_sq) return ab_cuda_unscale_squares(be, n, g, inv_scale, found_inf, sum_sq);
    if (!n) return 0;
    AB_TRY(on_device(st_of(be)));
    k_unscale_check<<<blocks_for(n), THREADS, 0, st_of(be)->stream>>>(n, g, inv_scale, found_inf);
    LAUNCH_CHECK("k_unscale_check");
    return 0;
}

/* The census histogram (core/backend.h's log2_hist): each warp counts into its own copy of the bins
 * in shared memory (fewer threads contending for one address: most gradients share a few exponents),
 * the block adds its copies and makes one 64-bit atomicAdd per non-empty bin into counts. The grid is
 * capped at LOG2_HIST_BLOCKS, so the global atomics stay a few per bin and block whatever n is; the
 * grid-stride loop covers the rest. Shared counters are 32-bit: a warp's copy counts at most
 * 32 * ceil(n / (blocks * THREADS)) values, below 2^32 for any n under 2^45. */
enum { LOG2_HIST_BLOCKS = 1024 };

__global__ void k_log2_hist(size_t n, ab_dtype t, const void *x, int log2_min, int nbins,
                            unsigned long long *counts) {
    extern __shared__ unsigned int s_hist[]; /* (THREADS / 32, nbins + 2) */
    const int slots = nbins + 2, warps = (int)(blockDim.x / 32);
    for (int b = threadIdx.x; b < warps * slots; b += blockDim.x) s_hist[b] = 0;
    __syncthreads();
    unsigned int *mine = s_hist + (threadIdx.x / 32) * slots;
    GRID_STRIDE(i, n) atomicAdd(&mine[ab_log2_slot(ab_load(x, i, t), log2_min, nbins)], 1u);
    __syncthreads();
    for (int b = threadIdx.x; b < slots; b += blockDim.x) {
        unsigned long long c = 0;
        for (int w = 0; w < warps; w++) c += s_hist[w * slots + b];
        if (c) atomicAdd(&counts[b], c);
    }
}

int ab_cuda_log2_hist(ab_backend *be, size_t n, ab_dtype t, const void *x, int log2_min, int nbins, int64_t *counts) {
    if (nbins < 1 || nbins > AB_LOG2_HIST_MAX_BINS || log2_min < -256 || log2_min > 256)
        return ab_errorf("log2_hist: nbins %d or log2_min %d out of range", nbins, log2_min);
    if (!dtype_ok(t)) return ab_errorf("log2_hist: unknown element type %d", (int)t);
    if (!n) return 0;
    if (!x || !counts) return ab_errorf("log2_hist: NULL argument");
    AB_TRY(on_device(st_of(be)));
    unsigned blocks = blocks_for(n);
    if (blocks > LOG2_HIST_BLOCKS) blocks = LOG2_HIST_BLOCKS;
    const size_t shared = (size_t)(THREADS / 32) * (size_t)(nbins + 2) * sizeof(unsigned int);
    static_assert(sizeof(unsigned long long) == sizeof(int64_t), "64-bit atomics on int64 counts");
    k_log2_hist<<<blocks, THREADS, shared, st_of(be)->stream>>>(n, t, x, log2_min, nbins,
                                                                 reinterpret_cast<unsigned long long *>(counts));
    LAUNCH_CHECK("k_log2_hist");
    return 0;
}

int ab_cuda_sgd_step(ab_backend *be, size_t n, float *w, const float *g, float *buf, float lr, float momentum,
                     float weight_decay, int first_step, float grad_scale, ab_dtype ct, void *wc) {
    if (wc && ct != AB_F16 && ct != AB_BF16) return ab_errorf("sgd_step: a working copy of type %d", (int)ct);
    if (!n) return 0;
    AB_TRY(on_device(st_of(be)));
    k_sgd<<<blocks_for(n), THREADS, 0, st_of(be)->stream>>>(n, w, g, momentum != 0.0f ? buf : NULL, lr, momentum,
                                                             weight_decay, first_step, grad_scale, ct, wc);
    LAUNCH_CHECK("k_sgd");
    return 0;
}

int ab_cuda_adamw_step(ab_backend *be, size_t n, float *w, const float *g, float *m, float *v, float lr, float beta1,
                       float beta2, float eps, float weight_decay, int step, float grad_scale, ab_dtype ct,
                       void *wc) {
    if (wc && ct != AB_F16 && ct != AB_BF16) return ab_errorf("adamw_step: a working copy of type %d", (int)ct);
    if (!n) return 0;
    AB_TRY(on_device(st_of(be)));
    /* the step's scalars on the host, as the CPU backend computes them */
    const ab_adamw_scalars k = ab_adamw_scalars_at(lr, beta1, beta2, weight_decay, step);
    k_adamw<<<blocks_for(n), THREADS, 0, st_of(be)->stream>>>(n, w, g, m, v, beta1, beta2, eps, k, grad_scale, ct,
                                                               wc);
    LAUNCH_CHECK("k_adamw");
    return 0;
}

/* pinned staging slot able to hold B indices (host, pinned) and their device copy (tracked, as
 * workspace); waits for the slot's previous copy first */
static int idx_slot_get(ab_backend *be, int B, int *slot) {
    cuda_state *st = st_of(be);
    const int k = st->idx_slot;
    st->idx_slot ^= 1;
    CU_CHECK(cudaEventSynchronize(st->idx_done[k]));
    const size_t bytes = (size_t)B * sizeof(int32_t);
    if (st->idx_cap[k] < bytes) {
        CU_CHECK(cudaStreamSynchronize(st->stream)); /* a gather may still read the old device copy */
        if (st->idx_host[k]) CU_CHECK(cudaFreeHost(st->idx_host[k]));
        cuda_release(be, AB_MEM_WORKSPACE, st->idx_dev[k], st->idx_cap[k]);
        st->idx_host[k] = NULL;
        st->idx_dev[k] = NULL;
        st->idx_cap[k] = 0;
        CU_CHECK(cudaMallocHost((void **)&st->idx_host[k], bytes));
        if (!(st->idx_dev[k] = (int32_t *)cuda_alloc(be, AB_MEM_WORKSPACE, bytes))) return -1;
        st->idx_cap[k] = bytes;
    }
    *slot = k;
    return 0;
}

/* a (na ints) then b (nb ints) through the next slot of the staging ring: host arrays -> pinned
 * slot -> the slot's device copy, queued on the stream (cuda_internal.h, ab_cuda_stage_ints). The
 * slot's event, recorded after the copy, guards the pinned bytes until the DMA has read them; the
 * device copy is next overwritten by a copy queued behind every kernel queued before it. */
static int stage_ints(ab_backend *be, const int32_t *a, int na, const int32_t *b, int nb, const int32_t **dev) {
    cuda_state *st = st_of(be);
    if (na < 0 || nb < 0 || na + nb < 1 || (na > 0 && !a) || (nb > 0 && !b))
        return ab_errorf("staging host indices: bad arguments (%d + %d ints)", na, nb);
    const int n = na + nb;
    int k = 0;
    AB_TRY(idx_slot_get(be, n, &k));
    if (na) memcpy(st->idx_host[k], a, (size_t)na * sizeof(int32_t));
    if (nb) memcpy(st->idx_host[k] + na, b, (size_t)nb * sizeof(int32_t));
    CU_CHECK(cudaMemcpyAsync(st->idx_dev[k], st->idx_host[k], (size_t)n * sizeof(int32_t), cudaMemcpyHostToDevice,
                             st->stream));
    CU_CHECK(cudaEventRecord(st->idx_done[k], st->stream));
    *dev = st->idx_dev[k];
    return 0;
}

int ab_cuda_gather_normalize(ab_backend *be, int B, int D, const uint8_t *data, const uint8_t *labels,
                             const int32_t *idx, float mean, float std, ab_dtype ot, void *out, int32_t *labels_out) {
    if (B <= 0 || D <= 0) return ab_errorf("gather_normalize: bad shape B=%d D=%d", B, D);
    cuda_state *st = st_of(be);
    AB_TRY(on_device(st));
    const int32_t *idx_dev = NULL;
    AB_TRY(stage_ints(be, idx, B, NULL, 0, &idx_dev));
    const size_t n = (size_t)B * (size_t)D;
    k_gather<<<blocks_for(n), THREADS, 0, st->stream>>>(B, D, data, labels, idx_dev, mean, std, ot, out, labels_out);
    LAUNCH_CHECK("k_gather");
    return 0;
}

/* ---- what layers_cuda.cu needs (cuda_internal.h) -------------------------------------------- */

int ab_cuda_use_device(ab_backend *be) { return on_device(st_of(be)); }
cudaStream_t ab_cuda_stream(ab_backend *be) { return st_of(be)->stream; }
ab_cuda_layers **ab_cuda_layers_slot(ab_backend *be) { return &st_of(be)->layers; }

/* Made on first use, so that a build whose cuDNN cannot start still trains the MLP (which needs
 * none of it). cudnnCreate binds the handle to the current device, which on_device makes the
 * backend's; cudnnSetStream queues every cuDNN call on the backend's one stream. */
cudnnHandle_t ab_cuda_dnn(ab_backend *be) {
    cuda_state *st = st_of(be);
    if (st->dnn) return st->dnn;
    if (on_device(st) != 0) return NULL;
    cudnnHandle_t h = NULL;
    cudnnStatus_t s = cudnnCreate(&h);
    if (s == CUDNN_STATUS_SUCCESS) {
        s = cudnnSetStream(h, st->stream);
        if (s != CUDNN_STATUS_SUCCESS) cudnnDestroy(h);
    }
    if (s != CUDNN_STATUS_SUCCESS) {
        char m[256];
        cudnnGetLastErrorString(m, sizeof m);
        ab_errorf("%s failed at %s:%d: %s (%s)", h ? "cudnnSetStream" : "cudnnCreate", __FILE__, __LINE__,
                  cudnnGetErrorString(s), m);
        return NULL;
    }
    st->dnn = h;
    return h;
}

int ab_cuda_stage_ints(ab_backend *be, const int32_t *a, int na, const int32_t *b, int nb, const int32_t **dev) {
    AB_TRY(on_device(st_of(be)));
    return stage_ints(be, a, na, b, nb, dev);
}

/* ---- GEMM ----------------------------------------------------------------------------------- */

static cudaDataType_t lt_type(ab_dtype t) {
    return t == AB_F16 ? CUDA_R_16F : t == AB_BF16 ? CUDA_R_16BF : CUDA_R_32F;
}

/* largest power of two (<= 256) dividing the address: cuBLASLt assumes 256 unless told */
static unsigned align_of(const void *p) {
    const uintptr_t a = (uintptr_t)p;
    unsigned al = 256;
    while (al > 1 && (a % al) != 0) al >>= 1;
    return al;
}

/* the alignment every product of a strided batch shares: product z starts at p + z * stride
 * elements of es bytes, so the base's alignment and the stride's bytes' both bound it (the
 * heuristic is told about the base pointer only) */
static unsigned align_batch(const void *p, long long stride, size_t es, int batch) {
    unsigned al = align_of(p);
    if (batch > 1 && stride != 0) {
        const unsigned as = align_of((const void *)(uintptr_t)((unsigned long long)stride * es));
        if (as < al) al = as;
    }
    return al;
}

/* destroys what a plan holds (any of it may be NULL) and leaves it without an algorithm */
static void plan_release(gemm_plan *p) {
    if (p->op) cublasLtMatmulDescDestroy(p->op);
    if (p->la) cublasLtMatrixLayoutDestroy(p->la);
    if (p->lb) cublasLtMatrixLayoutDestroy(p->lb);
    if (p->lc) cublasLtMatrixLayoutDestroy(p->lc);
    p->op = NULL;
    p->la = p->lb = p->lc = NULL;
    p->lt_ok = 0;
}

/* Column-major view: Dcol[N,M] = opA'(Bbuf) * opB'(Abuf), with opA' = tb, opB' = ta.
 * Fills p (not yet in the cache) for key, bias being the bias pointer of the call that asks.
 * 0: p->lt_ok says whether cuBLASLt has an algorithm; "not supported" or no result from the
 * heuristic is such an answer (lt_ok = 0, nothing held), to be cached like a positive one.
 * -1 (ab_error): any other failure, a mistake in the set-up that must be seen, not routed to the
 * fallback; p holds nothing then either. */
/* The plan's descriptors: the operation (fp32 compute, transposes, epilogue, the bias pointer)
 * and the three layouts. cuBLASLt's RELU epilogues keep NaN as the CPU backend does (the device
 * pass of test_backend_ops plants NaN in the MLP's fc1 forward, beta 0 and a bias: it passed on
 * the H200, results/gpu/2026-12-04-h200-2). *epi gets the epilogue, for messages. */
static int plan_describe(const gemm_key *key, const void *bias, gemm_plan *p, cublasLtEpilogue_t *epi) {
    const cudaDataType_t in_t = lt_type((ab_dtype)key->at), c_t = lt_type((ab_dtype)key->ct);
    CUBLAS_CHECK(cublasLtMatmulDescCreate(&p->op, CUBLAS_COMPUTE_32F, CUDA_R_32F));
    const cublasOperation_t opa = key->tb ? CUBLAS_OP_T : CUBLAS_OP_N, opb = key->ta ? CUBLAS_OP_T : CUBLAS_OP_N;
    CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(p->op, CUBLASLT_MATMUL_DESC_TRANSA, &opa, sizeof opa));
    CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(p->op, CUBLASLT_MATMUL_DESC_TRANSB, &opb, sizeof opb));
    *epi = CUBLASLT_EPILOGUE_DEFAULT;
    if (key->has_bias)
        *epi = key->epi == AB_EPI_RELU ? CUBLASLT_EPILOGUE_RELU_BIAS : CUBLASLT_EPILOGUE_BIAS;
    else if (key->epi == AB_EPI_RELU)
        *epi = CUBLASLT_EPILOGUE_RELU;
    CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(p->op, CUBLASLT_MATMUL_DESC_EPILOGUE, epi, sizeof *epi));
    /* the heuristic reads the bias pointer's value to learn its alignment (cublasLt.h, BIAS_POINTER):
     * it must see the real one; align_bias in the key keeps the plan to biases aligned alike */
    if (key->has_bias)
        CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(p->op, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias, sizeof bias));
    /* stored shapes (column-major): Bbuf is [N,K] (tb = 0) or [K,N]; Abuf is [K,M] (ta = 0) or [M,K] */
    CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&p->la, in_t, key->tb ? key->K : key->N, key->tb ? key->N : key->K, key->ldb));
    CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&p->lb, in_t, key->ta ? key->M : key->K, key->ta ? key->K : key->M, key->lda));
    CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&p->lc, c_t, key->N, key->M, key->ldc));
    if (key->batch > 1) { /* strided batch: each layout says the count and its own stride (elements) */
        const int32_t count = key->batch;
        const int64_t stride[3] = {key->sb, key->sa, key->sc}; /* Lt's A is our B, Lt's B our A */
        cublasLtMatrixLayout_t lay[3] = {p->la, p->lb, p->lc};
        for (int i = 0; i < 3; i++) {
            CUBLAS_CHECK(cublasLtMatrixLayoutSetAttribute(lay[i], CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &count,
                                                          sizeof count));
            CUBLAS_CHECK(cublasLtMatrixLayoutSetAttribute(lay[i], CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET,
                                                          &stride[i], sizeof stride[i]));
        }
    }
    return 0;
}

static int plan_build_into(cuda_state *st, const gemm_key *key, const void *bias, gemm_plan *p) {
    cublasLtEpilogue_t epi;
    AB_TRY(plan_describe(key, bias, p, &epi));
    cublasLtMatmulPreference_t pref = NULL;
    CUBLAS_CHECK(cublasLtMatmulPreferenceCreate(&pref));
    cublasLtMatmulHeuristicResult_t res;
    memset(&res, 0, sizeof res);
    int found = 0, asked = 0;
    const uint32_t a_al = key->align_b, b_al = key->align_a, c_al = key->align_c; /* Lt's A is our B */
    const uint64_t ws = st->lt_ws_bytes;
    /* A split-K product may add its partial sums "in place" in the output buffer or in output-type
     * scratch (cublasLt.h, cublasLtReductionScheme_t): for an fp16/bf16 output that rounds every
     * partial sum, not once. Only the compute-type (fp32) reduction, or none, is the op's contract. */
    const uint32_t red = CUBLASLT_REDUCTION_SCHEME_NONE | CUBLASLT_REDUCTION_SCHEME_COMPUTE_TYPE;
    const struct {
        cublasLtMatmulPreferenceAttributes_t attr;
        const void *value;
        size_t size;
        const char *call;
        int wanted;
    } prefs[] = {
        {CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof ws,
         "cublasLtMatmulPreferenceSetAttribute(MAX_WORKSPACE_BYTES)", 1},
        {CUBLASLT_MATMUL_PREF_REDUCTION_SCHEME_MASK, &red, sizeof red,
         "cublasLtMatmulPreferenceSetAttribute(REDUCTION_SCHEME_MASK)", key->ct != AB_F32},
        {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, &a_al, sizeof a_al,
         "cublasLtMatmulPreferenceSetAttribute(MIN_ALIGNMENT_A_BYTES)", 1},
        {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, &b_al, sizeof b_al,
         "cublasLtMatmulPreferenceSetAttribute(MIN_ALIGNMENT_B_BYTES)", 1},
        {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, &c_al, sizeof c_al,
         "cublasLtMatmulPreferenceSetAttribute(MIN_ALIGNMENT_C_BYTES)", 1},
        {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, &c_al, sizeof c_al,
         "cublasLtMatmulPreferenceSetAttribute(MIN_ALIGNMENT_D_BYTES)", 1},
    };
    cublasStatus_t s = CUBLAS_STATUS_SUCCESS;
    const char *call = "";
    for (size_t i = 0; s == CUBLAS_STATUS_SUCCESS && i < sizeof prefs / sizeof prefs[0]; i++)
        if (prefs[i].wanted) {
            call = prefs[i].call;
            s = cublasLtMatmulPreferenceSetAttribute(pref, prefs[i].attr, prefs[i].value, prefs[i].size);
        }
    if (s == CUBLAS_STATUS_SUCCESS) {
        call = "cublasLtMatmulAlgoGetHeuristic";
        asked = 1;
        s = cublasLtMatmulAlgoGetHeuristic(st->lt, p->op, p->la, p->lb, p->lc, p->lc, pref, 1, &res, &found);
    }
    cublasLtMatmulPreferenceDestroy(pref);
    if (asked && (s == CUBLAS_STATUS_NOT_SUPPORTED ||
                  (s == CUBLAS_STATUS_SUCCESS && (found < 1 || res.state != CUBLAS_STATUS_SUCCESS)))) {
        plan_release(p); /* a negative answer: cuBLASLt has no kernel for this case */
        return 0;
    }
    if (s != CUBLAS_STATUS_SUCCESS)
        return ab_errorf("%s failed at %s:%d for M=%d N=%d K=%d (%s x %s -> %s, epilogue %d): %s", call, __FILE__,
                         __LINE__, key->M, key->N, key->K, ab_dtype_name((ab_dtype)key->at),
                         ab_dtype_name((ab_dtype)key->bt), ab_dtype_name((ab_dtype)key->ct), (int)epi,
                         cublasGetStatusName(s));
    p->algo = res.algo;
    p->lt_ok = 1;
    return 0;
}

/* The cached answer for key, or a new one built and cached. A slot is filled only with a complete
 * answer; a failed build leaves the cache as it was. */
static int plan_get(cuda_state *st, const gemm_key *key, const void *bias, gemm_plan **out) {
    for (int i = 0; i < GEMM_CACHE; i++) {
        gemm_plan *p = &st->plans[i];
        if (p->used && memcmp(&p->key, key, sizeof *key) == 0) {
            *out = p;
            return 0;
        }
    }
    gemm_plan fresh;
    memset(&fresh, 0, sizeof fresh);
    fresh.key = *key;
    const double t0 = st->stats ? ab_now() : 0.0;
    const int built = plan_build_into(st, key, bias, &fresh);
    st->n_plan_build++;
    if (st->stats) st->host_plan_s += ab_now() - t0;
    if (built != 0) {
        plan_release(&fresh);
        return -1;
    }
    gemm_plan *p = &st->plans[st->next_plan];
    st->next_plan = (st->next_plan + 1) % GEMM_CACHE;
    plan_release(p); /* descriptors are host-side: a matmul already queued with them is unaffected */
    *p = fresh;
    p->used = 1;
    *out = p;
    return 0;
}

/* 0, -1 (ab_error), or -2: cuBLASLt has no algorithm for this case (now known and cached): the
 * caller takes the cublasGemmStridedBatchedEx path */
static int lt_matmul(ab_backend *be, const gemm_key *key, float alpha, const void *A, const void *B, const void *bias,
                     float beta, void *C) {
    cuda_state *st = st_of(be);
    gemm_plan *p = NULL;
    AB_TRY(plan_get(st, key, bias, &p));
    if (!p->lt_ok) return -2;
    if (key->has_bias)
        CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(p->op, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias, sizeof bias));
    const cublasStatus_t s = cublasLtMatmul(st->lt, p->op, &alpha, B, p->la, A, p->lb, &beta, C, p->lc, C, p->lc,
                                            &p->algo, st->lt_ws, st->lt_ws_bytes, st->stream);
    if (s == CUBLAS_STATUS_NOT_SUPPORTED) { /* nothing was launched: the plan becomes a negative answer */
        plan_release(p);
        return -2;
    }
    if (s != CUBLAS_STATUS_SUCCESS)
        return ab_errorf("cublasLtMatmul failed at %s:%d for M=%d N=%d K=%d (%s x %s -> %s): %s", __FILE__, __LINE__,
                         key->M, key->N, key->K, ab_dtype_name((ab_dtype)key->at), ab_dtype_name((ab_dtype)key->bt),
                         ab_dtype_name((ab_dtype)key->ct), cublasGetStatusName(s));
    return 0;
}

/* The product engine of gemm and gemm_batched (cuda_internal.h): batch products
 * C_z = epi(alpha op(A_z) op(B_z) + bias) + beta C_z, X_z = X + z * sx elements, strides >= 0
 * (a plain gemm: batch 1, strides 0). Column-major view, as plan_build_into's comment says. */
static int gemm_strided_(ab_backend *be, int ta, int tb, int M, int N, int K, float alpha, ab_dtype at, const void *A,
                         int lda, long long sa, ab_dtype bt, const void *B, int ldb, long long sb, const void *bias,
                         ab_epilogue epi, float beta, ab_dtype ct, void *C, int ldc, long long sc, int batch) {
    if (M <= 0 || N <= 0 || K <= 0 || batch < 1)
        return ab_errorf("gemm: bad shape M=%d N=%d K=%d batch %d", M, N, K, batch);
    if (batch == 1) sa = sb = sc = 0; /* one product: the strides mean nothing */
    if (sa < 0 || sb < 0 || sc < 0) /* gemm_batched runs such batches one product at a time */
        return ab_errorf("gemm: negative batch stride (%lld, %lld, %lld)", sa, sb, sc);
    cuda_state *st = st_of(be);
    AB_TRY(on_device(st));
    const ab_dtype bias_t = bt; /* the bias is stored in B's type (backend.h) */
    /* mixed input types: widen both to fp32 first (cuBLASLt wants A and B of one type); the whole
     * batch's extent, so the strides and leading dimensions stay as they are, in elements */
    if (at != bt) {
        const size_t na =
            (size_t)(batch - 1) * (size_t)sa + (size_t)((ta ? K : M) - 1) * (size_t)lda + (size_t)(ta ? M : K);
        const size_t nb =
            (size_t)(batch - 1) * (size_t)sb + (size_t)((tb ? N : K) - 1) * (size_t)ldb + (size_t)(tb ? K : N);
        void *wa = scratch(be, &st->cvt[0], &st->cvt_bytes[0], na * sizeof(float));
        void *wb = scratch(be, &st->cvt[1], &st->cvt_bytes[1], nb * sizeof(float));
        if (!wa || !wb) return -1;
        AB_TRY(ab_cuda_cast(be, na, at, A, AB_F32, wa));
        AB_TRY(ab_cuda_cast(be, nb, bt, B, AB_F32, wb));
        st->n_widen++;
        A = wa;
        B = wb;
        at = bt = AB_F32;
    }
    /* What cuBLASLt computes is D = epi(alpha AB + beta C + bias): it matches the op when there is
     * no ReLU or beta is 0, the output type is the input type or fp32, and the bias is of the
     * output type (cuBLASLt's default bias type) and 16-byte aligned. Otherwise, or when cuBLASLt
     * has no algorithm: the product in fp32 scratch, then our epilogue kernel. (Whether cuBLASLt's
     * ReLU keeps NaN as ours does: see plan_describe.) */
    const int out_ok = ct == at || ct == AB_F32;
    const int bias_ok = !bias || (bias_t == ct && align_of(bias) >= 16);
    const int direct = out_ok && bias_ok && !(epi == AB_EPI_RELU && beta != 0.0f);
    if (direct) {
        gemm_key key;
        memset(&key, 0, sizeof key);
        key.ta = ta, key.tb = tb, key.M = M, key.N = N, key.K = K, key.lda = lda, key.ldb = ldb, key.ldc = ldc;
        key.at = at, key.bt = bt, key.ct = ct, key.epi = epi, key.has_bias = bias != NULL, key.beta_nz = beta != 0.0f;
        key.batch = batch, key.sa = sa, key.sb = sb, key.sc = sc;
        key.align_a = align_batch(A, sa, ab_dtype_size(at), batch);
        key.align_b = align_batch(B, sb, ab_dtype_size(bt), batch);
        key.align_c = align_batch(C, sc, ab_dtype_size(ct), batch);
        key.align_bias = bias ? align_of(bias) : 0;
        const int rc = lt_matmul(be, &key, alpha, A, B, bias, beta, C);
        if (rc != -2) {
            st->n_lt += rc == 0;
            return rc;
        }
    }
    st->n_fallback++;
    /* fallback: cublasGemmStridedBatchedEx (any alignment, fp32 compute, default math mode: no
     * TF32) into fp32 scratch, the products dense one after the other, then our epilogue */
    const size_t mn = (size_t)M * (size_t)N, n = mn * (size_t)batch;
    float *acc = (float *)scratch(be, (void **)&st->acc, &st->acc_bytes, n * sizeof(float));
    if (!acc) return -1;
    const float zero = 0.0f;
    CUBLAS_CHECK(cublasGemmStridedBatchedEx(st->blas, tb ? CUBLAS_OP_T : CUBLAS_OP_N, ta ? CUBLAS_OP_T : CUBLAS_OP_N, N,
                                            M, K, &alpha, B, lt_type(bt), ldb, sb, A, lt_type(at), lda, sa, &zero, acc,
                                            CUDA_R_32F, N, (long long)mn, batch, CUBLAS_COMPUTE_32F,
                                            CUBLAS_GEMM_DEFAULT));
    k_gemm_finish<<<blocks_for(n), THREADS, 0, st->stream>>>(M, N, batch, acc, bias_t, bias, epi == AB_EPI_RELU, beta,
                                                             ct, C, ldc, sc);
    LAUNCH_CHECK("k_gemm_finish");
    return 0;
}

static int gemm_strided(ab_backend *be, int ta, int tb, int M, int N, int K, float alpha, ab_dtype at, const void *A,
                        int lda, long long sa, ab_dtype bt, const void *B, int ldb, long long sb, const void *bias,
                        ab_epilogue epi, float beta, ab_dtype ct, void *C, int ldc, long long sc, int batch) {
    cuda_state *st = st_of(be);
    if (!st->stats) /* the step's path: no clock reads unless asked */
        return gemm_strided_(be, ta, tb, M, N, K, alpha, at, A, lda, sa, bt, B, ldb, sb, bias, epi, beta, ct, C, ldc,
                             sc, batch);
    const double t0 = ab_now();
    const int rc = gemm_strided_(be, ta, tb, M, N, K, alpha, at, A, lda, sa, bt, B, ldb, sb, bias, epi, beta, ct, C,
                                 ldc, sc, batch);
    st->n_gemm++;
    st->host_gemm_s += ab_now() - t0;
    return rc;
}

int ab_cuda_gemm(ab_backend *be, int ta, int tb, int M, int N, int K, float alpha, ab_dtype at, const void *A, int lda,
                 ab_dtype bt, const void *B, int ldb, const void *bias, ab_epilogue epi, float beta, ab_dtype ct,
                 void *C, int ldc) {
    if (M <= 0 || N <= 0 || K <= 0) return ab_errorf("gemm: bad shape M=%d N=%d K=%d", M, N, K);
    return gemm_strided(be, ta, tb, M, N, K, alpha, at, A, lda, 0, bt, B, ldb, 0, bias, epi, beta, ct, C, ldc, 0, 1);
}

/* the product rounded into ws (ct), then folded into the fp32 gradient: the two kernels the op
 * list's definition names, on the backend's stream */
int ab_cuda_gemm_fold(ab_backend *be, int ta, int tb, int M, int N, int K, ab_dtype at, const void *A, int lda,
                      ab_dtype bt, const void *B, int ldb, ab_dtype ct, void *ws, float *G, int accumulate,
                      int32_t *found_inf) {
    AB_TRY(ab_cuda_gemm(be, ta, tb, M, N, K, 1.0f, at, A, lda, bt, B, ldb, NULL, AB_EPI_NONE, 0.0f, ct, ws, N));
    return ab_cuda_accumulate(be, (size_t)M * (size_t)N, ct, ws, G, accumulate, found_inf);
}

int ab_cuda_gemm_strided(ab_backend *be, int ta, int tb, int M, int N, int K, float alpha, ab_dtype at, const void *A,
                         int lda, long long sa, ab_dtype bt, const void *B, int ldb, long long sb, float beta,
                         ab_dtype ct, void *C, int ldc, long long sc, int batch) {
    return gemm_strided(be, ta, tb, M, N, K, alpha, at, A, lda, sa, bt, B, ldb, sb, NULL, AB_EPI_NONE, beta, ct, C, ldc,
                        sc, batch);
}

/* ---- timing and description ----------------------------------------------------------------- */

static int data_pair_resolve(cuda_state *st, int k) {
    if (!st->dpending[k]) return 0;
    CU_CHECK(cudaEventSynchronize(st->dend[k]));
    float ms = 0.0f;
    CU_CHECK(cudaEventElapsedTime(&ms, st->dbeg[k], st->dend[k]));
    st->dsum_ms += ms;
    st->dpending[k] = 0;
    return 0;
}

static int data_mark_record(cuda_state *st, int begin) {
    const int k = st->dnext;
    if (begin) {
        /* by the time a slot comes round again its pair finished long ago: no real wait */
        AB_TRY(data_pair_resolve(st, k));
        CU_CHECK(cudaEventRecord(st->dbeg[k], st->stream));
    } else {
        CU_CHECK(cudaEventRecord(st->dend[k], st->stream));
        st->dpending[k] = 1;
        st->dnext = (k + 1) % DATA_PAIRS;
    }
    return 0;
}

static void cuda_data_mark(ab_backend *be, int begin) {
    cuda_state *st = st_of(be);
    if ((on_device(st) != 0 || data_mark_record(st, begin) != 0) && !st->dmark_err[0])
        snprintf(st->dmark_err, sizeof st->dmark_err, "%s", ab_error()); /* reported by data_time */
}

static int cuda_data_time(ab_backend *be, double *seconds) {
    cuda_state *st = st_of(be);
    if (st->dmark_err[0]) return ab_errorf("timing batch assembly: %s", st->dmark_err);
    AB_TRY(on_device(st));
    for (int k = 0; k < DATA_PAIRS; k++) AB_TRY(data_pair_resolve(st, k));
    *seconds = st->dsum_ms * 1e-3;
    st->dsum_ms = 0.0;
    return 0;
}

static int cuda_describe(ab_backend *be, ab_device_info *info) {
    cuda_state *st = st_of(be);
    AB_TRY(on_device(st));
    sample_driver_mem(st);
    *info = st->info;
    return 0;
}

/* ---- life cycle ----------------------------------------------------------------------------- */

static void cuda_destroy(ab_backend *be) {
    if (!be) return;
    cuda_state *st = st_of(be);
    if (st) {
        on_device_quiet(st);
        if (st->stream) cudaStreamSynchronize(st->stream);
        if (st->stats)
            fprintf(stderr,
                    "cuda stats: %lld GEMM calls (%.3f s host, %.1f us each): %lld by cuBLASLt, %lld by the "
                    "fallback, %lld widened to fp32; %lld plans built (%.3f s host)\n",
                    st->n_gemm, st->host_gemm_s, st->n_gemm ? 1e6 * st->host_gemm_s / (double)st->n_gemm : 0.0,
                    st->n_lt, st->n_fallback, st->n_widen, st->n_plan_build, st->host_plan_s);
        ab_cuda_layers_free(be); /* its plans and workspace, while the handle and the allocator are here */
        if (st->dnn) cudnnDestroy(st->dnn);
        for (int i = 0; i < GEMM_CACHE; i++) plan_release(&st->plans[i]);
        if (st->lt) cublasLtDestroy(st->lt);
        if (st->blas) cublasDestroy(st->blas);
        cuda_release(be, AB_MEM_WORKSPACE, st->lt_ws, st->lt_ws_bytes);
        cuda_release(be, AB_MEM_WORKSPACE, st->acc, st->acc_bytes);
        cuda_release(be, AB_MEM_WORKSPACE, st->mv, st->mv_bytes);
        for (int i = 0; i < 2; i++) {
            cuda_release(be, AB_MEM_WORKSPACE, st->cvt[i], st->cvt_bytes[i]);
            if (st->idx_host[i]) cudaFreeHost(st->idx_host[i]);
            cuda_release(be, AB_MEM_WORKSPACE, st->idx_dev[i], st->idx_cap[i]);
            if (st->idx_done[i]) cudaEventDestroy(st->idx_done[i]);
        }
        for (int k = 0; k < DATA_PAIRS; k++) {
            if (st->dbeg[k]) cudaEventDestroy(st->dbeg[k]);
            if (st->dend[k]) cudaEventDestroy(st->dend[k]);
        }
        if (st->stream) cudaStreamDestroy(st->stream);
        free(st);
    }
    free(be);
}

static ab_backend_ops make_ops(void) {
    ab_backend_ops o;
    memset(&o, 0, sizeof o);
    o.name = "cuda";
    o.is_host = 0; /* device memory: the host reaches it through upload and download */
    o.destroy = cuda_destroy;
    o.alloc = cuda_alloc;
    o.release = cuda_release;
    o.upload = cuda_upload;
    o.download = cuda_download;
    o.zero = cuda_zero;
    o.sync = cuda_sync;
    o.stream = cuda_stream;
    o.map_data = cuda_map_data;
    o.unmap_data = cuda_unmap_data;
#define AB_OP(name, params, args) o.name = ab_cuda_##name;
#include "backend_ops.def"
    o.describe = cuda_describe;
    o.data_mark = cuda_data_mark;
    o.data_time = cuda_data_time;
    return o;
}
static const ab_backend_ops cuda_ops = make_ops();

static void version_str(char *buf, size_t cap, int v) { /* 13000 -> "13.0" */
    snprintf(buf, cap, "%d.%d", v / 1000, (v % 1000) / 10);
}

static int cuda_init(ab_backend *be, int index) {
    cuda_state *st = st_of(be);
    st->device = index;
    st->stats = getenv("AB_CUDA_STATS") != NULL;
    CU_CHECK(cudaSetDevice(index));
    cudaDeviceProp prop;
    CU_CHECK(cudaGetDeviceProperties(&prop, index));
    ab_device_info *in = &st->info;
    snprintf(in->name, sizeof in->name, "%.127s", prop.name);
    in->cc_major = prop.major;
    in->cc_minor = prop.minor;
    int drv = 0, rt = 0;
    CU_CHECK(cudaDriverGetVersion(&drv));
    CU_CHECK(cudaRuntimeGetVersion(&rt));
    version_str(in->driver, sizeof in->driver, drv);
    version_str(in->runtime, sizeof in->runtime, rt);
    const size_t lt_v = cublasLtGetVersion(); /* major*10000 + minor*100 + patch */
    snprintf(in->blas, sizeof in->blas, "cuBLASLt %zu.%zu.%zu", lt_v / 10000, (lt_v / 100) % 100, lt_v % 100);
    const size_t dnn_v = cudnnGetVersion(); /* cuDNN 9: major*10000 + minor*100 + patch */
    snprintf(in->dnn, sizeof in->dnn, "cuDNN %zu.%zu.%zu", dnn_v / 10000, (dnn_v / 100) % 100, dnn_v % 100);
    CU_CHECK(cudaFree(0)); /* creates the context, so the memory baseline includes it */
    size_t free_b = 0, total_b = 0;
    CU_CHECK(cudaMemGetInfo(&free_b, &total_b));
    in->mem_total = total_b;
    in->mem_used_start = in->mem_used_peak = total_b - free_b;
    CU_CHECK(cudaStreamCreateWithFlags(&st->stream, cudaStreamNonBlocking));
    CUBLAS_CHECK(cublasLtCreate(&st->lt));
    /* the workspace the cuBLAS documentation recommends (cublasSetWorkspace): 32 MiB from Hopper
     * (compute capability 9) on, 4 MiB before; fewer bytes only narrow the algorithms offered */
    st->lt_ws_bytes = (size_t)(prop.major >= 9 ? 32 : 4) << 20;
    if (!(st->lt_ws = cuda_alloc(be, AB_MEM_WORKSPACE, st->lt_ws_bytes))) {
        st->lt_ws_bytes = 0;
        return -1;
    }
    CUBLAS_CHECK(cublasCreate(&st->blas));
    CUBLAS_CHECK(cublasSetStream(st->blas, st->stream));
    CUBLAS_CHECK(cublasSetWorkspace(st->blas, st->lt_ws, st->lt_ws_bytes)); /* no untracked allocation of its own */
    CUBLAS_CHECK(cublasSetMathMode(st->blas, CUBLAS_DEFAULT_MATH));         /* fp32 stays fp32: no TF32 */
    for (int i = 0; i < 2; i++) CU_CHECK(cudaEventCreateWithFlags(&st->idx_done[i], cudaEventDisableTiming));
    for (int k = 0; k < DATA_PAIRS; k++) {
        CU_CHECK(cudaEventCreate(&st->dbeg[k]));
        CU_CHECK(cudaEventCreate(&st->dend[k]));
    }
    return 0;
}

extern "C" ab_backend *ab_backend_cuda_create(int index) {
    const char *why = NULL;
    const int n = ab_cuda_device_count(&why);
    if (n == 0) {
        ab_errorf("--device cuda: no usable GPU (%s)", why);
        return NULL;
    }
    if (index < 0 || index >= n) {
        ab_errorf("--device cuda: GPU %d asked for, %d present", index, n);
        return NULL;
    }
    ab_backend *be = (ab_backend *)calloc(1, sizeof *be);
    cuda_state *st = (cuda_state *)calloc(1, sizeof *st);
    if (!be || !st) {
        free(be);
        free(st);
        ab_errorf("out of host memory creating the CUDA backend");
        return NULL;
    }
    be->ops = &cuda_ops;
    be->impl = st;
    if (cuda_init(be, index) != 0) {
        char msg[512];
        snprintf(msg, sizeof msg, "%s", ab_error());
        cuda_destroy(be);
        ab_errorf("CUDA backend on GPU %d: %s", index, msg);
        return NULL;
    }
    return be;
}

extern "C" int ab_cuda_device_count(const char **why) {
    static char reason[256];
    int n = 0;
    const cudaError_t e = cudaGetDeviceCount(&n);
    if (e != cudaSuccess) {
        (void)cudaGetLastError();
        int rt = 0;
        cudaRuntimeGetVersion(&rt);
        const char *what = e == cudaErrorNoDevice            ? "no NVIDIA GPU found"
                           : e == cudaErrorInsufficientDriver ? "no NVIDIA driver, or one older than this build's CUDA runtime"
                                                              : "the CUDA driver cannot be used";
        snprintf(reason, sizeof reason, "%s (CUDA runtime %d.%d; cudaGetDeviceCount: %s)", what, rt / 1000,
                 (rt % 1000) / 10, cudaGetErrorName(e));
        if (why) *why = reason;
        return 0;
    }
    if (n == 0 && why) *why = "the CUDA driver reports no GPU";
    return n;
}
