/* What the reference passes of ref_layers.c and ref_transformer.c share: buffers, draws, and the
 * comparisons against float64 (NMSE, and element by element in the storage type). Static inline:
 * each file includes it. */
#ifndef AB_TESTS_OPS_REF_UTIL_H
#define AB_TESTS_OPS_REF_UTIL_H

#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "half.h"
#include "ops_test.h"

static inline double *dalloc(size_t n) { return calloc(n ? n : 1, sizeof(double)); }
static inline float *falloc(size_t n) { return calloc(n ? n : 1, sizeof(float)); }

/* fp32 values drawn N(0, scale^2), and the same values in float64 (d may be NULL) */
static inline void fill_scaled(float *f, double *d, size_t n, double scale) {
    for (size_t i = 0; i < n; i++) {
        f[i] = (float)(scale * ab_rng_normal(&rng));
        if (d) d[i] = f[i];
    }
}

/* NMSE of got against want within tol (tests/tolerances.h's ab_check_nmse), one failure if not */
static inline void check(const char *what, const float *got, const double *want, size_t n, double tol) {
    if (ab_check_nmse(what, got, want, n, tol)) failures++;
}

/* the NMSE bound of one rounding to fp16 or bf16 */
static inline double lowp_tol(ab_dtype t) { return t == AB_F16 ? AB_TOL_FP16_NMSE : AB_TOL_BF16_NMSE; }

/* one ulp of type t at the magnitude of v (the subnormal step below the smallest normal) */
static inline double store_ulp(ab_dtype t, double v) {
    const int mant = t == AB_F16 ? 10 : t == AB_BF16 ? 7 : 23, emin = t == AB_F16 ? -14 : -126;
    int e = v != 0.0 && isfinite(v) ? ilogb(v) : emin;
    if (e < emin) e = emin;
    return ldexp(1.0, e - mant);
}

/* the float64 value v stored in type t (beyond fp32's range: the infinity it rounds to) */
static inline double stored(double v, ab_dtype t) {
    if (isnan(v)) return v;
    if (fabs(v) > FLT_MAX) return copysign(INFINITY, v);
    return ab_round_to((float)v, t);
}

/* Element by element, n values of type t against float64 references: an element passes when it
 * is the reference stored in t (an infinity, or an overflow to one, included), NaN where the
 * reference is NaN, or finite and within ulps storage ulps of the reference (AB_TOL_STORE_ULPS:
 * one rounding of an fp32 result). Counts one failure and prints the first bad element. */
static inline void check_stored(const char *what, ab_dtype t, const void *got, const double *want, size_t n, double ulps) {
    size_t bad = 0, first = 0;
    for (size_t i = 0; i < n; i++) {
        const double g = ab_load(got, i, t), w = want[i];
        const int ok = isnan(w)
                           ? isnan(g)
                           : g == stored(w, t) || (isfinite(w) && isfinite(g) && fabs(g - w) <= ulps * store_ulp(t, w));
        if (!ok && bad++ == 0) first = i;
    }
    if (bad) {
        fprintf(stderr,
                "FAIL %s: %zu of %zu elements more than %g %s ulp from float64; element %zu: got %.9g, expected %.9g\n",
                what, bad, n, ulps, ab_dtype_name(t), first, (double)ab_load(got, first, t), want[first]);
        failures++;
    }
}

#endif
