/* IEEE binary16 and bfloat16 conversions, bit-exact: round to nearest even, overflow to inf,
 * subnormals kept, NaN stays NaN. Shared by the CPU backend and CUDA kernels (AB_HD), so the
 * CPU tests cover the arithmetic the GPU custom kernels use. */
#ifndef AB_HALF_H
#define AB_HALF_H

#include <stdint.h>
#include <string.h>

#include "ab.h"

static inline AB_HD uint32_t ab_f32_bits(float f) {
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

static inline AB_HD float ab_bits_f32(uint32_t u) {
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

/* float -> binary16. Normal results are rebiased and rounded with integer arithmetic: adding
 * 0xfff plus the lowest kept mantissa bit rounds to nearest even before the 13 dropped bits are
 * shifted out, and a mantissa carry moves into the exponent as it should. Subnormal results are
 * rounded by the FPU itself: adding 0.5f aligns |f| so that the float's ulp (2^-24) equals the
 * half subnormal step, and the hardware's round-to-nearest-even does the rest. */
static inline AB_HD uint16_t ab_f32_to_f16(float f) {
    const uint32_t x = ab_f32_bits(f);
    const uint16_t sign = (uint16_t)((x >> 16) & 0x8000u);
    uint32_t ax = x & 0x7fffffffu;
    if (ax >= 0x7f800000u) /* inf or NaN: NaN keeps its top payload bits and is made quiet */
        return (uint16_t)(sign | 0x7c00u | (ax > 0x7f800000u ? (0x200u | ((ax >> 13) & 0x3ffu)) : 0u));
    if (ax >= 0x477ff000u) /* >= 65520 rounds past 65504 */
        return (uint16_t)(sign | 0x7c00u);
    if (ax < 0x38800000u) { /* below 2^-14: subnormal or zero */
        const float t = ab_bits_f32(ax) + 0.5f;
        return (uint16_t)(sign | (ab_f32_bits(t) - 0x3f000000u));
    }
    ax += 0xc8000fffu + ((ax >> 13) & 1u); /* rebias 127 -> 15 and round */
    return (uint16_t)(sign | (ax >> 13));
}

static inline AB_HD float ab_f16_to_f32(uint16_t h) {
    const uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    const uint32_t e = (h >> 10) & 0x1fu, m = h & 0x3ffu;
    if (e == 0x1f) return ab_bits_f32(sign | 0x7f800000u | (m << 13));
    if (e == 0) {
        const float v = (float)m * 5.9604644775390625e-8f; /* m * 2^-24, exact */
        return sign ? -v : v;
    }
    return ab_bits_f32(sign | ((e + 112u) << 23) | (m << 13));
}

/* float -> bfloat16, round to nearest even; NaN made quiet. */
static inline AB_HD uint16_t ab_f32_to_bf16(float f) {
    const uint32_t x = ab_f32_bits(f);
    if ((x & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((x >> 16) | 0x40u);
    return (uint16_t)((x + 0x7fffu + ((x >> 16) & 1u)) >> 16);
}

static inline AB_HD float ab_bf16_to_f32(uint16_t h) { return ab_bits_f32((uint32_t)h << 16); }

/* value as it would be after a store in element type t and a load back */
static inline AB_HD float ab_round_to(float v, ab_dtype t) {
    return t == AB_F16 ? ab_f16_to_f32(ab_f32_to_f16(v)) : t == AB_BF16 ? ab_bf16_to_f32(ab_f32_to_bf16(v)) : v;
}

static inline AB_HD float ab_load(const void *p, size_t i, ab_dtype t) {
    return t == AB_F32 ? ((const float *)p)[i]
           : t == AB_F16 ? ab_f16_to_f32(((const uint16_t *)p)[i])
                         : ab_bf16_to_f32(((const uint16_t *)p)[i]);
}

/* the bits of v rounded to a 16-bit type t (fp16, else bf16) */
static inline AB_HD uint16_t ab_f32_to_16(ab_dtype t, float v) {
    return t == AB_F16 ? ab_f32_to_f16(v) : ab_f32_to_bf16(v);
}

static inline AB_HD void ab_store(void *p, size_t i, ab_dtype t, float v) {
    if (t == AB_F32)
        ((float *)p)[i] = v;
    else
        ((uint16_t *)p)[i] = ab_f32_to_16(t, v);
}

#endif
