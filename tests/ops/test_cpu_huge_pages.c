/* test_cpu_huge_pages: the CPU backend's buffers of CPU_HUGE_MIN (4 MiB) and more are mappings of
 * their own, CPU_HUGE_ALIGN-aligned (the buffer 64 bytes past the boundary, after the sizes' head), that ask the
 * kernel for transparent huge pages (kernels/cpu/runtime_cpu.c, cpu_alloc), and
 * smaller ones do not: the mapping that holds a large buffer carries the "hg" flag in
 * /proc/self/smaps from its first byte to its last, the one holding a 1 MiB buffer does not; both
 * are charged to the tracker to the byte and credited back, and the large one's mapping is gone
 * once released. Skipped (exit 77), saying why, on a kernel without transparent huge pages, where
 * smaps shows no flag for a mapping the test itself advises, where glibc is told to advise its own
 * memory (GLIBC_TUNABLES glibc.malloc.hugetlb), and under AddressSanitizer (whose allocator keeps
 * every buffer, and no hint is given). */
#include <sys/mman.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend.h"
#include "backend_cpu.h"
#include "runtime_cpu.h"
#include "tolerances.h"

static int failures;

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
#if !CPU_HUGE_OWN_MAPPING
    printf("SKIP: in this build the backend's buffers stay with the allocator, with no hint (AddressSanitizer, or not Linux)\n");
    return 77;
#endif
    const char *tun = getenv("GLIBC_TUNABLES");
    if (tun && strstr(tun, "hugetlb")) {
        printf("SKIP: GLIBC_TUNABLES asks glibc for huge pages itself (%s)\n", tun);
        return 77;
    }
    /* does this kernel show an advised mapping's flag? */
    const size_t probe_n = CPU_HUGE_MIN;
    char *probe = mmap(NULL, probe_n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    char pf[600] = "";
    const int shown = probe != MAP_FAILED && madvise(probe, probe_n, MADV_HUGEPAGE) == 0 &&
                      vm_flags(probe + probe_n / 2, pf, sizeof pf) == 1 && has_flag(pf, "hg");
    if (probe != MAP_FAILED) munmap(probe, probe_n);
    if (!shown) {
        printf("SKIP: /proc/self/smaps shows no \"hg\" flag on a mapping advised with MADV_HUGEPAGE here\n");
        return 77;
    }
    ab_backend *be = ab_backend_cpu_create(2);
    if (!be) {
        printf("FAIL: the CPU backend was refused: %s\n", ab_error());
        return 1;
    }
    printf("test_cpu_huge_pages: transparent huge pages %s", mode);
    const size_t before = be->mem.current[AB_MEM_ACTIVATIONS];
    const size_t small_n = CPU_HUGE_MIN / 4, big_n = 2 * CPU_HUGE_MIN + 123; /* 1 MiB; 8 MiB and a little */
    unsigned char *small = ab_alloc(be, AB_MEM_ACTIVATIONS, small_n);
    unsigned char *big = ab_alloc(be, AB_MEM_ACTIVATIONS, big_n);
    AB_CHECK(small && big, "ab_alloc: %s", ab_error());
    if (!small || !big) return 1;
    AB_CHECK(be->mem.current[AB_MEM_ACTIVATIONS] == before + small_n + big_n, "charged %zu bytes, asked %zu",
          be->mem.current[AB_MEM_ACTIVATIONS] - before, small_n + big_n);
    const size_t past = (size_t)((uintptr_t)big & (uintptr_t)(CPU_HUGE_ALIGN - 1));
    AB_CHECK(past == 64, "the 8 MiB buffer starts %zu bytes past a 2 MiB boundary, not 64", past);
    char flags[600] = "";
    const unsigned char *at[3] = {big, big + big_n / 2, big + big_n - 1};
    for (int k = 0; k < 3; k++) {
        flags[0] = '\0';
        AB_CHECK(vm_flags(at[k], flags, sizeof flags) == 1, "no mapping holds byte %zu of the 8 MiB buffer",
              (size_t)(at[k] - big));
        AB_CHECK(has_flag(flags, "hg"), "the 8 MiB buffer's mapping at byte %zu does not ask for huge pages: VmFlags:%s",
              (size_t)(at[k] - big), flags);
    }
    flags[0] = '\0';
    AB_CHECK(vm_flags(small + small_n / 2, flags, sizeof flags) == 1, "no mapping holds the 1 MiB buffer's middle");
    AB_CHECK(!has_flag(flags, "hg"), "the 1 MiB buffer's mapping asks for huge pages: VmFlags:%s", flags);
    /* the memory is the program's to use, end to end */
    memset(big, 0xA5, big_n);
    memset(small, 0x5A, small_n);
    AB_CHECK(big[0] == 0xA5 && big[big_n - 1] == 0xA5 && small[small_n - 1] == 0x5A, "the buffers do not hold what was written");
    ab_release(be, AB_MEM_ACTIVATIONS, big, big_n);
    /* its own mapping, unmapped: no hint left behind on memory handed out again */
    AB_CHECK(vm_flags(at[1], flags, sizeof flags) != 1 || !has_flag(flags, "hg"),
          "the released 8 MiB buffer's middle still lies in a mapping asking for huge pages: VmFlags:%s", flags);
    ab_release(be, AB_MEM_ACTIVATIONS, small, small_n);
    AB_CHECK(be->mem.current[AB_MEM_ACTIVATIONS] == before, "release credited %zu of %zu bytes",
          before + small_n + big_n - be->mem.current[AB_MEM_ACTIVATIONS], small_n + big_n);
    be->ops->destroy(be);
    if (failures) return 1;
    printf("test_cpu_huge_pages: passed\n");
    return 0;
}
