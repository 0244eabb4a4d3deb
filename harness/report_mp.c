/* REPORT.md's part on data, tensor and pipeline parallelism side by side (harness.h,
 * hr_write_model_parallel): what each split measured on the ranks that ran it, and what it would
 * do on 2, 4 and 8 GPUs from the modelled GPU step (docs/parallelism.md has the formulas). */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "harness.h"
#include "train.h"

#define DASH "—"

static void mb_cell(char *b, size_t n, double v) {
    if (isfinite(v) && v > 0) snprintf(b, n, "%.1f", v / 1e6);
    else snprintf(b, n, DASH);
}

static void bytes_cell(char *b, size_t n, double measured, double model) {
    if (!isfinite(measured)) {
        snprintf(b, n, DASH);
        return;
    }
    if (isfinite(model)) snprintf(b, n, "%.3g / %.3g MB", measured / 1e6, model / 1e6);
    else snprintf(b, n, "%.3g MB", measured / 1e6);
}

/* rank 0's memory by what it holds: the weights (and fp32 master), gradients, optimizer state,
 * activations */
static void split_cell(char *b, size_t n, const hr_run *r) {
    const double w = hr_mem_cat(r, AB_MEM_PARAMETERS) + hr_mem_cat(r, AB_MEM_MASTER);
    snprintf(b, n, "%.1f / %.1f / %.1f / %.1f", w / 1e6, hr_mem_cat(r, AB_MEM_GRADIENTS) / 1e6,
             hr_mem_cat(r, AB_MEM_OPTIMIZER) / 1e6, hr_mem_cat(r, AB_MEM_ACTIVATIONS) / 1e6);
}

static void row(FILE *f, const char *mode, const hr_run *r, const hr_run *amp) {
    char grid[48], sp[24], vs[24], peak[24], cats[80], by[64], idle[48], acc[24];
    snprintf(grid, sizeof grid, "data %d x tensor %d x pipeline %d", r->data_parallel > 0 ? r->data_parallel : 1,
             r->tensor_parallel, r->pipeline_parallel);
    if (isfinite(r->samples_per_s)) snprintf(sp, sizeof sp, "%.1f", r->samples_per_s);
    else snprintf(sp, sizeof sp, DASH);
    if (amp && amp->samples_per_s > 0 && isfinite(r->samples_per_s))
        snprintf(vs, sizeof vs, "%.2fx", r->samples_per_s / amp->samples_per_s);
    else snprintf(vs, sizeof vs, DASH);
    mb_cell(peak, sizeof peak, r->peak_rank_max);
    split_cell(cats, sizeof cats, r);
    if (r->pipeline_parallel > 1) bytes_cell(by, sizeof by, r->pp_bytes_max, r->pp_bytes_model_max);
    else if (r->tensor_parallel > 1) bytes_cell(by, sizeof by, r->tp_bytes_step, r->tp_bytes_model);
    else if (r->world_size > 1) bytes_cell(by, sizeof by, r->dp_sent_max, NAN);
    else snprintf(by, sizeof by, DASH);
    if (r->pipeline_parallel > 1 && isfinite(r->pp_idle_max))
        snprintf(idle, sizeof idle, "%.2f / %.2f", r->pp_idle_max, r->pp_bubble_model);
    else snprintf(idle, sizeof idle, DASH);
    if (isfinite(r->final_accuracy)) snprintf(acc, sizeof acc, "%.2f", r->final_accuracy);
    else snprintf(acc, sizeof acc, DASH);
    fprintf(f, "| %s | %s | %d | %s | %s | %s | %s | %s | %s | %s | `%s` |\n", mode, grid, r->world_size, sp, vs, peak,
            cats, by, idle, acc, r->name);
}

/* a split that did not run: the manifest's word for it */
static void missing_row(FILE *f, const hr_runset *rs, const hr_workload *w, const char *mode) {
    const hr_planned *p = hr_planned_run(rs, w->model, mode, 0);
    if (!p) return;
    fprintf(f, "| %s | %s: %s | | | | | | | | | |\n", mode, p->status, *p->reason ? p->reason : "no reason recorded");
}

/* The projection at n GPUs of kind "gpus", each figure a speed-up over one GPU's step of the same
 * samples, from the modelled step t (seconds a sample, one GPU, AMP):
 *   data      core/dpmodel.h's ring, overlapped (the projection run's row);
 *   tensor    B t / n + 2 (n-1)/n P B / bw + k a   (P: the bytes a sample all-reduces, k all-reduces
 *             a micro-batch of B; none of it hidden behind compute);
 *   pipeline  (M + n - 1) (B t / n + 2 (b / bw + a))  against M B t (b: a boundary's activation of
 *             a micro-batch; balanced stages; blocking exchanges, as here). */
static void projection(FILE *f, const hr_workload *w, const hr_runset *rs) {
    const hr_run *pr = hr_projection_run(w);
    if (!pr || !isfinite(pr->model_step_s) || !(pr->model_samples_per_step > 0)) return;
    const double t = pr->model_step_s / pr->model_samples_per_step, bw = AB_PROJ_GPU_BW, a = AB_PROJ_GPU_LATENCY;
    const hr_run *tp = w->tp, *pp = w->pp;
    fprintf(f,
            "PROJECTED, not measured: the speed-up over one GPU at the same samples, from `%s`'s modelled step on "
            "the %s (%.3g ms a sample, AMP), links of %.0f GB/s and %.0f us a message (the projection's defaults, "
            "docs/data-parallel.md); tensor: the split run's all-reduced bytes a sample; pipeline: its boundary "
            "activation and %d micro-batches a step, stages balanced (docs/parallelism.md has the formulas):\n\n",
            pr->name, *pr->model_gpu_label ? pr->model_gpu_label : pr->model_gpu, t * 1e3, bw / 1e9, a * 1e6,
            pp ? pp->pp_micro : 0);
    fprintf(f, "| GPUs | data (ring, overlapped) | tensor | pipeline | pipeline bubble (n-1)/M |\n|---|---|---|---|---|\n");
    for (int n = 2; n <= 8; n *= 2) {
        char d[24], tc[48], pc[48], bub[24];
        const double ds = hr_dp_model_speedup(pr, "gpus", n, "ring", 0, 1, 1);
        if (isfinite(ds)) snprintf(d, sizeof d, "%.2fx", ds);
        else snprintf(d, sizeof d, DASH);
        snprintf(tc, sizeof tc, DASH);
        if (tp && tp->tensor_parallel > 1 && tp->batch_size > 0 && isfinite(tp->tp_bytes_model)) {
            const double B = (double)tp->batch_size, T = tp->tensor_parallel, accum = tp->accum_steps > 0 ? tp->accum_steps : 1;
            const double payload = tp->tp_bytes_model / (2.0 * (T - 1) / T) / (B * accum); /* bytes a sample */
            const double calls = isfinite(tp->tp_calls_step) ? tp->tp_calls_step / accum : 0.0;
            const double time = B * t / n + 2.0 * (n - 1) / n * payload * B / bw + calls * a;
            snprintf(tc, sizeof tc, "%.2fx", B * t / time);
        } else if (hr_planned_run(rs, w->model, "tp-amp", 0) && !tp) {
            snprintf(tc, sizeof tc, "refused");
        }
        snprintf(pc, sizeof pc, DASH);
        snprintf(bub, sizeof bub, DASH);
        if (pp && pp->pp_micro > 0 && pp->batch_size > 0 && isfinite(pp->pp_stage0_bytes_model)) {
            const double M = pp->pp_micro, B = (double)pp->batch_size, b = pp->pp_stage0_bytes_model / M;
            const double time = (M + n - 1) * (B * t / n + 2.0 * (b / bw + a));
            snprintf(pc, sizeof pc, "%.2fx", M * B * t / time);
            snprintf(bub, sizeof bub, "%.2f", (n - 1) / M);
        } else if (hr_planned_run(rs, w->model, "pp-amp", 0) && !pp) {
            snprintf(pc, sizeof pc, "refused");
        }
        fprintf(f, "| %d | %s | %s | %s | %s |\n", n, d, tc, pc, bub);
    }
    fprintf(f, "\n");
}

void hr_write_model_parallel(FILE *f, const hr_runset *rs, const hr_workload *w) {
    const int planned = hr_planned_run(rs, w->model, "tp-amp", 0) || hr_planned_run(rs, w->model, "pp-amp", 0);
    if (!w->tp && !w->pp && !planned) return;
    fprintf(f, "### Data, tensor and pipeline parallelism\n\n");
    const hr_run *any = w->tp ? w->tp : w->pp ? w->pp : w->dp;
    fprintf(f,
            "MEASURED on %s ranks (%s): the same AMP training split three ways (samples/s and the speed-up over "
            "the one-rank AMP run; the most peak memory any rank held; rank 0's weights and fp32 master / "
            "gradients / optimizer state / activations; the most bytes a rank sent a step, measured / modelled: "
            "the gradients' ring under data parallelism, the activations' all-reduces under tensor parallelism, "
            "a stage's activations and gradients under pipeline parallelism; the pipeline's most idle time over "
            "busy time of a stage, measured / (P-1)/M):\n\n",
            any ? any->backend : "?", any ? any->device : "?");
    fprintf(f, "| mode | grid | ranks | samples/s | speed-up | peak memory per rank (MB, most) | rank 0: weights / "
               "gradients / optimizer / activations (MB) | bytes sent a step (measured / modelled) | idle share "
               "(measured / model) | test accuracy (%%) | run |\n|---|---|---|---|---|---|---|---|---|---|---|\n");
    if (w->amp) row(f, "amp", w->amp, w->amp);
    if (w->dp) row(f, "dp-amp", w->dp, w->amp);
    if (w->tp) row(f, "tp-amp", w->tp, w->amp);
    else missing_row(f, rs, w, "tp-amp");
    if (w->pp) row(f, "pp-amp", w->pp, w->amp);
    else missing_row(f, rs, w, "pp-amp");
    fprintf(f, "\n");
    if (any && strcmp(any->backend, "cpu") == 0)
        fprintf(f, "CPU ranks share the machine's cores and memory bus, so their times say how the splits work, "
                   "not how fast GPUs would run them; the memory per rank and the bytes are what a GPU run of the "
                   "same configuration would hold and send.\n\n");
    projection(f, w, rs);
}
