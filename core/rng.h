/* Seeded, reproducible random numbers (xoshiro256** seeded by splitmix64): uniform, normal,
 * permutations. Same seed, same stream, on every platform. */
#ifndef AB_RNG_H
#define AB_RNG_H

#include <stddef.h>
#include <stdint.h>

typedef struct {
    uint64_t s[4];
} ab_rng;

void ab_rng_seed(ab_rng *r, uint64_t seed);
uint64_t ab_rng_u64(ab_rng *r);
double ab_rng_uniform(ab_rng *r);             /* [0, 1) with 53 random bits */
float ab_rng_uniform_range(ab_rng *r, float lo, float hi);
double ab_rng_normal(ab_rng *r);              /* standard normal (Box-Muller) */
uint64_t ab_rng_below(ab_rng *r, uint64_t n); /* uniform in [0, n), no modulo bias */
void ab_rng_permutation(ab_rng *r, int32_t *out, size_t n); /* Fisher-Yates over 0..n-1 */

#endif
