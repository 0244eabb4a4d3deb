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
} ab_model_config;

/* the logits rows per sample of m: targets, or 1 */
static inline int ab_model_targets(const ab_model *m) { return m->targets > 1 ? m->targets : 1; }

static inline int ab_model_bind(ab_model *m, const ab_params *p) { return m->ops->bind(m, p); }
static inline void ab_model_destroy(ab_model *m) {
    if (m) m->ops->destroy(m);
}

#endif
