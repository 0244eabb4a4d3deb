/* fp16/bf16 conversion: all 65,536 half bit patterns round-trip; float -> half rounding
 * checked against the compiler's _Float16 on random and edge values (ties, the largest finite
 * value, the smallest subnormal, overflow to inf, NaN). */
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend_cpu.h"
#include "half.h"
#include "rng.h"
#include "tolerances.h"

static uint16_t ref_f16_bits(float f) {
    _Float16 h = (_Float16)f;
    uint16_t u;
    memcpy(&u, &h, 2);
    return u;
}

static float ref_f16_to_f32(uint16_t u) {
    _Float16 h;
    memcpy(&h, &u, 2);
    return (float)h;
}

static int is_nan16(uint16_t h) { return (h & 0x7c00u) == 0x7c00u && (h & 0x3ffu); }

static int failures = 0;
static long checked = 0;

static void check_f32(float f) {
    const uint16_t got = ab_f32_to_f16(f), want = ref_f16_bits(f);
    checked++;
    if (isnan(f)) {
        AB_CHECK(is_nan16(got) && (got & 0x8000u) == (want & 0x8000u), "NaN %08x -> %04x", ab_f32_bits(f), got);
        return;
    }
    AB_CHECK(got == want, "f32 %.9g (%08x) -> %04x, _Float16 gives %04x", (double)f, ab_f32_bits(f), got, want);
}

int main(void) {
    /* every half pattern: widen exactly, narrow back to the same bits (NaN: stays NaN, same sign) */
    for (uint32_t i = 0; i < 65536; i++) {
        const uint16_t h = (uint16_t)i;
        const float f = ab_f16_to_f32(h);
        const uint16_t back = ab_f32_to_f16(f);
        if (is_nan16(h)) {
            AB_CHECK(isnan(f) && is_nan16(back) && (back & 0x8000u) == (h & 0x8000u), "NaN %04x -> %04x", h, back);
            AB_CHECK((back & 0x3ffu) == ((h & 0x3ffu) | 0x200u), "NaN payload %04x -> %04x", h, back);
        } else {
            AB_CHECK(back == h, "half %04x -> %.9g -> %04x", h, (double)f, back);
            const float r = ref_f16_to_f32(h);
            AB_CHECK(memcmp(&f, &r, 4) == 0, "half %04x widens to %.9g, _Float16 gives %.9g", h, (double)f, (double)r);
        }
        /* exact midpoints between this half and the next one up: ties go to even */
        if (!is_nan16(h) && (h & 0x7fffu) < 0x7bffu) {
            const double lo = ab_f16_to_f32(h), hi = ab_f16_to_f32((uint16_t)(h + 1));
            const float mid = (float)((lo + hi) / 2); /* exact in fp32: halves have 11 bits */
            check_f32(mid);
            check_f32(nextafterf(mid, 0.0f));
            check_f32(nextafterf(mid, INFINITY));
        }
    }
    /* edges */
    const float edges[] = {0.0f, -0.0f, 65504.0f, -65504.0f, 65519.99f, 65520.0f, -65520.0f, 65536.0f, 1e10f,
                           INFINITY, -INFINITY, NAN, -NAN, 0x1p-24f, 0x1p-25f, 0x1.8p-25f, 0x1p-26f, -0x1p-24f,
                           0x1p-14f, 0x1.ff8p-15f, 0x1.ffcp-15f, 0x1p-15f, 1.0f, 1.0f + 0x1p-11f, 1.0f + 0x1p-12f,
                           2049.0f, 2051.0f, 3.14159265f, 1e-8f, 6e-8f, FLT_MIN, FLT_MAX, 0x1p-149f};
    for (size_t i = 0; i < sizeof edges / sizeof edges[0]; i++) check_f32(edges[i]);
    /* random bit patterns over the whole float range, and random values in half's range */
    ab_rng r;
    ab_rng_seed(&r, 12345);
    for (int i = 0; i < 2000000; i++) {
        check_f32(ab_bits_f32((uint32_t)ab_rng_u64(&r)));
        check_f32((float)(ab_rng_normal(&r) * ldexp(1.0, (int)ab_rng_below(&r, 48) - 30)));
    }
    /* bf16: exactness on representable values, ties to even, NaN */
    AB_CHECK(ab_f32_to_bf16(1.0f) == 0x3f80, "bf16(1)");
    AB_CHECK(ab_f32_to_bf16(ab_bits_f32(0x3f808000u)) == 0x3f80, "bf16 tie to even (down)");
    AB_CHECK(ab_f32_to_bf16(ab_bits_f32(0x3f818000u)) == 0x3f82, "bf16 tie to even (up)");
    AB_CHECK(ab_f32_to_bf16(ab_bits_f32(0x3f808001u)) == 0x3f81, "bf16 above tie");
    AB_CHECK(ab_f32_to_bf16(ab_bits_f32(0x7f7fffffu)) == 0x7f80, "bf16 overflow to inf");
    AB_CHECK(isnan(ab_bf16_to_f32(ab_f32_to_bf16(NAN))), "bf16 NaN");
    for (uint32_t i = 0; i < 65536; i++)
        if (!((i & 0x7f80u) == 0x7f80u && (i & 0x7fu)))
            AB_CHECK(ab_f32_to_bf16(ab_bf16_to_f32((uint16_t)i)) == i, "bf16 %04x round trip", i);
    /* the CPU backend's bulk conversion (F16C where the CPU has it) equals the scalar one */
    {
        enum { M = 1 << 20 };
        float *v = malloc(M * sizeof(float));
        uint16_t *h = malloc(M * sizeof(uint16_t));
        ab_backend *be = ab_backend_cpu_create(1);
        if (!be) {
            fprintf(stderr, "test_half: %s\n", ab_error());
            return 1;
        }
        ab_rng_seed(&r, 777);
        for (int i = 0; i < M; i++)
            v[i] = (i & 1) ? ab_bits_f32((uint32_t)ab_rng_u64(&r))
                           : (float)(ab_rng_normal(&r) * ldexp(1.0, (int)ab_rng_below(&r, 48) - 30));
        for (size_t i = 0; i < sizeof edges / sizeof edges[0]; i++) v[i * 2 + 1] = edges[i];
        be->ops->cast(be, M, AB_F32, v, AB_F16, h);
        int bad = 0;
        for (int i = 0; i < M && bad < 5; i++) {
            const uint16_t want = ab_f32_to_f16(v[i]);
            if (h[i] != want && !(is_nan16(h[i]) && is_nan16(want))) {
                AB_CHECK(0, "bulk cast of %08x gives %04x, scalar %04x", ab_f32_bits(v[i]), h[i], want);
                bad++;
            }
        }
        /* bf16 likewise (vectorized integer rounding, AVX-512 where the CPU has it): the same bits,
         * NaN included; and widening every bf16 pattern */
        be->ops->cast(be, M, AB_F32, v, AB_BF16, h);
        bad = 0;
        for (int i = 0; i < M && bad < 5; i++)
            if (h[i] != ab_f32_to_bf16(v[i])) {
                AB_CHECK(0, "bulk bf16 cast of %08x gives %04x, scalar %04x", ab_f32_bits(v[i]), h[i],
                         ab_f32_to_bf16(v[i]));
                bad++;
            }
        for (uint32_t i = 0; i < 65536; i++) h[i] = (uint16_t)i;
        be->ops->cast(be, 65536, AB_BF16, h, AB_F32, v);
        bad = 0;
        for (uint32_t i = 0; i < 65536 && bad < 5; i++)
            if (ab_f32_bits(v[i]) != i << 16) {
                AB_CHECK(0, "bulk bf16 widening of %04x gives %08x", i, ab_f32_bits(v[i]));
                bad++;
            }
        be->ops->destroy(be);
        free(v);
        free(h);
    }
    printf("%ld float->half conversions checked against _Float16; %d failures\n", checked, failures);
    return failures ? 1 : 0;
}
