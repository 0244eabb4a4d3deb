/* Checkpoints of a training run and --resume (core/trainstate.h): the trainer's state gathered
 * into host memory and handed to the program's store, and taken back from it. Every function
 * here is collective: under W ranks each rank calls it at the same step. Rank 0 writes and reads
 * the files; the state the ranks share (weights, optimizer, scaler, position) reaches the others
 * by broadcast, and what is each rank's own (batch-norm statistics, pass and batch counters) is
 * gathered to rank 0 and sent back to its rank. */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "census.h"
#include "comm.h"
#include "timer.h"
#include "train_internal.h"

/* ---- the facts a checkpoint must share with the run resuming it ---- */

static void add_key(ab_train_state *s, const char *key, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;
static void add_key(ab_train_state *s, const char *key, const char *fmt, ...) {
    if (s->n_keys == AB_STATE_MAX_KEYS) return;
    ab_state_key *k = &s->keys[s->n_keys++];
    snprintf(k->key, sizeof k->key, "%s", key);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(k->value, sizeof k->value, fmt, ap);
    va_end(ap);
}

/* the model, the world, the backend, the precision and the recipe: what decides the run's every
 * value. Not the threads nor where the output goes; nor the data files' folder (a data set may
 * move): the sample counts are checked, the contents are the user's to keep. */
static void state_keys(const trainer *t, ab_train_state *s) {
    const ab_train_config *c = t->cfg;
    const ab_scaler *sc = &t->scaler;
    s->n_keys = 0;
    add_key(s, "model", "%s", c->model);
    add_key(s, "parameters", "%zu", t->params.n);
    add_key(s, "buffers", "%zu", t->params.n_bufs);
    add_key(s, "dataset", "%s", c->dataset);
    add_key(s, "train_samples", "%d", t->train->n);
    add_key(s, "test_samples", "%d", t->test->n);
    add_key(s, "augment", "%d", c->augment && t->train->augments);
    add_key(s, "shuffle", "%d", c->shuffle);
    if (t->train->info.kind == AB_SAMPLE_TOKENS) add_key(s, "max_seq_len", "%d", t->train->info.seq_len);
    add_key(s, "dropout", "%.9g", (double)c->dropout);
    add_key(s, "precision", "%s", ab_precision_name(c->precision));
    add_key(s, "backend", "%s", t->be->ops->name); /* the CPU's and a GPU's roundings differ */
    add_key(s, "world_size", "%d", t->comm->size);
    /* engines sum in their own orders past 2 ranks (core/comm.h) */
    add_key(s, "comm_engine", "%s", t->comm->size > 1 ? t->comm->ops->name : "none");
    /* past 2 ranks the buckets decide the order of the engine's additions (2 ranks: one addition) */
    if (t->comm->size > 2) add_key(s, "dp_overlap", "%d, buckets of %.9g MB", c->dp_overlap, c->bucket_mb);
    add_key(s, "allreduce_dtype", "%s", ab_dtype_name(c->allreduce_dtype));
    add_key(s, "batch_size", "%d", c->batch_size);
    add_key(s, "accum_steps", "%d", c->accum_steps);
    add_key(s, "epochs", "%d", c->epochs);
    add_key(s, "max_steps", "%ld", c->max_steps);
    add_key(s, "total_steps", "%ld", t->rec->total_steps);
    add_key(s, "optimizer", "%s", ab_optimizer_name(c->optimizer));
    add_key(s, "lr", "%.9g", (double)c->lr);
    add_key(s, "lr_schedule", "%s", ab_lr_schedule_name(c->lr_schedule));
    add_key(s, "warmup_steps", "%ld", c->warmup_steps);
    add_key(s, "momentum", "%.9g", (double)c->momentum);
    add_key(s, "weight_decay", "%.9g", (double)c->weight_decay);
    add_key(s, "wd_exclude", "%d", c->wd_exclude);
    add_key(s, "clip_grad_norm", "%.9g", (double)c->clip_grad_norm);
    add_key(s, "seed", "%llu", (unsigned long long)c->seed);
    if (sc->dynamic)
        add_key(s, "loss_scaler", "dynamic from %.9g, x%.9g after %d, x%.9g", (double)sc->init_scale,
                (double)sc->growth_factor, sc->growth_interval, (double)sc->backoff_factor);
    else
        add_key(s, "loss_scaler", "%s %.9g", ab_scaler_mode(sc), (double)sc->init_scale);
    add_key(s, "grad_census", "%d", c->grad_census);
    add_key(s, "log_interval", "%d", c->log_interval);
    add_key(s, "timing_skip_steps", "%ld", c->timing_skip_steps); /* the record's timed samples */
    add_key(s, "inject_inf", "step %ld rank %d", c->inject_inf_step, c->inject_inf_rank);
}

/* ---- agreement between ranks ---- */

/* every rank learns whether any failed; a rank that did not fail says which step did */
static int agree(trainer *t, int rc, const char *what) {
    int failed = rc != 0;
    if (t->comm->size > 1) {
        const char *mine = failed ? ab_error() : NULL;
        char keep[1024] = "";
        if (mine) snprintf(keep, sizeof keep, "%s", mine);
        if (ab_comm_flag_max(t->comm, &failed) != 0) return -1;
        if (failed && !mine) return ab_errorf("%s failed on another rank (rank 0 says why)", what);
        if (failed) return ab_errorf("%s", keep);
    }
    return failed ? -1 : 0;
}

static int verbose(const trainer *t) { return !t->cfg->quiet && t->rec->rank == 0; }

/* ---- setting up ---- */

int ab_ckpt_setup(trainer *t) {
    const ab_train_config *c = t->cfg;
    if (!c->checkpoint_dir) {
        if (c->resume) return ab_errorf("--resume needs --checkpoint-dir: the folder whose checkpoints it continues");
        if (c->checkpoint_every > 0) return ab_errorf("--checkpoint-every needs --checkpoint-dir");
        return 0;
    }
    if (!c->checkpoints) return ab_errorf("--checkpoint-dir: this build writes no checkpoints");
    if (c->keep_checkpoints < 1) return ab_errorf("--keep-checkpoints %d: keep at least 1", c->keep_checkpoints);
    if (c->checkpoint_every < 0) return ab_errorf("--checkpoint-every %ld: the interval must be >= 0", c->checkpoint_every);
    ab_train_state *s = &t->state;
    const ab_params *p = &t->params;
    const size_t W = (size_t)t->comm->size;
    s->world = t->comm->size;
    s->model = t->model;
    s->params = p;
    s->passes = calloc(W, sizeof(int64_t));
    s->batches_tracked = calloc(W, sizeof(int64_t));
    s->master = malloc((p->n + 1) * sizeof(float));
    s->bufs = malloc((W * p->n_bufs + 1) * sizeof(float));
    if (p->compute_type != AB_F32) s->compute_weights = malloc(p->n_compute * ab_dtype_size(p->compute_type) + 1);
    if (t->opt.s1) s->s1 = malloc((p->n + 1) * sizeof(float));
    if (t->opt.s2) s->s2 = malloc((p->n + 1) * sizeof(float));
    ab_run_record *rec = t->rec;
    if (!rec->peak_memory_per_rank) rec->peak_memory_per_rank = calloc(W, sizeof(int64_t));
    int rc = 0;
    if (!s->passes || !s->batches_tracked || !s->master || !s->bufs ||
        (p->compute_type != AB_F32 && !s->compute_weights) || (t->opt.s1 && !s->s1) || (t->opt.s2 && !s->s2) ||
        !rec->peak_memory_per_rank)
        rc = ab_errorf("out of host memory for the checkpoint's state (%zu parameters)", p->n);
    AB_TRY(agree(t, rc, "allocating the checkpoint's state"));
    s->s1_name = t->opt.kind == AB_OPT_ADAMW ? "exp_avg" : "momentum_buffer";
    s->s2_name = "exp_avg_sq";
    state_keys(t, s);
    if (c->resume) return 0;
    /* a fresh run would rotate away the checkpoints of another: refused */
    char path[1024] = "";
    int found = 0;
    if (t->comm->rank == 0) found = c->checkpoints->latest(c->checkpoint_dir, path, sizeof path);
    rc = found < 0 ? -1 : found > 0 ? ab_errorf("%s holds checkpoints (newest %s): --resume continues that run; "
                                                    "or name another --checkpoint-dir",
                                                    c->checkpoint_dir, path)
                                        : 0;
    return agree(t, rc, "checking --checkpoint-dir");
}

void ab_ckpt_drain(trainer *t) {
    if (!t->cfg || !t->cfg->checkpoint_dir || !t->cfg->checkpoints || !t->state.master) return;
    /* a run that failed: its last checkpoint still finishes (or fails) before anything it reads goes */
    char keep[1024];
    snprintf(keep, sizeof keep, "%s", ab_error());
    if (t->cfg->checkpoints->flush(NULL) != 0) fprintf(stderr, "ampbench: %s\n", ab_error());
    ab_errorf("%s", keep);
}

void ab_ckpt_free(trainer *t) {
    ab_train_state *s = &t->state;
    free(s->passes);
    free(s->batches_tracked);
    free(s->master);
    free(s->bufs);
    free(s->compute_weights);
    free(s->s1);
    free(s->s2);
    ab_scaler_free(&s->scaler); /* a loaded scaler that never reached the trainer (else zeroed) */
    memset(s, 0, sizeof *s);
}

/* the position's meaning: samples, seeds and the next step's learning rate */
static void explain_position(const trainer *t, ab_train_state *s) {
    const ab_train_config *c = t->cfg;
    const long group = (long)c->batch_size * c->accum_steps * t->comm->size;
    s->epoch_samples = s->epoch_step * group < t->train->n ? s->epoch_step * group : t->train->n;
    s->shuffle_seed = ab_shuffle_seed(t, s->epoch);
    s->augment_seed = ab_aug_seed(t, s->epoch);
    s->next_lr = ab_lr_at(c->lr_schedule, c->lr, s->step, t->rec->total_steps, c->warmup_steps);
}

/* ---- writing ---- */

/* each rank's buffers into s->bufs (rank r's at r * n_bufs) on rank 0, through a device buffer
 * that rank r fills and broadcasts: the gradients', which no one reads between two steps (the
 * next step writes them over), so that a checkpoint adds nothing to the run's peak memory */
static int gather_bufs(trainer *t) {
    const ab_params *p = &t->params;
    ab_backend *be = t->be;
    const size_t nb = p->n_bufs, bytes = nb * sizeof(float);
    if (nb == 0) return 0;
    int rc = t->comm->rank == 0 ? be->ops->download(be, t->state.bufs, p->bufs, bytes) : 0;
    if (t->comm->size == 1) return rc;
    float *d = nb <= p->n ? p->grad : NULL, *host = malloc(bytes);
    if (rc == 0 && (!d || !host)) rc = ab_errorf("out of memory gathering the buffers");
    /* every rank takes every turn; a failure anywhere is agreed on before the next collective */
    for (int r = 1; r < t->comm->size; r++) {
        if (rc == 0 && t->comm->rank == r) {
            rc = be->ops->download(be, host, p->bufs, bytes);
            if (rc == 0) rc = be->ops->upload(be, d, host, bytes);
        }
        if ((rc = agree(t, rc, "gathering the buffers")) != 0) break;
        rc = t->comm->ops->broadcast(t->comm, d, bytes, r);
        if (rc == 0 && t->comm->rank == 0) rc = be->ops->download(be, t->state.bufs + (size_t)r * nb, d, bytes);
    }
    free(host);
    return agree(t, rc, "gathering the buffers");
}

int ab_ckpt_write(trainer *t, long step, int epoch, long epoch_step, const ab_epoch_tally *tally) {
    const ab_train_config *c = t->cfg;
    ab_train_state *s = &t->state;
    ab_backend *be = t->be;
    const ab_params *p = &t->params;
    const double t0 = ab_now();
    /* the compute copy of the weights as the next step (or an evaluation) will refresh it: the
     * checkpoint's copy is then the master weights' cast, which the reader checks */
    /* the write before must be done with the host buffers before anything is gathered into them */
    double wrote = 0.0;
    int rc = t->comm->rank == 0 ? c->checkpoints->flush(&wrote) : 0;
    t->rec->checkpoint_write_s += wrote;
    if (rc == 0) rc = ab_params_refresh(&t->params);
    AB_TRY(agree(t, rc, "preparing the checkpoint"));
    s->step = step;
    s->epoch = epoch;
    s->epoch_step = epoch_step;
    explain_position(t, s);
    s->tally = tally ? *tally : (ab_epoch_tally){0};
    s->opt_steps = t->opt.t;
    s->scaler = t->scaler; /* a shallow copy: the history stays the trainer's */
    s->rec = t->rec;
    AB_TRY(t->comm->ops->allgather_i64(t->comm, (int64_t)t->passes, s->passes));
    AB_TRY(t->comm->ops->allgather_i64(t->comm, (int64_t)t->model->batches_tracked, s->batches_tracked));
    ab_run_record *rec = t->rec; /* its peaks per rank were allocated by ab_ckpt_setup */
    AB_TRY(t->comm->ops->allgather_i64(t->comm, (int64_t)be->mem.peak_total, rec->peak_memory_per_rank));
    AB_TRY(gather_bufs(t));
    AB_TRY(ab_trainer_share_optimizer(t)); /* a parameter server's shards of the state, to rank 0 */
    char path[1024] = "";
    double bytes = 0.0;
    if (t->comm->rank == 0) {
        rec->mem = be->mem;
        rc = be->ops->download(be, s->master, p->master, p->n * sizeof(float));
        if (rc == 0 && s->compute_weights)
            rc = be->ops->download(be, s->compute_weights, p->compute_weights,
                                   p->n_compute * ab_dtype_size(p->compute_type));
        if (rc == 0 && s->s1) rc = be->ops->download(be, s->s1, t->opt.s1, p->n * sizeof(float));
        if (rc == 0 && s->s2) rc = be->ops->download(be, s->s2, t->opt.s2, p->n * sizeof(float));
        if (rc == 0) rc = c->checkpoints->save(c->checkpoint_dir, c->keep_checkpoints, s, path, sizeof path, &bytes);
    }
    memset(&s->scaler, 0, sizeof s->scaler); /* the copy's history is the trainer's */
    AB_TRY(agree(t, rc, "writing the checkpoint"));
    const double dt = ab_now() - t0;
    rec->checkpoints_written++;
    rec->checkpoint_time_s += dt;
    rec->checkpoint_bytes = bytes;
    if (verbose(t))
        printf("Checkpoint %s (step %ld, %.1f MB of tensors; training held %.3f s, the files are written in the "
               "background)\n",
               path, step, bytes / 1e6, dt);
    return 0;
}

int ab_ckpt_finish(trainer *t) {
    const ab_train_config *c = t->cfg;
    if (!c->checkpoint_dir) return 0;
    double wrote = 0.0;
    const int rc = t->comm->rank == 0 ? c->checkpoints->flush(&wrote) : 0;
    t->rec->checkpoint_write_s += wrote;
    return agree(t, rc, "writing the checkpoint");
}

/* ---- resuming ---- */

/* what the checkpoint says must agree with itself and with this run: the epochs' steps add up to
 * the step, the optimizer applied every step the scaler did not skip */
static int check_state(const trainer *t, const ab_train_state *s, const char *path) {
    const ab_run_record *rec = t->rec;
    const int E = t->cfg->epochs;
    const long spe = ab_steps_per_epoch(t);
    if (s->epoch < 1 || s->epoch > E + 1 || s->epoch_step < 0 || s->epoch_step >= spe ||
        (s->epoch == E + 1 && s->epoch_step != 0))
        return ab_errorf("%s: position epoch %d after %ld steps is outside this run (%d epochs of %ld steps)", path,
                         s->epoch, s->epoch_step, E, spe);
    ab_train_state own = *s;
    explain_position(t, &own);
    if (own.epoch_samples != s->epoch_samples || own.shuffle_seed != s->shuffle_seed ||
        own.augment_seed != s->augment_seed || own.next_lr != s->next_lr)
        return ab_errorf("%s: contradicts itself: its data position (%ld samples, order seed %llx, augmentation seed "
                         "%llx, next lr %g) is not what step %ld means (%ld, %llx, %llx, %g)",
                         path, s->epoch_samples, (unsigned long long)s->shuffle_seed,
                         (unsigned long long)s->augment_seed, s->next_lr, s->step, own.epoch_samples,
                         (unsigned long long)own.shuffle_seed, (unsigned long long)own.augment_seed, own.next_lr);
    if (rec->n_epochs != s->epoch - 1)
        return ab_errorf("%s: contradicts itself: %d finished epochs recorded, position in epoch %d", path,
                         rec->n_epochs, s->epoch);
    long steps = 0, skipped = 0;
    const int listed = s->epoch_step > 0 ? s->epoch : rec->n_epochs;
    for (int i = 0; i < listed; i++) {
        const ab_epoch_record *er = &rec->epochs[i];
        if (er->steps < 0 || er->steps > spe || er->skipped_steps < 0 || er->skipped_steps > er->steps)
            return ab_errorf("%s: epoch %d records %ld steps (%ld skipped); an epoch has %ld", path, i + 1, er->steps,
                             er->skipped_steps, spe);
        steps += er->steps, skipped += er->skipped_steps;
    }
    if (steps != s->step || (s->epoch_step > 0 && rec->epochs[s->epoch - 1].steps != s->epoch_step))
        return ab_errorf("%s: contradicts itself: the epochs' steps add up to %ld, the position says %ld", path, steps,
                         s->step);
    if (skipped != s->scaler.skipped || s->opt_steps != s->step - s->scaler.skipped)
        return ab_errorf("%s: contradicts itself: %ld steps, %ld skipped by the loss scaler (%ld in the epochs), "
                         "but %ld optimizer steps applied",
                         path, s->step, s->scaler.skipped, skipped, s->opt_steps);
    if (s->step > rec->total_steps)
        return ab_errorf("%s: step %ld is past the run's %ld steps", path, s->step, rec->total_steps);
    for (int r = 0; r < s->world; r++)
        if (s->passes[r] < 0 || s->batches_tracked[r] < 0)
            return ab_errorf("%s: rank %d's pass or batch count is negative", path, r);
    /* the last evaluation's predictions: none before the first epoch's end, else one per test
     * sample's target */
    if ((rec->n_test_pred != 0 && rec->n_test_pred != t->test->n * t->targets) ||
        (rec->n_epochs > 0 && rec->n_test_pred == 0) || (rec->n_test_pred && rec->n_classes != t->model->n_classes))
        return ab_errorf("%s: %d predictions of %d classes; this run evaluates %d samples x %d targets of %d classes",
                         path, rec->n_test_pred, rec->n_classes, t->test->n, t->targets, t->model->n_classes);
    if (s->scaler.dynamic && (s->scaler.tracker < 0 || s->scaler.tracker >= s->scaler.growth_interval))
        return ab_errorf("%s: the loss scaler's %d clean steps reach its growth interval %d", path, s->scaler.tracker,
                         s->scaler.growth_interval);
    if (rec->n_curve && rec->curve[rec->n_curve - 1].step > s->step)
        return ab_errorf("%s: contradicts itself: the loss curve reaches step %ld, the position is step %ld", path,
                         rec->curve[rec->n_curve - 1].step, s->step);
    return 0;
}

/* the scalars every rank needs, from rank 0: packed as int64 (doubles by their bits) and summed
 * with every other rank's zeros */
enum { SC_STEP, SC_EPOCH, SC_EPOCH_STEP, SC_OPT, SC_SCALE, SC_TRACKER, SC_GROWTHS, SC_BACKOFFS, SC_SKIPPED,
       SC_MIN, SC_MAX, SC_LOSS, SC_INTERVAL, SC_FINITE, SC_INTERVAL_N, SC_TIME, SC_DATA, SC_COUNT };

static int64_t bits(double v) {
    int64_t b;
    memcpy(&b, &v, sizeof b);
    return b;
}
static double unbits(int64_t b) {
    double v;
    memcpy(&v, &b, sizeof v);
    return v;
}

static int share_scalars(trainer *t, ab_train_state *s) {
    const int W = t->comm->size;
    int64_t *v = calloc(SC_COUNT + 3 * (size_t)W, sizeof *v);
    AB_TRY(agree(t, v ? 0 : ab_errorf("out of host memory"), "restoring the state"));
    if (t->comm->rank == 0) {
        const int64_t x[SC_COUNT] = {s->step, s->epoch, s->epoch_step, s->opt_steps, bits(s->scaler.scale),
                                     s->scaler.tracker, s->scaler.growths, s->scaler.backoffs, s->scaler.skipped,
                                     bits(s->scaler.min_scale), bits(s->scaler.max_scale), bits(s->tally.loss_sum),
                                     bits(s->tally.interval_sum), s->tally.finite_steps, s->tally.interval_n,
                                     bits(s->tally.time_s), bits(s->tally.data_s)};
        memcpy(v, x, sizeof x);
        for (int r = 0; r < W; r++) {
            v[SC_COUNT + r] = s->passes[r];
            v[SC_COUNT + W + r] = s->batches_tracked[r];
            v[SC_COUNT + 2 * W + r] = t->rec->peak_memory_per_rank ? t->rec->peak_memory_per_rank[r] : 0;
        }
    }
    int rc = W > 1 ? t->comm->ops->allreduce_i64(t->comm, v, SC_COUNT + 3 * W, AB_RED_SUM) : 0;
    if (rc == 0 && t->comm->rank != 0) {
        s->step = v[SC_STEP];
        s->epoch = (int)v[SC_EPOCH];
        s->epoch_step = v[SC_EPOCH_STEP];
        s->opt_steps = v[SC_OPT];
        s->scaler = t->scaler;
        s->scaler.scale = (float)unbits(v[SC_SCALE]);
        s->scaler.tracker = (int)v[SC_TRACKER];
        s->scaler.growths = v[SC_GROWTHS];
        s->scaler.backoffs = v[SC_BACKOFFS];
        s->scaler.skipped = v[SC_SKIPPED];
        s->scaler.min_scale = (float)unbits(v[SC_MIN]);
        s->scaler.max_scale = (float)unbits(v[SC_MAX]);
        s->tally = (ab_epoch_tally){.loss_sum = unbits(v[SC_LOSS]), .interval_sum = unbits(v[SC_INTERVAL]),
                                    .finite_steps = v[SC_FINITE], .interval_n = v[SC_INTERVAL_N],
                                    .time_s = unbits(v[SC_TIME]), .data_s = unbits(v[SC_DATA])};
        for (int r = 0; r < W; r++) {
            s->passes[r] = v[SC_COUNT + r];
            s->batches_tracked[r] = v[SC_COUNT + W + r];
        }
    }
    /* a resumed rank's peak is at least what it held before */
    const size_t before = rc == 0 ? (size_t)v[SC_COUNT + 2 * W + t->comm->rank] : 0;
    if (before > t->be->mem.peak_total) t->be->mem.peak_total = before;
    free(v);
    return rc;
}

/* a buffer of backend memory from rank 0's host copy to every rank */
static int share_tensor(trainer *t, void *dev, const void *host, size_t bytes) {
    int rc = t->comm->rank == 0 ? t->be->ops->upload(t->be, dev, host, bytes) : 0;
    AB_TRY(agree(t, rc, "restoring the weights"));
    return t->comm->size > 1 ? t->comm->ops->broadcast(t->comm, dev, bytes, 0) : 0;
}

/* each rank's own buffers: rank r's slice reaches every rank through p->bufs, rank r keeps it */
static int share_bufs(trainer *t) {
    const ab_params *p = &t->params;
    const size_t nb = p->n_bufs, bytes = nb * sizeof(float);
    if (nb == 0) return 0;
    float *mine = malloc(bytes);
    int rc = agree(t, mine ? 0 : ab_errorf("out of host memory"), "restoring the buffers");
    for (int r = t->comm->size - 1; rc == 0 && r >= 0; r--) {
        rc = share_tensor(t, p->bufs, t->state.bufs + (size_t)r * nb, bytes);
        if (rc == 0 && t->comm->rank == r) rc = t->be->ops->download(t->be, mine, p->bufs, bytes);
        rc = agree(t, rc, "restoring the buffers");
    }
    if (rc == 0) rc = agree(t, t->be->ops->upload(t->be, p->bufs, mine, bytes), "restoring the buffers");
    free(mine);
    return rc;
}

/* the compute-type copy the checkpoint holds must be the master weights' cast, bit for bit */
static int check_compute_copy(trainer *t, const char *path) {
    const ab_params *p = &t->params;
    if (!t->state.compute_weights || t->comm->rank != 0) return 0;
    const size_t bytes = p->n_compute * ab_dtype_size(p->compute_type);
    uint8_t *now = malloc(bytes + 1);
    if (!now) return ab_errorf("out of host memory");
    int rc = t->be->ops->download(t->be, now, p->compute_weights, bytes);
    if (rc == 0 && memcmp(now, t->state.compute_weights, bytes) != 0) {
        size_t i = 0;
        while (i < bytes && now[i] == ((const uint8_t *)t->state.compute_weights)[i]) i++;
        rc = ab_errorf("%s: contradicts itself: its %s copy of the weights differs from its fp32 master weights "
                       "cast to %s (element %zu)",
                       path, ab_dtype_name(p->compute_type), ab_dtype_name(p->compute_type),
                       i / ab_dtype_size(p->compute_type));
    }
    free(now);
    return rc;
}

/* rank 0: the checkpoint at path into the host state t->state and the record, checked against
 * this run; the peaks of memory it held before, category by category. 0, or -1 (ab_error). */
static int read_checkpoint(trainer *t, const char *path) {
    ab_train_state *s = &t->state;
    ab_run_record *rec = t->rec;
    s->rec = rec;
    /* the scaler's settings are this run's (the keys check them); the store fills its state */
    const ab_scaler *live = &t->scaler;
    s->scaler = (ab_scaler){.enabled = live->enabled,
                            .dynamic = live->dynamic,
                            .init_scale = live->init_scale,
                            .growth_factor = live->growth_factor,
                            .backoff_factor = live->backoff_factor,
                            .growth_interval = live->growth_interval};
    int rc = t->cfg->checkpoints->load(path, s);
    if (rc == 0) rc = check_state(t, s, path);
    if (rc != 0) {
        ab_scaler_free(&s->scaler);
        return rc;
    }
    ab_mem *m = &t->be->mem;
    for (int k = 0; k < AB_MEM_COUNT; k++)
        if (rec->mem.peak[k] > m->peak[k]) m->peak[k] = rec->mem.peak[k];
    if (rec->mem.peak_total > m->peak_total) m->peak_total = rec->mem.peak_total;
    if (rec->mem.peak_all > m->peak_all) m->peak_all = rec->mem.peak_all;
    return 0;
}

/* the trainer takes the shared state: optimizer step, passes and batch-norm count, the scaler
 * (rank 0's with the checkpoint's history), where the epoch continues, and the record's note of
 * the resume (at: resumed_at grown by one) */
static void take_state(trainer *t, long *at, const char *path) {
    ab_train_state *s = &t->state;
    ab_run_record *rec = t->rec;
    t->opt.t = (int)s->opt_steps;
    t->passes = (long)s->passes[t->comm->rank];
    t->model->batches_tracked = (long)s->batches_tracked[t->comm->rank];
    if (t->comm->rank == 0) ab_scaler_free(&t->scaler);
    t->scaler = s->scaler;
    memset(&s->scaler, 0, sizeof s->scaler);
    t->resume_epoch = s->epoch;
    t->resume_epoch_step = s->epoch_step;
    t->resume_tally = s->tally;
    rec->resumed_at = at;
    rec->resumed_at[rec->n_resumes++] = s->step;
    snprintf(rec->resumed_from, sizeof rec->resumed_from, "%s", path);
}

int ab_ckpt_resume(trainer *t, long *step, int *epoch) {
    const ab_train_config *c = t->cfg;
    ab_train_state *s = &t->state;
    ab_run_record *rec = t->rec;
    const ab_params *p = &t->params;
    char path[1024] = "";
    int found = 0, rc = 0;
    const double t0 = ab_now();
    if (t->comm->rank == 0) {
        found = c->checkpoints->latest(c->checkpoint_dir, path, sizeof path);
        rc = found < 0 ? -1 : 0;
    }
    AB_TRY(agree(t, rc, "looking for a checkpoint"));
    int64_t any = found;
    if (t->comm->size > 1) AB_TRY(t->comm->ops->allreduce_i64(t->comm, &any, 1, AB_RED_SUM));
    if (!any) {
        if (verbose(t)) printf("No checkpoint in %s: starting from the beginning\n", c->checkpoint_dir);
        return 0;
    }
    /* rank 0 reads it into the host state, and the record */
    AB_TRY(agree(t, t->comm->rank == 0 ? read_checkpoint(t, path) : 0, "reading the checkpoint"));
    AB_TRY(share_scalars(t, s));
    AB_TRY(share_tensor(t, p->master, s->master, p->n * sizeof(float)));
    if (s->s1) AB_TRY(share_tensor(t, t->opt.s1, s->s1, p->n * sizeof(float)));
    if (s->s2) AB_TRY(share_tensor(t, t->opt.s2, s->s2, p->n * sizeof(float)));
    AB_TRY(share_bufs(t));
    t->copy_current = 0; /* the master weights are the checkpoint's now */
    rc = ab_params_refresh(&t->params);
    if (rc == 0) rc = check_compute_copy(t, path);
    long *at = rc == 0 ? realloc(rec->resumed_at, (size_t)(rec->n_resumes + 1) * sizeof *at) : NULL;
    if (rc == 0 && !at) rc = ab_errorf("out of host memory");
    AB_TRY(agree(t, rc, "checking the checkpoint"));
    take_state(t, at, path);
    *step = s->step;
    *epoch = s->epoch;
    if (verbose(t))
        printf("Resumed from %s: step %ld of %ld, epoch %d after %ld of its %ld steps (%.3f s)\n", path, s->step,
               rec->total_steps, s->epoch, s->epoch_step, ab_steps_per_epoch(t), ab_now() - t0);
    return 0;
}
