/* Backend factory. */
#include "device.h"

#include <stdio.h>
#include <string.h>

ab_backend *ab_backend_create(const char *device, int threads, int quiet) {
    if (strcmp(device, "cpu") == 0) return ab_backend_cpu_create(threads);
    if (strcmp(device, "cuda") == 0) return ab_backend_cuda_create(0);
    if (strcmp(device, "auto") == 0) {
        const char *why = NULL;
        if (ab_cuda_device_count(&why) > 0) return ab_backend_cuda_create(0);
        if (!quiet) fprintf(stderr, "ampbench: --device auto: no usable GPU (%s); running on the CPU\n", why);
        return ab_backend_cpu_create(threads);
    }
    ab_errorf("unknown device '%s' (expected cpu, cuda or auto)", device);
    return NULL;
}
