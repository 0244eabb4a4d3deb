/* An image classification set as the trainer sees it (core/dataset.h): the bytes of an
 * ab_image_set (MNIST, Fashion-MNIST, CIFAR-10 readers) mapped once into backend memory, and
 * batches assembled there by the backend's gather_images op: normalised per channel,
 * channels-last, with the training augmentation (zero-padded random crop, horizontal flip)
 * drawn per sample from the seed the trainer passes. */
#ifndef AB_IMAGE_DATASET_H
#define AB_IMAGE_DATASET_H

#include "dataset.h"
#include "idx.h"

typedef struct {
    const char *name;    /* "CIFAR-10 train" */
    float mean[AB_MAX_CHANNELS], std[AB_MAX_CHANNELS]; /* per channel, on pixel / 255 */
    int crop_pad;        /* random crop of the image zero-padded by this much (0: none) */
    int flip;            /* random horizontal flip */
    int subset;          /* keep the first N samples (0: all) */
} ab_image_dataset_opts;

/* Takes over set (freed with the data set, or on failure). */
int ab_image_dataset_create(ab_image_set *set, const ab_image_dataset_opts *o, ab_backend *be, ab_dataset **out);

#endif
