/* cpu_link: how the machine's first two CPUs (the first two the process may run on) stand to each
 * other now, in two readings, each the median of several trials:
 * - the one-way time of a cache line handed back and forth between two threads bound to them. On a
 *   virtual machine the two virtual CPUs can move apart on the host for seconds or minutes at a
 *   time (26-70 ns one way, then 163-215 ns, on the 2-vCPU EPYC machines results/cpu/ names), and
 *   every op the thread pool splits pays for each line one core writes and the other reads;
 * - the rate of a compute loop run on both at once against one alone: about 1 when each has a
 *   core of its own, about 0.5 when the host runs them on one core, or is busy elsewhere.
 * The benches print them beside their timings: a run that straddles a change is not comparable
 * with one that does not. usage: cpu_link [--trials N] */
#define _GNU_SOURCE /* sched_getaffinity, pthread_setaffinity_np */
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "timer.h"

enum { HANDOFFS = 100000 };

static _Alignas(64) atomic_int flag;
static int cpus[2];

static int bind_self(int cpu) {
    cpu_set_t m;
    CPU_ZERO(&m);
    CPU_SET(cpu, &m);
    return pthread_setaffinity_np(pthread_self(), sizeof m, &m);
}

/* fn on a thread that starts on the second CPU (not on the first, whose mask main holds, waiting
 * there for main's time slice to end); 0, or -1 when it cannot start there */
static int start_on_second(pthread_t *t, void *(*fn)(void *)) {
    pthread_attr_t a;
    cpu_set_t m;
    CPU_ZERO(&m);
    CPU_SET(cpus[1], &m);
    if (pthread_attr_init(&a) != 0) return -1;
    const int rc = pthread_attr_setaffinity_np(&a, sizeof m, &m) || pthread_create(t, &a, fn, NULL);
    pthread_attr_destroy(&a);
    return rc ? -1 : 0;
}

/* the second thread: answers each odd value with the next even one */
static void *pong(void *arg) {
    (void)arg;
    for (int i = 0; i < HANDOFFS; i++) {
        while (atomic_load_explicit(&flag, memory_order_acquire) != 2 * i + 1) {
        }
        atomic_store_explicit(&flag, 2 * i + 2, memory_order_release);
    }
    return NULL;
}

/* one trial: ns per one-way hand-off, or a negative value when the thread cannot start */
static double trial(void) {
    pthread_t t;
    atomic_store(&flag, 0);
    if (start_on_second(&t, pong)) return -1.0;
    /* the first hand-off waits for the second thread to start: left out of the time */
    atomic_store_explicit(&flag, 1, memory_order_release);
    while (atomic_load_explicit(&flag, memory_order_acquire) != 2) {
    }
    const double t0 = ab_now();
    for (int i = 1; i < HANDOFFS; i++) {
        atomic_store_explicit(&flag, 2 * i + 1, memory_order_release);
        while (atomic_load_explicit(&flag, memory_order_acquire) != 2 * i + 2) {
        }
    }
    const double dt = ab_now() - t0;
    pthread_join(t, NULL);
    return dt / (2.0 * (HANDOFFS - 1)) * 1e9;
}

/* a compute loop of 8 independent multiply-add chains in registers, about 20 ms: its rate in Mop/s */
static double compute(void) {
    enum { ITERS = 8000000 };
    double x[8] = {1.1, 1.2, 1.3, 1.4, 1.5, 1.6, 1.7, 1.8}; /* off the chains' fixed point, 1 */
    const double t0 = ab_now();
    for (int i = 0; i < ITERS; i++)
        for (int k = 0; k < 8; k++) x[k] = x[k] * 0.9999999 + 1e-7;
    const double dt = ab_now() - t0;
    volatile double sink = x[0] + x[1] + x[2] + x[3] + x[4] + x[5] + x[6] + x[7];
    (void)sink;
    return 8.0 * ITERS / dt / 1e6;
}

static double paired_rate;
static atomic_int go;
static void *compute_on_second(void *arg) {
    (void)arg;
    atomic_fetch_add(&go, 1);
    while (atomic_load(&go) < 2) {
    }
    paired_rate = compute();
    return NULL;
}

/* one trial: the slower CPU's rate with both computing, started together, over the first's rate
 * alone (the better of two); 0 when the thread cannot start */
static double paired(void) {
    double alone = compute();
    const double again = compute();
    if (again > alone) alone = again;
    pthread_t t;
    atomic_store(&go, 0);
    if (start_on_second(&t, compute_on_second)) return 0.0;
    atomic_fetch_add(&go, 1);
    while (atomic_load(&go) < 2) {
    }
    const double mine = compute();
    pthread_join(t, NULL);
    return (mine < paired_rate ? mine : paired_rate) / alone;
}

static int cmp(const void *a, const void *b) {
    const double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

int main(int argc, char **argv) {
    int trials = 5;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--trials") == 0) {
            if (i + 1 == argc) {
                fprintf(stderr, "cpu_link: --trials needs a value (1 to 101)\n");
                return 2;
            }
            char *end;
            const long v = strtol(argv[++i], &end, 10);
            if (*end || v < 1 || v > 101) {
                fprintf(stderr, "cpu_link: --trials takes 1 to 101, not '%s'\n", argv[i]);
                return 2;
            }
            trials = (int)v;
        } else {
            fprintf(stderr, "cpu_link: unknown argument '%s' (usage: cpu_link [--trials N])\n", argv[i]);
            return 2;
        }
    }
    cpu_set_t m;
    int k = 0;
    if (sched_getaffinity(0, sizeof m, &m) == 0)
        for (int c = 0; c < CPU_SETSIZE && k < 2; c++)
            if (CPU_ISSET(c, &m)) cpus[k++] = c;
    if (k < 2) {
        printf("cpu_link: one CPU to run on, no cross-core reading\n");
        return 0;
    }
    if (bind_self(cpus[0]) != 0) {
        fprintf(stderr, "cpu_link: cannot bind a thread to CPU %d\n", cpus[0]);
        return 1;
    }
    double ns[101], both[101];
    for (int i = 0; i < trials; i++)
        if ((ns[i] = trial()) < 0 || (both[i] = paired()) <= 0) {
            fprintf(stderr, "cpu_link: cannot start a thread on CPU %d\n", cpus[1]);
            return 1;
        }
    qsort(ns, (size_t)trials, sizeof ns[0], cmp);
    qsort(both, (size_t)trials, sizeof both[0], cmp);
    printf("cpu_link: CPU %d <-> CPU %d one way %.0f ns (%.0f to %.0f); both computing at once %.2f of one alone "
           "(%.2f to %.2f); medians of %d\n",
           cpus[0], cpus[1], ns[trials / 2], ns[0], ns[trials - 1], both[trials / 2], both[0], both[trials - 1],
           trials);
    return 0;
}
