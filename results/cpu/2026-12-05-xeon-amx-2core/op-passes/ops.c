/* The non-product ops this round of CPU work changed, alone on 2 threads, each the median of 21
 * calls (AdamW and the norm: of 7, at BERT-base's 109,482,240 parameters):
 *   sum_squares, adamw_step     BERT-base's gradient (the norm for clipping; the update)
 *   gelu forward / backward     MiniLM's 2048 x 1536 activations, backward in place over dy
 *   softmax forward / backward  MiniLM's 32 sequences x 12 heads x 64 x 64 scores, in place
 *   layernorm forward / backward 2048 x 384, backward in place
 * Built in a checkout against its own headers and its build folder's libabcpu.a and libabcore.a
 * (ops.txt beside this file: the output against the commit before the changes and after them):
 *   gcc -O2 -Icore -Ikernels/cpu [-DAB_OPS_GRAD_SCALE=0] ops.c -o ops -Wl,--start-group \
 *       BUILD/libabcpu.a BUILD/libabcore.a -Wl,--end-group -ldnnl -lgomp -lopenblas -lpthread -lm
 * AB_OPS_GRAD_SCALE=0 for a checkout from before adamw_step took its grad_scale argument. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend.h"
#include "backend_cpu.h"
#include "timer.h"

#ifndef AB_OPS_GRAD_SCALE
#define AB_OPS_GRAD_SCALE 1
#endif

static int cmp(const void *a, const void *b) {
    const double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}
static double med(double *t, int n) {
    qsort(t, (size_t)n, sizeof *t, cmp);
    return t[n / 2];
}

int main(void) {
    ab_backend *be = ab_backend_cpu_create(2);
    if (!be) return 1;
    { /* the optimizer's passes */
        enum { R = 7 };
        const size_t n = 109482240;
        float *w = malloc(n * 4), *g = malloc(n * 4), *m = malloc(n * 4), *v = malloc(n * 4);
        if (!w || !g || !m || !v) return 1;
        for (size_t i = 0; i < n; i++) w[i] = 0.01f * (float)(i % 97), g[i] = 1e-4f * (float)(i % 89), m[i] = v[i] = 0;
        double ts[2][R];
        float sq = 0.0f;
        for (int r = 0; r < R; r++) {
            double t0 = ab_now();
            be->ops->sum_squares(be, n, g, &sq);
            ts[0][r] = ab_now() - t0, t0 = ab_now();
#if AB_OPS_GRAD_SCALE
            be->ops->adamw_step(be, n, w, g, m, v, 1e-5f, 0.9f, 0.999f, 1e-8f, 0.01f, r + 1, 1.0f);
#else
            be->ops->adamw_step(be, n, w, g, m, v, 1e-5f, 0.9f, 0.999f, 1e-8f, 0.01f, r + 1);
#endif
            ts[1][r] = ab_now() - t0;
        }
        printf("sum_squares  %9zu floats        %8.2f ms\n", n, med(ts[0], R) * 1e3);
        printf("adamw_step   %9zu floats        %8.2f ms\n", n, med(ts[1], R) * 1e3);
        free(w), free(g), free(m), free(v);
    }
    enum { R = 21 };
    double f[R], b[R];
    { /* GELU */
        const size_t n = 2048 * 1536;
        float *x = malloc(n * 4), *y = malloc(n * 4), *dy = malloc(n * 4);
        for (size_t i = 0; i < n; i++) x[i] = (float)((int)(i % 2001) - 1000) * 0.004f;
        for (int r = 0; r < R; r++) {
            for (size_t i = 0; i < n; i++) dy[i] = 1.0f;
            double t0 = ab_now();
            be->ops->gelu_forward(be, n, AB_F32, x, y);
            const double t1 = ab_now();
            be->ops->gelu_backward(be, n, AB_F32, x, dy, dy);
            f[r] = t1 - t0, b[r] = ab_now() - t1;
        }
        printf("gelu         2048 x 1536         forward %6.3f ms, backward in place %6.3f ms\n", med(f, R) * 1e3,
               med(b, R) * 1e3);
        free(x), free(y), free(dy);
    }
    { /* attention softmax */
        const int B = 32, A = 12, L = 64;
        const size_t n = (size_t)B * A * L * L;
        float *p = malloc(n * 4), *dp = malloc(n * 4);
        int32_t *mask = malloc((size_t)B * L * 4);
        for (int i = 0; i < B * L; i++) mask[i] = (i % L) < 40 + (i / L) % 24;
        for (int r = 0; r < R; r++) {
            for (size_t i = 0; i < n; i++) p[i] = (float)((int)(i % 101) - 50) * 0.05f, dp[i] = (float)(i % 7) * 0.1f;
            double t0 = ab_now();
            be->ops->softmax_forward(be, B, A, L, AB_F32, 0.17f, p, mask, p);
            const double t1 = ab_now();
            be->ops->softmax_backward(be, B * A * L, L, AB_F32, 0.17f, p, dp, dp);
            f[r] = t1 - t0, b[r] = ab_now() - t1;
        }
        printf("softmax      32 x 12 x 64 x 64   forward %6.3f ms, backward in place %6.3f ms\n", med(f, R) * 1e3,
               med(b, R) * 1e3);
        free(p), free(dp), free(mask);
    }
    { /* layer norm */
        const int Rw = 2048, C = 384;
        const size_t n = (size_t)Rw * C;
        float *x = malloc(n * 4), *y = malloc(n * 4), *dy = malloc(n * 4), *gm = malloc(C * 4), *bt = malloc(C * 4),
              *mean = malloc(Rw * 4), *rstd = malloc(Rw * 4), *dg = calloc(C, 4), *db = calloc(C, 4);
        for (size_t i = 0; i < n; i++) x[i] = (float)((int)(i % 101) - 50) * 0.05f;
        for (int c = 0; c < C; c++) gm[c] = 1.0f + c * 0.001f, bt[c] = 0.01f * c;
        for (int r = 0; r < R; r++) {
            for (size_t i = 0; i < n; i++) dy[i] = (float)(i % 7) * 0.1f;
            double t0 = ab_now();
            be->ops->layernorm_forward(be, Rw, C, AB_F32, x, gm, bt, 1e-12f, mean, rstd, AB_F32, y);
            const double t1 = ab_now();
            be->ops->layernorm_backward(be, Rw, C, AB_F32, x, AB_F32, dy, gm, mean, rstd, 0.0f, dg, db, dy);
            f[r] = t1 - t0, b[r] = ab_now() - t1;
        }
        printf("layernorm    2048 x 384          forward %6.3f ms, backward in place %6.3f ms\n", med(f, R) * 1e3,
               med(b, R) * 1e3);
        free(x), free(y), free(dy), free(gm), free(bt), free(mean), free(rstd), free(dg), free(db);
    }
    be->ops->destroy(be);
    return 0;
}
