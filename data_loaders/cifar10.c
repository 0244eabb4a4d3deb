/* CIFAR-10 binary reader: memory for the records a file really holds. */
#include "cifar10.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "ab.h"

enum { SIDE = 32, PIXELS = 3 * SIDE * SIDE };

int ab_cifar10_parse(const void *bytes, size_t size, const char *name, ab_image_set *set) {
    memset(set, 0, sizeof *set);
    if (size == 0) return ab_errorf("%s: empty file (no CIFAR-10 records)", name);
    if (size % AB_CIFAR10_RECORD != 0)
        return ab_errorf("%s: %zu bytes is not a whole number of %d-byte CIFAR-10 records (truncated, or not a "
                         "CIFAR-10 binary file?)",
                         name, size, AB_CIFAR10_RECORD);
    const size_t n = size / AB_CIFAR10_RECORD;
    if (n > (size_t)1 << 30) return ab_errorf("%s: %zu records, more than a data set this reader takes", name, n);
    const uint8_t *b = bytes;
    for (size_t i = 0; i < n; i++)
        if (b[i * AB_CIFAR10_RECORD] > 9)
            return ab_errorf("%s: record %zu has label %u, outside the classes 0-9", name, i, b[i * AB_CIFAR10_RECORD]);
    set->images = malloc(n * PIXELS);
    set->labels = malloc(n);
    if (!set->images || !set->labels) {
        ab_image_set_free(set);
        return ab_errorf("%s: out of host memory for %zu images", name, n);
    }
    for (size_t i = 0; i < n; i++) {
        set->labels[i] = b[i * AB_CIFAR10_RECORD];
        memcpy(set->images + i * PIXELS, b + i * AB_CIFAR10_RECORD + 1, PIXELS);
    }
    set->n = (int)n;
    set->dim = PIXELS;
    set->rows = set->cols = SIDE;
    set->channels = 3;
    set->planar = 1;
    set->n_classes = 10;
    return 0;
}

int ab_cifar10_read(const char *path, ab_image_set *set) {
    memset(set, 0, sizeof *set);
    FILE *f = fopen(path, "rb");
    if (!f) return ab_errorf("%s: cannot open (%s)", path, strerror(errno));
    struct stat st;
    if (fstat(fileno(f), &st) != 0 || !S_ISREG(st.st_mode)) {
        fclose(f);
        return ab_errorf("%s: not a regular file", path);
    }
    const size_t size = (size_t)st.st_size;
    uint8_t *buf = malloc(size ? size : 1);
    if (!buf) {
        fclose(f);
        return ab_errorf("%s: out of host memory for %zu bytes", path, size);
    }
    const size_t got = fread(buf, 1, size, f);
    const int err = ferror(f);
    fclose(f);
    int rc = got != size || err ? ab_errorf("%s: read %zu of %zu bytes", path, got, size)
                                : ab_cifar10_parse(buf, size, path, set);
    free(buf);
    return rc;
}

/* appends b to a (b is freed) */
static int concat(ab_image_set *a, ab_image_set *b, const char *path) {
    uint8_t *im = realloc(a->images, ((size_t)a->n + b->n) * PIXELS);
    if (im) a->images = im;
    uint8_t *lb = im ? realloc(a->labels, (size_t)a->n + b->n) : NULL;
    if (lb) a->labels = lb;
    if (!im || !lb) {
        ab_image_set_free(b);
        return ab_errorf("%s: out of host memory", path);
    }
    memcpy(a->images + (size_t)a->n * PIXELS, b->images, (size_t)b->n * PIXELS);
    memcpy(a->labels + a->n, b->labels, (size_t)b->n);
    a->n += b->n;
    ab_image_set_free(b);
    return 0;
}

int ab_cifar10_load(const char *dir, int train, ab_image_set *set) {
    memset(set, 0, sizeof *set);
    char path[4096];
    struct stat st;
    if (!train) {
        snprintf(path, sizeof path, "%s/test_batch.bin", dir);
        if (stat(path, &st) != 0)
            return ab_errorf("%s: no such file (scripts/fetch_data.sh cifar10 fetches CIFAR-10, or pass --data DIR)",
                             path);
        return ab_cifar10_read(path, set);
    }
    for (int k = 1;; k++) {
        snprintf(path, sizeof path, "%s/data_batch_%d.bin", dir, k);
        if (stat(path, &st) != 0) {
            if (k == 1)
                return ab_errorf("%s: no such file (scripts/fetch_data.sh cifar10 fetches CIFAR-10, or pass --data "
                                 "DIR)",
                                 path);
            return 0;
        }
        ab_image_set b;
        if (ab_cifar10_read(path, k == 1 ? set : &b) != 0) {
            ab_image_set_free(set);
            return -1;
        }
        if (k > 1 && concat(set, &b, path) != 0) {
            ab_image_set_free(set);
            return -1;
        }
    }
}
