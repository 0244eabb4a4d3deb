/* The communicator engines behind core/comm.h's table, and the process-level MPI state. The
 * platform (platform/platform.c) chooses among them; tests may create one directly. */
#ifndef AB_COMM_ENGINES_H
#define AB_COMM_ENGINES_H

#include "comm.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Engine constructors (comm_self.c, comm_mpi.c, comm_nccl.cu or comm_nccl_none.c); each fills
 * *out or returns -1 with ab_error(). */
int ab_comm_self_create(ab_comm **out);
int ab_comm_mpi_create(ab_comm **out);
int ab_comm_nccl_create(ab_comm **out);
/* The mpi engine is also the NCCL engine's bootstrap and host-side channel: with c->be NULL its
 * buffer collectives read host memory. */

/* Process-level MPI state, for main() only. ab_mpi_abort ends every rank of the job with code
 * when MPI is running in this process (it does not return then) and returns otherwise;
 * ab_mpi_finalize calls MPI_Finalize once when this library initialised MPI. */
void ab_mpi_abort(int code);
void ab_mpi_finalize(void);

#ifdef __cplusplus
}
#endif
#endif
