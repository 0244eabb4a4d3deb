/* What this x86-64 CPU can run, for the F16C bulk conversions of the CPU backend and the mpi
 * engine's fp16 reduction, and the AVX2 and AVX-512 copies of the element loops. Read from CPUID directly
 * (clang's __builtin_cpu_supports does not know "f16c"), once per translation unit: the answers
 * are cached, so the hot loops may ask on every call.
 * AB_CPU_ISA=avx2 or sse2 in the environment caps what is used (avx2: no AVX-512; sse2: no AVX2
 * and no F16C either), so that one machine runs the copies another would take; the copies give
 * the same bits (test_cpu_copies), only their speed differs. ab_cpu_isa_check says whether the
 * value is one of these. */
#ifndef AB_CPU_FEATURES_H
#define AB_CPU_FEATURES_H

#include <stdlib.h>
#include <string.h>

/* AB_CPU_ISA's cap: 2 none (unset, or avx512), 1 avx2, 0 sse2, -1 a value that is none of these */
static inline int ab_cpu_isa_cap(void) {
    const char *v = getenv("AB_CPU_ISA");
    if (!v || !*v || strcmp(v, "avx512") == 0) return 2;
    return strcmp(v, "avx2") == 0 ? 1 : strcmp(v, "sse2") == 0 ? 0 : -1;
}
/* NULL, or a one-line complaint about AB_CPU_ISA's value */
static inline const char *ab_cpu_isa_check(void) {
    return ab_cpu_isa_cap() < 0 ? "AB_CPU_ISA must be avx512, avx2 or sse2 (the widest copies of the CPU "
                                  "backend's loops to use)"
                                : NULL;
}

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <cpuid.h>
#include <stdatomic.h>

/* F16C with AVX enabled by the OS (the VEX-encoded instructions need the YMM state saved) */
static inline int ab_cpu_detect_f16c(void) {
    if (ab_cpu_isa_cap() == 0) return 0;
    unsigned a, b, c, d;
    if (!__get_cpuid(1, &a, &b, &c, &d)) return 0;
    const unsigned osxsave = 1u << 27, avx = 1u << 28, f16c = 1u << 29;
    if ((c & (osxsave | avx | f16c)) != (osxsave | avx | f16c)) return 0;
    unsigned lo, hi;
    __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
    (void)hi;
    return (lo & 6u) == 6u; /* XMM and YMM state */
}

/* AVX2 and FMA (every CPU with AVX2 has it; the AVX2 copies of the loops use it) with the YMM
 * state enabled by the OS */
static inline int ab_cpu_detect_avx2(void) {
    if (ab_cpu_isa_cap() == 0) return 0;
    unsigned a, b, c, d;
    if (!__get_cpuid(1, &a, &b, &c, &d)) return 0;
    const unsigned fma = 1u << 12, osxsave = 1u << 27, avx = 1u << 28;
    if ((c & (fma | osxsave | avx)) != (fma | osxsave | avx)) return 0;
    if (!__get_cpuid_count(7, 0, &a, &b, &c, &d) || !(b & (1u << 5))) return 0;
    unsigned lo, hi;
    __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
    (void)hi;
    return (lo & 6u) == 6u;
}

/* AVX-512 F, DQ, BW and VL with the opmask and ZMM state enabled by the OS */
static inline int ab_cpu_detect_avx512(void) {
    if (ab_cpu_isa_cap() == 1 || !ab_cpu_detect_avx2()) return 0;
    unsigned a, b, c, d;
    if (!__get_cpuid_count(7, 0, &a, &b, &c, &d)) return 0;
    const unsigned f = 1u << 16, dq = 1u << 17, bw = 1u << 30, vl = 1u << 31;
    if ((b & (f | dq | bw | vl)) != (f | dq | bw | vl)) return 0;
    unsigned lo, hi;
    __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
    (void)hi;
    return (lo & 0xe6u) == 0xe6u; /* XMM, YMM, opmask, ZMM_Hi256, Hi16_ZMM */
}

/* the answers above, CPUID run once (every thread gets the same answer, so a race is harmless) */
#define AB_CPU_CACHED(name, detect)                                                                 \
    static inline int name(void) {                                                                  \
        static atomic_int cached = -1;                                                              \
        int v = atomic_load_explicit(&cached, memory_order_relaxed);                                \
        if (v < 0) atomic_store_explicit(&cached, v = detect(), memory_order_relaxed);              \
        return v;                                                                                   \
    }
AB_CPU_CACHED(ab_cpu_has_f16c, ab_cpu_detect_f16c)
AB_CPU_CACHED(ab_cpu_has_avx2, ab_cpu_detect_avx2)
AB_CPU_CACHED(ab_cpu_has_avx512, ab_cpu_detect_avx512)
#undef AB_CPU_CACHED
#else
static inline int ab_cpu_has_f16c(void) { return 0; }
static inline int ab_cpu_has_avx2(void) { return 0; }
static inline int ab_cpu_has_avx512(void) { return 0; }
#endif

#endif
