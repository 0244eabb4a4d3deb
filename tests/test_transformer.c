/* The CPU backend's transformer ops and the attention layer against float64 references on small
 * odd shapes, backward against central finite differences in float64 of L = sum(R * forward):
 *   - layer norm (fp32 in and out, fp32 in and fp16 out), with its weight and bias;
 *   - exact GELU, tanh (the pooler's);
 *   - the masked attention softmax (padding keys, a fully masked row), and its backward;
 *   - dropout with its counter-based mask: kept fraction, scaling, the backward's same mask;
 *   - BERT's embeddings (word + position + token type), forward and the tables' gradients;
 *   - batched products (strided heads, transposes, fp16 with one rounding);
 *   - multi-head attention with a padding mask and dropout on its probabilities (a fixed mask:
 *     the reference draws it from the same counter-based hash), q, k, v gradients;
 *   - fp16 forwards within the storage tolerance of the float64 result. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend_cpu.h"
#include "fd_check.h"
#include "half.h"
#include "kernel_math.h"
#include "layers.h"
#include "rng.h"
#include "tolerances.h"

static int failures = 0;
static ab_rng rng;

static double *dalloc(size_t n) { return calloc(n ? n : 1, sizeof(double)); }
static float *falloc(size_t n) { return calloc(n ? n : 1, sizeof(float)); }

static void fill(float *f, double *d, size_t n, double scale) {
    for (size_t i = 0; i < n; i++) {
        f[i] = (float)(scale * ab_rng_normal(&rng));
        if (d) d[i] = f[i];
    }
}

static void check(const char *what, const float *got, const double *want, size_t n, double tol) {
    if (ab_check_nmse(what, got, want, n, tol)) failures++;
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
    char what[128];
    ln_ref(&f, yd);
    AB_CHECK(be->ops->layernorm_forward(be, R, C, AB_F32, x, g, b, 1e-12f, mean, rstd, AB_F32, y) == 0, "%s",
             ab_error());
    snprintf(what, sizeof what, "layernorm R%d C%d forward", R, C);
    check(what, y, yd, n, AB_TOL_FP32_NMSE);
    ab_fd_grad(&f, 0, n, gx);
    ab_fd_grad(&f, 1, C, gg);
    ab_fd_grad(&f, 2, C, gb);
    for (int k = 0; k < C; k++) dg[k] = db[k] = NAN; /* acc 0 overwrites */
    AB_CHECK(be->ops->layernorm_backward(be, R, C, AB_F32, x, AB_F32, Rf, g, mean, rstd, 0.0f, dg, db, dx) == 0, "%s",
             ab_error());
    snprintf(what, sizeof what, "layernorm R%d C%d dx against finite differences", R, C);
    failures += ab_fd_check(what, dx, gx, n);
    snprintf(what, sizeof what, "layernorm R%d C%d d_weight", R, C);
    failures += ab_fd_check(what, dg, gg, C);
    snprintf(what, sizeof what, "layernorm R%d C%d d_bias", R, C);
    failures += ab_fd_check(what, db, gb, C);
    /* accumulate, in place over dy */
    double *wg = dalloc(C);
    for (int k = 0; k < C; k++) {
        dg[k] = 0.5f;
        wg[k] = 0.5 + gg[k];
    }
    float *al = falloc(n);
    memcpy(al, Rf, n * sizeof *al);
    AB_CHECK(be->ops->layernorm_backward(be, R, C, AB_F32, x, AB_F32, al, g, mean, rstd, 1.0f, dg, db, al) == 0, "%s",
             ab_error());
    snprintf(what, sizeof what, "layernorm R%d C%d d_weight accumulated", R, C);
    failures += ab_fd_check(what, dg, wg, C);
    snprintf(what, sizeof what, "layernorm R%d C%d dx in place", R, C);
    failures += ab_fd_check(what, al, gx, n);
    /* fp32 in (the embeddings' sum), fp16 out; and fp16 in and out */
    uint16_t *yh = malloc(n * 2), *xh = malloc(n * 2), *dyh = malloc(n * 2), *dxh = malloc(n * 2);
    AB_CHECK(be->ops->layernorm_forward(be, R, C, AB_F32, x, g, b, 1e-12f, mean, rstd, AB_F16, yh) == 0, "%s",
             ab_error());
    for (size_t i = 0; i < n; i++) y[i] = ab_f16_to_f32(yh[i]);
    snprintf(what, sizeof what, "layernorm R%d C%d fp32 -> fp16 forward", R, C);
    check(what, y, yd, n, AB_TOL_FP16_NMSE);
    for (size_t i = 0; i < n; i++) {
        xh[i] = ab_f32_to_f16(x[i]);
        dyh[i] = ab_f32_to_f16(Rf[i]);
    }
    AB_CHECK(be->ops->layernorm_forward(be, R, C, AB_F16, xh, g, b, 1e-12f, mean, rstd, AB_F16, yh) == 0 &&
                 be->ops->layernorm_backward(be, R, C, AB_F16, xh, AB_F16, dyh, g, mean, rstd, 0.0f, dg, db, dxh) == 0,
             "%s", ab_error());
    for (size_t i = 0; i < n; i++) dx[i] = ab_f16_to_f32(dxh[i]);
    snprintf(what, sizeof what, "layernorm R%d C%d fp16 dx", R, C);
    check(what, dx, gx, n, AB_TOL_FP16_NMSE * 4); /* x itself rounded to fp16 moves the gradient too */
    printf("ok   layernorm R%d C%d: forward, backward (x, weight, bias), accumulation, fp32->fp16, fp16\n", R, C);
    free(x), free(g), free(b), free(Rf), free(y), free(dx), free(dg), free(db), free(mean), free(rstd), free(al);
    free(xd), free(gd), free(bd), free(Rd), free(yd), free(gx), free(gg), free(gb), free(wg);
    free(yh), free(xh), free(dyh), free(dxh);
}

/* ---- element-wise ---- */

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
    fill(x, xd, n, 2.0);
    fill(R, Rd, n, 1.0);
    for (ew_kind = 0; ew_kind < 2; ew_kind++) {
        const char *name = ew_kind ? "tanh" : "gelu";
        double *in[1] = {xd};
        ab_fd_fn f = {ew_ref, in, n, Rd, NULL};
        ew_ref(&f, yd);
        ab_fd_grad(&f, 0, n, gx);
        int rc = ew_kind ? be->ops->tanh_forward(be, n, AB_F32, x, y) : be->ops->gelu_forward(be, n, AB_F32, x, y);
        char what[64];
        snprintf(what, sizeof what, "%s forward", name);
        AB_CHECK(rc == 0, "%s", ab_error());
        check(what, y, yd, n, AB_TOL_FP32_NMSE);
        /* gelu's backward takes the input, tanh's the output */
        rc = ew_kind ? be->ops->tanh_backward(be, n, AB_F32, y, R, dx) : be->ops->gelu_backward(be, n, AB_F32, x, R, dx);
        AB_CHECK(rc == 0, "%s", ab_error());
        snprintf(what, sizeof what, "%s backward against finite differences", name);
        failures += ab_fd_check(what, dx, gx, n);
        /* fp16: one rounding of the fp32 value of the rounded input */
        uint16_t *h = malloc(n * 2), *o = malloc(n * 2);
        int bad = 0;
        for (size_t i = 0; i < n; i++) h[i] = ab_f32_to_f16(x[i]);
        rc = ew_kind ? be->ops->tanh_forward(be, n, AB_F16, h, o) : be->ops->gelu_forward(be, n, AB_F16, h, o);
        for (size_t i = 0; i < n; i++) {
            const float xi = ab_f16_to_f32(h[i]);
            bad += o[i] != ab_f32_to_f16(ew_kind ? tanhf(xi) : ab_gelu(xi));
        }
        AB_CHECK(rc == 0 && bad == 0, "%s fp16: %d outputs are not one rounding", name, bad);
        free(h), free(o);
    }
    printf("ok   exact GELU and tanh: forward, backward against finite differences, fp16 one rounding\n");
    free(x), free(R), free(y), free(dx), free(xd), free(Rd), free(yd), free(gx);
}

/* The branch-free exp and normal CDF of core/kernel_math.h (which GELU is built on, on both
 * backends) against libm's double precision, over every float of [-12, 12] with a stride (and
 * exp over its whole finite range): exp within 1 ulp, GELU and its derivative within 4e-7 of the
 * exact values (libm's erff in the direct formula is within 4.5e-7), and the lower tail of Phi
 * within 4e-6 relative down to 1e-8, where 1 + erf would cancel. */
static void test_gelu_math(void) {
    double worst_exp = 0.0, worst_g = 0.0, worst_d = 0.0, worst_tail = 0.0;
    for (float x = -87.3f; x < 88.7f; x += 0.0037f) {
        const double want = exp((double)x), got = ab_exp(x);
        const double ulp = (double)nextafterf((float)want, INFINITY) - (double)(float)want;
        if (fabs(got - want) / ulp > worst_exp) worst_exp = fabs(got - want) / ulp;
    }
    AB_CHECK(ab_exp(-88.0f) == 0.0f && isinf(ab_exp(89.0f)) && isnan(ab_exp(NAN)) && ab_exp(0.0f) == 1.0f,
             "ab_exp at the edges: %g %g %g %g", ab_exp(-88.0f), ab_exp(89.0f), ab_exp(NAN), ab_exp(0.0f));
    /* +-inf and huge |x| take ab_exp(inf - inf) = ab_exp(NaN) inside Phi (discarded there): defined
     * (the sanitizer build's float-cast-overflow check sees any NaN-to-int conversion) and as
     * PyTorch's x * Phi(x): inf, NaN (-inf * 0), x and -0 */
    AB_CHECK(isinf(ab_gelu(INFINITY)) && isnan(ab_gelu(-INFINITY)) && isnan(ab_gelu(NAN)) && ab_gelu(3e19f) == 3e19f &&
                 ab_gelu(-3e19f) == 0.0f && signbit(ab_gelu(-3e19f)) && ab_gelu_grad(-3e19f) == 0.0f &&
                 ab_gelu_grad(3e19f) == 1.0f,
             "GELU at +-inf, NaN, +-3e19: %g %g %g %g %g; grad at -+3e19: %g %g", ab_gelu(INFINITY), ab_gelu(-INFINITY),
             ab_gelu(NAN), ab_gelu(3e19f), ab_gelu(-3e19f), ab_gelu_grad(-3e19f), ab_gelu_grad(3e19f));
    for (uint32_t u = 0; u < 0x41400000u; u += 97) { /* |x| < 12 */
        for (int sg = 0; sg < 2; sg++) {
            const float x = sg ? -ab_bits_f32(u) : ab_bits_f32(u);
            const double xd = x, P = 0.5 * erfc(-xd / sqrt(2.0));
            const double g = xd * P, d = P + xd * exp(-0.5 * xd * xd) / sqrt(2.0 * M_PI);
            worst_g = fmax(worst_g, fabs(ab_gelu(x) - g));
            worst_d = fmax(worst_d, fabs(ab_gelu_grad(x) - d));
            float e;
            if (x < -1.3f && x > -5.5f) worst_tail = fmax(worst_tail, fabs(ab_normal_cdf(x, &e) - P) / P);
        }
    }
    AB_CHECK(worst_exp <= 1.0, "ab_exp is %.2f ulp from exp", worst_exp);
    AB_CHECK(worst_g <= 4e-7 && worst_d <= 4e-7, "GELU %.3g and its derivative %.3g from the exact values", worst_g,
             worst_d);
    AB_CHECK(worst_tail <= 4e-6, "Phi's lower tail: relative error %.3g", worst_tail);
    printf("ok   branch-free exp (%.2f ulp), GELU (%.2g) and its derivative (%.2g), Phi's lower tail (%.2g relative)\n",
           worst_exp, worst_g, worst_d, worst_tail);
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
        for (int j = 0; j < c->L; j++) y[r * c->L + j] = mk[j] && s > 0 ? exp(c->scale * x[r * c->L + j] - mx) / s : 0.0;
    }
}

static void test_softmax(ab_backend *be) {
    enum { B = 3, A = 2, L = 7 };
    int32_t mask[B * L];
    for (int b = 0; b < B; b++)
        for (int j = 0; j < L; j++) mask[b * L + j] = b == 2 ? 0 : j < L - 2 * b; /* sequence 2: nothing to attend */
    const size_t n = (size_t)B * A * L * L;
    float *x = falloc(n), *R = falloc(n), *p = falloc(n), *dx = falloc(n);
    double *xd = dalloc(n), *Rd = dalloc(n), *pd = dalloc(n), *gx = dalloc(n);
    fill(x, xd, n, 2.0);
    fill(R, Rd, n, 1.0);
    sm_ctx c = {B, A, L, 0.37, mask};
    double *in[1] = {xd};
    ab_fd_fn f = {sm_ref, in, n, Rd, &c};
    sm_ref(&f, pd);
    ab_fd_grad(&f, 0, n, gx);
    AB_CHECK(be->ops->softmax_forward(be, B, A, L, AB_F32, 0.37f, x, mask, p) == 0, "%s", ab_error());
    check("softmax forward with the padding mask", p, pd, n, AB_TOL_FP32_NMSE);
    int zero = 1;
    for (size_t i = (size_t)2 * A * L * L; i < n; i++) zero &= p[i] == 0.0f;
    AB_CHECK(zero, "a row with every key masked is not all 0");
    AB_CHECK(be->ops->softmax_backward(be, B * A * L, L, AB_F32, 0.37f, p, R, dx) == 0, "%s", ab_error());
    failures += ab_fd_check("softmax backward against finite differences", dx, gx, n);
    /* in place (the scores become the probabilities) */
    float *al = falloc(n);
    memcpy(al, x, n * sizeof *al);
    AB_CHECK(be->ops->softmax_forward(be, B, A, L, AB_F32, 0.37f, al, mask, al) == 0, "%s", ab_error());
    check("softmax forward in place", al, pd, n, AB_TOL_FP32_NMSE);
    printf("ok   attention softmax: padding mask, a fully masked row, backward against finite differences\n");
    free(x), free(R), free(p), free(dx), free(xd), free(Rd), free(pd), free(gx), free(al);
}

/* ---- dropout ---- */

static void test_dropout(ab_backend *be) {
    const size_t n = 200001;
    const float rate = 0.1f;
    const uint64_t seed = 12345;
    float *x = falloc(n), *y = falloc(n), *dx = falloc(n);
    fill(x, NULL, n, 1.0);
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
             "dropout: %zu elements differ from the mask, %zu of %zu kept", bad, kept, n);
    AB_CHECK(be->ops->dropout_backward(be, n, AB_F32, rate, seed, x, dx) == 0 && memcmp(dx, y, n * 4) == 0,
             "dropout backward does not use the forward's mask");
    AB_CHECK(be->ops->dropout_forward(be, n, AB_F32, rate, seed + 1, x, dx) == 0 && memcmp(dx, y, n * 4) != 0,
             "another seed gave the same mask");
    AB_CHECK(be->ops->dropout_forward(be, n, AB_F32, 0.0f, seed, x, dx) == 0 && memcmp(dx, x, n * 4) == 0,
             "rate 0 is not a copy");
    AB_CHECK(be->ops->dropout_forward(be, n, AB_F32, 1.0f, seed, x, dx) != 0, "rate 1 was accepted");
    printf("ok   dropout: the counter-based mask (%.4f kept), 1/(1-p) scaling, backward on the same mask\n",
           (double)kept / n);
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
            y[r * c->C + k] = f->in[0][c->ids[r] * c->C + k] + f->in[1][(r % c->L) * c->C + k] +
                              f->in[2][c->types[r] * c->C + k];
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
    AB_CHECK(be->ops->embedding_forward(be, R, L, C, ids, types, w, V, p, t, T, y) == 0, "%s", ab_error());
    check("embedding forward", y, yd, R * C, AB_TOL_FP32_NMSE);
    for (int i = 0; i < V * C; i++) dw[i] = NAN;
    AB_CHECK(be->ops->embedding_backward(be, R, L, C, ids, types, Rf, V, T, 0, dw, dp, dt) == 0, "%s", ab_error());
    failures += ab_fd_check("embedding word-table gradient", dw, gw, V * C);
    failures += ab_fd_check("embedding position-table gradient", dp, gp, P * C);
    failures += ab_fd_check("embedding type-table gradient", dt, gt, T * C);
    ids[0] = V; /* out of the vocabulary: a NaN row, not a read past the table */
    AB_CHECK(be->ops->embedding_forward(be, R, L, C, ids, types, w, V, p, t, T, y) == 0 && isnan(y[0]) && !isnan(y[C]),
             "an id past the vocabulary does not give a NaN row");
    printf("ok   embeddings: word + position + type, the three tables' gradients (a repeated id adds)\n");
    free(w), free(p), free(t), free(y), free(Rf), free(dw), free(dp), free(dt);
    free(wd), free(pd), free(td), free(Rd), free(yd), free(gw), free(gp), free(gt);
}

/* ---- batched products ---- */

static void test_gemm_batched(ab_backend *be) {
    enum { A = 3, L = 5, D = 4, H = A * D };
    /* q (L, H) with heads as strided views: C_h (L, L) = q_h k_h^T, ctx_h = P_h v_h */
    float q[L * H], k[L * H], s[A * L * L];
    double ref[A * L * L];
    fill(q, NULL, L * H, 1.0);
    fill(k, NULL, L * H, 1.0);
    for (int h = 0; h < A; h++)
        for (int i = 0; i < L; i++)
            for (int j = 0; j < L; j++) {
                double acc = 0;
                for (int d = 0; d < D; d++) acc += (double)q[i * H + h * D + d] * k[j * H + h * D + d];
                ref[(h * L + i) * L + j] = acc;
            }
    AB_CHECK(be->ops->gemm_batched(be, 0, 1, L, L, D, 1.0f, AB_F32, q, H, D, AB_F32, k, H, D, 0.0f, AB_F32, s, L,
                                   L * L, A) == 0,
             "%s", ab_error());
    check("gemm_batched q k^T over strided heads", s, ref, A * L * L, AB_TOL_FP32_NMSE);
    /* transposed A, beta 1, fp16 storage: one rounding of the fp32 sum (old C included) */
    uint16_t qh[L * H], kh[L * H], sh[A * D * D];
    float old[A * D * D];
    double r2[A * D * D];
    for (int i = 0; i < L * H; i++) {
        qh[i] = ab_f32_to_f16(q[i]);
        kh[i] = ab_f32_to_f16(k[i]);
    }
    for (int i = 0; i < A * D * D; i++) {
        sh[i] = ab_f32_to_f16((float)ab_rng_normal(&rng));
        old[i] = ab_f16_to_f32(sh[i]);
    }
    for (int h = 0; h < A; h++) /* (D, D) = q_h^T (D, L) k_h (L, D) + old */
        for (int a = 0; a < D; a++)
            for (int b = 0; b < D; b++) {
                double acc = old[(h * D + a) * D + b];
                for (int i = 0; i < L; i++)
                    acc += (double)ab_f16_to_f32(qh[i * H + h * D + a]) * ab_f16_to_f32(kh[i * H + h * D + b]);
                r2[(h * D + a) * D + b] = acc;
            }
    AB_CHECK(be->ops->gemm_batched(be, 1, 0, D, D, L, 1.0f, AB_F16, qh, H, D, AB_F16, kh, H, D, 1.0f, AB_F16, sh, D,
                                   D * D, A) == 0,
             "%s", ab_error());
    int bad = 0;
    for (int i = 0; i < A * D * D; i++) bad += sh[i] != ab_f32_to_f16((float)r2[i]) && fabs(ab_f16_to_f32(sh[i]) - r2[i]) > 1e-3 * fabs(r2[i]) + 1e-4;
    AB_CHECK(bad == 0, "gemm_batched fp16 with beta 1: %d results are not the rounded fp32 sum", bad);
    printf("ok   gemm_batched: strided heads, transposes, fp16 storage with beta 1\n");
}

/* ---- attention with a padding mask and dropout ---- */

typedef struct {
    int B, L, H, A;
    const int32_t *mask;
    float rate;
    uint64_t seed;
} att_ctx;

static void att_ref(const ab_fd_fn *f, double *y) {
    const att_ctx *c = f->ctx;
    const int D = c->H / c->A, L = c->L, H = c->H;
    const double *q = f->in[0], *k = f->in[1], *v = f->in[2];
    const uint32_t thr = ab_dropout_threshold(c->rate);
    double *p = dalloc((size_t)L);
    for (int b = 0; b < c->B; b++)
        for (int h = 0; h < c->A; h++)
            for (int i = 0; i < L; i++) {
                double mx = -INFINITY, s = 0;
                for (int j = 0; j < L; j++) {
                    double acc = 0;
                    for (int d = 0; d < D; d++)
                        acc += q[(b * L + i) * H + h * D + d] * k[(b * L + j) * H + h * D + d];
                    p[j] = acc / sqrt((double)D);
                    if (c->mask[b * L + j] && p[j] > mx) mx = p[j];
                }
                for (int j = 0; j < L; j++) s += c->mask[b * L + j] ? exp(p[j] - mx) : 0;
                for (int j = 0; j < L; j++) {
                    const size_t e = (((size_t)b * c->A + h) * L + i) * L + j; /* the element's index in probs */
                    const double pj = c->mask[b * L + j] ? exp(p[j] - mx) / s : 0;
                    p[j] = ab_dropout_keep(c->seed, e, thr) ? pj / (1.0 - c->rate) : 0.0;
                }
                for (int d = 0; d < D; d++) {
                    double acc = 0;
                    for (int j = 0; j < L; j++) acc += p[j] * v[(b * L + j) * H + h * D + d];
                    y[(b * L + i) * H + h * D + d] = acc;
                }
            }
    free(p);
}

static void test_attention(ab_backend *be) {
    enum { B = 2, L = 5, A = 3, D = 2, H = A * D };
    int32_t mask[B * L] = {1, 1, 1, 1, 1, 1, 1, 1, 0, 0}; /* sequence 1 has two padding positions */
    const size_t n = (size_t)B * L * H, np = (size_t)B * A * L * L;
    float *q = falloc(n), *k = falloc(n), *v = falloc(n), *R = falloc(n), *ctx = falloc(n);
    float *probs = falloc(np), *drop = falloc(np), *scratch = falloc(np), *dq = falloc(n), *dk = falloc(n),
          *dv = falloc(n);
    double *qd = dalloc(n), *kd = dalloc(n), *vd = dalloc(n), *Rd = dalloc(n), *yd = dalloc(n);
    double *gq = dalloc(n), *gk = dalloc(n), *gv = dalloc(n);
    fill(q, qd, n, 1.0);
    fill(k, kd, n, 1.0);
    fill(v, vd, n, 1.0);
    fill(R, Rd, n, 1.0);
    ab_params p = {.be = be, .cdt = AB_F32, .prec = AB_PREC_FP32};
    const ab_attention att = {A, 0.25f};
    const uint64_t seed = 99;
    att_ctx c = {B, L, H, A, mask, 0.25f, seed};
    double *in[3] = {qd, kd, vd};
    ab_fd_fn f = {att_ref, in, n, Rd, &c};
    att_ref(&f, yd);
    ab_fd_grad(&f, 0, n, gq);
    ab_fd_grad(&f, 1, n, gk);
    ab_fd_grad(&f, 2, n, gv);
    AB_CHECK(ab_attention_forward(&p, &att, B, L, H, q, k, v, mask, 1, seed, probs, drop, ctx) == 0, "%s", ab_error());
    check("attention forward (padding mask, dropout)", ctx, yd, n, AB_TOL_FP32_NMSE);
    AB_CHECK(ab_attention_backward(&p, &att, B, L, H, q, k, v, probs, drop, 1, seed, R, scratch, dq, dk, dv) == 0, "%s",
             ab_error());
    failures += ab_fd_check("attention dq against finite differences", dq, gq, n);
    failures += ab_fd_check("attention dk against finite differences", dk, gk, n);
    failures += ab_fd_check("attention dv against finite differences", dv, gv, n);
    /* a padded key gets no gradient through k or v */
    double pad = 0;
    for (int j = 3; j < 5; j++)
        for (int hcol = 0; hcol < H; hcol++) pad += fabs(dk[(L + j) * H + hcol]) + fabs(dv[(L + j) * H + hcol]);
    AB_CHECK(pad == 0.0, "padding keys received gradient %g", pad);
    printf("ok   multi-head attention with a padding mask and dropout: forward, dq, dk, dv against finite "
           "differences\n");
    free(q), free(k), free(v), free(R), free(ctx), free(probs), free(drop), free(scratch), free(dq), free(dk), free(dv);
    free(qd), free(kd), free(vd), free(Rd), free(yd), free(gq), free(gk), free(gv);
}

int main(void) {
    ab_rng_seed(&rng, 20261202);
    ab_backend *be = ab_backend_cpu_create(2);
    test_layernorm(be, 9, 13);
    test_layernorm(be, 3, 384);
    test_gelu_math();
    test_elementwise(be);
    test_softmax(be);
    test_dropout(be);
    test_embedding(be);
    test_gemm_batched(be);
    test_attention(be);
    be->ops->destroy(be);
    if (failures) fprintf(stderr, "test_transformer: %d failure(s)\n", failures);
    return failures ? 1 : 0;
}
