/* The self and mpi communicator engines, and the process-level MPI state.
 * mpi: blocking collectives (OpenMPI's tuned ones: on 2 CPU ranks an 800 kB MPI_Allreduce takes
 * about half the time of MPI_Iallreduce completed by polling MPI_Test), each watched by a
 * watchdog thread: a collective still running after the communicator's timeout (a peer that
 * hangs or stopped calling collectives) is reported on stderr and the job aborted with
 * MPI_Abort, the one place this library ends the process, since no thread can return from a
 * blocked collective. A peer that dies is caught sooner by mpirun, which kills the job; MPI
 * errors are returned (MPI_ERRORS_RETURN) and reported through ab_errorf. fp16 buffers are reduced with
 * a user-defined MPI op (fp16 on the wire, each pairwise sum done in fp32 and rounded once to
 * fp16, as NCCL does), not by converting to fp32 around the collective: halving the bytes moved
 * is the point of an fp16 all-reduce. AVG is SUM followed by a multiply by 1/size. */
#include "comm.h"

#include <limits.h>
#include <mpi.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cpu_features.h"
#include "device.h"
#include "half.h"
#include "timer.h"

/* Every MPI call goes through this: the call, file and line, and MPI's own message. */
#define AB_MPI_CHECK(call)                                                                          \
    do {                                                                                            \
        const int ab_mpi_rc_ = (call);                                                              \
        if (ab_mpi_rc_ != MPI_SUCCESS) return mpi_fail(#call, __FILE__, __LINE__, ab_mpi_rc_);      \
    } while (0)

static int mpi_fail(const char *call, const char *file, int line, int rc) {
    char msg[MPI_MAX_ERROR_STRING] = "";
    int len = 0;
    MPI_Error_string(rc, msg, &len);
    return ab_errorf("%s failed at %s:%d: %s", call, file, line, msg);
}

static const char *const kind_names[] = {"auto", "self", "mpi", "nccl"};
_Static_assert(sizeof kind_names / sizeof kind_names[0] == AB_COMM_KIND_COUNT, "comm kind names");

const char *ab_comm_kind_name(ab_comm_kind k) { return (unsigned)k < AB_COMM_KIND_COUNT ? kind_names[k] : "?"; }

int ab_comm_parse(const char *s, ab_comm_kind *out) {
    for (int i = 0; i < AB_COMM_KIND_COUNT; i++)
        if (strcmp(s, kind_names[i]) == 0) {
            *out = (ab_comm_kind)i;
            return 0;
        }
    return ab_errorf("unknown communicator '%s' (expected auto, self, mpi or nccl)", s);
}

int ab_comm_launched(int *world) {
    static const char *const size_vars[] = {"OMPI_COMM_WORLD_SIZE", "PMIX_SIZE", "PMI_SIZE"};
    const int launched = getenv("OMPI_COMM_WORLD_SIZE") || getenv("PMIX_RANK") || getenv("PMI_RANK");
    if (world) {
        *world = 1;
        for (size_t i = 0; i < sizeof size_vars / sizeof size_vars[0]; i++) {
            const char *v = getenv(size_vars[i]);
            if (v && atoi(v) > 0) {
                *world = atoi(v);
                break;
            }
        }
    }
    return launched;
}

int ab_comm_launcher_rank(void) {
    static const char *const rank_vars[] = {"OMPI_COMM_WORLD_RANK", "PMIX_RANK", "PMI_RANK"};
    for (size_t i = 0; i < sizeof rank_vars / sizeof rank_vars[0]; i++) {
        const char *v = getenv(rank_vars[i]);
        if (v) return atoi(v);
    }
    return 0;
}

/* ---- process-level MPI state ---- */

static int mpi_inited_here;
static int mpi_thread_level = MPI_THREAD_SINGLE;

static int mpi_ensure_init(void) {
    int inited = 0, finalized = 0;
    MPI_Initialized(&inited);
    MPI_Finalized(&finalized);
    if (finalized) return ab_errorf("MPI was already finalized in this process: cannot create an mpi communicator");
    if (!inited) {
        int provided = 0; /* MULTIPLE so that the watchdog thread may call MPI_Abort */
        AB_MPI_CHECK(MPI_Init_thread(NULL, NULL, MPI_THREAD_MULTIPLE, &provided));
        mpi_inited_here = 1;
    }
    AB_MPI_CHECK(MPI_Query_thread(&mpi_thread_level));
    AB_MPI_CHECK(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN));
    return 0;
}

void ab_mpi_abort(int code) {
    int inited = 0, finalized = 0;
    MPI_Initialized(&inited);
    MPI_Finalized(&finalized);
    if (inited && !finalized) MPI_Abort(MPI_COMM_WORLD, code);
}

void ab_mpi_finalize(void) {
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (mpi_inited_here && !finalized) MPI_Finalize();
}

/* ---- self: world size 1 ---- */

static int self_allreduce(ab_comm *c, void *buf, size_t n, ab_dtype t, ab_reduce_op op) {
    (void)c, (void)buf, (void)n;
    if (t != AB_F32 && t != AB_F16) return ab_errorf("allreduce: %s buffers are not supported", ab_dtype_name(t));
    if (op != AB_RED_SUM && op != AB_RED_AVG) return ab_errorf("allreduce: buffers take SUM or AVG only");
    return 0;
}
static int self_allreduce_i64(ab_comm *c, int64_t *v, int n, ab_reduce_op op) {
    (void)c, (void)v, (void)n, (void)op;
    return 0;
}
static int self_allreduce_f64(ab_comm *c, double *v, int n, ab_reduce_op op) {
    (void)c, (void)v, (void)n, (void)op;
    return 0;
}
static int self_allgather_i64(ab_comm *c, int64_t v, int64_t *out) {
    (void)c;
    out[0] = v;
    return 0;
}
static int self_broadcast(ab_comm *c, void *buf, size_t bytes, int root) {
    (void)c, (void)buf, (void)bytes;
    return root == 0 ? 0 : ab_errorf("broadcast: root %d outside a world of 1", root);
}
static int self_barrier(ab_comm *c) {
    (void)c;
    return 0;
}
static void self_destroy(ab_comm *c) { free(c); }

static const ab_comm_ops self_ops = {.name = "self", .allreduce = self_allreduce, .allreduce_i64 = self_allreduce_i64,
                                     .allreduce_f64 = self_allreduce_f64, .allgather_i64 = self_allgather_i64,
                                     .broadcast = self_broadcast, .barrier = self_barrier, .destroy = self_destroy};

int ab_comm_self_create(ab_comm **out) {
    ab_comm *c = calloc(1, sizeof *c);
    if (!c) return ab_errorf("out of host memory for a communicator");
    *c = (ab_comm){.ops = &self_ops, .rank = 0, .size = 1, .local_rank = 0, .local_size = 1, .device = -1,
                   .timeout_s = 300.0};
    *out = c;
    return 0;
}

/* ---- mpi ---- */

typedef struct {
    MPI_Comm comm;
    MPI_Op f16_sum;
    void *stage; /* host copy of a device buffer */
    size_t stage_bytes;
    /* watchdog: start of the collective in progress (ns, 0 = none) and its name */
    _Atomic int64_t started_ns;
    const char *_Atomic what;
    pthread_t watchdog;
    pthread_mutex_t lock;
    pthread_cond_t wake;
    int watching, stop;
    int rank;
    _Atomic double timeout_s; /* copied from the communicator at each collective */
} mpi_impl;

static int64_t now_ns(void) { return (int64_t)(ab_now() * 1e9); }

static void *watchdog_main(void *arg) {
    mpi_impl *m = arg;
    pthread_mutex_lock(&m->lock);
    while (!m->stop) {
        struct timespec until;
        clock_gettime(CLOCK_REALTIME, &until);
        until.tv_nsec += 100000000L; /* look every 0.1 s */
        if (until.tv_nsec >= 1000000000L) until.tv_sec++, until.tv_nsec -= 1000000000L;
        pthread_cond_timedwait(&m->wake, &m->lock, &until);
        const int64_t t0 = atomic_load(&m->started_ns);
        if (m->stop || t0 == 0 || (double)(now_ns() - t0) * 1e-9 <= atomic_load(&m->timeout_s)) continue;
        fprintf(stderr,
                "ampbench: rank %d: %s did not complete within %.0f s: a peer rank died, hung or stopped calling "
                "collectives (--comm-timeout sets the limit); aborting the job\n",
                m->rank, atomic_load(&m->what), atomic_load(&m->timeout_s));
        fflush(stderr);
        if (mpi_thread_level == MPI_THREAD_MULTIPLE) MPI_Abort(MPI_COMM_WORLD, 1);
        _exit(1); /* without MPI_Finalize: mpirun ends the other ranks */
    }
    pthread_mutex_unlock(&m->lock);
    return NULL;
}

static void guard_begin(ab_comm *c, const char *what) {
    mpi_impl *m = c->impl;
    atomic_store(&m->timeout_s, c->timeout_s);
    atomic_store(&m->what, what);
    atomic_store(&m->started_ns, now_ns());
}
static void guard_end(ab_comm *c) { atomic_store(&((mpi_impl *)c->impl)->started_ns, 0); }

/* a blocking collective under the watchdog, its status checked */
#define AB_MPI_GUARDED(c, what, call)                                                               \
    do {                                                                                            \
        guard_begin(c, what);                                                                       \
        const int ab_mpi_rc_ = (call);                                                              \
        guard_end(c);                                                                               \
        if (ab_mpi_rc_ != MPI_SUCCESS) return mpi_fail(#call, __FILE__, __LINE__, ab_mpi_rc_);      \
    } while (0)

/* fp16 arithmetic in bulk: widen, operate in fp32, round once to fp16. Where the CPU has F16C
 * its conversions do it 8 at a time, bit-identical to ab_f16_to_f32/ab_f32_to_f16 (round to
 * nearest even, as tests/test_half.c checks for the CPU backend); else the scalar reference. */
#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
__attribute__((target("avx,f16c"))) static size_t f16_add_f16c(size_t n, const uint16_t *a, uint16_t *b) {
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        const __m256 x = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(a + i)));
        const __m256 y = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(b + i)));
        _mm_storeu_si128((__m128i *)(b + i), _mm256_cvtps_ph(_mm256_add_ps(x, y), _MM_FROUND_TO_NEAREST_INT));
    }
    return i;
}
__attribute__((target("avx,f16c"))) static size_t f16_scale_f16c(size_t n, uint16_t *b, float s) {
    size_t i = 0;
    const __m256 v = _mm256_set1_ps(s);
    for (; i + 8 <= n; i += 8) {
        const __m256 y = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(b + i)));
        _mm_storeu_si128((__m128i *)(b + i), _mm256_cvtps_ph(_mm256_mul_ps(y, v), _MM_FROUND_TO_NEAREST_INT));
    }
    return i;
}
#else
static size_t f16_add_f16c(size_t n, const uint16_t *a, uint16_t *b) { return (void)n, (void)a, (void)b, 0; }
static size_t f16_scale_f16c(size_t n, uint16_t *b, float s) { return (void)n, (void)b, (void)s, 0; }
#endif

/* b[i] = fp16(fp32(a[i]) + fp32(b[i])) */
static void f16_add(size_t n, const uint16_t *a, uint16_t *b) {
    size_t i = ab_cpu_has_f16c() ? f16_add_f16c(n, a, b) : 0;
    for (; i < n; i++) b[i] = ab_f32_to_f16(ab_f16_to_f32(a[i]) + ab_f16_to_f32(b[i]));
}

/* b[i] = fp16(fp32(b[i]) * s) */
static void f16_scale(size_t n, uint16_t *b, float s) {
    size_t i = ab_cpu_has_f16c() ? f16_scale_f16c(n, b, s) : 0;
    for (; i < n; i++) b[i] = ab_f32_to_f16(ab_f16_to_f32(b[i]) * s);
}

/* the MPI op: inout[i] = fp16(fp32(in[i]) + fp32(inout[i])) */
static void f16_sum_fn(void *in, void *inout, int *len, MPI_Datatype *dt) {
    (void)dt;
    f16_add((size_t)*len, in, inout);
}

static int host_memory(const ab_comm *c) { return !c->be || strcmp(c->be->ops->name, "cpu") == 0; }

/* host view of a backend buffer: itself on the CPU, else a staging copy (downloaded if load) */
static int stage_in(ab_comm *c, void *buf, size_t bytes, int load, void **host) {
    if (host_memory(c)) {
        *host = buf;
        return 0;
    }
    mpi_impl *m = c->impl;
    if (m->stage_bytes < bytes) {
        void *p = realloc(m->stage, bytes);
        if (!p) return ab_errorf("out of host memory staging %zu bytes for MPI", bytes);
        m->stage = p;
        m->stage_bytes = bytes;
    }
    *host = m->stage;
    return load ? c->be->ops->download(c->be, m->stage, buf, bytes) : 0;
}

static int stage_out(ab_comm *c, void *buf, const void *host, size_t bytes) {
    return host == buf ? 0 : c->be->ops->upload(c->be, buf, host, bytes);
}

static int mpi_allreduce(ab_comm *c, void *buf, size_t n, ab_dtype t, ab_reduce_op op) {
    mpi_impl *m = c->impl;
    if (t != AB_F32 && t != AB_F16) return ab_errorf("allreduce: %s buffers are not supported", ab_dtype_name(t));
    if (op != AB_RED_SUM && op != AB_RED_AVG) return ab_errorf("allreduce: buffers take SUM or AVG only");
    const size_t es = ab_dtype_size(t);
    void *h;
    AB_TRY(stage_in(c, buf, n * es, 1, &h));
    for (size_t off = 0; off < n;) { /* MPI counts are int */
        const int cnt = n - off > (size_t)(INT_MAX / 2) ? INT_MAX / 2 : (int)(n - off);
        if (t == AB_F32)
            AB_MPI_GUARDED(c, "MPI_Allreduce of the gradients",
                           MPI_Allreduce(MPI_IN_PLACE, (float *)h + off, cnt, MPI_FLOAT, MPI_SUM, m->comm));
        else
            AB_MPI_GUARDED(c, "MPI_Allreduce of the gradients (fp16)",
                           MPI_Allreduce(MPI_IN_PLACE, (uint16_t *)h + off, cnt, MPI_UINT16_T, m->f16_sum, m->comm));
        off += (size_t)cnt;
    }
    if (op == AB_RED_AVG && c->size > 1) {
        const float inv = 1.0f / (float)c->size;
        if (t == AB_F32) {
            float *f = h;
            for (size_t i = 0; i < n; i++) f[i] *= inv;
        } else {
            f16_scale(n, h, inv);
        }
    }
    return stage_out(c, buf, h, n * es);
}

static MPI_Op host_op(ab_reduce_op op) { return op == AB_RED_MIN ? MPI_MIN : op == AB_RED_MAX ? MPI_MAX : MPI_SUM; }

static int mpi_allreduce_i64(ab_comm *c, int64_t *v, int n, ab_reduce_op op) {
    mpi_impl *m = c->impl;
    if (op == AB_RED_AVG) return ab_errorf("allreduce_i64: AVG is not defined on integers");
    AB_MPI_GUARDED(c, "MPI_Allreduce (int64)", MPI_Allreduce(MPI_IN_PLACE, v, n, MPI_INT64_T, host_op(op), m->comm));
    return 0;
}

static int mpi_allreduce_f64(ab_comm *c, double *v, int n, ab_reduce_op op) {
    mpi_impl *m = c->impl;
    AB_MPI_GUARDED(c, "MPI_Allreduce (double)", MPI_Allreduce(MPI_IN_PLACE, v, n, MPI_DOUBLE, host_op(op), m->comm));
    if (op == AB_RED_AVG)
        for (int i = 0; i < n; i++) v[i] /= c->size;
    return 0;
}

static int mpi_allgather_i64(ab_comm *c, int64_t v, int64_t *out) {
    mpi_impl *m = c->impl;
    AB_MPI_GUARDED(c, "MPI_Allgather", MPI_Allgather(&v, 1, MPI_INT64_T, out, 1, MPI_INT64_T, m->comm));
    return 0;
}

static int mpi_broadcast(ab_comm *c, void *buf, size_t bytes, int root) {
    mpi_impl *m = c->impl;
    void *h;
    AB_TRY(stage_in(c, buf, bytes, c->rank == root, &h));
    for (size_t off = 0; off < bytes;) {
        const int cnt = bytes - off > (size_t)(INT_MAX / 2) ? INT_MAX / 2 : (int)(bytes - off);
        AB_MPI_GUARDED(c, "MPI_Bcast", MPI_Bcast((char *)h + off, cnt, MPI_BYTE, root, m->comm));
        off += (size_t)cnt;
    }
    return stage_out(c, buf, h, bytes);
}

static int mpi_barrier(ab_comm *c) {
    mpi_impl *m = c->impl;
    AB_MPI_GUARDED(c, "MPI_Barrier", MPI_Barrier(m->comm));
    return 0;
}

static void mpi_destroy(ab_comm *c) {
    if (!c) return;
    mpi_impl *m = c->impl;
    if (m) {
        if (m->watching) {
            pthread_mutex_lock(&m->lock);
            m->stop = 1;
            pthread_cond_signal(&m->wake);
            pthread_mutex_unlock(&m->lock);
            pthread_join(m->watchdog, NULL);
        }
        pthread_mutex_destroy(&m->lock);
        pthread_cond_destroy(&m->wake);
        if (m->f16_sum != MPI_OP_NULL) MPI_Op_free(&m->f16_sum);
        if (m->comm != MPI_COMM_NULL) MPI_Comm_free(&m->comm);
        free(m->stage);
        free(m);
    }
    free(c);
}

static const ab_comm_ops mpi_ops = {.name = "mpi", .allreduce = mpi_allreduce, .allreduce_i64 = mpi_allreduce_i64,
                                    .allreduce_f64 = mpi_allreduce_f64, .allgather_i64 = mpi_allgather_i64,
                                    .broadcast = mpi_broadcast, .barrier = mpi_barrier, .destroy = mpi_destroy};

static int mpi_setup(ab_comm *c) {
    mpi_impl *m = c->impl;
    AB_TRY(mpi_ensure_init());
    /* a communicator of our own: collectives of the library never match a caller's */
    AB_MPI_CHECK(MPI_Comm_dup(MPI_COMM_WORLD, &m->comm));
    AB_MPI_CHECK(MPI_Comm_set_errhandler(m->comm, MPI_ERRORS_RETURN));
    AB_MPI_CHECK(MPI_Comm_rank(m->comm, &c->rank));
    AB_MPI_CHECK(MPI_Comm_size(m->comm, &c->size));
    MPI_Comm local;
    AB_MPI_CHECK(MPI_Comm_split_type(m->comm, MPI_COMM_TYPE_SHARED, c->rank, MPI_INFO_NULL, &local));
    const int r1 = MPI_Comm_rank(local, &c->local_rank), r2 = MPI_Comm_size(local, &c->local_size);
    MPI_Comm_free(&local);
    AB_MPI_CHECK(r1);
    AB_MPI_CHECK(r2);
    AB_MPI_CHECK(MPI_Op_create(f16_sum_fn, 1, &m->f16_sum));
    m->rank = c->rank;
    if (pthread_create(&m->watchdog, NULL, watchdog_main, m) != 0)
        return ab_errorf("cannot start the communicator's watchdog thread");
    m->watching = 1;
    return 0;
}

int ab_comm_mpi_create(ab_comm **out) {
    *out = NULL;
    ab_comm *c = calloc(1, sizeof *c);
    mpi_impl *m = calloc(1, sizeof *m);
    if (!c || !m) {
        free(c);
        free(m);
        return ab_errorf("out of host memory for a communicator");
    }
    m->comm = MPI_COMM_NULL;
    m->f16_sum = MPI_OP_NULL;
    pthread_mutex_init(&m->lock, NULL);
    pthread_cond_init(&m->wake, NULL);
    *c = (ab_comm){.ops = &mpi_ops, .size = 1, .local_size = 1, .device = -1, .timeout_s = 300.0, .impl = m};
    if (mpi_setup(c) != 0) {
        mpi_destroy(c);
        return -1;
    }
    *out = c;
    return 0;
}

/* ---- factory ---- */

int ab_comm_gpu_index(int local_rank, int gpus) { return gpus > 0 && local_rank >= 0 ? local_rank % gpus : -1; }

int ab_comm_create(ab_comm_kind kind, const char *device, double timeout_s, ab_comm **out) {
    *out = NULL;
    const int on_cpu = device && strcmp(device, "cpu") == 0;
    if (kind == AB_COMM_NCCL && on_cpu)
        return ab_errorf("--comm nccl needs --device cuda: NCCL all-reduces GPU buffers and --device cpu keeps "
                         "them in host memory (use --comm mpi with --device cpu)");
    if (kind == AB_COMM_AUTO) {
        int world = 1;
        const int launched = ab_comm_launched(&world);
        kind = !launched || world <= 1 ? AB_COMM_SELF
               : device && strcmp(device, "cuda") == 0 ? AB_COMM_NCCL
                                                        : AB_COMM_MPI;
    }
    int rc;
    switch (kind) {
    case AB_COMM_SELF: rc = ab_comm_self_create(out); break;
    case AB_COMM_MPI: rc = ab_comm_mpi_create(out); break;
    case AB_COMM_NCCL: rc = ab_comm_nccl_create(out); break;
    default: rc = ab_errorf("unknown communicator kind %d", (int)kind);
    }
    if (rc != 0) return rc;
    if (timeout_s > 0) (*out)->timeout_s = timeout_s;
    /* the nccl engine has chosen (and checked) its GPU; for the others the same rule */
    if (kind != AB_COMM_NCCL && device && !on_cpu)
        (*out)->device = ab_comm_gpu_index((*out)->local_rank, ab_cuda_device_count(NULL));
    return 0;
}

void ab_comm_destroy(ab_comm *c) {
    if (c) c->ops->destroy(c);
}

int ab_comm_flag_max(ab_comm *c, int *flag) {
    int64_t v = *flag;
    AB_TRY(c->ops->allreduce_i64(c, &v, 1, AB_RED_MAX));
    *flag = (int)v;
    return 0;
}
