/* test_backend_ops: every compute op of core/backend_ops.def, on every backend present, against
 * a reference, one line per case. Two passes over the same table:
 *   reference  the CPU backend against references worked out here in double precision (ref_*.c)
 *   device     each other backend (CUDA where a device is usable; a second CPU backend under
 *              --stand-in, which checks this test's code, not a device) against the CPU backend
 *              (dev_*.c), its tensors held twice (dev_pair.h)
 * A case is one call of the op under test, with its inputs and what is checked; op_case() opens
 * it (the previous one ends there and prints its line). Every op needs at least one case in each
 * pass, or the program fails: `test_backend_ops --list` prints the counts. The globals below are
 * defined in main.c and shared by the case files. */
#ifndef AB_TESTS_OPS_TEST_H
#define AB_TESTS_OPS_TEST_H

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend.h"
#include "backend_cpu.h"
#include "half.h"
#include "rng.h"
#include "tolerances.h" /* AB_CHECK adds to failures */

enum { PASS_REFERENCE = 0, PASS_DEVICE = 1 };

extern int failures;    /* every failed check adds one (AB_CHECK, the comparisons) */
extern ab_backend *cpu; /* the CPU backend: under test in the reference pass, the reference in the device pass */
extern ab_backend *gpu; /* the device pass's backend under test (NULL in the reference pass) */
extern int self_check;  /* 1: gpu is a second CPU backend (--stand-in) */
extern ab_rng rng;      /* seeded by main before each group */

/* Opens a case of op (AB_OP_gemm, ...) in the current pass, described by fmt ("f16 64x256x784
 * bias relu"); the previous case, if any, ends and prints its line. */
void op_case(int op, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;

/* op_case, with "<op> <description>" also written to what (cap bytes): the label the case's
 * failure messages carry (the device pass's comparisons take it) */
void op_case_label(char *what, size_t cap, int op, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 4, 5)))
#endif
    ;

/* A figure the open case measured ("0.8994 kept"), printed indented under the case's line. */
void op_note(const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 1, 2)))
#endif
    ;

/* a setup step failed (out of memory, an upload): the program cannot go on */
static inline void die(const char *what) {
    fprintf(stderr, "FAIL %s: %s\n", what, ab_error());
    exit(1);
}

/* both ops returned 0 (the device pass) */
static inline void op_ok(const char *what, int rc_cpu, int rc_gpu) {
    if (rc_cpu != 0 || rc_gpu != 0) {
        fprintf(stderr, "FAIL %s: op returned cpu %d, %s %d: %s\n", what, rc_cpu, gpu ? gpu->ops->name : "?", rc_gpu,
                ab_error());
        failures++;
    }
}

/* the groups of cases, one per file part: each seeds nothing itself (main seeds rng before it) */
void ref_ops_run(void);         /* ref_ops.c: GEMM, casts, element-wise, loss, optimizer, gathers, census */
void ref_layers_run(void);      /* ref_layers.c: convolution, batch norm, pooling, add */
void ref_transformer_run(void); /* ref_transformer.c: batched GEMM, layer norm, GELU, tanh, softmax, dropout,
                                   embeddings */
void dev_ops_run(void);         /* dev_ops.c */
void dev_layers_run(void);      /* dev_layers.c */
void dev_transformer_run(void); /* dev_transformer.c */

#endif
