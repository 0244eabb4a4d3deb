/* Weights files in PyTorch's names: a model's spec table is its state_dict (the names are the
 * keys, the shapes PyTorch's after the layout's permutation), so one loader and one writer
 * serve every model. Batch norm's num_batches_tracked (int64, one per batch-norm prefix, as
 * torchvision writes it) is the model's batches_tracked. */
#ifndef AB_CHECKPOINT_H
#define AB_CHECKPOINT_H

#include <stddef.h>

#include "model.h"
#include "params.h"

/* Loads every spec's tensor from a safetensors file (F32, F16, BF16 or F64 stored), strictly as
 * load_state_dict(strict=True) does: a missing or unexpected name, a wrong shape or a
 * non-floating dtype is an error naming the tensor; names in ignore (NULL-terminated, may be
 * NULL) may be present and are skipped. Writes a one-line account to from. */
int ab_checkpoint_load(const char *path, ab_model *m, ab_params *p, const char *const *ignore, char *from, size_t cap);
/* Writes the fp32 master weights and the buffers in PyTorch's layout and spec order. */
int ab_checkpoint_save(const char *path, const ab_model *m, const ab_params *p);
/* The loader's checks, into host memory: host (p->n + p->n_bufs floats) gets the weights then
 * the buffers; *nbt the largest num_batches_tracked (-1 when the file has none). */
int ab_checkpoint_read(const char *path, const ab_params *p, const char *const *ignore, float *host, long long *nbt,
                       char *from, size_t cap);
/* The writer, from host memory: master (p->n floats), bufs (p->n_bufs), batch norm's step count. */
int ab_checkpoint_write(const char *path, const ab_params *p, const float *master, const float *bufs,
                        long long batches_tracked);
/* s's elements of elem bytes from this layout to PyTorch's (to_torch) or back; a copy when the
 * layouts are the same */
void ab_checkpoint_permute(const ab_param_spec *s, const void *src, void *dst, size_t elem, int to_torch);
/* PyTorch's shape of s (the layout undone); returns the rank */
int ab_checkpoint_torch_shape(const ab_param_spec *s, long long shape[4]);

#endif
