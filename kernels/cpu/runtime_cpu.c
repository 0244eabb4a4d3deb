/* The CPU backend's runtime, below its ops: host memory charged to the tracker, scratch buffers
 * (allocated once, grown, kept until destroy), the exact fp16/bf16 <-> fp32 conversions, the
 * thread pool the loops around the GEMMs run on, and sgemm over that pool. backend_cpu.c,
 * layers_cpu.c and transformer_cpu.c call it; it calls none of them. */
#include <cblas.h>
#include <math.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "cpu_features.h"
#include "backend_cpu.h"
#include "half.h"
#include "runtime_cpu.h"
#include "timer.h"

static float f16_table[65536];
static pthread_once_t f16_table_once = PTHREAD_ONCE_INIT;
static void f16_table_init(void) {
    for (uint32_t i = 0; i < 65536; i++) f16_table[i] = ab_f16_to_f32((uint16_t)i);
}

const float *cpu_f16_table(void) {
    pthread_once(&f16_table_once, f16_table_init);
    return f16_table;
}

/* ---- host memory and scratch ---- */

/* Buffers of at least CPU_HUGE_MIN bytes are mappings of their own, CPU_HUGE_ALIGN-aligned, that
 * ask the kernel for transparent huge pages (MADV_HUGEPAGE), which a kernel set to "madvise" in
 * /sys/kernel/mm/transparent_hugepage/enabled gives only to memory that asks: the activations and
 * weights the products read in place then cost fewer TLB misses (FP32 steps of the CIFAR-stem
 * ResNet-50 and MiniLM about 3% faster on a Zen 4: results/cpu/2026-12-07-epyc-zen4-2core/
 * huge-pages/). Their own mappings, unmapped on release, so that the hint never outlives the
 * buffer on memory the C library hands out again. A hint: the kernel may refuse it, and under
 * "never" or on a kernel without them nothing changes. */
static size_t rounded64(size_t bytes) { return (bytes + 63) & ~(size_t)63; }

#if CPU_HUGE_OWN_MAPPING
/* the mapping's first 64 bytes, before the buffer: what cpu_release checks and unmaps */
typedef struct {
    uint64_t magic;
    size_t bytes; /* as asked */
    size_t len;   /* the mapping's */
} huge_head;
#define HUGE_MAGIC 0x6162687567656d31ull /* "abhugem1" */
#define OWN_MAPPING(bytes) (rounded64(bytes) >= CPU_HUGE_MIN)

static void *huge_map(size_t bytes) {
    const long sc = sysconf(_SC_PAGESIZE);
    const size_t page = sc > 0 ? (size_t)sc : 4096, len = (64 + bytes + page - 1) / page * page;
    char *raw = mmap(NULL, len + CPU_HUGE_ALIGN, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (raw == MAP_FAILED) return NULL;
    char *base = (char *)(((uintptr_t)raw + CPU_HUGE_ALIGN - 1) & ~(uintptr_t)(CPU_HUGE_ALIGN - 1));
    /* the slack either side of the aligned span: before it 0 to CPU_HUGE_ALIGN - page bytes, after it the rest */
    if (base > raw) munmap(raw, (size_t)(base - raw));
    munmap(base + len, (size_t)(raw + CPU_HUGE_ALIGN - base));
    (void)madvise(base, len, MADV_HUGEPAGE); /* a hint: refused, the pages are small ones */
    *(huge_head *)base = (huge_head){HUGE_MAGIC, bytes, len};
    return base + 64;
}

static void huge_unmap(void *p, size_t bytes) {
    char *base = (char *)p - 64;
    const huge_head h = *(const huge_head *)base;
    if (h.magic != HUGE_MAGIC) { /* a caller's error that would unmap the wrong memory */
        fprintf(stderr, "ampbench: internal error: %zu bytes released at %p, not a large CPU buffer's start\n", bytes, p);
        abort();
    }
    if (h.bytes != bytes) {
        fprintf(stderr, "ampbench: internal error: a CPU buffer of %zu bytes released as %zu bytes\n", h.bytes, bytes);
        abort();
    }
    munmap(base, h.len);
}
#else
#define OWN_MAPPING(bytes) 0
#define huge_map(bytes) NULL
#define huge_unmap(p, bytes) ((void)0)
#endif

void *cpu_alloc(ab_backend *be, ab_mem_category cat, size_t bytes) {
    if (ab_mem_admit(&be->mem, cat, bytes) != 0) return NULL;
    if (bytes > SIZE_MAX / 2) { /* no machine has it, and the sizes below must not wrap */
        ab_errorf("out of host memory allocating %zu bytes for %s", bytes, ab_mem_category_name(cat));
        return NULL;
    }
    const size_t rounded = rounded64(bytes);
    void *p = OWN_MAPPING(bytes) ? huge_map(bytes) : aligned_alloc(64, rounded ? rounded : 64);
    if (!p) {
        ab_errorf("out of host memory allocating %zu bytes for %s", bytes, ab_mem_category_name(cat));
        return NULL;
    }
    ab_mem_charge(&be->mem, cat, bytes);
    return p;
}

void cpu_release(ab_backend *be, ab_mem_category cat, void *p, size_t bytes) {
    if (!p) return;
    if (OWN_MAPPING(bytes))
        huge_unmap(p, bytes);
    else
        free(p);
    ab_mem_release(&be->mem, cat, bytes);
}

float *cpu_scratch_get(ab_backend *be, int slot, size_t n) {
    cpu_state *st = be->impl;
    scratch_buf *s = &st->scratch[slot];
    const size_t bytes = n * sizeof(float);
    if (s->bytes < bytes) {
        cpu_release(be, AB_MEM_CPU_SCRATCH, s->p, s->bytes);
        s->p = cpu_alloc(be, AB_MEM_CPU_SCRATCH, bytes);
        s->bytes = s->p ? bytes : 0;
    }
    return s->p;
}

/* ---- conversions ---- */

static void widen_f16_f16c(size_t n, const uint16_t *src, float *dst);
static void widen_f16_avx512(size_t n, const uint16_t *src, float *dst);
static void narrow_f16_avx512(size_t n, const float *src, uint16_t *dst);
static void widen_bf16(size_t n, const uint16_t *s, float *d);

void cpu_widen(size_t n, ab_dtype t, const void *src, float *dst) {
    if (t == AB_F16) {
        const uint16_t *s = src;
        if (ab_cpu_has_avx512()) {
            widen_f16_avx512(n, s, dst);
            return;
        }
        if (ab_cpu_has_f16c()) {
            widen_f16_f16c(n, s, dst);
            return;
        }
        pthread_once(&f16_table_once, f16_table_init);
        for (size_t i = 0; i < n; i++) dst[i] = f16_table[s[i]];
    } else if (t == AB_BF16) {
        widen_bf16(n, src, dst);
    } else {
        memcpy(dst, src, n * sizeof(float));
    }
}

/* fp32 -> fp16 in bulk. Where the CPU has F16C its conversion instruction is used: it rounds
 * to nearest even with IEEE overflow, subnormal and NaN handling, bit-identical to
 * ab_f32_to_f16 (tests/core/test_half.c checks the two against each other on every tested value).
 * fp16 -> fp32 likewise: exact for every finite value and infinity; a NaN goes through the
 * scalar path after, which keeps a signalling NaN's bits where the instruction would quieten it
 * (test_backend_ops, tests/ops/ref_layers.c, compares all 65536 values, through the tails too). */
#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
/* The conversion instruction quietens a signalling NaN, which the scalar path keeps: the vector
 * loops convert every block as if it held none, note whether any value is a NaN (its magnitude
 * bits above an infinity's 0x7c00; rare in the suite's tensors) and, if one was, pass over the
 * range again and put the NaNs through the scalar path. Finite values and infinities (a loss
 * scale's overflow) come out the same either way. The check is a compare into a register a block,
 * not a branch. */
static void widen_f16_fixup(size_t n, const uint16_t *src, float *dst) {
    for (size_t k = 0; k < n; k++)
        if ((src[k] & 0x7fffu) > 0x7c00u) dst[k] = ab_f16_to_f32(src[k]);
}
__attribute__((target("avx,f16c"))) static void widen_f16_f16c(size_t n, const uint16_t *src, float *dst) {
    const __m128i magnitude = _mm_set1_epi16(0x7fff), inf = _mm_set1_epi16(0x7c00);
    __m128i bad = _mm_setzero_si128();
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        const __m128i h = _mm_loadu_si128((const __m128i *)(src + i));
        /* signed 16-bit compare: the magnitude is at most 0x7fff */
        bad = _mm_or_si128(bad, _mm_cmpgt_epi16(_mm_and_si128(h, magnitude), inf));
        _mm256_storeu_ps(dst + i, _mm256_cvtph_ps(h));
    }
    for (; i < n; i++) dst[i] = ab_f16_to_f32(src[i]);
    if (_mm_movemask_epi8(bad)) widen_f16_fixup(n, src, dst);
}
__attribute__((target("avx,f16c"))) static void narrow_f16_f16c(size_t n, const float *src, uint16_t *dst) {
    size_t i = 0;
    for (; i + 8 <= n; i += 8)
        _mm_storeu_si128((__m128i *)(dst + i), _mm256_cvtps_ph(_mm256_loadu_ps(src + i), _MM_FROUND_TO_NEAREST_INT));
    for (; i < n; i++) dst[i] = ab_f32_to_f16(src[i]);
}
/* the same conversions 16 values at a time where the CPU has AVX-512 (its conversion instructions
 * round and handle NaN, infinity and subnormals as F16C's do) */
__attribute__((target("avx512f,avx512dq,avx512bw,avx512vl,f16c"))) static void widen_f16_avx512(size_t n,
                                                                                              const uint16_t *src,
                                                                                              float *dst) {
    const __m256i magnitude = _mm256_set1_epi16(0x7fff), inf = _mm256_set1_epi16(0x7c00);
    __mmask16 bad = 0;
    size_t i = 0;
    for (; i + 16 <= n; i += 16) {
        const __m256i h = _mm256_loadu_si256((const __m256i *)(src + i));
        bad |= _mm256_cmpgt_epu16_mask(_mm256_and_si256(h, magnitude), inf);
        _mm512_storeu_ps(dst + i, _mm512_cvtph_ps(h));
    }
    if (i < n) { /* the last 1 to 15 through masks (im2col's spans are often short: 21 values in a 7x7 stem) */
        const __mmask16 m = (__mmask16)((1u << (n - i)) - 1u);
        const __m256i h = _mm256_maskz_loadu_epi16(m, src + i);
        bad |= _mm256_mask_cmpgt_epu16_mask(m, _mm256_and_si256(h, magnitude), inf);
        _mm512_mask_storeu_ps(dst + i, m, _mm512_cvtph_ps(h));
    }
    if (bad) widen_f16_fixup(n, src, dst);
}
__attribute__((target("avx512f,avx512dq,avx512bw,avx512vl,f16c"))) static void narrow_f16_avx512(size_t n,
                                                                                               const float *src,
                                                                                               uint16_t *dst) {
    size_t i = 0;
    for (; i + 16 <= n; i += 16)
        _mm256_storeu_si256((__m256i *)(dst + i),
                            _mm512_cvtps_ph(_mm512_loadu_ps(src + i), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
    if (i < n) { /* the last 1 to 15 through masks; the conversion kept in a register (as a masked
                  * store's source, AMD's Zen 4 and 5 take it as a slow microcoded instruction) */
        const __mmask16 m = (__mmask16)((1u << (n - i)) - 1u);
        __m256i h = _mm512_cvtps_ph(_mm512_maskz_loadu_ps(m, src + i), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
        __asm__("" : "+v"(h));
        _mm256_mask_storeu_epi16(dst + i, m, h);
    }
}
/* rows of such conversions, each row through the loops above without a call of its own. Rows
 * apart in memory (a column tile of a filter, a head's columns) are short streams the hardware's
 * prefetcher does not follow far enough ahead: the lines of the row WIDEN_ROWS_AHEAD rows on are
 * asked for while this one is converted: a 512 x 4608 fp16 filter by tiles of 576 columns, one
 * thread on the Zen 5 EPYC, 480-510 us without, 320-340 us with, 260-300 us were the rows one
 * contiguous run; with a branch on the check every 16 values, as before, 570-620 us
 * (results/cpu/2026-12-06-epyc-2core/widen-rows/widen_rows.txt). The row's last line is asked for
 * too, where the row does not start on a line. */
enum { WIDEN_ROWS_AHEAD = 4 };
__attribute__((target("avx512f,avx512dq,avx512bw,avx512vl,f16c"))) static void widen_rows_f16_avx512(
    size_t rows, size_t cols, const uint16_t *src, size_t lds, float *dst, size_t ldd) {
    for (size_t r = 0; r < rows; r++) {
        if (r + WIDEN_ROWS_AHEAD < rows) {
            const char *ahead = (const char *)(src + (r + WIDEN_ROWS_AHEAD) * lds);
            for (size_t b = 0; b < cols * 2; b += 64) _mm_prefetch(ahead + b, _MM_HINT_T0);
            _mm_prefetch(ahead + cols * 2 - 1, _MM_HINT_T0);
        }
        widen_f16_avx512(cols, src + r * lds, dst + r * ldd);
    }
}
__attribute__((target("avx512f,avx512dq,avx512bw,avx512vl,f16c"))) static void narrow_rows_f16_avx512(
    size_t rows, size_t cols, const float *src, size_t lds, uint16_t *dst, size_t ldd) {
    for (size_t r = 0; r < rows; r++) narrow_f16_avx512(cols, src + r * lds, dst + r * ldd);
}
/* y = a + b over fp16, each pair widened, added (and put through the ReLU) and rounded in registers:
 * the bits of widening both, adding in fp32 and rounding once. A signalling NaN the conversion
 * quietens comes out of the add as the NaN the add of the kept one gives (the add quietens it,
 * payload and all), so no NaN check is needed. */
#define ADD_F16_RELU(V, v, zero, cmp)                                                                  \
    (relu ? V##_maskz_mov_ps(cmp(v, zero, _CMP_GT_OQ) | cmp(v, v, _CMP_UNORD_Q), v) : v)
__attribute__((target("avx512f,avx512dq,avx512bw,avx512vl,f16c"))) static void add_f16_avx512(
    size_t n, const uint16_t *a, const uint16_t *b, int relu, uint16_t *y) {
    const __m512 zero = _mm512_setzero_ps();
    size_t i = 0;
    for (; i + 16 <= n; i += 16) {
        __m512 v = _mm512_add_ps(_mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(a + i))),
                                 _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(b + i))));
        v = ADD_F16_RELU(_mm512, v, zero, _mm512_cmp_ps_mask);
        _mm256_storeu_si256((__m256i *)(y + i), _mm512_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
    }
    if (i < n) { /* the last 1 to 15 through masks, the conversion kept in a register (narrow_f16_avx512) */
        const __mmask16 m = (__mmask16)((1u << (n - i)) - 1u);
        __m512 v = _mm512_add_ps(_mm512_cvtph_ps(_mm256_maskz_loadu_epi16(m, a + i)),
                                 _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(m, b + i)));
        v = ADD_F16_RELU(_mm512, v, zero, _mm512_cmp_ps_mask);
        __m256i h = _mm512_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
        __asm__("" : "+v"(h));
        _mm256_mask_storeu_epi16(y + i, m, h);
    }
}
#undef ADD_F16_RELU
/* 16 bytes' look-ups in a 256-entry fp32 table held in 16 registers: a two-source permute picks
 * within each 32-entry pair by the low 5 bits, then three rounds of blends by bits 5, 6 and 7 */
__attribute__((target("avx512f,avx512dq,avx512bw,avx512vl"))) static inline __m512 lut_u8_16(const __m512 *t,
                                                                                           __m512i x) {
    const __mmask16 b5 = _mm512_test_epi32_mask(x, _mm512_set1_epi32(32)),
                    b6 = _mm512_test_epi32_mask(x, _mm512_set1_epi32(64)),
                    b7 = _mm512_test_epi32_mask(x, _mm512_set1_epi32(128));
    __m512 r[8];
    for (int k = 0; k < 8; k++) r[k] = _mm512_permutex2var_ps(t[2 * k], x, t[2 * k + 1]);
    for (int k = 0; k < 4; k++) r[k] = _mm512_mask_blend_ps(b5, r[2 * k], r[2 * k + 1]);
    for (int k = 0; k < 2; k++) r[k] = _mm512_mask_blend_ps(b6, r[2 * k], r[2 * k + 1]);
    return _mm512_mask_blend_ps(b7, r[0], r[1]);
}
__attribute__((target("avx512f,avx512dq,avx512bw,avx512vl,f16c"))) static void lut_u8_avx512(size_t n,
                                                                                           const uint8_t *src,
                                                                                           const float *lut,
                                                                                           ab_dtype t, void *dst) {
    __m512 tab[16];
    for (int k = 0; k < 16; k++) tab[k] = _mm512_loadu_ps(lut + 16 * k);
    float *d32 = dst;
    uint16_t *d16 = dst;
    for (size_t i = 0; i < n; i += 16) {
        const __mmask16 m = n - i >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << (n - i)) - 1u);
        const __m512 v = lut_u8_16(tab, _mm512_cvtepu8_epi32(_mm_maskz_loadu_epi8(m, src + i)));
        if (t == AB_F32) {
            _mm512_mask_storeu_ps(d32 + i, m, v);
        } else { /* the conversion kept in a register before the masked store (as narrow_f16_avx512's
                  * tail: a masked store of the conversion is slow microcode on AMD's Zen 4 and 5) */
            __m256i h = _mm512_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
            __asm__("" : "+v"(h));
            _mm256_mask_storeu_epi16(d16 + i, m, h);
        }
    }
}
__attribute__((target("avx2,f16c"))) static void add_f16_f16c(size_t n, const uint16_t *a, const uint16_t *b, int relu,
                                                              uint16_t *y) {
    const __m256 zero = _mm256_setzero_ps();
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        __m256 v = _mm256_add_ps(_mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(a + i))),
                                 _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(b + i))));
        if (relu) /* kept where above 0 or NaN */
            v = _mm256_and_ps(v, _mm256_or_ps(_mm256_cmp_ps(v, zero, _CMP_GT_OQ), _mm256_cmp_ps(v, v, _CMP_UNORD_Q)));
        _mm_storeu_si128((__m128i *)(y + i), _mm256_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
    }
    for (; i < n; i++) {
        const float v = ab_f16_to_f32(a[i]) + ab_f16_to_f32(b[i]);
        y[i] = ab_f32_to_f16(relu && !(v > 0.0f || v != v) ? 0.0f : v);
    }
}
#else
static void narrow_f16_avx512(size_t n, const float *src, uint16_t *dst) { (void)n, (void)src, (void)dst; }
static void widen_f16_avx512(size_t n, const uint16_t *src, float *dst) { (void)n, (void)src, (void)dst; }
static void widen_rows_f16_avx512(size_t rows, size_t cols, const uint16_t *src, size_t lds, float *dst, size_t ldd) {
    (void)rows, (void)cols, (void)src, (void)lds, (void)dst, (void)ldd;
}
static void narrow_rows_f16_avx512(size_t rows, size_t cols, const float *src, size_t lds, uint16_t *dst,
                                   size_t ldd) {
    (void)rows, (void)cols, (void)src, (void)lds, (void)dst, (void)ldd;
}
static void narrow_f16_f16c(size_t n, const float *src, uint16_t *dst) { (void)n, (void)src, (void)dst; }
static void add_f16_avx512(size_t n, const uint16_t *a, const uint16_t *b, int relu, uint16_t *y) {
    (void)n, (void)a, (void)b, (void)relu, (void)y;
}
static void lut_u8_avx512(size_t n, const uint8_t *src, const float *lut, ab_dtype t, void *dst) {
    (void)n, (void)src, (void)lut, (void)t, (void)dst;
}
static void add_f16_f16c(size_t n, const uint16_t *a, const uint16_t *b, int relu, uint16_t *y) {
    (void)n, (void)a, (void)b, (void)relu, (void)y;
}
static void widen_f16_f16c(size_t n, const uint16_t *src, float *dst) { (void)n, (void)src, (void)dst; }
#endif

/* bf16 <-> fp32: the integer formulas of half.h (exact widening; rounding to nearest even, NaN made
 * quiet), branch-free so that they vectorize, with an AVX-512 copy chosen at run time (16 lanes; the
 * same integer arithmetic, so the same bits). The CPU's own bf16 conversion instruction is not used:
 * it flushes subnormal inputs to zero. */
static inline __attribute__((always_inline)) void widen_bf16_loop(size_t n, const uint16_t *restrict s,
                                                                  float *restrict d) {
    for (size_t i = 0; i < n; i++) d[i] = ab_bf16_to_f32(s[i]);
}
static inline __attribute__((always_inline)) void narrow_bf16_loop(size_t n, const float *restrict s,
                                                                   uint16_t *restrict d) {
    for (size_t i = 0; i < n; i++) {
        const uint32_t v = ab_f32_bits(s[i]), nan = (v & 0x7fffffffu) > 0x7f800000u;
        const uint32_t rounded = (v + 0x7fffu + ((v >> 16) & 1u)) >> 16, quiet = (v >> 16) | 0x40u;
        d[i] = (uint16_t)(nan ? quiet : rounded);
    }
}
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
__attribute__((target("avx512f,avx512dq,avx512bw,avx512vl"))) static void widen_bf16_avx512(size_t n,
                                                                                          const uint16_t *s, float *d) {
    widen_bf16_loop(n, s, d);
}
__attribute__((target("avx512f,avx512dq,avx512bw,avx512vl"))) static void narrow_bf16_avx512(size_t n, const float *s,
                                                                                           uint16_t *d) {
    narrow_bf16_loop(n, s, d);
}
#endif
static void widen_bf16(size_t n, const uint16_t *s, float *d) {
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
    if (ab_cpu_has_avx512()) {
        widen_bf16_avx512(n, s, d);
        return;
    }
#endif
    widen_bf16_loop(n, s, d);
}
static void narrow_bf16(size_t n, const float *s, uint16_t *d) {
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
    if (ab_cpu_has_avx512()) {
        narrow_bf16_avx512(n, s, d);
        return;
    }
#endif
    narrow_bf16_loop(n, s, d);
}

int cpu_add_f16(size_t n, const uint16_t *a, const uint16_t *b, int relu, uint16_t *y) {
    if (ab_cpu_has_avx512()) {
        add_f16_avx512(n, a, b, relu, y);
        return 1;
    }
    if (ab_cpu_has_avx2() && ab_cpu_has_f16c()) {
        add_f16_f16c(n, a, b, relu, y);
        return 1;
    }
    return 0;
}

int cpu_lut_u8(size_t n, const uint8_t *src, const float *lut, ab_dtype t, void *dst) {
    if ((t != AB_F32 && t != AB_F16) || !ab_cpu_has_avx512()) return 0;
    lut_u8_avx512(n, src, lut, t, dst);
    return 1;
}

void cpu_narrow(size_t n, const float *src, ab_dtype t, void *dst) {
    if (t == AB_F16) {
        uint16_t *d = dst;
        if (ab_cpu_has_avx512()) {
            narrow_f16_avx512(n, src, d);
            return;
        }
        if (ab_cpu_has_f16c()) {
            narrow_f16_f16c(n, src, d);
            return;
        }
        for (size_t i = 0; i < n; i++) d[i] = ab_f32_to_f16(src[i]);
    } else if (t == AB_BF16) {
        narrow_bf16(n, src, dst);
    } else {
        memcpy(dst, src, n * sizeof(float));
    }
}

void cpu_widen_rows(size_t rows, size_t cols, ab_dtype t, const void *src, size_t lds, float *dst, size_t ldd) {
    const size_t es = ab_dtype_size(t);
    if (rows == 1 || (lds == cols && ldd == cols)) {
        cpu_widen(rows * cols, t, src, dst);
    } else if (t == AB_F16 && ab_cpu_has_avx512()) {
        widen_rows_f16_avx512(rows, cols, src, lds, dst, ldd);
    } else {
        for (size_t r = 0; r < rows; r++) cpu_widen(cols, t, (const char *)src + r * lds * es, dst + r * ldd);
    }
}

void cpu_narrow_rows(size_t rows, size_t cols, const float *src, size_t lds, ab_dtype t, void *dst, size_t ldd) {
    const size_t es = ab_dtype_size(t);
    if (rows == 1 || (lds == cols && ldd == cols)) {
        cpu_narrow(rows * cols, src, t, dst);
    } else if (t == AB_F16 && ab_cpu_has_avx512()) {
        narrow_rows_f16_avx512(rows, cols, src, lds, dst, ldd);
    } else {
        for (size_t r = 0; r < rows; r++) cpu_narrow(cols, src + r * lds, t, (char *)dst + r * ldd * es);
    }
}

/* dst = [dst +] src rounded to t and widened back (a gradient's rounding to the compute type, then
 * its fold): the bits of cpu_narrow into t followed by cpu_widen (and the fold's add, old value
 * first), in one pass with nothing stored in 16 bits; 1 when a value it stores is infinite or NaN.
 * fp16 on AVX-512 or F16C rounds and widens in the registers: the conversion instruction quietens a
 * NaN as ab_f32_to_f16 does, and widening the quiet NaN it gives is exact, so no value takes the
 * scalar path of cpu_widen. src may be dst. */
static inline __attribute__((always_inline)) float bf16_round_trip(float x) {
    const uint32_t v = ab_f32_bits(x), nan = (v & 0x7fffffffu) > 0x7f800000u;
    const uint32_t rounded = (v + 0x7fffu + ((v >> 16) & 1u)) >> 16, quiet = (v >> 16) | 0x40u;
    return ab_bits_f32((nan ? quiet : rounded) << 16);
}
/* 1 for an infinite or NaN value (its exponent all ones), branch-free */
static inline __attribute__((always_inline)) int nonfinite_bits(float v) {
    return (ab_f32_bits(v) & 0x7f800000u) == 0x7f800000u;
}
static inline __attribute__((always_inline)) int round_bf16_loop(size_t n, const float *s, float *d, int acc) {
    int bad = 0;
    if (acc)
        for (size_t i = 0; i < n; i++) {
            d[i] = d[i] + bf16_round_trip(s[i]);
            bad |= nonfinite_bits(d[i]);
        }
    else
        for (size_t i = 0; i < n; i++) {
            d[i] = bf16_round_trip(s[i]);
            bad |= nonfinite_bits(d[i]);
        }
    return bad;
}
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
/* fpclass: quiet NaN (0x01), +inf (0x08), -inf (0x10), signalling NaN (0x80) */
enum { FPCLASS_NONFINITE = 0x99 };
__attribute__((target("avx512f,avx512dq,avx512bw,avx512vl,f16c"))) static int round_f16_avx512(size_t n,
                                                                                            const float *s, float *d,
                                                                                            int acc) {
    size_t i = 0;
    __mmask16 bad = 0;
    for (; i + 16 <= n; i += 16) {
        const __m512 r = _mm512_cvtph_ps(_mm512_cvtps_ph(_mm512_loadu_ps(s + i),
                                                         _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
        const __m512 v = acc ? _mm512_add_ps(_mm512_loadu_ps(d + i), r) : r;
        bad |= _mm512_fpclass_ps_mask(v, FPCLASS_NONFINITE);
        _mm512_storeu_ps(d + i, v);
    }
    if (i < n) { /* the last 1 to 15 through masks */
        const __mmask16 m = (__mmask16)((1u << (n - i)) - 1u);
        const __m512 r = _mm512_cvtph_ps(_mm512_cvtps_ph(_mm512_maskz_loadu_ps(m, s + i),
                                                         _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
        const __m512 v = acc ? _mm512_add_ps(_mm512_maskz_loadu_ps(m, d + i), r) : r;
        bad |= _mm512_mask_fpclass_ps_mask(m, v, FPCLASS_NONFINITE);
        _mm512_mask_storeu_ps(d + i, m, v);
    }
    return bad != 0;
}
__attribute__((target("avx,f16c"))) static int round_f16_f16c(size_t n, const float *s, float *d, int acc) {
    size_t i = 0;
    const __m256 inf = _mm256_set1_ps(INFINITY), sign = _mm256_set1_ps(-0.0f);
    __m256 bad = _mm256_setzero_ps();
    for (; i + 8 <= n; i += 8) {
        const __m256 r = _mm256_cvtph_ps(_mm256_cvtps_ph(_mm256_loadu_ps(s + i), _MM_FROUND_TO_NEAREST_INT));
        const __m256 v = acc ? _mm256_add_ps(_mm256_loadu_ps(d + i), r) : r;
        /* !(|v| < inf): infinite or NaN (unordered) */
        bad = _mm256_or_ps(bad, _mm256_cmp_ps(_mm256_andnot_ps(sign, v), inf, _CMP_NLT_UQ));
        _mm256_storeu_ps(d + i, v);
    }
    int nf = _mm256_movemask_ps(bad) != 0;
    for (; i < n; i++) {
        const float r = ab_f16_to_f32(ab_f32_to_f16(s[i]));
        d[i] = acc ? d[i] + r : r;
        nf |= nonfinite_bits(d[i]);
    }
    return nf;
}
__attribute__((target("avx512f,avx512dq,avx512bw,avx512vl"))) static int round_bf16_avx512(size_t n, const float *s,
                                                                                         float *d, int acc) {
    return round_bf16_loop(n, s, d, acc);
}
#endif

int cpu_round_trip(size_t n, ab_dtype t, const float *src, float *dst, int accumulate) {
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
    if (t == AB_F16 && ab_cpu_has_avx512()) return round_f16_avx512(n, src, dst, accumulate);
    if (t == AB_F16 && ab_cpu_has_f16c()) return round_f16_f16c(n, src, dst, accumulate);
    if (t == AB_BF16 && ab_cpu_has_avx512()) return round_bf16_avx512(n, src, dst, accumulate);
#endif
    if (t == AB_BF16) return round_bf16_loop(n, src, dst, accumulate);
    int bad = 0;
    for (size_t i = 0; i < n; i++) {
        const float r = t == AB_F16 ? ab_f16_to_f32(ab_f32_to_f16(src[i])) : src[i];
        dst[i] = accumulate ? dst[i] + r : r;
        bad |= nonfinite_bits(dst[i]);
    }
    return bad;
}

/* the conversions over the pool */
typedef struct {
    ab_dtype t;
    const void *src;
    void *dst;
} convert_job;

static void widen_range(void *ctx, int part, size_t lo, size_t hi) {
    (void)part;
    const convert_job *j = ctx;
    cpu_widen(hi - lo, j->t, (const char *)j->src + lo * ab_dtype_size(j->t), (float *)j->dst + lo);
}

static void narrow_range(void *ctx, int part, size_t lo, size_t hi) {
    (void)part;
    const convert_job *j = ctx;
    cpu_narrow(hi - lo, (const float *)j->src + lo, j->t, (char *)j->dst + lo * ab_dtype_size(j->t));
}


void cpu_widen_par(ab_backend *be, size_t n, ab_dtype t, const void *src, float *dst) {
    convert_job j = {t, src, dst};
    cpu_parallel_for(be, n, CONVERT_MIN, widen_range, &j);
}

void cpu_narrow_par(ab_backend *be, size_t n, const float *src, ab_dtype t, void *dst) {
    convert_job j = {t, src, dst};
    cpu_parallel_for(be, n, CONVERT_MIN, narrow_range, &j);
}

/* ---- transposition: dst (cols x rows, leading dimension ldd) = src^T (rows x cols, leading
 * dimension lds), widened to fp32 exactly. oneDNN's sgemm multiplies a transposed B at 8% to 70%
 * less than the same B stored untransposed (Zen 5, oneDNN 2.6: 32 x 512 x 4608 at 143 GFLOP/s on
 * one thread against 477, MiniLM's 256 x 384 x 1536 at 394 against 525); the products copy such a
 * B untransposed first where that pays (ab_cpu_gemm, the convolutions' forward products, the
 * batched products). The sums are the same products in an order oneDNN may pick by the layout:
 * most shapes give the same bits either way, some do not (M <= 8; N of 1024 with a long K), and
 * none depends on the threads. The copy
 * walks strips of TR_STRIP source columns (destination rows) down all the source rows, 8 x 8 blocks
 * in AVX registers where the CPU has AVX2 (fp16 widened by F16C on the way; bf16 by its exact
 * shift); elsewhere, at the edges and for a block holding an fp16 infinity or NaN, a row's values
 * are widened together by cpu_widen (which keeps a signalling NaN's bits) and stored one by one: a
 * copy, the same values either way. Down a strip
 * the destination's rows are written in order and each source line is read whole, where blocks
 * across the rows would write destination rows that a power-of-two stride puts in the same cache
 * sets (3-6x slower at BERT-base's 3072 x 768). ---- */
enum { TR_STRIP = 16 };

typedef struct {
    int rows, cols, lds, ldd;
    ab_dtype t;
    const void *src;
    float *dst;
} transpose_job;

/* source rows [r0, r1) x columns [c0, c1) (at most a strip's), a row's values widened together
 * (cpu_widen: exact, a signalling NaN's bits kept) and stored one by one */
static void tr_plain(const transpose_job *j, int r0, int r1, int c0, int c1) {
    float v[TR_STRIP];
    for (int r = r0; r < r1; r++) {
        const size_t at = (size_t)r * (size_t)j->lds + (size_t)c0;
        const float *row = v;
        if (j->t == AB_F32)
            row = (const float *)j->src + at;
        else
            cpu_widen((size_t)(c1 - c0), j->t, (const uint16_t *)j->src + at, v);
        for (int c = c0; c < c1; c++) j->dst[(size_t)c * (size_t)j->ldd + (size_t)r] = row[c - c0];
    }
}

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
/* the 8 x 8 block at source row r, column c: 0, or -1 where an fp16 value is infinite or NaN (the
 * caller then copies the block through tr_plain) */
__attribute__((target("avx2,f16c"))) static inline int tr8x8(const transpose_job *j, size_t r, size_t c) {
    __m256 x[8];
    if (j->t == AB_F32) {
        const float *s = (const float *)j->src + r * (size_t)j->lds + c;
        for (int i = 0; i < 8; i++) x[i] = _mm256_loadu_ps(s + (size_t)i * (size_t)j->lds);
    } else {
        const uint16_t *s = (const uint16_t *)j->src + r * (size_t)j->lds + c;
        __m128i h[8];
        for (int i = 0; i < 8; i++) h[i] = _mm_loadu_si128((const __m128i *)(s + (size_t)i * (size_t)j->lds));
        if (j->t == AB_F16) {
            const __m128i e = _mm_set1_epi16(0x7c00);
            __m128i any = _mm_setzero_si128();
            for (int i = 0; i < 8; i++) any = _mm_or_si128(any, _mm_cmpeq_epi16(_mm_and_si128(h[i], e), e));
            if (_mm_movemask_epi8(any)) return -1;
            for (int i = 0; i < 8; i++) x[i] = _mm256_cvtph_ps(h[i]);
        } else {
            for (int i = 0; i < 8; i++) x[i] = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h[i]), 16));
        }
    }
    const __m256 t0 = _mm256_unpacklo_ps(x[0], x[1]), t1 = _mm256_unpackhi_ps(x[0], x[1]),
                 t2 = _mm256_unpacklo_ps(x[2], x[3]), t3 = _mm256_unpackhi_ps(x[2], x[3]),
                 t4 = _mm256_unpacklo_ps(x[4], x[5]), t5 = _mm256_unpackhi_ps(x[4], x[5]),
                 t6 = _mm256_unpacklo_ps(x[6], x[7]), t7 = _mm256_unpackhi_ps(x[6], x[7]);
    const __m256 s0 = _mm256_shuffle_ps(t0, t2, 0x44), s1 = _mm256_shuffle_ps(t0, t2, 0xEE),
                 s2 = _mm256_shuffle_ps(t1, t3, 0x44), s3 = _mm256_shuffle_ps(t1, t3, 0xEE),
                 s4 = _mm256_shuffle_ps(t4, t6, 0x44), s5 = _mm256_shuffle_ps(t4, t6, 0xEE),
                 s6 = _mm256_shuffle_ps(t5, t7, 0x44), s7 = _mm256_shuffle_ps(t5, t7, 0xEE);
    float *d = j->dst + c * (size_t)j->ldd + r;
    const size_t ld = (size_t)j->ldd;
    _mm256_storeu_ps(d + 0 * ld, _mm256_permute2f128_ps(s0, s4, 0x20));
    _mm256_storeu_ps(d + 1 * ld, _mm256_permute2f128_ps(s1, s5, 0x20));
    _mm256_storeu_ps(d + 2 * ld, _mm256_permute2f128_ps(s2, s6, 0x20));
    _mm256_storeu_ps(d + 3 * ld, _mm256_permute2f128_ps(s3, s7, 0x20));
    _mm256_storeu_ps(d + 4 * ld, _mm256_permute2f128_ps(s0, s4, 0x31));
    _mm256_storeu_ps(d + 5 * ld, _mm256_permute2f128_ps(s1, s5, 0x31));
    _mm256_storeu_ps(d + 6 * ld, _mm256_permute2f128_ps(s2, s6, 0x31));
    _mm256_storeu_ps(d + 7 * ld, _mm256_permute2f128_ps(s3, s7, 0x31));
    return 0;
}

/* strip [c0, c1) (whole 8-column blocks) down the source rows */
__attribute__((target("avx2,f16c"))) static void tr_strip_avx2(const transpose_job *j, int c0, int c1) {
    const int r8 = j->rows / 8 * 8;
    for (int r = 0; r < r8; r += 8)
        for (int c = c0; c < c1; c += 8)
            if (tr8x8(j, (size_t)r, (size_t)c)) tr_plain(j, r, r + 8, c, c + 8);
    if (r8 < j->rows) tr_plain(j, r8, j->rows, c0, c1);
}
#endif

/* strips [lo, hi) of TR_STRIP source columns */
static void transpose_strips(const transpose_job *j, size_t lo, size_t hi) {
    for (size_t s = lo; s < hi; s++) {
        const int c0 = (int)s * TR_STRIP, c1 = j->cols - c0 < TR_STRIP ? j->cols : c0 + TR_STRIP;
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
        if (ab_cpu_has_avx2() && ab_cpu_has_f16c()) {
            const int c8 = c0 + (c1 - c0) / 8 * 8;
            if (c8 > c0) tr_strip_avx2(j, c0, c8);
            if (c8 < c1) tr_plain(j, 0, j->rows, c8, c1);
            continue;
        }
#endif
        tr_plain(j, 0, j->rows, c0, c1);
    }
}

static void transpose_range(void *ctx, int part, size_t lo, size_t hi) {
    (void)part;
    transpose_strips(ctx, lo, hi);
}

void cpu_transpose(int rows, int cols, ab_dtype t, const void *src, int lds, float *dst, int ldd) {
    const transpose_job j = {rows, cols, lds, ldd, t, src, dst};
    transpose_strips(&j, 0, (size_t)((cols + TR_STRIP - 1) / TR_STRIP));
}

void cpu_transpose_par(ab_backend *be, int rows, int cols, ab_dtype t, const void *src, int lds, float *dst,
                       int ldd) {
    if (rows <= 0 || cols <= 0) return;
    transpose_job j = {rows, cols, lds, ldd, t, src, dst};
    /* a part takes at least CONVERT_MIN elements' worth of strips */
    const size_t per_strip = (size_t)TR_STRIP * (size_t)rows;
    cpu_parallel_for(be, (size_t)((cols + TR_STRIP - 1) / TR_STRIP), (CONVERT_MIN + per_strip - 1) / per_strip,
                     transpose_range, &j);
}

/* ---- thread pool: the products' tiles and the loops around them (im2col, col2im, conversions,
 * batch norm, pooling) run on --threads threads, through plain pthreads that spin briefly between
 * jobs and then sleep (OpenMP's, spinning for milliseconds, would compete with OpenBLAS's own
 * threads for the same cores). ---- */

typedef struct {
    cpu_pool *pool;
    int index;
} cpu_worker;

struct cpu_pool {
    pthread_mutex_t mu;
    pthread_cond_t go, done;
    int nworkers, started;
    atomic_int stop, pending;
    atomic_ulong generation; /* a new job is published by storing it (under mu) */
    pthread_t *tid;
    cpu_worker *workers;
    cpu_range_fn fn; /* the current job */
    void *ctx;
    size_t n;
    int parts;
};

static void run_part(cpu_range_fn fn, void *ctx, size_t n, int parts, int i) {
    const size_t lo = n * (size_t)i / (size_t)parts, hi = n * (size_t)(i + 1) / (size_t)parts;
    if (lo < hi) fn(ctx, i, lo, hi);
}

/* Waiting spins first, then sleeps. Waking a sleeping thread through a condition variable took 42
 * to 75 us on a 2-vCPU virtual machine, as long as a whole small op (the MLP's conversions, its
 * optimizer), so a worker watches for the next job, and the caller for the end of the current
 * one, for up to SPIN_S before sleeping: the gaps between ops inside a step are shorter than that.
 * After the first SPIN_YIELD_S the spinner yields each round, so that a thread sharing its core (2
 * ranks of 2 threads on 2 cores) is not held off for long. */
#define SPIN_S 200e-6
#define SPIN_YIELD_S 20e-6

/* a waiter's spin: call spin_more between looks at what it waits for */
typedef struct {
    double t0;
    unsigned rounds;
} spin_state;

/* a pause; every 16th round the clock, and a yield once past SPIN_YIELD_S; 0 once SPIN_S passed */
static int spin_more(spin_state *sp) {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    __asm__ __volatile__("yield");
#endif
    if (++sp->rounds % 16) return 1;
    const double dt = ab_now() - sp->t0;
    if (dt > SPIN_YIELD_S) sched_yield();
    return dt <= SPIN_S;
}

static void *pool_worker(void *arg) {
    cpu_worker *me = arg;
    cpu_pool *pl = me->pool;
    unsigned long seen = 0;
    for (;;) {
        spin_state sp = {ab_now(), 0};
        while (atomic_load_explicit(&pl->generation, memory_order_acquire) == seen &&
               !atomic_load_explicit(&pl->stop, memory_order_relaxed) && spin_more(&sp)) {
        }
        if (atomic_load(&pl->generation) == seen && !atomic_load(&pl->stop)) {
            pthread_mutex_lock(&pl->mu);
            while (!atomic_load(&pl->stop) && atomic_load(&pl->generation) == seen) pthread_cond_wait(&pl->go, &pl->mu);
            pthread_mutex_unlock(&pl->mu);
        }
        if (atomic_load(&pl->stop)) break;
        /* the job's fields were written before the generation was stored, and stay until every
         * worker has counted itself out of pending */
        seen = atomic_load_explicit(&pl->generation, memory_order_acquire);
        const cpu_range_fn fn = pl->fn;
        void *ctx = pl->ctx;
        const size_t n = pl->n;
        const int parts = pl->parts;
        if (me->index < parts) run_part(fn, ctx, n, parts, me->index);
        if (atomic_fetch_sub_explicit(&pl->pending, 1, memory_order_acq_rel) == 1) {
            pthread_mutex_lock(&pl->mu); /* the caller checks pending under mu before it sleeps */
            pthread_cond_signal(&pl->done);
            pthread_mutex_unlock(&pl->mu);
        }
    }
    return NULL;
}

static cpu_pool *pool_start(int nworkers) {
    cpu_pool *pl = calloc(1, sizeof *pl);
    if (!pl) return NULL;
    pl->tid = calloc((size_t)nworkers, sizeof *pl->tid);
    pl->workers = calloc((size_t)nworkers, sizeof *pl->workers);
    if (!pl->tid || !pl->workers) {
        free(pl->tid);
        free(pl->workers);
        free(pl);
        return NULL;
    }
    pthread_mutex_init(&pl->mu, NULL);
    pthread_cond_init(&pl->go, NULL);
    pthread_cond_init(&pl->done, NULL);
    /* The workers run oneDNN's generated sgemm kernels, which point rsp into the heap while they
     * run (oneDNN up to 3.11): a signal handled on such a thread would push its frame onto the heap.
     * So the workers start (inheriting the mask) with every asynchronous signal blocked, and the
     * process's signals go to the threads that do not run them or that handle them on their own
     * stack (ab_cpu_handle_signal). Faults a worker itself raises stay deliverable. */
    sigset_t async, before;
    sigfillset(&async);
    const int faults[] = {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGTRAP, SIGABRT, SIGSYS};
    for (size_t k = 0; k < sizeof faults / sizeof faults[0]; k++) sigdelset(&async, faults[k]);
    pthread_sigmask(SIG_BLOCK, &async, &before);
    for (int i = 0; i < nworkers; i++) {
        pl->workers[i] = (cpu_worker){pl, i + 1};
        if (pthread_create(&pl->tid[i], NULL, pool_worker, &pl->workers[i]) != 0) break;
        pl->started++;
    }
    pthread_sigmask(SIG_SETMASK, &before, NULL);
    pl->nworkers = pl->started;
    return pl;
}

/* An alternate stack for the calling thread unless it has one; kept for the process's life (a
 * handler may run until exit). 256 KiB holds a signal frame with the AVX-512 and AMX state. */
static pthread_mutex_t signal_stacks_mu = PTHREAD_MUTEX_INITIALIZER;
static void *signal_stacks[16]; /* held here, where a leak checker finds them */
static int n_signal_stacks;

static int own_signal_stack(void) {
    stack_t cur;
    if (sigaltstack(NULL, &cur) != 0) return ab_errorf("sigaltstack: cannot read the thread's signal stack");
    if (!(cur.ss_flags & SS_DISABLE)) return 0;
#ifdef _SC_SIGSTKSZ
    const long want = sysconf(_SC_SIGSTKSZ); /* glibc 2.34 on: the kernel's frame size for this CPU */
#else
    const long want = SIGSTKSZ;
#endif
    const size_t size = want > 0 && (size_t)want * 4 > (size_t)256 << 10 ? (size_t)want * 4 : (size_t)256 << 10;
    pthread_mutex_lock(&signal_stacks_mu);
    void *sp = n_signal_stacks < 16 ? malloc(size) : NULL;
    if (sp) signal_stacks[n_signal_stacks++] = sp;
    pthread_mutex_unlock(&signal_stacks_mu);
    if (!sp) return ab_errorf("no memory for a signal stack (%zu bytes, or more than 16 threads asked)", size);
    const stack_t ss = {.ss_sp = sp, .ss_size = size, .ss_flags = 0};
    return sigaltstack(&ss, NULL) == 0 ? 0 : ab_errorf("sigaltstack: cannot set the thread's signal stack");
}

int ab_cpu_handle_signal(int sig, void (*handler)(int)) {
    AB_TRY(own_signal_stack());
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = handler;
    sa.sa_flags = SA_ONSTACK | SA_RESTART;
    sigemptyset(&sa.sa_mask);
    return sigaction(sig, &sa, NULL) == 0 ? 0 : ab_errorf("sigaction(%d): cannot install the handler", sig);
}

void cpu_pool_free(cpu_state *st) {
    cpu_pool *pl = st->pool;
    if (!pl) return;
    pthread_mutex_lock(&pl->mu);
    atomic_store(&pl->stop, 1);
    pthread_cond_broadcast(&pl->go);
    pthread_mutex_unlock(&pl->mu);
    for (int i = 0; i < pl->started; i++) pthread_join(pl->tid[i], NULL);
    pthread_mutex_destroy(&pl->mu);
    pthread_cond_destroy(&pl->go);
    pthread_cond_destroy(&pl->done);
    free(pl->tid);
    free(pl->workers);
    free(pl);
    st->pool = NULL;
}

/* parts used for n items: what cpu_parallel_for will split into (per-part scratch is sized by it) */
int cpu_parallel_parts(ab_backend *be, size_t n, size_t min_per_thread) {
    const cpu_state *st = be->impl;
    size_t parts = st->threads > 1 ? (size_t)st->threads : 1;
    if (min_per_thread < 1) min_per_thread = 1;
    if (n / min_per_thread < parts) parts = n / min_per_thread;
    return parts < 1 ? 1 : (int)parts;
}

void cpu_parallel_for(ab_backend *be, size_t n, size_t min_per_thread, cpu_range_fn fn, void *ctx) {
    cpu_state *st = be->impl;
    int parts = cpu_parallel_parts(be, n, min_per_thread);
    if (parts > 1 && !st->pool) st->pool = pool_start(st->threads - 1); /* on failure: serial */
    cpu_pool *pl = st->pool;
    if (pl && parts > pl->nworkers + 1) parts = pl->nworkers + 1;
    if (parts <= 1 || !pl) {
        /* the same split as in parallel, so that results never depend on the threads */
        for (int i = 0; i < parts; i++) run_part(fn, ctx, n, parts, i);
        return;
    }
    pthread_mutex_lock(&pl->mu); /* a worker about to sleep checks the generation under mu */
    pl->fn = fn;
    pl->ctx = ctx;
    pl->n = n;
    pl->parts = parts;
    atomic_store(&pl->pending, pl->nworkers);
    atomic_fetch_add_explicit(&pl->generation, 1, memory_order_release);
    pthread_cond_broadcast(&pl->go);
    pthread_mutex_unlock(&pl->mu);
    run_part(fn, ctx, n, parts, 0);
    spin_state sp = {ab_now(), 0};
    while (atomic_load_explicit(&pl->pending, memory_order_acquire) > 0 && spin_more(&sp)) {
    }
    if (atomic_load(&pl->pending) > 0) {
        pthread_mutex_lock(&pl->mu);
        while (atomic_load(&pl->pending) > 0) pthread_cond_wait(&pl->done, &pl->mu);
        pthread_mutex_unlock(&pl->mu);
    }
}

/* ---- matrix products over the pool ---- */

typedef struct {
    int ta, tb, M, N, K, lda, ldb, ldc, by_rows, tile;
    float alpha, beta;
    const float *A, *B;
    float *C;
} sgemm_job;

void cpu_sgemm_1(int ta, int tb, int M, int N, int K, float alpha, const float *A, int lda, const float *B, int ldb,
                 float beta, float *C, int ldc) {
    if (cpu_sgemm_onednn(ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc) == 0) return;
    cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, M, N, K, alpha, A, lda, B,
                ldb, beta, C, ldc);
}

static void sgemm_range(void *ctx, int part, size_t lo, size_t hi) {
    (void)part;
    const sgemm_job *j = ctx;
    const int along = j->by_rows ? j->M : j->N;
    for (size_t t = lo; t < hi; t++) {
        const int o = (int)t * j->tile, n = along - o < j->tile ? along - o : j->tile;
        if (j->by_rows) { /* rows o.. of op(A) and C */
            const float *a = j->ta ? j->A + o : j->A + (size_t)o * j->lda;
            cpu_sgemm_1(j->ta, j->tb, n, j->N, j->K, j->alpha, a, j->lda, j->B, j->ldb, j->beta,
                        j->C + (size_t)o * j->ldc, j->ldc);
        } else { /* columns o.. of op(B) and C */
            const float *b = j->tb ? j->B + (size_t)o * j->ldb : j->B + o;
            cpu_sgemm_1(j->ta, j->tb, j->M, n, j->K, j->alpha, j->A, j->lda, b, j->ldb, j->beta, j->C + o, j->ldc);
        }
    }
}

void cpu_sgemm(ab_backend *be, int ta, int tb, int M, int N, int K, float alpha, const float *A, int lda,
               const float *B, int ldb, float beta, float *C, int ldc) {
    const int by_rows = M >= N, along = by_rows ? M : N, tile = cpu_gemm_tile(along, (double)M * N * K);
    sgemm_job j = {ta, tb, M, N, K, lda, ldb, ldc, by_rows, tile, alpha, beta, A, B, C};
    cpu_parallel_for(be, (size_t)((along + tile - 1) / tile), 1, sgemm_range, &j);
}
