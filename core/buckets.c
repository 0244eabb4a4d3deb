/* Data-parallel gradient buckets (buckets.h). */
#include "buckets.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "timer.h"

/* a bucket's range [off, off + n) of the gradient buffer as pieces: one all-reduced (ring), or
 * one per shard it touches, each reduced to that shard's server */
static int add_pieces(ab_buckets *k, size_t off, size_t n, int f16) {
    const size_t end = off + n;
    int j = 0;
    while (off < end) {
        size_t lo = 0, hi = k->p->n;
        if (k->shards > 0) {
            for (ab_ps_shard(k->p->n, k->shards, j, &lo, &hi); hi <= off; ab_ps_shard(k->p->n, k->shards, j, &lo, &hi))
                j++;
        }
        const size_t stop = hi < end ? hi : end;
        ab_bucket_piece *grown = realloc(k->piece, ((size_t)k->n_pieces + 1) * sizeof *grown);
        if (!grown) return ab_errorf("out of host memory for the gradient buckets");
        k->piece = grown;
        k->piece[k->n_pieces++] =
            (ab_bucket_piece){.off = off, .n = stop - off, .f16 = f16, .root = k->shards > 0 ? j : -1};
        off = stop;
    }
    return 0;
}

/* The reverse spec order, cut where the next tensor would take a bucket past the cap; each
 * bucket's range in each of ab_params_init's groups (compute/decay, compute/no decay, fp32/decay,
 * fp32/no decay), which a run of the reverse order fills downwards, then cut into pieces. */
static int cut(ab_buckets *k) {
    const ab_params *p = k->p;
    size_t bytes = 0, off[4] = {0}, n[4] = {0};
    int i = p->n_specs - 1;
    for (;;) {
        const ab_param_spec *s = i >= 0 ? &p->specs[i] : NULL;
        if (s && (s->region == AB_REGION_BUFFER || s->absent)) { /* no gradient here */
            k->bucket_of[i--] = -1;
            continue;
        }
        const size_t sb = s ? s->numel * sizeof(float) : 0;
        const int open = k->n > 0 && k->b[k->n - 1].n_specs > 0;
        if (open && (!s || bytes + sb > k->cap_bytes)) { /* the open bucket is complete: its pieces */
            ab_bucket *b = &k->b[k->n - 1];
            b->first = k->n_pieces;
            for (int r = 0; r < 4; r++)
                if (n[r]) AB_TRY(add_pieces(k, off[r], n[r], k->wire == AB_F16 && r < 2));
            b->count = k->n_pieces - b->first;
            memset(n, 0, sizeof n);
        }
        if (!s) break;
        if (k->n == 0 || (open && bytes + sb > k->cap_bytes)) {
            k->n++;
            bytes = 0;
        }
        ab_bucket *b = &k->b[k->n - 1];
        const int r = (s->region == AB_REGION_COMPUTE ? 0 : 2) + (s->no_decay ? 1 : 0);
        if (n[r] == 0) off[r] = s->offset + s->numel;
        if (s->offset + s->numel != off[r])
            return ab_errorf("gradient buckets: %s is not next to its layout group's other tensors", s->name);
        off[r] = s->offset;
        n[r] += s->numel;
        b->n_specs++;
        bytes += sb;
        k->bucket_of[i--] = k->n - 1;
        k->trained++;
    }
    return 0;
}

/* the layout alone: the buckets and their pieces, with no communicator (ab_buckets_count's too) */
static int lay_out(ab_buckets *k, const ab_params *p, double bucket_mb, ab_dtype wire, int shards) {
    memset(k, 0, sizeof *k);
    if (!(bucket_mb > 0.0)) return ab_errorf("--bucket-mb %g: a bucket must hold more than 0 MB", bucket_mb);
    k->p = p;
    k->wire = wire;
    k->shards = shards;
    k->cap_bytes = (size_t)(bucket_mb * 1e6);
    k->bucket_of = malloc(((size_t)p->n_specs + 1) * sizeof *k->bucket_of);
    k->b = calloc((size_t)p->n_specs + 1, sizeof *k->b);
    if (!k->bucket_of || !k->b) return ab_errorf("out of host memory for the gradient buckets");
    return cut(k);
}

int ab_buckets_count(const ab_params *p, double bucket_mb) {
    ab_buckets k;
    const int rc = lay_out(&k, p, bucket_mb, AB_F32, 0);
    const int n = rc == 0 ? k.n : 0;
    ab_buckets_free(&k);
    if (rc != 0) ab_error_clear(); /* the cost model then counts by size */
    return n;
}

int ab_buckets_init(ab_buckets *k, const ab_params *p, ab_comm *comm, double bucket_mb, ab_dtype wire, int shards) {
    memset(k, 0, sizeof *k);
    if (shards < 0 || shards > comm->size)
        return ab_errorf("--ps-shards %d: the servers are ranks of the world, 1 to %d", shards, comm->size);
    if (!comm->ops->ireduce || !comm->ops->test || !comm->ops->wait)
        return ab_errorf("the %s engine cannot reduce gradient buckets", comm->ops->name);
    AB_TRY(lay_out(k, p, bucket_mb, wire, shards));
    k->comm = comm;
    if (wire == AB_F16 && p->n_compute) {
        k->f16 = ab_alloc_for(p->be, AB_MEM_WORKSPACE, p->n_compute * 2, "the fp16 copy of the gradients the buckets reduce");
        if (!k->f16) return -1;
    }
    return 0;
}

void ab_buckets_free(ab_buckets *k) {
    if (k->f16) ab_release(k->p->be, AB_MEM_WORKSPACE, k->f16, k->p->n_compute * 2);
    free(k->b);
    free(k->piece);
    free(k->bucket_of);
    memset(k, 0, sizeof *k);
}

void ab_buckets_begin(ab_buckets *k) {
    for (int i = 0; i < k->n; i++) {
        ab_bucket *b = &k->b[i];
        b->pending = b->n_specs;
        b->t_start = b->t_done = 0.0;
    }
    for (int i = 0; i < k->n_pieces; i++) k->piece[i].req = (ab_comm_req){.done = 1};
    k->next = 0;
    k->ready = 0;
}

/* bucket i's reduction, piece by piece (the compute region's through the fp16 copy under fp16) */
static int start(ab_buckets *k, int i) {
    ab_bucket *b = &k->b[i];
    const ab_params *p = k->p;
    b->t_start = ab_now();
    for (int q = b->first; q < b->first + b->count; q++) {
        ab_bucket_piece *c = &k->piece[q];
        if (c->f16) {
            void *h = (char *)k->f16 + c->off * 2;
            AB_TRY(p->be->ops->cast(p->be, c->n, AB_F32, p->grad + c->off, AB_F16, h));
            AB_TRY(k->comm->ops->ireduce(k->comm, h, c->n, AB_F16, c->root, &c->req));
        } else {
            AB_TRY(k->comm->ops->ireduce(k->comm, p->grad + c->off, c->n, AB_F32, c->root, &c->req));
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
        for (int q = b->first; q < b->first + b->count; q++) {
            ab_comm_req *r = &k->piece[q].req;
            if (!r->done) AB_TRY(k->comm->ops->test(k->comm, r));
            done &= r->done;
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
        for (int q = b->first; q < b->first + b->count; q++) AB_TRY(k->comm->ops->wait(k->comm, &k->piece[q].req));
        if (b->t_done == 0.0) b->t_done = ab_now();
        /* the fp16 sums back into the gradients, where this rank holds them */
        for (int q = b->first; q < b->first + b->count; q++) {
            const ab_bucket_piece *c = &k->piece[q];
            if (c->f16 && (c->root < 0 || c->root == k->comm->rank))
                AB_TRY(p->be->ops->accumulate(p->be, c->n, AB_F16, (char *)k->f16 + c->off * 2, p->grad + c->off, 0,
                                              NULL));
        }
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
        for (int q = 0; q < k->n_pieces; q++)
            if (!k->piece[q].req.done) k->comm->ops->wait(k->comm, &k->piece[q].req);
    }
    ab_errorf("%s", keep);
}
