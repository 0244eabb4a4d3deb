/* The mpi communicator engine, and the process-level MPI state.
 * Blocking collectives (OpenMPI's tuned ones: on 2 CPU ranks an 800 kB MPI_Allreduce takes
 * about half the time of MPI_Iallreduce completed by polling MPI_Test), each watched by a
 * watchdog thread: a collective still running after the communicator's timeout (a peer that
 * hangs or stopped calling collectives) is reported on stderr and the job aborted with
 * MPI_Abort, the one place this library ends the process, since no thread can return from a
 * blocked collective. A peer that dies is caught sooner by mpirun, which kills the job; MPI
 * errors are returned (MPI_ERRORS_RETURN) and reported through ab_errorf. fp16 buffers are reduced with
 * a user-defined MPI op (fp16 on the wire, each pairwise sum done in fp32 and rounded once to
 * fp16, as NCCL does), not by converting to fp32 around the collective: halving the bytes moved
 * is the point of an fp16 all-reduce. AVG is SUM followed by a multiply by 1/size. */
#include <limits.h>
#include <mpi.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#include "comm_engines.h"
#include "cpu_features.h"
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

/* ---- process-level MPI state ---- */

static int mpi_inited_here;
static int mpi_thread_level = MPI_THREAD_SINGLE;

static int mpi_ensure_init(void) {
    int inited = 0, finalized = 0;
    MPI_Initialized(&inited);
    MPI_Finalized(&finalized);
    if (finalized) return ab_errorf("MPI was already finalized in this process: cannot create an mpi communicator");
    if (!inited) {
        /* OpenMPI's default non-blocking reduce (the parameter server's push) of a few ranks is
         * a segmented chain: each segment waits for the other rank to run, so ranks sharing
         * oversubscribed cores stalled for 0.8 s a step (the MLP, 2 ranks beside a busy
         * process; 0.6 ms without it). The binomial tree is one exchange per level. A setting of
         * the user's own (environment or mpirun --mca) wins; other MPIs ignore the variable. */
        setenv("OMPI_MCA_coll_libnbc_ireduce_algorithm", "2", 0);
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
/* ---- mpi ---- */

typedef struct {
    MPI_Comm comm;
    MPI_Op f16_sum, bf16_sum;
    void *stage; /* host copy of a device buffer */
    size_t stage_bytes;
    void *stage2; /* sendrecv's second one: what is received */
    size_t stage2_bytes;
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
 * nearest even, as tests/core/test_half.c checks for the CPU backend); else the scalar reference. */
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

/* the same for bf16: inout[i] = bf16(fp32(in[i]) + fp32(inout[i])), one rounding (NCCL's bf16
 * sum of two values does the same) */
static void bf16_sum_fn(void *in, void *inout, int *len, MPI_Datatype *dt) {
    (void)dt;
    const uint16_t *a = in;
    uint16_t *b = inout;
    for (int i = 0; i < *len; i++) b[i] = ab_f32_to_bf16(ab_bf16_to_f32(a[i]) + ab_bf16_to_f32(b[i]));
}

static int host_memory(const ab_comm *c) { return !c->be || c->be->ops->is_host; }

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
    if (t != AB_F32 && t != AB_F16 && t != AB_BF16)
        return ab_errorf("allreduce: %s buffers are not supported", ab_dtype_name(t));
    if (op != AB_RED_SUM && op != AB_RED_AVG) return ab_errorf("allreduce: buffers take SUM or AVG only");
    const size_t es = ab_dtype_size(t);
    void *h = NULL; /* stage_in sets it when it returns 0; gcc 12 -O3 cannot tell */
    AB_TRY(stage_in(c, buf, n * es, 1, &h));
    for (size_t off = 0; off < n;) { /* MPI counts are int */
        const int cnt = n - off > (size_t)(INT_MAX / 2) ? INT_MAX / 2 : (int)(n - off);
        if (t == AB_F32)
            AB_MPI_GUARDED(c, "MPI_Allreduce of the gradients",
                           MPI_Allreduce(MPI_IN_PLACE, (float *)h + off, cnt, MPI_FLOAT, MPI_SUM, m->comm));
        else
            AB_MPI_GUARDED(c, "MPI_Allreduce of the gradients (fp16/bf16)",
                           MPI_Allreduce(MPI_IN_PLACE, (uint16_t *)h + off, cnt, MPI_UINT16_T,
                                         t == AB_F16 ? m->f16_sum : m->bf16_sum, m->comm));
        off += (size_t)cnt;
    }
    if (op == AB_RED_AVG && c->size > 1) {
        const float inv = 1.0f / (float)c->size;
        if (t == AB_F32) {
            float *f = h;
            for (size_t i = 0; i < n; i++) f[i] *= inv;
        } else if (t == AB_F16) {
            f16_scale(n, h, inv);
        } else {
            uint16_t *b = h;
            for (size_t i = 0; i < n; i++) b[i] = ab_f32_to_bf16(ab_bf16_to_f32(b[i]) * inv);
        }
    }
    return stage_out(c, buf, h, n * es);
}

/* a blocking SUM to root, in place there (the other ranks' buffers are only read) */
static int mpi_reduce(ab_comm *c, void *buf, size_t n, ab_dtype t, int root) {
    mpi_impl *m = c->impl;
    const size_t es = ab_dtype_size(t);
    const int at_root = c->rank == root;
    void *h = NULL; /* stage_in sets it when it returns 0 */
    AB_TRY(stage_in(c, buf, n * es, 1, &h));
    for (size_t off = 0; off < n;) {
        const int cnt = n - off > (size_t)(INT_MAX / 2) ? INT_MAX / 2 : (int)(n - off);
        char *at = (char *)h + off * es;
        if (t == AB_F32)
            AB_MPI_GUARDED(c, "MPI_Reduce of the gradients",
                           MPI_Reduce(at_root ? MPI_IN_PLACE : at, at_root ? at : NULL, cnt, MPI_FLOAT, MPI_SUM,
                                      root, m->comm));
        else
            AB_MPI_GUARDED(c, "MPI_Reduce of the gradients (fp16/bf16)",
                           MPI_Reduce(at_root ? MPI_IN_PLACE : at, at_root ? at : NULL, cnt, MPI_UINT16_T,
                                      t == AB_F16 ? m->f16_sum : m->bf16_sum, root, m->comm));
        off += (size_t)cnt;
    }
    return at_root ? stage_out(c, buf, h, n * es) : 0;
}

/* Non-blocking on host memory: MPI_Iallreduce (root -1) or MPI_Ireduce, progressed by test and
 * finished by wait (under the watchdog). Device memory staged through the host, and counts past
 * an int, complete at once. */
static int mpi_ireduce(ab_comm *c, void *buf, size_t n, ab_dtype t, int root, ab_comm_req *req) {
    mpi_impl *m = c->impl;
    *req = (ab_comm_req){0};
    if (t != AB_F32 && t != AB_F16 && t != AB_BF16) {
        req->done = 1;
        return ab_errorf("reduce: %s buffers are not supported", ab_dtype_name(t));
    }
    if (root >= c->size) {
        req->done = 1;
        return ab_errorf("reduce: root %d outside a world of %d", root, c->size);
    }
    if (!host_memory(c) || n > (size_t)(INT_MAX / 2)) {
        req->done = 1;
        return root < 0 ? mpi_allreduce(c, buf, n, t, AB_RED_SUM) : mpi_reduce(c, buf, n, t, root);
    }
    MPI_Request *r = malloc(sizeof *r);
    if (!r) {
        req->done = 1;
        return ab_errorf("out of host memory for a request");
    }
    const MPI_Datatype dt = t == AB_F32 ? MPI_FLOAT : MPI_UINT16_T;
    const MPI_Op op = t == AB_F32 ? MPI_SUM : t == AB_F16 ? m->f16_sum : m->bf16_sum;
    const int at_root = c->rank == root;
    const int rc = root < 0 ? MPI_Iallreduce(MPI_IN_PLACE, buf, (int)n, dt, op, m->comm, r)
                            : MPI_Ireduce(at_root ? MPI_IN_PLACE : buf, at_root ? buf : NULL, (int)n, dt, op, root,
                                          m->comm, r);
    if (rc != MPI_SUCCESS) {
        free(r);
        req->done = 1; /* nothing in flight to test or wait for */
        return mpi_fail(root < 0 ? "MPI_Iallreduce" : "MPI_Ireduce", __FILE__, __LINE__, rc);
    }
    req->handle = r;
    return 0;
}

static int mpi_test(ab_comm *c, ab_comm_req *req) {
    (void)c;
    if (req->done) return 0;
    int flag = 0;
    const int rc = MPI_Test((MPI_Request *)req->handle, &flag, MPI_STATUS_IGNORE);
    if (rc != MPI_SUCCESS) return mpi_fail("MPI_Test", __FILE__, __LINE__, rc);
    if (flag) {
        free(req->handle);
        *req = (ab_comm_req){.done = 1};
    }
    return 0;
}

static int mpi_wait(ab_comm *c, ab_comm_req *req) {
    if (req->done) return 0;
    guard_begin(c, "MPI_Wait for a gradient bucket's reduction");
    const int rc = MPI_Wait((MPI_Request *)req->handle, MPI_STATUS_IGNORE);
    guard_end(c);
    free(req->handle);
    *req = (ab_comm_req){.done = 1};
    return rc == MPI_SUCCESS ? 0 : mpi_fail("MPI_Wait", __FILE__, __LINE__, rc);
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
    void *h = NULL; /* stage_in sets it when it returns 0; gcc 12 -O3 cannot tell */
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
        if (m->bf16_sum != MPI_OP_NULL) MPI_Op_free(&m->bf16_sum);
        if (m->comm != MPI_COMM_NULL) MPI_Comm_free(&m->comm);
        free(m->stage);
        free(m->stage2);
        free(m);
    }
    free(c);
}

/* host memory of `bytes` for one half of a sendrecv: the buffer itself on the CPU, else one of
 * the two staging buffers */
static int stage_buf(ab_comm *c, int which, size_t bytes, void **host) {
    mpi_impl *m = c->impl;
    void **buf = which ? &m->stage2 : &m->stage;
    size_t *cap = which ? &m->stage2_bytes : &m->stage_bytes;
    if (*cap < bytes) {
        void *p = realloc(*buf, bytes);
        if (!p) return ab_errorf("out of host memory staging %zu bytes for MPI", bytes);
        *buf = p;
        *cap = bytes;
    }
    *host = *buf;
    return 0;
}

static int mpi_sendrecv(ab_comm *c, const void *sbuf, size_t sbytes, int dst, void *rbuf, size_t rbytes, int src) {
    mpi_impl *m = c->impl;
    if (dst >= c->size || src >= c->size)
        return ab_errorf("sendrecv: peer %d outside a world of %d", dst >= c->size ? dst : src, c->size);
    const int host = host_memory(c);
    const void *s = sbuf;
    void *r = rbuf;
    if (!host && dst >= 0) {
        void *h = NULL;
        AB_TRY(stage_buf(c, 0, sbytes, &h));
        AB_TRY(c->be->ops->download(c->be, h, sbuf, sbytes));
        s = h;
    }
    if (!host && src >= 0) AB_TRY(stage_buf(c, 1, rbytes, &r));
    /* MPI counts are int: chunks of at most INT_MAX / 2 bytes each way, in step with the peer's
     * call (which names the same byte counts) */
    const size_t chunk = (size_t)(INT_MAX / 2), sn = dst >= 0 ? sbytes : 0, rn = src >= 0 ? rbytes : 0;
    for (size_t off = 0; off < sn || off < rn || off == 0; off += chunk) {
        const int sc = off < sn ? (int)(sn - off < chunk ? sn - off : chunk) : 0;
        const int rcnt = off < rn ? (int)(rn - off < chunk ? rn - off : chunk) : 0;
        AB_MPI_GUARDED(c, "MPI_Sendrecv (point to point)",
                       MPI_Sendrecv(sc ? (const char *)s + off : NULL, sc, MPI_BYTE, sc ? dst : MPI_PROC_NULL, 7,
                                    rcnt ? (char *)r + off : NULL, rcnt, MPI_BYTE, rcnt ? src : MPI_PROC_NULL, 7, m->comm,
                                    MPI_STATUS_IGNORE));
        if (off + chunk < off) break;
    }
    return !host && src >= 0 ? c->be->ops->upload(c->be, rbuf, r, rbytes) : 0;
}

static int mpi_wrap(ab_comm *c, MPI_Comm comm);
static void mpi_destroy(ab_comm *c);
static int mpi_new(ab_comm **out);

static int mpi_split(ab_comm *c, int color, int key, ab_comm **out) {
    mpi_impl *m = c->impl;
    *out = NULL;
    MPI_Comm sub = MPI_COMM_NULL;
    AB_MPI_GUARDED(c, "MPI_Comm_split", MPI_Comm_split(m->comm, color < 0 ? 0 : color, key, &sub));
    ab_comm *n = NULL;
    if (mpi_new(&n) != 0) {
        MPI_Comm_free(&sub);
        return -1;
    }
    if (mpi_wrap(n, sub) != 0) {
        mpi_destroy(n);
        return -1;
    }
    n->device = c->device;
    n->be = c->be;
    n->timeout_s = c->timeout_s;
    *out = n;
    return 0;
}

static const ab_comm_ops mpi_ops = {.name = "mpi", .allreduce = mpi_allreduce, .allreduce_i64 = mpi_allreduce_i64,
                                    .allreduce_f64 = mpi_allreduce_f64, .allgather_i64 = mpi_allgather_i64,
                                    .broadcast = mpi_broadcast, .barrier = mpi_barrier, .destroy = mpi_destroy,
                                    .ireduce = mpi_ireduce, .test = mpi_test, .wait = mpi_wait,
                                    .split = mpi_split, .sendrecv = mpi_sendrecv};

/* c takes comm (its own: freed with c) and starts its watchdog */
static int mpi_wrap(ab_comm *c, MPI_Comm comm) {
    mpi_impl *m = c->impl;
    m->comm = comm;
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
    AB_MPI_CHECK(MPI_Op_create(bf16_sum_fn, 1, &m->bf16_sum));
    m->rank = c->rank;
    if (pthread_create(&m->watchdog, NULL, watchdog_main, m) != 0)
        return ab_errorf("cannot start the communicator's watchdog thread");
    m->watching = 1;
    return 0;
}

static int mpi_setup(ab_comm *c) {
    AB_TRY(mpi_ensure_init());
    /* a communicator of our own: collectives of the library never match a caller's */
    MPI_Comm own = MPI_COMM_NULL;
    AB_MPI_CHECK(MPI_Comm_dup(MPI_COMM_WORLD, &own));
    return mpi_wrap(c, own);
}

/* an engine with no MPI communicator yet */
static int mpi_new(ab_comm **out) {
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
    m->bf16_sum = MPI_OP_NULL;
    pthread_mutex_init(&m->lock, NULL);
    pthread_cond_init(&m->wake, NULL);
    *c = (ab_comm){.ops = &mpi_ops, .size = 1, .local_size = 1, .device = -1, .timeout_s = 300.0, .impl = m};
    *out = c;
    return 0;
}

int ab_comm_mpi_create(ab_comm **out) {
    ab_comm *c = NULL;
    AB_TRY(mpi_new(&c));
    if (mpi_setup(c) != 0) {
        mpi_destroy(c);
        *out = NULL;
        return -1;
    }
    *out = c;
    return 0;
}
