/* MiniLM's six attention products over a batch (32 sequences of 64 tokens, 12 heads of 32: q k^T,
 * P v, P^T dctx, dctx v^T, dS k, dS^T q, each a gemm_batched call of 12 heads a sequence, as
 * core/layers.c calls them), on the CPU backend with 2 threads, every operand out of the caches
 * first (a 64 MB memset). Prints the median of 41 passes and its GFLOP/s.
 * usage: attn_pass 0 (fp16) | 1 (fp32)
 * build (from the repository root, after cmake --build build):
 *   gcc -O2 -march=native -Icore -Ikernels/cpu -Iplatform attn_pass.c build/libabcpu.a build/libabcore.a
 *       build/libabplatform.a -ldnnl -lopenblas -lgomp -lm -lpthread -o attn_pass */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "backend.h"
#include "backend_cpu.h"
#include "half.h"

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + 1e-9 * t.tv_nsec;
}
static int cmp(const void *a, const void *b) {
    const double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}
enum { B = 32, L = 64, H = 384, A = 12, D = 32, PASSES = 41 };
int main(int argc, char **argv) {
    ab_backend *be = ab_backend_cpu_create(2);
    const ab_backend_ops *o = be->ops;
    const ab_dtype t = argc > 1 && atoi(argv[1]) ? AB_F32 : AB_F16;
    const size_t es = ab_dtype_size(t), LH = (size_t)L * H, LL = (size_t)L * L;
    char *q = malloc(B * LH * es), *k = malloc(B * LH * es), *v = malloc(B * LH * es), *ctx = malloc(B * LH * es),
         *pr = malloc(B * A * LL * es), *sc = malloc(B * A * LL * es), *dq = malloc(B * LH * es),
         *dk = malloc(B * LH * es), *dv = malloc(B * LH * es);
    for (size_t i = 0; i < B * LH; i++) {
        ab_store(q, i, t, (rand() % 200 - 100) / 100.f);
        ab_store(k, i, t, (rand() % 200 - 100) / 100.f);
        ab_store(v, i, t, (rand() % 200 - 100) / 100.f);
        ab_store(ctx, i, t, (rand() % 200 - 100) / 100.f);
    }
    for (size_t i = 0; i < B * A * LL; i++) {
        ab_store(pr, i, t, (rand() % 100) / 6400.f);
        ab_store(sc, i, t, (rand() % 100) / 6400.f);
    }
    const size_t FL = 64 << 20;
    char *flush = malloc(FL);
    double tt[PASSES];
    for (int it = 0; it < PASSES; it++) {
        memset(flush, it, FL);
        const double t0 = now();
        for (int b = 0; b < B; b++) {
            o->gemm_batched(be, 0, 1, L, L, D, 1, t, q + b * LH * es, H, D, t, k + b * LH * es, H, D, 0, t,
                            pr + b * A * LL * es, L, LL, A);
            o->gemm_batched(be, 0, 0, L, D, L, 1, t, pr + b * A * LL * es, L, LL, t, v + b * LH * es, H, D, 0, t,
                            ctx + b * LH * es, H, D, A);
            o->gemm_batched(be, 1, 0, L, D, L, 1, t, pr + b * A * LL * es, L, LL, t, ctx + b * LH * es, H, D, 0, t,
                            dv + b * LH * es, H, D, A);
            o->gemm_batched(be, 0, 1, L, L, D, 1, t, ctx + b * LH * es, H, D, t, v + b * LH * es, H, D, 0, t,
                            sc + b * A * LL * es, L, LL, A);
            o->gemm_batched(be, 0, 0, L, D, L, 1, t, sc + b * A * LL * es, L, LL, t, k + b * LH * es, H, D, 0, t,
                            dq + b * LH * es, H, D, A);
            o->gemm_batched(be, 1, 0, L, D, L, 1, t, sc + b * A * LL * es, L, LL, t, q + b * LH * es, H, D, 0, t,
                            dk + b * LH * es, H, D, A);
        }
        tt[it] = now() - t0;
    }
    qsort(tt, PASSES, sizeof tt[0], cmp);
    const double med = tt[PASSES / 2];
    printf("%s: median %.3f ms (%.1f GFLOP/s)\n", t == AB_F32 ? "fp32" : "fp16", med * 1e3,
           6.0 * B * A * 2.0 * L * L * D / med / 1e9);
    return 0;
}
