/* ampbench model-step: the modelled time of one training step of a workload on a named GPU
 * (core/stepmodel.h), for any input size and batch, in every precision the GPU has. The step is
 * the training core's, in the run's course: the batch assembled, forward, the loss, backward, then
 * under amp the finite check (the unscaling too when clipping reads the unscaled gradients, else it
 * rides in the optimizer's pass, and the check reads only what the gradient folds did not check),
 * the gradient norm (clipping), the step's scalars read back, the
 * optimizer (the clip factor inside its pass, and under amp and bf16 the compute copy written in
 * it); each op counted by the counting backend (kernels/cost) and timed by the model. */
#include "model_step.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend_cost.h"
#include "stepmodel.h"
#include "workloads.h"

typedef struct {
    const char *model, *arch, *gpu, *breakdown;
    int C, H, W, seq_len, classes, batch, hidden, have_input;
    int width, blocks[4], accum; /* ResNet's stage width and blocks (0: the model's); micro-batches a step */
    float dropout;               /* BERT (< 0: the architecture's) */
    ab_optimizer_kind optimizer;
    int have_optimizer;
    float clip;
    int have_clip;
} ms_args;

/* the model's sample: images (C x H x W), or token sequences of seq_len from the architecture's
 * vocabulary; the classes of the model's default data set unless given */
static int sample_of(const ms_args *a, ab_sample_info *s) {
    memset(s, 0, sizeof *s);
    if (strncmp(a->model, "bert", 4) == 0) {
        ab_bert_config arch;
        if (a->arch) AB_TRY(ab_bert_config_read(a->arch, &arch));
        else AB_TRY(ab_bert_config_builtin(a->model, &arch));
        if (a->have_input) return ab_errorf("model-step: --input is for image models; BERT takes --max-seq-len");
        *s = (ab_sample_info){.kind = AB_SAMPLE_TOKENS, .seq_len = a->seq_len > 0 ? a->seq_len : 128,
                              .vocab = arch.vocab, .n_classes = a->classes > 0 ? a->classes : 2};
        return 0;
    }
    if (a->seq_len > 0) return ab_errorf("model-step: --max-seq-len is for BERT; image models take --input CxHxW");
    if (strcmp(a->model, "mlp") == 0)
        *s = (ab_sample_info){.kind = AB_SAMPLE_IMAGE, .C = 1, .H = 28, .W = 28, .n_classes = 10};
    else
        *s = (ab_sample_info){.kind = AB_SAMPLE_IMAGE, .C = 3, .H = 32, .W = 32, .n_classes = 10};
    if (a->have_input) s->C = a->C, s->H = a->H, s->W = a->W;
    if (a->classes > 0) s->n_classes = a->classes;
    return 0;
}

typedef struct {
    ab_backend *be;
    ab_model *model;
    ab_params params;
    ab_optimizer opt;
    void *x, *labels, *stats;
    size_t x_bytes, labels_bytes;
    ab_sample_info s;
    unsigned char *checked; /* as the trainer's: the tensors the folding ops checked */
} ms_run;

static void run_free(ms_run *r) {
    if (!r->be) return;
    ab_release(r->be, AB_MEM_ACTIVATIONS, r->x, r->x_bytes);
    ab_release(r->be, AB_MEM_ACTIVATIONS, r->labels, r->labels_bytes);
    ab_release(r->be, AB_MEM_WORKSPACE, r->stats, 64);
    free(r->checked);
    r->checked = NULL;
    ab_model_destroy(r->model);
    ab_optimizer_free(&r->opt);
    ab_params_free(&r->params);
    r->be->ops->destroy(r->be);
    r->be = NULL;
}

/* one micro-batch: assembled, forward, loss, backward. A step in the run's course: the compute copy
 * is the one the last update wrote in its pass (core/train.c), no refresh of its own */
static int micro_batch(const ms_args *a, ms_run *r, int micro, const int32_t *idx) {
    ab_backend *b = r->be;
    const ab_dtype cdt = r->params.compute_type;
    const int B = a->batch, L = r->s.seq_len;
    ab_cost_phase(b, "data");
    if (r->s.kind == AB_SAMPLE_TOKENS) {
        for (int k = 0; k < 3; k++) AB_TRY(b->ops->gather_rows(b, B, (size_t)L * sizeof(int32_t), r->x, idx, r->x));
        AB_TRY(b->ops->gather_rows(b, B, sizeof(int32_t), r->labels, idx, r->labels));
    } else if (strcmp(a->model, "mlp") == 0) {
        AB_TRY(b->ops->gather_normalize(b, B, r->s.C * r->s.H * r->s.W, r->x, r->labels, idx, 0.0f, 1.0f, cdt, r->x,
                                        r->labels));
    } else {
        const ab_image_layout lay = {.C = r->s.C, .H = r->s.H, .W = r->s.W, .planar = 1};
        AB_TRY(b->ops->gather_images(b, B, &lay, NULL, r->x, r->labels, idx, cdt, r->x, r->labels));
    }
    ab_cost_phase(b, "forward");
    if (micro == 0) AB_TRY(b->ops->zero(b, r->stats, 64));
    const ab_pass pass = ab_pass_train(micro, 1);
    AB_TRY(r->model->ops->forward(r->model, &r->params, r->x, B, &pass));
    ab_cost_phase(b, "loss");
    AB_TRY(b->ops->softmax_xent(b, B * ab_model_targets(r->model), r->model->n_classes, cdt, r->model->logits,
                                r->labels, 1.0f, cdt, r->model->logits, r->stats, NULL));
    ab_cost_phase(b, "backward");
    /* as the trainer's: under loss scaling the folding ops check what they store */
    const ab_grad_sink sink = {.mode = micro == 0 ? AB_GRAD_WRITE : AB_GRAD_ACCUMULATE,
                               .found_inf = r->params.prec == AB_PREC_AMP ? (int32_t *)r->stats : NULL,
                               .checked = r->checked};
    return r->model->ops->backward(r->model, &r->params, &sink, r->x, r->model->logits, B);
}

/* one training step of the model at precision prec, for samples s, on the counting backend:
 * r->be holds its ops */
static int run_step(const ms_args *a, const ab_sample_info *s, const ab_recipe *rec, ab_precision prec, ms_run *r) {
    memset(r, 0, sizeof *r);
    r->s = *s;
    if (!(r->be = ab_backend_cost_create())) return -1;
    ab_train_config c;
    ab_train_config_defaults(&c);
    c.model = a->model, c.init_from = a->arch, c.batch_size = a->batch, c.hidden = a->hidden > 0 ? a->hidden : c.hidden;
    c.width = a->width, c.dropout = a->dropout;
    memcpy(c.blocks, a->blocks, sizeof c.blocks);
    AB_TRY(ab_workloads.create_model(&c, &r->s, NULL, &r->model));
    /* no weight values: the counting backend never reads them (BERT-base: 440 MB and seconds saved) */
    AB_TRY(ab_params_init(&r->params, r->be, prec, r->model->specs, r->model->n_specs, NULL));
    AB_TRY(ab_model_bind(r->model, &r->params));
    const ab_optimizer_kind ok = a->have_optimizer ? a->optimizer : rec->optimizer;
    AB_TRY(ab_optimizer_init(&r->opt, r->be, ok, r->params.n, rec->lr, rec->momentum, rec->weight_decay));
    if (rec->wd_exclude) AB_TRY(ab_optimizer_exclude(&r->opt, r->params.specs, r->params.n_specs));
    const ab_dtype cdt = r->params.compute_type;
    if (cdt != AB_F32) AB_TRY(ab_optimizer_set_copy(&r->opt, cdt, r->params.compute_weights, r->params.n_compute));
    const int B = a->batch, L = r->s.seq_len;
    r->x_bytes = r->s.kind == AB_SAMPLE_TOKENS ? (size_t)3 * B * L * sizeof(int32_t)
                                               : (size_t)B * r->s.C * r->s.H * r->s.W * ab_dtype_size(cdt);
    r->x = ab_alloc(r->be, AB_MEM_ACTIVATIONS, r->x_bytes);
    r->labels_bytes = (size_t)B * (size_t)ab_model_targets(r->model) * sizeof(int32_t); /* (B, targets) */
    r->labels = ab_alloc(r->be, AB_MEM_ACTIVATIONS, r->labels_bytes);
    r->stats = ab_alloc(r->be, AB_MEM_WORKSPACE, 64);
    if (!r->x || !r->labels || !r->stats) return -1;
    r->checked = calloc((size_t)r->params.n_specs + 1, 1);
    if (!r->checked) return ab_errorf("out of host memory");
    ab_cost_clear(r->be); /* set-up is not the step */
    ab_backend *b = r->be;
    int32_t *idx = calloc((size_t)B, sizeof *idx);
    if (!idx) return ab_errorf("out of host memory");
    int rc = 0;
    for (int micro = 0; micro < (a->accum > 1 ? a->accum : 1) && rc == 0; micro++)
        rc = micro_batch(a, r, micro, idx);
    free(idx);
    AB_TRY(rc);
    ab_cost_phase(b, "update");
    const float clip = a->have_clip ? a->clip : rec->clip_grad_norm;
    /* as the trainer of one GPU: unscaled in place when clipping reads them, the norm's squares in
     * the same pass, else the check alone (the optimizer's pass unscales) of what the folding ops
     * did not check */
    if (prec == AB_PREC_AMP && clip > 0.0f)
        AB_TRY(b->ops->unscale_check(b, r->params.n, r->params.grad, 0x1p-16f, r->stats, (float *)r->stats + 1));
    if (prec == AB_PREC_AMP && !(clip > 0.0f)) AB_TRY(ab_grad_check_unchecked(&r->params, r->checked, r->stats));
    if (prec != AB_PREC_AMP && clip > 0.0f)
        AB_TRY(b->ops->sum_squares(b, r->params.n, r->params.grad, (float *)r->stats + 1));
    char scalars[64];
    AB_TRY(b->ops->download(b, scalars, r->stats, sizeof scalars));
    if (clip > 0.0f) r->opt.grad_scale = 1.0f; /* as if it clipped: the factor rides in the optimizer's pass */
    return ab_optimizer_step(&r->opt, r->params.master, r->params.grad);
}

typedef struct {
    const char *name;
    ab_precision prec;
    ab_fp32_math math;
} ms_mode;
static const ms_mode modes[] = {{"fp32", AB_PREC_FP32, AB_FP32_MATH_IEEE},
                                {"tf32", AB_PREC_FP32, AB_FP32_MATH_TF32},
                                {"amp", AB_PREC_AMP, AB_FP32_MATH_IEEE},
                                {"bf16", AB_PREC_BF16, AB_FP32_MATH_IEEE}};
enum { N_MODES = 4 };

/* per (phase, op) of one precision: count, FLOPs, bytes, modelled time and what bounds it */
static int print_breakdown(const ab_op_cost *ops, size_t n, const ab_gpu_spec *g, ab_fp32_math m) {
    typedef struct {
        const char *phase, *op;
        long count, kernels;
        double flops, bytes, time, math;
    } row;
    row *rows = calloc(n ? n : 1, sizeof *rows);
    if (!rows) return ab_errorf("out of host memory");
    size_t nr = 0;
    double total = 0.0;
    for (size_t i = 0; i < n; i++) {
        ab_op_time t;
        if (ab_op_model(&ops[i], g, m, &ab_step_eff_default, &t) != 0) {
            free(rows);
            return -1;
        }
        size_t k = 0;
        while (k < nr && !(strcmp(rows[k].phase, ops[i].phase) == 0 && strcmp(rows[k].op, ops[i].op) == 0)) k++;
        if (k == nr) rows[nr++] = (row){.phase = ops[i].phase, .op = ops[i].op};
        rows[k].count++;
        rows[k].kernels += ops[i].kernels;
        rows[k].flops += ops[i].flops;
        rows[k].bytes += ops[i].bytes;
        rows[k].time += t.time_s;
        rows[k].math += t.math_bound ? t.time_s - t.gap_s : 0.0;
        total += t.time_s;
    }
    printf("  %-9s %-24s %6s %8s %9s %9s %9s %6s\n", "phase", "op", "calls", "kernels", "GFLOP", "GB moved", "ms",
           "share");
    for (size_t k = 0; k < nr; k++)
        printf("  %-9s %-24s %6ld %8ld %9.2f %9.3f %9.3f %5.1f%%%s\n", rows[k].phase, rows[k].op, rows[k].count,
               rows[k].kernels, rows[k].flops / 1e9, rows[k].bytes / 1e9, 1e3 * rows[k].time,
               total > 0 ? 100.0 * rows[k].time / total : 0.0,
               rows[k].math > 0.5 * rows[k].time ? "  math-bound" : "");
    free(rows);
    return 0;
}

static int model_one_gpu(const ms_args *a, const ab_recipe *rec, const ab_gpu_spec *g) {
    printf("%s (%s): %.1f FP32 / %.1f TF32 / %.1f FP16 / %.1f BF16 TFLOPS dense, %.0f GB/s, %d SMs, %.0f GB\n",
           g->label, g->source, g->fp32, g->tf32, g->fp16, g->bf16, g->mem_gbs, g->sms, g->mem_gib);
    printf("  %-5s %10s %11s %8s %10s %10s %8s %8s %9s %9s %12s\n", "prec", "step ms", "samples/s", "vs fp32",
           "math ms", "memory ms", "gaps ms", "kernels", "TFLOP", "GB moved", "peak memory");
    double t_fp32 = 0.0;
    ab_sample_info s;
    AB_TRY(sample_of(a, &s));
    for (int i = 0; i < N_MODES; i++) {
        ms_run r;
        if (run_step(a, &s, rec, modes[i].prec, &r) != 0) {
            run_free(&r);
            return -1;
        }
        size_t n;
        const ab_op_cost *ops = ab_cost_ops(r.be, &n);
        ab_step_estimate e;
        if (ab_step_model(ops, n, g, modes[i].math, &ab_step_eff_default, &e) != 0) {
            printf("  %-5s %s\n", modes[i].name, ab_error());
            ab_error_clear();
            run_free(&r);
            continue;
        }
        if (i == 0) t_fp32 = e.time_s;
        char vs[32] = "";
        if (t_fp32 > 0) snprintf(vs, sizeof vs, "%.2fx", t_fp32 / e.time_s);
        const double peak = (double)r.be->mem.peak_total / (1024.0 * 1024.0);
        const int over = (double)r.be->mem.peak_total > g->mem_gib * 1073741824.0;
        printf("  %-5s %10.3f %11.1f %8s %10.3f %10.3f %8.3f %8ld %9.3f %9.2f %8.0f MiB%s\n", modes[i].name,
               1e3 * e.time_s, a->batch / e.time_s, vs, 1e3 * e.math_bound_s, 1e3 * e.memory_bound_s, 1e3 * e.gap_s,
               e.kernels, e.flops / 1e12, e.bytes / 1e9, peak, over ? " (does not fit)" : "");
        if (a->breakdown && strcmp(a->breakdown, modes[i].name) == 0 && print_breakdown(ops, n, g, modes[i].math) != 0) {
            run_free(&r);
            return -1;
        }
        run_free(&r);
    }
    return 0;
}

static int need(int i, int argc, char **argv) {
    if (i + 1 >= argc) return ab_errorf("model-step: %s needs a value", argv[i]);
    return 0;
}
static int parse_int(const char *flag, const char *v, int lo, int *out) {
    char *end;
    const long x = strtol(v, &end, 10);
    if (*v == 0 || *end != 0 || x < lo || x > 1 << 28) return ab_errorf("model-step: %s '%s' is not a whole number >= %d", flag, v, lo);
    *out = (int)x;
    return 0;
}

static void usage(void) {
    printf("usage: ampbench model-step --model NAME [--input CxHxW | --max-seq-len S] [--classes N]\n"
           "                           [--batch-size B] [--gpu NAME|all] [--optimizer sgd|adamw]\n"
           "                           [--clip-grad-norm X] [--hidden H] [--init-from DIR] [--breakdown PREC]\n"
           "The modelled time of one training step of ampbench's op sequence on a named GPU, in fp32 (IEEE, as\n"
           "ampbench trains), tf32 (fp32 with TF32 tensor-core products: NVIDIA's 'TF32' figures), amp and bf16:\n"
           "each op at the longer of its FLOPs at the GPU's peak for its precision and its bytes at the memory\n"
           "bandwidth, derated by one efficiency table, plus a gap per kernel (docs/step-model.md). No host\n"
           "overhead, data loading or communication. Peak memory: the tracked allocator's, library workspaces\n"
           "apart.\n"
           "  --model NAME       %s\n"
           "  --input CxHxW      image models: the input [mlp 1x28x28, resnet* 3x32x32 (CIFAR-10)]\n"
           "  --max-seq-len S    BERT: sequence length [128]\n"
           "  --classes N        output classes [the model's default data set's: 10, BERT 2]\n"
           "  --batch-size B     [the model's recipe's]\n"
           "  --gpu NAME         %s, or all [rtx3090: the articles' GPU]\n"
           "  --optimizer O      [the recipe's]; --clip-grad-norm X [the recipe's; clipping assumed to happen]\n"
           "  --breakdown PREC   the op table of one precision (fp32, tf32, amp, bf16)\n",
           ab_workload_model_names(), ab_gpu_spec_names());
}

int ab_model_step_main(int argc, char **argv) {
    ms_args a = {.gpu = "rtx3090", .dropout = -1.0f, .accum = 1};
    int batch = 0;
    for (int i = 2; i < argc; i++) {
        const char *f = argv[i];
        if (strcmp(f, "--help") == 0 || strcmp(f, "-h") == 0) {
            usage();
            return 0;
        }
        static const char *const known[] = {"--model", "--gpu", "--init-from", "--breakdown", "--input", "--max-seq-len",
                                            "--classes", "--batch-size", "--hidden", "--optimizer", "--clip-grad-norm"};
        int is_known = 0;
        for (size_t k = 0; k < sizeof known / sizeof known[0]; k++) is_known |= strcmp(f, known[k]) == 0;
        if (!is_known) {
            ab_errorf("model-step: unknown option '%s' (ampbench model-step --help)", f);
            goto bad;
        }
        if (need(i, argc, argv) != 0) goto bad;
        const char *v = argv[++i];
        if (strcmp(f, "--model") == 0) a.model = v;
        else if (strcmp(f, "--gpu") == 0) a.gpu = v;
        else if (strcmp(f, "--init-from") == 0) a.arch = v;
        else if (strcmp(f, "--breakdown") == 0) a.breakdown = v;
        else if (strcmp(f, "--input") == 0) {
            int used = 0;
            if (sscanf(v, "%dx%dx%d%n", &a.C, &a.H, &a.W, &used) != 3 || v[used] != 0 || a.C < 1 || a.H < 1 ||
                a.W < 1 || a.C > 4) {
                ab_errorf("model-step: --input '%s' is not CxHxW (C of 1 to 4, e.g. 3x224x224)", v);
                goto bad;
            }
            a.have_input = 1;
        } else if (strcmp(f, "--max-seq-len") == 0) {
            if (parse_int(f, v, 1, &a.seq_len) != 0) goto bad;
        } else if (strcmp(f, "--classes") == 0) {
            if (parse_int(f, v, 2, &a.classes) != 0) goto bad;
        } else if (strcmp(f, "--batch-size") == 0) {
            if (parse_int(f, v, 1, &batch) != 0) goto bad;
        } else if (strcmp(f, "--hidden") == 0) {
            if (parse_int(f, v, 1, &a.hidden) != 0) goto bad;
        } else if (strcmp(f, "--optimizer") == 0) {
            if (ab_optimizer_parse(v, &a.optimizer) != 0) goto bad;
            a.have_optimizer = 1;
        } else if (strcmp(f, "--clip-grad-norm") == 0) {
            char *end;
            a.clip = strtof(v, &end);
            if (*v == 0 || *end != 0 || !(a.clip >= 0.0f)) {
                ab_errorf("model-step: --clip-grad-norm '%s' is not a number >= 0", v);
                goto bad;
            }
            a.have_clip = 1;
        } else {
            ab_errorf("model-step: unknown option '%s' (ampbench model-step --help)", f);
            goto bad;
        }
    }
    if (!a.model) {
        ab_errorf("model-step: --model NAME is required (%s)", ab_workload_model_names());
        goto bad;
    }
    const ab_recipe *rec = ab_workload_recipe(a.model);
    if (!rec) {
        ab_errorf("model-step: unknown model '%s' (%s)", a.model, ab_workload_model_names());
        goto bad;
    }
    if (a.breakdown && strcmp(a.breakdown, "fp32") && strcmp(a.breakdown, "tf32") && strcmp(a.breakdown, "amp") &&
        strcmp(a.breakdown, "bf16")) {
        ab_errorf("model-step: --breakdown '%s' is not fp32, tf32, amp or bf16", a.breakdown);
        goto bad;
    }
    a.batch = batch > 0 ? batch : rec->batch_size;
    const int all = strcmp(a.gpu, "all") == 0;
    if (!all && !ab_gpu_spec_find(a.gpu)) {
        ab_errorf("model-step: unknown GPU '%s' (%s, all)", a.gpu, ab_gpu_spec_names());
        goto bad;
    }
    ab_sample_info s;
    if (sample_of(&a, &s) != 0) goto bad;
    if (s.kind == AB_SAMPLE_TOKENS)
        printf("model-step: %s, sequences of %d tokens, %d classes, batch %d, %s; one training step, modelled\n",
               a.model, s.seq_len, s.n_classes, a.batch, ab_optimizer_name(a.have_optimizer ? a.optimizer : rec->optimizer));
    else
        printf("model-step: %s, %dx%dx%d inputs, %d classes, batch %d, %s; one training step, modelled\n", a.model, s.C,
               s.H, s.W, s.n_classes, a.batch, ab_optimizer_name(a.have_optimizer ? a.optimizer : rec->optimizer));
    const ab_step_eff *e = &ab_step_eff_default;
    printf("efficiency: tensor-core products %.2f, FP32 products %.2f, memory %.2f of peak; %.0f us a kernel, %.0f us "
           "a read-back (docs/step-model.md)\n",
           e->tensor, e->fp32, e->memory, e->gap_s * 1e6, e->sync_s * 1e6);
    for (int i = 0; ab_gpu_spec_at(i); i++) {
        const ab_gpu_spec *g = ab_gpu_spec_at(i);
        if (!all && strcmp(g->name, a.gpu) != 0) continue;
        if (model_one_gpu(&a, rec, g) != 0) goto bad;
    }
    return 0;
bad:
    fprintf(stderr, "ampbench: %s\n", ab_error());
    return 2;
}

int ab_model_step_estimate(const ab_train_config *c, const ab_sample_info *s, const char *gpu, ab_fp32_math m,
                           ab_step_model_result *out) {
    memset(out, 0, sizeof *out);
    const ab_gpu_spec *g = ab_gpu_spec_find(gpu);
    if (!g) return ab_errorf("no GPU '%s' in the step model's table (%s)", gpu, ab_gpu_spec_names());
    ms_args a = {.model = c->model, .arch = c->init_from, .batch = c->batch_size, .hidden = c->hidden,
                 .width = c->width, .dropout = c->dropout, .accum = c->accum_steps, .optimizer = c->optimizer,
                 .have_optimizer = 1, .clip = c->clip_grad_norm, .have_clip = 1};
    memcpy(a.blocks, c->blocks, sizeof a.blocks);
    const ab_recipe rec = {.optimizer = c->optimizer, .batch_size = c->batch_size, .lr = c->lr, .momentum = c->momentum,
                           .weight_decay = c->weight_decay, .clip_grad_norm = c->clip_grad_norm,
                           .wd_exclude = c->wd_exclude};
    ms_run r;
    int rc = run_step(&a, s, &rec, c->precision, &r);
    if (rc == 0) {
        size_t n;
        const ab_op_cost *ops = ab_cost_ops(r.be, &n);
        rc = ab_step_model(ops, n, g, m, &ab_step_eff_default, &out->est);
    }
    run_free(&r);
    if (rc != 0) return -1;
    out->valid = 1;
    snprintf(out->gpu, sizeof out->gpu, "%s", g->name);
    snprintf(out->gpu_label, sizeof out->gpu_label, "%s", g->label);
    out->eff = ab_step_eff_default;
    return 0;
}

int ab_model_step_hook(const ab_train_config *c, const ab_sample_info *s, const char *gpu, ab_step_model_result *out) {
    return ab_model_step_estimate(c, s, gpu, AB_FP32_MATH_IEEE, out);
}
