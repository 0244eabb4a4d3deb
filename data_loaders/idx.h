/* IDX files (MNIST, Fashion-MNIST): gzip-compressed or raw, unsigned-byte payloads.
 * Images: magic 0x00000803, dims (N, rows, cols). Labels: magic 0x00000801, dims (N). */
#ifndef AB_IDX_H
#define AB_IDX_H

#include <stddef.h>
#include <stdint.h>

typedef struct {
    int ndim;
    int dims[4];
    size_t size; /* bytes of payload = product of dims */
    uint8_t *data;
} ab_idx;

/* Reads a whole IDX file of unsigned bytes; checks the magic number, the dimensions and that
 * the payload is exactly as long as the dimensions say. Errors name the file. */
int ab_idx_read(const char *path, ab_idx *out);
void ab_idx_free(ab_idx *f);

/* An image classification set held as bytes: images (n, dim), labels (n). */
typedef struct {
    int n, dim, rows, cols, n_classes;
    int channels; /* 1 for MNIST, 3 for CIFAR-10; dim = channels * rows * cols */
    int planar;   /* 1: each image is channel planes (C, rows, cols); 0: interleaved (rows, cols, C) */
    uint8_t *images;
    uint8_t *labels;
} ab_image_set;

/* Loads train (split = "train") or test (split = "t10k") of an MNIST-layout folder:
 * <split>-images-idx3-ubyte[.gz] and <split>-labels-idx1-ubyte[.gz]. */
int ab_mnist_load(const char *dir, const char *split, ab_image_set *out);
void ab_image_set_free(ab_image_set *s);

#endif
