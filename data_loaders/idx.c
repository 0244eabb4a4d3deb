/* IDX reader over zlib (gzread also reads uncompressed files as they are). */
#include "idx.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <zlib.h>

#include "ab.h"

#define IDX_MAX_BYTES ((size_t)1 << 32)

static int read_exact(gzFile f, void *buf, size_t n, const char *path, const char *what) {
    size_t got = 0;
    while (got < n) {
        const unsigned chunk = (n - got) > (1u << 30) ? (1u << 30) : (unsigned)(n - got);
        const int r = gzread(f, (char *)buf + got, chunk);
        if (r < 0) {
            int zerr;
            const char *msg = gzerror(f, &zerr);
            return ab_errorf("%s: corrupt compressed data reading %s (%s)", path, what, msg);
        }
        if (r == 0) break;
        got += (size_t)r;
    }
    if (got < n) return ab_errorf("%s: truncated: %s needs %zu bytes, file ends after %zu", path, what, n, got);
    return 0;
}

int ab_idx_read(const char *path, ab_idx *out) {
    memset(out, 0, sizeof *out);
    gzFile f = gzopen(path, "rb");
    if (!f) return ab_errorf("%s: cannot open", path);
    uint8_t hdr[4];
    int rc = read_exact(f, hdr, 4, path, "the magic number");
    if (rc == 0 && (hdr[0] != 0 || hdr[1] != 0 || hdr[2] != 0x08 || hdr[3] < 1 || hdr[3] > 4))
        rc = ab_errorf("%s: wrong magic number 0x%02x%02x%02x%02x (expected 0x000008NN: unsigned bytes, 1-4 dims)",
                       path, hdr[0], hdr[1], hdr[2], hdr[3]);
    size_t size = 1;
    if (rc == 0) {
        out->ndim = hdr[3];
        uint8_t d[16];
        rc = read_exact(f, d, (size_t)4 * (size_t)out->ndim, path, "the dimensions");
        for (int i = 0; rc == 0 && i < out->ndim; i++) {
            const uint32_t v = ((uint32_t)d[4 * i] << 24) | ((uint32_t)d[4 * i + 1] << 16) |
                               ((uint32_t)d[4 * i + 2] << 8) | d[4 * i + 3];
            if (v == 0 || v > (1u << 30) || size * v > IDX_MAX_BYTES)
                rc = ab_errorf("%s: implausible dimension %d = %u", path, i, v);
            out->dims[i] = (int)v;
            size *= v;
        }
    }
    /* memory for the bytes the file really holds, not for what its header claims: the buffer
     * grows as the payload arrives (a short file with a huge claim fails before it costs much) */
    size_t cap = 0, got = 0;
    while (rc == 0 && got < size) {
        if (got == cap) {
            const size_t ncap = cap ? (cap * 2 < size ? cap * 2 : size) : (size < ((size_t)1 << 20) ? size : (size_t)1 << 20);
            uint8_t *d = realloc(out->data, ncap);
            if (!d) {
                rc = ab_errorf("%s: out of memory for %zu bytes", path, ncap);
                break;
            }
            out->data = d;
            cap = ncap;
        }
        const size_t want = cap - got;
        const int r = gzread(f, out->data + got, want > (1u << 30) ? (1u << 30) : (unsigned)want);
        if (r < 0) {
            int zerr;
            rc = ab_errorf("%s: corrupt compressed data reading the payload (%s)", path, gzerror(f, &zerr));
        } else if (r == 0) {
            rc = ab_errorf("%s: truncated: the payload needs %zu bytes, file ends after %zu", path, size, got);
        }
        if (r > 0) got += (size_t)r;
    }
    if (rc == 0) out->size = size;
    if (rc == 0) {
        uint8_t extra;
        const int r = gzread(f, &extra, 1);
        if (r > 0)
            rc = ab_errorf("%s: size mismatch: more data than the dimensions (%zu bytes) describe", path, size);
        else if (r < 0)
            rc = ab_errorf("%s: corrupt compressed data after the payload", path);
    }
    gzclose(f);
    if (rc != 0) ab_idx_free(out);
    return rc;
}

void ab_idx_free(ab_idx *f) {
    free(f->data);
    f->data = NULL;
}

static int find_file(const char *dir, const char *base, char *path, size_t cap) {
    struct stat st;
    snprintf(path, cap, "%s/%s.gz", dir, base);
    if (stat(path, &st) == 0) return 0;
    snprintf(path, cap, "%s/%s", dir, base);
    if (stat(path, &st) == 0) return 0;
    return ab_errorf("%s/%s[.gz]: no such file (see scripts/fetch_data.sh, or pass --data DIR)", dir, base);
}

int ab_mnist_load(const char *dir, const char *split, ab_image_set *out) {
    memset(out, 0, sizeof *out);
    char ipath[4096], lpath[4096], base[64];
    snprintf(base, sizeof base, "%s-images-idx3-ubyte", split);
    AB_TRY(find_file(dir, base, ipath, sizeof ipath));
    snprintf(base, sizeof base, "%s-labels-idx1-ubyte", split);
    AB_TRY(find_file(dir, base, lpath, sizeof lpath));
    ab_idx im, lb;
    AB_TRY(ab_idx_read(ipath, &im));
    if (ab_idx_read(lpath, &lb) != 0) {
        ab_idx_free(&im);
        return -1;
    }
    int rc = 0;
    if (im.ndim != 3)
        rc = ab_errorf("%s: expected 3 dimensions (N, rows, cols), found %d", ipath, im.ndim);
    else if (lb.ndim != 1)
        rc = ab_errorf("%s: expected 1 dimension (N), found %d", lpath, lb.ndim);
    else if ((size_t)im.dims[1] * (size_t)im.dims[2] > (size_t)INT_MAX)
        rc = ab_errorf("%s: images of %d x %d pixels are larger than this reader takes", ipath, im.dims[1], im.dims[2]);
    else if (im.dims[0] != lb.dims[0])
        rc = ab_errorf("%s: size mismatch: %d labels for %d images in %s", lpath, lb.dims[0], im.dims[0], ipath);
    for (size_t i = 0; rc == 0 && i < lb.size; i++)
        if (lb.data[i] > 9) rc = ab_errorf("%s: label %u at index %zu is not a digit class 0-9", lpath, lb.data[i], i);
    if (rc != 0) {
        ab_idx_free(&im);
        ab_idx_free(&lb);
        return rc;
    }
    *out = (ab_image_set){.n = im.dims[0], .rows = im.dims[1], .cols = im.dims[2], .dim = im.dims[1] * im.dims[2],
                          .n_classes = 10, .channels = 1, .images = im.data, .labels = lb.data};
    return 0;
}

void ab_image_set_free(ab_image_set *s) {
    free(s->images);
    free(s->labels);
    memset(s, 0, sizeof *s);
}
