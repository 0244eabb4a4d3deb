/* The harness tests' helpers. Editing a result file in place, for the tests that plant a change
 * in a copy of a fixture: json_load reads and parses DIR/FILE (path receives its path),
 * json_store writes the edited tree back atomically and frees it. runset_open loads a run folder
 * into a new run set (runset_close frees it). All report through the including test's CHECK. */
#ifndef AB_TESTS_JSON_EDIT_H
#define AB_TESTS_JSON_EDIT_H

#include <stdio.h>
#include <stdlib.h>

#include <cjson/cJSON.h>

#include "harness.h"

static inline cJSON *json_load(const char *dir, const char *file, char *path, size_t n) {
    char *text;
    snprintf(path, n, "%s/%s", dir, file);
    if (hr_read_file(path, &text) != 0) {
        CHECK(0, "%s", ab_error());
        return NULL;
    }
    cJSON *j = cJSON_Parse(text);
    free(text);
    CHECK(j != NULL, "%s: not valid JSON", path);
    return j;
}

static inline void json_store(const char *path, cJSON *j) {
    char *out = cJSON_Print(j);
    CHECK(out && hr_write_atomic(path, out) == 0, "cannot rewrite %s", path);
    free(out);
    cJSON_Delete(j);
}

/* the results of run folder dir, or NULL (said through CHECK) */
static inline hr_runset *runset_open(const char *dir) {
    hr_runset *rs = calloc(1, sizeof *rs);
    if (!rs || hr_runset_load(dir, rs) != 0) {
        CHECK(0, "%s: %s", dir, rs ? ab_error() : "out of memory");
        free(rs);
        return NULL;
    }
    return rs;
}

static inline void runset_close(hr_runset *rs) {
    if (rs) hr_runset_free(rs);
    free(rs);
}

#endif
