/* End to end on real MNIST: one epoch in fp32 and one in amp each reach at least 90% test
 * accuracy, within 1 point of each other; two runs with the same seed give identical losses;
 * the JSON result holds the documented fields. */
#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "record.h"
#include "tolerances.h"
#include "workloads.h"
#include "platform.h"
#include "train.h"

static int failures = 0;

static cJSON *read_json(const char *path) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    static char buf[1 << 22];
    const size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = 0;
    return cJSON_Parse(buf);
}

static double jnum(const cJSON *o, const char *path) {
    char tmp[128];
    snprintf(tmp, sizeof tmp, "%s", path);
    const cJSON *cur = o;
    for (char *tok = strtok(tmp, "."); tok && cur; tok = strtok(NULL, ".")) cur = cJSON_GetObjectItemCaseSensitive(cur, tok);
    return cJSON_IsNumber(cur) ? cur->valuedouble : NAN;
}

static double run(ab_precision prec, const char *out, ab_run_record *rec) {
    ab_train_config c;
    ab_train_config_defaults(&c);
    c.workload = &ab_workloads;
    c.platform = &ab_platform;
    c.precision = prec;
    c.quiet = 1;
    c.out_path = out;
    c.record = &ab_record_json;
    if (ab_train_run(&c, rec) != 0) {
        fprintf(stderr, "FAIL %s run: %s\n", ab_precision_name(prec), ab_error());
        failures++;
        return NAN;
    }
    return rec->n_epochs ? rec->epochs[0].test_accuracy : NAN;
}

static void check_json(const char *path, const char *prec, const ab_run_record *rec) {
    cJSON *o = read_json(path);
    AB_CHECK(o != NULL, "%s parses as JSON", path);
    if (!o) return;
    const char *keys[] = {"workload", "precision", "host", "epochs", "total_time_s", "samples_per_s",
                          "peak_memory_bytes", "mixed_precision", "git_commit", "world_size", "loss_curve"};
    for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++)
        AB_CHECK(cJSON_GetObjectItemCaseSensitive(o, keys[i]) != NULL, "%s has '%s'", path, keys[i]);
    const cJSON *p = cJSON_GetObjectItemCaseSensitive(o, "precision");
    AB_CHECK(cJSON_IsString(p) && strcmp(p->valuestring, prec) == 0, "precision field");
    AB_CHECK(cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(o, "complete")), "complete");
    AB_CHECK(jnum(o, "workload.batch_size") == 64 && jnum(o, "workload.seed") == 1, "workload fields");
    AB_CHECK(fabs(jnum(o, "total_time_s") - rec->epochs[0].time_s) < 1e-9, "total time");
    AB_CHECK(fabs(jnum(o, "samples_per_s") - 60000.0 / rec->epochs[0].time_s) < 1e-6 * jnum(o, "samples_per_s"),
             "samples per second = 60000 / epoch time");
    AB_CHECK(jnum(o, "peak_memory_bytes.total") == (double)rec->mem.peak_total && rec->mem.peak_total > 0, "peak total");
    AB_CHECK(jnum(o, "peak_memory_bytes.gradients") >= 203530 * 4.0, "fp32 gradient buffer counted");
    AB_CHECK(jnum(o, "mixed_precision.init_scale") == (strcmp(prec, "amp") == 0 ? 65536.0 : 1.0), "init scale");
    const cJSON *ep = cJSON_GetObjectItemCaseSensitive(o, "epochs");
    AB_CHECK(cJSON_GetArraySize(ep) == 1, "one epoch listed");
    AB_CHECK(fabs(jnum(cJSON_GetArrayItem(ep, 0), "test_accuracy") - rec->epochs[0].test_accuracy) < 1e-9, "accuracy");
    cJSON_Delete(o);
}

int main(void) {
    char dir[] = "/tmp/ab_e2e.XXXXXX";
    if (!mkdtemp(dir)) return 1;
    char p32[64], pamp[64];
    snprintf(p32, sizeof p32, "%s/fp32.json", dir);
    snprintf(pamp, sizeof pamp, "%s/amp.json", dir);
    ab_run_record r32, ramp;
    const double a32 = run(AB_PREC_FP32, p32, &r32), aamp = run(AB_PREC_AMP, pamp, &ramp);
    printf("one epoch: fp32 %.2f%%, amp %.2f%% (scale %g, %ld skipped)\n", a32, aamp, (double)ramp.scaler.scale,
           ramp.scaler.skipped);
    AB_CHECK(a32 >= 90.0, "fp32 accuracy %.2f%% >= 90%%", a32);
    AB_CHECK(aamp >= 90.0, "amp accuracy %.2f%% >= 90%%", aamp);
    AB_CHECK(fabs(a32 - aamp) <= 1.0, "fp32 and amp within 1 point: %.2f vs %.2f", a32, aamp);
    if (r32.n_epochs) check_json(p32, "fp32", &r32);
    if (ramp.n_epochs) check_json(pamp, "amp", &ramp);
    /* amp really ran in fp16: its losses differ from fp32's in the low bits */
    AB_CHECK(r32.n_curve == ramp.n_curve && r32.n_curve > 5, "same number of loss points");
    int differs = 0;
    for (size_t i = 0; i < r32.n_curve && i < ramp.n_curve; i++) differs |= r32.curve[i].loss != ramp.curve[i].loss;
    AB_CHECK(differs, "amp losses differ from fp32 (fp16 rounding is applied)");
    ab_run_record_free(&r32);
    ab_run_record_free(&ramp);

    /* determinism: same seed, identical losses at every step, in both precisions */
    for (int k = 0; k < 2; k++) {
        ab_train_config c;
        ab_train_config_defaults(&c);
        c.workload = &ab_workloads;
        c.platform = &ab_platform;
        c.precision = k ? AB_PREC_AMP : AB_PREC_FP32;
        c.quiet = 1;
        c.max_steps = 150;
        c.log_interval = 1;
        ab_run_record a, b;
        const int ra = ab_train_run(&c, &a), rb = ab_train_run(&c, &b);
        AB_CHECK(ra == 0 && rb == 0, "runs: %s", ab_error());
        AB_CHECK(a.n_curve == 150 && b.n_curve == 150, "150 loss points: %zu", a.n_curve);
        for (size_t i = 0; i < a.n_curve && i < b.n_curve; i++)
            if (memcmp(&a.curve[i].loss, &b.curve[i].loss, sizeof(double)) != 0) {
                AB_CHECK(0, "%s step %zu: loss %.17g vs %.17g", ab_precision_name(c.precision), i, a.curve[i].loss,
                         b.curve[i].loss);
                break;
            }
        c.seed = 2;
        ab_run_record d;
        AB_CHECK(ab_train_run(&c, &d) == 0, "seed 2 run");
        AB_CHECK(d.n_curve > 0 && a.n_curve > 0 && d.curve[0].loss != a.curve[0].loss, "another seed, other losses");
        ab_run_record_free(&a);
        ab_run_record_free(&b);
        ab_run_record_free(&d);
    }
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd) != 0) fprintf(stderr, "warning: could not remove %s\n", dir);
    printf("end to end: %d failures\n", failures);
    return failures ? 1 : 0;
}
