/* Prints the WordPiece encoding of each line of stdin, for peers/checks/tokenizer_check.py: a line is
 * "a" or "a<TAB>b"; the answer is one line "ids<TAB>types<TAB>mask", each space-separated, of
 * max_len positions (max_len 0: the ids of the whole line alone, no [CLS]/[SEP], no padding).
 *   wordpiece_dump VOCAB MAX_LEN [--cased]
 * A line that fails prints "error: <message>" in its place; the exit status is then 1. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ab.h"
#include "wordpiece.h"

static void print_ints(const int32_t *v, size_t n, int last) {
    for (size_t k = 0; k < n; k++) printf(k ? " %d" : "%d", v[k]);
    putchar(last ? '\n' : '\t');
}

int main(int argc, char **argv) {
    if (argc < 3 || argc > 4 || (argc == 4 && strcmp(argv[3], "--cased") != 0)) {
        fprintf(stderr, "usage: wordpiece_dump VOCAB MAX_LEN [--cased]\n");
        return 2;
    }
    char *end;
    const long max_len = strtol(argv[2], &end, 10);
    if (*end || max_len < 0 || max_len > 1 << 20 || (max_len > 0 && max_len < 3)) {
        fprintf(stderr, "wordpiece_dump: MAX_LEN '%s' is not 0 or a whole number from 3 to %d\n", argv[2], 1 << 20);
        return 2;
    }
    ab_wordpiece *wp;
    if (ab_wp_load(argv[1], argc < 4, &wp) != 0) {
        fprintf(stderr, "wordpiece_dump: %s\n", ab_error());
        return 1;
    }
    int32_t *ids = malloc((size_t)(max_len ? max_len : 1) * 3 * sizeof *ids), *raw = NULL;
    size_t n_raw = 0, cap_raw = 0, cap_line = 0;
    char *line = NULL, where[64];
    ssize_t len;
    int failed = !ids;
    for (long lineno = 1; ids && (len = getline(&line, &cap_line, stdin)) >= 0; lineno++) {
        if (len > 0 && line[len - 1] == '\n') line[--len] = 0;
        snprintf(where, sizeof where, "stdin:%ld", lineno);
        int rc;
        if (max_len == 0) {
            rc = ab_wp_tokenize(wp, line, (size_t)len, where, &raw, &n_raw, &cap_raw);
            if (rc == 0) print_ints(raw, n_raw, 1);
        } else {
            const char *tab = memchr(line, '\t', (size_t)len);
            const size_t alen = tab ? (size_t)(tab - line) : (size_t)len;
            rc = ab_wp_encode(wp, line, alen, tab ? tab + 1 : NULL, tab ? (size_t)len - alen - 1 : 0, (int)max_len,
                              ids, ids + max_len, ids + 2 * max_len, NULL, where);
            if (rc == 0) {
                print_ints(ids, (size_t)max_len, 0);
                print_ints(ids + max_len, (size_t)max_len, 0);
                print_ints(ids + 2 * max_len, (size_t)max_len, 1);
            }
        }
        if (rc != 0) {
            printf("error: %s\n", ab_error());
            failed = 1;
        }
    }
    if (!ids) fprintf(stderr, "wordpiece_dump: out of host memory\n");
    free(line);
    free(raw);
    free(ids);
    ab_wp_free(wp);
    return failed;
}
