/* The MLP trained a few steps on the GPU and on the CPU from the same initial weights and the same
 * batches ends with the same weights (fp32 and amp, within tests/tolerances.h), and the loss
 * scaler skips and halves on the GPU: a gradient made +inf at one step leaves the weights as they
 * were, halves the scale, records one overflow event, and training goes on. The reduced ResNet
 * (cuDNN convolutions, batch norm, shortcuts) on CIFAR-10 the same way, compared on the weight
 * updates, when the CIFAR-10 files are there (AB_CIFAR10_DIR, else the build's data root).
 * Needs MNIST (AB_MNIST_DIR, else the build's default data root). Without a usable GPU, or
 * without the data, it prints SKIPPED and exits 77 (CTest SKIP_RETURN_CODE). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "device.h"
#include "params.h"
#include "rng.h"
#include "tolerances.h"
#include "models.h"
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

/* a workload to compare: the MLP on MNIST, or the reduced ResNet on CIFAR-10 */
typedef struct {
    const char *model, *dataset;
    int batch, steps;
    double tol_fp32, tol_lowp, loss_fp32, loss_lowp; /* weights (MLP) or weight updates (ResNet) */
    int updates;
} workload;

static const workload MLP = {"mlp", "mnist", BATCH, STEPS, AB_TOL_GPU_TRAIN_FP32_NMSE, AB_TOL_GPU_TRAIN_LOWP_NMSE,
                             AB_TOL_GPU_TRAIN_LOSS_FP32_REL, AB_TOL_GPU_TRAIN_LOSS_LOWP_REL, 0};
static const workload RESNET = {"resnet-tiny", "cifar10", 16, 3, AB_TOL_GPU_TRAIN_BN_FP32_NMSE,
                                AB_TOL_GPU_TRAIN_BN_LOWP_NMSE, AB_TOL_GPU_TRAIN_BN_LOSS_FP32_REL,
                                AB_TOL_GPU_TRAIN_LOSS_LOWP_REL, 1};

static void config_for(ab_train_config *c, const char *device, ab_precision prec, const workload *w) {
    ab_train_config_defaults(c);
    c->workload = &ab_workloads;
    c->device = device;
    c->precision = prec;
    c->model = w->model;
    c->dataset = w->dataset;
    c->data_dir = strcmp(w->dataset, "mnist") == 0 ? data_dir() : cifar_dir();
    c->quiet = 1;
    c->batch_size = w->batch;
    if (w->updates) { /* the ResNet recipe, on a subset */
        c->lr = 0.05f;
        c->momentum = 0.9f;
        c->weight_decay = 5e-4f;
        c->train_subset = 512;
        c->test_subset = 64;
        c->init_scale = 1024.0f;
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

/* steps 0..w->steps-1 over order on both devices; compares losses step by step and the weights
 * (or, with batch norm, whose gradients are ill-conditioned, the weight updates) at the end */
static void parity_of(const workload *wl, ab_precision prec, const int32_t *order) {
    ab_train_config cc, gc;
    config_for(&cc, "cpu", prec, wl);
    config_for(&gc, gpu_device, prec, wl);
    ab_run_record crec, grec;
    ab_trainer *ct = NULL, *gt = NULL;
    float *w0 = NULL;
    if (ab_trainer_create(&cc, &crec, &ct) != 0 || ab_trainer_create(&gc, &grec, &gt) != 0) {
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
    for (int s = 0; s < wl->steps; s++) {
        double lc = 0, lg = 0;
        int tc = 0, tg = 0;
        if (ab_trainer_step(ct, order + s * wl->batch, wl->batch, s, 1, &lc, &tc) != 0 ||
            ab_trainer_step(gt, order + s * wl->batch, wl->batch, s, 1, &lg, &tg) != 0) {
            fprintf(stderr, "FAIL %s %s step %d: %s\n", wl->model, ab_precision_name(prec), s, ab_error());
            failures++;
            goto out;
        }
        AB_CHECK(tc == tg, "%s %s step %d: cpu took=%d, gpu took=%d", wl->model, ab_precision_name(prec), s, tc, tg);
        const double ltol = prec == AB_PREC_FP32 ? wl->loss_fp32 : wl->loss_lowp;
        AB_CHECK(fabs(lc - lg) <= ltol * fabs(lc), "%s %s step %d: loss cpu %.9g gpu %.9g", wl->model,
                 ab_precision_name(prec), s, lc, lg);
    }
    {
        float *wc = weights(ct), *wg = weights(gt);
        double *ref = malloc(n * sizeof(double));
        for (size_t i = 0; i < n; i++) {
            ref[i] = wl->updates ? (double)wc[i] - w0[i] : wc[i];
            if (wl->updates) wg[i] -= w0[i];
        }
        char what[96];
        snprintf(what, sizeof what, "%s %s after %d steps (%s)", wl->model, wl->updates ? "weight updates" : "weights",
                 wl->steps, ab_precision_name(prec));
        const int bad = ab_check_nmse(what, wg, ref, n, prec == AB_PREC_FP32 ? wl->tol_fp32 : wl->tol_lowp);
        failures += bad;
        if (!bad) printf("ok   %s\n", what);
        free(ref);
        free(wc);
        free(wg);
    }
out:
    free(w0);
    if (ct) ab_trainer_destroy(ct);
    if (gt) ab_trainer_destroy(gt);
    ab_run_record_free(&crec);
    ab_run_record_free(&grec);
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
    const float scale0 = rec.scaler.scale;
    for (int s = 0; s < STEPS; s++) {
        float *before = weights(t);
        double loss = 0;
        int took = -1;
        if (ab_trainer_step(t, order + s * BATCH, BATCH, s, 1, &loss, &took) != 0) {
            fprintf(stderr, "FAIL amp step %d: %s\n", s, ab_error());
            failures++;
            free(before);
            break;
        }
        float *after = weights(t);
        const int same = memcmp(before, after, n * sizeof(float)) == 0;
        if (s == inject) {
            AB_CHECK(took == 0, "step %d with an injected inf was taken", s);
            AB_CHECK(same, "step %d was skipped but the weights changed", s);
            AB_CHECK(rec.scaler.scale == scale0 * c.backoff_factor, "scale after the overflow: %g, expected %g",
                     (double)rec.scaler.scale, (double)(scale0 * c.backoff_factor));
        } else {
            AB_CHECK(took == 1, "clean step %d was skipped (loss %g, scale %g)", s, loss, (double)rec.scaler.scale);
            AB_CHECK(!same, "clean step %d left the weights as they were", s);
        }
        AB_CHECK(isfinite(loss), "step %d loss %g", s, loss);
        free(before);
        free(after);
    }
    AB_CHECK(rec.scaler.skipped == 1 && rec.scaler.n_events == 1, "skipped %ld, overflow events %zu (expected 1, 1)",
             rec.scaler.skipped, rec.scaler.n_events);
    if (rec.scaler.n_events == 1)
        AB_CHECK(rec.scaler.events[0].step == inject && rec.scaler.events[0].scale_before == scale0 &&
                     rec.scaler.events[0].scale_after == scale0 * c.backoff_factor,
                 "overflow event: step %ld, %g -> %g", rec.scaler.events[0].step,
                 (double)rec.scaler.events[0].scale_before, (double)rec.scaler.events[0].scale_after);
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
    if (failures) {
        fprintf(stderr, "test_cuda_train: %d failure(s)\n", failures);
        return 1;
    }
    printf("test_cuda_train: %s and CPU training agree; the loss scaler skips and halves on the %s\n",
           strcmp(gpu_device, "cuda") == 0 ? "GPU" : "stand-in", gpu_device);
    return 0;
}
