/* ampbench-regress: compares the results of a current run folder with a baseline run folder,
 * metric by metric, with the tolerances of a small config file (harness/regress.conf); prints
 * what moved, exits 1 on a regression (2 on bad input), and writes the current figures in
 * github-action-benchmark's JSON (customSmallerIsBetter / customBiggerIsBetter).
 *   ampbench-regress BASELINE_DIR CURRENT_DIR [--config FILE] [--json-prefix PATH] [--no-json] */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"

#ifndef AB_SOURCE_DIR
#define AB_SOURCE_DIR "."
#endif

static const char usage[] =
    "usage: ampbench-regress BASELINE_DIR CURRENT_DIR [options]\n"
    "  compares every result of BASELINE_DIR with the same workload/precision/ranks in CURRENT_DIR\n"
    "  (and the same seed and tool when a mode ran with several seeds);\n"
    "  exit 0: within tolerance, 1: a regression or a missing result, 2: bad input\n"
    "options:\n"
    "  --config FILE       metrics and tolerances     [" AB_SOURCE_DIR "/harness/regress.conf]\n"
    "  --json-prefix PATH  github-action-benchmark files PATH-smaller.json, PATH-bigger.json\n"
    "                      [CURRENT_DIR/benchmark]\n"
    "  --no-json           do not write them\n";

/* The metrics a config line may name: per run, and per workload (ratios). */
typedef enum { M_RUN, M_WORKLOAD } metric_scope;
typedef struct {
    const char *name, *unit;
    metric_scope scope;
} metric_def;

static const metric_def metric_defs[] = {
    {"samples_per_s", "samples/s", M_RUN},
    {"total_time_s", "s", M_RUN},
    {"mean_epoch_time_s", "s", M_RUN},
    {"peak_memory_bytes", "bytes", M_RUN},
    {"final_test_accuracy", "%", M_RUN},
    {"final_train_loss", "", M_RUN},
    {"skipped_steps", "steps", M_RUN},
    {"amp_time_saving_pct", "%", M_WORKLOAD},
    {"amp_memory_saving_pct", "%", M_WORKLOAD},
    {"amp_accuracy_delta", "points", M_WORKLOAD},
    {"dp_speedup_vs_amp", "x", M_WORKLOAD},
};
enum { N_METRIC_DEFS = sizeof metric_defs / sizeof metric_defs[0] };

typedef struct {
    int def;        /* index into metric_defs */
    int bigger;     /* 1: bigger is better */
    int relative;   /* tolerance in percent of the baseline, else absolute in the metric's unit */
    double tol;
} rule;

static int load_config(const char *path, rule *rules, int max, int *n) {
    char *text;
    AB_TRY(hr_read_file(path, &text));
    *n = 0;
    int lineno = 0, rc = 0;
    for (char *save = NULL, *ln = strtok_r(text, "\n", &save); ln; ln = strtok_r(NULL, "\n", &save)) {
        lineno++;
        char *hash = strchr(ln, '#');
        if (hash) *hash = 0;
        char name[64], dir[16], tol[32], extra[8];
        const int k = sscanf(ln, "%63s %15s %31s %7s", name, dir, tol, extra);
        if (k <= 0) continue;
        if (k != 3) {
            rc = ab_errorf("%s:%d: expected 'metric bigger|smaller tolerance[%%]'", path, lineno);
            break;
        }
        int def = -1;
        for (int i = 0; i < N_METRIC_DEFS; i++)
            if (strcmp(metric_defs[i].name, name) == 0) def = i;
        if (def < 0) {
            rc = ab_errorf("%s:%d: unknown metric '%s'", path, lineno, name);
            break;
        }
        if (strcmp(dir, "bigger") != 0 && strcmp(dir, "smaller") != 0) {
            rc = ab_errorf("%s:%d: '%s': expected bigger or smaller", path, lineno, dir);
            break;
        }
        char *end;
        const double t = strtod(tol, &end);
        const int rel = *end == '%';
        if (end == tol || (*end && !(rel && end[1] == 0)) || !(t >= 0)) {
            rc = ab_errorf("%s:%d: '%s' is not a tolerance (a number, or a number followed by %%)", path, lineno, tol);
            break;
        }
        if (*n >= max) {
            rc = ab_errorf("%s:%d: too many rules", path, lineno);
            break;
        }
        rules[(*n)++] = (rule){def, strcmp(dir, "bigger") == 0, rel, t};
    }
    free(text);
    if (rc == 0 && *n == 0) rc = ab_errorf("%s: no metrics configured", path);
    return rc;
}

static double run_metric(const hr_run *r, const char *name) {
    if (!strcmp(name, "samples_per_s")) return r->samples_per_s;
    if (!strcmp(name, "total_time_s")) return r->total_time_s;
    if (!strcmp(name, "mean_epoch_time_s")) return r->mean_epoch_time_s;
    if (!strcmp(name, "peak_memory_bytes")) return r->peak_total;
    if (!strcmp(name, "final_test_accuracy")) return r->final_accuracy;
    if (!strcmp(name, "final_train_loss")) return r->final_train_loss;
    if (!strcmp(name, "skipped_steps")) return (double)r->skipped_steps;
    return NAN;
}

static double workload_metric(const hr_workload *w, const char *name) {
    hr_ratios q;
    hr_compute_ratios(w, 4, "gpus", &q);
    if (!strcmp(name, "amp_time_saving_pct")) return q.amp_time_saving_pct;
    if (!strcmp(name, "amp_memory_saving_pct")) return q.amp_memory_saving_pct;
    if (!strcmp(name, "amp_accuracy_delta")) return q.amp_accuracy_delta;
    if (!strcmp(name, "dp_speedup_vs_amp")) return q.dp_speedup_vs_amp;
    return NAN;
}

/* Set when either folder ran a mode with several seeds (run_all.sh --seeds N): results are then
 * matched by seed and tool too, so that seed 2 of the baseline is compared with seed 2 now. */
static int by_seed;

/* model/precision/ranks, then /<tool> for a peer's result (compared with the same peer's, never
 * with ampbench's), the pattern of another data-parallel run than the standard one
 * (/ps1/overlap/acc1: sync and servers, overlap, micro-batches per sync), then /s<seed> when by_seed */
static void run_key(const hr_run *r, char *buf, size_t n) {
    int l = snprintf(buf, n, "%s/%s/%d%s%s%s", r->model, r->precision, r->world_size,
                     r->world_size == 1 ? "rank" : "ranks", r->peer ? "/" : "", r->peer ? r->tool : "");
    if (r->dp_variant && l > 0 && (size_t)l < n)
        l += snprintf(buf + l, n - (size_t)l, "/%s%d/%s/acc%d", r->dp_sync, r->dp_shards,
                      r->dp_overlap ? "overlap" : "no-overlap", r->accum_steps);
    if (by_seed && l > 0 && (size_t)l < n) snprintf(buf + l, n - (size_t)l, "/s%d", r->seed);
}

static const hr_run *find_run(const hr_runset *rs, const char *key) {
    const hr_run *best = NULL;
    for (int i = 0; i < rs->n_runs; i++) {
        char k[160];
        run_key(&rs->runs[i], k, sizeof k);
        if (strcmp(k, key) != 0) continue;
        if (!best || (rs->runs[i].complete && !best->complete) || rs->runs[i].steps > best->steps) best = &rs->runs[i];
    }
    return best;
}

typedef struct {
    int regressions, improvements, within, missing;
    char moved[4096]; /* the lines that moved beyond tolerance, repeated after the table */
    FILE *smaller, *bigger; /* github-action-benchmark entries (memstreams) */
    int n_smaller, n_bigger;
} tally;

static void bench_entry(tally *t, const rule *ru, const char *subject, double cur, double base) {
    FILE *f = ru->bigger ? t->bigger : t->smaller;
    int *n = ru->bigger ? &t->n_bigger : &t->n_smaller;
    if (!f || !isfinite(cur)) return;
    const metric_def *d = &metric_defs[ru->def];
    char extra[96] = "";
    if (isfinite(base)) snprintf(extra, sizeof extra, "baseline %.10g", base);
    fprintf(f, "%s\n  {\"name\": \"%s %s\", \"unit\": \"%s\", \"value\": %.10g, \"extra\": \"%s\"}", *n ? "," : "",
            subject, d->name, d->unit, cur, extra);
    (*n)++;
}

static void compare(tally *t, const rule *ru, const char *subject, double base, double cur) {
    const metric_def *d = &metric_defs[ru->def];
    char tol[32];
    snprintf(tol, sizeof tol, ru->relative ? "%g%%" : "%g", ru->tol);
    bench_entry(t, ru, subject, cur, base);
    if (!isfinite(base)) return; /* nothing to compare with: the baseline lacks it too */
    const char *verdict;
    char change[48];
    if (!isfinite(cur)) {
        verdict = "REGRESSION (not measured now)";
        snprintf(change, sizeof change, "-");
        t->regressions++;
    } else {
        const double delta = cur - base;
        const double worse = ru->bigger ? -delta : delta; /* > 0: moved the wrong way */
        const double limit = ru->relative ? fabs(base) * ru->tol / 100.0 : ru->tol;
        if (ru->relative && base != 0)
            snprintf(change, sizeof change, "%+.1f%%", 100.0 * delta / fabs(base));
        else
            snprintf(change, sizeof change, "%+.3g", delta);
        if (worse > limit) {
            verdict = "REGRESSION";
            t->regressions++;
        } else if (-worse > limit) {
            verdict = "improved";
            t->improvements++;
        } else {
            verdict = "ok";
            t->within++;
        }
    }
    char line[512];
    snprintf(line, sizeof line, "%-22s %-26s %14.6g %14.6g %10s %8s  %s\n", d->name, subject, base, cur, change, tol,
             verdict);
    fputs(line, stdout);
    if (strcmp(verdict, "ok") != 0) {
        const size_t l = strlen(t->moved);
        snprintf(t->moved + l, sizeof t->moved - l, "  %s", line);
    }
}

static int write_bench(const char *path, const char *entries) {
    char *text = malloc(strlen(entries) + 8);
    if (!text) return ab_errorf("out of memory");
    sprintf(text, "[%s\n]\n", entries);
    const int rc = hr_write_atomic(path, text);
    free(text);
    return rc;
}

/* What the command line asks for: the two run folders, the tolerances file, where the JSON goes. */
typedef struct {
    const char *dirs[2], *config, *prefix;
    int json;
} options;

/* Reads the command line into o; returns -1 to go on, else the exit code (0 after --help, 2 on bad arguments). */
static int parse_options(int argc, char **argv, options *o) {
    *o = (options){{NULL, NULL}, AB_SOURCE_DIR "/harness/regress.conf", NULL, 1};
    int nd = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            fputs(usage, stdout);
            return 0;
        }
        if (!strcmp(a, "--no-json")) {
            o->json = 0;
            continue;
        }
        if (!strcmp(a, "--config") || !strcmp(a, "--json-prefix")) {
            if (i + 1 >= argc) {
                fprintf(stderr, "ampbench-regress: %s needs a value\n", a);
                return 2;
            }
            if (!strcmp(a, "--config")) o->config = argv[++i];
            else o->prefix = argv[++i];
            continue;
        }
        if (a[0] == '-' || nd >= 2) {
            fprintf(stderr, "ampbench-regress: unexpected argument '%s' (see --help)\n", a);
            return 2;
        }
        o->dirs[nd++] = a;
    }
    if (nd != 2) {
        fputs(usage, stderr);
        return 2;
    }
    return -1;
}

/* The results of the baseline and the current folder, and their workloads. */
typedef struct {
    hr_runset *base, *cur;
    hr_workload *wb, *wc;
    int nwb, nwc;
} folders;

/* Frees what load_folders allocated. */
static void free_folders(folders *f) {
    hr_runset_free(f->base), hr_runset_free(f->cur);
    free(f->base), free(f->cur), free(f->wb), free(f->wc);
}

/* Loads both folders and groups their workloads; returns 0, or 2 after saying why. */
static int load_folders(const options *o, folders *f) {
    *f = (folders){0};
    f->base = calloc(1, sizeof *f->base), f->cur = calloc(1, sizeof *f->cur);
    f->wb = calloc(HR_MAX_WORKLOADS, sizeof *f->wb), f->wc = calloc(HR_MAX_WORKLOADS, sizeof *f->wc);
    int rc = 0;
    if (!f->base || !f->cur || !f->wb || !f->wc) {
        fprintf(stderr, "ampbench-regress: out of memory\n");
        return 2;
    }
    int loaded = 0;
    if (hr_runset_load(o->dirs[0], f->base) != 0 || (loaded = 1, hr_runset_load(o->dirs[1], f->cur) != 0)) {
        fprintf(stderr, "ampbench-regress: %s\n", ab_error());
        if (loaded) hr_runset_free(f->base);
        free(f->base), free(f->cur), free(f->wb), free(f->wc);
        return 2;
    }
    for (int k = 0; k < 2 && rc == 0; k++) {
        const hr_runset *rs = k ? f->cur : f->base;
        if (rs->n_runs == 0) {
            fprintf(stderr, "ampbench-regress: %s: no ampbench results in this folder\n", rs->dir);
            rc = 2;
        }
    }
    if (rc == 0 && (hr_group_workloads(f->base, f->wb, HR_MAX_WORKLOADS, &f->nwb) != 0 ||
                    hr_group_workloads(f->cur, f->wc, HR_MAX_WORKLOADS, &f->nwc) != 0)) {
        fprintf(stderr, "ampbench-regress: %s\n", ab_error());
        rc = 2;
    }
    if (rc != 0) free_folders(f);
    return rc;
}

/* Sets by_seed when a workload of either folder ran with several seeds. */
static void match_by_seed(const folders *f) {
    for (int i = 0; i < f->nwb; i++) by_seed |= f->wb[i].max_seeds > 1;
    for (int i = 0; i < f->nwc; i++) by_seed |= f->wc[i].max_seeds > 1;
}

/* Prints the folders compared, how results are matched, and the table's header. */
static void print_header(const options *o, const folders *f) {
    printf("regress: baseline %s (%d results), current %s (%d results), tolerances %s\n", f->base->dir, f->base->n_runs,
           f->cur->dir, f->cur->n_runs, o->config);
    if (by_seed)
        printf("several seeds per mode: results matched by seed (and tool: /<tool> for a peer's); the workload "
               "ratios compare each mode's lowest seed\n");
    printf("%-22s %-26s %14s %14s %10s %8s  %s\n", "metric", "run", "baseline", "current", "change", "tol", "verdict");
}

/* Prints and counts a baseline result that the current folder lacks. */
static void report_missing(tally *t, const char *key) {
    char line[512];
    snprintf(line, sizeof line, "%-22s %-26s %14s %14s %10s %8s  %s\n", "(all)", key, "present", "missing", "-", "-",
             "REGRESSION (result missing)");
    fputs(line, stdout);
    const size_t l = strlen(t->moved);
    snprintf(t->moved + l, sizeof t->moved - l, "  %s", line);
    t->missing++;
}

/* Warns when two matched results ran on other hardware or trained another number of steps or batch size. */
static void warn_incomparable(const char *key, const hr_run *b, const hr_run *c) {
    if (strcmp(b->device, c->device) != 0 || strcmp(b->backend, c->backend) != 0)
        printf("warning: %s: baseline ran on %s (%s), current on %s (%s): timings are not comparable\n", key,
               b->backend, b->device, c->backend, c->device);
    if (b->steps != c->steps || b->batch_size != c->batch_size)
        printf("warning: %s: baseline trained %ld steps at batch %ld, current %ld at batch %ld\n", key, b->steps,
               b->batch_size, c->steps, c->batch_size);
}

/* Compares every baseline result with the current one of the same key, metric by metric. */
static void compare_runs(tally *t, const folders *f, const rule *rules, int nr) {
    for (int i = 0; i < f->base->n_runs; i++) {
        const hr_run *b = &f->base->runs[i];
        char key[160];
        run_key(b, key, sizeof key);
        if (find_run(f->base, key) != b) continue; /* a duplicate: the better one is compared */
        const hr_run *c = find_run(f->cur, key);
        if (!c) {
            report_missing(t, key);
            continue;
        }
        warn_incomparable(key, b, c);
        for (int r = 0; r < nr; r++)
            if (metric_defs[rules[r].def].scope == M_RUN)
                compare(t, &rules[r], key, run_metric(b, metric_defs[rules[r].def].name),
                        run_metric(c, metric_defs[rules[r].def].name));
    }
}

/* Notes the current results with no baseline; they still go to the benchmark history. */
static void note_new_runs(tally *t, const folders *f, const rule *rules, int nr) {
    for (int i = 0; i < f->cur->n_runs; i++) {
        char key[160];
        run_key(&f->cur->runs[i], key, sizeof key);
        if (find_run(f->base, key) || find_run(f->cur, key) != &f->cur->runs[i]) continue;
        printf("note: %s is new (no baseline)\n", key);
        for (int r = 0; r < nr; r++)
            if (metric_defs[rules[r].def].scope == M_RUN)
                bench_entry(t, &rules[r], key, run_metric(&f->cur->runs[i], metric_defs[rules[r].def].name), NAN);
    }
}

/* Compares the per-workload ratios of every current workload with the baseline's of the same model. */
static void compare_workloads(tally *t, const folders *f, const rule *rules, int nr) {
    for (int i = 0; i < f->nwc; i++) {
        const hr_workload *b = NULL;
        for (int k = 0; k < f->nwb; k++)
            if (!strcmp(f->wb[k].model, f->wc[i].model)) b = &f->wb[k];
        for (int r = 0; r < nr; r++) {
            if (metric_defs[rules[r].def].scope != M_WORKLOAD) continue;
            const char *m = metric_defs[rules[r].def].name;
            compare(t, &rules[r], f->wc[i].model, b ? workload_metric(b, m) : NAN, workload_metric(&f->wc[i], m));
        }
    }
}

/* Closes the entry streams and writes the two github-action-benchmark files; returns 0, or 2 after saying why. */
static int write_bench_files(tally *t, char **sm, char **bg, const char *prefix, const char *cur_dir) {
    int rc = 0;
    fclose(t->smaller);
    fclose(t->bigger);
    char p1[1200], p2[1200];
    if (prefix) {
        snprintf(p1, sizeof p1, "%s-smaller.json", prefix);
        snprintf(p2, sizeof p2, "%s-bigger.json", prefix);
    } else {
        snprintf(p1, sizeof p1, "%s/benchmark-smaller.json", cur_dir);
        snprintf(p2, sizeof p2, "%s/benchmark-bigger.json", cur_dir);
    }
    if (write_bench(p1, *sm ? *sm : "") != 0 || write_bench(p2, *bg ? *bg : "") != 0) {
        fprintf(stderr, "ampbench-regress: %s\n", ab_error());
        rc = 2;
    } else {
        printf("benchmark JSON: %s (customSmallerIsBetter), %s (customBiggerIsBetter)\n", p1, p2);
    }
    free(*sm);
    free(*bg);
    return rc;
}

/* Prints the lines that moved beyond tolerance again, then the counts. */
static void print_summary(const tally *t) {
    if (t->moved[0]) printf("moved beyond tolerance:\n%s", t->moved);
    printf("regress: %d regression%s, %d missing, %d improved, %d within tolerance\n", t->regressions,
           t->regressions == 1 ? "" : "s", t->missing, t->improvements, t->within);
}

int main(int argc, char **argv) {
    options o;
    const int done = parse_options(argc, argv, &o);
    if (done >= 0) return done;
    rule rules[32];
    int nr = 0;
    if (load_config(o.config, rules, 32, &nr) != 0) {
        fprintf(stderr, "ampbench-regress: %s\n", ab_error());
        return 2;
    }
    folders f;
    const int loaded = load_folders(&o, &f);
    if (loaded != 0) return loaded;
    match_by_seed(&f);

    tally t = {0};
    char *sm = NULL, *bg = NULL;
    size_t sml = 0, bgl = 0;
    if (o.json) {
        t.smaller = open_memstream(&sm, &sml);
        t.bigger = open_memstream(&bg, &bgl);
    }
    print_header(&o, &f);
    compare_runs(&t, &f, rules, nr);
    note_new_runs(&t, &f, rules, nr);
    compare_workloads(&t, &f, rules, nr);
    int rc = o.json ? write_bench_files(&t, &sm, &bg, o.prefix, f.cur->dir) : 0;
    print_summary(&t);
    if (rc == 0 && (t.regressions || t.missing)) rc = 1;
    free_folders(&f);
    return rc;
}
