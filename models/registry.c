/* The workload registry: model names -> constructors, data-set names -> readers, and the
 * weights files. Adding a workload is a line in each table. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "checkpoint.h"
#include "cifar10.h"
#include "idx.h"
#include "image_dataset.h"
#include "models.h"

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
static const ab_recipe recipe_mlp = {.dataset = "mnist", .batch_size = 64, .lr = 0.01f, .momentum = 0.0f,
                                     .weight_decay = 0.0f, .schedule = AB_LR_CONSTANT, .warmup_steps = 0};
static const ab_recipe recipe_resnet = {.dataset = "cifar10", .batch_size = 128, .lr = 0.1f, .momentum = 0.9f,
                                        .weight_decay = 5e-4f, .schedule = AB_LR_COSINE, .warmup_steps = 100};

static const struct {
    const char *name, *help;
    int (*create)(const ab_model_config *c, ab_model **out);
    const ab_recipe *recipe;
} models[] = {
    {"mlp", "784-256-10 MLP, ReLU (--hidden)", create_mlp, &recipe_mlp},
    {"resnet50", "ResNet-50 v1.5, torchvision layout (7x7/2 stem + max pool)", create_resnet50, &recipe_resnet},
    {"resnet50-cifar", "ResNet-50 v1.5 with a 3x3/1 stem, no max pool", create_resnet50_cifar, &recipe_resnet},
    {"resnet-tiny", "the same code reduced: CIFAR stem, 1 block a stage, width 8", create_resnet_tiny,
     &recipe_resnet},
};
enum { N_MODELS = sizeof models / sizeof models[0] };

static int create_model(const ab_train_config *cfg, const ab_sample_info *s, ab_model **out) {
    ab_model_config mc = {.sample = *s, .max_batch = cfg->batch_size, .hidden = cfg->hidden, .width = cfg->width};
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
    c->lr = r->lr;
    c->momentum = r->momentum;
    c->weight_decay = r->weight_decay;
    c->lr_schedule = r->schedule;
    c->warmup_steps = r->warmup_steps;
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

static const struct {
    const char *name;
    int (*open)(const ab_train_config *c, ab_backend *be, ab_dataset **train, ab_dataset **test);
} datasets[] = {
    {"mnist", open_mnist},
    {"fashion-mnist", open_fashion},
    {"cifar10", open_cifar10},
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

const char *ab_workload_dataset_names(void) {
    static char buf[256];
    return join(buf, sizeof buf, N_DATASETS, dataset_name);
}

/* ---- weights files: safetensors in PyTorch's names (models/checkpoint.c) ---- */

static int load_weights(const char *path, ab_model *m, ab_params *p, char *from, size_t cap) {
    return ab_checkpoint_load(path, m, p, NULL, from, cap);
}

static int save_weights(const char *path, const ab_model *m, const ab_params *p) {
    return ab_checkpoint_save(path, m, p);
}

const ab_workload_ops ab_workloads = {.open_data = open_data,
                                      .create_model = create_model,
                                      .load_weights = load_weights,
                                      .save_weights = save_weights};
