/* An activation arena: a model declares every tensor its forward keeps and its backward needs
 * (name, bytes, memory category) once its shapes are known; the arena lays them out and makes
 * one allocation per category, so the step allocates nothing and the memory record sees every
 * tensor. The table is also what the memory report can list tensor by tensor. */
#ifndef AB_ARENA_H
#define AB_ARENA_H

#include <stddef.h>

#include "backend.h"

typedef struct {
    char name[48];
    ab_mem_category cat;
    size_t bytes, offset;
    void **ptr; /* where the tensor's address is written when the arena is allocated */
} ab_arena_tensor;

typedef struct {
    ab_backend *be;
    ab_arena_tensor *t;
    int n, cap;
    size_t size[AB_MEM_COUNT]; /* bytes laid out per category */
    void *base[AB_MEM_COUNT];
    int failed; /* an ab_arena_add ran out of host memory: ab_arena_alloc reports it */
} ab_arena;

void ab_arena_init(ab_arena *a, ab_backend *be);
/* Declares a tensor; *ptr is set by ab_arena_alloc. Names are truncated to 47 characters. */
void ab_arena_add(ab_arena *a, ab_mem_category cat, size_t bytes, void **ptr, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 5, 6)))
#endif
    ;
/* Lays out and allocates (256-byte aligned tensors): one backend allocation per category used. */
int ab_arena_alloc(ab_arena *a);
void ab_arena_free(ab_arena *a);
/* bytes of the arena's tensors in category c */
static inline size_t ab_arena_bytes(const ab_arena *a, ab_mem_category c) { return a->size[c]; }

#endif
