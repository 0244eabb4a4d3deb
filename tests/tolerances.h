/* Comparison tolerances for the tests, in one place, each with how it was derived, and the
 * helpers that apply them: normalised mean squared error over a tensor, worst element
 * reported, NaN never passes. */
#ifndef AB_TOLERANCES_H
#define AB_TOLERANCES_H

#include <math.h>
#include <stdio.h>
#include <stddef.h>

/* fp32 arithmetic against a float64 reference: unit round-off 2^-24 ~ 6e-8 per operation,
 * growing like sqrt(K) for a K-term reduction; 1e-5 relative covers K up to ~10^4 with margin. */
#define AB_TOL_FP32_REL 1e-5
/* Central finite differences in float64 with h = 1e-6 on O(1) functions: truncation O(h^2) ~ 1e-12,
 * cancellation ~ 1e-16/h ~ 1e-10; the analytic gradient is fp32 (1e-5 above), so 1e-4 relative
 * to the gradient's scale. */
#define AB_TOL_GRAD_REL 1e-4
/* fp16 storage (11-bit significand, half-ulp 2^-11 ~ 4.9e-4) with fp32 accumulation: inputs and
 * output each rounded once, so ~3 half-ulps relative per element; 1e-2 leaves room for
 * cancellation in sums. Compared as NMSE: (1e-2)^2. */
#define AB_TOL_FP16_NMSE 1e-4
/* bf16 storage (8-bit significand, half-ulp 2^-8 ~ 3.9e-3): three roundings ~ 1.2e-2, so 3e-2. */
#define AB_TOL_BF16_NMSE 9e-4
/* fp32 tensors by NMSE: (1e-5)^2 scaled up for reductions and a different summation order. */
#define AB_TOL_FP32_NMSE 1e-9

/* NMSE = sum (a - b)^2 / sum b^2 (b the reference). Any NaN/Inf mismatch gives INFINITY.
 * *worst receives the index of the largest absolute difference. */
static inline double ab_nmse(const float *a, const double *ref, size_t n, size_t *worst) {
    double num = 0.0, den = 0.0, wd = -1.0;
    *worst = 0;
    for (size_t i = 0; i < n; i++) {
        const int fa = isfinite(a[i]), fb = isfinite(ref[i]);
        if (fa != fb || isnan(a[i]) != isnan(ref[i])) {
            *worst = i;
            return INFINITY;
        }
        if (!fa) {
            if (a[i] != ref[i] && !(isnan(a[i]) && isnan(ref[i]))) { /* +inf vs -inf */
                *worst = i;
                return INFINITY;
            }
            continue;
        }
        const double d = (double)a[i] - ref[i];
        num += d * d;
        den += ref[i] * ref[i];
        if (fabs(d) > wd) {
            wd = fabs(d);
            *worst = i;
        }
    }
    return den > 0.0 ? num / den : num;
}

/* Prints a failure line with the worst element and returns 1 when nmse > tol (or NaN). */
static inline int ab_check_nmse(const char *what, const float *a, const double *ref, size_t n, double tol) {
    size_t w;
    const double e = ab_nmse(a, ref, n, &w);
    if (!(e <= tol)) {
        fprintf(stderr, "FAIL %s: nmse %.3g > %.3g; worst element %zu: got %.9g, expected %.9g\n", what, e, tol, w,
                n ? (double)a[w] : 0.0, n ? ref[w] : 0.0);
        return 1;
    }
    return 0;
}

/* Data parallelism, compared on the weight update w - w0 after a few steps (tests/dp/test_dp.c).
 * fp32, or amp against accumulation of the same micro-batches: the runs differ only in the
 * order of fp32 sums (a batch's weight-gradient reduction split into per-rank partial sums, then
 * one add and an exact halving): ~sqrt(B) * 2^-24 ~ 1e-6 relative per element, an NMSE ~ 1e-12;
 * AB_TOL_FP32_NMSE (1e-9, i.e. 3e-5 rms relative) leaves room for momentum and a few steps. A
 * sum instead of a mean, or overlapping shards, gives an NMSE of order 1. */
#define AB_TOL_DP_FP32_NMSE AB_TOL_FP32_NMSE
/* amp against one large batch, or with an fp16 all-reduce: the fp16 gradients are rounded at
 * other points (per rank, or once more on the wire), half-ulp 2^-11 ~ 4.9e-4 a rounding, two or
 * three roundings per element: the fp16 storage bound, 1e-2 relative, NMSE (1e-2)^2. */
#define AB_TOL_DP_FP16_NMSE AB_TOL_FP16_NMSE
/* BERT under amp with AdamW, data parallel against accumulation of the same micro-batches: the
 * same sums in another association (a micro-batch's fp32-region gradients added into the
 * accumulator, or summed on their own and then added by the all-reduce) differ in the last bit,
 * and where that moves a gradient near 0 across an fp16 rounding or across 0, AdamW's normalised
 * update m / sqrt(v) turns it into an update of up to 2 lr of the other sign. How often that
 * happens depends on the BLAS kernels' summation order: with OpenBLAS's SkylakeX kernels the
 * updates agree to NMSE 2e-13, with its Haswell kernels one such element gives 3e-8. 1e-6 holds
 * a few of them and still sits a decade below the 1e-5 of fp16 gradients scaled by the world size
 * (each rank's 1/W left out), and six below a wrong shard. */
#define AB_TOL_DP_ADAMW_AMP_NMSE 1e-6
/* Data parallelism with batch norm against one process accumulating the same micro-batches:
 * the same arithmetic but for the order of the sums in the all-reduce and the accumulation. A
 * ResNet's gradients are ill-conditioned (peers/checks/torch_check.py: PyTorch's own fp32 gradients lie
 * NMSE 1e-4 to 1e-3 from float64 at batch 2, batch norm's backward dividing by small batches'
 * standard deviations), so a last-bit difference in one step's summed gradient comes back larger
 * in the next steps' gradients: measured NMSE 1.6e-7 (fp32) and 2.5e-8 (amp) on the updates after
 * 3 steps of resnet-tiny at batch 16. 1e-5 sits two decades above that; a wrong shard, a sum
 * instead of the average or another rank's batch statistics give NMSE above 1e-2. */
#define AB_TOL_DP_BN_NMSE 1e-5

/* CUDA backend against the CPU backend (tests/gpu). Both sides are fp32 arithmetic; what differs
 * is summation order and the device's expf/logf (<= 2 ulp against glibc's <= 1). The library's own
 * kernels are built with --fmad=false, so a*b+c rounds twice as in the gcc-built CPU twin; the
 * bounds that name FMA below were set for contracted kernels and stay, as upper bounds, until a
 * GPU run shows which element-wise ops now agree bit for bit. A wrong transpose, offset or type gives an
 * NMSE of order 1, so these bounds sit many decades below what a bug produces.
 * GEMM fp32 in, fp32 out: different blocking / split-K orders, ~sqrt(K) * 2^-24 ~ 2e-6 relative
 * per element for K = 784, NMSE ~ 4e-12; 1e-9 leaves room for cancellation. */
#define AB_TOL_GPU_GEMM_FP32_NMSE 1e-9
/* GEMM fp16/bf16 in, fp32 out: products exact in fp32, but tensor-core fp32 accumulation is not
 * round-to-nearest at every add (aligned addends are truncated): a few 2^-23 per add, 1e-8. */
#define AB_TOL_GPU_GEMM_LOWP_FP32OUT_NMSE 1e-8
/* column sums in fp32: the GPU adds 32 strided slices of the rows, then the slices; the CPU row
 * after row. A reordered sum of M terms: up to ~M 2^-24 of the sum of |x| per column, NMSE
 * ~1e-12 for M = 1000 terms of mean 0.25 (the worst of 300 simulated draws, the op test's shapes
 * and range: 1.9e-12); 1e-10. */
#define AB_TOL_GPU_COLSUM_FP32_NMSE 1e-10
/* element-wise fp32 (SGD, AdamW, the beta terms): at most (with contraction) one
 * FMA against a multiply and an add, <= 1 ulp (1.2e-7 relative) per element, NMSE <= 1.4e-14; sqrt and divide are IEEE in
 * both (nvcc -prec-div/-prec-sqrt default); 1e-12. */
#define AB_TOL_GPU_ELEMWISE_NMSE 1e-12
/* softmax cross-entropy gradients in fp32: a few ulps of expf/logf per element (~5e-7 relative,
 * NMSE ~ 3e-13), inflated where p - 1 cancels on the label column; 1e-10. */
#define AB_TOL_GPU_TRANSC_NMSE 1e-10
/* batch loss sum: the CPU sums rows in double, the GPU in float (warp tree, then atomics in any
 * order): log2(B) * 2^-24 plus the expf/logf ulps, ~1e-6 relative; 1e-5. */
#define AB_TOL_GPU_LOSS_SUM_REL 1e-5
/* a few MLP steps (tests/gpu/test_cuda_train.c), same start and batches. fp32: per-step GEMM
 * differences (~1e-6 relative, above) on the update lr * g (~1e-2 of the weights) over 6 steps:
 * ~1e-7 relative on the weights, NMSE ~ 1e-14; 1e-10. The step losses agree to ~1e-6; 1e-5. */
#define AB_TOL_GPU_TRAIN_FP32_NMSE 1e-10
#define AB_TOL_GPU_TRAIN_LOSS_FP32_REL 1e-5
/* amp/bf16: activations and gradients stored in fp16/bf16 round from fp32 values that differ in
 * the last bits, so some elements land one storage ulp apart (2^-10 fp16, 2^-7 bf16 relative);
 * through lr * g over 6 steps that is <= 6 * 1e-2 * 8e-3 ~ 5e-4 relative on a weight, NMSE
 * < 2.5e-7 even if every element were hit; 1e-6. The losses: logits one ulp apart, 1e-2. */
#define AB_TOL_GPU_TRAIN_LOWP_NMSE 1e-6
#define AB_TOL_GPU_TRAIN_LOSS_LOWP_REL 1e-2
/* The reduced ResNet trained 3 steps on the GPU and on the CPU, compared on the weight updates:
 * cuDNN's convolutions and the GPU's batch-norm sums take their fp32 sums in other orders than
 * the CPU, ~1e-6 relative per layer (the bounds below), and a ResNet's ill-conditioned gradients
 * (AB_TOL_DP_BN_NMSE: a last-bit difference comes back as NMSE ~1e-7 after 3 steps) carry that
 * into the updates; the same 1e-5. amp: stored fp16 values one ulp apart (2^-10) where the two
 * fp32 results round differently, through the same conditioning: 1e-3, still three decades below
 * a wrong layout, tap or channel (NMSE of order 1). Step losses: fp32 1e-4 relative. */
#define AB_TOL_GPU_TRAIN_BN_FP32_NMSE AB_TOL_DP_BN_NMSE
#define AB_TOL_GPU_TRAIN_BN_LOWP_NMSE 1e-3
#define AB_TOL_GPU_TRAIN_BN_LOSS_FP32_REL 1e-4
/* bert-tiny trained 4 steps on the GPU and on the CPU (tests/gpu/test_cuda_train.c: SST-2, batch
 * 8, sequence 32, dropout 0.1 with the same masks on both, AdamW at lr 1e-3, clipping at 0.5),
 * compared on the weight updates. AdamW divides each first moment by the root of its second, so a
 * relative difference in a gradient comes back as the same relative difference in its update
 * whatever the gradient's size, and a gradient near zero (where the backends' round-off decides its
 * sign) as a difference of up to lr. Measured on the CPU with a stand-in for the GPU's round-off, a
 * twin trainer whose initial weights are scaled by 1 +- 1e-6 (random signs; the relative size of
 * the fp32 GEMMs' differences above), the case's data and settings: NMSE 7.2e-10 (fp32) and 3.2e-5
 * (amp) on the updates after 4 steps; 2.6e-11 and 9.3e-7 at 1 +- 1e-7, 6.9e-8 and 8.8e-5 at
 * 1 +- 1e-5. amp is the larger: a last-bit difference moves some stored fp16 activations and
 * gradients one ulp (2^-11 relative), which the normalised updates do not damp. The attention key
 * biases get a gradient that is zero in exact arithmetic (softmax ignores a shift of a query's
 * scores), so each backend's is its own round-off, which AdamW turns into updates of
 * lr * noise / eps: <= 8e-8 (fp32), <= 3e-4 (amp), 5% of the amp NMSE above and no change to the
 * loss. fp32: 1e-7, two decades above the stand-in; amp: 1e-3 (as for batch norm), 1.5 decades
 * above it. Against that, one side's lr 0.1% off gives NMSE 1.9e-6 (fp32) and 4.3e-6 (amp), 10%
 * off 1.3e-2, and a dropout rate of 0.11 instead of 0.1 (a tenth of the masks moved) 0.33. Step
 * losses: AB_TOL_GPU_TRAIN_LOSS_FP32_REL and _LOWP_REL (the stand-in's agree to 1e-7 relative in
 * fp32 and 1e-5 in amp; the dropout rate 0.11 moves the first loss by 2e-3). */
#define AB_TOL_GPU_TRAIN_ADAMW_FP32_NMSE 1e-7
#define AB_TOL_GPU_TRAIN_ADAMW_LOWP_NMSE 1e-3
/* Convolutional layers, CUDA against the CPU backend (test_backend_ops, tests/ops/dev_layers.c).
 * Convolutions in fp32: cuDNN (no TF32, no FFT/Winograd) against im2col + sgemm, both fp32
 * products and sums in different orders. An output is a dot product of R*S*C terms (forward, up
 * to 3*3*512 = 4608), K*R*S (backward data) or N*P*Q (backward filter, up to ~12544 here):
 * ~sqrt(12544) * 2^-24 ~ 7e-6 relative per element, NMSE ~ 5e-11; 1e-9, as for the GEMMs.
 * fp16/bf16 convolutions use AB_TOL_FP16_NMSE / AB_TOL_BF16_NMSE (storage rounding dominates). */
#define AB_TOL_GPU_CONV_FP32_NMSE 1e-9
/* Batch norm in fp32: the CPU takes the statistics in double, the GPU in fp32 per thread (a few
 * dozen to a few thousand rows, summed as deviations from a value of the data) merged in double:
 * the mean and 1/std agree to ~1e-6 relative of the spread, so y, dx and the statistics agree to
 * ~1e-6 relative, NMSE ~ 1e-12; 1e-10. */
#define AB_TOL_GPU_BN_FP32_NMSE 1e-10
/* Largest error of one element, as |a - b| / (|b| + rms(b)): relative to the element, but judged
 * on the tensor's scale where the reference is near zero (a sum of mixed-sign terms often is).
 * fp32: the worst of many elements of the bounds above, a few times 7e-6; 1e-4. fp16/bf16: both
 * sides round fp32 values that differ in their last bits, so an element may land one storage ulp
 * apart, up to 2^-10 ~ 9.8e-4 (fp16) or 2^-7 ~ 7.8e-3 (bf16) of |b|; twice that. A wrong index,
 * tap or channel gives errors of order 1. */
#define AB_TOL_GPU_LAYER_FP32_MAXREL 1e-4
#define AB_TOL_GPU_LAYER_FP16_MAXREL 2e-3
#define AB_TOL_GPU_LAYER_BF16_MAXREL 1.6e-2
/* Transformer ops, CUDA against the CPU backend (test_backend_ops, tests/ops/dev_transformer.c).
 * Layer norm in fp32: both sides take a row's sums in double (deviations from the row's first
 * value) in other orders, so the float mean and rstd agree to the last bit nearly always (one
 * ulp, 6e-8 relative, at worst); y and dx are then one fp32 expression (uncontracted: the
 * CPU's roundings; contracted, one or two FMAs, <= 2 ulp), and dgamma/dbeta are double sums of exact double products rounded
 * once: NMSE ~ 1e-13; 1e-10, as for batch norm. */
#define AB_TOL_GPU_LN_FP32_NMSE 1e-10
/* GELU, tanh and the attention softmax in fp32: GELU is kernel_math.h's ab_gelu on both sides
 * (the same operations, no libm); tanh and the softmax use the device's tanhf and expf (<= 2 ulp)
 * against glibc's (<= 1 ulp), the softmax's sum in double in another order: a few ulps an
 * element, ~5e-7 relative, NMSE ~ 3e-13. Where 1 + erf(x) or 1 - y^2 cancels the relative error
 * of an element grows, but such elements are small against the tensor's scale; 1e-10. */
#define AB_TOL_GPU_ACT_FP32_NMSE 1e-10
/* The word-embedding gradient: the GPU adds a repeated id's rows with float atomics in any
 * order, the CPU in row order. k terms of O(1) added in another order differ by ~sqrt(k) * 2^-24
 * of their sum; with k up to a few dozen here (~5e-7), NMSE ~ 1e-13; 1e-10. (The position and
 * type tables add in the CPU's order on the GPU: compared bit for bit.) */
#define AB_TOL_GPU_SCATTER_FP32_NMSE 1e-10
/* sum_squares: positive terms, so no cancellation; fp32 partial sums on both sides (the CPU 1024
 * terms in sequence, the GPU a few dozen per thread and a 256-way tree) then double: ~sqrt(m) *
 * 2^-24 relative for m terms in sequence, a few 1e-6 at most; 1e-5. */
#define AB_TOL_GPU_SUMSQ_REL 1e-5

#define AB_CHECK(cond, ...)                                                                                   \
    do {                                                                                                      \
        if (!(cond)) {                                                                                        \
            fprintf(stderr, "FAIL %s:%d: %s: ", __FILE__, __LINE__, #cond);                                    \
            fprintf(stderr, __VA_ARGS__);                                                                     \
            fputc('\n', stderr);                                                                              \
            failures++;                                                                                       \
        }                                                                                                     \
    } while (0)

/* An op's stored result, element by element, against the float64 value of the same stored inputs
 * (tests/ops, the reference pass), where the op rounds one fp32 value to the storage type: the
 * rounding is at most half a storage ulp, and the fp32 arithmetic before it (a mean, a quotient, a
 * few products, exp or erf within a few fp32 ulps) adds a few 2^-23 relative, at most 2^-13 of an
 * fp16 ulp and 2^-16 of a bf16 one; one storage ulp bounds the sum with room. Where the op is
 * exact in fp32 before its one rounding (a max, the sum of two stored values) the tests ask for
 * the float64 value rounded, bit for bit, instead. Non-finite values must match (NaN for NaN, an
 * infinity for the same infinity) in either case. */
#define AB_TOL_STORE_ULPS 1.0

/* GELU and its derivative in fp32 (core/kernel_math.h's ab_gelu and ab_gelu_grad: a polynomial
 * erf and a branch-free exp) against the exact values in float64: kernel_math.h bounds both within
 * 4e-7 absolute everywhere, as libm's erff in the direct formula (4.5e-7); an absolute bound, as
 * the relative error grows where the derivative crosses 0. */
#define AB_TOL_GELU_ABS 4e-7

/* Reference cases that carry a running error bound of the fp32 arithmetic beside a float64
 * reference (tests/ops/ref_ops.c: softmax cross-entropy, the SGD and AdamW steps, the image
 * gathers): each fp32 operation rounds by at most 2^-24 of its result (an absolute 2^-150 among
 * the subnormals), expf, logf and powf by at most an ulp, and the bound adds these up to first
 * order, with magnitudes taken from the float64 values instead of the fp32 ones the op saw. The
 * second-order terms left out are ~2^-24 of the first, so twice the bound is ample; a wrong
 * formula (a missing bias correction, weight decay coupled into the gradient, a scale applied
 * twice) lands many times past it. */
#define AB_TOL_ROUNDING_BOUND_MARGIN 2.0

#endif
