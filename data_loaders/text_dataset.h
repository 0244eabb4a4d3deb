/* A tokenized text classification set as the trainer sees it (core/dataset.h): a GLUE split
 * encoded once by the WordPiece tokenizer into ids, token types and attention masks of max_len
 * positions, mapped once into backend memory; a batch is three row gathers (ids, types, mask)
 * and the labels. The task's metric (accuracy, Matthews correlation, F1) scores predictions. */
#ifndef AB_TEXT_DATASET_H
#define AB_TEXT_DATASET_H

#include "dataset.h"
#include "glue.h"
#include "wordpiece.h"

/* Encodes split (which stays the caller's) with wp at max_len positions; name labels the set
 * ("SST-2 train"), file the split's file for error messages (file:line). */
int ab_text_dataset_create(const ab_glue_split *split, const ab_wordpiece *wp, int max_len, const char *name,
                           const char *file, ab_backend *be, ab_dataset **out);

#endif
