/* model_grads: one training forward and backward of a registry model on a given batch, for the
 * comparison with PyTorch (peers/checks/torch_check.py). Reads the weights (safetensors in PyTorch's
 * names, as torchvision's state_dict) and a batch (x: (N, C, H, W) F32, y: (N) I64), runs in fp32
 * on the CPU backend with batch statistics, and writes a safetensors file with
 *   loss (F32 scalar: mean cross-entropy), logits (N, classes),
 *   grad.<name> for every trained tensor (PyTorch's shape), <name> for every running statistic
 *   after the forward (momentum 0.1, as PyTorch updates them);
 * and, with --save FILE, the weights it loaded written back by the checkpoint writer.
 * usage: model_grads MODEL WEIGHTS BATCH OUT [--save FILE] */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend_cpu.h"
#include "checkpoint.h"
#include "workloads.h"
#include "safetensors.h"

static int fail(const char *what) {
    fprintf(stderr, "model_grads: %s: %s\n", what, ab_error());
    return 1;
}

int main(int argc, char **argv) {
    if (argc != 5 && !(argc == 7 && strcmp(argv[5], "--save") == 0)) {
        fprintf(stderr, "usage: model_grads MODEL WEIGHTS BATCH OUT [--save FILE]\n");
        return 2;
    }
    ab_safetensors in;
    if (ab_st_open(argv[3], &in) != 0) return fail("batch");
    const ab_st_tensor *xt = ab_st_find(&in, "x"), *yt = ab_st_find(&in, "y");
    if (!xt || !yt || xt->dtype != AB_ST_F32 || xt->ndim != 4 || yt->dtype != AB_ST_I64 || yt->ndim != 1 ||
        yt->shape[0] != xt->shape[0]) {
        fprintf(stderr, "model_grads: %s: needs x (N, C, H, W) F32 and y (N) I64\n", argv[3]);
        return 1;
    }
    const int N = (int)xt->shape[0], C = (int)xt->shape[1], H = (int)xt->shape[2], W = (int)xt->shape[3];
    ab_train_config cfg;
    ab_train_config_defaults(&cfg);
    cfg.model = argv[1];
    cfg.batch_size = N;
    ab_sample_info si = {.kind = AB_SAMPLE_IMAGE, .C = C, .H = H, .W = W, .n_classes = 10};
    ab_backend *be = ab_backend_cpu_create(0);
    if (!be) {
        fprintf(stderr, "model_grads: %s\n", ab_error());
        return 1;
    }
    ab_model *m = NULL;
    if (ab_workloads.create_model(&cfg, &si, NULL, &m) != 0) return fail("model");
    ab_rng rng;
    ab_rng_seed(&rng, 1);
    ab_params p;
    if (ab_params_init(&p, be, AB_PREC_FP32, m->specs, m->n_specs, &rng) != 0 || ab_model_bind(m, &p) != 0)
        return fail("parameters");
    char from[512];
    if (ab_checkpoint_load(argv[2], m, &p, NULL, from, sizeof from) != 0) return fail("weights");
    if (argc == 7 && ab_checkpoint_save(argv[6], m, &p) != 0) return fail("save");
    /* the batch channels-last, labels int32 */
    float *xs = malloc(xt->numel * sizeof *xs), *x = malloc(xt->numel * sizeof *x);
    int32_t *y = malloc((size_t)N * sizeof *y);
    ab_st_to_f32(xt, xs);
    for (int n = 0; n < N; n++)
        for (int c = 0; c < C; c++)
            for (int h = 0; h < H; h++)
                for (int w = 0; w < W; w++)
                    x[(((size_t)n * H + h) * W + w) * C + c] = xs[(((size_t)n * C + c) * H + h) * W + w];
    for (int n = 0; n < N; n++) {
        int64_t v;
        memcpy(&v, yt->data + 8 * (size_t)n, 8);
        if (v < 0 || v > 9) {
            fprintf(stderr, "model_grads: label %lld outside 0-9\n", (long long)v);
            return 1;
        }
        y[n] = (int32_t)v;
    }
    float stats[4] = {0};
    const ab_pass pass = ab_pass_train(0, 1);
    if (m->ops->forward(m, &p, x, N, &pass) != 0) return fail("forward");
    float *logits = malloc((size_t)N * 10 * sizeof *logits);
    memcpy(logits, m->logits, (size_t)N * 10 * sizeof *logits);
    if (be->ops->softmax_xent(be, N, 10, AB_F32, m->logits, y, 1.0f, AB_F32, m->logits, stats, NULL) != 0)
        return fail("loss");
    const ab_grad_sink sink = {.mode = AB_GRAD_WRITE};
    if (m->ops->backward(m, &p, &sink, x, m->logits, N) != 0) return fail("backward");
    const float loss = stats[0] / (float)N;
    /* grads (and running statistics) in PyTorch's layout through the checkpoint writer's shapes */
    ab_st_entry *e = calloc((size_t)p.n_specs + 2, sizeof *e);
    char (*names)[160] = calloc((size_t)p.n_specs, sizeof *names);
    float *torch = malloc((p.n + p.n_bufs) * sizeof *torch);
    int k = 0;
    e[k++] = (ab_st_entry){.name = "loss", .dtype = AB_ST_F32, .ndim = 0, .data = &loss};
    e[k++] = (ab_st_entry){.name = "logits", .dtype = AB_ST_F32, .ndim = 2, .shape = {N, 10}, .data = logits};
    for (int i = 0; i < p.n_specs; i++) {
        const ab_param_spec *s = &p.specs[i];
        const int buf = s->region == AB_REGION_BUFFER;
        const float *src = (buf ? p.bufs : p.grad) + s->offset;
        float *dst = torch + (buf ? p.n : 0) + s->offset;
        long long shape[4];
        const int nd = ab_checkpoint_torch_shape(s, shape);
        if (s->layout == AB_LAYOUT_OHWI) {
            const int K = s->shape[0], R = s->shape[1], S = s->shape[2], Cc = s->shape[3];
            for (int a = 0; a < K; a++)
                for (int c = 0; c < Cc; c++)
                    for (int r = 0; r < R; r++)
                        for (int t = 0; t < S; t++)
                            dst[(((size_t)a * Cc + c) * R + r) * S + t] = src[(((size_t)a * R + r) * S + t) * Cc + c];
        } else {
            memcpy(dst, src, s->numel * sizeof *dst);
        }
        snprintf(names[i], sizeof names[i], "%s%s", buf ? "" : "grad.", s->name);
        e[k] = (ab_st_entry){.name = names[i], .dtype = AB_ST_F32, .ndim = nd, .data = dst};
        for (int d = 0; d < nd; d++) e[k].shape[d] = shape[d];
        k++;
    }
    if (ab_st_write(argv[4], e, k) != 0) return fail("output");
    printf("model_grads: %s, %d images %dx%dx%d, loss %.6f; %s\n", argv[1], N, C, H, W, loss, from);
    free(xs), free(x), free(y), free(logits), free(e), free(names), free(torch);
    ab_st_close(&in);
    ab_model_destroy(m);
    ab_params_free(&p);
    be->ops->destroy(be);
    return 0;
}
