/* The profiling backend: wraps another and times each of its ops, beside what the counting
 * backend (kernels/cost) says the op must compute and move, so that a step's time can be split by
 * op with each op's achieved FLOP/s and bytes/s. On a host backend an op has finished when it
 * returns, so its wall time is its time; on a device the time is the enqueueing's, not the
 * kernel's (use a device profiler there). Memory is the inner backend's, charged here as well. */
#ifndef AB_BACKEND_PROF_H
#define AB_BACKEND_PROF_H

#include <stdio.h>

#include "backend.h"
#include "stepmodel.h"

/* takes ownership of inner (destroyed with the wrapper); NULL with ab_error() */
ab_backend *ab_backend_prof_create(ab_backend *inner);
ab_backend *ab_backend_prof_inner(ab_backend *be);
/* the ops timed so far, in issue order (each with its time_s), and forgetting them */
const ab_op_cost *ab_prof_ops(ab_backend *be, size_t *n);
void ab_prof_clear(ab_backend *be);
/* the ops as a table by kind (GEMM, convolution, normalisation, ...): calls, seconds, share, GFLOP
 * and GFLOP/s, GB and GB/s; on a host backend the backend's own fp32 GEMM rate at 2048^3 beside
 * (inner's ops, buffers of 48 MB) */
void ab_prof_report(FILE *f, const ab_op_cost *ops, size_t n, ab_backend *inner);
/* the table printed to f when the backend ends (a run's teardown) */
void ab_prof_report_at_destroy(ab_backend *be, FILE *f);

#endif
