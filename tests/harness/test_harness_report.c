/* The report on fixture results (tests/harness/fixtures/run-basic and run-seeds, see their
 * README): the ratios recomputed here from the JSON files and checked against the fixture's round
 * numbers, the Markdown table cells that must hold them, the accuracy over seeds (mean ± sd, the
 * paired and Welch 95% intervals recomputed here, the sentence on the articles' delta, the
 * profile line), and bad input (a malformed or missing result) giving a one-line error naming
 * the file.
 * usage: test_harness_report FIXTURES_DIR REPORTED_JSON */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "harness.h"
#include "tolerances.h"

static int failures = 0;

#define CHECK AB_CHECK /* tests/tolerances.h */

#include "json_edit.h"

/* Ratios are printed with one or two decimals: compare at 1e-9 relative on the computed value. */
static void check_close(const char *what, double got, double want) {
    CHECK(isfinite(got) && fabs(got - want) <= 1e-9 * fmax(1.0, fabs(want)), "%s: got %.12g, want %.12g", what, got,
          want);
}

/* One number from a result file, read directly (not through the harness). */
static double raw(const char *dir, const char *file, const char *key) {
    char path[1200], *text;
    snprintf(path, sizeof path, "%s/%s", dir, file);
    if (hr_read_file(path, &text) != 0) return NAN;
    cJSON *j = cJSON_Parse(text);
    free(text);
    double v = NAN;
    if (!strcmp(key, "peak_total"))
        v = hr_num(cJSON_GetObjectItemCaseSensitive(j, "peak_memory_bytes"), "total", NAN);
    else if (!strcmp(key, "last_train_loss")) {
        const cJSON *ep = cJSON_GetObjectItemCaseSensitive(j, "epochs");
        v = hr_num(cJSON_GetArrayItem(ep, cJSON_GetArraySize(ep) - 1), "train_loss", NAN);
    } else
        v = hr_num(j, key, NAN);
    cJSON_Delete(j);
    return v;
}

/* The cells of the Markdown table row that starts with "| label |". */
static int row_cells(const char *md, const char *label, char cells[][512], int max) {
    char key[256];
    snprintf(key, sizeof key, "\n| %s |", label);
    const char *p = strstr(md, key);
    if (!p) return 0;
    p += 2; /* past "\n|" */
    int n = 0;
    while (*p && *p != '\n' && n < max) {
        const char *bar = strchr(p, '|');
        const char *nl = strchr(p, '\n');
        if (!bar || (nl && bar > nl)) break;
        size_t len = (size_t)(bar - p);
        while (len && p[len - 1] == ' ') len--;
        while (len && *p == ' ') p++, len--;
        if (len >= 512) len = 511;
        memcpy(cells[n], p, len);
        cells[n][len] = 0;
        n++;
        p = bar + 1;
    }
    return n;
}

static int starts_with(const char *s, const char *prefix) { return strncmp(s, prefix, strlen(prefix)) == 0; }

/* Sets a result's final test accuracy (and its last epoch's) to v. */
static void set_accuracy(const char *dir, const char *file, double v) {
    char path[1200];
    cJSON *j = json_load(dir, file, path, sizeof path);
    if (!j) return;
    cJSON_SetNumberValue(cJSON_GetObjectItemCaseSensitive(j, "final_test_accuracy"), v);
    cJSON *ep = cJSON_GetObjectItemCaseSensitive(j, "epochs");
    cJSON_SetNumberValue(cJSON_GetObjectItemCaseSensitive(cJSON_GetArrayItem(ep, cJSON_GetArraySize(ep) - 1),
                                                          "test_accuracy"),
                         v);
    json_store(path, j);
}

/* base64 of n bytes, written here rather than taken from the code under test */
static void b64(const uint8_t *in, size_t n, char *out) {
    static const char A[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    for (size_t i = 0; i < n; i += 3) {
        const uint32_t v = (uint32_t)in[i] << 16 | (i + 1 < n ? (uint32_t)in[i + 1] << 8 : 0) | (i + 2 < n ? in[i + 2] : 0);
        *out++ = A[v >> 18 & 63];
        *out++ = A[v >> 12 & 63];
        *out++ = i + 1 < n ? A[v >> 6 & 63] : '=';
        *out++ = i + 2 < n ? A[v & 63] : '=';
    }
    *out = 0;
}

/* Gives a result test_predictions: example k right when hit[k] (n examples, 10 classes, every
 * prediction class 0: the harness reads only which were right) and the matching accuracy. */
static void set_predictions(const char *dir, const char *file, const uint8_t *hit, int n) {
    uint8_t bits[256] = {0}, zero[1024] = {0};
    static char pb[2048], cb[512];
    int right = 0;
    for (int k = 0; k < n; k++) {
        if (hit[k]) bits[k / 8] |= (uint8_t)(1u << (k % 8));
        right += hit[k] != 0;
    }
    b64(zero, (size_t)n, pb);
    b64(bits, (size_t)(n + 7) / 8, cb);
    set_accuracy(dir, file, 100.0 * right / n);
    char path[1200];
    cJSON *j = json_load(dir, file, path, sizeof path);
    if (!j) return;
    cJSON *tp = cJSON_CreateObject();
    cJSON_AddNumberToObject(tp, "n", n);
    cJSON_AddNumberToObject(tp, "classes", 10);
    cJSON_AddStringToObject(tp, "encoding", "base64");
    cJSON_AddStringToObject(tp, "predicted", pb);
    cJSON_AddStringToObject(tp, "correct", cb);
    cJSON_DeleteItemFromObjectCaseSensitive(j, "test_predictions");
    cJSON_AddItemToObject(j, "test_predictions", tp);
    json_store(path, j);
}

/* Mean and sample standard deviation of v[0..n), computed here rather than by the harness. */
static void mean_sd(const double *v, int n, double *mean, double *sd) {
    double s = 0, ss = 0;
    for (int i = 0; i < n; i++) s += v[i];
    *mean = s / n;
    for (int i = 0; i < n; i++) ss += (v[i] - *mean) * (v[i] - *mean);
    *sd = sqrt(ss / (n - 1));
}

/* "[lo, hi]" in a cell, compared with the interval computed here, to 0.01 (the cell has 2 decimals). */
static void check_interval_cell(const char *what, const char *cell, double lo, double hi) {
    double a = NAN, b = NAN;
    const char *p = strchr(cell, '[');
    CHECK(p && sscanf(p, "[%lf, %lf]", &a, &b) == 2 && fabs(a - lo) <= 0.01 && fabs(b - hi) <= 0.01,
          "%s: cell '%s', want [%.4f, %.4f]", what, cell, lo, hi);
}

/* Writes REPORT.md for the run folder dir into out_dir and returns its text (NULL on error). */
static char *report_of(const char *dir, const hr_reported *rep, const char *out_dir) {
    char path[1300], *md = NULL;
    snprintf(path, sizeof path, "%s/REPORT.md", out_dir);
    hr_runset *rs = runset_open(dir);
    if (!rs) return NULL;
    CHECK(hr_write_report(rs, rep, path, NULL, NULL, 0) == 0, "%s: hr_write_report: %s", dir, ab_error());
    if (hr_read_file(path, &md) != 0) md = NULL;
    runset_close(rs);
    return md;
}

/* The run-seeds fixture: 3 seeds of ampbench's FP32 and AMP and of the peer's FP32. */
static void check_seeds(const char *fixtures, const hr_reported *rep, const char *tmp) {
    char dir[1100];
    snprintf(dir, sizeof dir, "%s/run-seeds", fixtures);
    hr_runset *rs = runset_open(dir);
    if (!rs) return;
    CHECK(rs->n_runs == 9, "run-seeds: %d results, want 9", rs->n_runs);
    hr_workload *ws = calloc(HR_MAX_WORKLOADS, sizeof *ws);
    int nw = 0;
    CHECK(ws && hr_group_workloads(rs, ws, HR_MAX_WORKLOADS, &nw) == 0 && nw == 1, "run-seeds: %d workloads", nw);
    if (ws && nw == 1) {
        const hr_workload *w = &ws[0];
        CHECK(w->max_seeds == 3, "run-seeds: max_seeds %d, want 3", w->max_seeds);
        /* the slots the time and memory ratios read hold the lowest seed */
        CHECK(w->fp32 && w->fp32->seed == 1 && w->amp && w->amp->seed == 1 && w->peer_fp32 &&
                  w->peer_fp32->seed == 1,
              "run-seeds: the fp32/amp/peer slots do not hold seed 1");
        CHECK(w->n_all == 6 && w->n_peer == 3, "run-seeds: %d ampbench and %d peer runs", w->n_all, w->n_peer);
    }
    free(ws);
    runset_close(rs);

    /* the figures, read from the files here */
    double f[3], a[3], p[3], lf[3], la[3], lp[3];
    char name[64];
    for (int s = 1; s <= 3; s++) {
        snprintf(name, sizeof name, "mlp-fp32-s%d.json", s);
        f[s - 1] = raw(dir, name, "final_test_accuracy");
        lf[s - 1] = raw(dir, name, "last_train_loss");
        snprintf(name, sizeof name, "mlp-amp-s%d.json", s);
        a[s - 1] = raw(dir, name, "final_test_accuracy");
        la[s - 1] = raw(dir, name, "last_train_loss");
        snprintf(name, sizeof name, "mlp-fp32-pytorch-s%d.json", s);
        p[s - 1] = raw(dir, name, "final_test_accuracy");
        lp[s - 1] = raw(dir, name, "last_train_loss");
    }
    double mf, sf, ma, sa, mp, sp, md_, sd_;
    mean_sd(f, 3, &mf, &sf);
    mean_sd(a, 3, &ma, &sa);
    mean_sd(p, 3, &mp, &sp);
    const double d[3] = {a[0] - f[0], a[1] - f[1], a[2] - f[2]};
    mean_sd(d, 3, &md_, &sd_);
    /* Each interval adds the test set's sampling error to the seeds': N = 1000 test examples (the
     * fixture's), se_test = 100 sqrt((pa (1 - pa) + pb (1 - pb)) / N) for accuracies pa, pb, and
     * half = sqrt((t se_seeds)^2 + (1.96 se_test)^2). By hand for the fixture: */
    const double N = 1000.0;
#define SE_TEST(pa, pb) (100.0 * sqrt(((pa) / 100 * (1 - (pa) / 100) + (pb) / 100 * (1 - (pb) / 100)) / N))
    /* paired t, 2 degrees of freedom: t = 4.303; se_seeds = 0.5 / sqrt 3 = 0.28868; se_test(97.5, 97)
     * = 100 sqrt((0.024375 + 0.0291) / 1000) = 0.73127; half = sqrt(1.24218^2 + 1.43328^2) = 1.89665 */
    const double half = hypot(4.303 * sd_ / sqrt(3.0), 1.96 * SE_TEST(ma, mf));
    CHECK(fabs(half - 1.89665) < 1e-4, "paired half-width %.6f, by hand 1.89665", half);
    /* Welch: (sf^2/3 + sp^2/3)^2 / ((sf^2/3)^2/2 + (sp^2/3)^2/2) = 4 degrees of freedom when sf = sp: t = 2.776;
     * se_test(97, 96.5) = 0.79294; half = sqrt(2.26660^2 + 1.55416^2) = 2.74825 */
    const double se = sqrt(sf * sf / 3 + sp * sp / 3);
    CHECK(fabs(sf - sp) < 1e-12, "the fixture's FP32 sds differ (%g, %g): the Welch df here assumes 4", sf, sp);
    const double whalf = hypot(2.776 * se, 1.96 * SE_TEST(mf, mp));
    CHECK(fabs(whalf - 2.74825) < 1e-4, "Welch half-width %.6f, by hand 2.74825", whalf);
    /* and the fixture's designed round numbers (README) */
    check_close("fp32 mean", mf, 97.0);
    check_close("fp32 sd", sf, 1.0);
    check_close("amp mean", ma, 97.5);
    check_close("amp sd", sa, 1.5);
    check_close("paired mean difference", md_, 0.5);
    check_close("paired sd of the differences", sd_, 0.5);

    char *md = report_of(dir, rep, tmp);
    if (!md) return;
    char cells[8][512], want[128];
    const double means[3] = {mf, ma, mp}, sds[3] = {sf, sa, sp};
    const double mins[3] = {96, 96, 95.5}, maxs[3] = {98, 99, 97.5};
    const double losses[3] = {(lf[0] + lf[1] + lf[2]) / 3, (la[0] + la[1] + la[2]) / 3, (lp[0] + lp[1] + lp[2]) / 3};
    static const char *const rows[3] = {"ampbench | fp32", "ampbench | amp", "pytorch | fp32"};
    for (int k = 0; k < 3; k++) {
        const int n = row_cells(md, rows[k], cells, 8);
        CHECK(n == 6, "seeds table row '%s': %d cells, want 6", rows[k], n);
        if (n != 6) continue;
        CHECK(!strcmp(cells[2], "3 (1, 2, 3)"), "row '%s': seeds '%s'", rows[k], cells[2]);
        snprintf(want, sizeof want, "%.2f ± %.2f", means[k], sds[k]);
        CHECK(!strcmp(cells[3], want), "row '%s': mean ± sd '%s', want '%s'", rows[k], cells[3], want);
        snprintf(want, sizeof want, "%.2f..%.2f", mins[k], maxs[k]);
        CHECK(!strcmp(cells[4], want), "row '%s': min..max '%s', want '%s'", rows[k], cells[4], want);
        snprintf(want, sizeof want, "%.4f", losses[k]);
        CHECK(!strcmp(cells[5], want), "row '%s': train loss '%s', want '%s'", rows[k], cells[5], want);
    }
    int n = row_cells(md, "ampbench AMP - FP32", cells, 8);
    CHECK(n == 5 && !strcmp(cells[1], "3 pairs") && starts_with(cells[2], "paired t") && !strcmp(cells[3], "+0.50"),
          "paired row: '%s' '%s' '%s'", n > 1 ? cells[1] : "?", n > 2 ? cells[2] : "?", n > 3 ? cells[3] : "?");
    if (n == 5) check_interval_cell("paired AMP - FP32 interval", cells[4], md_ - half, md_ + half);
    n = row_cells(md, "FP32: ampbench - pytorch", cells, 8);
    CHECK(n == 5 && !strcmp(cells[1], "3 and 3 seeds") && starts_with(cells[2], "Welch"),
          "tools row: '%s' '%s'", n > 1 ? cells[1] : "?", n > 2 ? cells[2] : "?");
    if (n == 5) check_interval_cell("Welch FP32 ampbench - pytorch interval", cells[4], mf - mp - whalf, mf - mp + whalf);
    CHECK(strstr(md, "ampbench AMP - FP32: the articles' delta of 0 to +1 points lies inside the interval") != NULL,
          "no 'lies inside' sentence for the fixture's [%.2f, %.2f]", md_ - half, md_ + half);
    CHECK(strstr(md, "With 3 seeds the interval is 3.79 points wide: at 1 point or wider it can hold 0 and +1 at "
                     "once, so it cannot tell a 1-point delta apart from 0.") != NULL,
          "no sentence on what 3 seeds can tell apart");
    CHECK(strstr(md, "+ the test set's sampling error (N = 1000, se 0.73, a bound)") != NULL,
          "the interval's method does not name the test set's share");
    CHECK(strstr(md, "ampbench's FP32 mean is +0.50 points from pytorch's: within the 1.5 points") != NULL,
          "no sentence on the two tools' FP32 agreement");
    n = row_cells(md, "AMP test-accuracy delta", cells, 8);
    /* the row leads with all the seeds, then the lowest seed alone */
    snprintf(want, sizeof want, "mean over 3 seeds %+.2f points, 95%% interval [", md_);
    CHECK(n == 4 && starts_with(cells[2], want) && strstr(cells[2], "; seed 1 alone +0.00 (FP32 96.00% -> AMP 96.00%)"),
          "accuracy row with seeds: '%s'", n > 2 ? cells[2] : "?");
    if (n == 4) check_interval_cell("accuracy row interval", strstr(cells[2], "interval ["), md_ - half, md_ + half);
    CHECK(strstr(md, "Over 3 seeds AMP - FP32 is +0.50 points, 95% interval [-1.40, +2.40] (the seeds' variation and "
                     "the test set's sampling error), against the reported 0 to +1 points: the interval holds the "
                     "band and is 3.79 points wide, too wide to tell a 1-point delta from 0: no verdict.") != NULL,
          "the claim's verdict does not read the seeds' interval");
    CHECK(strstr(md, "\nProfile: quick-cpu: --quick without a usable GPU: the CPU profile (fixture).\n") != NULL,
          "no profile line");
    CHECK(strstr(md, "\nSeeds: 3 (") != NULL, "no seeds line");
    free(md);

    /* AMP 3 points below FP32 on every seed: the interval lies below the articles' 0 to +1 */
    char var[1100];
    snprintf(var, sizeof var, "%s/seeds-outside", tmp);
    char cmd[4500];
    snprintf(cmd, sizeof cmd, "rm -rf '%s' && mkdir -p '%s' && cp '%s'/*.json '%s'/", var, var, dir, var);
    CHECK(system(cmd) == 0, "cannot copy %s", dir);
    for (int s = 1; s <= 3; s++) {
        snprintf(name, sizeof name, "mlp-amp-s%d.json", s);
        set_accuracy(var, name, a[s - 1] - 3.0);
    }
    md = report_of(var, rep, var);
    if (md) {
        n = row_cells(md, "ampbench AMP - FP32", cells, 8);
        CHECK(n == 5 && !strcmp(cells[3], "-2.50"), "outside: mean difference '%s'", n > 3 ? cells[3] : "?");
        /* se_test(94.5, 97) = 0.90042: half = sqrt(1.24218^2 + 1.76482^2) = 2.15814 */
        const double ohalf = hypot(4.303 * sd_ / sqrt(3.0), 1.96 * SE_TEST(ma - 3, mf));
        CHECK(fabs(ohalf - 2.15814) < 1e-4, "outside half-width %.6f, by hand 2.15814", ohalf);
        if (n == 5) check_interval_cell("outside interval", cells[4], md_ - 3 - ohalf, md_ - 3 + ohalf);
        CHECK(strstr(md, "the interval lies below the band: AMP lost accuracy here") != NULL,
              "no verdict that AMP lost accuracy");
        CHECK(strstr(md, "the articles' delta of 0 to +1 points lies outside the interval") != NULL,
              "no 'lies outside' sentence");
        free(md);
    }
    /* AMP exactly 0.5 points above FP32 on every seed: the seeds add nothing, but the test set's 1000
     * examples still do: [0.5 - 1.43328, 0.5 + 1.43328], never the zero-width [0.5, 0.5] */
    for (int s = 1; s <= 3; s++) {
        snprintf(name, sizeof name, "mlp-amp-s%d.json", s);
        set_accuracy(var, name, f[s - 1] + 0.5);
    }
    md = report_of(var, rep, var);
    if (md) {
        n = row_cells(md, "ampbench AMP - FP32", cells, 8);
        if (n == 5) check_interval_cell("equal differences", cells[4], 0.5 - 1.43328, 0.5 + 1.43328);
        CHECK(strstr(md, "the articles' delta of 0 to +1 points lies inside the interval [-0.93, +1.93]") != NULL,
              "no 'lies inside' sentence for equal differences");
        CHECK(strstr(md, "at 1 point or wider it can hold 0 and +1 at once, so it cannot tell a 1-point delta apart") !=
                  NULL,
              "equal differences: no 'cannot tell apart' sentence");
        free(md);
    }
    /* identical pairs (AMP = FP32 on every seed): se_test(97, 97) = 100 sqrt(2 * 0.0291 / 1000) = 0.76289,
     * so [-1.49527, +1.49527] */
    for (int s = 1; s <= 3; s++) {
        snprintf(name, sizeof name, "mlp-amp-s%d.json", s);
        set_accuracy(var, name, f[s - 1]);
    }
    md = report_of(var, rep, var);
    if (md) {
        n = row_cells(md, "ampbench AMP - FP32", cells, 8);
        CHECK(n == 5 && !strcmp(cells[3], "+0.00"), "identical pairs: mean '%s'", n > 3 ? cells[3] : "?");
        if (n == 5) check_interval_cell("identical pairs", cells[4], -1.49527, 1.49527);
        free(md);
    }
    /* one outlying seed: AMP = FP32 + 0.5, + 0.5, - 7.5. Differences mean -2.16667, sd 4.61880,
     * se_seeds 2.66667, t 4.303: 11.47467; se_test(94.83333, 97) = 0.88373: 1.73211; half 11.60467,
     * [-13.77134, +9.43800]. The row leads with that, not with seed 1's +0.50. */
    {
        const double dd[3] = {0.5, 0.5, -7.5};
        for (int s = 1; s <= 3; s++) {
            snprintf(name, sizeof name, "mlp-amp-s%d.json", s);
            set_accuracy(var, name, f[s - 1] + dd[s - 1]);
        }
    }
    md = report_of(var, rep, var);
    if (md) {
        n = row_cells(md, "ampbench AMP - FP32", cells, 8);
        CHECK(n == 5 && !strcmp(cells[3], "-2.17"), "outlying seed: mean '%s'", n > 3 ? cells[3] : "?");
        if (n == 5) check_interval_cell("outlying seed", cells[4], -13.77134, 9.43800);
        n = row_cells(md, "AMP test-accuracy delta", cells, 8);
        CHECK(n == 4 && starts_with(cells[2], "mean over 3 seeds -2.17 points, 95% interval [-13.77, +9.44]") &&
                  strstr(cells[2], "seed 1 alone +0.50"),
              "outlying seed: the accuracy row '%s' does not lead with all the seeds", n > 2 ? cells[2] : "?");
        CHECK(!strstr(md, "keeps FP32 accuracy"), "outlying seed: a 'keeps FP32 accuracy' verdict");
        free(md);
    }
    /* The records keep their predictions example by example (N = 1000). FP32 gets the first 960, 970,
     * 980 examples right (seeds 1-3). AMP: seed 1 loses examples 0-9 and wins 960-974 (15 only AMP
     * right, 10 only FP32: 96.5%), seed 2 loses 0-4 and wins 970-974 (5 and 5: 97.0%), seed 3 the
     * same predictions as FP32 (98.0%). By hand: differences +0.5, 0, 0: mean +0.16667, sd 0.28868,
     * t(2) 4.303: 0.71717. Per seed se = sqrt((p10 + p01 - (p10 - p01)^2) / N): 0.0049975, 0.0031623,
     * 0; their mean 0.27199 points: 1.96 x = 0.53310, above the floor 100 (1 - 0.025^(1/1000)) =
     * 0.36821. Half-width sqrt(0.71717^2 + 0.53310^2) = 0.89360: [-0.72694, +1.06027]. McNemar: seed 1
     * 2 P(Bin(25, 1/2) <= 10) = 2 x 7119516 / 2^25 = 0.424; seed 2 min(1, 2 x 638 / 1024) = 1; seed 3
     * no discordant example: 1. */
    {
        static uint8_t hf[1000], ha[1000];
        static const int fright[3] = {960, 970, 980};
        for (int s = 1; s <= 3; s++) {
            for (int k = 0; k < 1000; k++) hf[k] = ha[k] = k < fright[s - 1];
            if (s == 1)
                for (int k = 0; k < 15; k++) ha[k < 10 ? k : 0] = 0, ha[960 + k] = 1;
            if (s == 2)
                for (int k = 0; k < 5; k++) ha[k] = 0, ha[970 + k] = 1;
            snprintf(name, sizeof name, "mlp-fp32-s%d.json", s);
            set_predictions(var, name, hf, 1000);
            snprintf(name, sizeof name, "mlp-amp-s%d.json", s);
            set_predictions(var, name, ha, 1000);
        }
    }
    md = report_of(var, rep, var);
    if (md) {
        n = row_cells(md, "ampbench AMP - FP32", cells, 8);
        CHECK(n == 5 && !strcmp(cells[3], "+0.17") &&
                  strstr(cells[2], "+ the test set's sampling error (N = 1000, se 0.27, example by example)"),
              "predictions: the paired row '%s' '%s'", n > 2 ? cells[2] : "?", n > 3 ? cells[3] : "?");
        if (n == 5) check_interval_cell("predictions, example by example", cells[4], -0.72694, 1.06027);
        CHECK(strstr(md, "McNemar's test on the same seed's predictions, example by example (examples only the first "
                         "got right, only the second, exact two-sided p): seed 1 15 and 10, p = 0.424; seed 2 5 and "
                         "5, p = 1; seed 3 0 and 0, p = 1.") != NULL,
              "no McNemar sentence, or the wrong counts or p");
        free(md);
    }
}

/* Loads the reported figures into rep and the results of dir; returns them, or NULL after saying why. */
static hr_runset *load_inputs(const char *dir, const char *reported, hr_reported *rep) {
    if (hr_reported_load(reported, rep) != 0) {
        fprintf(stderr, "FAIL: %s\n", ab_error());
        return NULL;
    }
    hr_runset *rs = calloc(1, sizeof *rs);
    if (hr_runset_load(dir, rs) != 0) {
        fprintf(stderr, "FAIL: %s\n", ab_error());
        return NULL;
    }
    return rs;
}

/* run-basic holds 3 results and run.json plans 4 runs. */
static void check_counts(const hr_runset *rs) {
    CHECK(rs->n_runs == 3, "results loaded: %d, want 3 (run.json is not a result)", rs->n_runs);
    CHECK(rs->n_planned == 4, "planned runs from run.json: %d, want 4", rs->n_planned);
}

/* The results form one workload of FP32, AMP and data-parallel runs in that order; returns it, NULL if one lacks. */
static const hr_workload *check_workload(const hr_runset *rs, hr_workload *ws) {
    int nw = 0;
    CHECK(hr_group_workloads(rs, ws, HR_MAX_WORKLOADS, &nw) == 0 && nw == 1, "workloads: %d, want 1", nw);
    const hr_workload *w = &ws[0];
    CHECK(w->fp32 && w->amp && w->dp, "fp32/amp/dp runs not all found");
    CHECK(w->n_all == 3 && !strcmp(w->all[0]->precision, "fp32") && w->all[2]->world_size == 4,
          "runs not ordered fp32, amp, data-parallel");
    if (!w->fp32 || !w->amp || !w->dp) return NULL;
    return w;
}

/* The ratios match those recomputed from the files and the fixture's round numbers, projections included. */
static void check_ratios(const char *dir, const hr_workload *w) {
    /* independent recomputation from the files */
    const double f_sps = raw(dir, "resnet50-fp32.json", "samples_per_s");
    const double a_sps = raw(dir, "resnet50-amp.json", "samples_per_s");
    const double d_sps = raw(dir, "resnet50-dp-amp.json", "samples_per_s");
    const double f_mem = raw(dir, "resnet50-fp32.json", "peak_total");
    const double a_mem = raw(dir, "resnet50-amp.json", "peak_total");
    const double f_acc = raw(dir, "resnet50-fp32.json", "final_test_accuracy");
    const double a_acc = raw(dir, "resnet50-amp.json", "final_test_accuracy");

    hr_ratios q;
    hr_compute_ratios(w, 4, "gpus", &q);
    check_close("AMP time saving (from files)", q.amp_time_saving_pct, 100.0 * (1.0 - f_sps / a_sps));
    check_close("AMP memory saving (from files)", q.amp_memory_saving_pct, 100.0 * (1.0 - a_mem / f_mem));
    check_close("AMP accuracy delta (from files)", q.amp_accuracy_delta, a_acc - f_acc);
    check_close("dp speed-up vs AMP (from files)", q.dp_speedup_vs_amp, d_sps / a_sps);
    check_close("dp speed-up vs FP32 (from files)", q.dp_speedup_vs_fp32, d_sps / f_sps);
    check_close("dp efficiency (from files)", q.dp_efficiency_pct, 100.0 * d_sps / a_sps / 4);
    /* and the fixture's designed round numbers (README) */
    check_close("AMP time saving", q.amp_time_saving_pct, 50.0);
    check_close("AMP memory saving", q.amp_memory_saving_pct, 37.5);
    check_close("AMP accuracy delta", q.amp_accuracy_delta, 0.5);
    check_close("dp speed-up vs AMP", q.dp_speedup_vs_amp, 3.0);
    check_close("dp speed-up vs FP32", q.dp_speedup_vs_fp32, 6.0);
    check_close("dp efficiency", q.dp_efficiency_pct, 75.0);
    check_close("dp time saving", q.dp_time_saving_pct, 100.0 * (1.0 - 1.0 / 3.0));
    CHECK(q.dp_ranks == 4, "dp ranks %d, want 4", q.dp_ranks);
    /* the projection comes from the AMP run (the dp run's engine is mpi, not nccl) */
    CHECK(hr_projection_run(w) == w->amp, "projection taken from %s, want the AMP run",
          hr_projection_run(w) ? hr_projection_run(w)->name : "none");
    check_close("projected 4-GPU speed-up", q.proj_speedup, 3.75);
    check_close("projected 4-GPU efficiency", q.proj_efficiency_pct, 93.75);
    check_close("projected 4-GPU speed-up vs FP32", q.proj_speedup_vs_fp32, 7.5);
    hr_ratios qn;
    hr_compute_ratios(w, 4, "nodes", &qn);
    check_close("projected 4-node speed-up", qn.proj_speedup, 3.2);
    CHECK(!strcmp(qn.proj_kind, "nodes"), "projection kind %s, want nodes", qn.proj_kind);
}

/* A workload with only an FP32 run: the ratios are absent, not zero. */
static void check_fp32_only_ratios(const hr_workload *w) {
    hr_workload lone = *w;
    lone.amp = lone.dp = NULL;
    hr_ratios qa;
    hr_compute_ratios(&lone, 4, "gpus", &qa);
    CHECK(isnan(qa.amp_time_saving_pct) && isnan(qa.dp_speedup_vs_amp), "ratios without an AMP run are not NaN");
}

/* Writes REPORT.md for rs into tmp and returns its text, or NULL after saying why it cannot be read. */
static char *write_markdown(const hr_runset *rs, const hr_reported *rep, const char *tmp) {
    char md_path[1200];
    snprintf(md_path, sizeof md_path, "%s/REPORT.md", tmp);
    CHECK(hr_write_report(rs, rep, md_path, NULL, NULL, 0) == 0, "hr_write_report: %s", ab_error());
    char *md = NULL;
    if (hr_read_file(md_path, &md) != 0) {
        fprintf(stderr, "FAIL: %s\n", ab_error());
        return NULL;
    }
    return md;
}

/* Provenance: each record's commit, and a warning for a dirty tree or an unknown commit. */
static void check_provenance(const char *md, hr_runset *rs, const hr_reported *rep, const char *tmp) {
    CHECK(strstr(md, "\nRecords built from: `fixture` (3 records).\n") != NULL && !strstr(md, "**Warning:**"),
          "provenance line of three clean records from commit 'fixture' missing or warned");
    hr_run keep0 = rs->runs[0], keep1 = rs->runs[1];
    rs->runs[0].dirty = 1;
    snprintf(rs->runs[1].commit, sizeof rs->runs[1].commit, "unknown");
    rs->runs[1].dirty = -1;
    char md2_path[1300], *md2 = NULL;
    snprintf(md2_path, sizeof md2_path, "%s/REPORT-provenance.md", tmp);
    CHECK(hr_write_report(rs, rep, md2_path, NULL, NULL, 0) == 0 && hr_read_file(md2_path, &md2) == 0,
          "provenance report: %s", ab_error());
    CHECK(md2 &&
              strstr(md2, "Records built from: `fixture` with uncommitted changes (1 record); `unknown` (1 "
                          "record); `fixture` (1 record).") &&
              strstr(md2, "**Warning:** 1 of 3 records come from a tree with uncommitted changes, and 1 of 3 records "
                          "from an unknown commit: their figures cannot be traced"),
          "a dirty and an unknown record: no warning, or the wrong one");
    free(md2);
    rs->runs[0] = keep0, rs->runs[1] = keep1;
}

/* The rows of reported against measured figures hold the fixture's ratios, projections and summary. */
static void check_ratio_rows(const char *md) {
    char cells[8][512];
    int n = row_cells(md, "AMP time saving vs FP32", cells, 8);
    CHECK(n == 4, "time-saving row: %d cells, want 4", n);
    if (n == 4) {
        CHECK(starts_with(cells[1], "40%"), "reported time saving cell '%s' does not start with 40%%", cells[1]);
        CHECK(starts_with(cells[2], "+50.0%"), "measured time saving cell '%s' does not start with +50.0%%", cells[2]);
        CHECK(strlen(cells[3]) > 20, "time-saving row has no explanation");
        CHECK(strstr(cells[3], "2 of its 200 steps were skipped by the loss scaler") &&
                  strstr(cells[3], "flatters AMP by up to their share (1.0%)"),
              "time-saving row: the AMP run's 2 skipped steps are not flagged: '%s'", cells[3]);
    }
    n = row_cells(md, "AMP peak-memory saving vs FP32", cells, 8);
    CHECK(n == 4 && starts_with(cells[1], "37.5%") && starts_with(cells[2], "+37.5%"),
          "memory-saving row: reported '%s', measured '%s'", n > 1 ? cells[1] : "?", n > 2 ? cells[2] : "?");
    n = row_cells(md, "AMP test-accuracy delta", cells, 8);
    CHECK(n == 4 && starts_with(cells[1], "0 to 1 points") && starts_with(cells[2], "+0.50 points"),
          "accuracy row: reported '%s', measured '%s'", n > 1 ? cells[1] : "?", n > 2 ? cells[2] : "?");
    n = row_cells(md, "data-parallel speed-up over one AMP device, measured", cells, 8);
    CHECK(n == 4 && starts_with(cells[1], "3x") && starts_with(cells[2], "3.00x with 4 ranks, efficiency 75%"),
          "dp row: reported '%s', measured '%s'", n > 1 ? cells[1] : "?", n > 2 ? cells[2] : "?");
    n = row_cells(md, "data-parallel speed-up over one AMP device, 4 gpus", cells, 8);
    CHECK(n == 4 && starts_with(cells[2], "3.75x at 4 gpus") && strstr(cells[2], "projected"),
          "projected row: measured '%s'", n > 2 ? cells[2] : "?");
    n = row_cells(md, "data-parallel AMP speed-up over one FP32 device", cells, 8);
    CHECK(n == 4 && starts_with(cells[1], "5x") && starts_with(cells[2], "6.00x measured (4 ranks); 7.50x projected"),
          "dp vs fp32 row: reported '%s', measured '%s'", n > 1 ? cells[1] : "?", n > 2 ? cells[2] : "?");
    n = row_cells(md, "`resnet50`", cells, 8);
    CHECK(n == 7 && starts_with(cells[2], "+50.0% [40%]") && starts_with(cells[3], "+37.5% [37.5%]"),
          "summary row: '%s' '%s'", n > 2 ? cells[2] : "?", n > 3 ? cells[3] : "?");
}

/* The reported-only BERT section, run.json's skipped run, and nothing over seeds for a single-seed run. */
static void check_single_seed_report(const char *md) {
    CHECK(strstr(md, "## BERT-base, GLUE fine-tuning (`bert-base`): reported only") != NULL,
          "no reported-only section for bert-base");
    CHECK(strstr(md, "| `bert-base-fp32` | skipped | fixture: model not built |") != NULL,
          "the skipped run of run.json is not listed");
    /* one seed per run: nothing over seeds is measured, and the report says how to get it */
    CHECK(strstr(md, "Accuracy over seeds: not measured") && strstr(md, "`bench/run_all.sh --seeds N`"),
          "single-seed run: no 'Accuracy over seeds: not measured' line");
    CHECK(!strstr(md, "mean over") && !strstr(md, "\nProfile: ") && !strstr(md, "\nSeeds: "),
          "single-seed run without profile or seeds in run.json: seed figures or a profile line appeared");
}

/* Writes run-basic's AMP result as bert-base's, a run.json with a failed FP32 run, and a fit record into bert. */
static void write_bert_folder(const char *dir, const char *bert) {
    char src[1200], dst[1300], *t;
    snprintf(src, sizeof src, "%s/resnet50-amp.json", dir);
    if (hr_read_file(src, &t) == 0) {
        cJSON *j = cJSON_Parse(t);
        free(t);
        cJSON_ReplaceItemInObject(cJSON_GetObjectItemCaseSensitive(j, "workload"), "model",
                                  cJSON_CreateString("bert-base"));
        char *out = cJSON_Print(j);
        snprintf(dst, sizeof dst, "%s/bert-base-amp.json", bert);
        CHECK(out && hr_write_atomic(dst, out) == 0, "cannot write %s", dst);
        free(out);
        cJSON_Delete(j);
    }
    snprintf(dst, sizeof dst, "%s/run.json", bert);
    CHECK(hr_write_atomic(dst, "{\"tool\": \"run_all.sh\", \"runs\": ["
                               "{\"name\": \"bert-base-fp32\", \"workload\": \"bert-base\", \"mode\": \"fp32\", "
                               "\"status\": \"failed\", \"reason\": \"exit 1: out of memory\"}]}\n") == 0,
          "cannot write %s", dst);
    /* a --find-max-batch record beside the AMP run: its largest batch joins the AMP fit row */
    snprintf(dst, sizeof dst, "%s/bert-base-amp-fit.json", bert);
    CHECK(hr_write_atomic(dst, "{\"tool\": \"ampbench-fit\", \"model\": \"bert-base\", \"precision\": \"amp\", "
                               "\"backend\": \"cpu\", \"max_seq_len\": 128, \"memory_limit_bytes\": 8589934592, "
                               "\"limited_by\": \"--memory-limit\", \"max_batch\": 131, "
                               "\"peak_memory_at_max_batch_bytes\": 8551442240, \"first_batch_refused\": 132, "
                               "\"refused_would_need_bytes\": 8601802020}\n") == 0,
          "cannot write %s", dst);
}

/* BERT's "fits in memory": an AMP run that completed, an FP32 run that failed for lack of memory. */
static void check_bert_fits(const char *dir, const hr_reported *rep, const char *tmp) {
    char bert[1000], md_path[1200], cells[8][512], *md = NULL;
    snprintf(bert, sizeof bert, "%s/bert", tmp);
    hr_mkdir_p(bert);
    write_bert_folder(dir, bert);
    hr_runset *bs = calloc(1, sizeof *bs);
    CHECK(hr_runset_load(bert, bs) == 0, "bert folder: %s", ab_error());
    CHECK(bs->n_fits == 1 && bs->fits[0].max_batch == 131, "the fit record was not loaded (%d)", bs->n_fits);
    snprintf(md_path, sizeof md_path, "%s/REPORT.md", bert);
    CHECK(hr_write_report(bs, rep, md_path, NULL, NULL, 0) == 0, "bert report: %s", ab_error());
    if (hr_read_file(md_path, &md) == 0) {
        int n = row_cells(md, "FP32 fits in memory", cells, 8);
        CHECK(n == 3 && starts_with(cells[1], "no") && strstr(cells[2], "failed: exit 1: out of memory"),
              "FP32 fits row: '%s' '%s'", n > 1 ? cells[1] : "?", n > 2 ? cells[2] : "?");
        n = row_cells(md, "AMP fits in memory", cells, 8);
        CHECK(n == 3 && starts_with(cells[1], "yes") && starts_with(cells[2], "yes at batch ") &&
                  strstr(cells[2], "the largest batch that fits 8.59 GB at sequence 128: 131 (8.55 GB)"),
              "AMP fits row: '%s' '%s'", n > 1 ? cells[1] : "?", n > 2 ? cells[2] : "?");
        n = row_cells(md, "AMP time saving vs FP32", cells, 8);
        CHECK(n == 4 && starts_with(cells[1], "30%") && !strcmp(cells[2], "—"), "BERT time saving row: '%s' '%s'",
              n > 1 ? cells[1] : "?", n > 2 ? cells[2] : "?");
        free(md);
    }
    hr_runset_free(bs);
    free(bs);
}

/* a copy of dir/src as a CPU run of the given precision and rate, host.blas saying blas */
static void write_cpu_run(const char *dir, const char *out, const char *src, const char *precision, double sps,
                          const char *blas) {
    char path[1300], dst[1300];
    cJSON *j = json_load(dir, src, path, sizeof path);
    if (!j) return;
    cJSON *host = cJSON_GetObjectItemCaseSensitive(j, "host");
    cJSON_ReplaceItemInObject(host, "backend", cJSON_CreateString("cpu"));
    cJSON_ReplaceItemInObject(host, "device", cJSON_CreateString("Fixture CPU"));
    cJSON_ReplaceItemInObject(host, "blas", cJSON_CreateString(blas));
    cJSON_ReplaceItemInObject(j, "precision", cJSON_CreateString(precision));
    cJSON_ReplaceItemInObject(j, "samples_per_s", cJSON_CreateNumber(sps));
    snprintf(dst, sizeof dst, "%s/resnet50-%s.json", out, precision);
    json_store(dst, j);
}

/* On a CPU the AMP time row says what bf16 measured: natively (a saving), emulated (said so), or
 * that a bf16 run would measure it. */
static void check_cpu_bf16(const char *dir, const hr_reported *rep, const char *tmp) {
    static const char *native = "OpenBLAS, bf16 GEMM native (AVX512-BF16, oneDNN 2.6.3 matmul)";
    static const char *emulated = "OpenBLAS, bf16 GEMM emulated (no AVX512-BF16 or AMX on this CPU; oneDNN 2.6.3)";
    const struct {
        const char *blas;
        int with_bf16;
        const char *want;
    } cases[] = {
        {native, 1, "This CPU multiplies bf16 natively (AVX512-BF16, oneDNN 2.6.3 matmul): bf16 took 0.80x the FP32 "
                    "time, a reduced-precision saving of 20.0% measured here"},
        {emulated, 1, "bf16 took 0.80x the FP32 time: bf16 GEMM emulated (no AVX512-BF16 or AMX on this CPU; oneDNN "
                      "2.6.3), so it too is emulated here."},
        {native, 0, "a bf16 run (`--modes bf16`) measures a reduced-precision time saving"},
    };
    for (size_t c = 0; c < sizeof cases / sizeof *cases; c++) {
        char sub[1100], cells[8][512];
        snprintf(sub, sizeof sub, "%s/cpu-bf16-%zu", tmp, c);
        hr_mkdir_p(sub);
        write_cpu_run(dir, sub, "resnet50-fp32.json", "fp32", 1000.0, cases[c].blas);
        write_cpu_run(dir, sub, "resnet50-amp.json", "amp", 900.0, cases[c].blas);
        if (cases[c].with_bf16) write_cpu_run(dir, sub, "resnet50-fp32.json", "bf16", 1250.0, cases[c].blas);
        char *md = report_of(sub, rep, sub);
        if (!md) continue;
        const int n = row_cells(md, "AMP time saving vs FP32", cells, 8);
        CHECK(strstr(md, cases[c].want) != NULL, "CPU bf16 case %zu: the report lacks '%s' (AMP time row: '%s')", c,
              cases[c].want, n > 3 ? cells[3] : "?");
        free(md);
    }
}

/* Bad input: a malformed result, an incomplete one and a missing folder each give an error naming it. */
static void check_bad_input(const char *tmp) {
    char bad[1200];
    snprintf(bad, sizeof bad, "%s/bad", tmp);
    hr_mkdir_p(bad);
    char bad_file[1300];
    snprintf(bad_file, sizeof bad_file, "%s/mlp-fp32.json", bad);
    FILE *f = fopen(bad_file, "w");
    if (f) {
        fputs("{\"tool\": \"ampbench\", \"precision\": \"fp32\", \"epochs\": [", f); /* truncated */
        fclose(f);
    }
    hr_runset *bs = calloc(1, sizeof *bs);
    CHECK(hr_runset_load(bad, bs) != 0 && strstr(ab_error(), "mlp-fp32.json") && strstr(ab_error(), "not valid JSON"),
          "malformed result: error '%s' does not name the file", ab_error());
    f = fopen(bad_file, "w");
    if (f) {
        fputs("{\"tool\": \"ampbench\", \"precision\": \"fp32\"}", f); /* valid JSON, fields missing */
        fclose(f);
    }
    CHECK(hr_runset_load(bad, bs) != 0 && strstr(ab_error(), "mlp-fp32.json") && strstr(ab_error(), "no '"),
          "incomplete result: error '%s'", ab_error());
    char missing[1300];
    snprintf(missing, sizeof missing, "%s/does-not-exist", tmp);
    CHECK(hr_runset_load(missing, bs) != 0 && strstr(ab_error(), "does-not-exist"), "missing folder: error '%s'",
          ab_error());
    free(bs);
}

/* Says how the checks went; removes the temporary folder when all passed. Returns the exit code. */
static int finish(const char *tmp) {
    if (failures == 0) {
        char cmd[1200];
        snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmp);
        if (system(cmd) != 0) fprintf(stderr, "note: could not remove %s\n", tmp);
        printf("test_harness_report: all checks passed\n");
        return 0;
    }
    fprintf(stderr, "test_harness_report: %d failures (files kept in %s)\n", failures, tmp);
    return 1;
}

int main(int argc, char **argv) {
    if (argc != 3) {
        fprintf(stderr, "usage: %s FIXTURES_DIR REPORTED_JSON\n", argv[0]);
        return 2;
    }
    char dir[1024];
    snprintf(dir, sizeof dir, "%s/run-basic", argv[1]);

    hr_reported rep;
    hr_runset *rs = load_inputs(dir, argv[2], &rep);
    if (!rs) return 1;
    check_counts(rs);
    hr_workload ws[HR_MAX_WORKLOADS];
    const hr_workload *w = check_workload(rs, ws);
    if (!w) return 1;
    check_ratios(dir, w);
    check_fp32_only_ratios(w);

    char tmpl[] = "/tmp/ab_harness_report_XXXXXX";
    const char *tmp = mkdtemp(tmpl);
    CHECK(tmp != NULL, "mkdtemp failed");
    if (!tmp) return 1;
    char *md = write_markdown(rs, &rep, tmp);
    if (!md) return 1;
    check_provenance(md, rs, &rep, tmp);
    check_ratio_rows(md);
    check_single_seed_report(md);
    free(md);

    check_seeds(argv[1], &rep, tmp);
    check_bert_fits(dir, &rep, tmp);
    check_cpu_bf16(dir, &rep, tmp);
    check_bad_input(tmp);

    hr_runset_free(rs);
    free(rs);
    hr_reported_free(&rep);
    return finish(tmp);
}
