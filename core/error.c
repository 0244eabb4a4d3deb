/* Thread-local last-error message and the small enum name tables. */
#include "ab.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

static _Thread_local char ab_err_buf[512];
static _Thread_local int ab_err_usage;

static int record(int usage, const char *fmt, va_list ap) {
    vsnprintf(ab_err_buf, sizeof ab_err_buf, fmt, ap);
    ab_err_usage = usage;
    return -1;
}

int ab_errorf(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    const int rc = record(0, fmt, ap);
    va_end(ap);
    return rc;
}

int ab_usage_errorf(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    const int rc = record(1, fmt, ap);
    va_end(ap);
    return rc;
}

int ab_error_is_usage(void) { return ab_err_usage; }

const char *ab_error(void) { return ab_err_buf[0] ? ab_err_buf : "unknown error"; }
void ab_error_clear(void) {
    ab_err_buf[0] = 0;
    ab_err_usage = 0;
}

static const char *const dtype_names[] = {"fp32", "fp16", "bf16"};
static const size_t dtype_sizes[] = {4, 2, 2};
_Static_assert(sizeof dtype_names / sizeof dtype_names[0] == AB_DTYPE_COUNT, "dtype name table");
_Static_assert(sizeof dtype_sizes / sizeof dtype_sizes[0] == AB_DTYPE_COUNT, "dtype size table");

size_t ab_dtype_size(ab_dtype t) { return (unsigned)t < AB_DTYPE_COUNT ? dtype_sizes[t] : 0; }
const char *ab_dtype_name(ab_dtype t) { return (unsigned)t < AB_DTYPE_COUNT ? dtype_names[t] : "?"; }

static const char *const prec_names[] = {"fp32", "amp", "bf16"};
_Static_assert(sizeof prec_names / sizeof prec_names[0] == AB_PREC_COUNT, "precision name table");

const char *ab_precision_name(ab_precision p) { return (unsigned)p < AB_PREC_COUNT ? prec_names[p] : "?"; }

int ab_precision_parse(const char *s, ab_precision *out) {
    for (int i = 0; i < AB_PREC_COUNT; i++)
        if (strcmp(s, prec_names[i]) == 0) {
            *out = (ab_precision)i;
            return 0;
        }
    return ab_errorf("unknown precision '%s' (expected fp32, amp or bf16)", s);
}

ab_dtype ab_precision_compute_dtype(ab_precision p) {
    return p == AB_PREC_AMP ? AB_F16 : p == AB_PREC_BF16 ? AB_BF16 : AB_F32;
}
