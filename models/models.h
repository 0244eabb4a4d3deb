/* The models and the workload registry: what turns the names of a training configuration
 * (--model, --dataset) into a model and its data sets. A new workload adds its model here, its
 * reader in data_loaders/, and a line in each table of registry.c; the training core is not
 * touched. */
#ifndef AB_MODELS_H
#define AB_MODELS_H

#include "model.h"
#include "train.h"

/* The registry of every model and data set this build knows (models/registry.c). */
extern const ab_workload_ops ab_workloads;

/* "mlp, resnet50, ..." and "mnist, fashion-mnist, cifar10": for help texts */
const char *ab_workload_model_names(void);
const char *ab_workload_dataset_names(void);
/* the i-th model of the registry (i = 0, 1, ...) and its one-line help; NULL past the last */
const char *ab_workload_model(int i, const char **help);

/* A model's default recipe: what `ampbench train --model NAME` uses for what the command line
 * leaves unsaid (models/registry.c says where each comes from). */
typedef struct {
    const char *dataset;
    int batch_size;
    float lr, momentum, weight_decay;
    ab_lr_schedule schedule;
    long warmup_steps;
} ab_recipe;
/* the recipe of model, or NULL for a name the registry does not know */
const ab_recipe *ab_workload_recipe(const char *model);
/* writes r's fields into c */
void ab_recipe_apply(const ab_recipe *r, ab_train_config *c);

/* Model constructors: specs first (so ab_params_init can lay them out), then bind allocates
 * the activations. */
int ab_mlp_create(const ab_model_config *cfg, ab_model **out);
/* ResNet-50 v1.5 (torchvision layout). stem_cifar: 3x3/1 stem without max pool, else 7x7/2 +
 * max pool; cfg->width and cfg->blocks (0 = 64 and 3,4,6,3) give reduced configurations. */
int ab_resnet_create(const ab_model_config *cfg, int stem_cifar, ab_model **out);

#endif
