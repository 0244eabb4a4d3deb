/* A model's parameters: one contiguous fp32 buffer of all weights, carved into named tensors
 * by a spec table, plus the buffers the precision policy adds:
 *   fp32: master = the weights (charged as parameters), grad = fp32 gradients;
 *   amp/bf16: master = fp32 master weights, wc = fp16/bf16 working copy the forward reads,
 *   gradc = gradients in the compute type as backward writes them, grad = their fp32 sum. */
#ifndef AB_PARAMS_H
#define AB_PARAMS_H

#include "backend.h"
#include "rng.h"

#define AB_MAX_DIMS 4

typedef enum { AB_INIT_ZERO = 0, AB_INIT_UNIFORM_FAN_IN, AB_INIT_ONE } ab_init_kind;

typedef struct {
    const char *name;
    int ndim;
    int shape[AB_MAX_DIMS];
    ab_init_kind init;
    int fan_in;    /* for AB_INIT_UNIFORM_FAN_IN: U(-1/sqrt(fan_in), 1/sqrt(fan_in)) */
    size_t offset; /* elements from the start of the buffer, filled by ab_params_init */
    size_t numel;
} ab_param_spec;

typedef struct ab_params {
    ab_backend *be;
    ab_precision prec;
    ab_dtype cdt; /* compute type: what the forward reads and backward writes */
    int n_specs;
    ab_param_spec *specs;
    size_t n;      /* total elements */
    float *master; /* (n) fp32 */
    void *wc;      /* (n) cdt; == master under fp32 */
    float *grad;   /* (n) fp32 */
    void *gradc;   /* (n) cdt; == grad under fp32 */
    int grad_beta; /* 1 when backward must add into gradc (fp32 accumulation micro-steps) */
} ab_params;

/* Lays out the specs (offsets), allocates the buffers and initialises the weights on the host
 * with the given RNG in spec order (PyTorch's default Linear init for fan-in specs). */
int ab_params_init(ab_params *p, ab_backend *be, ab_precision prec, ab_param_spec *specs, int n_specs, ab_rng *rng);
void ab_params_free(ab_params *p);
/* refresh the compute copy from the master weights (no-op under fp32) */
int ab_params_refresh(ab_params *p);
/* after a micro-batch's backward: fold gradc into grad (no-op under fp32) */
int ab_params_fold_grads(ab_params *p, int accumulate);
/* element pointer into a buffer of type t */
static inline void *ab_at(void *base, ab_dtype t, size_t off) { return (char *)base + off * ab_dtype_size(t); }
static inline const void *ab_cat(const void *base, ab_dtype t, size_t off) {
    return (const char *)base + off * ab_dtype_size(t);
}

#endif
