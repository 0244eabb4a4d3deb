/* Built without the CUDA toolkit: the CUDA backend reports that it is absent. */
#include "backend_cuda.h"

ab_backend *ab_backend_cuda_create(int index) {
    (void)index;
    ab_errorf("--device cuda: this ampbench was built without the CUDA backend (CUDA toolkit not found at configure time)");
    return NULL;
}

int ab_cuda_device_count(const char **why) {
    if (why) *why = "built without the CUDA backend";
    return 0;
}
