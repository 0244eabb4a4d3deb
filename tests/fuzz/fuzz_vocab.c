/* libFuzzer target for the WordPiece vocabulary reader and encoder (wordpiece.c). The input is
 * flags byte, extra vocabulary lines, 0xFF, text ("a" or "a<TAB>b"): the bytes after the flags
 * are read whole as a vocabulary from memory (ab_wp_parse) and as a file (ab_wp_load), which must
 * agree; then a small vocabulary with the special tokens plus the extra lines encodes the text,
 * which must give a well-formed sequence exactly when the text is valid UTF-8 by a decoder of
 * this file's own, and the single-text encoding must be [CLS] + the first ids of ab_wp_tokenize. */
#include "fuzz_file.h"

#include "ab.h"
#include "wordpiece.h"

static fuzz_file file;

static const char BASE[] = "[PAD]\n[UNK]\n[CLS]\n[SEP]\n[MASK]\nhello\nworld\n##s\nun\n##aff\n##able\na\n##a\n,\n"
                           "\xc3\xa9\n##\xc3\xa9\n\xe4\xb8\xad\n";

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc, (void)argv;
    fuzz_file_open(&file, "vocab");
    return 0;
}

/* strict UTF-8 (RFC 3629) by decoding: shortest form, no surrogates, nothing above U+10FFFF */
static int valid_utf8(const uint8_t *s, size_t n) {
    for (size_t i = 0; i < n;) {
        const uint8_t c = s[i];
        size_t len = c < 0x80 ? 1 : (c & 0xE0) == 0xC0 ? 2 : (c & 0xF0) == 0xE0 ? 3 : (c & 0xF8) == 0xF0 ? 4 : 0;
        if (!len || i + len > n) return 0;
        uint32_t cp = len == 1 ? c : c & (0x7F >> len);
        for (size_t k = 1; k < len; k++) {
            if ((s[i + k] & 0xC0) != 0x80) return 0;
            cp = cp << 6 | (s[i + k] & 0x3F);
        }
        static const uint32_t min_cp[5] = {0, 0, 0x80, 0x800, 0x10000};
        if (cp < min_cp[len] || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return 0;
        i += len;
    }
    return 1;
}

static void check_vocab_whole(const uint8_t *data, size_t size, int lower) {
    static const char name[] = "fuzz-vocab.txt";
    ab_wordpiece *a = NULL, *b = NULL;
    const int rc_parse = ab_wp_parse(data, size, name, lower, &a);
    if (rc_parse != 0) FUZZ_CHECK(a == NULL && strstr(ab_error(), name) != NULL);
    fuzz_file_set(&file, data, size);
    const int rc_load = ab_wp_load(file.path, lower, &b);
    FUZZ_CHECK(rc_parse == rc_load);
    if (rc_load != 0) {
        FUZZ_CHECK(b == NULL && strstr(ab_error(), file.path) != NULL);
        return;
    }
    /* a vocabulary that loads is valid UTF-8 line by line, hence as a whole */
    FUZZ_CHECK(valid_utf8(data, size));
    for (int k = 0; k < AB_WP_SPECIAL_COUNT; k++) {
        const int32_t id = ab_wp_special_id(a, (ab_wp_special)k);
        FUZZ_CHECK(id >= 0 && id < ab_wp_vocab_size(a) && id == ab_wp_special_id(b, (ab_wp_special)k));
    }
    FUZZ_CHECK(ab_wp_vocab_size(a) == ab_wp_vocab_size(b) && ab_wp_vocab_size(a) <= (int32_t)size + 1);
    ab_wp_free(a);
    ab_wp_free(b);
}

static void check_encode(const uint8_t *extra, size_t extra_n, const uint8_t *text, size_t text_n, int lower,
                         int max_len) {
    char *vocab = malloc(sizeof BASE - 1 + extra_n);
    if (!vocab) fuzz_die("malloc");
    memcpy(vocab, BASE, sizeof BASE - 1);
    memcpy(vocab + sizeof BASE - 1, extra, extra_n);
    ab_wordpiece *wp = NULL;
    const int rc = ab_wp_parse(vocab, sizeof BASE - 1 + extra_n, "fuzz-base", lower, &wp);
    free(vocab);
    /* the extra lines hold no 0xFF (the cut) and start a line of their own: only bad UTF-8 fails */
    FUZZ_CHECK((rc == 0) == valid_utf8(extra, extra_n));
    if (rc != 0) return;
    const int32_t size = ab_wp_vocab_size(wp), cls = ab_wp_special_id(wp, AB_WP_CLS),
                  sep = ab_wp_special_id(wp, AB_WP_SEP), pad = ab_wp_special_id(wp, AB_WP_PAD);
    const uint8_t *tab = memchr(text, '\t', text_n);
    const size_t a_n = tab ? (size_t)(tab - text) : text_n;
    int32_t ids[3 * 64];
    int n_real = -1;
    const int valid = valid_utf8(text, text_n);
    const int erc = ab_wp_encode(wp, (const char *)text, a_n, tab ? (const char *)tab + 1 : NULL,
                                 tab ? text_n - a_n - 1 : 0, max_len, ids, ids + 64, ids + 128, &n_real, "fuzz-text:1");
    if (erc != 0) {
        FUZZ_CHECK(!valid && strstr(ab_error(), "fuzz-text:1") && strstr(ab_error(), "UTF-8"));
        ab_wp_free(wp);
        return;
    }
    FUZZ_CHECK(valid && n_real >= (tab ? 3 : 2) && n_real <= max_len && ids[0] == cls && ids[n_real - 1] == sep);
    int first_b = n_real; /* types: 0 up to the first [SEP], then 1 (b and its [SEP]) */
    for (int k = 0; k < n_real; k++)
        if (ids[64 + k] == 1) {
            first_b = k;
            break;
        }
    if (tab)
        FUZZ_CHECK(first_b >= 2 && first_b < n_real && ids[first_b - 1] == sep);
    else
        FUZZ_CHECK(first_b == n_real);
    for (int k = 0; k < max_len; k++) {
        const int32_t id = ids[k], type = ids[64 + k], mask = ids[128 + k];
        FUZZ_CHECK(id >= 0 && id < size && mask == (k < n_real) && type == (k >= first_b && k < n_real));
        if (k >= n_real) FUZZ_CHECK(id == pad);
    }
    if (!tab) { /* [CLS] + the first max_len - 2 ids of the text + [SEP] */
        int32_t *t = NULL;
        size_t n = 0, cap = 0;
        FUZZ_CHECK(ab_wp_tokenize(wp, (const char *)text, text_n, "fuzz-text:1", &t, &n, &cap) == 0);
        const size_t keep = n < (size_t)max_len - 2 ? n : (size_t)max_len - 2;
        FUZZ_CHECK((size_t)n_real == keep + 2);
        for (size_t k = 0; k < keep; k++) FUZZ_CHECK(ids[1 + k] == t[k] && t[k] >= 0 && t[k] < size);
        free(t);
    }
    ab_wp_free(wp);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size == 0) return 0;
    const int lower = !(data[0] & 1), max_len = 3 + (data[0] >> 1) % 62;
    data++, size--;
    check_vocab_whole(data, size, lower);
    const uint8_t *cut = memchr(data, 0xFF, size);
    const size_t extra_n = cut ? (size_t)(cut - data) : 0;
    const uint8_t *text = cut ? cut + 1 : data;
    check_encode(data, extra_n, text, size - (size_t)(text - data), lower, max_len);
    return 0;
}
