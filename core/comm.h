/* The communicator: the collectives data-parallel training needs, behind one table of
 * operations, with three engines:
 *   self  world size 1, no MPI at all (no launcher, no MPI_Init);
 *   mpi   OpenMPI collectives on host buffers (device buffers are staged through the host);
 *   nccl  NCCL collectives on device buffers, bootstrapped over MPI (kernels/cuda/comm_nccl.cu).
 * Buffer collectives (allreduce, broadcast) take pointers in the backend's memory space; the
 * small host-side reductions (overflow flag, loss, config check, timings) always go over MPI. */
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

typedef struct {
    const char *name; /* "self" | "mpi" | "nccl" */
    /* in place over n elements of type t (fp32 or fp16) in backend memory; SUM or AVG */
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
} ab_comm_ops;

struct ab_comm {
    const ab_comm_ops *ops;
    int rank, size, local_rank, local_size;
    ab_backend *be;   /* whose memory the buffer collectives read; set by ab_comm_bind */
    double timeout_s; /* a collective unfinished after this long: error (nccl) or job aborted (mpi) */
    void *impl;
};

/* "auto" | "self" | "mpi" | "nccl" */
int ab_comm_parse(const char *s, ab_comm_kind *out);
const char *ab_comm_kind_name(ab_comm_kind k);

/* auto: nccl when launched by mpirun with more than one rank and device is cuda, mpi when
 * launched by mpirun with more than one rank, else self. timeout_s <= 0 means 300 s.
 * The engine is created before the backend, so that the caller can put the backend on the
 * GPU of comm->local_rank; then ab_comm_bind hands it the backend. */
int ab_comm_create(ab_comm_kind kind, const char *device, double timeout_s, ab_comm **out);
static inline void ab_comm_bind(ab_comm *c, ab_backend *be) { c->be = be; }
void ab_comm_destroy(ab_comm *c);

/* Host-side convenience over the table: the found-inf flag, max over ranks. */
int ab_comm_flag_max(ab_comm *c, int *flag);

/* True when this process was started by an MPI launcher (OMPI_COMM_WORLD_SIZE, PMIX_RANK or
 * PMI_RANK in the environment); *world gets the launcher's world size (1 when unknown). */
int ab_comm_launched(int *world);
/* this process's rank as the launcher's environment gives it (0 outside a launcher): known
 * before any communicator exists */
int ab_comm_launcher_rank(void);

/* Process-level MPI state, for main() only. ab_mpi_abort ends every rank of the job with code
 * when MPI is running in this process (it does not return then) and returns otherwise;
 * ab_mpi_finalize calls MPI_Finalize once when this library initialised MPI. */
void ab_mpi_abort(int code);
void ab_mpi_finalize(void);

/* Engine constructors (comm.c and kernels/cuda); each fills *out or returns -1 with ab_error(). */
int ab_comm_self_create(ab_comm **out);
int ab_comm_mpi_create(ab_comm **out);
int ab_comm_nccl_create(ab_comm **out);
/* The mpi engine is also the NCCL engine's bootstrap and host-side channel: with c->be NULL its
 * buffer collectives read host memory. */

#ifdef __cplusplus
}
#endif
#endif
