/* Token-sequence data sets over the backend's gather_rows op. */
#include "text_dataset.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    int L, n_classes;
    int32_t *ids, *types, *mask, *labels; /* host: (n, L) each, labels (n) */
    const void *d_ids, *d_types, *d_mask, *d_labels; /* mapped into the backend */
    const ab_glue_task_info *task;
    double real_tokens; /* mean real positions a sample, for the description */
    int truncated;      /* samples cut to max_len */
    char desc[200];
} text_ds;

static size_t text_batch_bytes(const ab_dataset *ds, int B, ab_dtype t) {
    (void)t; /* token ids are int32 whatever the compute type */
    return (size_t)B * 3 * (size_t)ds->info.seq_len * sizeof(int32_t);
}

static int text_fill(ab_dataset *ds, const int32_t *idx, int B, uint64_t aug_seed, ab_dtype t, void *x,
                     int32_t *labels) {
    (void)aug_seed, (void)t;
    text_ds *s = ds->impl;
    for (int b = 0; b < B; b++)
        if (idx[b] < 0 || idx[b] >= ds->n) return ab_errorf("%s: sample %d of %d requested", s->desc, idx[b], ds->n);
    ab_backend *be = ds->be;
    const size_t row = (size_t)s->L * sizeof(int32_t);
    int32_t *xi = x;
    AB_TRY(be->ops->gather_rows(be, B, row, s->d_ids, idx, xi));
    AB_TRY(be->ops->gather_rows(be, B, row, s->d_types, idx, xi + (size_t)B * s->L));
    AB_TRY(be->ops->gather_rows(be, B, row, s->d_mask, idx, xi + 2 * (size_t)B * s->L));
    return be->ops->gather_rows(be, B, sizeof(int32_t), s->d_labels, idx, labels);
}

static const char *text_describe(const ab_dataset *ds) { return ((const text_ds *)ds->impl)->desc; }

static double text_score(const ab_dataset *ds, const int32_t *pred, int n) {
    const text_ds *s = ds->impl;
    return 100.0 * ab_glue_score(s->task, pred, s->labels, n);
}

static void text_destroy(ab_dataset *ds) {
    text_ds *s = ds->impl;
    ab_backend *be = ds->be;
    const size_t rows = (size_t)ds->n * (size_t)s->L * sizeof(int32_t);
    if (s->d_ids) be->ops->unmap_data(be, s->d_ids, rows);
    if (s->d_types) be->ops->unmap_data(be, s->d_types, rows);
    if (s->d_mask) be->ops->unmap_data(be, s->d_mask, rows);
    if (s->d_labels) be->ops->unmap_data(be, s->d_labels, (size_t)ds->n * sizeof(int32_t));
    free(s->ids), free(s->types), free(s->mask), free(s->labels);
    free(s);
    free(ds);
}

static const ab_dataset_ops text_ops = {.batch_bytes = text_batch_bytes,
                                        .fill = text_fill,
                                        .describe = text_describe,
                                        .score = text_score,
                                        .destroy = text_destroy};

int ab_text_dataset_create(const ab_glue_split *split, const ab_wordpiece *wp, int max_len, const char *name,
                           const char *file, ab_backend *be, ab_dataset **out) {
    *out = NULL;
    const int n = split->n, L = max_len;
    if (n < 1) return ab_errorf("%s: no samples", name);
    if (L < 3) return ab_errorf("%s: --max-seq-len %d is shorter than [CLS] x [SEP]", name, L);
    ab_dataset *ds = calloc(1, sizeof *ds);
    text_ds *s = calloc(1, sizeof *s);
    const size_t cells = (size_t)n * (size_t)L;
    if (s) {
        s->ids = malloc(cells * sizeof(int32_t));
        s->types = malloc(cells * sizeof(int32_t));
        s->mask = malloc(cells * sizeof(int32_t));
        s->labels = malloc((size_t)n * sizeof(int32_t));
    }
    if (!ds || !s || !s->ids || !s->types || !s->mask || !s->labels) {
        if (s) free(s->ids), free(s->types), free(s->mask), free(s->labels);
        free(s);
        free(ds);
        return ab_errorf("%s: out of host memory for %d sequences of %d", name, n, L);
    }
    s->L = L;
    s->task = split->task;
    s->n_classes = split->task->n_labels;
    *ds = (ab_dataset){.ops = &text_ops, .be = be, .n = n, .impl = s, .metric = ab_glue_metric_name(split->task->metric),
                       .info = {.kind = AB_SAMPLE_TOKENS, .seq_len = L, .vocab = ab_wp_vocab_size(wp),
                                .n_classes = split->task->n_labels}};
    double real = 0.0;
    for (int i = 0; i < n; i++) {
        char where[512];
        snprintf(where, sizeof where, "%s:%d", file, split->lines ? split->lines[i] : i + 1);
        const char *b = split->b ? split->b[i] : NULL;
        int n_real = 0;
        if (ab_wp_encode(wp, split->a[i], strlen(split->a[i]), b, b ? strlen(b) : 0, L, s->ids + (size_t)i * L,
                         s->types + (size_t)i * L, s->mask + (size_t)i * L, &n_real, where) != 0) {
            text_destroy(ds);
            return -1;
        }
        real += n_real;
        s->labels[i] = split->labels[i];
        /* a full sequence may have been cut: count it if its texts have more tokens than fit */
        if (n_real == L) s->truncated++;
    }
    s->real_tokens = real / n;
    snprintf(s->desc, sizeof s->desc, "%s, %d %s, %d positions (%.1f real tokens a sample on average, %d at the limit)",
             name, n, split->b ? "sentence pairs" : "sentences", L, s->real_tokens, s->truncated);
    const size_t rows = cells * sizeof(int32_t);
    int rc = be->ops->map_data(be, s->ids, rows, &s->d_ids);
    if (rc == 0) rc = be->ops->map_data(be, s->types, rows, &s->d_types);
    if (rc == 0) rc = be->ops->map_data(be, s->mask, rows, &s->d_mask);
    if (rc == 0) rc = be->ops->map_data(be, s->labels, (size_t)n * sizeof(int32_t), &s->d_labels);
    if (rc != 0) {
        text_destroy(ds);
        return -1;
    }
    *out = ds;
    return 0;
}
