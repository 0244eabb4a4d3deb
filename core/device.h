/* Backend selection by device name. */
#ifndef AB_DEVICE_H
#define AB_DEVICE_H

#include "backend.h"

/* device: "cpu", "cuda" (fails with a clear error when no GPU is usable) or "auto" (cuda when a
 * GPU is usable, else cpu, saying so on stderr unless quiet). */
ab_backend *ab_backend_create(const char *device, int threads, int quiet);
/* The same on GPU `index` for cuda (a data-parallel rank's node-local rank); cpu ignores it. */
ab_backend *ab_backend_create_on(const char *device, int index, int threads, int quiet);

/* Provided by kernels/cuda: the CUDA backend on GPU `index`, or NULL with ab_error() set
 * (no device, no driver, or a build without CUDA). */
ab_backend *ab_backend_cuda_create(int index);
/* Number of usable GPUs (0 when none or built without CUDA); *why gets the reason when 0. */
int ab_cuda_device_count(const char **why);

#endif
