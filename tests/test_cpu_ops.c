/* The CPU backend's ops that no other test checks directly, against double-precision references
 * worked out here: column sums (fp32, fp16 and bf16 in and out, beta 0 and 1, a NaN row), the sum
 * of squares (added into what the scalar holds), unscale with its finite check (inf, NaN, and a
 * flag never reset), row gathers (any row size, repeated indices) and gather + normalise (uint8
 * pixels to fp32/fp16/bf16, the labels). The CUDA backend's twins are checked against these ops. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend_cpu.h"
#include "half.h"
#include "rng.h"
#include "tolerances.h"

static int failures = 0;

static double rel_err(double got, double want) { return fabs(got - want) / (fabs(want) > 1e-30 ? fabs(want) : 1.0); }

/* col_sum: out[j] = beta out[j] + sum_i X[i, j], accumulated in fp32 (one rounding per add) and
 * rounded once to ot. The bound: a recursive fp32 sum of M terms is within (M - 1) 2^-24 of the
 * sum of |x| of the exact sum, plus the final rounding to ot (half an ulp of ot). */
static void test_col_sum(ab_backend *be) {
    static const ab_dtype types[] = {AB_F32, AB_F16, AB_BF16};
    static const int shapes[][2] = {{1, 1}, {64, 300}, {1000, 33}, {7, 1}};
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
    AB_CHECK(be->ops->col_sum(be, 2, 3, AB_F32, X, 0.0f, AB_F32, out) == 0, "col_sum: %s", ab_error());
    AB_CHECK(out[0] == 5.0f && out[1] == 7.0f && isnan(out[2]), "col_sum NaN: %g %g %g", out[0], out[1], out[2]);
    /* mixed types: fp16 in, fp32 out */
    uint16_t h[4] = {ab_f32_to_f16(1.5f), ab_f32_to_f16(-0.25f), ab_f32_to_f16(2.0f), ab_f32_to_f16(65504.0f)};
    float o2[2] = {10.0f, 20.0f};
    AB_CHECK(be->ops->col_sum(be, 2, 2, AB_F16, h, 1.0f, AB_F32, o2) == 0, "col_sum: %s", ab_error());
    AB_CHECK(o2[0] == 13.5f && o2[1] == 65503.75f + 20.0f, "col_sum fp16 -> fp32 with beta 1: %.9g %.9g", o2[0], o2[1]);
}

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
        AB_CHECK(be->ops->sum_squares(be, n, x, &out) == 0, "sum_squares: %s", ab_error());
        /* positive terms in fp32 runs of at most 1,024 (then double): within 1024 x 2^-24 = 6.1e-5 of the
         * sum, rounded once to fp32 */
        AB_CHECK(rel_err(out, ref) < 1e-4, "sum_squares n=%zu: %.9g, expected %.9g", n, (double)out, ref);
        free(x);
    }
    float big[2] = {1e20f, 1e20f}, out = 0.0f; /* 2e40 is past fp32: the norm is infinite, not NaN */
    AB_CHECK(be->ops->sum_squares(be, 2, big, &out) == 0, "sum_squares: %s", ab_error());
    AB_CHECK(isinf(out) && out > 0, "sum_squares past fp32's range: %g", (double)out);
}

/* unscale_check: g *= inv_scale; found_inf set by any inf or NaN after the multiply, never reset */
static void test_unscale(ab_backend *be) {
    float g[5] = {65536.0f, -1024.0f, 3.0f, 0.0f, -0.0f};
    int32_t found = 0;
    AB_CHECK(be->ops->unscale_check(be, 5, g, 1.0f / 1024.0f, &found) == 0, "unscale_check: %s", ab_error());
    AB_CHECK(g[0] == 64.0f && g[1] == -1.0f && g[2] == 3.0f / 1024.0f && g[3] == 0.0f && signbit(g[4]) && !found,
             "unscale_check finite: %g %g %g %g %g, found %d", g[0], g[1], g[2], g[3], g[4], found);
    float h[3] = {1.0f, INFINITY, 2.0f};
    AB_CHECK(be->ops->unscale_check(be, 3, h, 0.5f, &found) == 0 && found == 1, "unscale_check inf: found %d", found);
    AB_CHECK(h[0] == 0.5f && h[2] == 1.0f, "unscale_check scales the finite values beside an inf: %g %g", h[0], h[2]);
    float k[2] = {1.0f, 2.0f};
    AB_CHECK(be->ops->unscale_check(be, 2, k, 1.0f, &found) == 0 && found == 1, "found_inf was reset to %d", found);
    float m[3] = {NAN, 1.0f, 1.0f};
    int32_t f2 = 0;
    AB_CHECK(be->ops->unscale_check(be, 3, m, 1.0f, &f2) == 0 && f2 == 1, "unscale_check NaN: found %d", f2);
    float o[2] = {3e38f, 1.0f}; /* finite before, inf after the multiply */
    int32_t f3 = 0;
    AB_CHECK(be->ops->unscale_check(be, 2, o, 4.0f, &f3) == 0 && f3 == 1 && isinf(o[0]),
             "unscale_check overflow by the multiply: found %d, %g", f3, o[0]);
}

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

int main(void) {
    ab_backend *be = ab_backend_cpu_create(2);
    if (!be) {
        fprintf(stderr, "test_cpu_ops: %s\n", ab_error());
        return 1;
    }
    test_col_sum(be);
    test_sum_squares(be);
    test_unscale(be);
    test_gather_rows(be);
    test_gather_normalize(be);
    be->ops->destroy(be);
    if (failures) {
        fprintf(stderr, "test_cpu_ops: %d failure(s)\n", failures);
        return 1;
    }
    printf("test_cpu_ops: col_sum, sum_squares, unscale_check, gather_rows, gather_normalize agree with their references\n");
    return 0;
}
