/* REPORT.md's comparison of data-parallel patterns (harness.h, hr_write_dp_patterns): the ring
 * against the parameter server, overlap on and off, and what gradient accumulation saves;
 * measured on whatever ranks ran (2 CPU ranks here, GPUs through the GPU check) and projected
 * for GPUs and nodes from core/dpmodel.h's rows in the projection run's record. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "harness.h"

#define DASH "—"

double hr_dp_model_speedup(const hr_run *pr, const char *kind, int n, const char *sync, int shards, int overlap,
                           int accum) {
    const cJSON *m = pr ? cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(pr->json, "projection"),
                                                           "dp_models")
                        : NULL;
    const cJSON *row;
    cJSON_ArrayForEach(row, cJSON_GetObjectItemCaseSensitive(m, "rows")) {
        if (strcmp(hr_str(row, "kind", ""), kind) != 0 || (int)hr_num(row, "n", 0) != n ||
            strcmp(hr_str(row, "sync", ""), sync) != 0 || (int)hr_num(row, "shards", -1) != shards ||
            cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(row, "overlap")) != overlap ||
            (int)hr_num(row, "accum", 0) != accum)
            continue;
        return hr_num(row, "speedup", NAN);
    }
    return NAN;
}

/* "ring", "parameter server, 1 server", "parameter server, 2 servers" */
static void pattern_name(char *b, size_t n, const char *sync, int shards) {
    if (strcmp(sync, "ps") == 0) snprintf(b, n, "parameter server, %d server%s", shards, shards == 1 ? "" : "s");
    else snprintf(b, n, "ring all-reduce");
}

static void ms(char *b, size_t n, double s) {
    if (isfinite(s)) snprintf(b, n, "%.2f", s * 1e3);
    else snprintf(b, n, DASH);
}

static void measured_row(FILE *f, const hr_run *r, const hr_run *amp) {
    char pat[64], e[24], bz[24], pl[24], sp[48], by[32], tp[48];
    pattern_name(pat, sizeof pat, r->dp_sync, r->dp_shards);
    ms(e, sizeof e, r->dp_exposed_s);
    ms(bz, sizeof bz, r->dp_busy_s);
    if (strcmp(r->dp_sync, "ps") == 0) ms(pl, sizeof pl, r->dp_pull_s);
    else snprintf(pl, sizeof pl, DASH);
    if (amp && amp->samples_per_s > 0 && isfinite(r->samples_per_s) && !r->did_not_fit)
        snprintf(sp, sizeof sp, "%.2fx", r->samples_per_s / amp->samples_per_s);
    else snprintf(sp, sizeof sp, DASH);
    if (isfinite(r->dp_sent_max)) snprintf(by, sizeof by, "%.3g MB", r->dp_sent_max / 1e6);
    else snprintf(by, sizeof by, DASH);
    if (r->did_not_fit) snprintf(tp, sizeof tp, "did not fit");
    else if (isfinite(r->samples_per_s)) snprintf(tp, sizeof tp, "%.0f", r->samples_per_s);
    else snprintf(tp, sizeof tp, DASH);
    fprintf(f, "| %s | %s | %d | %d | %s | %s | %s | %s | %s | %s | `%s` |\n", pat, r->dp_overlap ? "on" : "off",
            r->accum_steps, r->world_size, tp, sp, e, bz, pl, by, r->name);
}

static void speedup_cell(char *b, size_t n, double s) {
    if (isfinite(s)) snprintf(b, n, "%.2fx", s);
    else snprintf(b, n, DASH);
}

void hr_write_dp_patterns(FILE *f, const hr_workload *w, int n, const char *kind, double claim_speedup) {
    const hr_run *pr = hr_projection_run(w);
    const int have_model = !isnan(hr_dp_model_speedup(pr, kind, n, "ring", 0, 1, 1));
    if (!w->dp && w->n_dp_var == 0 && !have_model) return;
    fprintf(f, "### Data parallelism: ring against parameter server, overlap, accumulation\n\n");
    if (w->dp || w->n_dp_var) {
        const hr_run *any = w->dp ? w->dp : w->dp_var[0];
        fprintf(f,
                "Measured here (%s, %s engine; the lowest seed of each; speed-up in samples per second over the "
                "one-device AMP run; exposed: what a step waited for its gradients after backward, busy: the "
                "reductions' own time, pull: the parameter server's weights sent back, bytes: the most any rank "
                "sent per synchronisation as the pattern moves them):\n\n",
                any->backend, any->engine[0] ? any->engine : "?");
        fprintf(f, "| pattern | overlap | micro-batches per sync | ranks | samples/s | speed-up | exposed ms/step | "
                   "busy ms/step | pull ms/step | bytes sent (most, per rank) | run |\n"
                   "|---|---|---|---|---|---|---|---|---|---|---|\n");
        if (w->dp) measured_row(f, w->dp, w->amp);
        for (int i = 0; i < w->n_dp_var; i++) measured_row(f, w->dp_var[i], w->amp);
        fprintf(f, "\n");
        if (strcmp(any->backend, "cpu") == 0)
            fprintf(f, "These ranks are CPU processes sharing the machine's cores, where a rank computes and "
                       "communicates on the same core: they show each pattern's mechanism, bytes and bookkeeping, "
                       "not what a GPU's separate stream and links would hide.\n\n");
    }
    if (!have_model) return;
    char src[64];
    snprintf(src, sizeof src, "%s", pr->step_source[0] ? pr->step_source : "?");
    fprintf(f,
            "PROJECTED, not measured (core/dpmodel.h, docs/data-parallel.md: ring 2(p-1)/p G/B, parameter server "
            "(p-1)/k of the gradients in and the weights out at a server's link, overlap hiding at most the rest of "
            "backward and never the pull), from `%s`'s step (%s), at %d %s:\n\n",
            pr->name, src, n, kind);
    fprintf(f, "| pattern | overlap | speed-up, 1 micro-batch per sync | speed-up, 4 micro-batches per sync | share of "
               "the lost speed-up that accumulation recovers |\n|---|---|---|---|---|\n");
    static const struct {
        const char *sync;
        int per_device; /* shards: one per device (k = n), else one server */
    } pats[3] = {{"ring", 0}, {"ps", 0}, {"ps", 1}};
    for (int p = 0; p < 3; p++)
        for (int ov = 0; ov < 2; ov++) {
            const int shards = strcmp(pats[p].sync, "ps") == 0 ? (pats[p].per_device ? n : 1) : 0;
            const double s1 = hr_dp_model_speedup(pr, kind, n, pats[p].sync, shards, ov, 1);
            const double s4 = hr_dp_model_speedup(pr, kind, n, pats[p].sync, shards, ov, 4);
            char pat[64], a[24], b[24], share[48];
            pattern_name(pat, sizeof pat, pats[p].sync, shards);
            speedup_cell(a, sizeof a, s1);
            speedup_cell(b, sizeof b, s4);
            if (isfinite(s1) && isfinite(s4) && n - s1 > 1e-9)
                snprintf(share, sizeof share, "%.0f%%", 100.0 * (s4 - s1) / (n - s1));
            else snprintf(share, sizeof share, DASH);
            fprintf(f, "| %s | %s | %s | %s | %s |\n", pat, ov ? "on" : "off", a, b, share);
        }
    fprintf(f, "\n");
    if (isfinite(claim_speedup))
        fprintf(f, "The articles report %.2fx on %d %s. Accumulation divides the same communication over more "
                   "compute, so it recovers a share of what communication costs, at the price of a %dx larger "
                   "effective batch.\n\n",
                claim_speedup, n, kind, 4);
}
