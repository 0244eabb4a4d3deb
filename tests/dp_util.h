/* Helpers of the data-parallel tests: a seeded random data set in MNIST's IDX layout (small
 * images, random pixels and labels, never zeros) and the drive of a trainer over the same
 * global sample order that ab_train_run uses. */
#ifndef AB_DP_UTIL_H
#define AB_DP_UTIL_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "params.h"
#include "rng.h"
#include "workloads.h"
#include "platform.h"
#include "train.h"

static inline int dp_write_idx(const char *path, const uint8_t *data, int ndim, const int *dims) {
    FILE *f = fopen(path, "wb");
    if (!f) return -1;
    const uint8_t magic[4] = {0, 0, 0x08, (uint8_t)ndim};
    size_t n = 1;
    fwrite(magic, 1, 4, f);
    for (int d = 0; d < ndim; d++) {
        const uint8_t be[4] = {(uint8_t)(dims[d] >> 24), (uint8_t)(dims[d] >> 16), (uint8_t)(dims[d] >> 8),
                               (uint8_t)dims[d]};
        fwrite(be, 1, 4, f);
        n *= (size_t)dims[d];
    }
    const int ok = fwrite(data, 1, n, f) == n;
    return (fclose(f) == 0 && ok) ? 0 : -1;
}

/* dir gets {train,t10k}-{images-idx3,labels-idx1}-ubyte with rows x cols random images */
static inline int dp_write_dataset(const char *dir, int n_train, int n_test, int rows, int cols, uint64_t seed) {
    ab_rng r;
    ab_rng_seed(&r, seed);
    const char *split[2] = {"train", "t10k"};
    const int counts[2] = {n_train, n_test};
    for (int s = 0; s < 2; s++) {
        const size_t np = (size_t)counts[s] * rows * cols;
        uint8_t *img = malloc(np), *lab = malloc((size_t)counts[s]);
        if (!img || !lab) return -1;
        for (size_t i = 0; i < np; i++) img[i] = (uint8_t)ab_rng_below(&r, 256);
        for (int i = 0; i < counts[s]; i++) lab[i] = (uint8_t)ab_rng_below(&r, 10);
        char path[512];
        const int idims[3] = {counts[s], rows, cols}, ldims[1] = {counts[s]};
        snprintf(path, sizeof path, "%s/%s-images-idx3-ubyte", dir, split[s]);
        int rc = dp_write_idx(path, img, 3, idims);
        snprintf(path, sizeof path, "%s/%s-labels-idx1-ubyte", dir, split[s]);
        if (rc == 0) rc = dp_write_idx(path, lab, 1, ldims);
        free(img);
        free(lab);
        if (rc) return -1;
    }
    return 0;
}

/* The tests' training set-up: quiet, one BLAS thread, SGD with momentum, a moderate loss scale
 * (so that amp runs rarely overflow), on the data set in dir. */
static inline ab_train_config dp_config(const char *dir, ab_precision prec, int batch, int hidden, const char *comm) {
    ab_train_config c;
    ab_train_config_defaults(&c);
    c.workload = &ab_workloads;
    c.platform = &ab_platform;
    c.precision = prec;
    c.quiet = 1;
    c.data_dir = dir;
    c.batch_size = batch;
    c.hidden = hidden;
    c.lr = 0.05f;
    c.momentum = 0.5f;
    c.threads = 1;
    c.comm = comm;
    c.init_scale = 1024.0f;
    return c;
}

/* removes what dp_write_dataset wrote, and the folder */
static inline void dp_remove_dataset(const char *dir) {
    static const char *const files[] = {"train-images-idx3-ubyte", "train-labels-idx1-ubyte",
                                        "t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte"};
    char path[512];
    for (int i = 0; i < 4; i++) {
        snprintf(path, sizeof path, "%s/%s", dir, files[i]);
        unlink(path);
    }
    rmdir(dir);
}

/* Trains `steps` optimizer steps over one seeded permutation of the training set, each step
 * taking the next `group` samples of it (the whole world's share); *w0 and *w get the fp32
 * weights before and after (malloc'd, params.n floats); *skipped counts skipped steps. */
static inline int dp_train(const ab_train_config *c, int group, int steps, float **w0, float **w, long *skipped,
                    ab_run_record *rec, ab_trainer **keep) {
    ab_trainer *t;
    if (ab_trainer_create(c, rec, &t) != 0) return -1;
    const size_t n = ab_trainer_params(t)->n;
    const int N = ab_trainer_train_samples(t);
    int32_t *perm = malloc((size_t)N * sizeof *perm);
    *w0 = malloc(n * sizeof(float));
    *w = malloc(n * sizeof(float));
    int rc = (!perm || !*w0 || !*w) ? ab_errorf("out of memory") : 0;
    if (rc == 0) {
        ab_rng r;
        ab_rng_seed(&r, 12345);
        ab_rng_permutation(&r, perm, (size_t)N);
        rc = ab_trainer_weights(t, *w0);
    }
    *skipped = 0;
    for (int s = 0, pos = 0; rc == 0 && s < steps && pos < N; s++, pos += group) {
        ab_step_result r;
        rc = ab_trainer_step(t, perm + pos, N - pos < group ? N - pos : group, s, 1, &r);
        *skipped += !r.applied;
    }
    if (rc == 0) rc = ab_trainer_weights(t, *w);
    free(perm);
    if (keep && rc == 0) *keep = t;
    else ab_trainer_destroy(t);
    return rc;
}

/* FNV-1a over the bytes of the weights: replicas must agree bit for bit */
static inline int64_t dp_hash(const float *w, size_t n) {
    uint64_t h = 0xcbf29ce484222325ull;
    const uint8_t *b = (const uint8_t *)w;
    for (size_t i = 0; i < n * sizeof(float); i++) h = (h ^ b[i]) * 0x100000001b3ull;
    return (int64_t)(h >> 1);
}

#endif
