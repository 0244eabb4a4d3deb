/* Tensor parallelism against one rank (label mpi; mpirun -np 2 and -np 4). For each workload (the
 * MLP on a seeded random data set, bert-tiny on SST-2 without dropout), each precision (fp32, amp)
 * and each tensor group size T dividing the world (T = 2, and with 4 ranks T = 4 and the grid
 * data 2 x tensor 2; bert-tiny's 2 heads refuse T = 4), from the same weights and samples:
 *   1. step 1: the loss, and every rank's gradient block of every tensor against the matching
 *      slice of the one-rank gradient (max abs error over the tensor's largest value);
 *   2. 20 steps of ab_train_run: the loss curve step by step and the test loss against the
 *      one-rank run's, the weights file --save writes against the one-rank run's file (the same
 *      names and whole shapes), and that file loaded into a one-rank run (and the one-rank run's
 *      file into the blocks, which step 1 already does through --init-from).
 * Each rank runs the one-rank reference itself (comm self), so every rank checks its own blocks.
 * 3. bert-tiny with dropout: the tensors kept whole (layer norms, pooler, classifier) stay bit
 *    for bit the same on every rank of a tensor group over 10 steps, as they do only when every
 *    rank draws the same masks on the whole activations.
 * The tolerances are stated where they are checked; a wrong split (a block taken from the wrong
 * rows, a bias added on every rank, a missing all-reduce) moves the errors to O(1). */
#include <dirent.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "checkpoint.h"
#include "comm_engines.h"
#include "dp_util.h"
#include "tolerances.h"

static int failures = 0;
static char data_dir[256], tmp_dir[256];
static int bert; /* the workload: 0 the MLP, 1 bert-tiny */
static float dropout = 0.0f;

enum { HIDDEN = 48, BATCH = 16, STEPS = 20 };

/* tp ranks in tensor groups, or (tp 1, comm self) the one-rank reference of a world with data
 * groups of dp: the same micro-batches of BATCH, accumulated, so that under amp the same fp16
 * gradients are summed either way */
static ab_train_config config(ab_precision prec, int dp, int tp, const char *comm) {
    ab_train_config c = dp_config(data_dir, prec, BATCH, HIDDEN, comm);
    if (bert) { /* SST-2 from the shared data, short sequences, AdamW as fine-tuning does */
        c.model = "bert-tiny";
        c.dataset = "sst2";
        c.data_dir = NULL;
        c.max_seq_len = 32;
        c.train_subset = 640;
        c.test_subset = 64;
        c.optimizer = AB_OPT_ADAMW;
        c.lr = 1e-3f;
        c.momentum = 0.0f;
        c.dropout = dropout;
    }
    c.accum_steps = tp > 1 ? 1 : dp;
    c.tensor_parallel = tp;
    c.init_scale = 256.0f;
    /* most steps clip: the norm is taken over the blocks, replicated tensors once */
    c.clip_grad_norm = bert ? 0.1f : 0.5f;
    return c;
}

/* the host copy of a trainer's fp32 gradients */
static float *grads_of(ab_trainer *t) {
    const ab_params *p = ab_trainer_params(t);
    float *g = malloc(p->n * sizeof *g);
    if (g && p->be->ops->download(p->be, g, p->grad, p->n * sizeof *g) != 0) {
        free(g);
        return NULL;
    }
    return g;
}

/* max |a - b| of spec s's block (a, this rank's) against its slice of the whole (b), over the
 * larger of the slice's largest value and floor (a gradient that is zero but for rounding, as the
 * key bias's is, since softmax ignores a shift of the scores, is measured against the floor) */
static double block_error(const ab_param_spec *s, const ab_param_spec *whole, const float *a, const float *b_whole,
                          double floor) {
    float *slice = malloc(s->numel * sizeof *slice);
    ab_spec_block_copy(s, (float *)b_whole + whole->offset, slice, 0);
    double err = 0.0, ref = 0.0;
    for (size_t i = 0; i < s->numel; i++) {
        err = fmax(err, fabs((double)a[s->offset + i] - (double)slice[i]));
        ref = fmax(ref, fabs((double)slice[i]));
    }
    free(slice);
    return err / fmax(ref, floor);
}

/* 1. step 1 from the one-rank file: the loss and every gradient block */
static void check_step(ab_precision prec, int T, int dp, const char *init, double tol) {
    ab_train_config tc = config(prec, dp, T, "mpi"), rc = config(prec, dp, 1, "self");
    tc.init_from = rc.init_from = init;
    ab_run_record trec, rrec;
    ab_trainer *t = NULL, *r = NULL;
    if (ab_trainer_create(&tc, &trec, &t) != 0 || ab_trainer_create(&rc, &rrec, &r) != 0) {
        fprintf(stderr, "FAIL trainers: %s\n", ab_error());
        ab_mpi_abort(1);
    }
    int32_t order[BATCH * 4];
    for (int i = 0; i < BATCH * dp; i++) order[i] = (i * 37 + 5) % ab_trainer_train_samples(t);
    ab_step_result a, b;
    if (ab_trainer_step(t, order, BATCH * dp, 0, 1, &a) != 0 || ab_trainer_step(r, order, BATCH * dp, 0, 1, &b) != 0) {
        fprintf(stderr, "FAIL step: %s\n", ab_error());
        ab_mpi_abort(1);
    }
    const ab_params *tp = ab_trainer_params(t), *rp = ab_trainer_params(r);
    float *ga = grads_of(t), *gb = grads_of(r);
    AB_CHECK(ga && gb && tp->n_specs == rp->n_specs, "gradients");
    AB_CHECK(tp->n * (size_t)T >= rp->n && tp->n < rp->n, "T %d: %zu weights on a rank of %zu in all", T, tp->n, rp->n);
    double worst = 0.0, gmax = 0.0;
    for (size_t i = 0; gb && i < rp->n; i++) gmax = fmax(gmax, fabs((double)gb[i]));
    const int failed = failures;
    for (int i = 0; ga && gb && i < tp->n_specs; i++) {
        const ab_param_spec *s = &tp->specs[i];
        const double e = block_error(s, &rp->specs[i], ga, gb, 1e-3 * gmax);
        AB_CHECK(e <= tol, "%s T %d dp %d: step 1 gradient of %s (block %d of %d): error %.3g > %.3g",
                 ab_precision_name(prec), T, dp, s->name, s->split_index, s->split_parts, e, tol);
        worst = fmax(worst, e);
    }
    const double dl = fabs(a.loss - b.loss);
    AB_CHECK(dl <= tol * fabs(b.loss), "%s T %d dp %d: step 1 loss %.9g, one rank %.9g", ab_precision_name(prec), T, dp,
             a.loss, b.loss);
    if (ab_trainer_comm(t)->rank == 0 && failures == failed)
        printf("ok   %s %s T %d x data %d: step 1 loss %.7f (one rank %.7f), gradient blocks worst error %.2g "
               "(tolerance %.0g)\n",
               bert ? "bert-tiny" : "mlp", ab_precision_name(prec), T, dp, a.loss, b.loss, worst, tol);
    free(ga);
    free(gb);
    ab_trainer_destroy(t);
    ab_trainer_destroy(r);
    ab_run_record_free(&trec);
    ab_run_record_free(&rrec);
}

static float *read_whole(const char *path, const ab_params *like) {
    float *h = malloc((like->n + like->n_bufs + 1) * sizeof *h);
    long long nbt;
    char from[256];
    if (h && ab_checkpoint_read(path, like, NULL, h, &nbt, from, sizeof from) == 0) return h;
    fprintf(stderr, "FAIL reading %s: %s\n", path, ab_error());
    failures++;
    free(h);
    return NULL;
}

/* 2. 20 steps: the curves, the test loss, the files */
static void check_run(ab_precision prec, int T, int dp, int rank, double tol_loss, double tol_w) {
    char tpath[300], rpath[300];
    snprintf(tpath, sizeof tpath, "%s/%s-tp%d-%s.safetensors", tmp_dir, bert ? "bert" : "mlp", T,
             ab_precision_name(prec));
    snprintf(rpath, sizeof rpath, "%s/%s-one-%d-%s.safetensors", tmp_dir, bert ? "bert" : "mlp", dp,
             ab_precision_name(prec));
    ab_train_config tc = config(prec, dp, T, "mpi"), rc = config(prec, dp, 1, "self");
    tc.max_steps = rc.max_steps = STEPS;
    tc.log_interval = rc.log_interval = 1;
    tc.save_path = tpath;
    rc.save_path = rank == 0 ? rpath : NULL; /* every rank runs the reference; one writes it */
    ab_run_record a, b;
    if (ab_train_run(&tc, &a) != 0 || ab_train_run(&rc, &b) != 0) {
        fprintf(stderr, "FAIL %s T %d runs: %s\n", ab_precision_name(prec), T, ab_error());
        ab_mpi_abort(1);
    }
    AB_CHECK(a.n_curve == STEPS && b.n_curve == STEPS, "curves of %zu and %zu points", a.n_curve, b.n_curve);
    AB_CHECK(b.epochs[0].clipped_steps > 0 && a.epochs[0].clipped_steps == b.epochs[0].clipped_steps,
             "%s T %d: %ld clipped steps, one rank %ld", ab_precision_name(prec), T, a.epochs[0].clipped_steps,
             b.epochs[0].clipped_steps);
    double worst = 0.0;
    for (size_t i = 0; i < a.n_curve && i < b.n_curve; i++) worst = fmax(worst, fabs(a.curve[i].loss - b.curve[i].loss));
    AB_CHECK(worst <= tol_loss, "%s T %d: loss curves differ by %.3g > %.3g", ab_precision_name(prec), T, worst, tol_loss);
    const double dt = fabs(a.epochs[0].test_loss - b.epochs[0].test_loss);
    AB_CHECK(dt <= tol_loss, "%s T %d: test loss %.7f, one rank %.7f", ab_precision_name(prec), T, a.epochs[0].test_loss,
             b.epochs[0].test_loss);
    const int failed = failures;
    AB_CHECK(a.tensor_parallel == T && a.data_parallel == dp && a.tp_calls == STEPS * (bert ? 8 : 1) &&
                 fabs(a.tp_bytes_sent - a.tp_model_bytes) <= 1e-9 * a.tp_model_bytes && a.tp_bytes_sent > 0,
             "T %d: record says tensor %d data %d, %ld all-reduces, %g bytes (model %g)", T, a.tensor_parallel,
             a.data_parallel, a.tp_calls, a.tp_bytes_sent, a.tp_model_bytes);
    /* the file: whole tensors in one-rank names, as close to the one-rank file as the curves */
    if (rank == 0) {
        ab_run_record rec;
        ab_trainer *r = NULL;
        rc.save_path = NULL;
        rc.max_steps = 0;
        if (ab_trainer_create(&rc, &rec, &r) == 0) {
            const ab_params *p = ab_trainer_params(r);
            float *x = read_whole(tpath, p), *y = read_whole(rpath, p);
            double e = 0.0, m = 0.0;
            for (size_t i = 0; x && y && i < p->n; i++) {
                e = fmax(e, fabs((double)x[i] - (double)y[i]));
                m = fmax(m, fabs((double)y[i]));
            }
            AB_CHECK(x && y && e <= tol_w * m, "%s T %d: saved weights differ by %.3g (of %.3g)", ab_precision_name(prec),
                     T, e, m);
            if (failures == failed)
                printf("ok   %s %s T %d x data %d: %d steps, loss curves within %.2g, test loss %.6f (one rank %.6f), "
                   "saved weights within %.2g of %.2g; clipped steps %ld and %ld\n",
                   bert ? "bert-tiny" : "mlp", ab_precision_name(prec), T, dp, STEPS, worst, a.epochs[0].test_loss, b.epochs[0].test_loss, e, m,
                   a.epochs[0].clipped_steps, b.epochs[0].clipped_steps);
            free(x);
            free(y);
            ab_trainer_destroy(r);
            ab_run_record_free(&rec);
        }
        /* the T-rank file into one rank: it evaluates as the T-rank run did */
        ab_train_config lc = config(prec, dp, 1, "self");
        lc.init_from = tpath;
        lc.max_steps = 1;
        lc.lr = 1e-30f; /* one step that moves nothing measurable: the evaluation of the loaded weights */
        lc.momentum = 0.0f;
        ab_run_record l;
        if (ab_train_run(&lc, &l) != 0) {
            fprintf(stderr, "FAIL loading %s into one rank: %s\n", tpath, ab_error());
            failures++;
        } else {
            AB_CHECK(fabs(l.epochs[0].test_loss - a.epochs[0].test_loss) <= tol_loss,
                     "%s T %d: the saved file evaluates to %.7f on one rank, %.7f on T ranks", ab_precision_name(prec),
                     T, l.epochs[0].test_loss, a.epochs[0].test_loss);
            ab_run_record_free(&l);
        }
    }
    ab_run_record_free(&a);
    ab_run_record_free(&b);
}

/* 3. with dropout: the whole tensors stay bit for bit the same on every rank of a tensor group */
static void check_replicated(int T, int dp) {
    ab_train_config c = config(AB_PREC_FP32, dp, T, "mpi");
    ab_run_record rec;
    ab_trainer *t = NULL;
    if (ab_trainer_create(&c, &rec, &t) != 0) {
        fprintf(stderr, "FAIL trainer: %s\n", ab_error());
        ab_mpi_abort(1);
    }
    ab_comm *w = ab_trainer_comm(t);
    int32_t order[BATCH * 4];
    for (int s = 0; s < 10; s++) {
        for (int i = 0; i < BATCH * dp; i++) order[i] = (s * BATCH * dp + i) % ab_trainer_train_samples(t);
        ab_step_result r;
        if (ab_trainer_step(t, order, BATCH * dp, s, 1, &r) != 0) {
            fprintf(stderr, "FAIL step: %s\n", ab_error());
            ab_mpi_abort(1);
        }
    }
    const ab_params *p = ab_trainer_params(t);
    float *wts = malloc(p->n * sizeof *wts);
    int64_t *all = malloc((size_t)w->size * sizeof *all);
    AB_CHECK(wts && all && ab_trainer_weights(t, wts) == 0, "weights");
    uint64_t h = 0xcbf29ce484222325ull;
    int whole = 0;
    for (int i = 0; i < p->n_specs; i++) {
        const ab_param_spec *sp = &p->specs[i];
        if (sp->split_parts > 1 || sp->region == AB_REGION_BUFFER) continue;
        whole++;
        const uint8_t *b = (const uint8_t *)(wts + sp->offset);
        for (size_t k = 0; k < sp->numel * sizeof(float); k++) h = (h ^ b[k]) * 0x100000001b3ull;
    }
    AB_CHECK(w->ops->allgather_i64(w, (int64_t)(h >> 1), all) == 0, "all-gather");
    const int first = w->rank / T * T; /* the tensor group: T neighbouring ranks */
    for (int q = first; q < first + T; q++)
        AB_CHECK(all[q] == all[w->rank], "dropout %g, T %d: rank %d's %d whole tensors differ from rank %d's after 10 "
                                         "steps (a whole activation dropped differently on the two)",
                 (double)c.dropout, T, w->rank, whole, q);
    if (w->rank == 0)
        printf("ok   bert-tiny dropout %g T %d x data %d: the %d whole tensors bit for bit the same on the group's "
               "ranks after 10 steps\n",
               (double)c.dropout, T, dp, whole);
    free(wts);
    free(all);
    ab_trainer_destroy(t);
    ab_run_record_free(&rec);
}

/* the one-rank weights file the workload's cases start from (written by rank 0, read by all) */
static void write_init(ab_comm *world, const char *init) {
    if (world->rank == 0) {
        ab_train_config c = config(AB_PREC_FP32, 1, 1, "self");
        c.max_steps = 1;
        c.save_path = init;
        ab_run_record rec;
        if (ab_train_run(&c, &rec) != 0) {
            fprintf(stderr, "FAIL initial file: %s\n", ab_error());
            ab_mpi_abort(1);
        }
        ab_run_record_free(&rec);
    }
    world->ops->barrier(world);
}

static void remove_files(const char *dir) {
    DIR *d = opendir(dir);
    struct dirent *e;
    char path[600];
    while (d && (e = readdir(d)) != NULL)
        if (e->d_name[0] != '.') {
            snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
            unlink(path);
        }
    if (d) closedir(d);
    rmdir(dir);
}

int main(void) {
    ab_comm *world = NULL;
    if (ab_comm_mpi_create(&world) != 0) {
        fprintf(stderr, "FAIL mpi: %s\n", ab_error());
        return 1;
    }
    const int W = world->size, rank = world->rank;
    /* every rank its own copy of the data set (the same seed) and a shared scratch folder */
    snprintf(data_dir, sizeof data_dir, "/tmp/ab_test_tp_%d_%d", (int)getppid(), rank);
    snprintf(tmp_dir, sizeof tmp_dir, "/tmp/ab_test_tp_%d_files", (int)getppid());
    mkdir(data_dir, 0700);
    mkdir(tmp_dir, 0700);
    if (dp_write_dataset(data_dir, 640, 200, 8, 8, 4242) != 0) {
        fprintf(stderr, "FAIL writing the data set\n");
        ab_mpi_abort(1);
    }
    world->ops->barrier(world);
    const ab_precision precs[2] = {AB_PREC_FP32, AB_PREC_AMP};
    for (bert = 0; bert < 2; bert++) {
        char init[300];
        snprintf(init, sizeof init, "%s/%s-init.safetensors", tmp_dir, bert ? "bert" : "mlp");
        write_init(world, init);
        for (int k = 0; k < 2; k++)
            for (int T = 2; T <= W; T *= 2) {
                if (W % T) continue;
                const int dp = W / T, amp = precs[k] == AB_PREC_AMP;
                if (bert && T == 4) { /* bert-tiny's 2 heads: refused, saying why */
                    ab_train_config c = config(precs[k], dp, T, "mpi");
                    ab_run_record rec;
                    const int rc = ab_train_run(&c, &rec);
                    AB_CHECK(rc != 0 && rec.usage_error && strstr(ab_error(), "2 attention heads"),
                             "bert-tiny T 4: rc %d usage %d: %s", rc, rec.usage_error, ab_error());
                    ab_run_record_free(&rec);
                    continue;
                }
                /* fp32: the sums differ in order only (Megatron's tests: 1e-6 to 5e-5); amp: each
                 * rank's partial sums are rounded to fp16 before the all-reduce adds them, one fp16
                 * rounding (2^-11 relative) more than one rank's */
                check_step(precs[k], T, dp, init, amp ? (bert ? 1e-2 : 2e-3) : 1e-5);
                /* over 20 steps amp's differences of 1e-4 in a step's loss move the weights apart by
                 * up to 1% of the largest (measured: 0.4% to 1.0%); a wrong split, O(1) */
                check_run(precs[k], T, dp, rank, amp ? 2e-3 : 1e-5, amp ? 3e-2 : 1e-5);
            }
    }
    bert = 1;
    dropout = 0.1f;
    check_replicated(2, W / 2);
    world->ops->barrier(world);
    dp_remove_dataset(data_dir);
    if (rank == 0) remove_files(tmp_dir);
    ab_comm_destroy(world);
    if (failures) {
        fprintf(stderr, "test_tp: %d failure(s)\n", failures);
        ab_mpi_abort(1);
    }
    ab_mpi_finalize();
    return 0;
}
