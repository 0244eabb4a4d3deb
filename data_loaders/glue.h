/* GLUE task files (SST-2, CoLA, RTE, MRPC, QNLI, QQP, MNLI): tab-separated text without quoting,
 * one example a line; a split is n rows of sentence a, sentence b (pair tasks), a class label.
 * Metrics as Hugging Face's glue_compute_metrics reports them. */
#ifndef AB_GLUE_H
#define AB_GLUE_H

#include <stddef.h>
#include <stdint.h>

typedef enum { AB_GLUE_ACCURACY = 0, AB_GLUE_MATTHEWS = 1, AB_GLUE_F1 = 2, AB_GLUE_METRIC_COUNT } ab_glue_metric;

#define AB_GLUE_MAX_LABELS 3
/* A longer line is refused: the longest in the GLUE files is a few kB (MNLI's parse trees). */
#define AB_GLUE_MAX_LINE ((size_t)1 << 20)

/* One task's file layout, as transformers' GLUE processors read it (data/processors/glue.py). */
typedef struct {
    const char *name;       /* "sst2": what --task takes (the folder name is taken too) */
    const char *folder;     /* "SST-2": the task's folder in the GLUE download */
    const char *train_file; /* "train.tsv" */
    const char *dev_file;   /* "dev.tsv"; MNLI: "dev_matched.tsv" */
    int header;             /* 1: the first line names the columns and is skipped */
    int col_a, col_b;       /* column of sentence a, of sentence b (-1: a single-sentence task) */
    int col_label;          /* column of the label; -1: the last column of the row */
    int min_cols;           /* a row must have at least this many columns */
    int skip_short;         /* 1: a row with too few columns is left out, not refused (QQP) */
    int n_labels;
    const char *labels[AB_GLUE_MAX_LABELS]; /* the label strings in class order */
    ab_glue_metric metric;                  /* the task's metric; accuracy is reported beside f1 */
    const char *columns;                    /* what the columns are, for error messages */
} ab_glue_task_info;

typedef struct {
    int n;           /* rows */
    char **a;        /* (n) sentence a, NUL-terminated, bytes as in the file */
    char **b;        /* (n) sentence b; NULL for a single-sentence task */
    int32_t *labels; /* (n) class index into task->labels */
    int *lines;      /* (n) 1-based line of the row in its file */
    int n_skipped;   /* rows left out for too few columns (skip_short tasks only) */
    const ab_glue_task_info *task;
    char *text; /* the one buffer a[] and b[] point into */
} ab_glue_split;

/* The tasks in table order; *n receives their number. */
const ab_glue_task_info *ab_glue_tasks(int *n);
/* By name ("sst2", "mnli") or folder ("SST-2", "MNLI"), ignoring case. */
int ab_glue_task(const char *name, const ab_glue_task_info **out);
const char *ab_glue_metric_name(ab_glue_metric m);

/* Parses a task's file from memory (name labels the errors). first_n > 0 keeps the first first_n
 * data rows and reads no further; 0 keeps all. Lines end in \n, \r\n or \r (as Python's text mode
 * reads them); a UTF-8 byte-order mark at the start is dropped; blank lines are skipped; fields
 * keep their bytes (a '"' is an ordinary character, UTF-8 is the tokenizer's to check). Errors
 * name file:line. */
int ab_glue_parse(const void *bytes, size_t size, const char *name, const ab_glue_task_info *task, int first_n,
                  ab_glue_split *out);
/* The same from a file, read line by line. */
int ab_glue_read(const char *path, const ab_glue_task_info *task, int first_n, ab_glue_split *out);
/* dir is the task's folder (the one holding train.tsv); dev = 1 reads the dev file. */
int ab_glue_load(const char *dir, const char *task, int dev, int first_n, ab_glue_split *out);
void ab_glue_split_free(ab_glue_split *s);

/* Metrics over n predictions. Binary metrics take classes 0 and 1, 1 the positive class; NaN when
 * n < 1 or a value is not 0 or 1. */
double ab_glue_accuracy(const int32_t *pred, const int32_t *gold, int n);
/* (TP TN - FP FN) / sqrt((TP+FP)(TP+FN)(TN+FP)(TN+FN)); 0 when the root is 0, as sklearn's
 * matthews_corrcoef. */
double ab_glue_matthews(const int32_t *pred, const int32_t *gold, int n);
/* 2 TP / (2 TP + FP + FN); 0 when there is no positive at all, as sklearn's f1_score (its default
 * zero_division="warn" gives 0). */
double ab_glue_f1(const int32_t *pred, const int32_t *gold, int n);
/* The task's metric (task->metric). */
double ab_glue_score(const ab_glue_task_info *task, const int32_t *pred, const int32_t *gold, int n);

#endif
