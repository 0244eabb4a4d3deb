/* The data-set interface: a data set knows its samples, the trainer knows their order. A data
 * set answers how many samples it holds and what one is (an image of C x H x W, a token
 * sequence), and fills one batch in backend memory for a list of sample indices: gather,
 * normalise, augment. The core drives it without knowing any file format; the readers in
 * data_loaders/ implement it. */
#ifndef AB_DATASET_H
#define AB_DATASET_H

#include <stddef.h>
#include <stdint.h>

#include "backend.h"

typedef enum { AB_SAMPLE_IMAGE = 0, AB_SAMPLE_TOKENS = 1 } ab_sample_kind;

/* What the model receives for one sample. */
typedef struct {
    ab_sample_kind kind;
    int C, H, W;   /* images: a batch is (B, H, W, C) channels-last in the compute type */
    int seq_len;   /* token sequences: a batch is int32 ids (B, L), token types (B, L), then the
                    * attention mask (B, L) (1 = a real token), one after the other */
    int vocab;     /* token sequences: ids are in [0, vocab) */
    int n_classes; /* labels are int32 in [0, n_classes) */
    int targets;   /* labels per sample: a batch's labels are int32 (B, targets), row-major (a sequence's
                    * tokens, each with its own class); 0 = 1, one label a sample. Every target
                    * counts: the loss is the mean over samples x targets, and a label must be in
                    * [0, n_classes) (no ignored positions: padded sequences need their own loss) */
} ab_sample_info;

/* the labels (target rows) per sample of s: targets, or 1 */
static inline int ab_sample_targets(const ab_sample_info *s) { return s->targets > 1 ? s->targets : 1; }

typedef struct ab_dataset ab_dataset;

typedef struct {
    /* bytes of backend memory one batch of B samples takes when its values are of type t */
    size_t (*batch_bytes)(const ab_dataset *ds, int B, ab_dtype t);
    /* Fills x (batch_bytes(B, t)) and labels (B x info.targets int32) in backend memory with the samples
     * idx[0 .. B) (host memory). aug_seed != 0 applies the set's training augmentation, drawn
     * per sample from (aug_seed, sample index), so that a batch is a pure function of its
     * indices and the seed whatever rank or micro-batch assembles it. */
    int (*fill)(ab_dataset *ds, const int32_t *idx, int B, uint64_t aug_seed, ab_dtype t, void *x, int32_t *labels);
    /* a one-line description for the record: "CIFAR-10 binary, 10000 samples, augment crop 4 + flip" */
    const char *(*describe)(const ab_dataset *ds);
    /* Optional (NULL: accuracy): the task's metric, in percent, of the predicted classes
     * pred[0 .. n) (Matthews correlation and F1 times 100): one per target, sample i's target r
     * at i * targets + r, so n = samples x targets */
    double (*score)(const ab_dataset *ds, const int32_t *pred, int n);
    void (*destroy)(ab_dataset *ds);
} ab_dataset_ops;

struct ab_dataset {
    const ab_dataset_ops *ops;
    ab_backend *be; /* whose memory fill writes and the samples are mapped into */
    int n;          /* samples */
    ab_sample_info info;
    int augments;   /* 1 when fill does something with aug_seed */
    const char *metric; /* "accuracy" | "matthews" | "f1": what score computes */
    void *impl;
};

static inline void ab_dataset_destroy(ab_dataset *ds) {
    if (ds) ds->ops->destroy(ds);
}

#endif
