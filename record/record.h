/* The result record as a file: JSON (harness/schema/result.schema.json), written atomically. The
 * training core keeps its record in an ab_run_record and knows no format: the program hands it
 * ab_record_json (ab_train_config.record), which writes the record wherever --out says. */
#ifndef AB_RECORD_H
#define AB_RECORD_H

#include "census.h"
#include "train.h"

/* the record of a run as JSON at path (a temporary file in the same folder, then a rename) */
int ab_result_write(const char *path, const ab_train_config *cfg, const ab_run_record *rec);
/* text + newline to path via a temporary file in the same folder and rename */
int ab_json_write_atomic(const char *path, const char *text);
/* The record's "grad_census" object (cJSON, freed with the record), NULL when out of memory:
 * interval, log2_min, log2_max, records [{step, loss_scale, tensors [{name, kind, n, zeros, nonfinite,
 * hist}], derived {weight, activation}}]. */
struct cJSON *ab_census_json(const ab_census *c);

/* the JSON writer, for ab_train_config.record */
extern const ab_record_ops ab_record_json;

#endif
