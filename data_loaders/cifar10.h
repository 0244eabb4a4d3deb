/* CIFAR-10 binary files (data_batch_1.bin ... data_batch_5.bin, test_batch.bin): records of one
 * label byte (0-9) then 3,072 pixel bytes, the 32x32 planes R, G, B one after another. */
#ifndef AB_CIFAR10_H
#define AB_CIFAR10_H

#include "idx.h"

#define AB_CIFAR10_RECORD 3073

/* Reads one file into set (planar 3 x 32 x 32 images). The record count comes from the file's
 * size, which must be a whole number of records; a label outside 0-9 is an error naming the
 * record. Errors name the file. */
int ab_cifar10_read(const char *path, ab_image_set *set);
/* The same checks over bytes in memory (name labels the errors). */
int ab_cifar10_parse(const void *bytes, size_t size, const char *name, ab_image_set *set);
/* train = 1: data_batch_1.bin, data_batch_2.bin, ... as many as exist from 1 on (at least one);
 * train = 0: test_batch.bin. */
int ab_cifar10_load(const char *dir, int train, ab_image_set *set);

#endif
