/* The model interface: a parameter spec table and a forward/backward order over layers.
 * Models know nothing of data sets, optimizers or precision beyond ab_params. */
#ifndef AB_MODEL_H
#define AB_MODEL_H

#include "params.h"

typedef struct ab_model ab_model;

typedef struct {
    const char *name;
    /* x (B, in_dim) in p->cdt -> m->logits (B, n_classes) in p->cdt; keeps what backward needs */
    int (*forward)(ab_model *m, const ab_params *p, const void *x, int B);
    /* dlogits (B, n_classes) in p->cdt -> gradients into p->gradc */
    int (*backward)(ab_model *m, const ab_params *p, const void *x, const void *dlogits, int B);
    /* allocates activations in p's compute type once the parameters are laid out */
    int (*bind)(ab_model *m, const ab_params *p);
    void (*destroy)(ab_model *m, ab_backend *be);
} ab_model_ops;

struct ab_model {
    const ab_model_ops *ops;
    ab_param_spec *specs;
    int n_specs;
    int in_dim, n_classes, max_batch;
    void *logits; /* (max_batch, n_classes) in compute type */
    void *impl;
};

typedef struct {
    int in_dim, n_classes, max_batch;
    int hidden; /* MLP hidden width; 0 = model default */
} ab_model_config;

/* Creates the named model ("mlp"): specs first (so ab_params_init can lay them out), then
 * ab_model_bind allocates activations once the parameters exist. */
int ab_model_create(const char *name, const ab_model_config *cfg, ab_model **out);
static inline int ab_model_bind(ab_model *m, const ab_params *p) { return m->ops->bind(m, p); }
static inline void ab_model_destroy(ab_model *m, ab_backend *be) {
    if (m) m->ops->destroy(m, be);
}
/* models/ registry entries */
int ab_mlp_create(const ab_model_config *cfg, ab_model **out);

#endif
