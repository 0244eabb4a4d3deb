/* Every layer's backward against central finite differences of a float64 reference forward:
 * Linear (with and without the fused ReLU), ReLU, softmax cross-entropy; and the fp16/bf16
 * forward and backward against fp32 within the per-precision tolerances. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend_cpu.h"
#include "fd_check.h"
#include "half.h"
#include "layers.h"
#include "rng.h"
#include "tolerances.h"

static int failures = 0;
enum { B = 5, IN = 7, OUT = 4 };

/* float64 reference: y = act(x W^T + b) */
static void linear_ref(const double *x, const double *w, const double *b, int relu, double *y) {
    for (int i = 0; i < B; i++)
        for (int o = 0; o < OUT; o++) {
            double s = b[o];
            for (int k = 0; k < IN; k++) s += x[i * IN + k] * w[o * IN + k];
            y[i * OUT + o] = relu && s < 0 ? 0.0 : s;
        }
}

/* the float64 forward the finite differences of L = sum(y * R) run through; ctx: the fused ReLU */
static void linear_fd(const ab_fd_fn *f, double *y) {
    linear_ref(f->in[0], f->in[1], f->in[2], *(const int *)f->ctx, y);
}

static void fill(ab_rng *r, float *f, double *d, size_t n) {
    for (size_t i = 0; i < n; i++) {
        f[i] = (float)ab_rng_normal(r);
        if (d) d[i] = f[i];
    }
}

/* Linear through the params/layer API, in the given precision */
static void run_linear(ab_backend *be, ab_precision prec, int relu, const float *x32, const float *w32, const float *b32,
                       const float *R32, float *y, float *dx, float *dw, float *db) {
    ab_param_spec specs[2];
    ab_linear_specs(&specs[0], &specs[1], "w", "b", IN, OUT);
    ab_rng r;
    ab_rng_seed(&r, 1);
    ab_params p;
    if (ab_params_init(&p, be, prec, specs, 2, &r) != 0) {
        fprintf(stderr, "FAIL params: %s\n", ab_error());
        failures++;
        return;
    }
    memcpy(p.master + specs[0].offset, w32, sizeof(float) * OUT * IN);
    memcpy(p.master + specs[1].offset, b32, sizeof(float) * OUT);
    ab_params_refresh(&p);
    ab_linear l;
    ab_linear_bind(&l, &specs[0], &specs[1]);
    const ab_dtype t = p.compute_type;
    const size_t es = ab_dtype_size(t);
    void *xc = malloc(B * IN * es), *yc = malloc(B * OUT * es), *dyc = malloc(B * OUT * es), *dxc = malloc(B * IN * es);
    be->ops->cast(be, B * IN, AB_F32, x32, t, xc);
    be->ops->cast(be, B * OUT, AB_F32, R32, t, dyc);
    AB_CHECK(ab_linear_forward(&p, &l, B, xc, yc, relu ? AB_EPI_RELU : AB_EPI_NONE) == 0, "%s", ab_error());
    if (relu) be->ops->relu_backward(be, B * OUT, t, yc, dyc, dyc);
    AB_CHECK(ab_linear_backward(&p, &(ab_grad_sink){.mode = AB_GRAD_WRITE}, &l, B, xc, dyc, dxc) == 0, "%s", ab_error());
    be->ops->cast(be, B * OUT, t, yc, AB_F32, y);
    be->ops->cast(be, B * IN, t, dxc, AB_F32, dx);
    memcpy(dw, p.grad + specs[0].offset, sizeof(float) * OUT * IN);
    memcpy(db, p.grad + specs[1].offset, sizeof(float) * OUT);
    free(xc);
    free(yc);
    free(dyc);
    free(dxc);
    ab_params_free(&p);
}

static void test_linear(ab_backend *be, int relu) {
    ab_rng r;
    ab_rng_seed(&r, 42 + relu);
    float x[B * IN], w[OUT * IN], b[OUT], R[B * OUT];
    double xd[B * IN], wd[OUT * IN], bd[OUT], Rd[B * OUT];
    fill(&r, x, xd, B * IN);
    fill(&r, w, wd, OUT * IN);
    fill(&r, b, bd, OUT);
    fill(&r, R, Rd, B * OUT);
    float y[B * OUT], dx[B * IN], dw[OUT * IN], db[OUT];
    run_linear(be, AB_PREC_FP32, relu, x, w, b, R, y, dx, dw, db);
    double yref[B * OUT], gx[B * IN], gw[OUT * IN], gb[OUT];
    linear_ref(xd, wd, bd, relu, yref);
    double *in[3] = {xd, wd, bd};
    const ab_fd_fn f = {linear_fd, in, B * OUT, Rd, &relu};
    ab_fd_grad(&f, 0, B * IN, gx);
    ab_fd_grad(&f, 1, OUT * IN, gw);
    ab_fd_grad(&f, 2, OUT, gb);
    failures += ab_check_nmse(relu ? "linear+relu forward" : "linear forward", y, yref, B * OUT, AB_TOL_FP32_NMSE);
    failures += ab_fd_check(relu ? "linear+relu d_input" : "linear d_input", dx, gx, B * IN);
    failures += ab_fd_check(relu ? "linear+relu d_weight" : "linear d_weight", dw, gw, OUT * IN);
    failures += ab_fd_check(relu ? "linear+relu d_bias" : "linear d_bias", db, gb, OUT);

    /* reduced precision against the float64 reference, per-precision tolerance */
    const ab_precision precs[] = {AB_PREC_AMP, AB_PREC_BF16};
    const double tols[] = {AB_TOL_FP16_NMSE, AB_TOL_BF16_NMSE};
    for (int k = 0; k < 2; k++) {
        float y2[B * OUT], dx2[B * IN], dw2[OUT * IN], db2[OUT];
        run_linear(be, precs[k], relu, x, w, b, R, y2, dx2, dw2, db2);
        char what[64];
        snprintf(what, sizeof what, "linear%s %s forward", relu ? "+relu" : "", ab_precision_name(precs[k]));
        failures += ab_check_nmse(what, y2, yref, B * OUT, tols[k]);
        snprintf(what, sizeof what, "linear%s %s d_weight", relu ? "+relu" : "", ab_precision_name(precs[k]));
        failures += ab_check_nmse(what, dw2, gw, OUT * IN, tols[k]);
        snprintf(what, sizeof what, "linear%s %s d_input", relu ? "+relu" : "", ab_precision_name(precs[k]));
        failures += ab_check_nmse(what, dx2, gx, B * IN, tols[k]);
    }
}

/* ReLU on its own: L = sum relu(x) * R; inputs kept away from the kink at 0 (further than the step) */
static void relu_ref(const ab_fd_fn *f, double *y) {
    for (size_t i = 0; i < f->ny; i++) y[i] = f->in[0][i] > 0 ? f->in[0][i] : 0;
}

static void test_relu(ab_backend *be) {
    enum { N = 64 };
    ab_rng r;
    ab_rng_seed(&r, 7);
    float x[N], R[N], y[N], dx[N];
    double xd[N], Rd[N], g[N], yref[N];
    for (int i = 0; i < N; i++) {
        double v = ab_rng_normal(&r);
        if (fabs(v) < 1e-3) v = 0.5;
        xd[i] = x[i] = (float)v;
        Rd[i] = R[i] = (float)ab_rng_normal(&r);
    }
    be->ops->relu_forward(be, N, AB_F32, x, y);
    be->ops->relu_backward(be, N, AB_F32, y, R, dx);
    double *in[1] = {xd};
    const ab_fd_fn f = {relu_ref, in, N, Rd, NULL};
    relu_ref(&f, yref);
    ab_fd_grad(&f, 0, N, g);
    failures += ab_check_nmse("relu forward", y, yref, N, AB_TOL_FP32_NMSE);
    failures += ab_fd_check("relu backward", dx, g, N);
    /* fp16 relu matches fp32 relu of the rounded values bit for bit, NaN passes through */
    uint16_t xh[N + 1], yh[N + 1];
    for (int i = 0; i < N; i++) xh[i] = ab_f32_to_f16(x[i]);
    xh[N] = 0x7e00;
    be->ops->relu_forward(be, N + 1, AB_F16, xh, yh);
    for (int i = 0; i < N; i++) AB_CHECK(yh[i] == ab_f32_to_f16(x[i] > 0 ? ab_f16_to_f32(xh[i]) : 0.0f), "fp16 relu %d", i);
    AB_CHECK(isnan(ab_f16_to_f32(yh[N])), "fp16 relu keeps NaN");
}

/* softmax cross-entropy: mean over the batch; d/dlogits by finite differences */
static double xent_ref(const double *z, const int32_t *y, int Bn, int C) {
    double L = 0.0;
    for (int i = 0; i < Bn; i++) {
        double mx = z[i * C];
        for (int j = 1; j < C; j++) mx = fmax(mx, z[i * C + j]);
        double s = 0.0;
        for (int j = 0; j < C; j++) s += exp(z[i * C + j] - mx);
        L += mx + log(s) - z[i * C + y[i]];
    }
    return L / Bn;
}

/* the loss the backward differentiates: the batch mean times the loss scale (a power of two, so
 * the differences are the unscaled ones scaled exactly) */
typedef struct {
    const double *z;
    const int32_t *y;
    int Bn, C;
    double scale;
} xent_ctx;

static double xent_scaled(const void *p) {
    const xent_ctx *c = p;
    return c->scale * xent_ref(c->z, c->y, c->Bn, c->C);
}

static void test_xent(ab_backend *be) {
    enum { BB = 6, C = 10 };
    ab_rng r;
    ab_rng_seed(&r, 99);
    float z[BB * C], dz[BB * C];
    double zd[BB * C], g[BB * C];
    int32_t y[BB];
    fill(&r, z, zd, BB * C);
    for (int i = 0; i < BB; i++) y[i] = (int32_t)ab_rng_below(&r, C);
    float loss_sum = 0.0f;
    int32_t correct = 0;
    const float scale = 1024.0f;
    AB_CHECK(be->ops->softmax_xent(be, BB, C, AB_F32, z, y, scale, AB_F32, dz, &loss_sum, &correct) == 0, "%s",
             ab_error());
    const xent_ctx c = {zd, y, BB, C, scale};
    ab_fd_central(zd, BB * C, xent_scaled, &c, g);
    const double Lref = xent_ref(zd, y, BB, C);
    AB_CHECK(fabs(loss_sum / BB - Lref) <= AB_TOL_FP32_REL * (1 + fabs(Lref)), "loss %.9g vs %.9g", loss_sum / BB, Lref);
    failures += ab_fd_check("softmax_xent d_logits", dz, g, BB * C);
    int want = 0;
    for (int i = 0; i < BB; i++) {
        int am = 0;
        for (int j = 1; j < C; j++)
            if (z[i * C + j] > z[i * C + am]) am = j;
        want += am == y[i];
    }
    AB_CHECK(correct == want, "correct %d vs %d", correct, want);
    /* in place on fp16 logits, as the training loop runs it */
    uint16_t zh[BB * C];
    for (int i = 0; i < BB * C; i++) zh[i] = ab_f32_to_f16(z[i]);
    float ls2 = 0.0f;
    AB_CHECK(be->ops->softmax_xent(be, BB, C, AB_F16, zh, y, scale, AB_F16, zh, &ls2, NULL) == 0, "%s", ab_error());
    float dzh[BB * C];
    for (int i = 0; i < BB * C; i++) dzh[i] = ab_f16_to_f32(zh[i]);
    failures += ab_check_nmse("softmax_xent fp16 in place", dzh, g, BB * C, AB_TOL_FP16_NMSE);
    AB_CHECK(fabs(ls2 - loss_sum) <= 1e-2 * fabs(loss_sum), "fp16 loss %g vs %g", ls2, loss_sum);
}

int main(void) {
    ab_backend *be = ab_backend_cpu_create(1);
    if (!be) return 1;
    test_linear(be, 0);
    test_linear(be, 1);
    test_relu(be);
    test_xent(be);
    be->ops->destroy(be);
    printf("gradient checks: %d failures\n", failures);
    return failures ? 1 : 0;
}
