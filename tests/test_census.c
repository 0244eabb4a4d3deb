/* The CPU backend's log2_hist op, the gradient census's histogram: every fp16 and every bf16 bit
 * pattern, a million random fp32 bit patterns and planted values (each bin edge 2^k and the float
 * just below it, +-0, the fp32 and fp16 smallest subnormals, 65504, 65520, values beyond both ends of
 * the bins, +-inf, NaN) against a count written here from first principles (the stored bits decoded
 * with ldexp, the exponent from frexp); three bin layouts (the census's 80 bins, 300 bins that clamp
 * nothing, 1 bin); counts added to, over two calls as over one; bad arguments refused. */
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend.h"
#include "backend_cpu.h"
#include "half.h"
#include "kernel_math.h"
#include "rng.h"
#include "tolerances.h"

/* the census's layout (core/census.h) */
#define AB_CENSUS_LOG2_MIN (-64)
#define AB_CENSUS_BINS 80

static int failures = 0;
static ab_backend *be;

/* ---- the reference count: decode the stored bits with ldexp, the exponent from frexp ---- */

static double decode(const void *x, size_t i, ab_dtype t) {
    uint32_t sign, e, m;
    if (t == AB_F32) {
        uint32_t u;
        memcpy(&u, (const char *)x + 4 * i, 4);
        sign = u >> 31, e = (u >> 23) & 0xff, m = u & 0x7fffff;
        if (e == 0xff) return m ? NAN : sign ? -INFINITY : INFINITY;
        const double v = e ? ldexp((double)(m | 0x800000), (int)e - 150) : ldexp((double)m, -149);
        return sign ? -v : v;
    }
    uint16_t h;
    memcpy(&h, (const char *)x + 2 * i, 2);
    if (t == AB_BF16) { /* the top half of a float: 8 exponent bits, 7 mantissa bits */
        sign = h >> 15, e = (h >> 7) & 0xff, m = h & 0x7f;
        if (e == 0xff) return m ? NAN : sign ? -INFINITY : INFINITY;
        const double v = e ? ldexp((double)(m | 0x80), (int)e - 134) : ldexp((double)m, -133);
        return sign ? -v : v;
    }
    sign = h >> 15, e = (h >> 10) & 0x1f, m = h & 0x3ff; /* fp16: 5 and 10 */
    if (e == 0x1f) return m ? NAN : sign ? -INFINITY : INFINITY;
    const double v = e ? ldexp((double)(m | 0x400), (int)e - 25) : ldexp((double)m, -24);
    return sign ? -v : v;
}

static void ref_count(const void *x, size_t n, ab_dtype t, int log2_min, int nbins, int64_t *counts) {
    for (size_t i = 0; i < n; i++) {
        const double v = decode(x, i, t);
        if (v == 0.0) {
            counts[nbins]++;
        } else if (!isfinite(v)) {
            counts[nbins + 1]++;
        } else {
            int e;
            frexp(fabs(v), &e); /* |v| = f 2^e, f in [0.5, 1): floor(log2 |v|) = e - 1 */
            int b = e - 1 - log2_min;
            if (b < 0) b = 0;
            if (b > nbins - 1) b = nbins - 1;
            counts[b]++;
        }
    }
}

static void check_counts(const char *what, const int64_t *got, const int64_t *want, int nbins) {
    for (int b = 0; b < nbins + 2; b++)
        if (got[b] != want[b]) {
            fprintf(stderr, "FAIL %s: slot %d (%s) got %lld, expected %lld\n", what, b,
                    b < nbins ? "bin" : b == nbins ? "zeros" : "non-finite", (long long)got[b], (long long)want[b]);
            failures++;
            return;
        }
}

/* the op against the reference, in three bin layouts; counts start non-zero (the op adds), and
 * two calls over the halves give what one call over all gives */
static void check_op(const char *what, const void *x, size_t n, ab_dtype t) {
    static const int layouts[3][2] = {{AB_CENSUS_LOG2_MIN, AB_CENSUS_BINS}, {-160, 300}, {0, 1}};
    for (int l = 0; l < 3; l++) {
        const int lo = layouts[l][0], nb = layouts[l][1];
        int64_t *got = malloc((size_t)(nb + 2) * sizeof *got), *two = malloc((size_t)(nb + 2) * sizeof *two),
                *want = malloc((size_t)(nb + 2) * sizeof *want);
        for (int b = 0; b < nb + 2; b++) got[b] = two[b] = want[b] = 1000 + b;
        ref_count(x, n, t, lo, nb, want);
        char w[160];
        snprintf(w, sizeof w, "log2_hist %s %s (log2_min %d, %d bins)", what, ab_dtype_name(t), lo, nb);
        AB_CHECK(be->ops->log2_hist(be, n, t, x, lo, nb, got) == 0, "%s: %s", w, ab_error());
        check_counts(w, got, want, nb);
        const size_t h = n / 3;
        AB_CHECK(be->ops->log2_hist(be, h, t, x, lo, nb, two) == 0 &&
                     be->ops->log2_hist(be, n - h, t, (const char *)x + h * ab_dtype_size(t), lo, nb, two) == 0,
                 "%s in two calls: %s", w, ab_error());
        strncat(w, " in two calls", sizeof w - strlen(w) - 1);
        check_counts(w, two, want, nb);
        free(got);
        free(two);
        free(want);
    }
}

/* the bin of one value in the census layout, through the op: -1 zeros, -2 non-finite */
static int bin_of(float v, ab_dtype t) {
    uint16_t h[1];
    float f[1] = {v};
    if (t != AB_F32) ab_store(h, 0, t, v);
    int64_t c[AB_CENSUS_BINS + 2] = {0};
    if (be->ops->log2_hist(be, 1, t, t == AB_F32 ? (const void *)f : (const void *)h, AB_CENSUS_LOG2_MIN, AB_CENSUS_BINS,
                           c) != 0)
        return -100;
    for (int b = 0; b < AB_CENSUS_BINS + 2; b++)
        if (c[b]) return b < AB_CENSUS_BINS ? AB_CENSUS_LOG2_MIN + b : b == AB_CENSUS_BINS ? -1000 : -2000;
    return -100;
}

static void test_log2_hist(void) {
    /* hand-checked bins: floor(log2 |v|), the clamps, zeros and non-finite values */
    struct {
        float v;
        ab_dtype t;
        int want; /* floor(log2) clamped to [-64, 15]; -1000 zero, -2000 non-finite */
    } cases[] = {
        {1.0f, AB_F32, 0},
        {0x1.fffffep-1f, AB_F32, -1}, /* just below 1 */
        {-3.0f, AB_F32, 1},
        {0x1.0p-14f, AB_F32, -14},
        {0x1.fffffep-15f, AB_F32, -15},
        {0x1.0p-149f, AB_F32, -64},  /* fp32's smallest subnormal: below the bins, in the first */
        {0x1.0p-64f, AB_F32, -64},
        {0x1.fffffep-65f, AB_F32, -64},
        {0x1.0p-63f, AB_F32, -63},
        {65504.0f, AB_F32, 15},
        {65520.0f, AB_F32, 15}, /* fp16 would overflow; as fp32 it is in the bin of 15 */
        {1e30f, AB_F32, 15},    /* above the bins: the last */
        {0.0f, AB_F32, -1000},
        {-0.0f, AB_F32, -1000},
        {INFINITY, AB_F32, -2000},
        {-INFINITY, AB_F32, -2000},
        {NAN, AB_F32, -2000},
        {0x1.0p-24f, AB_F16, -24}, /* fp16's smallest subnormal */
        {0x1.0p-23f, AB_F16, -23},
        {0x1.8p-20f, AB_F16, -20}, /* a subnormal with two bits */
        {0x1.ff8p-15f, AB_F16, -15}, /* fp16's largest subnormal */
        {0x1.0p-14f, AB_F16, -14},   /* its smallest normal */
        {65504.0f, AB_F16, 15},
        {65520.0f, AB_F16, -2000}, /* rounds to infinity in fp16 */
        {-0.0f, AB_F16, -1000},
        {0x1.0p-133f, AB_BF16, -64}, /* bf16's smallest subnormal */
        {0x1.0p-40f, AB_BF16, -40},
        {-0x1.0p-126f, AB_BF16, -64},
        {NAN, AB_BF16, -2000},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const int got = bin_of(cases[i].v, cases[i].t);
        AB_CHECK(got == cases[i].want, "%s %a: bin %d, expected %d", ab_dtype_name(cases[i].t), (double)cases[i].v, got,
                 cases[i].want);
    }
    /* every fp16 and every bf16 bit pattern */
    uint16_t *all = malloc(65536 * 2);
    for (uint32_t u = 0; u < 65536; u++) all[u] = (uint16_t)u;
    check_op("every pattern", all, 65536, AB_F16);
    check_op("every pattern", all, 65536, AB_BF16);
    free(all);
    /* fp32: random bit patterns (subnormals, NaNs, infinities among them), then planted values */
    ab_rng r;
    ab_rng_seed(&r, 20261202);
    const size_t nr = 1000000;
    uint32_t *bits = malloc(nr * 4);
    for (size_t i = 0; i < nr; i++) {
        bits[i] = (uint32_t)ab_rng_u64(&r);
        if (i % 4 == 1) bits[i] &= 0x807fffffu; /* a quarter subnormal or zero */
    }
    check_op("random bits", bits, nr, AB_F32);
    free(bits);
    float planted[2048];
    size_t np = 0;
    for (int k = -150; k <= 128; k++) {
        planted[np++] = (float)ldexp(1.0, k);
        planted[np++] = nextafterf((float)ldexp(1.0, k), 0.0f);
        planted[np++] = -(float)ldexp(1.5, k);
    }
    const float specials[] = {0.0f, -0.0f, 0x1.0p-149f, -0x1.0p-149f, 0x1.fffffcp-127f, FLT_MIN, 0x1.0p-24f, 0x1.0p-25f,
                              65504.0f, 65519.0f, 65520.0f, -65520.0f, 0x1.0p-70f, 0x1.0p-100f, 0x1.0p20f, FLT_MAX,
                              INFINITY, -INFINITY, NAN, -NAN};
    for (size_t k = 0; k < sizeof specials / sizeof specials[0]; k++) planted[np++] = specials[k];
    for (int k = 0; k < 300; k++) /* random magnitudes across the census range */
        planted[np++] = (float)ldexp(ab_rng_uniform_range(&r, 1.0f, 2.0f), (int)ab_rng_uniform_range(&r, -80.0f, 20.0f));
    check_op("planted", planted, np, AB_F32);
    for (ab_dtype t = AB_F16; t <= AB_BF16; t++) { /* the planted values stored in fp16 and bf16 */
        uint16_t *h = malloc(np * 2);
        for (size_t i = 0; i < np; i++) ab_store(h, i, t, planted[i]);
        check_op("planted", h, np, t);
        free(h);
    }
    /* n = 0 adds nothing; bad layouts and types are refused */
    int64_t c[AB_LOG2_HIST_MAX_BINS + 3] = {0};
    AB_CHECK(be->ops->log2_hist(be, 0, AB_F32, planted, -64, 80, c) == 0 && c[0] == 0 && c[81] == 0, "n = 0");
    AB_CHECK(be->ops->log2_hist(be, 4, AB_F32, planted, -64, 0, c) != 0, "0 bins accepted");
    AB_CHECK(be->ops->log2_hist(be, 4, AB_F32, planted, -64, AB_LOG2_HIST_MAX_BINS + 1, c) != 0, "too many bins accepted");
    AB_CHECK(be->ops->log2_hist(be, 4, AB_F32, planted, 300, 80, c) != 0, "log2_min 300 accepted");
    AB_CHECK(be->ops->log2_hist(be, 4, AB_DTYPE_COUNT, planted, -64, 80, c) != 0, "a bad type accepted");
}

int main(void) {
    be = ab_backend_cpu_create(1);
    if (!be) {
        fprintf(stderr, "FAIL backend: %s\n", ab_error());
        return 1;
    }
    test_log2_hist();
    be->ops->destroy(be);
    printf("log2_hist: %d failures\n", failures);
    return failures ? 1 : 0;
}
