/* The plots: writes each plot's data as small whitespace-separated files under OUT/data and runs
 * the matching gnuplot script of plots/ (amp_savings.gp, loss.gp, scale.gp, accuracy.gp,
 * scaling.gp, memory.gp) in that folder, so that only names built here reach gnuplot's command
 * line. Only ampbench's runs are drawn, except in the accuracy plot, which sets each tool and mode
 * side by side (over the seeds when there are several); the peers' other figures are in
 * REPORT.md's tables. With several seeds, the loss and scale plots draw each mode's lowest seed. */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "harness.h"

/* A label gnuplot can take inside single quotes and as one word: letters, digits, '-', '.', ','. */
void hr_safe_label(char *dst, size_t n, const char *src) {
    size_t k = 0;
    for (; *src && k + 1 < n; src++) dst[k++] = (strchr("'\" \t\\`$", *src)) ? '-' : *src;
    dst[k] = 0;
}

static void mode_label(const char *tool, const char *precision, int world_size, char *buf, size_t n) {
    char raw[96];
    const int peer = strcmp(tool, "ampbench") != 0;
    if (world_size > 1)
        snprintf(raw, sizeof raw, "%s%s%s-%d-ranks", peer ? tool : "", peer ? "-" : "", precision, world_size);
    else
        snprintf(raw, sizeof raw, "%s%s%s", peer ? tool : "", peer ? "-" : "", precision);
    hr_safe_label(buf, n, raw);
}

static void run_label(const hr_run *r, char *buf, size_t n) {
    mode_label(r->tool, r->precision, r->world_size, buf, n);
}

/* With several seeds a mode's lowest seed stands for it: skip the other seeds' runs. */
static int other_seed(const hr_workload *w, const hr_run *r) {
    return w->max_seeds > 1 && hr_mode_run(w->all, w->n_all, r) != r;
}

int hr_gnuplot(const char *data_dir, const char *gp_dir, const char *script, const char *vars) {
    char path[1200];
    snprintf(path, sizeof path, "%s/%s", gp_dir, script);
    if (access(path, R_OK) != 0) return ab_errorf("%s: gnuplot script not found", path);
    if (strchr(gp_dir, '\'') || strchr(gp_dir, '\\')) return ab_errorf("%s: a quote or backslash in the path", gp_dir);
    char all[16384];
    if (snprintf(all, sizeof all, "gpdir='%s'; %s", gp_dir, vars) >= (int)sizeof all)
        return ab_errorf("%s: too many series for one plot", script);
    fflush(NULL);
    const pid_t pid = fork();
    if (pid < 0) return ab_errorf("fork failed: %s", strerror(errno));
    if (pid == 0) {
        if (chdir(data_dir) != 0) _exit(126);
        /* gnuplot's warnings (an empty series, ...) go to a log beside the data, not the terminal */
        FILE *log = freopen("gnuplot.log", "a", stderr);
        (void)log;
        execlp("gnuplot", "gnuplot", "-e", all, path, (char *)NULL);
        _exit(127);
    }
    int st = 0;
    while (waitpid(pid, &st, 0) < 0)
        if (errno != EINTR) return ab_errorf("waitpid failed: %s", strerror(errno));
    if (WIFEXITED(st) && WEXITSTATUS(st) == 127) return ab_errorf("gnuplot not found: install gnuplot (Debian: gnuplot-nox)");
    if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) return ab_errorf("%s: gnuplot failed (status %d; see %s/gnuplot.log)", path, WEXITSTATUS(st), data_dir);
    return 0;
}

FILE *hr_open_data(const char *data_dir, const char *name) {
    char p[1200];
    if (snprintf(p, sizeof p, "%s/%s", data_dir, name) >= (int)sizeof p) {
        ab_errorf("%s: path too long", data_dir);
        return NULL;
    }
    FILE *f = fopen(p, "w");
    if (!f) ab_errorf("%s: cannot write: %s", p, strerror(errno));
    return f;
}

int hr_add_drawn(char drawn[][128], int max, int *n, const char *name) {
    if (*n >= max) return 0;
    if (snprintf(drawn[*n], 128, "%s", name) >= 128) return ab_errorf("%s: plot name too long", name);
    (*n)++;
    return 0;
}

/* Appends " word" to a space-separated list. */
static void append(char *list, size_t n, const char *word) {
    const size_t l = strlen(list);
    snprintf(list + l, n - l, "%s%s", l ? " " : "", word);
}

static void fmt_or_nan(FILE *f, double v) {
    if (isfinite(v)) fprintf(f, " %.4f", v);
    else fprintf(f, " NaN");
}

static int plot_savings(const hr_workload *ws, int nw, const hr_reported *rep, const char *dd, const char *gp,
                        char drawn[][128], int max, int *n) {
    FILE *f = hr_open_data(dd, "amp_savings.dat");
    if (!f) return -1;
    fprintf(f, "# workload reported_time_saving_pct measured_time_saving_pct reported_memory_saving_pct "
               "measured_memory_saving_pct has_reported has_measured modelled_time_saving_pct (NaN: no figure)\n");
    int on_cpu = 0;
    char model_gpu[64] = "";
    int rows = 0;
    char seen[HR_MAX_WORKLOADS * 2][64];
    int n_seen = 0;
    /* measured workloads first, then workloads that only have reported figures */
    for (int i = 0; i < nw; i++) {
        hr_ratios q;
        if (ws[i].n_all == 0) continue; /* a peer result only */
        hr_compute_ratios(&ws[i], 4, "gpus", &q);
        /* the workload's own figure (a variant, resnet50-cifar, takes the one of the workload it stands
         * for); none for a workload the articles give none for, as REPORT says ("no figure for this
         * workload"), rather than another workload's bar */
        const cJSON *ct = hr_reported_claim(rep, ws[i].model, "amp_time_saving", 0);
        const cJSON *cm = hr_reported_claim(rep, ws[i].model, "amp_memory_saving", 0);
        char lab[64];
        hr_safe_label(lab, sizeof lab, ws[i].model);
        fprintf(f, "\"%s\"", lab);
        fmt_or_nan(f, hr_num(ct, "value", NAN));
        fmt_or_nan(f, q.amp_time_saving_pct);
        fmt_or_nan(f, hr_num(cm, "value", NAN));
        fmt_or_nan(f, q.amp_memory_saving_pct);
        fprintf(f, " %d 1", ct || cm);
        fmt_or_nan(f, q.model_amp_time_saving_pct);
        fprintf(f, "\n");
        if (ws[i].all[0] && strcmp(ws[i].all[0]->backend, "cpu") == 0) on_cpu = 1;
        if (*q.model_gpu_label && !*model_gpu) snprintf(model_gpu, sizeof model_gpu, "%s", q.model_gpu_label);
        /* a variant (resnet50-cifar) stands for the reported workload (resnet50) it is set beside */
        snprintf(seen[n_seen++], 64, "%s", hr_reported_key(rep, ws[i].model));
        rows++;
    }
    const cJSON *wls = cJSON_GetObjectItemCaseSensitive(rep ? rep->json : NULL, "workloads"), *wl;
    cJSON_ArrayForEach(wl, wls) {
        int dup = 0;
        for (int k = 0; k < n_seen; k++) dup |= strcmp(seen[k], wl->string) == 0;
        const cJSON *ct = hr_reported_claim(rep, wl->string, "amp_time_saving", 0);
        const cJSON *cm = hr_reported_claim(rep, wl->string, "amp_memory_saving", 0);
        if (dup || (!ct && !cm) || n_seen >= (int)(sizeof seen / sizeof seen[0])) continue;
        char lab[64];
        hr_safe_label(lab, sizeof lab, wl->string);
        fprintf(f, "\"%s\"", lab);
        fmt_or_nan(f, hr_num(ct, "value", NAN));
        fprintf(f, " NaN");
        fmt_or_nan(f, hr_num(cm, "value", NAN));
        fprintf(f, " NaN 1 0 NaN\n");
        snprintf(seen[n_seen++], 64, "%s", wl->string);
        rows++;
    }
    fclose(f);
    if (rows == 0) return 0;
    char vars[768];
    snprintf(vars, sizeof vars,
             "out='../amp_savings.png'; w=%d; h=%d; data='amp_savings.dat'; measured='%s'; modelled='%s'",
             HR_PLOT_W, HR_PLOT_H,
             on_cpu ? "measured here on a CPU (fp16 emulated: no tensor cores)" : "measured here",
             *model_gpu ? model_gpu : "");
    AB_TRY(hr_gnuplot(dd, gp, "amp_savings.gp", vars));
    return hr_add_drawn(drawn, max, n, "amp_savings.png");
}

/* Opens the data file of run i of a workload's series `kind` ("loss", "scale", ...) in dd, with
 * a header line; name receives the file's name. */
static FILE *series_file(const char *dd, const char *kind, const hr_workload *w, int i, const char *header, char *name,
                         size_t cap) {
    snprintf(name, cap, "%s_%s_%d.dat", kind, w->model, i);
    hr_safe_label(name, cap, name);
    FILE *f = hr_open_data(dd, name);
    if (f) fprintf(f, "# %s\n", header);
    return f;
}

/* adds a finished series file and its run's legend title to the lists handed to gnuplot; with
 * several seeds the title names the seed drawn */
static void add_series(char *files, size_t fcap, char *titles, size_t tcap, const char *name, const hr_workload *w,
                       const hr_run *r) {
    char lab[96];
    run_label(r, lab, sizeof lab);
    if (w->max_seeds > 1) {
        const size_t l = strlen(lab);
        snprintf(lab + l, sizeof lab - l, "-seed-%d", r->seed);
    }
    append(files, fcap, name);
    append(titles, tcap, lab);
}

static int plot_loss(const hr_workload *w, const char *dd, const char *gp, char drawn[][128], int max, int *n) {
    char files[2048] = "", titles[2048] = "";
    for (int i = 0; i < w->n_all; i++) {
        const hr_run *r = w->all[i];
        const cJSON *lc = cJSON_GetObjectItemCaseSensitive(r->json, "loss_curve"), *p;
        if (cJSON_GetArraySize(lc) == 0 || other_seed(w, r)) continue;
        char name[256];
        FILE *f = series_file(dd, "loss", w, i, "step loss (mean unscaled loss over the log interval) scale", name,
                              sizeof name);
        if (!f) return -1;
        cJSON_ArrayForEach(p, lc) fprintf(f, "%.0f %.6g %.6g\n", hr_num(p, "step", 0), hr_num(p, "loss", NAN),
                                          hr_num(p, "scale", NAN));
        fclose(f);
        add_series(files, sizeof files, titles, sizeof titles, name, w, r);
    }
    if (!*files) return 0;
    char vars[6000], out[160], model[64];
    hr_safe_label(model, sizeof model, w->model);
    snprintf(out, sizeof out, "loss_%s.png", model);
    snprintf(vars, sizeof vars, "out='../%s'; w=%d; h=%d; files='%s'; titles='%s'; workload='%s'", out, HR_PLOT_W,
             HR_PLOT_H, files, titles, model);
    AB_TRY(hr_gnuplot(dd, gp, "loss.gp", vars));
    return hr_add_drawn(drawn, max, n, out);
}

static int plot_scale(const hr_workload *w, const char *dd, const char *gp, char drawn[][128], int max, int *n) {
    char files[2048] = "", titles[2048] = "", ovf[2048] = "";
    long last_step = 0;
    int n_events = 0;
    double smin = INFINITY, smax = 0;
    for (int i = 0; i < w->n_all; i++) {
        const hr_run *r = w->all[i];
        const cJSON *amp = hr_mixed_precision(r->json);
        if (!cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(amp, "enabled")) || !isfinite(r->init_scale)) continue;
        if (other_seed(w, r)) continue;
        if (strcmp(hr_str(amp, "dtype", "fp16"), "fp16") != 0) continue; /* bf16 runs need no scaling */
        const cJSON *ch = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(amp, "scale_history"),
                                                           "changes"),
                    *p;
        char name[256];
        FILE *f = series_file(dd, "scale", w, i, "step loss_scale (the scale holds from this step on)", name,
                              sizeof name);
        if (!f) return -1;
        if (cJSON_GetArraySize(ch) == 0) fprintf(f, "0 %.6g\n", r->init_scale);
        double last = r->init_scale;
        if (r->init_scale < smin) smin = r->init_scale;
        if (r->init_scale > smax) smax = r->init_scale;
        cJSON_ArrayForEach(p, ch) {
            last = hr_num(p, "scale", NAN);
            if (last < smin) smin = last;
            if (last > smax) smax = last;
            fprintf(f, "%.0f %.6g\n", hr_num(p, "step", 0), last);
        }
        fprintf(f, "%ld %.6g\n", r->steps, isfinite(r->final_scale) ? r->final_scale : last);
        fclose(f);
        if (r->steps > last_step) last_step = r->steps;
        add_series(files, sizeof files, titles, sizeof titles, name, w, r);

        const cJSON *ev = cJSON_GetObjectItemCaseSensitive(amp, "overflow_events");
        if (cJSON_GetArraySize(ev) > 0) {
            f = series_file(dd, "overflow", w, i,
                            "step scale_before (an overflow: the step was skipped and the scale backed off)", name,
                            sizeof name);
            if (!f) return -1;
            cJSON_ArrayForEach(p, ev) fprintf(f, "%.0f %.6g\n", hr_num(p, "step", 0), hr_num(p, "scale_before", NAN));
            fclose(f);
            append(ovf, sizeof ovf, name);
            n_events += cJSON_GetArraySize(ev);
        }
    }
    if (!*files) return 0;
    char vars[8000], out[160], model[64], note[128];
    hr_safe_label(model, sizeof model, w->model);
    snprintf(out, sizeof out, "scale_%s.png", model);
    if (n_events == 0)
        snprintf(note, sizeof note, "no overflow in %ld steps: the scale only changes on overflows or after the growth interval",
                 last_step);
    else
        snprintf(note, sizeof note, "%d overflow events", n_events);
    snprintf(vars, sizeof vars,
             "out='../%s'; w=%d; h=%d; files='%s'; titles='%s'; ovf='%s'; note='%s'; workload='%s'; last=%ld; "
             "ymin=%g; ymax=%g",
             out, HR_PLOT_W, HR_PLOT_H, files, titles, ovf, note, model, last_step, smin / 4, smax * 4);
    AB_TRY(hr_gnuplot(dd, gp, "scale.gp", vars));
    return hr_add_drawn(drawn, max, n, out);
}

/* The test accuracy of run r after epoch e, NAN when r did not finish that epoch. */
static double epoch_accuracy(const hr_run *r, int e) {
    const cJSON *p;
    cJSON_ArrayForEach(p, cJSON_GetObjectItemCaseSensitive(r->json, "epochs")) {
        if ((int)hr_num(p, "epoch", 0) == e) return hr_num(p, "test_accuracy", NAN);
    }
    return NAN;
}

/* One series per tool and mode: per epoch, the mean, sample sd, min and max of the test accuracy
 * over the seeds that finished that epoch. One seed gives a line, several a mean line in a band. */
static int plot_accuracy(const hr_workload *w, const hr_reported *rep, const char *dd, const char *gp,
                         char drawn[][128], int max, int *n) {
    hr_seed_group *groups = calloc(HR_MAX_GROUPS, sizeof *groups);
    if (!groups) return ab_errorf("out of memory");
    int ng = 0;
    if (hr_seed_groups(w, 0, groups, HR_MAX_GROUPS, &ng) != 0) {
        free(groups);
        return -1;
    }
    char files[2048] = "", titles[2048] = "", nseeds[256] = "";
    int max_epoch = 1, rc = 0;
    for (int g = 0; g < ng && rc == 0; g++) {
        const hr_seed_group *G = &groups[g];
        int last = 0;
        for (int i = 0; i < G->n; i++) {
            const cJSON *p;
            cJSON_ArrayForEach(p, cJSON_GetObjectItemCaseSensitive(G->runs[i]->json, "epochs")) {
                if ((int)hr_num(p, "epoch", 0) > last) last = (int)hr_num(p, "epoch", 0);
            }
        }
        if (last == 0) continue;
        char lab[96], name[256], model[64];
        mode_label(G->tool, G->precision, G->world_size, lab, sizeof lab);
        hr_safe_label(model, sizeof model, w->model);
        snprintf(name, sizeof name, "accuracy_%s_%s.dat", model, lab);
        FILE *f = hr_open_data(dd, name);
        if (!f) {
            rc = -1;
            break;
        }
        fprintf(f, "# epoch mean_test_accuracy_pct sd min max seeds (over the %d seed%s of %s %s, %d rank%s, that "
                   "finished the epoch; sd is the sample standard deviation, NaN with one seed)\n",
                G->n, G->n == 1 ? "" : "s", G->tool, G->precision, G->world_size, G->world_size == 1 ? "" : "s");
        for (int e = 1; e <= last; e++) {
            double v[HR_MAX_RUNS], lo = INFINITY, hi = -INFINITY, mean, sd;
            int k = 0;
            for (int i = 0; i < G->n; i++) {
                const double a = epoch_accuracy(G->runs[i], e);
                if (!isfinite(a)) continue;
                lo = fmin(lo, a);
                hi = fmax(hi, a);
                v[k++] = a;
            }
            if (k == 0) continue;
            hr_mean_sd(v, k, &mean, &sd);
            fprintf(f, "%d %.4f", e, mean);
            fmt_or_nan(f, sd);
            fprintf(f, " %.4f %.4f %d\n", lo, hi, k);
        }
        fclose(f);
        if (last > max_epoch) max_epoch = last;
        char num[16];
        snprintf(num, sizeof num, "%d", G->n);
        append(files, sizeof files, name);
        append(titles, sizeof titles, lab);
        append(nseeds, sizeof nseeds, num);
    }
    free(groups);
    if (rc != 0) return rc;
    if (!*files) return 0;
    char vars[6400], out[160], model[64], reported[160] = "";
    hr_safe_label(model, sizeof model, w->model);
    snprintf(out, sizeof out, "accuracy_%s.png", model);
    /* the articles' FP32 accuracy for this workload, drawn as a dashed line where there is one */
    const cJSON *claim = hr_reported_claim_mode(rep, w->model, "fp32", "test_accuracy");
    const double rv = hr_num(claim, "value", NAN);
    const int r_epochs = (int)hr_num(hr_reported_workload(rep, w->model), "epochs", 0);
    char rfile[96] = "";
    if (isfinite(rv)) {
        if (r_epochs > 0) snprintf(reported, sizeof reported, "the articles (FP32): %g%% after %d epochs", rv, r_epochs);
        else snprintf(reported, sizeof reported, "the articles (FP32): %g%%", rv);
        /* the line's value as a data file the script reads, so what is drawn is what is written */
        snprintf(rfile, sizeof rfile, "accuracy_%s_reported.dat", model);
        FILE *rf = hr_open_data(dd, rfile);
        if (!rf) return -1;
        fprintf(rf, "# the articles' FP32 test accuracy for %s (harness/reported.json), the dashed line\n%g\n", model,
                rv);
        fclose(rf);
    }
    /* the set the accuracy was measured on: GLUE's dev set is not a test set */
    const hr_run *any = w->n_all ? w->all[0] : w->n_peer ? w->peer_all[0] : NULL;
    const char *td = any ? hr_str(cJSON_GetObjectItemCaseSensitive(any->json, "workload"), "test_data", "") : "";
    const char *set = strstr(td, "dev") ? "dev" : "test";
    snprintf(vars, sizeof vars,
             "out='../%s'; w=%d; h=%d; files='%s'; titles='%s'; nseeds='%s'; workload='%s'; maxepoch=%d; "
             "reported_file='%s'; reported_title='%s'; evalset='%s'",
             out, HR_PLOT_W, HR_PLOT_H, files, titles, nseeds, model, max_epoch, rfile, reported, set);
    AB_TRY(hr_gnuplot(dd, gp, "accuracy.gp", vars));
    return hr_add_drawn(drawn, max, n, out);
}

static int plot_scaling(const hr_workload *w, const char *dd, const char *gp, char drawn[][128], int max, int *n) {
    hr_ratios q;
    hr_compute_ratios(w, 4, "gpus", &q);
    const hr_run *pr = hr_projection_run(w);
    const int have_meas = isfinite(q.dp_speedup_vs_amp);
    if (!have_meas && !pr) return 0;
    char model[64];
    hr_safe_label(model, sizeof model, w->model);
    char meas[160] = "", projg[160] = "", projn[160] = "";
    int max_n = 1;
    if (have_meas) {
        snprintf(meas, sizeof meas, "scaling_%s_measured.dat", model);
        FILE *f = hr_open_data(dd, meas);
        if (!f) return -1;
        fprintf(f, "# ranks speedup_over_one_amp_device (measured)\n1 1\n%d %.6g\n", q.dp_ranks, q.dp_speedup_vs_amp);
        fclose(f);
        if (q.dp_ranks > max_n) max_n = q.dp_ranks;
    }
    if (pr) {
        const cJSON *pts = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(pr->json, "projection"),
                                                            "points"),
                    *p;
        static const char *const kinds[] = {"gpus", "nodes"};
        for (int k = 0; k < 2; k++) {
            char name[160];
            snprintf(name, sizeof name, "scaling_%s_projected_%s.dat", model, kinds[k]);
            int rows = 0;
            FILE *f = NULL;
            cJSON_ArrayForEach(p, pts) {
                if (strcmp(hr_str(p, "kind", "gpus"), kinds[k]) != 0 || (int)hr_num(p, "n", 0) <= 1) continue;
                if (!f) {
                    f = hr_open_data(dd, name);
                    if (!f) return -1;
                    fprintf(f, "# devices projected_speedup (cost model, not measured)\n");
                    fprintf(f, "1 1\n"); /* one device is the reference */
                }
                fprintf(f, "%.0f %.6g\n", hr_num(p, "n", 0), hr_num(p, "speedup", NAN));
                if ((int)hr_num(p, "n", 0) > max_n) max_n = (int)hr_num(p, "n", 0);
                rows++;
            }
            if (f) fclose(f);
            if (rows) snprintf(k == 0 ? projg : projn, 160, "%s", name);
        }
    }
    char vars[2048], out[160];
    snprintf(out, sizeof out, "scaling_%s.png", model);
    snprintf(vars, sizeof vars,
             "out='../%s'; w=%d; h=%d; meas='%s'; projg='%s'; projn='%s'; workload='%s'; maxn=%d; ranks=%d", out,
             HR_PLOT_W, HR_PLOT_H, meas, projg, projn, model, max_n, q.dp_ranks);
    AB_TRY(hr_gnuplot(dd, gp, "scaling.gp", vars));
    return hr_add_drawn(drawn, max, n, out);
}

/* The projected speed-up of each data-parallel pattern against nodes (harness/plots/dp_patterns.gp), from
 * the projection run's dp_models rows */
static int plot_dp_patterns(const hr_workload *w, const char *dd, const char *gp, char drawn[][128], int max,
                            int *n) {
    const hr_run *pr = hr_projection_run(w);
    if (isnan(hr_dp_model_speedup(pr, "nodes", 2, "ring", 0, 1, 1))) return 0;
    char model[64], name[160];
    hr_safe_label(model, sizeof model, w->model);
    snprintf(name, sizeof name, "dp_patterns_%s.dat", model);
    FILE *f = hr_open_data(dd, name);
    if (!f) return -1;
    fprintf(f, "# nodes ring_overlap ring_no_overlap ps_1_server ps_server_per_node ring_overlap_accum4 "
               "(projected speed-up, cost model, not measured)\n1 1 1 1 1 1\n");
    int max_n = 1;
    for (int k = 2; k <= 8; k *= 2) {
        fprintf(f, "%d %.6g %.6g %.6g %.6g %.6g\n", k, hr_dp_model_speedup(pr, "nodes", k, "ring", 0, 1, 1),
                hr_dp_model_speedup(pr, "nodes", k, "ring", 0, 0, 1), hr_dp_model_speedup(pr, "nodes", k, "ps", 1, 1, 1),
                hr_dp_model_speedup(pr, "nodes", k, "ps", k, 1, 1), hr_dp_model_speedup(pr, "nodes", k, "ring", 0, 1, 4));
        max_n = k;
    }
    fclose(f);
    char vars[1024], out[160];
    snprintf(out, sizeof out, "dp_patterns_%s.png", model);
    snprintf(vars, sizeof vars, "out='../%s'; w=%d; h=%d; data='%s'; workload='%s'; maxn=%d", out, HR_PLOT_W, HR_PLOT_H,
             name, model, max_n);
    AB_TRY(hr_gnuplot(dd, gp, "dp_patterns.gp", vars));
    return hr_add_drawn(drawn, max, n, out);
}

/* Peak memory by category: one stacked bar per run (FP32, AMP, a data-parallel rank), the
 * comparable total marked on each, cpu_scratch drawn apart as a hatched bar beside it, and the
 * saving of each category AMP vs FP32 in a second panel. */
static int plot_memory(const hr_workload *w, const char *dd, const char *gp, char drawn[][128], int max, int *n) {
    const hr_run *runs[3] = {w->fp32, w->amp, w->dp};
    int rows = 0, have_scratch = 0;
    double top = 0;
    char model[64], name[160];
    hr_safe_label(model, sizeof model, w->model);
    snprintf(name, sizeof name, "memory_%s.dat", model);
    FILE *f = hr_open_data(dd, name);
    if (!f) return -1;
    fprintf(f, "# run  cumulative MB of weights master gradients optimizer activations workspace (stack tops), "
               "comparable_total_MB cpu_scratch_MB (NaN: not recorded), then each category's own MB\n");
    for (int i = 0; i < 3; i++) {
        const hr_run *r = runs[i];
        if (!r || !(r->peak_total > 0)) continue;
        char lab[64];
        if (i < 2) snprintf(lab, sizeof lab, "%s", i == 0 ? "FP32" : "AMP");
        else snprintf(lab, sizeof lab, "AMP-%d-ranks-per-rank", r->world_size);
        fprintf(f, "\"%s\"", lab);
        double cum = 0;
        for (int k = 0; k < HR_MEM_CATS; k++) {
            cum += hr_mem_cat(r, k) / 1e6;
            fprintf(f, " %.6f", cum);
        }
        if (cum > top) top = cum;
        fmt_or_nan(f, r->peak_total / 1e6);
        fmt_or_nan(f, r->peak_cpu_scratch / 1e6);
        if (isfinite(r->peak_cpu_scratch)) {
            have_scratch = 1;
            if (r->peak_cpu_scratch / 1e6 > top) top = r->peak_cpu_scratch / 1e6;
        }
        for (int k = 0; k < HR_MEM_CATS; k++) fprintf(f, " %.6f", hr_mem_cat(r, k) / 1e6);
        fprintf(f, "\n");
        rows++;
    }
    fclose(f);
    if (rows == 0) return 0;
    char saving[160] = "";
    if (w->fp32 && w->amp && w->fp32->peak_total > 0 && w->amp->peak_total > 0) {
        snprintf(saving, sizeof saving, "memory_%s_saving.dat", model);
        f = hr_open_data(dd, saving);
        if (!f) return -1;
        fprintf(f, "# category MB_saved_by_AMP (FP32 - AMP; negative: AMP holds more), category index\n");
        static const char *const short_names[HR_MEM_CATS] = {"weights", "master", "gradients", "optimizer",
                                                             "activations", "workspace"};
        for (int k = 0; k < HR_MEM_CATS; k++)
            fprintf(f, "\"%s\" %.6f %d\n", short_names[k], (hr_mem_cat(w->fp32, k) - hr_mem_cat(w->amp, k)) / 1e6,
                    k + 1);
        fprintf(f, "\"total\" %.6f 0\n", (w->fp32->peak_total - w->amp->peak_total) / 1e6);
        fclose(f);
    }
    char vars[2048], out[160];
    snprintf(out, sizeof out, "memory_%s.png", model);
    snprintf(vars, sizeof vars,
             "out='../%s'; w=%d; h=%d; data='%s'; saving='%s'; workload='%s'; nruns=%d; scratch=%d; ymax=%g", out,
             HR_PLOT_W, HR_PLOT_H, name, saving, model, rows, have_scratch, top * 1.18 + 1e-9);
    AB_TRY(hr_gnuplot(dd, gp, "memory.gp", vars));
    return hr_add_drawn(drawn, max, n, out);
}

int hr_draw_plots(const hr_runset *rs, const hr_reported *rep, const char *gp_dir, const char *out_dir,
                  char drawn[][128], int max, int *n_drawn) {
    *n_drawn = 0;
    char dd[1200];
    snprintf(dd, sizeof dd, "%s/data", out_dir);
    AB_TRY(hr_mkdir_p(dd));
    hr_workload *ws = calloc(HR_MAX_WORKLOADS, sizeof *ws);
    if (!ws) return ab_errorf("out of memory");
    int nw = 0, rc = hr_group_workloads(rs, ws, HR_MAX_WORKLOADS, &nw);
    if (rc == 0) rc = plot_savings(ws, nw, rep, dd, gp_dir, drawn, max, n_drawn);
    for (int i = 0; i < nw && rc == 0; i++) {
        rc = plot_loss(&ws[i], dd, gp_dir, drawn, max, n_drawn);
        if (rc == 0) rc = plot_scale(&ws[i], dd, gp_dir, drawn, max, n_drawn);
        if (rc == 0) rc = plot_accuracy(&ws[i], rep, dd, gp_dir, drawn, max, n_drawn);
        if (rc == 0) rc = plot_scaling(&ws[i], dd, gp_dir, drawn, max, n_drawn);
        if (rc == 0) rc = plot_dp_patterns(&ws[i], dd, gp_dir, drawn, max, n_drawn);
        if (rc == 0) rc = plot_memory(&ws[i], dd, gp_dir, drawn, max, n_drawn);
        if (rc == 0) rc = hr_plot_grad_range(&ws[i], dd, gp_dir, drawn, max, n_drawn);
    }
    free(ws);
    return rc;
}
