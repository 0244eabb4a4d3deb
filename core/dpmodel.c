/* The data-parallel cost model (dpmodel.h). */
#include "dpmodel.h"

#include <math.h>

#include "ab.h"

int ab_dpm_step(const ab_dpm_in *in, ab_dpm_out *out) {
    *out = (ab_dpm_out){0};
    const int p = in->p, nb = in->buckets > 0 ? in->buckets : 1;
    if (p < 1 || in->accum < 1 || !(in->t_mb >= 0.0) || !(in->bw > 0.0) || !(in->lat >= 0.0) ||
        !(in->backward_share >= 0.0 && in->backward_share <= 1.0) || !(in->grad_bytes >= 0.0))
        return ab_errorf("data-parallel model: need p >= 1, accum >= 1, t_mb >= 0, bw > 0, lat >= 0, backward share "
                         "in [0, 1]");
    if (in->pattern == AB_DPM_PS && (in->shards < 1 || in->shards > p))
        return ab_errorf("data-parallel model: %d parameter-server shards among %d devices", in->shards, p);
    /* the backward left after the first bucket is ready: what a reduction can hide behind */
    const double h = in->overlap ? in->backward_share * in->t_mb * (nb - 1) / nb : 0.0;
    double comm = 0.0, exposed = 0.0;
    if (p > 1 && in->pattern == AB_DPM_RING) {
        comm = 2.0 * (p - 1) / p * in->grad_bytes / in->bw + nb * 2.0 * (p - 1) * in->lat;
        exposed = in->overlap ? fmax(comm / nb, comm - h) : comm;
    } else if (p > 1) {
        const double k = in->shards;
        /* a server takes p-1 messages per bucket and sends p-1 (Hockney: one latency each, as the
         * ring's p-1 steps per phase) */
        const double push = (p - 1) / k * in->grad_bytes / in->bw + nb * (p - 1) * in->lat;
        const double pull = (p - 1) / k * in->weight_bytes / in->bw + (p - 1) * in->lat;
        comm = push + pull;
        exposed = (in->overlap ? fmax(push / nb, push - h) : push) + pull;
    }
    out->comm_s = comm;
    out->exposed_s = exposed;
    out->hidden_s = comm - exposed;
    out->step_s = in->accum * in->t_mb + exposed;
    return 0;
}

double ab_dpm_epoch(const ab_dpm_in *in, const ab_dpm_out *o, long samples, int batch) {
    return (double)samples / ((double)in->p * batch * in->accum) * o->step_s;
}

double ab_dpm_epoch_one(const ab_dpm_in *in, long samples, int batch) {
    return (double)samples / (double)batch * in->t_mb;
}
