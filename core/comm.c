/* The engine-independent part of the communicator (core/comm.h): engine kinds and their names,
 * what the launcher's environment says, the GPU rule, and the helpers over the table. The
 * engines themselves are in comm/, chosen by the platform (platform/platform.c). */
#include "comm.h"

#include <stdlib.h>
#include <string.h>

static const char *const kind_names[] = {"auto", "self", "mpi", "nccl"};
_Static_assert(sizeof kind_names / sizeof kind_names[0] == AB_COMM_KIND_COUNT, "comm kind names");

const char *ab_comm_kind_name(ab_comm_kind k) { return (unsigned)k < AB_COMM_KIND_COUNT ? kind_names[k] : "?"; }

int ab_comm_parse(const char *s, ab_comm_kind *out) {
    for (int i = 0; i < AB_COMM_KIND_COUNT; i++)
        if (strcmp(s, kind_names[i]) == 0) {
            *out = (ab_comm_kind)i;
            return 0;
        }
    return ab_errorf("unknown communicator '%s' (expected auto, self, mpi or nccl)", s);
}

int ab_comm_launched(int *world) {
    static const char *const size_vars[] = {"OMPI_COMM_WORLD_SIZE", "PMIX_SIZE", "PMI_SIZE"};
    const int launched = getenv("OMPI_COMM_WORLD_SIZE") || getenv("PMIX_RANK") || getenv("PMI_RANK");
    if (world) {
        *world = 1;
        for (size_t i = 0; i < sizeof size_vars / sizeof size_vars[0]; i++) {
            const char *v = getenv(size_vars[i]);
            if (v && atoi(v) > 0) {
                *world = atoi(v);
                break;
            }
        }
    }
    return launched;
}

int ab_comm_launcher_size(void) {
    static const char *const size_vars[] = {"OMPI_COMM_WORLD_SIZE", "PMIX_SIZE", "PMI_SIZE"};
    for (size_t i = 0; i < sizeof size_vars / sizeof size_vars[0]; i++) {
        const char *v = getenv(size_vars[i]);
        if (v && atoi(v) > 0) return atoi(v);
    }
    return ab_comm_launched(NULL) ? 0 : 1;
}

int ab_comm_launcher_rank(void) {
    static const char *const rank_vars[] = {"OMPI_COMM_WORLD_RANK", "PMIX_RANK", "PMI_RANK"};
    for (size_t i = 0; i < sizeof rank_vars / sizeof rank_vars[0]; i++) {
        const char *v = getenv(rank_vars[i]);
        if (v) return atoi(v);
    }
    return 0;
}

int ab_comm_gpu_index(int local_rank, int gpus) { return gpus > 0 && local_rank >= 0 ? local_rank % gpus : -1; }

void ab_comm_destroy(ab_comm *c) {
    if (c) c->ops->destroy(c);
}

int ab_comm_flag_max(ab_comm *c, int *flag) {
    int64_t v = *flag;
    AB_TRY(c->ops->allreduce_i64(c, &v, 1, AB_RED_MAX));
    *flag = (int)v;
    return 0;
}
