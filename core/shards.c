/* Weights files under tensor parallelism: every file holds the whole model, in the names and
 * shapes of a one-rank run, so that a file saved by T ranks loads into any T (1 included) and a
 * pretrained checkpoint loads into blocks. The whole model lives only on the host, in a copy
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
        return ab_errorf("--tensor-parallel: this build's platform has no host backend for whole weights files");
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

/* block `index` of every split spec, and every whole one, between a rank's host copy (mine) and
 * the whole model's (to_whole: into the whole) */
static void blocks_copy(const ab_params *p, const whole_model *w, int index, float *mine, int to_whole) {
    for (int i = 0; i < p->n_specs; i++) {
        ab_param_spec s = p->specs[i];
        if (s.split_parts <= 1 && to_whole && index > 0) continue; /* replicated: rank 0's */
        if (s.split_parts > 1) s.split_index = index;
        ab_spec_block_copy(&s, w->host + at(&w->specs[i], w->whole.n), mine + at(&p->specs[i], p->n), to_whole);
    }
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
    if (rc == 0) {
        blocks_copy(p, &w, t->lay.tp_rank, mine, 0);
        rc = t->be->ops->upload(t->be, p->master, mine, p->n * sizeof(float));
    }
    if (rc == 0 && p->n_bufs) rc = t->be->ops->upload(t->be, p->bufs, mine + p->n, p->n_bufs * sizeof(float));
    whole_free(&w);
    free(mine);
    return rc;
}

/* rank q of the tensor group sends its weights and buffers to rank 0 (q > 0), or rank 0
 * receives them into mine through the device buffer dev (q > 0 at rank 0) */
static int gather_one(trainer *t, int q, float *dev, float *mine) {
    const ab_params *p = &t->params;
    ab_comm *g = t->tpc;
    const size_t nb = p->n * sizeof(float), bb = p->n_bufs * sizeof(float);
    if (t->lay.tp_rank == q) {
        AB_TRY(g->ops->sendrecv(g, p->master, nb, 0, NULL, 0, -1));
        return bb ? g->ops->sendrecv(g, p->bufs, bb, 0, NULL, 0, -1) : 0;
    }
    AB_TRY(g->ops->sendrecv(g, NULL, 0, -1, dev, nb, q));
    AB_TRY(t->be->ops->download(t->be, mine, dev, nb));
    if (!bb) return 0;
    AB_TRY(g->ops->sendrecv(g, NULL, 0, -1, dev, bb, q));
    return t->be->ops->download(t->be, mine + p->n, dev, bb);
}

int ab_shards_save(trainer *t, const char *path) {
    const ab_params *p = &t->params;
    /* the file is world rank 0's: only its tensor group gathers */
    if (t->lay.dp_rank != 0 || t->lay.pp_rank != 0) return 0;
    const int root = t->lay.tp_rank == 0;
    whole_model w = {0};
    float *mine = malloc((p->n + p->n_bufs + 1) * sizeof(float)), *dev = NULL;
    const size_t dev_bytes = (p->n > p->n_bufs ? p->n : p->n_bufs) * sizeof(float);
    int rc = mine ? 0 : ab_errorf("out of host memory");
    if (rc == 0 && root) rc = whole_open(t, &w, 0);
    if (rc == 0 && root && !(dev = ab_alloc_for(t->be, AB_MEM_WORKSPACE, dev_bytes, "a tensor block being saved")))
        rc = -1;
    if (rc == 0 && root) rc = t->be->ops->download(t->be, mine, p->master, p->n * sizeof(float));
    if (rc == 0 && root && p->n_bufs) rc = t->be->ops->download(t->be, mine + p->n, p->bufs, p->n_bufs * sizeof(float));
    if (rc == 0 && root) blocks_copy(p, &w, 0, mine, 1);
    /* the group agrees that its root is ready before anyone sends: a root that failed would leave
     * the senders blocked until the communicator's timeout */
    int64_t failed = rc != 0;
    if (t->tpc->ops->allreduce_i64(t->tpc, &failed, 1, AB_RED_MAX) != 0) rc = -1;
    else if (failed && rc == 0) rc = ab_errorf("--save: tensor rank 0 could not gather the blocks");
    for (int q = 1; rc == 0 && q < t->lay.tp; q++) {
        if (!root && t->lay.tp_rank != q) continue;
        rc = gather_one(t, q, dev, mine);
        if (rc == 0 && root) blocks_copy(p, &w, q, mine, 1);
    }
    if (rc == 0 && root) rc = w.cpu->ops->upload(w.cpu, w.whole.master, w.host, w.whole.n * sizeof(float));
    if (rc == 0 && root && w.whole.n_bufs)
        rc = w.cpu->ops->upload(w.cpu, w.whole.bufs, w.host + w.whole.n, w.whole.n_bufs * sizeof(float));
    if (rc == 0 && root) rc = t->cfg->workload->save_weights(path, t->model, &w.whole);
    if (dev) ab_release(t->be, AB_MEM_WORKSPACE, dev, dev_bytes);
    if (root) whole_free(&w);
    free(mine);
    return rc;
}
