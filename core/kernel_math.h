/* Element arithmetic shared by the CPU backend's loops and the CUDA kernels (AB_HD), so the
 * CPU tests cover the math the GPU runs: optimizer updates, loss-scale unscaling, softmax
 * cross-entropy of one row. */
#ifndef AB_KERNEL_MATH_H
#define AB_KERNEL_MATH_H

#include <math.h>

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

#endif
