/* The CPU pool's hand-off: cpu_parallel_for with an empty job on 2 threads, back to back and after
 * 200 us of other work on the calling thread (the worker has gone idle by then), 3 rounds.
 * Built against a build folder's libabcpu.a and libabcore.a:
 *   gcc -O2 -Icore -Ikernels/cpu dispatch.c -o dispatch -Wl,--start-group BUILD/libabcpu.a \
 *       BUILD/libabcore.a -Wl,--end-group -ldnnl -lgomp -lopenblas -lpthread -lm */
#include <stdio.h>

#include "backend.h"
#include "backend_cpu.h"
#include "runtime_cpu.h"
#include "timer.h"

static void nothing(void *ctx, int part, size_t lo, size_t hi) { (void)ctx, (void)part, (void)lo, (void)hi; }

int main(void) {
    ab_backend *be = ab_backend_cpu_create(2);
    if (!be) return 1;
    for (int r = 0; r < 3; r++) {
        const int n = 20000;
        double t0 = ab_now();
        for (int i = 0; i < n; i++) cpu_parallel_for(be, 2, 1, nothing, NULL);
        printf("round %d: back to back %.2f us a call", r + 1, (ab_now() - t0) / n * 1e6);
        double in_calls = 0.0;
        for (int i = 0; i < 2000; i++) {
            const double s = ab_now();
            while (ab_now() - s < 200e-6) {
            }
            const double a = ab_now();
            cpu_parallel_for(be, 2, 1, nothing, NULL);
            in_calls += ab_now() - a;
        }
        printf(", after 200 us of other work %.2f us a call\n", in_calls / 2000 * 1e6);
    }
    be->ops->destroy(be);
    return 0;
}
