/* libFuzzer target for the GLUE TSV reader: input byte 0 picks the task layout, byte 1 the number
 * of rows asked for (0 = all, 1-3), the rest is the file, parsed from memory (ab_glue_parse) and
 * read as a file line by line (ab_glue_read); both must agree, and an accepted split must hold
 * only rows the file has: labels in range, lines ascending, fields without tabs or line ends. */
#include "fuzz_file.h"

#include "ab.h"
#include "glue.h"

static fuzz_file file;

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc, (void)argv;
    fuzz_file_open(&file, "glue");
    return 0;
}

/* a field: a NUL-terminated string inside the text, with none of \t \n \r and found in the input */
static void check_field(const ab_glue_split *s, const char *f, size_t text_len, const uint8_t *data, size_t size) {
    FUZZ_CHECK(f >= s->text && f < s->text + text_len);
    const size_t n = strlen(f);
    FUZZ_CHECK(f + n < s->text + text_len);
    FUZZ_CHECK(strpbrk(f, "\t\n\r") == NULL);
    FUZZ_CHECK(n == 0 || memmem(data, size, f, n) != NULL);
}

static void check_same(const ab_glue_split *a, const ab_glue_split *b) {
    FUZZ_CHECK(a->n == b->n && a->n_skipped == b->n_skipped && a->task == b->task);
    for (int i = 0; i < a->n; i++) {
        FUZZ_CHECK(strcmp(a->a[i], b->a[i]) == 0 && a->labels[i] == b->labels[i] && a->lines[i] == b->lines[i]);
        FUZZ_CHECK((a->b == NULL) == (b->b == NULL));
        if (a->b) FUZZ_CHECK(strcmp(a->b[i], b->b[i]) == 0);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    static const char name[] = "fuzz-input.tsv";
    if (size < 2) return 0;
    int n_tasks;
    const ab_glue_task_info *tasks = ab_glue_tasks(&n_tasks);
    const ab_glue_task_info *t = &tasks[data[0] % n_tasks];
    const int first_n = data[1] % 4;
    data += 2, size -= 2;

    ab_glue_split a, b;
    const int rc_parse = ab_glue_parse(data, size, name, t, first_n, &a);
    if (rc_parse != 0) {
        FUZZ_CHECK(a.n == 0 && a.a == NULL && a.b == NULL && a.labels == NULL && a.lines == NULL && a.text == NULL);
        FUZZ_CHECK(strncmp(ab_error(), name, sizeof name - 1) == 0); /* errors start with the file */
        FUZZ_CHECK(strpbrk(ab_error(), "\n\r") == NULL);             /* one line */
    }
    fuzz_file_set(&file, data, size);
    const int rc_read = ab_glue_read(file.path, t, first_n, &b);
    FUZZ_CHECK(rc_parse == rc_read);
    if (rc_read != 0) {
        FUZZ_CHECK(strncmp(ab_error(), file.path, strlen(file.path)) == 0);
        FUZZ_CHECK(b.text == NULL && b.a == NULL);
        return 0;
    }
    FUZZ_CHECK(a.n >= 1 && (first_n == 0 || a.n <= first_n) && a.task == t);
    FUZZ_CHECK((a.b == NULL) == (t->col_b < 0));
    FUZZ_CHECK(t->skip_short || a.n_skipped == 0);
    /* each row and each skipped row is a line of its own */
    size_t breaks = 0;
    for (size_t i = 0; i < size; i++)
        breaks += data[i] == '\n' || (data[i] == '\r' && (i + 1 == size || data[i + 1] != '\n'));
    FUZZ_CHECK((size_t)a.n + (size_t)a.n_skipped + (size_t)t->header <= breaks + 1);
    /* the text holds the fields only: at most the input's bytes plus a NUL per field */
    size_t text_len = 0;
    for (int i = 0; i < a.n; i++) {
        text_len += strlen(a.a[i]) + 1;
        if (a.b) text_len += strlen(a.b[i]) + 1;
    }
    FUZZ_CHECK(text_len <= size + 2 * (size_t)a.n);
    for (int i = 0; i < a.n; i++) {
        FUZZ_CHECK(a.labels[i] >= 0 && a.labels[i] < t->n_labels);
        FUZZ_CHECK(a.lines[i] >= 1 + t->header && (i == 0 || a.lines[i] > a.lines[i - 1]));
        FUZZ_CHECK((size_t)a.lines[i] <= breaks + 1);
        check_field(&a, a.a[i], text_len, data, size);
        if (a.b) check_field(&a, a.b[i], text_len, data, size);
    }
    check_same(&a, &b);
    ab_glue_split_free(&a);
    ab_glue_split_free(&b);
    FUZZ_CHECK(a.n == 0 && a.text == NULL);
    return 0;
}
