/* The float64 finite-difference gradient check, one copy for every test that has one
 * (tests/ops/ref_layers.c, ref_transformer.c, tests/models/test_grad.c, test_transformer.c):
 * perturb one element of a double buffer by +-h, evaluate a scalar loss, take the central
 * difference, and compare an analytic (fp32) gradient with the differences by the gradient
 * tolerance of tolerances.h, the worst element (index, both values) printed on failure. Buffers
 * are flat arrays of n doubles; the usual loss is L = sum(R * y) over an op's float64 forward y =
 * f(in[0], in[1], ...) of ny outputs, whose gradient with respect to in[k] is what the op's
 * backward returns for the upstream gradient R. */
#ifndef AB_FD_CHECK_H
#define AB_FD_CHECK_H

#include <math.h>
#include <stddef.h>
#include <stdlib.h>

#include "tolerances.h"

/* The step AB_TOL_GRAD_REL was derived for (tolerances.h): truncation O(h^2) ~ 1e-12,
 * cancellation ~ 1e-16 / h ~ 1e-10 on O(1) losses. */
#define AB_FD_STEP 1e-6
/* An analytic gradient against the finite differences, the whole tensor by NMSE:
 * AB_TOL_GRAD_REL squared, as every gradient check compares. */
#define AB_FD_NMSE (AB_TOL_GRAD_REL * AB_TOL_GRAD_REL)

/* A scalar float64 loss of what ctx points at, the buffer being perturbed among it. */
typedef double (*ab_fd_loss)(const void *ctx);

/* g[i] = (L(v + h e_i) - L(v - h e_i)) / 2h for i < n, h = AB_FD_STEP; each v[i] is restored
 * bit for bit before the next. g (n) must not overlap v. */
static inline void ab_fd_central(double *v, size_t n, ab_fd_loss loss, const void *ctx, double *g) {
    const double h = AB_FD_STEP;
    for (size_t i = 0; i < n; i++) {
        const double keep = v[i];
        v[i] = keep + h;
        const double lp = loss(ctx);
        v[i] = keep - h;
        const double lm = loss(ctx);
        v[i] = keep;
        g[i] = (lp - lm) / (2.0 * h);
    }
}

/* An op's float64 forward and its loss L = sum(R * y). */
typedef struct ab_fd_fn {
    void (*forward)(const struct ab_fd_fn *f, double *y); /* y: (ny) */
    double **in;                                          /* the inputs a finite difference perturbs */
    size_t ny;
    const double *R; /* (ny) */
    const void *ctx; /* shapes and whatever else forward reads */
} ab_fd_fn;

typedef struct {
    const ab_fd_fn *f;
    double *y; /* (ny) scratch */
} ab_fd_fn_eval;

static inline double ab_fd_fn_loss(const void *p) {
    const ab_fd_fn_eval *e = p;
    e->f->forward(e->f, e->y);
    double L = 0.0;
    for (size_t i = 0; i < e->f->ny; i++) L += e->f->R[i] * e->y[i];
    return L;
}

/* g (n) = dL / d in[k][0..n) by central differences. Out of memory leaves g NaN, which no check
 * passes. */
static inline void ab_fd_grad(const ab_fd_fn *f, int k, size_t n, double *g) {
    ab_fd_fn_eval e = {f, calloc(f->ny ? f->ny : 1, sizeof(double))};
    if (!e.y) {
        for (size_t i = 0; i < n; i++) g[i] = NAN;
        return;
    }
    ab_fd_central(f->in[k], n, ab_fd_fn_loss, &e, g);
    free(e.y);
}

/* 1 when the analytic gradient (n) is further than AB_FD_NMSE from the finite differences (or
 * NaN/Inf where they are finite), with one line naming what, the NMSE and the worst element's
 * index and both values; else 0. Add it to the test's failure count. */
static inline int ab_fd_check(const char *what, const float *analytic, const double *fd, size_t n) {
    return ab_check_nmse(what, analytic, fd, n, AB_FD_NMSE);
}

#endif
