/* ampbench: trains a workload in a chosen precision and writes one JSON result (train), or
 * times repeated runs and prints medians (bench). */
#include <ctype.h>
#include <errno.h>
#include <float.h>
#include <getopt.h>
#include <limits.h>
#include <math.h>
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "backend_cpu.h"
#include "comm_engines.h"
#include "glue.h"
#include "backend_prof.h"
#include "train_checkpoint.h"
#include "model_step.h"
#include "params.h"
#include "pipeline.h"
#include "platform.h"
#include "record.h"
#include "wordpiece.h"
#include "workloads.h"
#include "train.h"
#include "version.h"

/* ---- the command line: one table of options, read by getopt_long and printed as --help ---- */

static const char usage[] =
    "usage: ampbench train [options]     train one workload, write one JSON result\n"
    "       ampbench bench [options]     repeat training runs and print median epoch time and samples/s\n"
    "       ampbench tokenize --vocab FILE [--max-seq-len N] [--task T] [--cased] FILE\n"
    "                                    BERT's WordPiece ids of each example of FILE, one line each\n"
    "                                    ([CLS] ... [SEP], padding left out); --task T reads FILE as\n"
    "                                    GLUE task T's TSV (sentence pairs for RTE, ...), else each\n"
    "                                    line is one text\n"
    "       ampbench model-step --model M [--input CxHxW | --max-seq-len S] [--batch-size B] [--gpu NAME]\n"
    "                                    the modelled time of one training step on a named GPU, in\n"
    "                                    fp32, tf32, amp and bf16 (ampbench model-step --help)\n"
    "       ampbench recipe --model M [--format conf|json]\n"
    "                                    the model's recipe (data set, batch, optimizer, rate and its\n"
    "                                    schedule, weight decay, clipping): every option below whose\n"
    "                                    default is \"the model's recipe\", as options or JSON\n"
    "       ampbench --help | --version\n"
    "       mpirun -np N ampbench train|bench [options]   data parallel: N ranks, rank 0 prints and writes\n"
    "\n"
    "Options are spelled in full and take their value as --name VALUE or --name=VALUE; [default].\n"
    "The recipe's defaults are the model's (models/registry.c); options override them.\n";

/* what the options set */
typedef struct {
    ab_train_config cfg;
    int repeats;       /* bench: number of runs */
    int find_max_batch;
    int profile_ops;   /* time every op (kernels/prof) and print the table by op kind at the end */
    int help, version; /* print and exit */
    const char *loss_scale; /* --loss-scale as given (NULL: not given) */
    unsigned char given[128]; /* rows[i] was given on the command line; model_rows[j] at N_ROWS + j */
} cli;

typedef struct option_row option_row;
struct option_row {
    const char *name; /* the long name without "--"; NULL: a section header, titled by help */
    const char *arg;  /* the value's name in the help; NULL: the option takes no value */
    const char *help; /* a '\n' continues it on the next line */
    const char *dflt; /* the default the help shows; NULL: none shown */
    /* parses v and stores it; returns 0, or -1 with ab_error() saying what is wrong with v
     * (the caller prefixes the option's name) */
    int (*set)(const option_row *o, const char *v, cli *c);
    size_t off;            /* the field of cli the generic setters (set_int ... set_flag) write */
    long lo, hi;           /* set_int, set_long, set_u64: the range; set_flag: the value */
    void (*more)(FILE *f); /* further help lines (the registry's names) */
};

static void *field(const option_row *o, cli *c) { return (char *)c + o->off; }

static int parse_long(const char *v, long lo, long hi, long *out) {
    char *end;
    errno = 0;
    const long x = strtol(v, &end, 10);
    if (errno || *end || end == v || x < lo || x > hi) return ab_errorf("'%s' is not an integer in [%ld, %ld]", v, lo, hi);
    *out = x;
    return 0;
}

static int parse_double(const char *v, double *out) {
    char *end;
    errno = 0;
    const double x = strtod(v, &end);
    if (errno || *end || end == v || !isfinite(x)) return ab_errorf("'%s' is not a finite number", v);
    *out = x;
    return 0;
}

static int set_int(const option_row *o, const char *v, cli *c) {
    long x = 0;
    AB_TRY(parse_long(v, o->lo, o->hi, &x));
    *(int *)field(o, c) = (int)x;
    return 0;
}

static int set_long(const option_row *o, const char *v, cli *c) {
    return parse_long(v, o->lo, o->hi, (long *)field(o, c));
}

static int set_u64(const option_row *o, const char *v, cli *c) {
    long x = 0;
    AB_TRY(parse_long(v, o->lo, o->hi, &x));
    *(uint64_t *)field(o, c) = (uint64_t)x;
    return 0;
}

static int set_float(const option_row *o, const char *v, cli *c) {
    double x = 0.0;
    AB_TRY(parse_double(v, &x));
    if (fabs(x) > FLT_MAX) return ab_errorf("'%s' is out of the range of a float", v);
    *(float *)field(o, c) = (float)x;
    return 0;
}

/* a double > 0 */
static int set_positive(const option_row *o, const char *v, cli *c) {
    double x = 0.0;
    AB_TRY(parse_double(v, &x));
    if (!(x > 0.0)) return ab_errorf("'%s' must be positive", v);
    *(double *)field(o, c) = x;
    return 0;
}

static int set_string(const option_row *o, const char *v, cli *c) {
    *(const char **)field(o, c) = v;
    return 0;
}

static int set_proj_gpu(const option_row *o, const char *v, cli *c) {
    (void)o;
    if (!ab_gpu_spec_find(v)) return ab_errorf("'%s' is not a GPU of the step model's table (%s)", v, ab_gpu_spec_names());
    c->cfg.proj_gpu = v;
    return 0;
}

static int set_flag(const option_row *o, const char *v, cli *c) {
    (void)v;
    *(int *)field(o, c) = (int)o->lo;
    return 0;
}

static int set_precision(const option_row *o, const char *v, cli *c) {
    (void)o;
    return ab_precision_parse(v, &c->cfg.precision);
}

static int set_optimizer(const option_row *o, const char *v, cli *c) {
    (void)o;
    return ab_optimizer_parse(v, &c->cfg.optimizer);
}

static int set_wd_exclude(const option_row *o, const char *v, cli *c) {
    (void)o;
    if (strcmp(v, "none") == 0) c->cfg.wd_exclude = 0;
    else if (strcmp(v, "bias-norm") == 0) c->cfg.wd_exclude = 1;
    else return ab_errorf("'%s' is not none or bias-norm", v);
    return 0;
}

/* a rate in [0, 1) */
/* a size: a number and K, M, G or T (powers of 1024: an "8 GB" GPU holds 8 GiB), B or iB after
 * the unit allowed: 8G, 8GB, 7.5GiB, 8192M */
static int set_size(const option_row *o, const char *v, cli *c) {
    (void)o;
    char *end;
    errno = 0;
    const double x = strtod(v, &end);
    double unit = 1.0;
    switch (*end) {
    case 'K': case 'k': unit = 1024.0, end++; break;
    case 'M': case 'm': unit = 1024.0 * 1024.0, end++; break;
    case 'G': case 'g': unit = 1024.0 * 1024.0 * 1024.0, end++; break;
    case 'T': case 't': unit = 1024.0 * 1024.0 * 1024.0 * 1024.0, end++; break;
    default: break;
    }
    if (strcmp(end, "iB") == 0 || strcmp(end, "B") == 0) end += strlen(end);
    if (errno || end == v || *end || !(x > 0.0) || x * unit > 1e18)
        return ab_errorf("'%s' is not a size (a number and K, M, G or T, powers of 1024: 8G, 7.5GiB)", v);
    c->cfg.memory_limit = (size_t)(x * unit);
    return 0;
}

/* dynamic | S: S a finite number in [2^-24, FLT_MAX], kept as a static scale */
static int set_loss_scale(const option_row *o, const char *v, cli *c) {
    (void)o;
    c->loss_scale = v;
    if (strcmp(v, "dynamic") == 0) {
        c->cfg.loss_scale = 0.0f;
        return 0;
    }
    char *end;
    const double x = strtod(v, &end);
    if (end == v || *end) return ab_errorf("'%s' is neither dynamic nor a number", v);
    if (!(x > 0.0) || !isfinite(x)) return ab_errorf("'%s' is not a positive finite scale (or dynamic)", v);
    if (x > FLT_MAX) return ab_errorf("'%s' is beyond the range of a float (%g)", v, (double)FLT_MAX);
    if (x < AB_SCALER_STATIC_MIN)
        return ab_errorf("'%s' is below 2^-24 (%g): every scaled loss gradient would round to zero in fp16", v,
                         (double)AB_SCALER_STATIC_MIN);
    c->cfg.loss_scale = (float)x;
    return 0;
}

static int set_lr_schedule(const option_row *o, const char *v, cli *c) {
    (void)o;
    return ab_lr_schedule_parse(v, &c->cfg.lr_schedule);
}

/* checked here, kept as a name: the core resolves auto once it knows the launcher */
static int set_comm(const option_row *o, const char *v, cli *c) {
    (void)o;
    ab_comm_kind k;
    AB_TRY(ab_comm_parse(v, &k));
    c->cfg.comm = v;
    return 0;
}

static int set_allreduce_dtype(const option_row *o, const char *v, cli *c) {
    (void)o;
    if (strcmp(v, "fp32") == 0) c->cfg.allreduce_dtype = AB_F32;
    else if (strcmp(v, "fp16") == 0) c->cfg.allreduce_dtype = AB_F16;
    else return ab_errorf("'%s' is not fp32 or fp16", v);
    return 0;
}

static int set_dp_sync(const option_row *o, const char *v, cli *c) {
    (void)o;
    return ab_dp_sync_parse(v, &c->cfg.dp_sync);
}

static int set_pp_schedule(const option_row *o, const char *v, cli *c) {
    (void)o;
    ab_pp_schedule k;
    AB_TRY(ab_pp_schedule_parse(v, &k));
    c->cfg.pp_schedule = (int)k;
    return 0;
}

static int set_dp_overlap(const option_row *o, const char *v, cli *c) {
    (void)o;
    if (strcmp(v, "on") == 0) c->cfg.dp_overlap = 1;
    else if (strcmp(v, "off") == 0) c->cfg.dp_overlap = 0;
    else return ab_errorf("'%s' is not on or off", v);
    return 0;
}

static void list_models(FILE *f) {
    const char *name, *help;
    for (int i = 0; (name = ab_workload_model(i, &help)) != NULL; i++) fprintf(f, "%29s%-16s %s\n", "", name, help);
}

static void list_datasets(FILE *f) { fprintf(f, "%29s%s\n", "", ab_workload_dataset_names()); }

/* The offset of cli's field f, which must be of type T (a compile error otherwise). */
#define FIELD(f, T) (offsetof(cli, f) + 0 * sizeof(_Generic(((cli *)0)->f, T: 1)))
/* the columns of how a row is parsed and stored (set, off, lo, hi) and its further help (more) */
#define INT(f, lo, hi) set_int, FIELD(f, int), lo, hi, NULL
#define LONG(f, lo, hi) set_long, FIELD(f, long), lo, hi, NULL
#define U64(f, lo, hi) set_u64, FIELD(f, uint64_t), lo, hi, NULL
#define FLOAT(f) set_float, FIELD(f, float), 0, 0, NULL
#define POSITIVE(f) set_positive, FIELD(f, double), 0, 0, NULL
#define STRING(f) set_string, FIELD(f, const char *), 0, 0, NULL
/* a name the registry checks; list prints the names it knows */
#define CHOICE(f, list) set_string, FIELD(f, const char *), 0, 0, list
#define FLAG(f, value) set_flag, FIELD(f, int), value, value, NULL
/* a parser of its own, which writes its field itself */
#define CALL(fn) fn, 0, 0, 0, NULL
#define SECTION(title) {.help = title}
/* where each model's own options (model_rows) go in the help: a row of neither name nor title */
#define MODEL_OPTIONS {.name = NULL}

static const option_row rows[] = {
    SECTION("general"),
    {"help", NULL, "print this help and exit", NULL, FLAG(help, 1)},
    {"version", NULL, "print the commit ampbench was built from and exit", NULL, FLAG(version, 1)},
    {"device", "D", "cpu | cuda | auto", "cpu", STRING(cfg.device)},
    {"precision", "P", "fp32 | amp (fp16 autocast + loss scaling) | bf16", "fp32", CALL(set_precision)},
    {"threads", "N", "CPU BLAS threads (0 = OpenBLAS default)", "0", INT(cfg.threads, 0, 1024)},
    {"memory-limit", "SIZE", "refuse to hold more than SIZE (8G: powers of 1024) of the comparable\n"
                             "total, on any backend: an out-of-memory error names the tensor", NULL, CALL(set_size)},
    {"find-max-batch", NULL, "report the largest --batch-size whose run fits (--memory-limit, or\n"
                             "the GPU's memory) and exit", NULL, FLAG(find_max_batch, 1)},
    {"seed", "S", "initialisation, shuffling and augmentation", "1", U64(cfg.seed, 0, 1L << 62)},

    SECTION("model"),
    {"model", "NAME", "the network, one of:", "mlp", CHOICE(cfg.model, list_models)},
    {"init-from", "FILE", "weights to start from (.safetensors, PyTorch's tensor names; BERT: a Hugging\n"
                          "Face checkpoint folder or its model.safetensors)", NULL, STRING(cfg.init_from)},
    MODEL_OPTIONS,

    SECTION("data"),
    {"dataset", "NAME", "the data set, one of:", "the model's recipe", CHOICE(cfg.dataset, list_datasets)},
    {"data", "DIR", "folder with the data set's files (IDX: .gz or raw; GLUE: the task's TSVs)",
     "mnist: " AB_DEFAULT_DATA_ROOT "/mnist, fashion-mnist: /usr/share/datasets/fashion-mnist, cifar10: "
     AB_DEFAULT_DATA_ROOT "/cifar10, GLUE: " AB_DEFAULT_DATA_ROOT "/glue/<task>", STRING(cfg.data_dir)},
    {"train-subset", "N", "train on the first N training samples (0 = all)", "0", INT(cfg.train_subset, 0, INT_MAX)},
    {"test-subset", "N", "evaluate on the first N test samples (0 = all)", "0", INT(cfg.test_subset, 0, INT_MAX)},
    {"no-shuffle", NULL, "keep the data set's order", NULL, FLAG(cfg.shuffle, 0)},
    {"no-augment", NULL, "no training augmentation (cifar10: random crop and flip)", NULL, FLAG(cfg.augment, 0)},
    {"max-seq-len", "N", "GLUE: positions a sequence is cut or padded to", "128", INT(cfg.max_seq_len, 3, 1 << 16)},
    {"vocab", "FILE", "GLUE: BERT's vocab.txt", "the checkpoint's, else bert-base-uncased's", STRING(cfg.vocab)},

    SECTION("recipe"),
    {"epochs", "N", "passes over the training set", "1", INT(cfg.epochs, 1, 100000)},
    {"batch-size", "B", "per micro-batch (and per rank)", "the model's recipe", INT(cfg.batch_size, 1, 1 << 20)},
    {"accum-steps", "K", "micro-batches per optimizer step", "1", INT(cfg.accum_steps, 1, 1 << 16)},
    {"max-steps", "N", "stop after N optimizer steps in all (0 = no limit)", "0", LONG(cfg.max_steps, 0, 1L << 40)},
    {"timing-skip-steps", "N", "leave the run's first N steps out of time_s and samples/s\n"
                               "(first-step set-up: scratch growth, plans; as the peers' option)", "0",
     LONG(cfg.timing_skip_steps, 0, 1L << 40)},
    {"optimizer", "O", "sgd | adamw", "the model's recipe", CALL(set_optimizer)},
    {"lr", "LR", "learning rate (the peak, under a schedule)", "the model's recipe", FLOAT(cfg.lr)},
    {"lr-schedule", "S", "constant | linear | cosine | step; linear and cosine decay to 0,\n"
                         "step is x0.1 from 50% of the steps, x0.01 from 75%",
     "the model's recipe", CALL(set_lr_schedule)},
    {"warmup-steps", "N", "linear warm-up from 0 over the first N steps", "the model's recipe", LONG(cfg.warmup_steps, 0, 1L << 40)},
    {"momentum", "M", "SGD momentum", "the model's recipe", FLOAT(cfg.momentum)},
    {"weight-decay", "WD", "L2 (SGD) or decoupled (AdamW) weight decay", "the model's recipe", FLOAT(cfg.weight_decay)},
    {"wd-exclude", "E", "none | bias-norm: parameters without weight decay (bias-norm: biases\n"
                        "and normalisation weights, as Hugging Face's Trainer)", "the model's recipe",
     CALL(set_wd_exclude)},
    {"clip-grad-norm", "X", "scale the gradients to global L2 norm X when above it, after\n"
                            "unscaling (0 = off)", "the model's recipe", FLOAT(cfg.clip_grad_norm)},

    SECTION("AMP loss scaler"),
    {"loss-scale", "dynamic|S", "dynamic: GradScaler's (the four options below); a number S: a\n"
                                "static scale (1 = AMP without loss scaling): an overflowing step is\n"
                                "still skipped and recorded, S never changes. A static S needs\n"
                                "--precision amp and none of the four options below (exit 2\n"
                                "otherwise); under fp32 and bf16, dynamic means no loss scale", "dynamic",
     CALL(set_loss_scale)},
    {"init-scale", "S", "loss scale at start", "65536", FLOAT(cfg.init_scale)},
    {"growth-factor", "F", "scale multiplier after growth-interval clean steps", "2", FLOAT(cfg.growth_factor)},
    {"backoff-factor", "F", "scale multiplier on an overflow (the step is skipped)", "0.5", FLOAT(cfg.backoff_factor)},
    {"growth-interval", "N", "clean steps before the scale grows", "2000", INT(cfg.growth_interval, 1, 1 << 30)},

    SECTION("gradient census (docs/gradient-range.md)"),
    {"grad-census", "K", "at optimizer step 1 and every K steps after, a histogram of\n"
                         "floor(log2 |g|) of every weight gradient and every layer's output\n"
                         "gradient, with zeros and non-finite values, as the run holds them\n"
                         "(amp: the fp16 values, still scaled); one line a census, and\n"
                         "grad_census in the JSON. It reads, never writes: training is the same", "0 = none",
     INT(cfg.grad_census, 0, 1 << 30)},

    SECTION("data parallel (docs/data-parallel.md)"),
    {"comm", "C", "auto | self | mpi | nccl; auto = nccl under mpirun with --device cuda,\n"
                  "mpi under mpirun, else self (world size 1)", "auto", CALL(set_comm)},
    {"allreduce-dtype", "T", "fp32 | fp16 (fp16 needs --precision amp)", "fp32", CALL(set_allreduce_dtype)},
    {"dp-overlap", "on|off", "all-reduce gradient buckets while backward runs (as DDP), or\n"
                             "the whole gradient after it", "on", CALL(set_dp_overlap)},
    {"bucket-mb", "MB", "the gradient buckets' size (DDP's bucket_cap_mb)", "25", POSITIVE(cfg.bucket_mb)},
    {"dp-sync", "ring|ps", "ring all-reduce, or a parameter server: gradients pushed to the\n"
                           "server ranks, which update their shards and send the weights back", "ring",
     CALL(set_dp_sync)},
    {"ps-shards", "K", "--dp-sync ps: servers (ranks 0 .. K-1), each 1/K of the weights", "1",
     INT(cfg.ps_shards, 1, 1 << 20)},
    {"comm-timeout", "S", "a collective unfinished after S seconds fails the run", "300", POSITIVE(cfg.comm_timeout_s)},
    {"inject-inf-step", "N", "fault injection: +inf in one gradient at step N", "-1 = never",
     LONG(cfg.inject_inf_step, -1, 1L << 40)},
    {"inject-inf-rank", "R", "... on rank R only", "-1 = every rank", INT(cfg.inject_inf_rank, -1, 1 << 20)},
    {"proj-gpu", "NAME", "projection: the GPU whose modelled step a run off a GPU projects from\n"
                         "(ampbench model-step; a GPU run projects from its measured step)", "rtx3090",
     CALL(set_proj_gpu)},
    {"proj-gpu-bw", "B/S", "projection: GPU ring bus bandwidth", "2.4e10, or the measured NCCL one",
     POSITIVE(cfg.proj_gpu_bw)},
    {"proj-gpu-latency", "S", "projection: GPU all-reduce latency per step", "2e-05", POSITIVE(cfg.proj_gpu_latency)},
    {"proj-node-bw", "B/S", "projection: per-node network bandwidth (100 Gb/s)", "1.25e10", POSITIVE(cfg.proj_node_bw)},
    {"proj-node-latency", "S", "projection: node all-reduce latency per step", "5e-05", POSITIVE(cfg.proj_node_latency)},

    SECTION("model parallel (docs/parallelism.md)"),
    {"tensor-parallel", "T", "split the model's matrices among groups of T neighbouring ranks\n"
                             "(Megatron-LM's column and row-parallel layers; mlp, bert): each\n"
                             "rank holds 1/T of them; the world is data x T", "1",
     INT(cfg.tensor_parallel, 1, 1 << 16)},
    {"pipeline-parallel", "P", "cut the model's layers into P stages on P ranks (mlp, resnet,\n"
                              "bert), balanced by their multiply-adds; activations and their\n"
                              "gradients go point to point; the world is data x tensor x P", "1",
     INT(cfg.pipeline_parallel, 1, 64)},
    {"micro-batches", "M", "the step's micro-batches of --batch-size each (the same as\n"
                           "--accum-steps): what the pipeline runs through its stages", "1",
     INT(cfg.accum_steps, 1, 4096)},
    {"pp-schedule", "S", "gpipe (every forward, then every backward) | 1f1b (at most P\n"
                         "micro-batches in flight)", "1f1b", CALL(set_pp_schedule)},

    SECTION("output"),
    {"out", "FILE.json", "result record (written atomically after each epoch)", NULL, STRING(cfg.out_path)},
    {"save", "FILE", "weights written at the end (.safetensors; rank 0)", NULL, STRING(cfg.save_path)},
    {"log-interval", "N", "print and record the loss every N steps", "100", INT(cfg.log_interval, 1, 1 << 30)},

    SECTION("checkpoints (docs/checkpoints.md)"),
    {"checkpoint-dir", "DIR", "write checkpoints (weights, optimizer, loss scaler, data position,\n"
                              "the record so far) into DIR/ckpt-<step>: at every epoch's end and\n"
                              "when asked to stop (INT/TERM); a DIR holding checkpoints needs --resume",
     NULL, STRING(cfg.checkpoint_dir)},
    {"checkpoint-every", "N", "also every N optimizer steps", "0 = epochs only",
     LONG(cfg.checkpoint_every, 0, 1L << 40)},
    {"keep-checkpoints", "K", "keep the newest K checkpoints", "2", INT(cfg.keep_checkpoints, 1, 1 << 20)},
    {"resume", NULL, "continue from --checkpoint-dir's newest checkpoint, bit-identical to a\n"
                     "run never stopped (none there: start from the beginning)", NULL, FLAG(cfg.resume, 1)},
    {"quiet", NULL, "no progress lines", NULL, FLAG(cfg.quiet, 1)},
    {"profile-ops", NULL, "time every op and print, at the end, where the time went by op kind\n"
                          "(GFLOP/s, GB/s, the backend's own GEMM rate beside; one process)", NULL,
     FLAG(profile_ops, 1)},
    {"repeats", "N", "bench: number of runs", "5", INT(repeats, 1, 1000)},
};
enum { N_ROWS = sizeof rows / sizeof rows[0] };

/* ---- each model's own options, from its table (models/: ab_workload_model_options), one row an
 * option: one shared by several models (the ResNets' --width) names them all ---- */
enum { MAX_MODEL_ROWS = 16 };
_Static_assert(N_ROWS + MAX_MODEL_ROWS <= sizeof((cli *)0)->given, "cli.given has a flag for every row");
static option_row model_rows[MAX_MODEL_ROWS];
static const ab_model_option *model_opts[MAX_MODEL_ROWS];
static int n_model_rows;

static int set_model_option(const option_row *o, const char *v, cli *c) {
    return ab_model_option_set(model_opts[o - model_rows], v, &c->cfg);
}

static void build_model_rows(void) {
    static char names[MAX_MODEL_ROWS][160], helps[MAX_MODEL_ROWS][320];
    if (n_model_rows) return;
    const char *model;
    for (int m = 0; (model = ab_workload_model(m, NULL)) != NULL; m++)
        for (const ab_model_option *o = ab_workload_model_options(m); o && o->name; o++) {
            int k = 0;
            while (k < n_model_rows && strcmp(model_opts[k]->name, o->name) != 0) k++;
            if (k == MAX_MODEL_ROWS) continue; /* more options than rows: raise MAX_MODEL_ROWS */
            if (k == n_model_rows) model_opts[n_model_rows++] = o, names[k][0] = 0;
            const size_t used = strlen(names[k]);
            snprintf(names[k] + used, sizeof names[k] - used, "%s%s", used ? ", " : "", model);
        }
    for (int k = 0; k < n_model_rows; k++) {
        const ab_model_option *o = model_opts[k];
        snprintf(helps[k], sizeof helps[k], "%.150s: %.160s", names[k], o->help);
        model_rows[k] = (option_row){.name = o->name, .arg = o->arg, .help = helps[k], .dflt = o->dflt,
                                     .set = set_model_option};
    }
}

static int given(const cli *c, const char *name) {
    for (int i = 0; i < N_ROWS; i++)
        if (rows[i].name && strcmp(rows[i].name, name) == 0) return c->given[i];
    for (int j = 0; j < n_model_rows; j++)
        if (strcmp(model_rows[j].name, name) == 0) return c->given[N_ROWS + j];
    return 0;
}

/* the parameter server's servers are ranks of the world the launcher started */
static int check_dp_sync(const cli *c) {
    const ab_train_config *g = &c->cfg;
    if (g->dp_sync != AB_DP_PS && given(c, "ps-shards"))
        return ab_errorf("--ps-shards %d needs --dp-sync ps (the ring has no servers)", g->ps_shards);
    if (g->dp_sync != AB_DP_PS) return 0;
    int world = 1;
    ab_comm_launched(&world);
    if (g->ps_shards > world)
        return ab_errorf("--ps-shards %d: the servers are ranks of the world, and this one has %d rank%s", g->ps_shards,
                         world, world == 1 ? "" : "s");
    if (world > 1 && g->inject_inf_step >= 0 && g->inject_inf_rank >= g->ps_shards)
        return ab_errorf("--inject-inf-rank %d serves no shard under --dp-sync ps --ps-shards %d: the fault goes "
                         "into a summed gradient, which only servers (ranks 0 .. %d) hold",
                         g->inject_inf_rank, g->ps_shards, g->ps_shards - 1);
    return 0;
}

/* What the options say together: a static loss scale belongs to amp, and excludes the dynamic
 * scaler's options; the parameter server's (check_dp_sync). 0, or -1 with a one-line ab_error(). */
static int check_combination(const cli *c) {
    if (!c->cfg.checkpoint_dir && (c->cfg.resume || given(c, "checkpoint-every") || given(c, "keep-checkpoints")))
        return ab_errorf("--%s needs --checkpoint-dir DIR (the folder of the run's checkpoints)",
                         c->cfg.resume ? "resume" : given(c, "checkpoint-every") ? "checkpoint-every" : "keep-checkpoints");
    if (c->cfg.loss_scale > 0.0f && c->cfg.precision != AB_PREC_AMP)
        return ab_errorf("--loss-scale %s: a static loss scale needs --precision amp (%s trains without a loss scale)",
                         c->loss_scale, ab_precision_name(c->cfg.precision));
    static const char *const dynamic_only[] = {"init-scale", "growth-factor", "backoff-factor", "growth-interval"};
    for (size_t i = 0; c->cfg.loss_scale > 0.0f && i < sizeof dynamic_only / sizeof dynamic_only[0]; i++)
        if (given(c, dynamic_only[i]))
            return ab_errorf("--loss-scale %s is static: --%s belongs to the dynamic scaler", c->loss_scale,
                             dynamic_only[i]);
    AB_TRY(check_dp_sync(c));
    /* a launcher that does not say the world's size: the trainer checks once MPI knows it */
    const int world = ab_comm_launcher_size();
    return world > 0 ? ab_parallel_config_check(&c->cfg, world) : 0;
}

/* One row: --name ARG, the help from column 27 (a '\n' continues it below), the default at
 * the end of the help's last line from column 79, or on a line of its own when too long; then
 * the row's further lines. */
static void print_row(FILE *f, const option_row *o) {
    char flag[64];
    snprintf(flag, sizeof flag, "--%s%s%s", o->name, o->arg ? " " : "", o->arg ? o->arg : "");
    int col = fprintf(f, "  %-24s", flag);
    for (const char *line = o->help, *nl;; line = nl + 1) {
        nl = strchr(line, '\n');
        const int len = nl ? (int)(nl - line) : (int)strlen(line);
        col += fprintf(f, "%*s%.*s", col < 27 ? 27 - col : 1, "", len, line);
        if (!nl) break;
        fputc('\n', f);
        col = 0;
    }
    if (o->dflt) {
        const int pad = col < 78 ? 78 - col : 1;
        if (col + pad + (int)strlen(o->dflt) + 2 <= 112) fprintf(f, "%*s[%s]", pad, "", o->dflt);
        else fprintf(f, "\n%27s[%s]", "", o->dflt);
    }
    fputc('\n', f);
    if (o->more) o->more(f);
}

static void print_help(FILE *f) {
    build_model_rows();
    fputs(usage, f);
    for (const option_row *o = rows; o < rows + N_ROWS; o++)
        if (o->name) print_row(f, o);
        else if (o->help) fprintf(f, "\n%s:\n", o->help);
        else
            for (int j = 0; j < n_model_rows; j++) print_row(f, &model_rows[j]);
}

/* row i of rows, then of model_rows */
static const option_row *row_of(int i) { return i < N_ROWS ? &rows[i] : &model_rows[i - N_ROWS]; }

/* Reads argv[1 ..] (argv[0] is the command) into c. Returns 0, or -1 with a one-line ab_error(). */
static int parse_args(int argc, char **argv, cli *c) {
    build_model_rows();
    struct option longopts[N_ROWS + MAX_MODEL_ROWS + 1];
    int n = 0;
    for (int i = 0; i < N_ROWS; i++)
        if (rows[i].name)
            longopts[n++] = (struct option){rows[i].name, rows[i].arg ? required_argument : no_argument, NULL, 256 + i};
    for (int j = 0; j < n_model_rows; j++) /* a model's options take a value */
        longopts[n++] = (struct option){model_rows[j].name, required_argument, NULL, 256 + N_ROWS + j};
    longopts[n] = (struct option){0};
    opterr = 0; /* the messages are ours */
    optind = 1;
    while (!c->help && !c->version) {
        /* "+": stop at the first argument that is not an option (no permutation), so argv[optind]
         * is the word getopt_long reads next; ":": a missing value returns ':' */
        const char *word = optind < argc ? argv[optind] : "";
        const int k = getopt_long(argc, argv, "+:", longopts, NULL);
        if (k == -1) break;
        const option_row *o = k >= 256 ? row_of(k - 256) : optopt >= 256 ? row_of(optopt - 256) : NULL;
        if (k == ':') return ab_errorf("--%s needs a value (%s)", o->name, o->arg);
        if (k == '?' && o) return ab_errorf("--%s takes no value, got '%s'", o->name, strchr(word, '=') + 1);
        if (k == '?' || !o)
            return ab_errorf("unknown option '%.*s' (see ampbench --help)", (int)strcspn(word, "="), word);
        /* getopt_long also takes unique abbreviations; a script's options should mean the same
         * thing after an option is added, so they are spelled in full */
        const size_t len = strlen(o->name);
        if (strncmp(word, "--", 2) != 0 || strncmp(word + 2, o->name, len) != 0 || (word[2 + len] && word[2 + len] != '='))
            return ab_errorf("unknown option '%.*s' (did you mean --%s? options are spelled in full)",
                             (int)strcspn(word, "="), word, o->name);
        if (o->arg && !*optarg) return ab_errorf("--%s needs a value (%s), got an empty one", o->name, o->arg);
        if (o->arg && !strchr(word, '=') && strncmp(optarg, "--", 2) == 0)
            return ab_errorf("--%s needs a value (%s), got the option '%s'", o->name, o->arg, optarg);
        if (o->set(o, optarg, c) != 0) {
            char why[512];
            snprintf(why, sizeof why, "%s", ab_error());
            return ab_errorf("--%s: %s", o->name, why);
        }
        c->given[o >= rows && o < rows + N_ROWS ? o - rows : N_ROWS + (o - model_rows)] = 1;
    }
    if (!c->help && !c->version && optind < argc)
        return ab_errorf("unexpected argument '%s' (options start with --; see ampbench --help)", argv[optind]);
    return 0;
}

/* The first INT/TERM asks the run to stop after the current step and keep its result. A repeat
 * more than a second later ends the process at once; one within that second is taken as the
 * same request delivered twice (a terminal's Ctrl-C reaches a launcher script and its child). */
static void on_signal(int sig) {
    static struct timespec first;
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    if (!ab_stop_requested()) {
        ab_request_stop();
        first = now;
    } else if ((double)(now.tv_sec - first.tv_sec) + 1e-9 * (double)(now.tv_nsec - first.tv_nsec) > 1.0) {
        signal(sig, SIG_DFL);
        raise(sig);
    }
}

static int cmp_double(const void *a, const void *b) {
    const double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* sorts v; the middle value, or the mean of the two middle ones */
static double median(double *v, int n) {
    qsort(v, (size_t)n, sizeof(double), cmp_double);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

static int run_bench(ab_train_config *c, int repeats) {
    double *epoch_s = calloc((size_t)repeats, sizeof(double)), *sps = calloc((size_t)repeats, sizeof(double));
    if (!epoch_s || !sps) return ab_errorf("out of memory");
    c->quiet = 1;
    const int lead = ab_comm_launcher_rank() == 0;
    if (lead)
        printf("ampbench bench: model %s, %s, precision %s, device %s, batch %d, %d run(s) of %d epoch(s)\n", c->model,
           c->dataset, ab_precision_name(c->precision), c->device, c->batch_size, repeats, c->epochs);
    int rc = 0;
    ab_device_info dev = {0}; /* what the runs ran on, as the backend described itself */
    for (int r = 0; r < repeats && rc == 0 && !ab_stop_requested(); r++) {
        ab_run_record rec;
        rc = ab_train_run(c, &rec);
        if (rc == 0) dev = rec.device;
        if (rc == 0 && lead) {
            double t = 0.0, n = 0.0;
            for (int e = 0; e < rec.n_epochs; e++) {
                t += rec.epochs[e].time_s;
                n += (double)rec.epochs[e].samples;
            }
            epoch_s[r] = rec.n_epochs ? t / rec.n_epochs : NAN;
            sps[r] = n / t;
            printf("  run %d: %.3f s/epoch, %.0f samples/s, test accuracy %.2f%%, data %.3f s, peak memory %zu B\n",
                   r + 1, epoch_s[r], sps[r], rec.n_epochs ? rec.epochs[rec.n_epochs - 1].test_accuracy : NAN,
                   rec.n_epochs ? rec.epochs[rec.n_epochs - 1].data_time_s : NAN, rec.mem.peak_total);
            if (rec.world_size > 1 || c->accum_steps > 1)
                printf("         world %d (%s), all-reduce %.3f s in %ld calls, %.0f bytes, %.3g B/s, "
                       "all collectives %.3f s\n",
                       rec.world_size, rec.comm_engine, rec.allreduce_time_s, rec.allreduce_calls,
                       rec.bytes_allreduced, rec.allreduce_time_s > 0 ? rec.bytes_allreduced / rec.allreduce_time_s : 0.0,
                       rec.comm_time_s);
        }
        ab_run_record_free(&rec);
    }
    if (rc == 0 && lead) {
        const double med_epoch = median(epoch_s, repeats), med_sps = median(sps, repeats); /* sorts both */
        printf("median: %.3f s/epoch (min %.3f, max %.3f), %.0f samples/s\n", med_epoch, epoch_s[0],
               epoch_s[repeats - 1], med_sps);
        if (dev.is_host) {
            printf("BLAS: %s\n", dev.blas);
            if (dev.note[0]) printf("note: %s\n", dev.note);
        }
    }
    free(epoch_s);
    free(sps);
    return rc;
}

/* Whether a batch fits: the trainer's set-up (every tensor the run holds) and, on a device, one
 * step (library workspaces grow there; on the CPU the step adds nothing to the comparable total).
 * Returns 1 (fits), 0 (out of memory) or -1 (another error); *peak = the comparable peak, *need =
 * what the refused allocation would have brought the total to (0 when it fitted). */
static int fits(const ab_train_config *c, int batch, double *peak, double *need, char *backend, size_t nb) {
    ab_train_config t = *c;
    t.batch_size = batch;
    t.quiet = 1;
    t.out_path = t.save_path = NULL;
    ab_run_record rec;
    ab_trainer *tr = NULL;
    int rc = ab_trainer_create(&t, &rec, &tr);
    if (rc == 0 && !ab_trainer_params(tr)->be->ops->is_host) {
        const int n = ab_trainer_train_samples(tr);
        int32_t *order = malloc((size_t)batch * sizeof *order);
        ab_step_result r;
        for (int i = 0; order && i < batch; i++) order[i] = i % n;
        rc = order ? ab_trainer_step(tr, order, batch, 0, 1, &r) : ab_errorf("out of host memory");
        free(order);
    }
    if (tr) ab_trainer_destroy(tr);
    *peak = (double)rec.mem.peak_total;
    *need = rec.mem.oom ? (double)rec.mem.oom_in_use + (double)rec.mem.oom_bytes : 0.0;
    if (rec.backend[0]) snprintf(backend, nb, "%s", rec.backend);
    const int oom = rec.mem.oom;
    ab_run_record_free(&rec);
    return rc == 0 ? 1 : oom ? 0 : -1;
}

/* --find-max-batch --out FILE: the search as JSON ("tool": "ampbench-fit"), which ampbench-report
 * sets beside the articles' "FP32 does not fit, AMP fits a larger batch" */
static int write_fit_record(const ab_train_config *c, const char *backend, int ok, double peak_ok, int bad,
                            double need_bad, cJSON *probes) {
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "tool", "ampbench-fit");
    cJSON_AddNumberToObject(o, "schema_version", 1);
    cJSON_AddStringToObject(o, "ampbench_version", ab_git_commit());
    cJSON_AddStringToObject(o, "model", c->model);
    cJSON_AddStringToObject(o, "dataset", c->dataset ? c->dataset : "");
    cJSON_AddStringToObject(o, "precision", ab_precision_name(c->precision));
    cJSON_AddStringToObject(o, "device", c->device);
    cJSON_AddStringToObject(o, "backend", backend);
    cJSON_AddNumberToObject(o, "max_seq_len", c->max_seq_len);
    cJSON_AddNumberToObject(o, "accum_steps", c->accum_steps);
    if (c->memory_limit) cJSON_AddNumberToObject(o, "memory_limit_bytes", (double)c->memory_limit);
    else cJSON_AddNullToObject(o, "memory_limit_bytes");
    cJSON_AddStringToObject(o, "limited_by", c->memory_limit ? "--memory-limit" : "the device's memory");
    cJSON_AddNumberToObject(o, "max_batch", ok);
    cJSON_AddNumberToObject(o, "peak_memory_at_max_batch_bytes", peak_ok);
    if (bad) {
        cJSON_AddNumberToObject(o, "first_batch_refused", bad);
        cJSON_AddNumberToObject(o, "refused_would_need_bytes", need_bad);
    } else {
        cJSON_AddNullToObject(o, "first_batch_refused");
        cJSON_AddNullToObject(o, "refused_would_need_bytes");
    }
    cJSON_AddItemToObject(o, "probes", probes);
    char *text = cJSON_Print(o);
    cJSON_Delete(o);
    const int rc = text ? ab_json_write_atomic(c->out_path, text) : ab_errorf("out of host memory");
    free(text);
    return rc;
}

/* --find-max-batch. Every answer rests on real probes: the largest batch b that fitted and b + 1
 * that did not (a run's peak grows with its batch). Without a --memory-limit (a GPU's own memory)
 * the search doubles from 1 until a batch does not fit, then bisects. Under a --memory-limit the
 * comparable peak is a sum of buffers whose sizes are each fixed or nearly a multiple of the batch
 * (weights, gradients and optimizer state; activations, workspaces), so it is close to a line in
 * the batch: the probes at 1 and 2 give the line, the batch where it reaches the limit is probed
 * with the batch after it, and the search is over in 4 probes instead of about 14 (BERT-base).
 * Where the line misses (a buffer sized by the larger of two terms, a rounding), the next guess
 * comes from the line through the two probes that bound the answer, and after three such guesses
 * the rest is bisection, so the answer is the one the bisection alone would give. */
typedef struct {
    const ab_train_config *c;
    cJSON *probes;
    char backend[16];
    int ok, bad; /* the largest batch that fitted, the smallest refused (0: none yet) */
    double peak_ok, need_bad;
    double peak_at[3]; /* the comparable peak at batches 1 and 2, for the first line */
} fit_search;

static int probe(fit_search *s, int b) {
    if (b <= s->ok) return 1; /* already known: a batch below one that fitted fits */
    if (s->bad && b >= s->bad) return 0;
    double peak, need;
    const int r = fits(s->c, b, &peak, &need, s->backend, sizeof s->backend);
    if (r < 0) return -1;
    cJSON *pr = cJSON_CreateObject();
    cJSON_AddNumberToObject(pr, "batch", b);
    cJSON_AddBoolToObject(pr, "fits", r);
    cJSON_AddNumberToObject(pr, r ? "peak_memory_bytes" : "would_need_bytes", r ? peak : need);
    cJSON_AddItemToArray(s->probes, pr);
    if (r) printf("  batch %6d: fits (comparable peak %.3f GB)\n", b, peak / 1e9);
    else printf("  batch %6d: does not fit (it would need %.3f GB)\n", b, need / 1e9);
    fflush(stdout);
    if (b <= 2) s->peak_at[b] = r ? peak : need;
    if (r) s->ok = b, s->peak_ok = peak;
    else s->bad = b, s->need_bad = need;
    return r;
}

/* The batch where the line through (b0, p0) and (b1, p1) reaches limit, kept in (lo, hi) when
 * hi > 0; 0 when the line does not rise. */
static int line_guess(double b0, double p0, double b1, double p1, double limit, int lo, int hi) {
    const double slope = (p1 - p0) / (b1 - b0);
    if (!(slope > 0)) return 0;
    double g = b0 + floor((limit - p0) / slope);
    if (g > (double)(1 << 16)) g = 1 << 16;
    if (g <= lo) g = lo + 1;
    if (hi > 0 && g >= hi) g = hi - 1;
    return (int)g;
}

/* Probes the guess g and its neighbour on the side that decides it: g + 1 when g fits, g - 1
 * when it does not. */
static int probe_pair(fit_search *s, int g) {
    const int r = probe(s, g);
    if (r < 0) return -1;
    return probe(s, r ? g + 1 : g - 1) < 0 ? -1 : 0;
}

/* Under a memory limit: the line probes. Returns -1 on an error, else 0 with s->ok and s->bad
 * what the probes found (the caller's doubling and bisection finish from there). */
static int line_probes(fit_search *s, double limit) {
    for (int b = 1; b <= 2; b++) {
        const int r = probe(s, b);
        if (r <= 0) return r < 0 ? -1 : 0;
    }
    int g = line_guess(1, s->peak_at[1], 2, s->peak_at[2], limit, 2, 0);
    if (g <= 2) return 0;
    AB_TRY(probe_pair(s, g));
    for (int round = 0; round < 3 && s->bad && s->bad - s->ok > 1; round++) {
        g = line_guess(s->ok, s->peak_ok, s->bad, s->need_bad, limit, s->ok, s->bad);
        if (!g) break;
        AB_TRY(probe_pair(s, g));
    }
    return 0;
}

static int find_max_batch(const ab_train_config *c) {
    if (!c->memory_limit && ab_device_is_host(c->device) == 1)
        return ab_errorf("--find-max-batch on the CPU needs --memory-limit SIZE (the memory to fit in)");
    fit_search s = {.c = c, .probes = cJSON_CreateArray()};
    int rc = c->memory_limit ? line_probes(&s, (double)c->memory_limit) : 0;
    /* doubling from the largest batch known to fit until one does not, then bisection */
    for (int b = s.ok ? s.ok * 2 : 1; rc == 0 && !s.bad && b <= (1 << 16); b *= 2) {
        const int r = probe(&s, b);
        if (r < 0) rc = -1;
        if (r <= 0) break;
    }
    while (rc == 0 && s.bad && s.bad - s.ok > 1)
        if (probe(&s, s.ok + (s.bad - s.ok) / 2) < 0) rc = -1;
    if (rc != 0) {
        cJSON_Delete(s.probes);
        return -1;
    }
    printf("largest batch that fits: %d (%s, %s, %s, comparable peak %.3f GB)", s.ok, c->model,
           ab_precision_name(c->precision), c->device, s.peak_ok / 1e9);
    if (c->memory_limit) printf(" under --memory-limit %.3f GB", c->memory_limit / 1e9);
    if (s.bad) printf("; batch %d does not fit (it would need %.3f GB)", s.bad, s.need_bad / 1e9);
    printf("\n");
    if (!c->out_path) {
        cJSON_Delete(s.probes);
        return 0;
    }
    if (write_fit_record(c, s.backend, s.ok, s.peak_ok, s.bad, s.need_bad, s.probes) != 0) return -1;
    printf("result: %s\n", c->out_path);
    return 0;
}

/* ampbench recipe --model M [--format conf|json]: the model's recipe (models/registry.c), the one
 * source of what run_all.sh and the peers train with */
static int recipe(int argc, char **argv) {
    const char *model = NULL, *format = "conf";
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
            printf("usage: ampbench recipe --model M [--format conf|json]\n"
                   "the model's recipe (models/registry.c): as the options that set it (conf), or as JSON\n");
            return 1; /* printed: main exits 0 */
        }
        if (i + 1 < argc && strcmp(argv[i], "--model") == 0) model = argv[++i];
        else if (strncmp(argv[i], "--model=", 8) == 0) model = argv[i] + 8;
        else if (i + 1 < argc && strcmp(argv[i], "--format") == 0) format = argv[++i];
        else if (strncmp(argv[i], "--format=", 9) == 0) format = argv[i] + 9;
        else return ab_errorf("recipe: unknown option or missing value '%s' (ampbench recipe --model M [--format conf|json])",
                              argv[i]);
    }
    if (!model) return ab_errorf("recipe: --model M is required");
    if (strcmp(format, "conf") != 0 && strcmp(format, "json") != 0)
        return ab_errorf("recipe: --format %s: expected conf or json", format);
    const ab_recipe *r = ab_workload_recipe(model);
    if (!r) return ab_errorf("recipe: unknown model '%s' (see ampbench --help)", model);
    char buf[1024];
    AB_TRY(ab_recipe_format(r, strcmp(format, "json") == 0, buf, sizeof buf));
    printf("%s\n", buf);
    return 0;
}

/* ampbench tokenize: the ids a user diffs against another tokenizer's */
static int tokenize(int argc, char **argv) {
    static const struct option opts[] = {{"vocab", required_argument, NULL, 'v'}, {"max-seq-len", required_argument, NULL, 'n'},
                                         {"task", required_argument, NULL, 't'}, {"cased", no_argument, NULL, 'c'},
                                         {NULL, 0, NULL, 0}};
    const char *vocab = NULL, *task_name = NULL;
    long max_len = 128;
    int cased = 0;
    opterr = 0;
    optind = 1;
    for (;;) {
        const char *word = optind < argc ? argv[optind] : "";
        const int k = getopt_long(argc, argv, "+:", opts, NULL);
        if (k == -1) break;
        if (k == ':') return ab_errorf("tokenize: %s needs a value", word);
        if (k == '?') return ab_errorf("tokenize: unknown option '%s' (see ampbench --help)", word);
        if (k == 'v') vocab = optarg;
        else if (k == 't') task_name = optarg;
        else if (k == 'c') cased = 1;
        else AB_TRY(parse_long(optarg, 3, 1 << 16, &max_len));
    }
    if (!vocab) return ab_errorf("tokenize: --vocab FILE is required (BERT's vocab.txt)");
    if (optind != argc - 1) return ab_errorf("tokenize: one input FILE expected (see ampbench --help)");
    const char *path = argv[optind];
    ab_wordpiece *wp;
    AB_TRY(ab_wp_load(vocab, !cased, &wp));
    int32_t *ids = malloc((size_t)max_len * sizeof *ids), *mask = malloc((size_t)max_len * sizeof *mask);
    int rc = (!ids || !mask) ? ab_errorf("out of host memory") : 0;
    ab_glue_split sp = {0};
    const ab_glue_task_info *task = NULL;
    char **lines = NULL;
    int n = 0;
    if (rc == 0 && task_name) {
        rc = ab_glue_task(task_name, &task);
        if (rc == 0) rc = ab_glue_read(path, task, 0, &sp);
        n = sp.n;
    } else if (rc == 0) { /* one text a line, the line's end taken off */
        FILE *f = fopen(path, "rb");
        if (!f) rc = ab_errorf("%s: cannot open (%s)", path, strerror(errno));
        char *line = NULL;
        size_t cap = 0;
        ssize_t len;
        int have = 0;
        while (rc == 0 && f && (len = getline(&line, &cap, f)) >= 0) {
            while (len > 0 && (line[len - 1] == '\n' || line[len - 1] == '\r')) line[--len] = 0;
            if (n == have) {
                have = have ? 2 * have : 1024;
                char **l = realloc(lines, (size_t)have * sizeof *l);
                if (!l) rc = ab_errorf("out of host memory");
                else lines = l;
            }
            if (rc == 0 && !(lines[n++] = strdup(line))) rc = ab_errorf("out of host memory");
        }
        free(line);
        if (f) fclose(f);
    }
    for (int i = 0; rc == 0 && i < n; i++) {
        char where[1200];
        snprintf(where, sizeof where, "%s:%d", path, task ? sp.lines[i] : i + 1);
        const char *a = task ? sp.a[i] : lines[i], *b = task && sp.b ? sp.b[i] : NULL;
        int real = 0;
        rc = ab_wp_encode(wp, a, strlen(a), b, b ? strlen(b) : 0, (int)max_len, ids, NULL, mask, &real, where);
        for (int k = 0; rc == 0 && k < real; k++) printf(k ? " %d" : "%d", ids[k]);
        if (rc == 0) putchar('\n');
    }
    for (int i = 0; i < n && !task; i++) free(lines[i]);
    free(lines);
    ab_glue_split_free(&sp);
    free(ids);
    free(mask);
    ab_wp_free(wp);
    return rc;
}

static int print_version(void) {
    printf("ampbench %s%s\n", ab_git_commit(),
           ab_git_dirty() > 0 ? " (modified)" : ab_git_dirty() < 0 ? " (tree state unknown)" : "");
    return 0;
}

/* OpenBLAS picks its kernels when the library loads, by the CPU model; on one it does not know
 * (virtual machines report such models) it takes generic SSE3 kernels, 3-4x slower than the AVX-512
 * ones this CPU may have, and on an AMD Zen with AVX-512 its AVX2 (Haswell) kernels, half the
 * rate on a Zen 5's full-width AVX-512 (a build with oneDNN, which does the products, skips this).
 * Before anything else (MPI included), ampbench runs itself again with
 * OPENBLAS_CORETYPE naming the kernels the CPU supports, unless OPENBLAS_CORETYPE is set already
 * (the user's choice is kept; the re-run has it set, so this happens once). If the exec fails, the
 * run goes on with the generic kernels, and `ampbench bench` says so. */
static void choose_blas_kernels(char **argv) {
    if (getenv("OPENBLAS_CORETYPE")) return;
    const char *better = ab_backend_cpu_blas_better_core();
    if (!better || setenv("OPENBLAS_CORETYPE", better, 1) != 0) return;
    execv("/proc/self/exe", argv);
    unsetenv("OPENBLAS_CORETYPE");
}

/* --profile-ops: the platform's backend inside the profiling one, its table printed at the end */
static ab_backend *profiled_backend(const char *device, int index, int threads, int quiet) {
    ab_backend *inner = ab_backend_create_on(device, index, threads, quiet);
    if (!inner) return NULL;
    ab_backend *be = ab_backend_prof_create(inner);
    if (!be) {
        inner->ops->destroy(inner);
        return NULL;
    }
    ab_prof_report_at_destroy(be, stdout);
    return be;
}
static const ab_platform_ops profiled_platform = {
    .comm_create = ab_comm_create, .backend_create = profiled_backend, .host_create = ab_backend_host_create};

int main(int argc, char **argv) {
    choose_blas_kernels(argv);
    if (argc < 2 || strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0) {
        print_help(argc < 2 ? stderr : stdout);
        return argc < 2 ? 2 : 0;
    }
    if (strcmp(argv[1], "--version") == 0) return print_version();
    if (strcmp(argv[1], "tokenize") == 0) {
        const int rc = tokenize(argc - 1, argv + 1);
        if (rc != 0) fprintf(stderr, "ampbench: %s\n", ab_error());
        return rc ? (strncmp(ab_error(), "tokenize:", 9) == 0 ? 2 : 1) : 0;
    }
    if (strcmp(argv[1], "model-step") == 0) return ab_model_step_main(argc, argv);
    if (strcmp(argv[1], "recipe") == 0) {
        const int rc = recipe(argc - 1, argv + 1);
        if (rc >= 0) return 0; /* the recipe, or the command's help */
        fprintf(stderr, "ampbench: %s\n", ab_error());
        return 2;
    }
    const int is_train = strcmp(argv[1], "train") == 0, is_bench = strcmp(argv[1], "bench") == 0;
    if (!is_train && !is_bench) {
        fprintf(stderr, "ampbench: unknown command '%s' (expected train, bench, model-step, recipe or tokenize; see --help)\n",
                argv[1]);
        return 2;
    }
    cli opts = {.repeats = 5};
    ab_train_config_defaults(&opts.cfg);
    opts.cfg.workload = &ab_workloads;
    opts.cfg.platform = &ab_platform;
    opts.cfg.step_model = ab_model_step_hook;
    opts.cfg.checkpoints = &ab_checkpoint_store;
    opts.cfg.record = &ab_record_json;
    /* two passes: the first only learns --model, whose recipe then sets the defaults that the
     * second pass's options override */
    cli first = opts;
    if (parse_args(argc - 1, argv + 1, &first) == 0 && !first.help && !first.version) {
        const ab_recipe *r = ab_workload_recipe(first.cfg.model);
        if (r) ab_recipe_apply(r, &opts.cfg);
    }
    if (parse_args(argc - 1, argv + 1, &opts) != 0 || (!opts.help && !opts.version && check_combination(&opts) != 0)) {
        /* every rank of a launched job has the same options: one says what is wrong */
        if (ab_comm_launcher_rank() == 0) fprintf(stderr, "ampbench: %s\n", ab_error());
        return 2;
    }
    if (opts.help) {
        print_help(stdout);
        return 0;
    }
    if (opts.version) return print_version();
    if (opts.profile_ops) {
        int world = 1;
        if (ab_comm_launched(&world) && world > 1) {
            fprintf(stderr, "ampbench: --profile-ops profiles one process: run it without mpirun\n");
            return 2;
        }
        if (opts.find_max_batch) {
            fprintf(stderr, "ampbench: --profile-ops profiles a training run, not --find-max-batch's probes\n");
            return 2;
        }
        opts.cfg.platform = &profiled_platform;
    }
    if ((is_bench || opts.find_max_batch) && (opts.cfg.checkpoint_dir || opts.cfg.resume)) {
        fprintf(stderr, "ampbench: --checkpoint-dir and --resume belong to ampbench train, not to %s\n",
                is_bench ? "bench" : "--find-max-batch");
        return 2;
    }
    const ab_train_config *cfg = &opts.cfg;
    /* on their own stack: the CPU backend's products may be interrupted (ab_cpu_handle_signal) */
    if (ab_cpu_handle_signal(SIGINT, on_signal) != 0 || ab_cpu_handle_signal(SIGTERM, on_signal) != 0) {
        fprintf(stderr, "ampbench: %s\n", ab_error());
        return 1;
    }
    int rc, did_not_fit = 0, usage = 0;
    if (opts.find_max_batch) {
        rc = find_max_batch(&opts.cfg);
    } else if (is_bench) {
        rc = run_bench(&opts.cfg, opts.repeats);
    } else {
        ab_run_record rec;
        rc = ab_train_run(cfg, &rec);
        did_not_fit = rc != 0 && rec.mem.oom;
        usage = rc != 0 && rec.usage_error;
        if (rc == 0 && cfg->out_path && !cfg->quiet && rec.rank == 0) printf("result: %s%s\n", cfg->out_path, rec.interrupted ? " (interrupted)" : "");
        if (rc == 0 && rec.interrupted) rc = 130;
        ab_run_record_free(&rec);
    }
    if (rc == -1 && usage) { /* every rank refused the same options before training: no job to abort */
        const int first = ab_comm_launcher_rank() == 0;
        if (first) fprintf(stderr, "ampbench: %s\n", ab_error());
        ab_mpi_finalize();
        /* rank 0 alone exits 2, which mpirun passes on: another rank's non-zero exit would have it
         * abort the job, and rank 0 with it, perhaps before its line was forwarded. OpenMPI's
         * mpirun may also leave a rank's last output unwritten when that rank's non-zero exit ends
         * the job (the line went missing twice in the ASan suite's 3-rank refusal): rank 0 gives it
         * 0.3 s to forward the line before it exits. */
        if (first && ab_comm_launcher_size() > 1) {
            const struct timespec wait = {0, 300000000L};
            nanosleep(&wait, NULL);
        }
        return first ? 2 : 0;
    }
    if (rc == -1) {
        int world = 1;
        if (ab_comm_launched(&world) && world > 1) {
            /* the other ranks may be waiting in a collective: end the whole job now */
            fprintf(stderr, "ampbench: rank %d: %s\n", ab_comm_launcher_rank(), ab_error());
            fflush(stderr);
            ab_mpi_abort(1);
        }
        fprintf(stderr, "ampbench: %s\n", ab_error());
        ab_mpi_finalize();
        return did_not_fit ? 3 : 1; /* 3: the run did not fit in memory (its record says so) */
    }
    ab_mpi_finalize();
    return rc;
}
