/* test_cpu_stream: the CPU backend's AdamW and SGD updates, whose large parts store past the caches
 * with vector loops of their own (kernels/cpu/backend_cpu.c's adamw_range and sgd_range), give the
 * bits of core/kernel_math.h's ab_adamw_update and ab_sgd_update element by element: on 2 threads,
 * over
 *   - arrays long enough that both threads' parts take the streaming loop (2 x CPU_STREAM_MIN and
 *     an odd tail), starting on an aligned element and 3 elements past one (the lines before the
 *     first aligned one go through the plain loop);
 *   - w, m and v aligned unlike each other (every part takes the plain loop);
 *   - a short array (the plain loop);
 * three steps each (SGD's first with its momentum buffer taken from the gradient), with and without
 * weight decay, a clipping factor, and gradients that are NaN, infinite, zero and 1e-30 among
 * ordinary ones; and SGD without momentum (the plain loop; with an fp16 copy, a vector loop of its
 * own that rounds the copy from its registers whatever its alignment, each part's last 0 to 15
 * elements, 0 to 7 under AB_CPU_ISA=avx2, through the plain loop). A NaN result matches a NaN (its
 * payload is the instruction's affair). With a working copy (fp16 or bf16) the copy must hold each
 * new weight rounded as core/half.h's ab_store rounds it, and the element past its end must stay as
 * it was: the copy aligned as w (fp16: written by the streaming loop from its registers; bf16: a
 * chunk behind it, its chunks stored past the caches) and one element off (a chunk behind, plain
 * stores; SGD without momentum: its own loop's plain stores). CTest runs it as the CPU takes it and
 * again under AB_CPU_ISA=avx2 and sse2, the copies other machines take. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend.h"
#include "backend_cpu.h"
#include "cpu_features.h"
#include "half.h"
#include "kernel_math.h"
#include "rng.h"
#include "runtime_cpu.h"

static int failures;
static ab_rng rng;

static uint32_t bits(float x) {
    uint32_t u;
    memcpy(&u, &x, sizeof u);
    return u;
}

static int same(float a, float b) { return (isnan(a) && isnan(b)) || bits(a) == bits(b); }

/* n floats and a line to spare, 64-byte aligned (aligned_alloc wants a multiple of the alignment) */
static float *lines(size_t n) {
    float *p = aligned_alloc(64, ((n + 16) * sizeof(float) + 63) & ~(size_t)63);
    if (!p) abort();
    return p;
}

/* a step's gradients: ordinary ones with zeros and 1e-30 among them, and on the first step NaNs and
 * infinities in a part's first elements (the plain prefix) and in its vector loop */
static void gradients(float *g, size_t n, int step) {
    for (size_t i = 0; i < n; i++) {
        const size_t k = i % 997;
        g[i] = k == 5 ? 0.0f : k == 6 ? 1e-30f : (float)ab_rng_normal(&rng) * 0.1f;
    }
    if (step == 1) g[n / 2 + 1] = NAN, g[n / 2 + 17] = INFINITY, g[n / 2 + 40] = NAN, g[n / 4] = NAN, g[n - 2] = -INFINITY;
}

/* the working copy: n + 1 elements of ct (AB_F32: none) at element offset oc into a 64-byte aligned
 * block (*base, to free), the one past the end a sentinel. The pass stores a streamed chunk's copy
 * past the caches where it lies 32-byte aligned: oc equal to w's offset (mod 16), as in training. */
static uint16_t *copy_alloc(ab_dtype ct, size_t n, size_t oc, uint16_t **base) {
    *base = NULL;
    if (ct == AB_F32) return NULL;
    *base = aligned_alloc(64, ((n + 1 + oc) * sizeof(uint16_t) + 63) & ~(size_t)63);
    if (!*base) abort();
    uint16_t *c = *base + oc;
    for (size_t i = 0; i <= n; i++) c[i] = 0x7e01;
    return c;
}

/* 1 (and a line said) when the copy is not the reference weights rounded, or its sentinel moved */
static int copy_differs(const char *what, int step, ab_dtype ct, const uint16_t *c, const float *rw, size_t n) {
    if (!c) return 0;
    size_t bad = 0, first = 0;
    for (size_t i = 0; i < n; i++)
        if (c[i] != ab_f32_to_16(ct, rw[i]) && !bad++) first = i;
    if (bad) {
        printf("FAIL %s, step %d: %zu of %zu elements of the %s copy are not the new weights rounded, the first at "
               "%zu: 0x%04x against 0x%04x\n",
               what, step, bad, n, ab_dtype_name(ct), first, c[first], ab_f32_to_16(ct, rw[first]));
        return 1;
    }
    if (c[n] != 0x7e01) {
        printf("FAIL %s, step %d: the element past the copy's end was written\n", what, step);
        return 1;
    }
    return 0;
}

/* w, g, m and v of n elements at the given element offsets (under 16) into 64-byte aligned blocks;
 * with a working copy of type ct (AB_F32: none) at element offset oc */
static void run(ab_backend *be, const char *what, size_t n, size_t ow, size_t og, size_t om, size_t ov, ab_dtype ct,
                size_t oc) {
    float *W = lines(n), *G = lines(n), *M = lines(n), *V = lines(n), *rw = malloc(n * 4), *rm = malloc(n * 4),
          *rv = malloc(n * 4);
    uint16_t *wcb, *wc = copy_alloc(ct, n, oc, &wcb);
    if (!rw || !rm || !rv) abort();
    float *w = W + ow, *g = G + og, *m = M + om, *v = V + ov;
    for (size_t i = 0; i < n; i++) {
        w[i] = rw[i] = i % 101 == 7 ? 0.0f : (float)ab_rng_normal(&rng) * 0.5f;
        m[i] = rm[i] = 0.0f;
        v[i] = rv[i] = 0.0f;
    }
    const float lr = 1e-3f, b1 = 0.9f, b2 = 0.999f, eps = 1e-8f;
    const float wds[3] = {0.01f, 0.0f, 0.01f}, gss[3] = {1.0f, 1.0f, 0.37f};
    for (int step = 1; step <= 3; step++) {
        const float wd = wds[step - 1], gs = gss[step - 1];
        gradients(g, n, step);
        if (be->ops->adamw_step(be, n, w, g, m, v, lr, b1, b2, eps, wd, step, gs, ct, wc) != 0) {
            printf("FAIL %s: adamw_step: %s\n", what, ab_error());
            failures++;
            goto out;
        }
        const ab_adamw_scalars k = ab_adamw_scalars_at(lr, b1, b2, wd, step);
        size_t bad = 0, first = 0;
        for (size_t i = 0; i < n; i++) {
            ab_adamw_update(&rw[i], g[i] * gs, &rm[i], &rv[i], b1, b2, eps, k.decay, k.step_size, k.inv_bc2);
            if (!same(w[i], rw[i]) || !same(m[i], rm[i]) || !same(v[i], rv[i])) {
                if (!bad++) first = i;
            }
        }
        if (bad) {
            printf("FAIL %s, step %d: %zu of %zu elements differ from ab_adamw_update, the first at %zu: "
                   "w %a against %a, m %a against %a, v %a against %a\n",
                   what, step, bad, n, first, (double)w[first], (double)rw[first], (double)m[first],
                   (double)rm[first], (double)v[first], (double)rv[first]);
            failures++;
            goto out;
        }
        if (copy_differs(what, step, ct, wc, rw, n)) {
            failures++;
            goto out;
        }
    }
    printf("ok %s: %zu elements, 3 steps, the bits of ab_adamw_update%s\n", what, n,
           wc ? ", the copy rounded as ab_store" : "");
out:
    free(W), free(G), free(M), free(V), free(rw), free(rm), free(rv), free(wcb);
}

/* the same for SGD: w, g and buf (NULL when momentum is 0) at the given element offsets */
static void run_sgd(ab_backend *be, const char *what, size_t n, size_t ow, size_t og, size_t ob, float momentum,
                    ab_dtype ct, size_t oc) {
    float *W = lines(n), *G = lines(n), *Bf = lines(n), *rw = malloc(n * 4), *rb = malloc(n * 4);
    uint16_t *wcb, *wc = copy_alloc(ct, n, oc, &wcb);
    if (!rw || !rb) abort();
    float *w = W + ow, *g = G + og, *buf = momentum != 0.0f ? Bf + ob : NULL;
    for (size_t i = 0; i < n; i++) {
        w[i] = rw[i] = i % 101 == 7 ? 0.0f : (float)ab_rng_normal(&rng) * 0.5f;
        rb[i] = 0.0f;
        if (buf) buf[i] = 0.0f;
    }
    const float wds[3] = {5e-4f, 0.0f, 5e-4f}, gss[3] = {1.0f, 1.0f, 0.37f}, lr = 0.01f;
    for (int step = 1; step <= 3; step++) {
        const float wd = wds[step - 1], gs = gss[step - 1];
        gradients(g, n, step);
        if (be->ops->sgd_step(be, n, w, g, buf, lr, momentum, wd, step == 1, gs, ct, wc) != 0) {
            printf("FAIL %s: sgd_step: %s\n", what, ab_error());
            failures++;
            goto out;
        }
        size_t bad = 0, first = 0;
        for (size_t i = 0; i < n; i++) {
            ab_sgd_update(&rw[i], g[i] * gs, buf ? &rb[i] : NULL, lr, momentum, wd, step == 1);
            if (!same(w[i], rw[i]) || (buf && !same(buf[i], rb[i]))) {
                if (!bad++) first = i;
            }
        }
        if (bad) {
            printf("FAIL %s, step %d: %zu of %zu elements differ from ab_sgd_update, the first at %zu: w %a against "
                   "%a, buf %a against %a\n",
                   what, step, bad, n, first, (double)w[first], (double)rw[first], buf ? (double)buf[first] : 0.0,
                   (double)rb[first]);
            failures++;
            goto out;
        }
        if (copy_differs(what, step, ct, wc, rw, n)) {
            failures++;
            goto out;
        }
    }
    printf("ok %s: %zu elements, 3 steps, the bits of ab_sgd_update%s\n", what, n,
           wc ? ", the copy rounded as ab_store" : "");
out:
    free(W), free(G), free(Bf), free(rw), free(rb), free(wcb);
}

int main(void) {
    ab_rng_seed(&rng, 20261205);
    if (ab_cpu_isa_check()) {
        printf("%s\n", ab_cpu_isa_check());
        return 2;
    }
    ab_backend *be = ab_backend_cpu_create(2);
    if (!be) {
        printf("FAIL: the CPU backend was refused: %s\n", ab_error());
        return 1;
    }
    printf("test_cpu_stream: the %s copies\n", ab_cpu_has_avx512() ? "AVX-512" : ab_cpu_has_avx2() ? "AVX2" : "baseline");
    /* two parts (cpu_parallel_for over 2 threads halves it), each of CPU_STREAM_MIN elements or
     * more: both take the streaming loop */
    enum { BIG = 2 * CPU_STREAM_MIN + 1003 };
    _Static_assert(BIG / 2 >= CPU_STREAM_MIN, "each of the two parts must stream");
    const size_t big = BIG;
    run(be, "AdamW streamed, aligned start", big, 0, 0, 0, 0, AB_F32, 0);
    run(be, "AdamW streamed, start 3 elements past a line, g elsewhere", big, 3, 4, 3, 3, AB_F32, 0);
    run(be, "AdamW, w, m and v aligned unlike each other", big, 0, 0, 1, 2, AB_F32, 0);
    run(be, "AdamW, v alone aligned unlike w and m", big, 0, 0, 0, 2, AB_F32, 0);
    run(be, "AdamW short", 1001, 0, 0, 0, 0, AB_F32, 0);
    /* the copy aligned as w (its chunks stored past the caches) and one element off (plain stores) */
    run(be, "AdamW streamed with an fp16 copy aligned as w, start 3 elements past a line", big, 3, 4, 3, 3, AB_F16, 3);
    run(be, "AdamW streamed with a bf16 copy aligned as w", big, 0, 0, 0, 0, AB_BF16, 0);
    run(be, "AdamW streamed with an fp16 copy one element off w's alignment", big, 0, 0, 0, 0, AB_F16, 1);
    run(be, "AdamW with an fp16 copy, w, m and v aligned unlike each other", big, 0, 0, 1, 2, AB_F16, 0);
    run(be, "AdamW short with an fp16 copy", 1001, 0, 0, 0, 0, AB_F16, 0);
    run_sgd(be, "SGD streamed, aligned start", big, 0, 0, 0, 0.9f, AB_F32, 0);
    run_sgd(be, "SGD streamed, start 3 elements past a line, g elsewhere", big, 3, 9, 3, 0.9f, AB_F32, 0);
    run_sgd(be, "SGD, w and buffer aligned unlike each other", big, 0, 0, 5, 0.9f, AB_F32, 0);
    run_sgd(be, "SGD without momentum", big, 3, 3, 0, 0.0f, AB_F32, 0);
    run_sgd(be, "SGD short", 1001, 0, 0, 0, 0.9f, AB_F32, 0);
    run_sgd(be, "SGD streamed with an fp16 copy aligned as w, start 3 elements past a line", big, 3, 9, 3, 0.9f, AB_F16,
            3);
    run_sgd(be, "SGD streamed with a bf16 copy aligned as w", big, 0, 0, 0, 0.9f, AB_BF16, 0);
    run_sgd(be, "SGD streamed with a bf16 copy one element off w's alignment", big, 0, 0, 0, 0.9f, AB_BF16, 1);
    run_sgd(be, "SGD without momentum, with an fp16 copy", big, 3, 3, 0, 0.0f, AB_F16, 0);
    run_sgd(be, "SGD short without momentum, with an fp16 copy one element off w's alignment", 1001, 0, 0, 0, 0.0f,
            AB_F16, 1);
    run_sgd(be, "SGD short with a bf16 copy", 1001, 0, 0, 0, 0.9f, AB_BF16, 0);
    be->ops->destroy(be);
    if (failures) {
        printf("test_cpu_stream: %d failure(s)\n", failures);
        return 1;
    }
    printf("test_cpu_stream: ok\n");
    return 0;
}
