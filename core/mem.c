/* Per-category byte counters with peaks, and the memory cap. */
#include "mem.h"

#include <stdarg.h>
#include <stdio.h>

#include "ab.h"

static const char *const cat_names[] = {"parameters", "master_weights", "gradients",
                                        "optimizer_state", "activations", "workspace", "cpu_scratch"};
_Static_assert(sizeof cat_names / sizeof cat_names[0] == AB_MEM_COUNT, "memory category names");

const char *ab_mem_category_name(ab_mem_category c) {
    return (unsigned)c < AB_MEM_COUNT ? cat_names[c] : "?";
}

void ab_mem_charge(ab_mem *m, ab_mem_category c, size_t bytes) {
    m->current[c] += bytes;
    if (m->current[c] > m->peak[c]) m->peak[c] = m->current[c];
    m->current_all += bytes;
    if (m->current_all > m->peak_all) m->peak_all = m->current_all;
    if (!ab_mem_in_total(c)) return;
    m->current_total += bytes;
    if (m->current_total > m->peak_total) m->peak_total = m->current_total;
}

void ab_mem_release(ab_mem *m, ab_mem_category c, size_t bytes) {
    m->current[c] -= bytes < m->current[c] ? bytes : m->current[c];
    m->current_all -= bytes < m->current_all ? bytes : m->current_all;
    if (ab_mem_in_total(c)) m->current_total -= bytes < m->current_total ? bytes : m->current_total;
}

static void record(ab_mem *m, ab_mem_category c, size_t bytes) {
    m->oom = 1;
    m->oom_cat = c;
    m->oom_bytes = bytes;
    m->oom_in_use = m->current_total;
    snprintf(m->oom_label, sizeof m->oom_label, "%s", m->label);
}

static void peaks(const ab_mem *m, char *buf, size_t cap) {
    size_t n = 0;
    for (int k = 0; k < AB_MEM_COUNT && n < cap; k++)
        if (ab_mem_in_total(k))
            n += (size_t)snprintf(buf + n, cap - n, "%s%s %.2f GB", k ? ", " : "", cat_names[k], m->peak[k] / 1e9);
}

int ab_mem_admit(ab_mem *m, ab_mem_category c, size_t bytes) {
    if (!m->limit || !ab_mem_in_total(c) || m->current_total + bytes <= m->limit) return 0;
    record(m, c, bytes);
    char pk[400];
    peaks(m, pk, sizeof pk);
    return ab_errorf("out of memory: %.3f GB of %s%s%s would bring the comparable total to %.3f GB, over "
                     "--memory-limit %.3f GB (%.3f GB in use; peak so far: %s)",
                     bytes / 1e9, cat_names[c], m->label[0] ? " for " : "", m->label, (m->current_total + bytes) / 1e9,
                     m->limit / 1e9, m->current_total / 1e9, pk);
}

void ab_mem_refused(ab_mem *m, ab_mem_category c, size_t bytes, const char *why) {
    record(m, c, bytes);
    char pk[400];
    peaks(m, pk, sizeof pk);
    ab_errorf("out of memory: the device refused %.3f GB of %s%s%s (%s) with %.3f GB in use (peak so far: %s)",
              bytes / 1e9, cat_names[c], m->label[0] ? " for " : "", m->label, why, m->current_total / 1e9, pk);
}
