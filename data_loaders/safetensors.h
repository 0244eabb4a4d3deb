/* safetensors files (Hugging Face's format, what torchvision and transformers checkpoints are
 * shared in): 8 bytes of little-endian header length N, N bytes of a JSON object
 *   {"name": {"dtype": "F32", "shape": [d0, d1, ...], "data_offsets": [begin, end]}, ...,
 *    "__metadata__": {"key": "value", ...}}
 * then the byte buffer the offsets index (relative to its start), tensors row-major and
 * little-endian. The reader refuses a file that lies: a header longer than the file or than
 * AB_ST_MAX_HEADER, JSON that is not such an object, an unknown dtype, a shape whose bytes differ
 * from its offsets, offsets past the buffer, overlapping tensors or bytes no tensor covers (the
 * format indexes the buffer entirely). Everything is checked before a tensor is handed out, so
 * no read ever leaves the file's bytes. */
#ifndef AB_SAFETENSORS_H
#define AB_SAFETENSORS_H

#include <stddef.h>
#include <stdint.h>

#define AB_ST_MAX_HEADER ((uint64_t)100 << 20) /* the reference implementation's limit */
#define AB_ST_MAX_DIMS 8

typedef enum {
    AB_ST_F64,
    AB_ST_F32,
    AB_ST_F16,
    AB_ST_BF16,
    AB_ST_I64,
    AB_ST_I32,
    AB_ST_I16,
    AB_ST_I8,
    AB_ST_U8,
    AB_ST_BOOL,
    AB_ST_DTYPE_COUNT
} ab_st_dtype;

const char *ab_st_dtype_name(ab_st_dtype t); /* "F32" */
size_t ab_st_dtype_size(ab_st_dtype t);

typedef struct {
    char *name;
    ab_st_dtype dtype;
    int ndim;
    int64_t shape[AB_ST_MAX_DIMS];
    size_t numel;
    const uint8_t *data; /* bytes inside the file's buffer */
    size_t bytes;
} ab_st_tensor;

typedef struct {
    char path[512];
    const uint8_t *base; /* the whole file (mapped), or the caller's bytes for ab_st_parse */
    size_t size;
    int mapped;
    ab_st_tensor *t; /* in the header's order */
    int n;
} ab_safetensors;

/* Maps and checks a file; errors name the file and what is wrong with it. */
int ab_st_open(const char *path, ab_safetensors *st);
/* The same checks over bytes in memory (kept by the caller while st is used); name labels errors. */
int ab_st_parse(const void *bytes, size_t size, const char *name, ab_safetensors *st);
void ab_st_close(ab_safetensors *st);
const ab_st_tensor *ab_st_find(const ab_safetensors *st, const char *name);
/* t's elements as fp32 (F32, F16 and BF16 exactly, F64 rounded); -1 for other dtypes */
int ab_st_to_f32(const ab_st_tensor *t, float *out);

/* One tensor to write: data holds numel * size bytes of dtype, little-endian. */
typedef struct {
    const char *name;
    ab_st_dtype dtype;
    int ndim;
    int64_t shape[AB_ST_MAX_DIMS];
    const void *data;
} ab_st_entry;

/* Writes the tensors in the given order (header padded to 8 bytes with spaces, as the reference
 * writer does, and {"format": "pt"} metadata, so that safetensors.torch.load_file reads it),
 * atomically: a temporary file in the same folder, then rename. */
int ab_st_write(const char *path, const ab_st_entry *e, int n);

#endif
