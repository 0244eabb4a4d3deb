/* The CPU backend: the reference implementation of every op. Matrix products go to OpenBLAS
 * sgemm; operands stored in fp16/bf16 are widened exactly to fp32 first and the fp32 result
 * is rounded once to the output type, which is what a GPU GEMM with fp32 accumulation does
 * (up to summation order). Element-wise ops run the shared AB_HD math of core/kernel_math.h. */
#include <cblas.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "backend_cpu.h"
#include "cpu_internal.h"
#include "kernel_math.h"

static int cpu_copy(ab_backend *be, void *dst, const void *src, size_t bytes) {
    (void)be;
    if (bytes) memmove(dst, src, bytes);
    return 0;
}

static void zero_range(void *ctx, int part, size_t lo, size_t hi) {
    (void)part;
    memset((char *)ctx + lo, 0, hi - lo);
}

/* over the pool from 1 MiB a thread: a gradient table's zeroing is a pass over memory */
static int cpu_zero(ab_backend *be, void *p, size_t bytes) {
    cpu_parallel_for(be, bytes, (size_t)1 << 20, zero_range, p);
    return 0;
}

static int cpu_sync(ab_backend *be) {
    (void)be;
    return 0;
}

static int cpu_map_data(ab_backend *be, const void *host, size_t bytes, const void **mapped) {
    (void)be;
    (void)bytes;
    *mapped = host;
    return 0;
}

static void cpu_unmap_data(ab_backend *be, const void *mapped, size_t bytes) {
    (void)be;
    (void)mapped;
    (void)bytes;
}

/* ---- matrix products ----
 * A product whose operands or result are stored in 16 bits, or that has an epilogue, runs as one
 * job over the pool, the conversions inside it: each tile of C's rows (below) widens the
 * rows of A it reads (A not transposed), multiplies them on its own thread (oneDNN's sgemm, or its
 * bf16 matmul where the CPU multiplies bf16 natively), then adds the bias, applies the ReLU, adds
 * beta C and rounds to C's type while its rows are still in its cache. The rows are cut into tiles
 * by the product's shape alone (cpu_gemm_tile), one library call a tile, so that the sums do not
 * depend on the threads. A part widens its tiles' rows of A, and holds their sums, in blocks of its
 * own where it needs them (a 16-bit A not transposed; sums that C cannot hold), one tile's worth
 * each, reused from tile to tile, where the whole of A and C had their fp32 copies (BERT-base's
 * AMP scratch at batch 8: 28.8 MB, not 38.2; 28.9 since the products that run in one part have
 * slots of their own, gemm_slots). Only what every part reads is widened first, over the pool: B
 * (the weights, as a rule; a transposed B copied untransposed, op_b_f32) and a transposed A (but
 * a small one, which each part widens its columns of into a copy of its own: a32cols). A product
 * with few rows and many columns, or one whose transposed B is copied and whose columns make more
 * tiles than its rows (cpu_gemm_copies_by_columns: the MLP's first layer), is cut by columns
 * instead (cpu_sgemm's tiles), each part converting its own tile of B's columns where B needs it
 * (gemm_col_tiles), widening a small 16-bit A whole into its own copy, and rounding its tile of C.
 * gemm_fold's epilogue rounds the sums to the compute type and folds them into the fp32 gradient
 * (round). */

typedef struct {
    ab_backend *be;
    int ta, tb, M, N, K, lda, ldb, ldc, native, direct, tile;
    float alpha, beta, post_alpha; /* post_alpha: alpha when the product left it out (native bf16), else 1 */
    ab_dtype at, ct;
    ab_dtype round;    /* gemm_fold: the type the sums are rounded to before beta C is added (fp32 C); else fp32 */
    const void *A;     /* as stored */
    const float *a32;  /* A widened whole (transposed 16-bit A), or NULL */
    float *a32cols;    /* a small transposed 16-bit A (CPU_GEMM_OWN_A_MAX): each part's own copy, laid out as
                        * a32, a_part floats apart, into which the part widens the columns its tiles read */
    float *a32rows;    /* scratch the parts widen their rows of A into (A not transposed): a block a part,
                        * a_part floats apart */
    const void *B;     /* as stored (native bf16) */
    const float *b32;  /* B in fp32: itself, widened, or copied untransposed (then tb 0, ldb N) */
    const float *bias; /* fp32, or NULL */
    ab_epilogue epi;
    float *acc;        /* the fp32 sums (NULL when direct): C itself for an fp32 C that beta leaves out; else
                        * by rows, a tile's block a part (acc_part floats apart), reused from tile to tile
                        * so that it stays in the part's cache; by columns, M x N */
    int acc_ld;
    size_t acc_part;   /* the per-part blocks' stride, or 0 (acc holds C's rows where C has them) */
    size_t a_part;     /* a32rows, a32cols: the per-part blocks' stride */
    float *rows;       /* 2 x (N, or a column tile) floats a part: the epilogue's row and the old C row */
    void *C;
    int failed;
    int nonfinite; /* under round (gemm_fold): a value stored into G was infinite or NaN */
} gemm_job;

/* n rounded up to a multiple of m (per-part blocks start on 64-byte boundaries) */
static size_t cpu_round_up(size_t n, size_t m) { return (n + m - 1) / m * m; }

/* the values a matrix of rows x cols stored with leading dimension ld spans, first to last */
static size_t stored_extent(int rows, int cols, int ld) { return (size_t)(rows - 1) * (size_t)ld + (size_t)cols; }

/* whether a 16-bit A spanning `extent` values is widened by each of a product's parts into a copy
 * of its own (a32cols cut by rows, a_own cut by columns) rather than once over the pool:
 * CPU_GEMM_OWN_A_MAX in runtime_cpu.h */
static int own_a_copies(ab_dtype at, int parts, size_t extent) {
    return at != AB_F32 && parts > 1 && extent <= CPU_GEMM_OWN_A_MAX;
}

/* C's rows [lo, hi), columns [c0, c1): alpha acc + bias, ReLU, + beta C, rounded once to ct; acc
 * points at row lo's sum for column c0 */
static void gemm_epilogue(const gemm_job *j, float *row, const float *acc, size_t lo, size_t hi, int c0, int c1) {
    const int n = c1 - c0;
    float *old = row + n;
    const float *bias = j->bias ? j->bias + c0 : NULL;
    for (size_t i = lo; i < hi; i++) {
        const float *in = acc + (i - lo) * (size_t)j->acc_ld;
        void *out = j->ct == AB_F32 ? (void *)((float *)j->C + i * (size_t)j->ldc + c0)
                                    : (void *)((uint16_t *)j->C + i * (size_t)j->ldc + c0);
        if (j->round != AB_F32) { /* gemm_fold's (cpu_gemm_run admits no other epilogue with it):
                                      * rounded to the compute type and widened back, stored or added
                                      * (beta 1, old value first as ab_cpu_accumulate adds), checked */
            if (cpu_round_trip((size_t)n, j->round, in, (float *)out, j->beta != 0.0f))
                __atomic_store_n((int *)&j->nonfinite, 1, __ATOMIC_RELAXED);
            continue;
        }
        if (j->post_alpha == 1.0f && !bias && j->epi == AB_EPI_NONE && j->ct != AB_F32 && j->beta == 0.0f) {
            cpu_narrow((size_t)n, in, j->ct, out); /* rounding alone */
            continue;
        }
        for (int c = 0; c < n; c++) row[c] = j->post_alpha * in[c];
        if (bias)
            for (int c = 0; c < n; c++) row[c] += bias[c];
        if (j->epi == AB_EPI_RELU) /* NaN stays NaN */
            for (int c = 0; c < n; c++) row[c] = row[c] < 0.0f ? 0.0f : row[c];
        if (j->beta != 0.0f) {
            cpu_widen((size_t)n, j->ct, out, old);
            for (int c = 0; c < n; c++) row[c] += j->beta * old[c];
        }
        cpu_narrow((size_t)n, row, j->ct, out);
    }
}

/* C's rows [r0, r1) */
static int gemm_block(gemm_job *j, int part, int r0, int r1) {
    const int m = r1 - r0;
    float *acc = j->direct ? NULL : j->acc_part ? j->acc + (size_t)part * j->acc_part : j->acc + (size_t)r0 * j->acc_ld;
    float *dst = j->direct ? (float *)j->C + (size_t)r0 * j->ldc : acc;
    const int ldd = j->direct ? j->ldc : j->acc_ld;
    const size_t ao = j->ta ? (size_t)r0 : (size_t)r0 * j->lda; /* op(A)'s row r0 */
    if (j->native) {
        if (cpu_gemm_bf16_on_part(j->be, part, j->ta, j->tb, m, j->N, j->K, (const uint16_t *)j->A + ao, j->lda, j->B,
                                  j->ldb, dst, ldd))
            return -1;
    } else {
        const float *a = j->a32cols ? j->a32cols + (size_t)part * j->a_part + ao
                         : j->a32   ? j->a32 + ao
                                    : (const float *)j->A + ao;
        if (!j->a32 && !j->a32cols && j->at != AB_F32) { /* these rows of A, widened into the part's own block */
            float *w = j->a32rows + (size_t)part * j->a_part;
            cpu_widen((size_t)(m - 1) * j->lda + (size_t)j->K, j->at, (const char *)j->A + ao * 2, w);
            a = w;
        }
        cpu_sgemm_1(j->ta, j->tb, m, j->N, j->K, j->alpha, a, j->lda, j->b32, j->ldb, j->direct ? j->beta : 0.0f, dst,
                    ldd);
    }
    if (!j->direct) gemm_epilogue(j, j->rows + (size_t)part * 2 * j->N, acc, (size_t)r0, (size_t)r1, 0, j->N);
    return 0;
}

/* tiles [lo, hi) of j->tile rows: each its product, then its epilogue while its sums are in cache;
 * first, with a32cols, the columns of the stored A that these tiles' rows of op(A) are, widened
 * into the part's own copy */
static void gemm_tiles(void *ctx, int part, size_t lo, size_t hi) {
    gemm_job *j = ctx;
    if (j->a32cols && hi > lo) {
        const size_t r0 = lo * (size_t)j->tile, end = hi * (size_t)j->tile, r1 = end < (size_t)j->M ? end : (size_t)j->M;
        cpu_widen_rows((size_t)j->K, r1 - r0, j->at, (const uint16_t *)j->A + r0, (size_t)j->lda,
                       j->a32cols + (size_t)part * j->a_part + r0, (size_t)j->lda);
    }
    for (size_t t = lo; t < hi; t++) {
        const int r0 = (int)t * j->tile, r1 = j->M - r0 < j->tile ? j->M : r0 + j->tile;
        if (gemm_block(j, part, r0, r1)) {
            __atomic_store_n(&j->failed, 1, __ATOMIC_RELAXED);
            return;
        }
    }
}

/* A product with few rows and many columns, cut into cpu_sgemm's column tiles of j->tile: each
 * tile of op(B)'s columns multiplied as B is stored (fp32), or, where B needs converting (16-bit,
 * or transposed and worth the copy: cpu_copies_bt), first widened (copied untransposed) into the
 * part's own slice of bcols and multiplied while that is in its cache; then that block of C taken
 * through the epilogue. B never goes through memory in fp32 (a 512 x 4608 filter is 9 MiB of it),
 * and every library call has the shape cpu_sgemm would give it. */
typedef struct {
    gemm_job *g;
    ab_dtype bt;
    int convert;    /* B converted a tile at a time (else multiplied as it is stored, fp32) */
    const float *a; /* op(A) in fp32, or NULL with a_own */
    float *a_own;   /* a small 16-bit A (CPU_GEMM_OWN_A_MAX): each part's own copy, a_part floats apart, into
                     * which the part widens the whole of A (a_n floats as stored) before its first tile */
    size_t a_n, a_part;
    float *bcols;   /* K x tile floats a part (convert) */
} gemm_cols_job;

static void gemm_col_tiles(void *ctx, int part, size_t lo, size_t hi) {
    const gemm_cols_job *cj = ctx;
    const gemm_job *j = cj->g;
    const int K = j->K, es = (int)ab_dtype_size(cj->bt);
    const float *a = cj->a;
    if (cj->a_own && hi > lo) {
        float *w = cj->a_own + (size_t)part * cj->a_part;
        cpu_widen(cj->a_n, j->at, j->A, w);
        a = w;
    }
    for (size_t t = lo; t < hi; t++) {
        const int c0 = (int)t * j->tile, n = j->N - c0 < j->tile ? j->N - c0 : j->tile;
        int tb = j->tb, ldb = j->ldb;
        const float *b = (const float *)j->B + (tb ? (size_t)c0 * ldb : (size_t)c0);
        if (cj->convert) {
            float *w = cj->bcols + (size_t)part * K * j->tile;
            if (tb) /* B's rows c0.. (n x K) as K x n */
                cpu_transpose(n, K, cj->bt, (const char *)j->B + (size_t)c0 * ldb * es, ldb, w, n);
            else
                cpu_widen_rows((size_t)K, (size_t)n, cj->bt, (const char *)j->B + (size_t)c0 * es, (size_t)ldb, w,
                               (size_t)n);
            b = w, tb = 0, ldb = n;
        }
        if (j->direct) {
            cpu_sgemm_1(j->ta, tb, j->M, n, K, j->alpha, a, j->lda, b, ldb, j->beta, (float *)j->C + c0, j->ldc);
        } else {
            cpu_sgemm_1(j->ta, tb, j->M, n, K, j->alpha, a, j->lda, b, ldb, 0.0f, j->acc + c0, j->acc_ld);
            gemm_epilogue(j, j->rows + (size_t)part * 2 * j->tile, j->acc + c0, 0, (size_t)j->M, c0, c0 + n);
        }
    }
}

/* the whole stored matrix X (rows x cols used, leading dimension ld) in fp32 scratch slot, widened
 * over the pool, or on the calling thread alone (serial: a product that runs in one part, whose
 * thread would otherwise read lines the pool's other threads have just written, after waking them
 * for a few microseconds' work); X itself when it is fp32 */
static const float *widened(ab_backend *be, int slot, ab_dtype t, const void *X, int rows, int cols, int ld,
                            int serial) {
    if (t == AB_F32) return X;
    const size_t n = stored_extent(rows, cols, ld);
    float *w = cpu_scratch_get(be, slot, n);
    if (w && serial)
        cpu_widen(n, t, X, w);
    else if (w)
        cpu_widen_par(be, n, t, X, w);
    return w;
}

/* op(B) (K x N) in fp32 for a product of M rows: a transposed B copied untransposed and widened
 * into scratch slot `slot` where that pays (oneDNN's sgemm takes it faster: runtime_cpu.h); a 16-bit
 * B widened there as it is stored; an fp32 one itself. *tb and *ldb say how the result is stored. */
static const float *op_b_f32(ab_backend *be, int slot, int M, ab_dtype bt, const void *B, int *tb, int N, int K,
                            int *ldb, int serial) {
    if (*tb && cpu_copies_bt(bt, (size_t)M)) {
        float *w = cpu_scratch_get(be, slot, (size_t)K * (size_t)N);
        if (w && serial)
            cpu_transpose(N, K, bt, B, *ldb, w, N);
        else if (w)
            cpu_transpose_par(be, N, K, bt, B, *ldb, w, N);
        *tb = 0, *ldb = N;
        return w;
    }
    return widened(be, slot, bt, B, *tb ? N : K, *tb ? K : N, *ldb, serial);
}

/* the first of the CPU_GEMM_SLOTS scratch slots (widened A, B, sums, bias, epilogue rows) of a
 * product that runs in `parts` parts: its own when it runs in one, on the calling thread
 * (runtime_cpu.h) */
static int gemm_slots(int parts) { return parts == 1 ? CPU_SLOT_GEMM_SERIAL : 0; }

/* cpu_internal.h: ab_cpu_gemm, and with round (not fp32) gemm_fold's product */
int cpu_gemm_run(ab_backend *be, int ta, int tb, int M, int N, int K, float alpha, ab_dtype at, const void *A, int lda,
                 ab_dtype bt, const void *B, int ldb, const void *bias, ab_epilogue epi, float beta, ab_dtype ct,
                 void *C, int ldc, ab_dtype round, int32_t *found_inf) {
    if (M <= 0 || N <= 0 || K <= 0) return ab_errorf("gemm: bad shape M=%d N=%d K=%d", M, N, K);
    if (round != AB_F32 && (ct != AB_F32 || bias || epi != AB_EPI_NONE || alpha != 1.0f || (beta != 0.0f && beta != 1.0f)))
        return ab_errorf("gemm: a fold's rounding takes an fp32 C, alpha 1, beta 0 or 1 and no epilogue");
    const cpu_state *st = be->impl;
    const int native = at == AB_BF16 && bt == AB_BF16 && st->bf16_native;
    /* sgemm's own alpha and beta do it all */
    const int plain = ct == AB_F32 && !bias && epi == AB_EPI_NONE && round == AB_F32;
    gemm_job j = {.be = be, .ta = ta, .tb = tb, .M = M, .N = N, .K = K, .lda = lda, .ldb = ldb, .ldc = ldc,
                  .native = native, .direct = plain && (!native || (alpha == 1.0f && beta == 0.0f)), .alpha = alpha,
                  .beta = beta, .post_alpha = native ? alpha : 1.0f, .at = at, .ct = ct, .round = round, .A = A,
                  .B = B, .epi = epi, .C = C};
    if (native) AB_TRY(cpu_bf16_parts_ready(be));
    const double macs = (double)M * N * K;
    j.tile = cpu_gemm_tile(M, macs);
    const int copies_bt = tb && cpu_copies_bt(bt, (size_t)M);
    if (native ? cpu_gemm_by_columns(M, N, macs) : cpu_gemm_copies_by_columns(M, N, macs, copies_bt)) {
        /* few rows, many columns, or a transposed B to copy that makes more column tiles than rows:
         * cpu_sgemm's column tiles */
        if (native) {
            if (j.direct) return cpu_gemm_bf16_native(be, ta, tb, M, N, K, A, lda, B, ldb, C, ldc);
            j.acc = cpu_scratch_get(be, CPU_GEMM_SUMS, (size_t)M * N);
            j.acc_ld = N;
            if (!j.acc || cpu_gemm_bf16_native(be, ta, tb, M, N, K, A, lda, B, ldb, j.acc, N)) return -1;
            j.bias = bias ? widened(be, CPU_GEMM_BIAS, bt, bias, 1, N, N, 1) : NULL;
            j.rows = cpu_scratch_get(be, CPU_GEMM_ROWS, 2 * (size_t)N);
            if ((bias && !j.bias) || !j.rows) return -1;
            gemm_epilogue(&j, j.rows, j.acc, 0, (size_t)M, 0, N);
            if (found_inf && j.nonfinite) *found_inf = 1;
            return 0;
        }
        const int convert = bt != AB_F32 || copies_bt;
        const int ctile = cpu_gemm_tile(N, macs), tiles = cpu_gemm_tiles(N, macs),
                  parts = cpu_parallel_parts(be, (size_t)tiles, 1), sb = gemm_slots(parts);
        const size_t a_n = stored_extent(ta ? K : M, ta ? M : K, lda);
        gemm_cols_job cj = {.g = &j, .bt = bt, .convert = convert,
                            .bcols = convert ? cpu_scratch_get(be, sb + CPU_GEMM_B, (size_t)parts * K * ctile) : NULL};
        if (own_a_copies(at, parts, a_n)) {
            cj.a_n = a_n, cj.a_part = cpu_round_up(a_n, 16);
            cj.a_own = cpu_scratch_get(be, sb + CPU_GEMM_A, cj.a_part * (size_t)parts);
            if (!cj.a_own) return -1;
        } else {
            cj.a = widened(be, sb + CPU_GEMM_A, at, A, ta ? K : M, ta ? M : K, lda, parts == 1);
            if (!cj.a) return -1;
        }
        if (convert && !cj.bcols) return -1;
        j.tile = ctile;
        if (!j.direct) {
            j.acc = cpu_scratch_get(be, sb + CPU_GEMM_SUMS, (size_t)M * N);
            j.acc_ld = N;
            j.bias = bias ? widened(be, sb + CPU_GEMM_BIAS, bt, bias, 1, N, N, parts == 1) : NULL;
            j.rows = cpu_scratch_get(be, sb + CPU_GEMM_ROWS, 2 * (size_t)ctile * parts);
            if (!j.acc || (bias && !j.bias) || !j.rows) return -1;
        }
        cpu_parallel_for(be, (size_t)tiles, 1, gemm_col_tiles, &cj);
        if (found_inf && j.nonfinite) *found_inf = 1;
        return 0;
    }
    const size_t tiles = (size_t)cpu_gemm_tiles(M, macs);
    const int parts = cpu_parallel_parts(be, tiles, 1), sb = gemm_slots(parts);
    if (!native) {
        j.b32 = op_b_f32(be, sb + CPU_GEMM_B, M, bt, B, &j.tb, N, K, &j.ldb, parts == 1);
        if (!j.b32) return -1;
        const size_t a_n = stored_extent(K, M, lda); /* a transposed A's */
        if (ta && own_a_copies(at, parts, a_n)) {
            j.a_part = cpu_round_up(a_n, 16);
            j.a32cols = cpu_scratch_get(be, sb + CPU_GEMM_A, j.a_part * (size_t)parts);
            if (!j.a32cols) return -1;
        } else if (at != AB_F32 && ta) {
            j.a32 = widened(be, sb + CPU_GEMM_A, at, A, K, M, lda, parts == 1);
            if (!j.a32) return -1;
        } else if (at != AB_F32) {
            j.a_part = cpu_round_up((size_t)(j.tile - 1) * lda + (size_t)K, 16);
            j.a32rows = cpu_scratch_get(be, sb + CPU_GEMM_A, j.a_part * (size_t)parts);
            if (!j.a32rows) return -1;
        }
    }
    if (!j.direct) {
        /* an fp32 C that beta leaves out holds the sums itself, the epilogue rewriting its rows */
        const int in_c = ct == AB_F32 && beta == 0.0f && !native;
        j.acc_part = in_c ? 0 : cpu_round_up((size_t)j.tile * N, 16);
        j.acc = in_c ? (float *)C : cpu_scratch_get(be, sb + CPU_GEMM_SUMS, j.acc_part * (size_t)parts);
        j.acc_ld = in_c ? ldc : N;
        j.bias = bias ? widened(be, sb + CPU_GEMM_BIAS, bt, bias, 1, N, N, parts == 1) : NULL;
        j.rows = cpu_scratch_get(be, sb + CPU_GEMM_ROWS, 2 * (size_t)N * (size_t)parts);
        if (!j.acc || (bias && !j.bias) || !j.rows) return -1;
    }
    cpu_parallel_for(be, tiles, 1, gemm_tiles, &j);
    if (j.failed)
        return ab_errorf("gemm %dx%dx%d (%c%c) bf16: oneDNN's matmul failed in %s", M, N, K, ta ? 'T' : 'N',
                         tb ? 'T' : 'N', cpu_bf16_failure(be));
    if (found_inf && j.nonfinite) *found_inf = 1;
    return 0;
}

int ab_cpu_gemm(ab_backend *be, int ta, int tb, int M, int N, int K, float alpha, ab_dtype at, const void *A, int lda,
                ab_dtype bt, const void *B, int ldb, const void *bias, ab_epilogue epi, float beta, ab_dtype ct,
                void *C, int ldc) {
    return cpu_gemm_run(be, ta, tb, M, N, K, alpha, at, A, lda, bt, B, ldb, bias, epi, beta, ct, C, ldc, AB_F32, NULL);
}

/* the product's parts round their tiles to ct, fold them into G while they are in cache (G holds
 * the sums itself when it is overwritten) and check what they store; ws is not needed but for an
 * fp32 ct */
int ab_cpu_gemm_fold(ab_backend *be, int ta, int tb, int M, int N, int K, ab_dtype at, const void *A, int lda,
                     ab_dtype bt, const void *B, int ldb, ab_dtype ct, void *ws, float *G, int accumulate,
                     int32_t *found_inf) {
    if (ct == AB_F32) { /* nothing to round: the product into ws, then folded */
        AB_TRY(ab_cpu_gemm(be, ta, tb, M, N, K, 1.0f, at, A, lda, bt, B, ldb, NULL, AB_EPI_NONE, 0.0f, ct, ws, N));
        return ab_cpu_accumulate(be, (size_t)M * N, ct, ws, G, accumulate, found_inf);
    }
    if (ct != AB_F16 && ct != AB_BF16) return ab_errorf("gemm_fold: unknown element type %d", (int)ct);
    return cpu_gemm_run(be, ta, tb, M, N, K, 1.0f, at, A, lda, bt, B, ldb, NULL, AB_EPI_NONE, accumulate ? 1.0f : 0.0f,
                        AB_F32, G, N, ct, found_inf);
}

/* casts over the pool (runtime_cpu.c's parallel conversions); fp16 <-> bf16 element by element */
int ab_cpu_cast(ab_backend *be, size_t n, ab_dtype st, const void *src, ab_dtype dt, void *dst) {
    if (st == dt) {
        memmove(dst, src, n * ab_dtype_size(st));
    } else if (st == AB_F32) {
        cpu_narrow_par(be, n, src, dt, dst);
    } else if (dt == AB_F32) {
        cpu_widen_par(be, n, st, src, dst);
    } else {
        for (size_t i = 0; i < n; i++) ab_store(dst, i, dt, ab_load(src, i, st));
    }
    return 0;
}

/* gradient folding, dst += src widened, over the pool: blocks widened on the stack, then added (the
 * same one rounding per element). With src32, src is src32 rounded to st first (a filter
 * gradient's fp32 sum: the bits of a narrowing pass followed by the fold). accumulate 0 stores
 * instead of adding. bad: a stored value was infinite or NaN (read where the caller asks). */
typedef struct {
    ab_dtype st;
    const void *src;
    float *dst;
    const float *src32;
    int accumulate, check, bad; /* check: the widening path tests what it stores (round trip: always) */
} fold_job;

static inline __attribute__((always_inline)) void fold_range_body(void *ctx, int part, size_t lo, size_t hi) {
    (void)part;
    fold_job *j = ctx;
    int bad = 0;
    if (j->src32) { /* rounded and widened back in the registers */
        bad = cpu_round_trip(hi - lo, j->st, j->src32 + lo, j->dst + lo, j->accumulate);
    } else {
        float buf[1024];
        for (size_t i = lo; i < hi; i += 1024) {
            const size_t m = hi - i < 1024 ? hi - i : 1024;
            cpu_widen(m, j->st, (const char *)j->src + i * ab_dtype_size(j->st), buf);
            float *restrict d = j->dst + i;
            if (j->accumulate)
                for (size_t k = 0; k < m; k++) d[k] += buf[k];
            else
                memcpy(d, buf, m * sizeof(float));
            if (j->check)
                for (size_t k = 0; k < m; k++) bad |= !ab_is_finite(d[k]);
        }
    }
    if (bad) __atomic_store_n(&j->bad, 1, __ATOMIC_RELAXED);
}
CPU_RANGE_AVX512(fold_range)

int cpu_round_fold_par(ab_backend *be, size_t n, const float *src, ab_dtype t, float *dst, int accumulate) {
    fold_job j = {.st = t, .dst = dst, .src32 = src, .accumulate = accumulate};
    cpu_parallel_for(be, n, CONVERT_MIN, fold_range, &j);
    return j.bad;
}

int ab_cpu_accumulate(ab_backend *be, size_t n, ab_dtype st, const void *src, float *dst, int accumulate,
                      int32_t *found_inf) {
    if (!accumulate && !found_inf) {
        cpu_widen_par(be, n, st, src, dst);
        return 0;
    }
    fold_job j = {.st = st, .src = src, .dst = dst, .accumulate = accumulate, .check = found_inf != NULL};
    cpu_parallel_for(be, n, CONVERT_MIN, fold_range, &j);
    if (found_inf && j.bad) *found_inf = 1;
    return 0;
}

/* ReLU on the bits, branch-free (the signs of activations are a coin toss for a branch
 * predictor) and over the pool. Forward: a value with the sign bit set, NaN excepted, becomes +0;
 * every other bit pattern stays. Backward: dx = dy where y > 0 (sign clear, not +0, not NaN),
 * else +0. dx may alias dy: each element is read before it is written. */
typedef struct {
    ab_dtype t;
    const void *y, *dy;
    void *out;
} relu_job;

static void relu_fwd_range(void *ctx, int part, size_t lo, size_t hi) {
    (void)part;
    const relu_job *j = ctx;
    if (j->t == AB_F32) {
        const uint32_t *x = j->y;
        uint32_t *y = j->out;
        for (size_t i = lo; i < hi; i++) {
            const uint32_t h = x[i], nan = (h & 0x7fffffffu) > 0x7f800000u;
            const uint32_t neg = (h >> 31) & ~nan & 1u;
            y[i] = h & (neg - 1u); /* neg: 0 -> keep all bits, 1 -> clear them */
        }
    } else {
        const uint16_t *x = j->y, em = j->t == AB_F16 ? 0x7c00u : 0x7f80u;
        uint16_t *y = j->out;
        for (size_t i = lo; i < hi; i++) {
            const uint16_t h = x[i];
            const uint16_t nan = (uint16_t)((h & 0x7fffu) > em);
            const uint16_t neg = (uint16_t)(((h >> 15) & 1u) & ~nan & 1u);
            y[i] = (uint16_t)(h & (uint16_t)(neg - 1u));
        }
    }
}

static void relu_bwd_range(void *ctx, int part, size_t lo, size_t hi) {
    (void)part;
    const relu_job *j = ctx;
    if (j->t == AB_F32) {
        const uint32_t *y = j->y, *dy = j->dy;
        uint32_t *dx = j->out;
        for (size_t i = lo; i < hi; i++) {
            const uint32_t h = y[i];
            const uint32_t pos = (uint32_t)((h >> 31) == 0) & (uint32_t)(h != 0) & (uint32_t)(h <= 0x7f800000u);
            dx[i] = dy[i] & (0u - pos);
        }
    } else {
        const uint16_t *y = j->y, *dy = j->dy, em = j->t == AB_F16 ? 0x7c00u : 0x7f80u;
        uint16_t *dx = j->out;
        for (size_t i = lo; i < hi; i++) {
            const uint16_t h = y[i];
            const uint16_t pos = (uint16_t)(((h >> 15) == 0) & (h != 0) & (h <= em));
            dx[i] = (uint16_t)(dy[i] & (uint16_t)(0u - pos));
        }
    }
}

enum { RELU_MIN = 1 << 15 }; /* elements per part below which a second thread does not pay */

int ab_cpu_relu_forward(ab_backend *be, size_t n, ab_dtype t, const void *x, void *y) {
    relu_job j = {t, x, NULL, y};
    cpu_parallel_for(be, n, RELU_MIN, relu_fwd_range, &j);
    return 0;
}

int ab_cpu_relu_backward(ab_backend *be, size_t n, ab_dtype t, const void *y, const void *dy, void *dx) {
    relu_job j = {t, y, dy, dx};
    cpu_parallel_for(be, n, RELU_MIN, relu_bwd_range, &j);
    return 0;
}

/* column sums over the pool by blocks of columns: each column is summed over the rows in order,
 * whatever the split, so the bits do not depend on the threads */
typedef struct {
    int M, N;
    ab_dtype xt, ot;
    const void *X;
    float beta;
    void *out;
    float *buf; /* per part: N sums and N widened values */
} colsum_job;

enum { COLSUM_CHUNK = 2048 }; /* values of its rows a part of col_sum widens at a time */

static inline __attribute__((always_inline)) void colsum_range_body(void *ctx, int part, size_t lo, size_t hi) {
    const colsum_job *j = ctx;
    const size_t n = hi - lo, es = ab_dtype_size(j->xt);
    float *restrict acc = j->buf + (size_t)part * 2 * j->N, *restrict row = acc + j->N;
    for (size_t c = 0; c < n; c++) acc[c] = 0.0f;
    if (j->xt != AB_F32 && n <= COLSUM_CHUNK) {
        /* the part's columns of COLSUM_CHUNK / n rows widened in one call, not a call a row */
        float blk[COLSUM_CHUNK];
        const int per = (int)(COLSUM_CHUNK / n);
        for (int i0 = 0; i0 < j->M; i0 += per) {
            const int rows = j->M - i0 < per ? j->M - i0 : per;
            cpu_widen_rows((size_t)rows, n, j->xt, (const char *)j->X + ((size_t)i0 * j->N + lo) * es, (size_t)j->N,
                           blk, n);
            for (int r = 0; r < rows; r++)
                for (size_t c = 0; c < n; c++) acc[c] += blk[(size_t)r * n + c];
        }
    } else {
        for (int i = 0; i < j->M; i++) {
            const char *x = (const char *)j->X + ((size_t)i * j->N + lo) * es;
            const float *r = j->xt == AB_F32 ? (const float *)x : row;
            if (j->xt != AB_F32) cpu_widen(n, j->xt, x, row);
            for (size_t c = 0; c < n; c++) acc[c] += r[c];
        }
    }
    if (j->beta != 0.0f) {
        cpu_widen(n, j->ot, (const char *)j->out + lo * ab_dtype_size(j->ot), row);
        for (size_t c = 0; c < n; c++) acc[c] += j->beta * row[c];
    }
    cpu_narrow(n, acc, j->ot, (char *)j->out + lo * ab_dtype_size(j->ot));
}
CPU_RANGE_AVX512(colsum_range)

int ab_cpu_col_sum(ab_backend *be, int M, int N, ab_dtype xt, const void *X, float beta, ab_dtype ot, void *out) {
    /* a part takes at least 64 columns, and only when there are rows enough to pay for it */
    const size_t min_cols = (size_t)M * N < (1u << 16) ? (size_t)N : 64;
    const int parts = cpu_parallel_parts(be, (size_t)N, min_cols);
    colsum_job j = {M, N, xt, ot, X, beta, out, cpu_scratch_get(be, 2, 2 * (size_t)N * (size_t)parts)};
    if (!j.buf) return -1;
    cpu_parallel_for(be, (size_t)N, min_cols, colsum_range, &j);
    return 0;
}

/* 16-bit logits are widened, and their gradient narrowed, XENT_CHUNK values at a time on the stack
 * (a chunk of whole rows): the classifier's 2 to 10 logits a row would otherwise be two conversion
 * calls a row, or 3 element-wise loads a logit */
enum { XENT_CHUNK = 2048 };

int ab_cpu_softmax_xent(ab_backend *be, int B, int C, ab_dtype lt, const void *logits, const int32_t *labels,
                        float grad_scale, ab_dtype dt, void *dlogits, float *loss_sum, int32_t *correct) {
    (void)be;
    if (B <= 0 || C <= 0) return ab_errorf("softmax_xent: bad shape B=%d C=%d", B, C); /* as the CUDA backend */
    const size_t lsz = ab_dtype_size(lt), dsz = ab_dtype_size(dt);
    const float gs = grad_scale / (float)B;
    /* rows a chunk converts in bulk; 0: rows one by one as stored (fp32, or a row over XENT_CHUNK) */
    const int bulk = (lt != AB_F32 || dt != AB_F32) && C <= XENT_CHUNK ? XENT_CHUNK / C : 0;
    float r32[XENT_CHUNK], d32[XENT_CHUNK];
    double total = 0.0;
    int32_t hits = 0;
    for (int i0 = 0; i0 < B; i0 += bulk ? bulk : 1) {
        const int i1 = bulk ? (B - i0 < bulk ? B : i0 + bulk) : i0 + 1;
        const size_t nv = (size_t)(i1 - i0) * C;
        const void *rows = (const char *)logits + (size_t)i0 * C * lsz;
        void *drows = dlogits ? (char *)dlogits + (size_t)i0 * C * dsz : NULL;
        if (bulk) cpu_widen(nv, lt, rows, r32);
        for (int i = i0; i < i1; i++) {
            const int y = labels[i];
            const size_t o = (size_t)(i - i0) * C;
            void *drow = !drows ? NULL : bulk ? (void *)(d32 + o) : (char *)drows + o * dsz;
            const ab_dtype rdt = bulk ? AB_F32 : dt;
            if (y < 0 || y >= C) { /* as a device does, which cannot stop mid-batch: NaN loss and gradient row */
                total += (double)NAN;
                if (drow)
                    for (int j = 0; j < C; j++) ab_store(drow, (size_t)j, rdt, NAN);
                continue;
            }
            int am;
            const void *row = bulk ? (const void *)(r32 + o) : (const void *)((const char *)rows + o * lsz);
            /* fp32 rows and gradient rows through a copy with the types constant (no type test a
             * value) */
            total += bulk || (lt == AB_F32 && dt == AB_F32) ? ab_xent_row(C, AB_F32, row, y, gs, AB_F32, drow, &am)
                                                            : ab_xent_row(C, lt, row, y, gs, dt, drow, &am);
            hits += am == y;
        }
        if (bulk && drows) cpu_narrow(nv, d32, dt, drows);
    }
    *loss_sum += (float)total;
    if (correct) *correct += hits;
    return 0;
}

/* ---- the optimizer's element loops, over the pool: every element's arithmetic is its own, so
 * the results do not depend on the split ---- */

typedef struct {
    float *w, *m, *v, *buf;
    const float *g;
    float lr, beta1, beta2, eps, weight_decay, momentum, grad_scale;
    ab_adamw_scalars k; /* adamw: its lr and weight decay folded in */
    ab_dtype ct;        /* the working copy's type, when wc is not NULL */
    void *wc;           /* the working copy the pass refreshes, or NULL */
    int first_step;
} opt_job;

enum { OPT_MIN = 1 << 15 }; /* elements per thread below which a second thread does not pay */

/* With a working copy (wc) the pass goes in chunks of OPT_CHUNK elements (a multiple of 16): each
 * chunk's new weights are rounded into wc while they are still in the L1 cache, so the copy costs
 * the pass its 2-byte stores and not a second read of the 4-byte weights from memory. The streaming
 * loops below write an aligned fp16 copy themselves, with no chunks; so does SGD without momentum
 * (sgd_half_avx512, sgd_half_avx2) an fp16 copy of any alignment, but for its last elements (fewer
 * than a vector's lanes), which go through the plain loop. */
enum { OPT_CHUNK = 2048 };
static void opt_copy(const opt_job *j, size_t lo, size_t hi) {
    if (hi > lo) cpu_narrow(hi - lo, j->w + lo, j->ct, (char *)j->wc + lo * ab_dtype_size(j->ct));
}
/* [lo, hi) through the plain loop, the working copy (if any) a chunk at a time behind it */
static void opt_plain(const opt_job *j, int part, size_t lo, size_t hi, cpu_range_fn plain) {
    if (!j->wc) {
        plain((void *)j, part, lo, hi);
        return;
    }
    for (size_t c = lo; c < hi; c += OPT_CHUNK) {
        const size_t d = hi - c < OPT_CHUNK ? hi : c + OPT_CHUNK;
        plain((void *)j, part, c, d);
        opt_copy(j, c, d);
    }
}

static inline __attribute__((always_inline)) void sgd_plain_body(void *ctx, int part, size_t lo, size_t hi) {
    (void)part;
    const opt_job *j = ctx;
    /* no saxpy for plain SGD: an element's arithmetic must not depend on where a range starts, as a
     * BLAS kernel's vector body and scalar tail may (a parameter server's shards split the ranges).
     * Without momentum, ab_sgd_update's two operations written out, so that the loop vectorizes. */
    if (j->momentum == 0.0f) {
        float *restrict w = j->w;
        const float *restrict g = j->g;
        const float lr = j->lr, wd = j->weight_decay, gs = j->grad_scale;
        for (size_t i = lo; i < hi; i++) {
            const float gi = g[i] * gs + wd * w[i];
            w[i] -= lr * gi;
        }
        return;
    }
    for (size_t i = lo; i < hi; i++)
        ab_sgd_update(&j->w[i], j->g[i] * j->grad_scale, j->buf ? &j->buf[i] : NULL, j->lr, j->momentum,
                      j->weight_decay, j->first_step);
}
CPU_RANGE_AVX512(sgd_plain)

static inline __attribute__((always_inline)) void adamw_plain_body(void *ctx, int part, size_t lo, size_t hi) {
    (void)part;
    const opt_job *j = ctx;
    float *restrict w = j->w, *restrict m = j->m, *restrict v = j->v;
    const float *restrict g = j->g;
    const float b1 = j->beta1, b2 = j->beta2, eps = j->eps, decay = j->k.decay, ss = j->k.step_size,
                rb = j->k.inv_bc2, gs = j->grad_scale;
    for (size_t i = lo; i < hi; i++) ab_adamw_update(&w[i], g[i] * gs, &m[i], &v[i], b1, b2, eps, decay, ss, rb);
}
CPU_RANGE_AVX512(adamw_plain)

/* An optimizer's part of CPU_STREAM_MIN elements or more stores its state past the caches
 * (non-temporal stores): AdamW's m and v, SGD's momentum buffer. The pass moves far more than the
 * caches keep at that size (AdamW reads 16 bytes an element and writes 12), and nothing reads the
 * state again before the next step's update. The weights are stored plainly (storing them past the
 * caches too was no faster). An fp16 working copy aligned as w (a 64-byte line of w, 32 bytes of
 * the copy) is rounded from the new weights' register and streamed by the same loop: written a
 * chunk behind, reading the weights back, it cost SGD's pass over ResNet-50's 23.5M weights 21%
 * more than fp32's pass, and AdamW's over MiniLM's 17%; written in the loop, 9% and 9% (Zen 5 EPYC,
 * 2 threads, medians of 8 rounds: results/cpu/2026-12-07-epyc-2core/amp-passes/). On 2
 * cores of the AMX Xeon the pass over MiniLM's 22.7M weights took 24-26 ms with plain stores and
 * 15-16 ms with these, and MiniLM's and BERT-base's fp32 steps 2% less time, ResNet-50's (SGD with
 * momentum) 6.5% (results/cpu/2026-12-05-xeon-amx-2core/adamw-stream/). The vector loops do
 * ab_adamw_update's and ab_sgd_update's operations in their order, one lane an element and no
 * fused multiply-add: the same bits (tests/ops/test_cpu_stream.c compares them under each
 * AB_CPU_ISA cap). The elements before w's first 64-byte line and after the last whole 16 go
 * through the plain loop; so does a part whose arrays are not aligned alike, and SGD without
 * momentum (with an fp16 copy: sgd_half_avx512 and sgd_half_avx2, below). The stores are fenced
 * before the part returns, so the thread that joins the pool sees them. */
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>
/* the vector loops over [lo, hi): lo 64-byte aligned in w and in the state, hi - lo a multiple of
 * 16 elements (opt_stream cuts the range); h, the fp16 copy they write, NULL or h + lo 32-byte
 * aligned */
typedef void (*opt_stream_fn)(const opt_job *j, size_t lo, size_t hi, uint16_t *h);
#define ADAMW_STREAM(name, isa, V, LANES, set1, load, loadu, store, mul, add, sub, div, sqrt_, stream, half)    \
    __attribute__((target(isa))) static void name(const opt_job *j, size_t lo, size_t hi, uint16_t *h) {       \
        float *w = j->w, *m = j->m, *v = j->v;                                                                 \
        const float *g = j->g;                                                                                 \
        const V b1 = set1(j->beta1), c1 = set1(1.0f - j->beta1), b2 = set1(j->beta2),                          \
                c2 = set1(1.0f - j->beta2), eps = set1(j->eps), decay = set1(j->k.decay),                      \
                ss = set1(j->k.step_size), rb = set1(j->k.inv_bc2), gs = set1(j->grad_scale);                  \
        for (size_t i = lo; i < hi; i += LANES) {                                                              \
            const V gi = mul(loadu(g + i), gs);                                                                \
            const V w1 = mul(load(w + i), decay);                                                              \
            const V m1 = add(mul(b1, load(m + i)), mul(c1, gi));                                               \
            const V v1 = add(mul(b2, load(v + i)), mul(mul(c2, gi), gi));                                      \
            const V den = add(mul(sqrt_(v1), rb), eps);                                                        \
            const V wn = sub(w1, div(mul(ss, m1), den));                                                       \
            store(w + i, wn);                                                                                  \
            stream(m + i, m1);                                                                                 \
            stream(v + i, v1);                                                                                 \
            if (h) half(h + i, wn);                                                                            \
        }                                                                                                      \
    }
/* SGD with momentum likewise (ResNet-50's 23.5M weights: the buffer streamed) */
#define SGD_STREAM(name, isa, V, LANES, set1, load, loadu, store, mul, add, sub, stream, half)                  \
    __attribute__((target(isa))) static void name(const opt_job *j, size_t lo, size_t hi, uint16_t *h) {       \
        float *w = j->w, *buf = j->buf;                                                                        \
        const float *g = j->g;                                                                                 \
        const V gs = set1(j->grad_scale), wd = set1(j->weight_decay), mom = set1(j->momentum), lr = set1(j->lr); \
        const int first = j->first_step;                                                                       \
        for (size_t i = lo; i < hi; i += LANES) {                                                              \
            const V wi = load(w + i);                                                                          \
            const V g1 = add(mul(loadu(g + i), gs), mul(wd, wi));                                              \
            const V b = first ? g1 : add(mul(mom, load(buf + i)), g1);                                         \
            const V wn = sub(wi, mul(lr, b));                                                                  \
            stream(buf + i, b);                                                                                \
            store(w + i, wn);                                                                                  \
            if (h) half(h + i, wn);                                                                            \
        }                                                                                                      \
    }
/* an fp16 working copy's 16 (8) values rounded from the new weights in their register and stored
 * past the caches: the conversion cpu_narrow uses (round to nearest even), at h 32-byte (16-byte)
 * aligned */
#define HALF_STREAM_512(p, x)                                                                                  \
    _mm256_stream_si256((__m256i *)(p), _mm512_cvtps_ph((x), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC))
#define HALF_STREAM_256(p, x)                                                                                  \
    _mm_stream_si128((__m128i *)(p), _mm256_cvtps_ph((x), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC))
ADAMW_STREAM(adamw_stream_avx512, "avx512f", __m512, 16, _mm512_set1_ps, _mm512_load_ps, _mm512_loadu_ps,
             _mm512_store_ps, _mm512_mul_ps, _mm512_add_ps, _mm512_sub_ps, _mm512_div_ps, _mm512_sqrt_ps,
             _mm512_stream_ps, HALF_STREAM_512)
ADAMW_STREAM(adamw_stream_avx2, "avx2,f16c", __m256, 8, _mm256_set1_ps, _mm256_load_ps, _mm256_loadu_ps,
             _mm256_store_ps, _mm256_mul_ps, _mm256_add_ps, _mm256_sub_ps, _mm256_div_ps, _mm256_sqrt_ps,
             _mm256_stream_ps, HALF_STREAM_256)
SGD_STREAM(sgd_stream_avx512, "avx512f", __m512, 16, _mm512_set1_ps, _mm512_load_ps, _mm512_loadu_ps, _mm512_store_ps,
           _mm512_mul_ps, _mm512_add_ps, _mm512_sub_ps, _mm512_stream_ps, HALF_STREAM_512)
SGD_STREAM(sgd_stream_avx2, "avx2,f16c", __m256, 8, _mm256_set1_ps, _mm256_load_ps, _mm256_loadu_ps, _mm256_store_ps,
           _mm256_mul_ps, _mm256_add_ps, _mm256_sub_ps, _mm256_stream_ps, HALF_STREAM_256)
/* SGD without momentum (the MLP's recipe) with an fp16 working copy: sgd_plain_body's two
 * operations, one lane an element, the copy rounded from the new weights' register and stored
 * plainly (the next forward reads it while it is still in the caches). Written a chunk behind
 * instead (opt_plain), the weights went through the L1 cache twice. */
#define SGD_HALF(name, isa, V, LANES, set1, loadu, storeu, mul, add, sub, half)                                \
    __attribute__((target(isa))) static void name(const opt_job *j, size_t lo, size_t hi) {                    \
        float *w = j->w;                                                                                       \
        const float *g = j->g;                                                                                 \
        uint16_t *h = j->wc;                                                                                   \
        const V gs = set1(j->grad_scale), wd = set1(j->weight_decay), lr = set1(j->lr);                        \
        for (size_t i = lo; i < hi; i += LANES) {                                                              \
            const V wi = loadu(w + i);                                                                         \
            const V wn = sub(wi, mul(lr, add(mul(loadu(g + i), gs), mul(wd, wi))));                            \
            storeu(w + i, wn);                                                                                 \
            half(h + i, wn);                                                                                   \
        }                                                                                                      \
    }
#define HALF_STORE_512(p, x)                                                                                   \
    _mm256_storeu_si256((__m256i *)(p), _mm512_cvtps_ph((x), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC))
#define HALF_STORE_256(p, x)                                                                                   \
    _mm_storeu_si128((__m128i *)(p), _mm256_cvtps_ph((x), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC))
SGD_HALF(sgd_half_avx512, "avx512f", __m512, 16, _mm512_set1_ps, _mm512_loadu_ps, _mm512_storeu_ps, _mm512_mul_ps,
         _mm512_add_ps, _mm512_sub_ps, HALF_STORE_512)
SGD_HALF(sgd_half_avx2, "avx2,f16c", __m256, 8, _mm256_set1_ps, _mm256_loadu_ps, _mm256_storeu_ps, _mm256_mul_ps,
         _mm256_add_ps, _mm256_sub_ps, HALF_STORE_256)
#undef HALF_STORE_512
#undef HALF_STORE_256
#undef SGD_HALF
#undef HALF_STREAM_512
#undef HALF_STREAM_256
#undef ADAMW_STREAM
#undef SGD_STREAM

/* the working copy of a vector chunk [lo, hi) (a multiple of 16 elements) where the streaming loop
 * does not write it (bf16; an fp16 copy not aligned as w, or a CPU without F16C): rounded on the
 * stack, then stored past the caches where its part of wc lies 32-byte aligned, as the state is:
 * the copy is not read before the next step's forward, past all the pass moves through the caches */
__attribute__((target("avx"))) static void opt_copy_stream(const opt_job *j, size_t lo, size_t hi) {
    uint16_t *dst = (uint16_t *)j->wc + lo;
    if ((uintptr_t)dst & 31) {
        opt_copy(j, lo, hi);
        return;
    }
    uint16_t tmp[OPT_CHUNK] __attribute__((aligned(32)));
    cpu_narrow(hi - lo, j->w + lo, j->ct, tmp);
    for (size_t k = 0; k < hi - lo; k += 16)
        _mm256_stream_si256((__m256i *)(dst + k), _mm256_load_si256((const __m256i *)(tmp + k)));
}

/* a part [lo, hi) of an optimizer pass: through the widest streaming loop the CPU has when the part
 * is large and the state (`state`, a second one or NULL) lies aligned as w does, the elements
 * before w's first 64-byte line and after the last whole 16 through the plain loop; else all of it
 * through the plain loop. The working copy, if any, is written by the streaming loop (fp16 lying
 * aligned as w), else a chunk behind it (opt_copy_stream) and in the plain loop's parts (opt_plain). */
static void opt_stream(const opt_job *j, int part, size_t lo, size_t hi, const float *state, const float *state2,
                       cpu_range_fn plain, opt_stream_fn f512, opt_stream_fn f256) {
    const uintptr_t unlike = ((uintptr_t)j->w ^ (uintptr_t)state) | (state2 ? (uintptr_t)j->w ^ (uintptr_t)state2 : 0);
    const opt_stream_fn f = hi - lo < CPU_STREAM_MIN || (unlike & 63) ? NULL
                            : ab_cpu_has_avx512()                     ? f512
                            : ab_cpu_has_avx2()                       ? f256
                                                                      : NULL;
    if (!f) {
        opt_plain(j, part, lo, hi, plain);
        return;
    }
    size_t a = lo;
    while (a < hi && ((uintptr_t)(j->w + a) & 63)) a++;
    /* an fp16 copy lying aligned as the loop stores it (a 64-byte w line's 16 values: 32 bytes) is
     * written by the loop itself, from the new weights' registers; else a chunk behind */
    uint16_t *h = j->wc && j->ct == AB_F16 && ab_cpu_has_f16c() && !((uintptr_t)((uint16_t *)j->wc + a) & 31)
                      ? (uint16_t *)j->wc
                      : NULL;
    const size_t e = a + (hi - a) / 16 * 16, chunk = j->wc && !h ? OPT_CHUNK : e - a;
    opt_plain(j, part, lo, a, plain);
    for (size_t c = a; c < e; c += chunk) { /* chunks of 16s: each starts 64-byte aligned */
        const size_t d = e - c < chunk ? e : c + chunk;
        f(j, c, d, h);
        if (j->wc && !h) opt_copy_stream(j, c, d);
    }
    _mm_sfence();
    opt_plain(j, part, e, hi, plain);
}

static void sgd_range(void *ctx, int part, size_t lo, size_t hi) {
    const opt_job *j = ctx;
    if (j->momentum != 0.0f && j->buf) {
        opt_stream(j, part, lo, hi, j->buf, NULL, sgd_plain, sgd_stream_avx512, sgd_stream_avx2);
    } else if (j->momentum == 0.0f && j->wc && j->ct == AB_F16 && ab_cpu_has_f16c() &&
               (ab_cpu_has_avx512() || ab_cpu_has_avx2())) {
        const int wide = ab_cpu_has_avx512();
        const size_t lanes = wide ? 16 : 8, e = lo + (hi - lo) / lanes * lanes;
        (wide ? sgd_half_avx512 : sgd_half_avx2)(j, lo, e);
        opt_plain(j, part, e, hi, sgd_plain); /* the last few, under a vector's lanes */
    } else {
        opt_plain(j, part, lo, hi, sgd_plain);
    }
}

static void adamw_range(void *ctx, int part, size_t lo, size_t hi) {
    const opt_job *j = ctx;
    opt_stream(j, part, lo, hi, j->m, j->v, adamw_plain, adamw_stream_avx512, adamw_stream_avx2);
}
#else
static void sgd_range(void *ctx, int part, size_t lo, size_t hi) { opt_plain(ctx, part, lo, hi, sgd_plain); }
static void adamw_range(void *ctx, int part, size_t lo, size_t hi) { opt_plain(ctx, part, lo, hi, adamw_plain); }
#endif

int ab_cpu_sgd_step(ab_backend *be, size_t n, float *w, const float *g, float *buf, float lr, float momentum,
                    float weight_decay, int first_step, float grad_scale, ab_dtype ct, void *wc) {
    if (wc && ct != AB_F16 && ct != AB_BF16) return ab_errorf("sgd_step: a working copy of type %d", (int)ct);
    opt_job j = {.w = w, .g = g, .buf = buf, .lr = lr, .momentum = momentum, .weight_decay = weight_decay,
                 .first_step = first_step, .grad_scale = grad_scale, .ct = ct, .wc = wc};
    cpu_parallel_for(be, n, OPT_MIN, sgd_range, &j);
    return 0;
}

int ab_cpu_adamw_step(ab_backend *be, size_t n, float *w, const float *g, float *m, float *v, float lr, float beta1,
                      float beta2, float eps, float weight_decay, int step, float grad_scale, ab_dtype ct, void *wc) {
    if (wc && ct != AB_F16 && ct != AB_BF16) return ab_errorf("adamw_step: a working copy of type %d", (int)ct);
    opt_job j = {.w = w, .g = g, .m = m, .v = v, .beta1 = beta1, .beta2 = beta2, .eps = eps, .grad_scale = grad_scale,
                 .k = ab_adamw_scalars_at(lr, beta1, beta2, weight_decay, step), .ct = ct, .wc = wc};
    cpu_parallel_for(be, n, OPT_MIN, adamw_range, &j);
    return 0;
}

/* The census histogram: a block's slots first (widened to fp32 by cpu_widen, F16C where there is one,
 * then ab_log2_slot: a loop without stores into the counts, which vectorizes), then counted into
 * four copies in turn, so that runs of equal slots (most gradients share a few exponents) do not
 * wait on each other's increments; the copies are added into counts at the end. */
int ab_cpu_log2_hist(ab_backend *be, size_t n, ab_dtype t, const void *x, int log2_min, int nbins, int64_t *counts) {
    (void)be;
    if (nbins < 1 || nbins > AB_LOG2_HIST_MAX_BINS || log2_min < -256 || log2_min > 256)
        return ab_errorf("log2_hist: nbins %d or log2_min %d out of range", nbins, log2_min);
    if (t != AB_F32 && t != AB_F16 && t != AB_BF16) return ab_errorf("log2_hist: unknown element type %d", (int)t);
    enum { BLOCK = 1024 };
    float buf[BLOCK];
    uint16_t slot[BLOCK];
    int64_t part[4][AB_LOG2_HIST_MAX_BINS + 2];
    memset(part, 0, sizeof part);
    const size_t es = ab_dtype_size(t);
    for (size_t i0 = 0; i0 < n; i0 += BLOCK) {
        const size_t m = n - i0 < BLOCK ? n - i0 : BLOCK;
        const float *v = t == AB_F32 ? (const float *)x + i0 : buf;
        if (t != AB_F32) cpu_widen(m, t, (const char *)x + i0 * es, buf);
        for (size_t i = 0; i < m; i++) slot[i] = (uint16_t)ab_log2_slot(v[i], log2_min, nbins);
        size_t i = 0;
        for (; i + 4 <= m; i += 4) {
            part[0][slot[i]]++;
            part[1][slot[i + 1]]++;
            part[2][slot[i + 2]]++;
            part[3][slot[i + 3]]++;
        }
        for (; i < m; i++) part[0][slot[i]]++;
    }
    for (int b = 0; b < nbins + 2; b++) counts[b] += part[0][b] + part[1][b] + part[2][b] + part[3][b];
    return 0;
}



typedef struct {
    int D;
    ab_dtype ot;
    const uint8_t *data, *labels;
    const int32_t *idx;
    const float *lut;
    const uint16_t *lut16; /* a 16-bit output's table: lut's values rounded to ot */
    void *out;
    int32_t *labels_out;
} gather_job;

static void gather_range(void *ctx, int part, size_t lo, size_t hi) {
    (void)part;
    const gather_job *j = ctx;
    const int D = j->D;
    for (size_t b = lo; b < hi; b++) {
        const uint8_t *src = j->data + (size_t)j->idx[b] * (size_t)D;
        const size_t off = b * (size_t)D;
        if (j->ot == AB_F32) {
            float *dst = (float *)j->out + off;
            for (int d = 0; d < D; d++) dst[d] = j->lut[src[d]];
        } else {
            uint16_t *dst = (uint16_t *)j->out + off;
            for (int d = 0; d < D; d++) dst[d] = j->lut16[src[d]];
        }
        if (j->labels_out) j->labels_out[b] = j->labels[j->idx[b]];
    }
}

/* rows over the pool from 16 a thread: the sampled rows are scattered over the data set, so the
 * loads wait on memory */
int ab_cpu_gather_normalize(ab_backend *be, int B, int D, const uint8_t *data, const uint8_t *labels,
                            const int32_t *idx, float mean, float std, ab_dtype ot, void *out, int32_t *labels_out) {
    float lut[256];
    uint16_t lut16[256];
    for (int v = 0; v < 256; v++) lut[v] = ((float)v / 255.0f - mean) / std;
    /* a 16-bit batch takes the table rounded once, the values a row rounded one by one would be */
    if (ot != AB_F32) cpu_narrow(256, lut, ot, lut16);
    gather_job j = {D, ot, data, labels, idx, lut, lut16, out, labels_out};
    cpu_parallel_for(be, (size_t)B, 16, gather_range, &j);
    return 0;
}

/* the host CPU's model as /proc/cpuinfo names it, OpenBLAS's build and the pool, and whether
 * OpenBLAS runs generic kernels on a CPU with wider vectors */
static int cpu_describe(ab_backend *be, ab_device_info *info) {
    *info = (ab_device_info){.is_host = 1};
    char cpu[160] = "unknown CPU";
    FILE *f = fopen("/proc/cpuinfo", "r");
    char line[512];
    while (f && fgets(line, sizeof line, f))
        if (strncmp(line, "model name", 10) == 0) {
            const char *v = strchr(line, ':');
            if (v) snprintf(cpu, sizeof cpu, "%s", v + 2);
            cpu[strcspn(cpu, "\n")] = 0;
            break;
        }
    if (f) fclose(f);
    snprintf(info->name, sizeof info->name, "%s", cpu);
    snprintf(info->blas, sizeof info->blas, "%s", ab_backend_cpu_blas_info());
    /* the widest copies of the element loops this process takes (AB_CPU_ISA caps them) */
    const char *loops = ab_cpu_has_avx512() ? "AVX-512" : ab_cpu_has_avx2() ? "AVX2" : "SSE2";
    snprintf(info->dnn, sizeof info->dnn, "element loops in %s, %s", loops, ab_backend_cpu_bf16_describe(be));
    const char *hint = ab_backend_cpu_blas_hint();
    if (hint) snprintf(info->note, sizeof info->note, "%s", hint);
    return 0;
}

static void cpu_destroy(ab_backend *be) {
    if (!be) return;
    cpu_state *st = be->impl;
    cpu_pool_free(st);
    cpu_bf16_parts_free(st);
    for (int i = 0; i < CPU_SCRATCH_COUNT; i++) cpu_release(be, AB_MEM_CPU_SCRATCH, st->scratch[i].p, st->scratch[i].bytes);
    free(st);
    free(be);
}

static const ab_backend_ops cpu_ops = {
    .name = "cpu",
    .is_host = 1,
    .destroy = cpu_destroy,
    .alloc = cpu_alloc,
    .release = cpu_release,
    .upload = cpu_copy,
    .download = cpu_copy,
    .zero = cpu_zero,
    .sync = cpu_sync,
    .map_data = cpu_map_data,
    .unmap_data = cpu_unmap_data,
#define AB_OP(name, params, args) .name = ab_cpu_##name,
#include "backend_ops.def"
    .describe = cpu_describe,
};

static int default_threads, pool_threads; /* OpenBLAS's own default, before it is set to 1; the last backend's */

ab_backend *ab_backend_cpu_create(int threads) {
    const char *isa = ab_cpu_isa_check();
    if (isa) {
        ab_usage_errorf("%s, not '%s'", isa, getenv("AB_CPU_ISA"));
        return NULL;
    }
    ab_backend *be = calloc(1, sizeof *be);
    cpu_state *st = calloc(1, sizeof *st);
    if (!be || !st) {
        free(be);
        free(st);
        ab_errorf("out of host memory creating the CPU backend");
        return NULL;
    }
    be->ops = &cpu_ops;
    be->impl = st;
    /* one pool for everything: OpenBLAS runs single-threaded inside the pool's parts (cpu_sgemm),
     * so no second set of workers spins on the cores the pool's loops need */
    if (default_threads == 0) default_threads = openblas_get_num_threads(); /* nproc, or OPENBLAS_NUM_THREADS */
    st->threads = threads > 0 ? threads : default_threads;
    openblas_set_num_threads(1);
    pool_threads = st->threads;
    const char *want = getenv("AB_CPU_BF16");
    st->bf16_native = cpu_bf16_native_available() && !(want && strcmp(want, "emulated") == 0);
    return be;
}

const char *ab_backend_cpu_blas_info(void) {
    static char buf[160];
    const char *dnnl = cpu_onednn_version();
    if (dnnl)
        snprintf(buf, sizeof buf, "%s sgemm (%s beside it), single-threaded calls in a pool of %d threads", dnnl,
                 openblas_get_config(), pool_threads ? pool_threads : openblas_get_num_threads());
    else
        snprintf(buf, sizeof buf, "%s, single-threaded calls in a pool of %d threads", openblas_get_config(),
                 pool_threads ? pool_threads : openblas_get_num_threads());
    return buf;
}

const char *ab_backend_cpu_blas_better_core(void) {
#if defined(__x86_64__) && defined(__GNUC__)
    /* with oneDNN doing the products, OpenBLAS's kernels are never called: no re-run for them */
    if (cpu_onednn_version()) return NULL;
    const char *core = openblas_get_corename();
    if (!core) return NULL;
    const int generic = strcasecmp(core, "prescott") == 0 || strcasecmp(core, "core2") == 0 ||
                        strcasecmp(core, "nehalem") == 0 || strcasecmp(core, "katmai") == 0;
    /* AVX2 kernels on a CPU with AVX-512: OpenBLAS 0.3.21 maps every AMD Zen to its Haswell
     * kernels, which run at half the SkylakeX kernels' rate where AVX-512 is full width (Zen 5:
     * 121 against 240 GFLOP/s a core at 2048 x 384 x 384) */
    const int avx2_only = strcasecmp(core, "haswell") == 0 || strcasecmp(core, "zen") == 0 ||
                          strcasecmp(core, "sandybridge") == 0 || strcasecmp(core, "excavator") == 0;
    const int avx512 = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
                       __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512vl") &&
                       __builtin_cpu_supports("avx512cd");
    if ((generic || avx2_only) && avx512) return "SkylakeX";
    if (generic && __builtin_cpu_supports("avx2")) return "Haswell";
#endif
    return NULL;
}

const char *ab_backend_cpu_blas_hint(void) {
    static char buf[256];
    const char *better = ab_backend_cpu_blas_better_core();
    if (!better) return NULL;
    snprintf(buf, sizeof buf,
             "OpenBLAS chose its %s kernels for this CPU, which supports %s: "
             "OPENBLAS_CORETYPE=%s selects the faster ones",
             openblas_get_corename(), strcmp(better, "SkylakeX") == 0 ? "AVX-512" : "AVX2", better);
    return buf;
}

int ab_backend_cpu_set_bf16_native(ab_backend *be, int native) {
    cpu_state *st = be->impl;
    st->bf16_native = native && cpu_bf16_native_available();
    return st->bf16_native;
}

const char *ab_backend_cpu_bf16_describe(ab_backend *be) {
    static char buf[96];
    const cpu_state *st = be->impl;
    if (st->bf16_native || !cpu_bf16_native_available())
        snprintf(buf, sizeof buf, "bf16 GEMM %s", cpu_bf16_native_describe());
    else
        snprintf(buf, sizeof buf, "bf16 GEMM emulated (AB_CPU_BF16=emulated)");
    return buf;
}
