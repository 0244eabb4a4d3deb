/* The trainer's insides, shared by the training loop (core/train.c) and its checkpoints
 * (core/resume.c). Nothing outside core/ includes this. */
#ifndef AB_TRAIN_INTERNAL_H
#define AB_TRAIN_INTERNAL_H

#include "buckets.h"
#include "parallel.h"
#include "pipeline.h"
#include "params.h"
#include "train.h"

/* per-step scalars the host reads back: one small download per step */
typedef struct {
    float loss_sum;
    int32_t correct;
    int32_t found_inf;
    float grad_sq; /* sum of the squared (unscaled) gradients, when clipping */
} step_stats;

/* what a step's synchronisation leaves for its update: the same on every rank */
typedef struct {
    int found_inf;    /* some gradient of some rank is inf or NaN */
    double loss;      /* the world's mean (unscaled) loss */
    double grad_norm; /* of the unscaled gradients (0 when not clipping) */
    /* the factor the update still takes the gradients by: 1 once they are unscaled in place, the
     * scale's inverse when the unscaling is left to the optimizer's pass */
    float unscale;
} step_sync;

enum { AB_PP_MAX_STAGES = 64, AB_PP_MAX_MICRO = 4096 };

/* this rank's pipeline stage (core/pipe_train.c) */
typedef struct {
    int P, s;              /* stages, this rank's */
    ab_pp_schedule kind;
    int M;                 /* micro-batches a step (the accumulation steps) */
    int K;                 /* slots: micro-batches in flight at most (ab_pp_slots) */
    int units, *bounds;    /* the model's units; the cut (P + 1 bounds) */
    double stage_macs[AB_PP_MAX_STAGES]; /* each stage's multiply-adds a sample (the record's) */
    ab_model **slot;       /* (K) this stage's model, once per slot; slot[0] is the trainer's model */
    void **x;              /* (K) each slot's batch (x[0] the trainer's) */
    void **in;             /* (K) each slot's input from the stage before (a stage after the first) */
    void *dout;            /* the gradient received from the stage after (a stage before the last) */
    size_t in_bytes, out_bytes;
    void *eval_share;      /* the test set's predictions, sent from the last stage to the others */
    size_t eval_bytes;
    ab_pp_item *items;     /* (6 M + 4) the step's program */
    double busy_s, wait_s, bytes_sent; /* the training steps: computing, waiting in exchanges, bytes sent */
    long steps, micro_batches;
} ab_pipe;

struct ab_trainer {
    const ab_train_config *cfg;
    ab_run_record *rec;
    ab_backend *be;
    ab_model *model;
    ab_params params;
    ab_optimizer opt;
    ab_scaler scaler; /* the live loss scaler; the record gets a copy when it is written */
    ab_dataset *train, *test;
    void *x;               /* one micro-batch as the data set assembles it, in compute type */
    int32_t *labels;       /* (B, targets) */
    int targets;           /* labels, and logits rows, per sample (ab_model_targets): the loss is the
                              mean over every sample's every target */
    step_stats *stats;     /* backend memory */
    int32_t *perm;         /* host: the epoch's sample order */
    int32_t *eval_order;   /* host: 0, 1, ... (test samples), the test set's order */
    size_t x_bytes;
    long passes;           /* training forward passes so far: the next one's index (ab_pass) */
    double data_host_s;    /* host seconds spent assembling batches since the data clock restarted */
    ab_comm *comm;  /* the world */
    ab_comm *dp;    /* the data-parallel group: the gradients' all-reduce, the samples' shards (the world
                       itself without model parallelism) */
    ab_comm *tpc;   /* the tensor group's communicator (NULL without tensor parallelism) */
    ab_layout lay;  /* this rank's place in the data x tensor x pipeline grid */
    ab_tp tp;       /* the tensor group as the model sees it, with its traffic */
    ab_comm *ppc;   /* the pipeline group's communicator (NULL without pipeline parallelism) */
    ab_pipe pipe;
    int32_t *shard; /* (batch * accum steps) this rank's samples of the step, host */
    /* host, one byte a spec: the tensors whose gradients of this step an op folding them checked
     * into stats->found_inf (ab_grad_sink) */
    unsigned char *checked;
    void *fp16_bucket;     /* fp16 all-reduce bucket (bucket_elems), under --allreduce-dtype fp16 */
    size_t bucket_elems;
    int stop_any;   /* some rank was asked to stop (all-reduced each step) */
    int32_t *pred;  /* (test samples x targets) predicted classes: the record's and a data set's own metric */
    uint8_t *hit;   /* (test samples x targets) 1 where the prediction was right */
    void *logits_h; /* (batch x targets, classes) host copy of a batch's logits */
    int32_t *labels_h;        /* (batch x targets) host copy of a batch's labels */
    struct ab_census *census; /* the census observing this step (census_open), NULL on the others */
    int overlap;         /* the gradient buckets are reduced while backward runs */
    int ps;              /* --dp-sync ps in a world of more than one rank */
    int bucketed;        /* the gradients travel in buckets (overlap, or the parameter server) */
    /* the last update refreshed the whole AMP working copy in its own pass (ab_optimizer_set_copy):
     * the next step's forward reads it as it is; taken by ab_step_refresh */
    int copy_current;
    ab_buckets buckets;
    size_t own_lo, own_hi; /* the weights this rank updates: all, or under ps its shard (may be empty) */
    /* checkpoints: host copies of the state (core/resume.c), and where a resumed run continues */
    ab_train_state state;
    int resume_epoch;      /* the epoch the resumed run continues in (0: not resumed) */
    long resume_epoch_step; /* ... after this many of its steps */
    ab_epoch_tally resume_tally;
};
typedef struct ab_trainer trainer;

/* --dp-sync ps: every server's shard of the optimizer state to every rank (a collective; each
 * server holds only its own shard's current state), so that rank 0 can write it all */
int ab_trainer_share_optimizer(trainer *t);

/* what an epoch adds up between its steps: the tally a checkpoint keeps, and the clocks */
typedef struct {
    ab_epoch_tally sum; /* sum.time_s and sum.data_s: the epoch's seconds before a resume */
    double t0;          /* when the epoch's clock started (again after the run's set-up steps) */
} epoch_tally;

/* a micro-batch of samples idx[0 .. b) into x (compute type) and t->labels, timed as data */
int ab_fill_batch(trainer *t, const int32_t *idx, int b, int epoch, void *x);
/* a step's start: the working copy refreshed from the master weights, unless the last update
 * already wrote it (copy_current, which this takes) */
int ab_step_refresh(trainer *t);

/* ---- core/pipe_train.c: pipeline parallelism ---- */
/* the cut, this stage's slot models (t->model the first) and the parameters (initialised with rng
 * as a one-rank run draws them), each slot bound */
int ab_pipe_build(trainer *t, ab_rng *rng);
/* the slots' batches and inputs, the received gradient, the predictions' buffer (after alloc_step
 * has made t->x) */
int ab_pipe_buffers(trainer *t);
void ab_pipe_free(trainer *t);
/* micro_batches' work under the schedule: this rank's m samples of a step of n */
int ab_pipe_micro_batches(trainer *t, const int32_t *mine, int m, int n, int epoch, float scale);
/* an evaluation batch (in t->x) through this stage; *logits the model's on the last stage, else NULL */
int ab_pipe_eval_forward(trainer *t, int b, const void **logits);
/* the last stage's evaluation (t->stats, t->pred, t->hit) to every stage */
int ab_pipe_eval_share(trainer *t);
/* the stages' times and bytes into the record (a collective over the pipeline group) */
int ab_pipe_record(trainer *t);

/* ---- core/shards.c: weights files under tensor and pipeline parallelism ---- */
/* --init-from: the whole file (one-rank names and shapes) into a host copy of the whole model,
 * each rank keeping its blocks of its stage's tensors; from gets the loader's account */
int ab_shards_load(trainer *t, const char *path, char *from, size_t cap);
/* --save: world rank 0 gathers every tensor's blocks from the ranks of data rank 0 that hold them
 * (point to point over the world) and writes the whole model. Collective over the world. */
int ab_shards_save(trainer *t, const char *path);

/* ---- core/resume.c ---- */
/* checks the options (and, unless resuming, that the folder holds no checkpoint); allocates the
 * host state. Collective. */
int ab_ckpt_setup(trainer *t);
/* writes the checkpoint of the run at `step` steps, next in epoch `epoch` after epoch_step of its
 * steps, with the tally of that epoch so far (NULL when epoch_step is 0). Collective. */
int ab_ckpt_write(trainer *t, long step, int epoch, long epoch_step, const ab_epoch_tally *tally);
/* --resume: continues from the folder's newest checkpoint; *step and *epoch say where (unchanged
 * when there is none). Collective. */
int ab_ckpt_resume(trainer *t, long *step, int *epoch);
/* the end of a run: the checkpoint being written finishes (its error is the run's). Collective. */
int ab_ckpt_finish(trainer *t);
/* waits for a checkpoint still being written (a failed run's): first thing in teardown, before
 * the model and the buffers it reads go */
void ab_ckpt_drain(trainer *t);
void ab_ckpt_free(trainer *t);
/* the seeds of epoch e's sample order (0: the data set's order) and augmentation (0: none) */
uint64_t ab_shuffle_seed(const trainer *t, int e);
uint64_t ab_aug_seed(const trainer *t, int e);
/* optimizer steps of one epoch (the world's) */
long ab_steps_per_epoch(const trainer *t);

#endif
