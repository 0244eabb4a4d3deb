/* Per-category byte counters with peaks. */
#include "mem.h"

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
