/* Pipeline parallelism in the trainer (core/pipeline.h): this rank's stage of the model, one
 * copy of its activations per micro-batch in flight (a model instance per slot, all reading the
 * same parameters), and the schedule's program run step by step, the activations and their
 * gradients exchanged with the neighbouring stages over the pipeline group's communicator. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "timer.h"
#include "train_internal.h"

/* the whole model's units and their costs, from a model made for no stage in particular (its
 * tensors are never allocated); then the cut */
static int cut(trainer *t) {
    const ab_train_config *c = t->cfg;
    ab_pipe *pp = &t->pipe;
    ab_model *probe = NULL;
    const ab_model_split whole = {.tp = &t->tp};
    if (c->workload->create_model(c, &t->train->info, &whole, &probe) != 0) {
        t->rec->usage_error = ab_error_is_usage();
        return -1;
    }
    int rc = 0;
    if (probe->units < 1)
        rc = ab_usage_errorf("--pipeline-parallel %d: model %s is not cut into units", pp->P, c->model);
    if (rc == 0 && !(pp->bounds = malloc((size_t)(pp->P + 1) * sizeof *pp->bounds)))
        rc = ab_errorf("out of host memory");
    if (rc == 0) rc = ab_pp_cut(probe->unit_macs, probe->units, pp->P, pp->bounds);
    if (rc != 0) t->rec->usage_error = ab_error_is_usage();
    if (rc == 0) {
        pp->units = probe->units;
        for (int s = 0; s < pp->P; s++) {
            double macs = 0.0;
            for (int u = pp->bounds[s]; u < pp->bounds[s + 1]; u++) macs += probe->unit_macs[u];
            pp->stage_macs[s < AB_PP_MAX_STAGES ? s : AB_PP_MAX_STAGES - 1] = macs;
        }
    }
    ab_model_destroy(probe);
    return rc;
}

/* one model of this stage (a slot); slot 0 is t->model */
static int make_slot(trainer *t, ab_model **out) {
    ab_pipe *pp = &t->pipe;
    const ab_model_split split = {.tp = &t->tp, .stage = {pp->bounds[pp->s], pp->bounds[pp->s + 1]}};
    return t->cfg->workload->create_model(t->cfg, &t->train->info, &split, out);
}

int ab_pipe_build(trainer *t, ab_rng *rng) {
    const ab_train_config *c = t->cfg;
    ab_pipe *pp = &t->pipe;
    pp->P = t->lay.pp;
    pp->s = t->lay.pp_rank;
    pp->kind = c->pp_schedule;
    pp->M = c->accum_steps;
    if (pp->P > AB_PP_MAX_STAGES)
        return t->rec->usage_error = 1,
               ab_usage_errorf("--pipeline-parallel %d: at most %d stages", pp->P, AB_PP_MAX_STAGES);
    if (pp->M > AB_PP_MAX_MICRO)
        return t->rec->usage_error = 1,
               ab_usage_errorf("--pipeline-parallel: %d micro-batches a step, at most %d", pp->M, AB_PP_MAX_MICRO);
    AB_TRY(cut(t));
    pp->K = ab_pp_slots(pp->kind, pp->P, pp->s, pp->M);
    if (!(pp->slot = calloc((size_t)pp->K, sizeof *pp->slot)) || !(pp->x = calloc((size_t)pp->K, sizeof *pp->x)) ||
        !(pp->in = calloc((size_t)pp->K, sizeof *pp->in)) ||
        !(pp->items = malloc((size_t)(6 * pp->M + 4) * sizeof *pp->items)))
        return ab_errorf("out of host memory for the pipeline");
    for (int k = 0; k < pp->K; k++) {
        AB_TRY(make_slot(t, &pp->slot[k]));
        if (k == 0) t->model = pp->slot[0]; /* the trainer's from here: freed by teardown */
    }
    t->targets = ab_model_targets(t->model);
    AB_TRY(ab_params_init(&t->params, t->be, c->precision, t->model->specs, t->model->n_specs, rng));
    /* every slot reads the same parameters: slot 0's layout in each slot's own spec table */
    for (int k = 1; k < pp->K; k++)
        for (int i = 0; i < t->model->n_specs; i++) {
            pp->slot[k]->specs[i].offset = t->model->specs[i].offset;
            pp->slot[k]->specs[i].numel = t->model->specs[i].numel;
        }
    for (int k = 0; k < pp->K; k++) {
        pp->slot[k]->scratch_from = k ? pp->slot[0] : NULL;
        AB_TRY(ab_model_bind(pp->slot[k], &t->params));
    }
    return 0;
}

int ab_pipe_buffers(trainer *t) {
    ab_pipe *pp = &t->pipe;
    const ab_model *m = t->model;
    const size_t es = ab_dtype_size(t->params.compute_type), B = (size_t)t->cfg->batch_size;
    pp->in_bytes = B * m->stage_in_elems * es;
    pp->out_bytes = B * m->stage_out_elems * es;
    pp->x[0] = t->x; /* the trainer's batch is slot 0's */
    for (int k = 1; k < pp->K; k++)
        if (!(pp->x[k] = ab_alloc_for(t->be, AB_MEM_ACTIVATIONS, t->x_bytes, "slot %d's batch", k))) return -1;
    for (int k = 0; k < pp->K && pp->in_bytes; k++)
        if (!(pp->in[k] = ab_alloc_for(t->be, AB_MEM_ACTIVATIONS, pp->in_bytes, "slot %d's input from stage %d", k,
                                       pp->s - 1)))
            return -1;
    if (pp->out_bytes &&
        !(pp->dout = ab_alloc_for(t->be, AB_MEM_ACTIVATIONS, pp->out_bytes, "the gradient from stage %d", pp->s + 1)))
        return -1;
    const size_t np = (size_t)t->test->n * (size_t)t->targets;
    pp->eval_bytes = np * (sizeof(int32_t) + 1);
    if (!(pp->eval_share = ab_alloc_for(t->be, AB_MEM_WORKSPACE, pp->eval_bytes, "the test set's predictions")))
        return -1;
    return 0;
}

void ab_pipe_free(trainer *t) {
    ab_pipe *pp = &t->pipe;
    ab_backend *be = t->be;
    for (int k = 0; be && k < pp->K; k++) {
        if (k > 0 && pp->x && pp->x[k]) ab_release(be, AB_MEM_ACTIVATIONS, pp->x[k], t->x_bytes);
        if (pp->in && pp->in[k]) ab_release(be, AB_MEM_ACTIVATIONS, pp->in[k], pp->in_bytes);
    }
    if (be && pp->dout) ab_release(be, AB_MEM_ACTIVATIONS, pp->dout, pp->out_bytes);
    if (be && pp->eval_share) ab_release(be, AB_MEM_WORKSPACE, pp->eval_share, pp->eval_bytes);
    for (int k = 1; pp->slot && k < pp->K; k++) ab_model_destroy(pp->slot[k]); /* slot 0 is t->model */
    free(pp->slot);
    free(pp->x);
    free(pp->in);
    free(pp->items);
    free(pp->bounds);
    memset(pp, 0, sizeof *pp);
}

/* one exchange of the program: the halves' buffers for micro-batches of b samples, timed as the
 * stage's wait (what it could not compute) */
static int exchange(trainer *t, const ab_pp_item *x, const int *rows) {
    ab_pipe *pp = &t->pipe;
    ab_comm *g = t->ppc;
    const void *sbuf = NULL;
    void *rbuf = NULL;
    size_t sb = 0, rb = 0;
    int dst = -1, src = -1;
    const size_t es = ab_dtype_size(t->params.compute_type);
    if (x->send_act >= 0) {
        sbuf = pp->slot[x->send_act % pp->K]->stage_out;
        sb = (size_t)rows[x->send_act] * t->model->stage_out_elems * es;
        dst = pp->s + 1;
    } else if (x->send_grad >= 0) {
        sbuf = pp->slot[x->send_grad % pp->K]->stage_din;
        sb = (size_t)rows[x->send_grad] * t->model->stage_in_elems * es;
        dst = pp->s - 1;
    }
    if (x->recv_act >= 0) {
        rbuf = pp->in[x->recv_act % pp->K];
        rb = (size_t)rows[x->recv_act] * t->model->stage_in_elems * es;
        src = pp->s - 1;
    } else if (x->recv_grad >= 0) {
        rbuf = pp->dout;
        rb = (size_t)rows[x->recv_grad] * t->model->stage_out_elems * es;
        src = pp->s + 1;
    }
    const double t0 = ab_now();
    AB_TRY(g->ops->sendrecv(g, sbuf, sb, dst, rbuf, rb, src));
    pp->wait_s += ab_now() - t0;
    pp->bytes_sent += (double)sb;
    return 0;
}

/* a micro-batch's forward on this stage: the batch (every stage: the last needs the labels, a
 * transformer's layers the padding mask), the input from the stage before, the loss on the last */
static int forward(trainer *t, const int32_t *idx, int b, int k, int epoch, long pass_index, int n, float scale) {
    ab_pipe *pp = &t->pipe;
    ab_model *m = pp->slot[k % pp->K];
    AB_TRY(ab_fill_batch(t, idx, b, epoch, pp->x[k % pp->K]));
    m->stage_in = pp->in[k % pp->K];
    const ab_pass pass = ab_pass_train(pass_index, t->cfg->seed);
    AB_TRY(m->ops->forward(m, &t->params, pp->x[k % pp->K], b, &pass));
    if (m != pp->slot[0]) { /* batch norm's step count is the stage's: every slot's forwards, kept in slot 0 */
        pp->slot[0]->batches_tracked += m->batches_tracked;
        m->batches_tracked = 0;
    }
    if (pp->s < pp->P - 1) return 0;
    /* the loss gradient over the logits, in place, as micro_batches does */
    return t->be->ops->softmax_xent(t->be, b * t->targets, m->n_classes, t->params.compute_type, m->logits, t->labels,
                                    scale * (float)b / (float)n, t->params.compute_type, m->logits,
                                    &t->stats->loss_sum, NULL);
}

/* the buckets know the parameters' spec table (slot 0's): a later slot's spec is the one at the
 * same index there */
typedef struct {
    trainer *t;
    const ab_model *slot;
} slot_ready_ctx;

static int slot_ready(void *ctx, const ab_param_spec *s) {
    const slot_ready_ctx *c = ctx;
    const ab_param_spec *base = c->t->params.specs;
    const int in_params = s >= base && s < base + c->t->params.n_specs; /* a model binding the parameters' table */
    return ab_buckets_ready(&c->t->buckets, in_params ? s : &base[s - c->slot->specs]);
}

int ab_pipe_micro_batches(trainer *t, const int32_t *mine, int m, int n, int epoch, float scale) {
    ab_pipe *pp = &t->pipe;
    ab_backend *be = t->be;
    ab_params *p = &t->params;
    const int B = t->cfg->batch_size, M = (m + B - 1) / B;
    AB_TRY(be->ops->zero(be, t->stats, sizeof(step_stats)));
    AB_TRY(ab_step_refresh(t));
    if (M == 0) return be->ops->zero(be, p->grad, p->n * sizeof(float));
    if (M > pp->M) return ab_errorf("pipeline: %d micro-batches in a step of %d", M, pp->M);
    int rows[AB_PP_MAX_MICRO];
    if (M > AB_PP_MAX_MICRO) return ab_errorf("pipeline: more than %d micro-batches", AB_PP_MAX_MICRO);
    for (int k = 0; k < M; k++) rows[k] = m - k * B < B ? m - k * B : B;
    const int n_items = ab_pp_program(pp->kind, pp->P, pp->s, M, pp->items);
    int backwards = 0, last_b = -1;
    for (int i = 0; i < n_items; i++)
        if (pp->items[i].kind == AB_PP_BACKWARD) last_b = i;
    const long pass0 = t->passes;
    const double t0 = ab_now(), wait0 = pp->wait_s;
    for (int i = 0; i < n_items; i++) {
        const ab_pp_item *x = &pp->items[i];
        const int k = x->mb;
        if (x->kind == AB_PP_EXCHANGE) {
            AB_TRY(exchange(t, x, rows));
        } else if (x->kind == AB_PP_FORWARD) {
            AB_TRY(forward(t, mine + (size_t)k * B, rows[k], k, epoch, pass0 + k, n, scale));
        } else {
            ab_model *md = pp->slot[k % pp->K];
            md->stage_in = pp->in[k % pp->K];
            slot_ready_ctx rc = {t, md};
            const ab_grad_sink sink = {.mode = backwards++ == 0 ? AB_GRAD_WRITE : AB_GRAD_ACCUMULATE,
                                       .ready = i == last_b && t->overlap ? slot_ready : NULL, .ready_ctx = &rc};
            const void *dout = pp->s == pp->P - 1 ? md->logits : pp->dout;
            AB_TRY(md->ops->backward(md, p, &sink, pp->x[k % pp->K], dout, rows[k]));
        }
    }
    AB_TRY(be->ops->sync(be));
    pp->busy_s += ab_now() - t0 - (pp->wait_s - wait0);
    pp->steps++;
    pp->micro_batches += M;
    t->passes = pass0 + M;
    return 0;
}

int ab_pipe_eval_forward(trainer *t, int b, const void **logits) {
    ab_pipe *pp = &t->pipe;
    ab_model *m = pp->slot[0];
    ab_comm *g = t->ppc;
    const size_t es = ab_dtype_size(t->params.compute_type);
    *logits = NULL;
    if (pp->s > 0) AB_TRY(g->ops->sendrecv(g, NULL, 0, -1, pp->in[0], (size_t)b * m->stage_in_elems * es, pp->s - 1));
    m->stage_in = pp->in[0];
    const ab_pass pass = ab_pass_eval();
    AB_TRY(m->ops->forward(m, &t->params, t->x, b, &pass));
    if (pp->s < pp->P - 1)
        return g->ops->sendrecv(g, m->stage_out, (size_t)b * m->stage_out_elems * es, pp->s + 1, NULL, 0, -1);
    *logits = m->logits;
    return 0;
}

int ab_pipe_eval_share(trainer *t) {
    ab_pipe *pp = &t->pipe;
    ab_comm *g = t->ppc;
    ab_backend *be = t->be;
    const int last = pp->P - 1;
    const size_t np = (size_t)t->test->n * (size_t)t->targets;
    AB_TRY(g->ops->broadcast(g, t->stats, sizeof(step_stats), last));
    if (pp->s == last) {
        AB_TRY(be->ops->upload(be, pp->eval_share, t->pred, np * sizeof(int32_t)));
        AB_TRY(be->ops->upload(be, (char *)pp->eval_share + np * sizeof(int32_t), t->hit, np));
    }
    AB_TRY(g->ops->broadcast(g, pp->eval_share, pp->eval_bytes, last));
    AB_TRY(be->ops->download(be, t->pred, pp->eval_share, np * sizeof(int32_t)));
    return be->ops->download(be, t->hit, (char *)pp->eval_share + np * sizeof(int32_t), np);
}

int ab_pipe_record(trainer *t) {
    ab_pipe *pp = &t->pipe;
    ab_run_record *rec = t->rec;
    const int P = pp->P;
    /* one collective over the pipeline group whatever failed here: every stage's times, bytes sent
     * and modelled, and parameters (SUM of one entry each), then the tensor groups' traffic (MAX:
     * the busiest stage's ranks) */
    enum { BUSY, WAIT, SENT, MODEL, PARAMS, N_ROWS };
    double *v = calloc((size_t)P * N_ROWS, sizeof *v);
    int rc = v ? 0 : ab_errorf("out of host memory");
    double local[N_ROWS] = {0};
    const double per = pp->steps ? 1.0 / (double)pp->steps : 0.0;
    /* the activations a stage sends on and the gradients it sends back, a micro-batch of the batch
     * size, per step: what the exchanges move when every micro-batch is whole */
    const double es = (double)ab_dtype_size(t->params.compute_type), B = t->cfg->batch_size;
    local[BUSY] = pp->busy_s;
    local[WAIT] = pp->wait_s;
    local[SENT] = pp->bytes_sent * per;
    local[MODEL] = (pp->s < P - 1 ? B * (double)t->model->stage_out_elems * es * pp->M : 0.0) +
                   (pp->s > 0 ? B * (double)t->model->stage_in_elems * es * pp->M : 0.0);
    local[PARAMS] = (double)t->params.n;
    double scratch[N_ROWS * AB_PP_MAX_STAGES] = {0};
    double *all = v ? v : scratch;
    for (int r = 0; r < N_ROWS; r++) all[r * P + pp->s] = local[r];
    if (t->ppc->ops->allreduce_f64(t->ppc, all, N_ROWS * P, AB_RED_SUM) != 0) rc = -1;
    double tpx[4] = {rec->tp_bytes_sent, rec->tp_model_bytes, (double)rec->tp_calls, rec->tp_time_s};
    if (t->ppc->ops->allreduce_f64(t->ppc, tpx, 4, AB_RED_MAX) != 0) rc = -1;
    if (rc != 0) {
        free(v);
        return -1;
    }
    free(rec->pp_busy_s);
    rec->pp_busy_s = v;
    rec->pp_wait_s = v + WAIT * P;
    rec->pp_bytes_sent = v + SENT * P;
    rec->pp_bytes_model = v + MODEL * P;
    rec->pp_params = v + PARAMS * P;
    rec->pp_micro_batches = pp->M;
    rec->pp_units = pp->units;
    snprintf(rec->pp_schedule, sizeof rec->pp_schedule, "%s", ab_pp_schedule_name(pp->kind));
    memcpy(rec->pp_bounds, pp->bounds, (size_t)(P + 1) * sizeof(int));
    memcpy(rec->pp_stage_macs, pp->stage_macs, (size_t)P * sizeof(double));
    /* the replica's parameters on a tensor rank: every stage's */
    double n = 0.0;
    for (int s = 0; s < P; s++) n += rec->pp_params[s];
    rec->parameters = (long)n;
    rec->tp_bytes_sent = tpx[0];
    rec->tp_model_bytes = tpx[1];
    rec->tp_calls = (long)tpx[2];
    rec->tp_time_s = tpx[3];
    return 0;
}
