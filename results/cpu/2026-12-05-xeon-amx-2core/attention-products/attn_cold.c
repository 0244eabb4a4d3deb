/* The attention products of attn.c (fp32 only), each pass over the batch's sequences timed in one
 * of three states, to tell what slows them inside a training run (the profile's in-run rates,
 * 95-102 GFLOP/s at MiniLM's shape at 8046717, against 165-207 for the same shapes alone):
 *   warm           passes back to back, as attn.c and the profile's "alone" rates time them
 *   COLD=2         5 ms of the calling thread spinning on the clock before each pass: the pool's
 *                  worker goes to sleep (after its 200 us spin), nothing leaves the caches
 *   COLD=3         a 64 MB dropout over the pool before each pass: the caches hold that instead of
 *                  the operands, the worker stays awake
 * the median of 15 timed passes after 0.3 s of warm-up, 2 threads.
 * Built in a checkout against its own headers and its build folder's libraries (attn_cold.txt
 * beside this file: 3 rounds of the three states at 8046717):
 *   gcc -O2 -Icore -Ikernels/cpu attn_cold.c -o attn_cold -Wl,--start-group BUILD/libabcpu.a \
 *       BUILD/libabcore.a -Wl,--end-group -ldnnl -lgomp -lopenblas -lpthread -lm */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend.h"
#include "backend_cpu.h"
#include "half.h"
#include "timer.h"

static int cmp(const void *a, const void *b) {
    const double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static void fill(ab_dtype t, void *p, size_t n, unsigned mul) {
    for (size_t i = 0; i < n; i++) {
        const float v = (float)((int)((i * mul) % 2001u) - 1000) * 0.001f;
        if (t == AB_F32)
            ((float *)p)[i] = v;
        else
            ((uint16_t *)p)[i] = t == AB_F16 ? ab_f32_to_f16(v) : ab_f32_to_bf16(v);
    }
}

/* one pass of product k over the batch's sequences */
static int pass(ab_backend *be, int k, ab_dtype t, int B, int L, int H, char *q, char *kk, char *p, char *o) {
    const int A = 12, D = H / A;
    const size_t es = ab_dtype_size(t), LH = (size_t)L * H, LL = (size_t)L * L;
    for (int b = 0; b < B; b++) {
        char *qb = q + b * LH * es, *kb = kk + b * LH * es, *pb = p + (size_t)b * A * LL * es, *ob = o + b * LH * es;
        const int rc = k == 0 ? be->ops->gemm_batched(be, 0, 1, L, L, D, 1.0f, t, qb, H, D, t, kb, H, D, 0.0f, t, pb, L,
                                                      (long long)LL, A)
                       : k == 1 ? be->ops->gemm_batched(be, 0, 0, L, D, L, 1.0f, t, pb, L, (long long)LL, t, kb, H, D,
                                                        0.0f, t, ob, H, D, A)
                                : be->ops->gemm_batched(be, 1, 0, L, D, L, 1.0f, t, pb, L, (long long)LL, t, qb, H, D,
                                                        0.0f, t, ob, H, D, A);
        if (rc) return rc;
    }
    return 0;
}

enum { JUNK = 16 << 20 }; /* floats: 64 MB */

/* what comes before a timed pass: nothing, a spin on the clock, or a pass over 64 MB on the pool */
static void before(ab_backend *be, int state, float *junk) {
    if (state == 2) {
        const double w = ab_now();
        while (ab_now() - w < 0.005) {
        }
    } else if (state == 3) {
        be->ops->dropout_forward(be, JUNK, AB_F32, 0.1f, 7, junk, junk);
    }
}

int main(void) {
    ab_backend *be = ab_backend_cpu_create(2);
    float *junk = calloc(JUNK, sizeof *junk);
    if (!be || !junk) return 1;
    const int state = getenv("COLD") ? atoi(getenv("COLD")) : 0;
    static const struct {
        const char *name;
        int B, L, H;
    } shapes[] = {{"MiniLM    32 x (64, 384)", 32, 64, 384}, {"BERT-base  8 x (128, 768)", 8, 128, 768}};
    static const char *prod[] = {"scores q k^T   (NT)", "context p v    (NN)", "p^T dctx       (TN)"};
    for (int s = 0; s < 2; s++) {
        const int B = shapes[s].B, L = shapes[s].L, H = shapes[s].H;
        const size_t nq = (size_t)B * L * H, np = (size_t)B * 12 * L * L;
        {
            const ab_dtype t = AB_F32;
            const size_t es = ab_dtype_size(t);
            char *q = malloc(nq * es), *k = malloc(nq * es), *p = malloc(np * es), *o = malloc(nq * es);
            if (!q || !k || !p || !o) return 1;
            fill(t, q, nq, 2654435761u), fill(t, k, nq, 40503u), fill(t, p, np, 7919u);
            const double t0 = ab_now();
            while (ab_now() - t0 < 0.3)
                if (pass(be, 0, t, B, L, H, q, k, p, o)) return 1;
            for (int kk = 0; kk < 3; kk++) {
                enum { R = 15 };
                double ts[R];
                for (int r = 0; r < R; r++) {
                    before(be, state, junk);
                    const double a = ab_now();
                    if (pass(be, kk, t, B, L, H, q, k, p, o)) return 1;
                    ts[r] = ab_now() - a;
                }
                qsort(ts, R, sizeof *ts, cmp);
                const double flops = 2.0 * B * 12 * (double)L * L * (H / 12);
                printf("%s %-5s %s %8.3f ms %7.1f GFLOP/s\n", shapes[s].name, ab_dtype_name(t), prod[kk],
                       ts[R / 2] * 1e3, flops / ts[R / 2] / 1e9);
            }
            free(q), free(k), free(p), free(o);
        }
    }
    return 0;
}
