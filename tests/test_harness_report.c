/* The report on fixture results (tests/fixtures/harness/run-basic, see its README): the ratios
 * recomputed here from the JSON files and checked against the fixture's round numbers, the
 * Markdown table cells that must hold them, and bad input (a malformed or missing result) giving
 * a one-line error naming the file.
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
    else
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

int main(int argc, char **argv) {
    if (argc != 3) {
        fprintf(stderr, "usage: %s FIXTURES_DIR REPORTED_JSON\n", argv[0]);
        return 2;
    }
    char dir[1024];
    snprintf(dir, sizeof dir, "%s/run-basic", argv[1]);

    hr_reported rep;
    if (hr_reported_load(argv[2], &rep) != 0) {
        fprintf(stderr, "FAIL: %s\n", ab_error());
        return 1;
    }
    hr_runset *rs = calloc(1, sizeof *rs);
    if (hr_runset_load(dir, rs) != 0) {
        fprintf(stderr, "FAIL: %s\n", ab_error());
        return 1;
    }
    CHECK(rs->n_runs == 3, "results loaded: %d, want 3 (run.json is not a result)", rs->n_runs);
    CHECK(rs->n_planned == 4, "planned runs from run.json: %d, want 4", rs->n_planned);

    hr_workload ws[HR_MAX_WORKLOADS];
    int nw = 0;
    CHECK(hr_group_workloads(rs, ws, HR_MAX_WORKLOADS, &nw) == 0 && nw == 1, "workloads: %d, want 1", nw);
    const hr_workload *w = &ws[0];
    CHECK(w->fp32 && w->amp && w->dp, "fp32/amp/dp runs not all found");
    CHECK(w->n_all == 3 && !strcmp(w->all[0]->precision, "fp32") && w->all[2]->world_size == 4,
          "runs not ordered fp32, amp, data-parallel");
    if (!w->fp32 || !w->amp || !w->dp) return 1;

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

    /* a workload with only an FP32 run: the ratios are absent, not zero */
    hr_workload lone = *w;
    lone.amp = lone.dp = NULL;
    hr_ratios qa;
    hr_compute_ratios(&lone, 4, "gpus", &qa);
    CHECK(isnan(qa.amp_time_saving_pct) && isnan(qa.dp_speedup_vs_amp), "ratios without an AMP run are not NaN");

    /* the Markdown */
    char tmpl[] = "/tmp/ab_harness_report_XXXXXX";
    const char *tmp = mkdtemp(tmpl);
    CHECK(tmp != NULL, "mkdtemp failed");
    if (!tmp) return 1;
    char md_path[1200];
    snprintf(md_path, sizeof md_path, "%s/REPORT.md", tmp);
    CHECK(hr_write_report(rs, &rep, md_path, NULL, NULL, 0) == 0, "hr_write_report: %s", ab_error());
    char *md = NULL;
    if (hr_read_file(md_path, &md) != 0) {
        fprintf(stderr, "FAIL: %s\n", ab_error());
        return 1;
    }
    char cells[8][512];
    int n = row_cells(md, "AMP time saving vs FP32", cells, 8);
    CHECK(n == 4, "time-saving row: %d cells, want 4", n);
    if (n == 4) {
        CHECK(starts_with(cells[1], "40%"), "reported time saving cell '%s' does not start with 40%%", cells[1]);
        CHECK(starts_with(cells[2], "+50.0%"), "measured time saving cell '%s' does not start with +50.0%%", cells[2]);
        CHECK(strlen(cells[3]) > 20, "time-saving row has no explanation");
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
    CHECK(strstr(md, "## BERT-base, GLUE fine-tuning (`bert-base`): reported only") != NULL,
          "no reported-only section for bert-base");
    CHECK(strstr(md, "| `bert-base-fp32` | skipped | fixture: model not built |") != NULL,
          "the skipped run of run.json is not listed");
    free(md);

    /* BERT's "fits in memory": an AMP run that completed, an FP32 run that failed for lack of memory */
    char bert[1000];
    snprintf(bert, sizeof bert, "%s/bert", tmp);
    hr_mkdir_p(bert);
    {
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
        hr_runset *bs = calloc(1, sizeof *bs);
        CHECK(hr_runset_load(bert, bs) == 0, "bert folder: %s", ab_error());
        CHECK(bs->n_fits == 1 && bs->fits[0].max_batch == 131, "the fit record was not loaded (%d)", bs->n_fits);
        snprintf(md_path, sizeof md_path, "%s/REPORT.md", bert);
        CHECK(hr_write_report(bs, &rep, md_path, NULL, NULL, 0) == 0, "bert report: %s", ab_error());
        if (hr_read_file(md_path, &md) == 0) {
            n = row_cells(md, "FP32 fits in memory", cells, 8);
            CHECK(n == 3 && starts_with(cells[1], "no") && strstr(cells[2], "failed: exit 1: out of memory"),
                  "FP32 fits row: '%s' '%s'", n > 1 ? cells[1] : "?", n > 2 ? cells[2] : "?");
            n = row_cells(md, "AMP fits in memory", cells, 8);
            CHECK(n == 3 && starts_with(cells[1], "yes") && starts_with(cells[2], "yes at batch ") &&
                      strstr(cells[2], "the largest batch that fits 8.59 GB at sequence 128: 131 (8.55 GB)"),
                  "AMP fits row: '%s' '%s'", n > 1 ? cells[1] : "?", n > 2 ? cells[2] : "?");
            n = row_cells(md, "AMP time saving vs FP32", cells, 8);
            CHECK(n == 4 && starts_with(cells[1], "30%") && !strcmp(cells[2], "—"),
                  "BERT time saving row: '%s' '%s'", n > 1 ? cells[1] : "?", n > 2 ? cells[2] : "?");
            free(md);
        }
        hr_runset_free(bs);
        free(bs);
    }

    /* bad input: a malformed result and a missing folder name the file */
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

    hr_runset_free(rs);
    free(rs);
    hr_reported_free(&rep);
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
