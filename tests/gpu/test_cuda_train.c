/* The MLP trained a few steps on the GPU and on the CPU from the same initial weights and the same
 * batches ends with the same weights (fp32 and amp, within tests/tolerances.h), and the loss
 * scaler skips and halves on the GPU: a gradient made +inf at one step leaves the weights as they
 * were, halves the scale, records one overflow event, and training goes on. The reduced ResNet
 * (cuDNN convolutions, batch norm, shortcuts) on CIFAR-10 the same way, compared on the weight
 * updates, when the CIFAR-10 files are there (AB_CIFAR10_DIR, else the build's data root). bert-tiny
 * on an SST-2 subset the same way (fp32 and amp, sequence 32, dropout 0.1 with the masks both
 * backends draw alike, AdamW with decay off biases and norms, gradient clipping, which must clip
 * the same steps to the same norm), when SST-2 and BERT's vocabulary are there (AB_GLUE_DIR
 * holding SST-2/ and AB_VOCAB, else the build's data root). Each tolerance is tests/tolerances.h's,
 * or AB_FLOOR_K times the floor where that is larger: the same steps on the CPU from weights one
 * rounding apart (tests/gpu/floor.h; on the H200 resnet-tiny's amp updates after 3 steps differed
 * by NMSE 0.063 and its step-2 loss by 1.3%, as chaotic as a deep net with batch norm at lr 0.05
 * and momentum 0.9 makes them).
 * Needs MNIST (AB_MNIST_DIR, else the build's default data root). Without a usable GPU, or
 * without the data, it prints SKIPPED and exits 77 (CTest SKIP_RETURN_CODE). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "backend_cuda.h"
#include "floor.h"
#include "params.h"
#include "rng.h"
#include "tolerances.h"
#include "workloads.h"
#include "platform.h"
#include "train.h"

static int failures = 0;
enum { STEPS = 6, BATCH = 64 };
/* "cuda"; AB_GPU_TEST_DEVICE=cpu runs the same checks with the CPU backend in the GPU's place, to
 * check the test itself on a machine without a GPU (it says so; it proves nothing about CUDA) */
static const char *gpu_device = "cuda";

static const char *data_dir(void) {
    const char *d = getenv("AB_MNIST_DIR");
    return d && *d ? d : AB_DEFAULT_DATA_ROOT "/mnist";
}

static const char *cifar_dir(void) {
    const char *d = getenv("AB_CIFAR10_DIR");
    return d && *d ? d : AB_DEFAULT_DATA_ROOT "/cifar10";
}

/* SST-2's folder: AB_GLUE_DIR/SST-2 (the variable scripts/bundle.sh reads), else the data root's */
static const char *sst2_dir(void) {
    static char dir[4096];
    const char *g = getenv("AB_GLUE_DIR");
    snprintf(dir, sizeof dir, "%s/SST-2", g && *g ? g : AB_DEFAULT_DATA_ROOT "/glue");
    return dir;
}

static const char *vocab_path(void) {
    const char *v = getenv("AB_VOCAB");
    return v && *v ? v : AB_DEFAULT_DATA_ROOT "/bert-base-uncased/vocab.txt";
}

/* a workload to compare: the MLP on MNIST, the reduced ResNet on CIFAR-10, or bert-tiny on SST-2 */
typedef enum { RECIPE_MLP, RECIPE_RESNET, RECIPE_BERT } recipe_kind;
typedef struct {
    const char *model, *dataset;
    int batch, steps;
    double tol_fp32, tol_lowp, loss_fp32, loss_lowp; /* weights (MLP) or weight updates (ResNet, BERT) */
    int updates;
    recipe_kind recipe;
    float clip; /* > 0: the global gradient norm is clipped to this (checked after each step) */
} workload;

/* bert-tiny: 4 steps of 8 sequences of 32 positions from the first 256 SST-2 rows. The gradient's
 * global norm is 0.39 at the first step and 0.77 to 1.25 at the next three unclipped, so a clip at
 * 0.5 leaves the first step alone and clips the others: both of the trainer's branches. */
enum { BERT_STEPS = 4, BERT_BATCH = 8, BERT_ROWS = 256 };

static const workload MLP = {"mlp", "mnist", BATCH, STEPS, AB_TOL_GPU_TRAIN_FP32_NMSE, AB_TOL_GPU_TRAIN_LOWP_NMSE,
                             AB_TOL_GPU_TRAIN_LOSS_FP32_REL, AB_TOL_GPU_TRAIN_LOSS_LOWP_REL, 0, RECIPE_MLP, 0.0f};
static const workload RESNET = {"resnet-tiny", "cifar10", 16, 3, AB_TOL_GPU_TRAIN_BN_FP32_NMSE,
                                AB_TOL_GPU_TRAIN_BN_LOWP_NMSE, AB_TOL_GPU_TRAIN_BN_LOSS_FP32_REL,
                                AB_TOL_GPU_TRAIN_LOSS_LOWP_REL, 1, RECIPE_RESNET, 0.0f};
static const workload BERT = {"bert-tiny", "sst2", BERT_BATCH, BERT_STEPS, AB_TOL_GPU_TRAIN_ADAMW_FP32_NMSE,
                              AB_TOL_GPU_TRAIN_ADAMW_LOWP_NMSE, AB_TOL_GPU_TRAIN_LOSS_FP32_REL,
                              AB_TOL_GPU_TRAIN_LOSS_LOWP_REL, 1, RECIPE_BERT, 0.5f};

static void config_for(ab_train_config *c, const char *device, ab_precision prec, const workload *w) {
    ab_train_config_defaults(c);
    c->workload = &ab_workloads;
    c->platform = &ab_platform;
    c->device = device;
    c->precision = prec;
    c->model = w->model;
    c->dataset = w->dataset;
    c->data_dir = w->recipe == RECIPE_MLP ? data_dir() : w->recipe == RECIPE_RESNET ? cifar_dir() : sst2_dir();
    c->quiet = 1;
    c->batch_size = w->batch;
    if (w->recipe == RECIPE_RESNET) { /* the ResNet recipe, on a subset */
        c->lr = 0.05f;
        c->momentum = 0.9f;
        c->weight_decay = 5e-4f;
        c->train_subset = 512;
        c->test_subset = 64;
        c->init_scale = 1024.0f;
    }
    if (w->recipe == RECIPE_BERT) {
        /* the bert recipe's optimizer (models/registry.c: AdamW, decay 0.01 but on biases and
         * LayerNorm weights, clipping) at lr 1e-3, which moves bert-tiny visibly in a few steps, at
         * a constant rate; dropout on (its masks are counter-based: both backends drop the same
         * elements); short sequences from a subset */
        c->optimizer = AB_OPT_ADAMW;
        c->lr = 1e-3f;
        c->weight_decay = 0.01f;
        c->wd_exclude = 1;
        c->clip_grad_norm = w->clip;
        c->dropout = 0.1f;
        c->max_seq_len = 32;
        c->vocab = vocab_path();
        c->train_subset = BERT_ROWS;
        c->test_subset = 32;
    }
}

static void config(ab_train_config *c, const char *device, ab_precision prec) { config_for(c, device, prec, &MLP); }

static float *weights(ab_trainer *t) {
    const size_t n = ab_trainer_params(t)->n;
    float *w = malloc(n * sizeof(float));
    if (ab_trainer_weights(t, w) != 0) {
        fprintf(stderr, "FAIL reading weights: %s\n", ab_error());
        failures++;
    }
    return w;
}

/* the global L2 norm of the gradient a step left (unscaled, not clipped: the optimizer took the
 * step's clip factor inside its pass), or NaN */
static double grad_norm(ab_trainer *t) {
    const ab_params *p = ab_trainer_params(t);
    float *g = malloc(p->n * sizeof(float));
    if (!g || p->be->ops->download(p->be, g, p->grad, p->n * sizeof(float)) != 0) {
        fprintf(stderr, "FAIL reading the gradient: %s\n", g ? ab_error() : "out of memory");
        failures++;
        free(g);
        return NAN;
    }
    double s = 0.0;
    for (size_t i = 0; i < p->n; i++) s += (double)g[i] * g[i];
    free(g);
    return sqrt(s);
}

/* steps 0..w->steps-1 over order on both devices; compares losses step by step, the clipped
 * gradient norms where the workload clips, and at the end the weights or (w->updates) the weight
 * updates: with batch norm, whose gradients are ill-conditioned, and for BERT, whose weights after
 * a few steps are mostly their initial values (the embedding rows of unseen tokens, AdamW's lr-sized
 * steps on weights of std 0.02), so a comparison of the weights would bury the updates' differences */
static void parity_of(const workload *wl, ab_precision prec, const int32_t *order) {
    ab_train_config cc, gc;
    config_for(&cc, "cpu", prec, wl);
    config_for(&gc, gpu_device, prec, wl);
    ab_run_record crec, grec, prec_rec;
    memset(&prec_rec, 0, sizeof prec_rec);
    ab_trainer *ct = NULL, *gt = NULL, *pt = NULL; /* pt: the floor's (tests/gpu/floor.h) */
    float *w0 = NULL, *w0p = NULL;
    size_t n_moved = 0;
    if (ab_trainer_create(&cc, &crec, &ct) != 0 || ab_trainer_create(&gc, &grec, &gt) != 0 ||
        ab_trainer_create(&cc, &prec_rec, &pt) != 0 || ab_floor_perturb(pt, &n_moved) != 0) {
        fprintf(stderr, "FAIL creating %s trainers (%s): %s\n", wl->model, ab_precision_name(prec), ab_error());
        failures++;
        goto out;
    }
    const size_t n = ab_trainer_params(ct)->n;
    float *w0g = weights(gt);
    w0 = weights(ct);
    AB_CHECK(memcmp(w0, w0g, n * sizeof(float)) == 0, "%s %s: initial weights differ", wl->model,
             ab_precision_name(prec));
    free(w0g);
    w0p = weights(pt);
    int clipped = 0, clip_failures = 0, floor_ok = 1;
    double floor_loss = 0.0; /* the largest relative loss difference of the floor's run */
    for (int s = 0; s < wl->steps; s++) {
        ab_step_result rc = {0}, rg = {0}, rp = {0};
        if (ab_trainer_step(ct, order + s * wl->batch, wl->batch, s, 1, &rc) != 0 ||
            ab_trainer_step(gt, order + s * wl->batch, wl->batch, s, 1, &rg) != 0 ||
            ab_trainer_step(pt, order + s * wl->batch, wl->batch, s, 1, &rp) != 0) {
            fprintf(stderr, "FAIL %s %s step %d: %s\n", wl->model, ab_precision_name(prec), s, ab_error());
            failures++;
            goto out;
        }
        const double lc = rc.loss, lg = rg.loss;
        AB_CHECK(rc.applied == rg.applied, "%s %s step %d: cpu applied=%d, gpu applied=%d", wl->model,
                 ab_precision_name(prec), s, rc.applied, rg.applied);
        /* a floor run that skips a step the CPU takes (or the reverse) is no floor: the fixed
         * tolerances then stand alone */
        if (rp.applied != rc.applied) floor_ok = 0;
        floor_loss = fmax(floor_loss, fabs(rp.loss - lc) / fmax(fabs(lc), 1e-30));
        const double ltol = fmax(prec == AB_PREC_FP32 ? wl->loss_fp32 : wl->loss_lowp,
                                 floor_ok ? AB_FLOOR_K * floor_loss : 0.0);
        AB_CHECK(fabs(lc - lg) <= ltol * fabs(lc), "%s %s step %d: loss cpu %.9g gpu %.9g (tolerance %.3g relative; "
                 "the floor %.3g)", wl->model, ab_precision_name(prec), s, lc, lg, ltol, floor_loss);
        if (wl->clip > 0.0f && rc.applied && rg.applied) {
            /* a clipped gradient has norm clip * norm / (norm + 1e-6): clip to 2e-6 relative here
             * (norm > clip = 0.5), whatever the two backends' gradients were; one not clipped
             * stays below clip */
            /* the gradients as the optimizer took them: the buffer's times the step's clip factor */
            const double nc = grad_norm(ct) * rc.clip_factor, ng = grad_norm(gt) * rg.clip_factor,
                         tol = AB_TOL_GPU_SUMSQ_REL;
            const int cpu_clipped = fabs(nc - wl->clip) <= tol * wl->clip, failures_before = failures;
            clipped += cpu_clipped;
            AB_CHECK(nc <= wl->clip * (1.0 + tol) && ng <= wl->clip * (1.0 + tol),
                     "%s %s step %d: gradient norm after clipping at %g: cpu %.9g, gpu %.9g", wl->model,
                     ab_precision_name(prec), s, (double)wl->clip, nc, ng);
            if (cpu_clipped)
                AB_CHECK(fabs(ng - nc) <= tol * nc,
                         "%s %s step %d: the cpu clipped the gradient to norm %.9g, the gpu's has norm %.9g", wl->model,
                         ab_precision_name(prec), s, nc, ng);
            clip_failures += failures - failures_before;
        }
    }
    if (wl->clip > 0.0f) {
        AB_CHECK(clipped > 0, "%s %s: no step clipped at %g: the case does not test clipping", wl->model,
                 ab_precision_name(prec), (double)wl->clip);
        if (clipped > 0 && clip_failures == 0)
            printf("ok   %s %s: %d of %d steps clipped to norm %g, on both\n", wl->model, ab_precision_name(prec),
                   clipped, wl->steps, (double)wl->clip);
    }
    {
        float *wc = weights(ct), *wg = weights(gt), *wp = weights(pt);
        double *ref = malloc(n * sizeof(double));
        for (size_t i = 0; i < n; i++) {
            ref[i] = wl->updates ? (double)wc[i] - w0[i] : wc[i];
            if (wl->updates) wg[i] -= w0[i], wp[i] -= w0p[i];
        }
        size_t worst;
        const double floor_e = ab_nmse(wp, ref, n, &worst);
        const double tol = fmax(prec == AB_PREC_FP32 ? wl->tol_fp32 : wl->tol_lowp,
                                floor_ok && isfinite(floor_e) ? AB_FLOOR_K * floor_e : 0.0);
        char what[200];
        snprintf(what, sizeof what, "%s %s after %d steps (%s; floor, %zu weights a rounding apart: %s%.2g, loss rel "
                 "%.2g)", wl->model, wl->updates ? "weight updates" : "weights", wl->steps, ab_precision_name(prec),
                 n_moved, floor_ok ? "nmse " : "none, it skipped differently: nmse ", floor_e, floor_loss);
        const int bad = ab_check_nmse(what, wg, ref, n, tol);
        failures += bad;
        if (!bad) printf("ok   %s\n", what);
        free(ref);
        free(wc);
        free(wg);
        free(wp);
    }
out:
    free(w0);
    free(w0p);
    if (ct) ab_trainer_destroy(ct);
    if (gt) ab_trainer_destroy(gt);
    if (pt) ab_trainer_destroy(pt);
    ab_run_record_free(&crec);
    ab_run_record_free(&grec);
    ab_run_record_free(&prec_rec);
}

static void parity(ab_precision prec, const int32_t *order) { parity_of(&MLP, prec, order); }

static void scaler_skip_and_halve(const int32_t *order) {
    ab_train_config c;
    config(&c, gpu_device, AB_PREC_AMP);
    const long inject = 2;
    c.inject_inf_step = inject;
    ab_run_record rec;
    ab_trainer *t = NULL;
    if (ab_trainer_create(&c, &rec, &t) != 0) {
        fprintf(stderr, "FAIL creating the amp trainer: %s\n", ab_error());
        failures++;
        ab_run_record_free(&rec);
        return;
    }
    const size_t n = ab_trainer_params(t)->n;
    const ab_scaler *sc = ab_trainer_scaler(t);
    const float scale0 = sc->scale;
    for (int s = 0; s < STEPS; s++) {
        float *before = weights(t);
        ab_step_result r = {.applied = -1};
        if (ab_trainer_step(t, order + s * BATCH, BATCH, s, 1, &r) != 0) {
            fprintf(stderr, "FAIL amp step %d: %s\n", s, ab_error());
            failures++;
            free(before);
            break;
        }
        float *after = weights(t);
        const double loss = r.loss;
        const int same = memcmp(before, after, n * sizeof(float)) == 0;
        if (s == inject) {
            AB_CHECK(r.applied == 0, "step %d with an injected inf was taken", s);
            AB_CHECK(same, "step %d was skipped but the weights changed", s);
            AB_CHECK(sc->scale == scale0 * c.backoff_factor, "scale after the overflow: %g, expected %g",
                     (double)sc->scale, (double)(scale0 * c.backoff_factor));
        } else {
            AB_CHECK(r.applied == 1, "clean step %d was skipped (loss %g, scale %g)", s, loss, (double)sc->scale);
            AB_CHECK(!same, "clean step %d left the weights as they were", s);
        }
        AB_CHECK(isfinite(loss), "step %d loss %g", s, loss);
        free(before);
        free(after);
    }
    AB_CHECK(sc->skipped == 1 && sc->n_events == 1, "skipped %ld, overflow events %zu (expected 1, 1)", sc->skipped,
             sc->n_events);
    if (sc->n_events == 1)
        AB_CHECK(sc->events[0].step == inject && sc->events[0].scale_before == scale0 &&
                     sc->events[0].scale_after == scale0 * c.backoff_factor,
                 "overflow event: step %ld, %g -> %g", sc->events[0].step, (double)sc->events[0].scale_before,
                 (double)sc->events[0].scale_after);
    ab_trainer_destroy(t);
    ab_run_record_free(&rec);
}

int main(void) {
    const char *stand_in = getenv("AB_GPU_TEST_DEVICE");
    if (stand_in && strcmp(stand_in, "cpu") == 0) {
        gpu_device = "cpu";
        printf("SELF-CHECK: the CPU backend stands in for the GPU (AB_GPU_TEST_DEVICE=cpu)\n");
    }
    const char *why = NULL;
    if (strcmp(gpu_device, "cuda") == 0 && ab_cuda_device_count(&why) == 0) {
        printf("SKIPPED: %s\n", why);
        return 77;
    }
    char path[4096];
    snprintf(path, sizeof path, "%s/train-images-idx3-ubyte.gz", data_dir());
    if (access(path, R_OK) != 0) {
        snprintf(path, sizeof path, "%s/train-images-idx3-ubyte", data_dir());
        if (access(path, R_OK) != 0) {
            printf("SKIPPED: MNIST not found in %s (set AB_MNIST_DIR)\n", data_dir());
            return 77;
        }
    }
    int32_t order[STEPS * BATCH];
    ab_rng r;
    ab_rng_seed(&r, 7);
    for (int i = 0; i < STEPS * BATCH; i++) order[i] = (int32_t)ab_rng_below(&r, 60000);
    parity(AB_PREC_FP32, order);
    parity(AB_PREC_AMP, order);
    parity(AB_PREC_BF16, order);
    scaler_skip_and_halve(order);
    snprintf(path, sizeof path, "%s/data_batch_1.bin", cifar_dir());
    if (access(path, R_OK) == 0) {
        int32_t rorder[3 * 16];
        for (int i = 0; i < 3 * 16; i++) rorder[i] = (int32_t)ab_rng_below(&r, 512);
        parity_of(&RESNET, AB_PREC_FP32, rorder);
        parity_of(&RESNET, AB_PREC_AMP, rorder);
    } else {
        printf("SKIPPED (part): the ResNet parity needs CIFAR-10 in %s (set AB_CIFAR10_DIR)\n", cifar_dir());
    }
    const char *vocab = vocab_path();
    snprintf(path, sizeof path, "%s/train.tsv", sst2_dir());
    if (access(path, R_OK) == 0 && access(vocab, R_OK) == 0) {
        int32_t border[BERT_STEPS * BERT_BATCH];
        ab_rng br;
        ab_rng_seed(&br, 11);
        for (int i = 0; i < BERT_STEPS * BERT_BATCH; i++) border[i] = (int32_t)ab_rng_below(&br, BERT_ROWS);
        parity_of(&BERT, AB_PREC_FP32, border);
        parity_of(&BERT, AB_PREC_AMP, border);
    } else {
        printf("SKIPPED (part): the BERT parity needs %s and %s (set AB_GLUE_DIR to the folder holding SST-2/, "
               "AB_VOCAB to BERT's vocab.txt)\n", path, vocab);
    }
    if (failures) {
        fprintf(stderr, "test_cuda_train: %d failure(s)\n", failures);
        return 1;
    }
    printf("test_cuda_train: %s and CPU training agree; the loss scaler skips and halves on the %s\n",
           strcmp(gpu_device, "cuda") == 0 ? "GPU" : "stand-in", gpu_device);
    return 0;
}
