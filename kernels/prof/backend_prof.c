/* The profiling backend (backend_prof.h): every compute op forwarded to the wrapped backend and
 * timed, then recorded by the counting backend (kernels/cost), whose record takes the time. */
#include "backend_prof.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend_cost.h"
#include "timer.h"

typedef struct {
    ab_backend *inner, *cost;
    ab_backend_ops ops; /* this instance's table: the optional ops only where the inner has them */
    FILE *report;       /* where the table goes when the backend ends (ab_prof_report_at_destroy), or NULL */
    int restarted;      /* the table starts after the run's set-up steps (timed_part_begins) */
} prof_state;

static prof_state *st_of(ab_backend *be) {
    return (prof_state *)be->impl;
}

/* the records the counting backend made for one op, from the n0-th on, take the measured time (a
 * host backend's op has finished when it returns; a device's is only enqueued: see
 * backend_prof.h). An op may record more than one (gemm_fold: the product, then the fold a GPU runs
 * after it): this backend times the op as one, so its records become the first (a product's, with
 * the fold's bytes added), which takes the time (on the CPU the fold is done in the product's
 * tiles, or in a pass of the same op). Under amp the folding rows then hold the biases' and the
 * fp32-region tensors' folds alone. One that records none gives its time to no record. */
static int timed_from(prof_state *st, int rc, double dt, size_t n0) {
    if (rc != 0) return rc;
    ab_cost_merge_since(st->cost, n0);
    ab_op_cost *op = ab_cost_at(st->cost, n0);
    if (op) op->time_s = dt;
    return 0;
}

/* One forwarder per compute op, from the op list (core/backend_ops.def): prof_<op> runs the
 * wrapped backend's op, timed, then has the counting backend record its FLOPs and bytes. */
#define AB_OP_ARGS(...) __VA_ARGS__
#define AB_OP(name, params, args)                                                                                      \
    static int prof_##name AB_OP_PARAMS params { /* locals p_*: no op parameter has such a name */                     \
        prof_state *p_st = st_of(be);                                                                                  \
        const double p_t0 = ab_now();                                                                                  \
        const int p_rc = p_st->inner->ops->name(p_st->inner, AB_OP_ARGS args);                                         \
        if (p_rc != 0) return p_rc;                                                                                    \
        const double p_dt = ab_now() - p_t0;                                                                           \
        const size_t p_n0 = ab_cost_count(p_st->cost);                                                                 \
        return timed_from(p_st, p_st->cost->ops->name(p_st->cost, AB_OP_ARGS args), p_dt, p_n0);                      \
    }
#include "backend_ops.def"

/* ---- memory and the rest: forwarded, memory charged here too (the trainer reads this
 * backend's accounting and sets its cap here) ---- */

static void *p_alloc(ab_backend *be, ab_mem_category cat, size_t bytes) {
    if (ab_mem_admit(&be->mem, cat, bytes) != 0) return NULL;
    prof_state *st = st_of(be);
    void *p = st->inner->ops->alloc(st->inner, cat, bytes);
    if (p) ab_mem_charge(&be->mem, cat, bytes);
    return p;
}
static void p_release(ab_backend *be, ab_mem_category cat, void *p, size_t bytes) {
    if (!p) return;
    prof_state *st = st_of(be);
    st->inner->ops->release(st->inner, cat, p, bytes);
    ab_mem_release(&be->mem, cat, bytes);
}
static int p_upload(ab_backend *be, void *dst, const void *src, size_t bytes) {
    prof_state *st = st_of(be);
    return st->inner->ops->upload(st->inner, dst, src, bytes);
}
static int p_download(ab_backend *be, void *dst, const void *src, size_t bytes) {
    prof_state *st = st_of(be);
    const double t0 = ab_now();
    const int rc = st->inner->ops->download(st->inner, dst, src, bytes);
    const size_t n0 = ab_cost_count(st->cost);
    return rc != 0 ? rc
                   : timed_from(st, ab_cost_record(st->cost, "download", AB_OPC_SYNC, (double)bytes, 0), ab_now() - t0,
                                n0);
}
static int p_zero(ab_backend *be, void *p, size_t bytes) {
    prof_state *st = st_of(be);
    const double t0 = ab_now();
    const int rc = st->inner->ops->zero(st->inner, p, bytes);
    const size_t n0 = ab_cost_count(st->cost);
    return rc != 0 ? rc : timed_from(st, st->cost->ops->zero(st->cost, p, bytes), ab_now() - t0, n0);
}
static int p_sync(ab_backend *be) {
    prof_state *st = st_of(be);
    return st->inner->ops->sync(st->inner);
}
static void *p_stream(ab_backend *be) {
    prof_state *st = st_of(be);
    return st->inner->ops->stream(st->inner);
}
static int p_map_data(ab_backend *be, const void *host, size_t bytes, const void **mapped) {
    prof_state *st = st_of(be);
    return st->inner->ops->map_data(st->inner, host, bytes, mapped);
}
static void p_unmap_data(ab_backend *be, const void *mapped, size_t bytes) {
    prof_state *st = st_of(be);
    st->inner->ops->unmap_data(st->inner, mapped, bytes);
}
static int p_describe(ab_backend *be, ab_device_info *info) {
    prof_state *st = st_of(be);
    return st->inner->ops->describe(st->inner, info);
}
static void p_data_mark(ab_backend *be, int begin) {
    prof_state *st = st_of(be);
    st->inner->ops->data_mark(st->inner, begin);
}
static int p_data_time(ab_backend *be, double *seconds) {
    prof_state *st = st_of(be);
    return st->inner->ops->data_time(st->inner, seconds);
}

/* the run's set-up steps are over: the table starts again, as the run's clocks do */
static void p_timed_part_begins(ab_backend *be) {
    prof_state *st = st_of(be);
    ab_prof_clear(be);
    st->restarted = 1;
    if (st->inner->ops->timed_part_begins) st->inner->ops->timed_part_begins(st->inner);
}

static void p_destroy(ab_backend *be) {
    if (!be) return;
    prof_state *st = st_of(be);
    if (st && st->report) {
        size_t n;
        const ab_op_cost *ops = ab_cost_ops(st->cost, &n);
        if (st->restarted)
            fprintf(st->report, "profile: the run's set-up steps (--timing-skip-steps) left out, as from its clocks\n");
        ab_prof_report(st->report, ops, n, st->inner);
    }
    if (st) {
        if (st->inner) st->inner->ops->destroy(st->inner);
        if (st->cost) st->cost->ops->destroy(st->cost);
        free(st);
    }
    free(be);
}

ab_backend *ab_backend_prof_create(ab_backend *inner) {
    if (!inner) return NULL;
    ab_backend *be = calloc(1, sizeof *be);
    prof_state *st = calloc(1, sizeof *st);
    ab_backend *cost = ab_backend_cost_create();
    if (!be || !st || !cost) {
        free(be);
        free(st);
        if (cost) cost->ops->destroy(cost);
        ab_errorf("out of host memory creating the profiling backend");
        return NULL;
    }
    st->inner = inner, st->cost = cost;
    ab_backend_ops *o = &st->ops;
    *o = *inner->ops; /* name, is_host; every entry is replaced below */
    o->destroy = p_destroy;
    o->alloc = p_alloc;
    o->release = p_release;
    o->upload = p_upload;
    o->download = p_download;
    o->zero = p_zero;
    o->sync = p_sync;
    o->stream = inner->ops->stream ? p_stream : NULL;
    o->map_data = p_map_data;
    o->unmap_data = p_unmap_data;
    o->describe = inner->ops->describe ? p_describe : NULL;
    o->data_mark = inner->ops->data_mark ? p_data_mark : NULL;
    o->data_time = inner->ops->data_time ? p_data_time : NULL;
    o->timed_part_begins = p_timed_part_begins;
#define AB_OP(name, params, args) o->name = prof_##name;
#include "backend_ops.def"
    be->ops = o;
    be->impl = st;
    return be;
}

ab_backend *ab_backend_prof_inner(ab_backend *be) {
    return st_of(be)->inner;
}

const ab_op_cost *ab_prof_ops(ab_backend *be, size_t *n) {
    return ab_cost_ops(st_of(be)->cost, n);
}

void ab_prof_clear(ab_backend *be) {
    ab_cost_clear(st_of(be)->cost);
}

void ab_prof_report_at_destroy(ab_backend *be, FILE *f) {
    st_of(be)->report = f;
}

/* the kind an op's time is counted under */
static const char *kind_of(const char *op) {
    static const struct {
        const char *prefix, *kind;
    } kinds[] = {
        {"gemm", "GEMM (linear, attention products)"},
        {"conv2d_forward", "convolution forward"},
        {"conv2d_backward_data", "convolution backward-data"},
        {"conv2d_backward_filter", "convolution filter gradient"},
        {"batchnorm", "normalisation (batch, layer)"},
        {"layernorm", "normalisation (batch, layer)"},
        {"softmax_xent", "loss (softmax cross-entropy)"},
        {"softmax", "attention softmax"},
        {"gelu", "activation (ReLU, GELU, tanh)"},
        {"relu", "activation (ReLU, GELU, tanh)"},
        {"tanh", "activation (ReLU, GELU, tanh)"},
        {"dropout", "dropout"},
        {"add", "residual add"},
        {"maxpool", "pooling"},
        {"avgpool", "pooling"},
        {"embedding", "embedding"},
        {"gather", "data (batch assembly)"},
        {"sgd", "optimizer, unscale, norm, clip"},
        {"adamw", "optimizer, unscale, norm, clip"},
        {"unscale", "optimizer, unscale, norm, clip"},
        {"sum_squares", "optimizer, unscale, norm, clip"},
        {"scale", "optimizer, unscale, norm, clip"},
        {"cast", "fp16/bf16 conversion, gradient folding"},
        {"accumulate", "fp16/bf16 conversion, gradient folding"},
        {"col_sum", "bias gradients (column sums)"},
        {"log2_hist", "gradient census"},
        {"zero", "zeroing"},
        {"download", "read-back of the step's scalars"},
    };
    for (size_t i = 0; i < sizeof kinds / sizeof kinds[0]; i++)
        if (strncmp(op, kinds[i].prefix, strlen(kinds[i].prefix)) == 0) return kinds[i].kind;
    return op;
}

/* one GEMM shape alone on the backend, dense operands of type t (best of 3, GFLOP/s; 0 when the
 * buffers cannot be had) */
static double shape_rate(ab_backend *inner, const ab_op_cost *g) {
    const size_t es = ab_dtype_size(g->dtype), z = (size_t)(g->batch > 0 ? g->batch : 1);
    const size_t na = (size_t)g->M * g->K * z, nb = (size_t)g->K * g->N * z, nc = (size_t)g->M * g->N * z;
    void *a = inner->ops->alloc(inner, AB_MEM_WORKSPACE, na * es),
         *b = inner->ops->alloc(inner, AB_MEM_WORKSPACE, nb * es);
    void *c = inner->ops->alloc(inner, AB_MEM_WORKSPACE, nc * es);
    double best = 0.0;
    const int lda = g->ta ? g->M : g->K, ldb = g->tb ? g->K : g->N;
    if (a && b && c && inner->ops->zero(inner, a, na * es) == 0 && inner->ops->zero(inner, b, nb * es) == 0)
        for (int r = 0; r < 3; r++) {
            const double t0 = ab_now();
            const int rc =
                g->batch > 1
                    ? inner->ops->gemm_batched(inner, g->ta, g->tb, g->M, g->N, g->K, 1.0f, g->dtype, a, lda,
                                               (long long)g->M * g->K, g->dtype, b, ldb, (long long)g->K * g->N, 0.0f,
                                               g->dtype, c, g->N, (long long)g->M * g->N, g->batch)
                    : inner->ops->gemm(inner, g->ta, g->tb, g->M, g->N, g->K, 1.0f, g->dtype, a, lda, g->dtype, b, ldb,
                                       NULL, AB_EPI_NONE, 0.0f, g->dtype, c, g->N);
            if (rc != 0 || inner->ops->sync(inner) != 0) break;
            const double rate = g->flops / (ab_now() - t0);
            if (rate > best) best = rate;
        }
    inner->ops->release(inner, AB_MEM_WORKSPACE, a, na * es);
    inner->ops->release(inner, AB_MEM_WORKSPACE, b, nb * es);
    inner->ops->release(inner, AB_MEM_WORKSPACE, c, nc * es);
    return best;
}

/* the backend's own fp32 GEMM at 2048^3 (best of 3): the rate its products could reach here */
static double gemm_reference(ab_backend *inner) {
    enum { S = 2048 };
    const ab_op_cost g = {
        .dtype = AB_F32, .M = S, .N = S, .K = S, .batch = 1, .tb = 1, .flops = 2.0 * S * S * (double)S};
    return shape_rate(inner, &g);
}

/* The run's GEMM shapes: the ones that took the most time printed, in the run and alone; every
 * shape timed alone (the practical peak at the workload's own shapes). Returns the time all the
 * run's products would take at their shapes' rates alone, or 0 where that is not known (a device
 * backend, a product with no GEMM shape (a convolution), a shape whose buffers could not be had). */
static double run_shapes(FILE *f, const ab_op_cost *ops, size_t n, ab_backend *inner) {
    enum { TOP = 12, MAXS = 256 };
    ab_op_cost agg[MAXS];
    size_t na = 0;
    int lost = 0;
    for (size_t i = 0; i < n; i++) {
        const ab_op_cost *o = &ops[i];
        if (o->cls != AB_OPC_MATMUL) continue;
        if (o->M <= 0) { /* a product without its shape (a convolution): not timed alone here */
            lost = 1;
            continue;
        }
        size_t j = 0;
        while (j < na && !(agg[j].M == o->M && agg[j].N == o->N && agg[j].K == o->K && agg[j].batch == o->batch &&
                           agg[j].ta == o->ta && agg[j].tb == o->tb && agg[j].dtype == o->dtype))
            j++;
        if (j == na) {
            if (na == MAXS) {
                lost = 1;
                continue;
            }
            agg[na] = *o;
            agg[na].time_s = 0.0;
            agg[na].kernels = 0; /* calls */
            na++;
        }
        agg[j].time_s += o->time_s;
        agg[j].kernels++;
    }
    for (size_t i = 1; i < na; i++)
        for (size_t j = i; j > 0 && agg[j].time_s > agg[j - 1].time_s; j--) {
            const ab_op_cost t = agg[j];
            agg[j] = agg[j - 1];
            agg[j - 1] = t;
        }
    if (na)
        fprintf(f, "  the GEMM shapes that took the most time, in the run and alone on this backend (best of 3):\n");
    double alone_time = 0.0, rest_run = 0.0, rest_alone = 0.0;
    for (size_t j = 0; j < na; j++) {
        const ab_op_cost *g = &agg[j];
        const double run = g->time_s > 0 ? g->flops * g->kernels / g->time_s : 0.0;
        const double alone = inner->ops->is_host ? shape_rate(inner, g) : 0.0;
        if (alone > 0)
            alone_time += g->flops * g->kernels / alone;
        else
            lost = 1;
        if (j >= TOP) {
            rest_run += g->time_s;
            rest_alone += alone > 0 ? g->flops * g->kernels / alone : 0.0;
            continue;
        }
        char dims[64];
        if (g->batch > 1)
            snprintf(dims, sizeof dims, "%d x (%d x %d x %d)", g->batch, g->M, g->N, g->K);
        else
            snprintf(dims, sizeof dims, "%d x %d x %d", g->M, g->N, g->K);
        fprintf(f, "    %-7s %-24s %s%s %-4s: %6d calls, %7.1f GFLOP/s in the run, %7.1f alone\n",
                g->batch > 1 ? "batched" : "gemm", dims, g->ta ? "T" : "N", g->tb ? "T" : "N", ab_dtype_name(g->dtype),
                g->kernels, run / 1e9, alone / 1e9);
    }
    if (na > TOP)
        fprintf(f, "    and %zu shapes more: %.4f s in the run, %.4f s alone\n", na - TOP, rest_run, rest_alone);
    return lost ? 0.0 : alone_time;
}

void ab_prof_report(FILE *f, const ab_op_cost *ops, size_t n, ab_backend *inner) {
    typedef struct {
        const char *kind;
        long calls;
        double time, flops, bytes;
    } row;
    row rows[32];
    size_t nr = 0;
    double total = 0.0, flops = 0.0;
    for (size_t i = 0; i < n; i++) {
        const char *k = kind_of(ops[i].op);
        size_t j = 0;
        while (j < nr && strcmp(rows[j].kind, k) != 0) j++;
        if (j == nr) {
            if (nr == sizeof rows / sizeof rows[0]) continue;
            rows[nr++] = (row){.kind = k};
        }
        rows[j].calls++;
        rows[j].time += ops[i].time_s;
        rows[j].flops += ops[i].flops;
        rows[j].bytes += ops[i].bytes;
        total += ops[i].time_s;
        flops += ops[i].flops;
    }
    for (size_t i = 1; i < nr; i++) /* by time, largest first */
        for (size_t j = i; j > 0 && rows[j].time > rows[j - 1].time; j--) {
            const row t = rows[j];
            rows[j] = rows[j - 1];
            rows[j - 1] = t;
        }
    fprintf(f, "profile: every op the run issued (training and evaluation), its wall time on the %s backend\n",
            inner->ops->name);
    fprintf(f, "  %-42s %8s %10s %7s %10s %9s %9s %8s\n", "op kind", "calls", "seconds", "share", "GFLOP", "GFLOP/s",
            "GB", "GB/s");
    for (size_t j = 0; j < nr; j++) {
        const row *r = &rows[j];
        char fl[32] = "-", rate[32] = "-";
        if (r->flops > 0) {
            snprintf(fl, sizeof fl, "%.2f", r->flops / 1e9);
            if (r->time > 0) snprintf(rate, sizeof rate, "%.1f", r->flops / r->time / 1e9);
        }
        fprintf(f, "  %-42s %8ld %10.4f %6.1f%% %10s %9s %9.3f %8.2f\n", r->kind, r->calls, r->time,
                total > 0 ? 100.0 * r->time / total : 0.0, fl, rate, r->bytes / 1e9,
                r->time > 0 ? r->bytes / r->time / 1e9 : 0.0);
    }
    const double alone = run_shapes(f, ops, n, inner);
    const double peak = inner->ops->is_host ? gemm_reference(inner) : 0.0;
    fprintf(f, "  all ops: %.4f s, %.2f GFLOP, %.1f GFLOP/s over the ops' time", total, flops / 1e9,
            total > 0 ? flops / total / 1e9 : 0.0);
    if (peak > 0)
        fprintf(f, "; this backend's fp32 GEMM at 2048^3: %.1f GFLOP/s (best of 3): the ops reached %.0f%% of it\n",
                peak / 1e9, total > 0 ? 100.0 * flops / total / peak : 0.0);
    else
        fprintf(f, "\n");
    /* the practical peak at the run's own shapes: its products, each at its shape's rate alone
     * (only products carry FLOPs; run_shapes returns 0 when one was not timed alone, as a
     * convolution is not: its record has no GEMM shape) */
    if (alone > 0 && total > 0)
        fprintf(f,
                "  the run's own GEMM shapes, each at its rate alone: %.4g s for the products (%.1f GFLOP/s): the ops "
                "reached %.0f%% of that peak\n",
                alone, flops / alone / 1e9, 100.0 * alone / total);
    else if (inner->ops->is_host)
        fprintf(f, "  the run's own shapes: not all of its FLOPs are GEMMs timed alone (convolutions are not): no peak "
                   "at its own shapes\n");
}
