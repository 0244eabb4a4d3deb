/* Element arithmetic shared by the CPU backend's loops and the CUDA kernels (AB_HD), so the
 * CPU tests cover the math the GPU runs: optimizer updates, loss-scale unscaling, softmax
 * cross-entropy of one row. */
#ifndef AB_KERNEL_MATH_H
#define AB_KERNEL_MATH_H

#include <math.h>
#include <stdint.h>

#include "half.h"

/* One SGD element update. buf may be NULL when momentum == 0. */
static inline AB_HD void ab_sgd_update(float *w, float g, float *buf, float lr, float momentum,
                                       float weight_decay, int first_step) {
    g += weight_decay * *w;
    if (momentum != 0.0f) {
        const float b = first_step ? g : momentum * *buf + g;
        *buf = b;
        g = b;
    }
    *w -= lr * g;
}

/* One AdamW element update; c1 = 1 - beta1^step, c2 = 1 - beta2^step precomputed. */
static inline AB_HD void ab_adamw_update(float *w, float g, float *m, float *v, float lr, float beta1,
                                         float beta2, float eps, float weight_decay, float c1, float c2) {
    *w *= 1.0f - lr * weight_decay;
    *m = beta1 * *m + (1.0f - beta1) * g;
    *v = beta2 * *v + (1.0f - beta2) * g * g;
    const float mhat = *m / c1;
    const float denom = sqrtf(*v / c2) + eps;
    *w -= lr * mhat / denom;
}

static inline AB_HD int ab_is_finite(float x) { return (ab_f32_bits(x) & 0x7f800000u) != 0x7f800000u; }

/* Softmax cross-entropy of one row of C logits (type lt) with label y, in fp32.
 * Returns the loss; when drow != NULL writes drow[j] = gscale * (p_j - [j == y]) in type dt.
 * *argmax receives the index of the largest logit (first one on ties). */
static inline AB_HD float ab_xent_row(int C, ab_dtype lt, const void *row, int y, float gscale,
                                      ab_dtype dt, void *drow, int *argmax) {
    float mx = ab_load(row, 0, lt);
    int am = 0;
    for (int j = 1; j < C; j++) {
        const float v = ab_load(row, (size_t)j, lt);
        if (v > mx || (v != v && mx == mx)) { /* a NaN logit wins: it must show in the loss */
            mx = v;
            am = j;
        }
    }
    float sum = 0.0f;
    for (int j = 0; j < C; j++) sum += expf(ab_load(row, (size_t)j, lt) - mx);
    const float lse = mx + logf(sum);
    const float loss = lse - ab_load(row, (size_t)y, lt); /* before drow, which may alias row */
    if (drow) {
        for (int j = 0; j < C; j++) {
            const float p = expf(ab_load(row, (size_t)j, lt) - lse);
            ab_store(drow, (size_t)j, dt, gscale * (p - (j == y ? 1.0f : 0.0f)));
        }
    }
    *argmax = am;
    return loss;
}

/* Dropout's mask, the same on every backend: a splitmix64 hash of (seed, index); element i is kept
 * when the hash's upper 32 bits are at least threshold = rate * 2^32 (ab_dropout_threshold). */
static inline AB_HD uint32_t ab_dropout_threshold(float rate) {
    const double t = (double)rate * 4294967296.0;
    return t <= 0.0 ? 0u : t >= 4294967295.0 ? 0xffffffffu : (uint32_t)t;
}
static inline AB_HD int ab_dropout_keep(uint64_t seed, uint64_t i, uint32_t threshold) {
    uint64_t x = seed + (i + 1) * 0x9E3779B97F4A7C15ull;
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
    x ^= x >> 31;
    return (uint32_t)(x >> 32) >= threshold;
}

/* exact GELU and its derivative: x Phi(x), Phi(x) + x phi(x) */
static inline AB_HD float ab_gelu(float x) { return 0.5f * x * (1.0f + erff(x * 0.70710678118654752f)); }
static inline AB_HD float ab_gelu_grad(float x) {
    const float cdf = 0.5f * (1.0f + erff(x * 0.70710678118654752f));
    const float pdf = 0.39894228040143268f * expf(-0.5f * x * x);
    return cdf + x * pdf;
}

#endif
