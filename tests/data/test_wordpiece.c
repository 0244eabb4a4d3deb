/* The WordPiece tokenizer (data_loaders/wordpiece.c) on hand-checked cases: a small vocabulary of
 * its own (accents, punctuation, CJK, [UNK], ## pieces, 100/101-character words, controls and
 * spaces, special tokens inside text, canonical ordering of marks, cased mode), the vocabulary
 * reader's line endings, duplicates and errors, UTF-8 refused with the caller's file:line, the
 * encoding (longest_first truncation of pairs, max_len exactly reached, an empty line, padding);
 * then bert-base-uncased's vocab.txt from the data root, when it is there. Every expected id here
 * (the small vocabulary's too, written out as a file) is what BertTokenizer.from_pretrained of
 * transformers 4.30.2 gives; peers/checks/tokenizer_check.py compares with it on GLUE at scale. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ab.h"
#include "tolerances.h"
#include "wordpiece.h"

static int failures = 0;

/* ids of the small vocabulary below: its line numbers from 0 */
enum { PAD, UNK, CLS, SEP, MASK, HELLO, WORLD, UN, AFF, ABLE, COMMA, BANG, ZHONG, WEN, A, CONT_A, THE, CAT, SAT,
       A_1D165_1D16D, A_1D16D_1D165, SMALL_COUNT };
static const char SMALL[] = "[PAD]\n[UNK]\n[CLS]\n[SEP]\n[MASK]\nhello\nworld\nun\n##aff\n##able\n,\n!\n"
                            "\xe4\xb8\xad\n\xe6\x96\x87\na\n##a\nthe\ncat\nsat\n"
                            "a\xf0\x9d\x85\xa5\xf0\x9d\x85\xad\na\xf0\x9d\x85\xad\xf0\x9d\x85\xa5\n";

/* the ids of text (no [CLS]/[SEP]) equal want[0, n) */
static void check_ids(const ab_wordpiece *wp, const char *text, size_t len, const int32_t *want, size_t n) {
    int32_t *ids = NULL;
    size_t got = 0, cap = 0;
    const int rc = ab_wp_tokenize(wp, text, len, "case", &ids, &got, &cap);
    int same = rc == 0 && got == n;
    for (size_t k = 0; same && k < n; k++) same = ids[k] == want[k];
    if (!same) {
        fprintf(stderr, "FAIL %s:%d: '%.*s': rc %d (%s), %zu ids:", __FILE__, __LINE__, (int)(len > 60 ? 60 : len), text,
                rc, rc ? ab_error() : "ok", got);
        for (size_t k = 0; k < got && k < 20; k++) fprintf(stderr, " %d", ids[k]);
        fprintf(stderr, "; want %zu:", n);
        for (size_t k = 0; k < n && k < 20; k++) fprintf(stderr, " %d", want[k]);
        fputc('\n', stderr);
        failures++;
    }
    free(ids);
}
#define IDS(wp, text, ...)                                                                                   \
    do {                                                                                                     \
        static const int32_t want_[] = {__VA_ARGS__};                                                         \
        check_ids(wp, text, sizeof text - 1, want_, sizeof want_ / sizeof want_[0]);                             \
    } while (0)
#define NO_IDS(wp, text) check_ids(wp, text, sizeof text - 1, NULL, 0) /* text: a literal, NULs included */

static int parse(const char *bytes, size_t n, int lower, ab_wordpiece **wp) {
    return ab_wp_parse(bytes, n, "small-vocab.txt", lower, wp);
}

static void test_basic(const ab_wordpiece *wp) {
    IDS(wp, "H\xc3\xa9llo W\xc3\xb6rld", HELLO, WORLD);                     /* Héllo Wörld */
    IDS(wp, "HELLO WORLD", HELLO, WORLD);
    IDS(wp, "unaffable", UN, AFF, ABLE);
    IDS(wp, "unaff", UN, AFF);
    IDS(wp, "unaffx hello", UNK, HELLO);                                     /* no piece for x: all [UNK] */
    IDS(wp, "goodbye", UNK);
    IDS(wp, "hello,world!", HELLO, COMMA, WORLD, BANG);                      /* punctuation splits */
    IDS(wp, "hello$world", HELLO, UNK, WORLD);                               /* ASCII symbol, not P*: split too */
    IDS(wp, "\xe4\xb8\xad\xe6\x96\x87hello", ZHONG, WEN, HELLO);             /* 中文hello: each CJK alone */
    IDS(wp, "hel\x01lo\x7f wor\xe2\x80\x8bld\xef\xbf\xbd", HELLO, WORLD);    /* controls, U+200B, U+FFFD dropped */
    IDS(wp, "hello\tworld\r\nhello\xc2\xa0world\xe2\x80\xa8hello", HELLO, WORLD, HELLO, WORLD, HELLO);
    IDS(wp, "hello[SEP]world [CLS][MASK]", HELLO, SEP, WORLD, CLS, MASK);    /* special tokens cut out first */
    IDS(wp, "[S\x01" "EP]", UNK, UNK, UNK);                                  /* lowered: '[', 'sep', ']' */
    NO_IDS(wp, "");
    NO_IDS(wp, " \t\r\n \xe3\x80\x80");
    NO_IDS(wp, "\xcc\x81\xcc\x88");                                          /* marks alone strip to nothing */
    /* canonical ordering: U+1D16D (class 226) goes after U+1D165 (216) across U+0301, not across
     * U+0941 (an Mn of class 0); both marks are dropped afterwards */
    IDS(wp, "a\xf0\x9d\x85\xad\xcc\x81\xf0\x9d\x85\xa5", A_1D165_1D16D);
    IDS(wp, "a\xf0\x9d\x85\xad\xe0\xa5\x81\xf0\x9d\x85\xa5", A_1D16D_1D165);
    printf("ok   basic: accents, case, ## pieces, [UNK], punctuation, CJK, controls, spaces, specials, marks\n");
}

static void test_long_words(const ab_wordpiece *wp) {
    char w[2 * 101 + 1];
    int32_t want[100];
    want[0] = A;
    for (int k = 1; k < 100; k++) want[k] = CONT_A;
    memset(w, 'a', 100);
    check_ids(wp, w, 100, want, 100);
    memset(w, 'a', 101);
    check_ids(wp, w, 101, (const int32_t[]){UNK}, 1);
    /* counted in characters after strip accents: 100 x "á" (2 bytes) is 100 characters, 200 bytes */
    for (int k = 0; k < 100; k++) memcpy(w + 2 * k, "\xc3\xa1", 2);
    check_ids(wp, w, 200, want, 100);
    for (int k = 0; k < 101; k++) memcpy(w + 2 * k, "\xc3\xa1", 2);
    check_ids(wp, w, 202, (const int32_t[]){UNK}, 1);
    printf("ok   long words: 100 characters split, 101 -> [UNK]\n");
}

static void test_cased(void) {
    ab_wordpiece *wp;
    AB_CHECK(parse(SMALL, sizeof SMALL - 1, 0, &wp) == 0, "%s", ab_error());
    if (!wp) return;
    IDS(wp, "hello Hello h\xc3\xa9llo", HELLO, UNK, UNK);
    IDS(wp, "[S\x01" "EP]", SEP); /* cleaned into a special token: never split */
    ab_wp_free(wp);
    printf("ok   cased: no lower case, no strip accents, never_split\n");
}

static void check_utf8(const ab_wordpiece *wp, const char *bytes, size_t n, int valid) {
    int32_t ids[8];
    const int rc = ab_wp_encode(wp, bytes, n, NULL, 0, 8, ids, NULL, NULL, NULL, "dev.tsv:17");
    if (valid)
        AB_CHECK(rc == 0, "valid UTF-8 refused: %s", ab_error());
    else
        AB_CHECK(rc != 0 && strstr(ab_error(), "dev.tsv:17") && strstr(ab_error(), "UTF-8"),
                 "invalid UTF-8 accepted or unnamed (rc %d, '%s')", rc, rc ? ab_error() : "");
    /* the second text of a pair is checked too */
    const int rc2 = ab_wp_encode(wp, "hello", 5, bytes, n, 8, ids, NULL, NULL, NULL, "dev.tsv:18");
    AB_CHECK(valid ? rc2 == 0 : rc2 != 0 && strstr(ab_error(), "dev.tsv:18"), "pair: rc %d", rc2);
}

static void test_utf8(const ab_wordpiece *wp) {
    static const struct {
        const char *b;
        size_t n;
    } bad[] = {{"\xc0\x80", 2},          {"\xc1\xbf", 2},         {"\xe0\x80\x80", 3}, {"\xe0\x9f\xbf", 3},
               {"\xed\xa0\x80", 3},      {"\xed\xbf\xbf", 3},     {"\xf0\x80\x80\x80", 4}, {"\xf0\x8f\xbf\xbf", 4},
               {"\xf4\x90\x80\x80", 4},  {"\xf5\x80\x80\x80", 4}, {"\xff", 1},         {"\x80", 1},
               {"ab\xe4\xb8", 4},        {"\xe4\xb8x", 3},        {"\xf0\x9f\x98", 3},  {"hello \xc3", 7}};
    for (size_t k = 0; k < sizeof bad / sizeof bad[0]; k++) check_utf8(wp, bad[k].b, bad[k].n, 0);
    static const char *const good[] = {"\x7f", "\xc2\x80", "\xdf\xbf", "\xe0\xa0\x80", "\xed\x9f\xbf", "\xee\x80\x80",
                                       "\xef\xbf\xbf", "\xf0\x90\x80\x80", "\xf4\x8f\xbf\xbf"};
    for (size_t k = 0; k < sizeof good / sizeof good[0]; k++) check_utf8(wp, good[k], strlen(good[k]), 1);
    printf("ok   UTF-8: overlong, surrogate, > U+10FFFF, truncated, stray bytes refused with file:line\n");
}

/* ab_wp_encode's output equals want (ids, types; mask = 1 up to n_real) */
static void check_encode(const ab_wordpiece *wp, const char *a, const char *b, int max_len, const int32_t *want_ids,
                         const int32_t *want_types, int want_real) {
    int32_t ids[64], types[64], mask[64];
    int n_real = -1;
    const int rc = ab_wp_encode(wp, a, strlen(a), b, b ? strlen(b) : 0, max_len, ids, types, mask, &n_real, "enc");
    int same = rc == 0 && n_real == want_real;
    for (int k = 0; same && k < max_len; k++)
        same = ids[k] == want_ids[k] && types[k] == want_types[k] && mask[k] == (k < want_real);
    AB_CHECK(same, "encode '%s' | '%s' at %d: rc %d (%s), n_real %d (want %d), ids[0..3] %d %d %d %d", a, b ? b : "-",
             max_len, rc, rc ? ab_error() : "ok", n_real, want_real, ids[0], ids[1], ids[2], ids[3]);
}

static void test_encode(const ab_wordpiece *wp) {
    /* exactly max_len: no padding; one position less: the last word goes */
    check_encode(wp, "the cat sat", NULL, 5, (const int32_t[]){CLS, THE, CAT, SAT, SEP}, (const int32_t[]){0, 0, 0, 0, 0},
                 5);
    check_encode(wp, "the cat sat", NULL, 4, (const int32_t[]){CLS, THE, CAT, SEP}, (const int32_t[]){0, 0, 0, 0}, 4);
    check_encode(wp, "", NULL, 5, (const int32_t[]){CLS, SEP, PAD, PAD, PAD}, (const int32_t[]){0, 0, 0, 0, 0}, 2);
    check_encode(wp, "the cat", "hello", 8, (const int32_t[]){CLS, THE, CAT, SEP, HELLO, SEP, PAD, PAD},
                 (const int32_t[]){0, 0, 0, 0, 1, 1, 0, 0}, 6);
    check_encode(wp, "", "", 3, (const int32_t[]){CLS, SEP, SEP}, (const int32_t[]){0, 0, 1}, 3);
    /* longest_first: 6 + 3 tokens into 5: a loses 3 (6 > 3, 5 > 3, 4 > 3), then the tie costs b one */
    check_encode(wp, "the cat sat the cat sat", "hello world hello", 8,
                 (const int32_t[]){CLS, THE, CAT, SAT, SEP, HELLO, WORLD, SEP}, (const int32_t[]){0, 0, 0, 0, 0, 1, 1, 1}, 8);
    /* b the longer: 2 + 6 into 3, b loses 4 down to a's length, then one more on the tie */
    check_encode(wp, "hello world", "the cat sat the cat sat", 6, (const int32_t[]){CLS, HELLO, WORLD, SEP, THE, SEP},
                 (const int32_t[]){0, 0, 0, 0, 1, 1}, 6);
    check_encode(wp, "the cat sat the cat sat", "hello", 3, (const int32_t[]){CLS, SEP, SEP}, (const int32_t[]){0, 0, 1},
                 3);
    int32_t ids[2];
    AB_CHECK(ab_wp_encode(wp, "a", 1, NULL, 0, 2, ids, NULL, NULL, NULL, "enc") != 0 && strstr(ab_error(), "enc"),
             "max_len 2 accepted");
    printf("ok   encode: max_len reached exactly, empty line, padding, pairs, longest_first truncation\n");
}

static void test_vocab(void) {
    ab_wordpiece *wp;
    /* \r\n and \r end lines too; a trailing space is part of a token; a repeated token keeps the
     * later line; no final newline; no [MASK]: Hugging Face adds it as id "number of distinct
     * tokens", 7, which with a repeated line is also the last line's id (so it does) */
    static const char v[] = "[PAD]\r\n[UNK]\r[CLS]\n[SEP]\nhi \nhi\nhi\nyo";
    AB_CHECK(parse(v, sizeof v - 1, 1, &wp) == 0, "%s", ab_error());
    if (wp) {
        AB_CHECK(ab_wp_special_id(wp, AB_WP_PAD) == 0 && ab_wp_special_id(wp, AB_WP_UNK) == 1 &&
                     ab_wp_special_id(wp, AB_WP_CLS) == 2 && ab_wp_special_id(wp, AB_WP_SEP) == 3,
                 "special ids %d %d %d %d", ab_wp_special_id(wp, AB_WP_PAD), ab_wp_special_id(wp, AB_WP_UNK),
                 ab_wp_special_id(wp, AB_WP_CLS), ab_wp_special_id(wp, AB_WP_SEP));
        AB_CHECK(ab_wp_token_id(wp, "hi ", 3) == 4 && ab_wp_token_id(wp, "hi", 2) == 6 && ab_wp_token_id(wp, "yo", 2) == 7,
                 "'hi ' %d, 'hi' %d, 'yo' %d", ab_wp_token_id(wp, "hi ", 3), ab_wp_token_id(wp, "hi", 2),
                 ab_wp_token_id(wp, "yo", 2));
        AB_CHECK(ab_wp_special_id(wp, AB_WP_MASK) == 7 && ab_wp_vocab_size(wp) == 8, "[MASK] %d, size %d",
                 ab_wp_special_id(wp, AB_WP_MASK), ab_wp_vocab_size(wp));
        IDS(wp, "hi yo [MASK]", 6, 7, 7);
        ab_wp_free(wp);
    }
    wp = (ab_wordpiece *)1;
    AB_CHECK(parse("", 0, 1, &wp) != 0 && wp == NULL && strstr(ab_error(), "small-vocab.txt") &&
                 strstr(ab_error(), "empty"),
             "empty vocabulary: '%s'", ab_error());
    AB_CHECK(parse("[PAD]\n[UNK]\n[CLS]\n", 18, 1, &wp) != 0 && strstr(ab_error(), "[SEP]"), "no [SEP]: '%s'",
             ab_error());
    char dir[64], path[128];
    snprintf(dir, sizeof dir, "/tmp/ab_test_wordpiece.%ld", (long)getpid());
    snprintf(path, sizeof path, "%s/vocab.txt", dir);
    AB_CHECK(ab_wp_load(path, 1, &wp) != 0 && strstr(ab_error(), path), "missing file: '%s'", ab_error());
    if (mkdir(dir, 0700) == 0) {
        FILE *f = fopen(path, "wb");
        if (f) {
            fputs("[PAD]\n[UNK]\ncaf\xc3\n[CLS]\n[SEP]\n", f); /* line 3: a truncated sequence */
            fclose(f);
        }
        char want[160];
        snprintf(want, sizeof want, "%s:3:", path);
        AB_CHECK(ab_wp_load(path, 1, &wp) != 0 && strstr(ab_error(), want) && strstr(ab_error(), "UTF-8"),
                 "invalid UTF-8 on line 3: '%s'", ab_error());
        f = fopen(path, "wb");
        if (f) {
            fputs(SMALL, f);
            fclose(f);
        }
        AB_CHECK(ab_wp_load(path, 1, &wp) == 0 && ab_wp_vocab_size(wp) == SMALL_COUNT, "%s", ab_error());
        ab_wp_free(wp);
        unlink(path);
        rmdir(dir);
    }
    printf("ok   vocabulary: line endings, duplicates, [MASK] added, errors name the file (and line)\n");
}

/* bert-base-uncased, ids from BertTokenizer.from_pretrained of transformers 4.30.2 */
static void test_real(void) {
    const char *path = AB_DEFAULT_DATA_ROOT "/bert-base-uncased/vocab.txt";
    struct stat st;
    if (stat(path, &st) != 0) {
        printf("SKIPPED real vocabulary: no %s\n", path);
        return;
    }
    ab_wordpiece *wp;
    AB_CHECK(ab_wp_load(path, 1, &wp) == 0, "%s", ab_error());
    if (!wp) return;
    AB_CHECK(ab_wp_vocab_size(wp) == 30522 && ab_wp_special_id(wp, AB_WP_PAD) == 0 &&
                 ab_wp_special_id(wp, AB_WP_UNK) == 100 && ab_wp_special_id(wp, AB_WP_CLS) == 101 &&
                 ab_wp_special_id(wp, AB_WP_SEP) == 102 && ab_wp_special_id(wp, AB_WP_MASK) == 103,
             "size %d", ab_wp_vocab_size(wp));
    IDS(wp, "H\xc3\xa9llo W\xc3\xb6rld", 7592, 2088);
    IDS(wp, "unaffable", 14477, 20961, 3468); /* una ##ffa ##ble */
    IDS(wp, "\xe4\xb8\xad\xe6\x96\x87\xe5\xad\x97 hi", 1746, 1861, 100, 7632); /* 中 文 [UNK] hi */
    IDS(wp, "hello, world! (it's) $5.", 7592, 1010, 2088, 999, 1006, 2009, 1005, 1055, 1007, 1002, 1019, 1012);
    IDS(wp, "\xc4\xb0stanbul", 9960);                                  /* İ lowers to i + U+0307 */
    IDS(wp, "\xce\x9f\xce\x94\xce\x9f\xce\xa3", 1169, 29722, 29730, 29733); /* ΟΔΟΣ: σ, not final ς */
    IDS(wp, "x[SEP]y", 1060, 102, 1061);
    IDS(wp, "caf\xc3\xa9 na\xc3\xafve", 7668, 15743);
    IDS(wp, "hel\x01lo\x00 wor\xe2\x80\x8bld\xef\xbf\xbd", 7592, 2088);
    char w[101];
    memset(w, 'a', sizeof w);
    int32_t want[50] = {13360}; /* aaa ##aa x 48 ##a */
    for (int k = 1; k < 49; k++) want[k] = 11057;
    want[49] = 2050;
    check_ids(wp, w, 100, want, 50);
    check_ids(wp, w, 101, (const int32_t[]){100}, 1);
    int32_t ids[10], types[10], mask[10];
    int n_real = 0;
    static const int32_t pair_ids[] = {101, 1996, 4248, 2829, 4419, 102, 1037, 13971, 3899, 102};
    static const int32_t pair_types[] = {0, 0, 0, 0, 0, 0, 1, 1, 1, 1};
    const char *a = "the quick brown fox jumps over", *b = "a lazy dog sleeps";
    AB_CHECK(ab_wp_encode(wp, a, strlen(a), b, strlen(b), 10, ids, types, mask, &n_real, "real") == 0 && n_real == 10 &&
                 memcmp(ids, pair_ids, sizeof ids) == 0 && memcmp(types, pair_types, sizeof types) == 0,
             "real pair at max_len 10");
    ab_wp_free(wp);
    printf("ok   real vocabulary (%s): ids as BertTokenizer gives them\n", path);
}

int main(void) {
    ab_wordpiece *wp;
    if (parse(SMALL, sizeof SMALL - 1, 1, &wp) != 0) {
        fprintf(stderr, "FAIL small vocabulary: %s\n", ab_error());
        return 1;
    }
    if (ab_wp_vocab_size(wp) != SMALL_COUNT) {
        fprintf(stderr, "FAIL small vocabulary: %d ids, want %d\n", ab_wp_vocab_size(wp), SMALL_COUNT);
        return 1;
    }
    test_basic(wp);
    test_long_words(wp);
    test_utf8(wp);
    test_encode(wp);
    ab_wp_free(wp);
    test_cased();
    test_vocab();
    test_real();
    printf("tables: Unicode %s\n", ab_wp_unicode_version());
    if (failures) fprintf(stderr, "test_wordpiece: %d failure(s)\n", failures);
    return failures ? 1 : 0;
}
