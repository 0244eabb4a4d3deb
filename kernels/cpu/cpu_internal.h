/* Private to kernels/cpu: the CPU backend's ops, declared from the op list. backend_cpu.c,
 * layers_cpu.c and transformer_cpu.c all stand on the runtime of runtime_cpu.h. */
#ifndef AB_CPU_INTERNAL_H
#define AB_CPU_INTERNAL_H

#include "backend.h"
#include "runtime_cpu.h"

/* Every compute op of core/backend_ops.def, as ab_cpu_<op>: backend_cpu.c (GEMM, element-wise,
 * loss, optimizer, gathers, census), layers_cpu.c (convolutional layers, image assembly),
 * transformer_cpu.c (the transformer ops, the gradient norm and unscale_check); backend_cpu.c's
 * table is built from this list. */
#define AB_OP(name, params, args) int ab_cpu_##name AB_OP_PARAMS params;
#include "backend_ops.def"

/* ab_cpu_gemm, its sums rounded to `round` (fp16 or bf16; fp32: not) before beta C is added, C
 * fp32: gemm_fold's product (backend_cpu.c); with round, *found_inf (unless NULL) set to 1 where a
 * stored value is infinite or NaN */
int cpu_gemm_run(ab_backend *be, int ta, int tb, int M, int N, int K, float alpha, ab_dtype at, const void *A, int lda,
                 ab_dtype bt, const void *B, int ldb, const void *bias, ab_epilogue epi, float beta, ab_dtype ct,
                 void *C, int ldc, ab_dtype round, int32_t *found_inf);
/* dst (fp32) = [dst +] src rounded once to t (fp16 or bf16) and widened back, over the pool: a
 * filter gradient's sums over several chunks of images folded (backend_cpu.c); 1 when a stored
 * value is infinite or NaN */
int cpu_round_fold_par(ab_backend *be, size_t n, const float *src, ab_dtype t, float *dst, int accumulate);

#endif
