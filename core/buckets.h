/* Data-parallel gradient buckets, reduced while backward runs (--bucket-mb, --dp-overlap), as
 * PyTorch's DDP Reducer does, to every rank (the ring, --dp-sync ring) or to the parameter
 * server's shards (--dp-sync ps). The trained tensors, in the reverse of the spec table's order
 * (the order backward produces their gradients), are cut into buckets of at most bucket_mb
 * megabytes (each at least one tensor). A tensor's gradient is final at its ready hook in the
 * step's last micro-batch (core/params.h); when every tensor of a bucket is, and every bucket
 * before it has started, its reduction starts (the communicator's ireduce), so that every rank
 * starts the same collectives in the same order. Before unscaling, whatever has not started
 * starts and everything is waited for (without overlap, that is where they all start).
 * ab_params_init lays the tensors out in four groups, each in spec order (compute region with and
 * without weight decay, fp32 region with and without), so a bucket is at most four contiguous
 * ranges of the gradient buffer; under the parameter server each range is cut where a shard ends
 * into pieces, each reduced to its shard's server. Under --allreduce-dtype fp16 the compute
 * region's pieces go through an fp16 copy of that region (the fp32 region stays fp32).
 *
 * The sums are the blocking all-reduce's: the same elements, added in the engine's order. With 2
 * ranks (one addition per element) the gradients are bit-identical to --dp-overlap off and to the
 * ring. */
#ifndef AB_BUCKETS_H
#define AB_BUCKETS_H

#include <stddef.h>

#include "comm.h"
#include "params.h"

/* The parameter server's shard j of K over n trained elements: [lo, hi), served by rank j. */
static inline void ab_ps_shard(size_t n, int K, int j, size_t *lo, size_t *hi) {
    *lo = j < K ? n * (size_t)j / (size_t)K : n;
    *hi = j < K ? n * (size_t)(j + 1) / (size_t)K : n;
}

typedef struct {
    size_t off, n; /* elements [off, off + n) of the gradient buffer */
    int f16;       /* through the fp16 copy (the compute region under fp16 on the wire) */
    int root;      /* -1: all-reduced; else reduced to this rank, the server of its shard */
    ab_comm_req req;
} ab_bucket_piece;

typedef struct {
    int n_specs;            /* tensors, the bucket's run of the reverse spec order */
    int first, count;       /* its pieces: ab_buckets.piece[first .. first + count) */
    int pending;            /* its tensors whose gradient is not final yet this step */
    double t_start, t_done; /* when it started, when its completion was first seen */
} ab_bucket;

typedef struct ab_buckets {
    ab_bucket *b;
    int n;
    ab_bucket_piece *piece;
    int n_pieces;
    int *bucket_of;   /* (n_specs) a spec's bucket, -1 for the buffer region */
    int trained;      /* trained tensors */
    size_t cap_bytes; /* the bucket size asked for */
    int shards;       /* 0: the ring (all-reduce); K: the parameter server's shards */
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

/* the buckets ab_buckets_init cuts p's trained tensors into at bucket_mb, by the same layout (any
 * world size: the cost model's bucket count); 0 when it cannot be laid out */
int ab_buckets_count(const ab_params *p, double bucket_mb);
/* lays out the buckets of p for comm (bucket_mb > 0), reduced to every rank (shards 0) or to the
 * servers of shards parameter-server shards; allocates the fp16 copy under wire fp16 */
int ab_buckets_init(ab_buckets *k, const ab_params *p, ab_comm *comm, double bucket_mb, ab_dtype wire, int shards);
void ab_buckets_free(ab_buckets *k);
/* a step begins: every bucket pending again */
void ab_buckets_begin(ab_buckets *k);
/* the ready hook (ab_grad_sink.ready) of the step's last micro-batch: ctx is the ab_buckets */
int ab_buckets_ready(void *ctx, const ab_param_spec *s);
/* after backward: starts what has not started (a rank without samples this step, or a run
 * without overlap, starts them all) and waits for every bucket; copies the fp16 sums back where
 * this rank holds them. reported: whether the ready hooks ran this step (overlap, and this rank
 * ran a backward), which must then have covered every tensor. */
int ab_buckets_finish(ab_buckets *k, int reported);
/* after a failure: starts what has not started and waits for everything, so that no reduction
 * is left writing the gradients (and the peers' waits complete); errors are ignored */
void ab_buckets_drain(ab_buckets *k);

#endif
