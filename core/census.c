/* The gradient census: records of log2 histograms of gradient tensors, their derived figures, the
 * one-line summary and the result record's grad_census object (core/census.h). */
#include "census.h"

#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { SLOT = AB_CENSUS_BINS + 2 }; /* one tensor's counts on the device: bins, zeros, non-finite */

const char *ab_census_kind_name(ab_census_kind k) { return k == AB_CENSUS_ACTIVATION ? "activation" : "weight"; }

int ab_census_create(int interval, ab_census **out) {
    *out = NULL;
    if (interval < 1) return ab_errorf("gradient census: the interval must be at least 1 (got %d)", interval);
    ab_census *c = calloc(1, sizeof *c);
    if (!c) return ab_errorf("out of host memory");
    c->interval = interval;
    c->log2_min = AB_CENSUS_LOG2_MIN;
    c->log2_max = AB_CENSUS_LOG2_MAX;
    *out = c;
    return 0;
}

void ab_census_free(ab_census *c) {
    if (!c) return;
    for (size_t i = 0; i < c->n_records; i++) {
        for (size_t k = 0; k < c->records[i].n_tensors; k++) free(c->records[i].tensors[k].name);
        free(c->records[i].tensors);
    }
    free(c->records);
    free(c->h_counts);
    free(c);
}

int ab_census_due(const ab_census *c, long step) {
    return c && step >= 1 && (step - 1) % c->interval == 0;
}

static void release(ab_census *c) {
    if (c->be && c->d_counts) ab_release(c->be, AB_MEM_WORKSPACE, c->d_counts, AB_CENSUS_SLOTS * SLOT * sizeof(int64_t));
    c->d_counts = NULL;
    c->be = NULL;
    c->pending = 0;
}

int ab_census_begin(ab_census *c, ab_backend *be, long step, double loss_scale) {
    if (c->be) return ab_errorf("gradient census: a census is already open (step %ld)", c->records[c->n_records - 1].step);
    if (step < 1) return ab_errorf("gradient census: step %ld is not a 1-based optimizer step", step);
    if (!(loss_scale > 0.0) || !isfinite(loss_scale))
        return ab_errorf("gradient census: loss scale %g is not positive and finite", loss_scale);
    if (!be->ops->log2_hist) return ab_errorf("gradient census: the %s backend has no log2_hist op", be->ops->name);
    if (c->n_records == c->cap_records) {
        const size_t cap = c->cap_records ? 2 * c->cap_records : 16;
        ab_census_record *r = realloc(c->records, cap * sizeof *r);
        if (!r) return ab_errorf("out of host memory");
        c->records = r;
        c->cap_records = cap;
    }
    const size_t bytes = AB_CENSUS_SLOTS * SLOT * sizeof(int64_t);
    if (!c->h_counts && !(c->h_counts = malloc(bytes))) return ab_errorf("out of host memory");
    c->d_counts = ab_alloc_for(be, AB_MEM_WORKSPACE, bytes, "the gradient census's counts");
    if (!c->d_counts) return -1;
    c->be = be;
    if (be->ops->zero(be, c->d_counts, bytes) != 0) {
        release(c);
        return -1;
    }
    c->records[c->n_records++] = (ab_census_record){.step = step, .loss_scale = loss_scale};
    return 0;
}

/* the pending slots' counts into their entries; the device buffer zeroed for the next ones */
static int flush(ab_census *c) {
    if (!c->pending) return 0;
    ab_backend *be = c->be;
    const size_t bytes = (size_t)c->pending * SLOT * sizeof(int64_t);
    AB_TRY(be->ops->download(be, c->h_counts, c->d_counts, bytes));
    ab_census_record *r = &c->records[c->n_records - 1];
    for (size_t k = 0; k < r->n_tensors; k++) {
        ab_census_tensor *e = &r->tensors[k];
        if (e->slot < 0) continue;
        const int64_t *h = c->h_counts + (size_t)e->slot * SLOT;
        for (int b = 0; b < AB_CENSUS_BINS; b++) e->hist[b] += h[b];
        e->zeros += h[AB_CENSUS_BINS];
        e->nonfinite += h[AB_CENSUS_BINS + 1];
        e->slot = -1;
    }
    c->pending = 0;
    return be->ops->zero(be, c->d_counts, bytes);
}

/* of two types, the one whose finite values span more: fp16 < bf16 < fp32 */
static ab_dtype wider(ab_dtype a, ab_dtype b) {
    const int ra = a == AB_F32 ? 2 : a == AB_BF16 ? 1 : 0, rb = b == AB_F32 ? 2 : b == AB_BF16 ? 1 : 0;
    return ra >= rb ? a : b;
}

int ab_census_add(ab_census *c, const char *name, ab_census_kind kind, size_t n, ab_dtype t, const void *x) {
    if (!c->be) return ab_errorf("gradient census: %s counted with no census open", name);
    if (t != AB_F32 && t != AB_F16 && t != AB_BF16) return ab_errorf("gradient census: %s: unknown type %d", name, (int)t);
    if (kind != AB_CENSUS_WEIGHT && kind != AB_CENSUS_ACTIVATION)
        return ab_errorf("gradient census: %s: unknown kind %d", name, (int)kind);
    ab_census_record *r = &c->records[c->n_records - 1];
    ab_census_tensor *e = NULL;
    for (size_t k = r->n_tensors; k-- > 0;)
        if (strcmp(r->tensors[k].name, name) == 0) {
            e = &r->tensors[k];
            break;
        }
    if (e && e->kind != kind)
        return ab_errorf("gradient census: %s counted as %s and as %s", name, ab_census_kind_name(e->kind),
                         ab_census_kind_name(kind));
    if (!e) {
        if (r->n_tensors == r->cap_tensors) {
            const size_t cap = r->cap_tensors ? 2 * r->cap_tensors : 64;
            ab_census_tensor *p = realloc(r->tensors, cap * sizeof *p);
            if (!p) return ab_errorf("out of host memory");
            r->tensors = p;
            r->cap_tensors = cap;
        }
        char *copy = strdup(name);
        if (!copy) return ab_errorf("out of host memory");
        e = &r->tensors[r->n_tensors++];
        *e = (ab_census_tensor){.name = copy, .kind = kind, .dtype = t, .slot = -1};
    }
    e->dtype = wider(e->dtype, t);
    if (e->slot < 0) {
        if (c->pending == AB_CENSUS_SLOTS) AB_TRY(flush(c));
        e->slot = c->pending++;
    }
    e->n += (int64_t)n;
    return c->be->ops->log2_hist(c->be, n, t, x, c->log2_min, AB_CENSUS_BINS, c->d_counts + (size_t)e->slot * SLOT);
}

int ab_census_end(ab_census *c) {
    if (!c->be) return 0;
    const int rc = flush(c);
    release(c);
    return rc;
}

/* ---- derived figures ---- */

/* log2(to / from): whole when the ratio is a power of two (frexp, no rounding of a logarithm) */
static double shift_log2(double from, double to) {
    const double r = to / from;
    int e;
    const double m = frexp(r, &e);
    return m == 0.5 ? (double)(e - 1) : log2(r);
}

/* log2 of the smallest positive and the largest finite value of type t */
static void type_range(ab_dtype t, double *bottom, double *top) {
    *bottom = t == AB_F16 ? -24.0 : t == AB_BF16 ? -133.0 : -149.0;
    *top = t == AB_F16 ? log2(65504.0) : t == AB_BF16 ? log2(0x1.fep127) : log2(0x1.fffffep127);
}

/* Bin b of nbins in log2 after a shift of d: from *lo (held) up to *hi, which it does not reach
 * (*hi_in 0: 2^(L+1)) or may hold (*hi_in 1: the type's largest value, where the last bin ends and
 * where a bin above it would). The first bin reaches down to the type's smallest value. */
static void bin_range(int b, int log2_min, int nbins, ab_dtype t, double d, double *lo, double *hi, int *hi_in) {
    double bottom, top;
    type_range(t, &bottom, &top);
    const double L = (double)(log2_min + b);
    *lo = (b == 0 && bottom < L ? bottom : L) + d;
    *hi_in = b == nbins - 1 || top < L + 1.0;
    *hi = (*hi_in ? top : L + 1.0) + d;
}

/* whether a bin from lo to hi (hi_in: held) may reach 65520 */
static int reaches(double hi, int hi_in, double over) { return hi_in ? hi >= over : hi > over; }

void ab_census_shares_at(const int64_t *hist, int log2_min, int nbins, ab_dtype t, double from, double to,
                         ab_census_shares *out) {
    const double d = shift_log2(from, to), over = log2(AB_CENSUS_FP16_OVERFLOW);
    int64_t nonzero = 0, flush = 0, sub = 0, ovf = 0, may = 0;
    for (int b = 0; b < nbins; b++) {
        double lo, hi;
        int hi_in;
        bin_range(b, log2_min, nbins, t, d, &lo, &hi, &hi_in);
        nonzero += hist[b];
        if (lo < AB_CENSUS_FP16_FLUSH_LOG2) flush += hist[b];
        else if (lo < AB_CENSUS_FP16_SUBNORMAL_LOG2) sub += hist[b];
        if (lo >= over) ovf += hist[b];
        else if (reaches(hi, hi_in, over)) may += hist[b];
    }
    const double den = (double)nonzero;
    *out = nonzero ? (ab_census_shares){flush / den, sub / den, ovf / den, may / den}
                   : (ab_census_shares){NAN, NAN, NAN, NAN};
}

int ab_census_safe_scale(const int64_t *hist, int log2_min, int nbins, ab_dtype type, double from, int *t_min, int *t_max) {
    const double over = log2(AB_CENSUS_FP16_OVERFLOW);
    int64_t nonzero = 0;
    for (int b = 0; b < nbins; b++) nonzero += hist[b];
    *t_min = INT32_MAX;
    *t_max = nonzero ? INT32_MIN : INT32_MAX;
    if (!nonzero) return 0;
    for (int t = -256; t <= 256; t++) {
        const double d = shift_log2(from, ldexp(1.0, t));
        int64_t flush = 0, ovf = 0;
        for (int b = 0; b < nbins; b++) {
            double lo, hi;
            int hi_in;
            bin_range(b, log2_min, nbins, type, d, &lo, &hi, &hi_in);
            if (lo < AB_CENSUS_FP16_FLUSH_LOG2) flush += hist[b];
            if (reaches(hi, hi_in, over)) ovf += hist[b]; /* certainly or maybe */
        }
        /* at most 1 in AB_CENSUS_SAFE_FLUSH_PER (1000) left in the flush range */
        if (*t_min == INT32_MAX && flush * AB_CENSUS_SAFE_FLUSH_PER <= nonzero) *t_min = t;
        if (ovf == 0) *t_max = t;
    }
    return *t_min <= *t_max;
}

void ab_census_figures_of(const ab_census *c, const ab_census_record *r, ab_census_kind kind, ab_census_figures *out) {
    memset(out, 0, sizeof *out);
    out->dtype = AB_F16;
    for (size_t k = 0; k < r->n_tensors; k++) {
        const ab_census_tensor *e = &r->tensors[k];
        if (e->kind != kind) continue;
        out->dtype = wider(out->dtype, e->dtype);
        out->tensors++;
        out->n += e->n;
        out->zeros += e->zeros;
        out->nonfinite += e->nonfinite;
        for (int b = 0; b < AB_CENSUS_BINS; b++) out->hist[b] += e->hist[b];
    }
    for (int b = 0; b < AB_CENSUS_BINS; b++) out->nonzero += out->hist[b];
    ab_census_shares_at(out->hist, c->log2_min, AB_CENSUS_BINS, out->dtype, r->loss_scale, 1.0, &out->at_scale_1);
    ab_census_shares_at(out->hist, c->log2_min, AB_CENSUS_BINS, out->dtype, r->loss_scale, r->loss_scale,
                        &out->at_loss_scale);
    int t_min, t_max;
    out->has_safe =
        ab_census_safe_scale(out->hist, c->log2_min, AB_CENSUS_BINS, out->dtype, r->loss_scale, &t_min, &t_max);
    out->safe_log2 = out->has_safe ? t_min : 0;
    out->max_log2 = t_max;
}

/* ---- the summary line ---- */

static int pct(char *buf, size_t n, double share) {
    return isnan(share) ? snprintf(buf, n, "-") : snprintf(buf, n, "%.3g%%", 100.0 * share);
}

static size_t kind_summary(const ab_census_figures *f, ab_census_kind kind, double scale, char *buf, size_t n) {
    char a[4][24], b[4][24]; /* at scale 1, at the loss scale: flush, subnormal, overflow, may overflow */
    const ab_census_shares *sh[2] = {&f->at_scale_1, &f->at_loss_scale};
    for (int i = 0; i < 2; i++) {
        char(*p)[24] = i ? b : a;
        pct(p[0], 24, sh[i]->flush);
        pct(p[1], 24, sh[i]->subnormal);
        pct(p[2], 24, sh[i]->overflow);
        pct(p[3], 24, sh[i]->may_overflow);
    }
    char zero[24];
    pct(zero, sizeof zero, f->n ? (double)f->zeros / (double)f->n : NAN);
    int k = snprintf(buf, n,
                     "%s gradients %lld values in %lld tensors (%s zero, %lld non-finite); fp16 flush/subnormal/"
                     "overflow (+may) at scale 1 %s/%s/%s (+%s), at %g %s/%s/%s (+%s)",
                     ab_census_kind_name(kind), (long long)f->n, (long long)f->tensors, zero, (long long)f->nonfinite,
                     a[0], a[1], a[2], a[3], scale, b[0], b[1], b[2], b[3]);
    if (kind == AB_CENSUS_ACTIVATION && k >= 0 && (size_t)k < n) {
        if (f->has_safe)
            k += snprintf(buf + k, n - (size_t)k, "; smallest safe scale 2^%d (no overflow up to 2^%d)", f->safe_log2,
                          f->max_log2);
        else if (f->nonzero)
            k += snprintf(buf + k, n - (size_t)k, "; no power-of-two scale is safe");
    }
    return k < 0 ? 0 : (size_t)k < n ? (size_t)k : n - 1;
}

void ab_census_summary(const ab_census *c, const ab_census_record *r, char *buf, size_t n) {
    if (!n) return;
    size_t k = (size_t)snprintf(buf, n, "Census step %ld (loss scale %g): ", r->step, r->loss_scale);
    if (k >= n) return;
    for (int kind = 0; kind < AB_CENSUS_KINDS; kind++) {
        ab_census_figures f;
        ab_census_figures_of(c, r, (ab_census_kind)kind, &f);
        if (kind && k + 2 < n) k += (size_t)snprintf(buf + k, n - k, "; ");
        if (k < n) k += kind_summary(&f, (ab_census_kind)kind, r->loss_scale, buf + k, n - k);
    }
}
