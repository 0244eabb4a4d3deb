/* Pipeline parallelism: the model's chain of units (core/model.h) cut into P stages, one a rank of
 * each pipeline group, and the schedule that runs a step's M micro-batches through them.
 *
 * The cut: contiguous ranges of units, the largest stage's cost (the units' multiply-adds per
 * sample) as small as it can be (ab_pp_cut).
 *
 * The schedules, per stage s of P (Megatron-LM's non-interleaved ones):
 *   gpipe  every micro-batch's forward, then every backward (GPipe): up to M micro-batches'
 *          activations held at once;
 *   1f1b   min(P - s - 1, M) warm-up forwards, then one forward and one backward in turn, then the
 *          backwards left (PipeDream-flush): at most P - s micro-batches in flight on stage s.
 * Both leave the same bubble: (P - 1) / M of the ideal time (each stage idles while the first
 * micro-batch fills the pipe and the last one drains it).
 *
 * A stage's program is a list of items, each a computation (the forward or backward of one
 * micro-batch) or one blocking exchange with the neighbours: an activation sent on to s + 1
 * and/or a gradient sent back to s - 1, an activation received from s - 1 and/or a gradient from
 * s + 1 (ab_comm_ops.sendrecv). Neighbours' programs pair their exchanges in the same order, so
 * no schedule deadlocks (tests/core/test_pipeline.c simulates every pairing). */
#ifndef AB_PIPELINE_H
#define AB_PIPELINE_H

#include <stddef.h>

#include "ab.h"

typedef enum { AB_PP_GPIPE = 0, AB_PP_1F1B = 1 } ab_pp_schedule;
int ab_pp_schedule_parse(const char *s, ab_pp_schedule *out);
const char *ab_pp_schedule_name(ab_pp_schedule s);

typedef enum {
    AB_PP_FORWARD = 1,  /* the forward of micro-batch mb */
    AB_PP_BACKWARD,     /* its backward */
    AB_PP_EXCHANGE,     /* sendrecv with the neighbours */
} ab_pp_kind;

/* what an exchange moves, each half for one micro-batch (-1: that half is left out):
 *   send_act  stage_out of send_act to s + 1      send_grad  stage_din of send_grad to s - 1
 *   recv_act  the input of recv_act from s - 1     recv_grad  the output's gradient from s + 1
 * At most one send and one receive an item. */
typedef struct {
    ab_pp_kind kind;
    int mb;
    int send_act, send_grad, recv_act, recv_grad;
} ab_pp_item;

/* stage s's program for M micro-batches over P stages into items (room for 6 M + 4); returns the
 * item count */
int ab_pp_program(ab_pp_schedule kind, int P, int s, int M, ab_pp_item *items);
/* the most micro-batches stage s holds activations for at once: M (gpipe), min(P - s, M) (1f1b) */
int ab_pp_slots(ab_pp_schedule kind, int P, int s, int M);

/* Cuts units 0 .. n-1 of cost[] into P contiguous non-empty stages with the least largest stage
 * cost: bounds[0] = 0 < bounds[1] < ... < bounds[P] = n (stage s is [bounds[s], bounds[s+1])).
 * -1 with a usage error when n < P. */
int ab_pp_cut(const double *cost, int n, int P, int *bounds);

#endif
