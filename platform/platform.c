/* The platform: the table of backends by --device name and the communicator engine for each
 * kind and device (platform.h). Adding a backend is a line in `backends` and its constructor;
 * the core is not touched. */
#include "platform.h"

#include <stdio.h>
#include <string.h>

#include "backend_cpu.h"
#include "backend_cuda.h"
#include "comm_engines.h"

/* A backend as --device names it. */
typedef struct {
    const char *name;
    int is_host;                    /* as its ops->is_host */
    ab_comm_kind engine;            /* what --comm auto takes for it under a launcher (world > 1) */
    int (*count)(const char **why); /* usable devices (GPUs), *why the reason for none; NULL: the host */
    ab_backend *(*create)(int index, int threads);
} backend_entry;

static ab_backend *cpu_create(int index, int threads) {
    (void)index;
    return ab_backend_cpu_create(threads);
}

static ab_backend *cuda_create(int index, int threads) {
    (void)threads;
    return ab_backend_cuda_create(index);
}

/* the host first: "auto" falls back to it */
static const backend_entry backends[] = {
    {"cpu", 1, AB_COMM_MPI, NULL, cpu_create},
    {"cuda", 0, AB_COMM_NCCL, ab_cuda_device_count, cuda_create},
};
enum { N_BACKENDS = (int)(sizeof backends / sizeof backends[0]) };

static const backend_entry *find(const char *device) {
    for (int i = 0; i < N_BACKENDS; i++)
        if (strcmp(device, backends[i].name) == 0) return &backends[i];
    return NULL;
}

/* "auto": the first device backend with a usable device (*n of them), else the host (*n = 0,
 * *why the last device backend's reason) */
static const backend_entry *resolve_auto(int *n, const char **why) {
    for (int i = 0; i < N_BACKENDS; i++)
        if (backends[i].count && (*n = backends[i].count(why)) > 0) return &backends[i];
    *n = 0;
    return &backends[0];
}

static int unknown_device(const char *device) {
    return ab_errorf("unknown device '%s' (expected cpu, cuda or auto)", device);
}

ab_backend *ab_backend_create_on(const char *device, int index, int threads, int quiet) {
    if (strcmp(device, "auto") == 0) {
        const char *why = NULL;
        int n;
        const backend_entry *b = resolve_auto(&n, &why);
        if (n > 0) return b->create(index % n, threads);
        if (!quiet) fprintf(stderr, "ampbench: --device auto: no usable GPU (%s); running on the CPU\n", why);
        return b->create(index, threads);
    }
    const backend_entry *b = find(device);
    if (!b) {
        unknown_device(device);
        return NULL;
    }
    return b->create(index, threads);
}

int ab_device_is_host(const char *device) {
    if (strcmp(device, "auto") == 0) {
        int n;
        const char *why = NULL;
        return resolve_auto(&n, &why)->is_host;
    }
    const backend_entry *b = find(device);
    return b ? b->is_host : unknown_device(device);
}

/* the GPUs a rank of device chooses among: the named backend's, for "auto" the first device
 * backend's that has any; 0 on the host */
static int device_count(const char *device) {
    const backend_entry *b = find(device);
    int n = 0;
    if (!b) resolve_auto(&n, NULL);
    else if (b->count) n = b->count(NULL);
    return n;
}

int ab_comm_create(ab_comm_kind kind, const char *device, double timeout_s, ab_comm **out) {
    *out = NULL;
    const backend_entry *b = device ? find(device) : NULL; /* NULL for "auto" */
    if (kind == AB_COMM_NCCL && b && b->is_host)
        return ab_errorf("--comm nccl needs --device cuda: NCCL all-reduces GPU buffers and --device %s keeps "
                         "them in host memory (use --comm mpi with --device %s)",
                         b->name, b->name);
    if (kind == AB_COMM_AUTO) {
        int world = 1;
        const int launched = ab_comm_launched(&world);
        kind = !launched || world <= 1 ? AB_COMM_SELF : b ? b->engine : AB_COMM_MPI;
    }
    int rc;
    switch (kind) {
    case AB_COMM_SELF: rc = ab_comm_self_create(out); break;
    case AB_COMM_MPI: rc = ab_comm_mpi_create(out); break;
    case AB_COMM_NCCL: rc = ab_comm_nccl_create(out); break;
    default: rc = ab_errorf("unknown communicator kind %d", (int)kind);
    }
    if (rc != 0) return rc;
    if (timeout_s > 0) (*out)->timeout_s = timeout_s;
    /* the nccl engine has chosen (and checked) its GPU; for the others the same rule */
    if (kind != AB_COMM_NCCL && device && !(b && b->is_host))
        (*out)->device = ab_comm_gpu_index((*out)->local_rank, device_count(device));
    return 0;
}

ab_backend *ab_backend_host_create(int threads) { return ab_backend_create_on("cpu", 0, threads, 1); }

const ab_platform_ops ab_platform = {
    .comm_create = ab_comm_create, .backend_create = ab_backend_create_on, .host_create = ab_backend_host_create};
