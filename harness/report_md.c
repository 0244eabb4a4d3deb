/* REPORT.md: one table per workload with the reported and the measured figures side by side and
 * a sentence on what the difference means, built from the facts of the runs (backend, ranks,
 * steps, the memory categories), never from fixed verdicts; then peak memory by category (FP32
 * beside AMP) and ampbench beside its PyTorch peer. */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"

#define DASH "—"

static const char *fmt_num(char *buf, size_t n, double v, const char *fmt) {
    if (!isfinite(v)) return DASH;
    snprintf(buf, n, fmt, v);
    return buf;
}

/* bytes as "8.59 GB" from 1 GB, else "48.2 MB" */
static const char *fmt_bytes(char *buf, size_t n, double b) {
    if (b >= 1e9) snprintf(buf, n, "%.2f GB", b / 1e9);
    else snprintf(buf, n, "%.1f MB", b / 1e6);
    return buf;
}

/* what one sample of the run's data set is: "images" (MNIST, CIFAR-10), else "examples" (GLUE) */
static const char *samples_word(const hr_run *r) {
    return r && (strstr(r->dataset, "mnist") || strstr(r->dataset, "cifar")) ? "images" : "examples";
}

/* "40% (1x NVIDIA RTX 3090)" or "0 to 1 points (...)"; "ResNet-50 claim" when borrowed. */
static void claim_cell(char *buf, size_t n, const hr_reported *rep, const cJSON *c, const char *model) {
    if (!c) {
        snprintf(buf, n, "%s (no figure reported)", DASH);
        return;
    }
    char v[64];
    const double val = hr_num(c, "value", NAN), vmax = hr_num(c, "value_max", NAN);
    const char *unit = hr_str(c, "unit", "");
    const char *sep = (strcmp(unit, "%") == 0 || strcmp(unit, "x") == 0) ? "" : " ";
    if (strcmp(unit, "bool") == 0)
        snprintf(v, sizeof v, "%s", val != 0 ? "yes" : "no");
    else if (isfinite(vmax))
        snprintf(v, sizeof v, "%g to %g%s%s", val, vmax, sep, unit);
    else
        snprintf(v, sizeof v, "%g%s%s", val, sep, unit);
    const char *wl = hr_str(c, "workload", "");
    const cJSON *w = hr_reported_workload(rep, wl);
    const char *from = hr_str(c, "from", hr_str(c, "note", ""));
    if (strcmp(wl, hr_reported_key(rep, model)) == 0)
        snprintf(buf, n, "%s (%s%s%s)", v, hr_str(c, "hardware", "?"), *from ? "; " : "", from);
    else
        snprintf(buf, n, "%s (%s, %s; no figure for this workload)", v, hr_str(w, "title", wl), hr_str(c, "hardware", "?"));
}

static double mb(double bytes) { return bytes / 1e6; }

/* the run's state; a run continued from checkpoints says so (its times include the restarts' partial epochs) */
static const char *run_status(const hr_run *r, char *buf, size_t n) {
    const char *s = r->complete ? "complete" : r->interrupted ? "interrupted" : "incomplete";
    if (r->resumes > 0) snprintf(buf, n, "%s, resumed %d time%s from checkpoints", s, r->resumes, r->resumes == 1 ? "" : "s");
    else snprintf(buf, n, "%s", s);
    return buf;
}

static void runs_table(FILE *f, const hr_workload *w) {
    fprintf(f, "| run | precision | ranks | backend (device) | epochs | steps | train time (s) | samples/s | "
               "peak memory (MB) | test accuracy (%%) | final train loss | overflows / skipped steps | status |\n");
    fprintf(f, "|---|---|---|---|---|---|---|---|---|---|---|---|---|\n");
    for (int i = 0; i < w->n_all; i++) {
        const hr_run *r = w->all[i];
        char a[32], b[32], c[32], d[32], e[32], st[80];
        fprintf(f, "| `%s` | %s | %d | %s (%s) | %d of %d | %ld | %s | %s | %s | %s | %s | %d / %ld | %s |\n", r->name,
                r->precision, r->world_size, r->backend, r->device, r->epochs_done, r->epochs_requested, r->steps,
                fmt_num(a, sizeof a, r->total_time_s, "%.2f"), fmt_num(b, sizeof b, r->samples_per_s, "%.0f"),
                fmt_num(c, sizeof c, mb(r->peak_total), "%.2f"), fmt_num(d, sizeof d, r->final_accuracy, "%.2f"),
                fmt_num(e, sizeof e, r->final_train_loss, "%.4f"), r->overflow_events, r->skipped_steps, run_status(r, st, sizeof st));
    }
    fprintf(f, "\n");
}

static int cores_of(const hr_run *r) { return (int)hr_num(cJSON_GetObjectItemCaseSensitive(r->json, "host"), "cores", 0); }

/* What the cells of one row of a workload's claim table are computed from. */
typedef struct {
    const hr_reported *rep;
    const hr_workload *w;
    const hr_ratios *q;
    const cJSON *claim; /* the row's claim in harness/reported.json, NULL when none */
    const char *kind;   /* "gpus" or "nodes": the setting the projection is read at */
} claim_ctx;

/* On a CPU, bf16: where the CPU multiplies bf16 natively (AVX512-BF16 or AMX; the record's host.blas
 * says "bf16 GEMM native"), the one-device bf16 run measures a reduced-precision time saving here. */
static void bf16_meaning(FILE *f, const hr_workload *w) {
    const hr_run *b = NULL;
    for (int i = 0; i < w->n_all; i++)
        if (strcmp(w->all[i]->precision, "bf16") == 0 && w->all[i]->world_size == 1) b = w->all[i];
    if (!b || !w->fp32 || !(w->fp32->samples_per_s > 0) || !(b->samples_per_s > 0)) {
        fprintf(f, "On a CPU with bf16 instructions (AVX512-BF16 or AMX) a bf16 run (`--modes bf16`) measures a "
                   "reduced-precision time saving: ampbench multiplies bf16 on them through oneDNN.");
        return;
    }
    const char *blas = hr_str(cJSON_GetObjectItemCaseSensitive(b->json, "host"), "blas", "");
    const double ratio = w->fp32->samples_per_s / b->samples_per_s;
    const char *native = strstr(blas, "bf16 GEMM native (");
    if (native) {
        native += strlen("bf16 GEMM native (");
        fprintf(f, "This CPU multiplies bf16 natively (%.*s): bf16 took %.2fx the FP32 time, ", (int)strcspn(native, ")"),
                native, ratio);
        if (ratio < 1.0)
            fprintf(f, "a reduced-precision saving of %.1f%% measured here, where fp16 has no such instructions.",
                    100.0 * (1.0 - ratio));
        else
            fprintf(f, "no saving: the run is bound by what its products leave (fp16 has no such instructions).");
    } else
        fprintf(f, "bf16 took %.2fx the FP32 time: %s, so it too is emulated here.", ratio,
                *blas && strstr(blas, "bf16 GEMM") ? strstr(blas, "bf16 GEMM") : "this CPU has no bf16 instructions");
}

static void time_meaning(FILE *f, const claim_ctx *x) {
    const hr_workload *w = x->w;
    const double t = x->q->amp_time_saving_pct, rep = hr_num(x->claim, "value", NAN);
    if (!isfinite(t)) {
        fprintf(f, "Not measured: this run folder lacks %s.", !w->fp32 ? "an FP32 run" : "an AMP run");
        return;
    }
    fprintf(f, "AMP took %.2fx the FP32 time for the same work here. ", 1.0 - t / 100.0);
    /* a skipped step runs no unscaling, no update and no refresh of the fp16 weights: in a short run
     * the steps the scaler skips on its way down from its initial scale weigh */
    if (w->amp->skipped_steps > 0)
        fprintf(f, "%ld of its %ld steps were skipped by the loss scaler (a gradient overflowed: no update), which "
                   "costs less than a step that updates, so the ratio flatters AMP by up to their share (%.1f%%); a "
                   "long run's few skips weigh nothing. ",
                w->amp->skipped_steps, w->amp->steps,
                w->amp->steps > 0 ? 100.0 * (double)w->amp->skipped_steps / (double)w->amp->steps : 0.0);
    if (strcmp(w->amp->backend, "cpu") == 0) {
        fprintf(f, "The CPU backend emulates fp16: tensors are rounded to fp16 for storage and converted back for "
                   "fp32 arithmetic, so AMP does the FP32 work plus conversions and there are no tensor cores to "
                   "gain from%s. ",
                t < 0 ? "; a slower AMP run is what a CPU gives"
                      : "; what it gained here came from moving half the bytes of fp16 tensors, not from fp16 "
                        "arithmetic");
        if (isfinite(rep))
            fprintf(f, "The reported %g%% comes from fp16 tensor cores on a GPU and cannot be reproduced on this "
                       "machine. ", rep);
        bf16_meaning(f, w);
        return;
    }
    if (!isfinite(rep)) return;
    const double diff = t - rep;
    if (fabs(diff) <= 10)
        fprintf(f, "Within 10 points of the reported %g%%.", rep);
    else if (diff < 0)
        fprintf(f, "Smaller than the reported %g%%: a model of %.0f parameters at batch %ld leaves the GPU bound by "
                   "kernel launches and memory traffic, where fp16 tensor cores have less to speed up; the "
                   "articles' figure is for a large convolutional network.",
                rep, hr_num(cJSON_GetObjectItemCaseSensitive(w->amp->json, "workload"), "parameters", NAN),
                w->amp->batch_size);
    else
        fprintf(f, "Larger than the reported %g%%: this GPU's fp16 tensor-core rate over its FP32 rate is higher "
                   "than what the articles' setting realised.", rep);
}

/* The categories whose peaks moved most between two runs: "activations (-3.20 MB), gradients
 * (-1.10 MB)" for the ones that shrank (sign < 0) or grew (sign > 0), largest first. */
static int moved_categories(char *buf, size_t n, const hr_run *from, const hr_run *to, int sign) {
    int idx[HR_MEM_CATS], m = 0;
    double d[HR_MEM_CATS];
    for (int k = 0; k < HR_MEM_CATS; k++) {
        d[k] = hr_mem_cat(to, k) - hr_mem_cat(from, k);
        /* a change under 0.5% of the larger total is noise in the sentence */
        const double floor = 0.005 * fmax(from->peak_total, to->peak_total);
        if (sign * d[k] > floor) idx[m++] = k;
    }
    for (int a = 1; a < m; a++)
        for (int b = a; b > 0 && fabs(d[idx[b]]) > fabs(d[idx[b - 1]]); b--) {
            const int t = idx[b];
            idx[b] = idx[b - 1];
            idx[b - 1] = t;
        }
    size_t l = 0;
    buf[0] = 0;
    for (int a = 0; a < m && l < n; a++)
        l += (size_t)snprintf(buf + l, n - l, "%s%s (%+.2f MB)", a == 0 ? "" : a == m - 1 ? " and " : ", ",
                              hr_mem_labels[idx[a]], mb(d[idx[a]]));
    return m;
}

/* Where the AMP saving comes from, one sentence from the category peaks. */
static void saving_sources(FILE *f, const hr_run *p, const hr_run *a) {
    char down[512], up[512];
    const int nd = moved_categories(down, sizeof down, p, a, -1), nu = moved_categories(up, sizeof up, p, a, +1);
    const double s = p->peak_total - a->peak_total;
    if (s >= 0) {
        fprintf(f, "The AMP saving of %.2f MB (%.1f%% of the FP32 total) comes from %s", mb(s),
                100.0 * s / p->peak_total, nd ? down : "no single category (each moved by under 0.5%)");
        if (nu) fprintf(f, "; against it, %s", up);
        fprintf(f, ". ");
    } else {
        fprintf(f, "AMP holds %.2f MB more than FP32: the growth is in %s", mb(-s), nu ? up : "no single category");
        if (nd) fprintf(f, ", which the savings in %s do not make up for", down);
        fprintf(f, ". ");
    }
}

static void memory_meaning(FILE *f, const claim_ctx *x) {
    const double s = x->q->amp_memory_saving_pct, rep = hr_num(x->claim, "value", NAN);
    if (!isfinite(s)) {
        fprintf(f, "Not measured.");
        return;
    }
    const hr_run *a = x->w->amp, *p = x->w->fp32;
    const double act_share = p->peak_total > 0 ? 100.0 * hr_mem_cat(p, AB_MEM_ACTIVATIONS) / p->peak_total : NAN;
    fprintf(f, "Peak %.2f MB (FP32) vs %.2f MB (AMP), the comparable total: what a GPU run of this configuration "
               "holds (weights, master weights, gradients, optimizer state, activations, workspace). ",
            mb(p->peak_total), mb(a->peak_total));
    saving_sources(f, p, a);
    if (isfinite(act_share)) fprintf(f, "Activations are %.0f%% of the FP32 peak here. ", act_share);
    if (strcmp(a->backend, "cpu") == 0 && isfinite(p->peak_cpu_scratch) && isfinite(a->peak_cpu_scratch))
        fprintf(f, "Measured on the CPU over the same buffers a GPU run allocates, so this saving is a real figure "
                   "for this configuration, not an artefact of the CPU; the buffers only the CPU implementation "
                   "needs (cpu_scratch: %.2f MB FP32, %.2f MB AMP) are counted apart and left out. ",
                mb(p->peak_cpu_scratch), mb(a->peak_cpu_scratch));
    if (isfinite(rep)) {
        if (fabs(s - rep) <= 10)
            fprintf(f, "Within 10 points of the reported %g%%.", rep);
        else
            fprintf(f, "The reported %g%% saving needs activations to dominate, as they do when training a deep "
                       "network at a large batch%s.",
                    rep, s < rep ? "; here they weigh less against the weights, master weights and gradients" : "");
    }
}

static int amp_seeds_interval(const hr_workload *w, hr_interval *iv);

/* The verdict on the accuracy claim reads every seed: the AMP - FP32 interval over the seeds (their
 * variation and the test set's sampling error), never one seed's delta; one seed, or a quick run,
 * gets the figures and no verdict. */
static void accuracy_meaning(FILE *f, const claim_ctx *x) {
    const hr_workload *w = x->w;
    const double d = x->q->amp_accuracy_delta;
    if (!isfinite(d)) {
        fprintf(f, "Not measured.");
        return;
    }
    const double lo = hr_num(x->claim, "value", 0), hi = hr_num(x->claim, "value_max", lo);
    if (w->amp->steps != w->fp32->steps) {
        fprintf(f, "The two runs trained different numbers of steps (FP32 %ld, AMP %ld), so this delta is not a "
                   "like-for-like comparison.",
                w->fp32->steps, w->amp->steps);
        return;
    }
    const int want = (int)hr_num(hr_reported_workload(x->rep, w->model), "epochs", 0);
    char data[96] = "";
    if (w->amp->train_subset > 0 || w->amp->test_subset > 0)
        snprintf(data, sizeof data, " on %ld training %s, evaluated on %ld", w->amp->train_samples,
                 samples_word(w->amp), w->amp->test_samples);
    if (w->amp->max_steps > 0) {
        if (want > 0)
            fprintf(f, "A quick run: %ld optimizer steps%s, not the articles' %d epochs, so neither accuracy nor the "
                       "delta is comparable with the %d-epoch figures, and no verdict on the claim is drawn from it.",
                    w->amp->steps, data, want, want);
        else
            fprintf(f, "A quick run: %ld optimizer steps%s, so neither accuracy nor the delta is comparable with a "
                       "trained model's, and no verdict on the claim is drawn from it.",
                    w->amp->steps, data);
        return;
    }
    hr_interval iv;
    char r1[32], r2[32];
    snprintf(r1, sizeof r1, lo == 0 ? "%g" : "%+g", lo);
    snprintf(r2, sizeof r2, hi == 0 ? "%g" : "%+g", hi);
    if (amp_seeds_interval(w, &iv) && isfinite(iv.lo)) {
        const int inside = lo >= iv.lo && hi <= iv.hi, outside = hi < iv.lo || lo > iv.hi;
        const double width = iv.hi - iv.lo;
        char verdict[200];
        if (outside && iv.hi < lo)
            snprintf(verdict, sizeof verdict, "the interval lies below the band: AMP lost accuracy here");
        else if (outside)
            snprintf(verdict, sizeof verdict, "the interval lies above the band: AMP gained more than reported");
        else if (inside && width < 1.0)
            snprintf(verdict, sizeof verdict, "the band lies inside the interval, which is %.2f points wide: AMP "
                     "keeps FP32 accuracy as far as these runs resolve", width);
        else
            snprintf(verdict, sizeof verdict, "the interval %s the band and is %.2f points wide, too wide to tell a "
                     "1-point delta from 0: no verdict", inside ? "holds" : "overlaps", width);
        fprintf(f, "Over %d seeds AMP - FP32 is %+.2f points, 95%% interval [%+.2f, %+.2f] (the seeds' variation "
                   "and the test set's sampling error), against the reported %s to %s points: %s. ",
                iv.n_a, iv.mean, iv.lo, iv.hi, r1, r2, verdict);
    } else {
        const double pa = w->amp->final_accuracy / 100.0, pf = w->fp32->final_accuracy / 100.0;
        const long n = w->amp->test_samples == w->fp32->test_samples ? w->amp->test_samples : 0;
        if (n > 0)
            fprintf(f, "One seed: %+.2f points, against the reported %s to %s; the test set's sampling error alone "
                       "allows about ±%.2f points (%ld examples) and the seeds' variation is not measured "
                       "(`bench/run_all.sh --seeds N`), so no verdict is drawn. ",
                    d, r1, r2, 196.0 * sqrt(fmax(0.0, pa * (1 - pa) + pf * (1 - pf)) / (double)n), n);
        else
            fprintf(f, "One seed: %+.2f points, against the reported %s to %s; the seeds' variation is not measured "
                       "(`bench/run_all.sh --seeds N`), so no verdict is drawn. ",
                    d, r1, r2);
    }
    if (want <= 0 || (w->amp->epochs_done >= want && w->amp->complete)) return;
    fprintf(f, "The runs trained %d of the articles' %d epochs (%ld steps%s), so both accuracies are short of "
               "converged.",
            w->amp->epochs_done, want, w->amp->steps, data);
}

static void dp_meaning(FILE *f, const claim_ctx *x) {
    const hr_workload *w = x->w;
    const hr_ratios *q = x->q;
    if (!w->dp) {
        fprintf(f, "No data-parallel run in this folder.");
        return;
    }
    const hr_run *d = w->dp;
    if (!isfinite(q->dp_speedup_vs_amp)) {
        fprintf(f, "No single-device AMP run to compare with.");
        return;
    }
    if (strcmp(d->backend, "cpu") == 0) {
        const int c = cores_of(d);
        char cores[48] = "";
        if (c > 0) snprintf(cores, sizeof cores, " with %d cores", c);
        const int threads = (int)hr_num(cJSON_GetObjectItemCaseSensitive(d->json, "host"), "threads", 0);
        char thr[64] = "";
        if (threads > 0) snprintf(thr, sizeof thr, " (%d BLAS thread%s each)", threads, threads == 1 ? "" : "s");
        fprintf(f, "%d MPI ranks%s on one CPU%s share its cores and memory bandwidth: the figure shows how well "
                   "the ranks use this CPU, all-reduce included, and says nothing about multi-GPU scaling. ",
                d->world_size, thr, cores);
        if (q->dp_speedup_vs_amp >= 1.0)
            fprintf(f, "Above 1x: the single process left cores idle in work that is not multithreaded.");
        else
            fprintf(f, "Below 1x: the all-reduce, the ranks' contention for cores and memory (and any other load "
                       "on the machine) cost more than the extra rank gained.");
    } else {
        fprintf(f, "%d GPUs (%s engine): scaling efficiency %.0f%% over one AMP GPU.", d->world_size,
                *d->engine ? d->engine : "?", q->dp_efficiency_pct);
    }
}

static void projection_meaning(FILE *f, const claim_ctx *x) {
    const hr_run *pr = hr_projection_run(x->w);
    const cJSON *p = pr ? cJSON_GetObjectItemCaseSensitive(pr->json, "projection") : NULL;
    if (!p || x->q->proj_n == 0) {
        fprintf(f, "No projection in this folder.");
        return;
    }
    /* the link of the point read: a node's network for the nodes figure, the GPUs' link for the GPUs' */
    const double bw = x->q->proj_bandwidth_Bps;
    char b[48], lat[48];
    fprintf(f, "**Projected** from `%s`: %s; compute time per step %.3g s, gradient bytes %.0f, "
               "%s bandwidth %s GB/s, latency %s us. It assumes the single-device compute time and the modelled "
               "all-reduce, nothing else. ",
            pr->name, hr_str(p, "method", "cost model"), hr_num(p, "compute_time_per_step_s", NAN),
            hr_num(p, "grad_bytes", NAN), strcmp(x->q->proj_kind, "nodes") == 0 ? "network (between nodes)" : "GPU link",
            fmt_num(b, sizeof b, bw / 1e9, "%.2f"), fmt_num(lat, sizeof lat, 1e6 * x->q->proj_latency_s, "%.0f"));
    if (strncmp(pr->step_source, "modelled:", 9) == 0)
        fprintf(f, "Its step is the **modelled** step of this configuration on the %s (docs/step-model.md), not "
                   "this run's own (%.3g s).",
                *pr->model_gpu_label ? pr->model_gpu_label : pr->step_source + 9,
                hr_num(p, "measured_compute_time_per_step_s", NAN));
    else if (strcmp(pr->step_source, "measured-gpu") == 0)
    {
        if (pr->model_step_s > 0)
            fprintf(f, "Its step is this GPU run's own, measured; the step model gives %.3g s on the %s "
                       "(docs/step-model.md).",
                    pr->model_step_s, pr->model_gpu_label);
        else
            fprintf(f, "Its step is this GPU run's own, measured.");
    }
    else
        fprintf(f, "**Its step is a CPU's**: a step tens of times longer than a GPU's makes the all-reduce look "
                   "negligible, so this figure is near-ideal by construction and says nothing about a GPU's "
                   "scaling%s.",
                *pr->step_source ? "" : " (a record made before the step model)");
}

/* The seed groups of a workload's complete runs (hr_seed_groups), allocated; NULL on error. */
static hr_seed_group *seed_groups(const hr_workload *w, int *n) {
    hr_seed_group *g = calloc(HR_MAX_GROUPS, sizeof *g);
    if (g && hr_seed_groups(w, 1, g, HR_MAX_GROUPS, n) != 0) {
        free(g);
        return NULL;
    }
    return g;
}

static const hr_seed_group *find_group(const hr_seed_group *g, int n, int peer, const char *precision, int ranks) {
    for (int k = 0; k < n; k++)
        if (g[k].peer == peer && !strcmp(g[k].precision, precision) && g[k].world_size == ranks) return &g[k];
    return NULL;
}

/* ampbench's AMP - FP32 over seeds; 0 when a mode is missing */
static int amp_seeds_interval(const hr_workload *w, hr_interval *iv) {
    if (w->max_seeds < 2) return 0;
    int ng = 0, ok = 0;
    hr_seed_group *g = seed_groups(w, &ng);
    if (!g) return 0;
    const hr_seed_group *a = find_group(g, ng, 0, "amp", 1), *b = find_group(g, ng, 0, "fp32", 1);
    if (a && b) hr_diff_interval(a, b, 1, iv), ok = 1;
    free(g);
    return ok;
}

/* "mean over 3 seeds +0.50 points, 95% interval [-0.74, +1.74]" for precision - FP32 of one tool,
 * "" when either mode has fewer than 2 seeds. */
static void seeds_delta_text(char *buf, size_t n, const hr_workload *w, int peer, const char *precision,
                             const char *unit) {
    buf[0] = 0;
    if (w->max_seeds < 2) return;
    int ng = 0;
    hr_seed_group *g = seed_groups(w, &ng);
    if (!g) return;
    const hr_seed_group *a = find_group(g, ng, peer, precision, 1), *b = find_group(g, ng, peer, "fp32", 1);
    hr_interval iv;
    if (a && b) hr_diff_interval(a, b, 1, &iv);
    if (a && b && isfinite(iv.lo)) {
        char nn[32];
        if (iv.n_a == iv.n_b) snprintf(nn, sizeof nn, "%d", iv.n_a);
        else snprintf(nn, sizeof nn, "%d and %d", iv.n_a, iv.n_b);
        snprintf(buf, n, "mean over %s seeds %+.2f %s, 95%% interval [%+.2f, %+.2f]", nn, iv.mean, unit, iv.lo, iv.hi);
    }
    free(g);
}

static void mode_name(char *buf, size_t n, const hr_seed_group *g) {
    if (g->world_size > 1) snprintf(buf, n, "%s, %d ranks", g->precision, g->world_size);
    else snprintf(buf, n, "%s", g->precision);
}

static void upper(char *buf, size_t n, const char *s) {
    size_t k = 0;
    for (; s[k] && k + 1 < n; k++) buf[k] = (char)(s[k] >= 'a' && s[k] <= 'z' ? s[k] - 'a' + 'A' : s[k]);
    buf[k] = 0;
}

/* The 95% interval of a difference, and how it was computed, as table cells. */
static void interval_cells(FILE *f, const hr_interval *iv) {
    char n[48], how[256], x[32], y[32];
    if (iv->paired) snprintf(n, sizeof n, "%d pairs", iv->n_a);
    else snprintf(n, sizeof n, "%d and %d seeds", iv->n_a, iv->n_b);
    char test[96] = "; the test set's sampling error unknown (the runs differ in N)";
    if (iv->test_n && iv->test_paired)
        snprintf(test, sizeof test, " + the test set's sampling error (N = %ld, se %.2f, example by example)",
                 iv->test_n, iv->se_test);
    else if (iv->test_n)
        snprintf(test, sizeof test, " + the test set's sampling error (N = %ld, se %.2f, a bound)", iv->test_n,
                 iv->se_test);
    if (!isfinite(iv->lo))
        snprintf(how, sizeof how, "none: fewer than 2 seeds on a side");
    else if (iv->paired)
        snprintf(how, sizeof how, "paired t on the per-seed differences, t(%.0f) = %.3f%s", iv->df, iv->t, test);
    else
        snprintf(how, sizeof how, "Welch, df %.2f, t(%.0f) = %.3f%s", iv->df, floor(iv->df), iv->t, test);
    if (isfinite(iv->lo)) snprintf(x, sizeof x, "[%+.2f, %+.2f]", iv->lo, iv->hi);
    else snprintf(x, sizeof x, DASH);
    fprintf(f, " %s | %s | %s | %s |\n", n, how, fmt_num(y, sizeof y, iv->mean, "%+.2f"), x);
}

/* The final test accuracy over seeds: each tool and mode's mean ± sd, the precision - FP32 deltas
 * with their 95% intervals set against the articles' delta, and ampbench's FP32 against the
 * peer's. */
static void seeds_section(FILE *f, const hr_reported *rep, const hr_workload *w) {
    if (w->max_seeds < 2) {
        fprintf(f, "Accuracy over seeds: not measured: every mode here ran with one seed, so there is no spread "
                   "to give a mean ± sd or an interval for the AMP - FP32 delta. `bench/run_all.sh --seeds N` "
                   "repeats every run with seeds 1 to N.\n\n");
        return;
    }
    int ng = 0;
    hr_seed_group *g = seed_groups(w, &ng);
    if (!g) {
        fprintf(f, "Accuracy over seeds: %s.\n\n", ab_error());
        return;
    }
    int left_out = 0;
    for (int i = 0; i < w->n_all; i++) left_out += !w->all[i]->complete || !isfinite(w->all[i]->final_accuracy);
    for (int i = 0; i < w->n_peer; i++)
        left_out += !w->peer_all[i]->complete || !isfinite(w->peer_all[i]->final_accuracy);
    fprintf(f, "Accuracy over seeds (final test accuracy of the complete runs, by `workload.seed`; sd is the sample "
               "standard deviation, n - 1 in the denominator");
    if (left_out) fprintf(f, "; %d incomplete run%s left out", left_out, left_out == 1 ? "" : "s");
    fprintf(f, "):\n\n| tool | mode | seeds | final test accuracy (%%), mean ± sd | min..max (%%) | "
               "final train loss, mean |\n|---|---|---|---|---|---|\n");
    for (int k = 0; k < ng; k++) {
        const hr_seed_group *G = &g[k];
        char mode[48], list[256] = "", sd[32], loss[32];
        mode_name(mode, sizeof mode, G);
        for (int i = 0; i < G->n; i++) {
            const size_t l = strlen(list);
            if (l + 16 < sizeof list) snprintf(list + l, sizeof list - l, "%s%d", i ? ", " : "", G->runs[i]->seed);
        }
        fprintf(f, "| %s | %s | %d (%s) | %.2f ± %s | %.2f..%.2f | %s |\n", G->tool, mode, G->n, list, G->acc_mean,
                fmt_num(sd, sizeof sd, G->acc_sd, "%.2f"), G->acc_min, G->acc_max,
                fmt_num(loss, sizeof loss, G->loss_mean, "%.4f"));
    }
    fprintf(f, "\n");

    /* the articles' AMP - FP32 delta: the workload's claim, else 0 to +1 point */
    const cJSON *c = hr_reported_claim(rep, w->model, "amp_accuracy_delta", 0);
    const double rlo = hr_num(c, "value", 0), rhi = hr_num(c, "value_max", c ? rlo : 1);
    static const char *const lower[2] = {"amp", "bf16"};
    hr_interval ivs[4];
    char labels[4][96];
    int nd = 0;
    fprintf(f, "| difference | n | 95%% interval from | mean difference (points) | 95%% interval (points) |\n"
               "|---|---|---|---|---|\n");
    for (int peer = 0; peer < 2; peer++)
        for (int m = 0; m < 2; m++) {
            const hr_seed_group *a = find_group(g, ng, peer, lower[m], 1), *b = find_group(g, ng, peer, "fp32", 1);
            if (!a || !b) continue;
            char up[16];
            upper(up, sizeof up, lower[m]);
            snprintf(labels[nd], sizeof labels[nd], "%s %s - FP32", a->tool, up);
            hr_diff_interval(a, b, 1, &ivs[nd]);
            fprintf(f, "| %s |", labels[nd]);
            interval_cells(f, &ivs[nd]);
            nd++;
        }
    const hr_seed_group *af = find_group(g, ng, 0, "fp32", 1), *pf = find_group(g, ng, 1, "fp32", 1);
    hr_interval tools;
    if (af && pf) {
        /* two tools draw different numbers from one seed: no pairing */
        hr_diff_interval(af, pf, 0, &tools);
        fprintf(f, "| FP32: ampbench - %s |", pf->tool);
        interval_cells(f, &tools);
    }
    fprintf(f, "\n");
    for (int k = 0; k < nd; k++) {
        const hr_interval *iv = &ivs[k];
        if (!isfinite(iv->lo)) {
            fprintf(f, "%s: %+.2f points, no interval: a mode with one seed. ", labels[k], iv->mean);
            continue;
        }
        const char *where = rlo >= iv->lo && rhi <= iv->hi ? "lies inside"
                            : rhi < iv->lo || rlo > iv->hi ? "lies outside"
                                                           : "overlaps";
        const double width = iv->hi - iv->lo;
        char nn[32];
        if (iv->n_a == iv->n_b) snprintf(nn, sizeof nn, "%d", iv->n_a);
        else snprintf(nn, sizeof nn, "%d and %d", iv->n_a, iv->n_b);
        char r1[32], r2[32];
        snprintf(r1, sizeof r1, rlo == 0 ? "%g" : "%+g", rlo);
        snprintf(r2, sizeof r2, rhi == 0 ? "%g" : "%+g", rhi);
        fprintf(f, "%s: the articles' delta of %s to %s points %s the interval [%+.2f, %+.2f]. With %s seeds the "
                   "interval is %.2f points wide: %s",
                labels[k], r1, r2, where, iv->lo, iv->hi, nn, width,
                width < 1.0 ? "under 1 point it cannot hold both 0 and +1, so it can tell a 1-point delta apart "
                              "from 0. "
                            : "at 1 point or wider it can hold 0 and +1 at once, so it cannot tell a 1-point delta "
                              "apart from 0. ");
        if (iv->test_paired) {
            fprintf(f, "McNemar's test on the same seed's predictions, example by example (examples only the "
                       "first got right, only the second, exact two-sided p):");
            for (int i = 0; i < iv->n_a; i++)
                fprintf(f, "%s seed %d %ld and %ld, p = %.3g", i ? ";" : "", iv->seed[i], iv->disc_ab[i], iv->disc_ba[i],
                        iv->mcnemar_p[i]);
            fprintf(f, ". ");
        }
    }
    if (af && pf)
        fprintf(f, "ampbench's FP32 mean is %+.2f points from %s's: %s the 1.5 points of agreement the project "
                   "checks between the two tools.",
                tools.mean, pf->tool, fabs(tools.mean) <= 1.5 ? "within" : "more than");
    fprintf(f, "\n\n");
    free(g);
}

/* Absolute figures per mode: the articles' hours, gigabytes and percent beside what ran here,
 * with the time this run's throughput gives for the articles' epochs. */
static void absolute_rows(FILE *f, const hr_reported *rep, const hr_runset *rs, const hr_workload *w) {
    const hr_run *runs[3] = {w->fp32, w->amp, w->dp};
    static const char *const modes[3] = {"fp32", "amp", "dp-amp"};
    static const char *const names[3] = {"FP32", "AMP", "data-parallel AMP"};
    const int want = (int)hr_num(hr_reported_workload(rep, w->model), "epochs", 0);
    fprintf(f, "Absolute figures (they depend on the hardware and the run length; the ratios above are what "
               "carries over):\n\n| quantity | reported | measured |\n|---|---|---|\n");
    for (int k = 0; k < 3; k++) {
        const hr_run *r = runs[k];
        char rc[512], mc[512], est[128] = "";
        const cJSON *c = hr_reported_claim_mode(rep, w->model, modes[k], "total_time");
        claim_cell(rc, sizeof rc, rep, c, w->model);
        if (r) {
            const double train = hr_num(cJSON_GetObjectItemCaseSensitive(r->json, "workload"), "train_samples", NAN);
            if (want > 0 && isfinite(train) && r->samples_per_s > 0) {
                const double s = train * want / r->samples_per_s;
                if (s >= 3600) snprintf(est, sizeof est, "; %.1f h at this rate for %d epochs", s / 3600, want);
                else if (s >= 60) snprintf(est, sizeof est, "; %.1f min at this rate for %d epochs", s / 60, want);
                else snprintf(est, sizeof est, "; %.0f s at this rate for %d epochs", s, want);
                const size_t l = strlen(est);
                snprintf(est + l, sizeof est - l, " of %.0f %s", train, samples_word(r));
            }
            snprintf(mc, sizeof mc, "%.2f s training for %ld steps (%d epoch%s)%s", r->total_time_s, r->steps,
                     r->epochs_done, r->epochs_done == 1 ? "" : "s", est);
        } else {
            snprintf(mc, sizeof mc, "%s (no %s run)", DASH, names[k]);
        }
        fprintf(f, "| %s training time | %s | %s |\n", names[k], rc, mc);

        c = hr_reported_claim_mode(rep, w->model, modes[k], k == 2 ? "peak_memory_per_device" : "peak_memory");
        claim_cell(rc, sizeof rc, rep, c, w->model);
        if (r)
            snprintf(mc, sizeof mc, "%.2f MB peak%s (comparable total: the tracked allocator's categories, "
                                    "CPU-only scratch excluded)", mb(r->peak_total), k == 2 ? " per rank" : "");
        else
            snprintf(mc, sizeof mc, DASH);
        fprintf(f, "| %s peak memory | %s | %s |\n", names[k], rc, mc);

        c = hr_reported_claim_mode(rep, w->model, modes[k], "test_accuracy");
        claim_cell(rc, sizeof rc, rep, c, w->model);
        if (r && isfinite(r->final_accuracy))
            snprintf(mc, sizeof mc, "%.2f%% after %ld steps at a global batch of %ld", r->final_accuracy, r->steps,
                     r->batch_size * r->world_size);
        else
            snprintf(mc, sizeof mc, DASH);
        fprintf(f, "| %s test accuracy | %s | %s |\n", names[k], rc, mc);

        /* BERT: FP32 runs out of memory on one 8 GB GPU, AMP fits. The measured answer: whether this
         * run fitted (under its --memory-limit, or in the GPU), and the largest batch that fits. */
        c = hr_reported_claim_mode(rep, w->model, modes[k], "fits_in_memory");
        const hr_run *oom = k == 0 ? w->oom_fp32 : k == 1 ? w->oom_amp : w->oom_dp;
        const hr_fit *fit = k == 0 ? w->fit_fp32 : k == 1 ? w->fit_amp : NULL;
        if (c || oom || fit || (r && isfinite(r->memory_limit))) {
            claim_cell(rc, sizeof rc, rep, c, w->model);
            const hr_planned *p = NULL;
            for (int i = 0; i < rs->n_planned; i++)
                if (!strcmp(rs->planned[i].workload, w->model) && !strcmp(rs->planned[i].mode, modes[k]) &&
                    !strcmp(rs->planned[i].tool, "ampbench"))
                    p = &rs->planned[i];
            char lim[64] = "", x1[32], x2[32];
            const hr_run *lr = r ? r : oom;
            if (lr && isfinite(lr->memory_limit)) snprintf(lim, sizeof lim, " of a %s limit", fmt_bytes(x1, sizeof x1, lr->memory_limit));
            if (r && r->complete)
                snprintf(mc, sizeof mc, "yes at batch %ld: %s peak%s", r->batch_size, fmt_bytes(x2, sizeof x2, r->peak_total), lim);
            else if (oom)
                snprintf(mc, sizeof mc, "no at batch %ld: it needed %s%s", oom->batch_size,
                         fmt_bytes(x2, sizeof x2, oom->oom_would_need), lim);
            else if (p && strcmp(p->status, "ok") != 0) {
                if (snprintf(mc, sizeof mc, "%s: %s", p->status, *p->reason ? p->reason : "no reason recorded") >=
                    (int)sizeof mc)
                    strcpy(mc + sizeof mc - 4, "...");
            } else
                snprintf(mc, sizeof mc, "%s", r ? "incomplete run" : DASH);
            if (fit) {
                const size_t l = strlen(mc);
                char in[64];
                if (isfinite(fit->memory_limit)) fmt_bytes(in, sizeof in, fit->memory_limit);
                else snprintf(in, sizeof in, "the GPU's memory");
                snprintf(mc + l, sizeof mc - l, "; the largest batch that fits %s at sequence %d: %ld (%s)", in,
                         fit->max_seq_len, fit->max_batch, fmt_bytes(x2, sizeof x2, fit->peak_at_max));
            }
            fprintf(f, "| %s fits in memory | %s | %s |\n", names[k], rc, mc);
        }
    }
    fprintf(f, "\n");
}

/* Peak memory by category, FP32 beside AMP (and a data-parallel rank), with the saving of each
 * category and the sentence saying where the saving comes from. */
static void memory_table(FILE *f, const hr_workload *w) {
    const hr_run *p = w->fp32, *a = w->amp, *d = w->dp;
    if (!p && !a) return;
    const int both = p && a && p->peak_total > 0;
    char x[48], y[48], z[48], u[48], v[48];
    fprintf(f, "Peak memory by category (MB; each category at its own peak, the comparable total is the peak of "
               "their sum, so it can be less than the rows added up; cpu_scratch, the buffers only the CPU "
               "implementation needs, is counted apart and is not in the total):\n\n");
    fprintf(f, "| category | FP32 | AMP | saving (MB) | saving (%%) |%s\n|---|---|---|---|---|%s\n",
            d ? " data-parallel AMP, per rank |" : "", d ? "---|" : "");
    for (int k = 0; k <= HR_MEM_CATS + 2; k++) {
        /* the six categories, the comparable total, cpu_scratch, the total with cpu_scratch */
        double vp = NAN, va = NAN, vd = NAN;
        const char *label;
        char lab[96];
        if (k < HR_MEM_CATS) {
            label = hr_mem_labels[k];
            if (p) vp = hr_mem_cat(p, k);
            if (a) va = hr_mem_cat(a, k);
            if (d) vd = hr_mem_cat(d, k);
        } else if (k == HR_MEM_CATS) {
            label = "**comparable total** (peak of the sum)";
            if (p) vp = p->peak_total;
            if (a) va = a->peak_total;
            if (d) vd = d->peak_total;
        } else if (k == HR_MEM_CATS + 1) {
            label = "cpu_scratch (CPU implementation only; not in the total)";
            if (p) vp = p->peak_cpu_scratch;
            if (a) va = a->peak_cpu_scratch;
            if (d) vd = d->peak_cpu_scratch;
            if (!isfinite(vp) && !isfinite(va)) continue; /* records from before the split */
        } else {
            label = "total with cpu_scratch";
            if (p) vp = p->peak_total_with_scratch;
            if (a) va = a->peak_total_with_scratch;
            if (d) vd = d->peak_total_with_scratch;
            if (!isfinite(vp) && !isfinite(va)) continue;
        }
        snprintf(lab, sizeof lab, "%s", label);
        const double save = vp - va;
        fprintf(f, "| %s | %s | %s | %s | %s |", lab, fmt_num(x, sizeof x, mb(vp), "%.2f"),
                fmt_num(y, sizeof y, mb(va), "%.2f"), fmt_num(z, sizeof z, both ? mb(save) : NAN, "%+.2f"),
                fmt_num(u, sizeof u, both && vp > 0 ? 100.0 * save / vp : NAN, "%+.1f%%"));
        if (d) fprintf(f, " %s |", fmt_num(v, sizeof v, mb(vd), "%.2f"));
        fprintf(f, "\n");
    }
    fprintf(f, "\n");
    if (both) {
        saving_sources(f, p, a);
        fprintf(f, "\n\n");
    }
}

/* whether the config's workload wl (run_all.sh's name, <wl>-<mode>... its runs) is of model: its
 * name, or a result of the folder named after it has the model (a config line whose model
 * differs from its name: the test fixtures' resnet50 line trains resnet-tiny) */
static int workload_of_model(const hr_runset *rs, const char *wl, const char *model) {
    if (!strcmp(wl, model)) return 1;
    const size_t n = strlen(wl);
    for (int i = 0; i < rs->n_runs; i++)
        if (!strncmp(rs->runs[i].name, wl, n) && rs->runs[i].name[n] == '-' && !strcmp(rs->runs[i].model, model))
            return 1;
    return 0;
}

const hr_planned *hr_planned_run(const hr_runset *rs, const char *workload, const char *mode, int peer) {
    const hr_planned *found = NULL;
    for (int i = 0; i < rs->n_planned; i++) {
        const hr_planned *p = &rs->planned[i];
        if (!strcmp(p->mode, mode) && (strcmp(p->tool, "ampbench") != 0) == peer &&
            workload_of_model(rs, p->workload, workload))
            found = p;
    }
    return found;
}

/* A cell of the peer table: the figure, or why there is none (the manifest's status and reason). */
static const char *peer_cell(char *buf, size_t n, const hr_runset *rs, const hr_workload *w, const hr_run *r,
                             double v, const char *fmt, const char *mode, int peer) {
    if (r && isfinite(v)) {
        snprintf(buf, n, fmt, v);
        return buf;
    }
    if (r) return "not measured";
    const hr_planned *pl = hr_planned_run(rs, w->model, mode, peer);
    if (pl && strcmp(pl->status, "ok") != 0) {
        if (snprintf(buf, n, "%s: %s", pl->status, *pl->reason ? pl->reason : "no reason recorded") >= (int)n)
            strcpy(buf + n - 4, "...");
        return buf;
    }
    return "not run";
}

static const char *ratio_cell(char *buf, size_t n, double a, double b) {
    return fmt_num(buf, n, isfinite(a) && isfinite(b) && b > 0 ? a / b : NAN, "%.2fx");
}

/* How a run's peak memory was measured, in words. */
static void mem_method(char *buf, size_t n, const hr_run *r) {
    if (!r->peer)
        snprintf(buf, n, "ampbench's tracked allocator, the comparable total (what a GPU run of this configuration "
                         "holds; cpu_scratch left out)");
    else if (!isfinite(r->peak_total))
        snprintf(buf, n, "not measured: the peer records no memory figure on %s", r->backend);
    else if (*r->mem_method)
        snprintf(buf, n, "%s", r->mem_method);
    else if (!strcmp(r->backend, "cuda"))
        snprintf(buf, n, "torch.cuda.max_memory_allocated (no method recorded)");
    else
        snprintf(buf, n, "no method recorded");
}

/* ampbench beside its PyTorch peer: throughput, peak memory, accuracy per precision and the AMP/FP32
 * ratios of each. */
static void peer_table(FILE *f, const hr_runset *rs, const hr_workload *w) {
    int planned = 0;
    for (int i = 0; i < rs->n_planned; i++)
        planned |= !strcmp(rs->planned[i].workload, w->model) && strcmp(rs->planned[i].tool, "ampbench") != 0;
    if (w->n_peer == 0 && !planned) {
        if (*rs->peers_note) fprintf(f, "**PyTorch peer not run**: %s.\n\n", rs->peers_note);
        return;
    }
    const char *tool = *w->peer_tool ? w->peer_tool : "pytorch";
    const char *script = w->n_peer ? hr_str(cJSON_GetObjectItemCaseSensitive(w->peer_all[0]->json, "peer"),
                                            "script", "")
                                   : "";
    fprintf(f, "ampbench beside the PyTorch peer (`\"tool\": \"%s\"`%s%s%s), same device and settings:\n\n", tool,
            *script ? ", `" : "", script, *script ? "`" : "");
    if (w->n_peer == 0) {
        const hr_planned *pl = NULL;
        for (int i = 0; i < rs->n_planned && !pl; i++)
            if (!strcmp(rs->planned[i].workload, w->model) && strcmp(rs->planned[i].tool, "ampbench") != 0)
                pl = &rs->planned[i];
        fprintf(f, "**PyTorch peer not run**: %s: %s.\n\n", pl->status, *pl->reason ? pl->reason : "no reason recorded");
        return;
    }
    hr_workload pv;
    hr_peer_view(w, &pv);
    hr_ratios qa, qp;
    hr_compute_ratios(w, 4, "gpus", &qa);
    hr_compute_ratios(&pv, 4, "gpus", &qp);
    const hr_run *A[3] = {w->fp32, w->amp, w->dp}, *P[3] = {w->peer_fp32, w->peer_amp, w->peer_dp};
    static const char *const modes[3] = {"fp32", "amp", "dp-amp"};
    static const char *const names[3] = {"FP32", "AMP", "data-parallel AMP"};
    const int n_modes = (w->dp || w->peer_dp || hr_planned_run(rs, w->model, "dp-amp", 1)) ? 3 : 2;
    char c1[320], c2[320], c3[48];
    fprintf(f, "| quantity | ampbench | PyTorch | ampbench / PyTorch |\n|---|---|---|---|\n");
    for (int k = 0; k < n_modes; k++) {
        const double va = A[k] ? A[k]->samples_per_s : NAN, vp = P[k] ? P[k]->samples_per_s : NAN;
        fprintf(f, "| %s samples/s | %s | %s | %s |\n", names[k],
                peer_cell(c1, sizeof c1, rs, w, A[k], va, "%.1f", modes[k], 0),
                peer_cell(c2, sizeof c2, rs, w, P[k], vp, "%.1f", modes[k], 1), ratio_cell(c3, sizeof c3, va, vp));
    }
    for (int k = 0; k < n_modes; k++) {
        const double va = A[k] ? mb(A[k]->peak_total) : NAN, vp = P[k] ? mb(P[k]->peak_total) : NAN;
        fprintf(f, "| %s peak memory (MB%s) | %s | %s | %s |\n", names[k], k == 2 ? ", per rank" : "",
                peer_cell(c1, sizeof c1, rs, w, A[k], va, "%.2f", modes[k], 0),
                peer_cell(c2, sizeof c2, rs, w, P[k], vp, "%.2f", modes[k], 1), ratio_cell(c3, sizeof c3, va, vp));
    }
    for (int k = 0; k < n_modes; k++) {
        const double va = A[k] ? A[k]->final_accuracy : NAN, vp = P[k] ? P[k]->final_accuracy : NAN;
        fprintf(f, "| %s test accuracy (%%) | %s | %s | %s |\n", names[k],
                peer_cell(c1, sizeof c1, rs, w, A[k], va, "%.2f", modes[k], 0),
                peer_cell(c2, sizeof c2, rs, w, P[k], vp, "%.2f", modes[k], 1),
                fmt_num(c3, sizeof c3, va - vp, "%+.2f points"));
    }
    fprintf(f, "| AMP time saving vs FP32 | %s | %s | |\n", fmt_num(c1, sizeof c1, qa.amp_time_saving_pct, "%+.1f%%"),
            fmt_num(c2, sizeof c2, qp.amp_time_saving_pct, "%+.1f%%"));
    fprintf(f, "| AMP peak-memory saving vs FP32 | %s | %s | |\n",
            fmt_num(c1, sizeof c1, qa.amp_memory_saving_pct, "%+.1f%%"),
            fmt_num(c2, sizeof c2, qp.amp_memory_saving_pct, "%+.1f%%"));
    char oa[160], op[160];
    seeds_delta_text(oa, sizeof oa, w, 0, "amp", "points");
    seeds_delta_text(op, sizeof op, w, 1, "amp", "points");
    /* several seeds: their mean leads, the lowest seed's delta after it */
    const char *da = fmt_num(c1, sizeof c1, qa.amp_accuracy_delta, "%+.2f points");
    const char *dp = fmt_num(c2, sizeof c2, qp.amp_accuracy_delta, "%+.2f points");
    fprintf(f, "| AMP test-accuracy delta | %s%s%s | %s%s%s | |\n", *oa ? oa : da, *oa ? "; lowest seed alone " : "",
            *oa ? da : "", *op ? op : dp, *op ? "; lowest seed alone " : "", *op ? dp : "");
    char sa[64] = DASH, sp[64] = DASH;
    if (w->fp32) snprintf(sa, sizeof sa, "%ld steps, batch %ld", w->fp32->steps, w->fp32->batch_size);
    if (w->peer_fp32) snprintf(sp, sizeof sp, "%ld steps, batch %ld", w->peer_fp32->steps, w->peer_fp32->batch_size);
    fprintf(f, "| FP32 run length | %s | %s | |\n\n", sa, sp);

    /* what makes the two columns comparable, or not */
    const hr_run *ra = w->fp32 ? w->fp32 : w->amp, *rp = w->peer_fp32 ? w->peer_fp32 : w->peer_all[0];
    if (ra && strcmp(ra->backend, rp->backend) != 0)
        fprintf(f, "The two ran on different devices (ampbench %s, PyTorch %s): the throughputs are not comparable. ",
                ra->backend, rp->backend);
    if (ra && (ra->steps != rp->steps || ra->batch_size != rp->batch_size))
        fprintf(f, "The runs differ in length (ampbench %ld steps at batch %ld, PyTorch %ld at batch %ld: the peer "
                   "takes only the options its --help lists), so the accuracies are not comparable; samples/s is. ",
                ra->steps, ra->batch_size, rp->steps, rp->batch_size);
    char ma[384], mp[384];
    if (ra) mem_method(ma, sizeof ma, ra);
    mem_method(mp, sizeof mp, rp);
    const int pcuda_alloc = strstr(mp, "max_memory_allocated") != NULL;
    if (!isfinite(rp->peak_total))
        fprintf(f, "Peak memory: ampbench's is %s; PyTorch's is %s.", ra ? ma : DASH, mp);
    else if (ra && pcuda_alloc && !strcmp(ra->backend, "cuda"))
        fprintf(f, "Peak memory is measured alike: ampbench's is %s; PyTorch's is %s. Both count tensors allocated "
                   "on the device (neither counts a caching allocator's unused blocks).",
                ma, mp);
    else if (ra && strstr(mp, "cpu: parameters + gradients") == mp && !strcmp(ra->backend, "cpu"))
        fprintf(f, "Peak memory is measured alike on the CPU: ampbench's is %s; PyTorch's is %s. Both count what the "
                   "training holds (weights, gradients, optimizer state, what backward needs), neither an "
                   "allocator's slack.",
                ma, mp);
    else
        fprintf(f, "Peak memory is measured differently, so compare each tool's AMP/FP32 saving rather than the "
                   "absolute figures: ampbench's is %s; PyTorch's is %s.",
                ra ? ma : DASH, mp);
    fprintf(f, "\n\n");
}

/* The measured cells of the claim table: each writes its cell and returns 1, or 0 when the run
 * folder lacks what it needs (the cell is then a dash). */
static int time_cell(char *b, size_t n, const claim_ctx *x) {
    if (!isfinite(x->q->amp_time_saving_pct)) return 0;
    snprintf(b, n, "%+.1f%% (FP32 %.0f -> AMP %.0f samples/s)", x->q->amp_time_saving_pct,
             x->w->fp32->samples_per_s, x->w->amp->samples_per_s);
    return 1;
}

static int model_time_cell(char *b, size_t n, const claim_ctx *x) {
    const hr_ratios *q = x->q;
    if (!isfinite(q->model_amp_time_saving_pct)) return 0;
    snprintf(b, n, "%+.1f%% on the %s (FP32 step %.3g ms -> AMP %.3g ms, **modelled**)", q->model_amp_time_saving_pct,
             q->model_gpu_label, 1e3 * x->w->fp32->model_step_s, 1e3 * x->w->amp->model_step_s);
    return 1;
}

static void model_time_meaning(FILE *f, const claim_ctx *x) {
    const hr_ratios *q = x->q;
    if (!isfinite(q->model_amp_time_saving_pct)) {
        fprintf(f, "No modelled step in the FP32 and AMP records (records made before the step model, or of "
                   "different GPUs): `ampbench model-step --model %s%s --gpu rtx3090` gives it.",
                x->w->model, strcmp(x->w->model, "bert") == 0 ? " --init-from DIR" : "");
        return;
    }
    const double rep = hr_num(x->claim, "value", NAN);
    const int articles_gpu = strcmp(q->model_gpu, "rtx3090") == 0;
    fprintf(f, "The GPU step model (docs/step-model.md) for this configuration, per sample, on the %s (%s): each op "
               "at the longer of its FLOPs at the GPU's peak and its bytes at its bandwidth. It errs fast, so this is "
               "an upper bound of what AMP saves on that GPU.",
            q->model_gpu_label, articles_gpu ? "the articles' GPU: `--proj-gpu`'s default" : "the GPU the run was on");
    if (isfinite(rep) && articles_gpu)
        fprintf(f, " The articles' %g%% is %s it.", rep, rep <= q->model_amp_time_saving_pct ? "within" : "above");
    else if (isfinite(rep))
        fprintf(f, " The articles' %g%% was on an RTX 3090, not this GPU.", rep);
}

static int memory_cell(char *b, size_t n, const claim_ctx *x) {
    if (!isfinite(x->q->amp_memory_saving_pct)) return 0;
    snprintf(b, n, "%+.1f%% (FP32 %.2f -> AMP %.2f MB peak, comparable total)", x->q->amp_memory_saving_pct,
             mb(x->w->fp32->peak_total), mb(x->w->amp->peak_total));
    return 1;
}

/* with several seeds their mean delta and its interval first, then the lowest seed's; with one
 * seed, its delta */
static int accuracy_cell(char *b, size_t n, const claim_ctx *x) {
    const hr_workload *w = x->w;
    if (!isfinite(x->q->amp_accuracy_delta)) return 0;
    char which[48] = "";
    if (w->max_seeds > 1 && w->fp32->seed == w->amp->seed)
        snprintf(which, sizeof which, "seed %d", w->fp32->seed);
    else if (w->max_seeds > 1)
        snprintf(which, sizeof which, "seeds %d and %d", w->fp32->seed, w->amp->seed);
    hr_interval iv;
    if (amp_seeds_interval(w, &iv) && isfinite(iv.lo))
        snprintf(b, n, "mean over %d seeds %+.2f points, 95%% interval [%+.2f, %+.2f] (the seeds and the test set); "
                 "%s alone %+.2f (FP32 %.2f%% -> AMP %.2f%%)",
                 iv.n_a, iv.mean, iv.lo, iv.hi, which, x->q->amp_accuracy_delta, w->fp32->final_accuracy,
                 w->amp->final_accuracy);
    else
        snprintf(b, n, "%+.2f points (FP32 %.2f%% -> AMP %.2f%%%s%s, one seed: no interval)", x->q->amp_accuracy_delta,
                 w->fp32->final_accuracy, w->amp->final_accuracy, *which ? ", " : "", which);
    return 1;
}

static int dp_cell(char *b, size_t n, const claim_ctx *x) {
    const hr_ratios *q = x->q;
    if (!isfinite(q->dp_speedup_vs_amp)) return 0;
    snprintf(b, n, "%.2fx with %d ranks, efficiency %.0f%% (measured)", q->dp_speedup_vs_amp, q->dp_ranks,
             q->dp_efficiency_pct);
    return 1;
}

static int projection_cell(char *b, size_t n, const claim_ctx *x) {
    const hr_ratios *q = x->q;
    char e[64], t[64];
    if (!isfinite(q->proj_speedup)) return 0;
    snprintf(b, n, "%.2fx at %d %s, efficiency %s%%, epoch %ss (**projected**)", q->proj_speedup, q->proj_n,
             q->proj_kind, fmt_num(e, sizeof e, q->proj_efficiency_pct, "%.1f"),
             fmt_num(t, sizeof t, q->proj_epoch_time_s, "%.3g "));
    return 1;
}

/* "3.85x measured (2 ranks); 5.00x projected (4 gpus)", a dash for either figure that is missing */
static void measured_projected(char *b, size_t n, const claim_ctx *x, double measured, double projected,
                               const char *fmt) {
    char m[64], p[64];
    snprintf(b, n, "%s measured (%d ranks); %s projected (4 %s)", fmt_num(m, sizeof m, measured, fmt), x->q->dp_ranks,
             fmt_num(p, sizeof p, projected, fmt), x->kind);
}

static int dp_fp32_cell(char *b, size_t n, const claim_ctx *x) {
    const hr_ratios *q = x->q;
    if (!isfinite(q->dp_speedup_vs_fp32) && !isfinite(q->proj_speedup_vs_fp32)) return 0;
    measured_projected(b, n, x, q->dp_speedup_vs_fp32, q->proj_speedup_vs_fp32, "%.2fx");
    return 1;
}

static int dp_time_cell(char *b, size_t n, const claim_ctx *x) {
    const double s = x->q->proj_speedup;
    measured_projected(b, n, x, x->q->dp_time_saving_pct, isfinite(s) ? 100.0 * (1.0 - 1.0 / s) : NAN, "%+.1f%%");
    return 1;
}

/* One row of a workload's claim table: the articles' claim beside the measured figure and what
 * the difference means. */
typedef struct {
    const char *label;
    int per_kind;       /* the label ends with the projection's setting ("gpus", "nodes") */
    const char *metric; /* the claim's metric in harness/reported.json */
    int (*measured)(char *buf, size_t n, const claim_ctx *x);
    void (*meaning)(FILE *f, const claim_ctx *x); /* from the run's facts, or */
    const char *because;                          /* the same sentence for every run */
} claim_row;

static const claim_row claim_rows[] = {
    {"AMP time saving vs FP32", 0, "amp_time_saving", time_cell, time_meaning, NULL},
    {"AMP time saving vs FP32, modelled", 0, "amp_time_saving", model_time_cell, model_time_meaning, NULL},
    {"AMP peak-memory saving vs FP32", 0, "amp_memory_saving", memory_cell, memory_meaning, NULL},
    {"AMP test-accuracy delta", 0, "amp_accuracy_delta", accuracy_cell, accuracy_meaning, NULL},
    {"data-parallel speed-up over one AMP device, measured", 0, "dp_speedup_vs_amp", dp_cell, dp_meaning, NULL},
    {"data-parallel speed-up over one AMP device, 4", 1, "dp_speedup_vs_amp", projection_cell, projection_meaning,
     NULL},
    {"data-parallel AMP speed-up over one FP32 device", 0, "dp_speedup_vs_fp32", dp_fp32_cell, NULL,
     "Combines the AMP gain and the data-parallel gain; the projected figure multiplies the projected speed-up by "
     "the measured AMP/FP32 throughput ratio."},
    {"data-parallel time saving vs one AMP device", 0, "dp_time_saving", dp_time_cell, NULL, "1 - 1/speed-up."},
};

static void claim_row_write(FILE *f, const claim_row *r, const claim_ctx *ctx) {
    claim_ctx x = *ctx;
    char rc[512], mc[256];
    x.claim = hr_reported_claim(x.rep, x.w->model, r->metric, 1);
    claim_cell(rc, sizeof rc, x.rep, x.claim, x.w->model);
    if (!r->measured(mc, sizeof mc, &x)) snprintf(mc, sizeof mc, DASH);
    fprintf(f, "| %s%s%s | %s | %s | ", r->label, r->per_kind ? " " : "", r->per_kind ? x.kind : "", rc, mc);
    if (r->meaning) r->meaning(f, &x);
    else fprintf(f, "%s", r->because);
    fprintf(f, " |\n");
}

static void workload_section(FILE *f, const hr_reported *rep, const hr_runset *rs, const hr_workload *w,
                             const char *plots_rel,
                             char drawn[][128], int n_drawn) {
    const cJSON *wl = hr_reported_workload(rep, w->model);
    const char *key = hr_reported_key(rep, w->model);
    fprintf(f, "## %s (`%s`)\n\n", hr_str(wl, "title", w->model), w->model);
    if (wl && strcmp(key, w->model) != 0)
        fprintf(f, "As reported for `%s`, of which `%s` is a variant (the articles do not say which stem their "
                   "network had): %s.\n\n", key, w->model, hr_str(wl, "setting", "?"));
    else if (wl)
        fprintf(f, "As reported: %s.%s%s\n\n", hr_str(wl, "setting", "?"), *hr_str(wl, "note", "") ? " " : "",
                hr_str(wl, "note", ""));
    if (w->n_all == 0) {
        fprintf(f, "No ampbench result for this workload in the run folder (a peer result only).\n\n");
        peer_table(f, rs, w);
        return;
    }
    const hr_run *any = w->all[0];
    fprintf(f, "Measured here: %s backend (%s), batch %ld per rank, %s", any->backend, any->device, any->batch_size,
            any->max_steps > 0 ? "a step limit per run (quick run)" : "whole epochs");
    if (any->train_subset > 0 || any->test_subset > 0)
        fprintf(f, ", %ld training and %ld test %s (subsets)", any->train_samples, any->test_samples,
                samples_word(any));
    const cJSON *wj = cJSON_GetObjectItemCaseSensitive(any->json, "workload");
    if (*hr_str(wj, "lr_schedule", ""))
        fprintf(f, ", lr %g %s with %.0f warm-up steps", hr_num(wj, "lr", NAN), hr_str(wj, "lr_schedule", ""),
                hr_num(wj, "warmup_steps", 0));
    fprintf(f, ".\n\n");
    runs_table(f, w);

    /* the projection is read at the articles' setting: 4 GPUs (ResNet-50) or 4 nodes (BERT) */
    const char *kind = hr_str(hr_reported_claim(rep, w->model, "dp_speedup_vs_amp", 1), "dp_kind", "gpus");
    hr_ratios q;
    hr_compute_ratios(w, 4, kind, &q);
    const claim_ctx x = {rep, w, &q, NULL, kind};
    fprintf(f, "| quantity | reported | measured | what the difference means |\n|---|---|---|---|\n");
    for (size_t k = 0; k < sizeof claim_rows / sizeof claim_rows[0]; k++) claim_row_write(f, &claim_rows[k], &x);
    fprintf(f, "\n");

    seeds_section(f, rep, w);
    absolute_rows(f, rep, rs, w);
    memory_table(f, w);
    peer_table(f, rs, w);
    /* at the articles' setting (a workload they did not run: ResNet-50's); their figure only for their own */
    const cJSON *dpc = hr_reported_claim(rep, w->model, "dp_speedup_vs_amp", 1),
                *own = hr_reported_claim(rep, w->model, "dp_speedup_vs_amp", 0);
    hr_write_dp_patterns(f, w, (int)hr_num(dpc, "devices", 4), kind, own ? hr_num(own, "value", NAN) : NAN);
    hr_write_model_parallel(f, rs, w);
    hr_write_grad_range(f, w);

    if (plots_rel && n_drawn > 0) {
        int any_plot = 0;
        char m[80];
        snprintf(m, sizeof m, "_%s.png", w->model);
        const size_t ml = strlen(m);
        for (int i = 0; i < n_drawn; i++) {
            const size_t dl = strlen(drawn[i]);
            if (dl <= ml || strcmp(drawn[i] + dl - ml, m) != 0) continue;
            if (!any_plot) fprintf(f, "Plots:\n\n");
            any_plot = 1;
            fprintf(f, "![%s](%s/%s)\n", drawn[i], plots_rel, drawn[i]);
        }
        if (any_plot) fprintf(f, "\n");
    }
}

/* Reported figures of a workload that has no run in this folder. */
static void reported_only_section(FILE *f, const hr_reported *rep, const char *model, const cJSON *wl,
                                  const hr_runset *rs) {
    fprintf(f, "## %s (`%s`): reported only\n\n", hr_str(wl, "title", model), model);
    const char *why = "no result for this workload in the run folder";
    for (int i = 0; i < rs->n_planned; i++)
        if (strcmp(rs->planned[i].workload, model) == 0 && *rs->planned[i].reason) {
            why = rs->planned[i].reason;
            break;
        }
    fprintf(f, "Not measured: %s. The articles report (%s):\n\n", why, hr_str(wl, "setting", "?"));
    fprintf(f, "| mode | quantity | reported | measured |\n|---|---|---|---|\n");
    const cJSON *claims = cJSON_GetObjectItemCaseSensitive(rep->json, "claims"), *c;
    cJSON_ArrayForEach(c, claims) {
        if (strcmp(hr_str(c, "workload", ""), model) != 0) continue;
        char cell[512];
        claim_cell(cell, sizeof cell, rep, c, model);
        /* claim_cell shows "from", or the note when there is no "from" */
        const char *note = *hr_str(c, "from", "") ? hr_str(c, "note", "") : "";
        fprintf(f, "| %s | %s | %s%s%s | %s |\n", hr_str(c, "mode", "?"), hr_str(c, "metric", "?"), cell,
                *note ? "; " : "", note, DASH);
    }
    fprintf(f, "\n");
}

/* Which sources the records were built from: each commit with its count of records, and a warning
 * when any figure comes from a tree with uncommitted changes or from an unknown commit (a
 * record's own git_commit and git_dirty, not the run folder's). */
static void provenance(FILE *f, const hr_runset *rs) {
    enum { MAXC = 8 };
    char seen[MAXC][48];
    int count[MAXC], dirty[MAXC], n = 0, n_dirty = 0, n_unknown = 0, n_unrecorded = 0, more = 0;
    for (int i = 0; i < rs->n_runs; i++) {
        const hr_run *r = &rs->runs[i];
        n_dirty += r->dirty == 1;
        n_unknown += strcmp(r->commit, "unknown") == 0;
        n_unrecorded += r->dirty < 0 && strcmp(r->commit, "unknown") != 0;
        int k = 0;
        while (k < n && !(strcmp(seen[k], r->commit) == 0 && dirty[k] == (r->dirty == 1))) k++;
        if (k == n) {
            if (n == MAXC) {
                more++;
                continue;
            }
            snprintf(seen[n], sizeof seen[n], "%s", r->commit);
            dirty[n] = r->dirty == 1, count[n] = 0, n++;
        }
        count[k]++;
    }
    if (n == 0) return;
    fprintf(f, "Records built from:");
    for (int k = 0; k < n; k++)
        fprintf(f, "%s `%.12s`%s (%d record%s)", k ? ";" : "", seen[k], dirty[k] ? " with uncommitted changes" : "",
                count[k], count[k] == 1 ? "" : "s");
    if (more) fprintf(f, "; %d more record%s from other sources", more, more == 1 ? "" : "s");
    fprintf(f, ".\n\n");
    if (n_dirty || n_unknown) {
        char a[96] = "", b[96] = "";
        if (n_dirty) snprintf(a, sizeof a, "%d of %d records come from a tree with uncommitted changes", n_dirty, rs->n_runs);
        if (n_unknown) snprintf(b, sizeof b, "%d of %d records from an unknown commit", n_unknown, rs->n_runs);
        fprintf(f, "**Warning:** %s%s%s: their figures cannot be traced to a committed source.\n\n", a,
                n_dirty && n_unknown ? ", and " : "", b);
    }
    if (n_unrecorded)
        fprintf(f, "%d record%s name a commit but not whether the tree was clean.\n\n", n_unrecorded,
                n_unrecorded == 1 ? "" : "s");
}

static void header(FILE *f, const hr_runset *rs) {
    const cJSON *m = rs->manifest;
    fprintf(f, "# ampbench: measured vs reported\n\n");
    fprintf(f, "Run folder `%s`", rs->dir);
    if (m) {
        fprintf(f, ", %s run (%s), started %s, finished %s.\n\n", hr_str(m, "mode", "?"), hr_str(m, "mode_detail", ""),
                hr_str(m, "started_at", "?"), hr_str(m, "finished_at", "not finished"));
        fprintf(f, "Machine: %s, %s, %d cores; GPUs: %s; MPI: %s; source %s.\n\n", hr_str(m, "hostname", "?"),
                hr_str(m, "cpu", "?"), (int)hr_num(m, "cores", 0), hr_str(m, "gpus", "none"),
                hr_str(m, "mpi", "none"), hr_str(m, "git_commit", "?"));
        const char *prof = hr_str(m, "profile", NULL), *why = hr_str(m, "profile_reason", "");
        if (prof) {
            const size_t l = strlen(why);
            fprintf(f, "Profile: %s: %s%s\n\n", prof, *why ? why : "no reason recorded",
                    l && why[l - 1] == '.' ? "" : ".");
        }
        const double seeds = hr_num(m, "seeds", NAN);
        if (isfinite(seeds)) {
            if (seeds > 1)
                fprintf(f, "Seeds: %.0f (every run repeated with seeds 1 to %.0f; each workload's \"Accuracy over "
                           "seeds\" gives the spread).\n\n", seeds, seeds);
            else
                fprintf(f, "Seeds: %.0f (one run per mode: no spread over seeds is measured).\n\n", seeds);
        }
    } else {
        fprintf(f, " (no run.json: results collected by hand).\n\n");
    }
    provenance(f, rs);
    fprintf(f, "Reproduction means honest measurement, not matching: each table sets the articles' figure beside "
               "the one measured here and says what the difference means. Ratios are computed from the result "
               "records: time saving = 1 - throughput(FP32)/throughput(AMP) (same work in both runs), memory "
               "saving = 1 - peak(AMP)/peak(FP32) (the comparable total of the tracked allocator: every category but the CPU-only scratch), accuracy delta = "
               "accuracy(AMP) - accuracy(FP32), speed-up = throughput(N ranks)/throughput(1), efficiency = "
               "speed-up/N. Figures marked **projected** come from a cost model, not a measurement. Results of "
               "the PyTorch peer (`\"tool\": \"pytorch\"`) are set beside ampbench's in each workload's last "
               "table and never enter these ratios.\n\n");
}

static void summary(FILE *f, const hr_reported *rep, const hr_workload *ws, int nw, char drawn[][128], int n_drawn,
                    const char *plots_rel) {
    fprintf(f, "## Summary\n\nMeasured here, with the articles' figure in brackets (their workload when this one has "
               "none).\n\n| workload | runs | AMP time saving | AMP memory saving | AMP accuracy delta | "
               "data-parallel speed-up over AMP (measured) | 4-device speed-up (projected) |\n"
               "|---|---|---|---|---|---|---|\n");
    static const char *const metrics[] = {"amp_time_saving", "amp_memory_saving", "amp_accuracy_delta",
                                          "dp_speedup_vs_amp"};
    for (int i = 0; i < nw; i++) {
        hr_ratios q;
        const char *kind = hr_str(hr_reported_claim(rep, ws[i].model, "dp_speedup_vs_amp", 1), "dp_kind", "gpus");
        hr_compute_ratios(&ws[i], 4, kind, &q);
        char cell[4][400], m[48], r[48], pr[32];
        const double vals[4] = {q.amp_time_saving_pct, q.amp_memory_saving_pct, q.amp_accuracy_delta,
                                q.dp_speedup_vs_amp};
        static const char *const fmts[4] = {"%+.1f%%", "%+.1f%%", "%+.2f pt", "%.2fx"};
        for (int k = 0; k < 4; k++) {
            const cJSON *c = hr_reported_claim(rep, ws[i].model, metrics[k], 1);
            fmt_num(m, sizeof m, vals[k], fmts[k]);
            if (c && isfinite(hr_num(c, "value_max", NAN)))
                snprintf(r, sizeof r, "%g to %g", hr_num(c, "value", NAN), hr_num(c, "value_max", NAN));
            else if (c)
                snprintf(r, sizeof r, "%g%s", hr_num(c, "value", NAN), k == 2 ? " pt" : k == 3 ? "x" : "%");
            if (snprintf(cell[k], sizeof cell[k], "%s%s%s%s", isfinite(vals[k]) ? m : DASH, c ? " [" : "",
                         c ? r : "", c ? "]" : "") >= (int)sizeof cell[k])
                continue; /* cannot happen with these sizes; keeps the cell truncated */
            if (k == 3 && isfinite(vals[k])) {
                const size_t l = strlen(cell[k]);
                snprintf(cell[k] + l, sizeof cell[k] - l, ", %d ranks", q.dp_ranks);
            }
            if (k == 2 && isfinite(vals[k])) { /* several seeds: their mean leads, the lowest seed after */
                char over[160], lead[400];
                seeds_delta_text(over, sizeof over, &ws[i], 0, "amp", "pt");
                if (*over && ws[i].fp32) {
                    snprintf(lead, sizeof lead, "%s%s%s%s; seed %d alone %s", over, c ? " [" : "", c ? r : "",
                             c ? "]" : "", ws[i].fp32->seed, m);
                    snprintf(cell[k], sizeof cell[k], "%s", lead);
                }
            }
        }
        fprintf(f, "| `%s` | %d | %s | %s | %s | %s | %s |\n", ws[i].model, ws[i].n_all, cell[0], cell[1], cell[2],
                cell[3], fmt_num(pr, sizeof pr, q.proj_speedup, "%.2fx"));
    }
    fprintf(f, "\n");
    for (int i = 0; i < n_drawn && plots_rel; i++)
        if (strcmp(drawn[i], "amp_savings.png") == 0)
            fprintf(f, "![AMP time and memory saving, reported vs measured](%s/amp_savings.png)\n\n", plots_rel);
}

int hr_write_report(const hr_runset *rs, const hr_reported *rep, const char *out_path, const char *plots_rel,
                    char drawn[][128], int n_drawn) {
    hr_workload *ws = calloc(HR_MAX_WORKLOADS, sizeof *ws);
    if (!ws) return ab_errorf("out of memory");
    int nw = 0;
    if (hr_group_workloads(rs, ws, HR_MAX_WORKLOADS, &nw) != 0) {
        free(ws);
        return -1;
    }
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    if (!f) {
        free(ws);
        return ab_errorf("out of memory");
    }
    header(f, rs);
    if (nw == 0) fprintf(f, "**No results in this folder.** Nothing was measured.\n\n");
    else summary(f, rep, ws, nw, drawn, n_drawn, plots_rel);
    for (int i = 0; i < nw; i++) workload_section(f, rep, rs, &ws[i], plots_rel, drawn, n_drawn);

    const cJSON *wls = cJSON_GetObjectItemCaseSensitive(rep->json, "workloads"), *wl;
    cJSON_ArrayForEach(wl, wls) {
        int seen = 0;
        for (int i = 0; i < nw; i++) seen |= strcmp(hr_reported_key(rep, ws[i].model), wl->string) == 0;
        if (!seen) reported_only_section(f, rep, wl->string, wl, rs);
    }

    int header_done = 0;
    for (int i = 0; i < rs->n_planned; i++) {
        const hr_planned *p = &rs->planned[i];
        if (strcmp(p->status, "ok") == 0) continue;
        if (!header_done) fprintf(f, "## Runs not completed\n\n| run | status | reason |\n|---|---|---|\n");
        header_done = 1;
        fprintf(f, "| `%s` | %s | %s |\n", p->name, p->status, *p->reason ? p->reason : DASH);
    }
    if (header_done) fprintf(f, "\n");

    if (plots_rel && n_drawn > 0) {
        fprintf(f, "## All plots\n\n");
        for (int i = 0; i < n_drawn; i++) fprintf(f, "- [%s](%s/%s)\n", drawn[i], plots_rel, drawn[i]);
        fprintf(f, "\n");
    }
    fclose(f);
    free(ws);
    const int rc = hr_write_atomic(out_path, text);
    free(text);
    return rc;
}
