/* GLUE: the task table; the real SST-2, CoLA and RTE files when they are there (row counts, known
 * rows, label counts, first N rows); synthetic files in every task's layout (MRPC, QNLI, QQP, MNLI
 * included) and line endings, byte-order mark, quotes and non-UTF-8 bytes; malformed files refused
 * with file:line; the metrics on hand-computed confusion matrices. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ab.h"
#include "glue.h"
#include "tolerances.h"

static int failures = 0;
static char dir[256];

/* what the test wrote, removed in reverse order at the end (files before their folders) */
static char made[64][512];
static int n_made = 0;

static const char *path_of(const char *name) {
    static char p[512];
    snprintf(p, sizeof p, "%s/%s", dir, name);
    return p;
}

static void remember(const char *p) {
    if (n_made < 64) snprintf(made[n_made++], sizeof made[0], "%s", p);
}

static void make_dir(const char *name) {
    const char *p = path_of(name);
    if (mkdir(p, 0700) == 0) remember(p);
}

static void write_bytes(const char *name, const char *bytes, size_t n) {
    const char *p = path_of(name);
    FILE *f = fopen(p, "wb");
    const int ok = f && fwrite(bytes, 1, n, f) == n;
    if (f) fclose(f);
    AB_CHECK(ok, "cannot write %s", p);
    int known = 0;
    for (int i = 0; i < n_made; i++) known |= strcmp(made[i], p) == 0;
    if (!known) remember(p);
}

static void write_text(const char *name, const char *text) { write_bytes(name, text, strlen(text)); }

static const ab_glue_task_info *task(const char *name) {
    const ab_glue_task_info *t = NULL;
    AB_CHECK(ab_glue_task(name, &t) == 0, "%s", ab_error());
    return t;
}

/* reads name as task both ways (file, memory); they must agree row for row */
static int read_both(const char *name, const char *task_name, int first_n, ab_glue_split *s) {
    const ab_glue_task_info *t = task(task_name);
    if (!t) return -1;
    const int rc = ab_glue_read(path_of(name), t, first_n, s);
    char err[512];
    snprintf(err, sizeof err, "%s", ab_error());
    FILE *f = fopen(path_of(name), "rb");
    char *buf = malloc(4 << 20);
    const size_t len = f && buf ? fread(buf, 1, 4 << 20, f) : 0;
    if (f) fclose(f);
    ab_glue_split m;
    const int rc_mem = ab_glue_parse(buf, len, path_of(name), t, first_n, &m);
    free(buf);
    AB_CHECK(rc == rc_mem, "%s: read %d, parse %d (%s)", name, rc, rc_mem, rc ? err : ab_error());
    if (rc == 0 && rc_mem == 0) {
        int same = m.n == s->n && m.n_skipped == s->n_skipped;
        for (int i = 0; same && i < m.n; i++)
            same = strcmp(m.a[i], s->a[i]) == 0 && (t->col_b < 0 || strcmp(m.b[i], s->b[i]) == 0) &&
                   m.labels[i] == s->labels[i] && m.lines[i] == s->lines[i];
        AB_CHECK(same, "%s: the file and memory paths differ", name);
    }
    if (rc_mem == 0) ab_glue_split_free(&m);
    if (rc != 0) ab_errorf("%s", err);
    return rc;
}

static void test_table(void) {
    int n;
    const ab_glue_task_info *all = ab_glue_tasks(&n);
    AB_CHECK(n == 7, "%d tasks", n);
    for (int i = 0; i < n; i++) {
        const ab_glue_task_info *t = &all[i];
        int ok = t->n_labels >= 2 && t->n_labels <= AB_GLUE_MAX_LABELS && t->min_cols > t->col_a &&
                 t->min_cols > t->col_b && t->min_cols > t->col_label && (t->col_label >= 0 || t->min_cols > 1);
        for (int k = 0; k < t->n_labels; k++) ok &= t->labels[k] != NULL;
        AB_CHECK(ok, "%s: layout inconsistent", t->name);
        const ab_glue_task_info *by_name = NULL, *by_folder = NULL;
        AB_CHECK(ab_glue_task(t->name, &by_name) == 0 && by_name == t, "%s not found by name", t->name);
        AB_CHECK(ab_glue_task(t->folder, &by_folder) == 0 && by_folder == t, "%s not found by folder", t->folder);
    }
    const ab_glue_task_info *t = NULL;
    AB_CHECK(ab_glue_task("Sst-2", &t) == 0 && t && strcmp(t->name, "sst2") == 0, "Sst-2 not sst2");
    AB_CHECK(ab_glue_task("stsb", &t) != 0 && t == NULL && strstr(ab_error(), "stsb"), "stsb: '%s'", ab_error());
    /* the metrics glue_compute_metrics reports: mcc for CoLA, f1 (with acc) for MRPC and QQP */
    AB_CHECK(task("cola")->metric == AB_GLUE_MATTHEWS && task("mrpc")->metric == AB_GLUE_F1 &&
                 task("qqp")->metric == AB_GLUE_F1 && task("rte")->metric == AB_GLUE_ACCURACY &&
                 task("mnli")->metric == AB_GLUE_ACCURACY,
             "task metrics");
    AB_CHECK(strcmp(ab_glue_metric_name(AB_GLUE_MATTHEWS), "matthews") == 0, "metric name");
    AB_CHECK(strcmp(task("mnli")->dev_file, "dev_matched.tsv") == 0, "mnli dev file %s", task("mnli")->dev_file);
    printf("ok   task table: %d tasks, found by name and folder in any case\n", n);
}

/* One real file: its row count, first row and label counts. */
typedef struct {
    const char *task;
    int dev, rows;
    int count[2]; /* rows of class 0 and 1 (counted from the files with cut | sort | uniq -c) */
    int line;     /* a known row: its line, sentences, class */
    const char *a, *b;
    int label;
} real_case;

static void test_real(void) {
    static const real_case cases[] = {
        {"sst2", 0, 67349, {29780, 37569}, 2, "hide new secretions from the parental units ", NULL, 0},
        {"sst2", 1, 872, {428, 444}, 2, "it 's a charming and often affecting journey . ", NULL, 1},
        {"cola", 0, 8551, {2528, 6023}, 3057, "Susan whispered \"Shut up\".", NULL, 1},
        /* dev: 527 in-domain rows, then out-of-domain from line 528 (source clc95) */
        {"cola", 1, 1043, {324, 719}, 528, "Somebody just left - guess who.", NULL, 1},
        {"rte",
         0,
         2490,
         {1249, 1241},
         2491,
         "Turkey is unlikely to become involved in, or allow U.S. forces to use Turkish territory in a Middle East war "
         "that does not threaten her territory directly.",
         "U.S. to use Turkish military bases.",
         1},
        {"rte",
         1,
         277,
         {146, 131},
         2,
         "Dana Reeve, the widow of the actor Christopher Reeve, has died of lung cancer at age 44, according to the "
         "Christopher Reeve Foundation.",
         "Christopher Reeve had an accident.",
         1},
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        const real_case *rc = &cases[c];
        const ab_glue_task_info *t = task(rc->task);
        char d[512];
        snprintf(d, sizeof d, "%s/glue/%s", AB_DEFAULT_DATA_ROOT, t->folder);
        char file[600];
        snprintf(file, sizeof file, "%s/%s", d, rc->dev ? t->dev_file : t->train_file);
        struct stat st;
        if (stat(file, &st) != 0) {
            printf("SKIPPED real %s %s: no %s\n", t->folder, rc->dev ? "dev" : "train", file);
            continue;
        }
        ab_glue_split s;
        if (ab_glue_load(d, rc->task, rc->dev, 0, &s) != 0) {
            AB_CHECK(0, "%s", ab_error());
            continue;
        }
        int count[2] = {0, 0}, in_range = 1, ascending = 1;
        for (int i = 0; i < s.n; i++) {
            in_range &= s.labels[i] == 0 || s.labels[i] == 1;
            if (s.labels[i] == 0 || s.labels[i] == 1) count[s.labels[i]]++;
            ascending &= i == 0 || s.lines[i] > s.lines[i - 1];
        }
        AB_CHECK(s.n == rc->rows && in_range && ascending && count[0] == rc->count[0] && count[1] == rc->count[1],
                 "%s: %d rows (want %d), classes %d/%d (want %d/%d)", file, s.n, rc->rows, count[0], count[1],
                 rc->count[0], rc->count[1]);
        /* one row per line, so the known row is at index line - 1 - header */
        const int i = rc->line - 1 - t->header;
        const int known = i >= 0 && i < s.n && s.lines[i] == rc->line && strcmp(s.a[i], rc->a) == 0 &&
                          (rc->b == NULL ? s.b == NULL : strcmp(s.b[i], rc->b) == 0) && s.labels[i] == rc->label;
        AB_CHECK(known, "%s:%d: row %d is '%s' / '%s' class %d", file, rc->line, i, i >= 0 && i < s.n ? s.a[i] : "?",
                 i >= 0 && i < s.n && s.b ? s.b[i] : "-", i >= 0 && i < s.n ? s.labels[i] : -1);
        /* --train-subset: the first rows, the same as in the whole file */
        ab_glue_split sub;
        const int n_sub = rc->rows / 3 + 1;
        if (ab_glue_load(d, rc->task, rc->dev, n_sub, &sub) == 0) {
            int same = sub.n == n_sub;
            for (int k = 0; same && k < sub.n; k++)
                same = strcmp(sub.a[k], s.a[k]) == 0 && sub.labels[k] == s.labels[k] && sub.lines[k] == s.lines[k];
            AB_CHECK(same, "%s: the first %d rows (%d) differ from the whole file's", file, n_sub, sub.n);
            ab_glue_split_free(&sub);
        } else {
            AB_CHECK(0, "%s", ab_error());
        }
        AB_CHECK(ab_glue_load(d, rc->task, rc->dev, rc->rows + 100, &sub) == 0 && sub.n == rc->rows,
                 "%s: more rows asked for than there are: %d", file, sub.n);
        ab_glue_split_free(&sub);
        printf("ok   real %s %s: %d rows (%d / %d), line %d as known, first %d rows\n", t->folder,
               rc->dev ? "dev" : "train", s.n, count[0], count[1], rc->line, n_sub);
        ab_glue_split_free(&s);
    }
}

/* One synthetic task folder: a train file and a dev file in the task's layout (header names as
 * in the GLUE download), loaded through ab_glue_load. */
typedef struct {
    const char *task;
    const char *train, *dev;
    int rows_train, rows_dev;
    const char *a0, *b0; /* the training file's first row */
    int label0;
    int label_last; /* the training file's last class */
    int skipped;
} synth_case;

static void test_layouts(void) {
    static const synth_case cases[] = {
        {"sst2", "sentence\tlabel\nit 's good . \t1\nbad \t0\n", "sentence\tlabel\nok \t1\n", 2, 1, "it 's good . ",
         NULL, 1, 0, 0},
        {"cola", "gj04\t1\t\tThe sailors rode.\ngj04\t0\t*\tThe sailors rode rocks the.\n", "clc95\t1\t\tWho left.\n",
         2, 1, "The sailors rode.", NULL, 1, 0, 0},
        {"rte",
         "index\tsentence1\tsentence2\tlabel\n0\tA man sleeps.\tA man rests.\tentailment\n1\tX.\tY.\tnot_entailment\n",
         "index\tsentence1\tsentence2\tlabel\n0\tP.\tH.\tnot_entailment\n", 2, 1, "A man sleeps.", "A man rests.", 0, 1,
         0},
        {"mrpc",
         "Quality\t#1 ID\t#2 ID\t#1 String\t#2 String\n1\t702876\t702977\tAmrozi accused his brother .\tReferring to "
         "him "
         "as only \" the witness \" .\n0\t2108705\t2108831\tYucaipa owned Dominick 's .\tYucaipa bought Dominick 's "
         ".\n",
         "Quality\t#1 ID\t#2 ID\t#1 String\t#2 String\n1\t1\t2\tA.\tB.\n", 2, 1, "Amrozi accused his brother .",
         "Referring to him as only \" the witness \" .", 1, 0, 0},
        {"qnli",
         "index\tquestion\tsentence\tlabel\n0\tWhen did it open?\tIt opened in 1900.\tentailment\n1\tWho?\tNo one "
         "knows.\tnot_entailment\n",
         "index\tquestion\tsentence\tlabel\n0\tQ?\tS.\tentailment\n", 2, 1, "When did it open?", "It opened in 1900.",
         0, 1, 0},
        /* a row QqpProcessor cannot index (5 columns) is left out, not refused */
        {"qqp",
         "id\tqid1\tqid2\tquestion1\tquestion2\tis_duplicate\n133273\t213221\t213222\tHow is the life?\tWhat is life "
         "like?\t1\n9\t1\t2\tshort row\t0\n402555\t536040\t536041\tHow do I fix it?\tWhy is it broken?\t0\n",
         "id\tqid1\tqid2\tquestion1\tquestion2\tis_duplicate\n1\t2\t3\tQ1?\tQ2?\t0\n", 2, 1, "How is the life?",
         "What is life like?", 1, 0, 1},
        /* train: 12 columns, gold_label last; dev_matched: 16 (five annotator labels, then gold_label) */
        {"mnli",
         "index\tpromptID\tpairID\tgenre\tsentence1_binary_parse\tsentence2_binary_parse\tsentence1_parse\tsentence2_"
         "parse\tsentence1\tsentence2\tlabel1\tgold_label\n"
         "0\t31193\t31193n\tgovernment\t( ( Conceptually cream ) )\t( ( Product ) )\t(ROOT (S))\t(ROOT "
         "(S))\tConceptually "
         "cream skimming has two basic dimensions .\tProduct and geography are what make cream skimming work "
         ".\tneutral\t"
         "neutral\n"
         "1\t1\t1n\tfiction\tx\ty\tx\ty\tP.\tH.\tcontradiction\tcontradiction\n",
         "index\tpromptID\tpairID\tgenre\ts1b\ts2b\ts1p\ts2p\tsentence1\tsentence2\tlabel1\tlabel2\tlabel3\tlabel4\t"
         "label5\tgold_label\n"
         "0\t63735\t63735n\tslate\tx\ty\tx\ty\tThe new rights are nice enough\tEveryone really likes the newest "
         "benefits\tneutral\tentailment\tneutral\tneutral\tneutral\tneutral\n"
         "1\t1\t1e\tslate\tx\ty\tx\ty\tP.\tH.\tentailment\tentailment\tneutral\tentailment\tentailment\tentailment\n",
         2, 2, "Conceptually cream skimming has two basic dimensions .",
         "Product and geography are what make cream skimming work .", 2, 0, 0},
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        const synth_case *sc = &cases[c];
        const ab_glue_task_info *t = task(sc->task);
        char name[128];
        make_dir(t->folder);
        snprintf(name, sizeof name, "%s/%s", t->folder, t->train_file);
        write_text(name, sc->train);
        snprintf(name, sizeof name, "%s/%s", t->folder, t->dev_file);
        write_text(name, sc->dev);
        char d[512];
        snprintf(d, sizeof d, "%s/%s", dir, t->folder);
        ab_glue_split tr, dv;
        if (ab_glue_load(d, sc->task, 0, 0, &tr) != 0) {
            AB_CHECK(0, "%s", ab_error());
            continue;
        }
        const int ok = tr.n == sc->rows_train && tr.n_skipped == sc->skipped && strcmp(tr.a[0], sc->a0) == 0 &&
                       (sc->b0 ? tr.b && strcmp(tr.b[0], sc->b0) == 0 : tr.b == NULL) && tr.labels[0] == sc->label0 &&
                       tr.labels[tr.n - 1] == sc->label_last && tr.lines[0] == 1 + t->header && tr.task == t;
        AB_CHECK(ok, "%s train: %d rows (%d skipped), first '%s' / '%s' class %d, last class %d", sc->task, tr.n,
                 tr.n_skipped, tr.a[0], tr.b ? tr.b[0] : "-", tr.labels[0], tr.labels[tr.n - 1]);
        if (ab_glue_load(d, sc->task, 1, 0, &dv) == 0) {
            AB_CHECK(dv.n == sc->rows_dev, "%s dev: %d rows", sc->task, dv.n);
            ab_glue_split_free(&dv);
        } else {
            AB_CHECK(0, "%s", ab_error());
        }
        /* first_n = 1: one row, even where more follow */
        AB_CHECK(ab_glue_load(d, sc->task, 0, 1, &dv) == 0 && dv.n == 1 && strcmp(dv.a[0], sc->a0) == 0,
                 "%s first 1: %d rows", sc->task, dv.n);
        ab_glue_split_free(&dv);
        ab_glue_split_free(&tr);
    }
    /* MNLI's dev_matched gold_label is the last of six labels: row 2 is entailment (class 1) */
    char d[512];
    snprintf(d, sizeof d, "%s/MNLI", dir);
    ab_glue_split s;
    AB_CHECK(ab_glue_load(d, "mnli", 1, 0, &s) == 0 && s.n == 2 && s.labels[0] == 2 && s.labels[1] == 1 &&
                 strcmp(s.b[0], "Everyone really likes the newest benefits") == 0,
             "mnli dev_matched: %d rows, classes %d %d", s.n, s.n ? s.labels[0] : -1, s.n > 1 ? s.labels[1] : -1);
    ab_glue_split_free(&s);
    printf("ok   layouts: sst2 cola rte mrpc qnli qqp mnli, train and dev, first 1 row\n");
}

/* Line endings, a byte-order mark, blank lines, quotes, bytes that are not UTF-8, a last line
 * without its newline: what Python's text mode and csv.reader(quoting=QUOTE_NONE) make of them. */
static void test_bytes(void) {
    ab_glue_split s;
    /* \r\n, a lone \r (a line break in Python's universal newlines), a blank line, no final \n */
    write_text("endings.tsv", "sentence\tlabel\r\none\t1\r\ntwo\t0\rthree\t1\n\nfour\t0");
    AB_CHECK(read_both("endings.tsv", "sst2", 0, &s) == 0 && s.n == 4 && strcmp(s.a[0], "one") == 0 &&
                 strcmp(s.a[1], "two") == 0 && strcmp(s.a[3], "four") == 0 && s.labels[3] == 0 && s.lines[1] == 3 &&
                 s.lines[2] == 4 && s.lines[3] == 6,
             "endings: %d rows, lines %d %d %d", s.n, s.n > 1 ? s.lines[1] : 0, s.n > 2 ? s.lines[2] : 0,
             s.n > 3 ? s.lines[3] : 0);
    ab_glue_split_free(&s);
    /* a byte-order mark (utf-8-sig), an unmatched quote, Latin-1 bytes kept as they are */
    write_text("bom.tsv", "\xEF\xBB\xBFsentence\tlabel\n\"it 's \xE9t\xE9\t1\nsay \"hi\"\t0\n");
    AB_CHECK(read_both("bom.tsv", "sst2", 0, &s) == 0 && s.n == 2 && strcmp(s.a[0], "\"it 's \xE9t\xE9") == 0 &&
                 strcmp(s.a[1], "say \"hi\"") == 0,
             "bom: %d rows, '%s'", s.n, s.n ? s.a[0] : "");
    ab_glue_split_free(&s);
    /* CoLA has no header: the first line is a row; empty sentence b-less row kept */
    write_text("cola.tsv", "\xEF\xBB\xBFgj04\t0\t*\tRocks the.\nx\t1\t\t\n");
    AB_CHECK(read_both("cola.tsv", "cola", 0, &s) == 0 && s.n == 2 && strcmp(s.a[0], "Rocks the.") == 0 &&
                 s.a[1][0] == 0 && s.lines[0] == 1,
             "cola: %d rows", s.n);
    ab_glue_split_free(&s);
    /* a long sentence (200 kB, under the limit) is read whole */
    const size_t long_n = 200000;
    char *big = malloc(long_n + 32);
    memcpy(big, "sentence\tlabel\n", 15);
    memset(big + 15, 'w', long_n);
    memcpy(big + 15 + long_n, "\t1\n", 3);
    write_bytes("long.tsv", big, 15 + long_n + 3);
    AB_CHECK(read_both("long.tsv", "sst2", 0, &s) == 0 && s.n == 1 && strlen(s.a[0]) == long_n, "long line");
    ab_glue_split_free(&s);
    free(big);
    printf("ok   bytes: \\r\\n, lone \\r, blank lines, no final newline, BOM, quotes, Latin-1, a 200 kB line\n");
}

static void expect_error(const char *name, const char *task_name, const char *contents, size_t len, const char *where,
                         const char *needle) {
    write_bytes(name, contents, len);
    ab_glue_split s;
    const int rc = read_both(name, task_name, 0, &s);
    AB_CHECK(rc != 0, "%s was accepted (%d rows)", name, s.n);
    if (rc == 0) {
        ab_glue_split_free(&s);
        return;
    }
    char at[600];
    snprintf(at, sizeof at, "%s%s", path_of(name), where);
    AB_CHECK(strstr(ab_error(), at) && strstr(ab_error(), needle) && !strchr(ab_error(), '\n'),
             "%s: message '%s' does not say '%s' at '%s'", name, ab_error(), needle, at);
    AB_CHECK(s.n == 0 && s.a == NULL && s.text == NULL, "%s: a refused split keeps memory", name);
}

#define ERR(name, task, text, where, needle) expect_error(name, task, text, sizeof text - 1, where, needle)

static void test_errors(void) {
    ERR("nolabel.tsv", "sst2", "sentence\tlabel\ngood\t1\nno tab here\n", ":3:", "the label, column 2, is missing");
    ERR("rte3.tsv", "rte", "index\tsentence1\tsentence2\tlabel\n0\tP.\tH.\tentailment\n1\tP.\tH.\n",
        ":3:", "3 columns where RTE rows have at least 4");
    ERR("cola3.tsv", "cola", "gj04\t1\t\tFine.\ngj04\t1\tNo sentence.\n", ":2:", "3 columns where CoLA rows");
    ERR("mnli11.tsv", "mnli", "h\nA\tB\tC\tD\tE\tF\tG\tH\tP.\tH.\tneutral\n", ":2:", "at least 12");
    ERR("badlabel.tsv", "sst2", "sentence\tlabel\ngood\t1\nbad\t2\n",
        ":3:", "label '2' is not one of SST-2's labels (0, 1)");
    ERR("space.tsv", "sst2", "sentence\tlabel\ngood\t1 \n", ":2:", "label '1 '");
    ERR("rtelabel.tsv", "rte", "index\tsentence1\tsentence2\tlabel\n0\tP.\tH.\tcontradiction\n",
        ":2:", "(entailment, not_entailment)");
    ERR("header.tsv", "cola", "source\tlabel\tjudgement\tsentence\n", ":1:", "label 'label'");
    ERR("mnlidash.tsv", "mnli", "h\n0\t1\t2\tg\ta\tb\tc\td\tP.\tH.\t-\t-\n",
        ":2:", "(contradiction, entailment, neutral)");
    ERR("empty.tsv", "sst2", "", ":", "empty file");
    ERR("blank.tsv", "rte", "\n\r\n\n", ":", "empty file");
    ERR("onlyheader.tsv", "rte", "index\tsentence1\tsentence2\tlabel\n", ":", "no data rows (only the header line)");
    ERR("allshort.tsv", "qqp", "id\tqid1\tqid2\tquestion1\tquestion2\tis_duplicate\n1\t2\t3\tq\t1\n", ":",
        "1 row with fewer than 6 columns left out");
    ERR("nul.tsv", "sst2", "sentence\tlabel\nab\0c\t1\n", ":2:", "NUL byte");
    /* a 2 MiB line, over the limit, is refused, not a crash */
    const size_t huge = AB_GLUE_MAX_LINE + 100;
    char *b = malloc(huge + 32);
    memcpy(b, "sentence\tlabel\nok\t0\n", 20);
    memset(b + 20, 'x', huge);
    memcpy(b + 20 + huge, "\t1\n", 3);
    expect_error("huge.tsv", "sst2", b, 20 + huge + 3, ":3:", "longer than");
    free(b);

    ab_glue_split s;
    AB_CHECK(ab_glue_load(path_of("nowhere"), "rte", 1, 0, &s) != 0 && strstr(ab_error(), "nowhere/dev.tsv") &&
                 strstr(ab_error(), "--data") && strstr(ab_error(), "looked in"),
             "missing file: '%s'", ab_error());
    AB_CHECK(ab_glue_load(dir, "wnli", 0, 0, &s) != 0 && strstr(ab_error(), "wnli"), "unknown task: '%s'", ab_error());
    AB_CHECK(ab_glue_read(dir, task("sst2"), 0, &s) != 0 && strstr(ab_error(), "folder"), "a folder: '%s'", ab_error());
    write_text("neg.tsv", "sentence\tlabel\na\t1\n");
    AB_CHECK(ab_glue_read(path_of("neg.tsv"), task("sst2"), -1, &s) != 0 && strstr(ab_error(), "-1"),
             "first_n -1: '%s'", ab_error());
    printf("ok   errors: short rows, missing label, bad labels, empty, header only, NUL, 1 MiB line, missing file\n");
}

/* Metric values are ratios of small counts computed in double: equal to 1e-12. */
#define METRIC_TOL 1e-12
#define NEAR(x, want) (fabs((x) - (want)) <= METRIC_TOL)

static void test_metrics(void) {
    /* TP 3, FN 1, FP 1, TN 5: accuracy 8/10; MCC (3*5 - 1*1) / sqrt(4*4*6*6) = 14/24;
     * F1 2*3 / (2*3 + 1 + 1) = 6/8 */
    const int32_t g1[] = {1, 1, 1, 1, 0, 0, 0, 0, 0, 0}, p1[] = {1, 1, 1, 0, 1, 0, 0, 0, 0, 0};
    AB_CHECK(NEAR(ab_glue_accuracy(p1, g1, 10), 0.8), "acc %g", ab_glue_accuracy(p1, g1, 10));
    AB_CHECK(NEAR(ab_glue_matthews(p1, g1, 10), 14.0 / 24.0), "mcc %.17g", ab_glue_matthews(p1, g1, 10));
    AB_CHECK(NEAR(ab_glue_f1(p1, g1, 10), 0.75), "f1 %.17g", ab_glue_f1(p1, g1, 10));
    /* TP 6, TN 3, FP 2, FN 1: MCC (18 - 2) / sqrt(8*7*5*4) = 16 / sqrt(1120) = 0.47809144373375745;
     * F1 12 / (12 + 2 + 1) = 0.8; accuracy 9/12 */
    const int32_t g2[] = {1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0}, p2[] = {1, 1, 1, 1, 1, 1, 0, 1, 1, 0, 0, 0};
    AB_CHECK(NEAR(ab_glue_matthews(p2, g2, 12), 0.47809144373375745), "mcc %.17g", ab_glue_matthews(p2, g2, 12));
    AB_CHECK(NEAR(ab_glue_f1(p2, g2, 12), 0.8) && NEAR(ab_glue_accuracy(p2, g2, 12), 0.75), "f1 %.17g acc %.17g",
             ab_glue_f1(p2, g2, 12), ab_glue_accuracy(p2, g2, 12));
    /* every prediction wrong: TP 0, TN 0, FP 2, FN 2: MCC -4 / sqrt(2*2*2*2) = -1, F1 0 */
    const int32_t g3[] = {0, 1, 0, 1}, p3[] = {1, 0, 1, 0};
    AB_CHECK(NEAR(ab_glue_matthews(p3, g3, 4), -1.0) && ab_glue_f1(p3, g3, 4) == 0.0 &&
                 ab_glue_accuracy(p3, g3, 4) == 0.0,
             "inverted: mcc %g f1 %g", ab_glue_matthews(p3, g3, 4), ab_glue_f1(p3, g3, 4));
    /* one class predicted: TP 2, FP 1, TN 0, FN 0: (TN+FN) = 0 so MCC 0 (sklearn's rule);
     * F1 4 / (4 + 1) = 0.8 */
    const int32_t g4[] = {1, 0, 1}, p4[] = {1, 1, 1};
    AB_CHECK(ab_glue_matthews(p4, g4, 3) == 0.0 && NEAR(ab_glue_f1(p4, g4, 3), 0.8) &&
                 NEAR(ab_glue_accuracy(p4, g4, 3), 2.0 / 3.0),
             "one class: mcc %g f1 %g", ab_glue_matthews(p4, g4, 3), ab_glue_f1(p4, g4, 3));
    /* no positive at all: F1's 0/0 is 0 as sklearn's zero_division="warn"; MCC 0; accuracy 1 */
    const int32_t z[] = {0, 0, 0};
    AB_CHECK(ab_glue_f1(z, z, 3) == 0.0 && ab_glue_matthews(z, z, 3) == 0.0 && ab_glue_accuracy(z, z, 3) == 1.0,
             "all 0: f1 %g mcc %g", ab_glue_f1(z, z, 3), ab_glue_matthews(z, z, 3));
    /* all right and both classes: MCC 1, F1 1 */
    AB_CHECK(NEAR(ab_glue_matthews(g1, g1, 10), 1.0) && NEAR(ab_glue_f1(g1, g1, 10), 1.0), "perfect");
    /* three classes: accuracy only; binary metrics refuse class 2 with NaN; n = 0 is NaN */
    const int32_t g5[] = {0, 1, 2, 2}, p5[] = {0, 2, 2, 1};
    AB_CHECK(NEAR(ab_glue_accuracy(p5, g5, 4), 0.5), "3 classes acc %g", ab_glue_accuracy(p5, g5, 4));
    AB_CHECK(isnan(ab_glue_matthews(p5, g5, 4)) && isnan(ab_glue_f1(p5, g5, 4)) && isnan(ab_glue_accuracy(z, z, 0)) &&
                 isnan(ab_glue_f1(z, z, 0)) && isnan(ab_glue_matthews(z, z, 0)),
             "NaN cases");
    /* the task's metric */
    AB_CHECK(ab_glue_score(task("cola"), p2, g2, 12) == ab_glue_matthews(p2, g2, 12) &&
                 ab_glue_score(task("qqp"), p2, g2, 12) == ab_glue_f1(p2, g2, 12) &&
                 ab_glue_score(task("sst2"), p2, g2, 12) == ab_glue_accuracy(p2, g2, 12),
             "ab_glue_score");
    printf("ok   metrics: accuracy, Matthews (14/24, 16/sqrt(1120), -1, 0), F1 (0.75, 0.8, 0/0 = 0), NaN cases\n");
}

int main(void) {
    snprintf(dir, sizeof dir, "/tmp/ab_test_glue.%ld", (long)getpid());
    if (mkdir(dir, 0700) != 0) {
        perror(dir);
        return 1;
    }
    test_table();
    test_real();
    test_layouts();
    test_bytes();
    test_errors();
    test_metrics();
    for (int i = n_made - 1; i >= 0; i--) {
        struct stat st;
        if (stat(made[i], &st) == 0 && S_ISDIR(st.st_mode))
            rmdir(made[i]);
        else
            unlink(made[i]);
    }
    rmdir(dir);
    if (failures) fprintf(stderr, "test_glue: %d failure(s)\n", failures);
    return failures ? 1 : 0;
}
