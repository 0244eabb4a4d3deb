/* Memory accounting: every buffer a backend allocates is charged to one category; current and
 * peak bytes are kept per category and for the total (the peak of the sum, which is what a
 * device's memory must hold at once). The total counts what a GPU run of the same configuration
 * would hold; buffers that only the CPU implementation needs (fp16 operands widened to fp32 for
 * BLAS, im2col columns, conversion scratch) are charged to AB_MEM_CPU_SCRATCH, kept out of the
 * comparable total and reported apart, with the peak of everything in peak_all. */
#ifndef AB_MEM_H
#define AB_MEM_H

#include <stddef.h>

/* A new category is named here and in cat_names (mem.c, its JSON key); the report's label for it
 * is hr_mem_labels (harness/runset.c). Static asserts check both tables' sizes. */
typedef enum {
    AB_MEM_PARAMETERS = 0, /* weights the forward pass reads */
    AB_MEM_MASTER,         /* fp32 master copy under amp/bf16 */
    AB_MEM_GRADIENTS,
    AB_MEM_OPTIMIZER,
    AB_MEM_ACTIVATIONS,
    AB_MEM_WORKSPACE,   /* scratch a GPU run holds too: library workspaces, per-step statistics */
    AB_MEM_CPU_SCRATCH, /* scratch only the CPU implementation needs: not in the comparable total; the last */
    AB_MEM_COUNT
} ab_mem_category;

typedef struct {
    size_t current[AB_MEM_COUNT];
    size_t peak[AB_MEM_COUNT];
    size_t current_total; /* every category but AB_MEM_CPU_SCRATCH */
    size_t peak_total;
    size_t current_all; /* every category */
    size_t peak_all;
    /* a memory cap (--memory-limit) on the comparable total, and what went wrong against it */
    size_t limit;     /* > 0: an allocation that would take current_total past it is refused */
    char label[96];   /* what the allocation in progress is for (ab_alloc_for; "" otherwise) */
    int oom;          /* an allocation was refused for want of memory (the limit's or the device's) */
    ab_mem_category oom_cat;
    size_t oom_bytes, oom_in_use; /* the refused request, the comparable total when it came */
    char oom_label[96];
} ab_mem;

/* 1 when category c counts towards the comparable total */
static inline int ab_mem_in_total(int c) { return c != AB_MEM_CPU_SCRATCH; }

const char *ab_mem_category_name(ab_mem_category c); /* JSON key, e.g. "master_weights" */
void ab_mem_charge(ab_mem *m, ab_mem_category c, size_t bytes);
void ab_mem_release(ab_mem *m, ab_mem_category c, size_t bytes);
/* Backends call this before they allocate: 0 when bytes of c fit under m->limit (always, without
 * a limit or for the CPU-only scratch, which is not in the comparable total); else -1 with a
 * one-line error naming the request, its category and label, the limit and the peak by
 * category, and m->oom set. */
int ab_mem_admit(ab_mem *m, ab_mem_category c, size_t bytes);
/* a device that refused an allocation itself (cudaMalloc): the same record and message */
void ab_mem_refused(ab_mem *m, ab_mem_category c, size_t bytes, const char *why);

#endif
