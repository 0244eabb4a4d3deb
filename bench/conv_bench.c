/* conv_bench: the CPU backend's convolutions (im2col over OpenBLAS) on every convolution shape of
 * ResNet-50, forward, backward-data and backward-filter, median of R timings each, and the
 * network's convolution time per training step (each shape weighted by how often it occurs).
 * peers/conv_bench.py times the same shapes through PyTorch's CPU convolution, which is
 * oneDNN (Debian's PyTorch 1.13 is built on oneDNN 2.6.3, the version of Debian's libdnnl-dev):
 * the measurement behind the choice of im2col in kernels/cpu/layers_cpu.c.
 * usage: conv_bench [--stem cifar|imagenet] [--batch B] [--size HW] [--threads T] [--repeats R]
 *                   [--precision fp32|fp16] */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend_cpu.h"
#include "rng.h"
#include "timer.h"

typedef struct {
    ab_conv_shape s;
    int count;
    char name[32];
} conv_case;

/* ResNet-50 v1.5's convolutions for input (size x size x 3): the same walk as models/resnet.c */
static int resnet50_convs(int stem_cifar, int B, int size, conv_case *out) {
    int n = 0, H = size, C = 3;
    const int blocks[4] = {3, 4, 6, 3};
    out[n++] = (conv_case){{.N = B, .H = H, .W = H, .C = 3, .K = 64, .R = stem_cifar ? 3 : 7, .S = stem_cifar ? 3 : 7,
                            .stride_h = stem_cifar ? 1 : 2, .stride_w = stem_cifar ? 1 : 2, .pad_h = stem_cifar ? 1 : 3,
                            .pad_w = stem_cifar ? 1 : 3},
                           1, "stem"};
    ab_conv_shape_init(&out[0].s);
    H = out[0].s.P;
    if (!stem_cifar) H = (H + 2 - 3) / 2 + 1; /* max pool 3x3/2 pad 1 */
    C = 64;
    for (int L = 0; L < 4; L++) {
        const int planes = 64 << L;
        for (int i = 0; i < blocks[L]; i++) {
            const int s2 = (L > 0 && i == 0) ? 2 : 1;
            const int Ho = (H - 1) / s2 + 1;
            const struct {
                int H, C, K, R, stride;
            } u[4] = {{H, C, planes, 1, 1}, {H, planes, planes, 3, s2}, {Ho, planes, planes * 4, 1, 1}, {H, C, planes * 4, 1, s2}};
            for (int j = 0; j < (i == 0 ? 4 : 3); j++) {
                ab_conv_shape s = {.N = B, .H = u[j].H, .W = u[j].H, .C = u[j].C, .K = u[j].K, .R = u[j].R, .S = u[j].R,
                                   .stride_h = u[j].stride, .stride_w = u[j].stride, .pad_h = u[j].R / 2,
                                   .pad_w = u[j].R / 2};
                ab_conv_shape_init(&s);
                int k = 0; /* the same shape again: count it */
                while (k < n && memcmp(&out[k].s, &s, sizeof s) != 0) k++;
                if (k < n) {
                    out[k].count++;
                } else {
                    out[n] = (conv_case){s, 1, ""};
                    snprintf(out[n].name, sizeof out[n].name, "layer%d %s%dx%d", L + 1, j == 3 ? "down " : "", u[j].R,
                             u[j].R);
                    n++;
                }
            }
            C = planes * 4;
            H = Ho;
        }
    }
    return n;
}

static int cmp(const void *a, const void *b) {
    const double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

int main(int argc, char **argv) {
    int stem_cifar = 1, B = 32, size = 32, threads = 0, repeats = 5;
    ab_dtype t = AB_F32;
    for (int i = 1; i < argc; i += 2) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!v) {
            fprintf(stderr, "conv_bench: %s needs a value\n", a);
            return 2;
        }
        if (!strcmp(a, "--stem")) stem_cifar = strcmp(v, "imagenet") != 0;
        else if (!strcmp(a, "--batch")) B = atoi(v);
        else if (!strcmp(a, "--size")) size = atoi(v);
        else if (!strcmp(a, "--threads")) threads = atoi(v);
        else if (!strcmp(a, "--repeats")) repeats = atoi(v);
        else if (!strcmp(a, "--precision")) t = strcmp(v, "fp16") ? AB_F32 : AB_F16;
        else {
            fprintf(stderr, "conv_bench: unknown option %s\n", a);
            return 2;
        }
    }
    if (B < 1 || size < 8 || repeats < 1) return 2;
    conv_case cs[64];
    const int n = resnet50_convs(stem_cifar, B, size, cs);
    ab_backend *be = ab_backend_cpu_create(threads);
    if (!be) {
        fprintf(stderr, "conv_bench: %s\n", ab_error());
        return 1;
    }
    size_t mx = 0, mw = 0, my = 0;
    for (int i = 0; i < n; i++) {
        const ab_conv_shape *s = &cs[i].s;
        const size_t x = (size_t)s->N * s->H * s->W * s->C, w = (size_t)s->K * s->R * s->S * s->C,
                     y = (size_t)s->N * s->P * s->Q * s->K;
        mx = x > mx ? x : mx, mw = w > mw ? w : mw, my = y > my ? y : my;
    }
    const size_t es = ab_dtype_size(t);
    float *hx = malloc(mx * sizeof(float)), *hw = malloc(mw * sizeof(float)), *hy = malloc(my * sizeof(float));
    void *x = malloc(mx * es), *w = malloc(mw * es), *y = malloc(my * es), *dx = malloc(mx * es), *dw = malloc(mw * es);
    ab_rng r;
    ab_rng_seed(&r, 1);
    for (size_t i = 0; i < mx; i++) hx[i] = (float)ab_rng_normal(&r);
    for (size_t i = 0; i < mw; i++) hw[i] = (float)(0.05 * ab_rng_normal(&r));
    for (size_t i = 0; i < my; i++) hy[i] = (float)ab_rng_normal(&r);
    be->ops->cast(be, mx, AB_F32, hx, t, x);
    be->ops->cast(be, mw, AB_F32, hw, t, w);
    be->ops->cast(be, my, AB_F32, hy, t, y);
    printf("conv_bench: ResNet-50 (%s stem) convolutions, batch %d, %dx%d input, %s, %s; median of %d (ms)\n",
           stem_cifar ? "CIFAR" : "torchvision", B, size, size, ab_dtype_name(t), ab_backend_cpu_blas_info(), repeats);
    printf("%-22s %5s %-26s %9s %9s %9s %9s\n", "shape", "count", "N,H,W,C -> K,RxS/stride", "forward", "bwd data",
           "bwd filter", "GFLOP/s");
    double total[3] = {0, 0, 0}, flops_all = 0;
    double *tm = malloc((size_t)repeats * sizeof *tm);
    for (int i = 0; i < n; i++) {
        const ab_conv_shape *s = &cs[i].s;
        double med[3];
        for (int d = 0; d < 3; d++) {
            for (int k = -1; k < repeats; k++) { /* k = -1: warm-up (scratch growth) */
                const double t0 = ab_now();
                int rc = d == 0 ? be->ops->conv2d_forward(be, s, t, x, w, y)
                         : d == 1 ? be->ops->conv2d_backward_data(be, s, t, y, w, dx)
                                  : be->ops->conv2d_backward_filter(be, s, t, x, y, 0.0f, dw);
                if (rc != 0) {
                    fprintf(stderr, "conv_bench: %s\n", ab_error());
                    return 1;
                }
                if (k >= 0) tm[k] = ab_now() - t0;
            }
            qsort(tm, (size_t)repeats, sizeof *tm, cmp);
            med[d] = tm[repeats / 2];
            total[d] += med[d] * cs[i].count;
        }
        const double flops = 2.0 * s->N * s->P * s->Q * (double)s->K * s->R * s->S * s->C;
        flops_all += 3 * flops * cs[i].count;
        char shape[64];
        snprintf(shape, sizeof shape, "%d,%d,%d,%d -> %d,%dx%d/%d", s->N, s->H, s->W, s->C, s->K, s->R, s->S, s->stride_h);
        printf("%-22s %5d %-26s %9.2f %9.2f %9.2f %9.1f\n", cs[i].name, cs[i].count, shape, 1e3 * med[0], 1e3 * med[1],
               1e3 * med[2], 3 * flops / (med[0] + med[1] + med[2]) / 1e9);
    }
    const double all = total[0] + total[1] + total[2];
    printf("network per step (ms): forward %.1f, backward data %.1f, backward filter %.1f, all %.1f; %.1f GFLOP/s; "
           "%.1f images/s of convolution\n",
           1e3 * total[0], 1e3 * total[1], 1e3 * total[2], 1e3 * all, flops_all / all / 1e9, B / all);
    be->ops->destroy(be);
    free(hx), free(hw), free(hy), free(x), free(w), free(y), free(dx), free(dw), free(tm);
    return 0;
}
