/* bert_grads: one training forward and backward of `--model bert` on a given batch, for the
 * comparison with Hugging Face's BertForSequenceClassification (peers/checks/bert_check.py). Reads a
 * checkpoint folder (config.json, model.safetensors in BertForSequenceClassification's names)
 * and a batch (ids, types, mask: (N, L) I64; y: (N) I64), runs fp32 on the CPU backend without
 * dropout, and writes a safetensors file with loss (mean cross-entropy), logits (N, classes) and
 * grad.<name> for every trained tensor.
 * usage: bert_grads CHECKPOINT_DIR CLASSES BATCH OUT */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend_cpu.h"
#include "workloads.h"
#include "safetensors.h"

static int fail(const char *what) {
    fprintf(stderr, "bert_grads: %s: %s\n", what, ab_error());
    return 1;
}

static int32_t *ints(const ab_st_tensor *t) {
    int32_t *v = malloc(t->numel * sizeof *v + 1);
    for (size_t i = 0; i < t->numel; i++) {
        int64_t x;
        memcpy(&x, t->data + 8 * i, 8);
        v[i] = (int32_t)x;
    }
    return v;
}

int main(int argc, char **argv) {
    if (argc != 5) {
        fprintf(stderr, "usage: bert_grads CHECKPOINT_DIR CLASSES BATCH OUT\n");
        return 2;
    }
    ab_safetensors in;
    if (ab_st_open(argv[3], &in) != 0) return fail("batch");
    const ab_st_tensor *ti = ab_st_find(&in, "ids"), *tt = ab_st_find(&in, "types"), *tm = ab_st_find(&in, "mask"),
                       *ty = ab_st_find(&in, "y");
    if (!ti || !tt || !tm || !ty || ti->dtype != AB_ST_I64 || ti->ndim != 2 || ty->dtype != AB_ST_I64) {
        fprintf(stderr, "bert_grads: %s: needs ids, types, mask (N, L) and y (N), I64\n", argv[3]);
        return 1;
    }
    const int N = (int)ti->shape[0], L = (int)ti->shape[1], classes = atoi(argv[2]);
    ab_bert_config arch;
    if (ab_bert_config_read(argv[1], &arch) != 0) return fail("config");
    ab_model_config mc = {.name = "bert", .max_batch = N, .arch = argv[1], .dropout = 0.0f,
                          .sample = {.kind = AB_SAMPLE_TOKENS, .seq_len = L, .vocab = arch.vocab, .n_classes = classes}};
    ab_backend *be = ab_backend_cpu_create(0);
    if (!be) {
        fprintf(stderr, "bert_grads: %s\n", ab_error());
        return 1;
    }
    ab_model *m = NULL;
    if (ab_bert_create(&mc, &arch, &m) != 0) return fail("model");
    ab_rng rng;
    ab_rng_seed(&rng, 1);
    ab_params p;
    if (ab_params_init(&p, be, AB_PREC_FP32, m->specs, m->n_specs, &rng) != 0 || ab_model_bind(m, &p) != 0)
        return fail("parameters");
    char from[512];
    if (m->ops->load_weights(m, &p, argv[1], from, sizeof from) != 0) return fail("weights");
    /* the batch as the text data set lays it out: ids, types, mask, one after the other */
    int32_t *x = malloc((size_t)3 * N * L * sizeof *x), *ids = ints(ti), *types = ints(tt), *mask = ints(tm),
            *y = ints(ty);
    memcpy(x, ids, (size_t)N * L * sizeof *x);
    memcpy(x + (size_t)N * L, types, (size_t)N * L * sizeof *x);
    memcpy(x + 2 * (size_t)N * L, mask, (size_t)N * L * sizeof *x);
    const ab_pass pass = ab_pass_train(0, 1);
    if (m->ops->forward(m, &p, x, N, &pass) != 0) return fail("forward");
    float *logits = malloc((size_t)N * classes * sizeof *logits), stats[4] = {0};
    memcpy(logits, m->logits, (size_t)N * classes * sizeof *logits);
    if (be->ops->softmax_xent(be, N, classes, AB_F32, m->logits, y, 1.0f, AB_F32, m->logits, stats, NULL) != 0)
        return fail("loss");
    const ab_grad_sink sink = {.mode = AB_GRAD_WRITE};
    if (m->ops->backward(m, &p, &sink, x, m->logits, N) != 0) return fail("backward");
    const float loss = stats[0] / (float)N;
    ab_st_entry *e = calloc((size_t)p.n_specs + 2, sizeof *e);
    char (*names)[160] = calloc((size_t)p.n_specs, sizeof *names);
    int k = 0;
    e[k++] = (ab_st_entry){.name = "loss", .dtype = AB_ST_F32, .ndim = 0, .data = &loss};
    e[k++] = (ab_st_entry){.name = "logits", .dtype = AB_ST_F32, .ndim = 2, .shape = {N, classes}, .data = logits};
    for (int i = 0; i < p.n_specs; i++) {
        const ab_param_spec *s = &p.specs[i];
        snprintf(names[i], sizeof names[i], "grad.%s", s->name);
        e[k] = (ab_st_entry){.name = names[i], .dtype = AB_ST_F32, .ndim = s->ndim, .data = p.grad + s->offset};
        for (int d = 0; d < s->ndim; d++) e[k].shape[d] = s->shape[d];
        k++;
    }
    if (ab_st_write(argv[4], e, k) != 0) return fail("output");
    printf("bert_grads: %d sequences of %d, %d classes, loss %.6f; %s\n", N, L, classes, loss, from);
    free(x), free(ids), free(types), free(mask), free(y), free(logits), free(e), free(names);
    ab_st_close(&in);
    ab_model_destroy(m);
    ab_params_free(&p);
    be->ops->destroy(be);
    return 0;
}
