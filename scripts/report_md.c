/* REPORT.md: one table per workload with the reported and the measured figures side by side and
 * a sentence on what the difference means, built from the facts of the runs (backend, ranks,
 * steps, the memory categories), never from fixed verdicts. */
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
    if (strcmp(wl, model) == 0)
        snprintf(buf, n, "%s (%s%s%s)", v, hr_str(c, "hardware", "?"), *from ? "; " : "", from);
    else
        snprintf(buf, n, "%s (%s, %s; no figure for this workload)", v, hr_str(w, "title", wl), hr_str(c, "hardware", "?"));
}

static double mb(double bytes) { return bytes / 1e6; }

static const char *run_status(const hr_run *r) {
    return r->complete ? "complete" : r->interrupted ? "interrupted" : "incomplete";
}

static void runs_table(FILE *f, const hr_workload *w) {
    fprintf(f, "| run | precision | ranks | backend (device) | epochs | steps | train time (s) | samples/s | "
               "peak memory (MB) | test accuracy (%%) | final train loss | overflows / skipped steps | status |\n");
    fprintf(f, "|---|---|---|---|---|---|---|---|---|---|---|---|---|\n");
    for (int i = 0; i < w->n_all; i++) {
        const hr_run *r = w->all[i];
        char a[32], b[32], c[32], d[32], e[32];
        fprintf(f, "| `%s` | %s | %d | %s (%s) | %d of %d | %ld | %s | %s | %s | %s | %s | %d / %ld | %s |\n", r->name,
                r->precision, r->world_size, r->backend, r->device, r->epochs_done, r->epochs_requested, r->steps,
                fmt_num(a, sizeof a, r->total_time_s, "%.2f"), fmt_num(b, sizeof b, r->samples_per_s, "%.0f"),
                fmt_num(c, sizeof c, mb(r->peak_total), "%.2f"), fmt_num(d, sizeof d, r->final_accuracy, "%.2f"),
                fmt_num(e, sizeof e, r->final_train_loss, "%.4f"), r->overflow_events, r->skipped_steps, run_status(r));
    }
    fprintf(f, "\n");
}

static int cores_of(const hr_run *r) { return (int)hr_num(cJSON_GetObjectItemCaseSensitive(r->json, "host"), "cores", 0); }

static void time_meaning(FILE *f, const hr_workload *w, const hr_ratios *q, const cJSON *claim) {
    const double t = q->amp_time_saving_pct, rep = hr_num(claim, "value", NAN);
    if (!isfinite(t)) {
        fprintf(f, "Not measured: this run folder lacks %s.", !w->fp32 ? "an FP32 run" : "an AMP run");
        return;
    }
    fprintf(f, "AMP took %.2fx the FP32 time for the same work here. ", 1.0 - t / 100.0);
    if (strcmp(w->amp->backend, "cpu") == 0) {
        fprintf(f, "The CPU backend emulates fp16: tensors are rounded to fp16 for storage and converted back for "
                   "fp32 arithmetic, so AMP does the FP32 work plus conversions and there are no tensor cores to "
                   "gain from; a slower AMP run is the expected result on a CPU. ");
        if (isfinite(rep))
            fprintf(f, "The reported %g%% comes from fp16 tensor cores on a GPU and cannot be reproduced on this "
                       "machine.", rep);
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

static void memory_meaning(FILE *f, const hr_workload *w, const hr_ratios *q, const cJSON *claim) {
    const double s = q->amp_memory_saving_pct, rep = hr_num(claim, "value", NAN);
    if (!isfinite(s)) {
        fprintf(f, "Not measured.");
        return;
    }
    const hr_run *a = w->amp, *p = w->fp32;
    const double w32 = p->peak_parameters + p->peak_master, w16 = a->peak_parameters + a->peak_master;
    const double act_share = p->peak_total > 0 ? 100.0 * p->peak_activations / p->peak_total : NAN;
    fprintf(f, "Peak %.2f MB (FP32) vs %.2f MB (AMP). AMP keeps an fp16 working copy of the weights beside the "
               "fp32 master copy (weights %.2f -> %.2f MB) and stores activations in fp16 (activations %.2f -> "
               "%.2f MB); gradients %.2f -> %.2f MB, workspace %.2f -> %.2f MB. ",
            mb(p->peak_total), mb(a->peak_total), mb(w32), mb(w16), mb(p->peak_activations), mb(a->peak_activations),
            mb(p->peak_gradients), mb(a->peak_gradients), mb(p->peak_workspace), mb(a->peak_workspace));
    if (isfinite(act_share))
        fprintf(f, "Activations are %.0f%% of the FP32 peak here. ", act_share);
    if (s < 0) {
        /* name the category that grew most: the reader sees where AMP's extra memory went */
        const char *names[4] = {"the weights (fp16 copy beside the fp32 master)", "the gradients", "the activations",
                                "the workspace (conversion and matrix-product buffers)"};
        const double grow[4] = {w16 - w32, a->peak_gradients - p->peak_gradients,
                                a->peak_activations - p->peak_activations, a->peak_workspace - p->peak_workspace};
        int k = 0;
        for (int i = 1; i < 4; i++)
            if (grow[i] > grow[k]) k = i;
        fprintf(f, "AMP needs more memory here; the largest growth is in %s (+%.2f MB), which the halved "
                   "activations (-%.2f MB) do not make up for; ",
                names[k], mb(grow[k]), mb(p->peak_activations - a->peak_activations));
    } else {
        fprintf(f, "Halving the activations outweighs the extra weight copy; ");
    }
    if (isfinite(rep))
        fprintf(f, "the reported %g%% saving needs activations to dominate, as they do when training a deep "
                   "network at a large batch.", rep);
}

static void accuracy_meaning(FILE *f, const hr_reported *rep, const hr_workload *w, const hr_ratios *q,
                             const cJSON *claim) {
    const double d = q->amp_accuracy_delta;
    if (!isfinite(d)) {
        fprintf(f, "Not measured.");
        return;
    }
    const double lo = hr_num(claim, "value", 0), hi = hr_num(claim, "value_max", lo);
    if (d >= lo - 1.0 && d <= hi + 1.0)
        fprintf(f, "Within a point of the reported %g to %g point band: AMP keeps FP32 accuracy. ", lo, hi);
    else
        fprintf(f, "Outside the reported %g to %g point band by more than a point. ", lo, hi);
    if (w->amp->steps != w->fp32->steps) {
        fprintf(f, "The two runs trained different numbers of steps (FP32 %ld, AMP %ld), so this delta is not a "
                   "like-for-like comparison.",
                w->fp32->steps, w->amp->steps);
        return;
    }
    const int want = (int)hr_num(hr_reported_workload(rep, w->model), "epochs", 0);
    if (want > 0 && (w->amp->epochs_done < want || !w->amp->complete || w->amp->max_steps > 0))
        fprintf(f, "This run trained %ld steps (%d of the articles' %d epochs), so both accuracies are far from "
                   "converged; only the delta is comparable.",
                w->amp->steps, w->amp->epochs_done, want);
}

static void dp_meaning(FILE *f, const hr_workload *w, const hr_ratios *q) {
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

static void projection_meaning(FILE *f, const hr_workload *w, const hr_ratios *q) {
    const hr_run *pr = hr_projection_run(w);
    const cJSON *p = pr ? cJSON_GetObjectItemCaseSensitive(pr->json, "projection") : NULL;
    if (!p || q->proj_n == 0) {
        fprintf(f, "No projection in this folder.");
        return;
    }
    const double bw = hr_num(p, "bandwidth_Bps", NAN);
    char b[48];
    fprintf(f, "**Projected** from `%s`: %s; compute time per step %.3g s, gradient bytes %.0f, "
               "link bandwidth %s GB/s. It assumes the single-device compute time and the modelled all-reduce, "
               "nothing else.",
            pr->name, hr_str(p, "method", "cost model"), hr_num(p, "compute_time_per_step_s", NAN),
            hr_num(p, "grad_bytes", NAN), fmt_num(b, sizeof b, bw / 1e9, "%.2f"));
}

static void row(FILE *f, const char *what, const char *reported, const char *measured) {
    fprintf(f, "| %s | %s | %s | ", what, reported, measured);
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
        char rc[512], mc[256], est[96] = "";
        const cJSON *c = hr_reported_claim_mode(rep, w->model, modes[k], "total_time");
        claim_cell(rc, sizeof rc, rep, c, w->model);
        if (r) {
            const double train = hr_num(cJSON_GetObjectItemCaseSensitive(r->json, "workload"), "train_samples", NAN);
            if (want > 0 && isfinite(train) && r->samples_per_s > 0) {
                const double s = train * want / r->samples_per_s;
                if (s >= 3600) snprintf(est, sizeof est, "; %.1f h at this rate for %d epochs", s / 3600, want);
                else if (s >= 60) snprintf(est, sizeof est, "; %.1f min at this rate for %d epochs", s / 60, want);
                else snprintf(est, sizeof est, "; %.0f s at this rate for %d epochs", s, want);
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
            snprintf(mc, sizeof mc, "%.2f MB peak%s (tracked allocator: weights, gradients, activations, "
                                    "workspace)", mb(r->peak_total), k == 2 ? " per rank" : "");
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

        /* BERT: FP32 runs out of memory on one 8 GB GPU, AMP fits; a run that failed says why */
        c = hr_reported_claim_mode(rep, w->model, modes[k], "fits_in_memory");
        if (c) {
            claim_cell(rc, sizeof rc, rep, c, w->model);
            const hr_planned *p = NULL;
            for (int i = 0; i < rs->n_planned; i++)
                if (!strcmp(rs->planned[i].workload, w->model) && !strcmp(rs->planned[i].mode, modes[k]))
                    p = &rs->planned[i];
            if (r && r->complete)
                snprintf(mc, sizeof mc, "yes: ran to the end (%.2f MB peak, batch %ld)", mb(r->peak_total),
                         r->batch_size);
            else if (p && strcmp(p->status, "ok") != 0) {
                if (snprintf(mc, sizeof mc, "%s: %s", p->status, *p->reason ? p->reason : "no reason recorded") >=
                    (int)sizeof mc)
                    strcpy(mc + sizeof mc - 4, "...");
            }
            else
                snprintf(mc, sizeof mc, "%s", r ? "incomplete run" : DASH);
            fprintf(f, "| %s fits in memory | %s | %s |\n", names[k], rc, mc);
        }
    }
    fprintf(f, "\n");
}

static void workload_section(FILE *f, const hr_reported *rep, const hr_runset *rs, const hr_workload *w,
                             const char *plots_rel,
                             char drawn[][128], int n_drawn) {
    const cJSON *wl = hr_reported_workload(rep, w->model);
    fprintf(f, "## %s (`%s`)\n\n", hr_str(wl, "title", w->model), w->model);
    if (wl) fprintf(f, "As reported: %s.%s%s\n\n", hr_str(wl, "setting", "?"), *hr_str(wl, "note", "") ? " " : "", hr_str(wl, "note", ""));
    const hr_run *any = w->all[0];
    fprintf(f, "Measured here: %s backend (%s), batch %ld per rank, %s.\n\n", any->backend, any->device,
            any->batch_size, any->max_steps > 0 ? "a step limit per run (quick run)" : "whole epochs");
    runs_table(f, w);

    /* the projection is read at the articles' setting: 4 GPUs (ResNet-50) or 4 nodes (BERT) */
    const char *kind = hr_str(hr_reported_claim(rep, w->model, "dp_speedup_vs_amp", 1), "dp_kind", "gpus");
    hr_ratios q;
    hr_compute_ratios(w, 4, kind, &q);
    char rc[512], mc[256], x[64], y[64];
    fprintf(f, "| quantity | reported | measured | what the difference means |\n|---|---|---|---|\n");

    const cJSON *c = hr_reported_claim(rep, w->model, "amp_time_saving", 1);
    claim_cell(rc, sizeof rc, rep, c, w->model);
    if (isfinite(q.amp_time_saving_pct))
        snprintf(mc, sizeof mc, "%+.1f%% (FP32 %.0f -> AMP %.0f samples/s)", q.amp_time_saving_pct,
                 w->fp32->samples_per_s, w->amp->samples_per_s);
    else
        snprintf(mc, sizeof mc, DASH);
    row(f, "AMP time saving vs FP32", rc, mc);
    time_meaning(f, w, &q, c);
    fprintf(f, " |\n");

    c = hr_reported_claim(rep, w->model, "amp_memory_saving", 1);
    claim_cell(rc, sizeof rc, rep, c, w->model);
    if (isfinite(q.amp_memory_saving_pct))
        snprintf(mc, sizeof mc, "%+.1f%% (FP32 %.2f -> AMP %.2f MB peak)", q.amp_memory_saving_pct,
                 mb(w->fp32->peak_total), mb(w->amp->peak_total));
    else
        snprintf(mc, sizeof mc, DASH);
    row(f, "AMP peak-memory saving vs FP32", rc, mc);
    memory_meaning(f, w, &q, c);
    fprintf(f, " |\n");

    c = hr_reported_claim(rep, w->model, "amp_accuracy_delta", 1);
    claim_cell(rc, sizeof rc, rep, c, w->model);
    if (isfinite(q.amp_accuracy_delta))
        snprintf(mc, sizeof mc, "%+.2f points (FP32 %.2f%% -> AMP %.2f%%)", q.amp_accuracy_delta,
                 w->fp32->final_accuracy, w->amp->final_accuracy);
    else
        snprintf(mc, sizeof mc, DASH);
    row(f, "AMP test-accuracy delta", rc, mc);
    accuracy_meaning(f, rep, w, &q, c);
    fprintf(f, " |\n");

    c = hr_reported_claim(rep, w->model, "dp_speedup_vs_amp", 1);
    claim_cell(rc, sizeof rc, rep, c, w->model);
    if (isfinite(q.dp_speedup_vs_amp))
        snprintf(mc, sizeof mc, "%.2fx with %d ranks, efficiency %.0f%% (measured)", q.dp_speedup_vs_amp, q.dp_ranks,
                 q.dp_efficiency_pct);
    else
        snprintf(mc, sizeof mc, DASH);
    row(f, "data-parallel speed-up over one AMP device, measured", rc, mc);
    dp_meaning(f, w, &q);
    fprintf(f, " |\n");

    if (isfinite(q.proj_speedup))
        snprintf(mc, sizeof mc, "%.2fx at %d %s, efficiency %s%%, epoch %ss (**projected**)", q.proj_speedup, q.proj_n,
                 q.proj_kind, fmt_num(x, sizeof x, q.proj_efficiency_pct, "%.0f"),
                 fmt_num(y, sizeof y, q.proj_epoch_time_s, "%.3g "));
    else
        snprintf(mc, sizeof mc, DASH);
    char label[96];
    snprintf(label, sizeof label, "data-parallel speed-up over one AMP device, 4 %s", kind);
    row(f, label, rc, mc);
    projection_meaning(f, w, &q);
    fprintf(f, " |\n");

    c = hr_reported_claim(rep, w->model, "dp_speedup_vs_fp32", 1);
    claim_cell(rc, sizeof rc, rep, c, w->model);
    if (isfinite(q.dp_speedup_vs_fp32) || isfinite(q.proj_speedup_vs_fp32))
        snprintf(mc, sizeof mc, "%s measured (%d ranks); %s projected (4 %s)",
                 fmt_num(x, sizeof x, q.dp_speedup_vs_fp32, "%.2fx"), q.dp_ranks,
                 fmt_num(y, sizeof y, q.proj_speedup_vs_fp32, "%.2fx"), kind);
    else
        snprintf(mc, sizeof mc, DASH);
    row(f, "data-parallel AMP speed-up over one FP32 device", rc, mc);
    fprintf(f, "Combines the AMP gain and the data-parallel gain; the projected figure multiplies the projected "
               "speed-up by the measured AMP/FP32 throughput ratio. |\n");

    c = hr_reported_claim(rep, w->model, "dp_time_saving", 1);
    claim_cell(rc, sizeof rc, rep, c, w->model);
    snprintf(mc, sizeof mc, "%s measured (%d ranks); %s projected (4 %s)",
             fmt_num(x, sizeof x, q.dp_time_saving_pct, "%+.1f%%"), q.dp_ranks,
             fmt_num(y, sizeof y, isfinite(q.proj_speedup) ? 100.0 * (1.0 - 1.0 / q.proj_speedup) : NAN, "%+.1f%%"), kind);
    row(f, "data-parallel time saving vs one AMP device", rc, mc);
    fprintf(f, "1 - 1/speed-up. |\n\n");

    absolute_rows(f, rep, rs, w);

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
    } else {
        fprintf(f, " (no run.json: results collected by hand).\n\n");
    }
    fprintf(f, "Reproduction means honest measurement, not matching: each table sets the articles' figure beside "
               "the one measured here and says what the difference means. Ratios are computed from the result "
               "records: time saving = 1 - throughput(FP32)/throughput(AMP) (same work in both runs), memory "
               "saving = 1 - peak(AMP)/peak(FP32) (tracked allocator, all categories), accuracy delta = "
               "accuracy(AMP) - accuracy(FP32), speed-up = throughput(N ranks)/throughput(1), efficiency = "
               "speed-up/N. Figures marked **projected** come from a cost model, not a measurement.\n\n");
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
        char cell[4][160], m[48], r[48], pr[32];
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
        for (int i = 0; i < nw; i++) seen |= strcmp(ws[i].model, wl->string) == 0;
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
