/* The GPU step model: the time one training step would take on a named GPU, from the ops the step
 * issues. A backend that runs nothing (kernels/cost) counts each op's floating-point operations
 * and the bytes it reads and writes; here each op takes the longer of its arithmetic at the GPU's
 * peak for its precision and its bytes at the GPU's memory bandwidth, each derated by the
 * efficiency table (ab_step_eff), plus a fixed gap per kernel. The sum is the step. It models a
 * GPU running ampbench's op sequence with nothing else in the way (no host overhead, no data
 * loading stalls, no communication): what the GPU alone needs (docs/step-model.md says how close
 * it comes to published and measured figures). */
#ifndef AB_STEPMODEL_H
#define AB_STEPMODEL_H

#include <stddef.h>

#include "ab.h"

/* what bounds an op: matrix products (GEMM, batched GEMM, convolutions) run on the math units at
 * the peak of their input type; every other op moves memory */
typedef enum { AB_OPC_MATMUL = 0, AB_OPC_MEMORY = 1, AB_OPC_SYNC = 2 } ab_op_class;

/* One op of a step, as the counting backend saw it. */
typedef struct {
    const char *op;    /* the backend op: "gemm", "conv2d_forward", "layernorm_backward", ... */
    const char *phase; /* the step's part it ran in: "data", "forward", "loss", "backward", "update" */
    ab_op_class cls;
    ab_dtype dtype;    /* a matrix product's input type (fp32 operands: FP32 or TF32 math) */
    double flops;      /* floating-point operations (a multiply-add is 2) */
    double bytes;      /* bytes read and written (each operand once) */
    double tiles;      /* matrix products: parallel work units (128 x 128 output tiles x reduction
                        * chunks of 4,096, times the batch); fewer than the GPU's SMs leave some idle */
    int kernels;       /* kernels the op launches on a GPU backend */
    double time_s;     /* measured (kernels/prof: the wrapped backend's wall time for the op), else 0 */
    int M, N, K, batch, ta, tb; /* a GEMM's shape (gemm, gemm_batched; 0 for other ops) */
} ab_op_cost;

/* A GPU's published figures: dense peaks (no sparsity) in TFLOPS for each math mode (0 where it
 * has none), memory bandwidth, streaming multiprocessors, memory, the GPU-to-GPU link. */
typedef struct {
    const char *name;  /* the --gpu name: "rtx3090", "v100", "a100", "h100", "h200", "titan-rtx" */
    const char *label; /* "NVIDIA GeForce RTX 3090" */
    double fp32, tf32, fp16, bf16; /* TFLOPS; fp16/bf16: tensor cores with fp32 accumulation */
    double mem_gbs;                /* memory bandwidth, GB/s */
    int sms;
    double mem_gib; /* memory, GiB as sold ("24 GB") */
    double link_gbs; /* GPU-to-GPU bandwidth one way, GB/s, of the link named */
    const char *link;
    const char *source; /* where the figures are published */
    const char *marker; /* what the driver's device name contains ("A100"): ab_gpu_spec_match */
} ab_gpu_spec;

/* The efficiency table: the fraction of each peak a kernel reaches, and the gap each kernel adds. */
typedef struct {
    double tensor;   /* TF32/FP16/BF16 tensor-core products: fraction of the dense peak */
    double fp32;     /* FP32 products on the CUDA cores */
    double memory;   /* every op's bytes: fraction of the memory bandwidth */
    double gap_s;    /* per kernel: launch and tail, the GPU idle between dependent kernels */
    double sync_s;   /* per device-to-host read of the step's scalars (the loss, found-inf) */
} ab_step_eff;

extern const ab_step_eff ab_step_eff_default;

/* the GPUs the model knows, in table order (NULL past the last), and one by name */
const ab_gpu_spec *ab_gpu_spec_at(int i);
const ab_gpu_spec *ab_gpu_spec_find(const char *name);
/* the table's GPU a device name ("NVIDIA H200", "NVIDIA A100-SXM4-80GB") is, or NULL */
const ab_gpu_spec *ab_gpu_spec_match(const char *device_name);
/* "rtx3090, v100, ..." for help texts and errors */
const char *ab_gpu_spec_names(void);

/* Math modes of the model: how fp32 matrix products run (IEEE FP32 on the CUDA cores, as
 * ampbench's fp32; or TF32 tensor cores, as PyTorch's convolutions by default and NVIDIA's
 * "TF32" figures). */
typedef enum { AB_FP32_MATH_IEEE = 0, AB_FP32_MATH_TF32 = 1 } ab_fp32_math;

/* The modelled time of one op, split by what bounds it. */
typedef struct {
    double time_s;            /* the op's whole time: max(math, memory) + gaps */
    double math_s, memory_s;  /* the two bounds */
    double gap_s;             /* kernels x gap (or the sync's) */
    int math_bound;           /* 1 when math_s > memory_s */
} ab_op_time;

/* One op's time on gpu. -1 (ab_error) when the GPU has no math for the op's type (bf16 on a V100). */
int ab_op_model(const ab_op_cost *op, const ab_gpu_spec *gpu, ab_fp32_math fp32_math, const ab_step_eff *eff,
                ab_op_time *out);

typedef struct {
    double time_s;     /* the step */
    double math_bound_s, memory_bound_s, gap_s; /* its parts: ops bound by math, by memory; gaps */
    double flops, bytes;
    long kernels;
} ab_step_estimate;

/* The step of n ops on gpu. -1 (ab_error) as ab_op_model. */
int ab_step_model(const ab_op_cost *ops, size_t n, const ab_gpu_spec *gpu, ab_fp32_math fp32_math,
                  const ab_step_eff *eff, ab_step_estimate *out);

#endif
