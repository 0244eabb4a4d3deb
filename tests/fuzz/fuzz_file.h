/* A file in memory for the fuzz targets: the input bytes written to a memfd and reached by path
 * as /proc/self/fd/N, so a reader that takes a path sees them without a disk write per input. */
#ifndef AB_FUZZ_FILE_H
#define AB_FUZZ_FILE_H

/* memfd_create is a GNU extension; this header is included before any system header */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

typedef struct {
    int fd;
    char path[64]; /* /proc/self/fd/N */
} fuzz_file;

/* The harness has no caller to hand an error to: a set-up failure stops the fuzzer. */
static void fuzz_die(const char *what) {
    perror(what);
    abort();
}

/* A contract of the reader broken: abort, so libFuzzer records the input as a crash. */
#define FUZZ_CHECK(cond)                                                                           \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #cond);               \
            abort();                                                                               \
        }                                                                                          \
    } while (0)

static void fuzz_file_open(fuzz_file *f, const char *name) {
    f->fd = memfd_create(name, MFD_CLOEXEC);
    if (f->fd < 0) { /* no memfd (old kernel, seccomp): an unlinked temporary file serves too */
        char tmpl[] = "/tmp/ab-fuzz-XXXXXX";
        f->fd = mkstemp(tmpl);
        if (f->fd < 0) fuzz_die("fuzz_file_open");
        unlink(tmpl);
    }
    snprintf(f->path, sizeof f->path, "/proc/self/fd/%d", f->fd);
}

/* Replaces the file's contents with data[0, size). */
static void fuzz_file_set(fuzz_file *f, const uint8_t *data, size_t size) {
    if (ftruncate(f->fd, 0) != 0) fuzz_die("ftruncate");
    size_t done = 0;
    while (done < size) {
        const ssize_t w = pwrite(f->fd, data + done, size - done, (off_t)done);
        if (w <= 0) fuzz_die("pwrite");
        done += (size_t)w;
    }
}

#endif
