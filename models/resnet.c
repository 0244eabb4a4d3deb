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
 * backward pass holds its gradients in four buffers of the largest activation's size: two at a
 * block's ends (output, input) and two for the main path between them.
 * Pipeline units (core/pipeline.h): 0 the stem, 1 .. blocks each bottleneck block, the last the
 * head; between them a block's output (channels-last, H x W x C a sample). */
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "layers.h"
#include "workloads.h"

typedef struct {
    int conv_spec, bn_spec; /* spec table indices (build_specs): the filter, batch norm's first of four */
    ab_conv conv;
    ab_batchnorm bn;
    int H, W;  /* output height and width */
    void *out; /* (B, H, W, K) convolution output */
    void *act; /* (B, H, W, K) bn (+ relu) output; the block output for a block's third unit */
} unit;

typedef struct {
    unit u[3], down;
    int has_down;
    int stride; /* of conv2 and the downsample (v1.5): 2 in the first block of layers 2-4 */
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
    /* backward: the gradients at a block's output and at its input (they trade places from
     * block to block) and the main path's two between them; the largest activation each */
    void *d_end[2], *d_path[2];
    void *tmp;     /* forward: a shortcut's bn output before the add */
    void *dfeat;   /* (B, 2048) */
    int in_H, in_W, in_C;
    /* pipeline parallelism: the stage holds the stem, blocks [b0, b1), the head */
    int has_stem, b0, b1, has_head;
    int cur_unit;      /* build_specs: the unit the specs being added belong to */
    double *unit_macs; /* (blocks + 2) */
} resnet;

/* block b's input: the stage's for its first block after another stage's units, else the block
 * before's output or the stem's (bind sets k->in) */
static const void *block_in(const ab_model *m, const resnet *r, int b) {
    return b == r->b0 && !r->has_stem ? m->stage_in : r->blk[b].in;
}

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
    s->unit = r->cur_unit;
    return r->n_specs - 1;
}

static int add_bn(resnet *r, const char *prefix, int C) {
    if (r->n_specs + 4 > r->cap_specs) return ab_errorf("resnet: spec table full");
    const int first = r->n_specs;
    ab_batchnorm_specs(&r->specs[first], &r->names[first], prefix, C);
    for (int i = 0; i < 4; i++) r->specs[first + i].unit = r->cur_unit;
    r->n_specs += 4;
    return first;
}

/* a conv + bn unit: the filter (C -> K, R x R) and batch norm's four specs; u keeps their
 * indices for bind */
static int add_unit(resnet *r, unit *u, const char *conv_name, const char *bn_prefix, int C, int K, int R) {
    if ((u->conv_spec = add_conv(r, conv_name, C, K, R)) < 0) return -1;
    if ((u->bn_spec = add_bn(r, bn_prefix, K)) < 0) return -1;
    return 0;
}

static int build_specs(resnet *r, const ab_model_config *cfg) {
    char conv[64], bn[64];
    const int width = r->planes[0];
    r->cur_unit = 0;
    if (add_unit(r, &r->stem, "conv1.weight", "bn1", r->in_C, width, r->stem_cifar ? 3 : 7) < 0) return -1;
    int inplanes = width, b = 0;
    for (int L = 0; L < 4; L++)
        for (int i = 0; i < r->blocks[L]; i++, b++) {
            block *k = &r->blk[b];
            r->cur_unit = 1 + b;
            const int planes = r->planes[L];
            const int cin[3] = {inplanes, planes, planes}, cout[3] = {planes, planes, planes * 4}, ks[3] = {1, 3, 1};
            k->stride = (L > 0 && i == 0) ? 2 : 1;
            for (int j = 0; j < 3; j++) {
                snprintf(conv, sizeof conv, "layer%d.%d.conv%d.weight", L + 1, i, j + 1);
                snprintf(bn, sizeof bn, "layer%d.%d.bn%d", L + 1, i, j + 1);
                if (add_unit(r, &k->u[j], conv, bn, cin[j], cout[j], ks[j]) < 0) return -1;
            }
            k->has_down = k->stride != 1 || inplanes != planes * 4;
            if (k->has_down) {
                snprintf(conv, sizeof conv, "layer%d.%d.downsample.0.weight", L + 1, i);
                snprintf(bn, sizeof bn, "layer%d.%d.downsample.1", L + 1, i);
                if (add_unit(r, &k->down, conv, bn, inplanes, planes * 4, 1) < 0) return -1;
            }
            inplanes = planes * 4;
        }
    if (r->n_specs + 2 > r->cap_specs) return ab_errorf("resnet: spec table full");
    r->fc_spec = r->n_specs;
    ab_linear_specs(&r->specs[r->n_specs], &r->specs[r->n_specs + 1], "fc.weight", "fc.bias", inplanes,
                    cfg->sample.n_classes);
    r->specs[r->n_specs].unit = r->specs[r->n_specs + 1].unit = r->n_blocks + 1;
    r->n_specs += 2;
    return 0;
}

/* ---- bind: shapes, the activation arena ---- */

static int bind_unit(unit *u, const ab_params *p, int B, int H, int W, int C, int stride, int pad) {
    AB_TRY(ab_conv_bind(&u->conv, &p->specs[u->conv_spec], B, H, W, C, stride, pad));
    ab_batchnorm_bind(&u->bn, &p->specs[u->bn_spec]);
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

/* every layer's shapes for the model's largest batch, from the input down: the units, the stem's
 * max pool, the head; and the multiply-adds of one sample */
static int bind_shapes(ab_model *m, const ab_params *p) {
    resnet *r = m->impl;
    const int B = m->max_batch;
    AB_TRY(bind_unit(&r->stem, p, B, r->in_H, r->in_W, r->in_C, r->stem_cifar ? 1 : 2, r->stem_cifar ? 1 : 3));
    int H = r->stem.H, W = r->stem.W, C = r->planes[0];
    if (!r->stem_cifar) {
        r->pool = (ab_pool_shape){.N = B, .H = H, .W = W, .C = C, .R = 3, .S = 3, .stride_h = 2, .stride_w = 2,
                                  .pad_h = 1, .pad_w = 1};
        AB_TRY(ab_pool_shape_init(&r->pool));
        H = r->pool.P;
        W = r->pool.Q;
    }
    double macs = ab_conv_macs(&r->stem.conv);
    if (r->unit_macs) r->unit_macs[0] = macs;
    for (int b = 0; b < r->n_blocks; b++) {
        block *k = &r->blk[b];
        k->in_H = H;
        k->in_W = W;
        k->in_C = C;
        AB_TRY(bind_unit(&k->u[0], p, B, H, W, C, 1, 0));
        AB_TRY(bind_unit(&k->u[1], p, B, H, W, k->u[0].conv.shape.K, k->stride, 1));
        AB_TRY(bind_unit(&k->u[2], p, B, k->u[1].H, k->u[1].W, k->u[1].conv.shape.K, 1, 0));
        if (k->has_down) AB_TRY(bind_unit(&k->down, p, B, H, W, C, k->stride, 0));
        double block_macs = 0.0;
        for (int j = 0; j < 3; j++) block_macs += ab_conv_macs(&k->u[j].conv);
        if (k->has_down) block_macs += ab_conv_macs(&k->down.conv);
        if (r->unit_macs) r->unit_macs[1 + b] = block_macs;
        macs += block_macs;
        H = k->u[2].H;
        W = k->u[2].W;
        C = k->u[2].conv.shape.K;
    }
    ab_linear_bind(&r->fc, &p->specs[r->fc_spec], &p->specs[r->fc_spec + 1]);
    m->macs_per_sample = macs + (double)r->fc.in * r->fc.out;
    if (r->unit_macs) r->unit_macs[r->n_blocks + 1] = (double)r->fc.in * r->fc.out;
    return 0;
}

static int resnet_bind(ab_model *m, const ab_params *p) {
    resnet *r = m->impl;
    const int B = m->max_batch;
    const size_t es = ab_dtype_size(p->compute_type);
    AB_TRY(bind_shapes(m, p));
    /* the arena: every tensor the step keeps, and the backward's gradient buffers */
    ab_arena *a = &m->arena;
    ab_arena_init(a, p->be);
    /* the gradient buffers hold the largest activation of the stage, and what enters and leaves it */
    size_t largest = r->has_stem ? unit_elems(&r->stem, B) : (size_t)B * m->stage_in_elems;
    if ((size_t)B * m->stage_out_elems > largest) largest = (size_t)B * m->stage_out_elems;
    if (r->has_stem) arena_unit(a, &r->stem, (size_t)B, es, 1, "stem");
    if (r->has_stem && !r->stem_cifar) {
        const size_t n = (size_t)B * r->pool.P * r->pool.Q * r->pool.C;
        ab_arena_add(a, AB_MEM_ACTIVATIONS, n * es, &r->pooled, "maxpool");
    }
    for (int b = r->b0; b < r->b1; b++) {
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
    if (r->has_head) {
        ab_arena_add(a, AB_MEM_ACTIVATIONS, feat * es, &r->feat, "avgpool");
        ab_arena_add(a, AB_MEM_ACTIVATIONS, (size_t)B * (size_t)m->n_classes * es, &m->logits, "logits");
    }
    /* what the forward and backward use for a moment only (PyTorch's caching allocator holds
     * these too): the shortcut's bn output, the head's gradient, the blocks' gradients; a
     * pipeline's later slots share their first's (one backward runs at a time) */
    const resnet *first = m->scratch_from ? m->scratch_from->impl : NULL;
    if (first) {
        r->tmp = first->tmp, r->dfeat = first->dfeat;
        memcpy(r->d_end, first->d_end, sizeof r->d_end);
        memcpy(r->d_path, first->d_path, sizeof r->d_path);
    } else {
        ab_arena_add(a, AB_MEM_ACTIVATIONS, largest * es, &r->tmp, "shortcut.bn");
        if (r->has_head) ab_arena_add(a, AB_MEM_ACTIVATIONS, feat * es, &r->dfeat, "avgpool.grad");
        for (int i = 0; i < 2; i++) ab_arena_add(a, AB_MEM_ACTIVATIONS, largest * es, &r->d_end[i], "grad.end%d", i);
        for (int i = 0; i < 2; i++) ab_arena_add(a, AB_MEM_ACTIVATIONS, largest * es, &r->d_path[i], "grad.path%d", i);
    }
    AB_TRY(ab_arena_alloc(a));
    /* block inputs and the third unit's output are the block output buffers */
    for (int b = r->b0; b < r->b1; b++)
        r->blk[b].in = b > r->b0 ? r->blk[b - 1].u[2].act : !r->has_stem ? NULL : r->stem_cifar ? r->stem.act : r->pooled;
    /* what the stage sends on: its last unit's output */
    if (!r->has_head)
        m->stage_out = r->b1 > r->b0 ? r->blk[r->b1 - 1].u[2].act : r->stem_cifar ? r->stem.act : r->pooled;
    return 0;
}

/* ---- forward ---- */

static int unit_forward(const ab_params *p, unit *u, int B, const void *x, void *act, int training, int relu) {
    const int M = B * u->H * u->W;
    AB_TRY(ab_conv_forward(p, &u->conv, B, x, u->out));
    return ab_batchnorm_forward(p, &u->bn, M, u->out, act, training, relu);
}

static int resnet_forward(ab_model *m, const ab_params *p, const void *x, int B, const ab_pass *pass) {
    resnet *r = m->impl;
    const int training = pass->training;
    ab_backend *be = p->be;
    const ab_dtype t = p->compute_type;
    if (B > m->max_batch) return ab_errorf("resnet: batch %d exceeds the bound %d", B, m->max_batch);
    if (r->has_stem) AB_TRY(unit_forward(p, &r->stem, B, x, r->stem.act, training, 1));
    if (r->has_stem && !r->stem_cifar) {
        ab_pool_shape ps = r->pool;
        ps.N = B;
        AB_TRY(be->ops->maxpool_forward(be, &ps, t, r->stem.act, r->pooled));
    }
    for (int b = r->b0; b < r->b1; b++) {
        block *k = &r->blk[b];
        const void *kin = block_in(m, r, b);
        AB_TRY(unit_forward(p, &k->u[0], B, kin, k->u[0].act, training, 1));
        AB_TRY(unit_forward(p, &k->u[1], B, k->u[0].act, k->u[1].act, training, 1));
        AB_TRY(unit_forward(p, &k->u[2], B, k->u[1].act, k->u[2].act, training, 0));
        const size_t n = unit_elems(&k->u[2], B);
        const void *shortcut = kin;
        if (k->has_down) {
            AB_TRY(unit_forward(p, &k->down, B, kin, r->tmp, training, 0));
            shortcut = r->tmp;
        }
        AB_TRY(be->ops->add(be, n, t, k->u[2].act, shortcut, 1, k->u[2].act)); /* + the block's ReLU */
    }
    m->batches_tracked += training; /* batch norm's num_batches_tracked */
    if (!r->has_head) return 0; /* the stage's output is its last unit's (stage_out) */
    const block *last = &r->blk[r->n_blocks - 1];
    const void *top = r->b1 > r->b0 ? last->u[2].act : m->stage_in; /* a stage of the head alone: its input */
    AB_TRY(be->ops->avgpool_forward(be, B, last->u[2].H * last->u[2].W, r->fc.in, t, top, r->feat));
    return ab_linear_forward(p, &r->fc, B, r->feat, m->logits, AB_EPI_NONE);
}

/* ---- backward ---- */

/* dy: the gradient of the unit's bn output (after relu's backward where there is one), in dyb;
 * writes the gradient of the unit's input to dx (NULL: none); dyb is overwritten */
static int unit_backward(const ab_params *p, const ab_grad_sink *g, unit *u, int B, const void *x, void *dyb, void *dx) {
    const int M = B * u->H * u->W;
    AB_TRY(ab_batchnorm_backward(p, g, &u->bn, M, u->out, dyb, dyb));
    return ab_conv_backward(p, g, &u->conv, B, x, dyb, dx);
}

/* dout: the gradient of the logits, or on a stage without the head of its output (stage_out) */
static int resnet_backward(ab_model *m, const ab_params *p, const ab_grad_sink *g, const void *x, const void *dout,
                           int B) {
    resnet *r = m->impl;
    ab_backend *be = p->be;
    const ab_dtype t = p->compute_type;
    const block *last = &r->blk[r->n_blocks - 1];
    void *d_out = r->d_end[0]; /* the gradient at the block's output */
    void *d_in = r->d_end[1];  /* the gradient at the block's input: the main path's, + the shortcut's */
    if (r->has_head) {
        AB_TRY(ab_linear_backward(p, g, &r->fc, B, r->feat, dout, r->dfeat));
        AB_TRY(be->ops->avgpool_backward(be, B, last->u[2].H * last->u[2].W, r->fc.in, t, r->dfeat, d_out));
    } else { /* the gradient of what the stage sent on, into a buffer backward may overwrite */
        AB_TRY(be->ops->cast(be, (size_t)B * m->stage_out_elems, t, dout, t, d_out));
    }
    for (int b = r->b1 - 1; b >= r->b0; b--) {
        block *k = &r->blk[b];
        const void *kin = block_in(m, r, b);
        /* the main path takes turns in two buffers, as a convolution's backward reads one and
         * writes the other; relu's and batch norm's backward work in place */
        void *d_conv3 = r->d_path[0]; /* at conv3's output */
        void *d_conv2 = r->d_path[1]; /* at bn2 + relu's output (conv3's input), in place at conv2's output */
        void *d_conv1 = r->d_path[0]; /* at bn1 + relu's output (conv2's input), in place at conv1's output */
        void *d_down = r->d_path[1];  /* the shortcut's part of d_in, through the downsample */
        const size_t n_out = unit_elems(&k->u[2], B);
        /* through the block's final relu: d_out is now at the sum, bn3's output and the shortcut's */
        AB_TRY(be->ops->relu_backward(be, n_out, t, k->u[2].act, d_out, d_out));
        /* main path: bn3 + conv3, relu + bn2 + conv2, relu + bn1 + conv1; d_out stays for the shortcut */
        AB_TRY(ab_batchnorm_backward(p, g, &k->u[2].bn, B * k->u[2].H * k->u[2].W, k->u[2].out, d_out, d_conv3));
        AB_TRY(ab_conv_backward(p, g, &k->u[2].conv, B, k->u[1].act, d_conv3, d_conv2));
        AB_TRY(be->ops->relu_backward(be, unit_elems(&k->u[1], B), t, k->u[1].act, d_conv2, d_conv2));
        AB_TRY(unit_backward(p, g, &k->u[1], B, k->u[0].act, d_conv2, d_conv1));
        AB_TRY(be->ops->relu_backward(be, unit_elems(&k->u[0], B), t, k->u[0].act, d_conv1, d_conv1));
        AB_TRY(unit_backward(p, g, &k->u[0], B, kin, d_conv1, d_in)); /* even block 0: the stem needs it */
        const size_t n_in = (size_t)B * k->in_H * k->in_W * k->in_C;
        if (k->has_down) {
            AB_TRY(unit_backward(p, g, &k->down, B, kin, d_out, d_down)); /* d_out: spent, overwritten */
            AB_TRY(be->ops->add(be, n_in, t, d_in, d_down, 0, d_in));
        } else {
            AB_TRY(be->ops->add(be, n_in, t, d_in, d_out, 0, d_in));
        }
        /* the block before: its output is this block's input; d_out is spent */
        void *spent = d_out;
        d_out = d_in;
        d_in = spent;
    }
    if (!r->has_stem) { /* d_out: the gradient of the stage's input, sent back */
        m->stage_din = d_out;
        return 0;
    }
    /* the stem: d_out is at the first block's input, the max pool's output or the stem's */
    void *d_stem = d_out; /* at the stem's bn + relu output, in place at its conv's output */
    if (!r->stem_cifar) {
        ab_pool_shape ps = r->pool;
        ps.N = B;
        d_stem = r->d_path[0]; /* free after the blocks */
        AB_TRY(be->ops->maxpool_backward(be, &ps, t, r->stem.act, r->pooled, d_out, d_stem));
    }
    AB_TRY(be->ops->relu_backward(be, unit_elems(&r->stem, B), t, r->stem.act, d_stem, d_stem));
    return unit_backward(p, g, &r->stem, B, x, d_stem, NULL);
}

static void resnet_destroy(ab_model *m) {
    resnet *r = m->impl;
    if (m->arena.be) ab_arena_free(&m->arena);
    if (r) {
        free(r->specs);
        free(r->names);
        free(r->blk);
        free(r->unit_macs);
        free(r);
    }
    free(m);
}

static const ab_model_ops resnet_ops = {.name = "resnet",
                                        .forward = resnet_forward,
                                        .backward = resnet_backward,
                                        .bind = resnet_bind,
                                        .destroy = resnet_destroy};

const ab_model_option ab_resnet_options[] = {
    {"width", "N", "channels of the first stage", "resnet50: 64, resnet-tiny: 8", AB_MODEL_OPT_INT,
     offsetof(ab_train_config, width), 1, 1 << 12},
    {"blocks", "A,B,C,D", "bottleneck blocks per stage", "resnet50: 3,4,6,3, resnet-tiny: 1,1,1,1", AB_MODEL_OPT_INTS4,
     offsetof(ab_train_config, blocks), 1, 1000},
    {0},
};

int ab_resnet_create(const ab_model_config *cfg, int stem_cifar, ab_model **out) {
    *out = NULL;
    const ab_sample_info *si = &cfg->sample;
    if (si->kind != AB_SAMPLE_IMAGE || si->C < 1 || si->H < 1 || si->W < 1 || si->n_classes < 2 || cfg->max_batch < 1)
        return ab_errorf("resnet: needs images and at least 2 classes");
    /* Megatron's split is defined for pairs of linear layers; a bottleneck's convolutions split by
     * channels would need an all-reduce of a whole feature map after every second convolution,
     * each followed by a batch norm over the whole channels: more traffic than the weights' */
    if (ab_tp_size(cfg->tp) > 1)
        return ab_usage_errorf("%s: --tensor-parallel %d is not defined for ResNet: splitting a convolution's channels "
                         "would all-reduce a whole feature map after every second convolution, more than its "
                         "weights; use data parallelism",
                         cfg->name ? cfg->name : "resnet", ab_tp_size(cfg->tp));
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
    const int U = r->n_blocks + 2;
    r->unit_macs = calloc((size_t)U, sizeof *r->unit_macs);
    int rc = (!r->specs || !r->names || !r->blk || !r->unit_macs) ? ab_errorf("out of host memory creating the resnet")
                                                                  : 0;
    if (rc == 0) rc = build_specs(r, cfg);
    /* the stage: the units it holds; the others' tensors absent */
    const ab_stage st = ab_stage_resolve(cfg->stage, U);
    const ab_stage_span sp = ab_stage_span_of(st, r->n_blocks);
    r->has_stem = sp.first, r->has_head = sp.last, r->b0 = sp.lo, r->b1 = sp.hi;
    if (rc == 0) ab_specs_mark_stage(r->specs, r->n_specs, st);
    /* every unit's shapes and multiply-adds, from the spec table alone (bind does it again) */
    m->max_batch = cfg->max_batch;
    if (rc == 0) rc = bind_shapes(m, &(ab_params){.specs = r->specs, .n_specs = r->n_specs});
    if (rc) {
        resnet_destroy(m);
        return -1;
    }
    /* between stages: a block's input or output, a sample's H x W x C */
    const block *fb = &r->blk[r->b0 < r->n_blocks ? r->b0 : r->n_blocks - 1], *lb = &r->blk[r->n_blocks - 1];
    size_t in_elems = 0, out_elems = 0;
    if (!r->has_stem)
        in_elems = r->b1 > r->b0 ? (size_t)fb->in_H * fb->in_W * fb->in_C
                                 : (size_t)lb->u[2].H * lb->u[2].W * lb->u[2].conv.shape.K;
    if (!r->has_head) {
        const unit *o = r->b1 > r->b0 ? &r->blk[r->b1 - 1].u[2] : NULL;
        out_elems = o ? (size_t)o->H * o->W * o->conv.shape.K
                      : (size_t)r->blk[0].in_H * r->blk[0].in_W * r->blk[0].in_C; /* the stem's (pooled) output */
    }
    const double macs = m->macs_per_sample;
    *m = (ab_model){.ops = &resnet_ops, .specs = r->specs, .n_specs = r->n_specs, .n_classes = si->n_classes,
                    .max_batch = cfg->max_batch, .impl = r, .macs_per_sample = macs, .units = U,
                    .unit_macs = r->unit_macs, .stage = st, .stage_in_elems = in_elems, .stage_out_elems = out_elems,
                    .notes = "batch norm: per-rank batch statistics under data parallelism (as PyTorch DDP without "
                             "SyncBatchNorm); running statistics from rank 0 (DDP's broadcast_buffers)"};
    *out = m;
    return 0;
}
