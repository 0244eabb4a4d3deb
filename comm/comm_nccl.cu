/* The nccl communicator engine: NCCL collectives on device buffers (fp32/fp16/bf16, in place),
 * bootstrapped over MPI through the mpi engine, which also carries the small host-side
 * reductions: rank 0 creates the NCCL unique id and MPI broadcasts it. A process started without a
 * launcher (no mpirun: ab_comm_launched) is a world of one and boots through the self engine
 * instead, with no MPI_Init at all: NCCL's initialisation, collectives and teardown still run, which
 * is how the GPU check exercises NCCL on a machine whose MPI launcher did not travel. Each rank takes GPU
 * node-local rank modulo the GPUs it sees (ab_comm_gpu_index), so both one process seeing every
 * GPU of the node and a per-rank CUDA_VISIBLE_DEVICES work; two ranks on one GPU are refused.
 * The communicator is non-blocking (NCCL config blocking = 0) and every wait polls, yielding the
 * CPU, for completion, NCCL's asynchronous error and the communicator's timeout, aborting the NCCL
 * communicator on any failure, so that a dead peer turns into an error return rather than a hang.
 * AVG is ncclSum followed by a multiply by 1/W on the device, as the mpi engine does (comm.h). */
#include <cuda_runtime.h>
#include <nccl.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "comm_engines.h"
extern "C" {
#include "half.h"
#include "timer.h"
}

#define AB_CUDA_CHECK(call)                                                                         \
    do {                                                                                            \
        const cudaError_t ab_e_ = (call);                                                           \
        if (ab_e_ != cudaSuccess)                                                                   \
            return ab_errorf("%s failed at %s:%d: %s", #call, __FILE__, __LINE__, cudaGetErrorString(ab_e_)); \
    } while (0)

/* ncclInProgress is not a failure on a non-blocking communicator: the wait completes it */
#define AB_NCCL_CHECK(call)                                                                         \
    do {                                                                                            \
        const ncclResult_t ab_r_ = (call);                                                          \
        if (ab_r_ != ncclSuccess && ab_r_ != ncclInProgress)                                        \
            return ab_errorf("%s failed at %s:%d: %s (%s)", #call, __FILE__, __LINE__, ncclGetErrorString(ab_r_), \
                             ncclGetLastError(NULL));                                               \
    } while (0)

/* the same for a collective: its failure leaves the peers waiting inside theirs, so the
 * communicator is aborted (abort_comm, below) and later calls are refused rather than hang */
#define AB_NCCL_COLLECTIVE(c, call)                                                                 \
    do {                                                                                            \
        const ncclResult_t ab_r_ = (call);                                                          \
        if (ab_r_ != ncclSuccess && ab_r_ != ncclInProgress) {                                      \
            const int ab_rc_ = ab_errorf("rank %d: %s failed at %s:%d: %s (%s)", (c)->rank, #call, __FILE__, \
                                         __LINE__, ncclGetErrorString(ab_r_), ncclGetLastError(NULL)); \
            abort_comm(c);                                                                          \
            return ab_rc_;                                                                          \
        }                                                                                           \
    } while (0)

typedef struct {
    ab_comm *boot;     /* bootstrap and host-side reductions: the mpi engine, or self without a launcher */
    ncclComm_t nccl;   /* NULL once aborted */
    cudaStream_t stream;
    cudaEvent_t ready; /* recorded on the backend's stream: a bucket's gradients are queued */
    int device;        /* the GPU of this rank: the stream, the communicator and the buffers are its */
} nccl_impl;

static nccl_impl *impl_of(ab_comm *c) { return (nccl_impl *)c->impl; }

/* the engine's GPU current: the caller (a backend on another GPU, say) may have changed it */
static int on_device(ab_comm *c) {
    int cur = -1;
    AB_CUDA_CHECK(cudaGetDevice(&cur));
    if (cur != impl_of(c)->device) AB_CUDA_CHECK(cudaSetDevice(impl_of(c)->device));
    return 0;
}

/* after a failure: the NCCL communicator cannot be trusted any more (a peer may be gone, a
 * collective half done); aborting it ends whatever it still runs, and later calls say so */
static void abort_comm(ab_comm *c) {
    nccl_impl *m = impl_of(c);
    if (m->nccl) ncclCommAbort(m->nccl);
    m->nccl = NULL;
}

/* one poll's pause: a yield for the first millisecond of a wait (a small all-reduce is done by
 * then), then 50 us sleeps, so a long wait for a slow peer does not hold a CPU core */
static void poll_pause(double waited_s) {
    if (waited_s < 1e-3) {
        sched_yield();
    } else {
        const struct timespec ts = {0, 50000};
        nanosleep(&ts, NULL);
    }
}

/* Waits until NCCL has taken what was asked of it (its state leaves ncclInProgress: a collective
 * is then enqueued on the stream, an initialisation or finalisation done) and, with drain, until
 * the engine's stream has finished. Any failure (an asynchronous NCCL error, a failing NCCL or
 * CUDA call, the communicator's timeout) aborts the communicator and returns -1. */
static int nccl_wait(ab_comm *c, const char *what, int drain) {
    nccl_impl *m = impl_of(c);
    const double t0 = ab_now();
    for (;;) {
        ncclResult_t state = ncclSuccess;
        const ncclResult_t r = ncclCommGetAsyncError(m->nccl, &state);
        if (r != ncclSuccess) {
            ab_errorf("rank %d: %s: ncclCommGetAsyncError failed at %s:%d: %s", c->rank, what, __FILE__, __LINE__,
                      ncclGetErrorString(r));
            abort_comm(c);
            return -1;
        }
        if (state != ncclSuccess && state != ncclInProgress) {
            ab_errorf("rank %d: %s: NCCL asynchronous error: %s (%s; a peer rank failed?)", c->rank, what,
                      ncclGetErrorString(state), ncclGetLastError(NULL));
            abort_comm(c);
            return -1;
        }
        if (state == ncclSuccess) {
            if (!drain) return 0;
            const cudaError_t q = cudaStreamQuery(m->stream);
            if (q == cudaSuccess) return 0;
            if (q != cudaErrorNotReady) {
                ab_errorf("cudaStreamQuery after %s failed at %s:%d: %s", what, __FILE__, __LINE__,
                          cudaGetErrorString(q));
                abort_comm(c);
                return -1;
            }
        }
        const double waited = ab_now() - t0;
        if (waited > c->timeout_s) {
            ab_errorf("rank %d: %s did not complete within %.0f s: a peer rank died, hung or stopped calling "
                      "collectives (--comm-timeout sets the limit)",
                      c->rank, what, c->timeout_s);
            abort_comm(c);
            return -1;
        }
        poll_pause(waited);
    }
}

static int usable(ab_comm *c) {
    return impl_of(c)->nccl ? 0 : ab_errorf("rank %d: the NCCL communicator was aborted after an earlier error", c->rank);
}

/* x *= s, rounded once to the element type: the mpi engine's AVG scaling, element for element
 * (core/comm.c: f[i] *= inv for fp32, fp16(fp32(h) * inv) for fp16) */
__global__ void k_scale_f32(size_t n, float *x, float s) {
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
        x[i] = x[i] * s;
}

__global__ void k_scale_f16(size_t n, uint16_t *x, float s) {
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
        x[i] = ab_f32_to_f16(ab_f16_to_f32(x[i]) * s);
}

__global__ void k_scale_bf16(size_t n, uint16_t *x, float s) {
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
        x[i] = ab_f32_to_bf16(ab_bf16_to_f32(x[i]) * s);
}

static int scale_on_stream(ab_comm *c, void *buf, size_t n, ab_dtype t, float s) {
    const unsigned threads = 256;
    size_t blocks = (n + threads - 1) / threads;
    if (blocks > 65535u * 16u) blocks = 65535u * 16u; /* grid-stride loops cover the rest */
    if (t == AB_F32)
        k_scale_f32<<<(unsigned)blocks, threads, 0, impl_of(c)->stream>>>(n, (float *)buf, s);
    else if (t == AB_F16)
        k_scale_f16<<<(unsigned)blocks, threads, 0, impl_of(c)->stream>>>(n, (uint16_t *)buf, s);
    else
        k_scale_bf16<<<(unsigned)blocks, threads, 0, impl_of(c)->stream>>>(n, (uint16_t *)buf, s);
    const cudaError_t e = cudaGetLastError();
    if (e != cudaSuccess) {
        ab_errorf("kernel launch of the all-reduce's 1/W scaling failed at %s:%d: %s", __FILE__, __LINE__,
                  cudaGetErrorString(e));
        abort_comm(c); /* the peers' collective is done; ours can no longer be trusted to be */
        return -1;
    }
    return 0;
}

/* SUM: ncclSum. AVG: ncclSum, then every element multiplied by fp32(1/W) and rounded once, on the
 * engine's stream (not ncclAvg, whose fp16 form pre-multiplies each rank's values by fp16(1/W):
 * a sum past the fp16 range would no longer overflow, and 1/W itself would be rounded). */
static int nccl_allreduce(ab_comm *c, void *buf, size_t n, ab_dtype t, ab_reduce_op op) {
    if (t != AB_F32 && t != AB_F16 && t != AB_BF16)
        return ab_errorf("allreduce: %s buffers are not supported", ab_dtype_name(t));
    if (op != AB_RED_SUM && op != AB_RED_AVG) return ab_errorf("allreduce: buffers take SUM or AVG only");
    AB_TRY(usable(c));
    nccl_impl *m = impl_of(c);
    if (c->be) AB_TRY(c->be->ops->sync(c->be)); /* the backend computes on a stream of its own */
    if (n == 0) return 0;
    AB_TRY(on_device(c));
    const ncclDataType_t nt = t == AB_F32 ? ncclFloat32 : t == AB_F16 ? ncclFloat16 : ncclBfloat16;
    AB_NCCL_COLLECTIVE(c, ncclAllReduce(buf, buf, n, nt, ncclSum, m->nccl, m->stream));
    if (op == AB_RED_AVG && c->size > 1) {
        /* the sum must be on the stream before the scaling goes behind it */
        AB_TRY(nccl_wait(c, "ncclAllReduce of the gradients", 0));
        AB_TRY(scale_on_stream(c, buf, n, t, 1.0f / (float)c->size));
    }
    return nccl_wait(c, "ncclAllReduce of the gradients", 1);
}

/* The communicator's stream waits for what the backend has queued so far (a bucket's gradients,
 * its fp16 copy): an event recorded on the backend's stream, which the host does not wait for, so
 * that it goes on queueing backward. A backend without a stream of its own is synchronised. */
static int after_backend(ab_comm *c) {
    nccl_impl *m = impl_of(c);
    cudaStream_t bs = c->be && c->be->ops->stream ? (cudaStream_t)c->be->ops->stream(c->be) : NULL;
    if (!bs) return c->be ? c->be->ops->sync(c->be) : 0;
    AB_CUDA_CHECK(cudaEventRecord(m->ready, bs));
    AB_CUDA_CHECK(cudaStreamWaitEvent(m->stream, m->ready, 0));
    return 0;
}

/* Non-blocking: the reduction queued on the communicator's stream behind the backend's work so far
 * (after_backend), where the buckets run in the order started while the backend goes on computing
 * on its own. test asks the stream; wait drains it (under the timeout). */
static int nccl_ireduce(ab_comm *c, void *buf, size_t n, ab_dtype t, int root, ab_comm_req *req) {
    req->handle = NULL; /* nothing in flight until a collective is queued */
    req->done = 1;
    if (t != AB_F32 && t != AB_F16 && t != AB_BF16)
        return ab_errorf("reduce: %s buffers are not supported", ab_dtype_name(t));
    if (root >= c->size) return ab_errorf("reduce: root %d outside a world of %d", root, c->size);
    AB_TRY(usable(c));
    nccl_impl *m = impl_of(c);
    if (n == 0) return 0;
    AB_TRY(on_device(c));
    AB_TRY(after_backend(c));
    req->done = 0;
    const ncclDataType_t nt = t == AB_F32 ? ncclFloat32 : t == AB_F16 ? ncclFloat16 : ncclBfloat16;
    if (root < 0) {
        AB_NCCL_COLLECTIVE(c, ncclAllReduce(buf, buf, n, nt, ncclSum, m->nccl, m->stream));
        return nccl_wait(c, "ncclAllReduce of a gradient bucket", 0); /* queued (non-blocking communicator) */
    }
    /* in place at the root (sendbuff == recvbuff); the others' buffers are only read */
    AB_NCCL_COLLECTIVE(c, ncclReduce(buf, buf, n, nt, ncclSum, root, m->nccl, m->stream));
    return nccl_wait(c, "ncclReduce of a gradient bucket", 0);
}

static int nccl_test(ab_comm *c, ab_comm_req *req) {
    if (req->done) return 0;
    AB_TRY(on_device(c));
    const cudaError_t q = cudaStreamQuery(impl_of(c)->stream);
    if (q == cudaSuccess) req->done = 1;
    else if (q != cudaErrorNotReady)
        return ab_errorf("cudaStreamQuery of a gradient bucket failed: %s", cudaGetErrorString(q));
    return 0;
}

static int nccl_wait_req(ab_comm *c, ab_comm_req *req) {
    if (req->done) return 0;
    AB_TRY(on_device(c));
    AB_TRY(nccl_wait(c, "the reduction of a gradient bucket", 1));
    req->done = 1;
    return 0;
}

static int nccl_broadcast(ab_comm *c, void *buf, size_t bytes, int root) {
    AB_TRY(usable(c));
    nccl_impl *m = impl_of(c);
    if (c->be) AB_TRY(c->be->ops->sync(c->be));
    AB_TRY(on_device(c));
    AB_NCCL_COLLECTIVE(c, ncclBroadcast(buf, buf, bytes, ncclUint8, root, m->nccl, m->stream));
    return nccl_wait(c, "ncclBroadcast", 1);
}

/* host-side reductions go over the bootstrap engine (MPI), under this communicator's timeout */
static ab_comm *host(ab_comm *c) {
    ab_comm *h = impl_of(c)->boot;
    h->timeout_s = c->timeout_s;
    return h;
}
static int nccl_allreduce_i64(ab_comm *c, int64_t *v, int n, ab_reduce_op op) {
    return host(c)->ops->allreduce_i64(host(c), v, n, op);
}
static int nccl_allreduce_f64(ab_comm *c, double *v, int n, ab_reduce_op op) {
    return host(c)->ops->allreduce_f64(host(c), v, n, op);
}
static int nccl_allgather_i64(ab_comm *c, int64_t v, int64_t *out) {
    return host(c)->ops->allgather_i64(host(c), v, out);
}
static int nccl_barrier(ab_comm *c) { return host(c)->ops->barrier(host(c)); }

/* A non-blocking communicator is finalised (its queued work flushed), waited for under the
 * timeout, then destroyed; if that fails or takes too long it is aborted instead. Destroying
 * reports nothing, so the caller's last error message is kept as it was. */
static void nccl_destroy(ab_comm *c) {
    if (!c) return;
    nccl_impl *m = impl_of(c);
    if (m) {
        if (m->nccl) {
            char saved[512];
            snprintf(saved, sizeof saved, "%s", ab_error());
            ncclResult_t f = ncclInternalError;
            if (on_device(c) == 0) f = ncclCommFinalize(m->nccl);
            if ((f == ncclSuccess || f == ncclInProgress) && nccl_wait(c, "ncclCommFinalize", 0) == 0)
                ncclCommDestroy(m->nccl);
            else
                abort_comm(c); /* nccl_wait aborts on its own failures; this covers the others */
            m->nccl = NULL;
            if (strcmp(saved, "unknown error") == 0) ab_error_clear();
            else ab_errorf("%s", saved);
        }
        if (m->ready) cudaEventDestroy(m->ready);
        if (m->stream) cudaStreamDestroy(m->stream);
        ab_comm_destroy(m->boot);
        free(m);
    }
    free(c);
}

/* ncclSend and ncclRecv in one group on the engine's stream, behind the backend's work: neighbours
 * sending each other at once do not deadlock */
static int nccl_sendrecv(ab_comm *c, const void *sbuf, size_t sbytes, int dst, void *rbuf, size_t rbytes, int src) {
    if (dst >= c->size || src >= c->size)
        return ab_errorf("sendrecv: peer %d outside a world of %d", dst >= c->size ? dst : src, c->size);
    if (dst < 0 && src < 0) return 0;
    AB_TRY(usable(c));
    nccl_impl *m = impl_of(c);
    AB_TRY(on_device(c));
    AB_TRY(after_backend(c));
    /* the group is always closed, whatever failed inside it: an abort inside an open group would
     * itself be deferred, and every later NCCL call of this thread with it */
    AB_NCCL_COLLECTIVE(c, ncclGroupStart());
    ncclResult_t r = ncclSuccess;
    if (dst >= 0) r = ncclSend(sbuf, sbytes, ncclUint8, dst, m->nccl, m->stream);
    if (src >= 0 && (r == ncclSuccess || r == ncclInProgress)) r = ncclRecv(rbuf, rbytes, ncclUint8, src, m->nccl, m->stream);
    const ncclResult_t e = ncclGroupEnd();
    if (r == ncclSuccess || r == ncclInProgress) r = e;
    AB_NCCL_COLLECTIVE(c, r);
    return nccl_wait(c, "ncclSend/ncclRecv (point to point)", 1);
}

static int nccl_split(ab_comm *c, int color, int key, ab_comm **out);

static const ab_comm_ops nccl_ops = {"nccl",          nccl_allreduce, nccl_allreduce_i64, nccl_allreduce_f64,
                                     nccl_allgather_i64, nccl_broadcast, nccl_barrier,       nccl_destroy,
                                     nccl_ireduce,       nccl_test,      nccl_wait_req,      nccl_split,
                                     nccl_sendrecv};

/* the stream and event of an engine on GPU m->device */
static int nccl_streams(nccl_impl *m) {
    AB_CUDA_CHECK(cudaSetDevice(m->device));
    AB_CUDA_CHECK(cudaStreamCreateWithFlags(&m->stream, cudaStreamNonBlocking));
    AB_CUDA_CHECK(cudaEventCreateWithFlags(&m->ready, cudaEventDisableTiming));
    return 0;
}

/* the host side split over the bootstrap engine, the NCCL side with ncclCommSplit (collective over
 * the parent communicator), each group on the same GPU as its parent */
static int nccl_split(ab_comm *c, int color, int key, ab_comm **out) {
    *out = NULL;
    AB_TRY(usable(c));
    nccl_impl *pm = impl_of(c);
    ab_comm *n = (ab_comm *)calloc(1, sizeof *n);
    nccl_impl *m = (nccl_impl *)calloc(1, sizeof *m);
    if (!n || !m) {
        free(n);
        free(m);
        return ab_errorf("out of host memory for a communicator");
    }
    *n = *c;
    n->impl = m;
    m->device = pm->device;
    int rc = pm->boot->ops->split(pm->boot, color, key, &m->boot);
    if (rc == 0) {
        n->rank = m->boot->rank;
        n->size = m->boot->size;
        n->local_rank = m->boot->local_rank;
        n->local_size = m->boot->local_size;
        rc = nccl_streams(m);
    }
    if (rc == 0 && on_device(c) == 0) {
        ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
        config.blocking = 0;
        const ncclResult_t r = ncclCommSplit(pm->nccl, color < 0 ? 0 : color, key, &m->nccl, &config);
        if (r != ncclSuccess && r != ncclInProgress) {
            rc = ab_errorf("rank %d: ncclCommSplit failed: %s (%s)", c->rank, ncclGetErrorString(r), ncclGetLastError(NULL));
            m->nccl = NULL;
        } else if (nccl_wait(c, "ncclCommSplit", 0) != 0) {
            /* On a non-blocking parent the split is a job of the parent's, and NCCL writes the
             * child's handle into m->nccl only when it completes; nccl_wait has aborted the
             * parent, which ends the job, but m stays allocated rather than risk that write */
            free(n);
            return -1;
        } else if (!m->nccl) {
            rc = ab_errorf("rank %d: ncclCommSplit completed without a communicator", c->rank);
        } else {
            rc = nccl_wait(n, "ncclCommSplit (the new group)", 0);
        }
    } else if (rc == 0) {
        rc = -1;
    }
    if (rc != 0) {
        nccl_destroy(n);
        return -1;
    }
    *out = n;
    return 0;
}

/* 64-bit FNV-1a of a GPU's UUID, sign bit clear: one int64 per rank for the all-gather */
static int64_t uuid_hash(const cudaUUID_t *u) {
    uint64_t h = 0xcbf29ce484222325ull;
    for (size_t i = 0; i < sizeof u->bytes; i++) h = (h ^ (uint8_t)u->bytes[i]) * 0x100000001b3ull;
    return (int64_t)(h >> 1);
}

/* Two ranks of one NCCL communicator on one GPU are not supported by NCCL; with more ranks on a
 * node than GPUs visible to each, the modulo choice would put them there. Every rank all-gathers
 * its GPU's UUID and all refuse, naming the pair, before NCCL is initialised. */
static int check_distinct_gpus(ab_comm *c, int count) {
    nccl_impl *m = impl_of(c);
    cudaDeviceProp prop;
    AB_CUDA_CHECK(cudaGetDeviceProperties(&prop, m->device));
    char bus[32] = "?";
    if (cudaDeviceGetPCIBusId(bus, (int)sizeof bus, m->device) != cudaSuccess) (void)cudaGetLastError();
    int64_t *all = (int64_t *)malloc((size_t)c->size * sizeof *all);
    if (!all) return ab_errorf("out of host memory checking the ranks' GPUs");
    const int rc = m->boot->ops->allgather_i64(m->boot, uuid_hash(&prop.uuid), all);
    int other = -1;
    for (int r = 0; rc == 0 && r < c->size && other < 0; r++)
        if (r != c->rank && all[r] == all[c->rank]) other = r;
    free(all);
    if (rc != 0) return -1;
    if (other >= 0)
        return ab_errorf("--comm nccl: ranks %d and %d would share one GPU (%s, %s): rank %d is node-local rank %d of "
                         "%d and sees %d GPU(s); launch at most one rank per GPU",
                         c->rank < other ? c->rank : other, c->rank < other ? other : c->rank, prop.name, bus,
                         c->rank, c->local_rank, c->local_size, count);
    return 0;
}

static int nccl_setup(ab_comm *c) {
    nccl_impl *m = impl_of(c);
    /* under a launcher, MPI carries the id and the host-side reductions; alone, a world of one */
    AB_TRY(ab_comm_launched(NULL) ? ab_comm_mpi_create(&m->boot) : ab_comm_self_create(&m->boot));
    c->rank = m->boot->rank;
    c->size = m->boot->size;
    c->local_rank = m->boot->local_rank;
    c->local_size = m->boot->local_size;
    int count = 0;
    const cudaError_t e = cudaGetDeviceCount(&count);
    if (e != cudaSuccess || count == 0) {
        (void)cudaGetLastError();
        return ab_errorf("--comm nccl: rank %d sees no usable GPU (%s)", c->rank,
                         e != cudaSuccess ? cudaGetErrorString(e) : "no device");
    }
    m->device = ab_comm_gpu_index(c->local_rank, count);
    c->device = m->device;
    AB_CUDA_CHECK(cudaSetDevice(m->device));
    AB_TRY(check_distinct_gpus(c, count));
    ncclUniqueId id;
    memset(&id, 0, sizeof id);
    if (c->rank == 0) AB_NCCL_CHECK(ncclGetUniqueId(&id));
    AB_TRY(m->boot->ops->broadcast(m->boot, &id, sizeof id, 0)); /* MPI_Bcast of the id (host memory) */
    AB_TRY(nccl_streams(m));
    ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
    config.blocking = 0;
    AB_NCCL_CHECK(ncclCommInitRankConfig(&m->nccl, c->size, id, c->rank, &config));
    return nccl_wait(c, "ncclCommInitRankConfig", 0);
}

int ab_comm_nccl_create(ab_comm **out) {
    *out = NULL;
    ab_comm *c = (ab_comm *)calloc(1, sizeof *c);
    nccl_impl *m = (nccl_impl *)calloc(1, sizeof *m);
    if (!c || !m) {
        free(c);
        free(m);
        return ab_errorf("out of host memory for a communicator");
    }
    c->ops = &nccl_ops;
    c->size = 1;
    c->local_size = 1;
    c->device = -1;
    c->timeout_s = 300.0;
    c->impl = m;
    if (nccl_setup(c) != 0) {
        nccl_destroy(c); /* keeps the message of the failure */
        return -1;
    }
    *out = c;
    return 0;
}
