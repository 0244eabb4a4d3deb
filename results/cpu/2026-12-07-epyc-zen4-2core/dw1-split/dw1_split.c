/* The MLP's first-layer weight gradient (dW1 = dH^T X: 256 x 784 x 64, dH^T transposed) five ways,
 * on the backend's pool of 2 threads, each way in blocks of 50 calls taking turns in one process
 * (a block's first 5 calls and the first 200 calls left out), medians and quartiles per way:
 *   fp32 gemm                     the FP32 step's product (fp32 operands, fp32 gradient)
 *   f16 in, f32 out (widen only)  fp16 operands widened inside the product, fp32 sums stored
 *   f32 in, fold f16 (round only) fp32 operands, the sums rounded through fp16 (gemm_fold)
 *   f16 fold (AMP)                the AMP step's product: both
 *   widen X+dH over pool          the two casts alone
 *   cast X,dH then fp32 gemm      the two casts, then the fp32 product on what they wrote
 * The operands hold fp16 values in every way (the fp32 ones widened from them).
 * usage: dw1_split [CALLS] [G_OFFSET_FLOATS]
 * build: gcc -O2 -Icore -Ikernels/cpu -Iplatform dw1_split.c build-dev/libabcpu.a build-dev/libabcore.a
 *        build-dev/libabplatform.a -ldnnl -lopenblas -lgomp -lm -lpthread */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include "backend.h"
#include "backend_cpu.h"
static double now(void) { struct timespec t; clock_gettime(CLOCK_MONOTONIC, &t); return t.tv_sec + 1e-9 * t.tv_nsec; }
static int cmp(const void *a, const void *b) { double x = *(const double *)a, y = *(const double *)b; return x < y ? -1 : x > y; }
enum { B_ = 64, I = 784, H = 256, NV = 6 };
int main(int argc, char **argv) {
    ab_backend *be = ab_backend_cpu_create(2);
    const ab_backend_ops *o = be->ops;
    const int n = argc > 1 ? atoi(argv[1]) : 6000, off = argc > 2 ? atoi(argv[2]) : 0;
    float *dH = malloc(4 * B_ * H), *X = malloc(4 * B_ * I), *G = (float *)aligned_alloc(4096, 4 * H * I + 65536) + off;
    float *ws = malloc(4 * (B_ * I + B_ * H));
    uint16_t *dHh = malloc(2 * B_ * H), *Xh = malloc(2 * B_ * I);
    for (int i = 0; i < B_ * H; i++) dH[i] = (rand() % 2000 - 1000) / 1e4f;
    for (int i = 0; i < B_ * I; i++) X[i] = (rand() % 2000 - 1000) / 1e3f;
    o->cast(be, B_ * H, AB_F32, dH, AB_F16, dHh); o->cast(be, B_ * I, AB_F32, X, AB_F16, Xh);
    o->cast(be, B_ * H, AB_F16, dHh, AB_F32, dH); o->cast(be, B_ * I, AB_F16, Xh, AB_F32, X);
    const char *nm[NV] = {"fp32 gemm", "f16 in, f32 out (widen only)", "f32 in, fold f16 (round only)",
                          "f16 fold (AMP)", "widen X+dH over pool", "cast X,dH then fp32 gemm"};
    double *t = malloc(sizeof(double) * n), *v = malloc(sizeof(double) * n);
    int32_t finf = 0;
    for (int it = 0; it < n; it++) {
        const int w = (it / 50) % NV;
        const double t0 = now();
        switch (w) {
        case 0: o->gemm(be, 1, 0, H, I, B_, 1, AB_F32, dH, H, AB_F32, X, I, NULL, AB_EPI_NONE, 0, AB_F32, G, I); break;
        case 1: o->gemm(be, 1, 0, H, I, B_, 1, AB_F16, dHh, H, AB_F16, Xh, I, NULL, AB_EPI_NONE, 0, AB_F32, G, I); break;
        case 2: o->gemm_fold(be, 1, 0, H, I, B_, AB_F32, dH, H, AB_F32, X, I, AB_F16, NULL, G, 0, &finf); break;
        case 3: o->gemm_fold(be, 1, 0, H, I, B_, AB_F16, dHh, H, AB_F16, Xh, I, AB_F16, NULL, G, 0, &finf); break;
        case 4: o->cast(be, B_ * I, AB_F16, Xh, AB_F32, ws); o->cast(be, B_ * H, AB_F16, dHh, AB_F32, ws + B_ * I); break;
        case 5:
            o->cast(be, B_ * I, AB_F16, Xh, AB_F32, ws); o->cast(be, B_ * H, AB_F16, dHh, AB_F32, ws + B_ * I);
            o->gemm(be, 1, 0, H, I, B_, 1, AB_F32, ws + B_ * I, H, AB_F32, ws, I, NULL, AB_EPI_NONE, 0, AB_F32, G, I);
            break;
        }
        t[it] = now() - t0;
    }
    for (int k = 0; k < NV; k++) {
        int m = 0;
        for (int it = 200; it < n; it++)
            if ((it / 50) % NV == k && it % 50 >= 5) v[m++] = t[it];
        qsort(v, m, sizeof *v, cmp);
        printf("%-32s %8.2f us (q1 %.2f q3 %.2f)\n", nm[k], v[m / 2] * 1e6, v[m / 4] * 1e6, v[3 * m / 4] * 1e6);
    }
    return 0;
}
