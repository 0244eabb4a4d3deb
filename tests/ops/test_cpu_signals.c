/* test_cpu_signals: signals handled while the CPU backend multiplies leave memory and results as
 * they were. oneDNN's generated sgemm kernels (up to 3.11) point rsp into the heap while they run,
 * so a handler run on the interrupted stack writes its frame into the heap (ampbench train stopped
 * by SIGTERM aborted in free() once in about a hundred runs). Checked:
 *   workers   the pool's workers run with asynchronous signals blocked (faults left deliverable);
 *   handler   a handler installed by ab_cpu_handle_signal runs on the thread's alternate stack;
 *   storm     SIGALRM every 50 us of wall time for about 1.5 s while fp32 products (oneDNN's sgemm
 *             where the build has it) run on 2 threads with the heap in use around them: no abort,
 *             every product bit-identical to the one before the storm, and thousands of signals
 *             actually handled. Without the alternate stack this aborts within the first second. */
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <time.h>

#include "backend.h"
#include "backend_cpu.h"
#include "runtime_cpu.h"

static int failures;
static pthread_t main_thread;

/* ---- workers ---- */

typedef struct {
    int on_worker, unblocked_async, blocked_fault;
} mask_seen;

static void look_at_mask(void *ctx, int part, size_t lo, size_t hi) {
    (void)lo, (void)hi;
    mask_seen *seen = (mask_seen *)ctx + part;
    sigset_t cur;
    pthread_sigmask(SIG_BLOCK, NULL, &cur);
    seen->on_worker = !pthread_equal(pthread_self(), main_thread);
    seen->unblocked_async = !sigismember(&cur, SIGINT) + !sigismember(&cur, SIGTERM) + !sigismember(&cur, SIGALRM) +
                            !sigismember(&cur, SIGUSR1) + !sigismember(&cur, SIGHUP);
    seen->blocked_fault = sigismember(&cur, SIGSEGV) + sigismember(&cur, SIGBUS) + sigismember(&cur, SIGFPE);
}

static void check_workers(ab_backend *be) {
    mask_seen seen[2] = {{0}};
    if (cpu_parallel_parts(be, 2, 1) != 2) {
        printf("FAIL workers: 2 threads split 2 items into %d parts\n", cpu_parallel_parts(be, 2, 1));
        failures++;
        return;
    }
    cpu_parallel_for(be, 2, 1, look_at_mask, seen);
    const int bad = seen[0].on_worker || !seen[1].on_worker || seen[1].unblocked_async || seen[1].blocked_fault;
    printf("%s workers: part 1 on a worker thread %s, asynchronous signals left unblocked there %d of 5, faults "
           "blocked %d of 3\n",
           bad ? "FAIL" : "ok  ", seen[1].on_worker ? "yes" : "no", seen[1].unblocked_async, seen[1].blocked_fault);
    failures += bad;
}

/* ---- handler ---- */

/* on the main thread (which multiplies beside the workers): handled, and handled off its
 * alternate stack; elsewhere: on threads that never multiply (OpenBLAS's own, started when it
 * loads, with no alternate stack: harmless there) */
static volatile sig_atomic_t hits, off_stack, elsewhere;
static char *alt_lo, *alt_hi;

static void on_alarm(int sig) {
    (void)sig;
    const char *here = __builtin_frame_address(0);
    if (!pthread_equal(pthread_self(), main_thread)) {
        elsewhere++;
        return;
    }
    if (here < alt_lo || here >= alt_hi) off_stack++;
    hits++;
}

static void check_handler(void) {
    if (ab_cpu_handle_signal(SIGALRM, on_alarm) != 0) {
        printf("FAIL handler: %s\n", ab_error());
        failures++;
        return;
    }
    stack_t ss;
    sigaltstack(NULL, &ss);
    alt_lo = ss.ss_sp;
    alt_hi = (char *)ss.ss_sp + ss.ss_size;
    raise(SIGALRM);
    /* at least the kernel's frame size for this CPU (a sanitizer's own stack, kept, is 4 times it) */
#ifdef _SC_SIGSTKSZ
    const long need = sysconf(_SC_SIGSTKSZ) > 0 ? sysconf(_SC_SIGSTKSZ) : MINSIGSTKSZ;
#else
    const long need = SIGSTKSZ;
#endif
    const int bad = (ss.ss_flags & SS_DISABLE) || ss.ss_size < (size_t)need || hits != 1 || off_stack != 0;
    printf("%s handler: alternate stack of %zu KiB (at least %ld bytes), %d handled, %d of them off it\n",
           bad ? "FAIL" : "ok  ", ss.ss_size >> 10, need, (int)hits, (int)off_stack);
    failures += bad;
}

/* ---- storm ---- */

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

typedef struct {
    int ta, tb, M, N, K;
    float *A, *B, *C, *ref;
} product;

/* uniform in [-0.5, 0.5) */
static float next(uint32_t *x) {
    *x = *x * 1664525u + 1013904223u;
    return (float)(*x >> 8) / 16777216.0f - 0.5f;
}

static int multiply(ab_backend *be, product *p, float *C) {
    return be->ops->gemm(be, p->ta, p->tb, p->M, p->N, p->K, 1.0f, AB_F32, p->A, p->ta ? p->M : p->K, AB_F32, p->B,
                         p->tb ? p->K : p->N, NULL, AB_EPI_NONE, 0.0f, AB_F32, C, p->N);
}

static void check_storm(ab_backend *be) {
    /* the MLP's three products (batch 64, 784 -> 256) and a square one */
    product ps[] = {{.tb = 1, .M = 64, .N = 256, .K = 784},
                    {.M = 64, .N = 784, .K = 256},
                    {.ta = 1, .M = 256, .N = 784, .K = 64},
                    {.M = 256, .N = 256, .K = 256}};
    const int np = (int)(sizeof ps / sizeof ps[0]);
    uint32_t x = 12345;
    for (int i = 0; i < np; i++) {
        product *p = &ps[i];
        p->A = malloc((size_t)p->M * p->K * 4);
        p->B = malloc((size_t)p->N * p->K * 4);
        p->C = malloc((size_t)p->M * p->N * 4);
        p->ref = malloc((size_t)p->M * p->N * 4);
        if (!p->A || !p->B || !p->C || !p->ref) abort();
        for (size_t k = 0; k < (size_t)p->M * p->K; k++) p->A[k] = next(&x);
        for (size_t k = 0; k < (size_t)p->N * p->K; k++) p->B[k] = next(&x);
        if (multiply(be, p, p->ref) != 0) {
            printf("FAIL storm: %s\n", ab_error());
            failures++;
            return;
        }
    }
    hits = off_stack = elsewhere = 0;
    const struct itimerval every = {{0, 50}, {0, 50}}, off = {{0, 0}, {0, 0}};
    setitimer(ITIMER_REAL, &every, NULL);
    long products = 0, differ = 0;
    const double t0 = now();
    while (now() - t0 < 1.5) {
        product *p = &ps[products % np];
        void *around = malloc(64 + (size_t)(products % 4096)); /* the heap in use between products */
        if (multiply(be, p, p->C) != 0 || memcmp(p->C, p->ref, (size_t)p->M * p->N * 4) != 0) differ++;
        free(around);
        products++;
    }
    setitimer(ITIMER_REAL, &off, NULL);
    const int bad = differ != 0 || hits < 1000 || off_stack != 0;
    printf("%s storm: %ld products, %d signals handled on the multiplying thread (%d off its alternate stack) and "
           "%d on threads that do not multiply; %ld products not bit-identical\n",
           bad ? "FAIL" : "ok  ", products, (int)hits, (int)off_stack, (int)elsewhere, differ);
    failures += bad;
    for (int i = 0; i < np; i++) free(ps[i].A), free(ps[i].B), free(ps[i].C), free(ps[i].ref);
}

int main(void) {
    main_thread = pthread_self();
    ab_backend *be = ab_backend_cpu_create(2);
    if (!be) {
        printf("FAIL: no CPU backend: %s\n", ab_error());
        return 1;
    }
    printf("products: %s\n", ab_backend_cpu_blas_info());
    check_workers(be);
    check_handler();
    check_storm(be);
    be->ops->destroy(be);
    printf("%s\n", failures ? "FAILED" : "all passed");
    return failures != 0;
}
