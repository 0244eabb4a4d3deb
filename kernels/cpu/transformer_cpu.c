/* The CPU backend's transformer ops (core/backend.h): batched products, layer norm, GELU, tanh,
 * the masked attention softmax, counter-based dropout, BERT's embeddings, row gathers and the
 * gradient-norm helpers (sum_squares, scale, and the loss scaler's unscale_check, which can take
 * the norm's squares in its pass). Rows of C values; fp16/bf16 widened exactly, arithmetic in fp32
 * (layer-norm and softmax statistics in double), one rounding of each stored result; the loops
 * run on the backend's pool with a split that depends only on the sizes. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cpu_internal.h"
#include "half.h"
#include "cpu_features.h"
#include "kernel_math.h"

static int check_type(const char *op, ab_dtype t) {
    if (t != AB_F32 && t != AB_F16 && t != AB_BF16) return ab_errorf("%s: unknown element type %d", op, (int)t);
    return 0;
}

/* ---- batched products: each one through ab_cpu_gemm's rules, the batch split over the pool ---- */

typedef struct {
    ab_backend *be;
    int ta, tb, M, N, K, lda, ldb, ldc;
    float alpha, beta;
    ab_dtype at, bt, ct;
    const void *A, *B;
    void *C;
    long long sa, sb, sc;
    float *buf; /* per part: A and B widened or B copied untransposed (native bf16: strided ones copied
                 * dense), the fp32 product (each empty where not needed) */
    size_t na, nb, nc;
    int ar, ac, br, bc; /* the stored rows and columns of A and of B that a product reads */
    int native; /* bf16 x bf16 on the CPU's bf16 instructions (onednn_cpu.c) */
    int bt_copy; /* a transposed B copied untransposed (widened) into the part's B scratch */
    int rc;
} bgemm_job;

/* rows x cols 16-bit values of type t (leading dimension ld) into dst, rows x cols dense: widened
 * to fp32 (widen), or copied as they are; a dense source widened in one call */
static void dense_rows(int rows, int cols, ab_dtype t, const void *src, int ld, int widen, void *dst) {
    const uint16_t *s = src;
    if (widen) {
        cpu_widen_rows((size_t)rows, (size_t)cols, t, s, (size_t)ld, dst, (size_t)cols);
        return;
    }
    for (int r = 0; r < rows; r++)
        memcpy((uint16_t *)dst + (size_t)r * cols, s + (size_t)r * ld, (size_t)cols * sizeof *s);
}

static void bgemm_range(void *ctx, int part, size_t lo, size_t hi) {
    bgemm_job *j = ctx;
    float *wa = j->buf ? j->buf + (size_t)part * (j->na + j->nb + j->nc) : NULL; /* NULL: all fp32 */
    float *wb = wa ? wa + j->na : NULL, *acc = wb ? wb + j->nb : NULL;
    for (size_t i = lo; i < hi; i++) {
        const char *A = (const char *)j->A + (size_t)j->sa * i * ab_dtype_size(j->at);
        const char *B = (const char *)j->B + (size_t)j->sb * i * ab_dtype_size(j->bt);
        char *C = (char *)j->C + (size_t)j->sc * i * ab_dtype_size(j->ct);
        if (j->native) { /* the product in fp32, then alpha, beta C and the one rounding */
            const int straight = j->ct == AB_F32 && j->alpha == 1.0f && j->beta == 0.0f;
            const uint16_t *a16 = (const uint16_t *)A, *b16 = (const uint16_t *)B;
            int lda = j->lda, ldb = j->ldb;
            if (j->na) { /* a strided block copied dense (bf16 as it is, j->na floats hold it) */
                dense_rows(j->ar, j->ac, AB_BF16, a16, j->lda, 0, wa);
                a16 = (const uint16_t *)wa, lda = j->ac;
            }
            if (j->nb) {
                dense_rows(j->br, j->bc, AB_BF16, b16, j->ldb, 0, wb);
                b16 = (const uint16_t *)wb, ldb = j->bc;
            }
            if (cpu_gemm_bf16_on_part(j->be, part, j->ta, j->tb, j->M, j->N, j->K, a16, lda, b16, ldb,
                                      straight ? (float *)C : acc, straight ? j->ldc : j->N)) {
                __atomic_store_n(&j->rc, -1, __ATOMIC_RELAXED);
                return;
            }
            if (straight) continue;
            for (int r = 0; r < j->M; r++) {
                float *row = acc + (size_t)r * j->N;
                char *out = C + (size_t)r * j->ldc * ab_dtype_size(j->ct);
                for (int c = 0; c < j->N; c++) row[c] *= j->alpha;
                if (j->beta != 0.0f)
                    for (int c = 0; c < j->N; c++) row[c] += j->beta * ab_load(out, (size_t)c, j->ct);
                cpu_narrow((size_t)j->N, row, j->ct, out);
            }
            continue;
        }
        /* a 16-bit operand widened row by row into a dense block (leading dimension its columns):
         * a head's rows inside the (L, H) activations, not the other heads' columns between them */
        const float *a = (const float *)A, *b = (const float *)B;
        int lda = j->lda, ldb = j->ldb, tb = j->tb;
        if (j->at != AB_F32) {
            dense_rows(j->ar, j->ac, j->at, A, j->lda, 1, wa);
            a = wa, lda = j->ac;
        }
        if (j->bt_copy) { /* a transposed B (N x K) copied untransposed (K x N) and widened:
                             oneDNN's sgemm takes it faster (runtime_cpu.h) */
            cpu_transpose(j->N, j->K, j->bt, B, j->ldb, wb, j->N);
            b = wb, ldb = j->N, tb = 0;
        } else if (j->bt != AB_F32) {
            dense_rows(j->br, j->bc, j->bt, B, j->ldb, 1, wb);
            b = wb, ldb = j->bc;
        }
        if (j->ct == AB_F32) {
            cpu_sgemm_1(j->ta, tb, j->M, j->N, j->K, j->alpha, a, lda, b, ldb, j->beta, (float *)C, j->ldc);
            continue;
        }
        cpu_sgemm_1(j->ta, tb, j->M, j->N, j->K, j->alpha, a, lda, b, ldb, 0.0f, acc, j->N);
        if (j->beta == 0.0f) { /* the rows rounded in one call (one conversion where C is dense) */
            cpu_narrow_rows((size_t)j->M, (size_t)j->N, acc, (size_t)j->N, j->ct, C, (size_t)j->ldc);
            continue;
        }
        for (int r = 0; r < j->M; r++) {
            float *row = acc + (size_t)r * j->N;
            char *out = C + (size_t)r * j->ldc * ab_dtype_size(j->ct);
            if (j->beta != 0.0f)
                for (int c = 0; c < j->N; c++) row[c] += j->beta * ab_load(out, (size_t)c, j->ct);
            cpu_narrow((size_t)j->N, row, j->ct, out);
        }
    }
}

int ab_cpu_gemm_batched(ab_backend *be, int ta, int tb, int M, int N, int K, float alpha, ab_dtype at, const void *A,
                        int lda, long long sa, ab_dtype bt, const void *B, int ldb, long long sb, float beta,
                        ab_dtype ct, void *C, int ldc, long long sc, int batch) {
    /* the leading dimensions checked here (a 16-bit operand is copied dense before BLAS sees it) */
    AB_TRY(ab_gemm_batched_args(ta, tb, M, N, K, lda, ldb, ldc, batch));
    AB_TRY(check_type("gemm_batched", at));
    AB_TRY(check_type("gemm_batched", bt));
    AB_TRY(check_type("gemm_batched", ct));
    if (batch == 0) return 0;
    const cpu_state *st = be->impl;
    const int native = at == AB_BF16 && bt == AB_BF16 && st->bf16_native;
    if (native) AB_TRY(cpu_bf16_parts_ready(be));
    bgemm_job j = {.be = be, .ta = ta, .tb = tb, .M = M, .N = N, .K = K, .lda = lda, .ldb = ldb, .ldc = ldc,
                   .alpha = alpha, .beta = beta, .at = at, .bt = bt, .ct = ct, .A = A, .B = B, .C = C, .sa = sa,
                   .sb = sb, .sc = sc, .native = native};
    j.ar = ta ? K : M, j.ac = ta ? M : K, j.br = tb ? N : K, j.bc = tb ? K : N;
    /* scratch in floats: a 16-bit operand widened; on the native path a strided one copied dense in
     * bf16, two a float (oneDNN's matmul ran BERT-base's strided heads at 55-70% of the rate of
     * dense ones) */
    if (native) {
        j.na = lda > j.ac ? ((size_t)j.ar * (size_t)j.ac + 1) / 2 : 0;
        j.nb = ldb > j.bc ? ((size_t)j.br * (size_t)j.bc + 1) / 2 : 0;
    } else {
        j.bt_copy = tb && cpu_copies_bt(bt, (size_t)M);
        j.na = at == AB_F32 ? 0 : (size_t)j.ar * (size_t)j.ac;
        j.nb = bt == AB_F32 && !j.bt_copy ? 0 : (size_t)j.br * (size_t)j.bc;
    }
    j.nc = ct == AB_F32 && !native ? 0 : (size_t)M * (size_t)N;
    const int parts = st->threads > 1 ? st->threads : 1;
    const size_t per = j.na + j.nb + j.nc;
    if (per && !(j.buf = cpu_scratch_get(be, CPU_SLOT_LAYER_ACC, (size_t)parts * per + 1))) return -1;
    cpu_parallel_for(be, (size_t)batch, 1, bgemm_range, &j);
    if (j.rc) return ab_errorf("gemm_batched %dx%dx%d bf16: oneDNN's matmul failed in %s", M, N, K, cpu_bf16_failure(be));
    return 0;
}

/* ---- layer normalisation over rows ---- */

typedef struct {
    int R, C;
    ab_dtype xt, yt;
    const void *x, *dy;
    void *out;
    const float *gamma, *beta;
    float eps;
    float *mean, *rstd;
    double *part; /* backward: (blocks, 2C) partial sums of dy * xhat and dy, summed in order */
    float *buf;   /* per part: 3 C */
} ln_job;

enum { LN_BLOCK_ROWS = 32 }; /* backward's unit of work: its sums do not depend on the threads */

static const float *ln_row(ab_dtype t, const void *p, size_t r, int C, float *buf) {
    if (t == AB_F32) return (const float *)p + r * (size_t)C;
    cpu_widen((size_t)C, t, (const char *)p + r * (size_t)C * ab_dtype_size(t), buf);
    return buf;
}

/* A row's sums in CPU_LANES lanes (runtime_cpu.h), so that the loops vectorize and every copy
 * gives the same bits. The forward's: x - k and its squares, in double. */
static inline __attribute__((always_inline)) void ln_add(double *a, double *b, float x, double k) {
    const double d = (double)x - k;
    *a += d;
    *b += d * d;
}
static inline __attribute__((always_inline)) void ln_sums(const float *restrict x, int C, double k, double *s1,
                                                         double *s2) {
    double a[CPU_LANES] = {0}, b[CPU_LANES] = {0};
    int c = 0;
    for (; c + CPU_LANES <= C; c += CPU_LANES)
        for (int l = 0; l < CPU_LANES; l++) ln_add(&a[l], &b[l], x[c + l], k);
    for (int l = 0; c + l < C; l++) ln_add(&a[l], &b[l], x[c + l], k);
    *s1 = cpu_lanes_sum_d(a), *s2 = cpu_lanes_sum_d(b);
}

/* the backward's column c: the row's sums of g = dy gamma and g xhat into lanes lg, lgx, and
 * dy xhat, dy into the block's column sums pg, pb */
static inline __attribute__((always_inline)) void ln_bwd_add(double *lg, double *lgx, double *pg, double *pb, float x,
                                                            float dy, float gamma, float mu, float rs) {
    const float xhat = (x - mu) * rs, g = dy * gamma;
    *lg += (double)g;
    *lgx += (double)g * xhat;
    *pg += (double)dy * xhat;
    *pb += (double)dy;
}

static inline __attribute__((always_inline)) void ln_fwd_range_body(void *ctx, int part, size_t lo, size_t hi) {
    const ln_job *j = ctx;
    const int C = j->C;
    float *xb = j->buf + (size_t)part * 3 * C, *yb = xb + C;
    for (size_t r = lo; r < hi; r++) {
        const float *x = ln_row(j->xt, j->x, r, C, xb);
        const double k = x[0]; /* shifted sums, as batch norm's; in lanes (ln_sums) */
        double s1, s2;
        ln_sums(x, C, k, &s1, &s2);
        const double md = s1 / C;
        double var = s2 / C - md * md;
        if (var < 0.0) var = 0.0;
        const float mean = (float)(k + md), rstd = (float)(1.0 / sqrt(var + (double)j->eps));
        j->mean[r] = mean;
        j->rstd[r] = rstd;
        float *y = j->yt == AB_F32 ? (float *)j->out + r * (size_t)C : yb;
        for (int c = 0; c < C; c++) y[c] = (x[c] - mean) * rstd * j->gamma[c] + j->beta[c];
        if (j->yt != AB_F32) cpu_narrow((size_t)C, yb, j->yt, (char *)j->out + r * (size_t)C * ab_dtype_size(j->yt));
    }
}
CPU_RANGE_AVX512(ln_fwd_range)

int ab_cpu_layernorm_forward(ab_backend *be, int R, int C, ab_dtype xt, const void *x, const float *gamma,
                             const float *beta, float eps, float *mean, float *rstd, ab_dtype yt, void *y) {
    AB_TRY(check_type("layernorm_forward", xt));
    AB_TRY(check_type("layernorm_forward", yt));
    if (R < 1 || C < 1) return ab_errorf("layernorm_forward: bad shape R=%d C=%d", R, C);
    const cpu_state *st = be->impl;
    const int parts = st->threads > 1 ? st->threads : 1;
    ln_job j = {R, C, xt, yt, x, NULL, y, gamma, beta, eps, mean, rstd, NULL, NULL};
    if (!(j.buf = cpu_scratch_get(be, CPU_SLOT_LAYER_X, (size_t)parts * 3 * C))) return -1;
    cpu_parallel_for(be, (size_t)R, 8, ln_fwd_range, &j);
    return 0;
}

/* dx = rstd * (g - mean(g) - xhat * mean(g * xhat)) with g = dy * gamma; the row's dy * xhat and
 * dy go to part for dgamma and dbeta */
static inline __attribute__((always_inline)) void ln_bwd_range_body(void *ctx, int part, size_t lo, size_t hi) {
    const ln_job *j = ctx;
    const int C = j->C;
    float *xb = j->buf + (size_t)part * 3 * C, *db = xb + C, *ob = db + C;
    for (size_t blk = lo; blk < hi; blk++) {
        double *pg = j->part + blk * 2 * (size_t)C, *pb = pg + C;
        for (int c = 0; c < C; c++) pg[c] = pb[c] = 0.0;
        const size_t r0 = blk * LN_BLOCK_ROWS;
        const size_t r1 = r0 + LN_BLOCK_ROWS < (size_t)j->R ? r0 + LN_BLOCK_ROWS : (size_t)j->R;
        for (size_t r = r0; r < r1; r++) {
            const float *x = ln_row(j->xt, j->x, r, C, xb), *dy = ln_row(j->yt, j->dy, r, C, db);
            const float mu = j->mean[r], rs = j->rstd[r];
            double lg[CPU_LANES] = {0}, lgx[CPU_LANES] = {0}; /* the row's sums, in lanes */
            const float *gm = j->gamma;
            int c = 0;
            for (; c + CPU_LANES <= C; c += CPU_LANES)
                for (int l = 0; l < CPU_LANES; l++)
                    ln_bwd_add(&lg[l], &lgx[l], &pg[c + l], &pb[c + l], x[c + l], dy[c + l], gm[c + l], mu, rs);
            for (int l = 0; c + l < C; l++)
                ln_bwd_add(&lg[l], &lgx[l], &pg[c + l], &pb[c + l], x[c + l], dy[c + l], gm[c + l], mu, rs);
            const float mg = (float)(cpu_lanes_sum_d(lg) / C), mgx = (float)(cpu_lanes_sum_d(lgx) / C);
            /* dx may alias dy: dy's row is widened (or read) before dx's is written */
            float *dx = j->xt == AB_F32 ? (float *)j->out + r * (size_t)C : ob;
            for (int c = 0; c < C; c++) {
                const float xhat = (x[c] - mu) * rs;
                dx[c] = rs * (dy[c] * j->gamma[c] - mg - xhat * mgx);
            }
            if (j->xt != AB_F32)
                cpu_narrow((size_t)C, ob, j->xt, (char *)j->out + r * (size_t)C * ab_dtype_size(j->xt));
        }
    }
}
CPU_RANGE_AVX512(ln_bwd_range)

int ab_cpu_layernorm_backward(ab_backend *be, int R, int C, ab_dtype xt, const void *x, ab_dtype yt, const void *dy,
                              const float *gamma, const float *mean, const float *rstd, float acc, float *dgamma,
                              float *dbeta, void *dx) {
    AB_TRY(check_type("layernorm_backward", xt));
    AB_TRY(check_type("layernorm_backward", yt));
    if (R < 1 || C < 1) return ab_errorf("layernorm_backward: bad shape R=%d C=%d", R, C);
    const cpu_state *st = be->impl;
    const int parts = st->threads > 1 ? st->threads : 1;
    /* per-block sums, reduced in block order: the same sums whatever the threads */
    const size_t nblk = ((size_t)R + LN_BLOCK_ROWS - 1) / LN_BLOCK_ROWS;
    double *part = (double *)cpu_scratch_get(be, CPU_SLOT_LAYER_ACC, nblk * 4 * (size_t)C);
    ln_job j = {R, C, xt, yt, x, dy, dx, gamma, NULL, 0.0f, (float *)mean, (float *)rstd, part, NULL};
    if (!part || !(j.buf = cpu_scratch_get(be, CPU_SLOT_LAYER_X, (size_t)parts * 3 * C))) return -1;
    cpu_parallel_for(be, nblk, 1, ln_bwd_range, &j);
    for (int c = 0; c < C; c++) {
        double g = 0.0, b = 0.0;
        for (size_t k = 0; k < nblk; k++) {
            g += part[k * 2 * C + c];
            b += part[k * 2 * C + C + c];
        }
        dgamma[c] = acc != 0.0f ? acc * dgamma[c] + (float)g : (float)g;
        dbeta[c] = acc != 0.0f ? acc * dbeta[c] + (float)b : (float)b;
    }
    return 0;
}

/* ---- element-wise: GELU, tanh, dropout ---- */

enum { EW_BLOCK = 1024, EW_MIN = 1 << 14 };

typedef struct {
    int op; /* 0 gelu, 1 gelu', 2 tanh, 3 tanh', 4 dropout */
    ab_dtype t;
    const void *a, *b;
    void *out;
    float rate;
    uint64_t seed;
} ew_job;

/* one block of m elements: out = op(a, b), out overlapping neither a nor b (ew_range sees to it) */
static inline __attribute__((always_inline)) void ew_block(const ew_job *j, size_t i, size_t m,
                                                           const float *restrict fa, const float *restrict fb,
                                                           float *restrict out, uint32_t thr, float keep_scale) {
    switch (j->op) {
    case 0:
        for (size_t k = 0; k < m; k++) out[k] = ab_gelu(fa[k]);
        break;
    case 1: /* a = x, b = dy */
        for (size_t k = 0; k < m; k++) out[k] = fb[k] * ab_gelu_grad(fa[k]);
        break;
    case 2:
        for (size_t k = 0; k < m; k++) out[k] = tanhf(fa[k]);
        break;
    case 3: /* a = y, b = dy */
        for (size_t k = 0; k < m; k++) out[k] = fb[k] * (1.0f - fa[k] * fa[k]);
        break;
    default: /* dropout, forward and backward alike */
        for (size_t k = 0; k < m; k++) out[k] = ab_dropout_keep(j->seed, i + k, thr) ? fa[k] * keep_scale : 0.0f;
        break;
    }
}

/* The same loops compiled for AVX2 with FMA (8 floats a vector, and the dropout hash's 64-bit
 * lanes) and AVX-512 (16; GELU forward 2.5x as fast as the AVX2 copy on an AMX Xeon,
 * results/cpu/2026-12-05-xeon-amx-2core/gelu-fma/ops_isa.txt), chosen at run time. The CPU
 * backend's files are compiled with -ffp-contract=off, so no multiply and add is fused in any copy
 * but the explicit fmaf of GELU's polynomials (one rounding everywhere): all give the same bits. */
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
__attribute__((target("avx2,fma"))) static void ew_block_avx2(const ew_job *j, size_t i, size_t m,
                                                           const float *restrict fa, const float *restrict fb,
                                                           float *restrict out, uint32_t thr, float keep_scale) {
    ew_block(j, i, m, fa, fb, out, thr, keep_scale);
}
__attribute__((target("avx512f,avx512dq,avx512bw,avx512vl"))) static void
ew_block_avx512(const ew_job *j, size_t i, size_t m, const float *restrict fa, const float *restrict fb,
                float *restrict out, uint32_t thr, float keep_scale) {
    ew_block(j, i, m, fa, fb, out, thr, keep_scale);
}
#endif
static void ew_block_base(const ew_job *j, size_t i, size_t m, const float *restrict fa, const float *restrict fb,
                          float *restrict out, uint32_t thr, float keep_scale) {
    ew_block(j, i, m, fa, fb, out, thr, keep_scale);
}

/* whether m floats from p and from q share any */
static int overlap(const float *p, const float *q, size_t m) {
    return p && q && (uintptr_t)p < (uintptr_t)(q + m) && (uintptr_t)q < (uintptr_t)(p + m);
}

/* fp32 operands are read where they are and the result written where it goes, an operand that
 * shares memory with the output (an op in place) first copied to a block on the stack. 16-bit
 * operands are widened a block at a time on the stack and the result rounded back. */
static void ew_range(void *ctx, int part, size_t lo, size_t hi) {
    (void)part;
    const ew_job *j = ctx;
    void (*block)(const ew_job *, size_t, size_t, const float *, const float *, float *, uint32_t, float) =
        ew_block_base;
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
    if (ab_cpu_has_avx512())
        block = ew_block_avx512;
    else if (ab_cpu_has_avx2())
        block = ew_block_avx2;
#endif
    const uint32_t thr = ab_dropout_threshold(j->rate);
    const float keep_scale = j->rate < 1.0f ? 1.0f / (1.0f - j->rate) : 0.0f;
    float fa[EW_BLOCK], fb[EW_BLOCK], fo[EW_BLOCK];
    if (j->t == AB_F32) {
        const float *a = j->a, *b = j->b;
        float *out = j->out;
        for (size_t i = lo; i < hi; i += EW_BLOCK) {
            const size_t m = hi - i < EW_BLOCK ? hi - i : EW_BLOCK;
            const float *bi = b ? b + i : NULL;
            const float *ai = a + i;
            if (overlap(out + i, ai, m)) ai = memcpy(fa, ai, m * sizeof *fa);
            if (overlap(out + i, bi, m)) bi = memcpy(fb, bi, m * sizeof *fb);
            block(j, i, m, ai, bi, out + i, thr, keep_scale);
        }
        return;
    }
    const size_t es = ab_dtype_size(j->t);
    for (size_t i = lo; i < hi; i += EW_BLOCK) {
        const size_t m = hi - i < EW_BLOCK ? hi - i : EW_BLOCK;
        cpu_widen(m, j->t, (const char *)j->a + i * es, fa);
        if (j->b) cpu_widen(m, j->t, (const char *)j->b + i * es, fb);
        block(j, i, m, fa, fb, fo, thr, keep_scale);
        cpu_narrow(m, fo, j->t, (char *)j->out + i * es);
    }
}

static int ew(ab_backend *be, const char *op_name, int op, size_t n, ab_dtype t, const void *a, const void *b,
              void *out, float rate, uint64_t seed) {
    AB_TRY(check_type(op_name, t));
    ew_job j = {op, t, a, b, out, rate, seed};
    cpu_parallel_for(be, n, EW_MIN, ew_range, &j);
    return 0;
}

int ab_cpu_gelu_forward(ab_backend *be, size_t n, ab_dtype t, const void *x, void *y) {
    return ew(be, "gelu_forward", 0, n, t, x, NULL, y, 0.0f, 0);
}
int ab_cpu_gelu_backward(ab_backend *be, size_t n, ab_dtype t, const void *x, const void *dy, void *dx) {
    return ew(be, "gelu_backward", 1, n, t, x, dy, dx, 0.0f, 0);
}
int ab_cpu_tanh_forward(ab_backend *be, size_t n, ab_dtype t, const void *x, void *y) {
    return ew(be, "tanh_forward", 2, n, t, x, NULL, y, 0.0f, 0);
}
int ab_cpu_tanh_backward(ab_backend *be, size_t n, ab_dtype t, const void *y, const void *dy, void *dx) {
    return ew(be, "tanh_backward", 3, n, t, y, dy, dx, 0.0f, 0);
}

static int dropout(ab_backend *be, const char *op, size_t n, ab_dtype t, float rate, uint64_t seed, const void *x,
                   void *y) {
    if (!(rate >= 0.0f && rate < 1.0f)) return ab_errorf("%s: rate %g outside [0, 1)", op, (double)rate);
    if (rate == 0.0f) {
        if (x != y) memmove(y, x, n * ab_dtype_size(t));
        return 0;
    }
    return ew(be, op, 4, n, t, x, NULL, y, rate, seed);
}
int ab_cpu_dropout_forward(ab_backend *be, size_t n, ab_dtype t, float rate, uint64_t seed, const void *x, void *y) {
    return dropout(be, "dropout_forward", n, t, rate, seed, x, y);
}
int ab_cpu_dropout_backward(ab_backend *be, size_t n, ab_dtype t, float rate, uint64_t seed, const void *dy, void *dx) {
    return dropout(be, "dropout_backward", n, t, rate, seed, dy, dx);
}

/* ---- the attention softmax ---- */

typedef struct {
    int heads, L;
    ab_dtype t;
    float scale;
    const void *x, *dp;
    const int32_t *mask;
    void *out;
    float *buf; /* per part: 2 L */
} sm_job;

/* A row's max, its exponentials and their sum in CPU_LANES lanes (runtime_cpu.h), so that the
 * loops vectorize and every copy gives the same bits. The max: a NaN score makes it NaN (then the
 * row); the sign of a zero max aside, any order gives the same. The exponential is ab_exp's bits
 * (core/kernel_math.h, branch-free; ab_exp_nonpos, as scale x - max is never above 0), the CUDA
 * twin's too; the sum is in double. */

/* the max's rule: x replaces mx when it is larger or NaN */
static inline __attribute__((always_inline)) float sm_max(float mx, float x) { return x > mx || x != x ? x : mx; }

static inline __attribute__((always_inline)) void sm_max_add(float *mx, int *an, float x, int32_t kept) {
    const int m = kept != 0;
    *mx = m ? sm_max(*mx, x) : *mx;
    *an |= m;
}
static inline __attribute__((always_inline)) float sm_row_max(const float *restrict v, const int32_t *restrict mk,
                                                             int L, float scale, int *any) {
    float mx[CPU_LANES];
    int an[CPU_LANES];
    for (int l = 0; l < CPU_LANES; l++) mx[l] = -INFINITY, an[l] = 0;
    int c = 0;
    for (; c + CPU_LANES <= L; c += CPU_LANES)
        for (int l = 0; l < CPU_LANES; l++) sm_max_add(&mx[l], &an[l], scale * v[c + l], mk[c + l]);
    for (int l = 0; c + l < L; l++) sm_max_add(&mx[l], &an[l], scale * v[c + l], mk[c + l]);
    for (int w = CPU_LANES / 2; w > 0; w /= 2)
        for (int l = 0; l < w; l++) mx[l] = sm_max(mx[l], mx[l + w]), an[l] |= an[l + w];
    *any = an[0];
    return mx[0];
}

/* v = exp(scale v - mx) where the key is kept, else 0; added to the lane */
static inline __attribute__((always_inline)) void sm_exp_add(double *acc, float *v, int32_t kept, float scale,
                                                            float mx) {
    const float e = kept ? ab_exp_nonpos(scale * *v - mx) : 0.0f;
    *v = e;
    *acc += e;
}
/* the row's exponentials in place; returns their sum */
static inline __attribute__((always_inline)) double sm_row_exp(float *restrict v, const int32_t *restrict mk, int L,
                                                              float scale, float mx) {
    double acc[CPU_LANES] = {0};
    int c = 0;
    for (; c + CPU_LANES <= L; c += CPU_LANES)
        for (int l = 0; l < CPU_LANES; l++) sm_exp_add(&acc[l], &v[c + l], mk[c + l], scale, mx);
    for (int l = 0; c + l < L; l++) sm_exp_add(&acc[l], &v[c + l], mk[c + l], scale, mx);
    return cpu_lanes_sum_d(acc);
}

static inline __attribute__((always_inline)) void sm_fwd_range_body(void *ctx, int part, size_t lo, size_t hi) {
    const sm_job *j = ctx;
    const int L = j->L;
    float *buf = j->buf + (size_t)part * 2 * L;
    const size_t es = ab_dtype_size(j->t);
    for (size_t r = lo; r < hi; r++) { /* r = (b * heads + h) * L + i */
        const int32_t *mk = j->mask + (r / ((size_t)j->heads * L)) * L;
        float *row = buf; /* the scores, then the exponentials, then the probabilities */
        if (j->t == AB_F32) { /* in the output row itself (the scores' own row, in place) */
            row = (float *)j->out + r * L;
            const float *x = (const float *)j->x + r * L;
            if (x != row) memmove(row, x, (size_t)L * sizeof *row);
        } else {
            cpu_widen((size_t)L, j->t, (const char *)j->x + r * L * es, row);
        }
        int any;
        const float mx = sm_row_max(row, mk, L, j->scale, &any);
        const double sum = sm_row_exp(row, mk, L, j->scale, mx);
        const float inv = any ? (float)(1.0 / sum) : 0.0f;
        for (int c = 0; c < L; c++) row[c] = any ? row[c] * inv : 0.0f;
        if (j->t != AB_F32) cpu_narrow((size_t)L, row, j->t, (char *)j->out + r * L * es);
    }
}
CPU_RANGE_AVX512(sm_fwd_range)

int ab_cpu_softmax_forward(ab_backend *be, int B, int heads, int L, ab_dtype t, float scale, const void *x,
                           const int32_t *mask, void *p) {
    AB_TRY(check_type("softmax_forward", t));
    if (B < 1 || heads < 1 || L < 1) return ab_errorf("softmax_forward: bad shape B=%d heads=%d L=%d", B, heads, L);
    const cpu_state *st = be->impl;
    const int parts = st->threads > 1 ? st->threads : 1;
    sm_job j = {heads, L, t, scale, x, NULL, mask, p, NULL};
    if (!(j.buf = cpu_scratch_get(be, CPU_SLOT_LAYER_X, (size_t)parts * 2 * L))) return -1;
    cpu_parallel_for(be, (size_t)B * heads * L, 16, sm_fwd_range, &j);
    return 0;
}

/* sum_c g[c] p[c] in double (exact products), in lanes */
static inline __attribute__((always_inline)) double sm_row_dot(const float *restrict g, const float *restrict p,
                                                              int L) {
    double acc[CPU_LANES] = {0};
    int c = 0;
    for (; c + CPU_LANES <= L; c += CPU_LANES)
        for (int l = 0; l < CPU_LANES; l++) acc[l] += (double)g[c + l] * p[c + l];
    for (int l = 0; c + l < L; l++) acc[l] += (double)g[c + l] * p[c + l];
    return cpu_lanes_sum_d(acc);
}

static inline __attribute__((always_inline)) void sm_bwd_range_body(void *ctx, int part, size_t lo, size_t hi) {
    const sm_job *j = ctx;
    const int L = j->L;
    const float scale = j->scale;
    float *pb = j->buf + (size_t)part * 2 * L, *gb = pb + L;
    const size_t es = ab_dtype_size(j->t);
    for (size_t r = lo; r < hi; r++) {
        if (j->t == AB_F32) { /* where they are; dx may be dp itself */
            const float *p = (const float *)j->x + r * L, *g = (const float *)j->dp + r * L;
            float *dx = (float *)j->out + r * L;
            const float sf = (float)sm_row_dot(g, p, L);
            if (dx == g) {
                for (int c = 0; c < L; c++) dx[c] = scale * p[c] * (dx[c] - sf);
            } else {
                float *restrict d = dx;
                for (int c = 0; c < L; c++) d[c] = scale * p[c] * (g[c] - sf);
            }
            continue;
        }
        cpu_widen((size_t)L, j->t, (const char *)j->x + r * L * es, pb);
        cpu_widen((size_t)L, j->t, (const char *)j->dp + r * L * es, gb);
        const float sf = (float)sm_row_dot(gb, pb, L);
        for (int c = 0; c < L; c++) gb[c] = scale * pb[c] * (gb[c] - sf);
        cpu_narrow((size_t)L, gb, j->t, (char *)j->out + r * L * es);
    }
}
CPU_RANGE_AVX512(sm_bwd_range)

int ab_cpu_softmax_backward(ab_backend *be, int rows, int L, ab_dtype t, float scale, const void *p, const void *dp,
                            void *dx) {
    AB_TRY(check_type("softmax_backward", t));
    if (rows < 1 || L < 1) return ab_errorf("softmax_backward: bad shape rows=%d L=%d", rows, L);
    const cpu_state *st = be->impl;
    const int parts = st->threads > 1 ? st->threads : 1;
    sm_job j = {1, L, t, scale, p, dp, NULL, dx, NULL};
    if (!(j.buf = cpu_scratch_get(be, CPU_SLOT_LAYER_X, (size_t)parts * 2 * L))) return -1;
    cpu_parallel_for(be, (size_t)rows, 16, sm_bwd_range, &j);
    return 0;
}

/* ---- embeddings ---- */

typedef struct {
    int L, C, vocab, n_types;
    const int32_t *ids, *types;
    const float *word, *pos, *type;
    float *y;
} emb_job;

static void emb_fwd_range(void *ctx, int part, size_t lo, size_t hi) {
    (void)part;
    const emb_job *j = ctx;
    const int C = j->C;
    for (size_t r = lo; r < hi; r++) {
        float *y = j->y + r * (size_t)C;
        const int id = j->ids[r], ty = j->types[r];
        if (id < 0 || id >= j->vocab || ty < 0 || ty >= j->n_types) { /* as a device would: a NaN row */
            for (int c = 0; c < C; c++) y[c] = NAN;
            continue;
        }
        const float *w = j->word + (size_t)id * C, *p = j->pos + (r % (size_t)j->L) * C, *t = j->type + (size_t)ty * C;
        for (int c = 0; c < C; c++) y[c] = w[c] + p[c] + t[c];
    }
}

int ab_cpu_embedding_forward(ab_backend *be, int R, int L, int C, const int32_t *ids, const int32_t *types,
                             const float *word, int vocab, const float *pos, const float *type, int n_types, float *y) {
    if (R < 1 || L < 1 || C < 1 || R % L) return ab_errorf("embedding_forward: bad shape R=%d L=%d C=%d", R, L, C);
    emb_job j = {L, C, vocab, n_types, ids, types, word, pos, type, y};
    cpu_parallel_for(be, (size_t)R, 64, emb_fwd_range, &j);
    return 0;
}

int ab_cpu_embedding_backward(ab_backend *be, int R, int L, int C, const int32_t *ids, const int32_t *types,
                              const float *dy, int vocab, int n_types, int acc, float *dword, float *dpos,
                              float *dtype) {
    (void)be;
    if (R < 1 || L < 1 || C < 1 || R % L) return ab_errorf("embedding_backward: bad shape R=%d L=%d C=%d", R, L, C);
    if (!acc) {
        memset(dword, 0, (size_t)vocab * C * sizeof(float));
        memset(dpos, 0, (size_t)L * C * sizeof(float)); /* the positions past L keep their zero */
        memset(dtype, 0, (size_t)n_types * C * sizeof(float));
    }
    /* in row order, one thread: a scatter-add whose sums must not depend on the threads */
    for (int r = 0; r < R; r++) {
        const int id = ids[r], ty = types[r];
        if (id < 0 || id >= vocab || ty < 0 || ty >= n_types) continue;
        const float *g = dy + (size_t)r * C;
        float *w = dword + (size_t)id * C, *p = dpos + (size_t)(r % L) * C, *t = dtype + (size_t)ty * C;
        for (int c = 0; c < C; c++) {
            w[c] += g[c];
            p[c] += g[c];
            t[c] += g[c];
        }
    }
    return 0;
}

/* ---- batches of rows; the gradient norm ---- */

int ab_cpu_gather_rows(ab_backend *be, int B, size_t row_bytes, const void *rows, const int32_t *idx, void *out) {
    (void)be;
    if (B < 0) return ab_errorf("gather_rows: %d rows", B);
    for (int b = 0; b < B; b++)
        memcpy((char *)out + (size_t)b * row_bytes, (const char *)rows + (size_t)idx[b] * row_bytes, row_bytes);
    return 0;
}

/* sum of squares: fp32 sums over blocks of 1024, the blocks summed in double in order; the blocks
 * are taken over the pool, so the result does not depend on the threads. Within a block, in
 * CPU_LANES lanes (runtime_cpu.h; a lane's 64 terms in fp32): the same bits in every copy, and no
 * chain of 1,024 dependent additions to wait on. */
typedef struct {
    const float *x;
    float *out;
    size_t n;
    float s;
} sq_job;

enum { SQ_BLOCK = 1024, SQ_MIN_BLOCKS = 32 };

/* a block's m <= SQ_BLOCK squares */
static inline __attribute__((always_inline)) float sq_block(const float *restrict x, size_t m) {
    float lane[CPU_LANES] = {0};
    size_t k = 0;
    for (; k + CPU_LANES <= m; k += CPU_LANES)
        for (int l = 0; l < CPU_LANES; l++) lane[l] += x[k + l] * x[k + l];
    for (int l = 0; k + (size_t)l < m; l++) lane[l] += x[k + l] * x[k + l];
    return cpu_lanes_sum_f(lane);
}

static inline __attribute__((always_inline)) void sq_range_body(void *ctx, int part, size_t lo, size_t hi) {
    (void)part;
    const sq_job *j = ctx;
    for (size_t blk = lo; blk < hi; blk++) {
        const size_t i = blk * SQ_BLOCK, m = j->n - i < SQ_BLOCK ? j->n - i : SQ_BLOCK;
        j->out[blk] = sq_block(j->x + i, m);
    }
}
CPU_RANGE_AVX512(sq_range)

/* the block sums, added in double in order into *out */
static void sq_total(const float *part, size_t blocks, float *out) {
    double s = 0.0;
    for (size_t b = 0; b < blocks; b++) s += part[b];
    *out += (float)s;
}

int ab_cpu_sum_squares(ab_backend *be, size_t n, const float *x, float *out) {
    const size_t blocks = (n + SQ_BLOCK - 1) / SQ_BLOCK;
    float *part = cpu_scratch_get(be, 2, blocks ? blocks : 1);
    if (!part) return -1;
    sq_job j = {x, part, n, 0.0f};
    cpu_parallel_for(be, blocks, SQ_MIN_BLOCKS, sq_range, &j);
    sq_total(part, blocks, out);
    return 0;
}

/* unscale_check: a block of sum_squares's at a time multiplied and checked, and with sum_sq its
 * squares summed while it is in the cache, as sum_squares sums them (the same blocks, sq_block and
 * sq_total: the same bits) */
typedef struct {
    float *g, *out; /* out: the block sums, or NULL */
    size_t n;
    float inv;
    int bad;
} usq_job;

static inline __attribute__((always_inline)) void usq_range_body(void *ctx, int part, size_t lo, size_t hi) {
    (void)part;
    usq_job *j = ctx;
    int bad = 0;
    for (size_t blk = lo; blk < hi; blk++) {
        const size_t i = blk * SQ_BLOCK, m = j->n - i < SQ_BLOCK ? j->n - i : SQ_BLOCK;
        float *restrict x = j->g + i;
        if (j->inv == 1.0f) { /* g * 1 is g: the check alone, no stores */
            for (size_t k = 0; k < m; k++) bad |= !ab_is_finite(x[k]);
        } else {
            for (size_t k = 0; k < m; k++) {
                x[k] *= j->inv;
                bad |= !ab_is_finite(x[k]);
            }
        }
        if (j->out) j->out[blk] = sq_block(x, m);
    }
    if (bad) __atomic_store_n(&j->bad, 1, __ATOMIC_RELAXED);
}
CPU_RANGE_AVX512(usq_range)

int ab_cpu_unscale_check(ab_backend *be, size_t n, float *g, float inv_scale, int32_t *found_inf, float *sum_sq) {
    const size_t blocks = (n + SQ_BLOCK - 1) / SQ_BLOCK;
    float *part = sum_sq ? cpu_scratch_get(be, 2, blocks ? blocks : 1) : NULL;
    if (sum_sq && !part) return -1;
    usq_job j = {g, part, n, inv_scale, 0};
    cpu_parallel_for(be, blocks, SQ_MIN_BLOCKS, usq_range, &j);
    if (j.bad) *found_inf = 1;
    if (sum_sq) sq_total(part, blocks, sum_sq);
    return 0;
}

static void scale_range(void *ctx, int part, size_t lo, size_t hi) {
    (void)part;
    const sq_job *j = ctx;
    for (size_t i = lo; i < hi; i++) j->out[i] *= j->s;
}

int ab_cpu_scale(ab_backend *be, size_t n, float *x, float s) {
    sq_job j = {NULL, x, n, s};
    cpu_parallel_for(be, n, 1 << 15, scale_range, &j);
    return 0;
}
