/* Parameter buffers and their layout. */
#include "params.h"

#include <math.h>
#include <stdlib.h>

int ab_params_init(ab_params *p, ab_backend *be, ab_precision prec, ab_param_spec *specs, int n_specs, ab_rng *rng) {
    *p = (ab_params){.be = be, .prec = prec, .cdt = ab_precision_compute_dtype(prec), .specs = specs, .n_specs = n_specs};
    size_t off = 0;
    for (int i = 0; i < n_specs; i++) {
        size_t numel = 1;
        for (int d = 0; d < specs[i].ndim; d++) numel *= (size_t)specs[i].shape[d];
        specs[i].offset = off;
        specs[i].numel = numel;
        off += numel;
    }
    p->n = off;
    float *host = malloc(p->n * sizeof(float));
    if (!host) return ab_errorf("out of host memory for %zu parameters", p->n);
    for (int i = 0; i < n_specs; i++) {
        float *w = host + specs[i].offset;
        const float bound = specs[i].fan_in > 0 ? 1.0f / sqrtf((float)specs[i].fan_in) : 0.0f;
        for (size_t k = 0; k < specs[i].numel; k++)
            w[k] = specs[i].init == AB_INIT_UNIFORM_FAN_IN ? ab_rng_uniform_range(rng, -bound, bound)
                   : specs[i].init == AB_INIT_ONE          ? 1.0f
                                                           : 0.0f;
    }
    const int mixed = p->cdt != AB_F32;
    const size_t b32 = p->n * sizeof(float), bc = p->n * ab_dtype_size(p->cdt);
    p->master = ab_alloc(be, mixed ? AB_MEM_MASTER : AB_MEM_PARAMETERS, b32);
    p->grad = ab_alloc(be, AB_MEM_GRADIENTS, b32);
    p->wc = mixed ? ab_alloc(be, AB_MEM_PARAMETERS, bc) : p->master;
    p->gradc = mixed ? ab_alloc(be, AB_MEM_GRADIENTS, bc) : p->grad;
    int rc = (!p->master || !p->grad || !p->wc || !p->gradc) ? -1 : 0;
    if (rc == 0) rc = be->ops->upload(be, p->master, host, b32);
    if (rc == 0) rc = be->ops->zero(be, p->grad, b32);
    if (rc == 0) rc = ab_params_refresh(p);
    free(host);
    return rc;
}

void ab_params_free(ab_params *p) {
    if (!p->be) return;
    const int mixed = p->cdt != AB_F32;
    const size_t b32 = p->n * sizeof(float), bc = p->n * ab_dtype_size(p->cdt);
    if (mixed) {
        ab_release(p->be, AB_MEM_PARAMETERS, p->wc, bc);
        ab_release(p->be, AB_MEM_GRADIENTS, p->gradc, bc);
    }
    ab_release(p->be, mixed ? AB_MEM_MASTER : AB_MEM_PARAMETERS, p->master, b32);
    ab_release(p->be, AB_MEM_GRADIENTS, p->grad, b32);
    p->be = NULL;
}

int ab_params_refresh(ab_params *p) {
    if (p->cdt == AB_F32) return 0;
    return p->be->ops->cast(p->be, p->n, AB_F32, p->master, p->cdt, p->wc);
}

int ab_params_fold_grads(ab_params *p, int accumulate) {
    if (p->cdt == AB_F32) return 0;
    return p->be->ops->accumulate(p->be, p->n, p->cdt, p->gradc, p->grad, accumulate);
}
