/* Writing a file atomically: readers see the old file or the whole new one, never a part. */
#ifndef AB_FILEIO_H
#define AB_FILEIO_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

/* One piece of a file: n bytes at data (data may be NULL when n is 0). */
typedef struct {
    const void *data;
    size_t n;
} ab_file_part;

/* Writes the parts one after the other to "path.tmp.<pid>" in the same folder, fsyncs it and
 * renames it over path. 0 on success; else -1, the temporary file removed, path untouched and a
 * one-line error naming the path and strerror ("PATH: cannot write: No space left on device"). */
int ab_write_parts_atomic(const char *path, const ab_file_part *parts, size_t n_parts);
/* The same for one buffer. */
int ab_write_file_atomic(const char *path, const void *data, size_t n);
/* mkdir -p: path and every folder above it; a folder it creates is made durable in its parent
 * (fsync of the parent folder). 0, or -1 with a one-line error naming the folder. */
int ab_mkdir_p(const char *path);

#ifdef __cplusplus
}
#endif
#endif
