/* ResNet-50 v1.5 in torchvision's layout, channels-last, for any number of classes:
 *   stem   conv1 7x7/2 pad 3 -> bn1 -> relu -> max pool 3x3/2 pad 1    (resnet50)
 *          conv1 3x3/1 pad 1 -> bn1 -> relu                            (resnet50-cifar)
 *   layer1..layer4: bottleneck blocks (3, 4, 6, 3), planes 64, 128, 256, 512, expansion 4;
 *          conv1 1x1 -> bn -> relu -> conv2 3x3 (stride 2 in the first block of layers 2-4:
 *          v1.5) -> bn -> relu -> conv3 1x1 -> bn -> + shortcut -> relu; the shortcut is a 1x1
 *          convolution (with the block's stride) + bn where the shape changes ("downsample").
 *   head   global average pool (B, 2048) -> fc -> logits (B, classes).
 * Reduced configurations (fewer blocks, narrower stages) come from the same code.
 *
 * Activations (channels-last, compute type, one arena): per conv + bn unit the convolution's
 * output (batch norm's backward reads it) and the bn + relu output (relu's backward and the
 * next convolution's filter gradient read it), as PyTorch keeps them with inplace ReLUs. The
 * backward pass rotates four gradient buffers of the largest activation's size. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "layers.h"
#include "models.h"

typedef struct {
    ab_conv conv;
    ab_batchnorm bn;
    int H, W;  /* output height and width */
    void *out; /* (B, H, W, K) convolution output */
    void *act; /* (B, H, W, K) bn (+ relu) output; the block output for a block's third unit */
} unit;

typedef struct {
    unit u[3], down;
    int has_down;
    const void *in; /* the block's input (the previous block's output), set by bind */
    int in_H, in_W, in_C;
} block;

typedef struct {
    ab_param_spec *specs;
    int n_specs, cap_specs;
    char (*names)[64]; /* spec names */
    int stem_cifar, n_blocks, planes[4], blocks[4];
    unit stem;
    ab_pool_shape pool; /* resnet50 only */
    void *pooled;       /* (B, H/4, W/4, width) max-pool output */
    block *blk;
    void *feat; /* (B, 2048) global average pool */
    ab_linear fc;
    int fc_spec;
    void *g[4];    /* backward: gradient buffers, the largest activation each */
    void *tmp;     /* forward: a shortcut's bn output before the add */
    void *dfeat;   /* (B, 2048) */
    int in_H, in_W, in_C;
} resnet;

/* ---- construction: the spec table in torchvision's state_dict order ---- */

static ab_param_spec *new_spec(resnet *r, char **name) {
    if (r->n_specs == r->cap_specs) return NULL;
    *name = r->names[r->n_specs];
    return &r->specs[r->n_specs++];
}

static int add_conv(resnet *r, const char *name, int C, int K, int R) {
    char *nm;
    ab_param_spec *s = new_spec(r, &nm);
    if (!s) return ab_errorf("resnet: spec table full");
    snprintf(nm, 64, "%s", name);
    ab_conv_spec(s, nm, C, K, R, R);
    return r->n_specs - 1;
}

static int add_bn(resnet *r, const char *prefix, int C) {
    if (r->n_specs + 4 > r->cap_specs) return ab_errorf("resnet: spec table full");
    const int first = r->n_specs;
    ab_batchnorm_specs(&r->specs[first], &r->names[first], prefix, C);
    r->n_specs += 4;
    return first;
}

/* spec indices of each unit, kept until bind resolves them to pointers */
typedef struct {
    int conv, bn;
} unit_specs;

typedef struct {
    unit_specs stem, *u; /* (n_blocks * 4): u[4b + 0..2] the units, u[4b + 3] the downsample */
} resnet_specs;

static int build_specs(resnet *r, const ab_model_config *cfg, resnet_specs *rs) {
    char name[64];
    const int width = r->planes[0];
    const int stem_k = r->stem_cifar ? 3 : 7;
    if ((rs->stem.conv = add_conv(r, "conv1.weight", r->in_C, width, stem_k)) < 0) return -1;
    if ((rs->stem.bn = add_bn(r, "bn1", width)) < 0) return -1;
    int inplanes = width, b = 0;
    for (int L = 0; L < 4; L++)
        for (int i = 0; i < r->blocks[L]; i++, b++) {
            const int planes = r->planes[L], stride = (L > 0 && i == 0) ? 2 : 1;
            const int cin[3] = {inplanes, planes, planes}, cout[3] = {planes, planes, planes * 4}, k[3] = {1, 3, 1};
            for (int j = 0; j < 3; j++) {
                snprintf(name, sizeof name, "layer%d.%d.conv%d.weight", L + 1, i, j + 1);
                if ((rs->u[4 * b + j].conv = add_conv(r, name, cin[j], cout[j], k[j])) < 0) return -1;
                snprintf(name, sizeof name, "layer%d.%d.bn%d", L + 1, i, j + 1);
                if ((rs->u[4 * b + j].bn = add_bn(r, name, cout[j])) < 0) return -1;
            }
            r->blk[b].has_down = stride != 1 || inplanes != planes * 4;
            if (r->blk[b].has_down) {
                snprintf(name, sizeof name, "layer%d.%d.downsample.0.weight", L + 1, i);
                if ((rs->u[4 * b + 3].conv = add_conv(r, name, inplanes, planes * 4, 1)) < 0) return -1;
                snprintf(name, sizeof name, "layer%d.%d.downsample.1", L + 1, i);
                if ((rs->u[4 * b + 3].bn = add_bn(r, name, planes * 4)) < 0) return -1;
            }
            inplanes = planes * 4;
        }
    if (r->n_specs + 2 > r->cap_specs) return ab_errorf("resnet: spec table full");
    r->fc_spec = r->n_specs;
    ab_linear_specs(&r->specs[r->n_specs], &r->specs[r->n_specs + 1], "fc.weight", "fc.bias", inplanes,
                    cfg->sample.n_classes);
    r->n_specs += 2;
    return 0;
}

/* ---- bind: shapes, the activation arena ---- */

static int bind_unit(unit *u, const ab_params *p, const unit_specs *us, int B, int H, int W, int C, int stride,
                     int pad) {
    AB_TRY(ab_conv_bind(&u->conv, &p->specs[us->conv], B, H, W, C, stride, pad));
    ab_batchnorm_bind(&u->bn, &p->specs[us->bn]);
    u->H = u->conv.shape.P;
    u->W = u->conv.shape.Q;
    return 0;
}

/* declares a unit's tensors; act NULL: its bn output goes elsewhere */
static void arena_unit(ab_arena *a, unit *u, size_t B, size_t es, int keep_act, const char *name) {
    const size_t n = B * (size_t)u->H * (size_t)u->W * (size_t)u->conv.shape.K;
    ab_arena_add(a, AB_MEM_ACTIVATIONS, n * es, &u->out, "%s.conv", name);
    if (keep_act) ab_arena_add(a, AB_MEM_ACTIVATIONS, n * es, &u->act, "%s.bn", name);
    const size_t stats = (size_t)u->conv.shape.K * sizeof(float);
    ab_arena_add(a, AB_MEM_ACTIVATIONS, stats, (void **)&u->bn.save_mean, "%s.bn.mean", name);
    ab_arena_add(a, AB_MEM_ACTIVATIONS, stats, (void **)&u->bn.save_invstd, "%s.bn.invstd", name);
}

static size_t unit_elems(const unit *u, int B) { return (size_t)B * u->H * u->W * u->conv.shape.K; }

/* the spec indices, recomputed in bind the way build_specs laid them out */
static void spec_indices(const resnet *r, resnet_specs *rs) {
    int k = 0;
    rs->stem = (unit_specs){k, k + 1};
    k += 5;
    for (int b = 0; b < r->n_blocks; b++) {
        for (int j = 0; j < 3; j++, k += 5) rs->u[4 * b + j] = (unit_specs){k, k + 1};
        if (r->blk[b].has_down) {
            rs->u[4 * b + 3] = (unit_specs){k, k + 1};
            k += 5;
        }
    }
}

static int resnet_bind(ab_model *m, const ab_params *p) {
    resnet *r = m->impl;
    const int B = m->max_batch;
    const size_t es = ab_dtype_size(p->cdt);
    resnet_specs rs = {.u = calloc((size_t)r->n_blocks * 4, sizeof(unit_specs))};
    if (!rs.u) return ab_errorf("out of host memory");
    spec_indices(r, &rs);
    int rc = bind_unit(&r->stem, p, &rs.stem, B, r->in_H, r->in_W, r->in_C, r->stem_cifar ? 1 : 2,
                       r->stem_cifar ? 1 : 3);
    int H = r->stem.H, W = r->stem.W, C = r->planes[0];
    if (rc == 0 && !r->stem_cifar) {
        r->pool = (ab_pool_shape){.N = B, .H = H, .W = W, .C = C, .R = 3, .S = 3, .stride_h = 2, .stride_w = 2,
                                  .pad_h = 1, .pad_w = 1};
        rc = ab_pool_shape_init(&r->pool);
        H = r->pool.P;
        W = r->pool.Q;
    }
    double macs = rc == 0 ? ab_conv_macs(&r->stem.conv) : 0.0;
    for (int b = 0; rc == 0 && b < r->n_blocks; b++) {
        block *k = &r->blk[b];
        k->in_H = H;
        k->in_W = W;
        k->in_C = C;
        /* the stride of the block is the stride of its 3x3 (v1.5): 2 where the downsample's
         * spatial size halves, i.e. first block of layers 2-4 */
        int L = 0, first = 0;
        for (int acc = 0, l = 0; l < 4; l++) {
            if (b < acc + r->blocks[l]) {
                L = l;
                first = b == acc;
                break;
            }
            acc += r->blocks[l];
        }
        const int s2 = (L > 0 && first) ? 2 : 1;
        rc = bind_unit(&k->u[0], p, &rs.u[4 * b + 0], B, H, W, C, 1, 0);
        if (rc == 0) rc = bind_unit(&k->u[1], p, &rs.u[4 * b + 1], B, H, W, k->u[0].conv.shape.K, s2, 1);
        if (rc == 0)
            rc = bind_unit(&k->u[2], p, &rs.u[4 * b + 2], B, k->u[1].H, k->u[1].W, k->u[1].conv.shape.K, 1, 0);
        if (rc == 0 && k->has_down) rc = bind_unit(&k->down, p, &rs.u[4 * b + 3], B, H, W, C, s2, 0);
        if (rc) break;
        for (int j = 0; j < 3; j++) macs += ab_conv_macs(&k->u[j].conv);
        if (k->has_down) macs += ab_conv_macs(&k->down.conv);
        H = k->u[2].H;
        W = k->u[2].W;
        C = k->u[2].conv.shape.K;
    }
    free(rs.u);
    if (rc) return -1;
    ab_linear_bind(&r->fc, &p->specs[r->fc_spec], &p->specs[r->fc_spec + 1]);
    m->macs_per_sample = macs + (double)r->fc.in * r->fc.out;

    /* the arena: every tensor the step keeps, and the backward's gradient buffers */
    ab_arena *a = &m->arena;
    ab_arena_init(a, p->be);
    size_t largest = unit_elems(&r->stem, B);
    arena_unit(a, &r->stem, (size_t)B, es, 1, "stem");
    if (!r->stem_cifar) {
        const size_t n = (size_t)B * r->pool.P * r->pool.Q * r->pool.C;
        ab_arena_add(a, AB_MEM_ACTIVATIONS, n * es, &r->pooled, "maxpool");
    }
    for (int b = 0; b < r->n_blocks; b++) {
        block *k = &r->blk[b];
        char name[32];
        for (int j = 0; j < 3; j++) {
            snprintf(name, sizeof name, "block%d.u%d", b, j + 1);
            arena_unit(a, &k->u[j], (size_t)B, es, 1, name);
            if (unit_elems(&k->u[j], B) > largest) largest = unit_elems(&k->u[j], B);
        }
        if (k->has_down) {
            snprintf(name, sizeof name, "block%d.down", b);
            arena_unit(a, &k->down, (size_t)B, es, 0, name);
        }
    }
    const size_t feat = (size_t)B * (size_t)r->fc.in;
    ab_arena_add(a, AB_MEM_ACTIVATIONS, feat * es, &r->feat, "avgpool");
    ab_arena_add(a, AB_MEM_ACTIVATIONS, (size_t)B * (size_t)m->n_classes * es, &m->logits, "logits");
    /* what the forward and backward use for a moment only (PyTorch's caching allocator holds
     * these too): the shortcut's bn output, the head's gradient, the rotating gradients */
    ab_arena_add(a, AB_MEM_ACTIVATIONS, largest * es, &r->tmp, "shortcut.bn");
    ab_arena_add(a, AB_MEM_ACTIVATIONS, feat * es, &r->dfeat, "avgpool.grad");
    for (int i = 0; i < 4; i++) ab_arena_add(a, AB_MEM_ACTIVATIONS, largest * es, &r->g[i], "grad%d", i);
    AB_TRY(ab_arena_alloc(a));
    /* block inputs and the third unit's output are the block output buffers */
    for (int b = 0; b < r->n_blocks; b++)
        r->blk[b].in = b == 0 ? (r->stem_cifar ? r->stem.act : r->pooled) : r->blk[b - 1].u[2].act;
    return 0;
}

/* ---- forward ---- */

static int unit_forward(const ab_params *p, unit *u, int B, const void *x, void *act, int training, int relu) {
    const int M = B * u->H * u->W;
    AB_TRY(ab_conv_forward(p, &u->conv, B, x, u->out));
    return ab_batchnorm_forward(p, &u->bn, M, u->out, act, training, relu);
}

static int resnet_forward(ab_model *m, const ab_params *p, const void *x, int B, int training) {
    resnet *r = m->impl;
    ab_backend *be = p->be;
    const ab_dtype t = p->cdt;
    if (B > m->max_batch) return ab_errorf("resnet: batch %d exceeds the bound %d", B, m->max_batch);
    AB_TRY(unit_forward(p, &r->stem, B, x, r->stem.act, training, 1));
    if (!r->stem_cifar) {
        ab_pool_shape ps = r->pool;
        ps.N = B;
        AB_TRY(be->ops->maxpool_forward(be, &ps, t, r->stem.act, r->pooled));
    }
    for (int b = 0; b < r->n_blocks; b++) {
        block *k = &r->blk[b];
        AB_TRY(unit_forward(p, &k->u[0], B, k->in, k->u[0].act, training, 1));
        AB_TRY(unit_forward(p, &k->u[1], B, k->u[0].act, k->u[1].act, training, 1));
        AB_TRY(unit_forward(p, &k->u[2], B, k->u[1].act, k->u[2].act, training, 0));
        const size_t n = unit_elems(&k->u[2], B);
        const void *shortcut = k->in;
        if (k->has_down) {
            AB_TRY(unit_forward(p, &k->down, B, k->in, r->tmp, training, 0));
            shortcut = r->tmp;
        }
        AB_TRY(be->ops->add(be, n, t, k->u[2].act, shortcut, 1, k->u[2].act)); /* + the block's ReLU */
    }
    const block *last = &r->blk[r->n_blocks - 1];
    AB_TRY(be->ops->avgpool_forward(be, B, last->u[2].H * last->u[2].W, r->fc.in, t, last->u[2].act, r->feat));
    return ab_linear_forward(p, &r->fc, B, r->feat, m->logits, AB_EPI_NONE);
}

/* ---- backward ---- */

/* dy: the gradient of the unit's bn output (after relu's backward where there is one), in dyb;
 * writes the gradient of the unit's input to dx (NULL: none); dyb is overwritten */
static int unit_backward(const ab_params *p, unit *u, int B, const void *x, void *dyb, void *dx) {
    const int M = B * u->H * u->W;
    AB_TRY(ab_batchnorm_backward(p, &u->bn, M, u->out, dyb, dyb));
    return ab_conv_backward(p, &u->conv, B, x, dyb, dx);
}

static int resnet_backward(ab_model *m, const ab_params *p, const void *x, const void *dlogits, int B) {
    resnet *r = m->impl;
    ab_backend *be = p->be;
    const ab_dtype t = p->cdt;
    const block *last = &r->blk[r->n_blocks - 1];
    AB_TRY(ab_linear_backward(p, &r->fc, B, r->feat, dlogits, r->dfeat));
    int in = 0; /* r->g[in]: the gradient of the current block's output */
    AB_TRY(be->ops->avgpool_backward(be, B, last->u[2].H * last->u[2].W, r->fc.in, t, r->dfeat, r->g[in]));
    for (int b = r->n_blocks - 1; b >= 0; b--) {
        block *k = &r->blk[b];
        void *g = r->g[in], *A = r->g[(in + 1) % 4], *Bf = r->g[(in + 2) % 4], *Cb = r->g[(in + 3) % 4];
        const size_t n_out = unit_elems(&k->u[2], B);
        /* through the block's final relu: g is the gradient of (bn3 output + shortcut) */
        AB_TRY(be->ops->relu_backward(be, n_out, t, k->u[2].act, g, g));
        /* main path: bn3 + conv3, relu + bn2 + conv2, relu + bn1 + conv1; g stays for the shortcut */
        AB_TRY(ab_batchnorm_backward(p, &k->u[2].bn, B * k->u[2].H * k->u[2].W, k->u[2].out, g, A));
        AB_TRY(ab_conv_backward(p, &k->u[2].conv, B, k->u[1].act, A, Bf));
        AB_TRY(be->ops->relu_backward(be, unit_elems(&k->u[1], B), t, k->u[1].act, Bf, Bf));
        AB_TRY(unit_backward(p, &k->u[1], B, k->u[0].act, Bf, A));
        AB_TRY(be->ops->relu_backward(be, unit_elems(&k->u[0], B), t, k->u[0].act, A, A));
        AB_TRY(unit_backward(p, &k->u[0], B, k->in, A, Bf)); /* even block 0: the stem needs it */
        const size_t n_in = (size_t)B * k->in_H * k->in_W * k->in_C;
        if (k->has_down) {
            AB_TRY(unit_backward(p, &k->down, B, k->in, g, Cb));
            AB_TRY(be->ops->add(be, n_in, t, Bf, Cb, 0, Bf));
        } else {
            AB_TRY(be->ops->add(be, n_in, t, Bf, g, 0, Bf));
        }
        in = (in + 2) % 4;
    }
    void *d = r->g[in], *A = r->g[(in + 1) % 4];
    if (!r->stem_cifar) {
        ab_pool_shape ps = r->pool;
        ps.N = B;
        AB_TRY(be->ops->maxpool_backward(be, &ps, t, r->stem.act, r->pooled, d, A));
        d = A;
    }
    AB_TRY(be->ops->relu_backward(be, unit_elems(&r->stem, B), t, r->stem.act, d, d));
    return unit_backward(p, &r->stem, B, x, d, NULL);
}

static void resnet_destroy(ab_model *m) {
    resnet *r = m->impl;
    if (m->arena.be) ab_arena_free(&m->arena);
    if (r) {
        free(r->specs);
        free(r->names);
        free(r->blk);
        free(r);
    }
    free(m);
}

static const ab_model_ops resnet_ops = {.name = "resnet",
                                        .forward = resnet_forward,
                                        .backward = resnet_backward,
                                        .bind = resnet_bind,
                                        .destroy = resnet_destroy};

int ab_resnet_create(const ab_model_config *cfg, int stem_cifar, ab_model **out) {
    *out = NULL;
    const ab_sample_info *si = &cfg->sample;
    if (si->kind != AB_SAMPLE_IMAGE || si->C < 1 || si->H < 1 || si->W < 1 || si->n_classes < 2 || cfg->max_batch < 1)
        return ab_errorf("resnet: needs images and at least 2 classes");
    const int width = cfg->width > 0 ? cfg->width : 64;
    static const int default_blocks[4] = {3, 4, 6, 3};
    ab_model *m = calloc(1, sizeof *m);
    resnet *r = calloc(1, sizeof *r);
    if (!m || !r) {
        free(m);
        free(r);
        return ab_errorf("out of host memory creating the resnet");
    }
    m->impl = r;
    r->stem_cifar = stem_cifar;
    r->in_H = si->H;
    r->in_W = si->W;
    r->in_C = si->C;
    for (int L = 0; L < 4; L++) {
        r->blocks[L] = cfg->blocks[L] > 0 ? cfg->blocks[L] : default_blocks[L];
        r->planes[L] = width << L;
        r->n_blocks += r->blocks[L];
    }
    r->cap_specs = 5 + r->n_blocks * 20 + 2;
    r->specs = calloc((size_t)r->cap_specs, sizeof *r->specs);
    r->names = calloc((size_t)r->cap_specs, sizeof *r->names);
    r->blk = calloc((size_t)r->n_blocks, sizeof *r->blk);
    resnet_specs rs = {.u = calloc((size_t)r->n_blocks * 4, sizeof(unit_specs))};
    int rc = (!r->specs || !r->names || !r->blk || !rs.u) ? ab_errorf("out of host memory creating the resnet") : 0;
    if (rc == 0) rc = build_specs(r, cfg, &rs);
    free(rs.u);
    if (rc) {
        resnet_destroy(m);
        return -1;
    }
    *m = (ab_model){.ops = &resnet_ops, .specs = r->specs, .n_specs = r->n_specs, .n_classes = si->n_classes,
                    .max_batch = cfg->max_batch, .impl = r,
                    .notes = "batch norm: per-rank batch statistics under data parallelism (as PyTorch DDP without "
                             "SyncBatchNorm); running statistics from rank 0 (DDP's broadcast_buffers)"};
    *out = m;
    return 0;
}
