/* The harness library behind ampbench-report and ampbench-regress: loads a run folder (the JSON
 * results `ampbench train` wrote, one per run, the PyTorch peers' results in the same format, and
 * run_all.sh's run.json), groups the runs by workload (ampbench's and the peer's apart), computes
 * the ratios the articles claim (AMP time and memory saving, accuracy delta, data-parallel
 * speed-up and efficiency), loads harness/reported.json, and writes REPORT.md and the gnuplot
 * plots. Functions return 0 or -1 with a one-line message in ab_error(). */
#ifndef AB_HARNESS_H
#define AB_HARNESS_H

#include <stdio.h>

#include <cjson/cJSON.h>

#include "ab.h"
#include "mem.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Plot size in pixels: every PNG the harness draws has this size (the PNG test checks it). */
#define HR_PLOT_W 960
#define HR_PLOT_H 600

/* Results per run folder: a --seeds 3 run of 5 workloads in 4 modes with the peers is about 150.
 * An hr_runset holds HR_MAX_RUNS records (about 1.5 MB): allocate it, never on the stack. */
#define HR_MAX_RUNS 512
#define HR_MAX_WORKLOADS 16
/* (tool, precision, world size) groups of one workload that the seed statistics keep apart */
#define HR_MAX_GROUPS 32
/* The memory categories of peak_memory_bytes that make up the comparable total: core/mem.h's
 * categories before AB_MEM_CPU_SCRATCH, in its order; their JSON keys are ab_mem_category_name(k). */
#define HR_MEM_CATS ((int)AB_MEM_CPU_SCRATCH)

/* One result file, reduced to the figures the report and the regression check use. */
typedef struct {
    char path[1024];
    char name[128];      /* file name without .json, e.g. "mlp-amp", "mlp-fp32-pytorch" */
    char tool[16];       /* "ampbench", or the peer's tool ("pytorch") */
    int peer;            /* 1 when tool is not ampbench: a peer implementation's result */
    char model[64];      /* workload.model */
    char dataset[64];
    char precision[16];  /* fp32 | amp | bf16 */
    char backend[16];    /* cpu | cuda */
    char device[128];    /* GPU or CPU name */
    char engine[16];     /* data_parallel.engine, "" when absent */
    int world_size;
    int seed;            /* workload.seed, 1 when absent (run_all.sh --seeds N: 1..N) */
    int complete, interrupted;
    int resumes; /* resumed_at_steps: the times the run continued from a checkpoint */
    uint8_t *hit;    /* test_predictions.correct decoded: 1 where example i was right; NULL when absent */
    long n_hit;      /* its examples */
    char commit[48]; /* git_commit: the source the record's program was built from, "unknown" */
    int dirty;       /* git_dirty: 1 uncommitted changes, 0 clean, -1 not recorded */
    int epochs_done, epochs_requested;
    long steps, max_steps, batch_size;
    long train_samples, test_samples; /* workload.*: the samples each split had (after a subset) */
    long train_subset, test_subset;   /* 0 = all */
    double total_time_s, mean_epoch_time_s, samples_per_s;
    /* peak_memory_bytes: each category at its own peak; total = the peak of the sum of every
     * category but cpu_scratch (what a GPU run of the configuration holds). cpu_scratch and
     * total_with_cpu_scratch are NAN in records that predate them. A peer that did not measure
     * memory (total 0) has peak_total NAN. */
    double peak_total, peak_cpu_scratch, peak_total_with_scratch;
    double peak_cat[HR_MEM_CATS]; /* by ab_mem_category: the categories in the comparable total */
    char mem_method[384]; /* peak_memory_bytes.method (peers), "" when absent */
    double final_accuracy, final_train_loss;
    int overflow_events;
    long skipped_steps;
    double init_scale, final_scale;
    /* mixed_precision.loss_scale_mode "static" (--loss-scale S, the ablation's runs): S; 0 under a dynamic
     * scale or none. Such a run is AMP without the scaler's growth and backoff: kept out of the
     * AMP slots and all[], so that the ratios and tables stay those of GradScaler's AMP. */
    double static_scale;
    int has_projection;
    /* the record's step_model (modelled, not measured): the step and the GPU (NAN and "" when the
     * record has none), and its projection's step_source ("" in records that predate it) */
    double model_step_s;
    double model_samples_per_step; /* batch x micro-batches x ranks: what one modelled step trains on */
    char model_gpu[24], model_gpu_label[64], step_source[48];
    /* a run refused for want of memory ("fits_in_memory": false): kept out of the ratios */
    int did_not_fit;
    double memory_limit;   /* memory_limit_bytes, NAN without --memory-limit */
    double oom_would_need; /* out_of_memory.would_need_bytes, NAN when it fitted */
    /* data parallelism as the record's data_parallel says: the pattern (ring or ps, its servers),
     * overlap (1 in records that predate it), micro-batches per synchronisation, and per step the
     * exposed and busy reduction, the parameter server's pull and the most bytes a rank sent */
    char dp_sync[8];
    int dp_shards, dp_overlap, accum_steps;
    double dp_exposed_s, dp_busy_s, dp_pull_s, dp_sent_max;
    /* a data-parallel run of another pattern than the standard one (the ring, overlapped, at the
     * workload's own accumulation): kept out of the slots and all[], shown in the comparison of
     * patterns (hr_write_dp_patterns) */
    int dp_variant;
    /* model parallelism as the record's model_parallel says (docs/parallelism.md): the grid (1 x 1
     * for a run without it), the tensor group's bytes a step per rank, measured and modelled, the
     * pipeline's schedule and micro-batches, and over its stages the most bytes a stage sent a step
     * (measured, modelled), the most idle time over busy time, (P - 1) / M; and the most peak
     * memory any rank held (data_parallel's per-rank list; the run's own without one). A run split
     * so (model_split) is kept out of the slots and all[], compared in hr_write_model_parallel. */
    int tensor_parallel, pipeline_parallel, data_parallel, model_split;
    double tp_calls_step, tp_bytes_step, tp_bytes_model;
    char pp_schedule[8];
    int pp_micro;
    double pp_bytes_max, pp_bytes_model_max, pp_stage0_bytes_model, pp_idle_max, pp_bubble_model;
    double peak_rank_max;
    cJSON *json;           /* the whole record (owned) */
} hr_run;

/* One `ampbench train --find-max-batch --out FILE` record ("tool": "ampbench-fit"). */
typedef struct {
    char name[128], model[64], precision[16], backend[16], limited_by[32];
    double memory_limit;    /* bytes, NAN when the device's own memory was the limit */
    long max_batch, first_refused; /* first_refused 0: none was refused */
    double peak_at_max, refused_would_need;
    int max_seq_len;
} hr_fit;

/* One line of run_all.sh's manifest: a run that was planned (ok, failed, skipped, interrupted). */
typedef struct {
    char name[128], workload[64], mode[32], status[32], reason[512];
    char tool[16]; /* "ampbench" or the peer's ("pytorch") */
} hr_planned;

/* A run folder: large (HR_MAX_RUNS records), so callers allocate it. */
typedef struct {
    char dir[1024];
    hr_run runs[HR_MAX_RUNS];
    int n_runs;
    cJSON *manifest; /* run.json, NULL when the folder has none */
    hr_planned planned[HR_MAX_RUNS];
    int n_planned;
    char peers_note[256]; /* run.json's "peers": why no peer ran ("" when they ran or no run.json) */
    hr_fit fits[HR_MAX_RUNS];
    int n_fits;
} hr_runset;

/* Loads every *.json in dir whose top level says "tool": "ampbench" or "pytorch" (other JSON
 * files are ignored; a file that is not valid JSON is an error naming it), the "ampbench-fit"
 * records of --find-max-batch, and run.json when present. */
int hr_runset_load(const char *dir, hr_runset *rs);
void hr_runset_free(hr_runset *rs);
/* Reads and parses one result file into r (used by the loader and by `ampbench-report --line`). */
int hr_run_load(const char *path, hr_run *r);
void hr_run_free(hr_run *r);
/* One line: "fp32 cpu 1 rank: 200 steps in 1.23 s, 10400 samples/s, 86.10% test accuracy". */
void hr_run_summary_line(const hr_run *r, char *buf, size_t n);

/* The three runs the ratios come from, for one model; any may be NULL. ampbench's runs and the
 * peer's are kept apart: fp32/amp/dp and all[] are ampbench's, peer_* the peer's. When a mode ran
 * with several seeds, its slot holds the lowest seed's run (so the ratios of a --seeds run are
 * those of seed 1, as in a single-seed run); all[] and peer_all[] hold every seed. */
typedef struct {
    char model[64];
    const hr_run *fp32, *amp, *dp;
    const hr_run *all[HR_MAX_RUNS]; /* every ampbench run of this model: FP32, AMP, BF16, data-parallel */
    int n_all;
    int max_seeds; /* the most distinct seeds of any (tool, precision, world size): 1 in a single-seed run */
    char peer_tool[16]; /* the peer's tool name, "" when the folder has no peer result */
    const hr_run *peer_fp32, *peer_amp, *peer_dp;
    const hr_run *peer_all[HR_MAX_RUNS];
    int n_peer;
    /* ampbench's runs that did not fit (fp32, amp, data-parallel), and the largest-batch searches */
    const hr_run *oom_fp32, *oom_amp, *oom_dp;
    const hr_fit *fit_fp32, *fit_amp;
    /* the loss-scale ablation: ampbench's and the peer's single-process AMP runs under a static
     * scale (the lowest seed), NULL when none ran */
    const hr_run *amp_static, *peer_amp_static;
    /* ampbench's data-parallel runs of other patterns (hr_run.dp_variant), lowest seed of each */
    const hr_run *dp_var[16];
    int n_dp_var;
    /* ampbench's runs with the model split (hr_run.model_split): tensor groups, pipeline stages
     * (the lowest seed of each) */
    const hr_run *tp, *pp;
} hr_workload;

/* One workload per model with any result (ampbench's or the peer's), in the order first seen. */
int hr_group_workloads(const hr_runset *rs, hr_workload *out, int max, int *n);

/* The data-parallel patterns of a workload (harness/report_dp.c): measured, the standard
 * run and its variants against the one-device AMP run; projected, core/dpmodel.h's rows of the
 * projection run at n devices of kind (the articles' setting), beside the articles' speed-up
 * claim (NAN: none). */
void hr_write_dp_patterns(FILE *f, const hr_workload *w, int n, const char *kind, double claim_speedup);
/* the speed-up a projection run's dp_models row gives; NAN when the row is not there */
double hr_dp_model_speedup(const hr_run *pr, const char *kind, int n, const char *sync, int shards, int overlap,
                           int accum);
/* Data, tensor and pipeline parallelism side by side for a workload (harness/report_mp.c):
 * measured on the ranks that ran (time, memory per rank, bytes a step, the pipeline's idle share
 * beside (P - 1) / M, accuracy), a split the model refused with its reason, and projected for 2,
 * 4 and 8 GPUs from the modelled GPU step of the projection run. */
void hr_write_model_parallel(FILE *f, const hr_runset *rs, const hr_workload *w);
/* the manifest's entry of a workload's planned run in mode (the last one), NULL when none */
const hr_planned *hr_planned_run(const hr_runset *rs, const char *workload, const char *mode, int peer);

/* view: w with the peer's runs in the fp32/amp/dp/all slots, so that the ratios of the peer come
 * from the same hr_compute_ratios. */
void hr_peer_view(const hr_workload *w, hr_workload *view);
/* The run of list[0..n) that stands for r's tool, precision and world size: the one the slots
 * above would hold (the lowest seed; among runs of one seed the complete one with most steps). */
const hr_run *hr_mode_run(const hr_run *const *list, int n, const hr_run *r);

/* One tool's runs in one mode (precision, world size) of a workload, one run per seed in
 * ascending seed order, and the final test accuracy (points) and train loss over them. */
typedef struct {
    char tool[16];
    char precision[16];
    int world_size;
    int peer;
    const hr_run *runs[HR_MAX_RUNS];
    int n;
    double acc_mean, acc_sd, acc_min, acc_max; /* acc_sd: sample standard deviation (n - 1), NAN when n < 2 */
    double loss_mean;                          /* over the runs with a train loss, NAN when none has one */
} hr_seed_group;

/* The seed groups of w: ampbench's in run order (FP32, AMP, BF16, data-parallel), then the peer's.
 * complete_only: only complete runs with a final test accuracy (the statistics of REPORT.md); else
 * every run (the accuracy plot, which reads the epochs each run finished). Error past max groups. */
int hr_seed_groups(const hr_workload *w, int complete_only, hr_seed_group *out, int max, int *n);

/* mean(a) - mean(b) of the final test accuracy, with a 95% interval from two sources of error:
 *   - the seeds: a paired t interval on the per-seed differences when pairing is allowed and a and
 *     b ran the same seeds, else Welch's (half-width t * se_seeds);
 *   - the test set's own sampling error: N examples estimate each accuracy p with variance
 *     p (1 - p) / N whatever the number of seeds (they all read the same N). Without per-example
 *     predictions the covariance of the two modes' outcomes is unknown; it is bounded by taking
 *     it as 0 (two modes that agree example by example are positively correlated, so the true
 *     variance is smaller): se_test^2 = (pa (1 - pa) + pb (1 - pb)) / N (half-width 1.96 se_test).
 *     With paired seeds whose records keep their predictions example by example, the covariance is
 *     known: per seed, with p10 and p01 the shares of examples only a and only b got right,
 *     se^2 = (p10 + p01 - (p10 - p01)^2) / N; se_test is the mean of the seeds' se (the seeds share
 *     the test set, so their errors may move together), and the half-width is at least
 *     100 (1 - 0.025^(1/N)): with no discordant example seen, N examples cannot rule out a
 *     discordance that small.
 * The half-width is sqrt((t se_seeds)^2 + (1.96 se_test)^2): identical values on both sides give a
 * width of zero only if the test set were infinite. lo, hi NAN when a side has fewer than 2 seeds
 * (the seeds' variation is then unknown). */
typedef struct {
    int n_a, n_b;
    int paired;
    double mean;       /* points */
    double df, t;      /* degrees of freedom (Welch's: fractional) and the t quantile used */
    double se_seeds;   /* points: the seeds' standard error of the mean difference */
    double se_test;    /* points: the test set's, NAN when the runs do not say N alike */
    int test_paired;   /* 1: se_test from the runs' predictions example by example (paired seeds whose
                        * records keep test_predictions); 0: the bound without covariance */
    long disc_ab[HR_MAX_RUNS], disc_ba[HR_MAX_RUNS]; /* test_paired: per seed, examples a got right and
                                                      * b wrong, and the reverse (McNemar's b and c) */
    double mcnemar_p[HR_MAX_RUNS];                   /* per seed, McNemar's exact two-sided p */
    int seed[HR_MAX_RUNS];                           /* test_paired: the seeds, in that order */
    long test_n;       /* N, the test examples every run was evaluated on; 0 when they differ or unknown */
    double lo, hi;     /* NAN when a side has fewer than 2 seeds */
} hr_interval;

void hr_diff_interval(const hr_seed_group *a, const hr_seed_group *b, int allow_pairing, hr_interval *out);
/* McNemar's exact test: the two-sided p of b discordant pairs one way and c the other (binomial,
 * n = b + c, 1/2); 1 when there are none. */
double hr_mcnemar_p(long b, long c);
/* Mean and sample standard deviation (n - 1 in the denominator; NAN when n < 2) of v[0..n). */
void hr_mean_sd(const double *v, int n, double *mean, double *sd);
/* The two-sided 95% t quantile for df degrees of freedom (rounded down): a table for 1..30, 1.96
 * beyond; NAN below 1. */
double hr_t95(double df);

/* A ratio is NAN when the runs it needs are missing. */
typedef struct {
    double amp_time_saving_pct;    /* 100 * (1 - samples_per_s(fp32) / samples_per_s(amp)) */
    double amp_memory_saving_pct;  /* 100 * (1 - peak_total(amp) / peak_total(fp32)) */
    double amp_accuracy_delta;     /* points: accuracy(amp) - accuracy(fp32) */
    int dp_ranks;                  /* world size of the data-parallel run, 0 when none */
    double dp_speedup_vs_amp;      /* samples_per_s(dp) / samples_per_s(amp) */
    double dp_speedup_vs_fp32;     /* samples_per_s(dp) / samples_per_s(fp32) */
    double dp_efficiency_pct;      /* 100 * dp_speedup_vs_amp / dp_ranks */
    double dp_time_saving_pct;     /* 100 * (1 - 1 / dp_speedup_vs_amp) */
    /* from the projection object (projected, not measured), the point of proj_n devices */
    int proj_n;
    char proj_kind[16];
    double proj_speedup, proj_efficiency_pct, proj_epoch_time_s;
    double proj_bandwidth_Bps, proj_latency_s; /* the link of the point read (a node's network for "nodes") */
    double proj_speedup_vs_fp32; /* proj_speedup * samples_per_s(amp) / samples_per_s(fp32) */
    /* MODELLED: 100 * (1 - per-sample step_model(amp) / per-sample step_model(fp32)) when both records
     * model the same GPU */
    double model_amp_time_saving_pct;
    char model_gpu[24], model_gpu_label[64];
} hr_ratios;

/* proj_n, proj_kind: the projection point read (4 "gpus": the articles' 4 GPUs; 4 "nodes"). */
void hr_compute_ratios(const hr_workload *w, int proj_n, const char *proj_kind, hr_ratios *out);
/* The run whose projection object is used (an NCCL data-parallel run, else the single-device AMP
 * run, else any); NULL when none. */
const hr_run *hr_projection_run(const hr_workload *w);

/* harness/reported.json */
typedef struct {
    cJSON *json;
} hr_reported;

int hr_reported_load(const char *path, hr_reported *rep);
void hr_reported_free(hr_reported *rep);
/* The reported workload a model's figures are: the model itself when reported.json has it, else
 * the reported workload whose name begins the model's followed by '-' (resnet50-cifar: the
 * articles' resnet50, a variant of the same network), else the model. The claim look-ups below
 * go through it. */
const char *hr_reported_key(const hr_reported *rep, const char *model);
/* The first claim with this workload and metric; when the workload has none and fallback is set,
 * the first claim of any workload with this metric. NULL when none. */
const cJSON *hr_reported_claim(const hr_reported *rep, const char *workload, const char *metric, int fallback);
/* The claim with this workload, mode ("fp32", "amp", "dp-amp") and metric; NULL when none. */
const cJSON *hr_reported_claim_mode(const hr_reported *rep, const char *workload, const char *mode, const char *metric);
/* The workloads object entry for a model (title, setting, epochs), NULL when none. */
const cJSON *hr_reported_workload(const hr_reported *rep, const char *model);

/* Writes dir/REPORT.md (out_dir overrides where it goes). plots_rel: the plots' folder relative to
 * REPORT.md, or NULL when there are none. */
int hr_write_report(const hr_runset *rs, const hr_reported *rep, const char *out_path, const char *plots_rel,
                    char drawn[][128], int n_drawn);

/* The label a reader sees for each memory category of the comparable total (k < HR_MEM_CATS, in
 * the order of the memory table and the stacked bars). */
extern const char *const hr_mem_labels[];
/* Category k's peak bytes of a run (k < HR_MEM_CATS). */
double hr_mem_cat(const hr_run *r, int k);

/* Writes the plot data under out_dir/data and draws PNGs into out_dir with gnuplot, using the
 * scripts in gp_dir. drawn receives the PNG file names written (up to max). Returns -1 when
 * gnuplot is missing or fails. */
int hr_draw_plots(const hr_runset *rs, const hr_reported *rep, const char *gp_dir, const char *out_dir,
                  char drawn[][128], int max, int *n_drawn);
/* What the plot files share (report_plots.c): a label gnuplot takes as one quoted word; a data
 * file under the data folder; gnuplot run on plots/SCRIPT in that folder with vars; a PNG's name
 * added to drawn. */
void hr_safe_label(char *dst, size_t n, const char *src);
FILE *hr_open_data(const char *data_dir, const char *name);
int hr_gnuplot(const char *data_dir, const char *gp_dir, const char *script, const char *vars);
int hr_add_drawn(char drawn[][128], int max, int *n, const char *name);

/* The gradient range of w (report_census.c), from the grad_census of its FP32, AMP and static-
 * scale AMP runs: REPORT.md's part (nothing when no run took a census or ran at a static scale),
 * and the two plots, grad_hist_<model>.png and grad_layers_<model>.png. */
void hr_write_grad_range(FILE *f, const hr_workload *w);
int hr_plot_grad_range(const hr_workload *w, const char *data_dir, const char *gp_dir, char drawn[][128], int max,
                       int *n);

/* A record's mixed-precision section: "mixed_precision", or "amp" in records written before that
 * name (the same fields); NULL when it has neither. */
const cJSON *hr_mixed_precision(const cJSON *record);

/* Small helpers shared by the tools. */
double hr_num(const cJSON *o, const char *key, double dflt);
const char *hr_str(const cJSON *o, const char *key, const char *dflt);
int hr_read_file(const char *path, char **text);
int hr_mkdir_p(const char *path);
/* Writes text to path through a temporary file and a rename. */
int hr_write_atomic(const char *path, const char *text);

#ifdef __cplusplus
}
#endif
#endif
