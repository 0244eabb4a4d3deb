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

/* AdamW's scalars for one step, computed on the host by every backend alike: the bias
 * corrections c1 = 1 - beta1^step and c2 = 1 - beta2^step folded into the step size lr / c1 and
 * the factor 1 / sqrt(c2), so that an element costs one square root and one division. */
typedef struct {
    float decay;     /* 1 - lr weight_decay */
    float step_size; /* lr / c1 */
    float inv_bc2;   /* 1 / sqrt(c2), rounded once from double */
} ab_adamw_scalars;

static inline ab_adamw_scalars ab_adamw_scalars_at(float lr, float beta1, float beta2, float weight_decay, int step) {
    const float c1 = 1.0f - powf(beta1, (float)step), c2 = 1.0f - powf(beta2, (float)step);
    ab_adamw_scalars s = {1.0f - lr * weight_decay, lr / c1, (float)(1.0 / sqrt((double)c2))};
    return s;
}

/* One AdamW element update (PyTorch's, decoupled weight decay): w *= 1 - lr wd;
 * m = b1 m + (1 - b1) g; v = b2 v + (1 - b2) g^2; w -= (lr / c1) m / (sqrt(v) / sqrt(c2) + eps),
 * the scalars from ab_adamw_scalars_at. */
static inline AB_HD void ab_adamw_update(float *w, float g, float *m, float *v, float beta1, float beta2, float eps,
                                         float decay, float step_size, float inv_bc2) {
    *w *= decay;
    *m = beta1 * *m + (1.0f - beta1) * g;
    *v = beta2 * *v + (1.0f - beta2) * g * g;
    const float denom = sqrtf(*v) * inv_bc2 + eps;
    *w -= step_size * *m / denom;
}

static inline AB_HD int ab_is_finite(float x) { return (ab_f32_bits(x) & 0x7f800000u) != 0x7f800000u; }

/* The census bin of one value (the log2_hist op of core/backend.h): floor(log2 |v|) - log2_min,
 * clamped to [0, nbins - 1]; nbins for a zero (either sign), nbins + 1 for an infinity or a NaN.
 * Exact, from the bits: a normal float's biased exponent less 127; a subnormal is m * 2^-149 (m its
 * mantissa bits, not 0), and floor(log2 m) is the exponent of m's exact conversion to float. fp16
 * and bf16 values widen to float exactly, so their subnormals land in their own bins too. No
 * branch: every term is computed and one selected, so a loop over it vectorizes. */
#define AB_LOG2_HIST_MAX_BINS 512
static inline AB_HD int ab_log2_slot(float v, int log2_min, int nbins) {
    const uint32_t ax = ab_f32_bits(v) & 0x7fffffffu;
    const int e = (int)(ax >> 23);
    const int sub = (int)(ab_f32_bits((float)(int32_t)(ax & 0x7fffffu)) >> 23) - 127 - 149;
    int b = (e ? e - 127 : sub) - log2_min;
    b = b < 0 ? 0 : b;
    b = b > nbins - 1 ? nbins - 1 : b;
    return ax == 0 ? nbins : e == 255 ? nbins + 1 : b;
}

/* Softmax cross-entropy of one row of C logits (type lt) with label y, in fp32.
 * Returns the loss; when drow != NULL writes drow[j] = gscale * (p_j - [j == y]) in type dt, with
 * p_j = e_j / sum (e_j = expf(x_j - max), as PyTorch's softmax): an fp32 drow holds the e_j of the
 * sum's pass, a 16-bit one takes them computed again (the same values), so one exponential a logit
 * where the storage allows. *argmax receives the index of the largest logit (first one on ties). */
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
    const float xy = ab_load(row, (size_t)y, lt); /* before drow, which may alias row */
    float *e = drow && dt == AB_F32 ? (float *)drow : NULL;
    float sum = 0.0f;
    for (int j = 0; j < C; j++) {
        const float ej = expf(ab_load(row, (size_t)j, lt) - mx);
        if (e) e[j] = ej;
        sum += ej;
    }
    const float loss = mx + logf(sum) - xy;
    if (drow) {
        for (int j = 0; j < C; j++) {
            const float p = (e ? e[j] : expf(ab_load(row, (size_t)j, lt) - mx)) / sum;
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

/* The part ab_exp and ab_exp_nonpos share: for a clamped xc, n = xc log2(e) rounded to nearest
 * (adding 1.5 * 2^23 leaves the integer in the low mantissa bits of *tn, read from there: a
 * float-to-int conversion of NaN would be undefined behaviour), r = xc - n ln2 (ln2 in two parts),
 * and e^r = 1 + r + r^2 Q(r) returned; the caller scales it by 2^n. */
static inline AB_HD float ab_exp_reduced(float xc, float *tn) {
    *tn = xc * 1.44269504f + 12582912.0f;
    const float n = *tn - 12582912.0f;
    const float r = fmaf(-n, 1.42860677e-06f, fmaf(-n, 0.693145752f, xc));
    float q = 1.979117632e-04f;
    q = fmaf(q, r, 1.394463659e-03f);
    q = fmaf(q, r, 8.333495462e-03f);
    q = fmaf(q, r, 4.166629532e-02f);
    q = fmaf(q, r, 1.666666588e-01f);
    q = fmaf(q, r, 5.000000068e-01f);
    return fmaf(r * r, q, r) + 1.0f;
}

/* e^x without a branch, so that a loop over it vectorizes: x = n ln2 + r with |r| <= ln2/2 (ln2 in
 * two parts, Cody and Waite), e^r = 1 + r + r^2 Q(r) with Q of degree 5 (a least-squares fit of
 * ours, relative error 5e-11 on that interval), 2^n from exponent bits in two factors so that
 * n = 128 and n = -126 stay normal. Within 1 ulp of exp for x in [-87.34, 88.72]; 0 below (where
 * e^x is subnormal), inf above, NaN for NaN. The reduction and the polynomials use fmaf, one
 * rounding a step: an FMA instruction on a GPU and in the CPU's AVX2 and AVX-512 copies of a loop,
 * libm's exact fmaf elsewhere, so every one gives the same bits (the backends' and test_backend_ops'
 * builds, with -ffp-contract=off and --fmad=false, fuse nothing else), in a third fewer operations
 * than a multiply and an add. */
static inline AB_HD float ab_exp(float x) {
    float xc = x < -87.33654f ? -87.33654f : x;
    xc = xc > 88.72283f ? 88.72283f : xc;
    float tn;
    const float p = ab_exp_reduced(xc, &tn);
    const int32_t ni = (int32_t)(ab_f32_bits(tn) - 0x4B400000u), h = ni >> 1;
    const float y = p * ab_bits_f32((uint32_t)(h + 127) << 23) * ab_bits_f32((uint32_t)(ni - h + 127) << 23);
    return x < -87.33654f ? 0.0f : x > 88.72283f ? INFINITY : y;
}

/* ab_exp for x <= 0 (or NaN), the same bits in fewer operations: the callers' arguments never
 * exceed 0 (a softmax's x - max, the normal density's and erfc's exponents), so there is no upper
 * clamp and no inf, and 2^n with n in [-126, 0] is one normal factor: p 2^n is the one rounding of
 * the same value that ab_exp's two factors give (the clamp lies just above -126 ln 2, so every
 * result is normal). Above 0 it still matches ab_exp while n <= 127 (x below about 88.37), and
 * past that returns some value, not e^x (the Phi below computes a branch it then discards); the
 * integer arithmetic is unsigned, so no x is undefined behaviour. */
static inline AB_HD float ab_exp_nonpos(float x) {
    const float xc = x < -87.33654f ? -87.33654f : x;
    float tn;
    const float p = ab_exp_reduced(xc, &tn);
    const uint32_t ni = ab_f32_bits(tn) - 0x4B400000u; /* n as a two's complement integer */
    const float y = p * ab_bits_f32((ni + 127u) << 23);
    return x < -87.33654f ? 0.0f : y;
}

/* The standard normal distribution function Phi(x) = (1 + erf(x / sqrt 2)) / 2, without a branch,
 * and e^(-x^2 / 2) in *g (the density times sqrt(2 pi)). With z = x / sqrt 2: for |z| <= 0.921875,
 * erf(z) = z P(z^2), P of degree 5 (relative error 1.6e-8); beyond, erfc(|z|) = e^(G(|z|) - z^2),
 * G of degree 8 in |z| - 2.4296875 fitted to log erfc(t) + t^2 on [0.921875, 3.9375] (error 9e-9),
 * and erfc = 0 past 3.9375, where erf is 1 in fp32. Phi = 1 - erfc/2 above 0 and erfc/2 below: the
 * lower tail keeps a relative error under 4e-6 down to 1e-8, where 1 + erf(z) would cancel; x Phi(x)
 * is within 4e-7 of the exact value everywhere, as libm's erff in the direct formula. Polynomials
 * in fmaf, as in ab_exp. */
static inline AB_HD float ab_normal_cdf(float x, float *g) {
    const float z = x * 0.70710678118654752f, t = fabsf(z), s = z * z;
    float a = -5.989530776e-04f;
    a = fmaf(a, s, 4.992899392e-03f);
    a = fmaf(a, s, -2.676640762e-02f);
    a = fmaf(a, s, 1.128180985e-01f);
    a = fmaf(a, s, -3.761249302e-01f);
    a = fmaf(a, s, 1.128379149e+00f);
    const float inner = 0.5f + 0.5f * (z * a);
    const float u = t - 2.4296875f;
    float c = 1.625887666e-06f;
    c = fmaf(c, u, -1.419936318e-05f);
    c = fmaf(c, u, 8.411870493e-05f);
    c = fmaf(c, u, -4.542721581e-04f);
    c = fmaf(c, u, 2.318836141e-03f);
    c = fmaf(c, u, -1.148872663e-02f);
    c = fmaf(c, u, 5.846251659e-02f);
    c = fmaf(c, u, -3.607347640e-01f);
    c = fmaf(c, u, -1.531736206e+00f);
    float e = ab_exp_nonpos(c - s); /* erfc(t); c - s <= 0 where it is kept (t > 0.921875) */
    e = t > 3.9375f ? 0.0f : e;
    const float outer = z > 0.0f ? 1.0f - 0.5f * e : 0.5f * e;
    *g = ab_exp_nonpos(-s);
    return t <= 0.921875f ? inner : outer;
}

/* exact (erf) GELU and its derivative: x Phi(x), Phi(x) + x phi(x) */
static inline AB_HD float ab_gelu(float x) {
    float g;
    return x * ab_normal_cdf(x, &g);
}
static inline AB_HD float ab_gelu_grad(float x) {
    float g;
    const float cdf = ab_normal_cdf(x, &g);
    return cdf + x * (0.39894228040143268f * g);
}

#endif
