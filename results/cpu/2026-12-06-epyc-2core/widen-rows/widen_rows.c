/* Widening a column tile of an fp16 filter (512 rows x 576 columns of a 4608-wide filter: ResNet-50's
 * last 3x3 convolution, its backward-data product cut by columns), one thread, the source cold (8
 * copies in turn, 37 MB). Four loops side by side, then the library's cpu_widen_rows:
 *   branch:    a NaN/infinity check and a branch every 16 values (the loop before this change)
 *   check:     the check accumulated into a mask register, no branch
 *   prefetch:  the same, with the lines of the row 4 rows on asked for before each row
 *   contiguous: the same number of values widened from one contiguous run (the bound)
 * Build from the repository root after building build-dev:
 *   cc -O2 -march=native -Icore -Ikernels/cpu results/cpu/2026-12-06-epyc-2core/widen-rows/widen_rows.c \
 *      build-dev/libabcpu.a build-dev/libabcore.a build-dev/libabplatform.a -ldnnl -lopenblas -lgomp -lm -lpthread */
#include <immintrin.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "backend.h"
#include "half.h"
#include "runtime_cpu.h"

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + 1e-9 * t.tv_nsec;
}

enum { K = 512, N = 4608, T = 576, COPIES = 8 };

__attribute__((target("avx512f,avx512bw,avx512vl,f16c"))) static void rows_branch(const uint16_t *s, float *d) {
    const __m256i e = _mm256_set1_epi16(0x7c00);
    for (int r = 0; r < K; r++)
        for (int i = 0; i < T; i += 16) {
            const __m256i h = _mm256_loadu_si256((const __m256i *)(s + (size_t)r * N + i));
            if (_mm256_movemask_epi8(_mm256_cmpeq_epi16(_mm256_and_si256(h, e), e)))
                for (int k = 0; k < 16; k++) d[(size_t)r * T + i + k] = ab_f16_to_f32(s[(size_t)r * N + i + k]);
            else
                _mm512_storeu_ps(d + (size_t)r * T + i, _mm512_cvtph_ps(h));
        }
}
__attribute__((target("avx512f,avx512bw,avx512vl,f16c"))) static int rows_check(const uint16_t *s, float *d, int ahead) {
    const __m256i e = _mm256_set1_epi16(0x7c00);
    __mmask16 bad = 0;
    for (int r = 0; r < K; r++) {
        if (ahead && r + ahead < K)
            for (int b = 0; b < T * 2; b += 64) _mm_prefetch((const char *)(s + (size_t)(r + ahead) * N) + b, _MM_HINT_T0);
        for (int i = 0; i < T; i += 16) {
            const __m256i h = _mm256_loadu_si256((const __m256i *)(s + (size_t)r * N + i));
            bad |= _mm256_cmpeq_epi16_mask(_mm256_and_si256(h, e), e);
            _mm512_storeu_ps(d + (size_t)r * T + i, _mm512_cvtph_ps(h));
        }
    }
    return bad != 0;
}

int main(void) {
    if (!__builtin_cpu_supports("avx512bw")) {
        printf("widen_rows: this CPU has no AVX-512\n");
        return 0;
    }
    float *w = aligned_alloc(64, 4L * K * T);
    uint16_t *B[COPIES];
    for (int q = 0; q < COPIES; q++) {
        B[q] = malloc(2L * K * N);
        for (long i = 0; i < (long)K * N; i++) B[q][i] = ab_f32_to_f16((float)(rand() % 2001 - 1000) / 1000.0f);
    }
    printf("us to widen one 512 x 4608 filter by tiles of 576 columns (one thread; 8 cold copies, mean):\n");
    for (int rep = 0; rep < 5; rep++) {
        double t[5] = {0};
        int bad = 0;
        for (int v = 0; v < 5; v++)
            for (int q = 0; q < COPIES; q++)
                for (int c = 0; c < N; c += T) {
                    const uint16_t *s = B[q] + c;
                    const double t0 = now();
                    if (v == 0) rows_branch(s, w);
                    else if (v == 1) bad |= rows_check(s, w, 0);
                    else if (v == 2) bad |= rows_check(s, w, 4);
                    else if (v == 3) cpu_widen((size_t)K * T, AB_F16, B[q] + (size_t)c * K, w);
                    else cpu_widen_rows(K, T, AB_F16, s, N, w, T);
                    t[v] += now() - t0;
                }
        printf("  branch %6.0f   check %6.0f   prefetch %6.0f   contiguous %6.0f   cpu_widen_rows %6.0f%s\n",
               t[0] / COPIES * 1e6, t[1] / COPIES * 1e6, t[2] / COPIES * 1e6, t[3] / COPIES * 1e6,
               t[4] / COPIES * 1e6, bad ? "  (a NaN or infinity seen)" : "");
    }
    return 0;
}
