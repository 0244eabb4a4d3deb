/* The gradient census (core/census.h) and the CPU backend's log2_hist op it counts with.
 *   log2_hist: every fp16 and every bf16 bit pattern, a million random fp32 bit patterns and planted
 *     values (each bin edge 2^k and the float just below it, +-0, the fp32 and fp16 smallest
 *     subnormals, 65504, 65520, values beyond both ends of the bins, +-inf, NaN) against a count
 *     written here from first principles (the stored bits decoded with ldexp, the exponent from
 *     frexp); three bin layouts (the census's 80 bins, 300 bins that clamp nothing, 1 bin); counts
 *     added to, over two calls as over one; bad arguments refused.
 *   derived figures on hand-made histograms: the shift of log2 S bins (down, from the loss scale to
 *     scale 1), the exact flush and subnormal edges, the overflow bin (may vs certain), a fractional
 *     shift, the 99.9% rule of the safe scale and its overflow bound.
 *   the census: records through begin/add/end on the CPU backend (pooling by name, more tensors than
 *     device slots, errors), the one-line summary, and the result record's grad_census read back
 *     with cJSON: keys, 80-long histograms, the derived figures. With a path argument the record is
 *     also written there (tests/test_result_schema.sh validates it against the schema). */
#include <cjson/cJSON.h>
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "record.h"
#include "backend_cpu.h"
#include "census.h"
#include "half.h"
#include "kernel_math.h"
#include "rng.h"
#include "tolerances.h"
#include "train.h"

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

/* ---- derived figures on hand-made histograms ---- */

enum { NB = AB_CENSUS_BINS, LMIN = AB_CENSUS_LOG2_MIN };

static void put(int64_t *h, int log2, int64_t count) { h[log2 - LMIN] += count; }

static int near(double a, double b) { return fabs(a - b) <= 1e-12; }

static void test_shares(void) {
    int64_t h[NB] = {0};
    ab_census_shares s;
    /* values stored at loss scale 2^16 with floor(log2) -10: at scale 1 they are 2^-26, flushed; as
     * stored, normal. Shifting the other way would put them at 2^6. */
    put(h, -10, 8);
    ab_census_shares_at(h, LMIN, NB, AB_F16, 65536.0, 1.0, &s);
    AB_CHECK(near(s.flush, 1.0) && near(s.subnormal, 0.0), "2^-10 at scale 2^16 -> 2^-26 at scale 1: flush %g", s.flush);
    ab_census_shares_at(h, LMIN, NB, AB_F16, 65536.0, 65536.0, &s);
    AB_CHECK(near(s.flush, 0.0) && near(s.subnormal, 0.0) && near(s.overflow, 0.0), "2^-10 as stored: normal");
    /* the edges 2^-25 and 2^-14 are exact at an integer shift; fp32 values in the last bin may
     * reach 65520 */
    memset(h, 0, sizeof h);
    put(h, -26, 1), put(h, -25, 2), put(h, -15, 4), put(h, -14, 8), put(h, 15, 16), put(h, 14, 32);
    ab_census_shares_at(h, LMIN, NB, AB_F32, 1.0, 1.0, &s);
    AB_CHECK(near(s.flush, 1 / 63.0) && near(s.subnormal, 6 / 63.0), "edges: flush %g subnormal %g", s.flush * 63,
             s.subnormal * 63);
    AB_CHECK(near(s.overflow, 0.0) && near(s.may_overflow, 16 / 63.0), "bin 15 may overflow: %g certain, %g may",
             s.overflow * 63, s.may_overflow * 63);
    /* fp16 values in the last bin are at most 65504: none overflows at scale 1 */
    ab_census_shares_at(h, LMIN, NB, AB_F16, 1.0, 1.0, &s);
    AB_CHECK(near(s.overflow, 0.0) && near(s.may_overflow, 0.0) && near(s.flush, 1 / 63.0),
             "fp16 at scale 1: %g certain, %g may overflow", s.overflow * 63, s.may_overflow * 63);
    /* at twice the scale the bin of 15 is at 16: certain overflow, and 14 moves to the uncertain bin */
    ab_census_shares_at(h, LMIN, NB, AB_F32, 1.0, 2.0, &s);
    AB_CHECK(near(s.overflow, 16 / 63.0) && near(s.may_overflow, 32 / 63.0) && near(s.flush, 0.0) &&
                 near(s.subnormal, 3 / 63.0),
             "x2: overflow %g may %g flush %g subnormal %g", s.overflow * 63, s.may_overflow * 63, s.flush * 63,
             s.subnormal * 63);
    /* fp32's first bin reaches down to 2^-149, its last up to FLT_MAX: flushed and may overflow over
     * a wide range of scales */
    memset(h, 0, sizeof h);
    h[0] = 3, h[NB - 1] = 1;
    ab_census_shares_at(h, LMIN, NB, AB_F32, 1.0, 0x1.0p40, &s);
    AB_CHECK(near(s.flush, 0.75) && near(s.overflow, 0.25), "first bin at 2^40: flush %g, last overflow %g", s.flush,
             s.overflow);
    ab_census_shares_at(h, LMIN, NB, AB_F32, 1.0, 0x1.0p-30, &s); /* the last bin from 2^-15 to 2^98 */
    AB_CHECK(near(s.flush, 0.75) && near(s.subnormal, 0.25) && near(s.may_overflow, 0.25),
             "last bin at 2^-30: subnormal %g, may overflow %g", s.subnormal, s.may_overflow);
    ab_census_shares_at(h, LMIN, NB, AB_F32, 1.0, 0x1.0p130, &s); /* 2^-149 x 2^130 = 2^-19: subnormal */
    AB_CHECK(near(s.flush, 0.0) && near(s.subnormal, 0.75), "first bin at 2^130: flush %g subnormal %g", s.flush,
             s.subnormal);
    /* a fractional shift (loss scale 1000): a bin is classed by the smallest value it can hold */
    memset(h, 0, sizeof h);
    put(h, -15, 1), put(h, -16, 1); /* at scale 1: from 2^-24.97 and from 2^-25.97 */
    ab_census_shares_at(h, LMIN, NB, AB_F32, 1000.0, 1.0, &s);
    AB_CHECK(near(s.flush, 0.5) && near(s.subnormal, 0.5), "scale 1000: flush %g subnormal %g", s.flush, s.subnormal);
    /* no values: NaN shares */
    memset(h, 0, sizeof h);
    ab_census_shares_at(h, LMIN, NB, AB_F32, 1.0, 1.0, &s);
    AB_CHECK(isnan(s.flush) && isnan(s.overflow), "no values: shares %g", s.flush);
}

static void test_safe_scale(void) {
    int lo, hi;
    /* at scale 1: 998 values at 2^-30, one at 2^-40 (1 in 1000: it may stay flushed), the largest at
     * 2^-2. Safe from 2^5 (2^-30 x 2^5 = 2^-25, the flush edge); [2^-2, 2^-1) x 2^17 may reach 65520 */
    int64_t h[NB] = {0};
    put(h, -30, 998), put(h, -40, 1), put(h, -2, 1);
    AB_CHECK(ab_census_safe_scale(h, LMIN, NB, AB_F32, 1.0, &lo, &hi) == 1 && lo == 5 && hi == 16,
             "99.9%% rule: safe from 2^%d (expected 2^5), no overflow up to 2^%d (expected 2^16)", lo, hi);
    /* the same values stored at loss scale 2^16 (16 bins up): the same scales, which apply to the
     * values at scale 1 */
    int64_t g[NB] = {0};
    put(g, -14, 998), put(g, -24, 1), put(g, 14, 1);
    AB_CHECK(ab_census_safe_scale(g, LMIN, NB, AB_F16, 65536.0, &lo, &hi) == 1 && lo == 5 && hi == 16,
             "stored at 2^16: safe from 2^%d (expected 2^5), no overflow up to 2^%d (expected 2^16)", lo, hi);
    /* two in 1000 at 2^-40 (0.2%): 2^-40 must leave the flush range too, from 2^15, where a value at
     * 2^0 may overflow: no safe scale */
    int64_t k[NB] = {0};
    put(k, -30, 997), put(k, -40, 2), put(k, 0, 1);
    AB_CHECK(ab_census_safe_scale(k, LMIN, NB, AB_F32, 1.0, &lo, &hi) == 0 && lo == 15 && hi == 14,
             "0.2%% at 2^-40: %d..%d, expected 15..14 and no safe scale", lo, hi);
    /* a value in the last bin: in fp32 it may be as large as FLT_MAX, so only scales below 2^-112 keep
     * it from 65520 and no scale is safe; in fp16 (at most 65504, stored at 2^16: 1 at scale 1) 2^16
     * still is */
    put(h, AB_CENSUS_LOG2_MAX, 1);
    AB_CHECK(ab_census_safe_scale(h, LMIN, NB, AB_F32, 1.0, &lo, &hi) == 0 && hi == -113,
             "fp32 in the last bin: no overflow up to 2^%d, expected 2^-113", hi);
    put(g, AB_CENSUS_LOG2_MAX, 1);
    AB_CHECK(ab_census_safe_scale(g, LMIN, NB, AB_F16, 65536.0, &lo, &hi) == 1 && lo == 5 && hi == 16,
             "fp16 in the last bin: safe from 2^%d, no overflow up to 2^%d, expected 2^5 and 2^16", lo, hi);
    /* no values: none */
    memset(h, 0, sizeof h);
    AB_CHECK(ab_census_safe_scale(h, LMIN, NB, AB_F32, 1.0, &lo, &hi) == 0 && lo == INT32_MAX && hi == INT32_MAX,
             "no values: a safe scale");
}

/* ---- the census through the CPU backend ---- */

static ab_census *make_census(void) {
    ab_census *c;
    if (ab_census_create(100, &c) != 0) {
        fprintf(stderr, "FAIL census: %s\n", ab_error());
        exit(1);
    }
    return c;
}

static void test_census_records(void) {
    ab_census *c = make_census();
    AB_CHECK(c->interval == 100 && c->log2_min == -64 && c->log2_max == 15, "layout");
    AB_CHECK(ab_census_due(c, 1) && !ab_census_due(c, 2) && !ab_census_due(c, 100) && ab_census_due(c, 101) &&
                 ab_census_due(c, 201) && !ab_census_due(c, 0),
             "due at 1, 101, 201");
    ab_census *bad;
    AB_CHECK(ab_census_create(0, &bad) != 0, "interval 0 accepted");
    /* weights in fp32 at scale 1 (fp32 mode): 2^-30 (flushed in fp16), 2^-20 (subnormal), zeros */
    float w[6] = {0x1.0p-30f, -0x1.0p-30f, 0x1.0p-20f, 0.0f, -0.0f, 0.5f};
    uint16_t a[4]; /* an activation gradient in fp16: 2^-24, 1, inf, 0 */
    ab_store(a, 0, AB_F16, 0x1.0p-24f), ab_store(a, 1, AB_F16, 1.0f), ab_store(a, 2, AB_F16, INFINITY),
        ab_store(a, 3, AB_F16, 0.0f);
    AB_CHECK(ab_census_add(c, "fc1.weight", AB_CENSUS_WEIGHT, 6, AB_F32, w) != 0, "add before begin accepted");
    AB_CHECK(ab_census_begin(c, be, 0, 1.0) != 0, "step 0 accepted");
    AB_CHECK(ab_census_begin(c, be, 1, 0.0) != 0, "loss scale 0 accepted");
    const size_t ws0 = be->mem.current[AB_MEM_WORKSPACE];
    AB_CHECK(ab_census_begin(c, be, 1, 1.0) == 0, "begin: %s", ab_error());
    AB_CHECK(ab_census_begin(c, be, 1, 1.0) != 0, "begin twice accepted");
    AB_CHECK(ab_census_add(c, "fc1.weight", AB_CENSUS_WEIGHT, 6, AB_F32, w) == 0, "%s", ab_error());
    AB_CHECK(ab_census_add(c, "fc1", AB_CENSUS_ACTIVATION, 4, AB_F16, a) == 0, "%s", ab_error());
    AB_CHECK(ab_census_add(c, "fc1", AB_CENSUS_ACTIVATION, 4, AB_F16, a) == 0, "pooled: %s", ab_error());
    AB_CHECK(ab_census_add(c, "fc1", AB_CENSUS_WEIGHT, 4, AB_F16, a) != 0, "one name, two kinds accepted");
    /* more tensors than device slots: downloads in between */
    for (int k = 0; k < 2 * AB_CENSUS_SLOTS + 3; k++) {
        char name[32];
        snprintf(name, sizeof name, "many.%d.weight", k);
        AB_CHECK(ab_census_add(c, name, AB_CENSUS_WEIGHT, 1, AB_F32, &w[k % 6]) == 0, "%s: %s", name, ab_error());
    }
    AB_CHECK(ab_census_add(c, "fc1", AB_CENSUS_ACTIVATION, 2, AB_F16, a) == 0, "pooled after downloads: %s", ab_error());
    AB_CHECK(be->mem.current[AB_MEM_WORKSPACE] > ws0, "the census's counts are charged to the workspace");
    AB_CHECK(ab_census_end(c) == 0, "end: %s", ab_error());
    AB_CHECK(be->mem.current[AB_MEM_WORKSPACE] == ws0 && c->be == NULL, "end releases the counts");
    AB_CHECK(ab_census_end(c) == 0, "end again");
    AB_CHECK(c->n_records == 1, "records %zu", c->n_records);
    const ab_census_record *r = &c->records[0];
    AB_CHECK(r->n_tensors == 2 + 2 * AB_CENSUS_SLOTS + 3, "tensors %zu", r->n_tensors);
    const ab_census_tensor *tw = &r->tensors[0], *ta = &r->tensors[1];
    AB_CHECK(strcmp(tw->name, "fc1.weight") == 0 && tw->n == 6 && tw->zeros == 2 && tw->nonfinite == 0 &&
                 tw->hist[-30 - LMIN] == 2 && tw->hist[-20 - LMIN] == 1 && tw->hist[-1 - LMIN] == 1,
             "fc1.weight: n %lld zeros %lld", (long long)tw->n, (long long)tw->zeros);
    AB_CHECK(strcmp(ta->name, "fc1") == 0 && ta->kind == AB_CENSUS_ACTIVATION && ta->n == 10 && ta->zeros == 2 &&
                 ta->nonfinite == 2 && ta->hist[-24 - LMIN] == 3 && ta->hist[0 - LMIN] == 3,
             "fc1 pooled over three adds: n %lld zeros %lld nonfinite %lld 2^-24 %lld 2^0 %lld", (long long)ta->n,
             (long long)ta->zeros, (long long)ta->nonfinite, (long long)ta->hist[-24 - LMIN], (long long)ta->hist[-LMIN]);
    const ab_census_tensor *t7 = &r->tensors[2 + 7];
    AB_CHECK(strcmp(t7->name, "many.7.weight") == 0 && t7->n == 1 && t7->hist[-30 - LMIN] == 1, "many.7.weight");
    ab_census_figures f;
    ab_census_figures_of(c, r, AB_CENSUS_WEIGHT, &f);
    AB_CHECK(f.tensors == 1 + 2 * AB_CENSUS_SLOTS + 3 && f.n == 6 + 2 * AB_CENSUS_SLOTS + 3, "weights pooled: %lld",
             (long long)f.tensors);
    ab_census_figures_of(c, r, AB_CENSUS_ACTIVATION, &f);
    /* 2^-24 is subnormal in fp16 (at scale 1, the values' own), 1 is normal */
    AB_CHECK(f.tensors == 1 && f.nonzero == 6 && near(f.at_scale_1.subnormal, 0.5) && near(f.at_scale_1.flush, 0.0),
             "activation figures: nonzero %lld subnormal %g", (long long)f.nonzero, f.at_scale_1.subnormal);
    /* no flushed value allowed (6 values): 2^-24 x 2^-1 = 2^-25 is the edge; [1, 2) x 2^15 may overflow */
    AB_CHECK(f.has_safe && f.safe_log2 == -1 && f.max_log2 == 14, "activation safe scale 2^%d..2^%d", f.safe_log2,
             f.max_log2);
    char line[2048];
    ab_census_summary(c, r, line, sizeof line);
    static const char head[] = "Census step 1 (loss scale 1): weight gradients 137 values";
    AB_CHECK(strncmp(line, head, sizeof head - 1) == 0 && !strchr(line, '\n') &&
                 strstr(line, "activation gradients 10 values in 1 tensors (20% zero, 2 non-finite)") &&
                 strstr(line, "at scale 1 0%/50%/0% (+0%)") &&
                 strstr(line, "smallest safe scale 2^-1 (no overflow up to 2^14)"),
             "summary: %s", line);
    char tiny[16];
    ab_census_summary(c, r, tiny, sizeof tiny);
    AB_CHECK(strlen(tiny) == 15, "a short buffer: '%s'", tiny);
    ab_census_free(c);
    ab_census_free(NULL);
}

/* ---- the result record ---- */

static const cJSON *get(const cJSON *o, const char *k) { return cJSON_GetObjectItemCaseSensitive(o, k); }

static void test_result_json(const char *out_path) {
    ab_train_config cfg;
    ab_train_config_defaults(&cfg);
    cfg.precision = AB_PREC_AMP;
    ab_run_record rec;
    memset(&rec, 0, sizeof rec);
    snprintf(rec.started_at, sizeof rec.started_at, "2026-12-02T00:00:00Z");
    snprintf(rec.backend, sizeof rec.backend, "cpu");
    ab_epoch_record ep = {.epoch = 1, .time_s = 1.0, .steps = 2, .samples = 128, .timed_samples = 128,
                          .train_loss = 2.0, .test_loss = 1.9, .test_accuracy = 50.0, .test_metric = 50.0};
    rec.epochs = &ep;
    rec.n_epochs = 1;
    rec.world_size = 1;
    rec.complete = 1;
    AB_CHECK(ab_scaler_init(&rec.scaler, 1, 65536.0f, 2.0f, 0.5f, 2000) == 0, "%s", ab_error());
    AB_CHECK(ab_census_create(50, &rec.census) == 0, "%s", ab_error());
    /* two censuses: at step 1 (scale 2^16) and at step 51 */
    uint16_t g[512];
    float w[300];
    ab_rng r;
    ab_rng_seed(&r, 7);
    /* activation gradients at scale 2^16 whose values at scale 1 span [2^-21, 2^-1): some subnormal
     * there, a safe scale exists */
    for (int k = 0; k < 512; k++)
        ab_store(g, (size_t)k, AB_F16, 65536.0f * (float)ldexp(0.5 + 0.5 * ab_rng_uniform(&r), -(k % 20) - 1));
    for (int k = 0; k < 300; k++) w[k] = 65536.0f * (float)ldexp(ab_rng_uniform_range(&r, -1.0f, 1.0f), -(k % 30));
    for (long step = 1; step <= 51; step += 50) {
        AB_CHECK(ab_census_begin(rec.census, be, step, 65536.0) == 0, "%s", ab_error());
        AB_CHECK(ab_census_add(rec.census, "fc1.weight", AB_CENSUS_WEIGHT, 200, AB_F32, w) == 0 &&
                     ab_census_add(rec.census, "fc1.bias", AB_CENSUS_WEIGHT, 100, AB_F32, w + 200) == 0 &&
                     ab_census_add(rec.census, "fc1", AB_CENSUS_ACTIVATION, 512, AB_F16, g) == 0,
                 "%s", ab_error());
        AB_CHECK(ab_census_end(rec.census) == 0, "%s", ab_error());
    }
    char tmp[] = "/tmp/ab_census_XXXXXX";
    const int fd = mkstemp(tmp);
    AB_CHECK(fd >= 0, "mkstemp");
    if (fd >= 0) close(fd);
    const char *path = out_path ? out_path : tmp;
    AB_CHECK(ab_result_write(path, &cfg, &rec) == 0, "%s", ab_error());
    FILE *f = fopen(path, "rb");
    char *text = NULL;
    long len = 0;
    if (f && fseek(f, 0, SEEK_END) == 0 && (len = ftell(f)) > 0 && fseek(f, 0, SEEK_SET) == 0 &&
        (text = calloc((size_t)len + 1, 1)) && fread(text, 1, (size_t)len, f) != (size_t)len) {
        free(text);
        text = NULL;
    }
    if (f) fclose(f);
    remove(tmp);
    cJSON *o = text ? cJSON_Parse(text) : NULL;
    free(text);
    AB_CHECK(o != NULL, "the record does not parse");
    const cJSON *gc = get(o, "grad_census");
    AB_CHECK(cJSON_IsObject(gc), "no grad_census");
    if (!o || !cJSON_IsObject(gc)) {
        cJSON_Delete(o);
        return;
    }
    AB_CHECK(get(gc, "interval")->valuedouble == 50 && get(gc, "log2_min")->valuedouble == -64 &&
                 get(gc, "log2_max")->valuedouble == 15,
             "interval, log2_min, log2_max");
    const cJSON *recs = get(gc, "records");
    AB_CHECK(cJSON_GetArraySize(recs) == 2, "records: %d", cJSON_GetArraySize(recs));
    const cJSON *r0 = cJSON_GetArrayItem(recs, 0), *r1 = cJSON_GetArrayItem(recs, 1);
    AB_CHECK(get(r0, "step")->valuedouble == 1 && get(r1, "step")->valuedouble == 51 &&
                 get(r0, "loss_scale")->valuedouble == 65536.0,
             "steps and loss scale");
    const cJSON *ts = get(r0, "tensors");
    AB_CHECK(cJSON_GetArraySize(ts) == 3, "tensors: %d", cJSON_GetArraySize(ts));
    static const char *const keys[] = {"name", "kind", "dtype", "n", "zeros", "nonfinite", "hist"};
    const cJSON *t;
    int64_t total = 0;
    cJSON_ArrayForEach(t, ts) {
        for (size_t k = 0; k < sizeof keys / sizeof keys[0]; k++) AB_CHECK(get(t, keys[k]), "tensor lacks %s", keys[k]);
        AB_CHECK(cJSON_GetArraySize(get(t, "hist")) == 80, "hist of %d", cJSON_GetArraySize(get(t, "hist")));
        int64_t sum = 0;
        const cJSON *b;
        cJSON_ArrayForEach(b, get(t, "hist")) sum += (int64_t)b->valuedouble;
        AB_CHECK(sum + (int64_t)get(t, "zeros")->valuedouble + (int64_t)get(t, "nonfinite")->valuedouble ==
                     (int64_t)get(t, "n")->valuedouble,
                 "%s: hist + zeros + nonfinite != n", get(t, "name")->valuestring);
        total += (int64_t)get(t, "n")->valuedouble;
    }
    AB_CHECK(total == 812, "values %lld", (long long)total);
    AB_CHECK(strcmp(get(cJSON_GetArrayItem(ts, 2), "kind")->valuestring, "activation") == 0 &&
                 strcmp(get(cJSON_GetArrayItem(ts, 0), "kind")->valuestring, "weight") == 0 &&
                 strcmp(get(cJSON_GetArrayItem(ts, 2), "dtype")->valuestring, "fp16") == 0 &&
                 strcmp(get(cJSON_GetArrayItem(ts, 0), "dtype")->valuestring, "fp32") == 0,
             "kinds and types");
    const cJSON *d = get(r0, "derived");
    static const char *const dkeys[] = {"tensors", "dtype", "n", "zeros", "nonfinite", "nonzero", "at_scale_1", "at_loss_scale",
                                        "safe_scale", "safe_scale_log2", "max_scale_without_overflow",
                                        "max_scale_without_overflow_log2"};
    for (int kind = 0; kind < 2; kind++) {
        const cJSON *k = get(d, kind ? "activation" : "weight");
        AB_CHECK(cJSON_IsObject(k), "derived lacks %s", kind ? "activation" : "weight");
        for (size_t i = 0; k && i < sizeof dkeys / sizeof dkeys[0]; i++)
            AB_CHECK(get(k, dkeys[i]), "derived.%s lacks %s", kind ? "activation" : "weight", dkeys[i]);
        for (int at = 0; k && at < 2; at++) {
            const cJSON *s = get(k, at ? "at_loss_scale" : "at_scale_1");
            AB_CHECK(cJSON_IsNumber(get(s, "flush")) && cJSON_IsNumber(get(s, "subnormal")) &&
                         cJSON_IsNumber(get(s, "overflow")) && cJSON_IsNumber(get(s, "may_overflow")),
                     "shares of %s", kind ? "activation" : "weight");
        }
    }
    /* the figures in the record are those of the histograms: recomputed here from the JSON */
    const cJSON *act = get(d, "activation");
    const cJSON *ha = get(cJSON_GetArrayItem(ts, 2), "hist");
    int64_t hist[NB];
    for (int b = 0; b < NB; b++) hist[b] = (int64_t)cJSON_GetArrayItem(ha, b)->valuedouble;
    ab_census_shares s1;
    ab_census_shares_at(hist, LMIN, NB, AB_F16, 65536.0, 1.0, &s1);
    AB_CHECK(near(get(get(act, "at_scale_1"), "flush")->valuedouble, s1.flush) &&
                 near(get(get(act, "at_scale_1"), "subnormal")->valuedouble, s1.subnormal) && s1.subnormal > 0.0,
             "activation shares: flush %g subnormal %g", s1.flush, s1.subnormal);
    int lo, hi;
    const int safe = ab_census_safe_scale(hist, LMIN, NB, AB_F16, 65536.0, &lo, &hi);
    AB_CHECK(safe && get(act, "safe_scale_log2")->valuedouble == lo &&
                 get(act, "safe_scale")->valuedouble == ldexp(1.0, lo),
             "safe scale 2^%d", lo);
    /* without a census the record has no grad_census */
    cJSON_Delete(o);
    ab_census_free(rec.census);
    rec.census = NULL;
    cJSON *plain = NULL;
    if (ab_result_write(tmp, &cfg, &rec) == 0 && (f = fopen(tmp, "rb"))) {
        char buf[1 << 16];
        const size_t nread = fread(buf, 1, sizeof buf - 1, f);
        buf[nread] = 0;
        fclose(f);
        plain = cJSON_Parse(buf);
    }
    remove(tmp);
    AB_CHECK(plain && !get(plain, "grad_census"), "a record without a census has grad_census");
    cJSON_Delete(plain);
    ab_scaler_free(&rec.scaler);
}

int main(int argc, char **argv) {
    be = ab_backend_cpu_create(1);
    if (!be) {
        fprintf(stderr, "FAIL backend: %s\n", ab_error());
        return 1;
    }
    test_log2_hist();
    test_shares();
    test_safe_scale();
    test_census_records();
    test_result_json(argc > 1 ? argv[1] : NULL);
    be->ops->destroy(be);
    printf("census: %d failures\n", failures);
    return failures ? 1 : 0;
}
