/* The workloads: the models and the registry that turns the names of a training configuration
 * (--model, --dataset) into a model and its data sets (the model interface itself is
 * core/model.h). A new workload adds its model here, its reader in data_loaders/, and a line in
 * each table of registry.c; the training core is not touched. */
#ifndef AB_WORKLOADS_H
#define AB_WORKLOADS_H

#include "model.h"
#include "train.h"

/* The registry of every model and data set this build knows (models/registry.c). */
extern const ab_workload_ops ab_workloads;

/* "mlp, resnet50, ..." and "mnist, fashion-mnist, cifar10": for help texts */
const char *ab_workload_model_names(void);
const char *ab_workload_dataset_names(void);
/* the i-th model of the registry (i = 0, 1, ...) and its one-line help; NULL past the last */
const char *ab_workload_model(int i, const char **help);

/* An option a model reads from the training configuration, in the model's own table: the CLI
 * lists each model's under --help and parses them with ab_model_option_set. */
typedef enum {
    AB_MODEL_OPT_INT,      /* an int in [lo, hi] */
    AB_MODEL_OPT_INTS4,    /* four ints in [lo, hi], "A,B,C,D" (an int[4]) */
    AB_MODEL_OPT_FRACTION, /* a float in [0, 1) */
} ab_model_opt_kind;
typedef struct {
    const char *name, *arg, *help, *dflt; /* --name ARG, what it means, the default shown */
    ab_model_opt_kind kind;
    size_t offset; /* of the field in ab_train_config */
    int lo, hi;
} ab_model_option;
/* the options of the i-th model of the registry (ab_workload_model), ended by one without a name */
const ab_model_option *ab_workload_model_options(int i);
/* parses v as o says into o's field of c: 0, or -1 with a one-line ab_error() about v */
int ab_model_option_set(const ab_model_option *o, const char *v, ab_train_config *c);
/* each model's table (mlp.c, resnet.c, bert.c) */
extern const ab_model_option ab_mlp_options[], ab_resnet_options[], ab_bert_options[];

/* A model's default recipe: what `ampbench train --model NAME` uses for what the command line
 * leaves unsaid (models/registry.c says where each comes from). */
typedef struct {
    const char *dataset;
    int batch_size;
    ab_optimizer_kind optimizer;
    float lr, momentum, weight_decay;
    ab_lr_schedule schedule;
    long warmup_steps;
    float clip_grad_norm; /* 0: none */
    int wd_exclude;       /* 1: no weight decay on biases and normalisation weights */
} ab_recipe;
/* the recipe of model, or NULL for a name the registry does not know */
const ab_recipe *ab_workload_recipe(const char *model);
/* writes r's fields into c */
void ab_recipe_apply(const ab_recipe *r, ab_train_config *c);
/* The recipe as the options that set it, in the names both ampbench train and the PyTorch peers
 * take ("--dataset cifar10 --batch-size 128 --optimizer sgd ..."), or (json) as a JSON object of
 * the same names with underscores: the one source run_all.sh and the peers read (ampbench recipe). */
int ab_recipe_format(const ab_recipe *r, int json, char *buf, size_t n);

/* BERT's architecture: a built-in configuration or a checkpoint's config.json. */
typedef struct {
    int vocab, hidden, layers, heads, ffn, max_positions, type_vocab, pad_id;
    float ln_eps, hidden_dropout, attention_dropout;
    char source[512]; /* where it came from, for the record */
} ab_bert_config;
/* "bert-base" (BertConfig's defaults) or "bert-tiny" (2 layers, hidden 64: the tests') */
int ab_bert_config_builtin(const char *name, ab_bert_config *c);
/* arch: a checkpoint folder, or a file in one; reads its config.json (Hugging Face's keys) */
int ab_bert_config_read(const char *arch, ab_bert_config *c);
/* BertForSequenceClassification for token sequences like cfg->sample (seq_len, vocab, classes) */
int ab_bert_create(const ab_model_config *cfg, const ab_bert_config *arch, ab_model **out);

/* Model constructors: specs first (so ab_params_init can lay them out), then bind allocates
 * the activations. */
int ab_mlp_create(const ab_model_config *cfg, ab_model **out);
/* ResNet-50 v1.5 (torchvision layout). stem_cifar: 3x3/1 stem without max pool, else 7x7/2 +
 * max pool; cfg->width and cfg->blocks (0 = 64 and 3,4,6,3) give reduced configurations. */
int ab_resnet_create(const ab_model_config *cfg, int stem_cifar, ab_model **out);

#endif
