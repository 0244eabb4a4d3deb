/* Memory accounting: every buffer a backend allocates is charged to one category; current and
 * peak bytes are kept per category and for the total (the peak of the sum, which is what a
 * device's memory must hold at once). The total counts what a GPU run of the same configuration
 * would hold; buffers that only the CPU implementation needs (fp16 operands widened to fp32 for
 * BLAS, im2col columns, conversion scratch) are charged to AB_MEM_CPU_SCRATCH, kept out of the
 * comparable total and reported apart, with the peak of everything in peak_all. */
#ifndef AB_MEM_H
#define AB_MEM_H

#include <stddef.h>

typedef enum {
    AB_MEM_PARAMETERS = 0, /* weights the forward pass reads */
    AB_MEM_MASTER,         /* fp32 master copy under amp/bf16 */
    AB_MEM_GRADIENTS,
    AB_MEM_OPTIMIZER,
    AB_MEM_ACTIVATIONS,
    AB_MEM_WORKSPACE,   /* scratch a GPU run holds too: library workspaces, per-step statistics */
    AB_MEM_CPU_SCRATCH, /* scratch only the CPU implementation needs: not in the comparable total */
    AB_MEM_COUNT
} ab_mem_category;

typedef struct {
    size_t current[AB_MEM_COUNT];
    size_t peak[AB_MEM_COUNT];
    size_t current_total; /* every category but AB_MEM_CPU_SCRATCH */
    size_t peak_total;
    size_t current_all; /* every category */
    size_t peak_all;
} ab_mem;

/* 1 when category c counts towards the comparable total */
static inline int ab_mem_in_total(int c) { return c != AB_MEM_CPU_SCRATCH; }

const char *ab_mem_category_name(ab_mem_category c); /* JSON key, e.g. "master_weights" */
void ab_mem_charge(ab_mem *m, ab_mem_category c, size_t bytes);
void ab_mem_release(ab_mem *m, ab_mem_category c, size_t bytes);

#endif
