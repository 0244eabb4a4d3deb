/* GELU and the attention softmax alone on 2 threads, each the median of 9 timings of a run of
 * calls, at MiniLM's shapes (2048 x 1536 activations; 32 sequences x 12 heads x 64 x 64 scores,
 * the last 14 keys of each sequence padded) and at a size that stays in the L2 cache (64 x 1536;
 * one sequence's 12 x 64 x 64), with a checksum of the outputs (the same bits before and after).
 * Built in a checkout against its own headers and its build folder's libabcpu.a and libabcore.a
 * (ops.txt beside this file: 8cf8870 and ef82370 alternating):
 *   gcc -O2 -Icore -Ikernels/cpu ops.c -o ops -Wl,--start-group BUILD/libabcpu.a BUILD/libabcore.a \
 *       -Wl,--end-group -ldnnl -lgomp -lopenblas -lpthread -lm */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend.h"
#include "backend_cpu.h"
#include "timer.h"

static int cmp(const void *a, const void *b) {
    const double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

enum { R = 9 };

static double sum_bits(const float *p, size_t n) {
    double s = 0;
    for (size_t i = 0; i < n; i++) s += (double)p[i] * (double)((i % 7) + 1);
    return s;
}

int main(void) {
    ab_backend *be = ab_backend_cpu_create(2);
    if (!be) return 1;
    const size_t gsz[2] = {(size_t)2048 * 1536, (size_t)64 * 1536};
    for (int s = 0; s < 2; s++) {
        const size_t n = gsz[s];
        const int reps = (int)(((size_t)2048 * 1536 * 4) / n);
        float *x = malloc(n * 4), *y = malloc(n * 4), *dy = malloc(n * 4), *dx = malloc(n * 4);
        for (size_t i = 0; i < n; i++) x[i] = (float)((i * 7919) % 4000) / 400.0f - 5.0f, dy[i] = 1.0f;
        double tf[R], tb[R];
        for (int r = 0; r < R; r++) {
            double t0 = ab_now();
            for (int k = 0; k < reps; k++) be->ops->gelu_forward(be, n, AB_F32, x, y);
            tf[r] = (ab_now() - t0) / reps;
            t0 = ab_now();
            for (int k = 0; k < reps; k++) be->ops->gelu_backward(be, n, AB_F32, x, dy, dx);
            tb[r] = (ab_now() - t0) / reps;
        }
        qsort(tf, R, sizeof *tf, cmp);
        qsort(tb, R, sizeof *tb, cmp);
        printf("gelu     %4zu x 1536          forward %6.3f ms (%.3f ns an element), backward %6.3f ms (%.3f); "
               "checksum %.9g %.9g\n",
               n / 1536, tf[R / 2] * 1e3, tf[R / 2] * 1e9 / n, tb[R / 2] * 1e3, tb[R / 2] * 1e9 / n, sum_bits(y, n),
               sum_bits(dx, n));
        free(x), free(y), free(dy), free(dx);
    }
    const int sb[2] = {32, 1};
    for (int s = 0; s < 2; s++) {
        const int B = sb[s], A = 12, L = 64;
        const size_t n = (size_t)B * A * L * L;
        const int reps = 32 / B;
        float *x = malloc(n * 4), *p = malloc(n * 4), *dp = malloc(n * 4), *dx = malloc(n * 4);
        int32_t *mask = malloc((size_t)B * L * 4);
        for (int i = 0; i < B * L; i++) mask[i] = (i % L) < L - 14;
        for (size_t i = 0; i < n; i++) x[i] = (float)((i * 131) % 1000) / 100.0f - 5.0f, dp[i] = (float)(i % 17) * 0.1f;
        double tf[R], tb[R];
        for (int r = 0; r < R; r++) {
            double t0 = ab_now();
            for (int k = 0; k < reps; k++) be->ops->softmax_forward(be, B, A, L, AB_F32, 0.17677669f, x, mask, p);
            tf[r] = (ab_now() - t0) / reps;
            t0 = ab_now();
            for (int k = 0; k < reps; k++) be->ops->softmax_backward(be, B * A * L, L, AB_F32, 0.17677669f, p, dp, dx);
            tb[r] = (ab_now() - t0) / reps;
        }
        qsort(tf, R, sizeof *tf, cmp);
        qsort(tb, R, sizeof *tb, cmp);
        printf("softmax  %2d x 12 x 64 x 64    forward %6.3f ms (%.3f ns an element), backward %6.3f ms (%.3f); "
               "checksum %.9g %.9g\n",
               B, tf[R / 2] * 1e3, tf[R / 2] * 1e9 / n, tb[R / 2] * 1e3, tb[R / 2] * 1e9 / n, sum_bits(p, n),
               sum_bits(dx, n));
        free(x), free(p), free(dp), free(dx), free(mask);
    }
    be->ops->destroy(be);
    return 0;
}
