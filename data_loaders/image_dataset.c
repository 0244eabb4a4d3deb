/* Image data sets over the backend's gather_images op. */
#include "image_dataset.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    ab_image_set set;
    ab_image_layout layout;
    int crop_pad, flip;
    const uint8_t *images, *labels; /* mapped into the backend */
    int32_t *aug;                   /* (cap, 3) host */
    int cap;
    char desc[160];
} image_ds;

static size_t image_batch_bytes(const ab_dataset *ds, int B, ab_dtype t) {
    return (size_t)B * (size_t)ds->info.C * (size_t)ds->info.H * (size_t)ds->info.W * ab_dtype_size(t);
}

/* splitmix64 of the seed and the sample: a sample's augmentation, whoever assembles it */
static uint64_t mix(uint64_t x) {
    x += 0x9E3779B97F4A7C15ull;
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
    return x ^ (x >> 31);
}

static int image_fill(ab_dataset *ds, const int32_t *idx, int B, uint64_t aug_seed, ab_dtype t, void *x,
                      int32_t *labels) {
    image_ds *s = ds->impl;
    for (int b = 0; b < B; b++)
        if (idx[b] < 0 || idx[b] >= ds->n) return ab_errorf("%s: sample %d of %d requested", s->desc, idx[b], ds->n);
    ab_image_aug aug = {.pad = s->crop_pad, .aug = NULL};
    if (aug_seed && (s->crop_pad > 0 || s->flip)) {
        if (B > s->cap) {
            int32_t *a = realloc(s->aug, (size_t)B * 3 * sizeof *a);
            if (!a) return ab_errorf("out of host memory for augmentation parameters");
            s->aug = a;
            s->cap = B;
        }
        const uint32_t span = (uint32_t)(2 * s->crop_pad + 1);
        for (int b = 0; b < B; b++) {
            const uint64_t r = mix(aug_seed ^ mix((uint64_t)idx[b]));
            s->aug[3 * b + 0] = (int32_t)((uint32_t)r % span);
            s->aug[3 * b + 1] = (int32_t)((uint32_t)(r >> 20) % span);
            s->aug[3 * b + 2] = s->flip ? (int32_t)((r >> 63) & 1) : 0;
        }
        aug.aug = s->aug;
    }
    ab_backend *be = ds->be;
    return be->ops->gather_images(be, B, &s->layout, &aug, s->images, s->labels, idx, t, x, labels);
}

static const char *image_describe(const ab_dataset *ds) { return ((const image_ds *)ds->impl)->desc; }

static void image_destroy(ab_dataset *ds) {
    image_ds *s = ds->impl;
    ab_backend *be = ds->be;
    if (s->images) be->ops->unmap_data(be, s->images, (size_t)ds->n * (size_t)s->set.dim);
    if (s->labels) be->ops->unmap_data(be, s->labels, (size_t)ds->n);
    ab_image_set_free(&s->set);
    free(s->aug);
    free(s);
    free(ds);
}

static const ab_dataset_ops image_ops = {.batch_bytes = image_batch_bytes,
                                         .fill = image_fill,
                                         .describe = image_describe,
                                         .destroy = image_destroy};

int ab_image_dataset_create(ab_image_set *set, const ab_image_dataset_opts *o, ab_backend *be, ab_dataset **out) {
    *out = NULL;
    const int C = set->channels > 0 ? set->channels : 1;
    if (C > AB_MAX_CHANNELS || set->n < 1 || set->dim != C * set->rows * set->cols) {
        ab_image_set_free(set);
        return ab_errorf("%s: unsupported image set (%d samples of %d x %d x %d)", o->name, set->n, C, set->rows,
                         set->cols);
    }
    for (int i = 0; i < set->n; i++)
        if (set->labels[i] >= set->n_classes) {
            const int l = set->labels[i];
            ab_image_set_free(set);
            return ab_errorf("%s: sample %d has label %d, outside [0, %d)", o->name, i, l, set->n_classes);
        }
    ab_dataset *ds = calloc(1, sizeof *ds);
    image_ds *s = calloc(1, sizeof *s);
    if (!ds || !s) {
        free(ds);
        free(s);
        ab_image_set_free(set);
        return ab_errorf("out of host memory");
    }
    s->set = *set;
    memset(set, 0, sizeof *set);
    s->layout = (ab_image_layout){.C = C, .H = s->set.rows, .W = s->set.cols, .planar = s->set.planar};
    for (int c = 0; c < C; c++) {
        s->layout.mean[c] = o->mean[c];
        s->layout.std[c] = o->std[c];
    }
    s->crop_pad = o->crop_pad;
    s->flip = o->flip;
    const int n = o->subset > 0 && o->subset < s->set.n ? o->subset : s->set.n;
    *ds = (ab_dataset){.ops = &image_ops, .be = be, .n = n, .augments = o->crop_pad > 0 || o->flip, .impl = s,
                       .metric = "accuracy",
                       .info = {.kind = AB_SAMPLE_IMAGE, .C = C, .H = s->set.rows, .W = s->set.cols,
                                .n_classes = s->set.n_classes}};
    char aug[64] = "";
    if (ds->augments)
        snprintf(aug, sizeof aug, ", augmented:%s%s", o->crop_pad ? " random crop" : "", o->flip ? " + flip" : "");
    snprintf(s->desc, sizeof s->desc, "%s, %d of %d images %dx%dx%d%s", o->name, n, s->set.n, s->set.rows, s->set.cols,
             C, aug);
    int rc = be->ops->map_data(be, s->set.images, (size_t)n * (size_t)s->set.dim, (const void **)&s->images);
    if (rc == 0) rc = be->ops->map_data(be, s->set.labels, (size_t)n, (const void **)&s->labels);
    if (rc != 0) {
        image_destroy(ds);
        return -1;
    }
    *out = ds;
    return 0;
}
