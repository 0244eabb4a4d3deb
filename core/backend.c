/* Tracked allocation helpers over a backend's op table. */
#include "backend.h"

void *ab_alloc(ab_backend *be, ab_mem_category cat, size_t bytes) { return be->ops->alloc(be, cat, bytes); }
void ab_release(ab_backend *be, ab_mem_category cat, void *p, size_t bytes) { be->ops->release(be, cat, p, bytes); }
