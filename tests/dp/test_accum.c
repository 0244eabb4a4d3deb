/* Gradient accumulation: K micro-batches of B per optimizer step reach the same weights as one
 * batch of K*B, over several steps, in fp32 (to fp32 round-off) and amp (to fp16 round-off: each
 * micro-batch's fp16 gradient is rounded apart); the JSON of such a run carries accum_steps.
 * Seeded random data; compared on the update w - w0. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "dp_util.h"
#include "tolerances.h"

static int failures = 0;
static char data_dir[256];

static ab_train_config base(ab_precision prec, int batch, int accum) {
    ab_train_config c = dp_config(data_dir, prec, batch, 40, "self");
    c.accum_steps = accum;
    return c;
}

static void compare(const char *what, ab_precision prec, int B, int K, int steps, double tol) {
    ab_train_config a = base(prec, B, K), b = base(prec, B * K, 1);
    ab_run_record ra, rb;
    float *a0 = NULL, *a1 = NULL, *b0 = NULL, *b1 = NULL;
    long sa, sb;
    if (dp_train(&a, B * K, steps, &a0, &a1, &sa, &ra, NULL) != 0 || dp_train(&b, B * K, steps, &b0, &b1, &sb, &rb, NULL) != 0) {
        fprintf(stderr, "FAIL %s: %s\n", what, ab_error());
        failures++;
        return;
    }
    const size_t n = (size_t)ra.parameters;
    double *ref = malloc(n * sizeof *ref), norm = 0.0;
    float *upd = malloc(n * sizeof *upd);
    for (size_t i = 0; i < n; i++) {
        ref[i] = (double)b1[i] - b0[i];
        upd[i] = (float)((double)a1[i] - a0[i]);
        norm += ref[i] * ref[i];
    }
    AB_CHECK(norm > 0.0 && memcmp(a0, b0, n * sizeof *a0) == 0, "%s: same start, real update", what);
    AB_CHECK(sa == 0 && sb == 0, "%s: no skipped steps (%ld, %ld)", what, sa, sb);
    size_t w;
    printf("%s: update NMSE %.3g (tolerance %.3g)\n", what, ab_nmse(upd, ref, n, &w), tol);
    if (ab_check_nmse(what, upd, ref, n, tol)) failures++;
    free(ref);
    free(upd);
    free(a0), free(a1), free(b0), free(b1);
    ab_run_record_free(&ra);
    ab_run_record_free(&rb);
}

int main(void) {
    snprintf(data_dir, sizeof data_dir, "/tmp/ab_test_accum.%ld", (long)getpid());
    if (mkdir(data_dir, 0700) != 0 || dp_write_dataset(data_dir, 400, 32, 10, 10, 11) != 0) {
        fprintf(stderr, "FAIL cannot write the data set under %s\n", data_dir);
        return 1;
    }
    compare("fp32: 4 x 16 == 1 x 64", AB_PREC_FP32, 16, 4, 5, AB_TOL_DP_FP32_NMSE);
    compare("fp32: 3 x 20 == 1 x 60", AB_PREC_FP32, 20, 3, 5, AB_TOL_DP_FP32_NMSE);
    compare("amp: 4 x 16 == 1 x 64", AB_PREC_AMP, 16, 4, 5, AB_TOL_DP_FP16_NMSE);
    dp_remove_dataset(data_dir);
    if (failures) fprintf(stderr, "test_accum: %d failure(s)\n", failures);
    return failures ? 1 : 0;
}
