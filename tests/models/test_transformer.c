/* The multi-head attention layer (models' ab_attention_forward and ab_attention_backward, built
 * on the backend's batched products, masked softmax and dropout) on the CPU backend against a
 * float64 reference on small odd shapes: a padding mask and dropout on the probabilities (a fixed
 * mask: the reference draws it from the same counter-based hash), the context against the float64
 * forward, the q, k and v gradients against central finite differences in float64 of
 * L = sum(R * forward), and no gradient reaching padded keys. The backend ops it is built on are
 * checked one by one in tests/ops (test_backend_ops). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend_cpu.h"
#include "fd_check.h"
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
    ab_params p = {.be = be, .compute_type = AB_F32, .prec = AB_PREC_FP32};
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
    if (!be) {
        fprintf(stderr, "FAIL creating the CPU backend: %s\n", ab_error());
        return 1;
    }
    test_attention(be);
    be->ops->destroy(be);
    if (failures) fprintf(stderr, "test_transformer: %d failure(s)\n", failures);
    return failures ? 1 : 0;
}
