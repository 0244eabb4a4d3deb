/* The CUDA backend's constructor and its view of the GPUs, for the platform (platform/) and for
 * tests. Built without the CUDA toolkit (backend_none.c) both say that this build has none. */
#ifndef AB_BACKEND_CUDA_H
#define AB_BACKEND_CUDA_H

#include "backend.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The CUDA backend on GPU `index`, or NULL with ab_error() set (no device, no driver, or a build
 * without CUDA). */
ab_backend *ab_backend_cuda_create(int index);
/* Number of usable GPUs (0 when none or built without CUDA); *why gets the reason when 0. */
int ab_cuda_device_count(const char **why);

#ifdef __cplusplus
}
#endif
#endif
