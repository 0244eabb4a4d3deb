/* Memory accounting: every buffer a backend allocates is charged to one category; current and
 * peak bytes are kept per category and for the total (the peak of the sum, which is what a
 * device's memory must hold at once). */
#ifndef AB_MEM_H
#define AB_MEM_H

#include <stddef.h>

typedef enum {
    AB_MEM_PARAMETERS = 0, /* weights the forward pass reads */
    AB_MEM_MASTER,         /* fp32 master copy under amp/bf16 */
    AB_MEM_GRADIENTS,
    AB_MEM_OPTIMIZER,
    AB_MEM_ACTIVATIONS,
    AB_MEM_WORKSPACE, /* scratch: conversions, library workspaces, data batches */
    AB_MEM_COUNT
} ab_mem_category;

typedef struct {
    size_t current[AB_MEM_COUNT];
    size_t peak[AB_MEM_COUNT];
    size_t current_total;
    size_t peak_total;
} ab_mem;

const char *ab_mem_category_name(ab_mem_category c); /* JSON key, e.g. "master_weights" */
void ab_mem_charge(ab_mem *m, ab_mem_category c, size_t bytes);
void ab_mem_release(ab_mem *m, ab_mem_category c, size_t bytes);

#endif
