/* BERT for sequence classification in Hugging Face's layout (BertForSequenceClassification),
 * any size from one config: bert-base, a tiny test configuration, or a checkpoint's config.json.
 *   embeddings  word[ids] + position[0..L) + token_type[types] (fp32 tables, as autocast leaves
 *               an embedding lookup) -> LayerNorm -> dropout                        (B, L, H)
 *   layer x N   q, k, v = Linear(x); ctx = attention(q, k, v, padding mask), dropout on the
 *               probabilities; s1 = dropout(Linear(ctx)) + x; a = LayerNorm(s1);
 *               s2 = dropout(Linear(GELU(Linear(a)))) + a; x = LayerNorm(s2)        (B, L, H)
 *   head        pooled = tanh(Linear(x[:, 0])) (the [CLS] position); logits =
 *               Linear(dropout(pooled))                                            (B, classes)
 * Linear layers read the compute type (fp16/bf16 under amp/bf16) and accumulate in fp32; layer
 * norm and softmax statistics are fp32; the embedding sum stays fp32 until the first layer norm
 * rounds it. Dropout masks come from the run's seed, the training step, the layer and the site.
 * Activations live in one arena sized from (max batch, L); the backward rotates six
 * (B, L, H) gradient buffers, one (B, L, F) and one (B, heads, L, L).
 * Tensor parallelism over T ranks (core/parallel.h), as Megatron-LM splits BERT: query, key, value
 * and the intermediate dense column-parallel (each rank heads / T heads and ffn / T units), the
 * attention output and the output dense row-parallel (all-reduced, the bias added once after);
 * embeddings, layer norms, the pooler and the classifier whole on every rank. Four all-reduces of
 * (B, L, H) a layer: two forward (after each row-parallel layer), two backward (the input
 * gradients of the query/key/value and of the intermediate dense, Megatron's f). Dropout on
 * whole tensors draws the same mask on every rank of the group; the attention probabilities,
 * split by heads, draw each rank's own. */
#include <cjson/cJSON.h>
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "layers.h"
#include "workloads.h"
#include "safetensors.h"

/* ---- configuration ---- */

int ab_bert_config_builtin(const char *name, ab_bert_config *c) {
    if (strcmp(name, "bert-base") == 0) {
        *c = (ab_bert_config){.vocab = 30522, .hidden = 768, .layers = 12, .heads = 12, .ffn = 3072,
                              .max_positions = 512, .type_vocab = 2, .ln_eps = 1e-12f, .hidden_dropout = 0.1f,
                              .attention_dropout = 0.1f, .pad_id = 0};
        snprintf(c->source, sizeof c->source, "bert-base (built in: BertConfig's defaults)");
        return 0;
    }
    if (strcmp(name, "bert-tiny") == 0) { /* the same code at a size the tests train in seconds */
        *c = (ab_bert_config){.vocab = 30522, .hidden = 64, .layers = 2, .heads = 2, .ffn = 256, .max_positions = 512,
                              .type_vocab = 2, .ln_eps = 1e-12f, .hidden_dropout = 0.1f, .attention_dropout = 0.1f,
                              .pad_id = 0};
        snprintf(c->source, sizeof c->source, "bert-tiny (built in: 2 layers, hidden 64, 2 heads, ffn 256)");
        return 0;
    }
    return ab_errorf("no built-in BERT configuration '%s'", name);
}

static int json_int(const cJSON *o, const char *key, int lo, int hi, int *out, const char *path) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    if (!v) return 1; /* absent: the caller's default */
    if (!cJSON_IsNumber(v) || v->valuedouble != floor(v->valuedouble) || v->valuedouble < lo || v->valuedouble > hi)
        return ab_errorf("%s: \"%s\" is not an integer in [%d, %d]", path, key, lo, hi), -1;
    *out = (int)v->valuedouble;
    return 0;
}

static int json_float(const cJSON *o, const char *key, double lo, double hi, float *out, const char *path) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    if (!v) return 1;
    if (!cJSON_IsNumber(v) || !(v->valuedouble >= lo && v->valuedouble <= hi))
        return ab_errorf("%s: \"%s\" is not a number in [%g, %g]", path, key, lo, hi), -1;
    *out = (float)v->valuedouble;
    return 0;
}

/* the folder of a checkpoint given as a folder or as a file in it */
static void checkpoint_dir(const char *arch, char *dir, size_t cap) {
    struct stat st;
    if (stat(arch, &st) == 0 && S_ISDIR(st.st_mode)) {
        snprintf(dir, cap, "%s", arch);
        return;
    }
    const char *slash = strrchr(arch, '/');
    if (slash) snprintf(dir, cap, "%.*s", (int)(slash - arch), arch);
    else snprintf(dir, cap, ".");
}

int ab_bert_config_read(const char *arch, ab_bert_config *c) {
    char dir[1024], path[1100];
    checkpoint_dir(arch, dir, sizeof dir);
    snprintf(path, sizeof path, "%s/config.json", dir);
    FILE *f = fopen(path, "rb");
    if (!f) return ab_errorf("%s: no such file (--model bert takes the architecture from the checkpoint's config.json)",
                             path);
    char buf[1 << 16];
    const size_t n = fread(buf, 1, sizeof buf - 1, f);
    const int big = !feof(f);
    fclose(f);
    if (big) return ab_errorf("%s: larger than a BERT config.json can be", path);
    buf[n] = 0;
    cJSON *o = cJSON_Parse(buf);
    if (!cJSON_IsObject(o)) {
        cJSON_Delete(o);
        return ab_errorf("%s: not a JSON object", path);
    }
    *c = (ab_bert_config){.vocab = 30522, .hidden = 768, .layers = 12, .heads = 12, .ffn = 3072, .max_positions = 512,
                          .type_vocab = 2, .ln_eps = 1e-12f, .hidden_dropout = 0.1f, .attention_dropout = 0.1f};
    int rc = 0;
    const cJSON *mt = cJSON_GetObjectItemCaseSensitive(o, "model_type"), *act = cJSON_GetObjectItemCaseSensitive(o, "hidden_act"),
                *pe = cJSON_GetObjectItemCaseSensitive(o, "position_embedding_type");
    if (mt && (!cJSON_IsString(mt) || strcmp(mt->valuestring, "bert") != 0))
        rc = ab_errorf("%s: model_type is not \"bert\"", path);
    if (rc == 0 && act && (!cJSON_IsString(act) || strcmp(act->valuestring, "gelu") != 0))
        rc = ab_errorf("%s: hidden_act \"%s\": only BERT's exact \"gelu\" is built", path,
                       cJSON_IsString(act) ? act->valuestring : "?");
    if (rc == 0 && pe && (!cJSON_IsString(pe) || strcmp(pe->valuestring, "absolute") != 0))
        rc = ab_errorf("%s: position_embedding_type is not \"absolute\"", path);
    if (rc == 0 && (json_int(o, "vocab_size", 1, 1 << 24, &c->vocab, path) < 0 ||
                    json_int(o, "hidden_size", 1, 1 << 16, &c->hidden, path) < 0 ||
                    json_int(o, "num_hidden_layers", 1, 1024, &c->layers, path) < 0 ||
                    json_int(o, "num_attention_heads", 1, 1024, &c->heads, path) < 0 ||
                    json_int(o, "intermediate_size", 1, 1 << 20, &c->ffn, path) < 0 ||
                    json_int(o, "max_position_embeddings", 1, 1 << 20, &c->max_positions, path) < 0 ||
                    json_int(o, "type_vocab_size", 1, 1024, &c->type_vocab, path) < 0 ||
                    json_int(o, "pad_token_id", 0, 1 << 24, &c->pad_id, path) < 0 ||
                    json_float(o, "layer_norm_eps", 0.0, 1.0, &c->ln_eps, path) < 0 ||
                    json_float(o, "hidden_dropout_prob", 0.0, 0.999, &c->hidden_dropout, path) < 0 ||
                    json_float(o, "attention_probs_dropout_prob", 0.0, 0.999, &c->attention_dropout, path) < 0))
        rc = -1;
    cJSON_Delete(o);
    if (rc == 0 && c->hidden % c->heads)
        rc = ab_errorf("%s: hidden_size %d does not split into %d heads", path, c->hidden, c->heads);
    if (rc == 0)
        snprintf(c->source, sizeof c->source, "%.400s: %d layers, hidden %d, %d heads, ffn %d, vocab %d", path,
                 c->layers, c->hidden, c->heads, c->ffn, c->vocab);
    return rc;
}

/* ---- the model ---- */

enum { SITE_EMB, SITE_ATTN, SITE_ATTN_OUT, SITE_FFN_OUT, SITE_POOLED };

typedef struct {
    ab_linear q, k, v, ao, fi, fo; /* query, key, value, attention output, intermediate, output */
    ab_layernorm ln1, ln2;
    /* activations (B, L, H) unless said: */
    void *x;            /* the layer's input (and the residual of s1) */
    void *qa, *ka, *va; /* projections */
    void *probs, *drop; /* (B, heads, L, L): the softmax, the dropped probabilities */
    void *ctx;
    void *s1, *a;    /* ln1's input and output */
    void *h, *g;     /* (B, L, F): the intermediate projection and its GELU */
    void *s2;        /* ln2's input; ln2's output is the next layer's x */
    float *m1, *r1, *m2, *r2; /* (B L) layer-norm statistics */
} bert_layer;

typedef struct {
    ab_bert_config cfg;
    int L, n_labels;
    float hdrop, adrop;
    ab_param_spec *specs;
    char (*names)[96];
    int n_specs;
    int word, pos, type;  /* spec indices of the embedding tables */
    ab_layernorm ln_emb;
    bert_layer *layer;
    ab_linear pool, cls;
    float *emb;           /* (B, L, H) fp32: the embeddings' sum */
    float *me, *re;       /* (B L) */
    void *out;            /* (B, L, H): the last layer's output */
    void *cls_in, *pooled, *pooled_d; /* (B, H) */
    /* backward */
    void *gb[6];          /* (B, L, H) */
    void *gf, *gp;        /* (B, L, F), (B, heads, L, L) */
    float *gemb;          /* (B, L, H) fp32 */
    void *gcls;           /* (B, H) x 2 */
    int32_t *cls_rows;    /* host: b * L */
    long fwd_step;        /* the last training pass's index and seed: its masks are backward's */
    uint64_t fwd_seed;
    /* tensor parallelism: the group, and this rank's share of the heads, hidden and ffn columns
     * (the whole model's without it) */
    ab_tp *tp;
    int T, heads_local, H_local, F_local;
    void *ones; /* (B L) ones: the row-parallel layers' biases after the all-reduce */
    /* pipeline parallelism: the stage's units, the embeddings (unit 0), the layers [l0, l1) (units
     * l + 1), the head (unit layers + 1); the whole model's when not cut */
    int has_emb, l0, l1, has_head;
    double *unit_macs; /* (layers + 2) */
} bert;

/* layer l's input: the stage's for its first layer after another stage's units, else its own */
static void *layer_in(const ab_model *m, const bert *b, int l) {
    return l == b->l0 && !b->has_emb ? (void *)m->stage_in : b->layer[l].x;
}
/* where layer l writes its output: the next layer's input, the encoder's output, or what the
 * stage sends on */
static void *layer_out(const ab_model *m, const bert *b, int l) {
    return l + 1 < b->l1 ? b->layer[l + 1].x : b->has_head ? b->out : m->stage_out;
}
/* the embeddings' output, and the encoder's as the head reads it */
static void *emb_out(const ab_model *m, const bert *b) {
    return b->l1 > b->l0 ? b->layer[0].x : b->has_head ? b->out : m->stage_out;
}
static const void *enc_out(const ab_model *m, const bert *b) {
    return b->l1 > b->l0 || b->has_emb ? b->out : m->stage_in;
}

static uint64_t mix64(uint64_t x) {
    x += 0x9E3779B97F4A7C15ull;
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
    return x ^ (x >> 31);
}

/* the dropout seed of one site of one layer at the current training step: each field hashed on
 * its own, so no (step, layer, site) meets another's seed whatever the depth (a packed
 * step * 64 + layer * 8 + site gave layer 8 + k at step s the key of layer k at step s + 1) */
static uint64_t site_seed(uint64_t seed, long step, int layer, int site) {
    return mix64(seed ^ mix64(mix64((uint64_t)step) ^ mix64(((uint64_t)layer << 8 | (uint64_t)site) + 1)));
}

/* the attention probabilities' dropout seed: split by heads under tensor parallelism, so each
 * rank of the group draws its own mask (the seed of one rank unchanged) */
static uint64_t attn_seed(const bert *b, uint64_t seed, long step, int layer) {
    const uint64_t s = site_seed(seed, step, layer, SITE_ATTN);
    return b->T > 1 ? s ^ mix64((uint64_t)ab_tp_rank(b->tp) + 1) : s;
}

/* a spec named prefix + "." + what */
static ab_param_spec *spec(bert *b, const char *prefix, const char *what) {
    ab_param_spec *s = &b->specs[b->n_specs];
    snprintf(b->names[b->n_specs], 96, "%s.%s", prefix, what);
    *s = (ab_param_spec){.name = b->names[b->n_specs]};
    b->n_specs++;
    return s;
}

/* a Linear (out, in) + bias in the compute region, initialised as BERT's _init_weights does */
static void add_linear(bert *b, const char *prefix, int in, int out) {
    ab_param_spec *w = spec(b, prefix, "weight"), *bias = spec(b, prefix, "bias");
    *w = (ab_param_spec){.name = w->name, .ndim = 2, .shape = {out, in}, .init = AB_INIT_NORMAL, .std = 0.02f};
    *bias = (ab_param_spec){.name = bias->name, .ndim = 1, .shape = {out}, .init = AB_INIT_ZERO, .no_decay = 1};
}

/* LayerNorm weight (1) and bias (0): the fp32 region, no weight decay */
static void add_layernorm(bert *b, const char *prefix) {
    const int k = b->n_specs;
    char names[2][96];
    ab_layernorm_specs(&b->specs[k], names, prefix, b->cfg.hidden);
    memcpy(b->names[k], names[0], 96);
    memcpy(b->names[k + 1], names[1], 96);
    b->specs[k].name = b->names[k];
    b->specs[k + 1].name = b->names[k + 1];
    b->n_specs += 2;
}

/* an embedding table (rows, H): fp32 region (autocast leaves an embedding lookup in fp32) */
static int add_table(bert *b, const char *name, int rows) {
    const int k = b->n_specs;
    snprintf(b->names[k], 96, "%s", name);
    b->specs[k] = (ab_param_spec){.name = b->names[k], .ndim = 2, .shape = {rows, b->cfg.hidden}, .init = AB_INIT_NORMAL,
                                  .std = 0.02f, .region = AB_REGION_FP32};
    b->n_specs++;
    return k;
}

/* spec index layout per encoder layer, in the order build() adds them */
enum { L_Q = 0, L_K = 2, L_V = 4, L_AO = 6, L_LN1 = 8, L_FI = 10, L_FO = 12, L_LN2 = 14, L_SPECS = 16 };

static void build(bert *b) {
    const ab_bert_config *c = &b->cfg;
    char pf[96];
    b->word = add_table(b, "bert.embeddings.word_embeddings.weight", c->vocab);
    b->pos = add_table(b, "bert.embeddings.position_embeddings.weight", c->max_positions);
    b->type = add_table(b, "bert.embeddings.token_type_embeddings.weight", c->type_vocab);
    add_layernorm(b, "bert.embeddings.LayerNorm");
    for (int l = 0; l < c->layers; l++) {
#define LAYER(suffix) (snprintf(pf, sizeof pf, "bert.encoder.layer.%d.%s", l, suffix), pf)
        add_linear(b, LAYER("attention.self.query"), c->hidden, c->hidden);
        add_linear(b, LAYER("attention.self.key"), c->hidden, c->hidden);
        add_linear(b, LAYER("attention.self.value"), c->hidden, c->hidden);
        add_linear(b, LAYER("attention.output.dense"), c->hidden, c->hidden);
        add_layernorm(b, LAYER("attention.output.LayerNorm"));
        add_linear(b, LAYER("intermediate.dense"), c->hidden, c->ffn);
        add_linear(b, LAYER("output.dense"), c->ffn, c->hidden);
        add_layernorm(b, LAYER("output.LayerNorm"));
#undef LAYER
    }
    add_linear(b, "bert.pooler.dense", c->hidden, c->hidden);
    add_linear(b, "classifier", c->hidden, b->n_labels);
}

/* Megatron's split of every encoder layer's linear layers among the tensor group's ranks */
static int split_layers(bert *b) {
    const ab_bert_config *c = &b->cfg;
    const int T = ab_tp_size(b->tp);
    if (c->heads % T || c->ffn % T)
        return ab_usage_errorf("bert: --tensor-parallel %d: the %d attention heads and the ffn width %d must divide "
                               "among the ranks",
                               T, c->heads, c->ffn);
    for (int l = 0; l < c->layers; l++) {
        ab_param_spec *q = &b->specs[5 + l * L_SPECS];
        AB_TRY(ab_linear_column_parallel(&q[L_Q], &q[L_Q + 1], b->tp));
        AB_TRY(ab_linear_column_parallel(&q[L_K], &q[L_K + 1], b->tp));
        AB_TRY(ab_linear_column_parallel(&q[L_V], &q[L_V + 1], b->tp));
        AB_TRY(ab_linear_row_parallel(&q[L_AO], b->tp));
        AB_TRY(ab_linear_column_parallel(&q[L_FI], &q[L_FI + 1], b->tp));
        AB_TRY(ab_linear_row_parallel(&q[L_FO], b->tp));
    }
    b->T = T;
    b->heads_local = c->heads / T;
    b->H_local = c->hidden / T;
    b->F_local = c->ffn / T;
    return 0;
}

/* the layers onto their specs, in the order build() added them */
static void bind_layers(bert *b, const ab_params *p) {
    const ab_bert_config *c = &b->cfg;
    const ab_param_spec *s = p->specs;
    const int base = 5; /* three tables and the embeddings' layer norm */
    ab_layernorm_bind(&b->ln_emb, &s[3], c->ln_eps);
    for (int l = 0; l < c->layers; l++) {
        bert_layer *y = &b->layer[l];
        const ab_param_spec *q = &s[base + l * L_SPECS];
        ab_linear_bind(&y->q, &q[L_Q], &q[L_Q + 1]);
        ab_linear_bind(&y->k, &q[L_K], &q[L_K + 1]);
        ab_linear_bind(&y->v, &q[L_V], &q[L_V + 1]);
        ab_linear_bind(&y->ao, &q[L_AO], &q[L_AO + 1]);
        ab_layernorm_bind(&y->ln1, &q[L_LN1], c->ln_eps);
        ab_linear_bind(&y->fi, &q[L_FI], &q[L_FI + 1]);
        ab_linear_bind(&y->fo, &q[L_FO], &q[L_FO + 1]);
        ab_layernorm_bind(&y->ln2, &q[L_LN2], c->ln_eps);
    }
    const int head = base + c->layers * L_SPECS;
    ab_linear_bind(&b->pool, &s[head], &s[head + 1]);
    ab_linear_bind(&b->cls, &s[head + 2], &s[head + 3]);
}

static int bert_bind(ab_model *m, const ab_params *p) {
    bert *b = m->impl;
    const ab_bert_config *c = &b->cfg;
    bind_layers(b, p);
    const size_t es = ab_dtype_size(p->compute_type), B = (size_t)m->max_batch, L = (size_t)b->L, H = (size_t)c->hidden,
                 F = (size_t)b->F_local, A = (size_t)b->heads_local, BLH = B * L * H, BLF = B * L * F,
                 BALL = B * A * L * L, BLh = B * L * (size_t)b->H_local; /* F, A: this rank's */
    const int dropout_on = b->adrop > 0.0f, layers = b->l1 > b->l0;
    ab_arena *a = &m->arena;
    ab_arena_init(a, p->be);
    if (b->has_emb) {
        ab_arena_add(a, AB_MEM_ACTIVATIONS, BLH * sizeof(float), (void **)&b->emb, "embeddings.sum");
        ab_arena_add(a, AB_MEM_ACTIVATIONS, B * L * sizeof(float), (void **)&b->me, "embeddings.ln.mean");
        ab_arena_add(a, AB_MEM_ACTIVATIONS, B * L * sizeof(float), (void **)&b->re, "embeddings.ln.rstd");
    }
    for (int l = b->l0; l < b->l1; l++) {
        bert_layer *y = &b->layer[l];
        if (l > b->l0 || b->has_emb) ab_arena_add(a, AB_MEM_ACTIVATIONS, BLH * es, &y->x, "layer%d.input", l);
        ab_arena_add(a, AB_MEM_ACTIVATIONS, BLh * es, &y->qa, "layer%d.q", l);
        ab_arena_add(a, AB_MEM_ACTIVATIONS, BLh * es, &y->ka, "layer%d.k", l);
        ab_arena_add(a, AB_MEM_ACTIVATIONS, BLh * es, &y->va, "layer%d.v", l);
        ab_arena_add(a, AB_MEM_ACTIVATIONS, BALL * es, &y->probs, "layer%d.probs", l);
        if (dropout_on) ab_arena_add(a, AB_MEM_ACTIVATIONS, BALL * es, &y->drop, "layer%d.probs.dropped", l);
        ab_arena_add(a, AB_MEM_ACTIVATIONS, BLh * es, &y->ctx, "layer%d.ctx", l);
        ab_arena_add(a, AB_MEM_ACTIVATIONS, BLH * es, &y->s1, "layer%d.ln1.in", l);
        ab_arena_add(a, AB_MEM_ACTIVATIONS, BLH * es, &y->a, "layer%d.ln1.out", l);
        ab_arena_add(a, AB_MEM_ACTIVATIONS, BLF * es, &y->h, "layer%d.ffn.in", l);
        ab_arena_add(a, AB_MEM_ACTIVATIONS, BLF * es, &y->g, "layer%d.ffn.gelu", l);
        ab_arena_add(a, AB_MEM_ACTIVATIONS, BLH * es, &y->s2, "layer%d.ln2.in", l);
        ab_arena_add(a, AB_MEM_ACTIVATIONS, B * L * sizeof(float), (void **)&y->m1, "layer%d.ln1.mean", l);
        ab_arena_add(a, AB_MEM_ACTIVATIONS, B * L * sizeof(float), (void **)&y->r1, "layer%d.ln1.rstd", l);
        ab_arena_add(a, AB_MEM_ACTIVATIONS, B * L * sizeof(float), (void **)&y->m2, "layer%d.ln2.mean", l);
        ab_arena_add(a, AB_MEM_ACTIVATIONS, B * L * sizeof(float), (void **)&y->r2, "layer%d.ln2.rstd", l);
    }
    if (b->has_head) {
        if (layers || b->has_emb) ab_arena_add(a, AB_MEM_ACTIVATIONS, BLH * es, &b->out, "encoder.out");
        ab_arena_add(a, AB_MEM_ACTIVATIONS, B * H * es, &b->cls_in, "pooler.in");
        ab_arena_add(a, AB_MEM_ACTIVATIONS, B * H * es, &b->pooled, "pooler.tanh");
        ab_arena_add(a, AB_MEM_ACTIVATIONS, B * H * es, &b->pooled_d, "pooler.dropped");
        ab_arena_add(a, AB_MEM_ACTIVATIONS, B * (size_t)b->n_labels * es, &m->logits, "logits");
    } else {
        ab_arena_add(a, AB_MEM_ACTIVATIONS, BLH * es, &m->stage_out, "stage.out");
    }
    /* what the backward uses for a moment only: a pipeline's later slots share their first's
     * (one backward runs at a time, and what it sends back is sent before the next) */
    const bert *first = m->scratch_from ? m->scratch_from->impl : NULL;
    if (first) {
        memcpy(b->gb, first->gb, sizeof b->gb);
        b->gf = first->gf, b->gp = first->gp, b->gemb = first->gemb, b->gcls = first->gcls;
    } else {
        for (int i = 0; i < (layers ? 6 : 1); i++) ab_arena_add(a, AB_MEM_ACTIVATIONS, BLH * es, &b->gb[i], "grad%d", i);
        if (layers) ab_arena_add(a, AB_MEM_ACTIVATIONS, BLF * es, &b->gf, "grad.ffn");
        if (layers) ab_arena_add(a, AB_MEM_ACTIVATIONS, BALL * es, &b->gp, "grad.probs");
        if (b->has_emb) ab_arena_add(a, AB_MEM_ACTIVATIONS, BLH * sizeof(float), (void **)&b->gemb, "grad.embeddings");
        if (b->has_head) ab_arena_add(a, AB_MEM_ACTIVATIONS, 2 * B * H * es, &b->gcls, "grad.pooler");
    }
    if (b->T > 1 && layers) ab_arena_add(a, AB_MEM_ACTIVATIONS, B * L * es, &b->ones, "row-parallel.bias.ones");
    AB_TRY(ab_arena_alloc(a));
    if (b->ones) AB_TRY(ab_fill_ones(p, B * L, b->ones));
    b->cls_rows = malloc(B * sizeof(int32_t));
    if (!b->cls_rows) return ab_errorf("out of host memory");
    for (size_t i = 0; i < B; i++) b->cls_rows[i] = (int32_t)(i * L);
    /* as BERT's _init_weights: the padding token's embedding row starts at zero */
    if (b->has_emb && c->pad_id >= 0 && c->pad_id < c->vocab)
        AB_TRY(p->be->ops->zero(p->be, p->master + p->specs[b->word].offset + (size_t)c->pad_id * H, H * sizeof(float)));
    return 0;
}

/* x: ids (B, L), types (B, L), mask (B, L), int32, as the text data set fills a batch */
static int bert_forward(ab_model *m, const ab_params *p, const void *x, int B, const ab_pass *pass) {
    bert *b = m->impl;
    const ab_bert_config *c = &b->cfg;
    ab_backend *be = p->be;
    const ab_dtype t = p->compute_type;
    const int L = b->L, H = c->hidden, R = B * L;
    if (B > m->max_batch) return ab_errorf("bert: batch %d exceeds the bound %d", B, m->max_batch);
    const int32_t *ids = x, *types = ids + (size_t)R, *mask = types + (size_t)R;
    const int training = pass->training;
    const long step = pass->index;
    const uint64_t seed = pass->seed;
    if (training) b->fwd_step = step, b->fwd_seed = seed;
    const float hd = training ? b->hdrop : 0.0f;
    const size_t BLH = (size_t)R * H;
    if (b->has_emb) {
        AB_TRY(be->ops->embedding_forward(be, R, L, H, ids, types, p->master + p->specs[b->word].offset, c->vocab,
                                          p->master + p->specs[b->pos].offset, p->master + p->specs[b->type].offset,
                                          c->type_vocab, b->emb));
        void *x0 = emb_out(m, b);
        AB_TRY(ab_layernorm_forward(p, &b->ln_emb, R, AB_F32, b->emb, b->me, b->re, t, x0));
        AB_TRY(be->ops->dropout_forward(be, BLH, t, hd, site_seed(seed, step, 0, SITE_EMB), x0, x0));
    }
    const ab_attention att = {b->heads_local, training ? b->adrop : 0.0f};
    for (int l = b->l0; l < b->l1; l++) {
        bert_layer *y = &b->layer[l];
        void *xin = layer_in(m, b, l), *next = layer_out(m, b, l);
        AB_TRY(ab_linear_forward(p, &y->q, R, xin, y->qa, AB_EPI_NONE));
        AB_TRY(ab_linear_forward(p, &y->k, R, xin, y->ka, AB_EPI_NONE));
        AB_TRY(ab_linear_forward(p, &y->v, R, xin, y->va, AB_EPI_NONE));
        AB_TRY(ab_attention_forward(p, &att, B, L, b->H_local, y->qa, y->ka, y->va, mask, training,
                                    attn_seed(b, seed, step, l), y->probs, y->drop, y->ctx));
        AB_TRY(ab_linear_row_forward(p, &y->ao, b->tp, R, y->ctx, y->s1, b->ones));
        AB_TRY(be->ops->dropout_forward(be, BLH, t, hd, site_seed(seed, step, l, SITE_ATTN_OUT), y->s1, y->s1));
        AB_TRY(be->ops->add(be, BLH, t, y->s1, xin, 0, y->s1));
        AB_TRY(ab_layernorm_forward(p, &y->ln1, R, t, y->s1, y->m1, y->r1, t, y->a));
        AB_TRY(ab_linear_forward(p, &y->fi, R, y->a, y->h, AB_EPI_NONE));
        AB_TRY(be->ops->gelu_forward(be, (size_t)R * b->F_local, t, y->h, y->g));
        AB_TRY(ab_linear_row_forward(p, &y->fo, b->tp, R, y->g, y->s2, b->ones));
        AB_TRY(be->ops->dropout_forward(be, BLH, t, hd, site_seed(seed, step, l, SITE_FFN_OUT), y->s2, y->s2));
        AB_TRY(be->ops->add(be, BLH, t, y->s2, y->a, 0, y->s2));
        AB_TRY(ab_layernorm_forward(p, &y->ln2, R, t, y->s2, y->m2, y->r2, t, next));
    }
    if (!b->has_head) return 0; /* the stage's output is its last layer's (stage_out) */
    /* the pooler on [CLS], the classifier */
    AB_TRY(be->ops->gather_rows(be, B, (size_t)H * ab_dtype_size(t), enc_out(m, b), b->cls_rows, b->cls_in));
    AB_TRY(ab_linear_forward(p, &b->pool, B, b->cls_in, b->pooled, AB_EPI_NONE));
    AB_TRY(be->ops->tanh_forward(be, (size_t)B * H, t, b->pooled, b->pooled));
    AB_TRY(be->ops->dropout_forward(be, (size_t)B * H, t, hd, site_seed(seed, step, c->layers, SITE_POOLED), b->pooled,
                                    b->pooled_d));
    return ab_linear_forward(p, &b->cls, B, b->pooled_d, m->logits, AB_EPI_NONE);
}

/* dout: the gradient of the logits, or on a stage without the head of its output (stage_out) */
static int bert_backward(ab_model *m, const ab_params *p, const ab_grad_sink *g, const void *x, const void *dout,
                         int B) {
    bert *b = m->impl;
    const ab_bert_config *c = &b->cfg;
    ab_backend *be = p->be;
    const ab_dtype t = p->compute_type;
    const int L = b->L, H = c->hidden, R = B * L;
    const size_t es = ab_dtype_size(t), BLH = (size_t)R * H;
    const int32_t *ids = x, *types = ids + (size_t)R;
    const long step = b->fwd_step; /* the masks of the training forward this backward follows */
    const uint64_t seed = b->fwd_seed;
    const float hd = b->hdrop;
    const ab_attention att = {b->heads_local, b->adrop};
    void *G = b->gb[0];
    if (b->has_head) {
        void *dcls = b->gcls, *dpool = (char *)b->gcls + (size_t)B * H * es;
        /* head: classifier, dropout, tanh, pooler dense; the [CLS] rows of the encoder's output */
        AB_TRY(ab_linear_backward(p, g, &b->cls, B, b->pooled_d, dout, dpool));
        AB_TRY(be->ops->dropout_backward(be, (size_t)B * H, t, hd, site_seed(seed, step, c->layers, SITE_POOLED), dpool,
                                         dpool));
        AB_TRY(be->ops->tanh_backward(be, (size_t)B * H, t, b->pooled, dpool, dpool));
        AB_TRY(ab_linear_backward(p, g, &b->pool, B, b->cls_in, dpool, dcls));
        AB_TRY(be->ops->zero(be, G, BLH * es));
        for (int i = 0; i < B; i++)
            AB_TRY(be->ops->cast(be, (size_t)H, t, (const char *)dcls + (size_t)i * H * es, t,
                                 (char *)G + (size_t)i * L * H * es));
    } else { /* the gradient of what the stage sent on, into the buffer backward may overwrite */
        AB_TRY(be->ops->cast(be, BLH, t, dout, t, G));
    }
    void *T1 = b->gb[1], *T2 = b->gb[2], *T3 = b->gb[3], *T4 = b->gb[4], *T5 = b->gb[5];
    for (int l = b->l1 - 1; l >= b->l0; l--) {
        bert_layer *y = &b->layer[l];
        const void *xin = layer_in(m, b, l);
        /* G: the gradient of this layer's output */
        AB_TRY(ab_layernorm_backward(p, g, &y->ln2, R, t, y->s2, t, G, y->m2, y->r2, T1)); /* ds2 */
        AB_TRY(be->ops->dropout_backward(be, BLH, t, hd, site_seed(seed, step, l, SITE_FFN_OUT), T1, T2));
        AB_TRY(ab_linear_backward(p, g, &y->fo, R, y->g, T2, b->gf));
        AB_TRY(be->ops->gelu_backward(be, (size_t)R * b->F_local, t, y->h, b->gf, b->gf));
        AB_TRY(ab_linear_backward(p, g, &y->fi, R, y->a, b->gf, T2));
        AB_TRY(ab_tp_allreduce(b->tp, T2, BLH, t)); /* f: the blocks' input gradients summed */
        AB_TRY(be->ops->add(be, BLH, t, T1, T2, 0, T1)); /* da: through the FFN and the residual */
        AB_TRY(ab_layernorm_backward(p, g, &y->ln1, R, t, y->s1, t, T1, y->m1, y->r1, T1)); /* ds1, also dx's residual */
        AB_TRY(be->ops->dropout_backward(be, BLH, t, hd, site_seed(seed, step, l, SITE_ATTN_OUT), T1, T2));
        AB_TRY(ab_linear_backward(p, g, &y->ao, R, y->ctx, T2, T3)); /* dctx */
        AB_TRY(ab_attention_backward(p, &att, B, L, b->H_local, y->qa, y->ka, y->va, y->probs, y->drop, 1,
                                     attn_seed(b, seed, step, l), T3, b->gp, T2, T4, T5)); /* dq, dk, dv */
        if (b->T > 1) {
            /* the three input gradients of this rank's heads summed, then over the group (f), then
             * the residual's: one all-reduce */
            AB_TRY(ab_linear_backward(p, g, &y->q, R, xin, T2, G));
            AB_TRY(ab_linear_backward(p, g, &y->k, R, xin, T4, T3));
            AB_TRY(be->ops->add(be, BLH, t, G, T3, 0, G));
            AB_TRY(ab_linear_backward(p, g, &y->v, R, xin, T5, T3));
            AB_TRY(be->ops->add(be, BLH, t, G, T3, 0, G));
            AB_TRY(ab_tp_allreduce(b->tp, G, BLH, t));
            AB_TRY(be->ops->add(be, BLH, t, T1, G, 0, T1));
        } else {
            AB_TRY(ab_linear_backward(p, g, &y->q, R, xin, T2, G));
            AB_TRY(be->ops->add(be, BLH, t, T1, G, 0, T1));
            AB_TRY(ab_linear_backward(p, g, &y->k, R, xin, T4, G));
            AB_TRY(be->ops->add(be, BLH, t, T1, G, 0, T1));
            AB_TRY(ab_linear_backward(p, g, &y->v, R, xin, T5, G));
            AB_TRY(be->ops->add(be, BLH, t, T1, G, 0, T1));
        }
        void *swap = G; /* T1 is now the gradient of this layer's input */
        G = T1;
        T1 = swap;
    }
    if (!b->has_emb) { /* the gradient of the stage's input, sent back */
        m->stage_din = G;
        return 0;
    }
    /* embeddings: dropout, layer norm (fp32 in, compute type out), the tables */
    AB_TRY(be->ops->dropout_backward(be, BLH, t, hd, site_seed(seed, step, 0, SITE_EMB), G, G));
    AB_TRY(ab_layernorm_backward(p, g, &b->ln_emb, R, AB_F32, b->emb, t, G, b->me, b->re, b->gemb));
    const ab_param_spec *sw = &p->specs[b->word], *sp = &p->specs[b->pos], *st = &p->specs[b->type];
    AB_TRY(be->ops->embedding_backward(be, R, L, H, ids, types, b->gemb, c->vocab, c->type_vocab,
                                       g->mode == AB_GRAD_ACCUMULATE, ab_param_grad_at(p, sw), ab_param_grad_at(p, sp),
                                       ab_param_grad_at(p, st)));
    AB_TRY(ab_grad_ready(g, sw));
    AB_TRY(ab_grad_ready(g, sp));
    return ab_grad_ready(g, st);
}

/* ---- weights: Hugging Face's names, with or without "bert.", LayerNorm weight/bias or the
 * older gamma/beta ---- */

/* candidates for spec name n in a checkpoint, most specific first */
static int candidates(const char *n, char out[4][128]) {
    int k = 0;
    const char *bare = strncmp(n, "bert.", 5) == 0 ? n + 5 : n;
    snprintf(out[k++], 128, "%s", n);
    if (bare != n) snprintf(out[k++], 128, "%s", bare);
    const char *ln = strstr(bare, "LayerNorm.");
    if (ln) {
        const char *what = ln + strlen("LayerNorm.");
        const char *old = strcmp(what, "weight") == 0 ? "gamma" : strcmp(what, "bias") == 0 ? "beta" : NULL;
        if (old) {
            snprintf(out[k++], 128, "%.*s%s", (int)(what - n), n, old);
            if (bare != n) snprintf(out[k++], 128, "%.*s%s", (int)(what - bare), bare, old);
        }
    }
    return k;
}

/* names a BERT checkpoint may hold that a sequence classifier does not use */
static int ignorable(const char *n) {
    const char *bare = strncmp(n, "bert.", 5) == 0 ? n + 5 : n;
    return strcmp(bare, "embeddings.position_ids") == 0 || strncmp(n, "cls.", 4) == 0;
}

/* tensor t of checkpoint path can fill spec s: its shape, and a float type. 0, or -1 (ab_error) */
static int check_tensor(const char *path, const ab_st_tensor *t, const ab_param_spec *s) {
    int same = t->ndim == s->ndim;
    for (int d = 0; same && d < s->ndim; d++) same = t->shape[d] == s->shape[d];
    if (!same) {
        char have[64] = "", want[64] = "";
        for (int d = 0, l = 0; d < t->ndim && l < 56; d++)
            l += snprintf(have + l, sizeof have - (size_t)l, "%s%lld", d ? ", " : "", (long long)t->shape[d]);
        for (int d = 0, l = 0; d < s->ndim; d++)
            l += snprintf(want + l, sizeof want - (size_t)l, "%s%d", d ? ", " : "", s->shape[d]);
        return ab_errorf("%s: tensor '%s' has shape (%s), the model needs (%s)", path, t->name, have, want);
    }
    if (t->dtype != AB_ST_F32 && t->dtype != AB_ST_F16 && t->dtype != AB_ST_BF16)
        return ab_errorf("%s: tensor '%s' is %s, not F32, F16 or BF16", path, t->name, ab_st_dtype_name(t->dtype));
    return 0;
}

/* the record's account of a load: loaded tensors from path (of the types in the bit set types),
 * and the fresh ones the checkpoint lacked (the first names of them) */
static void describe_load(char *from, size_t cap, const char *path, int loaded, int types, int fresh,
                          const char *fresh_names) {
    char ty[32] = "";
    for (int d = 0, l = 0; d < AB_ST_DTYPE_COUNT; d++)
        if (types >> d & 1)
            l += snprintf(ty + l, sizeof ty - (size_t)l, "%s%s", l ? "+" : "", ab_st_dtype_name((ab_st_dtype)d));
    if (fresh)
        snprintf(from, cap, "%d tensors from %s (%s); %d initialised as BERT does (normal, std 0.02; biases 0): %s%s",
                 loaded, path, ty, fresh, fresh_names, fresh > 4 ? ", ..." : "");
    else
        snprintf(from, cap, "all %d tensors from %s (%s)", loaded, path, ty);
}

static int bert_load(ab_model *m, ab_params *p, const char *arch, char *from, size_t cap) {
    char dir[1024], path[1100];
    struct stat sb;
    if (stat(arch, &sb) == 0 && S_ISDIR(sb.st_mode)) {
        checkpoint_dir(arch, dir, sizeof dir);
        snprintf(path, sizeof path, "%s/model.safetensors", dir);
    } else {
        snprintf(path, sizeof path, "%s", arch);
    }
    ab_safetensors st;
    AB_TRY(ab_st_open(path, &st));
    ab_backend *be = p->be;
    float *host = malloc((p->n + 1) * sizeof(float));
    unsigned char *used = calloc((size_t)st.n + 1, 1);
    int rc = (!host || !used) ? ab_errorf("%s: out of host memory", path) : 0;
    if (rc == 0) rc = be->ops->download(be, host, p->master, p->n * sizeof(float)); /* the initialised values */
    int loaded = 0, fresh = 0, types = 0;
    char fresh_names[160] = "";
    for (int i = 0; rc == 0 && i < p->n_specs; i++) {
        const ab_param_spec *s = &p->specs[i];
        char cand[4][128];
        const int nc = candidates(s->name, cand);
        const ab_st_tensor *t = NULL;
        for (int k = 0; k < nc && !t; k++) t = ab_st_find(&st, cand[k]);
        if (!t) {
            /* the head (pooler, classifier) may be missing from an encoder checkpoint: it keeps
             * BERT's initialisation, as from_pretrained leaves it */
            const int head = strncmp(s->name, "classifier.", 11) == 0 || strncmp(s->name, "bert.pooler.", 12) == 0;
            if (!head) {
                rc = ab_errorf("%s: no tensor '%s' (nor '%s'): not a checkpoint of this BERT", path, s->name,
                               nc > 1 ? cand[1] : s->name);
                break;
            }
            if (fresh < 4) {
                const size_t len = strlen(fresh_names);
                snprintf(fresh_names + len, sizeof fresh_names - len, "%s%s", len ? ", " : "", s->name);
            }
            fresh++;
            continue;
        }
        used[t - st.t] = 1;
        if ((rc = check_tensor(path, t, s)) != 0) break;
        types |= 1 << t->dtype;
        rc = ab_st_to_f32(t, host + s->offset);
        loaded++;
    }
    for (int i = 0; rc == 0 && i < st.n; i++)
        if (!used[i] && !ignorable(st.t[i].name))
            rc = ab_errorf("%s: unexpected tensor '%s' (not a tensor of this BERT)", path, st.t[i].name);
    if (rc == 0) rc = be->ops->upload(be, p->master, host, p->n * sizeof(float));
    if (rc == 0) describe_load(from, cap, path, loaded, types, fresh, fresh_names);
    free(host);
    free(used);
    ab_st_close(&st);
    (void)m;
    return rc;
}

/* BertForSequenceClassification's state_dict names and layout, fp32 */
static int bert_save(const ab_model *m, const ab_params *p, const char *path) {
    (void)m;
    float *host = malloc((p->n + 1) * sizeof(float));
    ab_st_entry *e = calloc((size_t)p->n_specs, sizeof *e);
    int rc = (!host || !e) ? ab_errorf("%s: out of host memory", path) : 0;
    if (rc == 0) rc = p->be->ops->download(p->be, host, p->master, p->n * sizeof(float));
    for (int i = 0; rc == 0 && i < p->n_specs; i++) {
        const ab_param_spec *s = &p->specs[i];
        e[i] = (ab_st_entry){.name = s->name, .dtype = AB_ST_F32, .ndim = s->ndim, .data = host + s->offset};
        for (int d = 0; d < s->ndim; d++) e[i].shape[d] = s->shape[d];
    }
    if (rc == 0) rc = ab_st_write(path, e, p->n_specs);
    free(host);
    free(e);
    return rc;
}

static int bert_load_weights(ab_model *m, ab_params *p, const char *path, char *from, size_t cap) {
    return bert_load(m, p, path, from, cap);
}

static void bert_destroy(ab_model *m) {
    bert *b = m->impl;
    if (m->arena.be) ab_arena_free(&m->arena);
    if (b) {
        free(b->specs);
        free(b->names);
        free(b->layer);
        free(b->cls_rows);
        free(b->unit_macs);
        free(b);
    }
    free(m);
}

static const ab_model_ops bert_ops = {.name = "bert",
                                      .forward = bert_forward,
                                      .backward = bert_backward,
                                      .bind = bert_bind,
                                      .destroy = bert_destroy,
                                      .load_weights = bert_load_weights,
                                      .save_weights = bert_save};

const ab_model_option ab_bert_options[] = {
    {"dropout", "P", "hidden and attention dropout", "the architecture's: 0.1", AB_MODEL_OPT_FRACTION,
     offsetof(ab_train_config, dropout), 0, 0},
    {0},
};

int ab_bert_create(const ab_model_config *cfg, const ab_bert_config *arch, ab_model **out) {
    *out = NULL;
    const ab_sample_info *si = &cfg->sample;
    if (si->kind != AB_SAMPLE_TOKENS || si->seq_len < 1 || si->n_classes < 2 || cfg->max_batch < 1)
        return ab_errorf("bert: needs token sequences and at least 2 classes");
    if (si->seq_len > arch->max_positions)
        return ab_errorf("bert: --max-seq-len %d is longer than the %d positions of %s", si->seq_len, arch->max_positions,
                         arch->source);
    if (si->vocab > arch->vocab)
        return ab_errorf("bert: the tokenizer's vocabulary has %d ids, the model's embeddings %d (%s)", si->vocab,
                         arch->vocab, arch->source);
    ab_model *m = calloc(1, sizeof *m);
    bert *b = calloc(1, sizeof *b);
    const int cap = 5 + arch->layers * L_SPECS + 4;
    if (b) {
        b->specs = calloc((size_t)cap, sizeof *b->specs);
        b->names = calloc((size_t)cap, sizeof *b->names);
        b->layer = calloc((size_t)arch->layers, sizeof *b->layer);
    }
    if (!m || !b || !b->specs || !b->names || !b->layer) {
        if (b) free(b->specs), free(b->names), free(b->layer);
        free(b);
        free(m);
        return ab_errorf("out of host memory creating BERT");
    }
    b->cfg = *arch;
    b->L = si->seq_len;
    b->n_labels = si->n_classes;
    b->hdrop = cfg->dropout >= 0.0f ? cfg->dropout : arch->hidden_dropout;
    b->adrop = cfg->dropout >= 0.0f ? cfg->dropout : arch->attention_dropout;
    build(b);
    const int U = arch->layers + 2;
    if (!(b->unit_macs = calloc((size_t)U, sizeof *b->unit_macs))) {
        free(b->specs), free(b->names), free(b->layer), free(b), free(m);
        return ab_errorf("out of host memory creating BERT");
    }
    const ab_stage st = ab_stage_resolve(cfg->stage, U);
    const ab_stage_span sp = ab_stage_span_of(st, arch->layers);
    b->has_emb = sp.first, b->has_head = sp.last, b->l0 = sp.lo, b->l1 = sp.hi;
    for (int i = 0; i < b->n_specs; i++) /* the units: the embeddings' five tensors, each layer's sixteen, the head's four */
        b->specs[i].unit = i < 5 ? 0 : i < 5 + arch->layers * L_SPECS ? 1 + (i - 5) / L_SPECS : U - 1;
    ab_specs_mark_stage(b->specs, b->n_specs, st);
    b->tp = cfg->tp;
    b->T = 1, b->heads_local = arch->heads, b->H_local = arch->hidden, b->F_local = arch->ffn;
    if (ab_tp_size(b->tp) > 1 && split_layers(b) != 0) {
        free(b->specs), free(b->names), free(b->layer), free(b->unit_macs), free(b), free(m);
        return -1;
    }
    const double L = si->seq_len, H = arch->hidden, F = arch->ffn;
    /* per sequence: 4 H x H projections and 2 H x F per position, 2 L x L x H attention products,
     * the pooler and the classifier once */
    const double macs = arch->layers * (L * (4 * H * H + 2 * H * F) + 2 * L * L * H) + H * H + H * si->n_classes;
    /* the units' costs: the embeddings' lookups and layer norm (a nominal L H), the layers', the head's */
    b->unit_macs[0] = L * H;
    for (int l = 0; l < arch->layers; l++) b->unit_macs[1 + l] = L * (4 * H * H + 2 * H * F) + 2 * L * L * H;
    b->unit_macs[U - 1] = H * H + H * si->n_classes;
    *m = (ab_model){.ops = &bert_ops, .specs = b->specs, .n_specs = b->n_specs, .n_classes = si->n_classes,
                    .max_batch = cfg->max_batch, .macs_per_sample = macs, .impl = b, .tensor_parallel = b->T,
                    .tp_elems_per_sample = 4.0 * (b->l1 - b->l0) * L * H, .units = U, .unit_macs = b->unit_macs,
                    .stage = st, .stage_in_elems = b->has_emb ? 0 : (size_t)(L * H),
                    .stage_out_elems = b->has_head ? 0 : (size_t)(L * H),
                    .notes = "BERT: dropout masks from the seed, step, layer and site (the same on every backend); "
                             "data parallelism all-reduces the gradients, so every rank's dropout differs from a "
                             "single process's for the same samples"};
    *out = m;
    return 0;
}
