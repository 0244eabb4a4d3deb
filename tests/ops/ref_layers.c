/* The reference pass of test_backend_ops (ops_test.h) for the convolutional-network ops: the CPU
 * backend against float64 references on small odd shapes, one case per call of an op under test:
 *   - forward of each op against a float64 forward of the same (fp32-valued) inputs;
 *   - backward (convolution data and filter, batch norm x / scale / shift, max and average
 *     pooling) against central finite differences in float64 of L = sum(R * forward), with R
 *     random;
 *   - batch-norm running statistics as PyTorch updates them (momentum 0.1, unbiased variance)
 *     and the evaluation forward from them;
 *   - fp16 and bf16 storage (operands widened exactly, fp32 accumulation, one rounding) within
 *     the per-precision tolerances of the float64 result of the rounded inputs, or element by
 *     element within a storage ulp of it where the op is a max, a mean or a sum of two;
 *   - edge values where pooling and add pass values through: NaN and infinities (a NaN in a
 *     window wins the max, inf - inf is NaN), 65504 (fp16's largest) overflowing to inf in an
 *     fp16 add and averaging to itself (the sum is fp32), subnormals, padding that never wins;
 *   - fp16 widening (F16C in bulk) bit for bit against the scalar conversion on all 65536 values.
 * Shapes: stride 2, padding, 1x1 (the direct path), 3x3 and 7x7 kernels. */
#include <float.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fd_check.h"
#include "half.h"
#include "ops_test.h"
#include "ref_util.h"
#include "rng.h"
#include "tolerances.h"

/* fp32 values drawn N(0, 1), and the same values in float64 */
static void fill(float *f, double *d, size_t n) { fill_scaled(f, d, n, 1.0); }

static void to_double(const float *f, double *d, size_t n) {
    for (size_t i = 0; i < n; i++) d[i] = f[i];
}

/* ---- convolution ---- */

static void conv_ref(const ab_fd_fn *f, double *y) {
    const ab_conv_shape *s = f->ctx;
    const double *x = f->in[0], *w = f->in[1];
    for (int n = 0; n < s->N; n++)
        for (int p = 0; p < s->P; p++)
            for (int q = 0; q < s->Q; q++)
                for (int k = 0; k < s->K; k++) {
                    double acc = 0.0;
                    for (int r = 0; r < s->R; r++)
                        for (int t = 0; t < s->S; t++) {
                            const int h = p * s->stride_h - s->pad_h + r, ww = q * s->stride_w - s->pad_w + t;
                            if (h < 0 || h >= s->H || ww < 0 || ww >= s->W) continue;
                            for (int c = 0; c < s->C; c++)
                                acc += x[(((size_t)n * s->H + h) * s->W + ww) * s->C + c] *
                                       w[(((size_t)k * s->R + r) * s->S + t) * s->C + c];
                        }
                    y[(((size_t)n * s->P + p) * s->Q + q) * s->K + k] = acc;
                }
}

/* the backend's op in type t on fp32 inputs: inputs are rounded to t, the result widened back */
static void *to_type(ab_backend *be, ab_dtype t, const float *src, size_t n) {
    void *p = malloc(n * ab_dtype_size(t) + 1);
    be->ops->cast(be, n, AB_F32, src, t, p);
    return p;
}

static void from_type(ab_backend *be, ab_dtype t, const void *src, float *dst, size_t n) {
    be->ops->cast(be, n, t, src, AB_F32, dst);
}

static void round_through(ab_backend *be, ab_dtype t, float *v, size_t n) {
    void *p = to_type(be, t, v, n);
    from_type(be, t, p, v, n);
    free(p);
}

static void test_conv(ab_backend *be, ab_conv_shape s, const char *label) {
    if (ab_conv_shape_init(&s) != 0) {
        fprintf(stderr, "FAIL %s: %s\n", label, ab_error());
        failures++;
        return;
    }
    const size_t nx = (size_t)s.N * s.H * s.W * s.C, nw = (size_t)s.K * s.R * s.S * s.C,
                 ny = (size_t)s.N * s.P * s.Q * s.K;
    float *x = falloc(nx), *w = falloc(nw), *R = falloc(ny), *y = falloc(ny), *dx = falloc(nx), *dw = falloc(nw);
    double *xd = dalloc(nx), *wd = dalloc(nw), *Rd = dalloc(ny), *yd = dalloc(ny), *gx = dalloc(nx), *gw = dalloc(nw);
    fill(x, xd, nx);
    fill(w, wd, nw);
    fill(R, Rd, ny);
    double *in[2] = {xd, wd};
    ab_fd_fn f = {conv_ref, in, ny, Rd, &s};
    char shape[120], what[360];
    snprintf(shape, sizeof shape, "N%d %dx%dx%d K%d %s -> %dx%d", s.N, s.H, s.W, s.C, s.K, label, s.P, s.Q);

    conv_ref(&f, yd);
    op_case_label(what, sizeof what, AB_OP_conv2d_forward, "fp32 %s", shape);
    AB_CHECK(be->ops->conv2d_forward(be, &s, AB_F32, x, w, y) == 0, "%s", ab_error());
    check(what, y, yd, ny, AB_TOL_FP32_NMSE);

    ab_fd_grad(&f, 0, nx, gx);
    ab_fd_grad(&f, 1, nw, gw);
    for (size_t i = 0; i < nx; i++) dx[i] = NAN; /* every element must be written */
    op_case_label(what, sizeof what, AB_OP_conv2d_backward_data, "fp32 %s against finite differences", shape);
    AB_CHECK(be->ops->conv2d_backward_data(be, &s, AB_F32, R, w, dx) == 0, "%s", ab_error());
    failures += ab_fd_check(what, dx, gx, nx);
    for (size_t i = 0; i < nw; i++) dw[i] = NAN; /* beta 0 overwrites, NaN included */
    op_case_label(what, sizeof what, AB_OP_conv2d_backward_filter, "fp32 %s beta 0 over NaN, against finite differences",
              shape);
    AB_CHECK(be->ops->conv2d_backward_filter(be, &s, AB_F32, x, R, 0.0f, dw) == 0, "%s", ab_error());
    failures += ab_fd_check(what, dw, gw, nw);
    /* beta 1 adds to what is there (micro-batch accumulation) */
    float *d0 = falloc(nw);
    double *want = dalloc(nw);
    fill(d0, NULL, nw);
    for (size_t i = 0; i < nw; i++) want[i] = d0[i] + gw[i];
    op_case_label(what, sizeof what, AB_OP_conv2d_backward_filter, "fp32 %s beta 1 adds to what is there", shape);
    AB_CHECK(be->ops->conv2d_backward_filter(be, &s, AB_F32, x, R, 1.0f, d0) == 0, "%s", ab_error());
    failures += ab_fd_check(what, d0, want, nw);

    /* fp16 / bf16: the same op on the rounded inputs, against the float64 result of those
     * inputs, within the storage tolerance */
    for (ab_dtype t = AB_F16; t <= AB_BF16; t++) {
        const char *tn = ab_dtype_name(t);
        float *xr = falloc(nx), *wr = falloc(nw), *Rr = falloc(ny);
        memcpy(xr, x, nx * sizeof *x);
        memcpy(wr, w, nw * sizeof *w);
        memcpy(Rr, R, ny * sizeof *R);
        round_through(be, t, xr, nx);
        round_through(be, t, wr, nw);
        round_through(be, t, Rr, ny);
        double *xrd = dalloc(nx), *wrd = dalloc(nw), *Rrd = dalloc(ny), *gxr = dalloc(nx), *gwr = dalloc(nw);
        to_double(xr, xrd, nx);
        to_double(wr, wrd, nw);
        to_double(Rr, Rrd, ny);
        double *inr[2] = {xrd, wrd};
        ab_fd_fn fr = {conv_ref, inr, ny, Rrd, &s};
        conv_ref(&fr, yd);
        /* adjoints of a linear map, exactly: the finite differences of a bilinear loss */
        ab_fd_grad(&fr, 0, nx, gxr);
        ab_fd_grad(&fr, 1, nw, gwr);
        void *xt = to_type(be, t, xr, nx), *wt = to_type(be, t, wr, nw), *Rt = to_type(be, t, Rr, ny);
        void *yt = malloc(ny * 2), *dxt = malloc(nx * 2), *dwt = malloc(nw * 2);

        op_case_label(what, sizeof what, AB_OP_conv2d_forward, "%s %s", tn, shape);
        AB_CHECK(be->ops->conv2d_forward(be, &s, t, xt, wt, yt) == 0, "%s", ab_error());
        from_type(be, t, yt, y, ny);
        check(what, y, yd, ny, lowp_tol(t));
        /* one rounding of the fp32 sum: each stored output is the float64 value rounded to t,
         * or one storage ulp from it (the fp32 sum itself carries ~1e-6 relative error) */
        int bad = 0;
        for (size_t i = 0; i < ny && !bad; i++) {
            const float r = (float)yd[i];
            float once;
            void *o = to_type(be, t, &r, 1);
            from_type(be, t, o, &once, 1);
            free(o);
            const double ulp = fabs(once) * (t == AB_F16 ? 0x1p-10 : 0x1p-7) + (t == AB_F16 ? 0x1p-24 : 0x1p-133);
            if (fabs((double)y[i] - once) > ulp * 1.0001) {
                bad = 1;
                fprintf(stderr, "  %s output %zu: %.9g, float64 rounded once %.9g\n", what, i, y[i], once);
            }
        }
        AB_CHECK(!bad, "%s: the forward is not one rounding of the fp32 sum", what);

        op_case_label(what, sizeof what, AB_OP_conv2d_backward_data, "%s %s", tn, shape);
        AB_CHECK(be->ops->conv2d_backward_data(be, &s, t, Rt, wt, dxt) == 0, "%s", ab_error());
        from_type(be, t, dxt, dx, nx);
        check(what, dx, gxr, nx, lowp_tol(t));

        op_case_label(what, sizeof what, AB_OP_conv2d_backward_filter, "%s %s beta 0", tn, shape);
        AB_CHECK(be->ops->conv2d_backward_filter(be, &s, t, xt, Rt, 0.0f, dwt) == 0, "%s", ab_error());
        from_type(be, t, dwt, dw, nw);
        check(what, dw, gwr, nw, lowp_tol(t));
        /* beta 1 adds a second micro-batch's gradient (the same one here) to the stored dw */
        op_case_label(what, sizeof what, AB_OP_conv2d_backward_filter, "%s %s beta 1 adds to what is there", tn, shape);
        AB_CHECK(be->ops->conv2d_backward_filter(be, &s, t, xt, Rt, 1.0f, dwt) == 0, "%s", ab_error());
        from_type(be, t, dwt, dw, nw);
        for (size_t i = 0; i < nw; i++) gwr[i] *= 2.0;
        check(what, dw, gwr, nw, lowp_tol(t));
        free(xr), free(wr), free(Rr), free(xrd), free(wrd), free(Rrd), free(gxr), free(gwr);
        free(xt), free(wt), free(Rt), free(yt), free(dxt), free(dwt);
    }
    free(x), free(w), free(R), free(y), free(dx), free(dw), free(d0), free(want);
    free(xd), free(wd), free(Rd), free(yd), free(gx), free(gw);
}

/* conv2d_backward_filter_fold: defined as the bits of conv2d_backward_filter (beta 0) into a
 * buffer of t followed by accumulate; the fused op must give them exactly, over a NaN in dw where
 * it is overwritten and into a dw holding a NaN and an infinity where it is added to. ws starts as
 * NaN: the op may use it or not, but dw must not depend on it. */
static void conv_fold_case(ab_backend *be, ab_conv_shape s, ab_dtype t, int acc, const char *label) {
    if (ab_conv_shape_init(&s) != 0) {
        fprintf(stderr, "FAIL %s: %s\n", label, ab_error());
        failures++;
        return;
    }
    const size_t nx = (size_t)s.N * s.H * s.W * s.C, nw = (size_t)s.K * s.R * s.S * s.C,
                 ny = (size_t)s.N * s.P * s.Q * s.K, es = ab_dtype_size(t);
    float *x = falloc(nx), *R = falloc(ny), *dw = falloc(nw), *want = falloc(nw);
    fill_scaled(x, NULL, nx, 1.0);
    fill_scaled(R, NULL, ny, 1.0);
    for (size_t i = 0; i < nw; i++) dw[i] = acc ? (float)ab_rng_normal(&rng) : NAN;
    if (acc && nw > 3) dw[1] = NAN, dw[3] = INFINITY;
    memcpy(want, dw, nw * sizeof *dw);
    void *xt = to_type(be, t, x, nx), *Rt = to_type(be, t, R, ny), *ws = malloc(nw * es), *ws2 = malloc(nw * es);
    memset(ws, 0xff, nw * es); /* NaN in every type */
    char what[240];
    op_case_label(what, sizeof what, AB_OP_conv2d_backward_filter_fold,
                  "%s N%d %dx%dx%d K%d %s, %s: backward_filter into %s then accumulate, bit for bit", ab_dtype_name(t),
                  s.N, s.H, s.W, s.C, s.K, label, acc ? "dw + round(grad)" : "dw = round(grad)", ab_dtype_name(t));
    int32_t fi_want = 0, fi = 0;
    AB_CHECK(be->ops->conv2d_backward_filter(be, &s, t, xt, Rt, 0.0f, ws2) == 0 &&
                 be->ops->accumulate(be, nw, t, ws2, want, acc, &fi_want) == 0,
             "%s: the reference: %s", what, ab_error());
    AB_CHECK(be->ops->conv2d_backward_filter_fold(be, &s, t, xt, Rt, ws, dw, acc, &fi) == 0, "%s: %s", what, ab_error());
    int nonfinite = 0; /* found_inf: set exactly where a stored value is infinite or NaN */
    for (size_t i = 0; i < nw; i++) nonfinite |= !isfinite(want[i]);
    AB_CHECK(fi == nonfinite && fi_want == nonfinite, "%s: found_inf %d (accumulate's %d), %s stored", what, fi, fi_want,
             nonfinite ? "a non-finite value" : "all finite");
    size_t bad = 0, first = 0;
    for (size_t i = 0; i < nw; i++)
        if (memcmp(&dw[i], &want[i], sizeof(float)) != 0 && bad++ == 0) first = i;
    AB_CHECK(bad == 0, "%s: %zu of %zu differ, first dw[%zu] = %.9g, expected %.9g", what, bad, nw, first,
             bad ? (double)dw[first] : 0.0, bad ? (double)want[first] : 0.0);
    free(x), free(R), free(dw), free(want), free(xt), free(Rt), free(ws), free(ws2);
}

/* ---- batch normalisation over (M, C) rows ---- */

typedef struct {
    int M, C;
    double eps;
} bn_ctx;

static void bn_ref(const ab_fd_fn *f, double *y) {
    const bn_ctx *b = f->ctx;
    const double *x = f->in[0], *g = f->in[1], *be = f->in[2];
    for (int c = 0; c < b->C; c++) {
        double mean = 0.0, var = 0.0;
        for (int m = 0; m < b->M; m++) mean += x[(size_t)m * b->C + c];
        mean /= b->M;
        for (int m = 0; m < b->M; m++) {
            const double d = x[(size_t)m * b->C + c] - mean;
            var += d * d;
        }
        var /= b->M;
        const double inv = 1.0 / sqrt(var + b->eps);
        for (int m = 0; m < b->M; m++) y[(size_t)m * b->C + c] = (x[(size_t)m * b->C + c] - mean) * inv * g[c] + be[c];
    }
}

/* the evaluation forward in float64: the running statistics normalise */
static void bn_eval_ref(int M, int C, const double *x, const double *g, const double *b, const float *rm,
                        const float *rv, double *y) {
    for (int c = 0; c < C; c++) {
        const double inv = 1.0 / sqrt((double)rv[c] + 1e-5);
        for (int m = 0; m < M; m++) y[(size_t)m * C + c] = (x[(size_t)m * C + c] - rm[c]) * inv * g[c] + b[c];
    }
}

static void test_batchnorm(ab_backend *be, int M, int C) {
    const size_t n = (size_t)M * C;
    bn_ctx bc = {M, C, 1e-5};
    float *x = falloc(n), *g = falloc(C), *bt = falloc(C), *R = falloc(n), *y = falloc(n), *dx = falloc(n);
    float *dg = falloc(C), *db = falloc(C), *sm = falloc(C), *si = falloc(C), *rm = falloc(C), *rv = falloc(C);
    double *xd = dalloc(n), *gd = dalloc(C), *bd = dalloc(C), *Rd = dalloc(n), *yd = dalloc(n);
    double *gx = dalloc(n), *gg = dalloc(C), *gb = dalloc(C);
    /* a channel mean away from 0 and a spread away from 1, as real activations have */
    for (size_t i = 0; i < n; i++) {
        x[i] = (float)(1.5 + 2.0 * ab_rng_normal(&rng));
        xd[i] = x[i];
    }
    for (int c = 0; c < C; c++) {
        g[c] = (float)(1.0 + 0.5 * ab_rng_normal(&rng));
        gd[c] = g[c];
        bt[c] = (float)(0.5 * ab_rng_normal(&rng));
        bd[c] = bt[c];
        rm[c] = (float)ab_rng_normal(&rng);
        rv[c] = (float)(0.5 + ab_rng_uniform(&rng));
    }
    fill(R, Rd, n);
    double *in[3] = {xd, gd, bd};
    ab_fd_fn f = {bn_ref, in, n, Rd, &bc};
    char what[360];
    bn_ref(&f, yd);
    /* running statistics: (1 - 0.1) running + 0.1 batch, the variance unbiased */
    double *want_rm = dalloc(C), *want_rv = dalloc(C);
    for (int c = 0; c < C; c++) {
        double mean = 0.0, var = 0.0;
        for (int m = 0; m < M; m++) mean += xd[(size_t)m * C + c];
        mean /= M;
        for (int m = 0; m < M; m++) var += (xd[(size_t)m * C + c] - mean) * (xd[(size_t)m * C + c] - mean);
        want_rm[c] = 0.9 * rm[c] + 0.1 * mean;
        want_rv[c] = 0.9 * rv[c] + 0.1 * var / (M - 1);
    }
    op_case_label(what, sizeof what, AB_OP_batchnorm_forward_train,
              "fp32 M%d C%d, running statistics (momentum 0.1, unbiased variance)", M, C);
    AB_CHECK(be->ops->batchnorm_forward_train(be, M, C, AB_F32, x, g, bt, 1e-5f, 0.1f, rm, rv, sm, si, 0, y) == 0, "%s",
             ab_error());
    check(what, y, yd, n, AB_TOL_FP32_NMSE);
    snprintf(what, sizeof what, "batchnorm M%d C%d: running mean", M, C);
    check(what, rm, want_rm, C, AB_TOL_FP32_NMSE);
    snprintf(what, sizeof what, "batchnorm M%d C%d: running variance (unbiased)", M, C);
    check(what, rv, want_rv, C, AB_TOL_FP32_NMSE);

    ab_fd_grad(&f, 0, n, gx);
    ab_fd_grad(&f, 1, C, gg);
    ab_fd_grad(&f, 2, C, gb);
    for (int c = 0; c < C; c++) dg[c] = db[c] = NAN; /* acc 0 overwrites */
    op_case_label(what, sizeof what, AB_OP_batchnorm_backward, "fp32 M%d C%d acc 0 over NaN, against finite differences", M,
              C);
    AB_CHECK(be->ops->batchnorm_backward(be, M, C, AB_F32, x, R, g, sm, si, 0.0f, dg, db, dx) == 0, "%s", ab_error());
    snprintf(what, sizeof what, "batchnorm M%d C%d: dx against finite differences", M, C);
    failures += ab_fd_check(what, dx, gx, n);
    snprintf(what, sizeof what, "batchnorm M%d C%d: d_weight", M, C);
    failures += ab_fd_check(what, dg, gg, C);
    snprintf(what, sizeof what, "batchnorm M%d C%d: d_bias", M, C);
    failures += ab_fd_check(what, db, gb, C);
    /* acc 1 adds; dx may alias dy */
    double *wg = dalloc(C), *wb = dalloc(C);
    for (int c = 0; c < C; c++) {
        dg[c] = db[c] = 1.0f;
        wg[c] = 1.0 + gg[c];
        wb[c] = 1.0 + gb[c];
    }
    float *alias = falloc(n);
    memcpy(alias, R, n * sizeof *R);
    op_case_label(what, sizeof what, AB_OP_batchnorm_backward, "fp32 M%d C%d acc 1, dx in place over dy", M, C);
    AB_CHECK(be->ops->batchnorm_backward(be, M, C, AB_F32, x, alias, g, sm, si, 1.0f, dg, db, alias) == 0, "%s",
             ab_error());
    snprintf(what, sizeof what, "batchnorm M%d C%d: d_weight accumulated", M, C);
    failures += ab_fd_check(what, dg, wg, C);
    snprintf(what, sizeof what, "batchnorm M%d C%d: d_bias accumulated", M, C);
    failures += ab_fd_check(what, db, wb, C);
    snprintf(what, sizeof what, "batchnorm M%d C%d: dx in place over dy", M, C);
    failures += ab_fd_check(what, alias, gx, n);

    /* evaluation: the running statistics normalise */
    bn_eval_ref(M, C, xd, gd, bd, rm, rv, yd);
    op_case_label(what, sizeof what, AB_OP_batchnorm_forward_eval, "fp32 M%d C%d from the running statistics", M, C);
    AB_CHECK(be->ops->batchnorm_forward_eval(be, M, C, AB_F32, x, g, bt, rm, rv, 1e-5f, 0, y) == 0, "%s", ab_error());
    check(what, y, yd, n, AB_TOL_FP32_NMSE);

    /* the fused ReLU: the same bits as the separate relu_forward on the rounded output, train
     * and eval, each storage type */
    for (ab_dtype t = AB_F32; t <= AB_BF16; t++) {
        void *xt = to_type(be, t, x, n), *y0 = malloc(n * 4), *y1 = malloc(n * 4);
        float *sm3 = falloc(C), *si3 = falloc(C);
        for (int ev = 0; ev < 2; ev++) {
            op_case_label(what, sizeof what, ev ? AB_OP_batchnorm_forward_eval : AB_OP_batchnorm_forward_train,
                      "%s M%d C%d fused ReLU (the bits of batch norm then relu_forward)", ab_dtype_name(t), M, C);
            /* batch norm then relu_forward: what the fused call must give */
            int rc =
                ev ? be->ops->batchnorm_forward_eval(be, M, C, t, xt, g, bt, rm, rv, 1e-5f, 0, y0)
                   : be->ops->batchnorm_forward_train(be, M, C, t, xt, g, bt, 1e-5f, 0.1f, NULL, NULL, sm3, si3, 0, y0);
            rc |= be->ops->relu_forward(be, n, t, y0, y0);
            AB_CHECK(rc == 0, "%s", ab_error());
            rc =
                ev ? be->ops->batchnorm_forward_eval(be, M, C, t, xt, g, bt, rm, rv, 1e-5f, 1, y1)
                   : be->ops->batchnorm_forward_train(be, M, C, t, xt, g, bt, 1e-5f, 0.1f, NULL, NULL, sm3, si3, 1, y1);
            AB_CHECK(rc == 0 && memcmp(y0, y1, n * ab_dtype_size(t)) == 0,
                     "%s: the fused ReLU differs from batch norm then relu_forward", what);
        }
        free(xt), free(y0), free(y1), free(sm3), free(si3);
    }

    /* fp16 / bf16 activations with fp32 scale, shift and statistics */
    for (ab_dtype t = AB_F16; t <= AB_BF16; t++) {
        const char *tn = ab_dtype_name(t);
        float *xr = falloc(n), *Rr = falloc(n), *sm2 = falloc(C), *si2 = falloc(C);
        memcpy(xr, x, n * sizeof *x);
        memcpy(Rr, R, n * sizeof *R);
        round_through(be, t, xr, n);
        round_through(be, t, Rr, n);
        double *xrd = dalloc(n), *Rrd = dalloc(n), *gxr = dalloc(n);
        to_double(xr, xrd, n);
        to_double(Rr, Rrd, n);
        double *inr[3] = {xrd, gd, bd};
        ab_fd_fn fr = {bn_ref, inr, n, Rrd, &bc};
        bn_ref(&fr, yd);
        ab_fd_grad(&fr, 0, n, gxr);
        void *xt = to_type(be, t, xr, n), *Rt = to_type(be, t, Rr, n), *yt = malloc(n * 2), *dxt = malloc(n * 2);
        op_case_label(what, sizeof what, AB_OP_batchnorm_forward_train, "%s M%d C%d", tn, M, C);
        AB_CHECK(be->ops->batchnorm_forward_train(be, M, C, t, xt, g, bt, 1e-5f, 0.1f, NULL, NULL, sm2, si2, 0, yt) ==
                     0,
                 "%s", ab_error());
        from_type(be, t, yt, y, n);
        check(what, y, yd, n, lowp_tol(t));
        op_case_label(what, sizeof what, AB_OP_batchnorm_backward, "%s M%d C%d acc 0", tn, M, C);
        AB_CHECK(be->ops->batchnorm_backward(be, M, C, t, xt, Rt, g, sm2, si2, 0.0f, dg, db, dxt) == 0, "%s",
                 ab_error());
        from_type(be, t, dxt, dx, n);
        check(what, dx, gxr, n, lowp_tol(t));
        /* evaluation from the running statistics, in place over x */
        bn_eval_ref(M, C, xrd, gd, bd, rm, rv, yd);
        op_case_label(what, sizeof what, AB_OP_batchnorm_forward_eval, "%s M%d C%d from the running statistics, in place",
                  tn, M, C);
        AB_CHECK(be->ops->batchnorm_forward_eval(be, M, C, t, xt, g, bt, rm, rv, 1e-5f, 0, xt) == 0, "%s", ab_error());
        from_type(be, t, xt, y, n);
        check(what, y, yd, n, lowp_tol(t));
        free(xr), free(Rr), free(sm2), free(si2), free(xrd), free(Rrd), free(gxr), free(xt), free(Rt), free(yt),
            free(dxt);
    }
    free(x), free(g), free(bt), free(R), free(y), free(dx), free(dg), free(db), free(sm), free(si), free(rm), free(rv);
    free(xd), free(gd), free(bd), free(Rd), free(yd), free(gx), free(gg), free(gb), free(want_rm), free(want_rv);
    free(wg), free(wb), free(alias);
}

/* the one-pass statistics where the mean is 10^4 spreads away from 0: var = E[d^2] - E[d]^2
 * must not cancel (fp32 inputs, the statistics against float64 two-pass ones) */
static void test_batchnorm_offset(ab_backend *be) {
    enum { M = 257, C = 3 };
    float x[M * C], y[M * C], g[C] = {1, 1, 1}, b[C] = {0, 0, 0}, sm[C], si[C];
    for (int i = 0; i < M * C; i++) x[i] = (float)(1e4 + ab_rng_normal(&rng));
    op_case(AB_OP_batchnorm_forward_train, "fp32 M%d C%d, the mean 10^4 spreads from 0 (statistics must not cancel)", M,
            C);
    AB_CHECK(be->ops->batchnorm_forward_train(be, M, C, AB_F32, x, g, b, 1e-5f, 0.1f, NULL, NULL, sm, si, 0, y) == 0,
             "%s", ab_error());
    double worst = 0.0;
    for (int c = 0; c < C; c++) {
        double mean = 0.0, var = 0.0;
        for (int m = 0; m < M; m++) mean += x[m * C + c];
        mean /= M;
        for (int m = 0; m < M; m++) var += (x[m * C + c] - mean) * (x[m * C + c] - mean);
        var /= M;
        const double inv = 1.0 / sqrt(var + 1e-5), e = fabs(si[c] - inv) / inv;
        worst = e > worst ? e : worst;
        AB_CHECK(fabs(sm[c] - mean) <= 1e-6 * fabs(mean), "offset batch norm: mean %g, float64 %g", sm[c], mean);
    }
    AB_CHECK(worst <= 1e-6, "offset batch norm: 1/std off by %.3g relative (one-pass statistics cancelled)", worst);
    op_note("1/std within %.2g of float64", worst);
}

/* ---- pooling ---- */

/* max pooling in float64; a NaN anywhere in the window wins, as in PyTorch */
static void maxpool_ref(const ab_fd_fn *f, double *y) {
    const ab_pool_shape *s = f->ctx;
    const double *x = f->in[0];
    for (int n = 0; n < s->N; n++)
        for (int p = 0; p < s->P; p++)
            for (int q = 0; q < s->Q; q++)
                for (int c = 0; c < s->C; c++) {
                    double m = -INFINITY;
                    for (int r = 0; r < s->R; r++)
                        for (int t = 0; t < s->S; t++) {
                            const int h = p * s->stride_h - s->pad_h + r, w = q * s->stride_w - s->pad_w + t;
                            if (h < 0 || h >= s->H || w < 0 || w >= s->W) continue;
                            const double v = x[(((size_t)n * s->H + h) * s->W + w) * s->C + c];
                            if (v > m || (isnan(v) && !isnan(m))) m = v;
                        }
                    y[(((size_t)n * s->P + p) * s->Q + q) * s->C + c] = m;
                }
}

/* max pooling's backward rule in float64: dx = 0, then each dy to the first position of its
 * window (row-major) whose x equals y (NaN equal to NaN) */
static void maxpool_route(const ab_pool_shape *s, const double *x, const double *y, const double *dy, double *dx) {
    memset(dx, 0, (size_t)s->N * s->H * s->W * s->C * sizeof *dx);
    for (int n = 0; n < s->N; n++)
        for (int p = 0; p < s->P; p++)
            for (int q = 0; q < s->Q; q++)
                for (int c = 0; c < s->C; c++) {
                    const size_t o = (((size_t)n * s->P + p) * s->Q + q) * s->C + c;
                    int done = 0;
                    for (int r = 0; r < s->R && !done; r++)
                        for (int t = 0; t < s->S && !done; t++) {
                            const int h = p * s->stride_h - s->pad_h + r, w = q * s->stride_w - s->pad_w + t;
                            if (h < 0 || h >= s->H || w < 0 || w >= s->W) continue;
                            const size_t i = (((size_t)n * s->H + h) * s->W + w) * s->C + c;
                            if (x[i] == y[o] || (isnan(x[i]) && isnan(y[o]))) {
                                dx[i] += dy[o];
                                done = 1;
                            }
                        }
                }
}

static void test_maxpool(ab_backend *be, ab_pool_shape s) {
    AB_CHECK(ab_pool_shape_init(&s) == 0, "%s", ab_error());
    const size_t nx = (size_t)s.N * s.H * s.W * s.C, ny = (size_t)s.N * s.P * s.Q * s.C;
    float *x = falloc(nx), *R = falloc(ny), *y = falloc(ny), *dx = falloc(nx);
    double *xd = dalloc(nx), *Rd = dalloc(ny), *yd = dalloc(ny), *gx = dalloc(nx);
    char shape[120], what[360];
    snprintf(shape, sizeof shape, "N%d %dx%dx%d window %dx%d/%d pad %d -> %dx%d", s.N, s.H, s.W, s.C, s.R, s.S,
             s.stride_h, s.pad_h, s.P, s.Q);
    fill(x, xd, nx); /* distinct values: no ties, so the finite differences see one winner */
    fill(R, Rd, ny);
    double *in[1] = {xd};
    ab_fd_fn f = {maxpool_ref, in, ny, Rd, &s};
    maxpool_ref(&f, yd);
    ab_fd_grad(&f, 0, nx, gx);
    op_case_label(what, sizeof what, AB_OP_maxpool_forward, "fp32 %s", shape);
    AB_CHECK(be->ops->maxpool_forward(be, &s, AB_F32, x, y) == 0, "%s", ab_error());
    check(what, y, yd, ny, 0.0);
    for (size_t i = 0; i < nx; i++) dx[i] = NAN;
    op_case_label(what, sizeof what, AB_OP_maxpool_backward, "fp32 %s over NaN, against finite differences", shape);
    AB_CHECK(be->ops->maxpool_backward(be, &s, AB_F32, x, y, R, dx) == 0, "%s", ab_error());
    failures += ab_fd_check(what, dx, gx, nx);

    /* a tie goes to the first position of the window, as PyTorch routes it */
    ab_pool_shape t1 = {.N = 1, .H = 2, .W = 2, .C = 1, .R = 2, .S = 2, .stride_h = 2, .stride_w = 2};
    ab_pool_shape_init(&t1);
    const float tx[4] = {1.0f, 3.0f, 3.0f, 2.0f}, tdy = 5.0f;
    float ty, tdx[4];
    op_case_label(what, sizeof what, AB_OP_maxpool_forward, "fp32 2x2 window, a tie");
    AB_CHECK(be->ops->maxpool_forward(be, &t1, AB_F32, tx, &ty) == 0, "%s", ab_error());
    AB_CHECK(ty == 3.0f, "%s: y %g (want 3)", what, ty);
    op_case_label(what, sizeof what, AB_OP_maxpool_backward, "fp32 2x2 window, a tie goes to the first position");
    AB_CHECK(be->ops->maxpool_backward(be, &t1, AB_F32, tx, &ty, &tdy, tdx) == 0, "%s", ab_error());
    AB_CHECK(tdx[0] == 0.0f && tdx[1] == 5.0f && tdx[2] == 0.0f && tdx[3] == 0.0f, "%s: dx %g %g %g %g (want 0 5 0 0)",
             what, tdx[0], tdx[1], tdx[2], tdx[3]);

    /* fp16 / bf16: a max is exact, so the rounded input's max is bit-exact; the backward routes
     * the rounded dy to the winners of the rounded x (rounding may make ties, which go to the
     * first position) and sums where windows overlap, once rounded */
    for (ab_dtype t = AB_F16; t <= AB_BF16; t++) {
        const char *tn = ab_dtype_name(t);
        void *xt = to_type(be, t, x, nx), *yt = malloc(ny * 2), *Rt = to_type(be, t, R, ny), *dxt = malloc(nx * 2);
        float *xr = falloc(nx), *Rr = falloc(ny);
        from_type(be, t, xt, xr, nx);
        from_type(be, t, Rt, Rr, ny);
        double *xrd = dalloc(nx), *Rrd = dalloc(ny), *gxr = dalloc(nx);
        to_double(xr, xrd, nx);
        to_double(Rr, Rrd, ny);
        double *inr[1] = {xrd};
        ab_fd_fn fr = {maxpool_ref, inr, ny, Rrd, &s};
        maxpool_ref(&fr, yd);
        op_case_label(what, sizeof what, AB_OP_maxpool_forward, "%s %s (exact)", tn, shape);
        AB_CHECK(be->ops->maxpool_forward(be, &s, t, xt, yt) == 0, "%s", ab_error());
        from_type(be, t, yt, y, ny);
        check(what, y, yd, ny, 0.0);
        maxpool_route(&s, xrd, yd, Rrd, gxr);
        for (size_t i = 0; i < ny; i++) ab_store(yt, i, t, (float)yd[i]); /* y from the reference */
        op_case_label(what, sizeof what, AB_OP_maxpool_backward, "%s %s", tn, shape);
        AB_CHECK(be->ops->maxpool_backward(be, &s, t, xt, yt, Rt, dxt) == 0, "%s", ab_error());
        check_stored(what, t, dxt, gxr, nx, AB_TOL_STORE_ULPS);
        free(xt), free(yt), free(Rt), free(dxt), free(xr), free(Rr), free(xrd), free(Rrd), free(gxr);
    }
    free(x), free(R), free(y), free(dx), free(xd), free(Rd), free(yd), free(gx);
}

/* Max pooling of values it must pass through, each storage type: a NaN in a window wins, +inf
 * wins, -inf loses to anything, 65504 and a subnormal (2^-24) come out as they went in, and a
 * window over the padding of all-negative values keeps its negative max (padding never wins).
 * Backward routes dy (small integers: the sums of overlapping windows are exact) to the NaN, the
 * infinity, ...: the position whose x equals y. */
static void test_maxpool_edges(ab_backend *be) {
    ab_pool_shape s = {
        .N = 1, .H = 5, .W = 5, .C = 2, .R = 3, .S = 3, .stride_h = 2, .stride_w = 2, .pad_h = 1, .pad_w = 1};
    AB_CHECK(ab_pool_shape_init(&s) == 0, "%s", ab_error());
    enum { NX = 5 * 5 * 2, NY = 3 * 3 * 2 };
    float xf[NX], dyf[NY];
    for (int i = 0; i < NX; i++) {
        const float v = (float)ab_rng_normal(&rng);
        xf[i] = i % 2 ? -1.0f - fabsf(v) : v; /* channel 1 all negative */
    }
#define AT(h, w, c) (((h)*5 + (w)) * 2 + (c))
    xf[AT(0, 0, 0)] = NAN;
    xf[AT(2, 3, 0)] = INFINITY;
    xf[AT(1, 1, 0)] = -INFINITY;
    xf[AT(4, 4, 0)] = 65504.0f;
    xf[AT(4, 0, 1)] = 0x1p-24f;
    xf[AT(0, 4, 1)] = -65504.0f;
    xf[AT(2, 2, 1)] = -INFINITY;
#undef AT
    for (int i = 0; i < NY; i++) dyf[i] = (float)((int)ab_rng_below(&rng, 17) - 8);
    char what[360];
    for (ab_dtype t = AB_F32; t <= AB_BF16; t++) {
        const char *tn = ab_dtype_name(t);
        const size_t es = ab_dtype_size(t);
        void *xt = malloc(NX * es), *yt = malloc(NY * es), *dyt = malloc(NY * es), *dxt = malloc(NX * es);
        double xd[NX], yd[NY], dyd[NY], dxd[NX];
        for (int i = 0; i < NX; i++) {
            ab_store(xt, (size_t)i, t, xf[i]);
            xd[i] = ab_load(xt, (size_t)i, t);
        }
        for (int i = 0; i < NY; i++) {
            ab_store(dyt, (size_t)i, t, dyf[i]);
            dyd[i] = ab_load(dyt, (size_t)i, t);
        }
        double *in[1] = {xd};
        ab_fd_fn f = {maxpool_ref, in, NY, NULL, &s};
        maxpool_ref(&f, yd);
        op_case_label(what, sizeof what, AB_OP_maxpool_forward,
                  "%s N1 5x5x2 window 3x3/2 pad 1: NaN, +-inf, 65504, 2^-24, negative windows over padding", tn);
        AB_CHECK(be->ops->maxpool_forward(be, &s, t, xt, yt) == 0, "%s", ab_error());
        check_stored(what, t, yt, yd, NY, 0.0);
        AB_CHECK(isnan(ab_load(yt, 0, t)) && isinf(ab_load(yt, 8, t)) && ab_load(yt, 13, t) == 0x1p-24f &&
                     ab_load(yt, 1, t) < 0.0f,
                 "%s: y[0] %g (NaN), y[8] %g (inf), y[2,0,1] %g (2^-24), y[0,0,1] %g (negative)", what,
                 (double)ab_load(yt, 0, t), (double)ab_load(yt, 8, t), (double)ab_load(yt, 13, t),
                 (double)ab_load(yt, 1, t));
        maxpool_route(&s, xd, yd, dyd, dxd);
        for (int i = 0; i < NY; i++) ab_store(yt, (size_t)i, t, (float)yd[i]); /* y from the reference */
        op_case_label(what, sizeof what, AB_OP_maxpool_backward, "%s N1 5x5x2 window 3x3/2 pad 1: to NaN and inf winners",
                  tn);
        AB_CHECK(be->ops->maxpool_backward(be, &s, t, xt, yt, dyt, dxt) == 0, "%s", ab_error());
        check_stored(what, t, dxt, dxd, NX, 0.0);
        free(xt), free(yt), free(dyt), free(dxt);
    }
}

typedef struct {
    int N, HW, C;
} avg_ctx;

static void avgpool_ref(const ab_fd_fn *f, double *y) {
    const avg_ctx *a = f->ctx;
    for (int n = 0; n < a->N; n++)
        for (int c = 0; c < a->C; c++) {
            double s = 0.0;
            for (int i = 0; i < a->HW; i++) s += f->in[0][((size_t)n * a->HW + i) * a->C + c];
            y[(size_t)n * a->C + c] = s / a->HW;
        }
}

static void test_avgpool(ab_backend *be) {
    avg_ctx a = {3, 7 * 5, 6};
    const size_t nx = (size_t)a.N * a.HW * a.C, ny = (size_t)a.N * a.C;
    float *x = falloc(nx), *R = falloc(ny), *y = falloc(ny), *dx = falloc(nx);
    double *xd = dalloc(nx), *Rd = dalloc(ny), *yd = dalloc(ny), *gx = dalloc(nx);
    char what[360];
    fill(x, xd, nx);
    fill(R, Rd, ny);
    double *in[1] = {xd};
    ab_fd_fn f = {avgpool_ref, in, ny, Rd, &a};
    avgpool_ref(&f, yd);
    ab_fd_grad(&f, 0, nx, gx);
    op_case_label(what, sizeof what, AB_OP_avgpool_forward, "fp32 N%d HW%d C%d", a.N, a.HW, a.C);
    AB_CHECK(be->ops->avgpool_forward(be, a.N, a.HW, a.C, AB_F32, x, y) == 0, "%s", ab_error());
    check(what, y, yd, ny, AB_TOL_FP32_NMSE);
    op_case_label(what, sizeof what, AB_OP_avgpool_backward, "fp32 N%d HW%d C%d against finite differences", a.N, a.HW,
              a.C);
    AB_CHECK(be->ops->avgpool_backward(be, a.N, a.HW, a.C, AB_F32, R, dx) == 0, "%s", ab_error());
    failures += ab_fd_check(what, dx, gx, nx);

    /* fp16 / bf16 on other odd sizes: the fp32 mean of the stored values, one rounding; the
     * backward's dy / HW once rounded on every row */
    const avg_ctx b = {2, 9, 5};
    const size_t mx = (size_t)b.N * b.HW * b.C, my = (size_t)b.N * b.C;
    for (ab_dtype t = AB_F16; t <= AB_BF16; t++) {
        const char *tn = ab_dtype_name(t);
        void *xt = malloc(mx * 2), *yt = malloc(my * 2), *dyt = malloc(my * 2), *dxt = malloc(mx * 2);
        double *xr = dalloc(mx), *want = dalloc(mx);
        for (size_t i = 0; i < mx; i++) {
            ab_store(xt, i, t, (float)ab_rng_normal(&rng));
            xr[i] = ab_load(xt, i, t);
        }
        double *inr[1] = {xr};
        ab_fd_fn fr = {avgpool_ref, inr, my, NULL, &b};
        avgpool_ref(&fr, want);
        op_case_label(what, sizeof what, AB_OP_avgpool_forward, "%s N%d HW%d C%d", tn, b.N, b.HW, b.C);
        AB_CHECK(be->ops->avgpool_forward(be, b.N, b.HW, b.C, t, xt, yt) == 0, "%s", ab_error());
        check_stored(what, t, yt, want, my, AB_TOL_STORE_ULPS);
        for (size_t i = 0; i < my; i++) ab_store(dyt, i, t, (float)ab_rng_normal(&rng));
        for (size_t i = 0; i < mx; i++) {
            const size_t n = i / ((size_t)b.HW * b.C), c = i % (size_t)b.C;
            want[i] = ab_load(dyt, n * b.C + c, t) / b.HW;
        }
        op_case_label(what, sizeof what, AB_OP_avgpool_backward, "%s N%d HW%d C%d", tn, b.N, b.HW, b.C);
        AB_CHECK(be->ops->avgpool_backward(be, b.N, b.HW, b.C, t, dyt, dxt) == 0, "%s", ab_error());
        check_stored(what, t, dxt, want, mx, AB_TOL_STORE_ULPS);
        free(xt), free(yt), free(dyt), free(dxt), free(xr), free(want);
    }
    free(x), free(R), free(y), free(dx), free(xd), free(Rd), free(yd), free(gx);
}

/* Average pooling of values it must pass through, each storage type, one channel each: 65504
 * five times averages to 65504 (the sum is fp32: no overflow in fp16), a NaN makes its channel
 * NaN, +inf gives +inf, +inf and -inf give NaN, subnormals (2^-24) average to themselves,
 * -65504 stays. Backward: dy 65504, NaN, +-inf, 2^-24 (which / 5 underflows to 0 in fp16)
 * and -65504, divided by HW. */
static void test_avgpool_edges(ab_backend *be) {
    enum { HW = 5, C = 6 };
    const float col[C][HW] = {
        {65504.0f, 65504.0f, 65504.0f, 65504.0f, 65504.0f},
        {1.0f, NAN, -2.0f, 0.5f, 3.0f},
        {1.0f, 2.0f, INFINITY, -4.0f, 0.25f},
        {INFINITY, 1.0f, -INFINITY, 2.0f, 3.0f},
        {0x1p-24f, 0x1p-24f, 0x1p-24f, 0x1p-24f, 0x1p-24f},
        {-65504.0f, -65504.0f, -65504.0f, -65504.0f, -65504.0f},
    };
    const float dyf[C] = {65504.0f, NAN, INFINITY, -INFINITY, 0x1p-24f, -65504.0f};
    char what[360];
    for (ab_dtype t = AB_F32; t <= AB_BF16; t++) {
        const char *tn = ab_dtype_name(t);
        const size_t es = ab_dtype_size(t);
        void *xt = malloc(HW * C * es), *yt = malloc(C * es), *dyt = malloc(C * es), *dxt = malloc(HW * C * es);
        double xd[HW * C], yd[C], dxd[HW * C];
        for (int i = 0; i < HW; i++)
            for (int c = 0; c < C; c++) {
                ab_store(xt, (size_t)i * C + c, t, col[c][i]);
                xd[i * C + c] = ab_load(xt, (size_t)i * C + c, t);
            }
        const avg_ctx a = {1, HW, C};
        double *in[1] = {xd};
        ab_fd_fn f = {avgpool_ref, in, C, NULL, &a};
        avgpool_ref(&f, yd);
        op_case_label(what, sizeof what, AB_OP_avgpool_forward, "%s N1 HW5 C6: 65504, NaN, inf, inf - inf, 2^-24", tn);
        AB_CHECK(be->ops->avgpool_forward(be, 1, HW, C, t, xt, yt) == 0, "%s", ab_error());
        check_stored(what, t, yt, yd, C, AB_TOL_STORE_ULPS);
        if (t == AB_F16)
            AB_CHECK(ab_load(yt, 0, t) == 65504.0f && ab_load(yt, 5, t) == -65504.0f,
                     "%s: the mean of 65504s is %g, of -65504s %g (the sum must not overflow)", what,
                     (double)ab_load(yt, 0, t), (double)ab_load(yt, 5, t));
        for (int c = 0; c < C; c++) {
            ab_store(dyt, (size_t)c, t, dyf[c]);
            for (int i = 0; i < HW; i++) dxd[i * C + c] = (double)ab_load(dyt, (size_t)c, t) / HW;
        }
        op_case_label(what, sizeof what, AB_OP_avgpool_backward, "%s N1 HW5 C6: dy 65504, NaN, +-inf, 2^-24", tn);
        AB_CHECK(be->ops->avgpool_backward(be, 1, HW, C, t, dyt, dxt) == 0, "%s", ab_error());
        check_stored(what, t, dxt, dxd, HW * C, AB_TOL_STORE_ULPS);
        free(xt), free(yt), free(dyt), free(dxt);
    }
}

/* ---- add ---- */

static void test_add(ab_backend *be) {
    const size_t nx = 3 * 35 * 6;
    float *x = falloc(nx), *b = falloc(nx), *s = falloc(nx);
    double *sd = dalloc(nx);
    char what[360];
    fill(x, NULL, nx);
    fill(b, NULL, nx);
    /* fp32 sum, one rounding; in place over either operand */
    for (size_t i = 0; i < nx; i++) sd[i] = (double)x[i] + b[i];
    op_case_label(what, sizeof what, AB_OP_add, "fp32 %zu", nx);
    AB_CHECK(be->ops->add(be, nx, AB_F32, x, b, 0, s) == 0, "%s", ab_error());
    check(what, s, sd, nx, AB_TOL_FP32_NMSE);
    check_stored(what, AB_F32, s, sd, nx, 0.0); /* the sum of two floats rounded once */
    memcpy(s, b, nx * sizeof *b);
    op_case_label(what, sizeof what, AB_OP_add, "fp32 %zu in place over b", nx);
    AB_CHECK(be->ops->add(be, nx, AB_F32, x, s, 0, s) == 0, "%s", ab_error());
    check(what, s, sd, nx, AB_TOL_FP32_NMSE);
    void *xt = to_type(be, AB_F16, x, nx), *bt = to_type(be, AB_F16, b, nx);
    float *xr = falloc(nx), *br = falloc(nx);
    from_type(be, AB_F16, xt, xr, nx);
    from_type(be, AB_F16, bt, br, nx);
    op_case_label(what, sizeof what, AB_OP_add, "fp16 %zu in place over b, one rounding of the fp32 sum", nx);
    AB_CHECK(be->ops->add(be, nx, AB_F16, xt, bt, 0, bt) == 0, "%s", ab_error());
    from_type(be, AB_F16, bt, s, nx);
    int bad = 0;
    for (size_t i = 0; i < nx; i++) bad += ab_f16_to_f32(ab_f32_to_f16(xr[i] + br[i])) != s[i];
    AB_CHECK(bad == 0, "%s: %d elements are not the fp32 sum rounded once", what, bad);
    for (size_t i = 0; i < nx; i++) sd[i] = (double)xr[i] + br[i];
    check_stored(what, AB_F16, bt, sd, nx, 0.0);
    free(xt), free(bt), free(xr), free(br);

    /* bf16 on an odd size, in place over a: the float64 sum of the stored values (exact) rounded
     * once */
    const size_t m = 1031;
    void *at = malloc(m * 2), *bb = malloc(m * 2);
    double *want = dalloc(m);
    for (size_t i = 0; i < m; i++) {
        ab_store(at, i, AB_BF16, (float)ab_rng_normal(&rng));
        ab_store(bb, i, AB_BF16, (float)ab_rng_normal(&rng));
        want[i] = (double)ab_load(at, i, AB_BF16) + ab_load(bb, i, AB_BF16);
    }
    op_case_label(what, sizeof what, AB_OP_add, "bf16 %zu in place over a, one rounding", m);
    AB_CHECK(be->ops->add(be, m, AB_BF16, at, bb, 0, at) == 0, "%s", ab_error());
    check_stored(what, AB_BF16, at, want, m, 0.0);
    free(at), free(bb), free(want);

    /* the fused ReLU after the add: the bits of add then relu_forward */
    void *r0 = malloc(nx * 4), *r1 = malloc(nx * 4);
    for (ab_dtype t = AB_F32; t <= AB_BF16; t++) {
        void *ta = to_type(be, t, x, nx), *tb = to_type(be, t, b, nx);
        op_case_label(what, sizeof what, AB_OP_add, "%s %zu fused ReLU (the bits of add then relu_forward)",
                  ab_dtype_name(t), nx);
        int rc = be->ops->add(be, nx, t, ta, tb, 0, r0);
        rc |= be->ops->relu_forward(be, nx, t, r0, r0);
        AB_CHECK(rc == 0, "%s", ab_error());
        rc = be->ops->add(be, nx, t, ta, tb, 1, r1);
        AB_CHECK(rc == 0 && memcmp(r0, r1, nx * ab_dtype_size(t)) == 0, "%s: the fused ReLU differs", what);
        free(ta), free(tb);
    }
    free(r0), free(r1);
    free(x), free(b), free(s), free(sd);
}

/* add on values it must pass through, each storage type (the pairs are stored in it first, so
 * fp32's largest becomes inf in fp16, 65504 becomes 65536 in bf16): the float64 sum of the stored
 * values rounded once, bit for bit: 65504 + 16 = 65520 rounds to inf in fp16 (65504 + 15 does
 * not), a NaN on either side, inf - inf, subnormal sums (fp32's 2^-149, bf16's 2^-133,
 * fp16's 2^-24) kept, not flushed; with the fused ReLU a NaN passes and -inf becomes 0. */
static void test_add_edges(ab_backend *be) {
    static const float pairs[][2] = {
        {65504.0f, 65504.0f},
        {65504.0f, 16.0f},
        {65504.0f, 15.0f},
        {-65504.0f, -16.0f},
        {65504.0f, -65504.0f},
        {NAN, 1.0f},
        {1.0f, NAN},
        {INFINITY, 1.0f},
        {INFINITY, -INFINITY},
        {-INFINITY, 5.0f},
        {0x1p-24f, 0x1p-24f},
        {0x1p-24f, -0x1p-24f},
        {0x1p-14f, -0x1p-24f},
        {0x1p-149f, 0x1p-149f},
        {0x1p-133f, 0x1p-133f},
        {FLT_MAX, FLT_MAX},
        {0x1.fcp127f, 0x1.fcp127f},
        {FLT_MAX, -FLT_MAX},
        {-0.0f, -0.0f},
        {2.5f, -3.0f},
    };
    enum { P = sizeof pairs / sizeof pairs[0] };
    char what[360];
    for (ab_dtype t = AB_F32; t <= AB_BF16; t++) {
        const char *tn = ab_dtype_name(t);
        const size_t es = ab_dtype_size(t);
        void *a = malloc(P * es), *b = malloc(P * es), *y = malloc(P * es);
        double sum[P], relu[P];
        for (int i = 0; i < P; i++) {
            ab_store(a, (size_t)i, t, pairs[i][0]);
            ab_store(b, (size_t)i, t, pairs[i][1]);
            sum[i] = (double)ab_load(a, (size_t)i, t) + ab_load(b, (size_t)i, t);
            relu[i] = sum[i] > 0.0 || isnan(sum[i]) ? sum[i] : 0.0;
        }
        op_case_label(what, sizeof what, AB_OP_add, "%s %d edge pairs: 65504 + 16, NaN, inf - inf, subnormals", tn, P);
        AB_CHECK(be->ops->add(be, P, t, a, b, 0, y) == 0, "%s", ab_error());
        check_stored(what, t, y, sum, P, 0.0);
        if (t == AB_F16)
            AB_CHECK(isinf(ab_load(y, 0, t)) && isinf(ab_load(y, 1, t)) && ab_load(y, 2, t) == 65504.0f &&
                         isinf(ab_load(y, 3, t)) && ab_load(y, 3, t) < 0.0f && ab_load(y, 10, t) == 0x1p-23f,
                     "%s: 65504 + 65504 = %g, 65504 + 16 = %g (inf), 65504 + 15 = %g (65504), -65504 - 16 = %g "
                     "(-inf), 2^-24 + 2^-24 = %g",
                     what, (double)ab_load(y, 0, t), (double)ab_load(y, 1, t), (double)ab_load(y, 2, t),
                     (double)ab_load(y, 3, t), (double)ab_load(y, 10, t));
        AB_CHECK(signbit(ab_load(y, 18, t)), "%s: -0 + -0 = %g, not -0", what, (double)ab_load(y, 18, t));
        op_case_label(what, sizeof what, AB_OP_add, "%s %d edge pairs, fused ReLU: NaN passes, -inf becomes 0", tn, P);
        AB_CHECK(be->ops->add(be, P, t, a, b, 1, y) == 0, "%s", ab_error());
        check_stored(what, t, y, relu, P, 0.0);
        free(a), free(b), free(y);
    }
}

/* fp16 -> fp32 in bulk (F16C where the CPU has it) is the scalar conversion, every pattern */
static void test_widen_all(ab_backend *be) {
    uint16_t *h = malloc(65536 * sizeof *h);
    float *f = falloc(65536);
    for (int i = 0; i < 65536; i++) h[i] = (uint16_t)i;
    op_case(AB_OP_cast, "fp16 -> fp32 all 65536 patterns, bit for bit against the scalar conversion");
    AB_CHECK(be->ops->cast(be, 65536, AB_F16, h, AB_F32, f) == 0, "%s", ab_error());
    int bad = 0;
    for (int i = 0; i < 65536; i++) {
        const float want = ab_f16_to_f32((uint16_t)i);
        bad += memcmp(&want, &f[i], sizeof want) != 0;
    }
    AB_CHECK(bad == 0, "fp16 widening: %d of 65536 patterns differ from the scalar conversion", bad);
    free(h);
    free(f);
}

/* the conversions' last 1 to 15 values of a call (masked vector loads and stores on AVX-512, a
 * scalar loop elsewhere): every fp16 pattern widened, and fp32 edge values (NaN with payloads,
 * subnormals, ties, overflow) narrowed, in calls of 1 to 17 values at every offset of a 16-value
 * block, bit for bit against the scalar conversions; a NaN in a tail keeps its bits */
static void test_convert_tails(ab_backend *be) {
    uint16_t *h = malloc(65536 * sizeof *h), *h2 = malloc(65536 * sizeof *h2);
    float *f = falloc(65536);
    for (int i = 0; i < 65536; i++) h[i] = (uint16_t)(i * 40503u); /* every pattern, NaNs spread out */
    op_case(AB_OP_cast, "fp16 -> fp32 in calls of 1 to 17 values: every pattern through the tails");
    int bad = 0;
    for (int len = 1; len <= 17; len++) {
        memset(f, 0xff, 65536 * sizeof *f);
        for (int i = 0; i < 65536; i += len) {
            const int m = 65536 - i < len ? 65536 - i : len;
            AB_CHECK(be->ops->cast(be, (size_t)m, AB_F16, h + i, AB_F32, f + i) == 0, "%s", ab_error());
        }
        for (int i = 0; i < 65536; i++) {
            const float want = ab_f16_to_f32(h[i]);
            bad += memcmp(&want, &f[i], sizeof want) != 0;
        }
    }
    AB_CHECK(bad == 0, "fp16 widening in short calls: %d values differ from the scalar conversion", bad);
    static const uint32_t edge[] = {0x7fc00001u, 0xffa00000u, 0x7f800001u, 0x7f800000u, 0xff800000u, 0x477fefffu,
                                    0x477ff000u, 0x33800000u, 0x33000000u, 0x33000001u, 0x387fc000u, 0x38800000u,
                                    0x00000001u, 0x80000000u, 0x3f801000u, 0x3f803000u, 0x3f802fffu, 0xc77fffffu};
    const int ne = (int)(sizeof edge / sizeof edge[0]);
    for (int i = 0; i < 65536; i++) {
        const uint32_t u = edge[i % ne] ^ (i >= ne ? (uint32_t)(i * 2654435761u) & 0x000000ffu : 0u);
        memcpy(&f[i], &u, sizeof u);
    }
    op_case(AB_OP_cast, "fp32 -> fp16 in calls of 1 to 17 values: NaN payloads, subnormals, ties, overflow");
    bad = 0;
    for (int len = 1; len <= 17; len++) {
        memset(h2, 0xab, 65536 * sizeof *h2);
        for (int i = 0; i < 65536; i += len) {
            const int m = 65536 - i < len ? 65536 - i : len;
            AB_CHECK(be->ops->cast(be, (size_t)m, AB_F32, f + i, AB_F16, h2 + i) == 0, "%s", ab_error());
        }
        for (int i = 0; i < 65536; i++) bad += h2[i] != ab_f32_to_f16(f[i]);
    }
    AB_CHECK(bad == 0, "fp16 narrowing in short calls: %d values differ from the scalar conversion", bad);
    free(h), free(h2), free(f);
}

/* each op on a backend of its own: its scratch starts empty, so an op that indexes past the
 * scratch it asked for is caught by AddressSanitizer rather than hidden by a larger buffer left
 * from an earlier op; two threads, so the split paths run too */
static ab_backend *fresh(void) { return ab_backend_cpu_create(2); }

static void run_fresh(void (*test)(ab_backend *)) {
    ab_backend *be = fresh();
    if (!be) die("creating a CPU backend");
    test(be);
    be->ops->destroy(be);
}

void ref_layers_run(void) {
    run_fresh(test_widen_all);
    run_fresh(test_convert_tails);
    /* odd sizes, stride 2 with padding, the direct 1x1 path, 1x1 stride 2, a 7x7 stem */
    const struct {
        ab_conv_shape s;
        const char *label;
    } convs[] = {
        {{.N = 2, .H = 7, .W = 6, .C = 3, .K = 5, .R = 3, .S = 3, .stride_h = 2, .stride_w = 2, .pad_h = 1, .pad_w = 1},
         "3x3/2 pad 1"},
        {{.N = 3, .H = 5, .W = 5, .C = 4, .K = 3, .R = 3, .S = 3, .stride_h = 1, .stride_w = 1, .pad_h = 1, .pad_w = 1},
         "3x3/1 pad 1"},
        {{.N = 2, .H = 5, .W = 3, .C = 5, .K = 7, .R = 1, .S = 1, .stride_h = 1, .stride_w = 1}, "1x1 direct"},
        {{.N = 2, .H = 7, .W = 5, .C = 3, .K = 4, .R = 1, .S = 1, .stride_h = 2, .stride_w = 2}, "1x1/2"},
        {{.N = 1,
          .H = 9,
          .W = 11,
          .C = 2,
          .K = 3,
          .R = 7,
          .S = 7,
          .stride_h = 2,
          .stride_w = 2,
          .pad_h = 3,
          .pad_w = 3},
         "7x7/2 pad 3"},
        /* 49 rows and 80 filters: the products cut by columns, the filter copied a tile at a time
         * (ResNet-50's last layers at small inputs) */
        {{.N = 1, .H = 7, .W = 7, .C = 8, .K = 80, .R = 3, .S = 3, .stride_h = 1, .stride_w = 1, .pad_h = 1, .pad_w = 1},
         "3x3/1 pad 1, cut by columns"},
    };
    for (size_t i = 0; i < sizeof convs / sizeof convs[0]; i++) {
        ab_backend *be = fresh();
        if (!be) die("creating a CPU backend");
        test_conv(be, convs[i].s, convs[i].label);
        be->ops->destroy(be);
    }
    /* the fold of the filter gradient: one chunk of images (the product rounds and folds its
     * tiles of rows), its tiles of columns (32 filters: B = x itself, converted in the parts; B =
     * the fp32 columns, through cpu_sgemm's tiles), and two chunks (64x64x128 images: the fp32 sum
     * over the chunks rounded and folded in one pass) */
    {
        const struct {
            ab_conv_shape s;
            const char *label;
        } folds[] = {
            {{.N = 2, .H = 7, .W = 6, .C = 3, .K = 5, .R = 3, .S = 3, .stride_h = 2, .stride_w = 2, .pad_h = 1, .pad_w = 1},
             "3x3/2 pad 1"},
            {{.N = 2, .H = 5, .W = 3, .C = 5, .K = 7, .R = 1, .S = 1, .stride_h = 1, .stride_w = 1}, "1x1 direct"},
            {{.N = 1, .H = 7, .W = 7, .C = 8, .K = 80, .R = 3, .S = 3, .stride_h = 1, .stride_w = 1, .pad_h = 1, .pad_w = 1},
             "3x3/1 pad 1, its forward cut by columns"},
            {{.N = 1, .H = 7, .W = 7, .C = 256, .K = 32, .R = 1, .S = 1, .stride_h = 1, .stride_w = 1},
             "1x1 direct, the filter gradient cut by columns"},
            {{.N = 1, .H = 7, .W = 7, .C = 32, .K = 32, .R = 3, .S = 3, .stride_h = 1, .stride_w = 1, .pad_h = 1, .pad_w = 1},
             "3x3/1 pad 1, the filter gradient cut by columns"},
            {{.N = 2, .H = 64, .W = 64, .C = 128, .K = 4, .R = 3, .S = 3, .stride_h = 1, .stride_w = 1, .pad_h = 1,
              .pad_w = 1},
             "3x3/1 pad 1, two chunks of images"},
        };
        ab_backend *bf = fresh();
        if (!bf) die("creating a CPU backend");
        for (size_t i = 0; i < sizeof folds / sizeof folds[0]; i++)
            for (int ti = 0; ti < 3; ti++)
                for (int acc = 0; acc < 2; acc++)
                    conv_fold_case(bf, folds[i].s, ti == 0 ? AB_F32 : ti == 1 ? AB_F16 : AB_BF16, acc, folds[i].label);
        bf->ops->destroy(bf);
    }
    ab_backend *be = fresh();
    if (!be) die("creating a CPU backend");
    test_batchnorm(be, 2 * 5 * 3, 7);
    be->ops->destroy(be);
    be = fresh();
    if (!be) die("creating a CPU backend");
    test_batchnorm(be, 3, 2); /* three rows: the unbiased correction is large */
    be->ops->destroy(be);
    run_fresh(test_batchnorm_offset);
    be = fresh();
    if (!be) die("creating a CPU backend");
    test_maxpool(
        be, (ab_pool_shape){
                .N = 2, .H = 7, .W = 8, .C = 3, .R = 3, .S = 3, .stride_h = 2, .stride_w = 2, .pad_h = 1, .pad_w = 1});
    be->ops->destroy(be);
    run_fresh(test_maxpool_edges);
    run_fresh(test_avgpool);
    run_fresh(test_avgpool_edges);
    run_fresh(test_add);
    run_fresh(test_add_edges);
}
