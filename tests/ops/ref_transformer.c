/* The reference pass of test_backend_ops (ops_test.h) for the transformer ops: the CPU backend
 * against float64 references on small odd shapes, one case per call of an op under test, backward
 * against central finite differences in float64 of L = sum(R * forward):
 *   - layer norm (fp32 in and out, fp32 in and fp16 out, fp16 and bf16 in and out, the fp32 input
 *     with an fp16 gradient), with its weight and bias, accumulation and in place;
 *   - exact GELU over a sweep of |x| < 12 (and the exp and normal CDF of core/kernel_math.h it is
 *     built on), tanh (the pooler's); fp16 and bf16 one rounding from the fp32 value, within a
 *     storage ulp of float64; NaN, infinities, 65504 (GELU's dy * 1.08 overflowing fp16), signed
 *     zeros and subnormals passed through as PyTorch does;
 *   - the masked attention softmax (padding keys, a fully masked row, NaN and inf at masked keys,
 *     scores of 10^4) and its backward;
 *   - dropout with its counter-based mask: kept fraction, scaling, the backward's same mask, fp16
 *     and bf16 (a kept 65504 overflowing to inf in fp16, a dropped NaN becoming 0);
 *   - BERT's embeddings (word + position + token type), forward with out-of-range ids and types
 *     (NaN rows) and the tables' gradients (a repeated id adds, bad rows skipped, accumulation);
 *   - batched products (strided heads, transposes, fp16 and bf16 with one rounding, fp16 in and
 *     fp32 out with padding between the outputs that must survive). */
#include <float.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fd_check.h"
#include "half.h"
#include "kernel_math.h"
#include "ops_test.h"
#include "ref_util.h"
#include "rng.h"
#include "tolerances.h"

static void fill(float *f, double *d, size_t n, double scale) { fill_scaled(f, d, n, scale); }

/* Element by element against float64 with an absolute bound: NaN where the reference is NaN, the
 * same infinity, else within tol. Counts one failure and prints the first bad element. */
static void check_abs(const char *what, const float *got, const double *want, size_t n, double tol) {
    size_t bad = 0, first = 0;
    for (size_t i = 0; i < n; i++) {
        const double g = got[i], w = want[i];
        const int ok = isnan(w) ? isnan(g) : isinf(w) ? g == w : isfinite(g) && fabs(g - w) <= tol;
        if (!ok && bad++ == 0) first = i;
    }
    if (bad) {
        fprintf(stderr,
                "FAIL %s: %zu of %zu elements more than %g from float64; element %zu: got %.9g, expected %.9g\n", what,
                bad, n, tol, first, (double)got[first], want[first]);
        failures++;
    }
}

/* ---- layer norm ---- */

typedef struct {
    int R, C;
    double eps;
} ln_ctx;

static void ln_ref(const ab_fd_fn *f, double *y) {
    const ln_ctx *c = f->ctx;
    const double *x = f->in[0], *g = f->in[1], *b = f->in[2];
    for (int r = 0; r < c->R; r++) {
        double m = 0, v = 0;
        for (int k = 0; k < c->C; k++) m += x[r * c->C + k];
        m /= c->C;
        for (int k = 0; k < c->C; k++) v += (x[r * c->C + k] - m) * (x[r * c->C + k] - m);
        v /= c->C;
        const double rs = 1.0 / sqrt(v + c->eps);
        for (int k = 0; k < c->C; k++) y[r * c->C + k] = (x[r * c->C + k] - m) * rs * g[k] + b[k];
    }
}

static void test_layernorm(ab_backend *be, int R, int C) {
    const size_t n = (size_t)R * C;
    ln_ctx lc = {R, C, 1e-12};
    float *x = falloc(n), *g = falloc(C), *b = falloc(C), *Rf = falloc(n), *y = falloc(n), *dx = falloc(n);
    float *dg = falloc(C), *db = falloc(C), *mean = falloc(R), *rstd = falloc(R);
    double *xd = dalloc(n), *gd = dalloc(C), *bd = dalloc(C), *Rd = dalloc(n), *yd = dalloc(n);
    double *gx = dalloc(n), *gg = dalloc(C), *gb = dalloc(C);
    for (size_t i = 0; i < n; i++) xd[i] = x[i] = (float)(3.0 + 2.0 * ab_rng_normal(&rng)); /* mean far from 0 */
    for (int k = 0; k < C; k++) {
        gd[k] = g[k] = (float)(1.0 + 0.3 * ab_rng_normal(&rng));
        bd[k] = b[k] = (float)(0.3 * ab_rng_normal(&rng));
    }
    fill(Rf, Rd, n, 1.0);
    double *in[3] = {xd, gd, bd};
    ab_fd_fn f = {ln_ref, in, n, Rd, &lc};
    char what[360];
    ln_ref(&f, yd);
    op_case_label(what, sizeof what, AB_OP_layernorm_forward, "fp32 -> fp32 R%d C%d, the mean far from 0", R, C);
    AB_CHECK(be->ops->layernorm_forward(be, R, C, AB_F32, x, g, b, 1e-12f, mean, rstd, AB_F32, y) == 0, "%s",
             ab_error());
    check(what, y, yd, n, AB_TOL_FP32_NMSE);
    ab_fd_grad(&f, 0, n, gx);
    ab_fd_grad(&f, 1, C, gg);
    ab_fd_grad(&f, 2, C, gb);
    for (int k = 0; k < C; k++) dg[k] = db[k] = NAN; /* acc 0 overwrites */
    op_case_label(what, sizeof what, AB_OP_layernorm_backward, "fp32 R%d C%d acc 0 over NaN, against finite differences", R,
              C);
    AB_CHECK(be->ops->layernorm_backward(be, R, C, AB_F32, x, AB_F32, Rf, g, mean, rstd, 0.0f, dg, db, dx) == 0, "%s",
             ab_error());
    snprintf(what, sizeof what, "layernorm R%d C%d dx against finite differences", R, C);
    failures += ab_fd_check(what, dx, gx, n);
    snprintf(what, sizeof what, "layernorm R%d C%d d_weight", R, C);
    failures += ab_fd_check(what, dg, gg, C);
    snprintf(what, sizeof what, "layernorm R%d C%d d_bias", R, C);
    failures += ab_fd_check(what, db, gb, C);
    /* accumulate, in place over dy */
    double *wg = dalloc(C), *wb = dalloc(C);
    for (int k = 0; k < C; k++) {
        dg[k] = 0.5f;
        wg[k] = 0.5 + gg[k];
        wb[k] = (double)db[k] + gb[k];
    }
    float *al = falloc(n);
    memcpy(al, Rf, n * sizeof *al);
    op_case_label(what, sizeof what, AB_OP_layernorm_backward, "fp32 R%d C%d acc 1, dx in place over dy", R, C);
    AB_CHECK(be->ops->layernorm_backward(be, R, C, AB_F32, x, AB_F32, al, g, mean, rstd, 1.0f, dg, db, al) == 0, "%s",
             ab_error());
    snprintf(what, sizeof what, "layernorm R%d C%d d_weight accumulated", R, C);
    failures += ab_fd_check(what, dg, wg, C);
    snprintf(what, sizeof what, "layernorm R%d C%d d_bias accumulated", R, C);
    failures += ab_fd_check(what, db, wb, C);
    snprintf(what, sizeof what, "layernorm R%d C%d dx in place", R, C);
    failures += ab_fd_check(what, al, gx, n);

    /* fp32 in (the embeddings' sum), fp16 out; its backward takes an fp16 dy and gives the fp32
     * dx, whose only rounding is dy's: against the finite differences of the rounded dy */
    uint16_t *yh = malloc(n * 2), *xh = malloc(n * 2), *dyh = malloc(n * 2), *dxh = malloc(n * 2);
    op_case_label(what, sizeof what, AB_OP_layernorm_forward, "fp32 -> fp16 R%d C%d", R, C);
    AB_CHECK(be->ops->layernorm_forward(be, R, C, AB_F32, x, g, b, 1e-12f, mean, rstd, AB_F16, yh) == 0, "%s",
             ab_error());
    for (size_t i = 0; i < n; i++) y[i] = ab_f16_to_f32(yh[i]);
    check(what, y, yd, n, AB_TOL_FP16_NMSE);
    for (size_t i = 0; i < n; i++) {
        xh[i] = ab_f32_to_f16(x[i]);
        dyh[i] = ab_f32_to_f16(Rf[i]);
    }
    double *Rh = dalloc(n), *gxh = dalloc(n), *ggh = dalloc(C), *gbh = dalloc(C);
    for (size_t i = 0; i < n; i++) Rh[i] = ab_f16_to_f32(dyh[i]);
    ab_fd_fn fh = {ln_ref, in, n, Rh, &lc};
    ab_fd_grad(&fh, 0, n, gxh);
    ab_fd_grad(&fh, 1, C, ggh);
    ab_fd_grad(&fh, 2, C, gbh);
    op_case_label(what, sizeof what, AB_OP_layernorm_backward, "fp32 x, fp16 dy -> fp32 dx R%d C%d acc 0", R, C);
    AB_CHECK(be->ops->layernorm_backward(be, R, C, AB_F32, x, AB_F16, dyh, g, mean, rstd, 0.0f, dg, db, dx) == 0, "%s",
             ab_error());
    failures += ab_fd_check(what, dx, gxh, n);
    failures += ab_fd_check(what, dg, ggh, C);
    failures += ab_fd_check(what, db, gbh, C);

    /* fp16 in and out: the forward against the float64 layer norm of the rounded x; the backward
     * against the unrounded gradient */
    double *xr = dalloc(n), *yr = dalloc(n);
    for (size_t i = 0; i < n; i++) xr[i] = ab_f16_to_f32(xh[i]);
    double *inr[3] = {xr, gd, bd};
    ab_fd_fn frh = {ln_ref, inr, n, Rh, &lc};
    ln_ref(&frh, yr);
    op_case_label(what, sizeof what, AB_OP_layernorm_forward, "fp16 -> fp16 R%d C%d", R, C);
    AB_CHECK(be->ops->layernorm_forward(be, R, C, AB_F16, xh, g, b, 1e-12f, mean, rstd, AB_F16, yh) == 0, "%s",
             ab_error());
    for (size_t i = 0; i < n; i++) y[i] = ab_f16_to_f32(yh[i]);
    check(what, y, yr, n, AB_TOL_FP16_NMSE);
    op_case_label(what, sizeof what, AB_OP_layernorm_backward, "fp16 R%d C%d acc 0", R, C);
    AB_CHECK(be->ops->layernorm_backward(be, R, C, AB_F16, xh, AB_F16, dyh, g, mean, rstd, 0.0f, dg, db, dxh) == 0,
             "%s", ab_error());
    for (size_t i = 0; i < n; i++) dx[i] = ab_f16_to_f32(dxh[i]);
    check(what, dx, gx, n, AB_TOL_FP16_NMSE * 4); /* x itself rounded to fp16 moves the gradient too */

    /* bf16 in and out, against the float64 layer norm of the rounded x and its finite differences
     * with the rounded dy */
    uint16_t *xb = malloc(n * 2), *yb = malloc(n * 2), *dyb = malloc(n * 2), *dxb = malloc(n * 2);
    double *Rb = dalloc(n), *gxb = dalloc(n), *ggb = dalloc(C), *gbb = dalloc(C);
    for (size_t i = 0; i < n; i++) {
        xb[i] = ab_f32_to_bf16(x[i]);
        dyb[i] = ab_f32_to_bf16(Rf[i]);
        xr[i] = ab_bf16_to_f32(xb[i]);
        Rb[i] = ab_bf16_to_f32(dyb[i]);
    }
    ab_fd_fn frb = {ln_ref, inr, n, Rb, &lc};
    ln_ref(&frb, yr);
    ab_fd_grad(&frb, 0, n, gxb);
    ab_fd_grad(&frb, 1, C, ggb);
    ab_fd_grad(&frb, 2, C, gbb);
    op_case_label(what, sizeof what, AB_OP_layernorm_forward, "bf16 -> bf16 R%d C%d", R, C);
    AB_CHECK(be->ops->layernorm_forward(be, R, C, AB_BF16, xb, g, b, 1e-12f, mean, rstd, AB_BF16, yb) == 0, "%s",
             ab_error());
    for (size_t i = 0; i < n; i++) y[i] = ab_bf16_to_f32(yb[i]);
    check(what, y, yr, n, AB_TOL_BF16_NMSE);
    op_case_label(what, sizeof what, AB_OP_layernorm_backward, "bf16 R%d C%d acc 0", R, C);
    AB_CHECK(be->ops->layernorm_backward(be, R, C, AB_BF16, xb, AB_BF16, dyb, g, mean, rstd, 0.0f, dg, db, dxb) == 0,
             "%s", ab_error());
    for (size_t i = 0; i < n; i++) dx[i] = ab_bf16_to_f32(dxb[i]);
    check(what, dx, gxb, n, AB_TOL_BF16_NMSE);
    /* the weight's and bias's gradients are fp32 sums of the exactly widened values */
    failures += ab_fd_check(what, dg, ggb, C);
    failures += ab_fd_check(what, db, gbb, C);

    free(x), free(g), free(b), free(Rf), free(y), free(dx), free(dg), free(db), free(mean), free(rstd), free(al);
    free(xd), free(gd), free(bd), free(Rd), free(yd), free(gx), free(gg), free(gb), free(wg), free(wb);
    free(yh), free(xh), free(dyh), free(dxh), free(Rh), free(gxh), free(ggh), free(gbh), free(xr), free(yr);
    free(xb), free(yb), free(dyb), free(dxb), free(Rb), free(gxb), free(ggb), free(gbb);
}

/* ---- element-wise ---- */

static double gelu_d(double x) { return 0.5 * x * erfc(-x / sqrt(2.0)); }
static double gelu_grad_d(double x) { return 0.5 * erfc(-x / sqrt(2.0)) + x * exp(-0.5 * x * x) / sqrt(2.0 * M_PI); }

/* GELU's lower tail: core/kernel_math.h keeps Phi's relative error under 4e-6 down to Phi = 1e-8
 * and takes it as 0 below (x < -5.57, where erf(x / sqrt 2) is -1 in fp32: PyTorch's
 * 0.5 x (1 + erf(x / sqrt 2)) in fp32 is -0 there too). Where Phi(x) < 1e-8 and the op gave a
 * zero, that zero stands for the float64 value (|x Phi(x)| < 6e-8, below fp16's smallest
 * subnormal; bf16 and fp32 could hold it) and must carry x's sign (x * 0). */
static void gelu_tail(ab_dtype t, const void *got, const void *x, double *want, size_t n) {
    for (size_t i = 0; i < n; i++) {
        const double xi = ab_load(x, i, t);
        const float g = ab_load(got, i, t);
        if (0.5 * erfc(-xi / sqrt(2.0)) < 1e-8 && g == 0.0f) {
            want[i] = copysign(0.0, xi); /* x * 0: the zero carries x's sign */
            AB_CHECK(!signbit(g) == !signbit(xi), "gelu %s: x = %g gives %s0, expected %s0", ab_dtype_name(t), xi,
                     signbit(g) ? "-" : "+", signbit(xi) ? "-" : "+");
        }
    }
}

static int ew_kind;
static void ew_ref(const ab_fd_fn *f, double *y) {
    for (size_t i = 0; i < f->ny; i++) {
        const double x = f->in[0][i];
        y[i] = ew_kind == 0 ? 0.5 * x * (1.0 + erf(x / sqrt(2.0))) : tanh(x);
    }
}

static void test_elementwise(ab_backend *be) {
    const size_t n = 1000;
    float *x = falloc(n), *R = falloc(n), *y = falloc(n), *dx = falloc(n);
    double *xd = dalloc(n), *Rd = dalloc(n), *yd = dalloc(n), *gx = dalloc(n);
    char what[360];
    fill(x, xd, n, 2.0);
    fill(R, Rd, n, 1.0);
    for (ew_kind = 0; ew_kind < 2; ew_kind++) {
        const int fwd = ew_kind ? AB_OP_tanh_forward : AB_OP_gelu_forward,
                  bwd = ew_kind ? AB_OP_tanh_backward : AB_OP_gelu_backward;
        double *in[1] = {xd};
        ab_fd_fn f = {ew_ref, in, n, Rd, NULL};
        ew_ref(&f, yd);
        ab_fd_grad(&f, 0, n, gx);
        op_case_label(what, sizeof what, fwd, "fp32 %zu N(0, 2)", n);
        int rc = ew_kind ? be->ops->tanh_forward(be, n, AB_F32, x, y) : be->ops->gelu_forward(be, n, AB_F32, x, y);
        AB_CHECK(rc == 0, "%s", ab_error());
        check(what, y, yd, n, AB_TOL_FP32_NMSE);
        /* gelu's backward takes the input, tanh's the output */
        op_case_label(what, sizeof what, bwd, "fp32 %zu N(0, 2) from %s, against finite differences", n,
                  ew_kind ? "y" : "x");
        rc =
            ew_kind ? be->ops->tanh_backward(be, n, AB_F32, y, R, dx) : be->ops->gelu_backward(be, n, AB_F32, x, R, dx);
        AB_CHECK(rc == 0, "%s", ab_error());
        failures += ab_fd_check(what, dx, gx, n);
        /* in place, as the models call them (the output over the input forward, over dy backward):
         * the bits of the out-of-place results */
        {
            float *z = falloc(n);
            memcpy(z, x, n * 4);
            op_case_label(what, sizeof what, fwd, "fp32 %zu in place: the out-of-place bits", n);
            rc = ew_kind ? be->ops->tanh_forward(be, n, AB_F32, z, z) : be->ops->gelu_forward(be, n, AB_F32, z, z);
            AB_CHECK(rc == 0 && memcmp(z, y, n * 4) == 0, "%s: differs from the out-of-place result", what);
            memcpy(z, R, n * 4);
            op_case_label(what, sizeof what, bwd, "fp32 %zu in place over dy: the out-of-place bits", n);
            rc = ew_kind ? be->ops->tanh_backward(be, n, AB_F32, y, z, z) : be->ops->gelu_backward(be, n, AB_F32, x, z, z);
            AB_CHECK(rc == 0 && memcmp(z, dx, n * 4) == 0, "%s: differs from the out-of-place result", what);
            free(z);
        }

        /* fp16 and bf16: one rounding of the fp32 value of the stored input, and within a storage
         * ulp of the float64 value */
        for (ab_dtype t = AB_F16; t <= AB_BF16; t++) {
            const char *tn = ab_dtype_name(t);
            uint16_t *h = malloc(n * 2), *o = malloc(n * 2), *dyt = malloc(n * 2), *yt = malloc(n * 2);
            double *want = dalloc(n);
            for (size_t i = 0; i < n; i++) {
                ab_store(h, i, t, x[i]);
                const double xi = ab_load(h, i, t);
                want[i] = ew_kind ? tanh(xi) : gelu_d(xi);
            }
            op_case_label(what, sizeof what, fwd, "%s %zu N(0, 2), one rounding of the fp32 value", tn, n);
            rc = ew_kind ? be->ops->tanh_forward(be, n, t, h, o) : be->ops->gelu_forward(be, n, t, h, o);
            int bad = 0;
            for (size_t i = 0; i < n; i++) {
                const float xi = ab_load(h, i, t), v = ew_kind ? tanhf(xi) : ab_gelu(xi);
                bad += ab_load(o, i, t) != ab_round_to(v, t);
            }
            AB_CHECK(rc == 0 && bad == 0, "%s: %d outputs are not one rounding", what, bad);
            if (!ew_kind) gelu_tail(t, o, h, want, n);
            check_stored(what, t, o, want, n, AB_TOL_STORE_ULPS);
            /* backward from stored inputs (gelu: x, tanh: y = the stored float64 tanh) and dy */
            for (size_t i = 0; i < n; i++) {
                ab_store(dyt, i, t, R[i]);
                ab_store(yt, i, t, (float)want[i]);
                const double xi = ab_load(h, i, t), yi = ab_load(yt, i, t), dyi = ab_load(dyt, i, t);
                want[i] = ew_kind ? dyi * (1.0 - yi * yi) : dyi * gelu_grad_d(xi);
            }
            op_case_label(what, sizeof what, bwd, "%s %zu N(0, 2) from %s", tn, n, ew_kind ? "y" : "x");
            rc = ew_kind ? be->ops->tanh_backward(be, n, t, yt, dyt, o) : be->ops->gelu_backward(be, n, t, h, dyt, o);
            AB_CHECK(rc == 0, "%s", ab_error());
            if (ew_kind) /* 1 - y^2 of a stored y and the product: a few fp32 roundings, then one to t */
                check_stored(what, t, o, want, n, AB_TOL_STORE_ULPS);
            else { /* the derivative's absolute error (AB_TOL_GELU_ABS) is large next to its zero */
                float *of = falloc(n);
                for (size_t i = 0; i < n; i++) of[i] = ab_load(o, i, t);
                check(what, of, want, n, lowp_tol(t));
                free(of);
            }
            free(h), free(o), free(dyt), free(yt), free(want);
        }
    }
    free(x), free(R), free(y), free(dx), free(xd), free(Rd), free(yd), free(gx);
}

/* GELU and tanh on the values they must pass through, each storage type (stored in it first: 3e19
 * is inf in fp16): as PyTorch's x * Phi(x), GELU gives inf for inf, NaN for -inf (-inf * 0) and
 * NaN, x itself for large x, -0 for large negative x and for -0; tanh gives +-1 for +-inf and
 * large x, -0 for -0. Backward: GELU's derivative is NaN at +-inf (inf * 0 in x phi(x)), dy
 * 65504 times GELU'(1) = 1.08 overflows fp16 to inf; tanh's is 0 at y = +-1, NaN for inf * 0. */
static void test_elementwise_edges(ab_backend *be) {
    static const float xs[] = {NAN,   INFINITY, -INFINITY, 65504.0f, -65504.0f, 3e19f, -3e19f, 0.0f,
                               -0.0f, 0x1p-24f, -0x1p-24f, 0x1p-14f, -3.0f,     5.5f,  -6.0f,  1e-3f};
    enum { N = sizeof xs / sizeof xs[0] };
    /* backward pairs (x or y, dy) */
    static const float bx[][2] = {{INFINITY, 1.5f},  {-INFINITY, 1.5f}, {NAN, 1.0f},       {1.0f, NAN},
                                  {1.0f, INFINITY},  {1.0f, 65504.0f},  {-1.0f, 65504.0f}, {65504.0f, 2.0f},
                                  {-65504.0f, 2.0f}, {-3.0f, 0.5f},     {0.0f, -0.0f},     {0x1p-24f, 1.0f}};
    static const float by[][2] = {{1.0f, 5.0f},     {-1.0f, 5.0f},    {NAN, 1.0f},     {0.5f, INFINITY},
                                  {1.0f, INFINITY}, {0.0f, 65504.0f}, {-0.25f, -3.0f}, {0.75f, 0x1p-24f}};
    enum { NB = sizeof bx / sizeof bx[0], NT = sizeof by / sizeof by[0] };
    char what[360];
    for (ab_dtype t = AB_F32; t <= AB_BF16; t++) {
        const char *tn = ab_dtype_name(t);
        const size_t es = ab_dtype_size(t);
        void *xt = malloc(N * es), *yt = malloc(N * es), *at = malloc(NB * es), *dyt = malloc(NB * es),
             *ot = malloc(NB * es);
        double xd[N], want[N], wb[NB];
        float got[N];
        for (int i = 0; i < N; i++) {
            ab_store(xt, (size_t)i, t, xs[i]);
            xd[i] = ab_load(xt, (size_t)i, t);
        }
        for (int kind = 0; kind < 2; kind++) {
            for (int i = 0; i < N; i++) want[i] = kind ? tanh(xd[i]) : gelu_d(xd[i]);
            op_case_label(what, sizeof what, kind ? AB_OP_tanh_forward : AB_OP_gelu_forward,
                      "%s %d edge values: NaN, +-inf, +-65504, +-3e19, +-0, subnormals", tn, N);
            const int rc = kind ? be->ops->tanh_forward(be, N, t, xt, yt) : be->ops->gelu_forward(be, N, t, xt, yt);
            AB_CHECK(rc == 0, "%s", ab_error());
            for (int i = 0; i < N; i++) got[i] = ab_load(yt, (size_t)i, t);
            if (t == AB_F32) /* fp32 out: GELU's own bound, tanhf's few ulps */
                check_abs(what, got, want, N, kind ? 4 * FLT_EPSILON : AB_TOL_GELU_ABS);
            else {
                if (!kind) gelu_tail(t, yt, xt, want, N);
                check_stored(what, t, yt, want, N, AB_TOL_STORE_ULPS);
            }
            int zeros = 1; /* -0 in, -0 out; GELU of a large negative x is -0 too */
            for (int i = 0; i < N; i++)
                if (want[i] == 0.0 && !isnan(got[i])) zeros &= got[i] == 0.0f && !signbit(got[i]) == !signbit(want[i]);
            AB_CHECK(zeros, "%s: a zero with the wrong sign", what);
        }
        /* GELU's backward from x */
        for (int i = 0; i < NB; i++) {
            ab_store(at, (size_t)i, t, bx[i][0]);
            ab_store(dyt, (size_t)i, t, bx[i][1]);
            wb[i] = ab_load(dyt, (size_t)i, t) * gelu_grad_d(ab_load(at, (size_t)i, t));
        }
        op_case_label(what, sizeof what, AB_OP_gelu_backward, "%s %d edge pairs (x, dy): +-inf, NaN, dy 65504, +-65504", tn,
                  NB);
        AB_CHECK(be->ops->gelu_backward(be, NB, t, at, dyt, ot) == 0, "%s", ab_error());
        if (t == AB_F32) {
            for (int i = 0; i < NB; i++) got[i] = ab_load(ot, (size_t)i, t);
            check_abs(what, got, wb, NB, AB_TOL_GELU_ABS * 65504.0); /* |dy| up to 65504 */
        } else
            check_stored(what, t, ot, wb, NB, AB_TOL_STORE_ULPS);
        if (t == AB_F16)
            AB_CHECK(isinf(ab_load(ot, 5, t)), "%s: 65504 * GELU'(1) = %g in fp16 (inf)", what,
                     (double)ab_load(ot, 5, t));
        /* tanh's backward from y */
        for (int i = 0; i < NT; i++) {
            ab_store(at, (size_t)i, t, by[i][0]);
            ab_store(dyt, (size_t)i, t, by[i][1]);
            const double yi = ab_load(at, (size_t)i, t);
            wb[i] = ab_load(dyt, (size_t)i, t) * (1.0 - yi * yi);
        }
        op_case_label(what, sizeof what, AB_OP_tanh_backward, "%s %d edge pairs (y, dy): y +-1, NaN, dy inf, 65504", tn,
                  NT);
        AB_CHECK(be->ops->tanh_backward(be, NT, t, at, dyt, ot) == 0, "%s", ab_error());
        check_stored(what, t, ot, wb, NT, AB_TOL_STORE_ULPS);
        free(xt), free(yt), free(at), free(dyt), free(ot);
    }
}

/* GELU on a sweep of |x| < 12 (every 1552nd float, both signs) against the exact values in float64,
 * forward and backward; then the branch-free exp and normal CDF of core/kernel_math.h (which GELU
 * is built on, on both backends) against libm's double precision, over every float of [-12, 12]
 * with a stride of 97 (and exp over its whole finite range): exp within 1 ulp, GELU and its
 * derivative within AB_TOL_GELU_ABS of the exact values (libm's erff in the direct formula is
 * within 4.5e-7), and the lower tail of Phi within 4e-6 relative down to 1e-8, where 1 + erf
 * would cancel. */
static void test_gelu_math(ab_backend *be) {
    const size_t half = 0x41400000u / 1552 + 1, n = 2 * half;
    float *x = falloc(n), *y = falloc(n), *ones = falloc(n);
    double *want = dalloc(n);
    for (size_t i = 0; i < half; i++) {
        x[2 * i] = ab_bits_f32((uint32_t)(i * 1552));
        x[2 * i + 1] = -x[2 * i];
    }
    for (size_t i = 0; i < n; i++) {
        want[i] = gelu_d(x[i]);
        ones[i] = 1.0f;
    }
    char what[360];
    op_case_label(what, sizeof what, AB_OP_gelu_forward,
              "fp32 %zu values swept over |x| < 12, against erfc in float64; kernel_math's exp and Phi", n);
    AB_CHECK(be->ops->gelu_forward(be, n, AB_F32, x, y) == 0, "%s", ab_error());
    check_abs(what, y, want, n, AB_TOL_GELU_ABS);
    double worst_op = 0.0;
    for (size_t i = 0; i < n; i++) worst_op = fmax(worst_op, fabs(y[i] - want[i]));

    double worst_exp = 0.0, worst_g = 0.0, worst_d = 0.0, worst_tail = 0.0;
    for (float v = -87.3f; v < 88.7f; v += 0.0037f) {
        const double e = exp((double)v), got = ab_exp(v);
        const double ulp = (double)nextafterf((float)e, INFINITY) - (double)(float)e;
        if (fabs(got - e) / ulp > worst_exp) worst_exp = fabs(got - e) / ulp;
    }
    AB_CHECK(ab_exp(-88.0f) == 0.0f && isinf(ab_exp(89.0f)) && isnan(ab_exp(NAN)) && ab_exp(0.0f) == 1.0f,
             "ab_exp at the edges: %g %g %g %g", ab_exp(-88.0f), ab_exp(89.0f), ab_exp(NAN), ab_exp(0.0f));
    /* ab_exp_nonpos: ab_exp's bits at every x <= 0 it is given (every 13th float from -0 to -inf,
     * and the edges: -0, +0, the clamp and the floats beside it, -inf, NaN) */
    uint32_t nonpos_diff = 0, nonpos_first = 0;
    const float edges[] = {0.0f, -0.0f, -87.33654f, nextafterf(-87.33654f, 0.0f), nextafterf(-87.33654f, -INFINITY),
                           -87.0f, -86.6f, -1e-30f, -INFINITY, NAN};
    for (size_t e = 0; e < sizeof edges / sizeof edges[0]; e++)
        if (ab_f32_bits(ab_exp_nonpos(edges[e])) != ab_f32_bits(ab_exp(edges[e])) && nonpos_diff++ == 0)
            nonpos_first = ab_f32_bits(edges[e]);
    for (uint32_t u = 0x80000000u; u <= 0xFF800000u; u += 13) /* the last u is 0xFF7FFFFC: no wrap */
        if (ab_f32_bits(ab_exp_nonpos(ab_bits_f32(u))) != ab_f32_bits(ab_exp(ab_bits_f32(u))) && nonpos_diff++ == 0)
            nonpos_first = u;
    AB_CHECK(nonpos_diff == 0, "ab_exp_nonpos differs from ab_exp at %u arguments, the first %g (bits 0x%08x)",
             nonpos_diff, ab_bits_f32(nonpos_first), nonpos_first);
    /* +-inf and huge |x| take ab_exp_nonpos(inf - inf) = ab_exp_nonpos(NaN) inside Phi (discarded
     * there): defined (the sanitizer build's float-cast-overflow check sees any NaN-to-int
     * conversion) and as PyTorch's x * Phi(x): inf, NaN (-inf * 0), x and -0 */
    AB_CHECK(isinf(ab_gelu(INFINITY)) && isnan(ab_gelu(-INFINITY)) && isnan(ab_gelu(NAN)) && ab_gelu(3e19f) == 3e19f &&
                 ab_gelu(-3e19f) == 0.0f && signbit(ab_gelu(-3e19f)) && ab_gelu_grad(-3e19f) == 0.0f &&
                 ab_gelu_grad(3e19f) == 1.0f,
             "GELU at +-inf, NaN, +-3e19: %g %g %g %g %g; grad at -+3e19: %g %g", ab_gelu(INFINITY), ab_gelu(-INFINITY),
             ab_gelu(NAN), ab_gelu(3e19f), ab_gelu(-3e19f), ab_gelu_grad(-3e19f), ab_gelu_grad(3e19f));
    for (uint32_t u = 0; u < 0x41400000u; u += 97) { /* |x| < 12 */
        for (int sg = 0; sg < 2; sg++) {
            const float v = sg ? -ab_bits_f32(u) : ab_bits_f32(u);
            const double vd = v, P = 0.5 * erfc(-vd / sqrt(2.0));
            const double g = vd * P, d = P + vd * exp(-0.5 * vd * vd) / sqrt(2.0 * M_PI);
            worst_g = fmax(worst_g, fabs(ab_gelu(v) - g));
            worst_d = fmax(worst_d, fabs(ab_gelu_grad(v) - d));
            float e;
            if (v < -1.3f && v > -5.5f) worst_tail = fmax(worst_tail, fabs(ab_normal_cdf(v, &e) - P) / P);
        }
    }
    AB_CHECK(worst_exp <= 1.0, "ab_exp is %.2f ulp from exp", worst_exp);
    AB_CHECK(worst_g <= AB_TOL_GELU_ABS, "GELU is %.3g from the exact values", worst_g);
    AB_CHECK(worst_tail <= 4e-6, "Phi's lower tail: relative error %.3g", worst_tail);
    op_note("the op within %.2g of float64; branch-free exp %.2f ulp, GELU %.2g, Phi's lower tail %.2g relative",
            worst_op, worst_exp, worst_g, worst_tail);

    for (size_t i = 0; i < n; i++) want[i] = gelu_grad_d(x[i]);
    op_case_label(what, sizeof what, AB_OP_gelu_backward,
              "fp32 %zu values swept over |x| < 12, dy 1, against float64; kernel_math's derivative", n);
    AB_CHECK(be->ops->gelu_backward(be, n, AB_F32, x, ones, y) == 0, "%s", ab_error());
    check_abs(what, y, want, n, AB_TOL_GELU_ABS);
    worst_op = 0.0;
    for (size_t i = 0; i < n; i++) worst_op = fmax(worst_op, fabs(y[i] - want[i]));
    AB_CHECK(worst_d <= AB_TOL_GELU_ABS, "GELU's derivative is %.3g from the exact values", worst_d);
    op_note("the op within %.2g of float64; GELU's derivative %.2g", worst_op, worst_d);
    free(x), free(y), free(ones), free(want);
}

/* ---- softmax with the padding mask ---- */

typedef struct {
    int B, A, L;
    double scale;
    const int32_t *mask;
} sm_ctx;

static void sm_ref(const ab_fd_fn *f, double *y) {
    const sm_ctx *c = f->ctx;
    const double *x = f->in[0];
    for (int r = 0; r < c->B * c->A * c->L; r++) {
        const int32_t *mk = c->mask + (r / (c->A * c->L)) * c->L;
        double mx = -INFINITY, s = 0.0;
        for (int j = 0; j < c->L; j++)
            if (mk[j] && c->scale * x[r * c->L + j] > mx) mx = c->scale * x[r * c->L + j];
        for (int j = 0; j < c->L; j++) s += mk[j] ? exp(c->scale * x[r * c->L + j] - mx) : 0.0;
        for (int j = 0; j < c->L; j++)
            y[r * c->L + j] = mk[j] && s > 0 ? exp(c->scale * x[r * c->L + j] - mx) / s : 0.0;
    }
}

/* fp32 softmax over B sequences x A heads x L keys with the mask, scale 0.37: forward against
 * float64, backward against finite differences, and backward in place over dp giving the
 * out-of-place bits. Fills x (scores, spread xs) and R (dp); leaves the probabilities in p and
 * their float64 reference in pd (n = B A L L each). */
static void softmax_fp32(ab_backend *be, int B, int A, int L, const int32_t *mask, double xs, const char *about,
                         float *x, float *R, float *p, double *pd) {
    const size_t n = (size_t)B * A * L * L;
    float *dx = falloc(n), *z = falloc(n);
    double *xd = dalloc(n), *Rd = dalloc(n), *gx = dalloc(n);
    char what[360];
    fill(x, xd, n, xs);
    fill(R, Rd, n, 1.0);
    sm_ctx c = {B, A, L, 0.37, mask};
    double *in[1] = {xd};
    ab_fd_fn f = {sm_ref, in, n, Rd, &c};
    sm_ref(&f, pd);
    ab_fd_grad(&f, 0, n, gx);
    op_case_label(what, sizeof what, AB_OP_softmax_forward, "fp32 B%d heads %d L%d scale 0.37, %s", B, A, L, about);
    AB_CHECK(be->ops->softmax_forward(be, B, A, L, AB_F32, 0.37f, x, mask, p) == 0, "%s", ab_error());
    check(what, p, pd, n, AB_TOL_FP32_NMSE);
    op_case_label(what, sizeof what, AB_OP_softmax_backward, "fp32 %d rows L%d scale 0.37, against finite differences",
                  B * A * L, L);
    AB_CHECK(be->ops->softmax_backward(be, B * A * L, L, AB_F32, 0.37f, p, R, dx) == 0, "%s", ab_error());
    failures += ab_fd_check(what, dx, gx, n);
    memcpy(z, R, n * sizeof *z);
    op_case_label(what, sizeof what, AB_OP_softmax_backward, "fp32 %d rows L%d in place over dp: the out-of-place bits",
                  B * A * L, L);
    AB_CHECK(be->ops->softmax_backward(be, B * A * L, L, AB_F32, 0.37f, p, z, z) == 0 && memcmp(z, dx, n * 4) == 0,
             "%s: differs from the out-of-place result", what);
    free(dx), free(z), free(xd), free(Rd), free(gx);
}

/* rows of 37 keys: two blocks of the CPU's 16 lanes and a tail, a mask that drops keys in each */
static void test_softmax_lanes(ab_backend *be) {
    enum { B = 2, A = 3, L = 37 };
    int32_t mask[B * L];
    for (int b = 0; b < B; b++)
        for (int j = 0; j < L; j++) mask[b * L + j] = !(j % 5 == 3 || (b == 1 && j >= 33));
    const size_t n = (size_t)B * A * L * L;
    float *x = falloc(n), *R = falloc(n), *p = falloc(n);
    double *pd = dalloc(n);
    softmax_fp32(be, B, A, L, mask, 3.0, "lanes and a tail, masked keys", x, R, p, pd);
    free(x), free(R), free(p), free(pd);
}

static void test_softmax(ab_backend *be) {
    enum { B = 3, A = 2, L = 7 };
    int32_t mask[B * L];
    for (int b = 0; b < B; b++)
        for (int j = 0; j < L; j++) mask[b * L + j] = b == 2 ? 0 : j < L - 2 * b; /* sequence 2: nothing to attend */
    const size_t n = (size_t)B * A * L * L;
    float *x = falloc(n), *R = falloc(n), *p = falloc(n);
    double *pd = dalloc(n);
    char what[360];
    softmax_fp32(be, B, A, L, mask, 2.0, "padding keys, a fully masked row", x, R, p, pd);
    int zero = 1;
    for (size_t i = (size_t)2 * A * L * L; i < n; i++) zero &= p[i] == 0.0f;
    AB_CHECK(zero, "fp32 B%d heads %d L%d: a row with every key masked is not all 0", B, A, L);
    sm_ctx c = {B, A, L, 0.37, mask};
    /* in place (the scores become the probabilities) */
    float *al = falloc(n);
    memcpy(al, x, n * sizeof *al);
    op_case_label(what, sizeof what, AB_OP_softmax_forward, "fp32 B%d heads %d L%d in place", B, A, L);
    AB_CHECK(be->ops->softmax_forward(be, B, A, L, AB_F32, 0.37f, al, mask, al) == 0, "%s", ab_error());
    check(what, al, pd, n, AB_TOL_FP32_NMSE);

    /* fp16 and bf16: the probabilities of the stored scores within a storage ulp of float64; the
     * backward from stored p and dp against float64 (p (dp - sum(dp p)) cancels: by NMSE) */
    c.scale = (double)0.37f;
    for (ab_dtype t = AB_F16; t <= AB_BF16; t++) {
        const char *tn = ab_dtype_name(t);
        uint16_t *xt = malloc(n * 2), *pt = malloc(n * 2), *dpt = malloc(n * 2), *dxt = malloc(n * 2);
        double *xr = dalloc(n), *want = dalloc(n);
        float *got = falloc(n);
        for (size_t i = 0; i < n; i++) {
            ab_store(xt, i, t, x[i]);
            xr[i] = ab_load(xt, i, t);
        }
        double *inr[1] = {xr};
        ab_fd_fn fr = {sm_ref, inr, n, NULL, &c};
        sm_ref(&fr, want);
        op_case_label(what, sizeof what, AB_OP_softmax_forward, "%s B%d heads %d L%d scale 0.37, padding keys", tn, B, A,
                  L);
        AB_CHECK(be->ops->softmax_forward(be, B, A, L, t, 0.37f, xt, mask, pt) == 0, "%s", ab_error());
        check_stored(what, t, pt, want, n, AB_TOL_STORE_ULPS);
        for (size_t i = 0; i < n; i++) {
            ab_store(pt, i, t, (float)want[i]); /* p from the reference */
            ab_store(dpt, i, t, R[i]);
        }
        for (size_t r = 0; r < (size_t)B * A * L; r++) {
            double s = 0.0;
            for (int j = 0; j < L; j++) s += (double)ab_load(dpt, r * L + j, t) * ab_load(pt, r * L + j, t);
            for (int j = 0; j < L; j++) {
                const size_t i = r * L + j;
                want[i] = c.scale * ab_load(pt, i, t) * (ab_load(dpt, i, t) - s);
            }
        }
        op_case_label(what, sizeof what, AB_OP_softmax_backward, "%s %d rows L%d scale 0.37", tn, B * A * L, L);
        AB_CHECK(be->ops->softmax_backward(be, B * A * L, L, t, 0.37f, pt, dpt, dxt) == 0, "%s", ab_error());
        for (size_t i = 0; i < n; i++) got[i] = ab_load(dxt, i, t);
        check(what, got, want, n, lowp_tol(t));
        free(xt), free(pt), free(dpt), free(dxt), free(xr), free(want), free(got);
    }
    free(x), free(R), free(p), free(pd), free(al);
}

/* Scores a padded sequence may hold: NaN and +-inf at masked keys must not leak into the row, an
 * unmasked -inf score gets probability 0, scores of +-10^4 (scale 1) are taken relative to the
 * row's max and do not overflow exp. */
static void test_softmax_edges(ab_backend *be) {
    enum { B = 2, A = 1, L = 5, N = B * A * L * L };
    int32_t mask[B * L] = {1, 1, 1, 0, 0, 1, 1, 1, 1, 1};
    float x[N];
    double xd[N], want[N];
    for (int i = 0; i < N; i++) x[i] = (float)ab_rng_normal(&rng);
    x[0 * L + 3] = NAN, x[0 * L + 4] = INFINITY, x[1 * L + 3] = -INFINITY, x[2 * L + 4] = NAN; /* masked keys */
    x[3 * L + 0] = -INFINITY;                                                                  /* an unmasked key */
    const float big[L] = {1e4f, 1e4f - 1.0f, -1e4f, 0.0f, 9999.5f};
    memcpy(x + 5 * L, big, sizeof big);
    x[6 * L + 2] = -INFINITY, x[6 * L + 4] = -1e4f;
    for (int i = 0; i < N; i++) xd[i] = x[i];
    sm_ctx c = {B, A, L, 1.0, mask};
    double *in[1] = {xd};
    ab_fd_fn f = {sm_ref, in, N, NULL, &c};
    sm_ref(&f, want);
    float p[N];
    char what[360];
    op_case_label(what, sizeof what, AB_OP_softmax_forward,
              "fp32 B%d heads %d L%d: NaN and inf at masked keys, an unmasked -inf, scores of 1e4", B, A, L);
    AB_CHECK(be->ops->softmax_forward(be, B, A, L, AB_F32, 1.0f, x, mask, p) == 0, "%s", ab_error());
    check(what, p, want, N, AB_TOL_FP32_NMSE);
    AB_CHECK(p[3 * L + 0] == 0.0f && p[0 * L + 3] == 0.0f && p[0 * L + 4] == 0.0f,
             "%s: an unmasked -inf gets %g, masked NaN and inf keys %g %g (want 0)", what, p[3 * L], p[3], p[4]);
}

/* ---- dropout ---- */

static void test_dropout(ab_backend *be) {
    const size_t n = 200001;
    const float rate = 0.1f;
    const uint64_t seed = 12345;
    float *x = falloc(n), *y = falloc(n), *dx = falloc(n);
    char what[360];
    fill(x, NULL, n, 1.0);
    op_case_label(what, sizeof what, AB_OP_dropout_forward, "fp32 %zu rate 0.1: the counter-based mask, 1/(1-p) scaling",
              n);
    AB_CHECK(be->ops->dropout_forward(be, n, AB_F32, rate, seed, x, y) == 0, "%s", ab_error());
    const uint32_t thr = ab_dropout_threshold(rate);
    size_t kept = 0, bad = 0;
    for (size_t i = 0; i < n; i++) {
        const int k = ab_dropout_keep(seed, i, thr);
        kept += k;
        bad += y[i] != (k ? x[i] * (1.0f / (1.0f - rate)) : 0.0f);
    }
    /* kept ~ Binomial(n, 0.9): standard deviation sqrt(n 0.09) ~ 134; 6 of them */
    AB_CHECK(bad == 0 && fabs((double)kept - 0.9 * n) < 6 * 134.0,
             "%s: %zu elements differ from the mask, %zu of %zu kept", what, bad, kept, n);
    op_note("%.4f kept", (double)kept / n);
    op_case_label(what, sizeof what, AB_OP_dropout_backward, "fp32 %zu rate 0.1: the forward's mask", n);
    AB_CHECK(be->ops->dropout_backward(be, n, AB_F32, rate, seed, x, dx) == 0 && memcmp(dx, y, n * 4) == 0,
             "%s: dropout backward does not use the forward's mask", what);
    op_case_label(what, sizeof what, AB_OP_dropout_forward, "fp32 %zu rate 0.1 in place: the out-of-place bits", n);
    memcpy(dx, x, n * 4);
    AB_CHECK(be->ops->dropout_forward(be, n, AB_F32, rate, seed, dx, dx) == 0 && memcmp(dx, y, n * 4) == 0,
             "%s: differs from the out-of-place result", what);
    op_case_label(what, sizeof what, AB_OP_dropout_forward, "fp32 %zu rate 0.1, another seed: another mask", n);
    AB_CHECK(be->ops->dropout_forward(be, n, AB_F32, rate, seed + 1, x, dx) == 0 && memcmp(dx, y, n * 4) != 0,
             "%s: another seed gave the same mask", what);
    op_case_label(what, sizeof what, AB_OP_dropout_forward, "fp32 %zu rate 0 copies", n);
    AB_CHECK(be->ops->dropout_forward(be, n, AB_F32, 0.0f, seed, x, dx) == 0 && memcmp(dx, x, n * 4) == 0,
             "%s: rate 0 is not a copy", what);
    op_case_label(what, sizeof what, AB_OP_dropout_forward, "fp32 %zu rate 1 is refused", n);
    AB_CHECK(be->ops->dropout_forward(be, n, AB_F32, 1.0f, seed, x, dx) != 0, "%s: rate 1 was accepted", what);

    /* fp16 and bf16 on an odd size, in place: kept values x / (1 - rate) in float64 within a
     * storage ulp, dropped ones 0; the backward the same on dy */
    const size_t m = 20011;
    const float r2 = 0.25f;
    const uint32_t t2 = ab_dropout_threshold(r2);
    double *want = dalloc(m);
    for (ab_dtype t = AB_F16; t <= AB_BF16; t++) {
        const char *tn = ab_dtype_name(t);
        uint16_t *v = malloc(m * 2);
        for (int dir = 0; dir < 2; dir++) {
            for (size_t i = 0; i < m; i++) {
                ab_store(v, i, t, (float)(3.0 * ab_rng_normal(&rng)));
                want[i] = ab_dropout_keep(seed, i, t2) ? ab_load(v, i, t) / (1.0 - (double)r2) : 0.0;
            }
            op_case_label(what, sizeof what, dir ? AB_OP_dropout_backward : AB_OP_dropout_forward,
                      "%s %zu rate 0.25 in place", tn, m);
            AB_CHECK((dir ? be->ops->dropout_backward(be, m, t, r2, seed, v, v)
                          : be->ops->dropout_forward(be, m, t, r2, seed, v, v)) == 0,
                     "%s", ab_error());
            check_stored(what, t, v, want, m, AB_TOL_STORE_ULPS);
        }
        free(v);
    }
    free(want);

    /* values it must pass through: a kept NaN or inf stays, a dropped one becomes 0; a kept 65504
     * / 0.75 overflows fp16 to inf; subnormals scale. Indices chosen by the mask. */
    enum { E = 64 };
    static const float vals[] = {NAN, INFINITY, -INFINITY, 65504.0f, -65504.0f, 0x1p-24f, 0x1p-133f, -0.0f};
    enum { V = sizeof vals / sizeof vals[0] };
    for (ab_dtype t = AB_F32; t <= AB_BF16; t++) {
        const char *tn = ab_dtype_name(t);
        const size_t es = ab_dtype_size(t);
        void *v = malloc(E * es), *o = malloc(E * es);
        double w[E];
        int kept_nan = 0, dropped_nan = 0;
        for (int i = 0; i < E; i++) {
            ab_store(v, (size_t)i, t, vals[i % V]);
            const int k = ab_dropout_keep(seed, (uint64_t)i, t2);
            w[i] = k ? ab_load(v, (size_t)i, t) / (1.0 - (double)r2) : 0.0;
            kept_nan += k && i % V == 0;
            dropped_nan += !k && i % V == 0;
        }
        AB_CHECK(kept_nan && dropped_nan, "dropout edges: the mask keeps %d and drops %d NaNs (want some of each)",
                 kept_nan, dropped_nan);
        for (int dir = 0; dir < 2; dir++) {
            op_case_label(what, sizeof what, dir ? AB_OP_dropout_backward : AB_OP_dropout_forward,
                      "%s %d edge values rate 0.25: NaN, +-inf, +-65504, subnormals, kept and dropped", tn, E);
            AB_CHECK((dir ? be->ops->dropout_backward(be, E, t, r2, seed, v, o)
                          : be->ops->dropout_forward(be, E, t, r2, seed, v, o)) == 0,
                     "%s", ab_error());
            check_stored(what, t, o, w, E, AB_TOL_STORE_ULPS);
            if (t == AB_F16)
                for (int i = 3; i < E; i += V)
                    if (w[i] != 0.0)
                        AB_CHECK(isinf(ab_load(o, (size_t)i, t)), "%s: 65504 / 0.75 kept as %g, not inf", what,
                                 (double)ab_load(o, (size_t)i, t));
        }
        free(v), free(o);
    }
    free(x), free(y), free(dx);
}

/* ---- embeddings ---- */

typedef struct {
    int R, L, C;
    const int32_t *ids, *types;
} emb_ctx;

static void emb_ref(const ab_fd_fn *f, double *y) {
    const emb_ctx *c = f->ctx;
    for (int r = 0; r < c->R; r++)
        for (int k = 0; k < c->C; k++)
            y[r * c->C + k] =
                f->in[0][c->ids[r] * c->C + k] + f->in[1][(r % c->L) * c->C + k] + f->in[2][c->types[r] * c->C + k];
}

static void test_embedding(ab_backend *be) {
    enum { V = 11, P = 9, T = 2, L = 5, B = 3, C = 4, R = B * L };
    int32_t ids[R], types[R];
    for (int r = 0; r < R; r++) {
        ids[r] = (int32_t)ab_rng_below(&rng, V);
        types[r] = (r % L) >= 3;
    }
    ids[4] = ids[7]; /* a repeated id: its gradient rows add */
    float *w = falloc(V * C), *p = falloc(P * C), *t = falloc(T * C), *y = falloc(R * C), *Rf = falloc(R * C);
    float *dw = falloc(V * C), *dp = falloc(P * C), *dt = falloc(T * C);
    double *wd = dalloc(V * C), *pd = dalloc(P * C), *td = dalloc(T * C), *Rd = dalloc(R * C), *yd = dalloc(R * C);
    double *gw = dalloc(V * C), *gp = dalloc(P * C), *gt = dalloc(T * C);
    char what[360];
    fill(w, wd, V * C, 1.0);
    fill(p, pd, P * C, 1.0);
    fill(t, td, T * C, 1.0);
    fill(Rf, Rd, R * C, 1.0);
    emb_ctx c = {R, L, C, ids, types};
    double *in[3] = {wd, pd, td};
    ab_fd_fn f = {emb_ref, in, R * C, Rd, &c};
    emb_ref(&f, yd);
    ab_fd_grad(&f, 0, V * C, gw);
    ab_fd_grad(&f, 1, P * C, gp);
    ab_fd_grad(&f, 2, T * C, gt);
    op_case_label(what, sizeof what, AB_OP_embedding_forward, "fp32 R%d L%d C%d vocab %d, %d positions, %d types", R, L, C,
              V, P, T);
    AB_CHECK(be->ops->embedding_forward(be, R, L, C, ids, types, w, V, p, t, T, y) == 0, "%s", ab_error());
    check(what, y, yd, R * C, AB_TOL_FP32_NMSE);
    for (int i = 0; i < V * C; i++) dw[i] = NAN;
    op_case_label(what, sizeof what, AB_OP_embedding_backward,
              "fp32 R%d L%d C%d acc 0 over NaN, a repeated id, against finite differences", R, L, C);
    AB_CHECK(be->ops->embedding_backward(be, R, L, C, ids, types, Rf, V, T, 0, dw, dp, dt) == 0, "%s", ab_error());
    failures += ab_fd_check("embedding word-table gradient", dw, gw, V * C);
    failures += ab_fd_check("embedding position-table gradient", dp, gp, P * C);
    failures += ab_fd_check("embedding type-table gradient", dt, gt, T * C);

    /* ids and types out of range: NaN rows, not reads past the tables; the other rows as before */
    ids[0] = V, ids[6] = -1, types[9] = T, types[12] = -1;
    const int bad_rows[] = {0, 6, 9, 12};
    op_case_label(what, sizeof what, AB_OP_embedding_forward, "fp32 R%d L%d C%d, ids %d and -1, types %d and -1", R, L, C,
              V, T);
    AB_CHECK(be->ops->embedding_forward(be, R, L, C, ids, types, w, V, p, t, T, y) == 0, "%s", ab_error());
    int nan_rows = 1;
    for (int k = 0; k < 4; k++)
        for (int j = 0; j < C; j++) {
            nan_rows &= isnan(y[bad_rows[k] * C + j]) != 0;
            yd[bad_rows[k] * C + j] = NAN;
        }
    AB_CHECK(nan_rows, "%s: an id or type out of range does not give a NaN row", what);
    check(what, y, yd, R * C, AB_TOL_FP32_NMSE); /* NaN exactly in those rows */

    /* acc 1 adds to the tables; the rows with a bad id or type add nothing */
    double *ww = dalloc(V * C), *wp = dalloc(P * C), *wt = dalloc(T * C);
    for (int i = 0; i < V * C; i++) ww[i] = dw[i];
    for (int i = 0; i < P * C; i++) wp[i] = dp[i];
    for (int i = 0; i < T * C; i++) wt[i] = dt[i];
    for (int r = 0; r < R; r++) {
        if (ids[r] < 0 || ids[r] >= V || types[r] < 0 || types[r] >= T) continue;
        for (int k = 0; k < C; k++) {
            ww[ids[r] * C + k] += Rd[r * C + k];
            wp[(r % L) * C + k] += Rd[r * C + k];
            wt[types[r] * C + k] += Rd[r * C + k];
        }
    }
    op_case_label(what, sizeof what, AB_OP_embedding_backward, "fp32 R%d L%d C%d acc 1, rows with a bad id or type skipped",
              R, L, C);
    AB_CHECK(be->ops->embedding_backward(be, R, L, C, ids, types, Rf, V, T, 1, dw, dp, dt) == 0, "%s", ab_error());
    check(what, dw, ww, V * C, AB_TOL_FP32_NMSE);
    check(what, dp, wp, P * C, AB_TOL_FP32_NMSE);
    check(what, dt, wt, T * C, AB_TOL_FP32_NMSE);
    free(w), free(p), free(t), free(y), free(Rf), free(dw), free(dp), free(dt);
    free(wd), free(pd), free(td), free(Rd), free(yd), free(gw), free(gp), free(gt), free(ww), free(wp), free(wt);
}

/* ---- batched products ---- */

/* One transpose case with both operands' rows padded past the values a product reads (an
 * attention head's block inside wider rows), the padding NaN so that reading it shows, each
 * operand in its own type (16-bit ones are widened row by row, bf16 x bf16 on native instructions
 * copied dense); shared 1 or 2: A or B the same for every product (batch stride 0); dense 1 or 2:
 * A or B not padded (attention's probabilities beside a strided head). fp32 results against
 * float64. */
static void gemm_batched_padded(ab_backend *be, int ta, int tb, ab_dtype at, ab_dtype bt, int shared, int dense) {
    enum { M = 5, N = 6, K = 7, NB = 3, PAD = 3, MAXA = NB * 7 * (7 + PAD), MAXB = NB * 7 * (7 + PAD + 1) };
    const int ar = ta ? K : M, ac = ta ? M : K, br = tb ? N : K, bc = tb ? K : N;
    const int lda = dense == 1 ? ac : ac + PAD, ldb = dense == 2 ? bc : bc + PAD + 1;
    const long long sa = shared == 1 ? 0 : (long long)ar * lda, sb = shared == 2 ? 0 : (long long)br * ldb;
    float As[MAXA], Bs[MAXB], c[NB * M * N];
    uint16_t Ah[MAXA], Bh[MAXB];
    double want[NB * M * N];
    for (int i = 0; i < NB * ar * lda; i++) As[i] = i % lda >= ac ? NAN : ab_round_to((float)ab_rng_normal(&rng), at);
    for (int i = 0; i < NB * br * ldb; i++) Bs[i] = i % ldb >= bc ? NAN : ab_round_to((float)ab_rng_normal(&rng), bt);
    for (int i = 0; i < NB * ar * lda; i++) ab_store(Ah, (size_t)i, at == AB_F32 ? AB_F16 : at, As[i]);
    for (int i = 0; i < NB * br * ldb; i++) ab_store(Bh, (size_t)i, bt == AB_F32 ? AB_F16 : bt, Bs[i]);
    for (int b = 0; b < NB; b++)
        for (int i = 0; i < M; i++)
            for (int j = 0; j < N; j++) {
                const float *a = As + b * sa, *bb = Bs + b * sb;
                double acc = 0.0;
                for (int k = 0; k < K; k++)
                    acc += (double)(ta ? a[k * lda + i] : a[i * lda + k]) * (tb ? bb[j * ldb + k] : bb[k * ldb + j]);
                want[(b * M + i) * N + j] = acc;
            }
    char what[200];
    op_case_label(what, sizeof what, AB_OP_gemm_batched, "%s x %s -> fp32 %d x (%dx%dx%d) %c%c, lda %d ldb %d (rows padded "
                  "with NaN)%s", ab_dtype_name(at), ab_dtype_name(bt), NB, M, N, K, ta ? 'T' : 'N', tb ? 'T' : 'N', lda,
                  ldb, shared == 1 ? ", A shared" : shared == 2 ? ", B shared" : "");
    AB_CHECK(be->ops->gemm_batched(be, ta, tb, M, N, K, 1.0f, at, at == AB_F32 ? (const void *)As : Ah, lda, sa, bt,
                                   bt == AB_F32 ? (const void *)Bs : Bh, ldb, sb, 0.0f, AB_F32, c, N, (long long)M * N,
                                   NB) == 0,
             "%s", ab_error());
    int finite = 1;
    for (int i = 0; i < NB * M * N; i++) finite &= isfinite(c[i]) != 0;
    AB_CHECK(finite, "%s: a result is not finite (the padding was read)", what);
    check(what, c, want, NB * M * N, AB_TOL_FP32_NMSE);
}

/* 16-bit heads, beta 0, each result the fp32 sum rounded once: q_h k_h^T into (L, L) blocks stored
 * dense (SC apart: padding between them kept, or none, the blocks one run), and P_h v_h into the
 * strided (L, H) rows of the context. Rows of 37 and 20 values: the conversions' blocks of 16 and
 * their tails, a head's rows a call apart or in one; 12 small heads (MiniLM's count: 6 a thread on
 * 2 threads); 5 heads of 128 x 64 (BERT-base's head size, an odd count over the threads). */
static void gemm_batched_heads16(ab_backend *be, ab_dtype t, int A, int L, int D, int SC) {
    const int H = A * D;
    const size_t nq = (size_t)L * H, ns = (size_t)A * SC;
    uint16_t *q = malloc(nq * 2), *k = malloc(nq * 2), *v = malloc(nq * 2), *s = malloc(ns * 2),
             *p = malloc(ns * 2), *ctx = malloc(nq * 2);
    for (size_t i = 0; i < nq; i++) {
        ab_store(q, i, t, (float)ab_rng_normal(&rng));
        ab_store(k, i, t, (float)ab_rng_normal(&rng));
        ab_store(v, i, t, (float)ab_rng_normal(&rng));
        ab_store(ctx, i, t, 7.0f);
    }
    for (size_t i = 0; i < ns; i++) {
        ab_store(p, i, t, (float)ab_rng_uniform_range(&rng, 0.0f, 0.1f));
        ab_store(s, i, t, 5.0f);
    }
    char what[360];
    op_case_label(what, sizeof what, AB_OP_gemm_batched, "%s %d x (%dx%dx%d) q k^T, beta 0, blocks dense %d apart",
                  ab_dtype_name(t), A, L, L, D, SC);
    AB_CHECK(be->ops->gemm_batched(be, 0, 1, L, L, D, 1.0f, t, q, H, D, t, k, H, D, 0.0f, t, s, L, SC, A) == 0, "%s",
             ab_error());
    int bad = 0, pad = 0;
    for (int h = 0; h < A; h++) {
        for (int i = 0; i < L; i++)
            for (int j = 0; j < L; j++) {
                double acc = 0.0;
                for (int d = 0; d < D; d++)
                    acc += (double)ab_load(q, (size_t)i * H + h * D + d, t) * ab_load(k, (size_t)j * H + h * D + d, t);
                const float got = ab_load(s, (size_t)h * SC + (size_t)i * L + j, t);
                bad += got != ab_round_to((float)acc, t) && fabs(got - acc) > (t == AB_F16 ? 0x1p-10 : 0x1p-7) * fabs(acc) + 1e-3;
            }
        for (int o = L * L; o < SC; o++) pad += ab_load(s, (size_t)h * SC + o, t) != 5.0f;
    }
    AB_CHECK(bad == 0 && pad == 0, "%s: %d results not the rounded fp32 sum, %d padding values changed", what, bad, pad);
    op_case_label(what, sizeof what, AB_OP_gemm_batched, "%s %d x (%dx%dx%d) P v, beta 0, into the strided context",
                  ab_dtype_name(t), A, L, D, L);
    AB_CHECK(be->ops->gemm_batched(be, 0, 0, L, D, L, 1.0f, t, p, L, SC, t, v, H, D, 0.0f, t, ctx, H, D, A) == 0, "%s",
             ab_error());
    bad = 0;
    for (int h = 0; h < A; h++)
        for (int i = 0; i < L; i++)
            for (int d = 0; d < D; d++) {
                double acc = 0.0;
                for (int j = 0; j < L; j++)
                    acc += (double)ab_load(p, (size_t)h * SC + (size_t)i * L + j, t) * ab_load(v, (size_t)j * H + h * D + d, t);
                const float got = ab_load(ctx, (size_t)i * H + h * D + d, t);
                bad += got != ab_round_to((float)acc, t) && fabs(got - acc) > (t == AB_F16 ? 0x1p-10 : 0x1p-7) * fabs(acc) + 1e-3;
            }
    AB_CHECK(bad == 0, "%s: %d results not the rounded fp32 sum", what, bad);
    free(q), free(k), free(v), free(s), free(p), free(ctx);
}

static void test_gemm_batched(ab_backend *be) {
    enum { A = 3, L = 5, D = 4, H = A * D };
    /* q (L, H) with heads as strided views: C_h (L, L) = q_h k_h^T, ctx_h = P_h v_h */
    float q[L * H], k[L * H], s[A * L * L];
    double ref[A * L * L];
    char what[360];
    fill(q, NULL, L * H, 1.0);
    fill(k, NULL, L * H, 1.0);
    for (int h = 0; h < A; h++)
        for (int i = 0; i < L; i++)
            for (int j = 0; j < L; j++) {
                double acc = 0;
                for (int d = 0; d < D; d++) acc += (double)q[i * H + h * D + d] * k[j * H + h * D + d];
                ref[(h * L + i) * L + j] = acc;
            }
    op_case_label(what, sizeof what, AB_OP_gemm_batched, "fp32 %d x (%dx%dx%d) q k^T over strided heads", A, L, L, D);
    AB_CHECK(be->ops->gemm_batched(be, 0, 1, L, L, D, 1.0f, AB_F32, q, H, D, AB_F32, k, H, D, 0.0f, AB_F32, s, L, L * L,
                                   A) == 0,
             "%s", ab_error());
    check(what, s, ref, A * L * L, AB_TOL_FP32_NMSE);
    /* transposed A, beta 1, fp16 and bf16 storage: one rounding of the fp32 sum (old C included) */
    for (ab_dtype t = AB_F16; t <= AB_BF16; t++) {
        uint16_t qh[L * H], kh[L * H], sh[A * D * D];
        float old[A * D * D], got[A * D * D];
        double r2[A * D * D];
        for (int i = 0; i < L * H; i++) {
            ab_store(qh, (size_t)i, t, q[i]);
            ab_store(kh, (size_t)i, t, k[i]);
        }
        for (int i = 0; i < A * D * D; i++) {
            ab_store(sh, (size_t)i, t, (float)ab_rng_normal(&rng));
            old[i] = ab_load(sh, (size_t)i, t);
        }
        for (int h = 0; h < A; h++) /* (D, D) = q_h^T (D, L) k_h (L, D) + old */
            for (int a = 0; a < D; a++)
                for (int b = 0; b < D; b++) {
                    double acc = old[(h * D + a) * D + b];
                    for (int i = 0; i < L; i++)
                        acc += (double)ab_load(qh, (size_t)(i * H + h * D + a), t) *
                               ab_load(kh, (size_t)(i * H + h * D + b), t);
                    r2[(h * D + a) * D + b] = acc;
                }
        op_case_label(what, sizeof what, AB_OP_gemm_batched, "%s %d x (%dx%dx%d) q^T k over strided heads, beta 1",
                  ab_dtype_name(t), A, D, D, L);
        AB_CHECK(be->ops->gemm_batched(be, 1, 0, D, D, L, 1.0f, t, qh, H, D, t, kh, H, D, 1.0f, t, sh, D, D * D, A) ==
                     0,
                 "%s", ab_error());
        const double rel = t == AB_F16 ? 1e-3 : 8e-3; /* within a storage ulp where not the rounded sum */
        int bad = 0;
        for (int i = 0; i < A * D * D; i++) {
            got[i] = ab_load(sh, (size_t)i, t);
            bad += got[i] != ab_round_to((float)r2[i], t) && fabs(got[i] - r2[i]) > rel * fabs(r2[i]) + 1e-4;
        }
        AB_CHECK(bad == 0, "%s: %d results are not the rounded fp32 sum", what, bad);
        check(what, got, r2, A * D * D, lowp_tol(t));
    }

    /* fp16 operands, fp32 results, alpha 0.5 and beta -1, both transposed, on odd sizes; the
     * results are (M, N) blocks of rows ldc apart, sc apart: the padding between them must keep
     * its value */
    enum { M = 3, N = 7, K = 5, NB = 4, LDC = N + 2, SC = M * LDC + 5 };
    uint16_t a16[NB * K * M], b16[NB * N * K];
    float c32[NB * SC];
    double want[NB * SC];
    for (int i = 0; i < NB * K * M; i++) a16[i] = ab_f32_to_f16((float)ab_rng_normal(&rng));
    for (int i = 0; i < NB * N * K; i++) b16[i] = ab_f32_to_f16((float)ab_rng_normal(&rng));
    for (int i = 0; i < NB * SC; i++) want[i] = c32[i] = (float)ab_rng_normal(&rng);
    for (int bt = 0; bt < NB; bt++)
        for (int i = 0; i < M; i++)
            for (int j = 0; j < N; j++) {
                double acc = 0.0; /* A_b stored (K, M), B_b stored (N, K) */
                for (int kk = 0; kk < K; kk++)
                    acc += (double)ab_f16_to_f32(a16[bt * K * M + kk * M + i]) *
                           ab_f16_to_f32(b16[bt * N * K + j * K + kk]);
                const int o = bt * SC + i * LDC + j;
                want[o] = 0.5 * acc - want[o];
            }
    op_case_label(what, sizeof what, AB_OP_gemm_batched,
              "fp16 -> fp32 %d x (%dx%dx%d) both transposed, alpha 0.5 beta -1, ldc %d, padding between batches", NB, M,
              N, K, LDC);
    AB_CHECK(be->ops->gemm_batched(be, 1, 1, M, N, K, 0.5f, AB_F16, a16, M, K * M, AB_F16, b16, K, N * K, -1.0f, AB_F32,
                                   c32, LDC, SC, NB) == 0,
             "%s", ab_error());
    check(what, c32, want, NB * SC, AB_TOL_FP32_NMSE);
    int kept = 1;
    for (int bt = 0; bt < NB; bt++)
        for (int o = 0; o < SC; o++)
            if (o >= M * LDC || o % LDC >= N) kept &= c32[bt * SC + o] == (float)want[bt * SC + o];
    AB_CHECK(kept, "%s: an element outside the (M, N) blocks changed", what);

    for (int ta = 0; ta < 2; ta++)
        for (int tb = 0; tb < 2; tb++) {
            gemm_batched_padded(be, ta, tb, AB_F16, AB_F16, 0, 0);
            gemm_batched_padded(be, ta, tb, AB_BF16, AB_BF16, 0, 0); /* native where the CPU has bf16 */
            gemm_batched_padded(be, ta, tb, AB_BF16, AB_F16, 0, 0);
            gemm_batched_padded(be, ta, tb, AB_F32, AB_F16, 0, 0);
            gemm_batched_padded(be, ta, tb, AB_F16, AB_F32, 0, 0);
            gemm_batched_padded(be, ta, tb, AB_F32, AB_F32, 0, 0);
        }
    gemm_batched_padded(be, 0, 1, AB_F16, AB_F16, 1, 0);
    gemm_batched_padded(be, 1, 0, AB_F16, AB_F16, 2, 0);
    gemm_batched_padded(be, 0, 1, AB_BF16, AB_BF16, 2, 0);
    for (int dense = 1; dense <= 2; dense++) /* one operand strided, the other dense (p v, p^T dctx) */
        for (int ta = 0; ta < 2; ta++) {
            gemm_batched_padded(be, ta, 0, AB_BF16, AB_BF16, 0, dense);
            gemm_batched_padded(be, ta, 0, AB_F16, AB_F16, 0, dense);
        }
}

void ref_transformer_run(void) {
    ab_backend *be = ab_backend_cpu_create(2);
    if (!be) die("creating a CPU backend");
    test_layernorm(be, 9, 13);
    test_layernorm(be, 3, 384);
    test_layernorm(be, 5, 37); /* two rows of 16 lanes and a tail */
    test_gelu_math(be);
    test_elementwise(be);
    test_elementwise_edges(be);
    test_softmax(be);
    test_softmax_lanes(be);
    test_softmax_edges(be);
    test_dropout(be);
    test_embedding(be);
    test_gemm_batched(be);
    for (ab_dtype t = AB_F16; t <= AB_BF16; t++) {
        gemm_batched_heads16(be, t, 3, 37, 20, 37 * 37 + 7);
        gemm_batched_heads16(be, t, 3, 37, 20, 37 * 37);
        gemm_batched_heads16(be, t, 12, 21, 8, 21 * 21); /* MiniLM's 12 heads, 6 a thread */
        gemm_batched_heads16(be, t, 5, 128, 64, 128 * 128);
    }
    be->ops->destroy(be);
}
