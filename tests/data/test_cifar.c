/* CIFAR-10: the binary reader on good, truncated, wrong-size and bad-label files and a folder of
 * several training batches; the real subset in ../shared/data when it is there; batch assembly
 * (per-channel normalisation, planar R, G, B to channels-last) and the augmentation: a 4-pixel
 * zero-padded crop and a horizontal flip against a direct reference of torchvision's
 * RandomCrop(32, padding=4) + RandomHorizontalFlip, seeded per sample so that a batch is a pure
 * function of its indices and the seed. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "backend_cpu.h"
#include "cifar10.h"
#include "image_dataset.h"
#include "rng.h"
#include "tolerances.h"

static int failures = 0;
enum { REC = AB_CIFAR10_RECORD, PIX = 3072 };

static char dir[256];

/* n records with label i % 10 (or bad_label at record bad) and pixels from the seed */
static int write_file(const char *name, int n, int bad, int bad_label, size_t cut, uint64_t seed) {
    char path[512];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    uint8_t *b = malloc((size_t)n * REC + 1);
    ab_rng r;
    ab_rng_seed(&r, seed);
    for (int i = 0; i < n; i++) {
        b[(size_t)i * REC] = (uint8_t)(i == bad ? bad_label : i % 10);
        for (int k = 0; k < PIX; k++) b[(size_t)i * REC + 1 + k] = (uint8_t)ab_rng_below(&r, 256);
    }
    FILE *f = fopen(path, "wb");
    const size_t len = (size_t)n * REC - cut;
    const int ok = f && fwrite(b, 1, len, f) == len;
    if (f) fclose(f);
    free(b);
    return ok ? 0 : -1;
}

static void expect_error(const char *name, const char *needle) {
    char path[512];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    ab_image_set s;
    const int rc = ab_cifar10_read(path, &s);
    AB_CHECK(rc != 0, "%s was accepted", name);
    if (rc == 0) {
        ab_image_set_free(&s);
        return;
    }
    AB_CHECK(strstr(ab_error(), needle) && strstr(ab_error(), name), "%s: message '%s' does not say '%s' and name it",
             name, ab_error(), needle);
}

static void test_reader(void) {
    AB_CHECK(write_file("good.bin", 3, -1, 0, 0, 1) == 0, "cannot write");
    char path[512];
    snprintf(path, sizeof path, "%s/good.bin", dir);
    ab_image_set s;
    AB_CHECK(ab_cifar10_read(path, &s) == 0, "%s", ab_error());
    AB_CHECK(s.n == 3 && s.channels == 3 && s.rows == 32 && s.cols == 32 && s.planar == 1 && s.dim == PIX &&
                 s.n_classes == 10,
             "good.bin: %d images %dx%dx%d planar %d", s.n, s.channels, s.rows, s.cols, s.planar);
    /* the bytes as written: label, then the R, G, B planes */
    ab_rng r;
    ab_rng_seed(&r, 1);
    int same = 1;
    for (int i = 0; i < 3; i++) {
        same &= s.labels[i] == i % 10;
        for (int k = 0; k < PIX; k++) same &= s.images[(size_t)i * PIX + k] == (uint8_t)ab_rng_below(&r, 256);
    }
    AB_CHECK(same, "good.bin: labels or pixels differ from the file");
    ab_image_set_free(&s);

    AB_CHECK(write_file("truncated.bin", 3, -1, 0, 1, 1) == 0, "cannot write");
    expect_error("truncated.bin", "not a whole number");
    AB_CHECK(write_file("badlabel.bin", 3, 1, 10, 0, 1) == 0, "cannot write");
    expect_error("badlabel.bin", "record 1 has label 10");
    AB_CHECK(write_file("empty.bin", 0, -1, 0, 0, 1) == 0, "cannot write");
    expect_error("empty.bin", "empty");
    expect_error("missing.bin", "cannot open");

    /* a folder: data_batch_1.bin, data_batch_2.bin are read in order; no test_batch.bin */
    AB_CHECK(write_file("data_batch_1.bin", 4, -1, 0, 0, 2) == 0 && write_file("data_batch_2.bin", 2, -1, 0, 0, 3) == 0,
             "cannot write");
    AB_CHECK(ab_cifar10_load(dir, 1, &s) == 0, "%s", ab_error());
    AB_CHECK(s.n == 6 && s.labels[4] == 0 && s.labels[5] == 1, "two batches: %d images, labels 4, 5 = %d %d", s.n,
             s.n ? s.labels[4] : -1, s.n ? s.labels[5] : -1);
    ab_image_set_free(&s);
    AB_CHECK(ab_cifar10_load(dir, 0, &s) != 0 && strstr(ab_error(), "test_batch.bin"),
             "no test_batch.bin: '%s'", ab_error());
    printf("ok   reader: good, truncated, bad label, empty, missing, two batches\n");
}

/* the real subset, when ../shared/data is there: 10,000 training images, 1,000 a class */
static void test_real(void) {
    const char *d = AB_DEFAULT_DATA_ROOT "/cifar10";
    struct stat st;
    if (stat(d, &st) != 0) {
        printf("SKIPPED real data: no %s\n", d);
        return;
    }
    ab_image_set tr, te;
    AB_CHECK(ab_cifar10_load(d, 1, &tr) == 0, "%s", ab_error());
    AB_CHECK(ab_cifar10_load(d, 0, &te) == 0, "%s", ab_error());
    int count[10] = {0};
    for (int i = 0; i < tr.n; i++) count[tr.labels[i]]++;
    int even = 1;
    for (int c = 0; c < 10; c++) even &= count[c] == tr.n / 10;
    AB_CHECK(tr.n >= 10000 && te.n == 10000 && even, "real data: %d train (%d of class 0), %d test", tr.n, count[0],
             te.n);
    printf("ok   real data: %d training and %d test images, %d a class\n", tr.n, te.n, count[0]);
    ab_image_set_free(&tr);
    ab_image_set_free(&te);
}

static const float MEAN[3] = {0.4914f, 0.4822f, 0.4465f}, STD[3] = {0.2470f, 0.2435f, 0.2616f};

/* torchvision: pad by 4 with zeros, crop 32x32 at (dy, dx), then mirror; then ToTensor/Normalize */
static float reference(const uint8_t *img, int y, int x, int c, int dy, int dx, int flip) {
    const int xc = flip ? 31 - x : x; /* the crop's column */
    const int sy = y + dy - 4, sx = xc + dx - 4;
    const int v = (sy < 0 || sy >= 32 || sx < 0 || sx >= 32) ? 0 : img[(c * 32 + sy) * 32 + sx];
    return ((float)v / 255.0f - MEAN[c]) / STD[c];
}

static void test_assembly(void) {
    ab_backend *be = ab_backend_cpu_create(1);
    if (!be) {
        fprintf(stderr, "test_cifar: %s\n", ab_error());
        exit(1);
    }
    ab_image_set s;
    char path[512];
    snprintf(path, sizeof path, "%s/good.bin", dir);
    if (ab_cifar10_read(path, &s) != 0) {
        fprintf(stderr, "FAIL %s\n", ab_error());
        failures++;
        return;
    }
    uint8_t *img = malloc((size_t)s.n * PIX);
    memcpy(img, s.images, (size_t)s.n * PIX);
    const int32_t idx[3] = {2, 0, 1};
    /* the backend op with given crops and flips, against the reference */
    const ab_image_layout L = {.C = 3, .H = 32, .W = 32, .planar = 1, .mean = {MEAN[0], MEAN[1], MEAN[2]},
                               .std = {STD[0], STD[1], STD[2]}};
    const int32_t aug[9] = {0, 8, 1, 4, 4, 0, 7, 1, 1}; /* (dy, dx, flip) per sample */
    const ab_image_aug a = {.pad = 4, .aug = aug};
    const uint8_t labels[3] = {5, 6, 7};
    float *out = malloc((size_t)3 * PIX * sizeof *out);
    int32_t lab[3];
    AB_CHECK(be->ops->gather_images(be, 3, &L, &a, img, labels, idx, AB_F32, out, lab) == 0, "%s", ab_error());
    int bad = 0;
    for (int b = 0; b < 3; b++)
        for (int y = 0; y < 32; y++)
            for (int x = 0; x < 32; x++)
                for (int c = 0; c < 3; c++) {
                    const float want = reference(img + (size_t)idx[b] * PIX, y, x, c, aug[3 * b], aug[3 * b + 1],
                                                 aug[3 * b + 2]);
                    bad += out[(((size_t)b * 32 + y) * 32 + x) * 3 + c] != want;
                }
    AB_CHECK(bad == 0 && lab[0] == 7 && lab[1] == 5 && lab[2] == 6,
             "gather_images: %d values differ from torchvision's crop + flip + normalise; labels %d %d %d", bad, lab[0],
             lab[1], lab[2]);
    /* out-of-range crops are refused */
    const int32_t wrong[3] = {9, 0, 0};
    const ab_image_aug aw = {.pad = 4, .aug = wrong};
    AB_CHECK(be->ops->gather_images(be, 1, &L, &aw, img, labels, idx, AB_F32, out, lab) != 0, "a crop of 9 with pad 4");

    /* through the data set: seeded per sample, the same indices and seed give the same batch on
     * any call; seed 0 is the plain image; another seed another batch; the training set augments */
    ab_image_dataset_opts o = {.name = "test", .mean = {MEAN[0], MEAN[1], MEAN[2]}, .std = {STD[0], STD[1], STD[2]},
                               .crop_pad = 4, .flip = 1};
    ab_dataset *ds;
    AB_CHECK(ab_image_dataset_create(&s, &o, be, &ds) == 0, "%s", ab_error());
    float *b1 = malloc((size_t)3 * PIX * sizeof *b1), *b2 = malloc((size_t)3 * PIX * sizeof *b2);
    AB_CHECK(ds->ops->fill(ds, idx, 3, 77, AB_F32, b1, lab) == 0, "%s", ab_error());
    const int32_t one[1] = {0};
    AB_CHECK(ds->ops->fill(ds, one, 1, 77, AB_F32, b2, lab) == 0, "%s", ab_error());
    AB_CHECK(memcmp(b1 + PIX, b2, PIX * sizeof *b1) == 0, "sample 0 differs between two batches with the same seed");
    AB_CHECK(ds->ops->fill(ds, idx, 3, 0, AB_F32, b2, lab) == 0, "%s", ab_error());
    int plain = 1;
    for (int y = 0; y < 32; y++)
        for (int x = 0; x < 32; x++)
            for (int c = 0; c < 3; c++) plain &= b2[((size_t)y * 32 + x) * 3 + c] == reference(img + 2 * PIX, y, x, c, 4, 4, 0);
    AB_CHECK(plain, "seed 0 is not the plain normalised image");
    AB_CHECK(ds->augments && strstr(ds->ops->describe(ds), "random crop"), "the set says it does not augment: %s",
             ds->ops->describe(ds));
    /* over many seeds every crop offset and both flips occur, the flips about half the time */
    int seen[9] = {0}, flips = 0, trials = 400;
    for (int t = 1; t <= trials; t++) {
        AB_CHECK(ds->ops->fill(ds, one, 1, (uint64_t)t * 7919u, AB_F32, b2, lab) == 0, "%s", ab_error());
        int found = 0;
        for (int dy = 0; dy <= 8 && !found; dy++)
            for (int dx = 0; dx <= 8 && !found; dx++)
                for (int f = 0; f < 2 && !found; f++) {
                    int match = 1;
                    for (int y = 0; y < 32 && match; y++)
                        for (int x = 0; x < 32 && match; x++)
                            match = b2[((size_t)y * 32 + x) * 3] == reference(img, y, x, 0, dy, dx, f);
                    if (match) {
                        found = 1;
                        seen[dy]++;
                        flips += f;
                    }
                }
        AB_CHECK(found, "seed %d: the batch is no crop + flip of the image", t);
    }
    int all = 1;
    for (int k = 0; k < 9; k++) all &= seen[k] > 0;
    AB_CHECK(all && flips > trials / 2 - 60 && flips < trials / 2 + 60, "augmentation draws: offsets %s, %d flips of %d",
             all ? "all seen" : "missing", flips, trials);
    printf("ok   batch assembly: normalise, planar -> channels-last, crop + flip as torchvision, seeded per sample\n");
    ab_dataset_destroy(ds);
    free(img), free(out), free(b1), free(b2);
    be->ops->destroy(be);
}

int main(void) {
    snprintf(dir, sizeof dir, "/tmp/ab_test_cifar.%ld", (long)getpid());
    if (mkdir(dir, 0700) != 0) return 1;
    test_reader();
    test_real();
    test_assembly();
    static const char *const files[] = {"good.bin", "truncated.bin", "badlabel.bin", "empty.bin", "data_batch_1.bin",
                                        "data_batch_2.bin"};
    for (size_t i = 0; i < sizeof files / sizeof files[0]; i++) {
        char p[512];
        snprintf(p, sizeof p, "%s/%s", dir, files[i]);
        unlink(p);
    }
    rmdir(dir);
    if (failures) fprintf(stderr, "test_cifar: %d failure(s)\n", failures);
    return failures ? 1 : 0;
}
