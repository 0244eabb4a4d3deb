/* libFuzzer target for the CIFAR-10 reader: the input parsed from memory (ab_cifar10_parse) and
 * read as a file (ab_cifar10_read); both must agree, and a set they accept must be the records. */
#include "fuzz_file.h"

#include "ab.h"
#include "cifar10.h"

static fuzz_file file;

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc, (void)argv;
    fuzz_file_open(&file, "cifar10");
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    static const char name[] = "fuzz-input.bin";
    ab_image_set a, b;
    const int rc_parse = ab_cifar10_parse(data, size, name, &a);
    if (rc_parse != 0) {
        FUZZ_CHECK(a.images == NULL && a.labels == NULL);
        FUZZ_CHECK(strstr(ab_error(), name) != NULL); /* errors name the file */
    }
    fuzz_file_set(&file, data, size);
    const int rc_read = ab_cifar10_read(file.path, &b);
    FUZZ_CHECK(rc_parse == rc_read);
    if (rc_read != 0) {
        FUZZ_CHECK(strstr(ab_error(), file.path) != NULL);
        return 0;
    }
    const size_t n = size / AB_CIFAR10_RECORD, pixels = AB_CIFAR10_RECORD - 1;
    FUZZ_CHECK((size_t)a.n == n && b.n == a.n && a.dim == (int)pixels && a.channels == 3 && a.planar == 1);
    for (size_t i = 0; i < n; i++) {
        FUZZ_CHECK(a.labels[i] <= 9 && a.labels[i] == data[i * AB_CIFAR10_RECORD]);
        FUZZ_CHECK(memcmp(a.images + i * pixels, data + i * AB_CIFAR10_RECORD + 1, pixels) == 0);
    }
    FUZZ_CHECK(memcmp(a.labels, b.labels, n) == 0 && memcmp(a.images, b.images, n * pixels) == 0);
    ab_image_set_free(&a);
    ab_image_set_free(&b);
    return 0;
}
