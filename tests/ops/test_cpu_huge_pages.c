/* test_cpu_huge_pages: the CPU backend's buffers of HUGE_MIN (4 MiB) and more ask the kernel for
 * transparent huge pages (kernels/cpu/runtime_cpu.c, cpu_alloc), and smaller ones do not: the
 * mapping that holds a large buffer's middle carries the "hg" flag in /proc/self/smaps, the one
 * holding a 1 MiB buffer does not; both are charged to the tracker to the byte and credited back.
 * Skipped (exit 77), saying why, on a kernel without transparent huge pages or without smaps. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend.h"
#include "backend_cpu.h"

static int failures;
#define CHECK(cond, ...)                                                                                              \
    do {                                                                                                              \
        if (!(cond)) {                                                                                                \
            printf("FAIL: " __VA_ARGS__);                                                                             \
            printf("\n");                                                                                             \
            failures++;                                                                                               \
        }                                                                                                             \
    } while (0)

/* the VmFlags of the mapping holding address a: 1 found (into flags), 0 no such mapping, -1 no smaps */
static int vm_flags(const void *a, char *flags, size_t cap) {
    FILE *f = fopen("/proc/self/smaps", "r");
    if (!f) return -1;
    char line[512];
    int inside = 0, found = 0;
    const uintptr_t x = (uintptr_t)a;
    while (fgets(line, sizeof line, f)) {
        unsigned long lo, hi;
        char c;
        if (sscanf(line, "%lx-%lx %c", &lo, &hi, &c) == 3) { /* a mapping's first line: "lo-hi perms ..." */
            inside = x >= lo && x < hi;
            continue;
        }
        if (inside && !strncmp(line, "VmFlags:", 8)) {
            line[strcspn(line, "\n")] = '\0';
            snprintf(flags, cap, "%s", line + 8);
            found = 1;
            break;
        }
    }
    fclose(f);
    return found;
}

static int has_flag(const char *flags, const char *flag) {
    char padded[600];
    snprintf(padded, sizeof padded, " %s ", flags);
    char want[8];
    snprintf(want, sizeof want, " %s ", flag);
    return strstr(padded, want) != NULL;
}

int main(void) {
    FILE *thp = fopen("/sys/kernel/mm/transparent_hugepage/enabled", "r");
    char mode[128] = "";
    if (!thp || !fgets(mode, sizeof mode, thp)) {
        printf("SKIP: this kernel has no transparent huge pages (/sys/kernel/mm/transparent_hugepage/enabled)\n");
        if (thp) fclose(thp);
        return 77;
    }
    fclose(thp);
    char probe[600];
    if (vm_flags(&failures, probe, sizeof probe) != 1) {
        printf("SKIP: /proc/self/smaps gives no VmFlags here\n");
        return 77;
    }
    ab_backend *be = ab_backend_cpu_create(2);
    if (!be) {
        printf("FAIL: the CPU backend was refused: %s\n", ab_error());
        return 1;
    }
    printf("test_cpu_huge_pages: transparent huge pages %s", mode);
    const size_t before = be->mem.current[AB_MEM_ACTIVATIONS];
    const size_t small_n = (size_t)1 << 20, big_n = ((size_t)8 << 20) + 123;
    unsigned char *small = ab_alloc(be, AB_MEM_ACTIVATIONS, small_n);
    unsigned char *big = ab_alloc(be, AB_MEM_ACTIVATIONS, big_n);
    CHECK(small && big, "ab_alloc: %s", ab_error());
    if (!small || !big) return 1;
    CHECK(be->mem.current[AB_MEM_ACTIVATIONS] == before + small_n + big_n, "charged %zu bytes, asked %zu",
          be->mem.current[AB_MEM_ACTIVATIONS] - before, small_n + big_n);
    char flags[600];
    CHECK(vm_flags(big + big_n / 2, flags, sizeof flags) == 1, "no mapping holds the 8 MiB buffer's middle");
    CHECK(has_flag(flags, "hg"), "the 8 MiB buffer's mapping does not ask for huge pages: VmFlags:%s", flags);
    CHECK(vm_flags(small + small_n / 2, flags, sizeof flags) == 1, "no mapping holds the 1 MiB buffer's middle");
    CHECK(!has_flag(flags, "hg"), "the 1 MiB buffer's mapping asks for huge pages: VmFlags:%s", flags);
    /* the memory is the program's to use, end to end */
    memset(big, 0xA5, big_n);
    memset(small, 0x5A, small_n);
    CHECK(big[0] == 0xA5 && big[big_n - 1] == 0xA5 && small[small_n - 1] == 0x5A, "the buffers do not hold what was written");
    ab_release(be, AB_MEM_ACTIVATIONS, big, big_n);
    ab_release(be, AB_MEM_ACTIVATIONS, small, small_n);
    CHECK(be->mem.current[AB_MEM_ACTIVATIONS] == before, "release credited %zu of %zu bytes",
          before + small_n + big_n - be->mem.current[AB_MEM_ACTIVATIONS], small_n + big_n);
    be->ops->destroy(be);
    if (failures) return 1;
    printf("test_cpu_huge_pages: passed\n");
    return 0;
}
