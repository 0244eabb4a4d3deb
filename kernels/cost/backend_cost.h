/* The counting backend: runs nothing and records, for every op the core and the models issue,
 * its floating-point operations and the bytes it reads and writes (core/stepmodel.h's
 * ab_op_cost), for the GPU step model. Its memory is a device's that is never touched: an
 * allocation is charged to be->mem as on a GPU (so the tracked peak is a real run's, without the
 * libraries' workspaces) and answered with an address nothing may read; download fills the host
 * buffer with zeros. */
#ifndef AB_BACKEND_COST_H
#define AB_BACKEND_COST_H

#include "backend.h"
#include "stepmodel.h"

ab_backend *ab_backend_cost_create(void);
/* the phase the ops recorded from now on belong to ("forward", ...; a string that outlives the
 * backend) */
void ab_cost_phase(ab_backend *be, const char *phase);
/* the ops recorded so far, in issue order, and forgetting them */
const ab_op_cost *ab_cost_ops(const ab_backend *be, size_t *n);
void ab_cost_clear(ab_backend *be);
/* records an op by hand (what no op of the table says: a read-back timed elsewhere) */
int ab_cost_record(ab_backend *be, const char *op, ab_op_class cls, double bytes, int kernels);
/* how many ops are recorded, and the one recorded n0-th (NULL when fewer): an op of the table may
 * record more than one (gemm_fold: the product and the fold, as a GPU runs them) */
size_t ab_cost_count(const ab_backend *be);
ab_op_cost *ab_cost_at(ab_backend *be, size_t n0);
/* the ops recorded from the n0-th on become that one: their FLOPs, bytes and kernels added to it,
 * the others forgotten (the profiler's view of an op that a host backend runs as one) */
void ab_cost_merge_since(ab_backend *be, size_t n0);

#endif
