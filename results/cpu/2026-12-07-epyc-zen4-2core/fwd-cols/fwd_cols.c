/* The MLP's first layer at batch 64 on the backend's pool of 2 threads, cut by rows (as at 2d4f62c)
 * and by columns, in a throwaway build of 2d4f62c with the toggles of exp.patch (cpu_exp_tile: a
 * column cut of that tile forced on the product of cpu_exp_M x cpu_exp_N; cpu_exp_owna: a 16-bit A
 * widened whole by each part into its own copy instead of once over the pool). Ways, in blocks of
 * 50 calls taking turns in one process (a block's first 5 calls and the first 400 calls left out):
 *   fwd1: Y (64 x 256) = X (64 x 784) W1^T + b, ReLU; fp32, or fp16 operands and Y (AMP)
 *   dW1:  G (256 x 784) = dH^T X; fp32 sgemm, or the AMP fold (fp16 operands, rounded through fp16)
 * It first checks each column way against its row way, bit for bit, and prints the medians and
 * quartiles of each way.
 * usage: fwd_cols [CALLS]
 * build: gcc -O2 -Icore -Ikernels/cpu -Iplatform fwd_cols.c build/libabcpu.a build/libabcore.a
 *        build/libabplatform.a -ldnnl -lopenblas -lgomp -lm -lpthread */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "backend.h"
#include "backend_cpu.h"
extern int cpu_exp_tile, cpu_exp_M, cpu_exp_N, cpu_exp_owna;
static double now(void) { struct timespec t; clock_gettime(CLOCK_MONOTONIC, &t); return t.tv_sec + 1e-9 * t.tv_nsec; }
static int cmp(const void *a, const void *b) { double x = *(const double *)a, y = *(const double *)b; return x < y ? -1 : x > y; }
enum { B_ = 64, I = 784, H = 256 };
typedef struct { const char *name; int dw, half, tile, owna; } way;
static const way ways[] = {
    {"fwd1 fp32 rows", 0, 0, 0, 0},          {"fwd1 fp32 cols 32", 0, 0, 32, 0},
    {"fwd1 fp32 cols 128", 0, 0, 128, 0},    {"fwd1 fp16 rows", 0, 1, 0, 0},
    {"fwd1 fp16 cols 32, pool A", 0, 1, 32, 0}, {"fwd1 fp16 cols 32, own A", 0, 1, 32, 1},
    {"dW1 fp32 rows", 1, 0, 0, 0},           {"dW1 fp32 cols 32", 1, 0, 32, 0},
    {"dW1 fold rows", 1, 1, 0, 0},           {"dW1 fold cols 32, own A", 1, 1, 32, 1},
    {"dW1 fold cols 128, own A", 1, 1, 128, 1},
};
enum { NV = sizeof ways / sizeof ways[0] };
static ab_backend *be; static const ab_backend_ops *o;
static float *X, *W, *b, *Y, *dH, *G; static uint16_t *Xh, *Wh, *bh, *Yh, *dHh; static int32_t finf;
static void run(const way *w) {
    cpu_exp_M = w->dw ? H : B_, cpu_exp_N = w->dw ? I : H, cpu_exp_tile = w->tile, cpu_exp_owna = w->owna;
    if (!w->dw && !w->half) o->gemm(be, 0, 1, B_, H, I, 1, AB_F32, X, I, AB_F32, W, I, b, AB_EPI_RELU, 0, AB_F32, Y, H);
    if (!w->dw && w->half) o->gemm(be, 0, 1, B_, H, I, 1, AB_F16, Xh, I, AB_F16, Wh, I, bh, AB_EPI_RELU, 0, AB_F16, Yh, H);
    if (w->dw && !w->half) o->gemm(be, 1, 0, H, I, B_, 1, AB_F32, dH, H, AB_F32, X, I, NULL, AB_EPI_NONE, 0, AB_F32, G, I);
    if (w->dw && w->half) o->gemm_fold(be, 1, 0, H, I, B_, AB_F16, dHh, H, AB_F16, Xh, I, AB_F16, NULL, G, 0, &finf);
}
/* the way's output, copied */
static void *out(const way *w, size_t *n) {
    *n = w->dw ? 4 * H * I : w->half ? 2 * B_ * H : 4 * B_ * H;
    void *c = malloc(*n);
    memcpy(c, w->dw ? (void *)G : w->half ? (void *)Yh : (void *)Y, *n);
    return c;
}
int main(int argc, char **argv) {
    be = ab_backend_cpu_create(2), o = be->ops;
    const int n = argc > 1 ? atoi(argv[1]) : 11000;
    X = malloc(4 * B_ * I), W = malloc(4 * H * I), b = malloc(4 * H), Y = malloc(4 * B_ * H), dH = malloc(4 * B_ * H);
    G = malloc(4 * H * I), Xh = malloc(2 * B_ * I), Wh = malloc(2 * H * I), bh = malloc(2 * H), Yh = malloc(2 * B_ * H);
    dHh = malloc(2 * B_ * H);
    for (int i = 0; i < B_ * I; i++) X[i] = (rand() % 2000 - 1000) / 1e3f;
    for (int i = 0; i < H * I; i++) W[i] = (rand() % 2000 - 1000) / 3e4f;
    for (int i = 0; i < H; i++) b[i] = (rand() % 2000 - 1000) / 3e4f;
    for (int i = 0; i < B_ * H; i++) dH[i] = (rand() % 2000 - 1000) / 1e4f;
    o->cast(be, B_ * I, AB_F32, X, AB_F16, Xh), o->cast(be, H * I, AB_F32, W, AB_F16, Wh);
    o->cast(be, H, AB_F32, b, AB_F16, bh), o->cast(be, B_ * H, AB_F32, dH, AB_F16, dHh);
    o->cast(be, B_ * I, AB_F16, Xh, AB_F32, X), o->cast(be, B_ * H, AB_F16, dHh, AB_F32, dH);
    for (int k = 0; k < NV; k++) { /* each way against the row way of its product and precision */
        int r = k;
        while (ways[r].tile) r--;
        if (r == k) continue;
        size_t nb;
        run(&ways[r]);
        void *ref = out(&ways[r], &nb);
        run(&ways[k]);
        void *got = out(&ways[k], &nb);
        printf("%-28s %s %s\n", ways[k].name, memcmp(ref, got, nb) ? "DIFFERS from" : "the same bits as", ways[r].name);
        free(ref), free(got);
    }
    double *t = malloc(sizeof(double) * n), *v = malloc(sizeof(double) * n);
    for (int it = 0; it < n; it++) {
        const double t0 = now();
        run(&ways[(it / 50) % NV]);
        t[it] = now() - t0;
    }
    for (int k = 0; k < NV; k++) {
        int m = 0;
        for (int it = 400; it < n; it++)
            if ((it / 50) % NV == k && it % 50 >= 5) v[m++] = t[it];
        qsort(v, m, sizeof *v, cmp);
        printf("%-28s %8.2f us (q1 %.2f q3 %.2f)\n", ways[k].name, v[m / 2] * 1e6, v[m / 4] * 1e6, v[3 * m / 4] * 1e6);
    }
    return 0;
}
