/* The model interface: a parameter spec table and a forward/backward order over layers.
 * Models know nothing of data sets, optimizers or precision beyond ab_params; they receive a
 * batch as the data set assembled it (core/dataset.h). */
#ifndef AB_MODEL_H
#define AB_MODEL_H

#include "arena.h"
#include "dataset.h"
#include "parallel.h"
#include "params.h"

typedef struct ab_model ab_model;

/* What one forward pass is for. A training pass keeps what backward needs, uses batch
 * statistics and draws its random choices (dropout) from seed and index: index counts the run's
 * training passes from 0 (micro-batches, not optimizer steps), so a pass's masks are the same on
 * every backend and in a resumed run. */
typedef struct {
    int training;
    long index;
    uint64_t seed;
} ab_pass;

static inline ab_pass ab_pass_eval(void) { return (ab_pass){.training = 0}; }
static inline ab_pass ab_pass_train(long index, uint64_t seed) {
    return (ab_pass){.training = 1, .index = index, .seed = seed};
}

typedef struct {
    const char *name;
    /* x: a batch of B samples as ab_dataset fill wrote it -> m->logits (B * targets, n_classes)
     * in p->compute_type: one row per target (ab_model_targets), a sample's rows together */
    int (*forward)(ab_model *m, const ab_params *p, const void *x, int B, const ab_pass *pass);
    /* dlogits (B * targets, n_classes) in p->compute_type, the gradient of the loss for the last training forward
     * -> the weight gradients, delivered as g says (core/params.h) */
    int (*backward)(ab_model *m, const ab_params *p, const ab_grad_sink *g, const void *x, const void *dlogits, int B);
    /* allocates activations (m->arena) once the parameters are laid out */
    int (*bind)(ab_model *m, const ab_params *p);
    void (*destroy)(ab_model *m);
    /* Optional (NULL: the generic strict loader and writer of models/checkpoint.c): weights files
     * in a layout of the model's own (Hugging Face's BERT names with or without "bert.", say);
     * from receives a one-line account of what came from the file. */
    int (*load_weights)(ab_model *m, ab_params *p, const char *path, char *from, size_t cap);
    int (*save_weights)(const ab_model *m, const ab_params *p, const char *path);
} ab_model_ops;

/* Pipeline parallelism (core/pipeline.h): a model that can be cut is a chain of units (the MLP's
 * two linear layers; ResNet's stem, each bottleneck block and the head; BERT's embeddings, each
 * encoder layer and the head), and a stage holds the
 * units [lo, hi). hi 0: the whole model. */
typedef struct {
    int lo, hi;
} ab_stage;

struct ab_model {
    const ab_model_ops *ops;
    ab_param_spec *specs;
    int n_specs;
    int n_classes, max_batch;
    int targets;            /* logits rows per sample, each scored against its own label (a per-token
                               loss); 0 = 1. The trainer takes the data set's labels per sample to match */
    double macs_per_sample; /* multiply-adds of one sample's forward pass */
    long batches_tracked;   /* batch norm's num_batches_tracked: training passes of a model with batch norm,
                               counted by its forward, read from and written to checkpoints */
    const char *notes;      /* for the record: how the model trains under data parallelism, ... */
    double tp_elems_per_sample; /* under tensor parallelism: activation elements one sample's forward and
                                   backward all-reduce across the tensor group (the traffic's model) */
    /* pipeline parallelism: the whole model's units (0: it cannot be cut) and each one's
     * multiply-adds per sample (the cut's cost, owned by the model), the units this model holds,
     * and between stages, per sample in the compute type, what enters its first unit (a stage
     * after the first) and what leaves its last (a stage before the last). stage_in is the
     * trainer's: the activation the stage starts from, set before forward and again before the
     * backward of the same micro-batch; stage_out is the model's (forward's result, read by the
     * trainer until the next forward); stage_din is set by backward: the gradient of stage_in,
     * valid until the next backward. On the last stage the output is the logits, on the first
     * the input is the data set's batch. */
    int units;
    double *unit_macs;
    ab_stage stage;
    size_t stage_in_elems, stage_out_elems;
    const void *stage_in;
    void *stage_out, *stage_din;
    /* a pipeline's later slots (set before bind): backward's scratch is this model's (one backward
     * runs at a time, and what it sends back is sent before the next starts) */
    const struct ab_model *scratch_from;
    int tensor_parallel;    /* the ranks its split tensors are cut among (ab_model_config.tp); 0 or 1: none.
                               The trainer refuses a tensor group the model did not split itself for */
    void *logits;           /* (max_batch * targets, n_classes) in compute type */
    ab_arena arena;
    void *impl;
};

/* What a model is built for: the sample shape and classes (from the data set), the largest
 * micro-batch, and the options a model may read (0 = the model's default). */
typedef struct {
    const char *name; /* the registry's name of the model asked for */
    ab_sample_info sample;
    int max_batch;
    int hidden;    /* MLP hidden width */
    int width;     /* ResNet: channels of the first stage */
    int blocks[4]; /* ResNet: bottleneck blocks per stage */
    const char *arch; /* BERT: the checkpoint folder or file whose config.json gives the architecture */
    float dropout;    /* BERT: hidden and attention dropout; < 0: the architecture's */
    ab_tp *tp;        /* the tensor group (core/parallel.h), kept by the model for its forward and backward;
                         NULL or a group of 1: the whole model */
    ab_stage stage;   /* the pipeline stage's units (hi 0: all); the others' tensors are absent (core/params.h) */
} ab_model_config;

/* How a model is split among ranks: its tensors among the tensor group's, its units among the
 * pipeline's stages. NULL (or a group of 1 and hi 0): the whole model. */
typedef struct {
    ab_tp *tp;
    ab_stage stage;
} ab_model_split;

/* st with hi 0 (the whole model) made the model's units */
static inline ab_stage ab_stage_resolve(ab_stage st, int units) {
    if (st.hi <= 0) st.hi = units;
    return st;
}
/* what stage st holds of a chain of a first unit (0), a body of `inner` units (1 .. inner) and a
 * last unit (inner + 1), as BERT (embeddings, layers, head) and ResNet (stem, blocks, head) are:
 * the first and the last unit, and the body's units [lo, hi) numbered from 0 */
typedef struct {
    int first, last, lo, hi;
} ab_stage_span;
static inline ab_stage_span ab_stage_span_of(ab_stage st, int inner) {
    ab_stage_span s = {.first = st.lo == 0, .last = st.hi == inner + 2, .lo = st.lo > 0 ? st.lo - 1 : 0,
                       .hi = st.hi - 1 < inner ? st.hi - 1 : inner};
    if (s.hi < s.lo) s.hi = s.lo;
    return s;
}
/* each of n specs outside stage st absent (core/params.h), by the unit it belongs to */
static inline void ab_specs_mark_stage(ab_param_spec *specs, int n, ab_stage st) {
    for (int i = 0; i < n; i++) specs[i].absent = specs[i].unit < st.lo || specs[i].unit >= st.hi;
}

/* the units of a stage: [lo, hi), hi 0 meaning the model's all */
static inline int ab_stage_has(const ab_model *m, int unit) {
    return unit >= m->stage.lo && unit < (m->stage.hi > 0 ? m->stage.hi : m->units);
}
static inline int ab_stage_first(const ab_model *m) { return m->stage.lo == 0; }
static inline int ab_stage_last(const ab_model *m) { return m->stage.hi == 0 || m->stage.hi >= m->units; }

/* the logits rows per sample of m: targets, or 1 */
static inline int ab_model_targets(const ab_model *m) { return m->targets > 1 ? m->targets : 1; }

static inline int ab_model_bind(ab_model *m, const ab_params *p) { return m->ops->bind(m, p); }
static inline void ab_model_destroy(ab_model *m) {
    if (m) m->ops->destroy(m);
}

#endif
