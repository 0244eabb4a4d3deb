/* The article's MNIST MLP: 784 -> Linear -> ReLU -> Linear -> 10 (hidden 256).
 * forward:  x (B, 784) -> h = relu(fc1(x)) (B, 256) -> logits = fc2(h) (B, 10)
 * backward: dlogits -> fc2 grads, dh -> relu mask -> fc1 grads (no dx: x is data).
 * Tensor parallelism over T ranks (core/parallel.h): fc1 column-parallel (each rank a block of
 * hidden / T units, the ReLU on its block), fc2 row-parallel (the block's partial logits summed
 * over the group, the bias added once after). One all-reduce of (B, 10) logits a forward; none
 * backward, since fc1's input is the data (Megatron's f operator has no gradient to reduce).
 * Pipeline units (core/pipeline.h): 0 = fc1 and its ReLU, 1 = fc2; between them the hidden
 * activation (hidden / T a sample). */
#include <stddef.h>
#include <stdlib.h>

#include "layers.h"
#include "workloads.h"

enum { FC1_W, FC1_B, FC2_W, FC2_B, MLP_NSPECS };

typedef struct {
    ab_param_spec specs[MLP_NSPECS];
    ab_linear fc1, fc2;
    void *h;  /* (B, hidden) post-ReLU */
    void *dh; /* (B, hidden) */
    ab_tp *tp;  /* the tensor group, or NULL */
    void *ones; /* (B) ones: fc2's bias after the all-reduce (tensor parallelism) */
    int has1, has2;       /* the stage holds fc1, fc2 */
    void *din;            /* (B, hidden) the gradient of a stage_in (a stage of fc2 alone) */
    double unit_macs[2];
} mlp;

static int mlp_forward(ab_model *m, const ab_params *p, const void *x, int B, const ab_pass *pass) {
    (void)pass;
    mlp *s = m->impl;
    if (s->has1) AB_TRY(ab_linear_forward(p, &s->fc1, B, x, s->h, AB_EPI_RELU));
    /* a stage of fc1 alone ends at h (its stage_out) */
    return s->has2 ? ab_linear_row_forward(p, &s->fc2, s->tp, B, s->has1 ? s->h : m->stage_in, m->logits, s->ones) : 0;
}

/* dout: the gradient of the logits, or of h on a stage of fc1 alone */
static int mlp_backward(ab_model *m, const ab_params *p, const ab_grad_sink *g, const void *x, const void *dout,
                        int B) {
    mlp *s = m->impl;
    if (s->has2) {
        AB_TRY(ab_linear_backward(p, g, &s->fc2, B, s->has1 ? s->h : m->stage_in, dout, s->has1 ? s->dh : s->din));
        if (!s->has1) {
            m->stage_din = s->din;
            return 0;
        }
    }
    AB_TRY(p->be->ops->relu_backward(p->be, (size_t)B * (size_t)s->fc1.out, p->compute_type, s->h,
                                     s->has2 ? s->dh : dout, s->dh));
    return ab_linear_backward(p, g, &s->fc1, B, x, s->dh, NULL);
}

static int mlp_bind(ab_model *m, const ab_params *p) {
    mlp *s = m->impl;
    ab_linear_bind(&s->fc1, &s->specs[FC1_W], &s->specs[FC1_B]);
    ab_linear_bind(&s->fc2, &s->specs[FC2_W], &s->specs[FC2_B]);
    const size_t es = ab_dtype_size(p->compute_type), B = (size_t)m->max_batch;
    const size_t hid = B * (size_t)s->fc1.out * es;
    ab_arena_init(&m->arena, p->be);
    /* backward's scratch: a pipeline's later slots share their first's */
    const mlp *first = m->scratch_from ? m->scratch_from->impl : NULL;
    if (first) s->dh = first->dh, s->din = first->din;
    if (s->has1) ab_arena_add(&m->arena, AB_MEM_ACTIVATIONS, hid, &s->h, "fc1.relu");
    if (s->has1 && !first) ab_arena_add(&m->arena, AB_MEM_ACTIVATIONS, hid, &s->dh, "fc1.relu.grad");
    if (s->has2) ab_arena_add(&m->arena, AB_MEM_ACTIVATIONS, B * (size_t)m->n_classes * es, &m->logits, "logits");
    if (s->has2 && !s->has1 && !first)
        ab_arena_add(&m->arena, AB_MEM_ACTIVATIONS, hid, &s->din, "fc1.relu.grad (sent back)");
    if (s->has2 && ab_tp_size(s->tp) > 1) ab_arena_add(&m->arena, AB_MEM_ACTIVATIONS, B * es, &s->ones, "fc2.bias.ones");
    AB_TRY(ab_arena_alloc(&m->arena));
    if (!s->has2) m->stage_out = s->h;
    return s->ones ? ab_fill_ones(p, B, s->ones) : 0;
}

static void mlp_destroy(ab_model *m) {
    if (m->arena.be) ab_arena_free(&m->arena);
    free(m->impl);
    free(m);
}

const ab_model_option ab_mlp_options[] = {
    {"hidden", "H", "the hidden width", "256", AB_MODEL_OPT_INT, offsetof(ab_train_config, hidden), 1, 1 << 16},
    {0},
};

static const ab_model_ops mlp_ops = {
    .name = "mlp", .forward = mlp_forward, .backward = mlp_backward, .bind = mlp_bind, .destroy = mlp_destroy};

int ab_mlp_create(const ab_model_config *cfg, ab_model **out) {
    const int hidden = cfg->hidden > 0 ? cfg->hidden : 256;
    const ab_sample_info *si = &cfg->sample;
    const int in_dim = si->C * si->H * si->W;
    if (si->kind != AB_SAMPLE_IMAGE || in_dim <= 0 || si->n_classes <= 1 || cfg->max_batch <= 0)
        return ab_errorf("mlp: needs images (in=%d classes=%d batch=%d)", in_dim, si->n_classes, cfg->max_batch);
    ab_model *m = calloc(1, sizeof *m);
    mlp *s = calloc(1, sizeof *s);
    if (!m || !s) {
        free(m);
        free(s);
        return ab_errorf("out of host memory creating the mlp");
    }
    ab_linear_specs(&s->specs[FC1_W], &s->specs[FC1_B], "fc1.weight", "fc1.bias", in_dim, hidden);
    ab_linear_specs(&s->specs[FC2_W], &s->specs[FC2_B], "fc2.weight", "fc2.bias", hidden, si->n_classes);
    s->tp = cfg->tp;
    if (ab_linear_column_parallel(&s->specs[FC1_W], &s->specs[FC1_B], s->tp) != 0 ||
        ab_linear_row_parallel(&s->specs[FC2_W], s->tp) != 0) {
        free(m);
        free(s);
        return ab_usage_errorf("mlp: --tensor-parallel %d: the hidden width %d does not divide among the ranks",
                         ab_tp_size(cfg->tp), hidden);
    }
    /* the pipeline's units: fc1 (and its ReLU), fc2 */
    s->unit_macs[0] = (double)in_dim * hidden;
    s->unit_macs[1] = (double)hidden * si->n_classes;
    const ab_stage st = ab_stage_resolve(cfg->stage, 2);
    s->has1 = st.lo <= 0 && st.hi > 0;
    s->has2 = st.lo <= 1 && st.hi > 1;
    for (int i = 0; i < MLP_NSPECS; i++) s->specs[i].unit = i < FC2_W ? 0 : 1;
    ab_specs_mark_stage(s->specs, MLP_NSPECS, st);
    const size_t local = (size_t)(hidden / ab_tp_size(s->tp));
    *m = (ab_model){.ops = &mlp_ops, .specs = s->specs, .n_specs = MLP_NSPECS, .n_classes = si->n_classes,
                    .max_batch = cfg->max_batch, .macs_per_sample = (double)in_dim * hidden + (double)hidden * si->n_classes,
                    .tensor_parallel = ab_tp_size(s->tp), .tp_elems_per_sample = s->has2 ? si->n_classes : 0, .units = 2,
                    .unit_macs = s->unit_macs, .stage = st, .stage_in_elems = s->has1 ? 0 : local,
                    .stage_out_elems = s->has2 ? 0 : local, .impl = s};
    *out = m;
    return 0;
}
