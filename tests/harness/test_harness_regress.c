/* The regression check, run as users run it (the ampbench-regress program): a copy of the
 * fixture run is the baseline; the current run is the same, within tolerance, 10% slower, less
 * accurate, missing a result, malformed, or missing altogether. Exit codes and messages are
 * checked, and the github-action-benchmark files are read back. On the run-seeds fixture (3 seeds
 * per mode) results are matched seed by seed: a drop in seed 2 alone, or a missing seed, is found.
 * usage: test_harness_regress AMPBENCH_REGRESS FIXTURES_DIR REGRESS_CONF */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "harness.h"
#include "tolerances.h"

static int failures = 0;
static const char *tool, *conf;

#define CHECK AB_CHECK /* tests/tolerances.h */

#include "json_edit.h"

static const char *const files[] = {"resnet50-fp32.json", "resnet50-amp.json", "resnet50-dp-amp.json", "run.json"};

static int sh(const char *cmd) {
    const int st = system(cmd);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static void copy_run(const char *from, const char *to) {
    char cmd[3000];
    snprintf(cmd, sizeof cmd, "rm -rf '%s' && mkdir -p '%s' && cp '%s'/*.json '%s'/", to, to, from, to);
    if (sh(cmd) != 0) CHECK(0, "cannot copy %s to %s", from, to);
}

/* Multiplies (or, with add, shifts) a top-level number and the same field of every epoch. */
static void edit(const char *dir, const char *file, const char *key, double factor, double add) {
    char path[1200];
    cJSON *j = json_load(dir, file, path, sizeof path);
    if (!j) return;
    cJSON *v = cJSON_GetObjectItemCaseSensitive(j, key);
    if (cJSON_IsNumber(v)) cJSON_SetNumberValue(v, v->valuedouble * factor + add);
    const char *ep_key = !strcmp(key, "total_time_s") ? "time_s" : !strcmp(key, "final_test_accuracy") ? "test_accuracy" : NULL;
    cJSON *e;
    cJSON_ArrayForEach(e, cJSON_GetObjectItemCaseSensitive(j, "epochs")) {
        cJSON *x = ep_key ? cJSON_GetObjectItemCaseSensitive(e, ep_key) : NULL;
        if (cJSON_IsNumber(x)) cJSON_SetNumberValue(x, x->valuedouble * factor + add);
    }
    json_store(path, j);
}

/* Runs the tool; returns its exit status and its output (stdout + stderr) in out. */
static int run(const char *base, const char *cur, const char *extra, char *out, size_t n) {
    char cmd[4000];
    snprintf(cmd, sizeof cmd, "'%s' '%s' '%s' --config '%s' %s 2>&1", tool, base, cur, conf, extra);
    FILE *p = popen(cmd, "r");
    if (!p) return -1;
    size_t len = fread(out, 1, n - 1, p);
    out[len] = 0;
    const int st = pclose(p);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

/* A line of the output that holds all of the given words. */
static int has_line(const char *out, const char *a, const char *b, const char *c) {
    const char *p = out;
    while (*p) {
        const char *nl = strchr(p, '\n');
        const size_t len = nl ? (size_t)(nl - p) : strlen(p);
        char line[1024];
        snprintf(line, sizeof line, "%.*s", (int)(len < 1023 ? len : 1023), p);
        if (strstr(line, a) && (!b || strstr(line, b)) && (!c || strstr(line, c))) return 1;
        p += len + (nl ? 1 : 0);
    }
    return 0;
}

/* The folders the scenarios work in, and the tool's output of the last run. */
typedef struct {
    char fixture[1024], seeds[1100]; /* FIXTURES_DIR/run-basic, FIXTURES_DIR/run-seeds */
    char tmp[sizeof "/tmp/ab_harness_regress_XXXXXX"];
    char base[1200], cur[1200]; /* the baseline and current copies, under tmp */
    char out[1 << 16];
} scene;

/* Makes the temporary folder and the baseline copy of run-basic; returns 0, or 1 when mkdtemp fails. */
static int set_up(scene *s, const char *fixtures) {
    snprintf(s->fixture, sizeof s->fixture, "%s/run-basic", fixtures);
    snprintf(s->seeds, sizeof s->seeds, "%s/run-seeds", fixtures);
    snprintf(s->tmp, sizeof s->tmp, "/tmp/ab_harness_regress_XXXXXX");
    if (!mkdtemp(s->tmp)) return 1;
    snprintf(s->base, sizeof s->base, "%s/baseline", s->tmp);
    snprintf(s->cur, sizeof s->cur, "%s/current", s->tmp);
    copy_run(s->fixture, s->base);
    return 0;
}

/* benchmark-bigger.json is a non-empty array whose AMP samples/s entry holds 2000 samples/s. */
static void check_bench_bigger(const scene *s) {
    char path[1300], *text = NULL;
    snprintf(path, sizeof path, "%s/benchmark-bigger.json", s->cur);
    if (hr_read_file(path, &text) == 0) {
        cJSON *j = cJSON_Parse(text);
        CHECK(cJSON_IsArray(j) && cJSON_GetArraySize(j) > 0, "%s: not a non-empty JSON array", path);
        int found = 0;
        const cJSON *e;
        cJSON_ArrayForEach(e, j) {
            if (!strcmp(hr_str(e, "name", ""), "resnet50/amp/1rank samples_per_s")) {
                found = 1;
                CHECK(hr_num(e, "value", 0) == 2000.0 && !strcmp(hr_str(e, "unit", ""), "samples/s"),
                      "benchmark entry for AMP samples/s: value %g unit %s", hr_num(e, "value", 0),
                      hr_str(e, "unit", ""));
            }
        }
        CHECK(found, "%s: no entry 'resnet50/amp/1rank samples_per_s'", path);
        cJSON_Delete(j);
        free(text);
    } else {
        CHECK(0, "%s", ab_error());
    }
}

/* benchmark-smaller.json holds the FP32 run's mean epoch time. */
static void check_bench_smaller(const scene *s) {
    char path[1300], *text = NULL;
    snprintf(path, sizeof path, "%s/benchmark-smaller.json", s->cur);
    if (hr_read_file(path, &text) == 0) {
        CHECK(strstr(text, "\"resnet50/fp32/1rank mean_epoch_time_s\"") != NULL, "%s lacks the FP32 epoch time", path);
        free(text);
    } else {
        CHECK(0, "%s", ab_error());
    }
}

/* The same figures: exit 0, and the benchmark files hold them. */
static void check_identical_runs(scene *s) {
    char *out = s->out;
    copy_run(s->fixture, s->cur);
    const int rc = run(s->base, s->cur, "", out, sizeof s->out);
    CHECK(rc == 0, "identical runs: exit %d, want 0\n%s", rc, out);
    check_bench_bigger(s);
    check_bench_smaller(s);
}

/* Within tolerance (2% slower, 0.3 points less accurate): exit 0. */
static void check_within_tolerance(scene *s) {
    char *out = s->out;
    copy_run(s->fixture, s->cur);
    edit(s->cur, "resnet50-amp.json", "samples_per_s", 1 / 1.02, 0);
    edit(s->cur, "resnet50-amp.json", "total_time_s", 1.02, 0);
    edit(s->cur, "resnet50-amp.json", "final_test_accuracy", 1, -0.3);
    const int rc = run(s->base, s->cur, "--no-json", out, sizeof s->out);
    CHECK(rc == 0, "within tolerance: exit %d, want 0\n%s", rc, out);
}

/* A planted 10% slowdown of the AMP run: exit 1, its speed and epoch time regressed, the FP32 run ok. */
static void check_slowdown(scene *s) {
    char *out = s->out;
    copy_run(s->fixture, s->cur);
    edit(s->cur, "resnet50-amp.json", "samples_per_s", 1 / 1.1, 0);
    edit(s->cur, "resnet50-amp.json", "total_time_s", 1.1, 0);
    const int rc = run(s->base, s->cur, "--no-json", out, sizeof s->out);
    CHECK(rc == 1, "10%% slowdown: exit %d, want 1\n%s", rc, out);
    CHECK(has_line(out, "samples_per_s", "resnet50/amp/1rank", "REGRESSION"),
          "slowdown: no samples_per_s REGRESSION line\n%s", out);
    CHECK(has_line(out, "mean_epoch_time_s", "resnet50/amp/1rank", "REGRESSION"),
          "slowdown: no epoch-time REGRESSION line\n%s", out);
    CHECK(has_line(out, "samples_per_s", "resnet50/fp32/1rank", " ok"), "slowdown: the FP32 run was not left ok\n%s",
          out);
}

/* A planted accuracy drop of 3 points in the FP32 run: exit 1 and a REGRESSION line. */
static void check_accuracy_drop(scene *s) {
    char *out = s->out;
    copy_run(s->fixture, s->cur);
    edit(s->cur, "resnet50-fp32.json", "final_test_accuracy", 1, -3.0);
    const int rc = run(s->base, s->cur, "--no-json", out, sizeof s->out);
    CHECK(rc == 1, "accuracy drop: exit %d, want 1\n%s", rc, out);
    CHECK(has_line(out, "final_test_accuracy", "resnet50/fp32/1rank", "REGRESSION"),
          "accuracy drop: no REGRESSION line\n%s", out);
}

/* A faster run is an improvement, not a failure. */
static void check_improvement(scene *s) {
    char *out = s->out;
    copy_run(s->fixture, s->cur);
    edit(s->cur, "resnet50-amp.json", "samples_per_s", 1.2, 0);
    edit(s->cur, "resnet50-amp.json", "total_time_s", 1 / 1.2, 0);
    run(s->base, s->cur, "--no-json", out, sizeof s->out);
    CHECK(has_line(out, "samples_per_s", "resnet50/amp/1rank", "improved"), "speed-up not reported as improved\n%s",
          out);
}

/* A result missing from the current run: exit 1 and a missing line for it. */
static void check_missing_result(scene *s) {
    char *out = s->out, path[1300];
    copy_run(s->fixture, s->cur);
    snprintf(path, sizeof path, "%s/%s", s->cur, files[2]);
    remove(path);
    const int rc = run(s->base, s->cur, "--no-json", out, sizeof s->out);
    CHECK(rc == 1 && has_line(out, "resnet50/amp/4ranks", "missing", NULL), "missing result: exit %d\n%s", rc, out);
}

/* A truncated result file: exit 2, and the file named as not valid JSON. */
static void check_truncated_result(scene *s) {
    char *out = s->out, path[1300];
    copy_run(s->fixture, s->cur);
    snprintf(path, sizeof path, "%s/%s", s->cur, files[1]);
    FILE *f = fopen(path, "w");
    if (f) {
        fputs("{\"tool\": \"ampbench\", \"epochs\": [{\"epoch\": 1,", f);
        fclose(f);
    }
    const int rc = run(s->base, s->cur, "--no-json", out, sizeof s->out);
    CHECK(rc == 2 && strstr(out, "resnet50-amp.json") && strstr(out, "not valid JSON"),
          "malformed result: exit %d, want 2 and the file named\n%s", rc, out);
}

/* A current folder that does not exist, then an empty one: exit 2 each time, and the reason given. */
static void check_absent_results(scene *s) {
    char *out = s->out, nowhere[1300];
    snprintf(nowhere, sizeof nowhere, "%s/no-such-run", s->tmp);
    int rc = run(s->base, nowhere, "--no-json", out, sizeof s->out);
    CHECK(rc == 2 && strstr(out, "no-such-run"), "missing folder: exit %d, want 2 and the folder named\n%s", rc, out);
    char empty[1300];
    snprintf(empty, sizeof empty, "%s/empty", s->tmp);
    hr_mkdir_p(empty);
    rc = run(s->base, empty, "--no-json", out, sizeof s->out);
    CHECK(rc == 2 && strstr(out, "no ampbench results"), "empty folder: exit %d, want 2\n%s", rc, out);
}

/* A config whose second line names an unknown metric: exit 2, with the file, line and name. */
static void check_bad_config(scene *s) {
    char *out = s->out, badconf[1300];
    snprintf(badconf, sizeof badconf, "%s/bad.conf", s->tmp);
    FILE *f = fopen(badconf, "w");
    if (f) {
        fputs("samples_per_s bigger 5%\nsamples_per_sec bigger 5%\n", f);
        fclose(f);
    }
    const char *keep = conf;
    conf = badconf;
    copy_run(s->fixture, s->cur);
    const int rc = run(s->base, s->cur, "--no-json", out, sizeof s->out);
    CHECK(rc == 2 && strstr(out, "bad.conf:2") && strstr(out, "samples_per_sec"), "bad config: exit %d\n%s", rc, out);
    conf = keep;
}

/* Identical runs with several seeds: exit 0, one line per seed, the peer's apart from ampbench's. */
static void check_identical_seeds(scene *s) {
    char *out = s->out;
    copy_run(s->seeds, s->base);
    copy_run(s->seeds, s->cur);
    const int rc = run(s->base, s->cur, "--no-json", out, sizeof s->out);
    CHECK(rc == 0, "identical seed runs: exit %d, want 0\n%s", rc, out);
    CHECK(has_line(out, "final_test_accuracy", "mlp/fp32/1rank/s2 ", " ok") &&
              has_line(out, "final_test_accuracy", "mlp/fp32/1rank/pytorch/s3 ", " ok"),
          "identical seed runs: no per-seed lines\n%s", out);
}

/* An accuracy drop in seed 2 alone: seed 2 regressed, seed 1 and the peer's seed 2 ok. */
static void check_seed_drop(scene *s) {
    char *out = s->out;
    edit(s->cur, "mlp-fp32-s2.json", "final_test_accuracy", 1, -3.0);
    const int rc = run(s->base, s->cur, "--no-json", out, sizeof s->out);
    CHECK(rc == 1, "accuracy drop in seed 2: exit %d, want 1\n%s", rc, out);
    CHECK(has_line(out, "final_test_accuracy", "mlp/fp32/1rank/s2 ", "REGRESSION"),
          "accuracy drop in seed 2: no REGRESSION line for seed 2\n%s", out);
    CHECK(has_line(out, "final_test_accuracy", "mlp/fp32/1rank/s1 ", " ok") &&
              has_line(out, "final_test_accuracy", "mlp/fp32/1rank/pytorch/s2 ", " ok"),
          "accuracy drop in seed 2: seed 1 or the peer's seed 2 not left ok\n%s", out);
}

/* Seed 3 of the AMP run missing now: exit 1 and a missing line for it. */
static void check_missing_seed(scene *s) {
    char *out = s->out, path[1300];
    copy_run(s->seeds, s->cur);
    snprintf(path, sizeof path, "%s/mlp-amp-s3.json", s->cur);
    remove(path);
    const int rc = run(s->base, s->cur, "--no-json", out, sizeof s->out);
    CHECK(rc == 1 && has_line(out, "mlp/amp/1rank/s3", "missing", NULL), "missing seed 3: exit %d\n%s", rc, out);
}

/* One seed with a peer: ampbench's own accuracy drop is flagged under its own key, the peer's left ok. */
static void check_single_seed_peer(scene *s) {
    /* the peer's result has its own key, so ampbench's own drop is found (the peer's file sorts first
     * and once stood in for ampbench's) */
    char *out = s->out, one[12000];
    const char *base = s->base, *cur = s->cur, *seeds = s->seeds;
    snprintf(one, sizeof one,
             "rm -rf '%s' '%s' && mkdir -p '%s' && cp '%s/mlp-fp32-s1.json' '%s/mlp-fp32.json' && "
             "cp '%s/mlp-fp32-pytorch-s1.json' '%s/mlp-fp32-pytorch.json' && cp -r '%s' '%s'",
             base, cur, base, seeds, base, seeds, base, base, cur);
    CHECK(sh(one) == 0, "cannot lay out the single-seed peer case");
    edit(cur, "mlp-fp32.json", "final_test_accuracy", 1, -3.0);
    const int rc = run(base, cur, "--no-json", out, sizeof s->out);
    CHECK(rc == 1 && has_line(out, "final_test_accuracy", "mlp/fp32/1rank ", "REGRESSION") &&
              has_line(out, "final_test_accuracy", "mlp/fp32/1rank/pytorch ", " ok"),
          "one seed with a peer: ampbench's accuracy drop not flagged under its own key: exit %d\n%s", rc, out);
}

/* Says how the checks went; removes the temporary folder when all passed. Returns the exit code. */
static int finish(const scene *s) {
    if (failures) {
        fprintf(stderr, "test_harness_regress: %d failures (files kept in %s)\n", failures, s->tmp);
        return 1;
    }
    char cmd[1300];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", s->tmp);
    if (sh(cmd) != 0) fprintf(stderr, "note: could not remove %s\n", s->tmp);
    printf("test_harness_regress: all checks passed\n");
    return 0;
}

int main(int argc, char **argv) {
    if (argc != 4) {
        fprintf(stderr, "usage: %s AMPBENCH_REGRESS FIXTURES_DIR REGRESS_CONF\n", argv[0]);
        return 2;
    }
    tool = argv[1];
    conf = argv[3];
    static scene s;
    if (set_up(&s, argv[2]) != 0) return 1;
    check_identical_runs(&s);
    check_within_tolerance(&s);
    check_slowdown(&s);
    check_accuracy_drop(&s);
    check_improvement(&s);
    check_missing_result(&s);
    check_truncated_result(&s);
    check_absent_results(&s);
    check_bad_config(&s);
    check_identical_seeds(&s);
    check_seed_drop(&s);
    check_missing_seed(&s);
    check_single_seed_peer(&s);
    return finish(&s);
}
