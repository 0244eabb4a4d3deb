/* The CPU backend's convolutional-network ops against float64 references, on small odd shapes:
 *   - forward of each op against a float64 forward of the same (fp32-valued) inputs;
 *   - backward (convolution data and filter, batch norm x / scale / shift, max and average
 *     pooling) against central finite differences in float64 of L = sum(R * forward), with R
 *     random;
 *   - batch-norm running statistics as PyTorch updates them (momentum 0.1, unbiased variance)
 *     and the evaluation forward from them;
 *   - fp16 and bf16 storage (operands widened exactly, fp32 accumulation, one rounding) within
 *     the per-precision tolerances of the fp32 result;
 *   - fp16 widening (F16C in bulk) bit for bit against the scalar conversion on all 65536 values.
 * Shapes: stride 2, padding, 1x1 (the direct path), 3x3 and 7x7 kernels. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend_cpu.h"
#include "fd_check.h"
#include "half.h"
#include "rng.h"
#include "tolerances.h"

static int failures = 0;
static ab_rng rng;

static double *dalloc(size_t n) { return calloc(n ? n : 1, sizeof(double)); }
static float *falloc(size_t n) { return calloc(n ? n : 1, sizeof(float)); }

/* fp32 values drawn N(0, 1), and the same values in float64 */
static void fill(float *f, double *d, size_t n) {
    for (size_t i = 0; i < n; i++) {
        f[i] = (float)ab_rng_normal(&rng);
        if (d) d[i] = f[i];
    }
}

static void to_double(const float *f, double *d, size_t n) {
    for (size_t i = 0; i < n; i++) d[i] = f[i];
}

static void check(const char *what, const float *got, const double *want, size_t n, double tol) {
    if (ab_check_nmse(what, got, want, n, tol)) failures++;
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

static double lowp_tol(ab_dtype t) { return t == AB_F16 ? AB_TOL_FP16_NMSE : AB_TOL_BF16_NMSE; }

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
    char what[160];

    conv_ref(&f, yd);
    AB_CHECK(be->ops->conv2d_forward(be, &s, AB_F32, x, w, y) == 0, "%s", ab_error());
    snprintf(what, sizeof what, "%s: forward fp32", label);
    check(what, y, yd, ny, AB_TOL_FP32_NMSE);

    ab_fd_grad(&f, 0, nx, gx);
    ab_fd_grad(&f, 1, nw, gw);
    for (size_t i = 0; i < nx; i++) dx[i] = NAN; /* every element must be written */
    AB_CHECK(be->ops->conv2d_backward_data(be, &s, AB_F32, R, w, dx) == 0, "%s", ab_error());
    snprintf(what, sizeof what, "%s: backward data against finite differences", label);
    failures += ab_fd_check(what, dx, gx, nx);
    for (size_t i = 0; i < nw; i++) dw[i] = NAN; /* beta 0 overwrites, NaN included */
    AB_CHECK(be->ops->conv2d_backward_filter(be, &s, AB_F32, x, R, 0.0f, dw) == 0, "%s", ab_error());
    snprintf(what, sizeof what, "%s: backward filter against finite differences", label);
    failures += ab_fd_check(what, dw, gw, nw);
    /* beta 1 adds to what is there (micro-batch accumulation) */
    float *d0 = falloc(nw);
    double *want = dalloc(nw);
    fill(d0, NULL, nw);
    for (size_t i = 0; i < nw; i++) want[i] = d0[i] + gw[i];
    AB_CHECK(be->ops->conv2d_backward_filter(be, &s, AB_F32, x, R, 1.0f, d0) == 0, "%s", ab_error());
    snprintf(what, sizeof what, "%s: backward filter, beta 1", label);
    failures += ab_fd_check(what, d0, want, nw);

    /* fp16 / bf16: the same op on the rounded inputs, against the float64 result of those
     * inputs, within the storage tolerance */
    for (ab_dtype t = AB_F16; t <= AB_BF16; t++) {
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
        AB_CHECK(be->ops->conv2d_forward(be, &s, t, xt, wt, yt) == 0, "%s", ab_error());
        AB_CHECK(be->ops->conv2d_backward_data(be, &s, t, Rt, wt, dxt) == 0, "%s", ab_error());
        AB_CHECK(be->ops->conv2d_backward_filter(be, &s, t, xt, Rt, 0.0f, dwt) == 0, "%s", ab_error());
        from_type(be, t, yt, y, ny);
        from_type(be, t, dxt, dx, nx);
        from_type(be, t, dwt, dw, nw);
        snprintf(what, sizeof what, "%s: forward %s", label, ab_dtype_name(t));
        check(what, y, yd, ny, lowp_tol(t));
        snprintf(what, sizeof what, "%s: backward data %s", label, ab_dtype_name(t));
        check(what, dx, gxr, nx, lowp_tol(t));
        snprintf(what, sizeof what, "%s: backward filter %s", label, ab_dtype_name(t));
        check(what, dw, gwr, nw, lowp_tol(t));
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
            if (fabs((double)y[i] - once) > ulp * 1.0001) bad = 1, printf("  %s %s output %zu: %.9g, float64 rounded once %.9g\n", label, ab_dtype_name(t), i, y[i], once);
        }
        AB_CHECK(!bad, "%s: %s forward is not one rounding of the fp32 sum", label, ab_dtype_name(t));
        free(xr), free(wr), free(Rr), free(xrd), free(wrd), free(Rrd), free(gxr), free(gwr);
        free(xt), free(wt), free(Rt), free(yt), free(dxt), free(dwt);
    }
    printf("ok   conv %s: N%d %dx%dx%d -> K%d %dx%d/%d pad %d -> %dx%d\n", label, s.N, s.H, s.W, s.C, s.K, s.R, s.S,
           s.stride_h, s.pad_h, s.P, s.Q);
    free(x), free(w), free(R), free(y), free(dx), free(dw), free(d0), free(want);
    free(xd), free(wd), free(Rd), free(yd), free(gx), free(gw);
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
        for (int m = 0; m < b->M; m++)
            y[(size_t)m * b->C + c] = (x[(size_t)m * b->C + c] - mean) * inv * g[c] + be[c];
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
    char what[128];
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
    AB_CHECK(be->ops->batchnorm_forward_train(be, M, C, AB_F32, x, g, bt, 1e-5f, 0.1f, rm, rv, sm, si, 0, y) == 0, "%s",
             ab_error());
    snprintf(what, sizeof what, "batchnorm M%d C%d: training forward", M, C);
    check(what, y, yd, n, AB_TOL_FP32_NMSE);
    snprintf(what, sizeof what, "batchnorm M%d C%d: running mean", M, C);
    check(what, rm, want_rm, C, AB_TOL_FP32_NMSE);
    snprintf(what, sizeof what, "batchnorm M%d C%d: running variance (unbiased)", M, C);
    check(what, rv, want_rv, C, AB_TOL_FP32_NMSE);

    ab_fd_grad(&f, 0, n, gx);
    ab_fd_grad(&f, 1, C, gg);
    ab_fd_grad(&f, 2, C, gb);
    for (int c = 0; c < C; c++) dg[c] = db[c] = NAN; /* acc 0 overwrites */
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
    AB_CHECK(be->ops->batchnorm_backward(be, M, C, AB_F32, x, alias, g, sm, si, 1.0f, dg, db, alias) == 0, "%s",
             ab_error());
    snprintf(what, sizeof what, "batchnorm M%d C%d: d_weight accumulated", M, C);
    failures += ab_fd_check(what, dg, wg, C);
    snprintf(what, sizeof what, "batchnorm M%d C%d: d_bias accumulated", M, C);
    failures += ab_fd_check(what, db, wb, C);
    snprintf(what, sizeof what, "batchnorm M%d C%d: dx in place over dy", M, C);
    failures += ab_fd_check(what, alias, gx, n);

    /* evaluation: the running statistics normalise */
    for (int c = 0; c < C; c++) {
        const double inv = 1.0 / sqrt((double)rv[c] + 1e-5);
        for (int m = 0; m < M; m++) yd[(size_t)m * C + c] = (xd[(size_t)m * C + c] - rm[c]) * inv * gd[c] + bd[c];
    }
    AB_CHECK(be->ops->batchnorm_forward_eval(be, M, C, AB_F32, x, g, bt, rm, rv, 1e-5f, 0, y) == 0, "%s", ab_error());
    snprintf(what, sizeof what, "batchnorm M%d C%d: evaluation forward", M, C);
    check(what, y, yd, n, AB_TOL_FP32_NMSE);

    /* the fused ReLU: the same bits as the separate relu_forward on the rounded output, train
     * and eval, fp32 and fp16 */
    for (ab_dtype t = AB_F32; t <= AB_F16; t++) {
        void *xt = to_type(be, t, x, n), *y0 = malloc(n * 4), *y1 = malloc(n * 4);
        float *sm3 = falloc(C), *si3 = falloc(C);
        for (int ev = 0; ev < 2; ev++) {
            int rc = ev ? be->ops->batchnorm_forward_eval(be, M, C, t, xt, g, bt, rm, rv, 1e-5f, 0, y0)
                        : be->ops->batchnorm_forward_train(be, M, C, t, xt, g, bt, 1e-5f, 0.1f, NULL, NULL, sm3, si3, 0, y0);
            rc |= be->ops->relu_forward(be, n, t, y0, y0);
            rc |= ev ? be->ops->batchnorm_forward_eval(be, M, C, t, xt, g, bt, rm, rv, 1e-5f, 1, y1)
                     : be->ops->batchnorm_forward_train(be, M, C, t, xt, g, bt, 1e-5f, 0.1f, NULL, NULL, sm3, si3, 1, y1);
            AB_CHECK(rc == 0 && memcmp(y0, y1, n * ab_dtype_size(t)) == 0,
                     "batchnorm M%d C%d %s %s: the fused ReLU differs from batch norm then relu_forward", M, C,
                     ev ? "eval" : "train", ab_dtype_name(t));
        }
        free(xt), free(y0), free(y1), free(sm3), free(si3);
    }

    /* fp16 / bf16 activations with fp32 scale, shift and statistics */
    for (ab_dtype t = AB_F16; t <= AB_BF16; t++) {
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
        AB_CHECK(be->ops->batchnorm_forward_train(be, M, C, t, xt, g, bt, 1e-5f, 0.1f, NULL, NULL, sm2, si2, 0, yt) == 0,
                 "%s", ab_error());
        AB_CHECK(be->ops->batchnorm_backward(be, M, C, t, xt, Rt, g, sm2, si2, 0.0f, dg, db, dxt) == 0, "%s",
                 ab_error());
        from_type(be, t, yt, y, n);
        from_type(be, t, dxt, dx, n);
        snprintf(what, sizeof what, "batchnorm M%d C%d: forward %s", M, C, ab_dtype_name(t));
        check(what, y, yd, n, lowp_tol(t));
        snprintf(what, sizeof what, "batchnorm M%d C%d: dx %s", M, C, ab_dtype_name(t));
        check(what, dx, gxr, n, lowp_tol(t));
        free(xr), free(Rr), free(sm2), free(si2), free(xrd), free(Rrd), free(gxr), free(xt), free(Rt), free(yt),
            free(dxt);
    }
    printf("ok   batchnorm M%d C%d: train/eval forward, running statistics, backward (fp32, fp16, bf16)\n", M, C);
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
    printf("ok   batchnorm statistics with the mean 10^4 spreads from 0: 1/std within %.2g of float64\n", worst);
}

/* ---- pooling and add ---- */

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
                            if (v > m) m = v;
                        }
                    y[(((size_t)n * s->P + p) * s->Q + q) * s->C + c] = m;
                }
}

static void test_maxpool(ab_backend *be, ab_pool_shape s) {
    AB_CHECK(ab_pool_shape_init(&s) == 0, "%s", ab_error());
    const size_t nx = (size_t)s.N * s.H * s.W * s.C, ny = (size_t)s.N * s.P * s.Q * s.C;
    float *x = falloc(nx), *R = falloc(ny), *y = falloc(ny), *dx = falloc(nx);
    double *xd = dalloc(nx), *Rd = dalloc(ny), *yd = dalloc(ny), *gx = dalloc(nx);
    fill(x, xd, nx); /* distinct values: no ties, so the finite differences see one winner */
    fill(R, Rd, ny);
    double *in[1] = {xd};
    ab_fd_fn f = {maxpool_ref, in, ny, Rd, &s};
    maxpool_ref(&f, yd);
    ab_fd_grad(&f, 0, nx, gx);
    AB_CHECK(be->ops->maxpool_forward(be, &s, AB_F32, x, y) == 0, "%s", ab_error());
    check("maxpool forward", y, yd, ny, 0.0);
    for (size_t i = 0; i < nx; i++) dx[i] = NAN;
    AB_CHECK(be->ops->maxpool_backward(be, &s, AB_F32, x, y, R, dx) == 0, "%s", ab_error());
    failures += ab_fd_check("maxpool backward against finite differences", dx, gx, nx);
    /* a tie goes to the first position of the window, as PyTorch routes it */
    ab_pool_shape t1 = {.N = 1, .H = 2, .W = 2, .C = 1, .R = 2, .S = 2, .stride_h = 2, .stride_w = 2};
    ab_pool_shape_init(&t1);
    const float tx[4] = {1.0f, 3.0f, 3.0f, 2.0f}, tdy = 5.0f;
    float ty, tdx[4];
    AB_CHECK(be->ops->maxpool_forward(be, &t1, AB_F32, tx, &ty) == 0 &&
                 be->ops->maxpool_backward(be, &t1, AB_F32, tx, &ty, &tdy, tdx) == 0,
             "%s", ab_error());
    AB_CHECK(ty == 3.0f && tdx[0] == 0.0f && tdx[1] == 5.0f && tdx[2] == 0.0f && tdx[3] == 0.0f,
             "maxpool tie: y %g, dx %g %g %g %g (want 3; 0 5 0 0)", ty, tdx[0], tdx[1], tdx[2], tdx[3]);
    /* fp16: a max is exact, so the rounded input's max is bit-exact */
    void *xt = to_type(be, AB_F16, x, nx), *yt = malloc(ny * 2);
    float *xr = falloc(nx);
    from_type(be, AB_F16, xt, xr, nx);
    double *xrd = dalloc(nx);
    to_double(xr, xrd, nx);
    double *inr[1] = {xrd};
    ab_fd_fn fr = {maxpool_ref, inr, ny, Rd, &s};
    maxpool_ref(&fr, yd);
    AB_CHECK(be->ops->maxpool_forward(be, &s, AB_F16, xt, yt) == 0, "%s", ab_error());
    from_type(be, AB_F16, yt, y, ny);
    check("maxpool forward fp16 (exact)", y, yd, ny, 0.0);
    printf("ok   maxpool %dx%d/%d pad %d on %dx%dx%d\n", s.R, s.S, s.stride_h, s.pad_h, s.H, s.W, s.C);
    free(x), free(R), free(y), free(dx), free(xd), free(Rd), free(yd), free(gx), free(xt), free(yt), free(xr),
        free(xrd);
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

static void test_avgpool_add(ab_backend *be) {
    avg_ctx a = {3, 7 * 5, 6};
    const size_t nx = (size_t)a.N * a.HW * a.C, ny = (size_t)a.N * a.C;
    float *x = falloc(nx), *R = falloc(ny), *y = falloc(ny), *dx = falloc(nx);
    double *xd = dalloc(nx), *Rd = dalloc(ny), *yd = dalloc(ny), *gx = dalloc(nx);
    fill(x, xd, nx);
    fill(R, Rd, ny);
    double *in[1] = {xd};
    ab_fd_fn f = {avgpool_ref, in, ny, Rd, &a};
    avgpool_ref(&f, yd);
    ab_fd_grad(&f, 0, nx, gx);
    AB_CHECK(be->ops->avgpool_forward(be, a.N, a.HW, a.C, AB_F32, x, y) == 0, "%s", ab_error());
    check("avgpool forward", y, yd, ny, AB_TOL_FP32_NMSE);
    AB_CHECK(be->ops->avgpool_backward(be, a.N, a.HW, a.C, AB_F32, R, dx) == 0, "%s", ab_error());
    failures += ab_fd_check("avgpool backward against finite differences", dx, gx, nx);
    /* add: fp32 sum, one rounding; in place over either operand */
    float *b = falloc(nx), *s = falloc(nx);
    double *sd = dalloc(nx);
    fill(b, NULL, nx);
    for (size_t i = 0; i < nx; i++) sd[i] = (double)x[i] + b[i];
    AB_CHECK(be->ops->add(be, nx, AB_F32, x, b, 0, s) == 0, "%s", ab_error());
    check("add fp32", s, sd, nx, AB_TOL_FP32_NMSE);
    memcpy(s, b, nx * sizeof *b);
    AB_CHECK(be->ops->add(be, nx, AB_F32, x, s, 0, s) == 0, "%s", ab_error());
    check("add fp32 in place", s, sd, nx, AB_TOL_FP32_NMSE);
    void *xt = to_type(be, AB_F16, x, nx), *bt = to_type(be, AB_F16, b, nx), *st = malloc(nx * 2);
    float *xr = falloc(nx), *br = falloc(nx);
    from_type(be, AB_F16, xt, xr, nx);
    from_type(be, AB_F16, bt, br, nx);
    AB_CHECK(be->ops->add(be, nx, AB_F16, xt, bt, 0, bt) == 0, "%s", ab_error());
    from_type(be, AB_F16, bt, s, nx);
    int bad = 0;
    for (size_t i = 0; i < nx; i++) bad += ab_f16_to_f32(ab_f32_to_f16(xr[i] + br[i])) != s[i];
    AB_CHECK(bad == 0, "add fp16: %d elements are not the fp32 sum rounded once", bad);
    /* the fused ReLU after the add: the bits of add then relu_forward */
    void *r0 = malloc(nx * 4), *r1 = malloc(nx * 4);
    for (ab_dtype t = AB_F32; t <= AB_F16; t++) {
        void *ta = to_type(be, t, x, nx), *tb = to_type(be, t, b, nx);
        int rc = be->ops->add(be, nx, t, ta, tb, 0, r0);
        rc |= be->ops->relu_forward(be, nx, t, r0, r0);
        rc |= be->ops->add(be, nx, t, ta, tb, 1, r1);
        AB_CHECK(rc == 0 && memcmp(r0, r1, nx * ab_dtype_size(t)) == 0, "add %s: the fused ReLU differs",
                 ab_dtype_name(t));
        free(ta), free(tb);
    }
    free(r0), free(r1);
    printf("ok   avgpool N%d HW%d C%d, add (and its fused ReLU)\n", a.N, a.HW, a.C);
    free(x), free(R), free(y), free(dx), free(xd), free(Rd), free(yd), free(gx), free(b), free(s), free(sd), free(xt),
        free(bt), free(st), free(xr), free(br);
}

/* fp16 -> fp32 in bulk (F16C where the CPU has it) is the scalar conversion, every pattern */
static void test_widen_all(ab_backend *be) {
    uint16_t *h = malloc(65536 * sizeof *h);
    float *f = falloc(65536);
    for (int i = 0; i < 65536; i++) h[i] = (uint16_t)i;
    be->ops->cast(be, 65536, AB_F16, h, AB_F32, f);
    int bad = 0;
    for (int i = 0; i < 65536; i++) {
        const float want = ab_f16_to_f32((uint16_t)i);
        bad += memcmp(&want, &f[i], sizeof want) != 0;
    }
    AB_CHECK(bad == 0, "fp16 widening: %d of 65536 patterns differ from the scalar conversion", bad);
    printf("ok   fp16 widening: all 65536 patterns bit for bit\n");
    free(h);
    free(f);
}

/* each op on a backend of its own: its scratch starts empty, so an op that indexes past the
 * scratch it asked for is caught by AddressSanitizer rather than hidden by a larger buffer left
 * from an earlier op; two threads, so the split paths run too */
static ab_backend *fresh(void) { return ab_backend_cpu_create(2); }

int main(void) {
    ab_rng_seed(&rng, 20261201);
    ab_backend *be = fresh();
    test_widen_all(be);
    be->ops->destroy(be);
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
        {{.N = 1, .H = 9, .W = 11, .C = 2, .K = 3, .R = 7, .S = 7, .stride_h = 2, .stride_w = 2, .pad_h = 3, .pad_w = 3},
         "7x7/2 pad 3"},
    };
    for (size_t i = 0; i < sizeof convs / sizeof convs[0]; i++) {
        be = fresh();
        test_conv(be, convs[i].s, convs[i].label);
        be->ops->destroy(be);
    }
    be = fresh();
    test_batchnorm(be, 2 * 5 * 3, 7);
    be->ops->destroy(be);
    be = fresh();
    test_batchnorm(be, 3, 2); /* three rows: the unbiased correction is large */
    be->ops->destroy(be);
    be = fresh();
    test_batchnorm_offset(be);
    be->ops->destroy(be);
    be = fresh();
    test_maxpool(be, (ab_pool_shape){.N = 2, .H = 7, .W = 8, .C = 3, .R = 3, .S = 3, .stride_h = 2, .stride_w = 2,
                                     .pad_h = 1, .pad_w = 1});
    be->ops->destroy(be);
    be = fresh();
    test_avgpool_add(be);
    be->ops->destroy(be);
    if (failures) fprintf(stderr, "test_layers: %d failure(s)\n", failures);
    return failures ? 1 : 0;
}
