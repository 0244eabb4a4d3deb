/* The CPU backend's constructor and what it says about OpenBLAS, for the platform (platform/)
 * and for programs and tests that want the CPU backend itself. */
#ifndef AB_BACKEND_CPU_H
#define AB_BACKEND_CPU_H

#include "backend.h"

/* CPU backend; threads <= 0 leaves OpenBLAS's default. Never fails except on allocation. */
ab_backend *ab_backend_cpu_create(int threads);
/* A short description of the CPU's BLAS ("OpenBLAS 0.3.21 ..."). */
const char *ab_backend_cpu_blas_info(void);
/* A one-line note when OpenBLAS fell back to generic kernels on a CPU with wider vectors, or NULL. */
const char *ab_backend_cpu_blas_hint(void);
/* "SkylakeX" or "Haswell" when OpenBLAS fell back to generic kernels on a CPU that has AVX-512 or
 * AVX2 (OpenBLAS chooses when it loads, from the CPU models it knows; virtual machines often report
 * others); NULL when its choice is already right */
const char *ab_backend_cpu_blas_better_core(void);
/* bf16 x bf16 products on the CPU's bf16 instructions (AVX512-BF16 or AMX, through oneDNN) where
 * it has them, the default unless AB_CPU_BF16=emulated; native 0 keeps the emulated reference
 * (widened operands, OpenBLAS sgemm). Returns whether products now run natively. */
int ab_backend_cpu_set_bf16_native(ab_backend *be, int native);
/* "bf16 GEMM native (AVX512-BF16, oneDNN 2.6.3 matmul)", or emulated and why */
const char *ab_backend_cpu_bf16_describe(ab_backend *be);
/* handler for signal sig, for the whole process, with SA_RESTART and SA_ONSTACK, and an alternate
 * stack for the calling thread (allocated here once; one it already has, a sanitizer's say, is
 * kept). oneDNN's generated sgemm kernels (up to 3.11) point rsp into the heap while they run, so
 * a handler run on the interrupted stack would write its frame into the heap. A program that
 * handles signals while the CPU backend computes installs its handlers through this, from the
 * thread that calls the backend (it computes a share of every product beside the pool's workers,
 * which block asynchronous signals). -1 with ab_error(). */
int ab_cpu_handle_signal(int sig, void (*handler)(int));

#endif
