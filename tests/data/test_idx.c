/* The IDX reader on a good file (gzip and raw) and on truncated, wrong-magic and size-mismatched
 * files: each bad one gives a clear error naming the file, never a crash. Also the real MNIST
 * files, whose per-class label counts are known. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zlib.h>

#include "ab.h"
#include "idx.h"
#include "rng.h"
#include "tolerances.h"

static int failures = 0;
static char dir[256];

static void put_be32(uint8_t *p, uint32_t v) {
    p[0] = (uint8_t)(v >> 24);
    p[1] = (uint8_t)(v >> 16);
    p[2] = (uint8_t)(v >> 8);
    p[3] = (uint8_t)v;
}

/* header (magic with ndim, dims) + payload, possibly cut or extended */
static size_t make_idx(uint8_t *buf, int ndim, const int *dims, const uint8_t *payload, size_t n, uint8_t type) {
    buf[0] = 0;
    buf[1] = 0;
    buf[2] = type;
    buf[3] = (uint8_t)ndim;
    for (int i = 0; i < ndim; i++) put_be32(buf + 4 + 4 * i, (uint32_t)dims[i]);
    memcpy(buf + 4 + 4 * ndim, payload, n);
    return 4 + 4 * (size_t)ndim + n;
}

static void write_file(const char *name, const uint8_t *buf, size_t n, int gz) {
    char path[512];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    if (gz) {
        gzFile f = gzopen(path, "wb");
        gzwrite(f, buf, (unsigned)n);
        gzclose(f);
    } else {
        FILE *f = fopen(path, "wb");
        fwrite(buf, 1, n, f);
        fclose(f);
    }
}

static void expect_error(const char *name, const char *needle) {
    char path[512];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    ab_idx f;
    ab_error_clear();
    const int rc = ab_idx_read(path, &f);
    AB_CHECK(rc != 0, "%s must be rejected", name);
    AB_CHECK(strstr(ab_error(), path) != NULL, "error names the file: '%s'", ab_error());
    AB_CHECK(strstr(ab_error(), needle) != NULL, "error says '%s': '%s'", needle, ab_error());
    AB_CHECK(strchr(ab_error(), '\n') == NULL, "one line: '%s'", ab_error());
    if (rc == 0) ab_idx_free(&f);
}

int main(void) {
    snprintf(dir, sizeof dir, "/tmp/ab_test_idx.XXXXXX");
    if (!mkdtemp(dir)) return 1;
    enum { N = 5, R = 3, C = 4 };
    uint8_t pix[N * R * C], lab[N], buf[4096];
    ab_rng r;
    ab_rng_seed(&r, 3);
    for (int i = 0; i < N * R * C; i++) pix[i] = (uint8_t)ab_rng_below(&r, 256);
    for (int i = 0; i < N; i++) lab[i] = (uint8_t)ab_rng_below(&r, 10);
    const int idims[] = {N, R, C}, ldims[] = {N};

    /* good files, gzip and raw, loaded as an MNIST-layout folder */
    size_t n = make_idx(buf, 3, idims, pix, sizeof pix, 0x08);
    write_file("train-images-idx3-ubyte.gz", buf, n, 1);
    write_file("t10k-images-idx3-ubyte", buf, n, 0);
    n = make_idx(buf, 1, ldims, lab, sizeof lab, 0x08);
    write_file("train-labels-idx1-ubyte.gz", buf, n, 1);
    write_file("t10k-labels-idx1-ubyte", buf, n, 0);
    const char *splits[] = {"train", "t10k"};
    for (int s = 0; s < 2; s++) {
        ab_image_set set;
        AB_CHECK(ab_mnist_load(dir, splits[s], &set) == 0, "%s: %s", splits[s], ab_error());
        AB_CHECK(set.n == N && set.rows == R && set.cols == C && set.dim == R * C, "%s dims", splits[s]);
        AB_CHECK(set.images && memcmp(set.images, pix, sizeof pix) == 0, "%s pixels", splits[s]);
        AB_CHECK(set.labels && memcmp(set.labels, lab, sizeof lab) == 0, "%s labels", splits[s]);
        ab_image_set_free(&set);
    }

    /* truncated: payload cut short, gzip and raw; header cut short */
    n = make_idx(buf, 3, idims, pix, sizeof pix, 0x08);
    write_file("trunc.gz", buf, n - 7, 1);
    expect_error("trunc.gz", "truncated");
    write_file("trunc_raw", buf, n - 1, 0);
    expect_error("trunc_raw", "truncated");
    write_file("trunc_hdr", buf, 6, 0);
    expect_error("trunc_hdr", "truncated");
    /* a gzip stream cut in the middle of its compressed data */
    write_file("full.gz", buf, n, 1);
    {
        char src[512], dst[512];
        snprintf(src, sizeof src, "%s/full.gz", dir);
        snprintf(dst, sizeof dst, "%s/cutgz.gz", dir);
        FILE *f = fopen(src, "rb");
        uint8_t z[4096];
        const size_t zn = fread(z, 1, sizeof z, f);
        fclose(f);
        f = fopen(dst, "wb");
        fwrite(z, 1, zn / 2, f);
        fclose(f);
        expect_error("cutgz.gz", "");
    }
    /* wrong magic: wrong element type, and a file that is not IDX at all */
    n = make_idx(buf, 3, idims, pix, sizeof pix, 0x0d);
    write_file("magic_type", buf, n, 0);
    expect_error("magic_type", "wrong magic");
    write_file("magic_text", (const uint8_t *)"hello, world, not idx data", 26, 1);
    expect_error("magic_text", "wrong magic");
    /* size mismatch: more data than the dimensions say */
    n = make_idx(buf, 3, idims, pix, sizeof pix, 0x08);
    buf[n] = 1;
    write_file("extra", buf, n + 1, 0);
    expect_error("extra", "size mismatch");
    /* implausible dimension */
    const int zdims[] = {0, R, C};
    n = make_idx(buf, 3, zdims, pix, 0, 0x08);
    write_file("zerodim", buf, n, 0);
    expect_error("zerodim", "dimension");
    /* missing file */
    expect_error("nope.gz", "cannot open");

    /* image/label count mismatch across the pair */
    const int ldims2[] = {N - 1};
    n = make_idx(buf, 1, ldims2, lab, N - 1, 0x08);
    write_file("train-labels-idx1-ubyte.gz", buf, n, 1);
    ab_image_set set;
    ab_error_clear();
    AB_CHECK(ab_mnist_load(dir, "train", &set) != 0 && strstr(ab_error(), "size mismatch"), "count mismatch: '%s'",
             ab_error());

    /* the real MNIST: per-class counts of the original */
    if (ab_mnist_load(AB_DEFAULT_DATA_ROOT "/mnist", "t10k", &set) == 0) {
        const int want[10] = {980, 1135, 1032, 1010, 982, 892, 958, 1028, 974, 1009};
        int got[10] = {0};
        for (int i = 0; i < set.n; i++) got[set.labels[i]]++;
        AB_CHECK(set.n == 10000 && set.rows == 28 && set.cols == 28, "MNIST test set dims");
        AB_CHECK(memcmp(got, want, sizeof got) == 0, "MNIST test label counts");
        ab_image_set_free(&set);
    } else {
        fprintf(stderr, "FAIL real MNIST: %s\n", ab_error());
        failures++;
    }

    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd) != 0) fprintf(stderr, "warning: could not remove %s\n", dir);
    printf("IDX reader: %d failures\n", failures);
    return failures ? 1 : 0;
}
