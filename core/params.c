/* Parameter buffers and their layout. */
#include "params.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static float init_value(const ab_param_spec *s, ab_rng *rng) {
    switch (s->init) {
    case AB_INIT_UNIFORM_FAN_IN: {
        const float bound = s->fan_in > 0 ? 1.0f / sqrtf((float)s->fan_in) : 0.0f;
        return ab_rng_uniform_range(rng, -bound, bound);
    }
    case AB_INIT_ONE: return 1.0f;
    case AB_INIT_KAIMING_NORMAL_OUT:
        return (float)(ab_rng_normal(rng) * sqrt(2.0 / (double)(s->fan_out > 0 ? s->fan_out : 1)));
    case AB_INIT_NORMAL: return (float)(ab_rng_normal(rng) * (double)s->std);
    case AB_INIT_ZERO: break;
    }
    return 0.0f;
}

int ab_spec_split(ab_param_spec *s, int dim, int parts, int index) {
    if (parts <= 1) return 0;
    if (dim < 0 || dim >= s->ndim || s->shape[dim] % parts != 0 || index < 0 || index >= parts)
        return ab_usage_errorf("%s: dimension %d of size %d does not split into %d equal blocks (block %d asked)",
                               s->name, dim, dim >= 0 && dim < s->ndim ? s->shape[dim] : 0, parts, index);
    s->shape[dim] /= parts;
    s->split_dim = dim;
    s->split_parts = parts;
    s->split_index = index;
    return 0;
}

ab_param_spec ab_spec_whole(const ab_param_spec *s) {
    ab_param_spec w = *s;
    if (s->split_parts > 1) w.shape[s->split_dim] *= s->split_parts;
    w.split_parts = w.split_index = w.split_dim = 0;
    w.absent = 0;
    w.numel = 1;
    for (int d = 0; d < w.ndim; d++) w.numel *= (size_t)w.shape[d];
    return w;
}

/* a split spec's block seen as (outer, k_block, inner), row-major: outer the product of the
 * dimensions before split_dim, k_block the block's size along it, inner the product of those
 * after it. Element (o, k, i) of the block is element (o, split_index * k_block + k, i) of the
 * whole tensor, seen as (outer, split_parts * k_block, inner). */
static void block_geometry(const ab_param_spec *s, size_t *outer, size_t *k_block, size_t *inner) {
    *outer = *inner = 1;
    const int dim = s->split_parts > 1 ? s->split_dim : 0;
    for (int d = 0; d < dim; d++) *outer *= (size_t)s->shape[d];
    for (int d = dim + 1; d < s->ndim; d++) *inner *= (size_t)s->shape[d];
    *k_block = s->ndim ? (size_t)s->shape[dim] : 1;
}

void ab_spec_block_copy(const ab_param_spec *s, float *whole, float *block, int to_whole) {
    size_t outer, kb, inner;
    block_geometry(s, &outer, &kb, &inner);
    const size_t parts = s->split_parts > 1 ? (size_t)s->split_parts : 1, idx = parts > 1 ? (size_t)s->split_index : 0;
    for (size_t o = 0; o < outer; o++) {
        float *w = whole + (o * kb * parts + idx * kb) * inner, *b = block + o * kb * inner;
        for (size_t k = 0; k < kb * inner; k++) {
            if (to_whole) w[k] = b[k];
            else b[k] = w[k];
        }
    }
}

/* s's initial values into w (its block's numel): the whole tensor's draws in order, the block
 * kept, so that a split tensor's block equals the slice of the unsplit one */
static int init_tensor(const ab_param_spec *s, ab_rng *rng, float *w) {
    if (s->absent) { /* another stage's: its draws, and nothing kept */
        const ab_param_spec whole = ab_spec_whole(s);
        for (size_t k = 0; k < whole.numel; k++) (void)init_value(s, rng);
        return 0;
    }
    if (s->split_parts <= 1) {
        for (size_t k = 0; k < s->numel; k++) w[k] = init_value(s, rng);
        return 0;
    }
    const ab_param_spec whole = ab_spec_whole(s);
    float *all = malloc(whole.numel * sizeof *all);
    if (!all) return ab_errorf("out of host memory initialising %s", s->name);
    for (size_t k = 0; k < whole.numel; k++) all[k] = init_value(s, rng);
    ab_spec_block_copy(s, all, w, 0);
    free(all);
    return 0;
}

/* Offsets and sizes of every spec: compute region first, then the fp32 region after it in the
 * same buffers; buffers apart. Within a region the specs with weight decay come first and those
 * without (no_decay) after them, so an optimizer that leaves the latter alone steps over a few
 * runs, not one per bias. */
static void lay_out(ab_params *p) {
    ab_param_spec *specs = p->specs;
    size_t off = 0, boff = 0;
    for (int pass = 0; pass < 4; pass++) /* compute/decay, compute/no decay, fp32/decay, fp32/no decay */
        for (int i = 0; i < p->n_specs; i++) {
            size_t numel = specs[i].absent ? 0 : 1; /* another stage's tensor: no storage */
            for (int d = 0; d < specs[i].ndim; d++) numel *= (size_t)specs[i].shape[d];
            specs[i].numel = numel;
            if (specs[i].region == AB_REGION_BUFFER) {
                if (pass == 0) {
                    specs[i].offset = boff;
                    boff += numel;
                }
            } else if ((specs[i].region == AB_REGION_COMPUTE) == (pass < 2) && (specs[i].no_decay != 0) == (pass % 2)) {
                specs[i].offset = off;
                off += numel;
            }
            if (pass == 1) p->n_compute = off;
        }
    p->n = off;
    p->n_bufs = boff;
    /* an fp32 compute type has no separate copy: the whole buffer is the compute region */
    if (p->compute_type == AB_F32) p->n_compute = p->n;
    /* the one-tensor gradient scratch holds the largest compute-region tensor */
    const int mixed = p->compute_type != AB_F32;
    p->n_compute_grad = mixed ? 0 : p->n;
    for (int i = 0; mixed && i < p->n_specs; i++)
        if (specs[i].region == AB_REGION_COMPUTE && specs[i].numel > p->n_compute_grad)
            p->n_compute_grad = specs[i].numel;
}

/* The buffers the precision needs, each charged to its category and named in an out-of-memory
 * message; under fp32 the compute copies are the fp32 buffers themselves. 0, or -1. */
static int allocate(ab_params *p) {
    ab_backend *be = p->be;
    const int mixed = p->compute_type != AB_F32;
    const size_t b32 = p->n * sizeof(float), bc = p->n_compute * ab_dtype_size(p->compute_type);
    const char *ct = ab_dtype_name(p->compute_type);
    if (!(p->master = ab_alloc_for(be, mixed ? AB_MEM_MASTER : AB_MEM_PARAMETERS, b32, "%zu %s weights (%s)", p->n,
                                   mixed ? "fp32 master" : "fp32", ab_precision_name(p->prec))) ||
        !(p->grad = ab_alloc_for(be, AB_MEM_GRADIENTS, b32, "the fp32 gradients of %zu parameters", p->n)))
        return -1;
    if (!mixed) {
        p->compute_weights = p->master;
        p->compute_grad = p->grad;
    } else if (!(p->compute_weights =
                     ab_alloc_for(be, AB_MEM_PARAMETERS, bc, "the %s copy of %zu weights", ct, p->n_compute)) ||
               /* the one-tensor scratch is what autograd holds between a layer's backward and its
                * AccumulateGrad: a gradient, transient */
               !(p->compute_grad = ab_alloc_for(
                     be, AB_MEM_GRADIENTS, (p->n_compute_grad ? p->n_compute_grad : 1) * ab_dtype_size(p->compute_type),
                     "one tensor's %s gradient (%zu elements)", ct, p->n_compute_grad))) {
        return -1;
    }
    if (p->n_bufs && !(p->bufs = ab_alloc_for(be, AB_MEM_PARAMETERS, p->n_bufs * sizeof(float),
                                              "%zu buffers (batch-norm statistics)", p->n_bufs)))
        return -1;
    return 0;
}

int ab_params_init(ab_params *p, ab_backend *be, ab_precision prec, ab_param_spec *specs, int n_specs, ab_rng *rng) {
    *p = (ab_params){
        .be = be, .prec = prec, .compute_type = ab_precision_compute_dtype(prec), .specs = specs, .n_specs = n_specs};
    lay_out(p);
    /* rng NULL: no values at all (a backend that only counts ops: the weights are never read) */
    float *host = rng ? malloc((p->n + p->n_bufs + 1) * sizeof(float)) : NULL;
    if (rng && !host) return ab_errorf("out of host memory for %zu parameters", p->n);
    float *hbuf = host ? host + p->n : NULL;
    int rc = 0;
    for (int i = 0; host && rc == 0 && i < n_specs; i++) /* spec order: the order of the RNG draws */
        rc = init_tensor(&specs[i], rng, (specs[i].region == AB_REGION_BUFFER ? hbuf : host) + specs[i].offset);
    const size_t b32 = p->n * sizeof(float);
    if (rc == 0) rc = allocate(p);
    if (rc == 0 && host) rc = be->ops->upload(be, p->master, host, b32);
    if (rc == 0 && host && p->n_bufs) rc = be->ops->upload(be, p->bufs, hbuf, p->n_bufs * sizeof(float));
    if (rc == 0) rc = be->ops->zero(be, p->grad, b32);
    if (rc == 0) rc = ab_params_refresh(p);
    free(host);
    return rc;
}

void ab_params_free(ab_params *p) {
    if (!p->be) return;
    const int mixed = p->compute_type != AB_F32;
    const size_t b32 = p->n * sizeof(float), bc = p->n_compute * ab_dtype_size(p->compute_type);
    if (mixed) {
        ab_release(p->be, AB_MEM_PARAMETERS, p->compute_weights, bc);
        ab_release(p->be, AB_MEM_GRADIENTS, p->compute_grad,
                   (p->n_compute_grad ? p->n_compute_grad : 1) * ab_dtype_size(p->compute_type));
    }
    ab_release(p->be, mixed ? AB_MEM_MASTER : AB_MEM_PARAMETERS, p->master, b32);
    ab_release(p->be, AB_MEM_GRADIENTS, p->grad, b32);
    if (p->bufs) ab_release(p->be, AB_MEM_PARAMETERS, p->bufs, p->n_bufs * sizeof(float));
    p->be = NULL;
}

int ab_params_refresh(ab_params *p) {
    if (p->compute_type == AB_F32) return 0;
    return p->be->ops->cast(p->be, p->n_compute, AB_F32, p->master, p->compute_type, p->compute_weights);
}

int ab_param_grad_done(const ab_params *p, const ab_grad_sink *g, const ab_param_spec *s) {
    if (!ab_param_via_scratch(p, s)) return ab_grad_ready(g, s);
    AB_TRY(p->be->ops->accumulate(p->be, s->numel, p->compute_type, p->compute_grad, p->grad + s->offset,
                                  g->mode == AB_GRAD_ACCUMULATE, g->found_inf));
    return ab_grad_folded(p, g, s);
}

int ab_grad_folded(const ab_params *p, const ab_grad_sink *g, const ab_param_spec *s) {
    if (g->checked && g->found_inf) g->checked[s - p->specs] = 1;
    return ab_grad_ready(g, s);
}

static int cmp_range(const void *a, const void *b) {
    const size_t x = ((const size_t *)a)[0], y = ((const size_t *)b)[0];
    return x < y ? -1 : x > y;
}

size_t ab_grad_unchecked(const ab_params *p, const unsigned char *checked, size_t (*out)[2]) {
    size_t k = 0;
    for (int i = 0; i < p->n_specs; i++) {
        const ab_param_spec *s = &p->specs[i];
        if (s->region == AB_REGION_BUFFER || !s->numel || (checked && checked[i])) continue;
        out[k][0] = s->offset;
        out[k][1] = s->offset + s->numel;
        k++;
    }
    qsort(out, k, sizeof *out, cmp_range);
    size_t m = 0;
    for (size_t i = 0; i < k; i++) {
        if (m > 0 && out[i][0] <= out[m - 1][1]) { /* touching or overlapping the last: merged */
            if (out[i][1] > out[m - 1][1]) out[m - 1][1] = out[i][1];
        } else {
            out[m][0] = out[i][0];
            out[m][1] = out[i][1];
            m++;
        }
    }
    return m;
}

int ab_grad_check_unchecked(const ab_params *p, const unsigned char *checked, int32_t *found_inf) {
    size_t(*r)[2] = malloc(((size_t)p->n_specs + 1) * sizeof *r);
    if (!r) return ab_errorf("out of host memory for the gradient check's ranges");
    const size_t k = ab_grad_unchecked(p, checked, r);
    int rc = 0;
    for (size_t i = 0; i < k && rc == 0; i++)
        rc = p->be->ops->unscale_check(p->be, r[i][1] - r[i][0], p->grad + r[i][0], 1.0f, found_inf, NULL);
    free(r);
    return rc;
}

int ab_params_find(const ab_params *p, const char *name) {
    for (int i = 0; i < p->n_specs; i++)
        if (strcmp(p->specs[i].name, name) == 0) return i;
    return -1;
}
