/* What the op tests of tests/gpu share (test_cuda_ops, test_cuda_layers, test_cuda_transformer):
 * two backends, the CPU one as the reference and the one under test (CUDA, or a second CPU
 * backend under AB_GPU_TEST_DEVICE=cpu, the selfcheck: it checks the test, not CUDA), the failure
 * count AB_CHECK adds to, and the start and end of main. Each test program includes it once, so
 * everything here is static. */
#ifndef AB_TESTS_GPU_TEST_H
#define AB_TESTS_GPU_TEST_H

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend_cpu.h"
#include "backend_cuda.h"
#include "rng.h"
#include "tolerances.h"

static int failures = 0;
static int self_check = 0; /* the stand-in CPU backend is under test: it checks the test, not CUDA */
static ab_backend *cpu, *gpu;
static ab_rng rng;

/* ---- the two backends ------------------------------------------------------------------------ */

/* Creates cpu and gpu and seeds rng. 0: go on; otherwise the exit code (77: no usable GPU, the
 * test skipped and said why; 1: the backends could not be made). */
static inline int gpu_test_begin(uint64_t seed) {
    const char *stand_in = getenv("AB_GPU_TEST_DEVICE");
    self_check = stand_in && strcmp(stand_in, "cpu") == 0;
    const char *why = NULL;
    if (!self_check && ab_cuda_device_count(&why) == 0) {
        printf("SKIPPED: %s\n", why);
        return 77;
    }
    if (self_check) printf("SELF-CHECK: the CPU backend stands in for the GPU (AB_GPU_TEST_DEVICE=cpu)\n");
    cpu = ab_backend_cpu_create(0);
    gpu = self_check ? ab_backend_cpu_create(0) : ab_backend_cuda_create(0);
    if (!cpu || !gpu) {
        fprintf(stderr, "FAIL creating the backends: %s\n", ab_error());
        return 1;
    }
    ab_rng_seed(&rng, seed);
    return 0;
}

/* The last sync, the backends destroyed, the verdict printed: the exit code. */
static inline int gpu_test_end(const char *test, const char *ops) {
    AB_CHECK(gpu->ops->sync(gpu) == 0, "final sync: %s", ab_error());
    gpu->ops->destroy(gpu);
    cpu->ops->destroy(cpu);
    if (failures) {
        fprintf(stderr, "%s: %d failure(s)\n", test, failures);
        return 1;
    }
    printf("%s: all %s %s match the CPU backend%s\n", test, self_check ? "stand-in" : "CUDA", ops,
           self_check ? " (self-check of the test only)" : "");
    return 0;
}

static inline void die(const char *what) {
    fprintf(stderr, "FAIL %s: %s\n", what, ab_error());
    exit(1);
}

static inline void op_ok(const char *what, int rc_cpu, int rc_gpu) {
    if (rc_cpu != 0 || rc_gpu != 0) {
        fprintf(stderr, "FAIL %s: op returned cpu %d, gpu %d: %s\n", what, rc_cpu, rc_gpu, ab_error());
        failures++;
    }
}

/* both backends have the op */
static inline int have(const char *name, const void *on_cpu, const void *on_gpu) {
    if (on_cpu && on_gpu) return 1;
    fprintf(stderr, "FAIL %s: the %s backend has no such op\n", name, !on_cpu ? "cpu" : gpu->ops->name);
    failures++;
    return 0;
}

#endif
