/* The CPU backend's convolutional-network ops (core/backend.h): 2-D convolution and its two
 * gradients, batch normalisation, max and global-average pooling, element-wise add, and image
 * batch assembly. Everything is channels-last: x (N, H, W, C), y (N, P, Q, K), filters
 * (K, R, S, C); batch norm and add see plain (M, C) rows. fp16/bf16 operands are widened exactly
 * to fp32, the arithmetic is fp32 (statistics in double), and each stored result is rounded once.
 *
 * Convolution is im2col over OpenBLAS sgemm. Columns are (r, s, c) to match the (K, R, S, C)
 * filter, so forward is y (N*P*Q, K) = col (N*P*Q, R*S*C) @ w^T, backward-data is
 * dcol = dy @ w followed by col2im, and backward-filter is dw = dy^T @ col. A 1x1 stride-1
 * unpadded convolution needs no columns: x itself is the (N*H*W, C) matrix. The batch is
 * processed in chunks of images so that the CPU-only scratch (columns, widened copies, fp32
 * products, all charged to AB_MEM_CPU_SCRATCH) stays under CONV_SCRATCH_FLOATS whatever N is.
 *
 * Why im2col over OpenBLAS and not oneDNN: see the comment block at "convolution" below. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cpu_internal.h"
#include "half.h"

/* fp32 view of n stored elements: the buffer itself for fp32, else a widened copy in slot */
static const float *f32_view(ab_backend *be, int slot, ab_dtype t, const void *p, size_t n) {
    if (t == AB_F32) return p;
    float *w = cpu_scratch_get(be, slot, n);
    if (w) cpu_widen_par(be, n, t, p, w);
    return w;
}

static int check_dtype(const char *op, ab_dtype t) {
    if (t != AB_F32 && t != AB_F16 && t != AB_BF16) return ab_errorf("%s: unknown element type %d", op, (int)t);
    return 0;
}

/* ---- convolution ----
 *
 * im2col and the backend's own products (oneDNN's sgemm since 2026-12-05; OpenBLAS's at the time
 * of the figures below), not oneDNN's convolutions. Measured on ResNet-50's convolutions with the CIFAR stem,
 * batch 32, 32x32, 2 threads of a Xeon with AVX-512 (bench/conv_bench.c beside
 * peers/conv_bench.py, which runs PyTorch 1.13's CPU convolution: oneDNN 2.6.3, the
 * version of Debian's libdnnl-dev; results/cpu/2026-12-01-xeon-2core/conv_bench.txt, three
 * interleaved pairs): forward + backward data + backward filter of the whole network take
 * 1218 ms here and 1196 ms in oneDNN, medians. oneDNN is 1.8x as fast on layer1's 64-channel 3x3
 * layers (a GEMM with only 64 output channels keeps OpenBLAS near 145 GFLOP/s against 200-280
 * on the deeper layers) and slower on its 1x1 expansions. The whole training step is as fast
 * here as PyTorch's or faster (19.8 against 19.5 images/s with this stem, 143 against 133 with
 * torchvision's; bench/cpu_resnet.sh, cpu_resnet.txt in the same folder): what surrounds the
 * convolutions (batch norm, ReLU, the adds) costs as much as they do and is leaner here. oneDNN's
 * convolutions would run on its own OpenMP workers beside this backend's pool, and the fp16/bf16
 * emulation is the same code for every op here (widen exactly, fp32 sums, one rounding). They
 * stay the option to take for the high-resolution layers if they come to dominate. */

/* Columns and other per-chunk scratch stay under this many floats (32 MiB); one image's worth
 * is always allowed, so a huge single image still runs. */
#define CONV_SCRATCH_FLOATS ((size_t)8 << 20)

typedef struct {
    int direct;          /* 1x1, stride 1, no padding: x is already the column matrix */
    size_t HWC, PQ, PQK, CRS;
    int nb;              /* images per chunk */
} conv_plan;

static int conv_prepare(const char *op, const ab_conv_shape *s, ab_dtype t, size_t per_image_extra_lowp,
                        int need_col, conv_plan *pl) {
    AB_TRY(check_dtype(op, t));
    ab_conv_shape c = *s;
    if (ab_conv_shape_init(&c) != 0) return ab_errorf("%s: %s", op, ab_error());
    if (c.P != s->P || c.Q != s->Q)
        return ab_errorf("%s: output %dx%d given, the shape gives %dx%d (call ab_conv_shape_init)", op, s->P, s->Q,
                         c.P, c.Q);
    pl->direct = s->R == 1 && s->S == 1 && s->stride_h == 1 && s->stride_w == 1 && s->pad_h == 0 && s->pad_w == 0;
    pl->HWC = (size_t)s->H * s->W * s->C;
    pl->PQ = (size_t)s->P * s->Q;
    pl->PQK = pl->PQ * s->K;
    pl->CRS = (size_t)s->R * s->S * s->C;
    size_t per_image = (need_col && !pl->direct ? pl->PQ * pl->CRS : 0) + (t != AB_F32 ? per_image_extra_lowp : 0);
    size_t nb = per_image ? CONV_SCRATCH_FLOATS / per_image : (size_t)s->N;
    if (nb < 1) nb = 1;
    if (nb > (size_t)s->N) nb = (size_t)s->N;
    const size_t chunks = ((size_t)s->N + nb - 1) / nb;
    pl->nb = (int)(((size_t)s->N + chunks - 1) / chunks); /* even chunks: 11+11+10, not 13+13+6 */
    return 0;
}

typedef struct {
    const ab_conv_shape *s;
    void *img; /* (nb, H, W, C): read by im2col, written by col2im (fp32) */
    void *col; /* (nb*P*Q, R*S*C): written by im2col, read by col2im (fp32) */
    size_t es; /* im2col's column element size: 4 (fp32), 2 (bf16 for the native products) */
    ab_dtype t; /* im2col: img's type; fp16/bf16 into fp32 columns is widened on the way */
} col_job;

/* the valid filter columns [*slo, *shi) for an output column starting at input column w0 */
static void valid_span(int w0, int S, int W, int *slo, int *shi) {
    *slo = w0 < 0 ? -w0 : 0;
    *shi = W - w0 < S ? W - w0 : S;
    if (*shi < *slo) *shi = *slo;
}

/* rows [lo, hi) of (n, p) pairs. Channels-last makes the S*C values of one filter row one
 * contiguous span of x, so each is one copy (less the padded ends). */
static void im2col_range(void *ctx, int part, size_t lo, size_t hi) {
    (void)part;
    const col_job *j = ctx;
    const ab_conv_shape *s = j->s;
    const int C = s->C, H = s->H, W = s->W, R = s->R, S = s->S, Q = s->Q;
    const size_t es = j->es, SC = (size_t)S * C, CRS = (size_t)R * SC, Ce = (size_t)C * es;
    const size_t ies = ab_dtype_size(j->t), iCe = (size_t)C * ies; /* img's element and pixel sizes */
    const int widen = ies != es;
    for (size_t np = lo; np < hi; np++) {
        const size_t n = np / (size_t)s->P;
        const int p = (int)(np % (size_t)s->P);
        const char *img = (const char *)j->img + n * (size_t)H * W * iCe;
        char *row = (char *)j->col + np * (size_t)Q * CRS * es;
        for (int q = 0; q < Q; q++, row += CRS * es) {
            const int w0 = q * s->stride_w - s->pad_w;
            int slo, shi;
            valid_span(w0, S, W, &slo, &shi);
            for (int r = 0; r < R; r++) {
                char *dst = row + (size_t)r * SC * es;
                const int h = p * s->stride_h - s->pad_h + r;
                if (h < 0 || h >= H || shi == slo) {
                    memset(dst, 0, SC * es);
                    continue;
                }
                if (slo > 0) memset(dst, 0, (size_t)slo * Ce);
                const char *from = img + ((size_t)h * W + (size_t)(w0 + slo)) * iCe;
                if (widen)
                    cpu_widen((size_t)(shi - slo) * C, j->t, from, (float *)(dst + (size_t)slo * Ce));
                else
                    memcpy(dst + (size_t)slo * Ce, from, (size_t)(shi - slo) * Ce);
                if (shi < S) memset(dst + (size_t)shi * Ce, 0, (size_t)(S - shi) * Ce);
            }
        }
    }
}

/* images [lo, hi): dx = 0, then every column adds into the input position it was copied from,
 * in (p, q, r, s) order, so the fp32 sums are the same whatever the threads */
static void col2im_range(void *ctx, int part, size_t lo, size_t hi) {
    (void)part;
    const col_job *j = ctx;
    const ab_conv_shape *s = j->s;
    const int C = s->C, H = s->H, W = s->W, R = s->R, S = s->S, P = s->P, Q = s->Q;
    const size_t SC = (size_t)S * C, CRS = (size_t)R * SC;
    for (size_t n = lo; n < hi; n++) {
        float *img = (float *)j->img + n * (size_t)H * W * C;
        memset(img, 0, (size_t)H * W * C * sizeof(float));
        const float *row = (const float *)j->col + n * (size_t)P * Q * CRS;
        for (int p = 0; p < P; p++)
            for (int q = 0; q < Q; q++, row += CRS) {
                const int w0 = q * s->stride_w - s->pad_w;
                int slo, shi;
                valid_span(w0, S, W, &slo, &shi);
                const size_t len = (size_t)(shi - slo) * C;
                for (int r = 0; r < R; r++) {
                    const int h = p * s->stride_h - s->pad_h + r;
                    if (h < 0 || h >= H) continue;
                    float *dst = img + ((size_t)h * W + (size_t)(w0 + slo)) * C;
                    const float *src = row + (size_t)r * SC + (size_t)slo * C;
                    for (size_t i = 0; i < len; i++) dst[i] += src[i];
                }
            }
    }
}

/* col holds elements of es bytes (fp32, or bf16 for the native products), x elements of type t
 * (widened to fp32 on the way when es is 4) */
static void im2col(ab_backend *be, const ab_conv_shape *s, int nb, ab_dtype t, const void *x, void *col, size_t es) {
    col_job j = {s, (void *)x, col, es, t}; /* im2col only reads img */
    cpu_parallel_for(be, (size_t)nb * s->P, 1, im2col_range, &j);
}

static void col2im(ab_backend *be, const ab_conv_shape *s, int nb, const float *dcol, float *dx) {
    col_job j = {s, dx, (void *)dcol, sizeof(float), AB_F32}; /* col2im only reads col */
    cpu_parallel_for(be, (size_t)nb, 1, col2im_range, &j);
}

/* bf16 convolutions on a CPU that multiplies bf16 natively (onednn_cpu.c): the columns are built
 * from the bf16 values themselves and the products go to oneDNN, with the fp32 sums rounded once as
 * on the emulated path */
static int native_bf16(ab_backend *be, ab_dtype t) { return t == AB_BF16 && ((const cpu_state *)be->impl)->bf16_native; }

/* bf16 view of the columns of x's images (x itself for a 1x1 convolution), in CPU_SLOT_LAYER_COL */
static const uint16_t *bf16_columns(ab_backend *be, const ab_conv_shape *s, const conv_plan *pl, int nb,
                                    const uint16_t *x) {
    if (pl->direct) return x;
    uint16_t *col = (uint16_t *)cpu_scratch_get(be, CPU_SLOT_LAYER_COL, ((size_t)nb * pl->PQ * pl->CRS + 1) / 2);
    if (col) im2col(be, s, nb, AB_BF16, x, col, sizeof(uint16_t));
    return col;
}

/* acc = s acc + part, over the pool */
typedef struct {
    float s;
    const float *part;
    float *acc;
} addsc_job;

static inline __attribute__((always_inline)) void addsc_range_body(void *ctx, int part, size_t lo, size_t hi) {
    (void)part;
    const addsc_job *j = ctx;
    for (size_t i = lo; i < hi; i++) j->acc[i] = j->s * j->acc[i] + j->part[i];
}
CPU_RANGE_AVX512(addsc_range)

static void add_scaled_par(ab_backend *be, size_t n, float s, const float *part, float *acc) {
    addsc_job j = {s, part, acc};
    cpu_parallel_for(be, n, CONVERT_MIN, addsc_range, &j);
}

static int conv_forward_bf16(ab_backend *be, const ab_conv_shape *s, const conv_plan *pl, const uint16_t *x,
                             const uint16_t *w, uint16_t *y) {
    for (int n0 = 0; n0 < s->N; n0 += pl->nb) {
        const int nb = s->N - n0 < pl->nb ? s->N - n0 : pl->nb;
        float *out = cpu_scratch_get(be, CPU_SLOT_LAYER_OUT, (size_t)nb * pl->PQK);
        const uint16_t *a = bf16_columns(be, s, pl, nb, x + (size_t)n0 * pl->HWC);
        if (!out || !a) return -1;
        AB_TRY(cpu_gemm_bf16_native(be, 0, 1, (int)((size_t)nb * pl->PQ), s->K, (int)pl->CRS, a, (int)pl->CRS, w,
                                    (int)pl->CRS, out, s->K));
        cpu_narrow_par(be, (size_t)nb * pl->PQK, out, AB_BF16, y + (size_t)n0 * pl->PQK);
    }
    return 0;
}

/* fp16/bf16 emulated (fp32 too): the columns widened as they are built (x itself for a 1x1 convolution),
 * and the product through ab_cpu_gemm, which widens the rows of a 1x1 convolution's x in each part
 * and rounds each part's block of y in its cache; forward's weights widened and transposed once for
 * every chunk of images (filter_t_f32), or a column tile at a time in the parts where one chunk is
 * cut by columns (filter_in_tiles); the backward products' widened by ab_cpu_gemm once a chunk */
static const void *columns_f32(ab_backend *be, const ab_conv_shape *s, const conv_plan *pl, int nb, ab_dtype t,
                               const void *x, ab_dtype *ct) {
    *ct = pl->direct ? t : AB_F32;
    if (pl->direct) return x;
    float *col = cpu_scratch_get(be, CPU_SLOT_LAYER_COL, (size_t)nb * pl->PQ * pl->CRS);
    if (col) im2col(be, s, nb, t, x, col, sizeof(float));
    return col;
}

/* w (K, RSC) as w^T (RSC, K), widened to fp32, in CPU_SLOT_LAYER_W: the forward products' B once
 * for every chunk of images, stored untransposed (oneDNN's sgemm takes it faster, runtime_cpu.h);
 * NULL with ab_error when out of memory */
static const float *filter_t_f32(ab_backend *be, const ab_conv_shape *s, const conv_plan *pl, ab_dtype t,
                                 const void *w) {
    float *wt = cpu_scratch_get(be, CPU_SLOT_LAYER_W, (size_t)s->K * pl->CRS);
    if (wt) cpu_transpose_par(be, s->K, (int)pl->CRS, t, w, (int)pl->CRS, wt, s->K);
    return wt;
}
/* one chunk of images cut by columns (few rows, a large filter: ResNet-50's last layers at small
 * inputs): w as it is stored, for ab_cpu_gemm to copy a column tile at a time in each part's cache */
static int filter_in_tiles(const ab_conv_shape *s, const conv_plan *pl) {
    const size_t rows = (size_t)pl->nb * pl->PQ;
    return pl->nb == s->N && cpu_gemm_by_columns((int)rows, s->K, (double)rows * s->K * pl->CRS);
}

static int conv_forward_16(ab_backend *be, const ab_conv_shape *s, const conv_plan *pl, ab_dtype t, const void *x,
                           const void *w, void *y) {
    const float *wt = filter_t_f32(be, s, pl, t, w); /* 16-bit: always (cpu_copies_bt) */
    if (!wt) return -1;
    for (int n0 = 0; n0 < s->N; n0 += pl->nb) {
        const int nb = s->N - n0 < pl->nb ? s->N - n0 : pl->nb;
        ab_dtype at;
        const void *a = columns_f32(be, s, pl, nb, t, (const uint16_t *)x + (size_t)n0 * pl->HWC, &at);
        if (!a) return -1;
        AB_TRY(ab_cpu_gemm(be, 0, 0, (int)((size_t)nb * pl->PQ), s->K, (int)pl->CRS, 1.0f, at, a, (int)pl->CRS, AB_F32,
                           wt, s->K, NULL, AB_EPI_NONE, 0.0f, t, (uint16_t *)y + (size_t)n0 * pl->PQK, s->K));
    }
    return 0;
}

int ab_cpu_conv2d_forward(ab_backend *be, const ab_conv_shape *s, ab_dtype t, const void *x, const void *w, void *y) {
    conv_plan pl;
    AB_TRY(conv_prepare("conv2d_forward", s, t, (size_t)s->H * s->W * s->C + (size_t)s->P * s->Q * s->K, 1, &pl));
    if (native_bf16(be, t)) return conv_forward_bf16(be, s, &pl, x, w, y);
    if (filter_in_tiles(s, &pl)) { /* the stored filter to ab_cpu_gemm, any type */
        ab_dtype at;
        const void *a = columns_f32(be, s, &pl, s->N, t, x, &at);
        if (!a) return -1;
        return ab_cpu_gemm(be, 0, 1, (int)((size_t)s->N * pl.PQ), s->K, (int)pl.CRS, 1.0f, at, a, (int)pl.CRS, t, w,
                           (int)pl.CRS, NULL, AB_EPI_NONE, 0.0f, t, y, s->K);
    }
    if (t != AB_F32) return conv_forward_16(be, s, &pl, t, x, w, y);
    /* fp32 from here: w^T copied once (filter_t_f32), or w as it is stored for products too short
     * to pay for it */
    const int tw = !cpu_copies_bt(AB_F32, (size_t)pl.nb * pl.PQ);
    const float *w32 = tw ? w : filter_t_f32(be, s, &pl, t, w);
    if (!w32) return -1;
    for (int n0 = 0; n0 < s->N; n0 += pl.nb) {
        const int nb = s->N - n0 < pl.nb ? s->N - n0 : pl.nb;
        const float *a = (const float *)x + (size_t)n0 * pl.HWC;
        float *out = (float *)y + (size_t)n0 * pl.PQK;
        if (!pl.direct) {
            float *col = cpu_scratch_get(be, CPU_SLOT_LAYER_COL, (size_t)nb * pl.PQ * pl.CRS);
            if (!col) return -1;
            im2col(be, s, nb, AB_F32, a, col, sizeof(float));
            a = col;
        }
        /* y (nb*P*Q, K) = col (nb*P*Q, RSC) @ w^T */
        cpu_sgemm(be, 0, tw, (int)((size_t)nb * pl.PQ), s->K, (int)pl.CRS, 1.0f, a, (int)pl.CRS, w32,
                  tw ? (int)pl.CRS : s->K, 0.0f, out, s->K);
    }
    return 0;
}

int ab_cpu_conv2d_backward_data(ab_backend *be, const ab_conv_shape *s, ab_dtype t, const void *dy, const void *w,
                                void *dx) {
    conv_plan pl;
    const size_t es = ab_dtype_size(t);
    AB_TRY(conv_prepare("conv2d_backward_data", s, t, (size_t)s->H * s->W * s->C + (size_t)s->P * s->Q * s->K, 1,
                        &pl));
    if (native_bf16(be, t)) {
        for (int n0 = 0; n0 < s->N; n0 += pl.nb) {
            const int nb = s->N - n0 < pl.nb ? s->N - n0 : pl.nb;
            const uint16_t *dyb = (const uint16_t *)dy + (size_t)n0 * pl.PQK;
            float *out = cpu_scratch_get(be, CPU_SLOT_LAYER_OUT, (size_t)nb * pl.HWC);
            if (!out) return -1;
            if (pl.direct) { /* dx (nb*H*W, C) = dy (nb*H*W, K) @ w (K, C) */
                AB_TRY(cpu_gemm_bf16_native(be, 0, 0, (int)((size_t)nb * pl.PQ), s->C, s->K, dyb, s->K, w, s->C, out,
                                            s->C));
            } else { /* dcol (nb*P*Q, RSC) = dy (nb*P*Q, K) @ w (K, RSC), then col2im */
                float *dcol = cpu_scratch_get(be, CPU_SLOT_LAYER_COL, (size_t)nb * pl.PQ * pl.CRS);
                if (!dcol) return -1;
                AB_TRY(cpu_gemm_bf16_native(be, 0, 0, (int)((size_t)nb * pl.PQ), (int)pl.CRS, s->K, dyb, s->K, w,
                                            (int)pl.CRS, dcol, (int)pl.CRS));
                col2im(be, s, nb, dcol, out);
            }
            cpu_narrow_par(be, (size_t)nb * pl.HWC, out, t, (uint16_t *)dx + (size_t)n0 * pl.HWC);
        }
        return 0;
    }
    if (t != AB_F32) { /* through ab_cpu_gemm: dy's rows widened in each part, w once */
        for (int n0 = 0; n0 < s->N; n0 += pl.nb) {
            const int nb = s->N - n0 < pl.nb ? s->N - n0 : pl.nb;
            const uint16_t *dyc = (const uint16_t *)dy + (size_t)n0 * pl.PQK;
            uint16_t *dxc = (uint16_t *)dx + (size_t)n0 * pl.HWC;
            if (pl.direct) { /* dx (nb*H*W, C) = dy (nb*H*W, K) @ w (K, C), rounded in the parts */
                AB_TRY(ab_cpu_gemm(be, 0, 0, (int)((size_t)nb * pl.PQ), s->C, s->K, 1.0f, t, dyc, s->K, t, w, s->C, NULL,
                                   AB_EPI_NONE, 0.0f, t, dxc, s->C));
                continue;
            }
            float *dcol = cpu_scratch_get(be, CPU_SLOT_LAYER_COL, (size_t)nb * pl.PQ * pl.CRS);
            float *out = cpu_scratch_get(be, CPU_SLOT_LAYER_OUT, (size_t)nb * pl.HWC);
            if (!dcol || !out) return -1;
            AB_TRY(ab_cpu_gemm(be, 0, 0, (int)((size_t)nb * pl.PQ), (int)pl.CRS, s->K, 1.0f, t, dyc, s->K, t, w,
                               (int)pl.CRS, NULL, AB_EPI_NONE, 0.0f, AB_F32, dcol, (int)pl.CRS));
            col2im(be, s, nb, dcol, out);
            cpu_narrow_par(be, (size_t)nb * pl.HWC, out, t, dxc);
        }
        return 0;
    }
    const float *w32 = f32_view(be, CPU_SLOT_LAYER_W, t, w, (size_t)s->K * pl.CRS);
    if (!w32) return -1;
    for (int n0 = 0; n0 < s->N; n0 += pl.nb) {
        const int nb = s->N - n0 < pl.nb ? s->N - n0 : pl.nb;
        const float *dy32 = f32_view(be, CPU_SLOT_LAYER_DY, t, (const char *)dy + (size_t)n0 * pl.PQK * es,
                                     (size_t)nb * pl.PQK);
        float *out = t == AB_F32 ? (float *)dx + (size_t)n0 * pl.HWC
                                 : cpu_scratch_get(be, CPU_SLOT_LAYER_OUT, (size_t)nb * pl.HWC);
        if (!dy32 || !out) return -1;
        if (pl.direct) { /* dx (nb*H*W, C) = dy (nb*H*W, K) @ w (K, C) */
            cpu_sgemm(be, 0, 0, (int)((size_t)nb * pl.PQ), s->C, s->K, 1.0f, dy32, s->K, w32, s->C, 0.0f, out, s->C);
        } else { /* dcol (nb*P*Q, RSC) = dy (nb*P*Q, K) @ w (K, RSC), then col2im */
            float *dcol = cpu_scratch_get(be, CPU_SLOT_LAYER_COL, (size_t)nb * pl.PQ * pl.CRS);
            if (!dcol) return -1;
            cpu_sgemm(be, 0, 0, (int)((size_t)nb * pl.PQ), (int)pl.CRS, s->K, 1.0f, dy32, s->K, w32, (int)pl.CRS, 0.0f,
                      dcol, (int)pl.CRS);
            col2im(be, s, nb, dcol, out);
        }
        if (t != AB_F32) cpu_narrow_par(be, (size_t)nb * pl.HWC, out, t, (char *)dx + (size_t)n0 * pl.HWC * es);
    }
    return 0;
}

/* the fp32 sum dw32 of a 16-bit filter gradient rounded once to t: into dw, or folded into fold
 * (and checked: *found_inf set where it stores an infinite or NaN value) */
static void dw_round(ab_backend *be, size_t nw, const float *dw32, ab_dtype t, void *dw, float *fold, int accumulate,
                     int32_t *found_inf) {
    if (fold) {
        if (cpu_round_fold_par(be, nw, dw32, t, fold, accumulate) && found_inf) *found_inf = 1;
    } else {
        cpu_narrow_par(be, nw, dw32, t, dw);
    }
}

/* the filter gradient: into dw (type t) with beta, or, fold not NULL (t fp16 or bf16, beta 0),
 * rounded to t and folded into the fp32 gradient fold (conv2d_backward_filter_fold), found_inf as
 * there */
static int filter_grad(ab_backend *be, const ab_conv_shape *s, ab_dtype t, const void *x, const void *dy, float beta,
                       void *dw, float *fold, int accumulate, int32_t *found_inf) {
    conv_plan pl;
    const size_t es = ab_dtype_size(t);
    AB_TRY(conv_prepare("conv2d_backward_filter", s, t, (size_t)s->H * s->W * s->C + (size_t)s->P * s->Q * s->K, 1,
                        &pl));
    const size_t nw = (size_t)s->K * pl.CRS;
    if (t != AB_F32 && !native_bf16(be, t) && pl.nb == s->N) {
        /* one chunk of images: ab_cpu_gemm's parts add beta dw and round their own tiles of it */
        ab_dtype bt;
        const void *b = columns_f32(be, s, &pl, s->N, t, x, &bt);
        if (!b) return -1;
        /* with fold, the parts round their tiles to t and fold them into the fp32 gradient */
        return cpu_gemm_run(be, 1, 0, s->K, (int)pl.CRS, (int)((size_t)s->N * pl.PQ), 1.0f, t, dy, s->K, bt, b,
                            (int)pl.CRS, NULL, AB_EPI_NONE, fold ? (accumulate ? 1.0f : 0.0f) : beta, fold ? AB_F32 : t,
                            fold ? (void *)fold : dw, (int)pl.CRS, fold ? t : AB_F32, fold ? found_inf : NULL);
    }
    float *dw32 = dw;
    if (t != AB_F32) { /* the fp32 sum, old dw included, is rounded once at the end */
        dw32 = cpu_scratch_get(be, CPU_SLOT_LAYER_ACC, nw);
        if (!dw32) return -1;
        if (beta != 0.0f) cpu_widen_par(be, nw, t, dw, dw32);
    }
    if (native_bf16(be, t)) { /* each chunk's product in fp32, added to the fp32 sum */
        float *part = cpu_scratch_get(be, CPU_SLOT_LAYER_W, nw);
        if (!part) return -1;
        for (int n0 = 0; n0 < s->N; n0 += pl.nb) {
            const int nb = s->N - n0 < pl.nb ? s->N - n0 : pl.nb;
            const uint16_t *a = bf16_columns(be, s, &pl, nb, (const uint16_t *)x + (size_t)n0 * pl.HWC);
            if (!a) return -1;
            AB_TRY(cpu_gemm_bf16_native(be, 1, 0, s->K, (int)pl.CRS, (int)((size_t)nb * pl.PQ),
                                        (const uint16_t *)dy + (size_t)n0 * pl.PQK, s->K, a, (int)pl.CRS, part,
                                        (int)pl.CRS));
            if (n0 == 0 && beta == 0.0f)
                memcpy(dw32, part, nw * sizeof(float));
            else
                add_scaled_par(be, nw, n0 == 0 ? beta : 1.0f, part, dw32);
        }
        dw_round(be, nw, dw32, t, dw, fold, accumulate, found_inf);
        return 0;
    }
    if (t != AB_F32) { /* through ab_cpu_gemm: dy^T widened once a chunk, the columns as they are built */
        for (int n0 = 0; n0 < s->N; n0 += pl.nb) {
            const int nb = s->N - n0 < pl.nb ? s->N - n0 : pl.nb;
            ab_dtype bt;
            const void *b = columns_f32(be, s, &pl, nb, t, (const uint16_t *)x + (size_t)n0 * pl.HWC, &bt);
            if (!b) return -1;
            AB_TRY(ab_cpu_gemm(be, 1, 0, s->K, (int)pl.CRS, (int)((size_t)nb * pl.PQ), 1.0f, t,
                               (const uint16_t *)dy + (size_t)n0 * pl.PQK, s->K, bt, b, (int)pl.CRS, NULL, AB_EPI_NONE,
                               n0 == 0 ? beta : 1.0f, AB_F32, dw32, (int)pl.CRS));
        }
        dw_round(be, nw, dw32, t, dw, fold, accumulate, found_inf);
        return 0;
    }
    for (int n0 = 0; n0 < s->N; n0 += pl.nb) {
        const int nb = s->N - n0 < pl.nb ? s->N - n0 : pl.nb;
        const float *x32 = f32_view(be, CPU_SLOT_LAYER_X, t, (const char *)x + (size_t)n0 * pl.HWC * es,
                                    (size_t)nb * pl.HWC);
        const float *dy32 = f32_view(be, CPU_SLOT_LAYER_DY, t, (const char *)dy + (size_t)n0 * pl.PQK * es,
                                     (size_t)nb * pl.PQK);
        if (!x32 || !dy32) return -1;
        const float *a = x32;
        if (!pl.direct) {
            float *col = cpu_scratch_get(be, CPU_SLOT_LAYER_COL, (size_t)nb * pl.PQ * pl.CRS);
            if (!col) return -1;
            im2col(be, s, nb, AB_F32, x32, col, sizeof(float));
            a = col;
        }
        /* dw (K, RSC) (+)= dy^T (K, nb*P*Q) @ col (nb*P*Q, RSC); beta only on the first chunk */
        cpu_sgemm(be, 1, 0, s->K, (int)pl.CRS, (int)((size_t)nb * pl.PQ), 1.0f, dy32, s->K, a, (int)pl.CRS,
                  n0 == 0 ? beta : 1.0f, dw32, (int)pl.CRS);
    }
    if (t != AB_F32) cpu_narrow_par(be, nw, dw32, t, dw);
    return 0;
}

int ab_cpu_conv2d_backward_filter(ab_backend *be, const ab_conv_shape *s, ab_dtype t, const void *x, const void *dy,
                                  float beta, void *dw) {
    return filter_grad(be, s, t, x, dy, beta, dw, NULL, 0, NULL);
}

int ab_cpu_conv2d_backward_filter_fold(ab_backend *be, const ab_conv_shape *s, ab_dtype t, const void *x,
                                       const void *dy, void *ws, float *dw, int accumulate, int32_t *found_inf) {
    if (t == AB_F32) { /* nothing to round: the gradient into ws, then folded */
        AB_TRY(filter_grad(be, s, t, x, dy, 0.0f, ws, NULL, 0, NULL));
        return ab_cpu_accumulate(be, (size_t)s->K * s->R * s->S * s->C, t, ws, dw, accumulate, found_inf);
    }
    return filter_grad(be, s, t, x, dy, 0.0f, NULL, dw, accumulate, found_inf);
}

/* ---- batch normalisation over (M, C) rows ----
 * The rows are cut into fixed blocks of about BN_BLOCK_ELEMS values; each block's per-channel
 * sums are taken in double and the blocks are summed in order, so the statistics do not depend
 * on the number of threads. A 16-bit block goes through BN_SUB_ELEMS values at a time (a row at
 * a time past 4,096 channels), each part widening them into a slice of its own that stays in its
 * L1 cache, the sums taking the rows in the same order; an fp32 block is read where it lies
 * (the whole 16-bit block, 256 KB of fp32, went through L2: ResNet-50's normalisation
 * 10% faster under AMP with the CIFAR stem, results/cpu/2026-12-06-epyc-2core/widen-rows/). While
 * a slice is computed on, the next one's lines are asked for (bn_rows, bn_store_rows): the
 * widening otherwise waited on memory with the arithmetic idle, then the arithmetic ran with
 * memory idle: at ResNet-50's shapes fp16's backward took 1.46 times fp32's time and its forward
 * 1.18 times; with the lines asked for ahead, 1.04 and 1.00 times (medians of 6 alternating rounds,
 * results/cpu/2026-12-07-epyc-2core/amp-passes/). The
 * statistics take one pass: sums of d = x - k and d^2 with k the channel's first value, a shift
 * inside the data, so that var = E[d^2] - E[d]^2 does not cancel away when the mean is far from
 * 0 (in double, with |E[d]| of the order of the spread). */
#define BN_BLOCK_ELEMS 65536
#define BN_SUB_ELEMS 4096

typedef struct {
    int M, C, rows_per_block;
    int sub_rows; /* rows a pass takes at a time: 16-bit, those a part widens into its L1 cache; fp32,
                   * the block */
    ab_dtype t;
    const void *x, *dy;
    void *y; /* y or dx */
    const float *gamma, *beta;
    const float *mean_f, *invstd_f; /* fp32 statistics as they normalise */
    const double *shift;            /* the statistics' shift k per channel */
    int relu;                       /* forward: a fused ReLU before the rounding */
    double *part;                   /* (blocks, 2, C) partial sums */
    float *buf;                     /* 16-bit: (parts, 2 * sub_rows * C) widening scratch (bn_part_buf) */
    const float *mdy, *mdyx;        /* backward: mean(dy), mean(dy * xhat) */
} bn_job;

static size_t bn_blocks(const bn_job *j) { return ((size_t)j->M + j->rows_per_block - 1) / j->rows_per_block; }

/* the lines of a 16-bit tensor p's values [next, next + n) (cut at its end) asked for, to be read or
 * (write) written: the next slice's, to arrive while this one is computed on (the widening alone
 * would wait on memory, then the arithmetic on L1: one after the other) */
static void bn_ahead(const bn_job *j, const void *p, size_t next, size_t n, int write) {
    const size_t es = ab_dtype_size(j->t), total = (size_t)j->M * j->C, end = next + n < total ? next + n : total;
    for (size_t o = next * es; o < end * es; o += 64) {
        if (write)
            __builtin_prefetch((const char *)p + o, 1, 2);
        else
            __builtin_prefetch((const char *)p + o, 0, 2);
    }
}

/* nr rows from row r0 as fp32 (a view of the buffer itself, or widened into buf) */
static const float *bn_rows(const bn_job *j, const void *p, size_t r0, size_t nr, float *buf) {
    const size_t off = r0 * (size_t)j->C;
    if (j->t == AB_F32) return (const float *)p + off;
    const size_t n = nr * (size_t)j->C;
    cpu_widen(n, j->t, (const char *)p + off * ab_dtype_size(j->t), buf);
    bn_ahead(j, p, off + n, n, 0);
    return buf;
}

/* nr rows from row r0 rounded from buf into y (16-bit), the next rows' lines asked for to be written */
static void bn_store_rows(const bn_job *j, const float *buf, size_t r0, size_t nr) {
    const size_t off = r0 * (size_t)j->C, n = nr * (size_t)j->C;
    cpu_narrow(n, buf, j->t, (char *)j->y + off * ab_dtype_size(j->t));
    bn_ahead(j, j->y, off + n, n, 1);
}

/* a part's widening buffer: x's rows, then dy's (sub_rows * C floats each); NULL in fp32, which
 * reads its rows where they lie */
static float *bn_part_buf(const bn_job *j, int part) {
    return j->t == AB_F32 ? NULL : j->buf + (size_t)part * 2 * j->sub_rows * j->C;
}

/* dy's half of a part's widening buffer (NULL with buf) */
static float *bn_dy_buf(const bn_job *j, float *buf) { return buf ? buf + (size_t)j->sub_rows * j->C : NULL; }

/* the rows a pass takes from row q of a block that ends at row end */
static size_t bn_sub_len(const bn_job *j, size_t q, size_t end) {
    return end - q < (size_t)j->sub_rows ? end - q : (size_t)j->sub_rows;
}

static void bn_block_span(const bn_job *j, size_t b, size_t *r0, size_t *nr) {
    *r0 = b * (size_t)j->rows_per_block;
    *nr = (size_t)j->M - *r0 < (size_t)j->rows_per_block ? (size_t)j->M - *r0 : (size_t)j->rows_per_block;
}

/* per block: sum d and sum d^2, d = x - shift */
static inline __attribute__((always_inline)) void bn_stats_range_body(void *ctx, int part, size_t lo, size_t hi) {
    const bn_job *j = ctx;
    const int C = j->C;
    float *buf = bn_part_buf(j, part);
    for (size_t b = lo; b < hi; b++) {
        size_t r0, nr;
        bn_block_span(j, b, &r0, &nr);
        double *s1 = j->part + b * 2 * C, *s2 = s1 + C;
        for (int c = 0; c < C; c++) s1[c] = s2[c] = 0.0;
        for (size_t q = r0; q < r0 + nr; q += j->sub_rows) {
            const size_t ns = bn_sub_len(j, q, r0 + nr);
            const float *x = bn_rows(j, j->x, q, ns, buf);
            for (size_t r = 0; r < ns; r++) {
                const float *xr = x + r * C;
                for (int c = 0; c < C; c++) {
                    const double d = (double)xr[c] - j->shift[c];
                    s1[c] += d;
                    s2[c] += d * d;
                }
            }
        }
    }
}
CPU_RANGE_AVX512(bn_stats_range)

/* y = (x - mean) * invstd * gamma + beta, rounded once to t */
static inline __attribute__((always_inline)) void bn_norm_range_body(void *ctx, int part, size_t lo, size_t hi) {
    const bn_job *j = ctx;
    const int C = j->C;
    float *buf = bn_part_buf(j, part);
    for (size_t b = lo; b < hi; b++) {
        size_t r0, nr;
        bn_block_span(j, b, &r0, &nr);
        for (size_t q = r0; q < r0 + nr; q += j->sub_rows) {
            const size_t ns = bn_sub_len(j, q, r0 + nr);
            const float *x = bn_rows(j, j->x, q, ns, buf);
            float *y = j->t == AB_F32 ? (float *)j->y + q * C : buf; /* in place on buf is fine */
            for (size_t r = 0; r < ns; r++) {
                const float *xr = x + r * C;
                float *yr = y + r * C;
                for (int c = 0; c < C; c++) yr[c] = (xr[c] - j->mean_f[c]) * j->invstd_f[c] * j->gamma[c] + j->beta[c];
                if (j->relu) /* relu_forward's rule: below 0 and -0 become +0, NaN stays */
                    for (int c = 0; c < C; c++) yr[c] = (yr[c] > 0.0f || yr[c] != yr[c]) ? yr[c] : 0.0f;
            }
            if (j->t != AB_F32) bn_store_rows(j, buf, q, ns);
        }
    }
}
CPU_RANGE_AVX512(bn_norm_range)

static int bn_setup(ab_backend *be, const char *op, int M, int C, ab_dtype t, bn_job *j) {
    AB_TRY(check_dtype(op, t));
    if (M < 1 || C < 1) return ab_errorf("%s: bad shape M=%d C=%d", op, M, C);
    memset(j, 0, sizeof *j);
    j->M = M;
    j->C = C;
    j->t = t;
    j->rows_per_block = BN_BLOCK_ELEMS / C > 0 ? BN_BLOCK_ELEMS / C : 1;
    j->sub_rows = t == AB_F32 ? j->rows_per_block : BN_SUB_ELEMS / C > 0 ? BN_SUB_ELEMS / C : 1;
    const int parts = cpu_parallel_parts(be, bn_blocks(j), 1);
    /* doubles (blocks * 2 * C) and per-thread widening buffers in one slot */
    const size_t nd = bn_blocks(j) * 2 * (size_t)C;
    const size_t nbuf = t == AB_F32 ? 0 : (size_t)parts * 2 * j->sub_rows * C;
    float *mem = cpu_scratch_get(be, CPU_SLOT_LAYER_ACC, 2 * nd + nbuf + 16);
    if (!mem) return -1;
    j->part = (double *)mem;
    j->buf = mem + 2 * nd;
    return 0;
}

int ab_cpu_batchnorm_forward_train(ab_backend *be, int M, int C, ab_dtype t, const void *x, const float *gamma,
                                   const float *beta, float eps, float momentum, float *running_mean,
                                   float *running_var, float *save_mean, float *save_invstd, int relu, void *y) {
    bn_job j;
    AB_TRY(bn_setup(be, "batchnorm_forward_train", M, C, t, &j));
    if (M < 2) /* PyTorch: "Expected more than 1 value per channel when training" */
        return ab_errorf("batchnorm_forward_train: %d row(s): training needs at least 2 values per channel", M);
    const size_t nblk = bn_blocks(&j);
    double *shift = malloc((size_t)C * sizeof(double));
    float *first = malloc((size_t)C * sizeof(float));
    if (!shift || !first) {
        free(shift);
        free(first);
        return ab_errorf("batchnorm_forward_train: out of host memory");
    }
    cpu_widen((size_t)C, t, x, first); /* row 0 */
    for (int c = 0; c < C; c++) shift[c] = first[c];
    free(first);
    j.x = x;
    j.shift = shift;
    cpu_parallel_for(be, nblk, 1, bn_stats_range, &j);
    for (int c = 0; c < C; c++) {
        double s1 = 0.0, s2 = 0.0;
        for (size_t b = 0; b < nblk; b++) {
            s1 += j.part[b * 2 * C + c];
            s2 += j.part[b * 2 * C + C + c];
        }
        const double md = s1 / M, mean = shift[c] + md;
        double var = s2 / M - md * md; /* biased: what normalises */
        if (var < 0.0) var = 0.0;     /* rounding; NaN stays NaN */
        save_mean[c] = (float)mean;
        save_invstd[c] = (float)(1.0 / sqrt(var + (double)eps));
        if (running_mean) running_mean[c] = (float)((1.0 - momentum) * running_mean[c] + (double)momentum * mean);
        if (running_var)
            running_var[c] =
                (float)((1.0 - momentum) * running_var[c] + (double)momentum * var * ((double)M / (double)(M - 1)));
    }
    free(shift);
    j.shift = NULL;
    j.mean_f = save_mean;
    j.invstd_f = save_invstd;
    j.gamma = gamma;
    j.beta = beta;
    j.relu = relu;
    j.y = y;
    cpu_parallel_for(be, nblk, 1, bn_norm_range, &j);
    return 0;
}

int ab_cpu_batchnorm_forward_eval(ab_backend *be, int M, int C, ab_dtype t, const void *x, const float *gamma,
                                  const float *beta, const float *running_mean, const float *running_var, float eps,
                                  int relu, void *y) {
    bn_job j;
    AB_TRY(bn_setup(be, "batchnorm_forward_eval", M, C, t, &j));
    float *invstd = malloc((size_t)C * sizeof(float));
    if (!invstd) return ab_errorf("batchnorm_forward_eval: out of host memory");
    for (int c = 0; c < C; c++) invstd[c] = (float)(1.0 / sqrt((double)running_var[c] + (double)eps));
    j.x = x;
    j.mean_f = running_mean;
    j.invstd_f = invstd;
    j.gamma = gamma;
    j.beta = beta;
    j.relu = relu;
    j.y = y;
    cpu_parallel_for(be, bn_blocks(&j), 1, bn_norm_range, &j);
    free(invstd);
    return 0;
}

/* sums of dy and dy * xhat per block */
static inline __attribute__((always_inline)) void bn_bwd_sums_range_body(void *ctx, int part, size_t lo, size_t hi) {
    const bn_job *j = ctx;
    const int C = j->C;
    float *buf = bn_part_buf(j, part);
    for (size_t b = lo; b < hi; b++) {
        size_t r0, nr;
        bn_block_span(j, b, &r0, &nr);
        double *sdy = j->part + b * 2 * C, *sdyx = sdy + C;
        for (int c = 0; c < C; c++) sdy[c] = sdyx[c] = 0.0;
        for (size_t q = r0; q < r0 + nr; q += j->sub_rows) {
            const size_t ns = bn_sub_len(j, q, r0 + nr);
            const float *x = bn_rows(j, j->x, q, ns, buf);
            const float *dy = bn_rows(j, j->dy, q, ns, bn_dy_buf(j, buf));
            for (size_t r = 0; r < ns; r++) {
                const float *xr = x + r * C, *dyr = dy + r * C;
                for (int c = 0; c < C; c++) {
                    const float xhat = (xr[c] - j->mean_f[c]) * j->invstd_f[c];
                    sdy[c] += (double)dyr[c];
                    sdyx[c] += (double)dyr[c] * (double)xhat;
                }
            }
        }
    }
}
CPU_RANGE_AVX512(bn_bwd_sums_range)

/* dx = gamma * invstd * (dy - mean(dy) - xhat * mean(dy * xhat)) */
static inline __attribute__((always_inline)) void bn_bwd_dx_range_body(void *ctx, int part, size_t lo, size_t hi) {
    const bn_job *j = ctx;
    const int C = j->C;
    float *buf = bn_part_buf(j, part);
    float *dybuf = bn_dy_buf(j, buf);
    for (size_t b = lo; b < hi; b++) {
        size_t r0, nr;
        bn_block_span(j, b, &r0, &nr);
        for (size_t q = r0; q < r0 + nr; q += j->sub_rows) {
            const size_t ns = bn_sub_len(j, q, r0 + nr);
            const float *x = bn_rows(j, j->x, q, ns, buf);
            const float *dy = bn_rows(j, j->dy, q, ns, dybuf);
            float *dx = j->t == AB_F32 ? (float *)j->y + q * C : dybuf; /* dx may alias dy: element by element */
            for (size_t r = 0; r < ns; r++) {
                const float *xr = x + r * C, *dyr = dy + r * C;
                float *dxr = dx + r * C;
                for (int c = 0; c < C; c++) {
                    const float xhat = (xr[c] - j->mean_f[c]) * j->invstd_f[c];
                    dxr[c] = j->gamma[c] * j->invstd_f[c] * (dyr[c] - j->mdy[c] - xhat * j->mdyx[c]);
                }
            }
            if (j->t != AB_F32) bn_store_rows(j, dybuf, q, ns);
        }
    }
}
CPU_RANGE_AVX512(bn_bwd_dx_range)

int ab_cpu_batchnorm_backward(ab_backend *be, int M, int C, ab_dtype t, const void *x, const void *dy,
                              const float *gamma, const float *save_mean, const float *save_invstd, float acc,
                              float *dgamma, float *dbeta, void *dx) {
    bn_job j;
    AB_TRY(bn_setup(be, "batchnorm_backward", M, C, t, &j));
    const size_t nblk = bn_blocks(&j);
    float *means = malloc(2 * (size_t)C * sizeof(float));
    if (!means) return ab_errorf("batchnorm_backward: out of host memory");
    j.x = x;
    j.dy = dy;
    j.mean_f = save_mean;
    j.invstd_f = save_invstd;
    cpu_parallel_for(be, nblk, 1, bn_bwd_sums_range, &j);
    for (int c = 0; c < C; c++) {
        double sdy = 0.0, sdyx = 0.0;
        for (size_t b = 0; b < nblk; b++) {
            sdy += j.part[b * 2 * C + c];
            sdyx += j.part[b * 2 * C + C + c];
        }
        /* acc == 0 overwrites, whatever the buffers held (NaN included) */
        dgamma[c] = acc != 0.0f ? acc * dgamma[c] + (float)sdyx : (float)sdyx;
        dbeta[c] = acc != 0.0f ? acc * dbeta[c] + (float)sdy : (float)sdy;
        means[c] = (float)(sdy / M);
        means[C + c] = (float)(sdyx / M);
    }
    j.mdy = means;
    j.mdyx = means + C;
    j.gamma = gamma;
    j.y = dx;
    cpu_parallel_for(be, nblk, 1, bn_bwd_dx_range, &j);
    free(means);
    return 0;
}

/* ---- pooling ---- */

static int pool_check(const char *op, const ab_pool_shape *s, ab_dtype t) {
    AB_TRY(check_dtype(op, t));
    ab_pool_shape c = *s;
    if (ab_pool_shape_init(&c) != 0) return ab_errorf("%s: %s", op, ab_error());
    if (c.P != s->P || c.Q != s->Q)
        return ab_errorf("%s: output %dx%d given, the shape gives %dx%d (call ab_pool_shape_init)", op, s->P, s->Q,
                         c.P, c.Q);
    return 0;
}

typedef struct {
    const ab_pool_shape *s;
    ab_dtype t;
    const void *x, *y, *dy;
    void *out;
    float *buf; /* per part: see the users */
    size_t buf_per_part;
} pool_job;

/* the window of output (p, q) clipped to the image: rows [h0, h1), columns [w0, w1) */
static void pool_window(const ab_pool_shape *s, int p, int q, int *h0, int *h1, int *w0, int *w1) {
    const int hs = p * s->stride_h - s->pad_h, ws = q * s->stride_w - s->pad_w;
    *h0 = hs < 0 ? 0 : hs;
    *h1 = hs + s->R < s->H ? hs + s->R : s->H;
    *w0 = ws < 0 ? 0 : ws;
    *w1 = ws + s->S < s->W ? ws + s->S : s->W;
}

static void maxpool_fwd_range(void *ctx, int part, size_t lo, size_t hi) {
    const pool_job *j = ctx;
    const ab_pool_shape *s = j->s;
    const int C = s->C;
    const size_t HWC = (size_t)s->H * s->W * C, PQC = (size_t)s->P * s->Q * C, es = ab_dtype_size(j->t);
    float *xb = j->buf + (size_t)part * j->buf_per_part, *yb = xb + HWC;
    for (size_t n = lo; n < hi; n++) {
        const float *x = j->t == AB_F32 ? (const float *)j->x + n * HWC : xb;
        if (j->t != AB_F32) cpu_widen(HWC, j->t, (const char *)j->x + n * HWC * es, xb);
        float *y = j->t == AB_F32 ? (float *)j->out + n * PQC : yb;
        for (int p = 0; p < s->P; p++)
            for (int q = 0; q < s->Q; q++) {
                int h0, h1, w0, w1;
                pool_window(s, p, q, &h0, &h1, &w0, &w1);
                float *yr = y + ((size_t)p * s->Q + q) * C;
                for (int c = 0; c < C; c++) yr[c] = -INFINITY; /* padding never wins */
                for (int h = h0; h < h1; h++)
                    for (int w = w0; w < w1; w++) {
                        const float *xr = x + ((size_t)h * s->W + w) * C;
                        for (int c = 0; c < C; c++) { /* a NaN anywhere in the window wins, as in PyTorch */
                            const float v = xr[c];
                            yr[c] = (v > yr[c] || v != v) ? v : yr[c];
                        }
                    }
            }
        if (j->t != AB_F32) cpu_narrow(PQC, yb, j->t, (char *)j->out + n * PQC * es);
    }
}

int ab_cpu_maxpool_forward(ab_backend *be, const ab_pool_shape *s, ab_dtype t, const void *x, void *y) {
    AB_TRY(pool_check("maxpool_forward", s, t));
    const size_t HWC = (size_t)s->H * s->W * s->C, PQC = (size_t)s->P * s->Q * s->C;
    const int parts = cpu_parallel_parts(be, (size_t)s->N, 1);
    pool_job j = {s, t, x, NULL, NULL, y, NULL, t == AB_F32 ? 0 : HWC + PQC};
    if (t != AB_F32 && !(j.buf = cpu_scratch_get(be, CPU_SLOT_LAYER_X, (size_t)parts * j.buf_per_part))) return -1;
    cpu_parallel_for(be, (size_t)s->N, 1, maxpool_fwd_range, &j);
    return 0;
}

/* equal, or both NaN (a NaN output came from the first NaN of the window) */
static inline int same_value(float a, float b) { return a == b || (a != a && b != b); }

static void maxpool_bwd_range(void *ctx, int part, size_t lo, size_t hi) {
    const pool_job *j = ctx;
    const ab_pool_shape *s = j->s;
    const int C = s->C;
    const size_t HWC = (size_t)s->H * s->W * C, PQC = (size_t)s->P * s->Q * C, es = ab_dtype_size(j->t);
    float *xb = j->buf + (size_t)part * j->buf_per_part;
    float *dxb = xb + HWC, *yb = dxb + HWC, *dyb = yb + PQC;
    /* the flags follow the widened copies, which fp32 has none of */
    unsigned char *found = (unsigned char *)(j->t == AB_F32 ? xb : dyb + PQC);
    for (size_t n = lo; n < hi; n++) {
        const float *x, *y, *dy;
        float *dx;
        if (j->t == AB_F32) {
            x = (const float *)j->x + n * HWC;
            y = (const float *)j->y + n * PQC;
            dy = (const float *)j->dy + n * PQC;
            dx = (float *)j->out + n * HWC;
        } else {
            cpu_widen(HWC, j->t, (const char *)j->x + n * HWC * es, xb);
            cpu_widen(PQC, j->t, (const char *)j->y + n * PQC * es, yb);
            cpu_widen(PQC, j->t, (const char *)j->dy + n * PQC * es, dyb);
            x = xb, y = yb, dy = dyb, dx = dxb;
        }
        memset(dx, 0, HWC * sizeof(float));
        for (int p = 0; p < s->P; p++)
            for (int q = 0; q < s->Q; q++) {
                int h0, h1, w0, w1;
                pool_window(s, p, q, &h0, &h1, &w0, &w1);
                const float *yr = y + ((size_t)p * s->Q + q) * C, *dyr = dy + ((size_t)p * s->Q + q) * C;
                memset(found, 0, (size_t)C);
                for (int h = h0; h < h1; h++)
                    for (int w = w0; w < w1; w++) {
                        const size_t off = ((size_t)h * s->W + w) * C;
                        for (int c = 0; c < C; c++)
                            if (!found[c] && same_value(x[off + c], yr[c])) {
                                dx[off + c] += dyr[c];
                                found[c] = 1;
                            }
                    }
            }
        if (j->t != AB_F32) cpu_narrow(HWC, dxb, j->t, (char *)j->out + n * HWC * es);
    }
}

int ab_cpu_maxpool_backward(ab_backend *be, const ab_pool_shape *s, ab_dtype t, const void *x, const void *y,
                            const void *dy, void *dx) {
    AB_TRY(pool_check("maxpool_backward", s, t));
    const size_t HWC = (size_t)s->H * s->W * s->C, PQC = (size_t)s->P * s->Q * s->C;
    const int parts = cpu_parallel_parts(be, (size_t)s->N, 1);
    /* per part: x, dx (HWC each), y, dy (PQC each) in fp32, then C bytes of flags */
    const size_t per_part = (t == AB_F32 ? 0 : 2 * HWC + 2 * PQC) + ((size_t)s->C + 3) / 4;
    pool_job j = {s, t, x, y, dy, dx, NULL, per_part};
    if (!(j.buf = cpu_scratch_get(be, CPU_SLOT_LAYER_X, (size_t)parts * per_part))) return -1;
    cpu_parallel_for(be, (size_t)s->N, 1, maxpool_bwd_range, &j);
    return 0;
}

typedef struct {
    int HW, C;
    ab_dtype t;
    const void *in;
    void *out;
    float *buf; /* per part: 2 C */
} avg_job;

static inline __attribute__((always_inline)) void avgpool_fwd_range_body(void *ctx, int part, size_t lo, size_t hi) {
    const avg_job *j = ctx;
    const int C = j->C;
    const size_t es = ab_dtype_size(j->t);
    float *acc = j->buf + (size_t)part * 2 * C, *row = acc + C;
    for (size_t n = lo; n < hi; n++) {
        for (int c = 0; c < C; c++) acc[c] = 0.0f;
        for (int i = 0; i < j->HW; i++) {
            const size_t off = (n * j->HW + i) * C;
            const float *r = j->t == AB_F32 ? (const float *)j->in + off : row;
            if (j->t != AB_F32) cpu_widen((size_t)C, j->t, (const char *)j->in + off * es, row);
            for (int c = 0; c < C; c++) acc[c] += r[c];
        }
        for (int c = 0; c < C; c++) acc[c] /= (float)j->HW;
        cpu_narrow((size_t)C, acc, j->t, (char *)j->out + n * C * es);
    }
}
CPU_RANGE_AVX512(avgpool_fwd_range)

int ab_cpu_avgpool_forward(ab_backend *be, int N, int HW, int C, ab_dtype t, const void *x, void *y) {
    AB_TRY(check_dtype("avgpool_forward", t));
    if (N < 1 || HW < 1 || C < 1) return ab_errorf("avgpool_forward: bad shape N=%d HW=%d C=%d", N, HW, C);
    const int parts = cpu_parallel_parts(be, (size_t)N, 1);
    avg_job j = {HW, C, t, x, y, cpu_scratch_get(be, CPU_SLOT_LAYER_X, (size_t)parts * 2 * C)};
    if (!j.buf) return -1;
    cpu_parallel_for(be, (size_t)N, 1, avgpool_fwd_range, &j);
    return 0;
}

static inline __attribute__((always_inline)) void avgpool_bwd_range_body(void *ctx, int part, size_t lo, size_t hi) {
    const avg_job *j = ctx;
    const int C = j->C;
    const size_t es = ab_dtype_size(j->t), rowb = (size_t)C * es;
    float *g = j->buf + (size_t)part * 2 * C;
    for (size_t n = lo; n < hi; n++) {
        cpu_widen((size_t)C, j->t, (const char *)j->in + n * rowb, g);
        for (int c = 0; c < C; c++) g[c] /= (float)j->HW;
        char *out = (char *)j->out + n * (size_t)j->HW * rowb;
        cpu_narrow((size_t)C, g, j->t, out); /* one rounding, then the same bits on every row */
        for (int i = 1; i < j->HW; i++) memcpy(out + (size_t)i * rowb, out, rowb);
    }
}
CPU_RANGE_AVX512(avgpool_bwd_range)

int ab_cpu_avgpool_backward(ab_backend *be, int N, int HW, int C, ab_dtype t, const void *dy, void *dx) {
    AB_TRY(check_dtype("avgpool_backward", t));
    if (N < 1 || HW < 1 || C < 1) return ab_errorf("avgpool_backward: bad shape N=%d HW=%d C=%d", N, HW, C);
    const int parts = cpu_parallel_parts(be, (size_t)N, 1);
    avg_job j = {HW, C, t, dy, dx, cpu_scratch_get(be, CPU_SLOT_LAYER_X, (size_t)parts * 2 * C)};
    if (!j.buf) return -1;
    cpu_parallel_for(be, (size_t)N, 1, avgpool_bwd_range, &j);
    return 0;
}

/* ---- element-wise add ----
 * fp16 in registers where the CPU converts in vectors (cpu_add_f16). The residual blocks' tensors
 * (65K to 524K values with the 7x7 stem) stay in the caches, where widening both operands into a
 * block, adding and rounding the block took the fp16 add 1.4 to 2.2 times the fp32 add's time; in
 * registers, 0.8 to 1.3 times (results/cpu/2026-12-07-epyc-2core/amp-passes/). bf16, and fp16 on
 * a CPU without AVX2 and F16C, widened a block at a time. */

typedef struct {
    ab_dtype t;
    const void *a, *b;
    int relu;
    void *y;
} add_job;

static inline __attribute__((always_inline)) void add_range_body(void *ctx, int part, size_t lo, size_t hi) {
    (void)part;
    const add_job *j = ctx;
    if (j->t == AB_F32) {
        const float *a = j->a, *b = j->b;
        float *y = j->y;
        if (j->relu) /* relu_forward's rule */
            for (size_t i = lo; i < hi; i++) {
                const float v = a[i] + b[i];
                y[i] = (v > 0.0f || v != v) ? v : 0.0f;
            }
        else
            for (size_t i = lo; i < hi; i++) y[i] = a[i] + b[i];
        return;
    }
    const size_t es = ab_dtype_size(j->t);
    if (j->t == AB_F16 && cpu_add_f16(hi - lo, (const uint16_t *)j->a + lo, (const uint16_t *)j->b + lo, j->relu,
                                      (uint16_t *)j->y + lo))
        return;
    enum { BLK = 1024 };
    float fa[BLK], fb[BLK];
    for (size_t i = lo; i < hi; i += BLK) {
        const size_t m = hi - i < BLK ? hi - i : BLK;
        cpu_widen(m, j->t, (const char *)j->a + i * es, fa);
        cpu_widen(m, j->t, (const char *)j->b + i * es, fb);
        for (size_t k = 0; k < m; k++) fa[k] += fb[k];
        if (j->relu)
            for (size_t k = 0; k < m; k++) fa[k] = (fa[k] > 0.0f || fa[k] != fa[k]) ? fa[k] : 0.0f;
        cpu_narrow(m, fa, j->t, (char *)j->y + i * es);
    }
}
CPU_RANGE_AVX512(add_range)

int ab_cpu_add(ab_backend *be, size_t n, ab_dtype t, const void *a, const void *b, int relu, void *y) {
    AB_TRY(check_dtype("add", t));
    add_job j = {t, a, b, relu, y};
    cpu_parallel_for(be, n, CONVERT_MIN, add_range, &j);
    return 0;
}

/* ---- image batch assembly ---- */

typedef struct {
    const ab_image_layout *L;
    const int32_t *ag;
    int pad;
    ab_dtype ot;
    const uint8_t *data, *labels;
    const int32_t *idx;
    const float (*lut)[256];
    void *out;
    int32_t *labels_out;
    float *rows; /* C H W floats a part (16-bit outputs) */
} gather_images_job;

/* every cache line of n bytes from p, the last byte's included wherever p lies */
static void gather_prefetch(const uint8_t *p, size_t n) {
    for (size_t o = 0; o < n; o += 64) __builtin_prefetch(p + o, 0, 3);
    __builtin_prefetch(p + n - 1, 0, 3);
}

static void gather_images_range(void *ctx, int part, size_t lo, size_t hi) {
    const gather_images_job *j = ctx;
    const ab_image_layout *L = j->L;
    const int C = L->C, H = L->H, W = L->W;
    const size_t D = (size_t)C * H * W;
    const float(*lut)[256] = j->lut;
    /* the part's samples lie scattered over the data set: each one's lines are asked for
     * GATHER_AHEAD samples before it is read, so that the loads overlap instead of each sample's
     * waiting on memory in turn (a part of a large batch does not ask for more than the caches keep) */
    enum { GATHER_AHEAD = 32 };
    for (size_t b = lo; b < hi && b < lo + GATHER_AHEAD; b++) gather_prefetch(j->data + (size_t)j->idx[b] * D, D);
    for (size_t b = lo; b < hi; b++) {
        if (b + GATHER_AHEAD < hi) gather_prefetch(j->data + (size_t)j->idx[b + GATHER_AHEAD] * D, D);
        const uint8_t *img = j->data + (size_t)j->idx[b] * D;
        const int32_t *a = j->ag ? j->ag + 3 * b : NULL;
        const int dy = a ? a[0] - j->pad : 0, dx = a ? a[1] - j->pad : 0, flip = a ? a[2] : 0;
        const int in_place = dy == 0 && dx == 0 && !flip; /* every pixel where it was */
        if (j->labels_out) j->labels_out[b] = j->labels[j->idx[b]];
        void *out = (char *)j->out + b * D * ab_dtype_size(j->ot);
        /* one channel in place: 16 look-ups at a time, stored in the output's type */
        if (in_place && C == 1 && cpu_lut_u8(D, img, lut[0], j->ot, out)) continue;
        float *dst = j->ot == AB_F32 ? (float *)out : j->rows + (size_t)part * D;
        if (in_place && (C == 1 || !L->planar)) {
            /* stored as the output is (H, W, C): one look-up a byte */
            if (C == 1)
                for (size_t i = 0; i < D; i++) dst[i] = lut[0][img[i]];
            else
                for (size_t i = 0; i < D; i += (size_t)C)
                    for (int c = 0; c < C; c++) dst[i + c] = lut[c][img[i + c]];
        } else {
            for (int y = 0; y < H; y++) {
                const int sy = y + dy;
                for (int x = 0; x < W; x++) {
                    const int sx = (flip ? W - 1 - x : x) + dx; /* mirror the crop, then read the padded image */
                    float *o = dst + ((size_t)y * W + x) * C;
                    if (sy < 0 || sy >= H || sx < 0 || sx >= W) {
                        for (int c = 0; c < C; c++) o[c] = lut[c][0];
                    } else if (L->planar) {
                        for (int c = 0; c < C; c++) o[c] = lut[c][img[((size_t)c * H + sy) * W + sx]];
                    } else {
                        for (int c = 0; c < C; c++) o[c] = lut[c][img[((size_t)sy * W + sx) * C + c]];
                    }
                }
            }
        }
        if (j->ot != AB_F32) cpu_narrow(D, dst, j->ot, out);
    }
}

/* samples over the pool, a few a thread (an MNIST sample is 784 look-ups); each sample's pixels
 * through the same look-up table whatever the split */
int ab_cpu_gather_images(ab_backend *be, int B, const ab_image_layout *L, const ab_image_aug *aug, const uint8_t *data,
                         const uint8_t *labels, const int32_t *idx, ab_dtype ot, void *out, int32_t *labels_out) {
    AB_TRY(check_dtype("gather_images", ot));
    const int C = L->C, H = L->H, W = L->W;
    if (B < 0 || C < 1 || C > AB_MAX_CHANNELS || H < 1 || W < 1)
        return ab_errorf("gather_images: bad layout B=%d C=%d H=%d W=%d (1 to %d channels)", B, C, H, W,
                         AB_MAX_CHANNELS);
    const int32_t *ag = aug ? aug->aug : NULL;
    const int pad = ag ? aug->pad : 0;
    if (pad < 0) return ab_errorf("gather_images: negative crop padding %d", pad);
    for (int b = 0; ag && b < B; b++) {
        const int32_t *a = ag + 3 * (size_t)b;
        if (a[0] < 0 || a[0] > 2 * pad || a[1] < 0 || a[1] > 2 * pad || (a[2] != 0 && a[2] != 1))
            return ab_errorf("gather_images: sample %d: crop (%d, %d) flip %d outside [0, %d] / {0, 1}", b, a[0], a[1],
                             a[2], 2 * pad);
    }
    if (B == 0) return 0;
    /* the same expression as gather_normalize, so MNIST batches come out bit for bit the same */
    float lut[AB_MAX_CHANNELS][256];
    for (int c = 0; c < C; c++)
        for (int v = 0; v < 256; v++) lut[c][v] = ((float)v / 255.0f - L->mean[c]) / L->std[c];
    const size_t D = (size_t)C * H * W;
    enum { PER_THREAD = 8 };
    const int parts = cpu_parallel_parts(be, (size_t)B, PER_THREAD);
    float *rows = ot == AB_F32 ? NULL : cpu_scratch_get(be, CPU_SLOT_LAYER_X, D * (size_t)parts);
    if (ot != AB_F32 && !rows) return -1;
    gather_images_job j = {L, ag, pad, ot, data, labels, idx, (const float(*)[256])lut, out, labels_out, rows};
    cpu_parallel_for(be, (size_t)B, PER_THREAD, gather_images_range, &j);
    return 0;
}
