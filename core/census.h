/* The gradient census (--grad-census, docs/gradient-range.md): at optimizer step 1 and every
 * interval steps after, for every parameter tensor's weight gradient and every layer's output
 * gradient, a histogram of floor(log2 |g|) with the counts of exact zeros and non-finite values,
 * taken from the values the run holds: fp32 in fp32 mode; under amp the fp16 values as stored,
 * still multiplied by the loss scale, which the record keeps (AMP weight gradients: the fp32
 * gradient buffer after the last micro-batch, before unscaling). hist[i] counts the finite non-zero
 * values with floor(log2 |g|) == log2_min + i, those below 2^log2_min in hist[0], those at or above
 * 2^log2_max in the last bin; log2_min = -64 .. log2_max = 15 (80 bins) holds every fp16 value
 * (2^-24 .. 65504) in the bin of its own exponent, fp32 values from 2^-64 to 2^16 likewise. A
 * census reads gradients and never changes them. The core only: the backend is reached through its
 * ops table (log2_hist, alloc, zero, download); the caller names the tensors. The fp16 edges
 * 2^-25 (flush) and 2^-14 (subnormal) fall on bin edges; 65520 (overflow) inside the bin of 15.
 *
 * One census: ab_census_begin (a record, and a device buffer of AB_CENSUS_SLOTS counts charged to
 * the workspace category: 64 x 82 x 8 bytes = 41 KiB while it runs), ab_census_add for each tensor
 * (one log2_hist on the device; the same name again pools into the same entry, as the micro-batches
 * of one layer), ab_census_end (one download per AB_CENSUS_SLOTS tensors, the buffer released).
 * ab_census_end must run before the backend goes, after an error too (it then only releases).
 *
 * Derived figures (ab_census_figures_of, a pure function of the histograms): how fp16 would hold
 * the values, as shares of the finite non-zero ones: flushed to zero (|g| < 2^-25), subnormal
 * (2^-25 <= |g| < 2^-14), overflowing (|g| >= 65520), at scale 1 and at the run's loss scale; and
 * the smallest power-of-two scale that keeps 99.9% of them out of the flush range while
 * overflowing none. How bins become figures: see ab_census_shares_at. */
#ifndef AB_CENSUS_H
#define AB_CENSUS_H

#include <stddef.h>
#include <stdint.h>

#include "backend.h"

#define AB_CENSUS_LOG2_MIN (-64)
#define AB_CENSUS_LOG2_MAX 15
#define AB_CENSUS_BINS (AB_CENSUS_LOG2_MAX - AB_CENSUS_LOG2_MIN + 1) /* 80 */
#define AB_CENSUS_SLOTS 64 /* tensors counted on the device between two downloads */

/* fp16's edges as binary exponents: below 2^-25 a value rounds to zero, below 2^-14 it is
 * subnormal, from 65520 (= 2^16 - 2^4, inside the bin of 15) it rounds to infinity */
#define AB_CENSUS_FP16_FLUSH_LOG2 (-25)
#define AB_CENSUS_FP16_SUBNORMAL_LOG2 (-14)
#define AB_CENSUS_FP16_OVERFLOW 65520.0
/* the safe scale may leave 1 in this many non-zero values in the flush range (99.9% kept out) */
#define AB_CENSUS_SAFE_FLUSH_PER 1000

typedef enum { AB_CENSUS_WEIGHT = 0, AB_CENSUS_ACTIVATION = 1, AB_CENSUS_KINDS } ab_census_kind;
const char *ab_census_kind_name(ab_census_kind k); /* "weight" | "activation" */

typedef struct {
    char *name;          /* "layer1.0.conv1.weight" (owned) */
    ab_census_kind kind;
    ab_dtype dtype;      /* the type the values were held in (pooled: the widest range met) */
    int64_t n, zeros, nonfinite;
    int64_t hist[AB_CENSUS_BINS];
    int slot; /* the device slot holding its counts not yet downloaded; -1 when none */
} ab_census_tensor;

typedef struct {
    long step;         /* the 1-based optimizer step whose backward produced the values (before its update) */
    double loss_scale; /* the scale the values carry: the run's loss scale under amp, 1 in fp32 and bf16 */
    ab_census_tensor *tensors;
    size_t n_tensors, cap_tensors;
} ab_census_record;

typedef struct ab_census {
    int interval; /* K: a census at step 1, 1 + K, 1 + 2K, ... */
    int log2_min, log2_max;
    ab_census_record *records;
    size_t n_records, cap_records;
    /* between begin and end: the backend, its counts buffer (AB_CENSUS_SLOTS x (bins + 2)) and the
     * host copy it is downloaded into; pending = slots in use */
    ab_backend *be;
    int64_t *d_counts, *h_counts;
    int pending;
} ab_census;

/* interval >= 1. 0, or -1 with ab_error(). */
int ab_census_create(int interval, ab_census **out);
/* Frees the records; a census still open is left to ab_census_end (its device buffer is not
 * touched here: the backend may be gone). NULL is fine. */
void ab_census_free(ab_census *c);
/* whether 1-based optimizer step `step` takes a census: 1, 1 + K, 1 + 2K, ... */
int ab_census_due(const ab_census *c, long step);

/* Opens a record for step (1-based) whose values carry loss_scale (> 0, finite). */
int ab_census_begin(ab_census *c, ab_backend *be, long step, double loss_scale);
/* Counts x (n elements of type t in be's memory): into the open record's entry of that name,
 * created with kind, or pooled with the values already counted under it (same kind). */
int ab_census_add(ab_census *c, const char *name, ab_census_kind kind, size_t n, ab_dtype t, const void *x);
/* Downloads what is pending and releases the device buffer. Returns 0 or -1; releases in either
 * case, and does nothing when no census is open. */
int ab_census_end(ab_census *c);

/* ---- derived figures: pure functions of histograms ---- */

/* Shares of the finite non-zero values (NaN when there are none). */
typedef struct {
    double flush;        /* |g| < 2^-25: fp16 rounds it to zero */
    double subnormal;    /* 2^-25 <= |g| < 2^-14 */
    double overflow;     /* certainly |g| >= 65520: a bin wholly at or above it */
    double may_overflow; /* the bin that holds 65520 ([2^15, 2^16) at an integer shift): from none to all
                          * of it overflows; overflow + may_overflow is the upper bound */
} ab_census_shares;

/* The bins of hist (nbins, hist[0] = floor(log2) <= log2_min, the last >= log2_min + nbins - 1) of
 * values held in type t, as fp16 would hold them at target scale `to` when they carry scale `from`
 * now: value * to / from, a shift of log2(to / from) bins (at scale 1 an AMP value v stored at scale
 * S is v / S: log2 S bins down). A bin covers [2^L, 2^(L+1)) before the shift; the first reaches down
 * to t's smallest subnormal and the last up to t's largest finite value (fp16: 2^-24 and 65504, so
 * with log2_max 15 fp16's last bin is [2^15, 65504]; fp32: 2^-149 and FLT_MAX). A bin is classed by
 * the smallest value it can hold after the shift: flushed if that is below 2^-25, subnormal if below
 * 2^-14, overflowing if at or above 65520; it may overflow if it reaches 65520 without starting
 * there. For power-of-two scales (the dynamic scaler's; a static one set so) the shift is whole and
 * 2^-25 and 2^-14 are bin edges: flush and subnormal are exact but for the first bin, which counts
 * by its smallest value; the overflow edge falls inside a bin, the one of 15. For other scales the
 * shift is fractional, and flush, flush + subnormal are upper bounds. nonzero = the sum of hist,
 * the denominator. */
void ab_census_shares_at(const int64_t *hist, int log2_min, int nbins, ab_dtype t, double from, double to,
                         ab_census_shares *out);

/* The smallest power-of-two scale 2^t (values now at scale `from`) that keeps all but
 * 1 in AB_CENSUS_SAFE_FLUSH_PER of the finite non-zero values out of the flush range while none
 * overflows: safe by the histogram, never by luck. Conservative where the bins cannot tell, as
 * ab_census_shares_at classes them: a bin that may be flushed counts as flushed (the first, down to
 * t's smallest value; any bin at a fractional shift, when `from` is no power of two), a bin that may
 * overflow as overflowing (the one holding 65520; the last, up to t's largest value); so the largest
 * overflow-free scale may be half what the exact values allow (fp32 values in the last bin: far
 * less), and a safe scale is missed only when the exact values would leave less room than that.
 * With power-of-two scales the flush side is exact but for the first bin (2^-25 is a bin edge).
 * *t_min: that t (INT32_MAX when no t in [-256, 256] keeps the values out of the flush range);
 * *t_max: the largest t with no overflow (INT32_MIN when every t may overflow). Returns 1 when a
 * safe scale exists (t_min <= t_max), 0 when none does: the values span more than fp16 keeps, or
 * there are none (then both are INT32_MAX). */
int ab_census_safe_scale(const int64_t *hist, int log2_min, int nbins, ab_dtype t, double from, int *t_min, int *t_max);

/* The figures of one kind of a record: its tensors pooled. */
typedef struct {
    int64_t tensors, n, zeros, nonfinite, nonzero; /* nonzero: finite non-zero values */
    ab_dtype dtype;                                /* the widest range among the tensors' types */
    int64_t hist[AB_CENSUS_BINS];                  /* pooled */
    ab_census_shares at_scale_1, at_loss_scale;
    int has_safe;       /* a safe scale exists: 2^safe_log2 */
    int safe_log2;      /* valid when has_safe */
    int max_log2;       /* the largest power-of-two scale overflowing none; INT32_MAX: any (no values) */
} ab_census_figures;

void ab_census_figures_of(const ab_census *c, const ab_census_record *r, ab_census_kind kind, ab_census_figures *out);

/* One line (no newline) for the record, as printed at run time. */
void ab_census_summary(const ab_census *c, const ab_census_record *r, char *buf, size_t n);


#endif
