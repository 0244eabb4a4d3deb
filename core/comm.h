/* The communicator: the collectives data-parallel training needs, behind one table of
 * operations. The core sees only this table; the engines live in comm/ (comm/comm_engines.h):
 *   self  world size 1, no MPI at all (no launcher, no MPI_Init)       comm/comm_self.c
 *   mpi   OpenMPI collectives on host buffers (device buffers are      comm/comm_mpi.c
 *         staged through the host)
 *   nccl  NCCL collectives on device buffers, bootstrapped over MPI    comm/comm_nccl.cu
 * and the program's platform (ab_platform_ops in train.h; platform/platform.c) picks one by
 * kind and device. Buffer collectives (allreduce, broadcast) take pointers in the backend's
 * memory space; the small host-side reductions (overflow flag, loss, config check, timings)
 * always go over MPI. */
#ifndef AB_COMM_H
#define AB_COMM_H

#include <stddef.h>
#include <stdint.h>

#include "ab.h"
#include "backend.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum { AB_COMM_AUTO = 0, AB_COMM_SELF, AB_COMM_MPI, AB_COMM_NCCL, AB_COMM_KIND_COUNT } ab_comm_kind;
typedef enum { AB_RED_SUM = 0, AB_RED_AVG, AB_RED_MIN, AB_RED_MAX } ab_reduce_op;

typedef struct ab_comm ab_comm;

/* What the buffer all-reduce computes, on every engine. W ranks, x_r rank r's buffer:
 *   SUM  s = x_0 + x_1 + ... + x_{W-1}, each partial sum rounded to the buffer's type;
 *   AVG  the complete sum s, then s * fp32(1/W) rounded once to the buffer's type (W = 1: s).
 * The order of the additions is the library's (MPI's reduction algorithm; NCCL's ring, tree or
 * in-switch reduction), so with W > 2 engines and launches may differ in the last bit.
 *   fp32  agrees with a float64 sum to about W * 2^-24 relative.
 *   fp16  fp16 on the wire and in every partial sum. The mpi engine adds pairwise in fp32 and
 *         rounds once to fp16 (a user-defined MPI op); NCCL's ncclSum adds in fp16 arithmetic
 *         (__hadd: the exact sum of two fp16 rounded once to nearest even, the same thing), once
 *         per hop; an NVLink SHARP in-switch reduction accumulates in fp32 and rounds once at the
 *         end. With W = 2 there is one addition and the engines agree bit for bit. A sum (or a
 *         partial sum) whose magnitude reaches 65520 rounds to +-inf (inf - inf: NaN) and stays
 *         so through AVG: a loss-scaled gradient that overflows in the sum is seen by the loss
 *         scaler's check. NCCL's ncclAvg is not used for this reason: it pre-multiplies each x_r
 *         by fp16(1/W), which hides such an overflow and, 1/W being rounded to fp16 (W = 3:
 *         2.4e-4 relative), biases the mean.
 *   bf16  as fp16, in bf16: each pairwise sum the exact sum of two bf16 values rounded once (the
 *         mpi engine's user-defined op, NCCL's ncclBfloat16 sum); AVG one multiply after the sum. */
/* A buffer reduction in flight (ireduce): the engine's handle, and whether it has completed. */
typedef struct {
    void *handle;
    int done;
} ab_comm_req;

typedef struct {
    const char *name; /* "self" | "mpi" | "nccl" */
    /* in place over n elements of type t (fp32, fp16 or bf16) in backend memory; SUM or AVG, as above */
    int (*allreduce)(ab_comm *c, void *buf, size_t n, ab_dtype t, ab_reduce_op op);
    /* in place over n host int64 values; SUM, MIN or MAX */
    int (*allreduce_i64)(ab_comm *c, int64_t *v, int n, ab_reduce_op op);
    /* in place over n host doubles; SUM, AVG, MIN or MAX */
    int (*allreduce_f64)(ab_comm *c, double *v, int n, ab_reduce_op op);
    /* out[size] = every rank's v, in rank order (host) */
    int (*allgather_i64)(ab_comm *c, int64_t v, int64_t *out);
    /* bytes of backend memory from root to every rank */
    int (*broadcast)(ab_comm *c, void *buf, size_t bytes, int root);
    int (*barrier)(ab_comm *c);
    void (*destroy)(ab_comm *c);
    /* Non-blocking: a SUM over the ranks in place over n elements of type t in backend memory,
     * started on the data the backend has produced so far and returned at once (an engine that
     * cannot overlap completes it here and sets req->done). root -1: an all-reduce, every rank
     * gets the sum; root r: a reduce, rank r gets the sum and the others' buffers are only read
     * (a parameter server's push). Every rank starts the same ones in the same order; each must
     * reach test (done) or wait before the buffer is read. The sum is allreduce's, bit for bit,
     * where the engine adds in the same order (2 ranks: one addition). */
    int (*ireduce)(ab_comm *c, void *buf, size_t n, ab_dtype t, int root, ab_comm_req *req);
    /* sets req->done when it has completed, and lets the engine progress; never blocks */
    int (*test)(ab_comm *c, ab_comm_req *req);
    /* until it has completed (under the communicator's timeout) */
    int (*wait)(ab_comm *c, ab_comm_req *req);
    /* Collective over c: the ranks that pass the same color (>= 0; a negative one counts as 0:
     * every rank joins some group) form a new communicator, ranked by key (ties by their rank in
     * c), as MPI_Comm_split does; *out has c's engine, device, backend and timeout, and is
     * destroyed with ab_comm_destroy. Tensor, pipeline and data-parallel
     * groups (core/parallel.h) are split from the world this way, so each collective runs on its
     * own group. */
    int (*split)(ab_comm *c, int color, int key, ab_comm **out);
    /* Point to point, in backend memory: sends sbytes of sbuf to rank dst and receives rbytes
     * into rbuf from rank src together (dst or src -1: that half is left out), returning when both
     * are done. Neighbours that send to each other at the same moment (a pipeline's activations
     * forward, its gradients back) do not deadlock. The peer's matching call must name the same
     * byte count. */
    int (*sendrecv)(ab_comm *c, const void *sbuf, size_t sbytes, int dst, void *rbuf, size_t rbytes, int src);
} ab_comm_ops;

struct ab_comm {
    const ab_comm_ops *ops;
    int rank, size, local_rank, local_size;
    /* The GPU (index as this process numbers them) this rank's backend is to use: node-local rank
     * modulo the GPUs the process sees (ab_comm_gpu_index), so a per-rank CUDA_VISIBLE_DEVICES,
     * which leaves each rank its own GPU as GPU 0, works too. The nccl engine runs on it; -1 when
     * the device is cpu or no GPU is visible. */
    int device;
    ab_backend *be;   /* whose memory the buffer collectives read; set by ab_comm_bind */
    double timeout_s; /* a collective unfinished after this long: error (nccl) or job aborted (mpi) */
    void *impl;
};

/* "auto" | "self" | "mpi" | "nccl" */
int ab_comm_parse(const char *s, ab_comm_kind *out);
const char *ab_comm_kind_name(ab_comm_kind k);

/* The GPU of node-local rank local_rank among gpus visible ones: local_rank % gpus; -1 when
 * gpus <= 0. */
int ab_comm_gpu_index(int local_rank, int gpus);
/* The engine is created before the backend (ab_platform_ops.comm_create), so that the caller
 * can put the backend on GPU comm->device; then ab_comm_bind hands it the backend. */
static inline void ab_comm_bind(ab_comm *c, ab_backend *be) { c->be = be; }
void ab_comm_destroy(ab_comm *c);

/* Host-side convenience over the table: the found-inf flag, max over ranks. */
int ab_comm_flag_max(ab_comm *c, int *flag);

/* True when this process was started by an MPI launcher (OMPI_COMM_WORLD_SIZE, PMIX_RANK or
 * PMI_RANK in the environment); *world gets the launcher's world size (1 when unknown). */
int ab_comm_launched(int *world);
/* the world's size as the launcher's environment gives it: 1 outside a launcher, 0 under one
 * that does not say (srun --mpi=pmix sets PMIX_RANK alone) */
int ab_comm_launcher_size(void);
/* this process's rank as the launcher's environment gives it (0 outside a launcher): known
 * before any communicator exists */
int ab_comm_launcher_rank(void);

#ifdef __cplusplus
}
#endif
#endif
