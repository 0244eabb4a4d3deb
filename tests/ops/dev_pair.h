/* Tensors held twice for the device pass of test_backend_ops (dev_*.c; a pair: host copy for
 * the CPU backend, device copy for the backend under test) with sentinels after every
 * buffer, and their comparisons: NMSE plus the largest element error, NMSE alone, or bit for bit
 * (any NaN matching any NaN, or the NaN's bits too). Static inline: each case file includes it. */
#ifndef AB_TESTS_OPS_DEV_PAIR_H
#define AB_TESTS_OPS_DEV_PAIR_H

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ops_test.h"

enum { PAD = 64 }; /* sentinel elements after every buffer */
static const unsigned char SENTINEL = 0xA5;
static const ab_dtype TYPES[3] = {AB_F32, AB_F16, AB_BF16};

/* ---- buffers held twice: host copy for the CPU backend, device copy for the other ------------- */

typedef struct {
    size_t n, es;
    ab_dtype t;
    void *h, *d;
    /* to print where an element is on failure: (N, H, W, C) of an image batch, or the row length
     * of a matrix (cols); both 0: a flat index */
    int dims[4];
    size_t cols;
} pair;

static inline pair pair_new(size_t n, ab_dtype t, float lo, float hi) {
    pair p = {.n = n, .es = ab_dtype_size(t), .t = t};
    const size_t bytes = (n + PAD) * p.es;
    char what[64];
    snprintf(what, sizeof what, "device buffer of %zu bytes", bytes);
    p.h = malloc(bytes);
    if (!p.h) die("host buffer");
    memset(p.h, SENTINEL, bytes);
    for (size_t i = 0; i < n; i++) ab_store(p.h, i, t, ab_rng_uniform_range(&rng, lo, hi));
    p.d = ab_alloc(gpu, AB_MEM_WORKSPACE, bytes);
    if (!p.d || gpu->ops->upload(gpu, p.d, p.h, bytes) != 0) die(what);
    return p;
}

static inline pair pair_img(int N, int H, int W, int C, ab_dtype t, float lo, float hi) {
    pair p = pair_new((size_t)N * H * W * C, t, lo, hi);
    p.dims[0] = N, p.dims[1] = H, p.dims[2] = W, p.dims[3] = C;
    return p;
}

static inline pair pair_rows(size_t rows, size_t cols, ab_dtype t, float lo, float hi) {
    pair p = pair_new(rows * cols, t, lo, hi);
    p.cols = cols;
    return p;
}

static inline void pair_set(pair *p, size_t i, float v) { /* plant a value in both copies */
    ab_store(p->h, i, p->t, v);
    if (gpu->ops->upload(gpu, (char *)p->d + i * p->es, (char *)p->h + i * p->es, p->es) != 0) die("upload");
}

static inline void pair_push(const pair *p) { /* the host copy (as the CPU left it) to the device */
    if (gpu->ops->upload(gpu, p->d, p->h, p->n * p->es) != 0) die("upload");
}

static inline void pair_fill(pair *p, float v) { /* every element, both copies */
    for (size_t i = 0; i < p->n; i++) ab_store(p->h, i, p->t, v);
    pair_push(p);
}

static inline void pair_free(pair *p) {
    ab_release(gpu, AB_MEM_WORKSPACE, p->d, (p->n + PAD) * p->es);
    free(p->h);
}

static inline void where(char *buf, size_t cap, const pair *p, size_t i) {
    if (p->dims[3]) {
        const size_t c = i % (size_t)p->dims[3], w = i / p->dims[3] % (size_t)p->dims[2];
        const size_t h = i / p->dims[3] / p->dims[2] % (size_t)p->dims[1], n = i / p->dims[3] / p->dims[2] / p->dims[1];
        snprintf(buf, cap, "%zu (n %zu, h %zu, w %zu, c %zu)", i, n, h, w, c);
    } else if (p->cols) {
        snprintf(buf, cap, "%zu (row %zu, column %zu)", i, i / p->cols, i % p->cols);
    } else {
        snprintf(buf, cap, "%zu", i);
    }
}

/* ---- comparisons ------------------------------------------------------------------------------ */

/* device copy back to the host, the sentinels checked; returns a malloc'd buffer */
static inline unsigned char *fetch(const char *what, const pair *p) {
    const size_t bytes = (p->n + PAD) * p->es;
    unsigned char *g = malloc(bytes);
    if (!g) die("host buffer");
    if (gpu->ops->sync(gpu) != 0 || gpu->ops->download(gpu, g, p->d, bytes) != 0) {
        fprintf(stderr, "FAIL %s: %s\n", what, ab_error());
        failures++;
        memset(g, 0, bytes);
        return g;
    }
    for (size_t b = p->n * p->es; b < bytes; b++)
        if (g[b] != SENTINEL) {
            fprintf(stderr, "FAIL %s: write past the end (element %zu of %zu)\n", what, b / p->es, p->n);
            failures++;
            break;
        }
    return g;
}

/* GPU result vs CPU result: NMSE (NaN/Inf parity included) and the largest element error
 * |a - b| / (|b| + rms(b)); rel_tol INFINITY: NMSE alone (compare_nmse) */
static inline void compare(const char *what, const pair *p, double nmse_tol, double rel_tol) {
    unsigned char *g = fetch(what, p);
    float *a = malloc(p->n * sizeof(float));
    double *ref = malloc(p->n * sizeof(double));
    if (!a || !ref) die("host buffer");
    double sq = 0.0;
    size_t nf = 0;
    for (size_t i = 0; i < p->n; i++) {
        a[i] = ab_load(g, i, p->t);
        ref[i] = ab_load(p->h, i, p->t);
        if (isfinite(ref[i])) sq += ref[i] * ref[i], nf++;
    }
    char at[160];
    size_t w = 0;
    const double e = ab_nmse(a, ref, p->n, &w);
    if (!(e <= nmse_tol)) {
        where(at, sizeof at, p, w);
        fprintf(stderr, "FAIL %s: nmse %.3g > %.3g; worst element %s: got %.9g, expected %.9g\n", what, e, nmse_tol, at,
                p->n ? (double)a[w] : 0.0, p->n ? ref[w] : 0.0);
        failures++;
    } else if (!isinf(rel_tol)) {
        const double rms = nf ? sqrt(sq / (double)nf) : 0.0;
        double worst = 0.0;
        for (size_t i = 0; i < p->n; i++) {
            if (!isfinite(ref[i])) continue; /* parity checked above */
            const double d = fabs((double)a[i] - ref[i]), den = fabs(ref[i]) + rms;
            const double r = den > 0.0 ? d / den : (d > 0.0 ? INFINITY : 0.0);
            if (r > worst) worst = r, w = i;
        }
        if (!(worst <= rel_tol)) {
            where(at, sizeof at, p, w);
            fprintf(stderr,
                    "FAIL %s: largest element error %.3g > %.3g (relative to |expected| + rms %.3g) at %s: got %.9g, "
                    "expected %.9g\n",
                    what, worst, rel_tol, rms, at, (double)a[w], ref[w]);
            failures++;
        }
    }
    free(a);
    free(ref);
    free(g);
}

/* NMSE alone, NaN/Inf parity included: for ops whose largest element error has no bound of its
 * own in tolerances.h (dev_ops.c: GEMMs, column sums, softmax, optimizer steps) */
static inline void compare_nmse(const char *what, const pair *p, double nmse_tol) {
    compare(what, p, nmse_tol, INFINITY);
}

/* tolerances by storage type: fp32 gets the op's own NMSE bound */
static inline void compare_t(const char *what, const pair *p, double fp32_nmse) {
    if (p->t == AB_F16)
        compare(what, p, AB_TOL_FP16_NMSE, AB_TOL_GPU_LAYER_FP16_MAXREL);
    else if (p->t == AB_BF16)
        compare(what, p, AB_TOL_BF16_NMSE, AB_TOL_GPU_LAYER_BF16_MAXREL);
    else
        compare(what, p, fp32_nmse, AB_TOL_GPU_LAYER_FP32_MAXREL);
}

/* bit for bit; nan_any: except that any NaN matches any NaN (x86 keeps a NaN operand's payload,
 * the GPU returns its canonical NaN), else a NaN's sign and payload must match too */
static inline void compare_bitwise(const char *what, const pair *p, int nan_any) {
    unsigned char *g = fetch(what, p);
    for (size_t i = 0; i < p->n; i++) {
        const float a = ab_load(g, i, p->t), b = ab_load(p->h, i, p->t);
        if (memcmp(g + i * p->es, (char *)p->h + i * p->es, p->es) != 0 && !(nan_any && isnan(a) && isnan(b))) {
            char at[160];
            where(at, sizeof at, p, i);
            fprintf(stderr, "FAIL %s: element %s differs: got %.9g, expected %.9g (%s); first of the mismatches\n",
                    what, at, (double)a, (double)b, ab_dtype_name(p->t));
            failures++;
            break;
        }
    }
    free(g);
}

/* the same value exactly, but a NaN made by arithmetic may carry other bits on the GPU */
static inline void compare_exact(const char *what, const pair *p) { compare_bitwise(what, p, 1); }

/* ops that only move or test bits (casts, gathers, ReLU backward): every bit, NaN payloads
 * included. Ops that pass a NaN through arithmetic (accumulate, ReLU forward, unscale) use
 * compare_exact: the GPU gives its canonical NaN there (seen on the H200), x86 the operand's. */
static inline void compare_bits(const char *what, const pair *p) { compare_bitwise(what, p, 0); }

/* ---- found_inf flags ---------------------------------------------------------------------------- */

/* a found_inf flag held twice, 0 on both; the shared rng left as it was, so that the cases after
 * one that takes a flag draw the inputs they drew before */
static inline pair flag_new(void) {
    const ab_rng kept = rng;
    pair p = pair_new(1, AB_F32, 0.0f, 0.0f);
    rng = kept;
    return p;
}
/* 1 when one of n fp32 values is infinite or NaN */
static inline int any_nonfinite(const float *x, size_t n) {
    for (size_t i = 0; i < n; i++)
        if (!isfinite(x[i])) return 1;
    return 0;
}
/* both backends set the flag alike, and as want says */
static inline void compare_flag(const char *what, const pair *flag, int want) {
    int32_t fg = -1;
    if (gpu->ops->download(gpu, &fg, flag->d, 4) != 0) failures++;
    AB_CHECK(fg == *(int32_t *)flag->h && fg == want, "%s: found_inf device %d, cpu %d, expected %d", what, fg,
             *(int32_t *)flag->h, want);
}

#endif
