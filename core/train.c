/* The training loop. One optimizer step (ab_trainer_step) is three parts, each read top to
 * bottom below:
 *   1. micro_batches: per micro-batch of this rank's shard, gather + normalise the samples,
 *      forward, softmax cross-entropy in fp32 (its gradient pre-multiplied by the loss scale),
 *      backward. Gradients: the first micro-batch writes the fp32 gradients (AB_GRAD_WRITE),
 *      every later one adds to them (AB_GRAD_ACCUMULATE); under amp/bf16 each tensor is rounded
 *      to the compute type and folded into the fp32 gradient (ab_param_grad_done, core/params.h;
 *      the layers' weights by the fold ops, core/layers.c).
 *   2. synchronise: the all-reduce of the gradients (W ranks, core/comm.h: summed, each rank's
 *      loss gradient already carries 1/n, n the world's samples), the overflow flag (with the
 *      unscaling in place when clipping reads the gradients, the norm's squares in the same pass;
 *      else the optimizer unscales), the gradient norm, one read-back of the step's scalars and
 *      one all-reduce of the flag, the loss and the stop request, so that every rank takes the
 *      same decision.
 *   3. update: the loss scaler decides, clipping, the schedule's learning rate, the optimizer
 *      on the fp32 master weights, which under amp/bf16 also writes the compute copy the next
 *      step's forward reads (ab_step_refresh refreshes it only when the update did not).
 * Around it: setup (world, model, buffers), the epoch loop, evaluation and the record. */
#include "train.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "census.h"
#include "comm.h"
#include "kernel_math.h"
#include "params.h"
#include "pipeline.h"
#include "rng.h"
#include "timer.h"
#include "train_internal.h"

/* the one stop request of the process: a flag a signal handler may set (ab_request_stop) */
static volatile sig_atomic_t stop_flag = 0;
void ab_request_stop(void) { stop_flag = 1; }
int ab_stop_requested(void) { return stop_flag != 0; }

void ab_train_config_defaults(ab_train_config *c) {
    *c = (ab_train_config){.model = "mlp", .dataset = "mnist", .device = "cpu", .precision = AB_PREC_FP32,
                           .epochs = 1, .batch_size = 64, .accum_steps = 1, .optimizer = AB_OPT_SGD, .lr = 0.01f,
                           .max_seq_len = 128, .dropout = -1.0f,
                           .augment = 1, .lr_schedule = AB_LR_CONSTANT,
                           .seed = 1, .init_scale = 65536.0f, .growth_factor = 2.0f, .backoff_factor = 0.5f,
                           .growth_interval = 2000, .log_interval = 100, .shuffle = 1,
                           .inject_inf_step = -1, .inject_inf_rank = -1, .comm = "auto", .keep_checkpoints = 2,
                           .dp_overlap = 1, .bucket_mb = 25.0, .dp_sync = AB_DP_RING, .ps_shards = 1,
                           .tensor_parallel = 1, .pipeline_parallel = 1, .pp_schedule = AB_PP_1F1B,
                           .allreduce_dtype = AB_F32};
}


/* fp16 all-reduce bucket: 12.5 MiB, the fp16 half of DDP's 25 MB default bucket */
#define AB_ALLREDUCE_BUCKET_ELEMS ((size_t)25 << 18)

static int record_curve(ab_run_record *rec, long step, int epoch, double loss, float scale) {
    if (rec->n_curve == rec->cap_curve) {
        const size_t cap = rec->cap_curve ? rec->cap_curve * 2 : 256;
        ab_loss_point *p = realloc(rec->curve, cap * sizeof *p);
        if (!p) return ab_errorf("out of memory recording the loss curve");
        rec->curve = p;
        rec->cap_curve = cap;
    }
    rec->curve[rec->n_curve++] = (ab_loss_point){.step = step, .epoch = epoch, .loss = loss, .scale = scale};
    return 0;
}

static int load_data(trainer *t) {
    const ab_train_config *c = t->cfg;
    AB_TRY(c->workload->open_data(c, t->be, &t->train, &t->test));
    const ab_sample_info *a = &t->train->info, *b = &t->test->info;
    if (a->kind != b->kind || a->C != b->C || a->H != b->H || a->W != b->W || a->seq_len != b->seq_len ||
        a->n_classes != b->n_classes || ab_sample_targets(a) != ab_sample_targets(b))
        return ab_errorf("%s: the training and test samples differ in shape, classes or labels per sample", c->dataset);
    if (t->train->n < 1 || t->test->n < 1) return ab_errorf("%s: an empty split", c->dataset);
    return 0;
}

/* the augmentation seed of an epoch: every rank and micro-batch draws the same per sample */
uint64_t ab_aug_seed(const trainer *t, int epoch) {
    if (!t->cfg->augment || !t->train->augments) return 0;
    return (t->cfg->seed * 0x9E3779B97F4A7C15ull) ^ ((uint64_t)epoch * 0xD1B54A32D192ED03ull) ^ 1ull;
}

/* 64-bit FNV-1a */
static uint64_t fnv1a(const char *s) {
    uint64_t h = 0xcbf29ce484222325ull;
    for (; *s; s++) h = (h ^ (uint8_t)*s) * 0x100000001b3ull;
    return h;
}

/* the GPU each rank runs on (-1 for a CPU rank), for rank 0's record (a collective) */
static int gather_gpus(trainer *t) {
    ab_run_record *rec = t->rec;
    if (!(rec->gpu_per_rank = calloc((size_t)t->comm->size, sizeof(int64_t)))) return ab_errorf("out of host memory");
    const int on_host = t->be->ops->is_host || t->comm->device < 0;
    return t->comm->ops->allgather_i64(t->comm, on_host ? -1 : (int64_t)t->comm->device, rec->gpu_per_rank);
}

/* Every rank must train the same model the same way: a hash of what must agree, all-reduced
 * with MIN and MAX; when they differ every rank says what it has and which ranks differ. */
static int check_world_config(trainer *t) {
    ab_comm *cm = t->comm;
    if (cm->size == 1) return 0;
    const ab_train_config *c = t->cfg;
    char desc[512];
    snprintf(desc, sizeof desc,
             "model %s, parameters %zu, precision %s, dataset %s (%d train samples), batch %d, accum steps %d, "
             "epochs %d, max steps %ld, optimizer %s lr %g momentum %g wd %g, seed %llu, shuffle %d, "
             "all-reduce %s, engine %s, overlap %d, buckets of %g MB, sync %s (%d shards), backend %s, tensor groups of "
             "%d, pipeline groups of %d (%d)",
             c->model, t->lay.pp > 1 ? (size_t)0 : t->params.n, ab_precision_name(c->precision), c->dataset, t->train->n, c->batch_size,
             c->accum_steps, c->epochs, c->max_steps, ab_optimizer_name(c->optimizer), (double)c->lr,
             (double)c->momentum, (double)c->weight_decay, (unsigned long long)c->seed, c->shuffle,
             ab_dtype_name(c->allreduce_dtype), cm->ops->name, c->dp_overlap, c->bucket_mb, ab_dp_sync_name(c->dp_sync),
             c->ps_shards, t->be->ops->name, t->lay.tp, t->lay.pp, c->pp_schedule);
    const int64_t h = (int64_t)(fnv1a(desc) >> 1);
    int64_t lo = h, hi = h;
    AB_TRY(cm->ops->allreduce_i64(cm, &lo, 1, AB_RED_MIN));
    AB_TRY(cm->ops->allreduce_i64(cm, &hi, 1, AB_RED_MAX));
    if (lo == hi) return 0;
    int64_t *all = malloc((size_t)cm->size * sizeof *all);
    if (!all) return ab_errorf("ranks disagree on the world configuration (and out of memory to say how)");
    char others[128] = "";
    if (cm->ops->allgather_i64(cm, h, all) == 0)
        for (int r = 0, len = 0; r < cm->size && len < (int)sizeof others - 8; r++)
            if (all[r] != h) len += snprintf(others + len, sizeof others - (size_t)len, "%s%d", len ? "," : "", r);
    free(all);
    return ab_errorf("ranks disagree on the world configuration: rank %d of %d has [%s]; ranks with a different "
                     "one: %s (launch every rank with the same options and data)",
                     cm->rank, cm->size, desc, others[0] ? others : "?");
}

/* The grid's groups (core/parallel.h), each split from the world (collectives over it, called by
 * every rank in the same order): the data group holds the ranks of the same tensor block, the
 * tensor group the neighbours that share a model replica. Without model parallelism the data
 * group is the world itself. */
int ab_parallel_config_check(const ab_train_config *c, int world) {
    const int tp = c->tensor_parallel > 1 ? c->tensor_parallel : 1, pp = c->pipeline_parallel > 1 ? c->pipeline_parallel : 1;
    ab_layout l;
    AB_TRY(ab_layout_make(world, 0, tp, pp, &l));
    if (tp == 1 && pp == 1) return 0;
    char what[64];
    if (tp > 1 && pp > 1) snprintf(what, sizeof what, "--tensor-parallel %d --pipeline-parallel %d", tp, pp);
    else if (tp > 1) snprintf(what, sizeof what, "--tensor-parallel %d", tp);
    else snprintf(what, sizeof what, "--pipeline-parallel %d", pp);
    if (c->dp_sync == AB_DP_PS)
        return ab_errorf("--dp-sync ps with %s: the parameter server's shards of the weights and the model's split "
                         "are not combined; use --dp-sync ring",
                         what);
    if (c->checkpoint_dir)
        return ab_errorf("--checkpoint-dir with %s: checkpoints of a split model are not written; --save writes the "
                         "whole weights at the end",
                         what);
    if (c->grad_census)
        return ab_errorf("--grad-census with %s: the census counts whole tensors of one process; run it without "
                         "model parallelism",
                         what);
    return 0;
}

static int open_groups(trainer *t) {
    const ab_train_config *c = t->cfg;
    const int tp = c->tensor_parallel > 1 ? c->tensor_parallel : 1, pp = c->pipeline_parallel > 1 ? c->pipeline_parallel : 1;
    ab_comm *w = t->comm;
    if (ab_parallel_config_check(c, w->size) != 0) {
        t->rec->usage_error = 1;
        return -1;
    }
    AB_TRY(ab_layout_make(w->size, w->rank, tp, pp, &t->lay));
    t->tp = (ab_tp){.rank = t->lay.tp_rank, .size = t->lay.tp};
    if (tp == 1 && pp == 1) {
        t->dp = w;
        return 0;
    }
    /* colours: the coordinates the group's ranks share; keys: the one they differ in */
    const ab_layout *l = &t->lay;
    AB_TRY(w->ops->split(w, l->pp_rank * l->tp + l->tp_rank, l->dp_rank, &t->dp));
    if (tp > 1) AB_TRY(w->ops->split(w, l->pp_rank * l->dp + l->dp_rank, l->tp_rank, &t->tpc));
    if (pp > 1) AB_TRY(w->ops->split(w, l->dp_rank * l->tp + l->tp_rank, l->pp_rank, &t->ppc));
    t->tp.comm = t->tpc;
    return 0;
}

/* the communicator, then the backend on the GPU it chose */
static int open_world(trainer *t) {
    const ab_train_config *c = t->cfg;
    if (!c->workload) return ab_errorf("no workload provider in the training configuration");
    if (!c->platform) return ab_errorf("no platform (backends and communicators) in the training configuration");
    if (c->out_path && !(c->record && c->record->write))
        return ab_errorf("--out %s: no record writer in the training configuration", c->out_path);
    if (c->epochs < 1 || c->batch_size < 1 || c->accum_steps < 1 || c->log_interval < 1 || !(c->lr > 0.0f) ||
        c->train_subset < 0 || c->test_subset < 0 || c->warmup_steps < 0 || c->timing_skip_steps < 0)
        return ab_errorf("need epochs >= 1, batch size >= 1, accum steps >= 1, log interval >= 1, lr > 0, "
                         "subsets, warm-up and timing skip >= 0");
    if (c->allreduce_dtype != AB_F32 && !(c->allreduce_dtype == AB_F16 && c->precision == AB_PREC_AMP))
        return ab_errorf("--allreduce-dtype %s needs --precision amp (gradients are fp32 otherwise)",
                         ab_dtype_name(c->allreduce_dtype));
    ab_comm_kind kind;
    AB_TRY(ab_comm_parse(c->comm, &kind));
    /* the communicator first: a GPU rank's device is its node-local rank */
    AB_TRY(c->platform->comm_create(kind, c->device, c->comm_timeout_s, &t->comm));
    /* the GPU the communicator chose (node-local rank modulo the GPUs this process sees), so that
     * the backend and the nccl engine share it, also under a per-rank CUDA_VISIBLE_DEVICES; the
     * fallback notice of --device auto is printed even with --quiet: it changes what is measured */
    const int gpu = t->comm->device >= 0 ? t->comm->device : t->comm->local_rank;
    t->be = c->platform->backend_create(c->device, gpu, c->threads, t->comm->rank > 0);
    if (!t->be) {
        t->rec->usage_error = ab_error_is_usage(); /* an environment setting the backend refuses */
        return -1;
    }
    t->be->mem.limit = c->memory_limit;
    ab_comm_bind(t->comm, t->be);
    return open_groups(t);
}

/* the data, the model and its weights (initialised, or from --init-from), the same on every rank */
/* the model, whole or this rank's part of it (its tensor blocks, its pipeline stage's slots), and
 * its parameters initialised as a one-rank run draws them */
static int create_model(trainer *t) {
    const ab_train_config *c = t->cfg;
    ab_rng rng;
    ab_rng_seed(&rng, c->seed);
    if (t->lay.pp > 1) {
        AB_TRY(ab_pipe_build(t, &rng));
    } else {
        const ab_model_split split = {.tp = &t->tp};
        if (c->workload->create_model(c, &t->train->info, &split, &t->model) != 0) {
            t->rec->usage_error = ab_error_is_usage(); /* a model that cannot split as asked */
            return -1;
        }
    }
    if (t->lay.tp > 1 && t->model->tensor_parallel != t->lay.tp) {
        t->rec->usage_error = 1;
        return ab_usage_errorf("--tensor-parallel %d: model %s does not split its tensors among ranks", t->lay.tp,
                               c->model);
    }
    t->targets = ab_model_targets(t->model);
    if (t->targets != ab_sample_targets(&t->train->info))
        return ab_errorf("%s scores %d logits rows a sample, and %s gives %d labels a sample: the loss needs one label "
                         "a row",
                         c->model, t->targets, c->dataset, ab_sample_targets(&t->train->info));
    if (t->lay.pp > 1) return 0; /* ab_pipe_build has laid out and bound the slots */
    AB_TRY(ab_params_init(&t->params, t->be, c->precision, t->model->specs, t->model->n_specs, &rng));
    return ab_model_bind(t->model, &t->params);
}

static int build_model(trainer *t, ab_run_record *rec) {
    const ab_train_config *c = t->cfg;
    AB_TRY(load_data(t));
    AB_TRY(create_model(t));
    snprintf(rec->weights_from, sizeof rec->weights_from, "initialised (seed %llu)", (unsigned long long)c->seed);
    if (c->init_from) {
        if (!c->workload->load_weights) return ab_errorf("--init-from: this build reads no weights files");
        AB_TRY(t->lay.tp > 1 || t->lay.pp > 1
                   ? ab_shards_load(t, c->init_from, rec->weights_from, sizeof rec->weights_from)
                             : c->workload->load_weights(c->init_from, t->model, &t->params, rec->weights_from,
                                                         sizeof rec->weights_from));
        AB_TRY(ab_params_refresh(&t->params));
    }
    AB_TRY(check_world_config(t));
    AB_TRY(gather_gpus(t));
    /* replicas start from rank 0's weights and buffers, as DDP does (the seeded init agrees anyway);
     * under tensor parallelism each data group's rank 0 of the same block */
    if (t->dp->size > 1) {
        AB_TRY(t->dp->ops->broadcast(t->dp, t->params.master, t->params.n * sizeof(float), 0));
        if (t->params.n_bufs)
            AB_TRY(t->dp->ops->broadcast(t->dp, t->params.bufs, t->params.n_bufs * sizeof(float), 0));
        AB_TRY(ab_params_refresh(&t->params));
    }
    return 0;
}

/* the loss scaler: a static scale under --loss-scale S (amp only), else GradScaler's dynamic one */
static int init_scaler(trainer *t) {
    const ab_train_config *c = t->cfg;
    if (c->loss_scale > 0.0f && c->precision != AB_PREC_AMP)
        return ab_errorf("a static loss scale (%g) needs precision amp: %s trains without a loss scale",
                         (double)c->loss_scale, ab_precision_name(c->precision));
    if (c->loss_scale > 0.0f) return ab_scaler_init_static(&t->scaler, c->loss_scale);
    return ab_scaler_init(&t->scaler, c->precision == AB_PREC_AMP, c->init_scale, c->growth_factor, c->backoff_factor,
                          c->growth_interval);
}

int ab_dp_sync_parse(const char *s, ab_dp_sync *out) {
    if (strcmp(s, "ring") == 0) *out = AB_DP_RING;
    else if (strcmp(s, "ps") == 0) *out = AB_DP_PS;
    else return ab_errorf("--dp-sync %s: expected ring or ps", s);
    return 0;
}

const char *ab_dp_sync_name(ab_dp_sync s) { return s == AB_DP_PS ? "ps" : "ring"; }

/* the bytes on the wire of the gradients [lo, hi): the compute region's in fp16 under fp16 */
static double wire_bytes(const trainer *t, size_t lo, size_t hi) {
    const size_t nc = t->params.n_compute;
    const size_t in_c = lo < nc ? (hi < nc ? hi : nc) - lo : 0;
    return t->cfg->allreduce_dtype == AB_F16 ? 2.0 * (double)in_c + 4.0 * (double)(hi - lo - in_c)
                                             : 4.0 * (double)(hi - lo);
}

/* What each rank sends and receives per synchronisation, as the pattern moves the bytes (the
 * library may route them otherwise: MPI's reduce can be a tree). B the gradients on the wire,
 * rank r serving b_r of them (w_r bytes of fp32 weights), all weights 4n:
 *   ring  2(W-1)/W B each way (reduce-scatter, then all-gather);
 *   ps    sent: B - b_r pushed, (W-1) w_r pulled from it; received: (W-1) b_r, 4n - w_r. */
static int dp_traffic(trainer *t) {
    const int W = t->dp->size, world = t->comm->size;
    ab_run_record *rec = t->rec;
    if (W == 1) return 0;
    /* one entry per rank of the world; under tensor parallelism every data group moves its blocks'
     * gradients around its ring (the parameter server is not combined with it: W = world) */
    rec->dp_sent_per_rank = calloc((size_t)world, sizeof(double));
    rec->dp_received_per_rank = calloc((size_t)world, sizeof(double));
    if (!rec->dp_sent_per_rank || !rec->dp_received_per_rank) return ab_errorf("out of host memory");
    const size_t n = t->params.n;
    const double B = wire_bytes(t, 0, n);
    for (int r = 0; r < world; r++) {
        if (!t->ps) {
            rec->dp_sent_per_rank[r] = rec->dp_received_per_rank[r] = 2.0 * (W - 1) / W * B;
            continue;
        }
        size_t lo, hi;
        ab_ps_shard(n, t->cfg->ps_shards, r, &lo, &hi);
        const double b = wire_bytes(t, lo, hi), w = 4.0 * (double)(hi - lo);
        rec->dp_sent_per_rank[r] = (B - b) + (W - 1) * w;
        rec->dp_received_per_rank[r] = (W - 1) * b + (4.0 * (double)n - w);
    }
    return 0;
}

/* every shard of buf (n fp32 values, backend memory) from its server to every rank */
static int ps_share(trainer *t, float *buf) {
    for (int j = 0; j < t->cfg->ps_shards; j++) {
        size_t lo, hi;
        ab_ps_shard(t->params.n, t->cfg->ps_shards, j, &lo, &hi);
        if (hi > lo) AB_TRY(t->dp->ops->broadcast(t->dp, buf + lo, (hi - lo) * sizeof(float), j));
    }
    return 0;
}

/* the parameter server's pull: the updated weights from each server to every rank */
static int ps_pull(trainer *t) {
    const double t0 = ab_now();
    AB_TRY(ps_share(t, t->params.master));
    const double dt = ab_now() - t0;
    t->rec->ps_pull_time_s += dt;
    t->rec->comm_time_s += dt;
    return 0;
}

int ab_trainer_share_optimizer(trainer *t) {
    if (!t->ps) return 0;
    if (t->opt.s1) AB_TRY(ps_share(t, t->opt.s1));
    if (t->opt.s2) AB_TRY(ps_share(t, t->opt.s2));
    return 0;
}

/* the optimizer, the scaler and what a step needs: the batch, its labels, the step's scalars,
 * the fp16 all-reduce bucket, the sample orders */
static int alloc_step(trainer *t) {
    const ab_train_config *c = t->cfg;
    AB_TRY(ab_optimizer_init(&t->opt, t->be, c->optimizer, t->params.n, c->lr, c->momentum, c->weight_decay));
    if (c->wd_exclude) AB_TRY(ab_optimizer_exclude(&t->opt, t->params.specs, t->params.n_specs));
    if (c->grad_census < 0) return ab_errorf("--grad-census %d: the interval must be >= 1 (0: no census)", c->grad_census);
    if (c->grad_census > 0) AB_TRY(ab_census_create(c->grad_census, &t->rec->census));
    AB_TRY(init_scaler(t));
    t->x_bytes = t->train->ops->batch_bytes(t->train, c->batch_size, t->params.compute_type);
    const int B = c->batch_size;
    const size_t R = (size_t)t->targets;
    if (!(t->x = ab_alloc_for(t->be, AB_MEM_ACTIVATIONS, t->x_bytes, "a batch of %d samples", B)) ||
        !(t->labels = ab_alloc_for(t->be, AB_MEM_ACTIVATIONS, (size_t)B * R * sizeof(int32_t), "a batch's %zu labels",
                                   (size_t)B * R)) ||
        !(t->stats = ab_alloc_for(t->be, AB_MEM_WORKSPACE, sizeof(step_stats), "the step's loss and flags")))
        return -1;
    if (!(c->bucket_mb > 0.0)) return ab_errorf("--bucket-mb %g: a bucket must hold more than 0 MB", c->bucket_mb);
    const int W = t->dp->size;
    if (c->dp_sync == AB_DP_PS && (c->ps_shards < 1 || c->ps_shards > W))
        return ab_errorf("--ps-shards %d: the servers are ranks of the world, 1 to %d", c->ps_shards, W);
    if (W > 1 && c->dp_sync == AB_DP_PS && c->inject_inf_step >= 0 && c->inject_inf_rank >= c->ps_shards)
        return ab_errorf("--inject-inf-rank %d serves no shard under --dp-sync ps --ps-shards %d: the fault goes into "
                         "a summed gradient, which only servers hold",
                         c->inject_inf_rank, c->ps_shards);
    t->overlap = W > 1 && c->dp_overlap;
    t->ps = W > 1 && c->dp_sync == AB_DP_PS;
    /* the parameter server always pushes bucket by bucket (after backward without overlap) */
    t->bucketed = t->overlap || t->ps;
    if (t->ps) ab_ps_shard(t->params.n, c->ps_shards, t->dp->rank, &t->own_lo, &t->own_hi);
    else t->own_lo = 0, t->own_hi = t->params.n;
    /* AMP and bf16: the update rounds the working copy as it writes the weights, in its own pass,
     * where it updates them all (under the parameter server the pulled shards change it too: the
     * step's start refreshes it whole) */
    if (t->params.compute_type != AB_F32 && !t->ps)
        AB_TRY(ab_optimizer_set_copy(&t->opt, t->params.compute_type, t->params.compute_weights, t->params.n_compute));
    AB_TRY(dp_traffic(t));
    t->rec->bucket_layout = ab_buckets_count(&t->params, c->bucket_mb);
    if (t->bucketed) {
        AB_TRY(ab_buckets_init(&t->buckets, &t->params, t->dp, c->bucket_mb, c->allreduce_dtype,
                               t->ps ? c->ps_shards : 0));
        t->rec->buckets = t->buckets.n;
    } else if (W > 1 && c->allreduce_dtype == AB_F16) {
        const size_t nc = t->params.n_compute;
        t->bucket_elems = nc < AB_ALLREDUCE_BUCKET_ELEMS ? nc : AB_ALLREDUCE_BUCKET_ELEMS;
        t->fp16_bucket = ab_alloc_for(t->be, AB_MEM_WORKSPACE, (t->bucket_elems ? t->bucket_elems : 1) * 2,
                                      "the fp16 all-reduce bucket");
        if (!t->fp16_bucket) return -1;
    }
    t->perm = malloc((size_t)t->train->n * sizeof(int32_t));
    t->eval_order = malloc((size_t)t->test->n * sizeof(int32_t));
    t->shard = malloc((size_t)c->batch_size * (size_t)c->accum_steps * sizeof(int32_t));
    t->checked = calloc((size_t)t->params.n_specs + 1, 1);
    if (!t->checked) return ab_errorf("out of host memory for the gradient checks");
    t->pred = malloc((size_t)t->test->n * R * sizeof(int32_t));
    t->hit = malloc((size_t)t->test->n * R);
    t->logits_h = malloc((size_t)c->batch_size * R * (size_t)t->model->n_classes * sizeof(float));
    t->labels_h = malloc((size_t)c->batch_size * R * sizeof(int32_t));
    if (!t->pred || !t->hit || !t->logits_h || !t->labels_h) return ab_errorf("out of host memory for the predictions");
    if (!t->perm || !t->eval_order || !t->shard) return ab_errorf("out of host memory for the sample order");
    for (int i = 0; i < t->test->n; i++) t->eval_order[i] = i;
    return t->lay.pp > 1 ? ab_pipe_buffers(t) : 0;
}

/* what the record says of the run before it starts */
static void describe_run(trainer *t, ab_run_record *rec) {
    const ab_train_config *c = t->cfg;
    rec->parameters = (long)t->params.n;
    rec->macs_per_sample = t->model->macs_per_sample;
    snprintf(rec->metric, sizeof rec->metric, "%s", t->test->metric ? t->test->metric : "accuracy");
    rec->seq_len = t->train->info.kind == AB_SAMPLE_TOKENS ? t->train->info.seq_len : 0;
    rec->model_notes = t->model->notes;
    rec->train_samples = t->train->n;
    rec->test_samples = t->test->n;
    snprintf(rec->train_data, sizeof rec->train_data, "%s", t->train->ops->describe(t->train));
    snprintf(rec->test_data, sizeof rec->test_data, "%s", t->test->ops->describe(t->test));
    const long group = (long)c->batch_size * c->accum_steps * t->dp->size;
    rec->total_steps = (t->train->n + group - 1) / group * c->epochs;
    if (c->max_steps > 0 && c->max_steps < rec->total_steps) rec->total_steps = c->max_steps;
    snprintf(rec->backend, sizeof rec->backend, "%s", t->be->ops->name);
    rec->world_size = t->comm->size;
    rec->rank = t->comm->rank;
    rec->data_parallel = t->lay.dp;
    rec->tensor_parallel = t->lay.tp;
    rec->pipeline_parallel = t->lay.pp;
    if (t->lay.pp > 1) snprintf(rec->pp_schedule, sizeof rec->pp_schedule, "%s", ab_pp_schedule_name(t->pipe.kind));
    snprintf(rec->comm_engine, sizeof rec->comm_engine, "%s", t->comm->size > 1 ? t->comm->ops->name : "none");
}

static int setup(trainer *t, ab_run_record *rec) {
    AB_TRY(open_world(t));
    AB_TRY(build_model(t, rec));
    AB_TRY(alloc_step(t));
    describe_run(t, rec);
    return ab_ckpt_setup(t);
}

/* The record's copy of the trainer's state before it is written: the scaler (its event arrays
 * stay the trainer's until teardown hands them over) and the memory counts. */
static void snapshot_record(trainer *t) {
    t->rec->scaler = t->scaler;
    if (t->be) t->rec->mem = t->be->mem;
}

static void teardown(trainer *t) {
    ab_ckpt_drain(t);
    if (t->bucketed) ab_buckets_drain(&t->buckets); /* no reduction left writing the gradients */
    snapshot_record(t);
    memset(&t->scaler, 0, sizeof t->scaler); /* the record owns the scaler's history now */
    /* what lives in the backend's memory, then what may still reach it (a data set mapped into it,
     * the communicator bound to it), then the backend itself: one path, whatever setup reached */
    ab_backend *be = t->be;
    if (be) {
        ab_release(be, AB_MEM_ACTIVATIONS, t->x, t->x_bytes);
        ab_release(be, AB_MEM_ACTIVATIONS, t->labels,
                   (size_t)t->cfg->batch_size * (size_t)t->targets * sizeof(int32_t));
        ab_release(be, AB_MEM_WORKSPACE, t->stats, sizeof(step_stats));
        if (t->fp16_bucket)
            ab_release(be, AB_MEM_WORKSPACE, t->fp16_bucket, (t->bucket_elems ? t->bucket_elems : 1) * 2);
        if (t->bucketed) ab_buckets_free(&t->buckets);
        ab_pipe_free(t); /* the slots after the first, and their buffers */
        ab_model_destroy(t->model);
        ab_optimizer_free(&t->opt);
        ab_params_free(&t->params);
    }
    ab_dataset_destroy(t->train);
    ab_dataset_destroy(t->test);
    if (t->dp != t->comm) ab_comm_destroy(t->dp);
    ab_comm_destroy(t->tpc);
    ab_comm_destroy(t->ppc);
    ab_comm_destroy(t->comm);
    t->train = t->test = NULL;
    t->comm = t->dp = t->tpc = t->ppc = NULL;
    if (be) be->ops->destroy(be);
    t->be = NULL;
    free(t->perm);
    free(t->eval_order);
    free(t->shard);
    free(t->checked);
    t->checked = NULL;
    free(t->pred);
    free(t->hit);
    free(t->labels_h);
    free(t->logits_h);
    ab_ckpt_free(t);
}

/* Under data parallelism each rank's batch statistics move its own running statistics; as DDP
 * (broadcast_buffers) does, rank 0's are the ones evaluated and saved. */
static int sync_buffers(trainer *t) {
    if (t->dp->size == 1 || t->params.n_bufs == 0) return 0;
    const double t0 = ab_now();
    AB_TRY(t->dp->ops->broadcast(t->dp, t->params.bufs, t->params.n_bufs * sizeof(float), 0));
    t->rec->comm_time_s += ab_now() - t0;
    return 0;
}

/* loss and accuracy of the test set; and its own metric (in percent) when the data set has one:
 * then each batch's logits come back to the host for the predicted classes */
static int evaluate(trainer *t, double *loss, double *accuracy, double *metric) {
    ab_backend *be = t->be;
    const ab_dtype cdt = t->params.compute_type;
    const int B = t->cfg->batch_size, C = t->model->n_classes, N = t->test->n, R = t->targets;
    const int scored = t->test->ops->score != NULL;
    AB_TRY(sync_buffers(t));
    /* the compute copy of the weights the last update left (a step refreshes it when it starts) */
    AB_TRY(ab_params_refresh(&t->params));
    AB_TRY(be->ops->zero(be, t->stats, sizeof(step_stats)));
    for (int pos = 0; pos < N; pos += B) {
        const int b = N - pos < B ? N - pos : B;
        AB_TRY(t->test->ops->fill(t->test, t->eval_order + pos, b, 0, cdt, t->x, t->labels));
        const void *logits = t->model->logits;
        if (t->lay.pp > 1) {
            AB_TRY(ab_pipe_eval_forward(t, b, &logits));
            if (!logits) continue; /* a stage before the last: the last one scores */
        } else {
            const ab_pass pass = ab_pass_eval();
            AB_TRY(t->model->ops->forward(t->model, &t->params, t->x, b, &pass));
        }
        /* argmax of each row (b samples x R targets), the first on ties, as softmax_xent counts
         * hits: the record keeps them */
        const int rows = b * R;
        AB_TRY(be->ops->download(be, t->logits_h, logits, (size_t)rows * C * ab_dtype_size(cdt)));
        AB_TRY(be->ops->download(be, t->labels_h, t->labels, (size_t)rows * sizeof(int32_t)));
        for (int i = 0; i < rows; i++) {
            int am = 0;
            for (int j = 1; j < C; j++)
                if (ab_load(t->logits_h, (size_t)i * C + j, cdt) > ab_load(t->logits_h, (size_t)i * C + am, cdt))
                    am = j;
            t->pred[(size_t)pos * R + i] = am;
            t->hit[(size_t)pos * R + i] = am == t->labels_h[i];
        }
        AB_TRY(be->ops->softmax_xent(be, rows, C, cdt, logits, t->labels, 1.0f, cdt, NULL, &t->stats->loss_sum,
                                     &t->stats->correct));
    }
    if (t->lay.pp > 1) AB_TRY(ab_pipe_eval_share(t));
    step_stats s;
    AB_TRY(be->ops->download(be, &s, t->stats, sizeof s));
    const double targets = (double)N * R;
    *loss = (double)s.loss_sum / targets;
    *accuracy = 100.0 * s.correct / targets;
    *metric = scored ? t->test->ops->score(t->test, t->pred, N * R) : *accuracy;
    return 0;
}

int ab_shard_step(const int32_t *order, int n, int B, int W, int r, int32_t *out) {
    int m = 0;
    for (long blk = r; blk * B < n; blk += W)
        for (long i = blk * B; i < n && i < (blk + 1) * B; i++) out[m++] = order[i];
    return m;
}

/* ---- the data clock: seconds spent assembling batches, by the device's clock where the
 * backend keeps one (data_mark/data_time: the host sees only the launch), else the host's ---- */

static int data_clock_restart(trainer *t) {
    t->data_host_s = 0.0;
    double spent;
    return t->be->ops->data_time ? t->be->ops->data_time(t->be, &spent) : 0;
}

static int data_clock_read(trainer *t, double *seconds) {
    *seconds = t->data_host_s;
    return t->be->ops->data_time ? t->be->ops->data_time(t->be, seconds) : 0;
}

int ab_step_refresh(trainer *t) {
    if (t->copy_current) {
        t->copy_current = 0;
        return 0;
    }
    return ab_params_refresh(&t->params);
}

/* one micro-batch of samples idx[0 .. b) into t->x and t->labels, on the data clock */
int ab_fill_batch(trainer *t, const int32_t *idx, int b, int epoch, void *x) {
    ab_backend *be = t->be;
    const double t0 = ab_now();
    if (be->ops->data_mark) be->ops->data_mark(be, 1);
    AB_TRY(t->train->ops->fill(t->train, idx, b, ab_aug_seed(t, epoch), t->params.compute_type, x, t->labels));
    if (be->ops->data_mark) be->ops->data_mark(be, 0);
    t->data_host_s += ab_now() - t0;
    return 0;
}

/* ---- the gradient census (--grad-census, core/census.h): it reads gradients, never writes ---- */

/* the observer of a census step's backward: the gradient arriving at a layer's output, named as
 * the layer (its weight's name less ".weight"), pooled over the step's micro-batches */
static int census_activation(void *census, const ab_param_spec *w, ab_dtype t, size_t n, const void *dy) {
    char layer[256];
    snprintf(layer, sizeof layer, "%s", w->name);
    const size_t k = strlen(layer);
    if (k > 7 && strcmp(layer + k - 7, ".weight") == 0) layer[k - 7] = 0;
    return ab_census_add(census, layer, AB_CENSUS_ACTIVATION, n, t, dy);
}

/* every trained tensor's weight gradient as the step holds it: reduced over the world, not yet
 * unscaled (under amp still multiplied by the loss scale) */
static int census_weights(trainer *t, ab_census *census) {
    const ab_params *p = &t->params;
    for (int i = 0; i < p->n_specs; i++) {
        const ab_param_spec *s = &p->specs[i];
        if (s->region != AB_REGION_BUFFER)
            AB_TRY(ab_census_add(census, s->name, AB_CENSUS_WEIGHT, s->numel, AB_F32, p->grad + s->offset));
    }
    return 0;
}

/* The census observes optimizer step `step` (0-based) when it is due: t->census is then the open
 * census, which the step's backward shows its gradients to and its synchronisation its summed
 * weight gradients; NULL on every other step. */
static int census_open(trainer *t, long step, float scale) {
    ab_census *c = t->rec->census;
    t->census = NULL;
    if (!c || !ab_census_due(c, step + 1)) return 0;
    AB_TRY(ab_census_begin(c, t->be, step + 1, scale));
    t->census = c; /* open: census_close ends it */
    return 0;
}

/* closes the step's census, if it took one (after the step's rc, which it keeps); its line,
 * printed once the step went well */
static int census_close(trainer *t, int rc) {
    ab_census *census = t->census;
    t->census = NULL;
    if (!census) return rc;
    const int end = ab_census_end(census);
    if (rc != 0 || end != 0) return -1;
    if (!t->cfg->quiet && t->rec->rank == 0) {
        char line[1024];
        ab_census_summary(census, &census->records[census->n_records - 1], line, sizeof line);
        printf("%s\n", line);
    }
    return 0;
}

/* ---- 1. the micro-batches ---- */

/* This rank's m samples mine[0 .. m) of a step over n samples in the world: forward, loss and
 * backward per micro-batch of B. Each rank's loss gradient is scaled by 1/n and the all-reduce
 * sums: the mean over all n samples even when a last, short step leaves the ranks unequal
 * shares, and each rank's fp16 gradients are the very tensors one process accumulating the same
 * micro-batches would hold (a factor W would make them, and the fp16 sum on the wire, W times
 * larger: other roundings near fp16's subnormals, overflow W times sooner). */
static int micro_batches(trainer *t, const int32_t *mine, int m, int n, int epoch, float scale) {
    ab_backend *be = t->be;
    ab_params *p = &t->params;
    ab_model *model = t->model;
    const int B = t->cfg->batch_size, C = model->n_classes;
    AB_TRY(be->ops->zero(be, t->stats, sizeof(step_stats)));
    AB_TRY(ab_step_refresh(t));
    if (m == 0) AB_TRY(be->ops->zero(be, p->grad, p->n * sizeof(float))); /* a rank with no samples adds 0 */
    memset(t->checked, 0, (size_t)p->n_specs);
    for (int pos = 0; pos < m; pos += B) {
        const int b = m - pos < B ? m - pos : B;
        AB_TRY(ab_fill_batch(t, mine + pos, b, epoch, t->x));
        const ab_pass pass = ab_pass_train(t->passes++, t->cfg->seed);
        AB_TRY(model->ops->forward(model, p, t->x, b, &pass));
        /* the loss gradient d(scale * sum of the group's losses / (n R)) / dlogits over the b R
         * rows (the op divides by its rows itself) is written over the logits it comes from:
         * dlogits is the same buffer */
        void *const dlogits = model->logits;
        AB_TRY(be->ops->softmax_xent(be, b * t->targets, C, p->compute_type, model->logits, t->labels,
                                     scale * (float)b / (float)n, p->compute_type, dlogits, &t->stats->loss_sum, NULL));
        /* the step's last micro-batch: each final gradient may start its bucket's all-reduce */
        const int last = pos + b >= m;
        /* under loss scaling the ops folding the gradients check what they store (a gradient
         * infinite or NaN here is so in the all-reduced sum too: they never flag a step that the
         * check of the sum would pass) */
        const ab_grad_sink sink = {.mode = pos == 0 ? AB_GRAD_WRITE : AB_GRAD_ACCUMULATE,
                                   .observe = t->census ? census_activation : NULL, .ctx = t->census,
                                   .ready = last && t->overlap ? ab_buckets_ready : NULL,
                                   .ready_ctx = &t->buckets,
                                   .found_inf = t->scaler.enabled ? &t->stats->found_inf : NULL,
                                   .checked = t->checked};
        AB_TRY(model->ops->backward(model, p, &sink, t->x, dlogits, b));
    }
    return 0;
}

/* ---- 2. the synchronisation ---- */

/* The gradient all-reduce (sum), in fp32 or through the fp16 bucket. It starts once the whole
 * backward is done; ab_grad_sink (core/params.h) says where it could start per tensor instead,
 * overlapping the rest of backward. */
static int allreduce_grads(trainer *t) {
    ab_comm *cm = t->dp;
    ab_params *p = &t->params;
    ab_backend *be = t->be;
    const double t0 = ab_now();
    double bytes = (double)p->n * (double)sizeof(float);
    if (t->cfg->allreduce_dtype == AB_F16) { /* still loss-scaled here, as fp16 gradients are */
        /* through an fp16 bucket, as DDP's fp16 compression hook sends its buckets */
        const size_t nc = p->n_compute, n32 = p->n - nc;
        for (size_t off = 0; off < nc; off += t->bucket_elems) {
            const size_t k = nc - off < t->bucket_elems ? nc - off : t->bucket_elems;
            AB_TRY(be->ops->cast(be, k, AB_F32, p->grad + off, AB_F16, t->fp16_bucket));
            AB_TRY(cm->ops->allreduce(cm, t->fp16_bucket, k, AB_F16, AB_RED_SUM));
            AB_TRY(be->ops->accumulate(be, k, AB_F16, t->fp16_bucket, p->grad + off, 0, NULL));
        }
        /* the fp32 region (batch-norm scale and shift) has no fp16 copy: it travels in fp32 */
        if (n32) AB_TRY(cm->ops->allreduce(cm, p->grad + nc, n32, AB_F32, AB_RED_SUM));
        bytes = (double)nc * 2.0 + (double)n32 * sizeof(float);
    } else {
        AB_TRY(cm->ops->allreduce(cm, p->grad, p->n, AB_F32, AB_RED_SUM));
    }
    AB_TRY(be->ops->sync(be));
    const double dt = ab_now() - t0;
    t->rec->allreduce_time_s += dt;
    t->rec->allreduce_busy_s += dt;
    t->rec->comm_time_s += dt;
    t->rec->bytes_allreduced += bytes;
    t->rec->allreduce_calls++;
    return 0;
}

/* the buckets' end: what has not started starts, everything is waited for; the step's exposed
 * time is what it waited, the buckets' own times are counted apart */
static int finish_buckets(trainer *t, int reported) {
    ab_buckets *k = &t->buckets;
    const double exposed = k->exposed_s, busy = k->total_s;
    AB_TRY(ab_buckets_finish(k, reported));
    const ab_params *p = &t->params;
    const double dt = k->exposed_s - exposed;
    t->rec->allreduce_time_s += dt;
    t->rec->allreduce_busy_s += k->total_s - busy;
    t->rec->comm_time_s += dt;
    t->rec->bytes_allreduced += k->wire == AB_F16 ? (double)p->n_compute * 2.0 + (double)(p->n - p->n_compute) * 4.0
                                                  : (double)p->n * 4.0;
    t->rec->allreduce_calls++;
    return 0;
}

/* fault injection (--inject-inf-step): one gradient element becomes +inf. Planted after the
 * all-reduce, so that with one inject rank only the all-reduced flag can make the others skip
 * (under the parameter server, in the shard the rank serves: a rank serving none is refused). */
static int inject_fault(trainer *t, long step) {
    const ab_train_config *c = t->cfg;
    if (step != c->inject_inf_step || (c->inject_inf_rank >= 0 && c->inject_inf_rank != t->comm->rank)) return 0;
    const float inf = INFINITY;
    /* under the parameter server, where this rank holds the sum: its shard's middle (a shard
     * empty for want of elements takes none) */
    const size_t at = t->ps ? t->own_lo + (t->own_hi - t->own_lo) / 2 : t->params.n / 2;
    if (t->own_hi == t->own_lo) return 0;
    /* planted after the ops that checked the gradients: the tensor it lands in is read again */
    for (int i = 0; i < t->params.n_specs; i++) {
        const ab_param_spec *s = &t->params.specs[i];
        if (s->region != AB_REGION_BUFFER && at >= s->offset && at - s->offset < s->numel) t->checked[i] = 0;
    }
    return t->be->ops->upload(t->be, t->params.grad + at, &inf, sizeof inf);
}

/* the squares of the gradients [lo, lo + own) this rank adds to the norm, into stats->grad_sq:
 * all of them, but on a tensor group's ranks after the first only the split tensors' blocks (the
 * replicated tensors' gradients are the same on every rank of the group: counted once) */
static int grad_squares(trainer *t, size_t lo, size_t own) {
    ab_backend *be = t->be;
    const ab_params *p = &t->params;
    if (t->lay.tp_rank == 0) return be->ops->sum_squares(be, own, p->grad + lo, &t->stats->grad_sq);
    for (int i = 0; i < p->n_specs; i++) {
        const ab_param_spec *s = &p->specs[i];
        if (s->split_parts > 1 && s->region != AB_REGION_BUFFER)
            AB_TRY(be->ops->sum_squares(be, s->numel, p->grad + s->offset, &t->stats->grad_sq));
    }
    return 0;
}

/* the gradients reduced over the world (and counted, on a census step) and unscaled; the
 * overflow flag, the loss, the norm and the stop request read back once and agreed on by every
 * rank */
static int synchronise(trainer *t, long step, int n, int reported, float scale, step_sync *out) {
    ab_backend *be = t->be;
    ab_params *p = &t->params;
    ab_comm *cm = t->comm;
    if (t->dp->size > 1) AB_TRY(t->bucketed ? finish_buckets(t, t->overlap && reported) : allreduce_grads(t));
    AB_TRY(inject_fault(t, step));
    if (t->census && t->ps) { /* the census counts every summed gradient */
        const double t0 = ab_now();
        AB_TRY(ps_share(t, p->grad));
        t->rec->comm_time_s += ab_now() - t0;
    }
    if (t->census) AB_TRY(census_weights(t, t->census));
    /* this rank's summed gradients: all of them, or under the parameter server its shard */
    const size_t lo = t->own_lo, own = t->own_hi - t->own_lo;
    /* Without clipping, which reads the unscaled gradients, the optimizer unscales them in its own
     * pass: its one product g * (1 / scale) is the product unscale_check would store, and the check
     * (at factor 1) only reads. A scale of 1 or more keeps the flag the same: g * (1 / scale) is
     * finite exactly when g is. */
    const int fold = t->scaler.enabled && !(t->cfg->clip_grad_norm > 0.0f) && scale >= 1.0f;
    /* A lone process applies the gradients its backward stored (no all-reduce's sum, no shard of
     * another rank's): the ops that folded the compute region's gradients checked them as they
     * stored them (micro_batches' sink), so only the rest is read (the fp32 region: batch and layer
     * norm, the embedding tables; any tensor no such op wrote) */
    const int checked_in_pass = fold && cm->size == 1 && t->lay.pp == 1;
    const int clip = t->cfg->clip_grad_norm > 0.0f && own;
    /* With clipping, the norm's squares of the unscaled gradients come from the same pass as the
     * unscaling where they are of the same range (all this rank's: a tensor group's first rank) */
    const int squares_in_pass = clip && t->scaler.enabled && t->lay.tp_rank == 0;
    if (t->scaler.enabled && own && checked_in_pass)
        AB_TRY(ab_grad_check_unchecked(p, t->checked, &t->stats->found_inf));
    else if (t->scaler.enabled && own)
        AB_TRY(be->ops->unscale_check(be, own, p->grad + lo, fold ? 1.0f : 1.0f / scale, &t->stats->found_inf,
                                      squares_in_pass ? &t->stats->grad_sq : NULL));
    if (clip && !squares_in_pass) AB_TRY(grad_squares(t, lo, own));
    step_stats s;
    AB_TRY(be->ops->download(be, &s, t->stats, sizeof s));
    int found_inf = s.found_inf != 0;
    /* The world adds up: the loss of each data group's samples once (from its tensor group's rank
     * 0: every rank of a tensor group has the same logits); the squares of the parameter
     * server's shards, or of the tensor groups' blocks (from data group rank 0: the replicas hold
     * the same summed gradients) */
    const int blocks = t->lay.tp > 1 || t->lay.pp > 1, scorer = t->lay.tp_rank == 0 && t->lay.pp_rank == t->lay.pp - 1;
    double sums[3] = {scorer ? s.loss_sum : 0.0, ab_stop_requested(),
                      t->ps || (blocks && t->lay.dp_rank == 0) ? (double)s.grad_sq : 0.0};
    if (cm->size > 1) {
        const double t0 = ab_now();
        AB_TRY(ab_comm_flag_max(cm, &found_inf));
        AB_TRY(cm->ops->allreduce_f64(cm, sums, 3, AB_RED_SUM));
        t->rec->comm_time_s += ab_now() - t0;
    }
    t->stop_any = sums[1] > 0;
    const double sq = t->ps || blocks ? sums[2] : (double)s.grad_sq;
    *out = (step_sync){.found_inf = found_inf,
                       .loss = sums[0] / ((double)n * t->targets),
                       .grad_norm = sqrt(sq),
                       .unscale = fold ? 1.0f / scale : 1.0f};
    return 0;
}

/* ---- 3. the update ---- */

/* the scaler's decision; when the step is taken: clipping, the schedule's rate, the optimizer */
static int update(trainer *t, const step_sync *sy, long step, int epoch, ab_step_result *out) {
    const ab_train_config *c = t->cfg;
    ab_params *p = &t->params;
    if (!t->scaler.enabled && !isfinite(sy->loss))
        return ab_errorf("loss is %s at epoch %d step %ld (%s has no loss scaler to absorb it): diverged; "
                         "lower the learning rate",
                         isnan(sy->loss) ? "NaN" : "infinite", epoch, step, ab_precision_name(p->prec));
    const int r = ab_scaler_update(&t->scaler, sy->found_inf, step, epoch);
    if (r < 0) return -1;
    if (t->scaler.enabled && t->scaler.scale < 0x1.0p-24f)
        return ab_errorf("loss scale fell below 2^-24 at epoch %d step %ld: gradients are non-finite whatever the "
                         "scale (NaN in the data or a diverged model)",
                         epoch, step);
    out->applied = r;
    if (!r) return 0;
    /* clip_grad_norm_'s rule: scale by max / (norm + 1e-6) when that is below 1 */
    const size_t lo = t->own_lo, own = t->own_hi - t->own_lo; /* the weights this rank updates */
    if (c->clip_grad_norm > 0.0f && isfinite(sy->grad_norm) && sy->grad_norm > c->clip_grad_norm) {
        t->opt.grad_scale = (float)(c->clip_grad_norm / (sy->grad_norm + 1e-6)); /* inside the optimizer's pass */
        out->clip_factor = t->opt.grad_scale;
        out->clipped = 1;
    }
    if (sy->unscale != 1.0f) t->opt.grad_scale = sy->unscale; /* never with clipping (synchronise) */
    t->opt.lr = ab_lr_at(c->lr_schedule, c->lr, step, t->rec->total_steps, c->warmup_steps);
    AB_TRY(ab_optimizer_step_range(&t->opt, p->master, p->grad, lo, lo + own));
    t->copy_current = t->opt.copy != NULL && lo == 0 && lo + own >= p->n_compute;
    return t->ps ? ps_pull(t) : 0;
}

int ab_trainer_step(ab_trainer *t, const int32_t *order, int n, long step, int epoch, ab_step_result *out) {
    const int B = t->cfg->batch_size, W = t->dp->size;
    *out = (ab_step_result){.clip_factor = 1.0f, .scale = t->scaler.scale};
    if (W > 1 && (long)n > (long)W * B * t->cfg->accum_steps)
        return ab_errorf("a step of %d samples exceeds world %d x batch %d x accum steps %d", n, W, B,
                         t->cfg->accum_steps);
    /* order[0 .. n) is the world's step; this rank trains on its shard */
    const int m = W > 1 ? ab_shard_step(order, n, B, W, t->dp->rank, t->shard) : n;
    const int32_t *mine = W > 1 ? t->shard : order;
    if (t->bucketed) ab_buckets_begin(&t->buckets);
    AB_TRY(census_open(t, step, out->scale));
    step_sync sy = {.unscale = 1.0f};
    const ab_tp tp0 = t->tp;
    int rc = t->lay.pp > 1 ? ab_pipe_micro_batches(t, mine, m, n, epoch, out->scale)
                           : micro_batches(t, mine, m, n, epoch, out->scale);
    if (t->lay.tp > 1) { /* the tensor group's traffic of the training steps (evaluation's apart) */
        const int T = t->lay.tp;
        t->rec->tp_bytes_sent += t->tp.bytes_sent - tp0.bytes_sent;
        t->rec->tp_time_s += t->tp.time_s - tp0.time_s;
        t->rec->tp_calls += t->tp.calls - tp0.calls;
        t->rec->tp_model_bytes += t->model->tp_elems_per_sample * m * 2.0 * (T - 1) / T *
                                  (double)ab_dtype_size(t->params.compute_type);
    }
    if (rc == 0) rc = synchronise(t, step, n, m > 0, out->scale, &sy);
    AB_TRY(census_close(t, rc));
    out->loss = sy.loss;
    return update(t, &sy, step, epoch, out);
}

/* the recipe line's precision part, with its loss scaling */
static void describe_precision(const ab_train_config *c, char *prec, size_t n) {
    if (c->precision == AB_PREC_AMP && c->loss_scale > 0.0f)
        snprintf(prec, n,
                 "amp (fp16 compute, fp32 master weights; static loss scale %g%s: a step with an inf/NaN gradient "
                 "is skipped, the scale never changes)",
                 c->loss_scale, c->loss_scale == 1.0f ? ", i.e. no loss scaling" : "");
    else if (c->precision == AB_PREC_AMP)
        snprintf(prec, n,
                 "amp (fp16 compute, fp32 master weights; dynamic loss scale from %g, x%g after %d clean steps, "
                 "x%g on an overflow)",
                 c->init_scale, c->growth_factor, c->growth_interval, c->backoff_factor);
    else if (c->precision == AB_PREC_BF16)
        snprintf(prec, n, "bf16 (bf16 compute, fp32 master weights, no loss scaling)");
    else
        snprintf(prec, n, "fp32 (no loss scaling)");
}

/* The recipe a run uses, as one line: the optimizer, the learning rate and how warm-up and schedule
 * combine (a linear ramp from 0 over the warm-up steps, then the schedule over the steps left),
 * weight decay and what it leaves out, clipping, the batch, and the precision with its loss
 * scaling. */
void ab_recipe_describe(const ab_train_config *c, long total_steps, int world, char *buf, size_t n) {
    char opt[96], sched[320], wd[128], clip[64], prec[256];
    if (c->optimizer == AB_OPT_SGD && c->momentum > 0) snprintf(opt, sizeof opt, "sgd (momentum %g)", c->momentum);
    else if (c->optimizer == AB_OPT_SGD) snprintf(opt, sizeof opt, "sgd (no momentum)");
    else snprintf(opt, sizeof opt, "adamw (betas 0.9, 0.999, eps 1e-8)");
    const char *shape = ab_lr_schedule_shape(c->lr_schedule);
    const char *steps = total_steps == 1 ? "step" : "steps";
    if (c->warmup_steps > 0)
        snprintf(sched, sizeof sched, "lr %g, linear warm-up from 0 over %ld steps, then %s; %ld %s in all%s", c->lr,
                 c->warmup_steps, shape, total_steps, steps,
                 c->warmup_steps >= total_steps ? " (the warm-up outlasts the run: the rate never reaches lr)" : "");
    else
        snprintf(sched, sizeof sched, "lr %g, %s, no warm-up; %ld %s in all", c->lr, shape, total_steps, steps);
    if (c->weight_decay > 0)
        snprintf(wd, sizeof wd, "weight decay %g (%s, %s)", c->weight_decay,
                 c->optimizer == AB_OPT_ADAMW ? "decoupled" : "L2",
                 c->wd_exclude ? "not on biases and norm weights" : "on every parameter");
    else
        snprintf(wd, sizeof wd, "no weight decay");
    if (c->clip_grad_norm > 0) snprintf(clip, sizeof clip, ", gradients clipped to norm %g", c->clip_grad_norm);
    else clip[0] = 0;
    describe_precision(c, prec, sizeof prec);
    snprintf(buf, n, "%s, %s, %s%s; batch %d x %d micro-batch%s x %d rank%s; %s", opt, sched, wd, clip,
             c->batch_size, c->accum_steps, c->accum_steps == 1 ? "" : "es", world, world == 1 ? "" : "s", prec);
}

static void utc_now(char *buf, size_t cap) {
    time_t now = time(NULL);
    struct tm tm;
    gmtime_r(&now, &tm);
    strftime(buf, cap, "%Y-%m-%dT%H:%M:%SZ", &tm);
}

/* every rank's peak memory, for rank 0's record (a collective: all ranks call it) */
static int gather_peaks(trainer *t) {
    ab_run_record *rec = t->rec;
    if (!rec->peak_memory_per_rank && !(rec->peak_memory_per_rank = calloc((size_t)t->comm->size, sizeof(int64_t))))
        return ab_errorf("out of host memory");
    return t->comm->ops->allgather_i64(t->comm, (int64_t)t->be->mem.peak_total, rec->peak_memory_per_rank);
}

static int verbose(const trainer *t) { return !t->cfg->quiet && t->rec->rank == 0; }

/* the machine the run is on, for the record: what computes (the CPU's model, or the GPU's) and
 * its libraries, as the backend describes itself */
static int describe_device(trainer *t) {
    ab_run_record *rec = t->rec;
    AB_TRY(t->be->ops->describe(t->be, &rec->device));
    snprintf(rec->device_name, sizeof rec->device_name, "%s", rec->device.name);
    if (rec->device.dnn[0]) snprintf(rec->blas, sizeof rec->blas, "%s, %s", rec->device.blas, rec->device.dnn);
    else snprintf(rec->blas, sizeof rec->blas, "%s", rec->device.blas);
    return 0;
}

/* The modelled GPU step of this configuration (rank 0, which writes the record): on the run's own
 * GPU when it is on one the table knows, else on proj_gpu. A model that cannot be made (a GPU
 * without the run's precision) is said on stderr and left out: the run goes on. */
static void model_step(trainer *t) {
    const ab_train_config *c = t->cfg;
    ab_run_record *rec = t->rec;
    memset(&rec->step_model, 0, sizeof rec->step_model);
    if (!c->step_model || rec->rank != 0) return;
    const ab_gpu_spec *g = t->be->ops->is_host ? ab_gpu_spec_find(c->proj_gpu ? c->proj_gpu : "rtx3090")
                                               : ab_gpu_spec_match(rec->device.name);
    if (!g) return; /* a GPU the table does not have: its measured step stands alone */
    if (c->step_model(c, &t->train->info, g->name, &rec->step_model) != 0) {
        if (!c->quiet) fprintf(stderr, "ampbench: no modelled step on the %s: %s\n", g->label, ab_error());
        ab_error_clear();
        memset(&rec->step_model, 0, sizeof rec->step_model);
    }
}

/* the record's epochs and machine; the run's first lines: the model and the recipe (and, in bf16, how
 * the backend multiplies bf16 when it says) */
static int start_run(trainer *t) {
    const ab_train_config *c = t->cfg;
    ab_run_record *rec = t->rec;
    if (!(rec->epochs = calloc((size_t)c->epochs, sizeof *rec->epochs))) return ab_errorf("out of host memory");
    AB_TRY(describe_device(t));
    model_step(t);
    if (!verbose(t)) return 0;
    char split[256] = "";
    if (t->lay.tp > 1 || t->lay.pp > 1)
        snprintf(split, sizeof split, " on this rank (%d tensor x %d pipeline ranks a replica)", t->lay.tp, t->lay.pp);
    if (t->lay.pp > 1) {
        const ab_pipe *pp = &t->pipe;
        size_t len = strlen(split);
        len += (size_t)snprintf(split + len, sizeof split - len, "; stages of units (%s, %d micro-batches):",
                                ab_pp_schedule_name(pp->kind), pp->M);
        for (int s = 0; s < pp->P && len < sizeof split - 24; s++)
            len += (size_t)snprintf(split + len, sizeof split - len, " [%d,%d)", pp->bounds[s], pp->bounds[s + 1]);
    }
    printf("Model %s: %ld parameters%s, %.4g M multiply-adds per sample; %s, %d train and %d test samples\n", c->model,
           rec->parameters, split, rec->macs_per_sample / 1e6, c->dataset, t->train->n, t->test->n);
    char recipe[1024];
    ab_recipe_describe(c, rec->total_steps, t->dp->size, recipe, sizeof recipe);
    printf("Recipe: %s\n", recipe);
    /* a backend that says how it multiplies bf16 (the CPU's: on the CPU's bf16 instructions, or
     * emulated and why) says it on a third line of a bf16 run */
    const char *how = strstr(rec->device.dnn, "bf16 GEMM ");
    if (c->precision == AB_PREC_BF16 && how) printf("bf16 products: %s\n", how + strlen("bf16 GEMM "));
    return 0;
}


uint64_t ab_shuffle_seed(const trainer *t, int e) { return t->cfg->shuffle ? t->cfg->seed * 1000003ull + (uint64_t)e : 0; }

/* the sample order of epoch e: a seeded permutation, or the data set's order */
static void epoch_order(trainer *t, int e) {
    const int N = t->train->n;
    if (t->cfg->shuffle) {
        ab_rng r;
        ab_rng_seed(&r, ab_shuffle_seed(t, e));
        ab_rng_permutation(&r, t->perm, (size_t)N);
    } else {
        for (int i = 0; i < N; i++) t->perm[i] = i;
    }
}

/* The epoch's clocks (its wall clock and the data clock) start, once the device is done with what
 * was queued: from the tally's seconds so far (a resumed epoch's; 0 otherwise). The one place
 * they start: an epoch's beginning and the end of the run's set-up steps. */
static int clocks_start(trainer *t, epoch_tally *et) {
    AB_TRY(t->be->ops->sync(t->be));
    AB_TRY(data_clock_restart(t));
    et->t0 = ab_now() - et->sum.time_s;
    return 0;
}

/* a step's counts; the run's set-up steps (--timing-skip-steps) end at step `skip`, where the
 * epoch's clocks start again from 0 */
static int count_step(trainer *t, ab_epoch_record *er, epoch_tally *et, const ab_step_result *r, int n, long step) {
    er->steps++;
    er->samples += n;
    er->skipped_steps += !r->applied;
    er->clipped_steps += r->clipped;
    if (isfinite(r->loss)) {
        et->sum.loss_sum += r->loss;
        et->sum.finite_steps++;
        et->sum.interval_sum += r->loss;
        et->sum.interval_n++;
    }
    const long skip = t->cfg->timing_skip_steps;
    if (step > skip) {
        er->timed_samples += n;
    } else if (step == skip) {
        et->sum.data_s = et->sum.time_s = 0.0;
        AB_TRY(clocks_start(t, et));
        if (t->be->ops->timed_part_begins) t->be->ops->timed_part_begins(t->be);
    }
    return 0;
}

/* every log interval and at the epoch's last step: a point of the loss curve (the interval's
 * mean), and on an interval the progress line */
static int log_step(trainer *t, epoch_tally *et, const ab_step_result *r, long step, int e, int done, int last) {
    const int every = t->cfg->log_interval, N = t->train->n;
    if (step % every != 0 && !last) return 0;
    const double mean = et->sum.interval_n ? et->sum.interval_sum / et->sum.interval_n : NAN;
    const int rc = record_curve(t->rec, step, e, mean, t->scaler.scale);
    if (verbose(t) && step % every == 0)
        printf("Epoch: %d [%d/%d (%.0f%%)]\tLoss: %.6f%s\n", e, done, N, 100.0 * done / N, r->loss,
               r->applied ? "" : "\t(step skipped: gradient overflow)");
    et->sum.interval_sum = 0.0;
    et->sum.interval_n = 0;
    return rc;
}

long ab_steps_per_epoch(const trainer *t) {
    const long group = (long)t->cfg->batch_size * t->cfg->accum_steps * t->dp->size;
    return (t->train->n + group - 1) / group;
}

/* a checkpoint every --checkpoint-every steps, but not at an epoch's last step: the epoch's end
 * writes one after its evaluation */
static int checkpoint_due(const trainer *t, long step, long s, long steps_per_epoch) {
    const ab_train_config *c = t->cfg;
    return c->checkpoint_dir && c->checkpoint_every > 0 && step % c->checkpoint_every == 0 && s < steps_per_epoch;
}

/* the checkpoint of a run inside epoch e, s of its steps taken: the tally with the clocks read
 * (the data clock's seconds moved into the tally, as a device clock resets when read), and the
 * checkpoint's own time kept out of the epoch's */
static int checkpoint_in_epoch(trainer *t, long step, int e, long s, epoch_tally *et) {
    double data_s;
    AB_TRY(data_clock_read(t, &data_s));
    t->data_host_s = 0.0;
    et->sum.data_s += data_s;
    ab_epoch_tally now = et->sum;
    const double t0 = ab_now();
    now.time_s = t0 - et->t0;
    const int rc = ab_ckpt_write(t, step, e, s, &now);
    et->t0 += ab_now() - t0;
    return rc;
}

/* the steps of epoch e and their times; *step counts the run's steps. A resumed run continues
 * its first epoch after the steps the checkpoint had taken, with their counts and tally. */
static int train_epoch(trainer *t, int e, long *step) {
    const ab_train_config *c = t->cfg;
    ab_run_record *rec = t->rec;
    ab_epoch_record *er = &rec->epochs[e - 1];
    const int N = t->train->n, group = c->batch_size * c->accum_steps * t->dp->size;
    const long steps_per_epoch = ab_steps_per_epoch(t);
    const long s0 = e == t->resume_epoch ? t->resume_epoch_step : 0;
    epoch_tally et = {0};
    if (s0 > 0) et.sum = t->resume_tally; /* er holds the checkpoint's counts */
    else *er = (ab_epoch_record){.epoch = e};
    epoch_order(t, e);
    AB_TRY(clocks_start(t, &et));
    for (long s = s0; s < steps_per_epoch; s++) {
        /* under W > 1 ranks stop together, on the all-reduced request of the previous step */
        const int stop = t->comm->size > 1 ? t->stop_any : ab_stop_requested();
        if (stop || (c->max_steps > 0 && *step >= c->max_steps)) {
            rec->interrupted = stop;
            /* a run asked to stop keeps where it is, before the partial epoch's evaluation */
            if (stop && c->checkpoint_dir) AB_TRY(checkpoint_in_epoch(t, *step, e, s, &et));
            break;
        }
        const int pos = (int)(s * group), n = N - pos < group ? N - pos : group;
        ab_step_result r;
        AB_TRY(ab_trainer_step(t, t->perm + pos, n, *step, e, &r));
        ++*step;
        AB_TRY(count_step(t, er, &et, &r, n, *step));
        AB_TRY(log_step(t, &et, &r, *step, e, pos + n, s == steps_per_epoch - 1));
        if (checkpoint_due(t, *step, s + 1, steps_per_epoch)) AB_TRY(checkpoint_in_epoch(t, *step, e, s + 1, &et));
    }
    AB_TRY(t->be->ops->sync(t->be));
    er->time_s = ab_now() - et.t0;
    double data_s;
    AB_TRY(data_clock_read(t, &data_s));
    er->data_time_s = data_s + et.sum.data_s;
    er->compute_time_s = er->time_s - er->data_time_s;
    er->train_loss = et.sum.finite_steps ? et.sum.loss_sum / et.sum.finite_steps : NAN;
    return 0;
}

/* after epoch e: the test set, the epoch's line, the record rewritten */
static int finish_epoch(trainer *t, int e, long step) {
    const ab_train_config *c = t->cfg;
    ab_run_record *rec = t->rec;
    ab_epoch_record *er = &rec->epochs[e - 1];
    const double te = ab_now();
    AB_TRY(evaluate(t, &er->test_loss, &er->test_accuracy, &er->test_metric));
    er->eval_time_s = ab_now() - te;
    const size_t np = (size_t)t->test->n * (size_t)t->targets; /* one prediction a target */
    if (!rec->test_pred) {
        rec->test_pred = malloc(np * sizeof(int32_t));
        rec->test_hit = malloc(np);
        if (!rec->test_pred || !rec->test_hit) return ab_errorf("out of host memory for the predictions");
    }
    memcpy(rec->test_pred, t->pred, np * sizeof(int32_t));
    memcpy(rec->test_hit, t->hit, np);
    rec->n_test_pred = (int)np;
    rec->n_classes = t->model->n_classes;
    rec->n_epochs = e;
    snapshot_record(t);
    if (t->be->ops->describe) AB_TRY(t->be->ops->describe(t->be, &rec->device));
    AB_TRY(gather_peaks(t));
    if (t->lay.pp > 1) AB_TRY(ab_pipe_record(t));
    if (verbose(t))
        printf("Epoch %d done: %.3f s, train loss %.4f, test loss %.4f, test accuracy %.2f%%, skipped steps %ld, "
               "loss scale %g\n",
               e, er->time_s, er->train_loss, er->test_loss, er->test_accuracy, er->skipped_steps,
               (double)t->scaler.scale);
    fflush(stdout);
    if (c->out_path && rec->rank == 0) AB_TRY(c->record->write(c->out_path, c, rec));
    /* the epoch's end: the next one starts at its first step (an interrupted epoch has its own) */
    if (c->checkpoint_dir && !rec->interrupted) AB_TRY(ab_ckpt_write(t, step, e + 1, 0, NULL));
    return 0;
}

/* the end of a run that did not fail: the device's last word, the weights (also of an
 * interrupted run: they are what it trained), the complete record */
static int finish_run(trainer *t) {
    const ab_train_config *c = t->cfg;
    ab_run_record *rec = t->rec;
    AB_TRY(ab_ckpt_finish(t));
    snapshot_record(t);
    if (t->be->ops->describe) AB_TRY(t->be->ops->describe(t->be, &rec->device));
    AB_TRY(gather_peaks(t));
    if (c->save_path) {
        if (!c->workload->save_weights) return ab_errorf("--save: this build writes no weights files");
        AB_TRY(sync_buffers(t));
        if (t->lay.tp > 1 || t->lay.pp > 1) AB_TRY(ab_shards_save(t, c->save_path));
        else if (rec->rank == 0) AB_TRY(c->workload->save_weights(c->save_path, t->model, &t->params));
    }
    rec->complete = !rec->interrupted;
    if (c->out_path && rec->rank == 0) AB_TRY(c->record->write(c->out_path, c, rec));
    return 0;
}

/* a run that did not fit still leaves its record: what was asked for and what it held */
static void keep_refused_record(trainer *t) {
    const ab_train_config *c = t->cfg;
    if (!t->be || !t->be->mem.oom || !c->out_path || t->rec->rank != 0) return;
    char why[1024];
    snprintf(why, sizeof why, "%s", ab_error());
    snapshot_record(t);
    if (c->record->write(c->out_path, c, t->rec) != 0) fprintf(stderr, "ampbench: %s\n", ab_error());
    ab_errorf("%s", why);
}

int ab_train_run(const ab_train_config *cfg, ab_run_record *rec) {
    memset(rec, 0, sizeof *rec);
    utc_now(rec->started_at, sizeof rec->started_at);
    trainer t = {.cfg = cfg, .rec = rec};
    int rc = setup(&t, rec);
    if (rc == 0) rc = start_run(&t);
    long step = 0;
    int e0 = 1;
    if (rc == 0 && cfg->resume) rc = ab_ckpt_resume(&t, &step, &e0);
    for (int e = e0; rc == 0 && e <= cfg->epochs && !rec->interrupted; e++) {
        /* the step limit reached; but an epoch resumed at it still ends (evaluated, recorded) */
        const int resumed_inside = e == t.resume_epoch && t.resume_epoch_step > 0;
        if (cfg->max_steps > 0 && step >= cfg->max_steps && !resumed_inside) break;
        rc = train_epoch(&t, e, &step);
        if (rc == 0) rc = finish_epoch(&t, e, step);
    }
    if (rc == 0) rc = finish_run(&t);
    if (rc != 0) keep_refused_record(&t);
    teardown(&t);
    return rc;
}

int ab_trainer_create(const ab_train_config *cfg, ab_run_record *rec, ab_trainer **out) {
    memset(rec, 0, sizeof *rec);
    *out = NULL;
    trainer *t = calloc(1, sizeof *t);
    if (!t) return ab_errorf("out of host memory");
    t->cfg = cfg;
    t->rec = rec;
    if (setup(t, rec) != 0) {
        teardown(t); /* the record keeps what it held, and an out-of-memory refusal */
        free(t);
        return -1;
    }
    *out = t;
    return 0;
}

const ab_params *ab_trainer_params(const ab_trainer *t) { return &t->params; }
const ab_scaler *ab_trainer_scaler(const ab_trainer *t) { return &t->scaler; }
ab_comm *ab_trainer_comm(const ab_trainer *t) { return t->comm; }
int ab_trainer_train_samples(const ab_trainer *t) { return t->train->n; }

int ab_trainer_weights(ab_trainer *t, float *host) {
    return t->be->ops->download(t->be, host, t->params.master, t->params.n * sizeof(float));
}

int ab_trainer_evaluate(ab_trainer *t, double *loss, double *accuracy) {
    double metric;
    return evaluate(t, loss, accuracy, &metric);
}

void ab_trainer_destroy(ab_trainer *t) {
    if (!t) return;
    teardown(t);
    free(t);
}

void ab_run_record_free(ab_run_record *rec) {
    free(rec->epochs);
    free(rec->curve);
    free(rec->peak_memory_per_rank);
    free(rec->gpu_per_rank);
    free(rec->dp_sent_per_rank);
    free(rec->dp_received_per_rank);
    free(rec->pp_busy_s); /* with pp_wait_s, pp_bytes_sent, pp_bytes_model and pp_params */
    ab_census_free(rec->census);
    free(rec->test_pred);
    free(rec->test_hit);
    free(rec->resumed_at);
    ab_scaler_free(&rec->scaler);
    memset(rec, 0, sizeof *rec);
}
