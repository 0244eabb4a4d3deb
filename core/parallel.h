/* Model parallelism beside data parallelism: the world's ranks as a grid of data x tensor x
 * pipeline groups, and what a tensor-parallel model needs of its group.
 *
 * The grid (Megatron-LM's order, tensor fastest): world rank w = (pp_rank * dp + dp_rank) * tp +
 * tp_rank. The ranks of one tensor group are neighbours (on one node, where the launcher fills
 * nodes in rank order), a data-parallel group holds the ranks with the same tensor and pipeline
 * coordinates, and each group has its own communicator split from the world (ab_comm_ops.split),
 * so that every collective runs on its own group.
 *
 * Tensor parallelism (Megatron-LM's): a column-parallel linear layer holds a block of the
 * output features (its weight's rows and its bias's elements) and needs its input whole; a
 * row-parallel one holds a block of the input features (its weight's columns) and produces a
 * partial sum of the whole output, which an all-reduce over the tensor group completes, the bias
 * added once after it. Around such a pair:
 *   f  identity forward, all-reduce of the input's gradient backward (before the column split);
 *   g  all-reduce forward, identity backward (after the row split).
 * Replicated tensors (the row-parallel layer's bias, layer norms, embeddings) see the same
 * gradient on every rank of the group and are updated alike. */
#ifndef AB_PARALLEL_H
#define AB_PARALLEL_H

#include "comm.h"

typedef struct {
    int dp, tp, pp;                /* the groups' sizes: dp * tp * pp = the world */
    int dp_rank, tp_rank, pp_rank; /* this rank's coordinates */
} ab_layout;

/* the grid of a world of `world` ranks with tensor groups of tp and pipeline groups of pp, and
 * rank's place in it; -1 with a one-line error when tp * pp does not divide the world */
int ab_layout_make(int world, int rank, int tp, int pp, ab_layout *out);
/* the world rank of coordinates (dp_rank, tp_rank, pp_rank) */
int ab_layout_rank(const ab_layout *l, int dp_rank, int tp_rank, int pp_rank);

/* The tensor group as a model sees it, with what crossed it: the activations' all-reduces. */
typedef struct ab_tp {
    ab_comm *comm; /* NULL or a group of 1: nothing is split */
    int rank, size;
    double bytes_sent; /* per rank, as a ring moves them: 2 (T-1)/T of each all-reduce's payload */
    double time_s;     /* the all-reduces' wall-clock time */
    long calls;
} ab_tp;

/* the size of tp's group (1 for NULL) and this rank's place in it */
static inline int ab_tp_size(const ab_tp *tp) { return tp && tp->size > 1 ? tp->size : 1; }
static inline int ab_tp_rank(const ab_tp *tp) { return tp && tp->size > 1 ? tp->rank : 0; }
/* SUM over the tensor group, in place over n elements of type t in backend memory, counted in
 * tp; nothing for a group of 1 */
int ab_tp_allreduce(ab_tp *tp, void *buf, size_t n, ab_dtype t);

#endif
