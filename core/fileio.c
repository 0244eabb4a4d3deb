/* Atomic file writes: a temporary file in the target's folder, written in full, fsynced, then
 * renamed over the target (rename within one file system replaces it in one step). */
#define _POSIX_C_SOURCE 200809L
#include "fileio.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ab.h"

/* n bytes to fd, across short writes and signals; 0, or -1 with errno set */
static int write_all(int fd, const char *p, size_t n) {
    while (n > 0) {
        const ssize_t w = write(fd, p, n);
        if (w < 0 && errno == EINTR) continue;
        if (w < 0) return -1;
        if (w == 0) {
            errno = EIO;
            return -1;
        }
        p += w;
        n -= (size_t)w;
    }
    return 0;
}

int ab_write_parts_atomic(const char *path, const ab_file_part *parts, size_t n_parts) {
    const size_t len = strlen(path);
    char *tmp = malloc(len + 32);
    if (!tmp) return ab_errorf("%s: out of host memory", path);
    snprintf(tmp, len + 32, "%s.tmp.%ld", path, (long)getpid());
    const int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0666);
    if (fd < 0) {
        ab_errorf("%s: cannot write: %s (temporary file %s)", path, strerror(errno), tmp);
        free(tmp);
        return -1;
    }
    int ok = 1;
    for (size_t i = 0; ok && i < n_parts; i++) ok = write_all(fd, parts[i].data, parts[i].n) == 0;
    ok = ok && fsync(fd) == 0;
    int err = ok ? 0 : errno;
    if (close(fd) != 0 && ok) {
        ok = 0;
        err = errno;
    }
    if (!ok) {
        ab_errorf("%s: cannot write: %s", path, strerror(err));
    } else if (rename(tmp, path) != 0) {
        ab_errorf("%s: cannot rename into place: %s", path, strerror(errno));
        ok = 0;
    }
    if (!ok) unlink(tmp);
    free(tmp);
    return ok ? 0 : -1;
}

int ab_write_file_atomic(const char *path, const void *data, size_t n) {
    const ab_file_part part = {data, n};
    return ab_write_parts_atomic(path, &part, 1);
}

int ab_mkdir_p(const char *path) {
    char p[1024];
    if (snprintf(p, sizeof p, "%s", path) >= (int)sizeof p) return ab_errorf("%s: path too long", path);
    for (char *s = p + 1; *s; s++)
        if (*s == '/') {
            *s = 0;
            if (mkdir(p, 0777) != 0 && errno != EEXIST) return ab_errorf("%s: cannot create: %s", p, strerror(errno));
            *s = '/';
        }
    if (mkdir(p, 0777) == 0) { /* a new folder: its parent's entry made durable too */
        char *slash = strrchr(p, '/');
        if (slash && slash != p) {
            *slash = 0;
            const int fd = open(p, O_RDONLY | O_DIRECTORY);
            if (fd >= 0) fsync(fd), close(fd);
        }
    } else if (errno != EEXIST) {
        return ab_errorf("%s: cannot create: %s", p, strerror(errno));
    }
    return 0;
}
