/* Built without NCCL (no CUDA toolkit or no libnccl at configure time): the nccl engine reports
 * that it is absent. */
#include "comm_engines.h"

int ab_comm_nccl_create(ab_comm **out) {
    *out = NULL;
    return ab_errorf("--comm nccl: this ampbench was built without NCCL (CUDA toolkit or libnccl not found at "
                     "configure time); use --comm mpi");
}
