/* xoshiro256** generator and the distributions the core needs. */
#include "rng.h"

#include <math.h>

static uint64_t splitmix64(uint64_t *x) {
    uint64_t z = (*x += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

void ab_rng_seed(ab_rng *r, uint64_t seed) {
    for (int i = 0; i < 4; i++) r->s[i] = splitmix64(&seed);
}

uint64_t ab_rng_u64(ab_rng *r) {
    uint64_t *s = r->s;
    const uint64_t result = rotl(s[1] * 5, 7) * 9, t = s[1] << 17;
    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = rotl(s[3], 45);
    return result;
}

double ab_rng_uniform(ab_rng *r) { return (double)(ab_rng_u64(r) >> 11) * 0x1.0p-53; }

float ab_rng_uniform_range(ab_rng *r, float lo, float hi) {
    return lo + (hi - lo) * (float)ab_rng_uniform(r);
}

double ab_rng_normal(ab_rng *r) {
    double u1 = ab_rng_uniform(r), u2 = ab_rng_uniform(r);
    if (u1 < 1e-300) u1 = 1e-300;
    return sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2);
}

uint64_t ab_rng_below(ab_rng *r, uint64_t n) {
    const uint64_t limit = UINT64_MAX - UINT64_MAX % n;
    uint64_t x;
    do x = ab_rng_u64(r);
    while (x >= limit);
    return x % n;
}

void ab_rng_permutation(ab_rng *r, int32_t *out, size_t n) {
    for (size_t i = 0; i < n; i++) out[i] = (int32_t)i;
    for (size_t i = n; i > 1; i--) {
        const size_t j = (size_t)ab_rng_below(r, i);
        const int32_t t = out[i - 1];
        out[i - 1] = out[j];
        out[j] = t;
    }
}
