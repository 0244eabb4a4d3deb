/* Optimizers over the fp32 master weights and fp32 gradients: SGD (momentum, weight decay)
 * and AdamW, with PyTorch's update rules. State lives in backend memory. */
#ifndef AB_OPTIM_H
#define AB_OPTIM_H

#include "backend.h"

typedef enum { AB_OPT_SGD = 0, AB_OPT_ADAMW = 1 } ab_optimizer_kind;

/* a run of elements of the buffers [off, off + n) and whether weight decay applies to it */
typedef struct {
    size_t off, n;
    int decay;
} ab_optim_run;

#define AB_OPTIM_MAX_RUNS 64

typedef struct {
    ab_optimizer_kind kind;
    float lr, momentum, weight_decay, beta1, beta2, eps;
    int t; /* steps taken */
    /* the next step takes the gradients times this (clipping's factor; the step sets it back to 1) */
    float grad_scale;
    size_t n;
    float *s1, *s2; /* SGD: momentum buffer (or NULL); AdamW: first and second moments */
    ab_backend *be;
    ab_optim_run runs[AB_OPTIM_MAX_RUNS]; /* one run over all n, unless ab_optimizer_exclude split them */
    int n_runs;
    /* the working copy a step refreshes in its own pass (ab_optimizer_set_copy), or NULL */
    void *copy;
    ab_dtype copy_type;
    size_t n_copy;
} ab_optimizer;

/* Learning rate per optimizer step t (0-based) of T in all, after a linear warm-up of W steps
 * from 0 (t < W: base * t / W, as Hugging Face's schedules): constant = base; linear decays to 0
 * at T; cosine = base * (1 + cos(pi * (t - W) / (T - W))) / 2; step = base x 0.1 from 50% of T,
 * x 0.01 from 75%. */
typedef enum { AB_LR_CONSTANT = 0, AB_LR_LINEAR, AB_LR_COSINE, AB_LR_STEP } ab_lr_schedule;
int ab_lr_schedule_parse(const char *s, ab_lr_schedule *out);
const char *ab_lr_schedule_name(ab_lr_schedule s);
/* what the schedule does after the warm-up, in words: "cosine decay to 0" */
const char *ab_lr_schedule_shape(ab_lr_schedule s);
float ab_lr_at(ab_lr_schedule s, float base, long t, long T, long W);

int ab_optimizer_parse(const char *s, ab_optimizer_kind *out);
const char *ab_optimizer_name(ab_optimizer_kind k);
int ab_optimizer_init(ab_optimizer *o, ab_backend *be, ab_optimizer_kind kind, size_t n, float lr, float momentum,
                      float weight_decay);
/* Leaves the elements of the no_decay specs out of weight decay (Hugging Face's exclusion of
 * biases and normalisation weights): the buffers' runs of decay and no-decay specs. */
struct ab_param_spec;
int ab_optimizer_exclude(ab_optimizer *o, const struct ab_param_spec *specs, int n_specs);
/* From now on each step also writes copy[i] = w[i] rounded to ct for the elements i < n_copy it
 * updates (an AMP working copy of the first n_copy weights), in the same pass; copy NULL stops it.
 * ct is fp16 or bf16. */
int ab_optimizer_set_copy(ab_optimizer *o, ab_dtype ct, void *copy, size_t n_copy);
int ab_optimizer_step(ab_optimizer *o, float *w, const float *g);
/* one step over the elements [lo, hi) only (a parameter server's shard; may be empty): the same
 * arithmetic per element as ab_optimizer_step, which is the range [0, n). Counts the step. */
int ab_optimizer_step_range(ab_optimizer *o, float *w, const float *g, size_t lo, size_t hi);
void ab_optimizer_free(ab_optimizer *o);

#endif
