/* GLUE TSV reader and metrics: the task table, one line parser shared by the file and memory
 * paths, and the confusion-matrix metrics (binary classes 0, 1). */
#include "glue.h"

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>

#include "ab.h"

/* Columns and labels as transformers' processors read them (src/transformers/data/processors/
 * glue.py): RTE, QNLI and MNLI take the label from line[-1]; MNLI's dev_matched.tsv has 16
 * columns (five annotator labels before gold_label) where train.tsv has 12. QqpProcessor skips a
 * row it cannot index (IndexError) rather than failing, so QQP alone skips short rows. */
/* clang-format off */
#define LAYOUT(hdr, a, b, label, cols) .header = hdr, .col_a = a, .col_b = b, .col_label = label, .min_cols = cols
static const ab_glue_task_info tasks[] = {
    {"sst2", "SST-2", "train.tsv", "dev.tsv", LAYOUT(1, 0, -1, 1, 2), .n_labels = 2, .labels = {"0", "1"},
     .metric = AB_GLUE_ACCURACY, .columns = "sentence, label"},
    {"cola", "CoLA", "train.tsv", "dev.tsv", LAYOUT(0, 3, -1, 1, 4), .n_labels = 2, .labels = {"0", "1"},
     .metric = AB_GLUE_MATTHEWS, .columns = "source, label, original judgement, sentence"},
    {"rte", "RTE", "train.tsv", "dev.tsv", LAYOUT(1, 1, 2, -1, 4), .n_labels = 2,
     .labels = {"entailment", "not_entailment"}, .metric = AB_GLUE_ACCURACY,
     .columns = "index, sentence1, sentence2, label"},
    {"mrpc", "MRPC", "train.tsv", "dev.tsv", LAYOUT(1, 3, 4, 0, 5), .n_labels = 2, .labels = {"0", "1"},
     .metric = AB_GLUE_F1, .columns = "Quality, #1 ID, #2 ID, #1 String, #2 String"},
    {"qnli", "QNLI", "train.tsv", "dev.tsv", LAYOUT(1, 1, 2, -1, 4), .n_labels = 2,
     .labels = {"entailment", "not_entailment"}, .metric = AB_GLUE_ACCURACY,
     .columns = "index, question, sentence, label"},
    {"qqp", "QQP", "train.tsv", "dev.tsv", LAYOUT(1, 3, 4, 5, 6), .skip_short = 1, .n_labels = 2,
     .labels = {"0", "1"}, .metric = AB_GLUE_F1, .columns = "id, qid1, qid2, question1, question2, is_duplicate"},
    {"mnli", "MNLI", "train.tsv", "dev_matched.tsv", LAYOUT(1, 8, 9, -1, 12), .n_labels = 3,
     .labels = {"contradiction", "entailment", "neutral"}, .metric = AB_GLUE_ACCURACY,
     .columns = "index, promptID, pairID, genre, 4 parses, sentence1, sentence2, label1, [label2-5,] gold_label"},
};
#undef LAYOUT
/* clang-format on */
enum { N_TASKS = sizeof tasks / sizeof tasks[0] };

static const char *const metric_names[] = {"accuracy", "matthews", "f1"};
_Static_assert(sizeof metric_names / sizeof metric_names[0] == AB_GLUE_METRIC_COUNT, "metric name table");

const ab_glue_task_info *ab_glue_tasks(int *n) {
    *n = N_TASKS;
    return tasks;
}

const char *ab_glue_metric_name(ab_glue_metric m) { return (unsigned)m < AB_GLUE_METRIC_COUNT ? metric_names[m] : "?"; }

int ab_glue_task(const char *name, const ab_glue_task_info **out) {
    *out = NULL;
    for (int i = 0; i < N_TASKS; i++)
        if (strcasecmp(name, tasks[i].name) == 0 || strcasecmp(name, tasks[i].folder) == 0) {
            *out = &tasks[i];
            return 0;
        }
    return ab_errorf("unknown GLUE task '%s' (expected sst2, cola, rte, mrpc, qnli, qqp or mnli)", name);
}

typedef struct {
    const ab_glue_task_info *t;
    const char *name;
    int first_n;
    int line; /* the current line, 1-based */
    int saw_header;
    int saw_text; /* a line that is not blank */
    ab_glue_split *out;
    size_t cap;            /* rows the arrays hold */
    size_t *off_a, *off_b; /* (cap) offsets into text until the text stops moving */
    size_t len, text_cap;
} parser;

/* appends s[0, n) and a NUL to the text; its offset goes to *at */
static int put_text(parser *p, const char *s, size_t n, size_t *at) {
    if (p->text_cap - p->len < n + 1) {
        size_t cap = p->text_cap ? p->text_cap : 4096;
        while (cap - p->len < n + 1) cap *= 2;
        char *t = realloc(p->out->text, cap);
        if (!t) return ab_errorf("%s: out of host memory for %zu bytes of text", p->name, cap);
        p->out->text = t;
        p->text_cap = cap;
    }
    memcpy(p->out->text + p->len, s, n);
    p->out->text[p->len + n] = 0;
    *at = p->len;
    p->len += n + 1;
    return 0;
}

static int grow_rows(parser *p) {
    const size_t cap = p->cap ? 2 * p->cap : 1024;
    ab_glue_split *o = p->out;
    size_t *a = realloc(p->off_a, cap * sizeof *a);
    if (a) p->off_a = a;
    size_t *b = a && p->t->col_b >= 0 ? realloc(p->off_b, cap * sizeof *b) : NULL;
    if (b) p->off_b = b;
    int32_t *l = a && (b || p->t->col_b < 0) ? realloc(o->labels, cap * sizeof *l) : NULL;
    if (l) o->labels = l;
    int *ln = l ? realloc(o->lines, cap * sizeof *ln) : NULL;
    if (ln) o->lines = ln;
    if (!ln) return ab_errorf("%s: out of host memory for %zu rows", p->name, cap);
    p->cap = cap;
    return 0;
}

/* "0, 1" or "entailment, not_entailment" */
static const char *label_list(const ab_glue_task_info *t, char *buf, size_t size) {
    size_t at = 0;
    buf[0] = 0;
    for (int i = 0; i < t->n_labels && at < size; i++)
        at += (size_t)snprintf(buf + at, size - at, "%s%s", i ? ", " : "", t->labels[i]);
    return buf;
}

/* One line without its terminator. Returns 0 to go on, 1 when first_n rows are in, -1 on error. */
static int take_line(parser *p, const char *s, size_t n) {
    const ab_glue_task_info *t = p->t;
    if (p->line == INT_MAX) return ab_errorf("%s: more than %d lines", p->name, INT_MAX);
    p->line++;
    /* Hugging Face opens the files as utf-8-sig: a byte-order mark is not part of the text */
    if (p->line == 1 && n >= 3 && memcmp(s, "\xEF\xBB\xBF", 3) == 0) s += 3, n -= 3;
    if (n > AB_GLUE_MAX_LINE)
        return ab_errorf("%s:%d: a line of %zu bytes, longer than the %zu this reader takes (not a GLUE file?)",
                         p->name, p->line, n, AB_GLUE_MAX_LINE);
    /* a NUL would cut the sentence short when it is read back as a C string */
    if (memchr(s, 0, n)) return ab_errorf("%s:%d: a NUL byte (not a text file?)", p->name, p->line);
    if (n == 0) return 0;
    p->saw_text = 1;
    if (t->header && !p->saw_header) {
        p->saw_header = 1;
        return 0;
    }
    /* the columns the task reads: a, b, the label (the last when col_label is -1) */
    const char *start[3] = {NULL, NULL, NULL};
    size_t len[3] = {0, 0, 0};
    const int want[3] = {t->col_a, t->col_b, t->col_label};
    int cols = 0;
    const char *last = s;
    size_t last_len = 0;
    for (const char *f = s, *end = s + n;; cols++) {
        const char *tab = memchr(f, '\t', (size_t)(end - f));
        const size_t fl = tab ? (size_t)(tab - f) : (size_t)(end - f);
        for (int k = 0; k < 3; k++)
            if (want[k] == cols) start[k] = f, len[k] = fl;
        last = f, last_len = fl;
        if (!tab) {
            cols++;
            break;
        }
        f = tab + 1;
    }
    if (t->col_label < 0) start[2] = last, len[2] = last_len;
    if (cols < t->min_cols) {
        if (t->skip_short) {
            p->out->n_skipped++;
            return 0;
        }
        if (t->col_label >= cols)
            return ab_errorf("%s:%d: %d column%s where %s rows have at least %d (%s): the label, column %d, is missing",
                             p->name, p->line, cols, cols == 1 ? "" : "s", t->folder, t->min_cols, t->columns,
                             t->col_label + 1);
        return ab_errorf("%s:%d: %d column%s where %s rows have at least %d (%s)", p->name, p->line, cols,
                         cols == 1 ? "" : "s", t->folder, t->min_cols, t->columns);
    }
    int label = -1;
    for (int k = 0; k < t->n_labels; k++)
        if (strlen(t->labels[k]) == len[2] && memcmp(t->labels[k], start[2], len[2]) == 0) label = k;
    if (label < 0) {
        char list[128];
        return ab_errorf("%s:%d: label '%.*s%s' is not one of %s's labels (%s)", p->name, p->line,
                         (int)(len[2] > 40 ? 40 : len[2]), start[2], len[2] > 40 ? "..." : "", t->folder,
                         label_list(t, list, sizeof list));
    }
    if ((size_t)p->out->n == p->cap) AB_TRY(grow_rows(p));
    const int i = p->out->n;
    AB_TRY(put_text(p, start[0], len[0], &p->off_a[i]));
    if (t->col_b >= 0) AB_TRY(put_text(p, start[1], len[1], &p->off_b[i]));
    p->out->labels[i] = label;
    p->out->lines[i] = p->line;
    p->out->n++;
    return p->first_n > 0 && p->out->n == p->first_n;
}

/* Splits buf at \n, \r\n and \r (Python's universal newlines). A chunk from getline ends at its
 * only \n, so a \r\n is never cut in two. */
static int take_lines(parser *p, const char *buf, size_t size) {
    const char *s = buf, *end = buf + size;
    while (s < end) {
        const char *e = s;
        while (e < end && *e != '\n' && *e != '\r') e++;
        const int rc = take_line(p, s, (size_t)(e - s));
        if (rc != 0) return rc;
        if (e < end) e += *e == '\r' && e + 1 < end && e[1] == '\n' ? 2 : 1;
        s = e;
    }
    return 0;
}

static int parser_init(parser *p, const char *name, const ab_glue_task_info *task, int first_n, ab_glue_split *out) {
    memset(out, 0, sizeof *out);
    memset(p, 0, sizeof *p);
    p->t = task, p->name = name, p->first_n = first_n, p->out = out;
    if (first_n < 0) return ab_errorf("%s: %d rows asked for (0 = all, N > 0 = the first N)", name, first_n);
    out->task = task;
    return 0;
}

/* The pointers into the text, now that it stops moving; on failure frees everything. */
static int parser_finish(parser *p, int rc) {
    ab_glue_split *o = p->out;
    if (rc == 0 && o->n == 0) {
        if (!p->saw_text)
            rc = ab_errorf("%s: empty file (no GLUE %s rows)", p->name, p->t->folder);
        else if (o->n_skipped)
            rc = ab_errorf("%s: no data rows (%d row%s with fewer than %d columns left out)", p->name, o->n_skipped,
                           o->n_skipped == 1 ? "" : "s", p->t->min_cols);
        else
            rc = ab_errorf("%s: no data rows%s", p->name, p->t->header ? " (only the header line)" : "");
    }
    if (rc == 0) {
        o->a = malloc((size_t)o->n * sizeof *o->a);
        o->b = p->t->col_b >= 0 ? malloc((size_t)o->n * sizeof *o->b) : NULL;
        if (!o->a || (p->t->col_b >= 0 && !o->b)) rc = ab_errorf("%s: out of host memory for %d rows", p->name, o->n);
    }
    if (rc == 0)
        for (int i = 0; i < o->n; i++) {
            o->a[i] = o->text + p->off_a[i];
            if (o->b) o->b[i] = o->text + p->off_b[i];
        }
    free(p->off_a);
    free(p->off_b);
    if (rc != 0) {
        ab_glue_split_free(o);
        return -1;
    }
    return 0;
}

int ab_glue_parse(const void *bytes, size_t size, const char *name, const ab_glue_task_info *task, int first_n,
                  ab_glue_split *out) {
    parser p;
    if (parser_init(&p, name, task, first_n, out) != 0) return -1;
    const int rc = take_lines(&p, bytes, size);
    return parser_finish(&p, rc < 0 ? -1 : 0);
}

int ab_glue_read(const char *path, const ab_glue_task_info *task, int first_n, ab_glue_split *out) {
    parser p;
    if (parser_init(&p, path, task, first_n, out) != 0) return -1;
    FILE *f = fopen(path, "rb");
    if (!f) return ab_errorf("%s: cannot open (%s)", path, strerror(errno));
    struct stat st;
    if (fstat(fileno(f), &st) == 0 && S_ISDIR(st.st_mode)) {
        fclose(f);
        return ab_errorf("%s: a folder, not a GLUE file", path);
    }
    char *buf = NULL;
    size_t cap = 0;
    ssize_t got;
    int rc = 0;
    while (rc == 0 && (got = getline(&buf, &cap, f)) > 0) rc = take_lines(&p, buf, (size_t)got);
    if (rc == 0 && ferror(f)) rc = ab_errorf("%s: read error after line %d (%s)", path, p.line, strerror(errno));
    free(buf);
    fclose(f);
    return parser_finish(&p, rc < 0 ? -1 : 0);
}

int ab_glue_load(const char *dir, const char *task, int dev, int first_n, ab_glue_split *out) {
    memset(out, 0, sizeof *out);
    const ab_glue_task_info *t;
    AB_TRY(ab_glue_task(task, &t));
    const char *file = dev ? t->dev_file : t->train_file;
    char path[4096];
    if ((size_t)snprintf(path, sizeof path, "%s/%s", dir, file) >= sizeof path)
        return ab_errorf("%s: folder name too long", dir);
    struct stat st;
    if (stat(path, &st) != 0)
        return ab_errorf("%s: no such file (looked in %s for %s's %s split; pass --data DIR, the folder holding "
                         "GLUE's %s/%s)",
                         path, dir, t->folder, dev ? "dev" : "training", t->folder, file);
    return ab_glue_read(path, t, first_n, out);
}

void ab_glue_split_free(ab_glue_split *s) {
    free(s->a);
    free(s->b);
    free(s->labels);
    free(s->lines);
    free(s->text);
    memset(s, 0, sizeof *s);
}

/* confusion counts over classes 0 and 1; -1 if n < 1 or a value is neither */
static int confusion(const int32_t *pred, const int32_t *gold, int n, double *tp, double *tn, double *fp, double *fn) {
    if (n < 1) return -1;
    int64_t c[2][2] = {{0, 0}, {0, 0}}; /* [gold][pred] */
    for (int i = 0; i < n; i++) {
        if ((uint32_t)pred[i] > 1 || (uint32_t)gold[i] > 1) return -1;
        c[gold[i]][pred[i]]++;
    }
    *tp = (double)c[1][1], *tn = (double)c[0][0], *fp = (double)c[0][1], *fn = (double)c[1][0];
    return 0;
}

double ab_glue_accuracy(const int32_t *pred, const int32_t *gold, int n) {
    if (n < 1) return NAN;
    int64_t right = 0;
    for (int i = 0; i < n; i++) right += pred[i] == gold[i];
    return (double)right / n;
}

double ab_glue_matthews(const int32_t *pred, const int32_t *gold, int n) {
    double tp, tn, fp, fn;
    if (confusion(pred, gold, n, &tp, &tn, &fp, &fn) != 0) return NAN;
    /* two roots of products of two counts each: no product of four counts to lose digits in */
    const double den = sqrt((tp + fp) * (tp + fn)) * sqrt((tn + fp) * (tn + fn));
    return den == 0 ? 0.0 : (tp * tn - fp * fn) / den;
}

double ab_glue_f1(const int32_t *pred, const int32_t *gold, int n) {
    double tp, tn, fp, fn;
    if (confusion(pred, gold, n, &tp, &tn, &fp, &fn) != 0) return NAN;
    const double den = 2 * tp + fp + fn;
    return den == 0 ? 0.0 : 2 * tp / den;
}

double ab_glue_score(const ab_glue_task_info *task, const int32_t *pred, const int32_t *gold, int n) {
    switch (task->metric) {
    case AB_GLUE_MATTHEWS:
        return ab_glue_matthews(pred, gold, n);
    case AB_GLUE_F1:
        return ab_glue_f1(pred, gold, n);
    default:
        return ab_glue_accuracy(pred, gold, n);
    }
}
