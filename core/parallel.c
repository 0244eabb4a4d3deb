/* The data x tensor x pipeline grid and the tensor group's all-reduce (core/parallel.h). */
#include "parallel.h"

#include "timer.h"

int ab_layout_make(int world, int rank, int tp, int pp, ab_layout *out) {
    if (tp < 1 || pp < 1)
        return ab_errorf("--tensor-parallel %d, --pipeline-parallel %d: each must be at least 1", tp, pp);
    if (world < 1 || world % (tp * pp) != 0)
        return ab_errorf("a world of %d ranks does not factor as data x tensor %d x pipeline %d: launch a multiple of "
                         "%d ranks",
                         world, tp, pp, tp * pp);
    if (rank < 0 || rank >= world) return ab_errorf("rank %d outside a world of %d", rank, world);
    const int dp = world / (tp * pp);
    *out = (ab_layout){.dp = dp, .tp = tp, .pp = pp, .tp_rank = rank % tp, .dp_rank = rank / tp % dp,
                       .pp_rank = rank / (tp * dp)};
    return 0;
}

int ab_layout_rank(const ab_layout *l, int dp_rank, int tp_rank, int pp_rank) {
    return (pp_rank * l->dp + dp_rank) * l->tp + tp_rank;
}

int ab_tp_allreduce(ab_tp *tp, void *buf, size_t n, ab_dtype t) {
    if (ab_tp_size(tp) == 1) return 0;
    const double t0 = ab_now();
    AB_TRY(tp->comm->ops->allreduce(tp->comm, buf, n, t, AB_RED_SUM));
    tp->time_s += ab_now() - t0;
    tp->bytes_sent += 2.0 * (tp->size - 1) / tp->size * (double)n * (double)ab_dtype_size(t);
    tp->calls++;
    return 0;
}
