/* Activation arena: a table of tensors, one allocation per memory category. */
#include "arena.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { ARENA_ALIGN = 256 }; /* what cuDNN and cuBLASLt want for their best kernels */

void ab_arena_init(ab_arena *a, ab_backend *be) { *a = (ab_arena){.be = be}; }

void ab_arena_add(ab_arena *a, ab_mem_category cat, size_t bytes, void **ptr, const char *fmt, ...) {
    if (a->failed) return;
    if (a->n == a->cap) {
        const int cap = a->cap ? 2 * a->cap : 64;
        ab_arena_tensor *t = realloc(a->t, (size_t)cap * sizeof *t);
        if (!t) {
            a->failed = 1;
            return;
        }
        a->t = t;
        a->cap = cap;
    }
    ab_arena_tensor *t = &a->t[a->n++];
    *t = (ab_arena_tensor){.cat = cat, .bytes = bytes, .ptr = ptr};
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(t->name, sizeof t->name, fmt, ap);
    va_end(ap);
    *ptr = NULL;
}

int ab_arena_alloc(ab_arena *a) {
    if (a->failed) return ab_errorf("out of host memory describing the activation arena");
    memset(a->size, 0, sizeof a->size);
    for (int i = 0; i < a->n; i++) {
        ab_arena_tensor *t = &a->t[i];
        t->offset = a->size[t->cat];
        a->size[t->cat] += (t->bytes + ARENA_ALIGN - 1) / ARENA_ALIGN * ARENA_ALIGN;
    }
    int largest = -1;
    for (int i = 0; i < a->n; i++)
        if (largest < 0 || a->t[i].bytes > a->t[largest].bytes) largest = i;
    for (int c = 0; c < AB_MEM_COUNT; c++)
        if (a->size[c] &&
            !(a->base[c] = ab_alloc_for(a->be, (ab_mem_category)c, a->size[c],
                                        "the activation arena (%d tensors; the largest, %s, %.3f GB)", a->n,
                                        largest >= 0 ? a->t[largest].name : "-",
                                        largest >= 0 ? a->t[largest].bytes / 1e9 : 0.0))) {
            ab_arena_free(a);
            return -1;
        }
    for (int i = 0; i < a->n; i++) *a->t[i].ptr = (char *)a->base[a->t[i].cat] + a->t[i].offset;
    return 0;
}

void ab_arena_free(ab_arena *a) {
    for (int c = 0; c < AB_MEM_COUNT; c++)
        if (a->base[c]) ab_release(a->be, (ab_mem_category)c, a->base[c], a->size[c]);
    for (int i = 0; i < a->n; i++) *a->t[i].ptr = NULL;
    free(a->t);
    *a = (ab_arena){.be = a->be};
}
