/* WordPiece tokenizer: Hugging Face's BertTokenizer.tokenize (the split on special tokens, then
 * BasicTokenizer and WordpieceTokenizer) over code points, and the [CLS] a [SEP] b [SEP] encoding
 * of one or two texts into max_len ids, types and mask. The steps follow transformers 4.30's
 * tokenization_utils.py and models/bert/tokenization_bert.py in order; each says which. */
#include "wordpiece.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "ab.h"
#include "unicode_tables.h"

static const char *const special_names[] = {"[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"};
_Static_assert(sizeof special_names / sizeof special_names[0] == AB_WP_SPECIAL_COUNT, "special token names");

typedef struct {
    uint32_t off, len; /* bytes of the token in ab_wordpiece.bytes */
    int32_t id;
} wp_entry;

struct ab_wordpiece {
    char *bytes;        /* the file's bytes: entries point into it */
    wp_entry *entries;  /* (n_entries) distinct tokens */
    uint32_t *slots;    /* (slot_mask + 1) open addressing: entry index + 1, 0 for empty */
    size_t slot_mask, n_entries, n_lines, max_bytes;
    int lower;
    int32_t special[AB_WP_SPECIAL_COUNT];
};

/* ---- UTF-8 ---- */

/* Checks one sequence at s[i] as Python's strict decoder does; returns its length, or 0 and why. */
static size_t utf8_check(const uint8_t *s, size_t n, size_t i, const char **why) {
    const uint8_t c = s[i];
    if (c < 0x80) return 1;
    size_t len;
    uint8_t lo = 0x80, hi = 0xBF; /* allowed range of the second byte */
    if (c < 0xC2) {
        *why = c < 0xC0 ? "a continuation byte with no lead byte" : "an overlong encoding";
        return 0;
    } else if (c < 0xE0) {
        len = 2;
    } else if (c < 0xF0) {
        len = 3;
        if (c == 0xE0) lo = 0xA0;
        if (c == 0xED) hi = 0x9F;
    } else if (c < 0xF5) {
        len = 4;
        if (c == 0xF0) lo = 0x90;
        if (c == 0xF4) hi = 0x8F;
    } else {
        *why = "a byte that starts no code point up to U+10FFFF";
        return 0;
    }
    for (size_t k = 1; k < len; k++) {
        if (i + k >= n || (s[i + k] & 0xC0) != 0x80) {
            *why = "a truncated sequence";
            return 0;
        }
        if (k == 1 && (s[i + 1] < lo || s[i + 1] > hi)) {
            *why = c == 0xED ? "a surrogate" : c == 0xF4 ? "a code point above U+10FFFF" : "an overlong encoding";
            return 0;
        }
    }
    return len;
}

/* 0, or the offset of the first invalid sequence + 1 (and why) */
static size_t utf8_invalid_at(const uint8_t *s, size_t n, const char **why) {
    size_t i = 0;
    while (i < n) {
        if (s[i] < 0x80) {
            i++;
            continue;
        }
        const size_t len = utf8_check(s, n, i, why);
        if (!len) return i + 1;
        i += len;
    }
    return 0;
}

/* decodes the valid sequence at s[*i] */
static uint32_t utf8_next(const uint8_t *s, size_t *i) {
    const uint8_t c = s[*i];
    if (c < 0x80) {
        *i += 1;
        return c;
    }
    if (c < 0xE0) {
        const uint32_t cp = (uint32_t)(c & 0x1F) << 6 | (s[*i + 1] & 0x3F);
        *i += 2;
        return cp;
    }
    if (c < 0xF0) {
        const uint32_t cp = (uint32_t)(c & 0x0F) << 12 | (uint32_t)(s[*i + 1] & 0x3F) << 6 | (s[*i + 2] & 0x3F);
        *i += 3;
        return cp;
    }
    const uint32_t cp = (uint32_t)(c & 0x07) << 18 | (uint32_t)(s[*i + 1] & 0x3F) << 12 |
                        (uint32_t)(s[*i + 2] & 0x3F) << 6 | (s[*i + 3] & 0x3F);
    *i += 4;
    return cp;
}

static size_t utf8_put(uint32_t cp, char *o) {
    if (cp < 0x80) {
        o[0] = (char)cp;
        return 1;
    }
    if (cp < 0x800) {
        o[0] = (char)(0xC0 | cp >> 6);
        o[1] = (char)(0x80 | (cp & 0x3F));
        return 2;
    }
    if (cp < 0x10000) {
        o[0] = (char)(0xE0 | cp >> 12);
        o[1] = (char)(0x80 | (cp >> 6 & 0x3F));
        o[2] = (char)(0x80 | (cp & 0x3F));
        return 3;
    }
    o[0] = (char)(0xF0 | cp >> 18);
    o[1] = (char)(0x80 | (cp >> 12 & 0x3F));
    o[2] = (char)(0x80 | (cp >> 6 & 0x3F));
    o[3] = (char)(0x80 | (cp & 0x3F));
    return 4;
}

/* ---- character properties (unicode_tables.c) ---- */

static int uc_class(uint32_t cp) {
    if (cp < 0x80) {
        if (cp < 0x20 || cp == 0x7F) return AB_UC_CONTROL;
        if (cp == 0x20) return AB_UC_SPACE;
        return AB_UC_OTHER; /* ASCII punctuation is tested by range, in is_punct */
    }
    size_t lo = 0, hi = ab_uc_class_count; /* last start <= cp */
    while (hi - lo > 1) {
        const size_t mid = (lo + hi) / 2;
        if (ab_uc_class[mid] >> AB_UC_CLASS_BITS <= cp)
            lo = mid;
        else
            hi = mid;
    }
    return (int)(ab_uc_class[lo] & ((1u << AB_UC_CLASS_BITS) - 1));
}

/* _is_punctuation: all non-alphanumeric printable ASCII, and Unicode P* */
static int is_punct(uint32_t cp) {
    if (cp < 0x80)
        return (cp >= 33 && cp <= 47) || (cp >= 58 && cp <= 64) || (cp >= 91 && cp <= 96) || (cp >= 123 && cp <= 126);
    return uc_class(cp) == AB_UC_PUNCT;
}

/* _is_chinese_char: the CJK Unified Ideographs blocks exactly as BasicTokenizer lists them */
static int is_cjk(uint32_t cp) {
    return (cp >= 0x4E00 && cp <= 0x9FFF) || (cp >= 0x3400 && cp <= 0x4DBF) || (cp >= 0x20000 && cp <= 0x2A6DF) ||
           (cp >= 0x2A700 && cp <= 0x2B73F) || (cp >= 0x2B740 && cp <= 0x2B81F) || (cp >= 0x2B820 && cp <= 0x2CEAF) ||
           (cp >= 0xF900 && cp <= 0xFAFF) || (cp >= 0x2F800 && cp <= 0x2FA1F);
}

static int is_split_extra(uint32_t cp) {
    for (size_t k = 0; k < ab_uc_split_extra_count; k++)
        if (ab_uc_split_extra[k] == cp) return 1;
    return 0;
}

/* the value of a table: one code point, or a run of ab_uc_seq */
static const uint32_t *uc_value_seq(const uint32_t *value, size_t *n) {
    if (!(*value & AB_UC_SEQ)) {
        *n = 1;
        return value;
    }
    *n = *value & 7;
    return ab_uc_seq + ((*value & ~AB_UC_SEQ) >> 3);
}

/* str.lower() of one code point: *n code points */
static const uint32_t *uc_lower(const uint32_t *cp, uint32_t *tmp, size_t *n) {
    *n = 1;
    if (*cp < 0x80) {
        if (*cp >= 'A' && *cp <= 'Z') {
            *tmp = *cp + 32;
            return tmp;
        }
        return cp;
    }
    for (size_t k = 0; k < ab_uc_lower_long_count; k++)
        if (ab_uc_lower_long[k].cp == *cp) return uc_value_seq(&ab_uc_lower_long[k].value, n);
    size_t lo = 0, hi = ab_uc_lower_count;
    while (lo < hi) { /* first range with hi >= cp */
        const size_t mid = (lo + hi) / 2;
        if (ab_uc_lower[mid].hi < *cp)
            lo = mid + 1;
        else
            hi = mid;
    }
    if (lo < ab_uc_lower_count) {
        const ab_uc_delta_range *r = &ab_uc_lower[lo];
        if (*cp >= r->lo && (*cp - r->lo) % r->stride == 0) {
            *tmp = (uint32_t)((int64_t)*cp + r->delta);
            return tmp;
        }
    }
    return cp;
}

/* NFD without the Mn marks, for a code point outside Hangul and the marks */
static const uint32_t *uc_strip(const uint32_t *cp, size_t *n) {
    size_t lo = 0, hi = ab_uc_strip_keys_count;
    while (lo < hi) {
        const size_t mid = (lo + hi) / 2;
        if (ab_uc_strip_keys[mid].hi < *cp)
            lo = mid + 1;
        else
            hi = mid;
    }
    if (lo < ab_uc_strip_keys_count && *cp >= ab_uc_strip_keys[lo].lo)
        return uc_value_seq(&ab_uc_strip_values[ab_uc_strip_keys[lo].first + *cp - ab_uc_strip_keys[lo].lo], n);
    *n = 1;
    return cp;
}

static int uc_reorder_ccc(uint32_t cp) {
    size_t lo = 0, hi = ab_uc_reorder_ccc_count;
    while (lo < hi) {
        const size_t mid = (lo + hi) / 2;
        if (ab_uc_reorder_ccc[mid].cp < cp)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo < ab_uc_reorder_ccc_count && ab_uc_reorder_ccc[lo].cp == cp ? (int)ab_uc_reorder_ccc[lo].value : 0;
}

const char *ab_wp_unicode_version(void) { return ab_uc_unicode_version; }

/* ---- vocabulary ---- */

#define FNV_INIT 0xcbf29ce484222325ull

static uint64_t fnv(uint64_t h, const char *s, size_t n) {
    for (size_t i = 0; i < n; i++) h = (h ^ (uint8_t)s[i]) * 0x100000001b3ull;
    return h;
}

static size_t slot_of(uint64_t h, size_t mask) { return (size_t)(h ^ h >> 31) & mask; }

/* the id of "##" s (cont) or s, or -1 */
static int32_t vocab_find(const ab_wordpiece *wp, int cont, const char *s, size_t n) {
    const size_t pre = cont ? 2 : 0;
    if (n + pre > wp->max_bytes) return -1;
    const uint64_t h = fnv(cont ? fnv(FNV_INIT, "##", 2) : FNV_INIT, s, n);
    for (size_t i = slot_of(h, wp->slot_mask);; i = (i + 1) & wp->slot_mask) {
        const uint32_t e = wp->slots[i];
        if (!e) return -1;
        const wp_entry *t = &wp->entries[e - 1];
        const char *b = wp->bytes + t->off;
        if (t->len == n + pre && (!cont || (b[0] == '#' && b[1] == '#')) && memcmp(b + pre, s, n) == 0) return t->id;
    }
}

int32_t ab_wp_token_id(const ab_wordpiece *wp, const char *token, size_t len) {
    return vocab_find(wp, 0, token, len);
}

int32_t ab_wp_vocab_size(const ab_wordpiece *wp) {
    const int32_t lines = (int32_t)wp->n_lines;
    return wp->special[AB_WP_MASK] + 1 > lines ? wp->special[AB_WP_MASK] + 1 : lines;
}

int32_t ab_wp_special_id(const ab_wordpiece *wp, ab_wp_special which) {
    return (unsigned)which < AB_WP_SPECIAL_COUNT ? wp->special[which] : -1;
}

void ab_wp_free(ab_wordpiece *wp) {
    if (!wp) return;
    free(wp->bytes);
    free(wp->entries);
    free(wp->slots);
    free(wp);
}

/* Python's readlines() in text mode: a line ends at \n, \r or \r\n; a last line may have none */
static size_t line_end(const char *s, size_t n, size_t i, size_t *next) {
    while (i < n && s[i] != '\n' && s[i] != '\r') i++;
    *next = i < n ? (s[i] == '\r' && i + 1 < n && s[i + 1] == '\n' ? i + 2 : i + 1) : n;
    return i;
}

int ab_wp_parse(const void *bytes, size_t size, const char *name, int lower, ab_wordpiece **out) {
    *out = NULL;
    const char *s = bytes;
    if (size == 0) return ab_errorf("%s: empty vocabulary (no tokens)", name);
    if (size >= UINT32_MAX) return ab_errorf("%s: %zu bytes, more than a vocabulary this reader takes", name, size);
    size_t n_lines = 0;
    for (size_t i = 0, next; i < size; i = next, n_lines++) line_end(s, size, i, &next);
    if (n_lines > INT32_MAX / 2) return ab_errorf("%s: %zu lines, more than a vocabulary this reader takes", name, n_lines);
    size_t slots = 16;
    while (slots < 2 * n_lines) slots *= 2;
    ab_wordpiece *wp = calloc(1, sizeof *wp);
    if (wp) {
        wp->bytes = malloc(size);
        wp->entries = malloc(n_lines * sizeof *wp->entries);
        wp->slots = calloc(slots, sizeof *wp->slots);
    }
    if (!wp || !wp->bytes || !wp->entries || !wp->slots) {
        ab_wp_free(wp);
        return ab_errorf("%s: out of host memory for a vocabulary of %zu lines", name, n_lines);
    }
    memcpy(wp->bytes, s, size);
    wp->slot_mask = slots - 1;
    wp->n_lines = n_lines;
    wp->lower = lower != 0;
    size_t line = 0;
    for (size_t i = 0, next; i < size; i = next, line++) {
        const size_t end = line_end(s, size, i, &next), len = end - i;
        const char *why = NULL;
        const size_t bad = utf8_invalid_at((const uint8_t *)s + i, len, &why);
        if (bad) {
            ab_wp_free(wp);
            return ab_errorf("%s:%zu: invalid UTF-8 (%s at byte %zu of the line)", name, line + 1, why, bad);
        }
        const uint64_t h = fnv(FNV_INIT, s + i, len);
        size_t k = slot_of(h, wp->slot_mask);
        for (; wp->slots[k]; k = (k + 1) & wp->slot_mask) {
            const wp_entry *t = &wp->entries[wp->slots[k] - 1];
            if (t->len == len && memcmp(wp->bytes + t->off, s + i, len) == 0) break;
        }
        if (wp->slots[k]) { /* a token seen before: as in a Python dict, the later line's id */
            wp->entries[wp->slots[k] - 1].id = (int32_t)line;
            continue;
        }
        wp->entries[wp->n_entries] = (wp_entry){(uint32_t)i, (uint32_t)len, (int32_t)line};
        wp->slots[k] = (uint32_t)++wp->n_entries;
        if (len > wp->max_bytes) wp->max_bytes = len;
    }
    for (int k = 0; k < AB_WP_SPECIAL_COUNT; k++) {
        wp->special[k] = vocab_find(wp, 0, special_names[k], strlen(special_names[k]));
        if (wp->special[k] >= 0) continue;
        if (k == AB_WP_MASK) { /* from_pretrained adds it as a new token, numbered after the distinct ones */
            wp->special[k] = (int32_t)wp->n_entries;
            continue;
        }
        ab_wp_free(wp);
        return ab_errorf("%s: no %s line (a BERT vocabulary holds [PAD], [UNK], [CLS] and [SEP])", name,
                         special_names[k]);
    }
    *out = wp;
    return 0;
}

int ab_wp_load(const char *vocab_path, int lower, ab_wordpiece **out) {
    *out = NULL;
    FILE *f = fopen(vocab_path, "rb");
    if (!f) return ab_errorf("%s: cannot open (%s)", vocab_path, strerror(errno));
    struct stat st;
    if (fstat(fileno(f), &st) != 0 || !S_ISREG(st.st_mode)) {
        fclose(f);
        return ab_errorf("%s: not a regular file", vocab_path);
    }
    const size_t size = (size_t)st.st_size;
    char *buf = malloc(size ? size : 1);
    if (!buf) {
        fclose(f);
        return ab_errorf("%s: out of host memory for %zu bytes", vocab_path, size);
    }
    const size_t got = fread(buf, 1, size, f);
    const int err = ferror(f);
    fclose(f);
    const int rc = got != size || err ? ab_errorf("%s: read %zu of %zu bytes", vocab_path, got, size)
                                      : ab_wp_parse(buf, size, vocab_path, lower, out);
    free(buf);
    return rc;
}

/* ---- tokenizer ---- */

typedef struct {
    uint32_t *v;
    size_t n, cap;
} u32buf;

/* scratch of one call (the tokenizer itself stays read-only, so threads may share it) */
typedef struct {
    const ab_wordpiece *wp;
    u32buf text, clean, word;
    char utf8[4 * AB_WP_MAX_WORD_CHARS];
    uint32_t off[AB_WP_MAX_WORD_CHARS + 1]; /* byte offset of each character of the word in utf8 */
    int32_t **ids;
    size_t *n, *cap;
    int oom;
} wp_work;

/* p grown to room for need elements (doubling), or NULL with p left as it was */
static void *grow(void *p, size_t *cap, size_t need, size_t elem) {
    size_t c = *cap ? *cap : 64;
    while (c < need) c *= 2;
    void *q = realloc(p, c * elem);
    if (q) *cap = c;
    return q;
}

static void push_u32(wp_work *w, u32buf *b, uint32_t v) {
    if (b->n == b->cap) {
        uint32_t *q = grow(b->v, &b->cap, b->n + 1, sizeof *q);
        if (!q) {
            w->oom = 1;
            return;
        }
        b->v = q;
    }
    b->v[b->n++] = v;
}

static void push_id(wp_work *w, int32_t id) {
    if (*w->n == *w->cap) {
        int32_t *q = grow(*w->ids, w->cap, *w->n + 1, sizeof *q);
        if (!q) {
            w->oom = 1;
            return;
        }
        *w->ids = q;
    }
    (*w->ids)[(*w->n)++] = id;
}

/* WordpieceTokenizer.tokenize of one word: greedy longest match first, "##" after the start,
 * [UNK] for the whole word when a piece has no match or the word is over 100 characters */
static void wordpiece(wp_work *w, const uint32_t *cp, size_t n) {
    const ab_wordpiece *wp = w->wp;
    if (n == 0) return;
    if (n > AB_WP_MAX_WORD_CHARS) {
        push_id(w, wp->special[AB_WP_UNK]);
        return;
    }
    w->off[0] = 0;
    for (size_t k = 0; k < n; k++) w->off[k + 1] = w->off[k] + (uint32_t)utf8_put(cp[k], w->utf8 + w->off[k]);
    const size_t first = *w->n;
    for (size_t start = 0, end; start < n; start = end) {
        int32_t id = -1;
        for (end = n; end > start; end--) {
            id = vocab_find(wp, start > 0, w->utf8 + w->off[start], w->off[end] - w->off[start]);
            if (id >= 0) break;
        }
        if (id < 0) {
            *w->n = first;
            push_id(w, wp->special[AB_WP_UNK]);
            return;
        }
        push_id(w, id);
    }
}

/* canonical ordering within the run of marks since the last starter: a stable insertion */
static void strip_put(wp_work *w, uint32_t v, size_t *run) {
    u32buf *o = &w->word;
    if (v == AB_UC_BARRIER) {
        *run = o->n;
        return;
    }
    if (uc_class(v) != AB_UC_REORDER) {
        push_u32(w, o, v);
        *run = o->n;
        return;
    }
    push_u32(w, o, v);
    if (w->oom) return;
    const int c = uc_reorder_ccc(v);
    size_t pos = o->n - 1;
    while (pos > *run && uc_reorder_ccc(o->v[pos - 1]) > c) {
        o->v[pos] = o->v[pos - 1];
        pos--;
    }
    o->v[pos] = v;
}

/* BasicTokenizer._run_strip_accents: NFD, then the Mn marks dropped, into w->word */
static void strip_accents(wp_work *w, const uint32_t *cp, size_t n) {
    size_t run = 0;
    w->word.n = 0;
    for (size_t k = 0; k < n; k++) {
        const uint32_t c = cp[k];
        if (c < 0x80) { /* ASCII decomposes to nothing else */
            strip_put(w, c, &run);
            continue;
        }
        if (c >= 0xAC00 && c <= 0xD7A3) { /* Hangul syllable: leading, vowel and trailing jamo */
            const uint32_t s = c - 0xAC00;
            strip_put(w, 0x1100 + s / 588, &run);
            strip_put(w, 0x1161 + s % 588 / 28, &run);
            if (s % 28) strip_put(w, 0x11A7 + s % 28, &run);
            continue;
        }
        const int cls = uc_class(c);
        if (cls == AB_UC_MARK_BARRIER) {
            run = w->word.n;
            continue;
        }
        if (cls == AB_UC_MARK) continue;
        size_t m;
        const uint32_t *seq = uc_strip(&cp[k], &m);
        for (size_t i = 0; i < m; i++) strip_put(w, seq[i], &run);
    }
}

/* one whitespace-separated token of BasicTokenizer.tokenize: kept whole when it is a special
 * token (never_split), else accents stripped (do_lower_case) and split on punctuation */
static void basic_token(wp_work *w, const uint32_t *cp, size_t n) {
    for (int k = 0; k < AB_WP_SPECIAL_COUNT; k++) {
        const char *s = special_names[k];
        size_t i = 0;
        while (i < n && s[i] && cp[i] == (uint8_t)s[i]) i++;
        if (i == n && !s[i]) {
            wordpiece(w, cp, n);
            return;
        }
    }
    if (w->wp->lower) {
        strip_accents(w, cp, n);
        if (w->oom) return;
        cp = w->word.v;
        n = w->word.n;
    }
    for (size_t i = 0, j; i < n; i = j) {
        j = i + 1;
        if (!is_punct(cp[i]))
            while (j < n && !is_punct(cp[j])) j++;
        wordpiece(w, cp + i, j - i);
    }
}

/* text between special tokens (valid UTF-8): tokenize()'s lower case, then BasicTokenizer's
 * _clean_text, _tokenize_chinese_chars and the whitespace split */
static void basic_piece(wp_work *w, const uint8_t *s, size_t len) {
    w->text.n = w->clean.n = 0;
    for (size_t i = 0; i < len && !w->oom;) {
        const uint32_t cp = utf8_next(s, &i);
        if (!w->wp->lower) {
            push_u32(w, &w->text, cp);
            continue;
        }
        /* tokenize() lowers one character at a time (its regex matches .+? lazily), so
         * str.lower()'s final sigma never arises */
        uint32_t tmp;
        size_t m;
        const uint32_t *low = uc_lower(&cp, &tmp, &m);
        for (size_t k = 0; k < m; k++) push_u32(w, &w->text, low[k]);
    }
    for (size_t k = 0; k < w->text.n && !w->oom; k++) {
        const uint32_t cp = w->text.v[k];
        if (cp == ' ' || cp == '\t' || cp == '\n' || cp == '\r') {
            push_u32(w, &w->clean, ' ');
            continue;
        }
        if (cp == 0 || cp == 0xFFFD) continue;
        const int cls = uc_class(cp);
        if (cls == AB_UC_CONTROL) continue;
        /* Zs is whitespace to _clean_text; U+2028 and U+2029 only to str.split(), which comes next */
        if (cls == AB_UC_SPACE || is_split_extra(cp)) {
            push_u32(w, &w->clean, ' ');
        } else if (is_cjk(cp)) {
            push_u32(w, &w->clean, ' ');
            push_u32(w, &w->clean, cp);
            push_u32(w, &w->clean, ' ');
        } else {
            push_u32(w, &w->clean, cp);
        }
    }
    const uint32_t *c = w->clean.v;
    for (size_t i = 0, n = w->clean.n; i < n && !w->oom;) {
        while (i < n && c[i] == ' ') i++;
        size_t j = i;
        while (j < n && c[j] != ' ') j++;
        if (j > i) basic_token(w, c + i, j - i);
        i = j;
    }
}

static void work_free(wp_work *w) {
    free(w->text.v);
    free(w->clean.v);
    free(w->word.v);
}

int ab_wp_tokenize(const ab_wordpiece *wp, const char *text, size_t len, const char *where, int32_t **ids,
                   size_t *n, size_t *cap) {
    *n = 0;
    if (!where) where = "text";
    const uint8_t *s = (const uint8_t *)text;
    const char *why = NULL;
    const size_t bad = utf8_invalid_at(s, len, &why);
    if (bad) return ab_errorf("%s: invalid UTF-8 (%s at byte %zu)", where, why, bad);
    wp_work w = {.wp = wp, .ids = ids, .n = n, .cap = cap};
    /* tokenize(): the special tokens are cut out of the text first (the Trie over
     * unique_no_split_tokens); none is part of another, so leftmost matches are the matches */
    size_t piece = 0;
    for (size_t i = 0; i < len && !w.oom;) {
        int hit = -1;
        size_t hit_len = 0;
        if (s[i] == '[')
            for (int k = 0; k < AB_WP_SPECIAL_COUNT; k++) {
                const size_t sl = strlen(special_names[k]);
                if (len - i >= sl && memcmp(s + i, special_names[k], sl) == 0) {
                    hit = k;
                    hit_len = sl;
                    break;
                }
            }
        if (hit < 0) {
            i++;
            continue;
        }
        basic_piece(&w, s + piece, i - piece);
        push_id(&w, wp->special[hit]);
        i += hit_len;
        piece = i;
    }
    if (!w.oom) basic_piece(&w, s + piece, len - piece);
    work_free(&w);
    if (w.oom) return ab_errorf("%s: out of host memory tokenizing %zu bytes", where, len);
    return 0;
}

int ab_wp_encode(const ab_wordpiece *wp, const char *a, size_t alen, const char *b, size_t blen, int max_len,
                 int32_t *ids, int32_t *types, int32_t *mask, int *n_real, const char *where) {
    if (!where) where = "text";
    if (max_len < 3) return ab_errorf("%s: max_len %d leaves no room for [CLS] and [SEP] (at least 3)", where, max_len);
    int32_t *ta = NULL, *tb = NULL;
    size_t na = 0, nb = 0, ca = 0, cb = 0;
    int rc = ab_wp_tokenize(wp, a, alen, where, &ta, &na, &ca);
    if (rc == 0 && b) rc = ab_wp_tokenize(wp, b, blen, where, &tb, &nb, &cb);
    if (rc != 0) {
        free(ta);
        free(tb);
        return rc;
    }
    const size_t room = (size_t)max_len - (b ? 3 : 2);
    if (!b) {
        if (na > room) na = room;
    } else if (na + nb > room) {
        /* truncate_sequences, longest_first: one token at a time off the longer, b on a tie */
        for (size_t remove = na + nb - room; remove; remove--) {
            if (na > nb)
                na--;
            else
                nb--;
        }
    }
    int p = 0;
    const int32_t cls = wp->special[AB_WP_CLS], sep = wp->special[AB_WP_SEP];
#define AB_WP_PUT(id, type)                                                                         \
    do {                                                                                            \
        ids[p] = (id);                                                                              \
        if (types) types[p] = (type);                                                               \
        if (mask) mask[p] = 1;                                                                      \
        p++;                                                                                        \
    } while (0)
    AB_WP_PUT(cls, 0);
    for (size_t k = 0; k < na; k++) AB_WP_PUT(ta[k], 0);
    AB_WP_PUT(sep, 0);
    if (b) {
        for (size_t k = 0; k < nb; k++) AB_WP_PUT(tb[k], 1);
        AB_WP_PUT(sep, 1);
    }
#undef AB_WP_PUT
    if (n_real) *n_real = p;
    for (; p < max_len; p++) {
        ids[p] = wp->special[AB_WP_PAD];
        if (types) types[p] = 0;
        if (mask) mask[p] = 0;
    }
    free(ta);
    free(tb);
    return 0;
}
