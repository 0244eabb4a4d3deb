/* The workload registry: model names -> constructors, data-set names -> readers, and the
 * weights files. Adding a workload is a line in each table. */
#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <sys/stat.h>

#include "checkpoint.h"
#include "cifar10.h"
#include "glue.h"
#include "text_dataset.h"
#include "wordpiece.h"
#include "idx.h"
#include "image_dataset.h"
#include "workloads.h"

/* ---- models ---- */

static int create_mlp(const ab_model_config *c, ab_model **out) { return ab_mlp_create(c, out); }
static int create_resnet50(const ab_model_config *c, ab_model **out) { return ab_resnet_create(c, 0, out); }
static int create_resnet50_cifar(const ab_model_config *c, ab_model **out) { return ab_resnet_create(c, 1, out); }
/* the reduced ResNet of the fast tests: the CIFAR stem, one block a stage, width 8 */
static int create_resnet_tiny(const ab_model_config *c, ab_model **out) {
    ab_model_config t = *c;
    for (int i = 0; i < 4; i++)
        if (t.blocks[i] <= 0) t.blocks[i] = 1;
    if (t.width <= 0) t.width = 8;
    return ab_resnet_create(&t, 1, out);
}

/* The recipes a model trains well with when the command line says nothing else:
 *   mlp     the article's MNIST MLP: SGD lr 0.01, batch 64, constant rate;
 *   resnet  the CIFAR-10 ResNet recipe of the articles and the usual reference code (kuangliu's
 *           pytorch-cifar, torchvision's reference scripts): SGD lr 0.1, momentum 0.9, weight decay
 *           5e-4 on every parameter, batch 128, cosine decay, with a short linear warm-up because
 *           ResNet-50's bottlenecks (batch-norm weights 1, no zero-initialised residual) can
 *           diverge at lr 0.1 from the first step. */
static const ab_recipe recipe_mlp = {.dataset = "mnist", .batch_size = 64, .optimizer = AB_OPT_SGD, .lr = 0.01f,
                                     .momentum = 0.0f, .weight_decay = 0.0f, .schedule = AB_LR_CONSTANT};
static const ab_recipe recipe_resnet = {.dataset = "cifar10", .batch_size = 128, .optimizer = AB_OPT_SGD, .lr = 0.1f,
                                        .momentum = 0.9f, .weight_decay = 5e-4f, .schedule = AB_LR_COSINE,
                                        .warmup_steps = 100};
/*   bert    GLUE fine-tuning as Hugging Face's run_glue and the BERT paper: AdamW lr 2e-5 (betas
 *           0.9/0.999, eps 1e-8), weight decay 0.01 except on biases and LayerNorm weights, linear
 *           decay to 0, gradient clipping at norm 1 (Trainer's max_grad_norm), batch 32, SST-2. */
static const ab_recipe recipe_bert = {.dataset = "sst2", .batch_size = 32, .optimizer = AB_OPT_ADAMW, .lr = 2e-5f,
                                      .weight_decay = 0.01f, .schedule = AB_LR_LINEAR, .clip_grad_norm = 1.0f,
                                      .wd_exclude = 1};

/* BERT: the architecture from the checkpoint's config.json (bert) or built in (bert-base,
 * bert-tiny, which a checkpoint of the same shape may still initialise) */
static int create_bert(const ab_model_config *c, ab_model **out) {
    ab_bert_config arch;
    if (strcmp(c->name, "bert") == 0) {
        if (!c->arch) return ab_errorf("--model bert takes its architecture from --init-from DIR (a checkpoint "
                                       "folder with config.json); or use --model bert-base");
        AB_TRY(ab_bert_config_read(c->arch, &arch));
    } else {
        AB_TRY(ab_bert_config_builtin(c->name, &arch));
    }
    return ab_bert_create(c, &arch, out);
}

static const struct {
    const char *name, *help;
    int (*create)(const ab_model_config *c, ab_model **out);
    const ab_recipe *recipe;
    const ab_model_option *options; /* the model's own (mlp.c, resnet.c, bert.c) */
} models[] = {
    {"mlp", "784-256-10 MLP, ReLU (--hidden)", create_mlp, &recipe_mlp, ab_mlp_options},
    {"resnet50", "ResNet-50 v1.5, torchvision layout (7x7/2 stem + max pool)", create_resnet50, &recipe_resnet,
     ab_resnet_options},
    {"resnet50-cifar", "ResNet-50 v1.5 with a 3x3/1 stem, no max pool", create_resnet50_cifar, &recipe_resnet,
     ab_resnet_options},
    {"resnet-tiny", "the same code reduced: CIFAR stem, 1 block a stage, width 8", create_resnet_tiny, &recipe_resnet,
     ab_resnet_options},
    {"bert", "BERT for sequence classification, the architecture of --init-from DIR/config.json", create_bert,
     &recipe_bert, ab_bert_options},
    {"bert-base", "BERT-base: 12 layers, hidden 768, 12 heads, ffn 3072 (110 M parameters)", create_bert, &recipe_bert,
     ab_bert_options},
    {"bert-tiny", "the same code reduced: 2 layers, hidden 64, 2 heads, ffn 256", create_bert, &recipe_bert,
     ab_bert_options},
};
enum { N_MODELS = sizeof models / sizeof models[0] };

static int create_model(const ab_train_config *cfg, const ab_sample_info *s, const ab_model_split *split,
                        ab_model **out) {
    ab_model_config mc = {.name = cfg->model, .sample = *s, .max_batch = cfg->batch_size, .hidden = cfg->hidden,
                          .width = cfg->width, .arch = cfg->init_from, .dropout = cfg->dropout,
                          .tp = split ? split->tp : NULL, .stage = split ? split->stage : (ab_stage){0, 0}};
    memcpy(mc.blocks, cfg->blocks, sizeof mc.blocks);
    for (int i = 0; i < N_MODELS; i++)
        if (strcmp(cfg->model, models[i].name) == 0) return models[i].create(&mc, out);
    return ab_errorf("unknown model '%s' (available: %s)", cfg->model, ab_workload_model_names());
}

const ab_recipe *ab_workload_recipe(const char *model) {
    for (int i = 0; i < N_MODELS; i++)
        if (strcmp(model, models[i].name) == 0) return models[i].recipe;
    return NULL;
}

void ab_recipe_apply(const ab_recipe *r, ab_train_config *c) {
    c->dataset = r->dataset;
    c->batch_size = r->batch_size;
    c->optimizer = r->optimizer;
    c->clip_grad_norm = r->clip_grad_norm;
    c->wd_exclude = r->wd_exclude;
    c->lr = r->lr;
    c->momentum = r->momentum;
    c->weight_decay = r->weight_decay;
    c->lr_schedule = r->schedule;
    c->warmup_steps = r->warmup_steps;
}

/* the shortest decimal that reads back as v (0.1f as 0.1, not 0.100000001) */
static const char *shortest(float v, char *buf, size_t n) {
    for (int digits = 1; digits <= 9; digits++) {
        snprintf(buf, n, "%.*g", digits, (double)v);
        if (strtof(buf, NULL) == v) break;
    }
    return buf;
}

int ab_recipe_format(const ab_recipe *r, int json, char *buf, size_t n) {
    const char *opt = ab_optimizer_name(r->optimizer), *sched = ab_lr_schedule_name(r->schedule);
    const char *wd = r->wd_exclude ? "bias-norm" : "none";
    char lr[24], mom[24], dec[24], clip[24];
    shortest(r->lr, lr, sizeof lr);
    shortest(r->momentum, mom, sizeof mom);
    shortest(r->weight_decay, dec, sizeof dec);
    shortest(r->clip_grad_norm, clip, sizeof clip);
    const int k = json ? snprintf(buf, n,
                                  "{\"dataset\": \"%s\", \"batch_size\": %d, \"optimizer\": \"%s\", \"lr\": %s, "
                                  "\"momentum\": %s, \"weight_decay\": %s, \"wd_exclude\": \"%s\", \"lr_schedule\": "
                                  "\"%s\", \"warmup_steps\": %ld, \"clip_grad_norm\": %s}",
                                  r->dataset, r->batch_size, opt, lr, mom, dec, wd, sched, r->warmup_steps, clip)
                       : snprintf(buf, n,
                                  "--dataset %s --batch-size %d --optimizer %s --lr %s --momentum %s --weight-decay %s "
                                  "--wd-exclude %s --lr-schedule %s --warmup-steps %ld --clip-grad-norm %s",
                                  r->dataset, r->batch_size, opt, lr, mom, dec, wd, sched, r->warmup_steps, clip);
    return k < 0 || (size_t)k >= n ? ab_errorf("recipe: %d bytes do not fit %zu", k, n) : 0;
}

/* ---- data sets ---- */

static int open_mnist_like(const ab_train_config *c, ab_backend *be, const char *dir, const char *name,
                           ab_dataset **train, ab_dataset **test) {
    /* the article's normalisation (MNIST's mean and std), no augmentation */
    ab_image_dataset_opts o = {.mean = {0.1307f}, .std = {0.3081f}};
    ab_image_set tr, te;
    char label[64];
    AB_TRY(ab_mnist_load(dir, "train", &tr));
    if (ab_mnist_load(dir, "t10k", &te) != 0) {
        ab_image_set_free(&tr);
        return -1;
    }
    snprintf(label, sizeof label, "%s train", name);
    o.name = label;
    o.subset = c->train_subset;
    if (ab_image_dataset_create(&tr, &o, be, train) != 0) {
        ab_image_set_free(&te);
        return -1;
    }
    snprintf(label, sizeof label, "%s test", name);
    o.subset = c->test_subset;
    return ab_image_dataset_create(&te, &o, be, test);
}

static int open_mnist(const ab_train_config *c, ab_backend *be, ab_dataset **tr, ab_dataset **te) {
    return open_mnist_like(c, be, c->data_dir ? c->data_dir : AB_DEFAULT_DATA_ROOT "/mnist", "MNIST", tr, te);
}

static int open_fashion(const ab_train_config *c, ab_backend *be, ab_dataset **tr, ab_dataset **te) {
    return open_mnist_like(c, be, c->data_dir ? c->data_dir : "/usr/share/datasets/fashion-mnist", "Fashion-MNIST",
                           tr, te);
}

static int open_cifar10(const ab_train_config *c, ab_backend *be, ab_dataset **train, ab_dataset **test) {
    const char *dir = c->data_dir ? c->data_dir : AB_DEFAULT_DATA_ROOT "/cifar10";
    /* torchvision's CIFAR-10 recipe: per-channel normalisation, 4-pixel zero-padded random crop
     * and horizontal flip for training */
    ab_image_dataset_opts o = {.name = "CIFAR-10 train", .mean = {0.4914f, 0.4822f, 0.4465f},
                               .std = {0.2470f, 0.2435f, 0.2616f}, .crop_pad = 4, .flip = 1, .subset = c->train_subset};
    ab_image_set tr, te;
    o.crop_pad = c->augment ? o.crop_pad : 0;
    o.flip = c->augment ? o.flip : 0;
    AB_TRY(ab_cifar10_load(dir, 1, &tr));
    if (ab_cifar10_load(dir, 0, &te) != 0) {
        ab_image_set_free(&tr);
        return -1;
    }
    if (ab_image_dataset_create(&tr, &o, be, train) != 0) {
        ab_image_set_free(&te);
        return -1;
    }
    o.name = "CIFAR-10 test";
    o.crop_pad = o.flip = 0;
    o.subset = c->test_subset;
    return ab_image_dataset_create(&te, &o, be, test);
}

/* GLUE: the task's folder (--data, else <data root>/glue/<folder>), BERT's WordPiece vocabulary
 * (--vocab, else the checkpoint's vocab.txt, else bert-base-uncased's), both splits tokenized once
 * to --max-seq-len positions; the dev split is the test set */
static int open_glue(const ab_train_config *c, ab_backend *be, ab_dataset **train, ab_dataset **test) {
    const ab_glue_task_info *task;
    AB_TRY(ab_glue_task(c->dataset, &task));
    char dir[1024], vocab[1100];
    if (c->data_dir) snprintf(dir, sizeof dir, "%s", c->data_dir);
    else snprintf(dir, sizeof dir, "%s/glue/%s", AB_DEFAULT_DATA_ROOT, task->folder);
    struct stat st;
    if (c->vocab) {
        snprintf(vocab, sizeof vocab, "%s", c->vocab);
    } else {
        vocab[0] = 0;
        if (c->init_from) {
            const char *ckpt = c->init_from;
            if (stat(ckpt, &st) == 0 && S_ISDIR(st.st_mode)) snprintf(vocab, sizeof vocab, "%s/vocab.txt", ckpt);
            else {
                const char *slash = strrchr(ckpt, '/');
                snprintf(vocab, sizeof vocab, "%.*s/vocab.txt", slash ? (int)(slash - ckpt) : 1, slash ? ckpt : ".");
            }
            if (stat(vocab, &st) != 0) vocab[0] = 0;
        }
        if (!vocab[0]) snprintf(vocab, sizeof vocab, "%s/bert-base-uncased/vocab.txt", AB_DEFAULT_DATA_ROOT);
    }
    ab_wordpiece *wp = NULL;
    AB_TRY(ab_wp_load(vocab, 1, &wp));
    ab_glue_split tr = {0}, te = {0};
    char name[64], file[1200];
    int rc = ab_glue_load(dir, task->name, 0, c->train_subset, &tr);
    if (rc == 0) rc = ab_glue_load(dir, task->name, 1, c->test_subset, &te);
    if (rc == 0) {
        snprintf(name, sizeof name, "%s train", task->folder);
        snprintf(file, sizeof file, "%s/%s", dir, task->train_file);
        rc = ab_text_dataset_create(&tr, wp, c->max_seq_len, name, file, be, train);
    }
    if (rc == 0) {
        snprintf(name, sizeof name, "%s dev", task->folder);
        snprintf(file, sizeof file, "%s/%s", dir, task->dev_file);
        rc = ab_text_dataset_create(&te, wp, c->max_seq_len, name, file, be, test);
    }
    ab_glue_split_free(&tr);
    ab_glue_split_free(&te);
    ab_wp_free(wp);
    return rc;
}

static const struct {
    const char *name;
    int (*open)(const ab_train_config *c, ab_backend *be, ab_dataset **train, ab_dataset **test);
} datasets[] = {
    {"mnist", open_mnist},
    {"fashion-mnist", open_fashion},
    {"cifar10", open_cifar10},
    {"sst2", open_glue},
    {"cola", open_glue},
    {"rte", open_glue},
    {"mrpc", open_glue},
    {"qnli", open_glue},
    {"qqp", open_glue},
    {"mnli", open_glue},
};
enum { N_DATASETS = sizeof datasets / sizeof datasets[0] };

static int open_data(const ab_train_config *cfg, ab_backend *be, ab_dataset **train, ab_dataset **test) {
    *train = *test = NULL;
    for (int i = 0; i < N_DATASETS; i++)
        if (strcmp(cfg->dataset, datasets[i].name) == 0) {
            if (datasets[i].open(cfg, be, train, test) == 0) return 0;
            ab_dataset_destroy(*train);
            *train = NULL;
            return -1;
        }
    return ab_errorf("unknown dataset '%s' (available: %s)", cfg->dataset, ab_workload_dataset_names());
}

static const char *join(char *buf, size_t cap, int n, const char *(*name)(int)) {
    size_t len = 0;
    buf[0] = 0;
    for (int i = 0; i < n && len < cap; i++) len += (size_t)snprintf(buf + len, cap - len, "%s%s", i ? ", " : "", name(i));
    return buf;
}
static const char *model_name(int i) { return models[i].name; }
static const char *dataset_name(int i) { return datasets[i].name; }

const char *ab_workload_model_names(void) {
    static char buf[256];
    return join(buf, sizeof buf, N_MODELS, model_name);
}

const char *ab_workload_model(int i, const char **help) {
    if (i < 0 || i >= N_MODELS) return NULL;
    if (help) *help = models[i].help;
    return models[i].name;
}

const ab_model_option *ab_workload_model_options(int i) { return i >= 0 && i < N_MODELS ? models[i].options : NULL; }

int ab_model_option_set(const ab_model_option *o, const char *v, ab_train_config *c) {
    char *field = (char *)c + o->offset, *end;
    if (o->kind == AB_MODEL_OPT_FRACTION) {
        errno = 0;
        const double x = strtod(v, &end);
        if (errno || end == v || *end || !(x >= 0.0 && x < 1.0)) return ab_errorf("'%s' is not a rate in [0, 1)", v);
        *(float *)field = (float)x;
        return 0;
    }
    const int n = o->kind == AB_MODEL_OPT_INTS4 ? 4 : 1;
    int got[4];
    const char *p = v;
    for (int i = 0; i < n; i++) {
        errno = 0;
        const long x = isdigit((unsigned char)*p) ? strtol(p, &end, 10) : (long)o->lo - 1;
        if (x < o->lo || x > o->hi || errno || *end != (i < n - 1 ? ',' : '\0')) {
            if (n == 1) return ab_errorf("'%s' is not an integer in [%d, %d]", v, o->lo, o->hi);
            return ab_errorf("'%s' is not four values A,B,C,D (%s), each in [%d, %d]", v, o->help, o->lo, o->hi);
        }
        got[i] = (int)x;
        p = end + 1;
    }
    memcpy(field, got, (size_t)n * sizeof(int));
    return 0;
}

const char *ab_workload_dataset_names(void) {
    static char buf[256];
    return join(buf, sizeof buf, N_DATASETS, dataset_name);
}

/* ---- weights files: safetensors in PyTorch's names (models/checkpoint.c) ---- */

static int load_weights(const char *path, ab_model *m, ab_params *p, char *from, size_t cap) {
    if (m->ops->load_weights) return m->ops->load_weights(m, p, path, from, cap);
    return ab_checkpoint_load(path, m, p, NULL, from, cap);
}

static int save_weights(const char *path, const ab_model *m, const ab_params *p) {
    if (m->ops->save_weights) return m->ops->save_weights(m, p, path);
    return ab_checkpoint_save(path, m, p);
}

const ab_workload_ops ab_workloads = {.open_data = open_data,
                                      .create_model = create_model,
                                      .load_weights = load_weights,
                                      .save_weights = save_weights};
