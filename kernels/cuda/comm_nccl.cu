/* The nccl communicator engine: NCCL collectives on device buffers (fp32/fp16, in place),
 * bootstrapped over MPI through the mpi engine, which also carries the small host-side
 * reductions: rank 0 creates the NCCL unique id and MPI broadcasts it; each rank takes the GPU of
 * its node-local rank (MPI_Comm_split_type SHARED, in the mpi engine). The communicator is
 * non-blocking (NCCL config blocking = 0) and every wait polls for completion, NCCL's
 * asynchronous error and the communicator's timeout, aborting the NCCL communicator on either,
 * so that a dead peer turns into an error return rather than a hang. */
#include <cuda_runtime.h>
#include <nccl.h>
#include <stdlib.h>
#include <string.h>

#include "comm.h"
#include "timer.h"

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

typedef struct {
    ab_comm *mpi;      /* bootstrap and host-side reductions */
    ncclComm_t nccl;   /* NULL once aborted */
    cudaStream_t stream;
    int device;
} nccl_impl;

static nccl_impl *impl_of(ab_comm *c) { return (nccl_impl *)c->impl; }

/* Completes what was enqueued on the engine's stream, or fails (aborting the communicator) on an
 * asynchronous NCCL error or once the timeout has passed. */
static int nccl_wait(ab_comm *c, const char *what) {
    nccl_impl *m = impl_of(c);
    const double t0 = ab_now();
    for (;;) {
        ncclResult_t async = ncclSuccess;
        AB_NCCL_CHECK(ncclCommGetAsyncError(m->nccl, &async));
        if (async != ncclSuccess && async != ncclInProgress) {
            ncclCommAbort(m->nccl);
            m->nccl = NULL;
            return ab_errorf("rank %d: %s: NCCL asynchronous error: %s (a peer rank failed?)", c->rank, what,
                             ncclGetErrorString(async));
        }
        if (async == ncclSuccess) {
            const cudaError_t q = cudaStreamQuery(m->stream);
            if (q == cudaSuccess) return 0;
            if (q != cudaErrorNotReady)
                return ab_errorf("cudaStreamQuery after %s failed at %s:%d: %s", what, __FILE__, __LINE__,
                                 cudaGetErrorString(q));
        }
        if (ab_now() - t0 > c->timeout_s) {
            ncclCommAbort(m->nccl);
            m->nccl = NULL;
            return ab_errorf("rank %d: %s did not complete within %.0f s: a peer rank died, hung or stopped calling "
                             "collectives (--comm-timeout sets the limit)",
                             c->rank, what, c->timeout_s);
        }
    }
}

static int usable(ab_comm *c) {
    return impl_of(c)->nccl ? 0 : ab_errorf("rank %d: the NCCL communicator was aborted after an earlier error", c->rank);
}

static int nccl_allreduce(ab_comm *c, void *buf, size_t n, ab_dtype t, ab_reduce_op op) {
    if (t != AB_F32 && t != AB_F16) return ab_errorf("allreduce: %s buffers are not supported", ab_dtype_name(t));
    if (op != AB_RED_SUM && op != AB_RED_AVG) return ab_errorf("allreduce: buffers take SUM or AVG only");
    AB_TRY(usable(c));
    nccl_impl *m = impl_of(c);
    if (c->be) AB_TRY(c->be->ops->sync(c->be)); /* the backend may compute on a stream of its own */
    AB_NCCL_CHECK(ncclAllReduce(buf, buf, n, t == AB_F32 ? ncclFloat32 : ncclFloat16,
                                op == AB_RED_AVG ? ncclAvg : ncclSum, m->nccl, m->stream));
    return nccl_wait(c, "ncclAllReduce of the gradients");
}

static int nccl_broadcast(ab_comm *c, void *buf, size_t bytes, int root) {
    AB_TRY(usable(c));
    nccl_impl *m = impl_of(c);
    if (c->be) AB_TRY(c->be->ops->sync(c->be));
    AB_NCCL_CHECK(ncclBroadcast(buf, buf, bytes, ncclUint8, root, m->nccl, m->stream));
    return nccl_wait(c, "ncclBroadcast");
}

/* host-side reductions go over MPI, under this communicator's timeout */
static ab_comm *host(ab_comm *c) {
    ab_comm *h = impl_of(c)->mpi;
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

static void nccl_destroy(ab_comm *c) {
    if (!c) return;
    nccl_impl *m = impl_of(c);
    if (m) {
        if (m->nccl) ncclCommDestroy(m->nccl);
        if (m->stream) cudaStreamDestroy(m->stream);
        ab_comm_destroy(m->mpi);
        free(m);
    }
    free(c);
}

static const ab_comm_ops nccl_ops = {"nccl",          nccl_allreduce, nccl_allreduce_i64, nccl_allreduce_f64,
                                     nccl_allgather_i64, nccl_broadcast, nccl_barrier,       nccl_destroy};

static int nccl_setup(ab_comm *c) {
    nccl_impl *m = impl_of(c);
    AB_TRY(ab_comm_mpi_create(&m->mpi));
    c->rank = m->mpi->rank;
    c->size = m->mpi->size;
    c->local_rank = m->mpi->local_rank;
    c->local_size = m->mpi->local_size;
    int count = 0;
    const cudaError_t e = cudaGetDeviceCount(&count);
    if (e != cudaSuccess || count == 0)
        return ab_errorf("--comm nccl: rank %d sees no usable GPU (%s)", c->rank,
                         e != cudaSuccess ? cudaGetErrorString(e) : "no device");
    if (c->local_rank >= count)
        return ab_errorf("--comm nccl: rank %d is node-local rank %d but this node has %d GPU(s): launch at most one "
                         "rank per GPU",
                         c->rank, c->local_rank, count);
    m->device = c->local_rank;
    AB_CUDA_CHECK(cudaSetDevice(m->device));
    ncclUniqueId id;
    memset(&id, 0, sizeof id);
    if (c->rank == 0) AB_NCCL_CHECK(ncclGetUniqueId(&id));
    AB_TRY(m->mpi->ops->broadcast(m->mpi, &id, sizeof id, 0)); /* MPI_Bcast of the id (host memory) */
    AB_CUDA_CHECK(cudaStreamCreateWithFlags(&m->stream, cudaStreamNonBlocking));
    ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
    config.blocking = 0;
    AB_NCCL_CHECK(ncclCommInitRankConfig(&m->nccl, c->size, id, c->rank, &config));
    return nccl_wait(c, "ncclCommInitRankConfig");
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
    c->timeout_s = 300.0;
    c->impl = m;
    if (nccl_setup(c) != 0) {
        nccl_destroy(c);
        return -1;
    }
    *out = c;
    return 0;
}
