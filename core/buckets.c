/* Data-parallel gradient buckets (buckets.h). */
#include "buckets.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "timer.h"

int ab_buckets_init(ab_buckets *k, const ab_params *p, ab_comm *comm, double bucket_mb, ab_dtype wire) {
    memset(k, 0, sizeof *k);
    if (!(bucket_mb > 0.0)) return ab_errorf("--bucket-mb %g: a bucket must hold more than 0 MB", bucket_mb);
    k->p = p;
    k->comm = comm;
    k->wire = wire;
    k->cap_bytes = (size_t)(bucket_mb * 1e6);
    if (!comm->ops->iallreduce || !comm->ops->test || !comm->ops->wait)
        return ab_errorf("the %s engine cannot all-reduce while backward runs", comm->ops->name);
    k->bucket_of = malloc(((size_t)p->n_specs + 1) * sizeof *k->bucket_of);
    k->b = calloc((size_t)p->n_specs + 1, sizeof *k->b);
    if (!k->bucket_of || !k->b) return ab_errorf("out of host memory for the gradient buckets");
    /* the reverse spec order, cut where the next tensor would take a bucket past the cap */
    size_t bytes = 0;
    for (int i = p->n_specs - 1; i >= 0; i--) {
        const ab_param_spec *s = &p->specs[i];
        k->bucket_of[i] = -1;
        if (s->region == AB_REGION_BUFFER) continue;
        const size_t sb = s->numel * sizeof(float);
        if (k->n == 0 || (k->b[k->n - 1].n_specs > 0 && bytes + sb > k->cap_bytes)) {
            k->n++;
            bytes = 0;
        }
        ab_bucket *b = &k->b[k->n - 1];
        /* ab_params_init's groups: compute/decay, compute/no decay, fp32/decay, fp32/no decay */
        const int r = (s->region == AB_REGION_COMPUTE ? 0 : 2) + (s->no_decay ? 1 : 0);
        /* a run of the reverse order is contiguous within each region: it grows downwards */
        if (b->n[r] == 0) b->off[r] = s->offset + s->numel;
        if (s->offset + s->numel != b->off[r])
            return ab_errorf("gradient buckets: %s is not next to its layout group's other tensors", s->name);
        b->off[r] = s->offset;
        b->n[r] += s->numel;
        b->n_specs++;
        bytes += sb;
        k->bucket_of[i] = k->n - 1;
        k->trained++;
    }
    if (wire == AB_F16 && p->n_compute) {
        ab_mem_label(&p->be->mem, "the fp16 copy of the gradients the buckets all-reduce");
        k->f16 = ab_alloc(p->be, AB_MEM_WORKSPACE, p->n_compute * 2);
        ab_mem_label(&p->be->mem, "%s", "");
        if (!k->f16) return -1;
    }
    return 0;
}

void ab_buckets_free(ab_buckets *k) {
    if (k->f16) ab_release(k->p->be, AB_MEM_WORKSPACE, k->f16, k->p->n_compute * 2);
    free(k->b);
    free(k->bucket_of);
    memset(k, 0, sizeof *k);
}

void ab_buckets_begin(ab_buckets *k) {
    for (int i = 0; i < k->n; i++) {
        ab_bucket *b = &k->b[i];
        b->pending = b->n_specs;
        for (int r = 0; r < 4; r++) b->req[r] = (ab_comm_req){.done = 1};
        b->t_start = b->t_done = 0.0;
    }
    k->next = 0;
    k->ready = 0;
}

/* bucket i's all-reduce, range by range in the groups' order (the compute region's through the
 * fp16 copy under fp16) */
static int start(ab_buckets *k, int i) {
    ab_bucket *b = &k->b[i];
    const ab_params *p = k->p;
    b->t_start = ab_now();
    for (int r = 0; r < 4; r++) {
        if (!b->n[r]) continue;
        if (k->f16 && r < 2) {
            void *h = (char *)k->f16 + b->off[r] * 2;
            AB_TRY(p->be->ops->cast(p->be, b->n[r], AB_F32, p->grad + b->off[r], AB_F16, h));
            AB_TRY(k->comm->ops->iallreduce(k->comm, h, b->n[r], AB_F16, &b->req[r]));
        } else {
            AB_TRY(k->comm->ops->iallreduce(k->comm, p->grad + b->off[r], b->n[r], AB_F32, &b->req[r]));
        }
    }
    return 0;
}

/* the buckets in flight asked (MPI progresses them so); a completion's time noted */
static int progress(ab_buckets *k) {
    for (int i = 0; i < k->next; i++) {
        ab_bucket *b = &k->b[i];
        if (b->t_done > 0.0) continue;
        int done = 1;
        for (int r = 0; r < 4; r++) {
            if (!b->req[r].done) AB_TRY(k->comm->ops->test(k->comm, &b->req[r]));
            done &= b->req[r].done;
        }
        if (done) b->t_done = ab_now();
    }
    return 0;
}

int ab_buckets_ready(void *ctx, const ab_param_spec *s) {
    ab_buckets *k = ctx;
    const int i = k->bucket_of[s - k->p->specs];
    if (i < 0) return 0;
    if (k->b[i].pending <= 0)
        return ab_errorf("gradient buckets: %s reported twice in one backward", s->name);
    k->b[i].pending--;
    k->ready++;
    while (k->next < k->n && k->b[k->next].pending == 0) AB_TRY(start(k, k->next++));
    return progress(k);
}

int ab_buckets_finish(ab_buckets *k, int reported) {
    const long ready = k->ready;
    const double t0 = ab_now();
    while (k->next < k->n) AB_TRY(start(k, k->next++));
    const ab_params *p = k->p;
    for (int i = 0; i < k->n; i++) {
        ab_bucket *b = &k->b[i];
        for (int r = 0; r < 4; r++) AB_TRY(k->comm->ops->wait(k->comm, &b->req[r]));
        if (b->t_done == 0.0) b->t_done = ab_now();
        for (int r = 0; k->f16 && r < 2; r++)
            if (b->n[r])
                AB_TRY(p->be->ops->accumulate(p->be, b->n[r], AB_F16, (char *)k->f16 + b->off[r] * 2,
                                              p->grad + b->off[r], 0));
        k->total_s += b->t_done - b->t_start;
    }
    AB_TRY(p->be->ops->sync(p->be));
    k->exposed_s += ab_now() - t0;
    /* checked once every bucket is done, so that the peers are not left waiting */
    if (reported && ready != k->trained)
        return ab_errorf("gradient buckets: backward reported %ld of its %d trained tensors (a layer without its "
                         "ready hook: core/params.h)",
                         ready, k->trained);
    return 0;
}

void ab_buckets_drain(ab_buckets *k) {
    if (!k->b) return;
    char keep[1024];
    snprintf(keep, sizeof keep, "%s", ab_error());
    if (k->next > 0) { /* some bucket started: the rest start too, so that the peers' waits end */
        while (k->next < k->n && start(k, k->next++) == 0) {}
        for (int i = 0; i < k->next; i++)
            for (int r = 0; r < 4; r++)
                if (!k->b[i].req[r].done) k->comm->ops->wait(k->comm, &k->b[i].req[r]);
    }
    ab_errorf("%s", keep);
}
