/* Data-parallel gradient buckets, all-reduced while backward runs (--bucket-mb, --dp-overlap), as
 * PyTorch's DDP Reducer does. The trained tensors, in the reverse of the spec table's order (the
 * order backward produces their gradients), are cut into buckets of at most bucket_mb megabytes
 * (each at least one tensor). A tensor's gradient is final at its ready hook in the step's last
 * micro-batch (core/params.h); when every tensor of a bucket is, and every bucket before it has
 * started, its all-reduce starts (the communicator's iallreduce), so that every rank starts the
 * same collectives in the same order. Before unscaling, whatever has not started starts and
 * everything is waited for. ab_params_init lays the tensors out in four groups, each in spec order
 * (compute region with and without weight decay, fp32 region with and without), so a bucket is
 * at most four contiguous ranges of the gradient buffer. Under --allreduce-dtype fp16 the compute
 * region's ranges go through an fp16 copy of that region (the fp32 region stays fp32).
 *
 * The sums are the blocking all-reduce's: the same elements, added in the engine's order. With 2
 * ranks (one addition per element) the gradients are bit-identical to --dp-overlap off. */
#ifndef AB_BUCKETS_H
#define AB_BUCKETS_H

#include <stddef.h>

#include "comm.h"
#include "params.h"

typedef struct {
    int n_specs;            /* tensors, the bucket's run of the reverse spec order */
    size_t off[4], n[4];    /* its range in each group of the layout (n 0: none; ab_bucket_group) */
    int pending;            /* its tensors whose gradient is not final yet this step */
    ab_comm_req req[4];
    double t_start, t_done; /* when it started, when its completion was first seen */
} ab_bucket;

typedef struct ab_buckets {
    ab_bucket *b;
    int n;
    int *bucket_of;   /* (n_specs) a spec's bucket, -1 for the buffer region */
    int trained;      /* trained tensors */
    size_t cap_bytes; /* the bucket size asked for */
    int next;         /* the next bucket to start: those before it have started */
    long ready;       /* ready hooks seen this step */
    const ab_params *p;
    ab_comm *comm;
    ab_dtype wire;    /* the compute region's type on the wire: fp32, or fp16 */
    void *f16;        /* (n_compute) the fp16 copy under fp16, backend memory */
    /* per step: seconds from the end of backward to every bucket done (exposed), and the sum over
     * buckets of start to first-seen completion (total); since the run began */
    double exposed_s, total_s;
} ab_buckets;

/* lays out the buckets of p for comm (bucket_mb > 0), allocating the fp16 copy under wire fp16 */
int ab_buckets_init(ab_buckets *k, const ab_params *p, ab_comm *comm, double bucket_mb, ab_dtype wire);
void ab_buckets_free(ab_buckets *k);
/* a step begins: every bucket pending again */
void ab_buckets_begin(ab_buckets *k);
/* the ready hook (ab_grad_sink.ready) of the step's last micro-batch: ctx is the ab_buckets */
int ab_buckets_ready(void *ctx, const ab_param_spec *s);
/* after backward: starts what has not started (a rank without samples this step starts them
 * all) and waits for every bucket; copies the fp16 sums back. reported: whether this rank ran a
 * backward this step, whose ready hooks must then have covered every tensor. */
int ab_buckets_finish(ab_buckets *k, int reported);
/* after a failure: starts what has not started and waits for everything, so that no all-reduce
 * is left writing the gradients (and the peers' waits complete); errors are ignored */
void ab_buckets_drain(ab_buckets *k);

#endif
