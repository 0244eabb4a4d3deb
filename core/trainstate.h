/* A run's state between two optimizer steps: everything a killed run needs to continue so that
 * its weights, its losses and its record (less wall-clock times) are bit-identical to a run that
 * was never stopped. The trainer fills it in host memory at a checkpoint and takes it back on
 * --resume; the program's checkpoint store (ab_checkpoint_ops; checkpoint/train_checkpoint.c)
 * writes and reads it. The core knows no file format.
 *
 * Nothing random is kept: the data order of an epoch is a pure function of (seed, epoch), the
 * augmentation of (seed, epoch, sample), dropout of (seed, pass index) (core/model.h), so the
 * position (epoch, steps taken in it) and each rank's pass counter restore all of it. */
#ifndef AB_TRAINSTATE_H
#define AB_TRAINSTATE_H

#include <stddef.h>
#include <stdint.h>

#include "model.h"
#include "params.h"
#include "scaler.h"

struct ab_run_record;

/* One fact a checkpoint must share with the run that resumes it (the model, the world size, the
 * precision, the recipe...): a checkpoint whose value differs is refused, naming the key. */
typedef struct {
    char key[32];
    char value[96];
} ab_state_key;

#define AB_STATE_MAX_KEYS 48

/* what an epoch has added up so far between its steps (core/train.c's tally) */
typedef struct {
    double loss_sum, interval_sum; /* the finite step losses: the epoch's, the log interval's */
    long finite_steps, interval_n;
    double time_s, data_s; /* wall-clock seconds of the epoch's steps so far (not compared on resume) */
} ab_epoch_tally;

typedef struct ab_train_state {
    ab_state_key keys[AB_STATE_MAX_KEYS];
    int n_keys;
    /* where the run is: `step` optimizer steps taken in all, the next belongs to 1-based `epoch`,
     * of which `epoch_step` steps are taken (0: the epoch has not begun; epochs + 1: the run's
     * steps are all done) */
    long step;
    int epoch;
    long epoch_step;
    /* what the position means, written out (the reader checks them against the run's own): the
     * samples of the epoch already trained, the seeds of its order and augmentation, the learning
     * rate of the next step */
    long epoch_samples;
    uint64_t shuffle_seed, augment_seed;
    double next_lr;
    int world;
    int64_t *passes;          /* (world) each rank's training passes: the next pass's index (dropout) */
    int64_t *batches_tracked; /* (world) each rank's batch-norm step count */
    /* the tensors, in host memory, in the layouts of params (the spec table names them) */
    const ab_model *model;
    const ab_params *params;
    float *master;  /* (params->n) fp32 master weights */
    float *bufs;    /* (world x params->n_bufs) each rank's buffers (batch-norm running statistics) */
    void *compute_weights; /* (params->n_compute) the compute-type copy in params->compute_type; NULL under fp32 */
    float *s1, *s2; /* (params->n) the optimizer's state (SGD momentum; AdamW's moments), or NULL */
    const char *s1_name, *s2_name; /* PyTorch's names: "momentum_buffer", "exp_avg", "exp_avg_sq" */
    long opt_steps;                /* optimizer steps applied (AdamW's bias correction, SGD's first step) */
    ab_scaler scaler;              /* the loss scaler with its history (events, changes) */
    ab_epoch_tally tally;          /* of epoch `epoch` when epoch_step > 0 */
    /* the record so far: epochs (the current one's counts too), the loss curve, the census, the
     * last evaluation's predictions, the communication counters, peak memory per rank */
    struct ab_run_record *rec;
} ab_train_state;

/* The program's checkpoint store. A checkpoint is one folder DIR/ckpt-<step> written whole
 * (a temporary folder, then rename), so a crash mid-write leaves the previous checkpoints intact. */
typedef struct ab_checkpoint_ops {
    /* Starts writing s under dir (created if missing) as the checkpoint of step s->step, then
     * removing all but the newest keep checkpoints, and returns: its path to path (cap bytes), its
     * tensors' size to *bytes. The writing goes on in the background: s's tensors (master, bufs,
     * compute_weights, s1, s2) must stay as they are until flush (the rest is copied before save returns). A
     * save first finishes the write before it. */
    int (*save)(const char *dir, int keep, const ab_train_state *s, char *path, size_t cap, double *bytes);
    /* waits for the write in progress (none: returns at once); its error; *seconds (may be NULL)
     * the write's own time */
    int (*flush)(double *seconds);
    /* the newest checkpoint in dir: 1 with its path, 0 when dir has none (or does not exist), -1 on error */
    int (*latest)(const char *dir, char *path, size_t cap);
    /* Reads the checkpoint at path into s, whose keys, world, model, params and buffers (master,
     * bufs, compute_weights, s1, s2, passes, batches_tracked, rec->epochs and rec->census) the caller has set:
     * checks every key against s's (a mismatch is an error naming the key and both values), every
     * tensor's name, shape, dtype and checksum; fills the rest. Nothing is written. */
    int (*load)(const char *path, ab_train_state *s);
} ab_checkpoint_ops;

#endif
