/* The Unicode data of the WordPiece tokenizer (wordpiece.c): sorted tables, searched by binary
 * search, in unicode_tables.c, which scripts/gen_unicode_tables.py writes from Python's
 * unicodedata (the Unicode version is ab_uc_unicode_version). */
#ifndef AB_UNICODE_TABLES_H
#define AB_UNICODE_TABLES_H

#include <stddef.h>
#include <stdint.h>

/* Character classes, as Hugging Face's BasicTokenizer asks about them. */
enum {
    AB_UC_OTHER = 0,
    AB_UC_CONTROL = 1,      /* general category C* (Cc Cf Cn Co Cs): _clean_text drops them */
    AB_UC_SPACE = 2,        /* Zs: whitespace */
    AB_UC_MARK_BARRIER = 3, /* Mn whose decomposition has a combining class 0 character */
    AB_UC_MARK = 4,         /* other Mn: strip accents drops both kinds */
    AB_UC_PUNCT = 5,        /* P*: split off as tokens (with ASCII symbols, in wordpiece.c) */
    AB_UC_REORDER = 6,      /* not Mn yet of nonzero combining class: canonical ordering moves it */
};
enum { AB_UC_CLASS_BITS = 3 };

/* (first code point << AB_UC_CLASS_BITS) | class; each range runs up to the next one's start,
 * the first starts at 0 and the last runs to U+10FFFF */
extern const uint32_t ab_uc_class[];
extern const size_t ab_uc_class_count;

/* A value: a code point, or AB_UC_SEQ | offset << 3 | length of a run in ab_uc_seq, where
 * AB_UC_BARRIER stands for a dropped mark that ends a canonical-ordering run. */
#define AB_UC_SEQ 0x80000000u
#define AB_UC_BARRIER 0x110000u
extern const uint32_t ab_uc_seq[];

typedef struct {
    uint32_t lo, hi; /* code points lo, lo + stride, ... up to hi map to cp + delta */
    int32_t delta;
    uint32_t stride;
} ab_uc_delta_range;

typedef struct {
    uint32_t cp, value;
} ab_uc_pair;

typedef struct {
    uint32_t lo, hi, first; /* code point cp in [lo, hi] has value ab_uc_strip_values[first + cp - lo] */
} ab_uc_key_range;

/* Python's str.lower() of one code point: single code points by ranges, longer results apart. */
extern const ab_uc_delta_range ab_uc_lower[];
extern const size_t ab_uc_lower_count;
extern const ab_uc_pair ab_uc_lower_long[];
extern const size_t ab_uc_lower_long_count;

/* NFD then dropping category Mn, for the code points where that is not the identity, leaving out
 * Hangul syllables (arithmetic), the marks themselves (the class says) and controls and spaces
 * (gone before strip accents runs). */
extern const ab_uc_key_range ab_uc_strip_keys[];
extern const size_t ab_uc_strip_keys_count;
extern const uint32_t ab_uc_strip_values[];

/* canonical combining class of each AB_UC_REORDER code point, sorted by code point */
extern const ab_uc_pair ab_uc_reorder_ccc[];
extern const size_t ab_uc_reorder_ccc_count;

/* separators of Python's str.split() beyond what _clean_text turns into a space (Zl, Zp) */
extern const uint32_t ab_uc_split_extra[];
extern const size_t ab_uc_split_extra_count;

extern const char ab_uc_unicode_version[];

#endif
