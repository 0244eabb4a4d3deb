/* The GPU step model (stepmodel.h): the GPU table, the efficiency table, the op and step times. */
#include "stepmodel.h"

#include <ctype.h>
#include <stdio.h>
#include <string.h>

/* Dense peaks from the vendors' data sheets and architecture white papers (sparsity doubles some
 * of them there: not used). FP16 and BF16 are the tensor-core rates with fp32 accumulation, the
 * rate AMP's products run at; on GeForce Ampere that is half the fp16-accumulate rate. The link
 * is one direction's bandwidth. */
static const ab_gpu_spec gpus[] = {
    {"rtx3090", "NVIDIA GeForce RTX 3090", 35.6, 35.6, 71.0, 71.0, 936.0, 82, 24.0, 32.0, "PCIe 4.0 x16",
     "NVIDIA Ampere GA102 GPU Architecture white paper, table 9 (dense, fp32 accumulate)", "RTX 3090"},
    {"v100", "NVIDIA V100 SXM2 16 GB", 15.7, 0.0, 125.0, 0.0, 900.0, 80, 16.0, 150.0, "NVLink 2 (6 links)",
     "NVIDIA V100 data sheet (SXM2)", "V100"},
    {"a100", "NVIDIA A100 SXM4 80 GB", 19.5, 156.0, 312.0, 312.0, 2039.0, 108, 80.0, 300.0, "NVLink 3 (12 links)",
     "NVIDIA A100 data sheet (SXM4 80 GB, dense)", "A100"},
    {"h100", "NVIDIA H100 SXM5 80 GB", 66.9, 494.7, 989.4, 989.4, 3350.0, 132, 80.0, 450.0, "NVLink 4 (18 links)",
     "NVIDIA H100 data sheet (SXM5, dense)", "H100"},
    {"h200", "NVIDIA H200 SXM 141 GB", 66.9, 494.7, 989.4, 989.4, 4800.0, 132, 141.0, 450.0, "NVLink 4 (18 links)",
     "NVIDIA H200 data sheet (SXM, dense; the H100's math, HBM3e)", "H200"},
    {"titan-rtx", "NVIDIA TITAN RTX", 16.3, 0.0, 130.5, 0.0, 672.0, 72, 24.0, 50.0, "NVLink bridge (2 links)",
     "NVIDIA Turing TU102 white paper (TITAN RTX: full-rate fp32 accumulate)", "TITAN RTX"},
};
enum { N_GPUS = (int)(sizeof gpus / sizeof gpus[0]) };

/* Chosen once from what the libraries are generally seen to reach, not fitted to any figure the
 * model is checked against (docs/step-model.md): large cuBLAS/cuDNN tensor-core products reach
 * 70-80% of the dense peak, FP32 ones 80-90%; streaming kernels 80-90% of the bandwidth; a kernel
 * boundary costs a few microseconds; reading the step's scalars back, one round trip. */
const ab_step_eff ab_step_eff_default = {
    .tensor = 0.70, .fp32 = 0.80, .memory = 0.80, .gap_s = 3e-6, .sync_s = 15e-6};

const ab_gpu_spec *ab_gpu_spec_at(int i) { return i >= 0 && i < N_GPUS ? &gpus[i] : NULL; }

const ab_gpu_spec *ab_gpu_spec_find(const char *name) {
    for (int i = 0; name && i < N_GPUS; i++)
        if (strcmp(name, gpus[i].name) == 0) return &gpus[i];
    return NULL;
}

/* 1 when word occurs in s with no letter or digit on either side ("A100" in "NVIDIA A100-SXM4-80GB",
 * not in "NVIDIA RTX A1000") */
static int has_word(const char *s, const char *word) {
    const size_t n = strlen(word);
    for (const char *p = strstr(s, word); p; p = strstr(p + 1, word)) {
        const int before = p == s || !isalnum((unsigned char)p[-1]);
        const int after = !isalnum((unsigned char)p[n]);
        if (before && after) return 1;
    }
    return 0;
}

const ab_gpu_spec *ab_gpu_spec_match(const char *device_name) {
    if (!device_name) return NULL;
    /* variants the table's figures are not: PCIe and NVL boards (lower clocks, other memory), the
     * 3090 Ti; better no model than another part's */
    static const char *const not_these[] = {"PCIe", "PCIE", "NVL", "Ti"};
    if (strstr(device_name, "-PCIE") || strstr(device_name, "-PCIe")) return NULL;
    for (size_t k = 0; k < sizeof not_these / sizeof not_these[0]; k++)
        if (has_word(device_name, not_these[k])) return NULL;
    for (int i = 0; i < N_GPUS; i++)
        if (has_word(device_name, gpus[i].marker)) return &gpus[i];
    return NULL;
}

const char *ab_gpu_spec_names(void) {
    static char buf[160];
    if (!buf[0]) {
        size_t w = 0;
        for (int i = 0; i < N_GPUS; i++)
            w += (size_t)snprintf(buf + w, sizeof buf - w, "%s%s", i ? ", " : "", gpus[i].name);
    }
    return buf;
}

/* the peak (TFLOPS) and efficiency a product of input type t runs at, and its math's name */
static int math_rate(const ab_gpu_spec *g, ab_dtype t, ab_fp32_math m, const ab_step_eff *eff, double *tflops,
                     double *e, const char **what) {
    if (t == AB_F16) *tflops = g->fp16, *e = eff->tensor, *what = "FP16 tensor cores";
    else if (t == AB_BF16) *tflops = g->bf16, *e = eff->tensor, *what = "BF16 tensor cores";
    else if (m == AB_FP32_MATH_TF32) *tflops = g->tf32, *e = eff->tensor, *what = "TF32 tensor cores";
    else *tflops = g->fp32, *e = eff->fp32, *what = "FP32";
    if (*tflops <= 0.0) return ab_errorf("the %s has no %s", g->label, *what);
    return 0;
}

int ab_op_model(const ab_op_cost *op, const ab_gpu_spec *gpu, ab_fp32_math fp32_math, const ab_step_eff *eff,
                ab_op_time *out) {
    *out = (ab_op_time){0};
    out->memory_s = op->bytes / (gpu->mem_gbs * 1e9 * eff->memory);
    if (op->cls == AB_OPC_MATMUL && op->flops > 0.0) {
        double tflops, e;
        const char *what;
        AB_TRY(math_rate(gpu, op->dtype, fp32_math, eff, &tflops, &e, &what));
        /* a product of fewer output tiles than the GPU has multiprocessors leaves the rest idle */
        const double fill = op->tiles >= (double)gpu->sms ? 1.0 : (op->tiles > 0.0 ? op->tiles / gpu->sms : 1.0);
        out->math_s = op->flops / (tflops * 1e12 * e * fill);
    }
    out->math_bound = out->math_s > out->memory_s;
    out->gap_s = op->cls == AB_OPC_SYNC ? eff->sync_s : eff->gap_s * (double)op->kernels;
    out->time_s = (out->math_bound ? out->math_s : out->memory_s) + out->gap_s;
    return 0;
}

int ab_step_model(const ab_op_cost *ops, size_t n, const ab_gpu_spec *gpu, ab_fp32_math fp32_math,
                  const ab_step_eff *eff, ab_step_estimate *out) {
    *out = (ab_step_estimate){0};
    for (size_t i = 0; i < n; i++) {
        ab_op_time t;
        AB_TRY(ab_op_model(&ops[i], gpu, fp32_math, eff, &t));
        out->time_s += t.time_s;
        if (t.math_bound) out->math_bound_s += t.math_s;
        else out->memory_bound_s += t.memory_s;
        out->gap_s += t.gap_s;
        out->flops += ops[i].flops;
        out->bytes += ops[i].bytes;
        out->kernels += ops[i].kernels;
    }
    return 0;
}
