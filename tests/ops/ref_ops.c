/* The reference pass of test_backend_ops (ops_test.h) for the MLP's ops and the batch assembly:
 * the CPU backend against references worked out here in double precision from the contracts of
 * core/backend_ops.def, never from the backend's own helpers. Element types are decoded from their
 * bits and rounded to nearest even by ref_decode and ref_round below.
 *   - gemm: every transpose, padded leading dimensions (the padding holds NaN, so a read of it
 *     shows), bias and ReLU epilogues, alpha, beta 0 (C starts NaN and must not be read) and 1,
 *     fp32/fp16/bf16 operands and outputs, mixed operand types, odd shapes, shapes large enough to
 *     be split over the pool, NaN and inf planted in A, B, the bias and C, fp16 and fp32 overflow;
 *     each element within the error bound of an fp32 sum of K products plus one rounding to ct;
 *   - cast: every pair of element types, round to nearest even bit for bit (ties, fp16 and bf16
 *     subnormals, 65504 and the values that must overflow, NaN, +-inf, -0), every bf16 pattern and
 *     every fp16 pattern into bf16; same-type casts copy the bits;
 *   - accumulate, relu_forward, relu_backward, scale, unscale_check: bit for bit (each element is
 *     one fp32 operation, or none), with +-0, NaN, +-inf, subnormals and 65504;
 *   - col_sum, sum_squares: within the error bound of the fp32 sums;
 *   - softmax_xent: loss sum, argmax count (ties), dlogits with grad_scale, in place, fp16 logits
 *     near 65504, labels out of range and a NaN logit giving NaN; sgd_step and adamw_step over a few
 *     steps as PyTorch defines them: both against a float64 reference carrying a running error
 *     bound of the fp32 arithmetic;
 *   - log2_hist: every bit pattern of fp16 and bf16, every power of two of fp32 and its neighbours,
 *     the clamped bins at both ends, zeros, infinities and NaNs, counts added to;
 *   - gather_rows, gather_normalize, gather_images (crop with zero padding, flip, planar and
 *     interleaved pixels, fp32/fp16/bf16 outputs, the labels). */
#include <float.h>
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "half.h"
#include "kernel_math.h" /* AB_LOG2_HIST_MAX_BINS */
#include "ops_test.h"
#include "rng.h"
#include "tolerances.h"

static const ab_dtype all_types[3] = {AB_F32, AB_F16, AB_BF16};

static double rel_err(double got, double want) { return fabs(got - want) / (fabs(want) > 1e-30 ? fabs(want) : 1.0); }

/* ---- element types in double precision ---- */

/* half the distance from 1 to the next value: the relative error of one rounding into t */
static double unit_roundoff(ab_dtype t) { return t == AB_F32 ? 0x1p-24 : t == AB_F16 ? 0x1p-11 : 0x1p-8; }
/* half the smallest subnormal: the absolute error of a rounding into t's subnormal range */
static double half_tiny(ab_dtype t) { return t == AB_F32 ? 0x1p-150 : t == AB_F16 ? 0x1p-25 : 0x1p-134; }
/* the smallest magnitude that rounds to inf: the largest finite value plus half its ulp */
static double overflow_at(ab_dtype t) { return t == AB_F32 ? 0x1.ffffffp127 : t == AB_F16 ? 65520.0 : 0x1.ffp127; }

/* element i of p as stored in t, decoded from its bits: sign, exponent field, mantissa field */
static double ref_decode(const void *p, size_t i, ab_dtype t) {
    if (t == AB_F32) return ((const float *)p)[i];
    const uint16_t h = ((const uint16_t *)p)[i];
    const int mbits = t == AB_F16 ? 10 : 7, ebits = t == AB_F16 ? 5 : 8;
    const int bias = (1 << (ebits - 1)) - 1, emax = (1 << ebits) - 1;
    const int m = h & ((1 << mbits) - 1), e = (h >> mbits) & emax;
    const double s = (h & 0x8000u) ? -1.0 : 1.0;
    if (e == emax) return m ? NAN : s * INFINITY;
    if (e == 0) return s * ldexp(m, 1 - bias - mbits);
    return s * ldexp((1 << mbits) + m, e - bias - mbits);
}

/* the bits of element i, for messages */
static unsigned bits_of(const void *p, size_t i, ab_dtype t) {
    return t == AB_F32 ? ab_f32_bits(((const float *)p)[i]) : ((const uint16_t *)p)[i];
}

/* v rounded to nearest even into t, in double: a multiple of the quantum of v's binade (that of
 * the smallest normal binade below it), inf once the rounded magnitude passes the largest finite
 * value; the sign of a zero is kept */
static double ref_round(double v, ab_dtype t) {
    if (isnan(v) || isinf(v) || v == 0.0) return v;
    const int digits = t == AB_F32 ? 24 : t == AB_F16 ? 11 : 8, emin = t == AB_F16 ? -14 : -126;
    const double maxv = t == AB_F32 ? FLT_MAX : t == AB_F16 ? 65504.0 : 0x1.fep127;
    int e;
    frexp(v, &e);
    e = e - 1 < emin ? emin : e - 1; /* floor(log2 |v|), at least emin */
    const double q = ldexp(1.0, e - (digits - 1));
    const double r = nearbyint(v / q) * q; /* v / q is exact; nearbyint rounds ties to even */
    return fabs(r) > maxv ? copysign(INFINITY, v) : r;
}

/* the same value: both NaN, or equal with the same sign (-0 is not +0) */
static int same_value(double got, double want) {
    return isnan(want) ? isnan(got) : got == want && signbit(got) == signbit(want);
}

/* within bound of want; a want that is not finite must be met exactly */
static int within(double got, double want, double bound) {
    if (!isfinite(want)) return same_value(got, want);
    return isfinite(got) && fabs(got - want) <= bound;
}

/* elements found wrong in one check: the first three are printed, the check fails once */
typedef struct {
    int bad;
} tally;

static void tally_bad(tally *t, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;
static void tally_bad(tally *t, const char *fmt, ...) {
    if (t->bad++ < 3) {
        va_list ap;
        va_start(ap, fmt);
        fputs("FAIL ", stderr);
        vfprintf(stderr, fmt, ap);
        fputc('\n', stderr);
        va_end(ap);
    }
}

static void tally_end(const tally *t, const char *what) {
    if (t->bad) {
        fprintf(stderr, "FAIL %s: %d element(s) wrong\n", what, t->bad);
        failures++;
    }
}

/* one element against want within bound (scaled by AB_TOL_ROUNDING_BOUND_MARGIN where the bound
 * is a first-order estimate) */
static void check_elem(tally *t, const char *name, size_t i, double got, double want, double bound) {
    if (!within(got, want, bound))
        tally_bad(t, "%s[%zu] = %.9g, expected %.9g (bound %.3g)", name, i, got, want, bound);
}

static float urand(float lo, float hi) { return ab_rng_uniform_range(&rng, lo, hi); }

static void *xmalloc(size_t bytes) {
    void *p = malloc(bytes ? bytes : 1);
    if (!p) die("out of host memory");
    return p;
}

/* ---- gemm ---- */

typedef struct {
    int ta, tb, M, N, K;
    float alpha, beta;
    ab_dtype at, bt, ct;
    int bias, relu, pad; /* pad: elements past the used ones in every stored row (lda, ldb, ldc) */
    int plant;           /* NaN and inf planted in A, B, the bias and C (needs M, N >= 3, K >= 2) */
    float scale;         /* A, B and the bias drawn uniform in [-scale, scale] (0: 1) */
} gemm_spec;

/* offset of logical element (r, c) of op(X) in X stored row-major with leading dimension ld */
static size_t gemm_at(int trans, int r, int c, int ld) {
    return trans ? (size_t)c * (size_t)ld + (size_t)r : (size_t)r * (size_t)ld + (size_t)c;
}

/* rows x ld elements of t: uniform values in the first cols of each row, NaN in the padding */
static void *fill_matrix(int rows, int cols, int ld, ab_dtype t, float scale) {
    void *p = xmalloc((size_t)rows * ld * ab_dtype_size(t));
    for (int r = 0; r < rows; r++)
        for (int c = 0; c < ld; c++) ab_store(p, (size_t)r * ld + c, t, c < cols ? urand(-scale, scale) : NAN);
    return p;
}

/* C = epi(alpha op(A) op(B) + bias) + beta C: the exact sum in double, then the error bound of an
 * fp32 sum of K products and up to four more fp32 roundings (alpha, bias, beta C and its add),
 * (K + 4) 2^-24 of the sum of the magnitudes, plus one rounding to ct. Where that range reaches
 * ct's overflow threshold the element may be inf (of the reference's sign); past it, it must be. */
static void gemm_case(ab_backend *be, const gemm_spec *s) {
    const int M = s->M, N = s->N, K = s->K;
    const int arows = s->ta ? K : M, acols = s->ta ? M : K, brows = s->tb ? N : K, bcols = s->tb ? K : N;
    const int lda = acols + s->pad, ldb = bcols + s->pad, ldc = N + s->pad;
    const float sc = s->scale > 0.0f ? s->scale : 1.0f;
    const size_t ce = ab_dtype_size(s->ct);
    void *A = fill_matrix(arows, acols, lda, s->at, sc), *B = fill_matrix(brows, bcols, ldb, s->bt, sc);
    void *bias = s->bias ? fill_matrix(1, N, N, s->bt, sc) : NULL;
    void *C = fill_matrix(M, N, ldc, s->ct, 1.0f), *C0 = xmalloc((size_t)M * ldc * ce);
    if (s->beta == 0.0f) /* C is not read: NaN there must not show */
        for (int i = 0; i < M; i++)
            for (int j = 0; j < N; j++) ab_store(C, (size_t)i * ldc + j, s->ct, NAN);
    if (s->plant) {
        ab_store(A, gemm_at(s->ta, 1, K - 1, lda), s->at, NAN);      /* row 1 of C NaN */
        ab_store(B, gemm_at(s->tb, 0, N - 1, ldb), s->bt, INFINITY); /* column N-1 +-inf (A(i, 0) != 0) */
        if (bias) ab_store(bias, 0, s->bt, NAN);                     /* column 0 NaN */
        if (s->beta != 0.0f) {
            ab_store(C, (size_t)(M - 1) * ldc + 1, s->ct, NAN); /* beta C: NaN, */
            ab_store(C, 1, s->ct, -INFINITY);                   /* and -inf past the ReLU */
        }
    }
    memcpy(C0, C, (size_t)M * ldc * ce);

    char what[200];
    snprintf(what, sizeof what, "%s%s%s -> %s %dx%dx%d %s %s%s%s alpha %g beta %g%s%s%s", ab_dtype_name(s->at),
             s->at != s->bt ? " x " : "", s->at != s->bt ? ab_dtype_name(s->bt) : "", ab_dtype_name(s->ct), M, N, K,
             s->ta ? "A^T" : "A", s->tb ? "B^T" : "B", s->bias ? " bias" : "", s->relu ? " relu" : "", (double)s->alpha,
             (double)s->beta, s->pad ? " ld+pad" : "", s->plant ? " NaN/inf planted" : "",
             s->scale > 1.0f ? " to overflow" : "");
    op_case(AB_OP_gemm, "%s", what);
    AB_CHECK(be->ops->gemm(be, s->ta, s->tb, M, N, K, s->alpha, s->at, A, lda, s->bt, B, ldb, bias,
                           s->relu ? AB_EPI_RELU : AB_EPI_NONE, s->beta, s->ct, C, ldc) == 0,
             "gemm: %s", ab_error());

    const double u = 0x1p-24, uo = unit_roundoff(s->ct), ovf = overflow_at(s->ct);
    tally t = {0};
    for (int i = 0; i < M; i++)
        for (int j = 0; j < ldc; j++) {
            const size_t at = (size_t)i * ldc + j;
            const double got = ref_decode(C, at, s->ct);
            if (j >= N) { /* the padding keeps its bits */
                if (memcmp((char *)C + at * ce, (char *)C0 + at * ce, ce) != 0)
                    tally_bad(&t, "gemm %s: C[%d, %d] in the padding was written", what, i, j);
                continue;
            }
            double acc = 0.0, mag = 0.0;
            for (int k = 0; k < K; k++) {
                const double p =
                    ref_decode(A, gemm_at(s->ta, i, k, lda), s->at) * ref_decode(B, gemm_at(s->tb, k, j, ldb), s->bt);
                acc += p;
                mag += fabs(p);
            }
            double want = (double)s->alpha * acc, m = fabs((double)s->alpha) * mag;
            if (bias) {
                const double b = ref_decode(bias, (size_t)j, s->bt);
                want += b;
                m += fabs(b);
            }
            if (s->relu) want = want < 0.0 ? 0.0 : want; /* max(x, 0); NaN stays NaN */
            if (s->beta != 0.0f) {
                const double o = (double)s->beta * ref_decode(C0, at, s->ct);
                want += o;
                m += fabs(o);
            }
            const double e32 = (K + 4) * u * m;
            int ok;
            if (!isfinite(want))
                ok = same_value(got, want);
            else if (fabs(want) - e32 >= ovf)
                ok = isinf(got) && signbit(got) == signbit(want);
            else if (isinf(got))
                ok = fabs(want) + e32 >= ovf && signbit(got) == signbit(want);
            else
                ok = fabs(got - want) <= e32 + uo * (fabs(want) + e32) + half_tiny(s->ct);
            if (!ok)
                tally_bad(&t, "gemm %s: C[%d, %d] = %.9g, expected %.9g (bound %.3g)", what, i, j, got, want,
                          e32 + uo * (fabs(want) + e32));
        }
    tally_end(&t, "gemm");
    free(A);
    free(B);
    free(bias);
    free(C);
    free(C0);
}

static void test_gemm(ab_backend *be) {
#define F32 AB_F32
#define F16 AB_F16
#define BF16 AB_BF16
    /* ta tb M N K alpha beta at bt ct bias relu pad plant scale */
    static const gemm_spec specs[] = {
        /* every transpose in fp32, the smallest shape, odd shapes, padded leading dimensions */
        {0, 0, 1, 1, 1, 1.0f, 0.0f, F32, F32, F32, 0, 0, 0, 0, 0},
        {0, 0, 7, 5, 3, 1.0f, 0.0f, F32, F32, F32, 0, 0, 0, 0, 0},
        {1, 0, 7, 5, 3, 1.0f, 0.0f, F32, F32, F32, 0, 0, 0, 0, 0},
        {0, 1, 7, 5, 3, 1.0f, 0.0f, F32, F32, F32, 0, 0, 0, 0, 0},
        {1, 1, 7, 5, 3, 1.0f, 0.0f, F32, F32, F32, 0, 0, 0, 0, 0},
        {0, 0, 33, 17, 65, 1.0f, 0.0f, F32, F32, F32, 0, 0, 3, 0, 0},
        {1, 0, 33, 17, 65, 1.0f, 0.0f, F32, F32, F32, 0, 0, 3, 0, 0},
        {0, 1, 33, 17, 65, 1.0f, 0.0f, F32, F32, F32, 0, 0, 3, 0, 0},
        {1, 1, 33, 17, 65, 1.0f, 0.0f, F32, F32, F32, 0, 0, 3, 0, 0},
        /* epilogues, alpha, beta 1 */
        {0, 1, 33, 17, 65, 1.0f, 0.0f, F32, F32, F32, 1, 1, 2, 0, 0},
        {1, 0, 33, 17, 65, -0.75f, 1.0f, F32, F32, F32, 0, 0, 1, 0, 0},
        {0, 0, 1, 1, 1, 2.0f, 1.0f, F32, F32, F32, 1, 1, 0, 0, 0},
        {1, 1, 9, 6, 4, 0.5f, 1.0f, F32, F32, F32, 1, 1, 0, 0, 0},
        {0, 1, 9, 6, 4, 1.0f, 1.0f, F32, F32, F32, 1, 0, 1, 0, 0},
        /* large enough to be split over the pool: by columns, by rows */
        {0, 1, 64, 256, 100, 1.0f, 1.0f, F32, F32, F32, 0, 0, 0, 0, 0},
        {0, 0, 300, 40, 30, 1.0f, 0.0f, F32, F32, F32, 1, 1, 0, 0, 0},
        /* few rows, many columns (cut by columns): B converted a column tile at a time in each
         * part (16-bit B, or a transposed fp32 B of 16 rows or more), the epilogue on each tile;
         * the last tile ragged (300 = 4 x 64 + 44) */
        {0, 0, 33, 300, 40, 1.0f, 0.0f, F16, F16, F16, 1, 1, 3, 0, 0},
        {0, 1, 33, 300, 40, 0.5f, 1.0f, F16, F16, F16, 1, 0, 2, 0, 0},
        {1, 1, 33, 300, 40, 1.0f, 0.0f, F16, F16, F16, 0, 0, 1, 0, 0},
        {0, 1, 20, 300, 60, 1.0f, 1.0f, BF16, BF16, F32, 0, 0, 1, 0, 0},
        {1, 1, 20, 300, 60, 1.0f, 1.0f, F32, F32, F32, 0, 0, 2, 0, 0},
        {0, 1, 20, 300, 60, -1.0f, 0.0f, F32, F32, F32, 1, 1, 0, 0, 0},
        {0, 1, 8, 300, 120, 1.0f, 1.0f, F32, F32, F32, 0, 0, 1, 0, 0},
        {0, 1, 20, 300, 60, 1.0f, 0.0f, F16, F32, F16, 0, 1, 0, 0, 0},
        {0, 1, 33, 300, 40, 1.0f, 1.0f, F16, F16, F16, 1, 1, 0, 1, 0},
        /* fp16 in and out */
        {0, 0, 19, 23, 31, 1.0f, 0.0f, F16, F16, F16, 1, 1, 0, 0, 0},
        {1, 0, 19, 23, 31, 1.0f, 0.0f, F16, F16, F16, 1, 1, 2, 0, 0},
        {0, 1, 19, 23, 31, 1.0f, 0.0f, F16, F16, F16, 1, 1, 0, 0, 0},
        {1, 1, 19, 23, 31, 1.0f, 0.0f, F16, F16, F16, 1, 1, 2, 0, 0},
        {0, 1, 19, 23, 31, 0.5f, 1.0f, F16, F16, F16, 1, 0, 5, 0, 0},
        {0, 0, 300, 40, 30, 1.0f, 0.0f, F16, F16, F16, 0, 1, 0, 0, 0},
        /* tiles of rows big enough that the two parts run at once, each widening its rows of A and
         * holding its sums in a block of its own, reused from tile to tile (8 tiles of 128) */
        {0, 1, 1024, 96, 200, 1.0f, 0.0f, F16, F16, F16, 1, 1, 1, 0, 0},
        {0, 0, 1024, 96, 200, 1.0f, 1.0f, BF16, BF16, F32, 0, 0, 0, 0, 0},
        /* the rounding alone (alpha 1, beta 0, no bias, no ReLU: the epilogue narrows the sums) */
        {1, 0, 37, 29, 41, 1.0f, 0.0f, F16, F16, F16, 0, 0, 2, 0, 0},
        {1, 0, 256, 80, 64, 1.0f, 0.0f, F16, F16, F16, 0, 0, 0, 0, 0},
        {0, 1, 37, 29, 41, 1.0f, 0.0f, BF16, BF16, BF16, 0, 0, 1, 0, 0},
        /* fp16 in, fp32 out (the fp32 sgemm path without epilogue, and with one) */
        {0, 1, 64, 256, 100, 1.0f, 1.0f, F16, F16, F32, 0, 0, 0, 0, 0},
        {1, 0, 37, 29, 41, 1.0f, 0.0f, F16, F16, F32, 1, 0, 1, 0, 0},
        {0, 0, 37, 29, 41, -2.0f, 1.0f, F16, F16, F32, 1, 1, 0, 0, 0},
        /* bf16 */
        {0, 1, 19, 23, 31, 1.0f, 0.0f, BF16, BF16, BF16, 1, 1, 0, 0, 0},
        {1, 0, 19, 23, 31, 1.0f, 1.0f, BF16, BF16, BF16, 0, 0, 3, 0, 0},
        {1, 1, 300, 40, 30, 1.0f, 0.0f, BF16, BF16, F32, 0, 0, 0, 0, 0},
        {0, 0, 13, 11, 9, 1.0f, 1.0f, BF16, BF16, F32, 1, 1, 0, 0, 0},
        /* fp32 in, narrow out */
        {0, 1, 13, 11, 9, 1.0f, 0.0f, F32, F32, F16, 1, 1, 0, 0, 0},
        {1, 0, 13, 11, 9, 1.0f, 1.0f, F32, F32, BF16, 1, 0, 2, 0, 0},
        /* mixed operand types (the bias has B's type) */
        {0, 1, 13, 11, 9, 1.0f, 0.0f, F16, F32, F32, 1, 0, 0, 0, 0},
        {1, 0, 13, 11, 9, 1.0f, 1.0f, F32, BF16, F16, 1, 1, 1, 0, 0},
        /* NaN and inf planted: a NaN in A or the bias makes its row or column NaN, an inf in B
         * its column +-inf, NaN and -inf in C come through beta; ReLU takes -inf to 0 */
        {0, 0, 9, 7, 5, 1.0f, 0.0f, F32, F32, F32, 0, 0, 1, 1, 0},
        {0, 1, 9, 7, 5, 1.0f, 1.0f, F32, F32, F32, 1, 0, 0, 1, 0},
        {0, 1, 9, 7, 5, -1.0f, 1.0f, F32, F32, F32, 1, 1, 2, 1, 0},
        {1, 0, 9, 7, 5, 1.0f, 0.0f, F16, F16, F16, 1, 1, 0, 1, 0},
        {0, 0, 9, 7, 5, -1.0f, 1.0f, F16, F16, F32, 0, 0, 1, 1, 0},
        {1, 1, 9, 7, 5, 1.0f, 1.0f, BF16, BF16, BF16, 1, 1, 0, 1, 0},
        {0, 1, 9, 7, 5, 1.0f, 1.0f, BF16, BF16, F32, 1, 0, 0, 1, 0},
        /* past 65504 to inf in fp16 (values to 256: products to 65536), past fp32's range with
         * one term a sum (values to 2^70) */
        {0, 1, 9, 7, 5, 1.0f, 0.0f, F16, F16, F16, 1, 0, 0, 0, 256.0f},
        {1, 0, 9, 7, 5, 1.0f, 1.0f, F32, F32, F16, 1, 1, 1, 0, 256.0f},
        {0, 0, 5, 6, 1, 1.0f, 0.0f, F32, F32, F32, 0, 0, 0, 0, 0x1p70f},
    };
#undef F32
#undef F16
#undef BF16
    for (size_t i = 0; i < sizeof specs / sizeof specs[0]; i++) gemm_case(be, &specs[i]);
}

/* ---- gemm_fold: a weight gradient's product rounded to ct and folded into fp32 ----
 * Defined as the bits of gemm into a ct buffer (beta 0) followed by accumulate, both checked
 * above against float64: the fused op must give those bits exactly, in every path of the product
 * (tiles of rows with G holding the sums, tiles of columns, native bf16, fp32), over a NaN in G
 * where it is overwritten, with NaN, inf and fp16 overflow coming through the sums, and into a G
 * holding a NaN and an infinity where it is added to. */
static void gemm_fold_case(ab_backend *be, int ta, int tb, int M, int N, int K, ab_dtype t, int acc, int plant,
                           float scale) {
    const int arows = ta ? K : M, acols = ta ? M : K, brows = tb ? N : K, bcols = tb ? K : N;
    const int lda = acols + plant, ldb = bcols + plant; /* padded where planted: the padding holds NaN */
    void *A = fill_matrix(arows, acols, lda, t, scale), *B = fill_matrix(brows, bcols, ldb, t, scale);
    const size_t n = (size_t)M * N, es = ab_dtype_size(t);
    float *G = xmalloc(n * sizeof *G), *want = xmalloc(n * sizeof *want);
    void *ws = xmalloc(n * es), *ws2 = xmalloc(n * es);
    for (size_t i = 0; i < n; i++) G[i] = acc ? urand(-1.0f, 1.0f) : NAN; /* accumulate 0 must not read G */
    if (plant) {
        ab_store(A, gemm_at(ta, 1, K - 1, lda), t, NAN);      /* row 1 NaN */
        ab_store(B, gemm_at(tb, 0, N - 1, ldb), t, INFINITY); /* column N-1 +-inf */
        if (acc) G[2] = NAN, G[(size_t)N + 3] = -INFINITY;
    }
    memcpy(want, G, n * sizeof *G);
    int32_t fi_want = 0, fi = 0;
    AB_CHECK(be->ops->gemm(be, ta, tb, M, N, K, 1.0f, t, A, lda, t, B, ldb, NULL, AB_EPI_NONE, 0.0f, t, ws2, N) == 0 &&
                 be->ops->accumulate(be, n, t, ws2, want, acc, &fi_want) == 0,
             "gemm_fold's reference: %s", ab_error());
    int nonfinite = 0; /* found_inf: set exactly where a stored value is infinite or NaN */
    for (size_t i = 0; i < n; i++) nonfinite |= !isfinite(want[i]);
    AB_CHECK(fi_want == nonfinite, "accumulate's found_inf %d, %s stored", fi_want,
             nonfinite ? "a non-finite value" : "all finite");
    op_case(AB_OP_gemm_fold, "%s %dx%dx%d %s %s %s%s%s: gemm into %s then accumulate, bit for bit", ab_dtype_name(t), M,
            N, K, ta ? "A^T" : "A", tb ? "B^T" : "B", acc ? "G + round(AB)" : "G = round(AB)",
            plant ? ", NaN/inf planted, ld+pad" : "", scale > 1.0f ? ", to overflow" : "", ab_dtype_name(t));
    AB_CHECK(be->ops->gemm_fold(be, ta, tb, M, N, K, t, A, lda, t, B, ldb, t, ws, G, acc, &fi) == 0, "gemm_fold: %s",
             ab_error());
    AB_CHECK(fi == nonfinite, "gemm_fold %s %dx%dx%d: found_inf %d, %s stored", ab_dtype_name(t), M, N, K, fi,
             nonfinite ? "a non-finite value" : "all finite");
    tally tl = {0};
    for (size_t i = 0; i < n; i++)
        if (memcmp(&G[i], &want[i], sizeof(float)) != 0)
            tally_bad(&tl, "gemm_fold %s %dx%dx%d: G[%zu] = %.9g (0x%08x), gemm + accumulate gave %.9g (0x%08x)",
                      ab_dtype_name(t), M, N, K, i, (double)G[i], bits_of(G, i, AB_F32), (double)want[i],
                      bits_of(want, i, AB_F32));
    tally_end(&tl, "gemm_fold");
    free(A), free(B), free(G), free(want), free(ws), free(ws2);
}

static void test_gemm_fold(ab_backend *be) {
    for (int ti = 0; ti < 3; ti++) {
        const ab_dtype t = all_types[ti];
        for (int acc = 0; acc < 2; acc++) {
            gemm_fold_case(be, 1, 0, 256, 784, 64, t, acc, 0, 1.0f); /* the MLP's fc1 weight: tiles of rows */
            gemm_fold_case(be, 1, 0, 10, 256, 64, t, acc, 0, 1.0f);  /* fc2's: one tile */
            gemm_fold_case(be, 1, 0, 33, 300, 40, t, acc, 1, 1.0f);  /* tiles of columns, B converted in them */
            gemm_fold_case(be, 0, 1, 33, 300, 40, t, acc, 0, 1.0f);  /* the same, B transposed */
            gemm_fold_case(be, 1, 1, 19, 23, 31, t, acc, 1, 1.0f);
        }
        gemm_fold_case(be, 1, 0, 9, 7, 5, t, 1, 0, 256.0f); /* past 65504: inf in fp16, then folded */
    }
}

/* ---- cast ---- */

/* n elements of st into dt: same-type casts copy the bits, the others round to nearest even
 * (ref_round of the decoded source) */
static void cast_case(ab_backend *be, ab_dtype st, const void *src, size_t n, ab_dtype dt, const char *values) {
    const size_t de = ab_dtype_size(dt);
    void *dst = xmalloc(n * de);
    memset(dst, 0x5a, n * de);
    op_case(AB_OP_cast, "%s -> %s n=%zu: %s", ab_dtype_name(st), ab_dtype_name(dt), n, values);
    AB_CHECK(be->ops->cast(be, n, st, src, dt, dst) == 0, "cast: %s", ab_error());
    tally t = {0};
    for (size_t i = 0; i < n; i++) {
        if (st == dt) {
            if (bits_of(dst, i, dt) != bits_of(src, i, st))
                tally_bad(&t, "cast %s copy: element %zu %#x, source %#x", ab_dtype_name(st), i, bits_of(dst, i, dt),
                          bits_of(src, i, st));
            continue;
        }
        const double v = ref_decode(src, i, st), want = ref_round(v, dt), got = ref_decode(dst, i, dt);
        if (!same_value(got, want))
            tally_bad(&t, "cast %s -> %s: element %zu (%#x, %.9g) gave %#x (%.9g), expected %.9g", ab_dtype_name(st),
                      ab_dtype_name(dt), i, bits_of(src, i, st), v, bits_of(dst, i, dt), got, want);
    }
    tally_end(&t, "cast");
    free(dst);
}

static void test_cast(ab_backend *be) {
    /* fp32 values at the edges of the narrow types */
    static const float edges[] = {
        /* signed zeros, NaN, infinities, ordinary values */
        0.0f, -0.0f, 1.0f, -1.0f, NAN, -NAN, INFINITY, -INFINITY, 1.0f / 3.0f, -2.5f,
        /* fp16's largest, values that round down to it, and the tie 65520 and beyond: inf */
        65504.0f, -65504.0f, 65519.99f, -65519.99f, 65520.0f, -65520.0f, 65536.0f, 1e5f,
        /* fp16's smallest subnormal 2^-24; its half (a tie, to 0), below it, just past it (up) */
        0x1p-24f, -0x1p-24f, 0x1p-25f, -0x1p-25f, 0x1p-26f, 0x1.000002p-25f,
        /* 3 and 5 x 2^-25: ties, both to 2^-23 */
        0x1.8p-24f, 0x1.4p-23f,
        /* fp16's largest subnormal, the tie above it (to 2^-14), 1021.5 x 2^-24 (to 1022), 2^-14 */
        0x1.ff8p-15f, 0x1.ffcp-15f, 0x1.ff4p-15f, 0x1p-14f, -0x1p-14f,
        /* fp16 ties 1 + 2^-11 (down to 1), 1 + 3 x 2^-11 (up), one just past a tie */
        0x1.002p0f, 0x1.006p0f, 0x1.002002p0f,
        /* bf16 ties 1 + 2^-8 (down), 1 + 3 x 2^-8 (up), past one, negative ones, one just past the tie 257 */
        0x1.01p0f, 0x1.03p0f, 0x1.010002p0f, -0x1.01p0f, -0x1.03p0f, 0x1.0101p8f,
        /* bf16's largest, the float below its overflow tie, the tie (to inf), fp32's largest */
        0x1.fep127f, 0x1.fefffep127f, 0x1.ffp127f, FLT_MAX, -FLT_MAX,
        /* fp32's smallest normal and subnormals */
        0x1p-126f, 0x1p-127f, 1e-40f, -1e-40f, 0x1p-149f, -0x1p-149f,
        /* bf16's smallest subnormal 2^-133, its half (a tie, to 0), 1.5 (a tie, to 2^-132), 1.4375 */
        0x1p-133f, 0x1p-134f, 0x1.8p-133f, 0x1.7p-133f};
    const size_t E = sizeof edges / sizeof edges[0];
    /* the edges nine times over (E is not a multiple of 8, so each passes through every lane of a
     * vector conversion), a signalling NaN, random bit patterns, values in fp16's range, and the
     * last 7 (the scalar tail of a vector loop of 8) edges again */
    const size_t R = 4002 + (8 - (9 * E + 1 + 4002) % 8) % 8, n32 = 9 * E + 1 + R + 7;
    float *x = xmalloc(n32 * sizeof *x);
    size_t k = 0;
    for (size_t i = 0; i < 9 * E; i++) x[k++] = edges[i % E];
    x[k++] = ab_bits_f32(0x7f800001u);
    for (size_t i = 0; i < R; i++) {
        const uint32_t r = (uint32_t)ab_rng_u64(&rng);
        if (i % 2 == 0)
            x[k++] = ab_bits_f32(r);
        else /* sign, an exponent from 2^-27 to 2^17, any mantissa */
            x[k++] = ab_bits_f32((r & 0x807fffffu) | (uint32_t)(127 - 27 + (r >> 23) % 45) << 23);
    }
    static const float tail[7] = {65520.0f, 65519.99f, 0x1p-25f, 0x1.8p-24f, NAN, -0.0f, 0x1.002p0f};
    for (int i = 0; i < 7; i++) x[k++] = tail[i];

    /* every fp16 and bf16 pattern, and the first once more (an odd count) */
    const size_t n16 = 65537;
    uint16_t *all = xmalloc(n16 * sizeof *all);
    for (size_t i = 0; i < n16; i++) all[i] = (uint16_t)i;
    /* fp16 edges into fp32 (all 65536 are widened in ref_layers.c) and random patterns */
    static const uint16_t h_edges[] = {0x0000, 0x8000, 0x0001, 0x8001, 0x03ff, 0x0400, 0x3c00, 0x3c01,
                                       0x7bff, 0xfbff, 0x7c00, 0xfc00, 0x7e00, 0xfe00, 0x7c01, 0x7fff};
    const size_t nh = 2001;
    uint16_t *h = xmalloc(nh * sizeof *h);
    for (size_t i = 0; i < nh; i++)
        h[i] = i < sizeof h_edges / sizeof h_edges[0] ? h_edges[i] : (uint16_t)ab_rng_u64(&rng);

    const char *fvals = "NaN, +-inf, +-0, 65504 and past, fp16/bf16 ties, subnormals, random";
    cast_case(be, AB_F32, x, n32, AB_F16, fvals);
    cast_case(be, AB_F32, x, n32, AB_BF16, fvals);
    cast_case(be, AB_F32, x, n32, AB_F32, fvals);
    cast_case(be, AB_F32, x, 1, AB_F16, "one element");
    cast_case(be, AB_F16, h, nh, AB_F32, "NaN, +-inf, +-0, subnormals, 65504, random patterns");
    cast_case(be, AB_F16, all, n16, AB_BF16, "every pattern (ties, subnormals, NaN)");
    cast_case(be, AB_F16, all, n16, AB_F16, "every pattern");
    cast_case(be, AB_BF16, all, n16, AB_F16, "every pattern (overflow, ties, subnormals, NaN)");
    cast_case(be, AB_BF16, all, n16, AB_F32, "every pattern");
    cast_case(be, AB_BF16, all, n16, AB_BF16, "every pattern");
    free(x);
    free(all);
    free(h);
}

/* ---- accumulate ---- */

/* dst = src (accumulate 0) or dst + src (1), in fp32: the sum of two fp32 values rounded once,
 * which double arithmetic then ref_round gives exactly (53 >= 2 x 24 + 2 bits) */
static void accumulate_case(ab_backend *be, ab_dtype st, int acc) {
    /* pairs (src, dst): signed zeros, NaN on either side, inf - inf, overflow, a tie to even, a
     * subnormal lost and one kept */
    static const float se[] = {-0.0f, -0.0f,    0.0f, NAN,  INFINITY, -INFINITY, INFINITY, 65504.0f,
                               3e38f, 0x1p-24f, 1.0f, 3.0f, 1e-3f,    0x1p-24f,  -65504.0f};
    static const float de[] = {-0.0f, 0.0f, -0.0f, 1.0f,  1.0f, 2.0f,      -INFINITY, 3.4e38f,
                               3e38f, 1.0f, NAN,   -3.0f, 1e7f, 0x1p-149f, 65504.0f};
    const size_t E = sizeof se / sizeof se[0], n = 1001;
    void *src = xmalloc(n * ab_dtype_size(st));
    float *dst = xmalloc(n * sizeof *dst), *d0 = xmalloc(n * sizeof *d0);
    for (size_t i = 0; i < n; i++) {
        ab_store(src, i, st, i < E ? se[i] : (float)ab_rng_normal(&rng) * 4.0f);
        dst[i] = acc ? (i < E ? de[i] : (float)ab_rng_normal(&rng)) : NAN; /* accumulate 0 must not read dst */
    }
    memcpy(d0, dst, n * sizeof *d0);
    op_case(AB_OP_accumulate, "%s -> fp32 n=%zu %s: +-0, NaN, +-inf, overflow, a tie, subnormals", ab_dtype_name(st), n,
            acc ? "dst + src" : "dst = src");
    int32_t fi = 0;
    AB_CHECK(be->ops->accumulate(be, n, st, src, dst, acc, &fi) == 0, "accumulate: %s", ab_error());
    int nonfinite = 0;
    for (size_t i = 0; i < n; i++) nonfinite |= !isfinite(dst[i]);
    AB_CHECK(fi == nonfinite && nonfinite, "accumulate %s: found_inf %d (NaN and inf stored: 1)", ab_dtype_name(st), fi);
    /* the flag is never cleared, and a clean fold leaves a clean flag clean, over both parts */
    {
        const size_t m = (size_t)1 << 18;
        float *d = xmalloc(m * sizeof *d);
        void *s1 = xmalloc(m * ab_dtype_size(st));
        for (size_t i = 0; i < m; i++) ab_store(s1, i, st, (float)(i % 7) - 3.0f), d[i] = 1.0f;
        int32_t f1 = 1, f0 = 0;
        AB_CHECK(be->ops->accumulate(be, m, st, s1, d, acc, &f1) == 0 && f1 == 1, "accumulate: found_inf 1 cleared");
        AB_CHECK(be->ops->accumulate(be, m, st, s1, d, acc, &f0) == 0 && f0 == 0, "accumulate: clean, found_inf %d", f0);
        ab_store(s1, m - 5, st, -INFINITY);
        AB_CHECK(be->ops->accumulate(be, m, st, s1, d, acc, &f0) == 0 && f0 == 1,
                 "accumulate: -inf in the last part, found_inf %d", f0);
        free(d), free(s1);
    }
    tally t = {0};
    for (size_t i = 0; i < n; i++) {
        const double s = ref_decode(src, i, st), want = acc ? ref_round((double)d0[i] + s, AB_F32) : s;
        if (!same_value(dst[i], want))
            tally_bad(&t, "accumulate %s: element %zu: %.9g + %.9g gave %.9g, expected %.9g", ab_dtype_name(st), i,
                      acc ? (double)d0[i] : 0.0, s, (double)dst[i], want);
    }
    tally_end(&t, "accumulate");
    free(src);
    free(dst);
    free(d0);
}

/* ---- ReLU ---- */

/* the edges of t as bit patterns: NaN of either sign and a signalling one, +-0, +-inf, the
 * smallest and largest subnormals of both signs, the largest finite of both signs, +-1 */
enum { RELU_EDGES = 15 };
static const void *relu_edges(ab_dtype t) {
    static const uint32_t f32_bits[RELU_EDGES] = {0x7fc00000u, 0xffc00000u, 0x7f800001u, 0x00000000u, 0x80000000u,
                                                  0x7f800000u, 0xff800000u, 0x00000001u, 0x80000001u, 0x007fffffu,
                                                  0x807fffffu, 0x7f7fffffu, 0xff7fffffu, 0x3f800000u, 0xbf800000u};
    static const uint16_t f16_bits[RELU_EDGES] = {0x7e00, 0xfe00, 0x7c01, 0x0000, 0x8000, 0x7c00, 0xfc00, 0x0001,
                                                  0x8001, 0x03ff, 0x83ff, 0x7bff, 0xfbff, 0x3c00, 0xbc00};
    static const uint16_t bf16_bits[RELU_EDGES] = {0x7fc0, 0xffc0, 0x7f81, 0x0000, 0x8000, 0x7f80, 0xff80, 0x0001,
                                                   0x8001, 0x007f, 0x807f, 0x7f7f, 0xff7f, 0x3f80, 0xbf80};
    return t == AB_F32 ? (const void *)f32_bits : t == AB_F16 ? (const void *)f16_bits : (const void *)bf16_bits;
}

/* n values of t: the edges first (as far as n goes), then N(0, 1) */
static void *relu_values(ab_dtype t, size_t n) {
    const size_t es = ab_dtype_size(t);
    void *p = xmalloc(n * es);
    for (size_t i = 0; i < n; i++) {
        if (i < RELU_EDGES)
            memcpy((char *)p + i * es, (const char *)relu_edges(t) + i * es, es);
        else
            ab_store(p, i, t, (float)ab_rng_normal(&rng));
    }
    return p;
}

/* y = max(x, 0): positive values (subnormals, inf) keep their bits, negative ones and -0 become +0,
 * NaN stays NaN */
static void relu_forward_case(ab_backend *be, ab_dtype t, size_t n) {
    void *x = relu_values(t, n), *y = xmalloc(n * ab_dtype_size(t));
    op_case(AB_OP_relu_forward, "%s n=%zu: NaN of both signs, +-0, +-inf, subnormals, the largest", ab_dtype_name(t),
            n);
    AB_CHECK(be->ops->relu_forward(be, n, t, x, y) == 0, "relu_forward: %s", ab_error());
    tally tl = {0};
    for (size_t i = 0; i < n; i++) {
        const double v = ref_decode(x, i, t), want = isnan(v) ? v : v > 0.0 ? v : 0.0, got = ref_decode(y, i, t);
        if (!same_value(got, want))
            tally_bad(&tl, "relu_forward %s: element %zu (%#x) gave %#x, expected %.9g", ab_dtype_name(t), i,
                      bits_of(x, i, t), bits_of(y, i, t), want);
    }
    tally_end(&tl, "relu_forward");
    free(x);
    free(y);
}

/* dx = dy where y > 0, else +0 (NaN, +-0 and negative y; the select of PyTorch's
 * threshold_backward, so a NaN or inf dy does not leak through a closed unit), dy's bits passing
 * through where open (NaN, -0, inf); in place over dy when asked. The first 15 x 15 elements pair
 * every edge of y with every edge of dy. */
static void relu_backward_case(ab_backend *be, ab_dtype t, size_t n, int in_place) {
    const size_t es = ab_dtype_size(t);
    void *y = relu_values(t, n), *dy = relu_values(t, n), *dx = in_place ? dy : xmalloc(n * es);
    for (size_t i = 0; i < n && i < RELU_EDGES * RELU_EDGES; i++) {
        memcpy((char *)y + i * es, (const char *)relu_edges(t) + (i / RELU_EDGES) * es, es);
        memcpy((char *)dy + i * es, (const char *)relu_edges(t) + (i % RELU_EDGES) * es, es);
    }
    void *dy0 = xmalloc(n * es);
    memcpy(dy0, dy, n * es);
    op_case(AB_OP_relu_backward, "%s n=%zu%s: every pair of y and dy edges (NaN, +-0, +-inf, subnormals)",
            ab_dtype_name(t), n, in_place ? " in place (dx = dy)" : "");
    AB_CHECK(be->ops->relu_backward(be, n, t, y, dy, dx) == 0, "relu_backward: %s", ab_error());
    tally tl = {0};
    for (size_t i = 0; i < n; i++) {
        const double want = ref_decode(y, i, t) > 0.0 ? ref_decode(dy0, i, t) : 0.0, got = ref_decode(dx, i, t);
        if (!same_value(got, want))
            tally_bad(&tl, "relu_backward %s: element %zu: y %#x dy %#x gave %#x, expected %.9g", ab_dtype_name(t), i,
                      bits_of(y, i, t), bits_of(dy0, i, t), bits_of(dx, i, t), want);
    }
    tally_end(&tl, "relu_backward");
    free(y);
    free(dy);
    free(dy0);
    if (!in_place) free(dx);
}

static void test_elementwise(ab_backend *be) {
    for (int ti = 0; ti < 3; ti++)
        for (int acc = 0; acc < 2; acc++) accumulate_case(be, all_types[ti], acc);
    /* 70001 elements: more than two parts of the pool's minimum (32768), so split over threads */
    for (int ti = 0; ti < 3; ti++) relu_forward_case(be, all_types[ti], 70001);
    relu_forward_case(be, AB_F16, 1);
    for (int ti = 0; ti < 3; ti++) relu_backward_case(be, all_types[ti], 70001, 0);
    for (int ti = 0; ti < 3; ti++) relu_backward_case(be, all_types[ti], 999, 1);
}

/* ---- col_sum ---- */

/* col_sum: out[j] = beta out[j] + sum_i X[i, j], accumulated in fp32 (one rounding per add) and
 * rounded once to ot. The bound: a recursive fp32 sum of M terms is within (M - 1) 2^-24 of the
 * sum of |x| of the exact sum, plus the final rounding to ot (half an ulp of ot). */
static void test_col_sum(ab_backend *be) {
    static const ab_dtype types[] = {AB_F32, AB_F16, AB_BF16};
    static const int shapes[][2] = {{1, 1}, {64, 300}, {1000, 33}, {7, 1}, {300, 400}}; /* the last over parts */
    ab_rng r;
    ab_rng_seed(&r, 5);
    for (int ti = 0; ti < 3; ti++)
        for (size_t si = 0; si < sizeof shapes / sizeof shapes[0]; si++)
            for (int beta = 0; beta < 2; beta++) {
                const ab_dtype t = types[ti];
                const int M = shapes[si][0], N = shapes[si][1];
                const size_t es = ab_dtype_size(t);
                void *X = malloc((size_t)M * N * es), *out = malloc((size_t)N * es);
                double *ref = calloc((size_t)N, sizeof *ref), *mag = calloc((size_t)N, sizeof *mag);
                for (int j = 0; j < N; j++) {
                    ab_store(out, (size_t)j, t, ab_rng_uniform_range(&r, -1.0f, 1.0f));
                    const double o = ab_load(out, (size_t)j, t);
                    ref[j] = beta ? o : 0.0;
                    mag[j] = beta ? fabs(o) : 0.0;
                }
                for (int i = 0; i < M; i++)
                    for (int j = 0; j < N; j++) {
                        ab_store(X, (size_t)i * N + j, t, ab_rng_uniform_range(&r, -1.0f, 1.0f));
                        const double x = ab_load(X, (size_t)i * N + j, t);
                        ref[j] += x;
                        mag[j] += fabs(x);
                    }
                op_case(AB_OP_col_sum, "%s %dx%d beta %d", ab_dtype_name(t), M, N, beta);
                AB_CHECK(be->ops->col_sum(be, M, N, t, X, (float)beta, t, out) == 0, "col_sum: %s", ab_error());
                const double ulp = t == AB_F32 ? 0x1p-24 : t == AB_F16 ? 0x1p-11 : 0x1p-8;
                int bad = 0;
                for (int j = 0; j < N && !bad; j++) {
                    const double got = ab_load(out, (size_t)j, t);
                    const double bound = (M + 1) * 0x1p-24 * mag[j] + ulp * fabs(ref[j]) + 1e-30;
                    if (!(fabs(got - ref[j]) <= bound)) {
                        fprintf(stderr, "FAIL col_sum %s %dx%d beta %d: column %d = %.9g, expected %.9g (bound %.3g)\n",
                                ab_dtype_name(t), M, N, beta, j, got, ref[j], bound);
                        bad = 1;
                    }
                }
                failures += bad;
                free(X);
                free(out);
                free(ref);
                free(mag);
            }
    /* beta 0 ignores what out held, NaN included; a NaN in a column makes that column NaN only */
    float X[6] = {1, 2, NAN, 4, 5, 6}, out[3] = {NAN, NAN, NAN};
    op_case(AB_OP_col_sum, "fp32 2x3 beta 0: out NaN before (not read), a NaN in column 2");
    AB_CHECK(be->ops->col_sum(be, 2, 3, AB_F32, X, 0.0f, AB_F32, out) == 0, "col_sum: %s", ab_error());
    AB_CHECK(out[0] == 5.0f && out[1] == 7.0f && isnan(out[2]), "col_sum NaN: %g %g %g", out[0], out[1], out[2]);
    /* mixed types: fp16 in, fp32 out */
    uint16_t h[4] = {ab_f32_to_f16(1.5f), ab_f32_to_f16(-0.25f), ab_f32_to_f16(2.0f), ab_f32_to_f16(65504.0f)};
    float o2[2] = {10.0f, 20.0f};
    op_case(AB_OP_col_sum, "fp16 -> fp32 2x2 beta 1: 65504 summed past fp16's range");
    AB_CHECK(be->ops->col_sum(be, 2, 2, AB_F16, h, 1.0f, AB_F32, o2) == 0, "col_sum: %s", ab_error());
    AB_CHECK(o2[0] == 13.5f && o2[1] == 65503.75f + 20.0f, "col_sum fp16 -> fp32 with beta 1: %.9g %.9g", o2[0], o2[1]);
}

/* ---- sum_squares, scale, unscale_check ---- */

/* sum_squares adds into *out */
static void test_sum_squares(ab_backend *be) {
    static const size_t ns[] = {1, 2, 3, 1000, 100003};
    ab_rng r;
    ab_rng_seed(&r, 9);
    for (size_t k = 0; k < sizeof ns / sizeof ns[0]; k++) {
        const size_t n = ns[k];
        float *x = malloc(n * sizeof *x);
        double ref = 2.5;
        for (size_t i = 0; i < n; i++) {
            x[i] = (float)ab_rng_normal(&r) * 3.0f;
            ref += (double)x[i] * x[i];
        }
        float out = 2.5f;
        op_case(AB_OP_sum_squares, "fp32 n=%zu, added to 2.5", n);
        AB_CHECK(be->ops->sum_squares(be, n, x, &out) == 0, "sum_squares: %s", ab_error());
        /* positive terms in fp32 runs of at most 1,024 (then double): within 1024 x 2^-24 = 6.1e-5 of the
         * sum, rounded once to fp32 */
        AB_CHECK(rel_err(out, ref) < 1e-4, "sum_squares n=%zu: %.9g, expected %.9g", n, (double)out, ref);
        free(x);
    }
    float big[2] = {1e20f, 1e20f}, out = 0.0f; /* 2e40 is past fp32: the norm is infinite, not NaN */
    op_case(AB_OP_sum_squares, "fp32 n=2 past fp32's range");
    AB_CHECK(be->ops->sum_squares(be, 2, big, &out) == 0, "sum_squares: %s", ab_error());
    AB_CHECK(isinf(out) && out > 0, "sum_squares past fp32's range: %g", (double)out);
    float withnan[3] = {1.0f, NAN, 2.0f}, o3 = 1.0f; /* a NaN gradient makes the norm NaN */
    op_case(AB_OP_sum_squares, "fp32 n=3 a NaN");
    AB_CHECK(be->ops->sum_squares(be, 3, withnan, &o3) == 0, "sum_squares: %s", ab_error());
    AB_CHECK(isnan(o3), "sum_squares with a NaN: %g", (double)o3);
    float sub[3] = {0x1p-140f, 0x1p-149f, 0x1p-70f}, o4 = 0.0f; /* squares of subnormals underflow to 0 */
    op_case(AB_OP_sum_squares, "fp32 n=3 subnormals and 2^-70");
    AB_CHECK(be->ops->sum_squares(be, 3, sub, &o4) == 0, "sum_squares: %s", ab_error());
    AB_CHECK(o4 == 0x1p-140f, "sum_squares of 2^-140, 2^-149, 2^-70: %.9g, expected 2^-140", (double)o4);
}

/* x *= s: each element one fp32 product, rounded once (the product of two floats is exact in double) */
static void scale_case(ab_backend *be, float s, size_t n) {
    static const float edges[] = {0.0f,   -0.0f, NAN,      INFINITY, -INFINITY, 0x1p-149f, -0x1p-149f,   1e-40f,
                                  1e-36f, 3e38f, -FLT_MAX, 65504.0f, 1.0f,      -1.0f,     0x1.000002p0f};
    const size_t E = sizeof edges / sizeof edges[0];
    float *x = xmalloc(n * sizeof *x), *x0 = xmalloc(n * sizeof *x0);
    for (size_t i = 0; i < n; i++) x[i] = x0[i] = i < E ? edges[i] : (float)ab_rng_normal(&rng) * 10.0f;
    op_case(AB_OP_scale, "fp32 n=%zu s=%g: +-0, NaN, +-inf, subnormals, overflow", n, (double)s);
    AB_CHECK(be->ops->scale(be, n, x, s) == 0, "scale: %s", ab_error());
    tally t = {0};
    for (size_t i = 0; i < n; i++) {
        const double want = ref_round((double)x0[i] * s, AB_F32);
        if (!same_value(x[i], want))
            tally_bad(&t, "scale: element %zu: %.9g x %g gave %.9g, expected %.9g", i, (double)x0[i], (double)s,
                      (double)x[i], want);
    }
    tally_end(&t, "scale");
    free(x);
    free(x0);
}

/* unscale_check: g *= inv_scale; found_inf set by any inf or NaN after the multiply, never reset */
static void test_unscale(ab_backend *be) {
    float g[5] = {65536.0f, -1024.0f, 3.0f, 0.0f, -0.0f};
    int32_t found = 0;
    op_case(AB_OP_unscale_check, "fp32 n=5 finite, inv_scale 1/1024, -0");
    AB_CHECK(be->ops->unscale_check(be, 5, g, 1.0f / 1024.0f, &found, NULL) == 0, "unscale_check: %s", ab_error());
    AB_CHECK(g[0] == 64.0f && g[1] == -1.0f && g[2] == 3.0f / 1024.0f && g[3] == 0.0f && signbit(g[4]) && !found,
             "unscale_check finite: %g %g %g %g %g, found %d", g[0], g[1], g[2], g[3], g[4], found);
    float h[3] = {1.0f, INFINITY, 2.0f};
    op_case(AB_OP_unscale_check, "fp32 n=3 an inf");
    AB_CHECK(be->ops->unscale_check(be, 3, h, 0.5f, &found, NULL) == 0 && found == 1, "unscale_check inf: found %d", found);
    AB_CHECK(h[0] == 0.5f && h[2] == 1.0f, "unscale_check scales the finite values beside an inf: %g %g", h[0], h[2]);
    float k[2] = {1.0f, 2.0f};
    op_case(AB_OP_unscale_check, "fp32 n=2 finite after an inf: found_inf not reset");
    AB_CHECK(be->ops->unscale_check(be, 2, k, 1.0f, &found, NULL) == 0 && found == 1, "found_inf was reset to %d", found);
    float m[3] = {NAN, 1.0f, 1.0f};
    int32_t f2 = 0;
    op_case(AB_OP_unscale_check, "fp32 n=3 a NaN");
    AB_CHECK(be->ops->unscale_check(be, 3, m, 1.0f, &f2, NULL) == 0 && f2 == 1, "unscale_check NaN: found %d", f2);
    float o[2] = {3e38f, 1.0f}; /* finite before, inf after the multiply */
    int32_t f3 = 0;
    op_case(AB_OP_unscale_check, "fp32 n=2 overflow by the multiply");
    AB_CHECK(be->ops->unscale_check(be, 2, o, 4.0f, &f3, NULL) == 0 && f3 == 1 && isinf(o[0]),
             "unscale_check overflow by the multiply: found %d, %g", f3, o[0]);
    /* many finite values, a scale that is not a power of two, results down among the subnormals:
     * each element one rounded product, found_inf left at 0 */
    const size_t n = 1001;
    const float s = 1.0f / 3.0f;
    float *x = xmalloc(n * sizeof *x), *x0 = xmalloc(n * sizeof *x0);
    for (size_t i = 0; i < n; i++)
        x[i] = x0[i] = i % 7 == 0 ? (float)ab_rng_normal(&rng) * 1e-38f : (float)ab_rng_normal(&rng) * 1e4f;
    x[1] = x0[1] = -0.0f;
    int32_t f4 = 0;
    op_case(AB_OP_unscale_check, "fp32 n=%zu inv_scale 1/3, subnormal results, -0", n);
    AB_CHECK(be->ops->unscale_check(be, n, x, s, &f4, NULL) == 0 && f4 == 0, "unscale_check finite: found %d", f4);
    tally t = {0};
    for (size_t i = 0; i < n; i++) {
        const double want = ref_round((double)x0[i] * s, AB_F32);
        if (!same_value(x[i], want))
            tally_bad(&t, "unscale_check: element %zu: %.9g x 1/3 gave %.9g, expected %.9g", i, (double)x0[i],
                      (double)x[i], want);
    }
    tally_end(&t, "unscale_check");
    /* at inv_scale 1, the check alone (the trainer's, when the optimizer unscales): over 2^17
     * elements (both threads' parts), every value as it was, a clean pass leaving found_inf at 0 and
     * an inf in the second part setting it */
    const size_t nb = (size_t)1 << 17;
    float *y = xmalloc(nb * sizeof *y), *y0 = xmalloc(nb * sizeof *y0);
    for (size_t i = 0; i < nb; i++) y[i] = y0[i] = (float)ab_rng_normal(&rng) * 1e3f;
    int32_t f5 = 0;
    op_case(AB_OP_unscale_check, "fp32 n=%zu inv_scale 1 (the check alone), all finite", nb);
    AB_CHECK(be->ops->unscale_check(be, nb, y, 1.0f, &f5, NULL) == 0 && f5 == 0 && memcmp(y, y0, nb * sizeof *y) == 0,
             "unscale_check at 1: found %d, values %s", f5, memcmp(y, y0, nb * sizeof *y) ? "changed" : "kept");
    y[nb - 100] = -INFINITY;
    op_case(AB_OP_unscale_check, "fp32 n=%zu inv_scale 1 (the check alone), a -inf in the last part", nb);
    AB_CHECK(be->ops->unscale_check(be, nb, y, 1.0f, &f5, NULL) == 0 && f5 == 1, "unscale_check at 1: a -inf, found %d", f5);
    free(y);
    free(y0);
    free(x);
    free(x0);

    /* with sum_sq, clipping's squares in the same pass: g and found_inf as without, the sum the
     * bits of sum_squares over the results (added to what sum_sq held); several blocks of 1,024,
     * a short last one, the pool's parts; a +inf, a NaN, an overflow by the multiply */
    static const size_t sizes[] = {1, 1000, 1024, 1025, 40003, (1u << 17) + 3};
    static const float invs[] = {0x1p-16f, 1.0f, 3.0f};
    for (size_t si = 0; si < sizeof sizes / sizeof sizes[0]; si++)
        for (int ii = 0; ii < 3; ii++)
            for (int plant = 0; plant < 3; plant++) {
                const size_t nn = sizes[si];
                float *a = xmalloc(nn * sizeof *a), *b = xmalloc(nn * sizeof *b);
                for (size_t i = 0; i < nn; i++) a[i] = b[i] = (float)ab_rng_normal(&rng) * (ii == 2 ? 1e38f : 3e4f);
                if (plant) a[nn / 2] = b[nn / 2] = plant == 1 ? INFINITY : NAN;
                int32_t fa = 0, fb = 0;
                float sa = 2.5f, sb = 2.5f;
                op_case(AB_OP_unscale_check, "fp32 n=%zu inv_scale %g%s, the squares in the pass", nn, (double)invs[ii],
                        plant == 1 ? ", a +inf" : plant == 2 ? ", a NaN" : "");
                AB_CHECK(be->ops->unscale_check(be, nn, a, invs[ii], &fa, &sa) == 0 &&
                             be->ops->unscale_check(be, nn, b, invs[ii], &fb, NULL) == 0 &&
                             be->ops->sum_squares(be, nn, b, &sb) == 0,
                         "unscale_check with the squares: %s", ab_error());
                int bad = 0;
                for (size_t i = 0; i < nn; i++) bad |= !isfinite(b[i]);
                AB_CHECK(memcmp(a, b, nn * sizeof *a) == 0 && fa == fb && fa == bad && (ii < 2 || plant || bad || nn < 1000) &&
                             (memcmp(&sa, &sb, sizeof sa) == 0 || (isnan(sa) && isnan(sb))),
                         "unscale_check n=%zu inv %g with the squares: values %s, found %d (without: %d), sum %.9g "
                         "(sum_squares after: %.9g)",
                         nn, (double)invs[ii], memcmp(a, b, nn * sizeof *a) ? "differ" : "alike", fa, fb, (double)sa,
                         (double)sb);
                free(a);
                free(b);
            }
}

/* ---- softmax cross-entropy ---- */

enum { XENT_SEPARATE = 0, XENT_IN_PLACE = 1, XENT_NO_GRAD = 2 };

/* Softmax cross-entropy of B rows of C logits (lvals, stored in lt) against a float64 reference:
 * loss_sum (starting at 1.5) gains the sum of the rows' losses, correct (starting at 3) the rows
 * whose first largest logit is the label's, dlogits = grad_scale (p - onehot) / B in dt; a label
 * outside [0, C) makes the loss and its gradient row NaN. The bound follows the fp32 arithmetic of
 * a row: each exp(x - max) within 2^-24 |x - max| (the subtraction) and an ulp of expf, their sum
 * within (C - 1) 2^-24, so the log-sum-exp lse within E = 2^-24 (2C + 4 + 2 log C + |lse|) (logf's
 * ulp and the rounding of max + log); the loss another 2^-24 of itself; p = exp(x - lse) within
 * p (E + 2^-24 |x - lse| + 2 ulp); dlogits three more fp32 roundings and one to dt. */
static void xent_case(ab_backend *be, const char *values, int B, int C, ab_dtype lt, const float *lvals,
                      const int32_t *labels, float grad_scale, ab_dtype dt, int mode, int with_correct) {
    const size_t n = (size_t)B * C, le = ab_dtype_size(lt);
    void *logits = xmalloc(n * le);
    for (size_t i = 0; i < n; i++) ab_store(logits, i, lt, lvals[i]);
    double *x = xmalloc(n * sizeof *x);
    for (size_t i = 0; i < n; i++) x[i] = ref_decode(logits, i, lt);
    void *dl = mode == XENT_IN_PLACE ? logits : mode == XENT_SEPARATE ? xmalloc(n * ab_dtype_size(dt)) : NULL;
    if (mode == XENT_SEPARATE) memset(dl, 0x5a, n * ab_dtype_size(dt));
    float loss = 1.5f;
    int32_t correct = 3;
    op_case(AB_OP_softmax_xent, "%s -> %s B%d C%d grad_scale %g%s%s: %s", ab_dtype_name(lt),
            mode == XENT_NO_GRAD ? "no dlogits" : ab_dtype_name(dt), B, C, (double)grad_scale,
            mode == XENT_IN_PLACE ? " in place" : "", with_correct ? "" : " no count", values);
    AB_CHECK(be->ops->softmax_xent(be, B, C, lt, logits, labels, grad_scale, dt, dl, &loss,
                                   with_correct ? &correct : NULL) == 0,
             "softmax_xent: %s", ab_error());

    const double u = 0x1p-24, margin = AB_TOL_ROUNDING_BOUND_MARGIN, gsd = (double)grad_scale / B;
    double total = 0.0, bound = 0.0;
    int hits = 0;
    tally t = {0};
    for (int i = 0; i < B; i++) {
        const double *r = x + (size_t)i * C;
        const int y = labels[i];
        if (y < 0 || y >= C) {
            total += NAN;
            for (int j = 0; dl && j < C; j++)
                check_elem(&t, "dlogits (label out of range)", (size_t)i * C + j, ref_decode(dl, (size_t)i * C + j, dt),
                           NAN, 0.0);
            continue;
        }
        int am = 0;
        for (int j = 1; j < C; j++) am = r[j] > r[am] ? j : am; /* the first largest */
        double sum = 0.0;
        for (int j = 0; j < C; j++) sum += exp(r[j] - r[am]);
        const double lse = r[am] + log(sum), l = lse - r[y];
        const double E = u * (2.0 * C + 4.0 + 2.0 * log((double)C) + fabs(lse));
        total += l;
        bound += E + u * fabs(l);
        hits += am == y;
        for (int j = 0; dl && j < C; j++) {
            const double p = exp(r[j] - lse), want = gsd * (p - (j == y ? 1.0 : 0.0));
            const double dp = p * (E + u * fabs(r[j] - lse) + 2.0 * u) + 0x1p-126;
            const double e = fabs(gsd) * dp + 3.0 * u * fabs(want);
            check_elem(&t, "dlogits", (size_t)i * C + j, ref_decode(dl, (size_t)i * C + j, dt), want,
                       margin * (e + unit_roundoff(dt) * (fabs(want) + e)) + half_tiny(dt));
        }
    }
    tally_end(&t, "softmax_xent dlogits");
    const double want = 1.5 + total;
    bound += u * (fabs(total) + fabs(want));
    AB_CHECK(within(loss, want, margin * bound), "softmax_xent loss_sum %.9g, expected %.9g (bound %.3g)", (double)loss,
             want, margin * bound);
    if (with_correct) AB_CHECK(correct == 3 + hits, "softmax_xent correct %d, expected %d", correct, 3 + hits);
    free(logits);
    free(x);
    if (mode == XENT_SEPARATE) free(dl);
}

/* B rows of C logits N(0, sd^2) and random labels in a case */
static void xent_random(ab_backend *be, int B, int C, ab_dtype lt, float sd, float gs, ab_dtype dt, int mode) {
    float *v = xmalloc((size_t)B * C * sizeof *v);
    int32_t *lab = xmalloc((size_t)B * sizeof *lab);
    for (size_t i = 0; i < (size_t)B * C; i++) v[i] = (float)ab_rng_normal(&rng) * sd;
    for (int i = 0; i < B; i++) lab[i] = (int32_t)ab_rng_below(&rng, (uint64_t)C);
    xent_case(be, "random logits", B, C, lt, v, lab, gs, dt, mode, 1);
    free(v);
    free(lab);
}

static void test_softmax_xent(ab_backend *be) {
    xent_random(be, 7, 10, AB_F32, 3.0f, 1.0f, AB_F32, XENT_SEPARATE);
    xent_random(be, 33, 1000, AB_F32, 3.0f, 1024.0f, AB_F32, XENT_SEPARATE);
    xent_random(be, 5, 11, AB_F16, 3.0f, 65536.0f, AB_F16, XENT_SEPARATE);
    xent_random(be, 9, 3, AB_BF16, 3.0f, 1.0f, AB_BF16, XENT_SEPARATE);
    xent_random(be, 6, 17, AB_F16, 3.0f, 8.0f, AB_F32, XENT_SEPARATE);
    xent_random(be, 4, 9, AB_F32, 3.0f, 1.0f, AB_F16, XENT_SEPARATE);
    xent_random(be, 4, 9, AB_F32, 3.0f, 1.0f, AB_BF16, XENT_SEPARATE);
    xent_random(be, 5, 7, AB_F32, 3.0f, 2.0f, AB_F32, XENT_IN_PLACE);
    xent_random(be, 5, 7, AB_F16, 3.0f, 128.0f, AB_F16, XENT_IN_PLACE);
    xent_random(be, 5, 7, AB_BF16, 3.0f, 1.0f, AB_BF16, XENT_IN_PLACE);
    xent_random(be, 3, 5, AB_F32, 3.0f, 1.0f, AB_F32, XENT_NO_GRAD);
    xent_random(be, 3, 1, AB_F32, 3.0f, 1.0f, AB_F32, XENT_SEPARATE); /* one class: loss 0, gradient 0 */
    /* 16-bit rows converted a chunk of rows at a time (2,048 values): several chunks and a short
     * last one, in place too; rows longer than a chunk, one by one */
    xent_random(be, 300, 10, AB_F16, 3.0f, 65536.0f, AB_F16, XENT_SEPARATE);
    xent_random(be, 211, 10, AB_BF16, 3.0f, 1.0f, AB_BF16, XENT_IN_PLACE);
    xent_random(be, 130, 17, AB_F16, 3.0f, 8.0f, AB_F32, XENT_SEPARATE);
    xent_random(be, 3, 2049, AB_F16, 3.0f, 1.0f, AB_F16, XENT_SEPARATE);
    xent_random(be, 3, 2049, AB_F16, 3.0f, 1.0f, AB_F16, XENT_IN_PLACE);
    xent_random(be, 5, 1000, AB_F16, 3.0f, 1024.0f, AB_F16, XENT_SEPARATE); /* 2 rows a chunk */
    xent_random(be, 300, 10, AB_F32, 3.0f, 1.0f, AB_F16, XENT_SEPARATE);
    xent_random(be, 300, 10, AB_F16, 3.0f, 1.0f, AB_F16, XENT_NO_GRAD);
    /* a shape with no rows or no classes refused, as the CUDA backend refuses it */
    {
        uint16_t l16[4] = {0};
        int32_t lab0[2] = {0, 0};
        float loss = 0.0f;
        op_case(AB_OP_softmax_xent, "fp16 B2 C0 and fp32 B0 C3: refused");
        AB_CHECK(be->ops->softmax_xent(be, 2, 0, AB_F16, l16, lab0, 1.0f, AB_F16, l16, &loss, NULL) != 0 &&
                     be->ops->softmax_xent(be, 0, 3, AB_F32, l16, lab0, 1.0f, AB_F32, NULL, &loss, NULL) != 0 &&
                     loss == 0.0f,
                 "softmax_xent with no classes or no rows was not refused (loss %g)", (double)loss);
    }

    /* fp16 logits near its largest: the row's maximum is subtracted before exp */
    static const float big[4 * 6] = {60000.0f,  59968.0f,  -60000.0f, 0.0f,      1.0f,      2.0f,
                                     -65504.0f, 65504.0f,  60000.0f,  -60000.0f, 0.0f,      3.0f,
                                     60000.0f,  60000.0f,  0.0f,      -1.0f,     -65504.0f, 65504.0f,
                                     -60000.0f, -59968.0f, -60000.0f, -65504.0f, -60000.0f, -59999.0f};
    static const int32_t big_lab[4] = {1, 1, 5, 0};
    xent_case(be, "logits to +-65504", 4, 6, AB_F16, big, big_lab, 1.0f, AB_F16, XENT_SEPARATE, 1);
    xent_case(be, "logits to +-65504", 4, 6, AB_F16, big, big_lab, 1.0f, AB_F16, XENT_IN_PLACE, 1);
    /* ties: the first largest logit is the prediction */
    static const float ties[3 * 4] = {2.0f, 5.0f, 5.0f, 1.0f, 2.0f, 5.0f, 5.0f, 1.0f, 0.5f, 0.5f, 0.5f, 0.5f};
    static const int32_t ties_lab[3] = {2, 1, 0};
    xent_case(be, "ties (first largest counts)", 3, 4, AB_F32, ties, ties_lab, 1.0f, AB_F32, XENT_SEPARATE, 1);
    /* labels out of range: those rows' loss and gradient NaN, the others as usual */
    static const float lv[4 * 5] = {0.1f,  0.2f, 3.0f, -1.0f, 0.0f, 1.0f, 2.0f,  3.0f, 4.0f,  5.0f,
                                    -1.0f, 0.0f, 1.0f, 0.5f,  0.5f, 9.0f, -9.0f, 0.0f, 0.25f, 1.0f};
    static const int32_t bad_lab[4] = {2, 5, -1, 0};
    xent_case(be, "labels 5 and -1 out of range", 4, 5, AB_F32, lv, bad_lab, 1.0f, AB_F32, XENT_SEPARATE, 1);
    { /* in fp16, in the first and the second chunk of rows (204 rows of 10 a chunk) */
        enum { BB = 230, CC = 10 };
        float *v = xmalloc((size_t)BB * CC * sizeof *v);
        int32_t lab[BB];
        for (size_t i = 0; i < (size_t)BB * CC; i++) v[i] = (float)ab_rng_normal(&rng) * 3.0f;
        for (int i = 0; i < BB; i++) lab[i] = (int32_t)ab_rng_below(&rng, CC);
        lab[5] = CC, lab[220] = -1;
        xent_case(be, "labels 10 and -1 out of range", BB, CC, AB_F16, v, lab, 1024.0f, AB_F16, XENT_SEPARATE, 1);
        xent_case(be, "labels 10 and -1 out of range", BB, CC, AB_F16, v, lab, 1024.0f, AB_F16, XENT_IN_PLACE, 1);
        free(v);
    }
    xent_case(be, "labels 5 and -1 out of range", 4, 5, AB_F16, lv, bad_lab, 4.0f, AB_F16, XENT_IN_PLACE, 1);
    /* a NaN logit makes its row's loss and gradient NaN (its label on the smallest logit, so no
     * prediction rule counts the row) */
    static const float nv[3 * 5] = {0.1f,  0.2f, 3.0f,  -1.0f, 0.0f, 1.0f, NAN, 3.0f,
                                    -4.0f, 5.0f, -1.0f, 0.0f,  1.0f, 0.5f, 0.5f};
    static const int32_t nan_lab[3] = {2, 3, 2};
    xent_case(be, "a NaN logit", 3, 5, AB_F32, nv, nan_lab, 1.0f, AB_F32, XENT_SEPARATE, 1);
}

/* ---- optimizers ---- */

/* one fp32 rounding of a result of magnitude |x|: relative 2^-24, or absolute among the subnormals */
static double rnd(double x) { return 0x1p-24 * fabs(x) + 0x1p-150; }

/* After an optimizer step: the op left g as it was (g0, its copy from before the call), and the
 * reference then takes g * grad_scale rounded once (scale's product) in its place */
/* After an optimizer step with a working copy wc of type ct (AB_F32: none): each element the op's
 * own new weight rounded to ct (NaN for NaN), and the element past the end (a sentinel) untouched */
static void copy_taken(const char *op, ab_dtype ct, const uint16_t *wc, const float *w, size_t n) {
    if (ct == AB_F32) return;
    tally t = {0};
    for (size_t i = 0; i < n; i++) {
        const double got = ab_load(wc, i, ct), want = ab_round_to(w[i], ct);
        if (!same_value(got, want))
            tally_bad(&t, "%s: the %s copy's element %zu is %.9g, the new weight %.9g rounds to %.9g", op,
                      ab_dtype_name(ct), i, got, (double)w[i], want);
    }
    if (wc[n] != 0x7e01) tally_bad(&t, "%s: the element past the working copy's end was written", op);
    tally_end(&t, op);
}

static void grad_taken(const char *op, float *g, const float *g0, size_t n, float gs) {
    AB_CHECK(memcmp(g, g0, n * sizeof *g) == 0, "%s changed its gradients", op);
    for (size_t i = 0; i < n; i++) g[i] = g[i] * gs;
}

/* SGD (PyTorch): g' = g + wd w; buf = momentum buf + g' (buf = g' on the first step, buf not read);
 * w -= lr buf. n elements over `steps` calls, against float64 with a running bound of the fp32
 * roundings of each step. Elements 1 and 2 get a NaN and an inf gradient on the first step; element
 * 3 a zero gradient throughout. */
static void sgd_run(ab_backend *be, size_t n, float lr, float momentum, float wd, int steps, float gs, ab_dtype ct) {
    float *w = xmalloc(n * sizeof *w), *g = xmalloc(n * sizeof *g),
          *buf = momentum != 0.0f ? xmalloc(n * sizeof *buf) : NULL;
    uint16_t *wc = ct == AB_F32 ? NULL : xmalloc((n + 1) * sizeof *wc);
    if (wc) wc[n] = 0x7e01;
    double *rw = xmalloc(n * sizeof *rw), *rb = xmalloc(n * sizeof *rb), *ew = xmalloc(n * sizeof *ew),
           *eb = xmalloc(n * sizeof *eb);
    for (size_t i = 0; i < n; i++) {
        w[i] = (float)ab_rng_normal(&rng) * 0.5f;
        rw[i] = w[i], rb[i] = 0.0, ew[i] = eb[i] = 0.0;
        if (buf) buf[i] = NAN;
    }
    const double D = wd, Mo = momentum, L = lr, margin = AB_TOL_ROUNDING_BOUND_MARGIN;
    for (int s = 0; s < steps; s++) {
        for (size_t i = 0; i < n; i++) g[i] = i == 3 ? 0.0f : (float)ab_rng_normal(&rng) * 0.1f;
        if (s == 0 && n > 3) g[1] = NAN, g[2] = INFINITY;
        op_case(AB_OP_sgd_step, "fp32 n=%zu lr %g momentum %g weight_decay %g grad_scale %g, step %d%s%s%s", n,
                (double)lr, (double)momentum, (double)wd, (double)gs, s + 1,
                s == 0 && buf ? " (first: buf NaN, not read)" : "", wc ? ", a working copy in " : "",
                wc ? ab_dtype_name(ct) : "");
        float *g0 = xmalloc(n * sizeof *g0);
        memcpy(g0, g, n * sizeof *g0);
        AB_CHECK(be->ops->sgd_step(be, n, w, g, buf, lr, momentum, wd, s == 0, gs, ct, wc) == 0, "sgd_step: %s",
                 ab_error());
        grad_taken("sgd_step", g, g0, n, gs);
        copy_taken("sgd_step", ct, wc, w, n);
        free(g0);
        tally t = {0};
        for (size_t i = 0; i < n; i++) {
            const double gp = g[i] + D * rw[i], egp = fabs(D) * ew[i] + rnd(D * rw[i]) + rnd(gp);
            double step = gp, es = egp;
            if (buf) {
                const double b = s == 0 ? gp : Mo * rb[i] + gp;
                eb[i] = s == 0 ? egp : fabs(Mo) * eb[i] + egp + rnd(Mo * rb[i]) + rnd(b);
                rb[i] = b, step = b, es = eb[i];
                check_elem(&t, "sgd buf", i, buf[i], rb[i], margin * eb[i]);
            }
            const double nw = rw[i] - L * step;
            ew[i] += L * es + rnd(L * step) + rnd(nw);
            rw[i] = nw;
            check_elem(&t, "sgd w", i, w[i], rw[i], margin * ew[i]);
        }
        tally_end(&t, "sgd_step");
    }
    free(w), free(g), free(buf), free(rw), free(rb), free(ew), free(eb), free(wc);
}

/* AdamW (PyTorch, decoupled weight decay): w *= 1 - lr wd; m = b1 m + (1 - b1) g;
 * v = b2 v + (1 - b2) g^2; w -= lr (m / c1) / (sqrt(v / c2) + eps), c = 1 - beta^step. The op
 * computes it as w -= (lr / c1) m / (sqrt(v) (1 / sqrt(c2)) + eps), the two factors once a step:
 * the same value, other roundings. From step `first` (m and v random when it is past 1, as when a
 * run resumes), `steps` calls, against float64 with a running bound of the fp32 roundings (the bias
 * corrections' powf within an ulp). Elements 1 and 2 get a NaN and an inf gradient on the first
 * call, element 3 a zero gradient throughout, element 4 one of 1e-30 (its square underflows fp32),
 * element 5 (from w = 0) one of 1e-8, where sqrt(v) is of the order of eps and the update shows
 * where eps is added. */
static void adamw_run(ab_backend *be, size_t n, float lr, float b1, float b2, float eps, float wd, int first,
                      int steps, float gs, ab_dtype ct) {
    float *w = xmalloc(n * sizeof *w), *g = xmalloc(n * sizeof *g), *m = xmalloc(n * sizeof *m),
          *v = xmalloc(n * sizeof *v);
    uint16_t *wc = ct == AB_F32 ? NULL : xmalloc((n + 1) * sizeof *wc);
    if (wc) wc[n] = 0x7e01;
    double *rw = xmalloc(n * sizeof *rw), *rm = xmalloc(n * sizeof *rm), *rv = xmalloc(n * sizeof *rv),
           *ew = xmalloc(n * sizeof *ew), *em = xmalloc(n * sizeof *em), *ev = xmalloc(n * sizeof *ev);
    for (size_t i = 0; i < n; i++) {
        w[i] = (float)ab_rng_normal(&rng) * 0.5f;
        m[i] = first > 1 ? (float)ab_rng_normal(&rng) * 0.01f : 0.0f;
        v[i] = first > 1 ? (float)(ab_rng_uniform(&rng) * 1e-4) : 0.0f;
        if (i == 3) m[i] = v[i] = 0.0f;
        if (i == 5) w[i] = 0.0f;
        rw[i] = w[i], rm[i] = m[i], rv[i] = v[i], ew[i] = em[i] = ev[i] = 0.0;
    }
    const double L = lr, B1 = b1, B2 = b2, EPS = eps, D = wd, u = 0x1p-24, margin = AB_TOL_ROUNDING_BOUND_MARGIN;
    for (int s = 0; s < steps; s++) {
        const int step = first + s;
        for (size_t i = 0; i < n; i++)
            g[i] = i == 3 ? 0.0f : i == 4 ? 1e-30f : i == 5 ? 1e-8f : (float)ab_rng_normal(&rng) * 0.1f;
        if (s == 0 && n > 4) g[1] = NAN, g[2] = INFINITY;
        op_case(AB_OP_adamw_step, "fp32 n=%zu lr %g betas %g %g eps %g weight_decay %g grad_scale %g, step %d%s%s", n,
                (double)lr, (double)b1, (double)b2, (double)eps, (double)wd, (double)gs, step,
                wc ? ", a working copy in " : "", wc ? ab_dtype_name(ct) : "");
        float *g0 = xmalloc(n * sizeof *g0);
        memcpy(g0, g, n * sizeof *g0);
        AB_CHECK(be->ops->adamw_step(be, n, w, g, m, v, lr, b1, b2, eps, wd, step, gs, ct, wc) == 0,
                 "adamw_step: %s", ab_error());
        grad_taken("adamw_step", g, g0, n, gs);
        copy_taken("adamw_step", ct, wc, w, n);
        free(g0);
        const double p1 = pow(B1, step), p2 = pow(B2, step), c1 = 1.0 - p1, c2 = 1.0 - p2;
        const double rc1 = (2.0 * u * p1 + u * c1) / c1, rc2 = (2.0 * u * p2 + u * c2) / c2; /* powf, then 1 - p */
        const double f = 1.0 - L * D, ef = rnd(L * D) + rnd(f);
        tally t = {0};
        for (size_t i = 0; i < n; i++) {
            const double gi = g[i];
            const double w1 = rw[i] * f, ew1 = fabs(f) * ew[i] + fabs(rw[i]) * ef + rnd(w1);
            const double m1 = B1 * rm[i] + (1.0 - B1) * gi;
            em[i] = B1 * em[i] + rnd(B1 * rm[i]) + 2.0 * rnd((1.0 - B1) * gi) + rnd(m1);
            const double v1 = B2 * rv[i] + (1.0 - B2) * gi * gi;
            ev[i] = B2 * ev[i] + rnd(B2 * rv[i]) + 3.0 * rnd((1.0 - B2) * gi * gi) + rnd(v1);
            rm[i] = m1, rv[i] = v1;
            /* lr / c1 and 1 / sqrt(c2): c's error, then one rounding each */
            const double S = L / c1, eS = S * (rc1 + u), RB = 1.0 / sqrt(c2), eRB = RB * (rc2 + u);
            const double sq = sqrt(v1), esq = (sq > 0.0 ? fmin(ev[i] / sq, sqrt(ev[i])) : sqrt(ev[i])) + rnd(sq);
            const double q = sq * RB, eq = esq * RB + sq * eRB + rnd(q);
            const double den = q + EPS, eden = eq + rnd(den);
            const double num = S * m1, enu = eS * fabs(m1) + S * em[i] + rnd(num);
            const double upd = num / den, eupd = enu / den + fabs(num) * eden / (den * den) + rnd(upd);
            const double nw = w1 - upd;
            ew[i] = ew1 + eupd + rnd(nw);
            rw[i] = nw;
            check_elem(&t, "adamw m", i, m[i], rm[i], margin * em[i]);
            check_elem(&t, "adamw v", i, v[i], rv[i], margin * ev[i]);
            check_elem(&t, "adamw w", i, w[i], rw[i], margin * ew[i]);
        }
        tally_end(&t, "adamw_step");
    }
    free(w), free(g), free(m), free(v), free(rw), free(rm), free(rv), free(ew), free(em), free(ev), free(wc);
}

static void test_optimizers(ab_backend *be) {
    sgd_run(be, 1001, 0.1f, 0.9f, 5e-4f, 4, 1.0f, AB_F32);
    sgd_run(be, 1001, 0.05f, 0.0f, 0.01f, 3, 1.0f, AB_F32); /* no momentum: buf NULL */
    sgd_run(be, 7, 0.5f, 0.9f, 0.0f, 2, 1.0f, AB_F32);
    sgd_run(be, 1001, 0.1f, 0.9f, 5e-4f, 3, 0.37f, AB_F32);  /* clipped: the factor inside the step */
    sgd_run(be, 1001, 0.05f, 0.0f, 0.01f, 2, 0.37f, AB_F32); /* the same without momentum (the other loop) */
    /* the AMP working copy written in the same pass, both loops, both types */
    sgd_run(be, 5003, 0.1f, 0.9f, 5e-4f, 3, 1.0f, AB_F16);
    sgd_run(be, 1001, 0.05f, 0.0f, 0.01f, 2, 0.37f, AB_BF16);
    adamw_run(be, 1001, 1e-3f, 0.9f, 0.999f, 1e-8f, 0.01f, 1, 5, 1.0f, AB_F32);
    adamw_run(be, 7, 1e-2f, 0.8f, 0.99f, 1e-6f, 0.0f, 1, 3, 1.0f, AB_F32);
    adamw_run(be, 1001, 1e-3f, 0.9f, 0.999f, 1e-8f, 0.1f, 100, 2, 1.0f, AB_F32); /* resumed: large step, random m and v */
    adamw_run(be, 1001, 1e-3f, 0.9f, 0.999f, 1e-8f, 0.01f, 1, 3, 0.37f, AB_F32); /* clipped */
    adamw_run(be, 5003, 1e-3f, 0.9f, 0.999f, 1e-8f, 0.01f, 1, 3, 1.0f, AB_F16);
    adamw_run(be, 7, 1e-2f, 0.8f, 0.99f, 1e-6f, 0.0f, 1, 2, 1.0f, AB_BF16);
}

/* ---- log2_hist ---- */

/* the bin the contract gives v: floor(log2 |v|) - log2_min clamped to [0, nbins - 1] for finite
 * non-zero values (frexp is exact, subnormals of every type included), nbins for +-0, nbins + 1 for
 * infinities and NaNs */
static int ref_bin(double v, int log2_min, int nbins) {
    if (isnan(v) || isinf(v)) return nbins + 1;
    if (v == 0.0) return nbins;
    int e;
    frexp(v, &e);
    const int b = e - 1 - log2_min;
    return b < 0 ? 0 : b > nbins - 1 ? nbins - 1 : b;
}

static void log2_hist_case(ab_backend *be, ab_dtype t, const void *x, size_t n, int log2_min, int nbins,
                           const char *values) {
    int64_t *counts = xmalloc((size_t)(nbins + 2) * sizeof *counts),
            *want = xmalloc((size_t)(nbins + 2) * sizeof *want);
    for (int b = 0; b < nbins + 2; b++) counts[b] = want[b] = 1000 + 7 * b; /* the op adds */
    for (size_t i = 0; i < n; i++) want[ref_bin(ref_decode(x, i, t), log2_min, nbins)]++;
    op_case(AB_OP_log2_hist, "%s n=%zu log2_min %d nbins %d: %s", ab_dtype_name(t), n, log2_min, nbins, values);
    AB_CHECK(be->ops->log2_hist(be, n, t, x, log2_min, nbins, counts) == 0, "log2_hist: %s", ab_error());
    tally tl = {0};
    for (int b = 0; b < nbins + 2; b++)
        if (counts[b] != want[b])
            tally_bad(&tl, "log2_hist %s: bin %d of %d (+2 for zeros, inf/NaN) counts %lld, expected %lld",
                      ab_dtype_name(t), b, nbins, (long long)counts[b], (long long)want[b]);
    tally_end(&tl, "log2_hist");
    free(counts);
    free(want);
}

static void test_log2_hist(ab_backend *be) {
    /* every fp16 and bf16 pattern, the first once more */
    const size_t n16 = 65537;
    uint16_t *all = xmalloc(n16 * sizeof *all);
    for (size_t i = 0; i < n16; i++) all[i] = (uint16_t)i;
    log2_hist_case(be, AB_F16, all, n16, -24, 40, "every pattern, a bin for each exponent");
    log2_hist_case(be, AB_F16, all, n16, -14, 10, "every pattern, subnormals under the first bin, the last clamped");
    log2_hist_case(be, AB_F16, all, n16, 5, 3, "every pattern, log2_min above 0");
    log2_hist_case(be, AB_F16, all, n16, -30, 1, "every pattern, one bin");
    log2_hist_case(be, AB_BF16, all, n16, -133, 261, "every pattern, a bin for each exponent");
    log2_hist_case(be, AB_BF16, all, n16, -126, 20, "every pattern, subnormals under the first bin");
    log2_hist_case(be, AB_BF16, all, n16, -256, AB_LOG2_HIST_MAX_BINS, "every pattern, the most bins");
    /* fp32: every power of two with its neighbours below and above, of both signs, zeros, infinities,
     * NaNs, then random bit patterns */
    const size_t np = 277 * 6, nr = 100003 - np - 6;
    float *x = xmalloc((np + 6 + nr) * sizeof *x);
    size_t k = 0;
    for (int e = -149; e <= 127; e++) {
        const float p = ldexpf(1.0f, e);
        const float near[3] = {p, nextafterf(p, 0.0f), nextafterf(p, INFINITY)};
        for (int j = 0; j < 3; j++) x[k++] = near[j], x[k++] = -near[j];
    }
    x[k++] = 0.0f, x[k++] = -0.0f, x[k++] = INFINITY, x[k++] = -INFINITY, x[k++] = NAN;
    x[k++] = ab_bits_f32(0xff800001u);
    for (size_t i = 0; i < nr; i++) x[k++] = ab_bits_f32((uint32_t)ab_rng_u64(&rng));
    log2_hist_case(be, AB_F32, x, k, -149, 277, "powers of two +-1 ulp, +-0, +-inf, NaN, random; a bin each");
    log2_hist_case(be, AB_F32, x, k, -160, 300, "the same, bins to spare at both ends");
    log2_hist_case(be, AB_F32, x, k, -20, 7, "the same, clamped at both ends");
    log2_hist_case(be, AB_F32, x, k, -256, AB_LOG2_HIST_MAX_BINS, "the same, the most bins");
    log2_hist_case(be, AB_F32, x, k, 256, 1, "the same, all finite values under log2_min 256");
    log2_hist_case(be, AB_F32, x + np, 3, -10, 4, "+0, -0, inf");
    /* parameters outside the contract's range are refused and nothing is counted */
    int64_t counts[AB_LOG2_HIST_MAX_BINS + 3];
    for (int b = 0; b < AB_LOG2_HIST_MAX_BINS + 3; b++) counts[b] = 5;
    op_case(AB_OP_log2_hist, "fp32 nbins 0 and %d, log2_min -257 and 257: refused", AB_LOG2_HIST_MAX_BINS + 1);
    AB_CHECK(be->ops->log2_hist(be, 3, AB_F32, x, -10, 0, counts) != 0, "log2_hist accepted nbins 0");
    AB_CHECK(be->ops->log2_hist(be, 3, AB_F32, x, -10, AB_LOG2_HIST_MAX_BINS + 1, counts) != 0,
             "log2_hist accepted nbins %d", AB_LOG2_HIST_MAX_BINS + 1);
    AB_CHECK(be->ops->log2_hist(be, 3, AB_F32, x, -257, 4, counts) != 0, "log2_hist accepted log2_min -257");
    AB_CHECK(be->ops->log2_hist(be, 3, AB_F32, x, 257, 4, counts) != 0, "log2_hist accepted log2_min 257");
    int untouched = 1;
    for (int b = 0; b < AB_LOG2_HIST_MAX_BINS + 3; b++) untouched &= counts[b] == 5;
    AB_CHECK(untouched, "log2_hist counted with parameters it refused");
    free(all);
    free(x);
}

/* ---- gathers ---- */

/* gather_rows: out[b] = rows[idx[b]], any row size (odd byte counts), indices repeated */
static void test_gather_rows(ab_backend *be) {
    static const size_t sizes[] = {1, 3, 4, 17, 512};
    for (size_t k = 0; k < sizeof sizes / sizeof sizes[0]; k++) {
        const size_t rb = sizes[k];
        const int R = 9, B = 6;
        const int32_t idx[6] = {8, 0, 3, 3, 7, 0};
        uint8_t *rows = malloc(R * rb), *out = malloc(B * rb);
        for (size_t i = 0; i < R * rb; i++) rows[i] = (uint8_t)(i * 131 + 7);
        memset(out, 0xAA, B * rb);
        op_case(AB_OP_gather_rows, "6 of 9 rows of %zu bytes, indices repeated", rb);
        AB_CHECK(be->ops->gather_rows(be, B, rb, rows, idx, out) == 0, "gather_rows: %s", ab_error());
        int ok = 1;
        for (int b = 0; b < B; b++) ok &= memcmp(out + b * rb, rows + (size_t)idx[b] * rb, rb) == 0;
        AB_CHECK(ok, "gather_rows with rows of %zu bytes: a row differs", rb);
        free(rows);
        free(out);
    }
}

/* gather_normalize: out[b, d] = (data[idx[b], d] / 255 - mean) / std in ot, labels gathered */
static void test_gather_normalize(ab_backend *be) {
    const int n = 5, D = 7, B = 4;
    uint8_t data[35], labels[5] = {9, 1, 4, 0, 255};
    for (int i = 0; i < n * D; i++) data[i] = (uint8_t)(i * 37 % 256);
    data[0] = 0, data[1] = 255;
    const int32_t idx[4] = {4, 0, 0, 2};
    const float mean = 0.1307f, sd = 0.3081f;
    static const ab_dtype types[] = {AB_F32, AB_F16, AB_BF16};
    for (int ti = 0; ti < 3; ti++) {
        const ab_dtype t = types[ti];
        void *out = malloc((size_t)B * D * ab_dtype_size(t));
        int32_t lo[4] = {-1, -1, -1, -1};
        op_case(AB_OP_gather_normalize, "%s 4 of 5 samples of 7 bytes (0 and 255), an index repeated",
                ab_dtype_name(t));
        AB_CHECK(be->ops->gather_normalize(be, B, D, data, labels, idx, mean, sd, t, out, lo) == 0,
                 "gather_normalize: %s", ab_error());
        const double ulp = t == AB_F32 ? 0x1p-22 : t == AB_F16 ? 0x1p-10 : 0x1p-7; /* a few fp32 roundings, then ot's */
        int bad = 0;
        for (int b = 0; b < B && !bad; b++)
            for (int d = 0; d < D && !bad; d++) {
                const double want = ((double)data[idx[b] * D + d] / 255.0 - mean) / sd;
                const double got = ab_load(out, (size_t)b * D + d, t);
                if (!(fabs(got - want) <= ulp * fabs(want) + 1e-6)) {
                    fprintf(stderr, "FAIL gather_normalize %s [%d, %d]: %.9g, expected %.9g\n", ab_dtype_name(t), b, d,
                            got, want);
                    bad = 1;
                }
            }
        failures += bad;
        AB_CHECK(lo[0] == 255 && lo[1] == 9 && lo[2] == 9 && lo[3] == 4, "gather_normalize labels: %d %d %d %d", lo[0],
                 lo[1], lo[2], lo[3]);
        free(out);
    }
}

/* gather_images: out[b, y, x, c] = (p / 255 - mean[c]) / std[c], p the pixel of sample idx[b] at
 * (y + dy - pad, x' + dx - pad), x' = W - 1 - x when flipped, 0 outside the image; planar samples
 * hold (C, H, W), interleaved (H, W, C). Three fp32 roundings (p / 255, the difference, the
 * quotient) within 2^-24 of each result, then one to ot. The first four samples take the corner
 * crops and the centre with and without flip, the rest random ones. */
static void gather_images_case(ab_backend *be, int C, int H, int W, int planar, int pad, int augment, ab_dtype ot) {
    /* 19 samples: the CPU backend splits them over its pool's parts (8 or more a part) */
    enum { B = 19 };
    const int n = 6;
    const size_t D = (size_t)C * H * W;
    uint8_t *data = xmalloc(n * D), labels[6];
    for (size_t i = 0; i < n * D; i++) data[i] = (uint8_t)ab_rng_below(&rng, 256);
    data[0] = 0, data[1] = 255, data[D] = 255;
    for (int i = 0; i < n; i++) labels[i] = (uint8_t)(250 - 17 * i);
    int32_t idx[B] = {5, 0, 3, 3, 1, 2, 0};
    for (int b = 7; b < B; b++) idx[b] = (int32_t)ab_rng_below(&rng, (uint64_t)n);
    int32_t aug[B * 3] = {0, 0, 0, 2 * pad, 2 * pad, 1, pad, pad, 0, pad, pad, 1};
    for (int b = 4; b < B; b++) {
        aug[3 * b] = (int32_t)ab_rng_below(&rng, (uint64_t)(2 * pad + 1));
        aug[3 * b + 1] = (int32_t)ab_rng_below(&rng, (uint64_t)(2 * pad + 1));
        aug[3 * b + 2] = (int32_t)ab_rng_below(&rng, 2);
    }
    ab_image_layout L = {C, H, W, planar, {0}, {0}};
    for (int c = 0; c < C; c++) L.mean[c] = 0.1f + 0.2f * c, L.std[c] = 0.2f + 0.05f * c;
    const ab_image_aug A = {pad, aug};
    const size_t oe = ab_dtype_size(ot);
    void *out = xmalloc((size_t)B * D * oe);
    memset(out, 0x5a, (size_t)B * D * oe);
    int32_t lo[B];
    for (int b = 0; b < B; b++) lo[b] = -1;
    const char *layout = planar ? "planar" : "interleaved";
    if (C == 1) layout = "one channel";
    op_case(AB_OP_gather_images, "%s %s C%d %dx%d, %d samples: %s, pad %d", ab_dtype_name(ot), layout, C, H, W, B,
            augment ? "crop and flip" : "no augmentation", augment ? pad : 0);
    AB_CHECK(be->ops->gather_images(be, B, &L, augment ? &A : NULL, data, labels, idx, ot, out, lo) == 0,
             "gather_images: %s", ab_error());
    const double u = 0x1p-24, uo = unit_roundoff(ot);
    tally t = {0};
    for (int b = 0; b < B; b++) {
        const uint8_t *img = data + (size_t)idx[b] * D;
        const int dy = augment ? aug[3 * b] - pad : 0, dx = augment ? aug[3 * b + 1] - pad : 0;
        const int flip = augment && aug[3 * b + 2];
        for (int y = 0; y < H; y++)
            for (int x = 0; x < W; x++)
                for (int c = 0; c < C; c++) {
                    const int sy = y + dy, sx = (flip ? W - 1 - x : x) + dx;
                    int p = 0;
                    if (sy >= 0 && sy < H && sx >= 0 && sx < W)
                        p = planar ? img[((size_t)c * H + sy) * W + sx] : img[((size_t)sy * W + sx) * C + c];
                    const double q = p / 255.0, want = (q - L.mean[c]) / L.std[c];
                    const double e = u * (q + fabs(q - L.mean[c])) / L.std[c] + u * fabs(want);
                    const size_t at = (size_t)b * D + ((size_t)y * W + x) * C + c;
                    check_elem(&t, "gather_images out", at, ref_decode(out, at, ot), want,
                               AB_TOL_ROUNDING_BOUND_MARGIN * (e + uo * (fabs(want) + e)) + half_tiny(ot));
                }
        if (lo[b] != labels[idx[b]])
            tally_bad(&t, "gather_images: label %d = %d, expected %d", b, lo[b], labels[idx[b]]);
    }
    tally_end(&t, "gather_images");
    free(data);
    free(out);
}

static void test_gather_images(ab_backend *be) {
    for (int ti = 0; ti < 3; ti++) {
        gather_images_case(be, 3, 5, 7, 1, 2, 1, all_types[ti]); /* CIFAR-10's planar samples */
        gather_images_case(be, 3, 5, 7, 0, 2, 1, all_types[ti]);
    }
    gather_images_case(be, 4, 3, 3, 0, 1, 1, AB_F16);  /* the most channels */
    gather_images_case(be, 2, 4, 6, 1, 3, 1, AB_BF16); /* crops mostly in the padding */
    /* MNIST's one channel, no augmentation: the look-ups 16 at a time (AVX-512), the last 3 masked */
    for (int ti = 0; ti < 3; ti++) gather_images_case(be, 1, 7, 5, 0, 0, 0, all_types[ti]);
    gather_images_case(be, 1, 28, 28, 0, 0, 0, AB_F16);
    gather_images_case(be, 1, 7, 5, 0, 3, 1, AB_F16);
    gather_images_case(be, 3, 5, 7, 1, 0, 1, AB_F32); /* pad 0: flips only */
    gather_images_case(be, 3, 5, 7, 1, 2, 0, AB_F32); /* evaluation: no augmentation */
    gather_images_case(be, 3, 5, 7, 0, 2, 0, AB_BF16); /* interleaved, no augmentation: straight look-ups */
}

void ref_ops_run(void) {
    ab_backend *be = ab_backend_cpu_create(2);
    if (!be) die("creating a CPU backend");
    test_gemm(be);
    test_gemm_fold(be);
    test_cast(be);
    test_elementwise(be);
    test_col_sum(be);
    test_softmax_xent(be);
    test_unscale(be);
    test_optimizers(be);
    test_gather_normalize(be);
    test_gather_images(be);
    test_gather_rows(be);
    test_sum_squares(be);
    for (int i = 0; i < 3; i++) {
        static const float scales[3] = {0.5f, -3.75f, 0.0f};
        scale_case(be, scales[i], 1001);
    }
    scale_case(be, 1e-3f, 15); /* 1e-36 and 1e-40 into the subnormals */
    test_log2_hist(be);
    be->ops->destroy(be);
}
