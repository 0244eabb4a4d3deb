/* safetensors <-> the parameter buffers, by the spec table's PyTorch names. */
#include "checkpoint.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "safetensors.h"

int ab_checkpoint_torch_shape(const ab_param_spec *s, long long shape[4]) {
    if (s->layout == AB_LAYOUT_OHWI) { /* (K, R, S, C) here, (K, C, R, S) in PyTorch */
        shape[0] = s->shape[0];
        shape[1] = s->shape[3];
        shape[2] = s->shape[1];
        shape[3] = s->shape[2];
        return 4;
    }
    for (int d = 0; d < s->ndim; d++) shape[d] = s->shape[d];
    return s->ndim;
}

void ab_checkpoint_permute(const ab_param_spec *s, const void *src, void *dst, size_t elem, int to_torch) {
    if (s->layout != AB_LAYOUT_OHWI) {
        memcpy(dst, src, s->numel * elem);
        return;
    }
    /* (K, C, R, S) -> (K, R, S, C), or back (to_torch) */
    const int K = s->shape[0], R = s->shape[1], S = s->shape[2], C = s->shape[3];
    const char *in = src;
    char *out = dst;
    for (int k = 0; k < K; k++)
        for (int c = 0; c < C; c++)
            for (int r = 0; r < R; r++)
                for (int t = 0; t < S; t++) {
                    const size_t ohwi = (((size_t)k * R + r) * S + t) * C + c, oihw = (((size_t)k * C + c) * R + r) * S + t;
                    if (to_torch) memcpy(out + oihw * elem, in + ohwi * elem, elem);
                    else memcpy(out + ohwi * elem, in + oihw * elem, elem);
                }
}

static void permute_ohwi(const ab_param_spec *s, const float *src, float *dst, int to_torch) {
    ab_checkpoint_permute(s, src, dst, sizeof(float), to_torch);
}

/* "layer1.0.bn1.running_mean" -> "layer1.0.bn1.num_batches_tracked"; 0 if s is no such buffer */
static int nbt_name(const ab_param_spec *s, const char *suffix, char *out, size_t cap) {
    const size_t n = strlen(s->name), k = strlen(suffix);
    if (s->region != AB_REGION_BUFFER || n <= k || strcmp(s->name + n - k, suffix) != 0) return 0;
    snprintf(out, cap, "%.*snum_batches_tracked", (int)(n - k), s->name);
    return 1;
}

static int ignored(const char *name, const char *const *ignore) {
    for (int i = 0; ignore && ignore[i]; i++)
        if (strcmp(ignore[i], name) == 0) return 1;
    return 0;
}

int ab_checkpoint_read(const char *path, const ab_params *p, const char *const *ignore, float *host, long long *nbt_out,
                       char *from, size_t cap) {
    ab_safetensors st;
    AB_TRY(ab_st_open(path, &st));
    float *tmp = NULL;
    size_t tmp_cap = 0;
    unsigned char *used = calloc((size_t)st.n + 1, 1);
    int rc = !used ? ab_errorf("%s: out of host memory", path) : 0;
    int dtypes_seen = 0, n_loaded = 0;
    long long nbt = -1;
    for (int i = 0; rc == 0 && i < p->n_specs; i++) {
        const ab_param_spec *s = &p->specs[i];
        const ab_st_tensor *t = ab_st_find(&st, s->name);
        if (!t) {
            rc = ab_errorf("%s: no tensor '%s' (the model has %d tensors; is this a checkpoint of this model?)", path,
                           s->name, p->n_specs);
            break;
        }
        used[t - st.t] = 1;
        long long want[4];
        const int nd = ab_checkpoint_torch_shape(s, want);
        int same = t->ndim == nd;
        for (int d = 0; same && d < nd; d++) same = t->shape[d] == want[d];
        if (!same) {
            char a[64] = "", b[64] = "";
            for (int d = 0, l = 0; d < nd; d++) l += snprintf(a + l, sizeof a - (size_t)l, "%s%lld", d ? ", " : "", want[d]);
            for (int d = 0, l = 0; d < t->ndim && l < 56; d++)
                l += snprintf(b + l, sizeof b - (size_t)l, "%s%lld", d ? ", " : "", (long long)t->shape[d]);
            rc = ab_errorf("%s: tensor '%s' has shape (%s), the model needs (%s)", path, s->name, b, a);
            break;
        }
        if (t->dtype != AB_ST_F32 && t->dtype != AB_ST_F16 && t->dtype != AB_ST_BF16 && t->dtype != AB_ST_F64) {
            rc = ab_errorf("%s: tensor '%s' is %s, not a floating-point type", path, s->name, ab_st_dtype_name(t->dtype));
            break;
        }
        dtypes_seen |= 1 << t->dtype;
        float *dst = (s->region == AB_REGION_BUFFER ? host + p->n : host) + s->offset;
        if (s->layout == AB_LAYOUT_OHWI) {
            if (tmp_cap < s->numel) {
                free(tmp);
                tmp_cap = s->numel;
                if (!(tmp = malloc(tmp_cap * sizeof *tmp))) {
                    rc = ab_errorf("%s: out of host memory", path);
                    break;
                }
            }
            rc = ab_st_to_f32(t, tmp);
            if (rc == 0) permute_ohwi(s, tmp, dst, 0);
        } else {
            rc = ab_st_to_f32(t, dst);
        }
        n_loaded++;
        /* batch norm's step count, one per running_mean, as torchvision writes it */
        char nm[160];
        if (rc == 0 && nbt_name(s, "running_mean", nm, sizeof nm)) {
            const ab_st_tensor *c = ab_st_find(&st, nm);
            if (!c) {
                rc = ab_errorf("%s: no tensor '%s'", path, nm);
                break;
            }
            used[c - st.t] = 1;
            if (c->dtype != AB_ST_I64 || c->numel != 1 || c->ndim > 1) {
                rc = ab_errorf("%s: tensor '%s' is not one int64 (it is %s with %zu elements)", path, nm,
                               ab_st_dtype_name(c->dtype), c->numel);
                break;
            }
            long long v = 0;
            for (int k = 7; k >= 0; k--) v = (long long)((unsigned long long)v << 8 | c->data[k]);
            if (v < 0) {
                rc = ab_errorf("%s: tensor '%s' is negative (%lld)", path, nm, v);
                break;
            }
            if (v > nbt) nbt = v;
        }
    }
    for (int i = 0; rc == 0 && i < st.n; i++)
        if (!used[i] && !ignored(st.t[i].name, ignore))
            rc = ab_errorf("%s: unexpected tensor '%.*s' (not a tensor of this model)", path,
                           (int)strcspn(st.t[i].name, "\n\r"), st.t[i].name);
    if (rc == 0) {
        *nbt_out = nbt;
        char types[32] = "";
        for (int d = 0, l = 0; d < AB_ST_DTYPE_COUNT; d++)
            if (dtypes_seen >> d & 1) l += snprintf(types + l, sizeof types - (size_t)l, "%s%s", l ? "+" : "", ab_st_dtype_name((ab_st_dtype)d));
        snprintf(from, cap, "all %d tensors from %s (%s)", n_loaded, path, types);
    }
    free(tmp);
    free(used);
    ab_st_close(&st);
    return rc;
}

int ab_checkpoint_load(const char *path, ab_model *m, ab_params *p, const char *const *ignore, char *from, size_t cap) {
    ab_backend *be = p->be;
    float *host = malloc((p->n + p->n_bufs + 1) * sizeof(float));
    if (!host) return ab_errorf("%s: out of host memory", path);
    long long nbt = -1;
    int rc = ab_checkpoint_read(path, p, ignore, host, &nbt, from, cap);
    if (rc == 0) rc = be->ops->upload(be, p->master, host, p->n * sizeof(float));
    if (rc == 0 && p->n_bufs) rc = be->ops->upload(be, p->bufs, host + p->n, p->n_bufs * sizeof(float));
    if (rc == 0 && nbt >= 0) m->batches_tracked = (long)nbt;
    free(host);
    return rc;
}

int ab_checkpoint_write(const char *path, const ab_params *p, const float *master, const float *bufs,
                        long long batches_tracked) {
    float *torch = malloc((p->n + p->n_bufs + 1) * sizeof(float));
    ab_st_entry *e = calloc((size_t)p->n_specs * 2 + 1, sizeof *e);
    char (*names)[160] = calloc((size_t)p->n_specs + 1, sizeof *names);
    int rc = (!torch || !e || !names) ? ab_errorf("%s: out of host memory", path) : 0;
    const int64_t steps = batches_tracked;
    int n = 0;
    for (int i = 0; rc == 0 && i < p->n_specs; i++) {
        const ab_param_spec *s = &p->specs[i];
        const size_t at = (s->region == AB_REGION_BUFFER ? p->n : 0) + s->offset;
        const float *from = s->region == AB_REGION_BUFFER ? bufs + s->offset : master + s->offset;
        long long shape[4];
        const int nd = ab_checkpoint_torch_shape(s, shape);
        permute_ohwi(s, from, torch + at, 1);
        e[n] = (ab_st_entry){.name = s->name, .dtype = AB_ST_F32, .ndim = nd, .data = torch + at};
        for (int d = 0; d < nd; d++) e[n].shape[d] = shape[d];
        n++;
        /* torchvision's order: weight, bias, running_mean, running_var, num_batches_tracked */
        if (nbt_name(s, "running_var", names[i], sizeof names[i]))
            e[n++] = (ab_st_entry){.name = names[i], .dtype = AB_ST_I64, .ndim = 0, .data = &steps};
    }
    if (rc == 0) rc = ab_st_write(path, e, n);
    free(torch);
    free(e);
    free(names);
    return rc;
}

int ab_checkpoint_save(const char *path, const ab_model *m, const ab_params *p) {
    ab_backend *be = p->be;
    float *host = malloc((p->n + p->n_bufs + 1) * sizeof(float));
    int rc = !host ? ab_errorf("%s: out of host memory", path) : 0;
    if (rc == 0) rc = be->ops->download(be, host, p->master, p->n * sizeof(float));
    if (rc == 0 && p->n_bufs) rc = be->ops->download(be, host + p->n, p->bufs, p->n_bufs * sizeof(float));
    if (rc == 0) rc = ab_checkpoint_write(path, p, host, host + p->n, m->batches_tracked);
    free(host);
    return rc;
}
