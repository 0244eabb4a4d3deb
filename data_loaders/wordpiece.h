/* BERT's WordPiece tokenizer with the semantics of Hugging Face's BertTokenizer (transformers
 * 4.30, loaded with from_pretrained): a vocab.txt, text in UTF-8, and sequences of max_len ids
 * [CLS] a [SEP] (b [SEP]) [PAD]... with token types and an attention mask. */
#ifndef AB_WORDPIECE_H
#define AB_WORDPIECE_H

#include <stddef.h>
#include <stdint.h>

/* the special tokens, found in the vocabulary by name */
typedef enum { AB_WP_PAD = 0, AB_WP_UNK, AB_WP_CLS, AB_WP_SEP, AB_WP_MASK, AB_WP_SPECIAL_COUNT } ab_wp_special;

/* longest word WordPiece splits (Unicode characters); a longer one is [UNK] */
#define AB_WP_MAX_WORD_CHARS 100

typedef struct ab_wordpiece ab_wordpiece;

/* Reads vocab.txt: one token a line in UTF-8, id = line index (from 0), lines ended by \n, \r or
 * \r\n and only that ending taken off (as Python's readlines + rstrip("\n") do: other spaces are
 * part of the token); a token on two lines keeps the later id. [PAD] [UNK] [CLS] [SEP] must be
 * there; a vocabulary without [MASK] gets it as id "number of distinct tokens", as Hugging Face
 * adds it. lower: BertTokenizer's do_lower_case (lower case and strip accents). Errors: a missing
 * or unreadable file, an empty vocabulary, a missing special token, invalid UTF-8 (file:line). */
int ab_wp_load(const char *vocab_path, int lower, ab_wordpiece **out);
/* the same from bytes in memory; name labels the errors */
int ab_wp_parse(const void *bytes, size_t size, const char *name, int lower, ab_wordpiece **out);
void ab_wp_free(ab_wordpiece *wp);

/* ids an embedding table must hold: the number of lines, or [MASK]'s id + 1 if larger */
int32_t ab_wp_vocab_size(const ab_wordpiece *wp);
int32_t ab_wp_special_id(const ab_wordpiece *wp, ab_wp_special which);
/* the id of one token as written in vocab.txt, or -1 */
int32_t ab_wp_token_id(const ab_wordpiece *wp, const char *token, size_t len);

/* The ids of text (no [CLS]/[SEP] added): *ids (capacity *cap, grown with realloc, the caller
 * frees it) receives *n ids. where names the text in errors ("dev.tsv:12"); invalid UTF-8
 * (overlong, surrogate, above U+10FFFF, truncated, stray continuation byte) is an error. */
int ab_wp_tokenize(const ab_wordpiece *wp, const char *text, size_t len, const char *where, int32_t **ids,
                   size_t *n, size_t *cap);

/* One model input of max_len (at least 3) positions: [CLS] a [SEP] or, with b != NULL,
 * [CLS] a [SEP] b [SEP], cut to max_len by Hugging Face's "longest_first" (one token at a time
 * from the end of the longer of a and b, of b on a tie), then [PAD] up to max_len. ids, types
 * (0 up to the first [SEP], 1 after; 0 on padding) and mask (1 real, 0 padding) have max_len
 * elements; types, mask and n_real (the real positions) may be NULL. */
int ab_wp_encode(const ab_wordpiece *wp, const char *a, size_t alen, const char *b, size_t blen, int max_len,
                 int32_t *ids, int32_t *types, int32_t *mask, int *n_real, const char *where);

/* the Unicode version of the character tables (unicode_tables.c) */
const char *ab_wp_unicode_version(void);

#endif
