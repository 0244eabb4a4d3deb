/* The platform of this build: its backends by --device name and its communicator engines by
 * kind, in one table of constructors (ab_platform) that a program hands the core through
 * ab_train_config.platform. The core calls no constructor and compares no backend's name; the
 * names live here. Programs and tests may also call these directly. */
#ifndef AB_PLATFORM_H
#define AB_PLATFORM_H

#include "train.h"

/* comm_create = ab_comm_create, backend_create = ab_backend_create_on, host_create =
 * ab_backend_host_create */
extern const ab_platform_ops ab_platform;

/* device: "cpu", "cuda" (fails with a clear error when no GPU is usable) or "auto" (cuda on GPU
 * index modulo the GPUs when one is usable, else cpu, saying so on stderr unless quiet); index
 * is a GPU backend's (a data-parallel rank's), the CPU ignores it. NULL with ab_error(). */
ab_backend *ab_backend_create_on(const char *device, int index, int threads, int quiet);
/* the CPU backend, quiet: host memory for what the run itself does not hold */
ab_backend *ab_backend_host_create(int threads);
/* 1 when device names a backend whose memory is the host's ("cpu", or "auto" where no GPU is
 * usable), 0 when it names a device's, -1 with ab_error() for a name this build does not know */
int ab_device_is_host(const char *device);

/* kind auto: nccl when launched by mpirun with more than one rank and device is cuda, mpi when
 * launched by mpirun with more than one rank, else self. nccl with device "cpu" is refused (NCCL
 * reduces GPU buffers). timeout_s <= 0 means 300 s. comm->device becomes the GPU the rank's
 * backend is to use (ab_comm_gpu_index over the GPUs device has; -1 for cpu). */
int ab_comm_create(ab_comm_kind kind, const char *device, double timeout_s, ab_comm **out);

#endif
