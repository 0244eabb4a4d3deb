/* Editing a result file in place, for the harness tests that plant a change in a copy of a
 * fixture: json_load reads and parses DIR/FILE (path receives its path), json_store writes the
 * edited tree back atomically and frees it. Both report through the including test's CHECK. */
#ifndef AB_TESTS_JSON_EDIT_H
#define AB_TESTS_JSON_EDIT_H

#include <stdio.h>
#include <stdlib.h>

#include <cjson/cJSON.h>

#include "harness.h"

static cJSON *json_load(const char *dir, const char *file, char *path, size_t n) {
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

static void json_store(const char *path, cJSON *j) {
    char *out = cJSON_Print(j);
    CHECK(out && hr_write_atomic(path, out) == 0, "cannot rewrite %s", path);
    free(out);
    cJSON_Delete(j);
}

#endif
