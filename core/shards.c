/* Weights files under tensor and pipeline parallelism: every file holds the whole model, in the
 * names and shapes of a one-rank run, so that a file saved by any grid loads into any other (one
 * rank included) and a pretrained checkpoint loads into blocks and stages. The whole model lives only on the host, in a copy
 * laid out from the specs made whole (ab_spec_whole) on a CPU backend of the platform's: its
 * memory is not the run's (the comparable peak counts the device's alone). */
#include <stdlib.h>
#include <string.h>

#include "train_internal.h"

typedef struct {
    ab_backend *cpu;
    ab_param_spec *specs;
    ab_params whole;
    float *host; /* (whole.n + whole.n_bufs) the whole weights, then the buffers */
} whole_model;

static void whole_free(whole_model *w) {
    if (w->whole.be) ab_params_free(&w->whole);
    if (w->cpu) w->cpu->ops->destroy(w->cpu);
    free(w->specs);
    free(w->host);
    memset(w, 0, sizeof *w);
}

/* the model's specs made whole, laid out on a host backend; init: with the values a one-rank run
 * initialises (the run's seed), which a weights file lacking some tensors (a BERT checkpoint
 * without the classifier) leaves in place */
static int whole_open(trainer *t, whole_model *w, int init) {
    const ab_params *p = &t->params;
    memset(w, 0, sizeof *w);
    if (!(w->specs = malloc((size_t)p->n_specs * sizeof *w->specs))) return ab_errorf("out of host memory");
    for (int i = 0; i < p->n_specs; i++) w->specs[i] = ab_spec_whole(&p->specs[i]);
    if (!t->cfg->platform->host_create)
        return ab_errorf("a split model's weights files: this build's platform has no host backend for the whole model");
    if (!(w->cpu = t->cfg->platform->host_create(t->cfg->threads))) return -1;
    ab_rng rng;
    ab_rng_seed(&rng, t->cfg->seed);
    AB_TRY(ab_params_init(&w->whole, w->cpu, AB_PREC_FP32, w->specs, p->n_specs, init ? &rng : NULL));
    if (!(w->host = malloc((w->whole.n + w->whole.n_bufs + 1) * sizeof(float))))
        return ab_errorf("out of host memory for the whole model (%zu weights)", w->whole.n);
    return 0;
}

/* where spec i's values start in a host copy of n weights followed by the buffers */
static size_t at(const ab_param_spec *s, size_t n) { return (s->region == AB_REGION_BUFFER ? n : 0) + s->offset; }

/* the elements of s's block (its shape's product, held here or not) */
static size_t block_elems(const ab_param_spec *s) {
    size_t n = 1;
    for (int d = 0; d < s->ndim; d++) n *= (size_t)s->shape[d];
    return n;
}

int ab_shards_load(trainer *t, const char *path, char *from, size_t cap) {
    const ab_train_config *c = t->cfg;
    ab_params *p = &t->params;
    whole_model w = {0};
    float *mine = malloc((p->n + p->n_bufs + 1) * sizeof(float));
    int rc = mine ? whole_open(t, &w, 1) : ab_errorf("out of host memory");
    if (rc == 0) rc = c->workload->load_weights(path, t->model, &w.whole, from, cap);
    if (rc == 0) rc = w.cpu->ops->download(w.cpu, w.host, w.whole.master, w.whole.n * sizeof(float));
    if (rc == 0 && w.whole.n_bufs)
        rc = w.cpu->ops->download(w.cpu, w.host + w.whole.n, w.whole.bufs, w.whole.n_bufs * sizeof(float));
    for (int i = 0; rc == 0 && i < p->n_specs; i++) /* this rank's blocks of the tensors it holds */
        if (!p->specs[i].absent)
            ab_spec_block_copy(&p->specs[i], w.host + at(&w.specs[i], w.whole.n), mine + at(&p->specs[i], p->n), 0);
    if (rc == 0) rc = t->be->ops->upload(t->be, p->master, mine, p->n * sizeof(float));
    if (rc == 0 && p->n_bufs) rc = t->be->ops->upload(t->be, p->bufs, mine + p->n, p->n_bufs * sizeof(float));
    whole_free(&w);
    free(mine);
    return rc;
}

/* the pipeline stage holding unit u (0 without pipeline parallelism) */
static int stage_of(const trainer *t, int u) {
    for (int s = 0; s < t->lay.pp - 1; s++)
        if (u < t->pipe.bounds[s + 1]) return s;
    return t->lay.pp - 1;
}

/* Spec i's block q (its holder: data rank 0, tensor rank q, the spec's stage) into the whole host
 * copy at world rank 0: its own, or received from the holder over the world's communicator through
 * the device buffer dev; the holder sends it, the other ranks do nothing. */
static int gather_block(trainer *t, int i, int q, const float *mine, whole_model *w, float *dev, float *host) {
    const ab_params *p = &t->params;
    ab_param_spec s = p->specs[i];
    const int holder = ab_layout_rank(&t->lay, 0, q, stage_of(t, s.unit)), me = t->comm->rank;
    const size_t n = block_elems(&s), bytes = n * sizeof(float);
    if (me != 0 && me != holder) return 0;
    if (s.split_parts > 1) s.split_index = q;
    float *dst = w ? w->host + at(&w->specs[i], w->whole.n) : NULL;
    ab_comm *g = t->comm;
    if (me == holder && me == 0) {
        ab_spec_block_copy(&s, dst, (float *)mine + at(&p->specs[i], p->n), 1);
        return 0;
    }
    if (me == holder) {
        const float *src = (s.region == AB_REGION_BUFFER ? p->bufs : p->master) + s.offset;
        return g->ops->sendrecv(g, src, bytes, 0, NULL, 0, -1);
    }
    AB_TRY(g->ops->sendrecv(g, NULL, 0, -1, dev, bytes, holder));
    AB_TRY(t->be->ops->download(t->be, host, dev, bytes));
    ab_spec_block_copy(&s, dst, host, 1);
    return 0;
}

int ab_shards_save(trainer *t, const char *path) {
    const ab_params *p = &t->params;
    const int root = t->comm->rank == 0;
    whole_model w = {0};
    size_t most = 1; /* the largest block, the device buffer a received block passes through */
    for (int i = 0; i < p->n_specs; i++) most = block_elems(&p->specs[i]) > most ? block_elems(&p->specs[i]) : most;
    float *mine = malloc((p->n + p->n_bufs + 1) * sizeof(float)), *host = malloc(most * sizeof(float)), *dev = NULL;
    int rc = mine && host ? 0 : ab_errorf("out of host memory");
    if (rc == 0 && root) rc = whole_open(t, &w, 0);
    if (rc == 0 && root && !(dev = ab_alloc_for(t->be, AB_MEM_WORKSPACE, most * sizeof(float), "a block being saved")))
        rc = -1;
    if (rc == 0) rc = t->be->ops->download(t->be, mine, p->master, p->n * sizeof(float));
    if (rc == 0 && p->n_bufs) rc = t->be->ops->download(t->be, mine + p->n, p->bufs, p->n_bufs * sizeof(float));
    /* the world agrees that rank 0 is ready before anyone sends: a root that failed would leave
     * the senders blocked until the communicator's timeout */
    int64_t failed = rc != 0;
    if (t->comm->ops->allreduce_i64(t->comm, &failed, 1, AB_RED_MAX) != 0) rc = -1;
    else if (failed && rc == 0) rc = ab_errorf("--save: a rank could not gather its blocks");
    /* every tensor in spec order, each block from its holder: the split ones from every tensor
     * rank of their stage, the whole ones from its tensor rank 0 */
    for (int i = 0; rc == 0 && i < p->n_specs; i++)
        for (int q = 0; rc == 0 && q < (p->specs[i].split_parts > 1 ? p->specs[i].split_parts : 1); q++)
            rc = gather_block(t, i, q, mine, root ? &w : NULL, dev, host);
    if (rc == 0 && root) rc = w.cpu->ops->upload(w.cpu, w.whole.master, w.host, w.whole.n * sizeof(float));
    if (rc == 0 && root && w.whole.n_bufs)
        rc = w.cpu->ops->upload(w.cpu, w.whole.bufs, w.host + w.whole.n, w.whole.n_bufs * sizeof(float));
    if (rc == 0 && root) rc = t->cfg->workload->save_weights(path, t->model, &w.whole);
    if (dev) ab_release(t->be, AB_MEM_WORKSPACE, dev, most * sizeof(float));
    if (root) whole_free(&w);
    free(mine);
    free(host);
    return rc;
}
