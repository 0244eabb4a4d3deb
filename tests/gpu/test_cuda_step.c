/* One training step of each real workload, on the GPU and on the CPU backend from the same
 * initial weights and the same batch: the first loss and the first weight update must agree. The
 * GPU check runs it right after the op tests, one case at a time, so that a cut run has already
 * said whether each workload x precision trains on the device.
 *   test_cuda_step [--precision fp32|amp|bf16] [MODEL ...]
 *     (default: mlp, resnet50-cifar, resnet50 and bert-base, each in fp32, amp and bf16; also
 *     resnet-tiny and bert-tiny, the reduced configurations the selfcheck runs)
 * Each case is the registry's recipe for the model (models/registry.c: optimizer, lr, weight decay,
 * clipping, BERT's dropout, whose masks both backends draw alike; the rate constant from the first
 * step, since a warm-up from 0 would move nothing), except that an AdamW recipe (BERT) steps with
 * plain SGD at rate 1 and no weight decay: AdamW's first update is lr * g / (|g| + eps), about
 * lr * sign(g), so a weight whose gradient lies within rounding noise of zero moves by +lr on one
 * correct backend and -lr on the other (the first H200 run: BERT-base's update NMSE 1.6e-3 under
 * fp16 and 1.9e-2 under bf16, as many sign flips as gradients under fp16's and bf16's rounding
 * noise predict), and the NMSE would count that noise. SGD makes the update the gradient itself;
 * the AdamW kernel is compared in test_backend_ops and over several steps in test_cuda_train. At a
 * small batch (MLP 64, ResNet 8 CIFAR-10 images, BERT 4 SST-2 rows of 64 positions) and loss
 * scale 1024; an amp step that overflows is skipped on both (which must agree) and the batch
 * stepped again at the halved scale, up to 8 times, so that the update compared is a real one.
 * Tolerances: test_cuda_train's (tests/tolerances.h) for the same optimizers, or AB_FLOOR_K times
 * the floor where that is larger: the same step on the CPU from weights one rounding apart
 * (tests/gpu/floor.h says why). Prints one line per case: "ok   step MODEL PREC: loss cpu L gpu L
 * (rel d, tol t), update nmse e (tol t) ...; floor (...): loss rel f, update nmse f; ..." or
 * "FAIL ...", and on a failure the parameter tensors whose updates differ most (name, NMSE, share
 * of the whole error), which says where in the model to look.
 * Data: AB_MNIST_DIR, AB_CIFAR10_DIR, AB_GLUE_DIR (holding SST-2/) and AB_VOCAB, else the build's
 * data root; a case whose data is missing says SKIPPED (part). Without a usable GPU: SKIPPED, exit
 * 77. AB_GPU_TEST_DEVICE=cpu puts a second CPU backend in the GPU's place (the selfcheck: it checks
 * the test, not CUDA). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "backend_cuda.h"
#include "floor.h"
#include "params.h"
#include "platform.h"
#include "timer.h"
#include "tolerances.h"
#include "train.h"
#include "workloads.h"

static int failures = 0, ran = 0;
static const char *gpu_device = "cuda";

typedef enum { KIND_MLP, KIND_RESNET, KIND_BERT } kind;
typedef struct {
    const char *model;
    kind k;
} step_case;

static const step_case CASES[] = {
    {"mlp", KIND_MLP}, {"resnet50-cifar", KIND_RESNET}, {"resnet50", KIND_RESNET}, {"bert-base", KIND_BERT},
    /* the reduced configurations, for the selfcheck and for a quick look */
    {"resnet-tiny", KIND_RESNET}, {"bert-tiny", KIND_BERT},
};
enum { N_CASES = (int)(sizeof CASES / sizeof CASES[0]), N_DEFAULT = 4 };

static const char *env_or(const char *var, const char *fallback) {
    const char *v = getenv(var);
    return v && *v ? v : fallback;
}

static const char *data_dir(kind k) {
    static char sst2[4096];
    if (k == KIND_MLP) return env_or("AB_MNIST_DIR", AB_DEFAULT_DATA_ROOT "/mnist");
    if (k == KIND_RESNET) return env_or("AB_CIFAR10_DIR", AB_DEFAULT_DATA_ROOT "/cifar10");
    snprintf(sst2, sizeof sst2, "%s/SST-2", env_or("AB_GLUE_DIR", AB_DEFAULT_DATA_ROOT "/glue"));
    return sst2;
}

static const char *vocab_path(void) { return env_or("AB_VOCAB", AB_DEFAULT_DATA_ROOT "/bert-base-uncased/vocab.txt"); }

/* the file whose absence skips the case */
static int have_data(kind k, char *path, size_t n) {
    const char *d = data_dir(k);
    if (k == KIND_MLP) {
        snprintf(path, n, "%s/train-images-idx3-ubyte.gz", d);
        if (access(path, R_OK) == 0) return 1;
        snprintf(path, n, "%s/train-images-idx3-ubyte", d);
    } else if (k == KIND_RESNET) {
        snprintf(path, n, "%s/data_batch_1.bin", d);
    } else {
        snprintf(path, n, "%s/train.tsv", d);
        if (access(path, R_OK) != 0) return 0;
        snprintf(path, n, "%s", vocab_path());
    }
    return access(path, R_OK) == 0;
}

enum { MLP_BATCH = 64, RESNET_BATCH = 8, BERT_BATCH = 4, BERT_SEQ = 64, SUBSET = 64, MAX_SKIPS = 8 };

static void config_for(ab_train_config *c, const char *device, ab_precision prec, const step_case *sc) {
    ab_train_config_defaults(c);
    c->workload = &ab_workloads;
    c->platform = &ab_platform;
    c->device = device;
    c->precision = prec;
    c->model = sc->model;
    const ab_recipe *r = ab_workload_recipe(sc->model);
    if (r) ab_recipe_apply(r, c);
    if (c->optimizer == AB_OPT_ADAMW) { /* the update is the gradient (the top of the file says why) */
        c->optimizer = AB_OPT_SGD;
        c->lr = 1.0f;
        c->momentum = 0.0f;
        c->weight_decay = 0.0f;
    }
    c->data_dir = data_dir(sc->k);
    /* the recipe's rate from the first step: ResNet's warm-up starts at 0, which would move nothing */
    c->warmup_steps = 0;
    c->lr_schedule = AB_LR_CONSTANT;
    c->quiet = 1;
    c->init_scale = 1024.0f;
    c->train_subset = sc->k == KIND_MLP ? 0 : SUBSET;
    c->test_subset = 16;
    c->batch_size = sc->k == KIND_MLP ? MLP_BATCH : sc->k == KIND_RESNET ? RESNET_BATCH : BERT_BATCH;
    if (sc->k == KIND_BERT) {
        c->max_seq_len = BERT_SEQ;
        c->vocab = vocab_path();
    }
}

static float *weights(ab_trainer *t) {
    const size_t n = ab_trainer_params(t)->n;
    float *w = malloc(n * sizeof(float));
    if (!w || ab_trainer_weights(t, w) != 0) {
        fprintf(stderr, "FAIL reading weights: %s\n", w ? ab_error() : "out of host memory");
        failures++;
        free(w);
        return NULL;
    }
    return w;
}

/* the tolerances test_cuda_train uses for the same optimizer and normalisation */
static void tolerances(kind k, ab_precision prec, double *update_nmse, double *loss_rel) {
    const int fp32 = prec == AB_PREC_FP32;
    if (k == KIND_MLP) {
        *update_nmse = fp32 ? AB_TOL_GPU_TRAIN_FP32_NMSE : AB_TOL_GPU_TRAIN_LOWP_NMSE;
        *loss_rel = fp32 ? AB_TOL_GPU_TRAIN_LOSS_FP32_REL : AB_TOL_GPU_TRAIN_LOSS_LOWP_REL;
    } else if (k == KIND_RESNET) {
        *update_nmse = fp32 ? AB_TOL_GPU_TRAIN_BN_FP32_NMSE : AB_TOL_GPU_TRAIN_BN_LOWP_NMSE;
        *loss_rel = fp32 ? AB_TOL_GPU_TRAIN_BN_LOSS_FP32_REL : AB_TOL_GPU_TRAIN_LOSS_LOWP_REL;
    } else {
        *update_nmse = fp32 ? AB_TOL_GPU_TRAIN_ADAMW_FP32_NMSE : AB_TOL_GPU_TRAIN_ADAMW_LOWP_NMSE;
        *loss_rel = fp32 ? AB_TOL_GPU_TRAIN_LOSS_FP32_REL : AB_TOL_GPU_TRAIN_LOSS_LOWP_REL;
    }
}

/* On a failure: the parameter tensors whose updates (gpu, and ref the CPU's) differ most, by
 * NMSE, with each one's share of the squared error over all weights. */
static void worst_tensors(const ab_params *p, const float *gpu, const double *ref) {
    double *e = calloc((size_t)p->n_specs, sizeof *e), total = 0.0;
    if (!e) return;
    for (size_t i = 0; i < p->n; i++) total += (gpu[i] - ref[i]) * (gpu[i] - ref[i]);
    for (int s = 0; s < p->n_specs; s++) {
        const ab_param_spec *sp = &p->specs[s];
        size_t w;
        e[s] = sp->region == AB_REGION_BUFFER ? -1.0 : ab_nmse(gpu + sp->offset, ref + sp->offset, sp->numel, &w);
    }
    for (int shown = 0; shown < 6; shown++) {
        int best = -1;
        for (int s = 0; s < p->n_specs; s++)
            if (e[s] >= 0.0 && (best < 0 || !(e[s] <= e[best]))) best = s;
        if (best < 0) break;
        const ab_param_spec *sp = &p->specs[best];
        double err = 0.0;
        for (size_t j = sp->offset; j < sp->offset + sp->numel; j++) err += (gpu[j] - ref[j]) * (gpu[j] - ref[j]);
        fprintf(stderr, "  tensor %-36s %9zu weights: update nmse %.3g, %.1f%% of the error\n", sp->name, sp->numel,
                e[best], total > 0.0 ? 100.0 * err / total : 0.0);
        e[best] = -1.0;
    }
    free(e);
}

/* one step on each backend, timed; 0 when both ran */
static int step_both(ab_trainer *ct, ab_trainer *gt, const int32_t *order, int batch, long step, ab_step_result *rc,
                     ab_step_result *rg, double *tc, double *tg) {
    double t0 = ab_now();
    if (ab_trainer_step(ct, order, batch, step, 1, rc) != 0) return -1;
    *tc = ab_now() - t0;
    t0 = ab_now();
    if (ab_trainer_step(gt, order, batch, step, 1, rg) != 0) return -1;
    *tg = ab_now() - t0;
    return 0;
}

static void run_case(const step_case *sc, ab_precision prec) {
    const char *pn = ab_precision_name(prec);
    char path[4096];
    if (!have_data(sc->k, path, sizeof path)) {
        printf("SKIPPED (part): step %s %s: %s not found (set AB_MNIST_DIR, AB_CIFAR10_DIR, AB_GLUE_DIR, AB_VOCAB)\n",
               sc->model, pn, path);
        return;
    }
    ab_train_config cc, gc;
    config_for(&cc, "cpu", prec, sc);
    config_for(&gc, gpu_device, prec, sc);
    ab_run_record crec, grec;
    memset(&crec, 0, sizeof crec);
    memset(&grec, 0, sizeof grec);
    ab_run_record prec_rec;
    memset(&prec_rec, 0, sizeof prec_rec);
    ab_trainer *ct = NULL, *gt = NULL, *pt = NULL;
    float *w0 = NULL, *w0g = NULL, *w0p = NULL, *wc = NULL, *wg = NULL, *wp = NULL;
    double *ref = NULL;
    ran++;
    if (ab_trainer_create(&cc, &crec, &ct) != 0 || ab_trainer_create(&gc, &grec, &gt) != 0) {
        fprintf(stderr, "FAIL step %s %s: creating the trainers: %s\n", sc->model, pn, ab_error());
        failures++;
        goto out;
    }
    const size_t n = ab_trainer_params(ct)->n;
    w0 = weights(ct);
    w0g = weights(gt);
    if (!w0 || !w0g) goto out;
    if (memcmp(w0, w0g, n * sizeof(float)) != 0) {
        fprintf(stderr, "FAIL step %s %s: the initial weights differ between the backends\n", sc->model, pn);
        failures++;
        goto out;
    }
    size_t n_moved = 0;
    if (ab_trainer_create(&cc, &prec_rec, &pt) != 0 || ab_floor_perturb(pt, &n_moved) != 0 || !(w0p = weights(pt))) {
        fprintf(stderr, "FAIL step %s %s: the floor's trainer: %s\n", sc->model, pn, ab_error());
        failures++;
        goto out;
    }
    int32_t order[MLP_BATCH];
    for (int i = 0; i < cc.batch_size; i++) order[i] = (int32_t)((i * 37) % SUBSET); /* a fixed batch */
    /* the same batch until the CPU applies a step: an amp step that overflows at this scale is
     * skipped on both (the scale halves), which must agree too */
    ab_step_result rc = {0}, rg = {0}, rp = {0};
    double tc = 0.0, tg = 0.0, tol_update, tol_loss, rel = 0.0, floor_rel = 0.0, loss_tol = 0.0;
    tolerances(sc->k, prec, &tol_update, &tol_loss);
    int bad = 0, skipped = 0, floor_ok = 1;
    for (long step = 0; step < MAX_SKIPS + 1 && !bad; step++) {
        if (step_both(ct, gt, order, cc.batch_size, step, &rc, &rg, &tc, &tg) != 0 ||
            ab_trainer_step(pt, order, cc.batch_size, step, 1, &rp) != 0) {
            fprintf(stderr, "FAIL step %s %s: %s\n", sc->model, pn, ab_error());
            failures++;
            goto out;
        }
        rel = fabs(rc.loss - rg.loss) / fmax(fabs(rc.loss), 1e-30);
        floor_rel = fabs(rc.loss - rp.loss) / fmax(fabs(rc.loss), 1e-30);
        /* a perturbed run that skips where the CPU steps (or not) gives no floor: the fixed
         * tolerances then stand alone */
        if (rp.applied != rc.applied) floor_ok = 0;
        loss_tol = floor_ok ? fmax(tol_loss, AB_FLOOR_K * floor_rel) : tol_loss;
        if (rc.applied != rg.applied) {
            fprintf(stderr, "FAIL step %s %s: step %ld applied on the cpu %d, on the gpu %d (loss scale %g)\n", sc->model,
                    pn, step + 1, rc.applied, rg.applied, (double)ab_trainer_scaler(ct)->scale);
            bad++;
        }
        if (!(rel <= loss_tol) || !isfinite(rg.loss)) {
            fprintf(stderr, "FAIL step %s %s: step %ld loss cpu %.9g gpu %.9g (relative difference %.3g > %.3g; the "
                    "floor %.3g)\n", sc->model, pn, step + 1, rc.loss, rg.loss, rel, loss_tol, floor_rel);
            bad++;
        }
        if (rc.applied) break;
        skipped++;
    }
    if (!bad && !rc.applied) {
        fprintf(stderr, "FAIL step %s %s: %d steps skipped on both, none applied\n", sc->model, pn, skipped);
        bad++;
    }
    wc = weights(ct);
    wg = weights(gt);
    wp = weights(pt);
    ref = malloc(n * sizeof(double));
    if (!wc || !wg || !wp || !ref) {
        failures++;
        goto out;
    }
    size_t moved = 0;
    for (size_t i = 0; i < n; i++) {
        ref[i] = (double)wc[i] - (double)w0[i];
        moved += ref[i] != 0.0;
        wg[i] -= w0g[i];
        wp[i] -= w0p[i];
    }
    size_t worst = 0;
    const double e = ab_nmse(wg, ref, n, &worst), floor_e = floor_ok ? ab_nmse(wp, ref, n, &(size_t){0}) : 0.0;
    const double update_tol = floor_ok && isfinite(floor_e) ? fmax(tol_update, AB_FLOOR_K * floor_e) : tol_update;
    if (moved == 0) {
        fprintf(stderr, "FAIL step %s %s: the CPU step moved no weight: the case compares nothing\n", sc->model, pn);
        bad++;
    }
    if (prec == AB_PREC_FP32 && floor_ok && !(floor_e > 0.0)) { /* half the weights an ulp apart must show */
        fprintf(stderr, "FAIL step %s %s: the floor's perturbation changed no update\n", sc->model, pn);
        bad++;
    }
    if (!(e <= update_tol)) {
        fprintf(stderr, "FAIL step %s %s: update nmse %.3g > %.3g; worst element %zu: gpu %.9g, cpu %.9g\n", sc->model,
                pn, e, update_tol, worst, (double)wg[worst], ref[worst]);
        worst_tensors(ab_trainer_params(ct), wg, ref);
        bad++;
    }
    failures += bad;
    char after[48] = "", fl[160];
    if (skipped) snprintf(after, sizeof after, " after %d skipped (overflow)", skipped);
    if (floor_ok)
        snprintf(fl, sizeof fl, "floor (CPU, %zu weights a rounding apart): loss rel %.2g, update nmse %.2g",
                 n_moved, floor_rel, floor_e);
    else
        snprintf(fl, sizeof fl, "no floor: the perturbed CPU run skipped a step differently");
    /* past 0.1 the floor's own update is mostly noise: the case then says so */
    const char *chaotic = update_tol >= 0.1 ? "; the update too chaotic here to tell a bug from rounding "
                                              "(test_backend_ops checks the ops at these shapes)" : "";
    printf("%s step %s %s: loss cpu %.6f gpu %.6f (rel %.2g, tol %.2g), update%s nmse %.2g (tol %.2g) over %zu "
           "weights; %s; cpu %.3f s gpu %.3f s%s\n",
           bad ? "FAIL" : "ok  ", sc->model, pn, rc.loss, rg.loss, rel, loss_tol, after, e, update_tol, n, fl, tc, tg,
           chaotic);
    fflush(stdout);
out:
    free(w0);
    free(w0g);
    free(w0p);
    free(wc);
    free(wg);
    free(wp);
    free(ref);
    if (ct) ab_trainer_destroy(ct);
    if (gt) ab_trainer_destroy(gt);
    if (pt) ab_trainer_destroy(pt);
    ab_run_record_free(&prec_rec);
    ab_run_record_free(&crec);
    ab_run_record_free(&grec);
}

int main(int argc, char **argv) {
    const char *stand_in = getenv("AB_GPU_TEST_DEVICE");
    if (stand_in && strcmp(stand_in, "cpu") == 0) {
        gpu_device = "cpu";
        printf("SELF-CHECK: the CPU backend stands in for the GPU (AB_GPU_TEST_DEVICE=cpu)\n");
    }
    /* [--precision P] [MODEL ...] */
    const step_case *chosen[N_CASES];
    int n_chosen = 0, one_prec = 0;
    ab_precision only_prec = AB_PREC_FP32;
    for (int a = 1; a < argc; a++) {
        if (strcmp(argv[a], "--precision") == 0 && a + 1 < argc) {
            if (ab_precision_parse(argv[++a], &only_prec) != 0) {
                fprintf(stderr, "test_cuda_step: unknown precision '%s' (fp32, amp, bf16)\n", argv[a]);
                return 2;
            }
            one_prec = 1;
            continue;
        }
        const step_case *sc = NULL;
        for (int i = 0; i < N_CASES; i++)
            if (strcmp(argv[a], CASES[i].model) == 0) sc = &CASES[i];
        if (!sc || n_chosen == N_CASES) {
            fprintf(stderr, "usage: test_cuda_step [--precision fp32|amp|bf16] [MODEL ...] (MODEL: mlp, resnet50-cifar, "
                            "resnet50, bert-base, resnet-tiny, bert-tiny); '%s' is neither\n", argv[a]);
            return 2;
        }
        chosen[n_chosen++] = sc;
    }
    if (n_chosen == 0)
        for (int i = 0; i < N_DEFAULT; i++) chosen[n_chosen++] = &CASES[i];
    const char *why = NULL;
    if (strcmp(gpu_device, "cuda") == 0 && ab_cuda_device_count(&why) == 0) {
        printf("SKIPPED: %s\n", why);
        return 77;
    }
    const ab_precision precs[3] = {AB_PREC_FP32, AB_PREC_AMP, AB_PREC_BF16};
    for (int i = 0; i < n_chosen; i++)
        for (int p = 0; p < 3; p++)
            if (!one_prec || precs[p] == only_prec) run_case(chosen[i], precs[p]);
    if (failures) {
        fprintf(stderr, "test_cuda_step: %d failure(s)\n", failures);
        return 1;
    }
    if (ran == 0) {
        printf("SKIPPED: no case had its data\n");
        return 77;
    }
    printf("test_cuda_step: %d case(s): the first loss and update on the %s agree with the CPU's\n", ran,
           strcmp(gpu_device, "cuda") == 0 ? "GPU" : "stand-in");
    return 0;
}
