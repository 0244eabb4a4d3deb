/* test_cpu_gemm: the CPU backend's two product paths beside each other.
 *   fp32     every transpose, alpha, beta, leading dimensions wider than the matrix, shapes split
 *            over the pool by rows and by columns and too small to split: against a float64
 *            product within fp32's rounding (AB_TOL_FP32_REL times the sum of |a||b|), so the
 *            library under cpu_sgemm (oneDNN's sgemm, OpenBLAS's without it) is held to it.
 *   bf16     where the CPU multiplies bf16 natively (AVX512-BF16 or AMX through oneDNN): the
 *            native product against the emulated reference (operands widened exactly, fp32 sgemm)
 *            on the same operands, with bias, ReLU, alpha, beta and bf16 or fp32 outputs. Both
 *            accumulate the exact products of bf16 values in fp32, so they differ by summation
 *            order alone: within fp32's rounding before the output is rounded, and by at most one
 *            bf16 unit in the last place after. A CPU without the instructions (or a build without
 *            oneDNN) skips this part and says why.
 *   threads  the same products on 1 and 2 threads, bit for bit (fp32, fp16 with a bias, native bf16;
 *            a small transposed fp16 or emulated-bf16 A, which 2 threads each widen their own
 *            columns of, in gemm and in gemm_fold with a padded leading dimension).
 *   transpose  the copy that turns a transposed B into an untransposed one before the products
 *            (cpu_transpose_par, cpu_transpose): fp32, fp16 (every bit pattern, infinities and
 *            signalling NaNs among them; and finite values alone, which the F16C path converts) and
 *            bf16, widened exactly, bit for bit against the scalar conversions, at shapes with ragged
 *            edges and padded leading dimensions whose padding must stay as it was. Under
 *            AB_CPU_ISA=sse2 (test_cpu_gemm_sse2) it takes the copy without AVX registers.
 * --emulated-only: the bf16 parts are skipped as on such a CPU (the skip path checked anywhere). */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend.h"
#include "backend_cpu.h"
#include "half.h"
#include "rng.h"
#include "runtime_cpu.h"
#include "tolerances.h"

static int failures;
static ab_rng rng;

static float uniform(void) { return (float)(ab_rng_uniform(&rng) * 2.0 - 1.0); }

/* op(X)[r][c] of a row-major matrix stored with leading dimension ld */
static double at(const float *X, int t, int ld, int r, int c) { return t ? X[(size_t)c * ld + r] : X[(size_t)r * ld + c]; }

static void check_fp32(ab_backend *be, int ta, int tb, int M, int N, int K, float alpha, float beta, int pad) {
    const int lda = (ta ? M : K) + pad, ldb = (tb ? K : N) + pad, ldc = N + pad;
    const size_t na = (size_t)(ta ? K : M) * lda, nb = (size_t)(tb ? N : K) * ldb, nc = (size_t)M * ldc;
    float *A = malloc(na * 4), *B = malloc(nb * 4), *C = malloc(nc * 4), *C0 = malloc(nc * 4);
    if (!A || !B || !C || !C0) abort();
    for (size_t i = 0; i < na; i++) A[i] = uniform();
    for (size_t i = 0; i < nb; i++) B[i] = uniform();
    for (size_t i = 0; i < nc; i++) C[i] = C0[i] = uniform();
    if (be->ops->gemm(be, ta, tb, M, N, K, alpha, AB_F32, A, lda, AB_F32, B, ldb, NULL, AB_EPI_NONE, beta, AB_F32, C,
                      ldc) != 0) {
        printf("FAIL fp32 %dx%dx%d: %s\n", M, N, K, ab_error());
        failures++;
        goto out;
    }
    double worst = 0.0;
    int bad = 0;
    for (int i = 0; i < M; i++)
        for (int j = 0; j < N; j++) {
            double s = 0.0, mag = 0.0;
            for (int k = 0; k < K; k++) {
                const double p = at(A, ta, lda, i, k) * at(B, tb, ldb, k, j);
                s += p;
                mag += fabs(p);
            }
            const double ref = alpha * s + beta * (double)C0[(size_t)i * ldc + j];
            const double scale = fabs(alpha) * mag + fabs(beta * (double)C0[(size_t)i * ldc + j]) + 1e-30;
            const double err = fabs(C[(size_t)i * ldc + j] - ref) / scale;
            if (!(err <= AB_TOL_FP32_REL)) bad++;
            if (err > worst || err != err) worst = err;
        }
    for (int i = 0; i < M; i++) /* the padding between rows stays as it was */
        for (int j = N; j < ldc; j++)
            if (C[(size_t)i * ldc + j] != C0[(size_t)i * ldc + j]) bad++;
    printf("%s fp32 %5d x %5d x %5d %c%c alpha %g beta %g pad %d: worst error %.2e of sum |a b| (tolerance %.0e)\n",
           bad ? "FAIL" : "ok  ", M, N, K, ta ? 'T' : 'N', tb ? 'T' : 'N', alpha, beta, pad, worst, AB_TOL_FP32_REL);
    failures += bad != 0;
out:
    free(A), free(B), free(C), free(C0);
}

static float bf16_ulp(float v) {
    const uint16_t h = ab_f32_to_bf16(v);
    return fabsf(ab_bf16_to_f32((uint16_t)(h | 1u)) - ab_bf16_to_f32((uint16_t)(h & ~1u))) + 1e-38f;
}

static void check_bf16(ab_backend *be, int ta, int tb, int M, int N, int K, float alpha, float beta, int with_bias,
                       ab_epilogue epi, ab_dtype ct) {
    const int lda = ta ? M : K, ldb = tb ? K : N, ldc = N;
    const size_t na = (size_t)M * K, nb = (size_t)K * N, nc = (size_t)M * N, cs = ab_dtype_size(ct);
    uint16_t *A = malloc(na * 2), *B = malloc(nb * 2), *bias = malloc((size_t)N * 2);
    void *Cn = malloc(nc * cs), *Ce = malloc(nc * cs);
    float *mag = calloc(nc, sizeof *mag);
    if (!A || !B || !bias || !Cn || !Ce || !mag) abort();
    for (size_t i = 0; i < na; i++) A[i] = ab_f32_to_bf16(uniform());
    for (size_t i = 0; i < nb; i++) B[i] = ab_f32_to_bf16(uniform());
    for (int j = 0; j < N; j++) bias[j] = ab_f32_to_bf16(uniform());
    for (size_t i = 0; i < nc; i++) ab_store(Cn, i, ct, uniform());
    memcpy(Ce, Cn, nc * cs);
    for (int i = 0; i < M; i++) /* sum |a b| per element: the scale of a summation-order difference */
        for (int k = 0; k < K; k++) {
            const float a = ab_bf16_to_f32(ta ? A[(size_t)k * lda + i] : A[(size_t)i * lda + k]);
            for (int j = 0; j < N; j++)
                mag[(size_t)i * N + j] += fabsf(a * ab_bf16_to_f32(tb ? B[(size_t)j * ldb + k] : B[(size_t)k * ldb + j]));
        }
    const void *bp = with_bias ? bias : NULL;
    int rc = 0;
    ab_backend_cpu_set_bf16_native(be, 0);
    rc |= be->ops->gemm(be, ta, tb, M, N, K, alpha, AB_BF16, A, lda, AB_BF16, B, ldb, bp, epi, beta, ct, Ce, ldc);
    ab_backend_cpu_set_bf16_native(be, 1);
    rc |= be->ops->gemm(be, ta, tb, M, N, K, alpha, AB_BF16, A, lda, AB_BF16, B, ldb, bp, epi, beta, ct, Cn, ldc);
    int bad = rc != 0, same = 0;
    double worst = 0.0;
    for (size_t i = 0; i < nc; i++) {
        const float n = ab_load(Cn, i, ct), e = ab_load(Ce, i, ct);
        /* fp32 rounding of a K-term sum in two orders, then (bf16 output) one rounding each */
        const double tol = AB_TOL_FP32_REL * fabs(alpha) * mag[i] + (ct == AB_BF16 ? bf16_ulp(e) : 0.0);
        const double d = fabs((double)n - e);
        if (!(d <= tol)) bad++;
        same += n == e;
        if (d / (tol + 1e-30) > worst || d != d) worst = d / (tol + 1e-30);
    }
    printf("%s bf16 %5d x %5d x %5d %c%c alpha %g beta %g%s%s -> %s: native against emulated, worst %.2f of the "
           "tolerance, %.1f%% identical%s\n",
           bad ? "FAIL" : "ok  ", M, N, K, ta ? 'T' : 'N', tb ? 'T' : 'N', alpha, beta, with_bias ? " bias" : "",
           epi == AB_EPI_RELU ? " relu" : "", ab_dtype_name(ct), worst, 100.0 * same / (double)nc,
           rc ? " (an op failed)" : "");
    failures += bad != 0;
    free(A), free(B), free(bias), free(Cn), free(Ce), free(mag);
}

/* the same product on 1 and on 2 threads, bit for bit: the tiles a product is cut into, and so each
 * library call's shape, depend on the shape alone (cpu_gemm_tile) */
static void check_threads(ab_backend *one, ab_backend *two, int ta, int tb, int M, int N, int K, ab_dtype t,
                          ab_dtype ct, int with_bias) {
    const int lda = ta ? M : K, ldb = tb ? K : N;
    const size_t es = ab_dtype_size(t), cs = ab_dtype_size(ct);
    void *A = malloc((size_t)M * K * es), *B = malloc((size_t)K * N * es), *bias = malloc((size_t)N * es);
    void *C1 = malloc((size_t)M * N * cs), *C2 = malloc((size_t)M * N * cs);
    if (!A || !B || !bias || !C1 || !C2) abort();
    for (size_t i = 0; i < (size_t)M * K; i++) ab_store(A, i, t, uniform());
    for (size_t i = 0; i < (size_t)K * N; i++) ab_store(B, i, t, uniform());
    for (int i = 0; i < N; i++) ab_store(bias, (size_t)i, t, uniform());
    const void *bp = with_bias ? bias : NULL;
    const int rc = one->ops->gemm(one, ta, tb, M, N, K, 1.0f, t, A, lda, t, B, ldb, bp, AB_EPI_NONE, 0.0f, ct, C1, N) |
                   two->ops->gemm(two, ta, tb, M, N, K, 1.0f, t, A, lda, t, B, ldb, bp, AB_EPI_NONE, 0.0f, ct, C2, N);
    const int same = memcmp(C1, C2, (size_t)M * N * cs) == 0;
    printf("%s %s %5d x %5d x %5d %c%c%s -> %s: 1 and 2 threads %s\n", rc || !same ? "FAIL" : "ok  ", ab_dtype_name(t),
           M, N, K, ta ? 'T' : 'N', tb ? 'T' : 'N', with_bias ? " bias" : "", ab_dtype_name(ct),
           same ? "bit for bit the same" : "differ");
    failures += rc || !same;
    free(A), free(B), free(bias), free(C1), free(C2);
}

/* the AMP weight gradient's product (gemm_fold: op(A) = A^T, the sums rounded to t and stored, then
 * folded on top of them) on 1 and 2 threads, bit for bit, with A's leading dimension wider than M */
static void check_threads_fold(ab_backend *one, ab_backend *two, int M, int N, int K, ab_dtype t) {
    const int lda = M + 8;
    void *A = malloc((size_t)K * lda * 2), *B = malloc((size_t)K * N * 2);
    float *G1 = malloc((size_t)M * N * 4), *G2 = malloc((size_t)M * N * 4);
    if (!A || !B || !G1 || !G2) abort();
    for (size_t i = 0; i < (size_t)K * lda; i++) ab_store(A, i, t, uniform());
    for (size_t i = 0; i < (size_t)K * N; i++) ab_store(B, i, t, uniform());
    int32_t inf1 = 0, inf2 = 0, rc = 0;
    for (int accumulate = 0; accumulate < 2; accumulate++) {
        rc |= one->ops->gemm_fold(one, 1, 0, M, N, K, t, A, lda, t, B, N, t, NULL, G1, accumulate, &inf1);
        rc |= two->ops->gemm_fold(two, 1, 0, M, N, K, t, A, lda, t, B, N, t, NULL, G2, accumulate, &inf2);
    }
    const int same = memcmp(G1, G2, (size_t)M * N * 4) == 0 && inf1 == inf2;
    printf("%s %s %5d x %5d x %5d TN (lda %d) gemm_fold, stored then folded: 1 and 2 threads %s\n",
           rc || !same ? "FAIL" : "ok  ", ab_dtype_name(t), M, N, K, lda, same ? "bit for bit the same" : "differ");
    failures += rc || !same;
    free(A), free(B), free(G1), free(G2);
}

/* dst (cols x rows, ldd) = src^T (rows x cols of type t, lds) widened, over the pool and on one
 * thread, against ab_load element by element (bits compared: NaNs keep theirs), the destination's
 * padding left as it was. fp16/bf16 sources: every bit pattern in turn, or (finite) only the finite
 * fp16 ones, so that whole blocks take the F16C conversion; fp32: random values. */
static void check_transpose(ab_backend *be, ab_dtype t, int rows, int cols, int pad, int finite) {
    const int lds = cols + pad, ldd = rows + pad;
    const size_t ns = (size_t)rows * lds, nd = (size_t)cols * ldd;
    const size_t es = ab_dtype_size(t);
    void *src = malloc(ns * es);
    float *d1 = malloc(nd * 4), *d2 = malloc(nd * 4);
    if (!src || !d1 || !d2) abort();
    for (size_t i = 0, k = 0; i < ns; i++, k++) {
        if (t == AB_F32) {
            ((float *)src)[i] = uniform();
            continue;
        }
        uint16_t h = (uint16_t)(k * 40503u);
        while (finite && (h & 0x7c00u) == 0x7c00u) h = (uint16_t)(++k * 40503u);
        ((uint16_t *)src)[i] = h;
    }
    memset(d1, 0xab, nd * 4), memset(d2, 0xab, nd * 4);
    cpu_transpose_par(be, rows, cols, t, src, lds, d1, ldd);
    cpu_transpose(rows, cols, t, src, lds, d2, ldd);
    int bad = 0, touched = 0;
    const uint32_t fill = 0xababababu;
    for (int c = 0; c < cols; c++) {
        for (int r = 0; r < rows; r++) {
            const float want = ab_load(src, (size_t)r * lds + c, t);
            const size_t o = (size_t)c * ldd + r;
            bad += memcmp(&d1[o], &want, 4) != 0 || memcmp(&d2[o], &want, 4) != 0;
        }
        for (int r = rows; r < ldd; r++) {
            const size_t o = (size_t)c * ldd + r;
            touched += memcmp(&d1[o], &fill, 4) != 0 || memcmp(&d2[o], &fill, 4) != 0;
        }
    }
    printf("%s transpose %s%s %4d x %4d (leading dimensions +%d): %d element(s) not the source's widened bits, "
           "%d padding element(s) written\n",
           bad || touched ? "FAIL" : "ok  ", ab_dtype_name(t), finite ? " (finite)" : "", rows, cols, pad, bad,
           touched);
    failures += bad != 0 || touched != 0;
    free(src), free(d1), free(d2);
}

int main(int argc, char **argv) {
    const int emulated_only = argc > 1 && strcmp(argv[1], "--emulated-only") == 0;
    ab_rng_seed(&rng, 20261205);
    ab_backend *be = ab_backend_cpu_create(2);
    if (!be) return 1;
    /* the transposed-B copy: ragged edges (not multiples of 8 or 16: a strip's last 5, 13 or 3
     * columns after its whole 8-column blocks), padding, sizes the pool splits; 40503 is odd, so
     * 65536 consecutive fp16 elements hold every bit pattern */
    const ab_dtype tts[] = {AB_F32, AB_F16, AB_BF16};
    for (int i = 0; i < 3; i++) {
        check_transpose(be, tts[i], 37, 53, 3, 0);
        check_transpose(be, tts[i], 19, 61, 2, 0);
        check_transpose(be, tts[i], 256, 784, 0, 0);
        check_transpose(be, tts[i], 1029, 67, 5, 0);
    }
    check_transpose(be, AB_F16, 520, 131, 3, 1);
    check_transpose(be, AB_F16, 256, 784, 0, 1);
    /* fp32: shapes split over the pool by rows (M >= N) and by columns, and too small to split */
    const int shapes[][3] = {{256, 96, 128}, {96, 256, 128}, {37, 29, 53}, {1, 384, 64}, {300, 1, 70}};
    for (size_t s = 0; s < sizeof shapes / sizeof *shapes; s++)
        for (int t = 0; t < 4; t++)
            check_fp32(be, t & 1, t >> 1, shapes[s][0], shapes[s][1], shapes[s][2], t == 3 ? 0.125f : 1.0f,
                       t == 2 ? 1.0f : t == 3 ? -0.5f : 0.0f, s == 2 ? 3 : 0);
    /* beta 0: C is written, never read (NaN in C must not come through), in every product path */
    {
        const int M = 96, N = 80, K = 64;
        float *A = malloc((size_t)M * K * 4), *B = malloc((size_t)K * N * 4), *C = malloc((size_t)M * N * 4);
        uint16_t *Ah = malloc((size_t)M * K * 2), *Bh = malloc((size_t)K * N * 2), *Ch = malloc((size_t)M * N * 2);
        if (!A || !B || !C || !Ah || !Bh || !Ch) abort();
        for (int i = 0; i < M * K; i++) Ah[i] = ab_f32_to_bf16(A[i] = uniform());
        for (int i = 0; i < K * N; i++) Bh[i] = ab_f32_to_bf16(B[i] = uniform());
        const struct { ab_dtype t; const void *a, *b; void *c; ab_dtype ct; const char *what; } cases[] = {
            {AB_F32, A, B, C, AB_F32, "fp32"}, {AB_BF16, Ah, Bh, Ch, AB_BF16, "bf16 -> bf16"},
            {AB_BF16, Ah, Bh, C, AB_F32, "bf16 -> fp32"}};
        for (size_t c = 0; c < sizeof cases / sizeof *cases; c++)
            for (int native = 0; native < 2; native++) {
                ab_backend_cpu_set_bf16_native(be, native);
                const size_t cs = ab_dtype_size(cases[c].ct);
                memset(cases[c].c, 0xff, (size_t)M * N * cs); /* NaN in fp32 and bf16 */
                const int rc = be->ops->gemm(be, 0, 0, M, N, K, 1.0f, cases[c].t, cases[c].a, K, cases[c].t, cases[c].b,
                                             N, NULL, AB_EPI_NONE, 0.0f, cases[c].ct, cases[c].c, N);
                int nan = 0;
                for (int i = 0; i < M * N; i++) nan += isnan(ab_load(cases[c].c, (size_t)i, cases[c].ct));
                printf("%s beta 0 over NaN, %s%s: %d NaN left\n", rc || nan ? "FAIL" : "ok  ", cases[c].what,
                       native ? " (native where the CPU has it)" : "", nan);
                failures += rc || nan;
            }
        free(A), free(B), free(C), free(Ah), free(Bh), free(Ch);
    }
    if (emulated_only || !ab_backend_cpu_set_bf16_native(be, 1)) {
        printf("SKIP bf16 native against emulated: %s\n",
               emulated_only ? "--emulated-only" : ab_backend_cpu_bf16_describe(be));
    } else {
        printf("bf16 products: %s\n", ab_backend_cpu_bf16_describe(be));
        for (int t = 0; t < 4; t++) {
            check_bf16(be, t & 1, t >> 1, 256, 96, 384, 1.0f, 0.0f, 0, AB_EPI_NONE, AB_F32);
            check_bf16(be, t & 1, t >> 1, 96, 256, 384, 1.0f, 0.0f, 1, AB_EPI_NONE, AB_BF16);
        }
        check_bf16(be, 0, 1, 128, 128, 64, 0.125f, 0.0f, 0, AB_EPI_NONE, AB_BF16); /* attention scores */
        check_bf16(be, 0, 1, 64, 200, 96, 1.0f, 0.0f, 1, AB_EPI_RELU, AB_BF16);
        check_bf16(be, 1, 0, 96, 80, 256, 1.0f, 1.0f, 0, AB_EPI_NONE, AB_F32); /* gradient accumulation */
        check_bf16(be, 0, 0, 33, 17, 5, 1.0f, 0.5f, 0, AB_EPI_NONE, AB_BF16);
    }
    {
        ab_backend *one = ab_backend_cpu_create(1);
        if (!one) return 1;
        for (int native = 0; native < 2; native++) {
            ab_backend_cpu_set_bf16_native(one, native && !emulated_only);
            ab_backend_cpu_set_bf16_native(be, native && !emulated_only);
            if (native) {
                if (emulated_only || !ab_backend_cpu_set_bf16_native(be, 1)) break;
                check_threads(one, be, 0, 1, 1536, 1024, 1000, AB_BF16, AB_BF16, 1);
                check_threads(one, be, 1, 0, 700, 300, 2048, AB_BF16, AB_F32, 0);
                continue;
            }
            check_threads(one, be, 0, 0, 1536, 1024, 1000, AB_F32, AB_F32, 0);
            check_threads(one, be, 0, 1, 2048, 1536, 384, AB_F32, AB_F32, 1);
            check_threads(one, be, 1, 0, 384, 384, 2048, AB_F32, AB_F32, 0);
            check_threads(one, be, 0, 1, 40, 3000, 256, AB_F32, AB_F32, 0); /* few rows: column tiles */
            check_threads(one, be, 0, 1, 1000, 700, 300, AB_F16, AB_F16, 1);
            check_threads(one, be, 1, 0, 700, 300, 1000, AB_F16, AB_F32, 0);
            /* a transposed fp16 A under CPU_GEMM_OWN_A_MAX: the MLP's first-layer weight gradient,
             * and rows that end in a short tile (200: six of 32, one of 8) */
            check_threads(one, be, 1, 0, 256, 784, 64, AB_F16, AB_F32, 0);
            check_threads(one, be, 1, 0, 200, 300, 96, AB_F16, AB_F16, 0);
            check_threads(one, be, 1, 0, 200, 300, 96, AB_BF16, AB_F32, 0); /* bf16 emulated */
            /* a transposed B copied whose columns make more tiles than its rows: cut by columns
             * (the MLP's first layer at batch 64), an fp16 A widened by each part whole, untransposed
             * and transposed, and a column tile left short (N 200: six of 32, one of 8) */
            check_threads(one, be, 0, 1, 64, 256, 784, AB_F32, AB_F32, 1);
            check_threads(one, be, 0, 1, 64, 256, 784, AB_F16, AB_F16, 1);
            check_threads(one, be, 1, 1, 96, 200, 300, AB_F16, AB_F32, 0);
            check_threads(one, be, 0, 1, 100, 200, 300, AB_BF16, AB_BF16, 1); /* bf16 emulated */
            check_threads_fold(one, be, 256, 784, 64, AB_F16);
            check_threads_fold(one, be, 200, 300, 96, AB_BF16);
        }
        one->ops->destroy(one);
    }
    be->ops->destroy(be);
    printf("%s: %d failure(s)\n", failures ? "FAIL" : "PASS", failures);
    return failures ? 1 : 0;
}
