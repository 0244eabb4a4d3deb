/* The transformer ops of core/backend.h (BERT) on the CUDA backend: batched strided products
 * (B * heads) x (L, D) / (L, L), layer norm over rows of C, GELU and tanh, the masked attention
 * softmax over (B, heads, L, L), counter-based dropout, BERT's embeddings (R = B * L rows of C),
 * row gathers and the gradient-norm helpers. The batched products go to the backend's GEMM
 * engine (cuBLASLt, cuda_internal.h); the rest are kernels of our own over the AB_HD math of
 * core/half.h and core/kernel_math.h (the dropout mask is ab_dropout_keep, so it is the CPU's bit
 * for bit); fp32 arithmetic whatever the storage type, one rounding of each stored result.
 *
 * This file keeps no state of its own in the backend: the batched products use the backend's
 * cuBLAS(Lt) handles, plan cache, workspace and scratch (freed by the backend's destroy); the
 * kernels here take no scratch memory, with one exception, sum_squares and unscale_check with
 * the squares (below):
 *   - gemm_batched: cuBLASLt with strided-batch layouts, fp32 compute type (no TF32), the
 *     reduction of a split-K product in fp32 for fp16/bf16 outputs, so the old C is read in fp32
 *     and the result rounded once, as the op says; mixed input types widened to fp32 first.
 *     cuBLASLt blocks and splits the sums as it likes: the same bits from run to run for one
 *     shape and alignment (one cached algorithm), not the CPU's order.
 *   - layer norm, softmax: one warp per row; the row's sums in double, merged by a fixed
 *     butterfly. Layer norm's dgamma/dbeta: one thread column per channel, rows in a fixed
 *     partition, the slices added in order in shared memory: no atomics, no partial sums in
 *     global memory.
 *   - embedding_backward: the position and type tables are gathers that add the rows in row
 *     order (the CPU's order: the same bits); the word table takes float atomicAdd (a repeated id
 *     adds in another order than the CPU's: within fp32 round-off, see docs/gpu.md).
 * Every reduction but the word table's is over a partition that depends only on the shape and
 * adds in a fixed order: the same inputs give the same bits on every run. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cuda_runtime.h>

#include "cuda_internal.h"

extern "C" {
#include "half.h"
#include "kernel_math.h"
}

enum { WARPS = 8 }; /* THREADS / 32: rows per block in the warp-per-row kernels */

/* blocks for a warp-per-row kernel over rows rows (its row loop covers what the cap leaves) */
static unsigned row_blocks(size_t rows) {
    size_t b = (rows + WARPS - 1) / WARPS;
    if (b > 65535u * 16u) b = 65535u * 16u;
    return (unsigned)(b ? b : 1);
}

/* one warp per row; the whole warp takes the same rows, so full-mask shuffles are safe */
#define WARP_ROWS(r, rows)                                                                          \
    for (size_t r = (size_t)blockIdx.x * WARPS + (threadIdx.x >> 5); r < (rows); r += (size_t)gridDim.x * WARPS)

static const unsigned FULL = 0xffffffffu;

static int check_type(const char *op, ab_dtype t) {
    if (!dtype_ok(t)) return ab_errorf("%s: bad element type %d", op, (int)t);
    return 0;
}

/* the sum over the warp by a butterfly: every lane ends with the same bits (each step adds the
 * same two values on both lanes of a pair, and IEEE addition commutes) */
static __device__ __forceinline__ double warp_sum(double v) {
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(FULL, v, o);
    return v;
}

/* ---- batched products ----------------------------------------------------------------------- */

/* the batch's outputs are disjoint: stacked (each starts past the previous one's last element)
 * or side by side within the rows (attention's heads: sc >= N columns apart, all within ldc);
 * anything else is taken as overlapping */
static int outputs_disjoint(int M, int N, int ldc, long long sc, int batch) {
    if (batch <= 1) return 1;
    if (sc >= (long long)(M - 1) * ldc + N) return 1;
    return sc >= N && (long long)(batch - 1) * sc + N <= ldc;
}

/* C_z[M,N] = alpha op(A_z) op(B_z) + beta C_z for z < batch (row-major, op(X) = X^T when tX), A_z =
 * A + z * sa elements (B, C likewise): the backend's GEMM engine (ab_cuda_gemm_strided, cuBLASLt
 * with strided-batch layouts, fp32 compute type, no TF32), which is also gemm's. Two cases go one
 * product at a time, in z order, on the stream: a negative stride (cublasLt.h does not say a
 * layout's batch offset may be negative) and outputs that may overlap (a batched call would write
 * them in no defined order; one after the other, each reads what the previous one left, as the
 * CPU's products do in a single thread). */
int ab_cuda_gemm_batched(ab_backend *be, int ta, int tb, int M, int N, int K, float alpha, ab_dtype at, const void *A,
                         int lda, long long sa, ab_dtype bt, const void *B, int ldb, long long sb, float beta,
                         ab_dtype ct, void *C, int ldc, long long sc, int batch) {
    AB_TRY(ab_gemm_batched_args(ta, tb, M, N, K, lda, ldb, ldc, batch));
    AB_TRY(check_type("gemm_batched", at));
    AB_TRY(check_type("gemm_batched", bt));
    AB_TRY(check_type("gemm_batched", ct));
    if (batch == 0) return 0;
    AB_TRY(use_device(be));
    const int one_by_one = batch > 1 && (sa < 0 || sb < 0 || sc < 0 || !outputs_disjoint(M, N, ldc, sc, batch));
    if (!one_by_one)
        return ab_cuda_gemm_strided(be, ta != 0, tb != 0, M, N, K, alpha, at, A, lda, sa, bt, B, ldb, sb, beta, ct, C,
                                    ldc, sc, batch);
    const long long ea = (long long)ab_dtype_size(at), eb = (long long)ab_dtype_size(bt);
    const long long ec = (long long)ab_dtype_size(ct);
    for (int z = 0; z < batch; z++)
        AB_TRY(ab_cuda_gemm_strided(be, ta != 0, tb != 0, M, N, K, alpha, at, (const char *)A + z * sa * ea, lda, 0, bt,
                                    (const char *)B + z * sb * eb, ldb, 0, beta, ct, (char *)C + z * sc * ec, ldc, 0,
                                    1));
    return 0;
}

/* ---- layer normalisation -------------------------------------------------------------------- */

/* One warp per row: the sums of x - x[0] and its square in double (the CPU's shift: a mean far
 * from zero does not cancel the variance away), mean and rstd as the CPU rounds them, then y in
 * fp32. y may alias x (xt == yt): each lane writes only the elements it has read, after the
 * whole warp has read the row (the shuffles order it). A NaN in a row makes the row NaN. */
__global__ void k_ln_fwd(int R, int C, ab_dtype xt, const void *x, const float *gamma, const float *beta, float eps,
                         float *mean, float *rstd, ab_dtype yt, void *y) {
    const int lane = threadIdx.x & 31;
    WARP_ROWS(r, (size_t)R) {
        const size_t o = r * (size_t)C;
        const double k = ab_load(x, o, xt);
        double s1 = 0.0, s2 = 0.0;
        for (int c = lane; c < C; c += 32) {
            const double d = (double)ab_load(x, o + (size_t)c, xt) - k;
            s1 += d;
            s2 += d * d;
        }
        s1 = warp_sum(s1);
        s2 = warp_sum(s2);
        const double md = s1 / C;
        double var = s2 / C - md * md;
        if (var < 0.0) var = 0.0; /* rounding; NaN stays NaN */
        const float mu = (float)(k + md), rs = (float)(1.0 / sqrt(var + (double)eps));
        if (lane == 0) {
            mean[r] = mu;
            rstd[r] = rs;
        }
        for (int c = lane; c < C; c += 32) {
            const float v = (ab_load(x, o + (size_t)c, xt) - mu) * rs * gamma[c] + beta[c];
            ab_store(y, o + (size_t)c, yt, v);
        }
    }
}

/* dx = rstd * (g - mean(g) - xhat * mean(g * xhat)), g = dy * gamma, one warp per row, the two
 * means from double sums. dx may alias dy (xt == yt): as in the forward, each lane rewrites only
 * what it has read. */
__global__ void k_ln_bwd_dx(int R, int C, ab_dtype xt, const void *x, ab_dtype yt, const void *dy, const float *gamma,
                            const float *mean, const float *rstd, void *dx) {
    const int lane = threadIdx.x & 31;
    WARP_ROWS(r, (size_t)R) {
        const size_t o = r * (size_t)C;
        const float mu = mean[r], rs = rstd[r];
        double sg = 0.0, sgx = 0.0;
        for (int c = lane; c < C; c += 32) {
            const float xhat = (ab_load(x, o + (size_t)c, xt) - mu) * rs, g = ab_load(dy, o + (size_t)c, yt) * gamma[c];
            sg += (double)g;
            sgx += (double)g * xhat;
        }
        sg = warp_sum(sg);
        sgx = warp_sum(sgx);
        const float mg = (float)(sg / C), mgx = (float)(sgx / C);
        for (int c = lane; c < C; c += 32) {
            const float xhat = (ab_load(x, o + (size_t)c, xt) - mu) * rs;
            const float v = rs * (ab_load(dy, o + (size_t)c, yt) * gamma[c] - mg - xhat * mgx);
            ab_store(dx, o + (size_t)c, xt, v);
        }
    }
}

/* dgamma[c] = acc * dgamma[c] + sum_r dy * xhat, dbeta[c] = acc * dbeta[c] + sum_r dy: a block
 * takes LNP_TX channels; its LNP_TY thread rows take the rows r = ty, ty + LNP_TY, ... (sums in
 * double of the exact double products, as the CPU), and the slices are added in ty order. Reads
 * are coalesced across the channels of a row. Runs before k_ln_bwd_dx, which may overwrite dy. */
enum { LNP_TX = 32, LNP_TY = 16 };

__global__ void k_ln_bwd_params(int R, int C, ab_dtype xt, const void *x, ab_dtype yt, const void *dy,
                                const float *mean, const float *rstd, float acc, float *dgamma, float *dbeta) {
    __shared__ double s_g[LNP_TY][LNP_TX], s_b[LNP_TY][LNP_TX];
    const int tx = threadIdx.x, ty = threadIdx.y, c = blockIdx.x * LNP_TX + tx;
    double g = 0.0, b = 0.0;
    if (c < C)
        for (int r = ty; r < R; r += LNP_TY) {
            const size_t i = (size_t)r * (size_t)C + (size_t)c;
            const float xhat = (ab_load(x, i, xt) - mean[r]) * rstd[r], d = ab_load(dy, i, yt);
            g += (double)d * xhat;
            b += (double)d;
        }
    s_g[ty][tx] = g;
    s_b[ty][tx] = b;
    __syncthreads();
    if (ty != 0 || c >= C) return;
    for (int j = 1; j < LNP_TY; j++) {
        g += s_g[j][tx];
        b += s_b[j][tx];
    }
    /* acc = 0 overwrites (whatever was there, NaN included); 1 adds in fp32 */
    dgamma[c] = acc != 0.0f ? acc * dgamma[c] + (float)g : (float)g;
    dbeta[c] = acc != 0.0f ? acc * dbeta[c] + (float)b : (float)b;
}

int ab_cuda_layernorm_forward(ab_backend *be, int R, int C, ab_dtype xt, const void *x, const float *gamma,
                              const float *beta, float eps, float *mean, float *rstd, ab_dtype yt, void *y) {
    AB_TRY(check_type("layernorm_forward", xt));
    AB_TRY(check_type("layernorm_forward", yt));
    if (R < 1 || C < 1) return ab_errorf("layernorm_forward: bad shape R=%d C=%d", R, C);
    if (!x || !gamma || !beta || !mean || !rstd || !y) return ab_errorf("layernorm_forward: NULL argument");
    if (x == y && xt != yt) return ab_errorf("layernorm_forward: y over x needs one element type");
    AB_TRY(use_device(be));
    k_ln_fwd<<<row_blocks((size_t)R), THREADS, 0, ab_cuda_stream(be)>>>(R, C, xt, x, gamma, beta, eps, mean, rstd, yt,
                                                                         y);
    LAUNCH_CHECK("layernorm_forward");
    return 0;
}

int ab_cuda_layernorm_backward(ab_backend *be, int R, int C, ab_dtype xt, const void *x, ab_dtype yt, const void *dy,
                               const float *gamma, const float *mean, const float *rstd, float acc, float *dgamma,
                               float *dbeta, void *dx) {
    AB_TRY(check_type("layernorm_backward", xt));
    AB_TRY(check_type("layernorm_backward", yt));
    if (R < 1 || C < 1) return ab_errorf("layernorm_backward: bad shape R=%d C=%d", R, C);
    if (!x || !dy || !gamma || !mean || !rstd || !dgamma || !dbeta || !dx)
        return ab_errorf("layernorm_backward: NULL argument");
    if (dx == dy && xt != yt) return ab_errorf("layernorm_backward: dx over dy needs one element type");
    AB_TRY(use_device(be));
    cudaStream_t s = ab_cuda_stream(be);
    const dim3 pb(LNP_TX, LNP_TY);
    k_ln_bwd_params<<<(unsigned)((C + LNP_TX - 1) / LNP_TX), pb, 0, s>>>(R, C, xt, x, yt, dy, mean, rstd, acc, dgamma,
                                                                         dbeta);
    LAUNCH_CHECK("layernorm_backward dgamma/dbeta");
    k_ln_bwd_dx<<<row_blocks((size_t)R), THREADS, 0, s>>>(R, C, xt, x, yt, dy, gamma, mean, rstd, dx);
    LAUNCH_CHECK("layernorm_backward dx");
    return 0;
}

/* ---- element-wise: GELU, tanh, dropout ------------------------------------------------------ */

__global__ void k_gelu(size_t n, ab_dtype t, const void *x, void *y) {
    GRID_STRIDE(i, n) ab_store(y, i, t, ab_gelu(ab_load(x, i, t)));
}

__global__ void k_gelu_bwd(size_t n, ab_dtype t, const void *x, const void *dy, void *dx) {
    GRID_STRIDE(i, n) ab_store(dx, i, t, ab_load(dy, i, t) * ab_gelu_grad(ab_load(x, i, t)));
}

__global__ void k_tanh(size_t n, ab_dtype t, const void *x, void *y) {
    GRID_STRIDE(i, n) ab_store(y, i, t, tanhf(ab_load(x, i, t)));
}

__global__ void k_tanh_bwd(size_t n, ab_dtype t, const void *y, const void *dy, void *dx) {
    GRID_STRIDE(i, n) {
        const float v = ab_load(y, i, t);
        ab_store(dx, i, t, ab_load(dy, i, t) * (1.0f - v * v));
    }
}

/* the mask of element i of the call is ab_dropout_keep(seed, i, threshold): the CPU's, bit for
 * bit, whatever the grid; kept values times keep_scale (one multiply, as the CPU) */
__global__ void k_dropout(size_t n, ab_dtype t, uint64_t seed, uint32_t threshold, float keep_scale, const void *x,
                          void *y) {
    GRID_STRIDE(i, n) {
        const float v = ab_load(x, i, t);
        ab_store(y, i, t, ab_dropout_keep(seed, (uint64_t)i, threshold) ? v * keep_scale : 0.0f);
    }
}

int ab_cuda_gelu_forward(ab_backend *be, size_t n, ab_dtype t, const void *x, void *y) {
    AB_TRY(check_type("gelu_forward", t));
    if (!n) return 0;
    if (!x || !y) return ab_errorf("gelu_forward: NULL argument");
    AB_TRY(use_device(be));
    k_gelu<<<blocks_for(n), THREADS, 0, ab_cuda_stream(be)>>>(n, t, x, y);
    LAUNCH_CHECK("gelu_forward");
    return 0;
}

int ab_cuda_gelu_backward(ab_backend *be, size_t n, ab_dtype t, const void *x, const void *dy, void *dx) {
    AB_TRY(check_type("gelu_backward", t));
    if (!n) return 0;
    if (!x || !dy || !dx) return ab_errorf("gelu_backward: NULL argument");
    AB_TRY(use_device(be));
    k_gelu_bwd<<<blocks_for(n), THREADS, 0, ab_cuda_stream(be)>>>(n, t, x, dy, dx);
    LAUNCH_CHECK("gelu_backward");
    return 0;
}

int ab_cuda_tanh_forward(ab_backend *be, size_t n, ab_dtype t, const void *x, void *y) {
    AB_TRY(check_type("tanh_forward", t));
    if (!n) return 0;
    if (!x || !y) return ab_errorf("tanh_forward: NULL argument");
    AB_TRY(use_device(be));
    k_tanh<<<blocks_for(n), THREADS, 0, ab_cuda_stream(be)>>>(n, t, x, y);
    LAUNCH_CHECK("tanh_forward");
    return 0;
}

int ab_cuda_tanh_backward(ab_backend *be, size_t n, ab_dtype t, const void *y, const void *dy, void *dx) {
    AB_TRY(check_type("tanh_backward", t));
    if (!n) return 0;
    if (!y || !dy || !dx) return ab_errorf("tanh_backward: NULL argument");
    AB_TRY(use_device(be));
    k_tanh_bwd<<<blocks_for(n), THREADS, 0, ab_cuda_stream(be)>>>(n, t, y, dy, dx);
    LAUNCH_CHECK("tanh_backward");
    return 0;
}

static int dropout(ab_backend *be, const char *op, size_t n, ab_dtype t, float rate, uint64_t seed, const void *x,
                   void *y) {
    if (!(rate >= 0.0f && rate < 1.0f)) return ab_errorf("%s: rate %g outside [0, 1)", op, (double)rate);
    AB_TRY(check_type(op, t));
    if (!n) return 0;
    if (!x || !y) return ab_errorf("%s: NULL argument", op);
    AB_TRY(use_device(be));
    cudaStream_t s = ab_cuda_stream(be);
    if (rate == 0.0f) { /* a copy; in place nothing at all */
        if (x != y) CU_CHECK(cudaMemcpyAsync(y, x, n * ab_dtype_size(t), cudaMemcpyDeviceToDevice, s));
        return 0;
    }
    /* the CPU's two host expressions, so the threshold and the scale are its bits */
    const uint32_t thr = ab_dropout_threshold(rate);
    const float keep_scale = 1.0f / (1.0f - rate);
    k_dropout<<<blocks_for(n), THREADS, 0, s>>>(n, t, seed, thr, keep_scale, x, y);
    LAUNCH_CHECK(op);
    return 0;
}

int ab_cuda_dropout_forward(ab_backend *be, size_t n, ab_dtype t, float rate, uint64_t seed, const void *x, void *y) {
    return dropout(be, "dropout_forward", n, t, rate, seed, x, y);
}

int ab_cuda_dropout_backward(ab_backend *be, size_t n, ab_dtype t, float rate, uint64_t seed, const void *dy,
                             void *dx) {
    return dropout(be, "dropout_backward", n, t, rate, seed, dy, dx);
}

/* ---- the attention softmax ------------------------------------------------------------------ */

/* One warp per row r = (b * heads + h) * L + i over the keys j with mask[b, j] != 0: the
 * maximum of scale * x as the CPU takes it (a NaN score wins and stays, so the row is NaN),
 * exp(scale * x - max) (ab_exp of core/kernel_math.h, as the CPU's) summed in double, p = e / sum
 * rounded once; masked keys 0, a row with no key all 0. scale * x is rounded on its own
 * (__fmul_rn, never fused into the subtraction), as the CPU computes it: the maximum's
 * exponential is exactly 1, and an overflow to inf gives the CPU's NaN row. p may alias x: the exponentials are recomputed from x in the last pass, each
 * lane rewriting only what it has read. */
__global__ void k_softmax(size_t rows, int heads, int L, ab_dtype t, float scale, const void *x, const int32_t *mask,
                          void *p) {
    const int lane = threadIdx.x & 31;
    WARP_ROWS(r, rows) {
        const int32_t *mk = mask + (r / ((size_t)heads * (size_t)L)) * (size_t)L;
        const size_t o = r * (size_t)L;
        float mx = -INFINITY;
        int any = 0;
        for (int c = lane; c < L; c += 32)
            if (mk[c]) {
                const float v = __fmul_rn(scale, ab_load(x, o + (size_t)c, t));
                if (v > mx || v != v) mx = v;
                any = 1;
            }
        for (int off = 16; off > 0; off >>= 1) {
            const float other = __shfl_xor_sync(FULL, mx, off);
            if (other > mx || other != other) mx = other;
        }
        mx = __shfl_sync(FULL, mx, 0); /* one value for the whole row (the sign of a zero max aside) */
        any = __any_sync(FULL, any);
        double sum = 0.0;
        for (int c = lane; c < L; c += 32)
            if (mk[c]) sum += (double)ab_exp(__fmul_rn(scale, ab_load(x, o + (size_t)c, t)) - mx);
        sum = warp_sum(sum);
        const float inv = any ? (float)(1.0 / sum) : 0.0f;
        for (int c = lane; c < L; c += 32) {
            /* as the CPU: a masked key's 0 times inv, so a NaN row is NaN throughout */
            const float e = mk[c] ? ab_exp(__fmul_rn(scale, ab_load(x, o + (size_t)c, t)) - mx) : 0.0f;
            ab_store(p, o + (size_t)c, t, any ? e * inv : 0.0f);
        }
    }
}

/* dx = scale * p * (dp - sum_j dp * p), the sum in double of exact double products; one warp per
 * row; dx may alias dp */
__global__ void k_softmax_bwd(size_t rows, int L, ab_dtype t, float scale, const void *p, const void *dp, void *dx) {
    const int lane = threadIdx.x & 31;
    WARP_ROWS(r, rows) {
        const size_t o = r * (size_t)L;
        double s = 0.0;
        for (int c = lane; c < L; c += 32)
            s += (double)ab_load(dp, o + (size_t)c, t) * (double)ab_load(p, o + (size_t)c, t);
        const float sf = (float)warp_sum(s);
        for (int c = lane; c < L; c += 32) {
            const float pv = ab_load(p, o + (size_t)c, t), g = ab_load(dp, o + (size_t)c, t);
            ab_store(dx, o + (size_t)c, t, scale * pv * (g - sf));
        }
    }
}

int ab_cuda_softmax_forward(ab_backend *be, int B, int heads, int L, ab_dtype t, float scale, const void *x,
                            const int32_t *mask, void *p) {
    AB_TRY(check_type("softmax_forward", t));
    if (B < 1 || heads < 1 || L < 1) return ab_errorf("softmax_forward: bad shape B=%d heads=%d L=%d", B, heads, L);
    if (!x || !mask || !p) return ab_errorf("softmax_forward: NULL argument");
    AB_TRY(use_device(be));
    const size_t rows = (size_t)B * (size_t)heads * (size_t)L;
    k_softmax<<<row_blocks(rows), THREADS, 0, ab_cuda_stream(be)>>>(rows, heads, L, t, scale, x, mask, p);
    LAUNCH_CHECK("softmax_forward");
    return 0;
}

int ab_cuda_softmax_backward(ab_backend *be, int rows, int L, ab_dtype t, float scale, const void *p, const void *dp,
                             void *dx) {
    AB_TRY(check_type("softmax_backward", t));
    if (rows < 1 || L < 1) return ab_errorf("softmax_backward: bad shape rows=%d L=%d", rows, L);
    if (!p || !dp || !dx) return ab_errorf("softmax_backward: NULL argument");
    AB_TRY(use_device(be));
    k_softmax_bwd<<<row_blocks((size_t)rows), THREADS, 0, ab_cuda_stream(be)>>>((size_t)rows, L, t, scale, p, dp, dx);
    LAUNCH_CHECK("softmax_backward");
    return 0;
}

/* ---- embeddings ----------------------------------------------------------------------------- */

static __device__ __forceinline__ int emb_ok(int id, int ty, int vocab, int n_types) {
    return id >= 0 && id < vocab && ty >= 0 && ty < n_types;
}

/* y[r, c] = word[ids[r], c] + pos[r % L, c] + type[types[r], c], added in the CPU's order (the
 * same bits); a bad id or type makes the row NaN */
__global__ void k_emb_fwd(int R, int L, int C, const int32_t *ids, const int32_t *types, const float *word, int vocab,
                          const float *pos, const float *type, int n_types, float *y) {
    const size_t n = (size_t)R * (size_t)C;
    GRID_STRIDE(i, n) {
        const size_t r = i / (size_t)C, c = i % (size_t)C;
        const int id = ids[r], ty = types[r];
        if (!emb_ok(id, ty, vocab, n_types)) {
            y[i] = __int_as_float(0x7fc00000);
            continue;
        }
        y[i] = word[(size_t)id * C + c] + pos[(r % (size_t)L) * C + c] + type[(size_t)ty * C + c];
    }
}

/* dword[ids[r]] += dy[r]: float atomics, so a repeated id adds in whatever order the rows arrive */
__global__ void k_emb_bwd_word(int R, int C, const int32_t *ids, const int32_t *types, const float *dy, int vocab,
                               int n_types, float *dword) {
    const size_t n = (size_t)R * (size_t)C;
    GRID_STRIDE(i, n) {
        const size_t r = i / (size_t)C, c = i % (size_t)C;
        const int id = ids[r];
        if (emb_ok(id, types[r], vocab, n_types)) atomicAdd(&dword[(size_t)id * C + c], dy[i]);
    }
}

/* dpos[p] += dy[r] for r = p, p + L, ... in that order (the CPU's): one thread per (p, c) */
__global__ void k_emb_bwd_pos(int R, int L, int C, const int32_t *ids, const int32_t *types, const float *dy,
                              int vocab, int n_types, float *dpos) {
    const size_t n = (size_t)L * (size_t)C;
    GRID_STRIDE(i, n) {
        const size_t p = i / (size_t)C, c = i % (size_t)C;
        float v = dpos[i];
        for (size_t r = p; r < (size_t)R; r += (size_t)L)
            if (emb_ok(ids[r], types[r], vocab, n_types)) v += dy[r * C + c];
        dpos[i] = v;
    }
}

/* dtype[t] += dy[r] over the rows of type t in row order (the CPU's): one thread per (t, c). The
 * adds form one chain per thread; EMB_UNROLL rows' loads are issued before their adds (a row not
 * of type t leaves v as it was, not v + 0, which would turn -0 into +0), so the chain waits on
 * memory once per EMB_UNROLL rows, not once per row (BERT-base: 4096 rows, 2 ms a step on an
 * H200 as one load per add). */
enum { EMB_UNROLL = 8 };

__global__ void k_emb_bwd_type(int R, int C, const int32_t *ids, const int32_t *types, const float *dy, int vocab,
                               int n_types, float *dtype) {
    const size_t n = (size_t)n_types * (size_t)C;
    GRID_STRIDE(i, n) {
        const int t = (int)(i / (size_t)C);
        const size_t c = i % (size_t)C;
        float v = dtype[i];
        int r = 0;
        for (; r + EMB_UNROLL <= R; r += EMB_UNROLL) {
            float d[EMB_UNROLL];
            int take[EMB_UNROLL];
#pragma unroll
            for (int u = 0; u < EMB_UNROLL; u++) {
                take[u] = types[r + u] == t && emb_ok(ids[r + u], t, vocab, n_types);
                d[u] = take[u] ? dy[(size_t)(r + u) * C + c] : 0.0f;
            }
#pragma unroll
            for (int u = 0; u < EMB_UNROLL; u++)
                if (take[u]) v += d[u];
        }
        for (; r < R; r++)
            if (types[r] == t && emb_ok(ids[r], t, vocab, n_types)) v += dy[(size_t)r * C + c];
        dtype[i] = v;
    }
}

int ab_cuda_embedding_forward(ab_backend *be, int R, int L, int C, const int32_t *ids, const int32_t *types,
                              const float *word, int vocab, const float *pos, const float *type, int n_types,
                              float *y) {
    if (R < 1 || L < 1 || C < 1 || R % L) return ab_errorf("embedding_forward: bad shape R=%d L=%d C=%d", R, L, C);
    if (!ids || !types || !word || !pos || !type || !y) return ab_errorf("embedding_forward: NULL argument");
    AB_TRY(use_device(be));
    const size_t n = (size_t)R * (size_t)C;
    k_emb_fwd<<<blocks_for(n), THREADS, 0, ab_cuda_stream(be)>>>(R, L, C, ids, types, word, vocab, pos, type, n_types,
                                                                  y);
    LAUNCH_CHECK("embedding_forward");
    return 0;
}

int ab_cuda_embedding_backward(ab_backend *be, int R, int L, int C, const int32_t *ids, const int32_t *types,
                               const float *dy, int vocab, int n_types, int acc, float *dword, float *dpos,
                               float *dtype) {
    if (R < 1 || L < 1 || C < 1 || R % L) return ab_errorf("embedding_backward: bad shape R=%d L=%d C=%d", R, L, C);
    if (vocab < 0 || n_types < 0) return ab_errorf("embedding_backward: %d words, %d types", vocab, n_types);
    if (!ids || !types || !dy || !dword || !dpos || !dtype) return ab_errorf("embedding_backward: NULL argument");
    AB_TRY(use_device(be));
    cudaStream_t s = ab_cuda_stream(be);
    if (!acc) { /* the positions past L keep what they hold, as on the CPU */
        CU_CHECK(cudaMemsetAsync(dword, 0, (size_t)vocab * C * sizeof(float), s));
        CU_CHECK(cudaMemsetAsync(dpos, 0, (size_t)L * C * sizeof(float), s));
        CU_CHECK(cudaMemsetAsync(dtype, 0, (size_t)n_types * C * sizeof(float), s));
    }
    const size_t n = (size_t)R * (size_t)C;
    k_emb_bwd_word<<<blocks_for(n), THREADS, 0, s>>>(R, C, ids, types, dy, vocab, n_types, dword);
    LAUNCH_CHECK("embedding_backward word table");
    k_emb_bwd_pos<<<blocks_for((size_t)L * C), THREADS, 0, s>>>(R, L, C, ids, types, dy, vocab, n_types, dpos);
    LAUNCH_CHECK("embedding_backward position table");
    if (n_types > 0) {
        k_emb_bwd_type<<<blocks_for((size_t)n_types * C), THREADS, 0, s>>>(R, C, ids, types, dy, vocab, n_types, dtype);
        LAUNCH_CHECK("embedding_backward type table");
    }
    return 0;
}

/* ---- batches of rows; the gradient norm ----------------------------------------------------- */

/* out[b] = rows[idx[b]] in units of T (4-byte words when everything is 4-byte aligned, else bytes);
 * idx is the device copy of the host indices */
template <typename T>
__global__ void k_gather_rows(int B, size_t row_units, const T *rows, const int32_t *idx, T *out) {
    const size_t n = (size_t)B * row_units;
    GRID_STRIDE(i, n) {
        const size_t b = i / row_units, u = i % row_units;
        out[i] = rows[(size_t)idx[b] * row_units + u];
    }
}

int ab_cuda_gather_rows(ab_backend *be, int B, size_t row_bytes, const void *rows, const int32_t *idx, void *out) {
    if (B < 0) return ab_errorf("gather_rows: %d rows", B);
    if (B == 0 || row_bytes == 0) return 0;
    if (!rows || !idx || !out) return ab_errorf("gather_rows: NULL argument");
    /* the indices are on the host: a negative one would fault the device (the context lost), so
     * it is refused here; one past the set's end cannot be seen (the op is not told its size) */
    for (int b = 0; b < B; b++)
        if (idx[b] < 0) return ab_errorf("gather_rows: row %d: index %d", b, (int)idx[b]);
    AB_TRY(use_device(be));
    const int32_t *sel = NULL;
    AB_TRY(ab_cuda_stage_ints(be, idx, B, NULL, 0, &sel));
    cudaStream_t s = ab_cuda_stream(be);
    const int words = row_bytes % 4 == 0 && (uintptr_t)rows % 4 == 0 && (uintptr_t)out % 4 == 0;
    if (words) {
        const size_t u = row_bytes / 4;
        k_gather_rows<uint32_t><<<blocks_for((size_t)B * u), THREADS, 0, s>>>(B, u, (const uint32_t *)rows, sel,
                                                                              (uint32_t *)out);
    } else {
        k_gather_rows<uint8_t><<<blocks_for((size_t)B * row_bytes), THREADS, 0, s>>>(B, row_bytes, (const uint8_t *)rows,
                                                                                     sel, (uint8_t *)out);
    }
    LAUNCH_CHECK("gather_rows");
    return 0;
}

/* sum_squares: SS_BLOCKS fp32 block sums (a partition fixed by n), then one block adds them in
 * double in a fixed order: deterministic, no atomics. The block sums live in a __device__ array
 * (one per GPU, none allocated): the backend keeps no scratch slot for this file. Two backends
 * on the same GPU running sum_squares (or unscale_check with the squares, which uses the same
 * array) at the same moment on their two streams would share it; the suite has one backend per
 * GPU and process. */
enum { SS_BLOCKS = 1024 };
__device__ float g_ss_part[SS_BLOCKS];

/* the grid of the block sums for n values: every pass that writes g_ss_part takes it */
static unsigned ss_grid(size_t n) {
    const unsigned G = blocks_for(n);
    return G > (unsigned)SS_BLOCKS ? (unsigned)SS_BLOCKS : G;
}

/* a block's 256 threads' sums a, added in a fixed tree into the block's g_ss_part slot */
__device__ void ss_block_sum(float a) {
    __shared__ float s[256];
    s[threadIdx.x] = a;
    __syncthreads();
    for (int h = 128; h > 0; h >>= 1) {
        if ((int)threadIdx.x < h) s[threadIdx.x] += s[threadIdx.x + h];
        __syncthreads();
    }
    if (threadIdx.x == 0) g_ss_part[blockIdx.x] = s[0];
}

__global__ void k_sumsq_part(size_t n, const float *x) {
    float a = 0.0f;
    GRID_STRIDE(i, n) a += x[i] * x[i];
    ss_block_sum(a);
}

__global__ void k_sumsq_final(int G, float *out) {
    __shared__ double s[256];
    double a = 0.0;
    for (int g = threadIdx.x; g < G; g += 256) a += (double)g_ss_part[g];
    s[threadIdx.x] = a;
    __syncthreads();
    for (int h = 128; h > 0; h >>= 1) {
        if ((int)threadIdx.x < h) s[threadIdx.x] += s[threadIdx.x + h];
        __syncthreads();
    }
    if (threadIdx.x == 0) *out += (float)s[0];
}

/* k_unscale_check's multiply and check (backend_cuda.cu), and k_sumsq_part's sums of the results'
 * squares: the same grid, so each thread adds the same values in the same order */
__global__ void k_unscale_sumsq_part(size_t n, float *g, float inv_scale, int32_t *found_inf) {
    float a = 0.0f;
    int bad = 0;
    GRID_STRIDE(i, n) {
        const float v = g[i] * inv_scale;
        if (inv_scale != 1.0f) g[i] = v; /* at 1 the check alone: no stores */
        bad |= !ab_is_finite(v);
        a += v * v;
    }
    if (__any_sync(0xffffffffu, bad) && (threadIdx.x & 31) == 0) *found_inf = 1; /* same value: no race */
    ss_block_sum(a);
}

int ab_cuda_unscale_squares(ab_backend *be, size_t n, float *g, float inv_scale, int32_t *found_inf, float *sum_sq) {
    if (!n) return 0;
    if (!g || !found_inf || !sum_sq) return ab_errorf("unscale_check: NULL argument");
    AB_TRY(use_device(be));
    cudaStream_t s = ab_cuda_stream(be);
    const unsigned G = ss_grid(n);
    k_unscale_sumsq_part<<<G, 256, 0, s>>>(n, g, inv_scale, found_inf);
    LAUNCH_CHECK("unscale_check with the squares");
    k_sumsq_final<<<1, 256, 0, s>>>((int)G, sum_sq);
    LAUNCH_CHECK("unscale_check's final sum");
    return 0;
}

int ab_cuda_sum_squares(ab_backend *be, size_t n, const float *x, float *out) {
    if (!n) return 0;
    if (!x || !out) return ab_errorf("sum_squares: NULL argument");
    AB_TRY(use_device(be));
    cudaStream_t s = ab_cuda_stream(be);
    const unsigned G = ss_grid(n);
    k_sumsq_part<<<G, 256, 0, s>>>(n, x);
    LAUNCH_CHECK("sum_squares block sums");
    k_sumsq_final<<<1, 256, 0, s>>>((int)G, out);
    LAUNCH_CHECK("sum_squares final sum");
    return 0;
}

__global__ void k_scale(size_t n, float *x, float s) {
    GRID_STRIDE(i, n) x[i] *= s;
}

int ab_cuda_scale(ab_backend *be, size_t n, float *x, float s) {
    if (!n) return 0;
    if (!x) return ab_errorf("scale: NULL argument");
    AB_TRY(use_device(be));
    k_scale<<<blocks_for(n), THREADS, 0, ab_cuda_stream(be)>>>(n, x, s);
    LAUNCH_CHECK("scale");
    return 0;
}
