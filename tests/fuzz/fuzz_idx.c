/* libFuzzer target for the IDX reader: the input as one IDX file (ab_idx_read, gzip or raw), and
 * cut in two as an MNIST images/labels pair (ab_mnist_load); the reader's promises are checked. */
#include "fuzz_file.h"

#include "ab.h"
#include "idx.h"

static fuzz_file whole, images, labels;
static char dir[] = "/tmp/ab-fuzz-idx-XXXXXX";
static char images_link[64], labels_link[64];
static volatile unsigned sink; /* keeps the reads of every byte from being optimised away */

static void remove_dir(void) {
    unlink(images_link);
    unlink(labels_link);
    rmdir(dir);
}

/* ab_mnist_load takes a folder: two names in it link to the memfds (stat and gzopen follow the
 * links, and /proc/self is this process), so each input costs no disk write. */
int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc, (void)argv;
    fuzz_file_open(&whole, "idx");
    fuzz_file_open(&images, "images");
    fuzz_file_open(&labels, "labels");
    if (!mkdtemp(dir)) fuzz_die("mkdtemp");
    snprintf(images_link, sizeof images_link, "%s/train-images-idx3-ubyte", dir);
    snprintf(labels_link, sizeof labels_link, "%s/train-labels-idx1-ubyte", dir);
    if (symlink(images.path, images_link) != 0 || symlink(labels.path, labels_link) != 0) fuzz_die("symlink");
    atexit(remove_dir);
    return 0;
}

/* The labels file starts at the last place (after the first byte) where a labels magic or a gzip
 * header begins: the seeds are an images file and a labels file end to end. */
static size_t split_point(const uint8_t *d, size_t n) {
    for (size_t k = n; k-- > 1;) {
        if (k + 4 <= n && d[k] == 0 && d[k + 1] == 0 && d[k + 2] == 0x08 && d[k + 3] == 0x01) return k;
        if (k + 3 <= n && d[k] == 0x1f && d[k + 1] == 0x8b && d[k + 2] == 0x08) return k;
    }
    return n;
}

static void check_idx(void) {
    ab_idx f;
    if (ab_idx_read(whole.path, &f) != 0) {
        FUZZ_CHECK(f.data == NULL);
        FUZZ_CHECK(strstr(ab_error(), whole.path) != NULL); /* errors name the file */
        return;
    }
    FUZZ_CHECK(f.ndim >= 1 && f.ndim <= 4);
    size_t size = 1;
    for (int i = 0; i < f.ndim; i++) {
        FUZZ_CHECK(f.dims[i] >= 1);
        size *= (size_t)f.dims[i];
    }
    FUZZ_CHECK(f.size == size && f.data != NULL);
    /* every payload byte readable: AddressSanitizer stops a buffer shorter than size */
    unsigned sum = 0;
    for (size_t i = 0; i < f.size; i++) sum += f.data[i];
    sink = sum;
    ab_idx_free(&f);
}

static void check_mnist(void) {
    ab_image_set s;
    if (ab_mnist_load(dir, "train", &s) != 0) {
        FUZZ_CHECK(strstr(ab_error(), dir) != NULL);
        return;
    }
    FUZZ_CHECK(s.n >= 1 && s.rows >= 1 && s.cols >= 1 && s.dim == s.rows * s.cols && s.channels == 1);
    FUZZ_CHECK(s.images && s.labels);
    for (int i = 0; i < s.n; i++) FUZZ_CHECK(s.labels[i] <= 9);
    const size_t last = (size_t)s.n * (size_t)s.dim - 1;
    sink = s.images[last] + s.labels[s.n - 1];
    ab_image_set_free(&s);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    fuzz_file_set(&whole, data, size);
    check_idx();
    const size_t k = split_point(data, size);
    fuzz_file_set(&images, data, k);
    fuzz_file_set(&labels, data + k, size - k);
    check_mnist();
    return 0;
}
