/* Optimizer state and dispatch to the backend's fused update kernels. */
#include "optim.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "params.h"

/* each schedule's name and what it does after the warm-up, as the recipe line says it */
static const char *const schedule_names[] = {"constant", "linear", "cosine", "step"};
static const char *const schedule_shapes[] = {"constant", "linear decay to 0", "cosine decay to 0",
                                              "step (x0.1 from 50%, x0.01 from 75% of the steps)"};

int ab_lr_schedule_parse(const char *s, ab_lr_schedule *out) {
    for (int i = 0; i < 4; i++)
        if (strcmp(s, schedule_names[i]) == 0) {
            *out = (ab_lr_schedule)i;
            return 0;
        }
    return ab_errorf("unknown learning-rate schedule '%s' (expected constant, linear, cosine or step)", s);
}

const char *ab_lr_schedule_name(ab_lr_schedule s) { return (unsigned)s < 4 ? schedule_names[s] : "?"; }
const char *ab_lr_schedule_shape(ab_lr_schedule s) { return (unsigned)s < 4 ? schedule_shapes[s] : "?"; }

float ab_lr_at(ab_lr_schedule s, float base, long t, long T, long W) {
    if (W > 0 && t < W) return base * (float)((double)t / (double)W);
    const double span = T > W ? (double)(T - W) : 1.0, x = (double)(t - W) / span;
    switch (s) {
    case AB_LR_LINEAR: return (float)(base * fmax(0.0, 1.0 - x));
    case AB_LR_COSINE: return (float)(base * 0.5 * (1.0 + cos(M_PI * fmin(1.0, x))));
    case AB_LR_STEP: return base * (t >= T * 3 / 4 ? 0.01f : t >= T / 2 ? 0.1f : 1.0f);
    case AB_LR_CONSTANT: break;
    }
    return base;
}

int ab_optimizer_parse(const char *s, ab_optimizer_kind *out) {
    if (strcmp(s, "sgd") == 0) *out = AB_OPT_SGD;
    else if (strcmp(s, "adamw") == 0) *out = AB_OPT_ADAMW;
    else return ab_errorf("unknown optimizer '%s' (expected sgd or adamw)", s);
    return 0;
}

const char *ab_optimizer_name(ab_optimizer_kind k) { return k == AB_OPT_ADAMW ? "adamw" : "sgd"; }

int ab_optimizer_init(ab_optimizer *o, ab_backend *be, ab_optimizer_kind kind, size_t n, float lr, float momentum,
                      float weight_decay) {
    *o = (ab_optimizer){.kind = kind, .lr = lr, .momentum = momentum, .weight_decay = weight_decay, .beta1 = 0.9f,
                        .beta2 = 0.999f, .eps = 1e-8f, .grad_scale = 1.0f, .n = n, .be = be, .runs = {{0, n, 1}}, .n_runs = 1};
    const size_t bytes = n * sizeof(float);
    const char *what = kind == AB_OPT_ADAMW ? "AdamW" : "SGD momentum";
    if (kind == AB_OPT_ADAMW || momentum != 0.0f) {
        if (!(o->s1 = ab_alloc_for(be, AB_MEM_OPTIMIZER, bytes, "the %s state of %zu parameters", what, n))) return -1;
        AB_TRY(be->ops->zero(be, o->s1, bytes));
    }
    if (kind == AB_OPT_ADAMW) {
        if (!(o->s2 = ab_alloc_for(be, AB_MEM_OPTIMIZER, bytes, "the %s state of %zu parameters", what, n))) return -1;
        AB_TRY(be->ops->zero(be, o->s2, bytes));
    }
    return 0;
}

static int by_offset(const void *a, const void *b) {
    const ab_param_spec *x = *(const ab_param_spec *const *)a, *y = *(const ab_param_spec *const *)b;
    return (x->offset > y->offset) - (x->offset < y->offset);
}

int ab_optimizer_exclude(ab_optimizer *o, const ab_param_spec *specs, int n_specs) {
    const ab_param_spec **s = malloc((size_t)(n_specs ? n_specs : 1) * sizeof *s);
    if (!s) return ab_errorf("out of host memory");
    int k = 0;
    for (int i = 0; i < n_specs; i++)
        if (specs[i].region != AB_REGION_BUFFER && specs[i].numel) s[k++] = &specs[i]; /* absent: no elements */
    qsort(s, (size_t)k, sizeof *s, by_offset);
    int n = 0;
    size_t at = 0;
    for (int i = 0; i < k; i++) {
        const int decay = !s[i]->no_decay;
        if (s[i]->offset != at) {
            const size_t got = s[i]->offset;
            free(s);
            return ab_errorf("optimizer: the parameters do not tile the buffer (a spec at %zu, expected %zu)", got,
                             at);
        }
        if (n > 0 && o->runs[n - 1].decay == decay) {
            o->runs[n - 1].n += s[i]->numel;
        } else {
            if (n == AB_OPTIM_MAX_RUNS) {
                free(s);
                return ab_errorf("optimizer: more than %d runs of decay and no-decay parameters", AB_OPTIM_MAX_RUNS);
            }
            o->runs[n++] = (ab_optim_run){at, s[i]->numel, decay};
        }
        at += s[i]->numel;
    }
    free(s);
    if (at != o->n) return ab_errorf("optimizer: the parameters cover %zu of %zu elements", at, o->n);
    o->n_runs = n;
    return 0;
}

int ab_optimizer_set_copy(ab_optimizer *o, ab_dtype ct, void *copy, size_t n_copy) {
    if (copy && ct != AB_F16 && ct != AB_BF16) return ab_errorf("optimizer: a working copy must be fp16 or bf16");
    if (copy && n_copy > o->n) return ab_errorf("optimizer: a working copy of %zu of %zu weights", n_copy, o->n);
    o->copy = copy;
    o->copy_type = ct;
    o->n_copy = copy ? n_copy : 0;
    return 0;
}

/* elements [a, e) of one run: the optimizer's op, writing the working copy where it reaches */
static int step_piece(ab_optimizer *o, float *w, const float *g, size_t a, size_t e, float wd) {
    const size_t n = e - a;
    void *const wc = a < o->n_copy ? (char *)o->copy + a * ab_dtype_size(o->copy_type) : NULL;
    if (o->kind == AB_OPT_ADAMW)
        return o->be->ops->adamw_step(o->be, n, w + a, g + a, o->s1 + a, o->s2 + a, o->lr, o->beta1, o->beta2, o->eps,
                                      wd, o->t, o->grad_scale, o->copy_type, wc);
    return o->be->ops->sgd_step(o->be, n, w + a, g + a, o->s1 ? o->s1 + a : NULL, o->lr, o->momentum, wd, o->t == 1,
                                o->grad_scale, o->copy_type, wc);
}

int ab_optimizer_step_range(ab_optimizer *o, float *w, const float *g, size_t lo, size_t hi) {
    o->t++;
    for (int i = 0; i < o->n_runs; i++) {
        const ab_optim_run *r = &o->runs[i];
        const size_t a = r->off > lo ? r->off : lo, e = r->off + r->n < hi ? r->off + r->n : hi;
        if (a >= e) continue;
        const float wd = r->decay ? o->weight_decay : 0.0f;
        /* a run across the working copy's end: the part it covers, then the rest */
        const size_t cut = a < o->n_copy && o->n_copy < e ? o->n_copy : e;
        AB_TRY(step_piece(o, w, g, a, cut, wd));
        if (cut < e) AB_TRY(step_piece(o, w, g, cut, e, wd));
    }
    o->grad_scale = 1.0f;
    return 0;
}

int ab_optimizer_step(ab_optimizer *o, float *w, const float *g) { return ab_optimizer_step_range(o, w, g, 0, o->n); }

void ab_optimizer_free(ab_optimizer *o) {
    if (!o->be) return;
    ab_release(o->be, AB_MEM_OPTIMIZER, o->s1, o->n * sizeof(float));
    ab_release(o->be, AB_MEM_OPTIMIZER, o->s2, o->n * sizeof(float));
    o->be = NULL;
}
