/* oneDNN under the CPU backend's matrix products.
 *
 * fp32: dnnl_sgemm, oneDNN's BLAS-like sgemm, which picks its kernels by the instructions the CPU
 * has when it runs (AVX-512, AVX2, ...) rather than by a table of CPU models, as OpenBLAS does: on
 * an AMD Zen 5 OpenBLAS 0.3.21 takes its AVX2 kernels, at half the rate (a single core at
 * 2048 x 384 x 384: 252 GFLOP/s here, 130 in OpenBLAS's Haswell kernels, 264 in its SkylakeX
 * ones). runtime_cpu.c's cpu_sgemm calls it for each part of the pool, OpenBLAS where oneDNN is
 * absent or fails.
 *
 * bf16: matrix products on the CPU's own bf16 instructions (AVX512-BF16, AMX tiles) through
 * oneDNN's matmul primitive: bf16 operands, fp32 accumulation, an fp32 product. The CPU backend
 * uses it for a GEMM whose two operands are stored in bf16 when the CPU has the instructions and
 * the run did not ask for the emulated path (AB_CPU_BF16=emulated); otherwise, and on a CPU
 * without them, the emulated path (operands widened exactly to fp32, OpenBLAS sgemm) stays, and
 * it is the reference: the two agree within bf16's rounding (tests/ops/test_bf16_native.c).
 *
 * Threads: like OpenBLAS in cpu_sgemm, oneDNN runs single-threaded inside each part of the
 * backend's pool (a block of C's rows or columns), so no second set of workers spins on the cores
 * the pool's loops need. A built oneDNN primitive is kept per part and shape, since building one
 * costs as much as a small product. A part's primitives are only ever run by one thread at a time
 * (one thread drives a backend, and a part runs on one thread), as oneDNN built without concurrent
 * execution requires. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime_cpu.h"

#ifdef AB_HAVE_DNNL
#include <oneapi/dnnl/dnnl.h>
#include <oneapi/dnnl/dnnl_debug.h>

#if DNNL_CPU_THREADING_RUNTIME == DNNL_RUNTIME_OMP
extern void omp_set_num_threads(int n); /* libgomp, which oneDNN runs on */
#define ONE_THREAD() omp_set_num_threads(1)
#elif DNNL_CPU_THREADING_RUNTIME == DNNL_RUNTIME_SEQ
#define ONE_THREAD() ((void)0)
#else
#error "oneDNN built with a threading runtime other than OpenMP or sequential: configure with -DAB_WITH_DNNL=OFF"
#endif

enum { CACHE_ENTRIES = 256 }; /* ResNet-50 alone has about 60 product shapes */

typedef struct {
    int ta, tb, M, N, K, lda, ldb, ldc, used;
    dnnl_primitive_t prim;
    dnnl_memory_t a, b, c;
} mm_entry;

struct cpu_bf16_part {
    dnnl_stream_t stream;
    mm_entry e[CACHE_ENTRIES];
    int next; /* the entry a new shape replaces (round robin) */
};

static dnnl_engine_t engine;
static int engine_state; /* 0 not tried, 1 ready, -1 unusable */
static pthread_once_t engine_once = PTHREAD_ONCE_INIT;
static char why[200];

static void engine_init(void) {
    const dnnl_version_t *v = dnnl_version();
    const dnnl_cpu_isa_t isa = dnnl_get_effective_cpu_isa();
    if (((unsigned)isa & (unsigned)dnnl_cpu_isa_avx512_core_bf16) != (unsigned)dnnl_cpu_isa_avx512_core_bf16) {
        snprintf(why, sizeof why, "emulated (no AVX512-BF16 or AMX on this CPU; oneDNN %d.%d.%d)", v->major, v->minor,
                 v->patch);
        engine_state = -1;
        return;
    }
    if (dnnl_engine_create(&engine, dnnl_cpu, 0) != dnnl_success) {
        snprintf(why, sizeof why, "emulated (oneDNN %d.%d.%d could not create its CPU engine)", v->major, v->minor,
                 v->patch);
        engine_state = -1;
        return;
    }
    const int amx = ((unsigned)isa & (unsigned)dnnl_cpu_isa_avx512_core_amx) == (unsigned)dnnl_cpu_isa_avx512_core_amx;
    snprintf(why, sizeof why, "native (%s, oneDNN %d.%d.%d matmul)", amx ? "AMX" : "AVX512-BF16", v->major, v->minor,
             v->patch);
    engine_state = 1;
}

int cpu_sgemm_onednn(int ta, int tb, int M, int N, int K, float alpha, const float *A, int lda, const float *B,
                     int ldb, float beta, float *C, int ldc) {
    ONE_THREAD();
    return dnnl_sgemm(ta ? 'T' : 'N', tb ? 'T' : 'N', M, N, K, alpha, A, lda, B, ldb, beta, C, ldc) == dnnl_success
               ? 0
               : -1;
}

const char *cpu_onednn_version(void) {
    static char buf[32];
    const dnnl_version_t *v = dnnl_version();
    snprintf(buf, sizeof buf, "oneDNN %d.%d.%d", v->major, v->minor, v->patch);
    return buf;
}

int cpu_bf16_native_available(void) {
    pthread_once(&engine_once, engine_init);
    return engine_state == 1;
}

const char *cpu_bf16_native_describe(void) {
    pthread_once(&engine_once, engine_init);
    return why;
}

static void entry_free(mm_entry *e) {
    if (e->prim) dnnl_primitive_destroy(e->prim);
    if (e->a) dnnl_memory_destroy(e->a);
    if (e->b) dnnl_memory_destroy(e->b);
    if (e->c) dnnl_memory_destroy(e->c);
    memset(e, 0, sizeof *e);
}

void cpu_bf16_parts_free(cpu_state *st) {
    if (!st->bf16_parts) return;
    for (int p = 0; p < st->bf16_nparts; p++) {
        cpu_bf16_part *pt = &st->bf16_parts[p];
        for (int i = 0; i < CACHE_ENTRIES; i++) entry_free(&pt->e[i]);
        if (pt->stream) dnnl_stream_destroy(pt->stream);
    }
    free(st->bf16_parts);
    st->bf16_parts = NULL;
    st->bf16_nparts = 0;
}

/* the primitive for C (M x N, f32, ld ldc) = op(A) op(B), bf16, row-major */
/* a failed oneDNN call: the first one's step and status, kept for the calling thread's message */
static void note_failure(cpu_state *st, const char *step, dnnl_status_t status) {
    const char *none = NULL;
    if (__atomic_compare_exchange_n(&st->bf16_fail_step, &none, step, 0, __ATOMIC_RELAXED, __ATOMIC_RELAXED))
        __atomic_store_n(&st->bf16_fail_status, (int)status, __ATOMIC_RELAXED);
}

#define DNNL_STEP(st, call)                                                                        \
    do {                                                                                           \
        const dnnl_status_t s_ = (call);                                                           \
        if (s_ != dnnl_success) {                                                                  \
            note_failure(st, #call, s_);                                                           \
            goto fail;                                                                             \
        }                                                                                          \
    } while (0)

static mm_entry *entry_get(cpu_state *st, cpu_bf16_part *pt, int ta, int tb, int M, int N, int K, int lda, int ldb,
                           int ldc) {
    for (int i = 0; i < CACHE_ENTRIES; i++) {
        mm_entry *e = &pt->e[i];
        if (e->used && e->ta == ta && e->tb == tb && e->M == M && e->N == N && e->K == K && e->lda == lda &&
            e->ldb == ldb && e->ldc == ldc)
            return e;
    }
    mm_entry *e = &pt->e[pt->next];
    pt->next = (pt->next + 1) % CACHE_ENTRIES;
    entry_free(e);
    dnnl_memory_desc_t ad, bd, cd;
    const dnnl_dims_t adims = {M, K}, bdims = {K, N}, cdims = {M, N};
    const dnnl_dims_t as = {ta ? 1 : lda, ta ? lda : 1}, bs = {tb ? 1 : ldb, tb ? ldb : 1}, cs = {ldc, 1};
    dnnl_matmul_desc_t md;
    dnnl_primitive_desc_t pd = NULL;
    DNNL_STEP(st, dnnl_memory_desc_init_by_strides(&ad, 2, adims, dnnl_bf16, as));
    DNNL_STEP(st, dnnl_memory_desc_init_by_strides(&bd, 2, bdims, dnnl_bf16, bs));
    DNNL_STEP(st, dnnl_memory_desc_init_by_strides(&cd, 2, cdims, dnnl_f32, cs));
    DNNL_STEP(st, dnnl_matmul_desc_init(&md, &ad, &bd, NULL, &cd));
    DNNL_STEP(st, dnnl_primitive_desc_create(&pd, &md, NULL, engine, NULL));
    DNNL_STEP(st, dnnl_primitive_create(&e->prim, pd));
    DNNL_STEP(st, dnnl_memory_create(&e->a, &ad, engine, DNNL_MEMORY_NONE));
    DNNL_STEP(st, dnnl_memory_create(&e->b, &bd, engine, DNNL_MEMORY_NONE));
    DNNL_STEP(st, dnnl_memory_create(&e->c, &cd, engine, DNNL_MEMORY_NONE));
    dnnl_primitive_desc_destroy(pd);
    *e = (mm_entry){ta, tb, M, N, K, lda, ldb, ldc, 1, e->prim, e->a, e->b, e->c};
    return e;
fail:
    if (pd) dnnl_primitive_desc_destroy(pd);
    entry_free(e);
    return NULL;
}

typedef struct {
    cpu_state *st;
    int ta, tb, M, N, K, lda, ldb, ldc, by_rows, tile;
    const uint16_t *A, *B;
    float *C;
    int failed; /* set by a part whose primitive could not be built or run */
} bf16_job;

static int part_run(bf16_job *j, int part, int M, int N, const uint16_t *a, const uint16_t *b, float *c) {
    cpu_state *st = j->st;
    cpu_bf16_part *pt = &st->bf16_parts[part];
    ONE_THREAD();
    if (!pt->stream) DNNL_STEP(st, dnnl_stream_create(&pt->stream, engine, dnnl_stream_default_flags));
    mm_entry *e = entry_get(st, pt, j->ta, j->tb, M, N, j->K, j->lda, j->ldb, j->ldc);
    if (!e) return -1;
    DNNL_STEP(st, dnnl_memory_set_data_handle(e->a, (void *)a));
    DNNL_STEP(st, dnnl_memory_set_data_handle(e->b, (void *)b));
    DNNL_STEP(st, dnnl_memory_set_data_handle(e->c, c));
    const dnnl_exec_arg_t args[3] = {{DNNL_ARG_SRC, e->a}, {DNNL_ARG_WEIGHTS, e->b}, {DNNL_ARG_DST, e->c}};
    DNNL_STEP(st, dnnl_primitive_execute(e->prim, pt->stream, 3, args));
    DNNL_STEP(st, dnnl_stream_wait(pt->stream));
    return 0;
fail:
    return -1;
}

static void bf16_range(void *ctx, int part, size_t lo, size_t hi) {
    bf16_job *j = ctx;
    const int along = j->by_rows ? j->M : j->N;
    for (size_t t = lo; t < hi; t++) {
        const int o = (int)t * j->tile, n = along - o < j->tile ? along - o : j->tile;
        int rc;
        if (j->by_rows) { /* rows o.. of op(A) and C */
            const uint16_t *a = j->ta ? j->A + o : j->A + (size_t)o * j->lda;
            rc = part_run(j, part, n, j->N, a, j->B, j->C + (size_t)o * j->ldc);
        } else { /* columns o.. of op(B) and C */
            const uint16_t *b = j->tb ? j->B + (size_t)o * j->ldb : j->B + o;
            rc = part_run(j, part, j->M, n, j->A, b, j->C + o);
        }
        if (rc) {
            __atomic_store_n(&j->failed, 1, __ATOMIC_RELAXED);
            return;
        }
    }
}

const char *cpu_bf16_failure(ab_backend *be) {
    static _Thread_local char buf[200];
    cpu_state *st = be->impl;
    const char *step = __atomic_exchange_n(&st->bf16_fail_step, NULL, __ATOMIC_RELAXED);
    if (!step) return "oneDNN reported no failure";
    const size_t len = strcspn(step, "(");
    snprintf(buf, sizeof buf, "%.*s: %s", (int)len, step,
             dnnl_status2str((dnnl_status_t)__atomic_load_n(&st->bf16_fail_status, __ATOMIC_RELAXED)));
    return buf;
}

int cpu_bf16_parts_ready(ab_backend *be) {
    cpu_state *st = be->impl;
    if (!cpu_bf16_native_available()) return ab_errorf("bf16 GEMM: %s", why);
    if (st->bf16_parts) return 0;
    const int parts = st->threads > 1 ? st->threads : 1;
    st->bf16_parts = calloc((size_t)parts, sizeof *st->bf16_parts);
    if (!st->bf16_parts) return ab_errorf("out of host memory for the bf16 GEMM's primitives");
    st->bf16_nparts = parts;
    return 0;
}

int cpu_gemm_bf16_on_part(ab_backend *be, int part, int ta, int tb, int M, int N, int K, const uint16_t *A, int lda,
                          const uint16_t *B, int ldb, float *C, int ldc) {
    bf16_job j = {be->impl, ta, tb, M, N, K, lda, ldb, ldc, 1, M, A, B, C, 0};
    return part_run(&j, part, M, N, A, B, C);
}

int cpu_gemm_bf16_native(ab_backend *be, int ta, int tb, int M, int N, int K, const uint16_t *A, int lda,
                         const uint16_t *B, int ldb, float *C, int ldc) {
    cpu_state *st = be->impl;
    AB_TRY(cpu_bf16_parts_ready(be));
    const int by_rows = M >= N, along = by_rows ? M : N, tile = cpu_gemm_tile(along, (double)M * N * K);
    bf16_job j = {st, ta, tb, M, N, K, lda, ldb, ldc, by_rows, tile, A, B, C, 0};
    cpu_parallel_for(be, (size_t)((along + tile - 1) / tile), 1, bf16_range, &j);
    if (j.failed)
        return ab_errorf("bf16 GEMM %dx%dx%d (%c%c): oneDNN's matmul failed in %s", M, N, K, ta ? 'T' : 'N',
                         tb ? 'T' : 'N', cpu_bf16_failure(be));
    return 0;
}

#else /* built without oneDNN */

int cpu_sgemm_onednn(int ta, int tb, int M, int N, int K, float alpha, const float *A, int lda, const float *B,
                     int ldb, float beta, float *C, int ldc) {
    (void)ta, (void)tb, (void)M, (void)N, (void)K, (void)alpha, (void)A, (void)lda, (void)B, (void)ldb, (void)beta;
    (void)C, (void)ldc;
    return -1;
}
const char *cpu_onednn_version(void) { return NULL; }
int cpu_bf16_native_available(void) { return 0; }
const char *cpu_bf16_native_describe(void) { return "emulated (built without oneDNN)"; }
void cpu_bf16_parts_free(cpu_state *st) { (void)st; }
const char *cpu_bf16_failure(ab_backend *be) {
    (void)be;
    return "built without oneDNN";
}
int cpu_bf16_parts_ready(ab_backend *be) {
    (void)be;
    return ab_errorf("bf16 GEMM: built without oneDNN");
}
int cpu_gemm_bf16_on_part(ab_backend *be, int part, int ta, int tb, int M, int N, int K, const uint16_t *A, int lda,
                          const uint16_t *B, int ldb, float *C, int ldc) {
    (void)be, (void)part, (void)ta, (void)tb, (void)M, (void)N, (void)K, (void)A, (void)lda, (void)B, (void)ldb;
    (void)C, (void)ldc;
    return -1; /* never reached: bf16_native stays 0 without oneDNN */
}
int cpu_gemm_bf16_native(ab_backend *be, int ta, int tb, int M, int N, int K, const uint16_t *A, int lda,
                         const uint16_t *B, int ldb, float *C, int ldc) {
    (void)be, (void)ta, (void)tb, (void)M, (void)N, (void)K, (void)A, (void)lda, (void)B, (void)ldb, (void)C, (void)ldc;
    return ab_errorf("bf16 GEMM: built without oneDNN");
}

#endif
