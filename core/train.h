/* One training run, top to bottom: data -> forward -> loss -> backward -> loss scaler ->
 * optimizer, with evaluation after each epoch and a result record rewritten after each epoch. */
#ifndef AB_TRAIN_H
#define AB_TRAIN_H

#include <signal.h>
#include <stdint.h>

#include "ab.h"
#include "backend.h"
#include "comm.h"
#include "dataset.h"
#include "model.h"
#include "optim.h"
#include "scaler.h"
#include "stepmodel.h"
#include "trainstate.h"

typedef struct ab_train_config ab_train_config;
struct ab_run_record;

/* Writes the run's record wherever --out says (out_path), in the program's format: the core holds
 * the record (ab_run_record) and writes it at each epoch's end and at the end of the run through
 * this table alone (ampbench's: record/record.h, JSON). */
typedef struct ab_record_ops {
    int (*write)(const char *path, const ab_train_config *c, const struct ab_run_record *r);
} ab_record_ops;

/* How data-parallel ranks combine their gradients (--dp-sync, docs/data-parallel.md):
 *   RING  every rank all-reduces the gradients and updates all the weights (DDP);
 *   PS    a parameter server: each rank pushes its gradients to the servers, ranks 0 .. K-1, each
 *         owning a contiguous 1/K of the weights (ab_ps_shard); a server sums its shard, updates it
 *         and sends the new weights back to every rank. */
typedef enum { AB_DP_RING = 0, AB_DP_PS = 1 } ab_dp_sync;
int ab_dp_sync_parse(const char *s, ab_dp_sync *out);
const char *ab_dp_sync_name(ab_dp_sync s);

/* A run's modelled GPU step (core/stepmodel.h): what the projection takes as its step when the
 * run is not on a GPU, and what a GPU run's measured step is set beside. */
typedef struct {
    int valid;
    char gpu[24], gpu_label[64]; /* the table's name and label */
    ab_step_estimate est;
    ab_step_eff eff;
} ab_step_model_result;

/* A workload provider: what turns the names in a configuration into a data set and a model.
 * The core knows none of them; ampbench and the tests hand it the registry of models/ and
 * data_loaders/ (models/registry.c). */
typedef struct ab_workload_ops {
    /* opens cfg->dataset's training and test sets (cfg->data_dir, the subsets), mapped into be */
    int (*open_data)(const ab_train_config *cfg, ab_backend *be, ab_dataset **train, ab_dataset **test);
    /* creates cfg->model for samples like s, micro-batches up to cfg->batch_size, split as split
     * says (NULL: whole; core/model.h); split->tp outlives the model */
    int (*create_model)(const ab_train_config *cfg, const ab_sample_info *s, const ab_model_split *split,
                        ab_model **out);
    /* Optional (NULL: the provider has no weights files). load_weights replaces the initial
     * weights (and buffers) with a file's, checking every name, shape and dtype, and writes to
     * from (cap bytes) a one-line account of which tensors came from the file; save_weights
     * writes the fp32 master weights and the buffers. */
    int (*load_weights)(const char *path, ab_model *m, ab_params *p, char *from, size_t cap);
    int (*save_weights)(const char *path, const ab_model *m, const ab_params *p);
} ab_workload_ops;

/* The platform: what turns the device and communicator names of a configuration into a backend
 * and a communicator engine. The core calls no backend's or engine's constructor; ampbench and
 * the tests hand it the table of what this build has (platform/platform.c). */
typedef struct ab_platform_ops {
    /* the engine of kind for device (AB_COMM_AUTO: the platform's choice), its timeout set
     * (timeout_s <= 0: 300 s) and comm->device the GPU its rank is to use (-1: none). Called
     * before backend_create, which then puts the backend on that GPU. */
    int (*comm_create)(ab_comm_kind kind, const char *device, double timeout_s, ab_comm **out);
    /* the backend device names, on GPU index where it is a GPU's, threads for the CPU's loops;
     * NULL with ab_error(). quiet: no notice on stderr when "auto" falls back to the CPU. */
    ab_backend *(*backend_create)(const char *device, int index, int threads, int quiet);
    /* a backend in host memory, for a copy of the whole model that the run itself does not hold
     * (tensor parallelism's weights files, core/shards.c); NULL: such files are refused */
    ab_backend *(*host_create)(int threads);
} ab_platform_ops;

struct ab_train_config {
    const ab_workload_ops *workload; /* required */
    const ab_platform_ops *platform; /* required */
    const char *model;    /* "mlp" | "resnet50" | "resnet50-cifar" | ... (the provider's names) */
    const char *dataset;  /* "mnist" | "fashion-mnist" | "cifar10" | ... */
    const char *data_dir; /* folder holding the data set's files; NULL = the provider's default */
    const char *out_path; /* JSON result; NULL = none */
    const char *init_from; /* weights file to start from; NULL = the model's initialisation */
    const char *save_path; /* weights file written at the end (rank 0); NULL = none */
    const char *device;   /* "cpu" | "cuda" | "auto" */
    ab_precision precision;
    int epochs, batch_size, accum_steps, hidden;
    int width, blocks[4]; /* ResNet stage width and blocks (0 = the model's) */
    int train_subset, test_subset; /* first N samples of each split (0 = all) */
    int augment;                   /* the data set's training augmentation (crop, flip) */
    ab_lr_schedule lr_schedule;
    long warmup_steps;
    long max_steps; /* 0 = no limit: stop after this many optimizer steps in all */
    long timing_skip_steps; /* the run's first N steps are left out of time_s and samples/s */
    ab_optimizer_kind optimizer;
    float lr, momentum, weight_decay;
    int wd_exclude;       /* 1: biases and normalisation weights (specs marked no_decay) get no weight decay */
    float clip_grad_norm; /* > 0: gradients scaled to this global L2 norm when above it (after unscaling) */
    /* token sequences (BERT) */
    int max_seq_len;   /* positions a sequence is padded or cut to */
    const char *vocab; /* vocab.txt; NULL: the checkpoint's, else the bert-base-uncased one */
    float dropout;     /* hidden and attention dropout; < 0: the architecture's */
    uint64_t seed;
    float init_scale, growth_factor, backoff_factor; /* the dynamic loss scaler (amp) */
    int growth_interval;
    float loss_scale; /* > 0: a static loss scale instead (amp only; ab_scaler_init_static); 0: dynamic */
    int grad_census;  /* K > 0: a gradient census (core/census.h) at optimizer step 1 and every K after; 0: none */
    int log_interval; /* print and record the loss every this many steps */
    int threads;      /* CPU BLAS threads; 0 = library default */
    size_t memory_limit; /* > 0: the comparable total may not pass it (an 8 GB GPU, on any backend) */
    int shuffle, quiet;
    long inject_inf_step; /* fault injection: plant +inf in one gradient at this step (-1 = never) */
    int inject_inf_rank;  /* ... on this rank only (-1 = every rank) */
    /* data parallelism (core/comm.h) */
    const char *comm;         /* "auto" | "self" | "mpi" | "nccl" */
    ab_dtype allreduce_dtype; /* AB_F32, or AB_F16 under amp */
    int dp_overlap;           /* 1: gradient buckets all-reduced while backward runs (core/buckets.h); 0: after it */
    double bucket_mb;         /* the buckets' size (DDP's bucket_cap_mb; default 25) */
    ab_dp_sync dp_sync;       /* how the gradients meet: the ring all-reduce, or a parameter server */
    int ps_shards;            /* --dp-sync ps: the servers, ranks 0 .. K-1, each serving 1/K of the weights */
    double comm_timeout_s;    /* a collective that takes longer ends the run (<= 0: 300 s) */
    /* tensor parallelism (core/parallel.h): the model's split tensors cut among groups of this many
     * neighbouring ranks (0 or 1: none); the world is data x tensor groups */
    int tensor_parallel;
    /* pipeline parallelism (core/pipeline.h): the model's units cut into this many stages, each on
     * its own rank (0 or 1: none), running accum_steps micro-batches a step under pp_schedule; the
     * world is data x tensor x pipeline */
    int pipeline_parallel;
    int pp_schedule; /* ab_pp_schedule: 0 gpipe, 1 1f1b */
    /* projection of scaling beyond this machine: ring all-reduce bandwidth (B/s) and latency (s)
     * per step; a bandwidth <= 0 means the default, or the measured one where one was measured */
    double proj_gpu_bw, proj_gpu_latency, proj_node_bw, proj_node_latency;
    /* the GPU step model: a run not on a GPU projects from the modelled step of this
     * configuration on proj_gpu (a name of the GPU table, core/stepmodel.c; NULL: rtx3090, the
     * articles'); a GPU run is modelled on its own GPU where the table has it, beside its measured
     * step. step_model fills out for the model's samples s (the program's: ampbench's is
     * cli/model_step.c); NULL: no model, and the projection says its step is the CPU's. */
    const char *proj_gpu;
    int (*step_model)(const ab_train_config *c, const ab_sample_info *s, const char *gpu,
                      ab_step_model_result *out);
    /* checkpoints (core/trainstate.h): the program's store (NULL: this build writes none), the
     * folder (NULL: no checkpoints), a checkpoint every N optimizer steps (0: only at each epoch's
     * end and when the run is asked to stop), the newest K kept, and whether to continue from the
     * folder's newest checkpoint (a folder without one: from the start) */
    const struct ab_checkpoint_ops *checkpoints;
    /* the record's writer (NULL: this build writes none, and out_path is refused) */
    const ab_record_ops *record;
    const char *checkpoint_dir;
    long checkpoint_every;
    int keep_checkpoints;
    int resume;
};

/* Documented defaults of the projection (docs/data-parallel.md): PCIe 4.0 x16-class GPU links
 * and a 100 Gb/s-class network between nodes. */
#define AB_PROJ_GPU_BW 24e9
#define AB_PROJ_GPU_LATENCY 20e-6
#define AB_PROJ_NODE_BW 12.5e9
#define AB_PROJ_NODE_LATENCY 50e-6

void ab_train_config_defaults(ab_train_config *c);
/* What the model-parallel options say together for a world of `world` ranks: tensor groups that
 * divide it, and none of the features not combined with them. 0, or -1 with a one-line error. */
int ab_parallel_config_check(const ab_train_config *c, int world);
/* The effective recipe as one line (printed as the second line of every run): optimizer, lr,
 * warm-up and schedule, weight decay and its exclusions, clipping, batch, precision and loss scaling. */
void ab_recipe_describe(const ab_train_config *c, long total_steps, int world, char *buf, size_t n);

typedef struct {
    int epoch;
    double time_s, compute_time_s, data_time_s, eval_time_s;
    long steps, skipped_steps, clipped_steps, samples;
    long timed_samples; /* samples of the steps inside time_s (all but the run's first timing_skip_steps) */
    double train_loss, test_loss, test_accuracy;
    double test_metric; /* the data set's metric (rec->metric) in percent; accuracy when it has none */
} ab_epoch_record;

typedef struct {
    long step;
    int epoch;
    double loss;
    float scale;
} ab_loss_point;

typedef struct ab_run_record {
    char started_at[32];
    char backend[16], device_name[160], blas[300];
    long parameters, train_samples, test_samples;
    double macs_per_sample;
    char metric[16]; /* "accuracy" | "matthews" | "f1" */
    int seq_len;     /* token sequences: positions a sample has (0 for images) */
    long total_steps; /* optimizer steps the schedule spans */
    char train_data[160], test_data[160]; /* the data sets' descriptions */
    char weights_from[512];               /* which tensors came from --init-from, or the init used */
    const char *model_notes;
    ab_epoch_record *epochs;
    int n_epochs;
    ab_loss_point *curve;
    size_t n_curve, cap_curve;
    ab_scaler scaler;
    ab_mem mem;
    ab_device_info device; /* from the backend's describe op (is_host: the CPU; else the device) */
    ab_step_model_result step_model; /* the modelled GPU step (ab_train_config.step_model), valid or not */
    int complete, interrupted;
    int usage_error; /* the run was refused before training for what its options asked (a model that cannot
                        split as asked, a world that does not factor): a usage error, not a failure */
    long *resumed_at; /* (n_resumes) the optimizer step each --resume continued from */
    int n_resumes;
    char resumed_from[512]; /* the last checkpoint resumed from ("" when none) */
    long checkpoints_written;  /* by this process (a resumed run counts its own) */
    double checkpoint_time_s;  /* wall-clock seconds training was held for them (outside the epochs' times) */
    double checkpoint_write_s; /* seconds their files took to write, in the background */
    double checkpoint_bytes;   /* the last one's size */
    /* data parallelism: world_size 1 and engine "none" for a single process */
    int world_size, rank;
    /* model parallelism (core/parallel.h): the groups' sizes (data x tensor x pipeline = the world),
     * and what crossed rank 0's tensor group: its activations' all-reduces */
    int data_parallel, tensor_parallel, pipeline_parallel;
    double tp_bytes_sent; /* per rank, as a ring moves them (2 (T-1)/T of each payload), over the training steps */
    double tp_time_s;     /* their wall-clock time, inside the steps' compute time */
    long tp_calls;
    double tp_model_bytes; /* the same bytes as the cost model has them: the model's all-reduced elements per
                              sample (ab_model.tp_elems_per_sample) x the samples x 2 (T-1)/T x the element size */
    /* pipeline parallelism: the schedule, the micro-batches a step, the model's units and the cut
     * (pipeline_parallel + 1 bounds), and per stage of rank 0's pipeline group (each pipeline_parallel
     * long, one allocation at pp_busy_s): the seconds it computed and waited on its neighbours in
     * the training steps, the bytes it sent a step, and the bytes the cost model has it send a step.
     * Under a pipeline, parameters is the replica's (every stage's, on a tensor rank) and the tensor
     * group's traffic the busiest stage's */
    char pp_schedule[8];
    int pp_micro_batches, pp_units;
    int pp_bounds[65];
    double *pp_busy_s, *pp_wait_s, *pp_bytes_sent, *pp_bytes_model;
    double *pp_params;         /* (pipeline_parallel) each stage's parameters on a tensor rank (also at pp_busy_s) */
    double pp_stage_macs[64];  /* each stage's multiply-adds a sample: the cut's balance */
    char comm_engine[8];          /* "none" | "mpi" | "nccl" */
    double comm_time_s;           /* all collectives of the training steps */
    double allreduce_time_s;      /* the gradient all-reduce alone: what the steps waited for it */
    double allreduce_busy_s;      /* the buckets' own times, start to completion, summed (with overlap partly
                                   * hidden behind backward; without, the same as allreduce_time_s) */
    int buckets;                  /* gradient buckets (0: one all-reduce after backward) */
    int bucket_layout;            /* the buckets --bucket-mb cuts the gradients into, at any world size */
    double bytes_allreduced;      /* gradient payload bytes passed to the reduction, per rank */
    double ps_pull_time_s;        /* --dp-sync ps: the updated weights sent back by the servers */
    /* (world_size) the bytes each rank sends and receives per synchronisation as the pattern
     * moves them (ring: 2(W-1)/W of the payload each way; ps: the pushes to and pulls from the
     * servers), for one step that synchronises */
    double *dp_sent_per_rank, *dp_received_per_rank;
    long allreduce_calls;
    int64_t *peak_memory_per_rank; /* (world_size) peak_total of every rank, gathered */
    int64_t *gpu_per_rank;          /* (world_size) the GPU index each rank ran on, -1 on the CPU */
    struct ab_census *census;       /* the gradient census (core/census.h), NULL when none was taken;
                                     * freed with the record, written as grad_census */
    /* the last evaluation, example by example (the test set's order): the predicted class (the
     * first largest logit, as the accuracy counts it) and whether it was right; written as
     * test_predictions, so that two runs can be compared example by example (the harness's
     * intervals and McNemar's test). One per target: n_test_pred = test samples x the targets
     * per sample (core/dataset.h; sample i's target r at i * targets + r), so a per-token run's
     * examples are its tokens (the harness pairs runs only where n_test_pred = test_samples,
     * else it takes the unpaired interval). NULL before the first evaluation. */
    int32_t *test_pred;
    uint8_t *test_hit;
    int n_test_pred, n_classes;
} ab_run_record;

/* Asks the runs of this process to stop after their current step and keep what they measured
 * (a checkpoint first, under --checkpoint-dir). Async-signal-safe: a signal handler may call it. */
void ab_request_stop(void);
/* whether a stop was asked for */
int ab_stop_requested(void);

/* Runs the training; fills rec (free with ab_run_record_free). Writes cfg->out_path after each
 * epoch and at the end. Returns 0, or -1 with ab_error() set; an interrupted run returns 0 with
 * rec->interrupted set. */
int ab_train_run(const ab_train_config *cfg, ab_run_record *rec);
void ab_run_record_free(ab_run_record *rec);

/* The same loop in pieces, for tests and tools that drive steps themselves. */
typedef struct ab_trainer ab_trainer;
struct ab_params;
/* cfg (and what it points to) must outlive the trainer: it is kept, not copied */
int ab_trainer_create(const ab_train_config *cfg, ab_run_record *rec, ab_trainer **out);
/* What one optimizer step did. */
typedef struct {
    double loss; /* the world's mean unscaled loss */
    int applied; /* 1: the optimizer stepped; 0: the loss scaler skipped the step (gradient overflow) */
    int clipped; /* the gradients were clipped to the configured norm */
    /* the factor the optimizer took the gradients with: max / (norm + 1e-6) when clipped, else 1
     * (inside its pass: the gradient buffer itself keeps the unclipped values) */
    float clip_factor;
    float scale; /* the loss scale the step's backward used */
} ab_step_result;
/* One optimizer step over the training samples order[0 .. n) (n <= batch * accum steps), the
 * whole world's: under W ranks each rank trains on its shard (ab_shard_step), n <= W * that.
 * step: the run's 0-based optimizer step (schedule, fault injection, scaler events). */
int ab_trainer_step(ab_trainer *t, const int32_t *order, int n, long step, int epoch, ab_step_result *out);
/* the live loss scaler (the record holds a copy from its last write, and the scaler after the
 * trainer is destroyed) */
const ab_scaler *ab_trainer_scaler(const ab_trainer *t);
int ab_trainer_weights(ab_trainer *t, float *host); /* fp32 master weights, params.n floats */
int ab_trainer_evaluate(ab_trainer *t, double *loss, double *accuracy);
const struct ab_params *ab_trainer_params(const ab_trainer *t);
int ab_trainer_train_samples(const ab_trainer *t);
struct ab_comm;
struct ab_comm *ab_trainer_comm(const ab_trainer *t);

/* A step's samples on one rank: order[0 .. n) is the whole world's share of the step, split in
 * blocks of B (one micro-batch) dealt to the ranks in turn, so rank r takes blocks r, r+W, ...
 * Its k-th micro-batch is block r + kW: the world's k-th micro-step covers the same samples as
 * one rank with batch W*B, and each rank's micro-batch is one of that rank's micro-batches of B
 * under accumulation. Writes the rank's samples to out (up to n); returns their count. */
int ab_shard_step(const int32_t *order, int n, int B, int W, int r, int32_t *out);
void ab_trainer_destroy(ab_trainer *t);


#endif
