/* Backend factory. */
#include "device.h"

#include <stdio.h>
#include <string.h>

ab_backend *ab_backend_create(const char *device, int threads, int quiet) {
    return ab_backend_create_on(device, 0, threads, quiet);
}

ab_backend *ab_backend_create_on(const char *device, int index, int threads, int quiet) {
    if (strcmp(device, "cpu") == 0) return ab_backend_cpu_create(threads);
    if (strcmp(device, "cuda") == 0) return ab_backend_cuda_create(index);
    if (strcmp(device, "auto") == 0) {
        const char *why = NULL;
        const int n = ab_cuda_device_count(&why);
        if (n > 0) return ab_backend_cuda_create(index % n);
        if (!quiet) fprintf(stderr, "ampbench: --device auto: no usable GPU (%s); running on the CPU\n", why);
        return ab_backend_cpu_create(threads);
    }
    ab_errorf("unknown device '%s' (expected cpu, cuda or auto)", device);
    return NULL;
}
