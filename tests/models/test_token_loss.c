/* A per-token loss through the trainer as it is: a workload of this test's own whose samples each
 * carry R labels (a sequence of R tokens, each with a class of its own) and whose model scores R
 * logits rows a sample (a linear classifier applied to every token). In fp32 and amp:
 *   - the first step's loss is the mean cross-entropy over every sample's every token, worked out
 *     in double from the initial weights, and its SGD update is the gradient of that mean;
 *   - the test set's loss and accuracy are over its N x R tokens (double reference again);
 *   - a few dozen steps learn the tokens' rule well above chance;
 * two micro-batches of 8 accumulate to the step of one batch of 16; a whole run (ab_train_run)
 * records one prediction a token, and one killed after its first epoch's checkpoint resumes to
 * the same weights, losses and predictions; and a model scoring R rows a sample beside a data set
 * giving one label a sample is refused with one line. The rule: a token's class is the argmax of A x for a fixed random
 * A, so a linear model can learn it. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "half.h"
#include "layers.h"
#include "model.h"
#include "platform.h"
#include "record.h"
#include "rng.h"
#include "tolerances.h"
#include "train.h"
#include "train_checkpoint.h"

enum { R = 5, D = 6, C = 4, N_TRAIN = 256, N_TEST = 96, BATCH = 16 };

static int failures = 0;

/* ---- the data: N samples of R tokens of D features, each token labelled ---- */

typedef struct {
    int n;
    float *x;    /* (n, R, D) */
    int32_t *y;  /* (n, R) */
    void *stage; /* host staging for one batch of x in the compute type */
    int32_t *ys; /* and of its labels */
} toy_set;

static double A[C][D];            /* the rule */
static int labels_per_sample = R; /* what the data sets say (the refusal case sets 1) */

static int rule(const float *x) {
    int best = 0;
    double bv = -INFINITY;
    for (int c = 0; c < C; c++) {
        double v = 0;
        for (int d = 0; d < D; d++) v += A[c][d] * x[d];
        if (v > bv) bv = v, best = c;
    }
    return best;
}

static size_t toy_batch_bytes(const ab_dataset *ds, int B, ab_dtype t) {
    (void)ds;
    return (size_t)B * R * D * ab_dtype_size(t);
}

static int toy_fill(ab_dataset *ds, const int32_t *idx, int B, uint64_t aug_seed, ab_dtype t, void *x,
                    int32_t *labels) {
    (void)aug_seed;
    toy_set *s = ds->impl;
    for (int b = 0; b < B; b++)
        for (int k = 0; k < R * D; k++) ab_store(s->stage, (size_t)b * R * D + k, t, s->x[(size_t)idx[b] * R * D + k]);
    for (int b = 0; b < B; b++) memcpy(s->ys + (size_t)b * R, s->y + (size_t)idx[b] * R, R * sizeof(int32_t));
    AB_TRY(ds->be->ops->upload(ds->be, x, s->stage, toy_batch_bytes(ds, B, t)));
    return ds->be->ops->upload(ds->be, labels, s->ys, (size_t)B * labels_per_sample * sizeof(int32_t));
}

static const char *toy_describe(const ab_dataset *ds) {
    (void)ds;
    return "toy token sequences";
}

static void toy_destroy(ab_dataset *ds) {
    toy_set *s = ds->impl;
    free(s->x), free(s->y), free(s->stage), free(s->ys), free(s), free(ds);
}

static const ab_dataset_ops toy_set_ops = {
    .batch_bytes = toy_batch_bytes, .fill = toy_fill, .describe = toy_describe, .destroy = toy_destroy};

static int toy_set_create(ab_backend *be, int n, uint64_t seed, ab_dataset **out) {
    ab_dataset *ds = calloc(1, sizeof *ds);
    toy_set *s = calloc(1, sizeof *s);
    if (!ds || !s) return ab_errorf("out of memory");
    s->n = n;
    s->x = malloc((size_t)n * R * D * sizeof(float));
    s->y = malloc((size_t)n * R * sizeof(int32_t));
    s->stage = malloc((size_t)N_TRAIN * R * D * sizeof(float));
    s->ys = malloc((size_t)N_TRAIN * R * sizeof(int32_t));
    if (!s->x || !s->y || !s->stage || !s->ys) return ab_errorf("out of memory");
    ab_rng r;
    ab_rng_seed(&r, seed);
    for (int i = 0; i < n * R; i++) {
        for (int d = 0; d < D; d++) s->x[(size_t)i * D + d] = ab_rng_uniform_range(&r, -1.0f, 1.0f);
        s->y[i] = rule(s->x + (size_t)i * D);
    }
    /* channels-last images of H = R rows, W = 1, C = D: a batch is (B * R, D) token rows */
    *ds = (ab_dataset){
        .ops = &toy_set_ops,
        .be = be,
        .n = n,
        .metric = "accuracy",
        .impl = s,
        .info = {.kind = AB_SAMPLE_IMAGE, .C = D, .H = R, .W = 1, .n_classes = C, .targets = labels_per_sample}};
    *out = ds;
    return 0;
}

/* ---- the model: logits (B * R, C) = x (B * R, D) W^T + b ---- */

typedef struct {
    ab_param_spec specs[2];
    ab_linear fc;
} toy_model;

static toy_model *last_model; /* the weights' offsets, for the references */

static int toy_forward(ab_model *m, const ab_params *p, const void *x, int B, const ab_pass *pass) {
    (void)pass;
    toy_model *s = m->impl;
    return ab_linear_forward(p, &s->fc, B * R, x, m->logits, AB_EPI_NONE);
}

static int toy_backward(ab_model *m, const ab_params *p, const ab_grad_sink *g, const void *x, const void *dlogits,
                        int B) {
    toy_model *s = m->impl;
    return ab_linear_backward(p, g, &s->fc, B * R, x, dlogits, NULL);
}

static int toy_bind(ab_model *m, const ab_params *p) {
    toy_model *s = m->impl;
    ab_linear_bind(&s->fc, &s->specs[0], &s->specs[1]);
    ab_arena_init(&m->arena, p->be);
    ab_arena_add(&m->arena, AB_MEM_ACTIVATIONS, (size_t)m->max_batch * R * C * ab_dtype_size(p->compute_type),
                 &m->logits, "logits");
    return ab_arena_alloc(&m->arena);
}

static void toy_model_destroy(ab_model *m) {
    if (m->arena.be) ab_arena_free(&m->arena);
    free(m->impl);
    free(m);
}

static const ab_model_ops toy_model_ops = {
    .name = "toy", .forward = toy_forward, .backward = toy_backward, .bind = toy_bind, .destroy = toy_model_destroy};

static int toy_create_model(const ab_train_config *cfg, const ab_sample_info *si, const ab_model_split *split,
                            ab_model **out) {
    (void)split;
    ab_model *m = calloc(1, sizeof *m);
    toy_model *s = calloc(1, sizeof *s);
    if (!m || !s) return ab_errorf("out of memory");
    ab_linear_specs(&s->specs[0], &s->specs[1], "fc.weight", "fc.bias", si->C, si->n_classes);
    *m = (ab_model){.ops = &toy_model_ops,
                    .specs = s->specs,
                    .n_specs = 2,
                    .n_classes = si->n_classes,
                    .max_batch = cfg->batch_size,
                    .targets = R,
                    .macs_per_sample = (double)R * D * C,
                    .impl = s};
    last_model = s;
    *out = m;
    return 0;
}

static int toy_open_data(const ab_train_config *cfg, ab_backend *be, ab_dataset **train, ab_dataset **test) {
    (void)cfg;
    AB_TRY(toy_set_create(be, N_TRAIN, 11, train));
    return toy_set_create(be, N_TEST, 12, test);
}

static const ab_workload_ops toy_workload = {.open_data = toy_open_data, .create_model = toy_create_model};

/* ---- references in double ---- */

/* mean cross-entropy over the tokens of samples idx[0 .. n) of set s under weights w; its
 * gradient (W then b, C*D + C values) into g unless NULL; *hits = tokens whose argmax is right */
static double ref_loss(const toy_set *s, const int32_t *idx, int n, const float *w, double *g, int *hits) {
    const float *W = w + last_model->specs[0].offset, *b = w + last_model->specs[1].offset;
    double loss = 0;
    if (g) memset(g, 0, (C * D + C) * sizeof *g);
    if (hits) *hits = 0;
    const double rows = (double)n * R;
    for (int i = 0; i < n; i++)
        for (int r = 0; r < R; r++) {
            const float *x = s->x + ((size_t)idx[i] * R + r) * D;
            const int y = s->y[(size_t)idx[i] * R + r];
            double z[C], mx = -INFINITY, sum = 0;
            int am = 0;
            for (int c = 0; c < C; c++) {
                z[c] = b[c];
                for (int d = 0; d < D; d++) z[c] += (double)W[c * D + d] * x[d];
                if (z[c] > mx) mx = z[c], am = c;
            }
            for (int c = 0; c < C; c++) sum += exp(z[c] - mx);
            loss += log(sum) + mx - z[y];
            if (hits) *hits += am == y;
            if (g)
                for (int c = 0; c < C; c++) {
                    const double dz = (exp(z[c] - mx) / sum - (c == y)) / rows;
                    for (int d = 0; d < D; d++) g[c * D + d] += dz * x[d];
                    g[C * D + c] += dz;
                }
        }
    return loss / rows;
}

static ab_train_config config(ab_precision prec) {
    ab_train_config c;
    ab_train_config_defaults(&c);
    c.workload = &toy_workload;
    c.platform = &ab_platform;
    c.model = "toy";
    c.dataset = "toy";
    c.precision = prec;
    c.quiet = 1;
    c.batch_size = BATCH;
    c.optimizer = AB_OPT_SGD;
    c.lr = 0.5f;
    c.momentum = 0.0f;
    c.weight_decay = 0.0f;
    c.threads = 1;
    c.comm = "self";
    c.init_scale = 1024.0f;
    return c;
}

static void run(ab_precision prec) {
    const char *name = ab_precision_name(prec);
    /* fp32: the GEMMs' fp32 sums against double; amp: fp16 inputs and logits (2^-11 each) */
    const double tol = prec == AB_PREC_FP32 ? 1e-5 : 4e-3;
    ab_train_config c = config(prec);
    ab_run_record rec;
    memset(&rec, 0, sizeof rec);
    ab_trainer *t = NULL;
    if (ab_trainer_create(&c, &rec, &t) != 0) {
        fprintf(stderr, "FAIL %s: creating the trainer: %s\n", name, ab_error());
        failures++;
        return;
    }
    const size_t np = ab_trainer_params(t)->n;
    AB_CHECK(np == C * D + C, "%s: %zu parameters, expected %d", name, np, C * D + C);
    float *w0 = malloc(np * sizeof(float)), *w1 = malloc(np * sizeof(float));
    int32_t order[N_TRAIN];
    for (int i = 0; i < N_TRAIN; i++) order[i] = (i * 37) % N_TRAIN; /* 37 is prime to 256: a permutation */
    ab_dataset *train = NULL;
    toy_set train_ref = {0};
    /* the training set again, host side, for the references (same seed as toy_open_data's) */
    AB_CHECK(toy_set_create(NULL, N_TRAIN, 11, &train) == 0, "%s", ab_error());
    train_ref = *(toy_set *)train->impl;

    /* step 1: the loss, and the update lr * gradient of the mean over 16 x 5 tokens */
    AB_CHECK(ab_trainer_weights(t, w0) == 0, "%s", ab_error());
    double g[C * D + C];
    const double want = ref_loss(&train_ref, order, BATCH, w0, g, NULL);
    ab_step_result r;
    AB_CHECK(ab_trainer_step(t, order, BATCH, 0, 1, &r) == 0, "%s: step: %s", name, ab_error());
    const double first = r.loss;
    AB_CHECK(r.applied, "%s: the first step was skipped", name);
    AB_CHECK(fabs(r.loss - want) <= tol * fabs(want),
             "%s: step loss %.9g, the per-token mean is %.9g (sum / samples %.9g)", name, r.loss, want, want * R);
    AB_CHECK(ab_trainer_weights(t, w1) == 0, "%s", ab_error());
    double worst = 0, gmax = 0;
    const size_t ow = last_model->specs[0].offset, ob = last_model->specs[1].offset;
    for (int k = 0; k < C * D + C; k++) {
        const size_t at = k < C * D ? ow + k : ob + (k - C * D);
        const double step = (double)w0[at] - w1[at], expect = c.lr * g[k];
        worst = fmax(worst, fabs(step - expect));
        gmax = fmax(gmax, fabs(expect));
    }
    AB_CHECK(worst <= 10 * tol * gmax + 1e-7,
             "%s: the update differs from lr x the per-token gradient by %.3g (largest %.3g)", name, worst, gmax);

    /* the test set, per token */
    double loss, acc;
    AB_CHECK(ab_trainer_evaluate(t, &loss, &acc) == 0, "%s: evaluate: %s", name, ab_error());
    ab_dataset *test = NULL;
    AB_CHECK(toy_set_create(NULL, N_TEST, 12, &test) == 0, "%s", ab_error());
    int32_t all[N_TEST];
    for (int i = 0; i < N_TEST; i++) all[i] = i;
    int hits;
    const double tl = ref_loss(test->impl, all, N_TEST, w1, NULL, &hits);
    const double ta = 100.0 * hits / (N_TEST * R);
    AB_CHECK(fabs(loss - tl) <= tol * fabs(tl), "%s: test loss %.9g, per-token reference %.9g", name, loss, tl);
    /* argmax may flip on a near tie between the GEMM's sum and the double one: two tokens' worth */
    AB_CHECK(fabs(acc - ta) <= 200.0 / (N_TEST * R), "%s: test accuracy %.4f%%, per-token reference %.4f%%", name, acc,
             ta);

    /* a few epochs learn the rule */
    for (int e = 0; e < 6; e++)
        for (int s = 0; s < N_TRAIN / BATCH; s++)
            AB_CHECK(ab_trainer_step(t, order + s * BATCH, BATCH, 1 + e * 16 + s, 1, &r) == 0, "%s", ab_error());
    AB_CHECK(ab_trainer_evaluate(t, &loss, &acc) == 0, "%s: evaluate: %s", name, ab_error());
    AB_CHECK(acc >= 80.0, "%s: %.1f%% of the test tokens after 6 epochs (chance 25%%)", name, acc);
    printf("ok   %s: step loss %.6f = the mean over %d x %d tokens (%.6f); update = lr x its gradient (off by %.2g); "
           "test %.2f%% of %d tokens after 6 epochs\n",
           name, first, BATCH, R, want, worst, acc, N_TEST * R);
    toy_destroy(test);
    toy_destroy(train);
    free(w0), free(w1);
    ab_trainer_destroy(t);
    ab_run_record_free(&rec);
}

/* one step of 16 samples as two micro-batches of 8: the loss and the update of one batch of 16 */
static void accumulation(void) {
    float *w[2] = {NULL, NULL};
    double loss[2] = {0, 0};
    int32_t order[BATCH];
    for (int i = 0; i < BATCH; i++) order[i] = (i * 37) % N_TRAIN;
    for (int k = 0; k < 2; k++) {
        ab_train_config c = config(AB_PREC_FP32);
        if (k) c.batch_size = BATCH / 2, c.accum_steps = 2;
        ab_run_record rec;
        memset(&rec, 0, sizeof rec);
        ab_trainer *t = NULL;
        ab_step_result r = {0};
        if (ab_trainer_create(&c, &rec, &t) != 0 || ab_trainer_step(t, order, BATCH, 0, 1, &r) != 0 ||
            !(w[k] = malloc(ab_trainer_params(t)->n * sizeof(float))) || ab_trainer_weights(t, w[k]) != 0) {
            fprintf(stderr, "FAIL accumulation: %s\n", ab_error());
            failures++;
        }
        loss[k] = r.loss;
        if (t) ab_trainer_destroy(t);
        ab_run_record_free(&rec);
    }
    double worst = 0;
    for (int i = 0; w[0] && w[1] && i < C * D + C; i++) worst = fmax(worst, fabs((double)w[0][i] - w[1][i]));
    AB_CHECK(fabs(loss[0] - loss[1]) <= 1e-6 * fabs(loss[0]) && worst <= 1e-6,
             "2 x 8 accumulated: loss %.9g against %.9g for one batch of 16, weights %.3g apart", loss[1], loss[0],
             worst);
    printf("ok   2 micro-batches of 8 x %d tokens: loss %.6f and weights (%.2g apart) as one batch of 16\n", R, loss[1],
           worst);
    free(w[0]), free(w[1]);
}

/* a whole run: the record holds one prediction a token; one resumed from its first epoch's
 * checkpoint ends where a run never stopped does */
static void whole_run(void) {
    char dir[] = "/tmp/ab_token_loss_XXXXXX";
    if (!mkdtemp(dir)) {
        fprintf(stderr, "FAIL mkdtemp\n");
        failures++;
        return;
    }
    char ck[600], out[2][600];
    snprintf(ck, sizeof ck, "%s/ck", dir);
    ab_run_record rec[2];
    for (int k = 0; k < 2; k++) {
        snprintf(out[k], sizeof out[k], "%s/run%d.json", dir, k);
        ab_train_config c = config(AB_PREC_AMP);
        c.epochs = 2;
        c.out_path = out[k];
        c.record = &ab_record_json;
        c.checkpoints = &ab_checkpoint_store;
        if (k == 1) { /* the whole run with checkpoints, its last one (the end) removed: resumed
                       * from the end of epoch 1, it runs epoch 2 again */
            c.checkpoint_dir = ck;
            memset(&rec[k], 0, sizeof rec[k]);
            AB_CHECK(ab_train_run(&c, &rec[k]) == 0, "the run with checkpoints: %s", ab_error());
            ab_run_record_free(&rec[k]);
            char cmd[800];
            snprintf(cmd, sizeof cmd,
                     "cd '%s' && rm -rf \"$(ls -d ckpt-* | sort | tail -1)\" && ls -d ckpt-* > /dev/null", ck);
            AB_CHECK(system(cmd) == 0, "removing the last checkpoint of %s", ck);
            c.resume = 1;
        }
        memset(&rec[k], 0, sizeof rec[k]);
        AB_CHECK(ab_train_run(&c, &rec[k]) == 0, "run %d: %s", k, ab_error());
    }
    AB_CHECK(rec[1].n_resumes == 1 && rec[1].resumed_at && rec[1].resumed_at[0] == N_TRAIN / BATCH,
             "the second run resumed %d times (from step %ld), expected once, from step %d", rec[1].n_resumes,
             rec[1].n_resumes ? rec[1].resumed_at[0] : -1L, N_TRAIN / BATCH);
    AB_CHECK(rec[0].n_test_pred == N_TEST * R && rec[1].n_test_pred == N_TEST * R,
             "the records hold %d and %d predictions, expected one a token: %d", rec[0].n_test_pred, rec[1].n_test_pred,
             N_TEST * R);
    const int n = rec[0].n_test_pred < rec[1].n_test_pred ? rec[0].n_test_pred : rec[1].n_test_pred;
    AB_CHECK(rec[0].test_pred && rec[1].test_pred &&
                 memcmp(rec[0].test_pred, rec[1].test_pred, n * sizeof(int32_t)) == 0,
             "the resumed run predicts other classes than the unstopped one");
    AB_CHECK(rec[0].n_epochs == 2 && rec[1].n_epochs == 2 && rec[0].epochs[1].test_loss == rec[1].epochs[1].test_loss &&
                 rec[0].epochs[1].test_accuracy == rec[1].epochs[1].test_accuracy,
             "resumed: test loss %.9g, accuracy %.4f; unstopped: %.9g, %.4f", rec[1].epochs[1].test_loss,
             rec[1].epochs[1].test_accuracy, rec[0].epochs[1].test_loss, rec[0].epochs[1].test_accuracy);
    printf("ok   whole runs: %d predictions a record (one a token); resumed from epoch 1's checkpoint: the same test "
           "loss %.6f and predictions\n",
           rec[1].n_test_pred, rec[1].epochs[1].test_loss);
    for (int k = 0; k < 2; k++) ab_run_record_free(&rec[k]);
    char cmd[700];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd) != 0) fprintf(stderr, "note: could not remove %s\n", dir);
}

/* a model of R rows a sample beside one label a sample: refused, one line naming both */
static void mismatch(void) {
    labels_per_sample = 1;
    ab_train_config c = config(AB_PREC_FP32);
    ab_run_record rec;
    memset(&rec, 0, sizeof rec);
    ab_trainer *t = NULL;
    const int rc = ab_trainer_create(&c, &rec, &t);
    AB_CHECK(rc != 0, "a model of %d rows a sample trained on one label a sample", R);
    if (rc != 0) {
        AB_CHECK(strstr(ab_error(), "5 logits rows a sample") && strstr(ab_error(), "1 labels a sample") &&
                     !strchr(ab_error(), '\n'),
                 "the refusal does not name both counts in one line: '%s'", ab_error());
        printf("ok   refused: %s\n", ab_error());
    } else {
        ab_trainer_destroy(t);
    }
    ab_run_record_free(&rec);
    labels_per_sample = R;
}

int main(void) {
    ab_rng r;
    ab_rng_seed(&r, 7);
    for (int c = 0; c < C; c++)
        for (int d = 0; d < D; d++) A[c][d] = ab_rng_normal(&r);
    run(AB_PREC_FP32);
    run(AB_PREC_AMP);
    accumulation();
    whole_run();
    mismatch();
    if (failures) fprintf(stderr, "test_token_loss: %d failure(s)\n", failures);
    return failures ? 1 : 0;
}
