/* Optimizers against float64 references of PyTorch's update rules over several steps (SGD with
 * momentum and weight decay, AdamW), and the parameter buffers: layout, PyTorch's default
 * Linear initialisation, and memory charged per category in each precision; the AMP working copy
 * an optimizer step writes in its pass. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend_cpu.h"
#include "half.h"
#include "layers.h"
#include "optim.h"
#include "params.h"
#include "rng.h"
#include "tolerances.h"

static int failures = 0;
enum { N = 1000, STEPS = 5 };

static void test_optimizer(ab_backend *be, ab_optimizer_kind kind, float lr, float mom, float wd) {
    ab_rng r;
    ab_rng_seed(&r, 11 + kind);
    float *w = malloc(N * 4), *g = malloc(N * 4);
    double *wr = malloc(N * 8), *b1 = calloc(N, 8), *b2 = calloc(N, 8);
    for (int i = 0; i < N; i++) wr[i] = w[i] = (float)ab_rng_normal(&r);
    ab_optimizer o;
    AB_CHECK(ab_optimizer_init(&o, be, kind, N, lr, mom, wd) == 0, "%s", ab_error());
    for (int t = 1; t <= STEPS; t++) {
        for (int i = 0; i < N; i++) g[i] = (float)ab_rng_normal(&r);
        AB_CHECK(ab_optimizer_step(&o, w, g) == 0, "%s", ab_error());
        for (int i = 0; i < N; i++) {
            double gi = g[i];
            if (kind == AB_OPT_SGD) {
                gi += wd * wr[i];
                if (mom != 0.0f) {
                    b1[i] = t == 1 ? gi : mom * b1[i] + gi;
                    gi = b1[i];
                }
                wr[i] -= lr * gi;
            } else {
                wr[i] *= 1.0 - (double)lr * wd;
                b1[i] = 0.9 * b1[i] + 0.1 * gi;
                b2[i] = 0.999 * b2[i] + 0.001 * gi * gi;
                const double mh = b1[i] / (1 - pow(0.9, t)), vh = b2[i] / (1 - pow(0.999, t));
                wr[i] -= lr * mh / (sqrt(vh) + 1e-8);
            }
        }
    }
    char what[64];
    snprintf(what, sizeof what, "%s lr=%g momentum=%g wd=%g", ab_optimizer_name(kind), lr, mom, wd);
    failures += ab_check_nmse(what, w, wr, N, AB_TOL_FP32_NMSE);
    /* the update moved the weights by the expected amount, not a no-op */
    double moved = 0.0;
    for (int i = 0; i < N; i++) moved += fabs(w[i] - wr[i]) < 1e-3 ? 0 : 1;
    AB_CHECK(moved == 0, "%s: %g elements off by more than 1e-3", what, moved);
    ab_optimizer_free(&o);
    free(w);
    free(g);
    free(wr);
    free(b1);
    free(b2);
}

static void test_params(ab_backend *be) {
    const ab_precision precs[] = {AB_PREC_FP32, AB_PREC_AMP, AB_PREC_BF16};
    for (int k = 0; k < 3; k++) {
        ab_param_spec specs[4];
        ab_linear_specs(&specs[0], &specs[1], "fc1.weight", "fc1.bias", 784, 256);
        ab_linear_specs(&specs[2], &specs[3], "fc2.weight", "fc2.bias", 256, 10);
        ab_rng r;
        ab_rng_seed(&r, 5);
        const ab_mem before = be->mem;
        ab_params p;
        AB_CHECK(ab_params_init(&p, be, precs[k], specs, 4, &r) == 0, "%s", ab_error());
        const size_t n = 784 * 256 + 256 + 256 * 10 + 10;
        /* weights first, the biases (no weight decay under --wd-exclude) after them */
        AB_CHECK(p.n == n && specs[2].offset == 784 * 256 && specs[1].offset == 784 * 256 + 256 * 10 &&
                     specs[3].offset == specs[1].offset + 256 && specs[3].numel == 10,
                 "layout");
        const size_t c = ab_dtype_size(p.compute_type);
        const size_t *cur = be->mem.current, *was = before.current;
        if (precs[k] == AB_PREC_FP32) {
            AB_CHECK(cur[AB_MEM_PARAMETERS] - was[AB_MEM_PARAMETERS] == 4 * n, "fp32 parameters 4 bytes each");
            AB_CHECK(cur[AB_MEM_MASTER] == was[AB_MEM_MASTER], "fp32 has no master copy");
            AB_CHECK(cur[AB_MEM_GRADIENTS] - was[AB_MEM_GRADIENTS] == 4 * n, "fp32 gradients");
        } else {
            AB_CHECK(cur[AB_MEM_PARAMETERS] - was[AB_MEM_PARAMETERS] == c * n, "%s working copy", ab_precision_name(precs[k]));
            AB_CHECK(cur[AB_MEM_MASTER] - was[AB_MEM_MASTER] == 4 * n, "fp32 master weights");
            /* fp32 gradients, and a compute-type scratch of the largest tensor (fc1.weight) */
            AB_CHECK(cur[AB_MEM_GRADIENTS] - was[AB_MEM_GRADIENTS] == 4 * n + c * 784 * 256 &&
                         p.n_compute_grad == 784 * 256,
                     "fp32 gradients + one tensor's compute-type scratch");
            /* the working copy is the rounded master */
            const uint16_t *wc = p.compute_weights;
            int same = 1;
            for (size_t i = 0; i < n; i++)
                same &= wc[i] == (p.compute_type == AB_F16 ? ab_f32_to_f16(p.master[i]) : ab_f32_to_bf16(p.master[i]));
            AB_CHECK(same, "working copy = rounded master");
        }
        /* PyTorch's default Linear init: U(-1/sqrt(fan_in), 1/sqrt(fan_in)), weights and biases */
        for (int s = 0; s < 4; s++) {
            const double bound = 1.0 / sqrt(specs[s].fan_in);
            double mean = 0.0, var = 0.0, mx = 0.0;
            for (size_t i = 0; i < specs[s].numel; i++) {
                const double v = p.master[specs[s].offset + i];
                mean += v;
                var += v * v;
                mx = fmax(mx, fabs(v));
            }
            mean /= specs[s].numel;
            var = var / specs[s].numel - mean * mean;
            AB_CHECK(mx <= bound, "%s within the bound", specs[s].name);
            if (specs[s].numel >= 2560) {
                AB_CHECK(fabs(var / (bound * bound / 3) - 1) < 0.05, "%s variance %g vs %g", specs[s].name, var,
                         bound * bound / 3);
                AB_CHECK(mx > 0.99 * bound, "%s fills its range", specs[s].name);
            }
        }
        ab_params_free(&p);
        AB_CHECK(be->mem.current_total == before.current_total, "everything released");
    }
}

/* ab_grad_unchecked: the trained tensors no folding op checked, as merged ranges of the fp32
 * gradient; the buffer region (no gradient) never, the fp32 region (batch norm's) unless marked */
static void test_unchecked(ab_backend *be) {
    ab_param_spec specs[7];
    ab_linear_specs(&specs[0], &specs[1], "fc1.weight", "fc1.bias", 6, 5);
    ab_linear_specs(&specs[2], &specs[3], "fc2.weight", "fc2.bias", 5, 3);
    specs[4] = (ab_param_spec){.name = "bn.weight", .ndim = 1, .shape = {5}, .init = AB_INIT_ONE, .region = AB_REGION_FP32};
    specs[5] = (ab_param_spec){.name = "bn.running_mean", .ndim = 1, .shape = {5}, .region = AB_REGION_BUFFER};
    specs[6] = (ab_param_spec){.name = "bn.bias", .ndim = 1, .shape = {5}, .region = AB_REGION_FP32};
    ab_rng r;
    ab_rng_seed(&r, 5);
    ab_params p;
    AB_CHECK(ab_params_init(&p, be, AB_PREC_AMP, specs, 7, &r) == 0, "%s", ab_error());
    size_t out[7][2];
    unsigned char checked[7] = {0};
    size_t k = ab_grad_unchecked(&p, checked, out);
    AB_CHECK(k == 1 && out[0][0] == 0 && out[0][1] == p.n, "nothing checked: one range [0, %zu), got %zu ranges", p.n, k);
    AB_CHECK(ab_grad_unchecked(&p, NULL, out) == 1 && out[0][1] == p.n, "checked NULL: everything");
    checked[0] = checked[2] = 1; /* the weights, as gemm_fold marks them */
    k = ab_grad_unchecked(&p, checked, out);
    AB_CHECK(k == 1 && out[0][0] == specs[1].offset && out[0][1] == p.n && specs[1].offset == 6 * 5 + 5 * 3,
             "weights checked: the biases and the fp32 region, one range [%zu, %zu): %zu ranges, first [%zu, %zu)",
             specs[1].offset, p.n, k, k ? out[0][0] : 0, k ? out[0][1] : 0);
    checked[1] = checked[3] = 1; /* the whole compute region */
    k = ab_grad_unchecked(&p, checked, out);
    AB_CHECK(k == 1 && out[0][0] == p.n_compute && out[0][1] == p.n, "compute region checked: [%zu, %zu) left, got %zu",
             p.n_compute, p.n, k);
    checked[4] = 1; /* bn.weight too: bn.bias alone */
    k = ab_grad_unchecked(&p, checked, out);
    AB_CHECK(k == 1 && out[0][0] == specs[6].offset && out[0][1] == specs[6].offset + 5, "bn.bias alone left");
    checked[4] = 0, checked[1] = 0, checked[6] = 1; /* fc1.bias and bn.weight: two ranges, apart */
    k = ab_grad_unchecked(&p, checked, out);
    AB_CHECK(k == 2 && out[0][0] == specs[1].offset && out[0][1] == specs[1].offset + 5 &&
                 out[1][0] == specs[4].offset && out[1][1] == specs[4].offset + 5,
             "fc1.bias and bn.weight: two ranges, got %zu", k);
    memset(checked, 1, sizeof checked);
    AB_CHECK(ab_grad_unchecked(&p, checked, out) == 0, "everything checked: no range");
    ab_params_free(&p);
}

/* --wd-exclude bias-norm: with zero gradients one AdamW step only decays, so the weights shrink by
 * 1 - lr wd and the biases (no_decay) stay bit for bit; SGD likewise */
static void test_exclusion(ab_backend *be) {
    for (int k = 0; k < 2; k++) {
        ab_param_spec specs[4];
        ab_linear_specs(&specs[0], &specs[1], "fc1.weight", "fc1.bias", 7, 5);
        ab_linear_specs(&specs[2], &specs[3], "fc2.weight", "fc2.bias", 5, 3);
        ab_rng r;
        ab_rng_seed(&r, 9);
        ab_params p;
        AB_CHECK(ab_params_init(&p, be, AB_PREC_FP32, specs, 4, &r) == 0, "%s", ab_error());
        ab_optimizer o;
        const float lr = 0.1f, wd = 0.5f;
        AB_CHECK(ab_optimizer_init(&o, be, k ? AB_OPT_SGD : AB_OPT_ADAMW, p.n, lr, 0.0f, wd) == 0 &&
                     ab_optimizer_exclude(&o, specs, 4) == 0,
                 "%s", ab_error());
        AB_CHECK(o.n_runs == 2 && o.runs[0].decay && !o.runs[1].decay && o.runs[0].n == 7 * 5 + 5 * 3,
                 "runs: %d (the weights, then the biases)", o.n_runs);
        float *w0 = malloc(p.n * sizeof *w0);
        memcpy(w0, p.master, p.n * sizeof *w0);
        memset(p.grad, 0, p.n * sizeof(float));
        AB_CHECK(ab_optimizer_step(&o, p.master, p.grad) == 0, "%s", ab_error());
        int bad = 0;
        for (int s = 0; s < 4; s++)
            for (size_t i = 0; i < specs[s].numel; i++) {
                const float before = w0[specs[s].offset + i], after = p.master[specs[s].offset + i];
                /* AdamW: w (1 - lr wd); SGD: w - lr (wd w) */
                const float want = specs[s].no_decay ? before : k ? before - lr * (wd * before) : before * (1.0f - lr * wd);
                bad += after != want;
            }
        AB_CHECK(bad == 0, "%s with exclusions: %d elements off (decayed biases or undecayed weights)",
                 k ? "sgd" : "adamw", bad);
        free(w0);
        ab_optimizer_free(&o);
        ab_params_free(&p);
    }
}

/* A parameter server's shards (ab_optimizer_step_range over pieces cut anywhere, runs of weight
 * decay and none among them) update every element exactly as the whole step does: bit for bit,
 * so that --dp-sync ps trains the ring's weights. */
static void test_ranges(ab_backend *be, ab_optimizer_kind kind, float lr, float mom, float wd) {
    enum { M = 1037 };
    ab_rng r;
    ab_rng_seed(&r, 23 + kind);
    float *w0 = malloc(M * 4), *w1 = malloc(M * 4), *g = malloc(M * 4);
    for (int i = 0; i < M; i++) w0[i] = w1[i] = (float)ab_rng_normal(&r);
    ab_optimizer whole, split;
    AB_CHECK(ab_optimizer_init(&whole, be, kind, M, lr, mom, wd) == 0, "%s", ab_error());
    AB_CHECK(ab_optimizer_init(&split, be, kind, M, lr, mom, wd) == 0, "%s", ab_error());
    /* runs of decay and no decay: [0, 400) decayed, [400, 413) not, [413, M) decayed */
    whole.runs[0] = (ab_optim_run){0, 400, 1};
    whole.runs[1] = (ab_optim_run){400, 13, 0};
    whole.runs[2] = (ab_optim_run){413, M - 413, 1};
    whole.n_runs = 3;
    memcpy(split.runs, whole.runs, sizeof whole.runs);
    split.n_runs = 3;
    static const size_t cuts[] = {0, 1, 17, 405, 406, 700, 1001, M};
    for (int t = 1; t <= STEPS; t++) {
        for (int i = 0; i < M; i++) g[i] = (float)ab_rng_normal(&r);
        AB_CHECK(ab_optimizer_step(&whole, w0, g) == 0, "%s", ab_error());
        for (size_t c = 0; c + 1 < sizeof cuts / sizeof cuts[0]; c++) {
            AB_CHECK(ab_optimizer_step_range(&split, w1, g, cuts[c], cuts[c + 1]) == 0, "%s", ab_error());
            if (c + 2 < sizeof cuts / sizeof cuts[0]) split.t--; /* one step, however many pieces */
        }
    }
    AB_CHECK(whole.t == split.t, "%s: %d steps counted whole, %d in pieces", ab_optimizer_name(kind), whole.t,
             split.t);
    AB_CHECK(memcmp(w0, w1, M * 4) == 0, "%s (momentum %g): the step in pieces differs from the whole step",
             ab_optimizer_name(kind), (double)mom);
    ab_optimizer_free(&whole);
    ab_optimizer_free(&split);
    free(w0), free(w1), free(g);
}

/* Clipping's factor rides in the step (grad_scale): the bits of a step on the gradients scaled
 * first, the gradients left as they were, and the factor back to 1 for the next step */
static void test_grad_scale(ab_backend *be, ab_optimizer_kind kind, float mom) {
    ab_rng r;
    ab_rng_seed(&r, 31 + kind);
    float *w1 = malloc(N * 4), *w2 = malloc(N * 4), *g = malloc(N * 4), *gs = malloc(N * 4), *g0 = malloc(N * 4);
    for (int i = 0; i < N; i++) w1[i] = w2[i] = (float)ab_rng_normal(&r);
    ab_optimizer a, b;
    AB_CHECK(ab_optimizer_init(&a, be, kind, N, 0.01f, mom, 0.01f) == 0 &&
                 ab_optimizer_init(&b, be, kind, N, 0.01f, mom, 0.01f) == 0,
             "%s", ab_error());
    const float f = 0.3125f + 1e-3f;
    for (int t = 1; t <= 3; t++) {
        const float ft = t == 2 ? 1.0f : f; /* step 2 unclipped */
        for (int i = 0; i < N; i++) g[i] = (float)ab_rng_normal(&r), gs[i] = g[i] * ft, g0[i] = g[i];
        AB_CHECK(ab_optimizer_step(&a, w1, gs) == 0, "%s", ab_error());
        b.grad_scale = ft;
        AB_CHECK(ab_optimizer_step(&b, w2, g) == 0, "%s", ab_error());
        AB_CHECK(b.grad_scale == 1.0f, "%s: grad_scale %g after the step, expected 1", ab_optimizer_name(kind),
                 (double)b.grad_scale);
        AB_CHECK(memcmp(g, g0, N * 4) == 0, "%s: the step changed the gradients", ab_optimizer_name(kind));
        AB_CHECK(memcmp(w1, w2, N * 4) == 0, "%s step %d: grad_scale %g differs from the gradients scaled first",
                 ab_optimizer_name(kind), t, (double)ft);
    }
    ab_optimizer_free(&a);
    ab_optimizer_free(&b);
    free(w1), free(w2), free(g), free(gs), free(g0);
}

/* The working copy written in the step's pass (ab_optimizer_set_copy): over runs of decay and none,
 * the copy ending inside a run (as the compute region ends before the fp32 one), whole steps and
 * steps in pieces, each copied element the new weight rounded, the element past the copy's end
 * untouched; a copy longer than the weights, or of fp32, refused. */
static void test_copy(ab_backend *be, ab_optimizer_kind kind, ab_dtype ct) {
    enum { M = 1037, NC = 407 };
    ab_rng r;
    ab_rng_seed(&r, 41 + kind);
    float *w = malloc(M * 4), *g = malloc(M * 4);
    uint16_t *c = malloc((NC + 1) * sizeof *c);
    for (int i = 0; i < M; i++) w[i] = (float)ab_rng_normal(&r);
    c[NC] = 0x7e01;
    ab_optimizer o;
    AB_CHECK(ab_optimizer_init(&o, be, kind, M, 0.01f, 0.9f, 0.01f) == 0, "%s", ab_error());
    o.runs[0] = (ab_optim_run){0, 400, 1};
    o.runs[1] = (ab_optim_run){400, 13, 0}; /* the copy ends at 407, inside this run */
    o.runs[2] = (ab_optim_run){413, M - 413, 1};
    o.n_runs = 3;
    AB_CHECK(ab_optimizer_set_copy(&o, ct, c, M + 1) != 0, "a copy longer than the weights was taken");
    AB_CHECK(ab_optimizer_set_copy(&o, AB_F32, c, NC) != 0, "an fp32 copy was taken");
    AB_CHECK(ab_optimizer_set_copy(&o, ct, c, NC) == 0, "%s", ab_error());
    static const size_t cuts[] = {0, 3, 405, 406, 409, 700, M};
    for (int t = 1; t <= 4; t++) {
        for (int i = 0; i < M; i++) g[i] = (float)ab_rng_normal(&r);
        memset(c, 0, NC * sizeof *c);
        if (t % 2) { /* a whole step */
            AB_CHECK(ab_optimizer_step(&o, w, g) == 0, "%s", ab_error());
        } else { /* in pieces, as a parameter server's shards */
            for (size_t k = 0; k + 1 < sizeof cuts / sizeof cuts[0]; k++) {
                AB_CHECK(ab_optimizer_step_range(&o, w, g, cuts[k], cuts[k + 1]) == 0, "%s", ab_error());
                if (k + 2 < sizeof cuts / sizeof cuts[0]) o.t--;
            }
        }
        int bad = 0;
        for (int i = 0; i < NC; i++) bad += c[i] != ab_f32_to_16(ct, w[i]);
        AB_CHECK(bad == 0, "%s %s copy, step %d: %d of %d elements are not the new weights rounded",
                 ab_optimizer_name(kind), ab_dtype_name(ct), t, bad, (int)NC);
        AB_CHECK(c[NC] == 0x7e01, "%s %s copy, step %d: the element past its end was written", ab_optimizer_name(kind),
                 ab_dtype_name(ct), t);
    }
    ab_optimizer_free(&o);
    free(w), free(g), free(c);
}

int main(void) {
    ab_backend *be = ab_backend_cpu_create(1);
    if (!be) return 1;
    test_optimizer(be, AB_OPT_SGD, 0.01f, 0.0f, 0.0f);
    test_optimizer(be, AB_OPT_SGD, 0.05f, 0.9f, 1e-2f);
    test_optimizer(be, AB_OPT_ADAMW, 1e-3f, 0.0f, 0.01f);
    test_params(be);
    test_unchecked(be);
    test_exclusion(be);
    test_grad_scale(be, AB_OPT_SGD, 0.9f);
    test_grad_scale(be, AB_OPT_SGD, 0.0f); /* the loop without momentum */
    test_grad_scale(be, AB_OPT_ADAMW, 0.0f);
    test_ranges(be, AB_OPT_SGD, 0.01f, 0.0f, 0.0f);
    test_ranges(be, AB_OPT_SGD, 0.05f, 0.9f, 1e-2f);
    test_ranges(be, AB_OPT_ADAMW, 1e-3f, 0.0f, 0.01f);
    test_copy(be, AB_OPT_SGD, AB_F16);
    test_copy(be, AB_OPT_ADAMW, AB_BF16);
    be->ops->destroy(be);
    printf("optimizers and parameters: %d failures\n", failures);
    return failures ? 1 : 0;
}
