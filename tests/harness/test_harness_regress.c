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

int main(int argc, char **argv) {
    if (argc != 4) {
        fprintf(stderr, "usage: %s AMPBENCH_REGRESS FIXTURES_DIR REGRESS_CONF\n", argv[0]);
        return 2;
    }
    tool = argv[1];
    conf = argv[3];
    char fixture[1024];
    snprintf(fixture, sizeof fixture, "%s/run-basic", argv[2]);
    char tmpl[] = "/tmp/ab_harness_regress_XXXXXX";
    const char *tmp = mkdtemp(tmpl);
    if (!tmp) return 1;
    char base[1200], cur[1200];
    snprintf(base, sizeof base, "%s/baseline", tmp);
    snprintf(cur, sizeof cur, "%s/current", tmp);
    copy_run(fixture, base);
    static char out[1 << 16];

    /* the same figures: exit 0, and the benchmark files hold them */
    copy_run(fixture, cur);
    int rc = run(base, cur, "", out, sizeof out);
    CHECK(rc == 0, "identical runs: exit %d, want 0\n%s", rc, out);
    char path[1300], *text = NULL;
    snprintf(path, sizeof path, "%s/benchmark-bigger.json", cur);
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
    snprintf(path, sizeof path, "%s/benchmark-smaller.json", cur);
    if (hr_read_file(path, &text) == 0) {
        CHECK(strstr(text, "\"resnet50/fp32/1rank mean_epoch_time_s\"") != NULL, "%s lacks the FP32 epoch time", path);
        free(text);
    } else {
        CHECK(0, "%s", ab_error());
    }

    /* within tolerance: 2% slower, 0.3 points less accurate */
    copy_run(fixture, cur);
    edit(cur, "resnet50-amp.json", "samples_per_s", 1 / 1.02, 0);
    edit(cur, "resnet50-amp.json", "total_time_s", 1.02, 0);
    edit(cur, "resnet50-amp.json", "final_test_accuracy", 1, -0.3);
    rc = run(base, cur, "--no-json", out, sizeof out);
    CHECK(rc == 0, "within tolerance: exit %d, want 0\n%s", rc, out);

    /* a planted 10% slowdown of the AMP run */
    copy_run(fixture, cur);
    edit(cur, "resnet50-amp.json", "samples_per_s", 1 / 1.1, 0);
    edit(cur, "resnet50-amp.json", "total_time_s", 1.1, 0);
    rc = run(base, cur, "--no-json", out, sizeof out);
    CHECK(rc == 1, "10%% slowdown: exit %d, want 1\n%s", rc, out);
    CHECK(has_line(out, "samples_per_s", "resnet50/amp/1rank", "REGRESSION"), "slowdown: no samples_per_s REGRESSION line\n%s", out);
    CHECK(has_line(out, "mean_epoch_time_s", "resnet50/amp/1rank", "REGRESSION"), "slowdown: no epoch-time REGRESSION line\n%s", out);
    CHECK(has_line(out, "samples_per_s", "resnet50/fp32/1rank", " ok"), "slowdown: the FP32 run was not left ok\n%s", out);

    /* a planted accuracy drop of 3 points */
    copy_run(fixture, cur);
    edit(cur, "resnet50-fp32.json", "final_test_accuracy", 1, -3.0);
    rc = run(base, cur, "--no-json", out, sizeof out);
    CHECK(rc == 1, "accuracy drop: exit %d, want 1\n%s", rc, out);
    CHECK(has_line(out, "final_test_accuracy", "resnet50/fp32/1rank", "REGRESSION"), "accuracy drop: no REGRESSION line\n%s", out);

    /* a faster run is an improvement, not a failure */
    copy_run(fixture, cur);
    edit(cur, "resnet50-amp.json", "samples_per_s", 1.2, 0);
    edit(cur, "resnet50-amp.json", "total_time_s", 1 / 1.2, 0);
    rc = run(base, cur, "--no-json", out, sizeof out);
    CHECK(has_line(out, "samples_per_s", "resnet50/amp/1rank", "improved"), "speed-up not reported as improved\n%s", out);

    /* a result missing from the current run */
    copy_run(fixture, cur);
    snprintf(path, sizeof path, "%s/%s", cur, files[2]);
    remove(path);
    rc = run(base, cur, "--no-json", out, sizeof out);
    CHECK(rc == 1 && has_line(out, "resnet50/amp/4ranks", "missing", NULL), "missing result: exit %d\n%s", rc, out);

    /* malformed: a truncated result file; a folder that does not exist; a bad config */
    copy_run(fixture, cur);
    snprintf(path, sizeof path, "%s/%s", cur, files[1]);
    FILE *f = fopen(path, "w");
    if (f) {
        fputs("{\"tool\": \"ampbench\", \"epochs\": [{\"epoch\": 1,", f);
        fclose(f);
    }
    rc = run(base, cur, "--no-json", out, sizeof out);
    CHECK(rc == 2 && strstr(out, "resnet50-amp.json") && strstr(out, "not valid JSON"),
          "malformed result: exit %d, want 2 and the file named\n%s", rc, out);
    char nowhere[1300];
    snprintf(nowhere, sizeof nowhere, "%s/no-such-run", tmp);
    rc = run(base, nowhere, "--no-json", out, sizeof out);
    CHECK(rc == 2 && strstr(out, "no-such-run"), "missing folder: exit %d, want 2 and the folder named\n%s", rc, out);
    char empty[1300];
    snprintf(empty, sizeof empty, "%s/empty", tmp);
    hr_mkdir_p(empty);
    rc = run(base, empty, "--no-json", out, sizeof out);
    CHECK(rc == 2 && strstr(out, "no ampbench results"), "empty folder: exit %d, want 2\n%s", rc, out);
    char badconf[1300];
    snprintf(badconf, sizeof badconf, "%s/bad.conf", tmp);
    f = fopen(badconf, "w");
    if (f) {
        fputs("samples_per_s bigger 5%\nsamples_per_sec bigger 5%\n", f);
        fclose(f);
    }
    const char *keep = conf;
    conf = badconf;
    copy_run(fixture, cur);
    rc = run(base, cur, "--no-json", out, sizeof out);
    CHECK(rc == 2 && strstr(out, "bad.conf:2") && strstr(out, "samples_per_sec"), "bad config: exit %d\n%s", rc, out);
    conf = keep;

    /* several seeds: seed 2 of the baseline against seed 2 now, the peer's apart from ampbench's */
    char seeds[1100];
    snprintf(seeds, sizeof seeds, "%s/run-seeds", argv[2]);
    copy_run(seeds, base);
    copy_run(seeds, cur);
    rc = run(base, cur, "--no-json", out, sizeof out);
    CHECK(rc == 0, "identical seed runs: exit %d, want 0\n%s", rc, out);
    CHECK(has_line(out, "final_test_accuracy", "mlp/fp32/1rank/s2 ", " ok") &&
              has_line(out, "final_test_accuracy", "mlp/fp32/1rank/pytorch/s3 ", " ok"),
          "identical seed runs: no per-seed lines\n%s", out);
    edit(cur, "mlp-fp32-s2.json", "final_test_accuracy", 1, -3.0);
    rc = run(base, cur, "--no-json", out, sizeof out);
    CHECK(rc == 1, "accuracy drop in seed 2: exit %d, want 1\n%s", rc, out);
    CHECK(has_line(out, "final_test_accuracy", "mlp/fp32/1rank/s2 ", "REGRESSION"),
          "accuracy drop in seed 2: no REGRESSION line for seed 2\n%s", out);
    CHECK(has_line(out, "final_test_accuracy", "mlp/fp32/1rank/s1 ", " ok") &&
              has_line(out, "final_test_accuracy", "mlp/fp32/1rank/pytorch/s2 ", " ok"),
          "accuracy drop in seed 2: seed 1 or the peer's seed 2 not left ok\n%s", out);
    copy_run(seeds, cur);
    snprintf(path, sizeof path, "%s/mlp-amp-s3.json", cur);
    remove(path);
    rc = run(base, cur, "--no-json", out, sizeof out);
    CHECK(rc == 1 && has_line(out, "mlp/amp/1rank/s3", "missing", NULL), "missing seed 3: exit %d\n%s", rc, out);

    /* one seed with a peer: the peer's result has its own key, so ampbench's own drop is found
     * (the peer's file sorts first and once stood in for ampbench's) */
    char one[12000];
    snprintf(one, sizeof one,
             "rm -rf '%s' '%s' && mkdir -p '%s' && cp '%s/mlp-fp32-s1.json' '%s/mlp-fp32.json' && "
             "cp '%s/mlp-fp32-pytorch-s1.json' '%s/mlp-fp32-pytorch.json' && cp -r '%s' '%s'",
             base, cur, base, seeds, base, seeds, base, base, cur);
    CHECK(sh(one) == 0, "cannot lay out the single-seed peer case");
    edit(cur, "mlp-fp32.json", "final_test_accuracy", 1, -3.0);
    rc = run(base, cur, "--no-json", out, sizeof out);
    CHECK(rc == 1 && has_line(out, "final_test_accuracy", "mlp/fp32/1rank ", "REGRESSION") &&
              has_line(out, "final_test_accuracy", "mlp/fp32/1rank/pytorch ", " ok"),
          "one seed with a peer: ampbench's accuracy drop not flagged under its own key: exit %d\n%s", rc, out);

    if (failures) {
        fprintf(stderr, "test_harness_regress: %d failures (files kept in %s)\n", failures, tmp);
        return 1;
    }
    char cmd[1300];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmp);
    if (sh(cmd) != 0) fprintf(stderr, "note: could not remove %s\n", tmp);
    printf("test_harness_regress: all checks passed\n");
    return 0;
}
