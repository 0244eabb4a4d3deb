/* The profiling backend (kernels/prof): it forwards every op to the backend it wraps (the same
 * results as the CPU backend's own, the same memory charged), times each, and its records carry
 * the counting backend's FLOPs and bytes; the table by op kind adds the ops up. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend_cpu.h"
#include "backend_prof.h"
#include "tolerances.h"

static int failures = 0;

int main(void) {
    ab_backend *ref = ab_backend_cpu_create(1), *be = ab_backend_prof_create(ab_backend_cpu_create(1));
    if (!ref || !be) {
        fprintf(stderr, "test_prof: %s\n", ab_error());
        return 1;
    }
    AB_CHECK(be->ops->is_host == 1 && strcmp(be->ops->name, "cpu") == 0, "the wrapper is not the CPU backend's kind");
    enum { M = 96, N = 80, K = 112 };
    float *A = ab_alloc(be, AB_MEM_ACTIVATIONS, M * K * 4), *B = ab_alloc(be, AB_MEM_ACTIVATIONS, K * N * 4);
    float *C = ab_alloc(be, AB_MEM_ACTIVATIONS, M * N * 4), *C2 = malloc(M * N * 4);
    AB_CHECK(A && B && C && C2, "allocation: %s", ab_error());
    AB_CHECK(be->mem.current_total == (size_t)(M * K + K * N + M * N) * 4, "the wrapper charged %zu bytes",
             be->mem.current_total);
    for (int i = 0; i < M * K; i++) A[i] = (float)((i * 37) % 101) / 50.0f - 1.0f;
    for (int i = 0; i < K * N; i++) B[i] = (float)((i * 53) % 97) / 48.0f - 1.0f;
    AB_CHECK(be->ops->gemm(be, 0, 0, M, N, K, 1.0f, AB_F32, A, K, AB_F32, B, N, NULL, AB_EPI_NONE, 0.0f, AB_F32, C, N) == 0,
             "gemm: %s", ab_error());
    AB_CHECK(ref->ops->gemm(ref, 0, 0, M, N, K, 1.0f, AB_F32, A, K, AB_F32, B, N, NULL, AB_EPI_NONE, 0.0f, AB_F32, C2, N) ==
                 0,
             "gemm: %s", ab_error());
    AB_CHECK(memcmp(C, C2, M * N * 4) == 0, "the wrapped gemm's result differs from the CPU backend's");
    AB_CHECK(be->ops->relu_forward(be, M * N, AB_F32, C, C) == 0, "relu: %s", ab_error());
    int neg = 0;
    for (int i = 0; i < M * N; i++) neg += C[i] < 0;
    AB_CHECK(neg == 0, "the wrapped relu left %d negative values", neg);
    float sq = 0.0f;
    AB_CHECK(be->ops->sum_squares(be, M * N, C, &sq) == 0 && sq > 0, "sum_squares: %g", (double)sq);
    float back[4];
    AB_CHECK(be->ops->download(be, back, C, sizeof back) == 0 && memcmp(back, C, sizeof back) == 0,
             "the wrapped download did not copy");
    size_t n;
    const ab_op_cost *ops = ab_prof_ops(be, &n);
    AB_CHECK(n == 4, "%zu ops recorded, expected 4", n);
    if (n == 4) {
        AB_CHECK(!strcmp(ops[0].op, "gemm") && ops[0].flops == 2.0 * M * N * K && ops[0].time_s > 0,
                 "gemm record: %s, %g FLOPs, %g s", ops[0].op, ops[0].flops, ops[0].time_s);
        AB_CHECK(!strcmp(ops[1].op, "relu_forward") && ops[1].bytes == 2.0 * M * N * 4, "relu record: %s, %g bytes",
                 ops[1].op, ops[1].bytes);
        AB_CHECK(!strcmp(ops[3].op, "download") && ops[3].cls == AB_OPC_SYNC, "download record: %s", ops[3].op);
    }
    /* the table by kind: the GEMM line carries its FLOPs, every line its calls */
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    if (f) {
        ab_prof_report(f, ops, n, ab_backend_prof_inner(be));
        fclose(f);
    }
    AB_CHECK(text && strstr(text, "GEMM (linear, attention products)") && strstr(text, "0.00") &&
                 strstr(text, "activation (ReLU, GELU, tanh)") && strstr(text, "fp32 GEMM at 2048^3") &&
                 strstr(text, "gemm    96 x 80 x 112            NN fp32:      1 calls"),
             "the table lacks a kind or the reference GEMM:\n%s", text ? text : "(none)");
    free(text);
    /* a run of products alone: the peak at its own shapes (the shape timed alone), which its one
     * product, timed in the run, cannot exceed by much */
    text = NULL, len = 0;
    f = open_memstream(&text, &len);
    if (f) {
        ab_prof_report(f, ops, 1, ab_backend_prof_inner(be));
        fclose(f);
    }
    const char *own = text ? strstr(text, "each at its rate alone: ") : NULL;
    double alone_s = 0.0;
    AB_CHECK(own && sscanf(own, "each at its rate alone: %lf s", &alone_s) == 1 && alone_s > 0 &&
                 alone_s < 20.0 * ops[0].time_s,
             "no peak at the run's own shapes, or one far from the product's time (%g s against %g s):\n%s", alone_s,
             n ? ops[0].time_s : 0.0, text ? text : "(none)");
    free(text);
    ab_prof_clear(be);
    ab_prof_ops(be, &n);
    AB_CHECK(n == 0, "clear left %zu ops", n);
    /* the run's set-up steps over: the table starts again */
    AB_CHECK(be->ops->timed_part_begins != NULL, "the profiling backend has no timed_part_begins");
    AB_CHECK(be->ops->relu_forward(be, M * N, AB_F32, C, C) == 0, "relu: %s", ab_error());
    ab_prof_ops(be, &n);
    AB_CHECK(n == 1, "%zu ops recorded after a clear and one relu, expected 1", n);
    if (be->ops->timed_part_begins) be->ops->timed_part_begins(be);
    ab_prof_ops(be, &n);
    AB_CHECK(n == 0, "timed_part_begins left %zu ops", n);
    /* gemm_fold, which a GPU runs as two kernels (the counting backend's two records), is one op
     * here: one GEMM record with the time and the fold's bytes, the gradient the CPU backend's */
    {
        float *G = ab_alloc(be, AB_MEM_GRADIENTS, M * N * 4), *G2 = malloc(M * N * 4), *ws = malloc(M * N * 2);
        AB_CHECK(G && G2 && ws, "allocation: %s", ab_error());
        for (int i = 0; i < M * N; i++) G[i] = G2[i] = (float)(i % 7) - 3.0f;
        int32_t fi = 0, fi2 = 0;
        AB_CHECK(be->ops->gemm_fold(be, 0, 0, M, N, K, AB_F32, A, K, AB_F32, B, N, AB_F16, ws, G, 1, &fi) == 0 &&
                     ref->ops->gemm_fold(ref, 0, 0, M, N, K, AB_F32, A, K, AB_F32, B, N, AB_F16, ws, G2, 1, &fi2) == 0,
                 "gemm_fold: %s", ab_error());
        AB_CHECK(fi == fi2 && fi == 0, "the wrapped gemm_fold's found_inf %d, the CPU backend's %d (all finite)", fi, fi2);
        AB_CHECK(memcmp(G, G2, M * N * 4) == 0, "the wrapped gemm_fold's result differs from the CPU backend's");
        const ab_op_cost *f = ab_prof_ops(be, &n);
        const double gemm_bytes = (double)(M * K + K * N) * 4 + (double)M * N * 2, fold_bytes = (double)M * N * (2 + 8);
        AB_CHECK(n == 1, "gemm_fold left %zu records, expected 1 (the product, the fold merged into it)", n);
        if (n == 1)
            AB_CHECK(!strcmp(f[0].op, "gemm") && f[0].flops == 2.0 * M * N * K && f[0].time_s > 0 &&
                         fabs(f[0].bytes - (gemm_bytes + fold_bytes)) < 1.0 && f[0].kernels == 2,
                     "gemm_fold record: %s, %g FLOP, %g s, %g bytes (expected %g), %d kernels", f[0].op, f[0].flops,
                     f[0].time_s, f[0].bytes, gemm_bytes + fold_bytes, f[0].kernels);
        /* an infinity in G stays one: found_inf comes through the wrapper */
        G[5] = G2[5] = INFINITY;
        AB_CHECK(be->ops->gemm_fold(be, 0, 0, M, N, K, AB_F32, A, K, AB_F32, B, N, AB_F16, ws, G, 1, &fi) == 0 &&
                     ref->ops->gemm_fold(ref, 0, 0, M, N, K, AB_F32, A, K, AB_F32, B, N, AB_F16, ws, G2, 1, &fi2) == 0 &&
                     fi == 1 && fi2 == 1,
                 "gemm_fold over an infinity: found_inf %d through the wrapper, %d on the CPU backend", fi, fi2);
        ab_prof_clear(be);
        ab_release(be, AB_MEM_GRADIENTS, G, M * N * 4);
        free(G2);
        free(ws);
    }
    /* a convolution's three products, each under a kind of its own (where AMP's extra time goes
     * differs between them) */
    {
        ab_conv_shape cs = {.N = 2, .H = 6, .W = 6, .C = 4, .K = 8, .R = 3, .S = 3, .stride_h = 1, .stride_w = 1,
                            .pad_h = 1, .pad_w = 1};
        AB_CHECK(ab_conv_shape_init(&cs) == 0, "conv shape: %s", ab_error());
        const size_t nx = (size_t)cs.N * cs.H * cs.W * cs.C, nw = (size_t)cs.K * cs.R * cs.S * cs.C,
                     ny = (size_t)cs.N * cs.P * cs.Q * cs.K;
        float *x = calloc(nx, 4), *w = calloc(nw, 4), *y = calloc(ny, 4), *dx = calloc(nx, 4), *dw = calloc(nw, 4);
        AB_CHECK(x && w && y && dx && dw, "allocation");
        if (x && w && y && dx && dw) {
            AB_CHECK(be->ops->conv2d_forward(be, &cs, AB_F32, x, w, y) == 0 &&
                         be->ops->conv2d_backward_data(be, &cs, AB_F32, y, w, dx) == 0 &&
                         be->ops->conv2d_backward_filter(be, &cs, AB_F32, x, y, 0.0f, dw) == 0,
                     "convolution: %s", ab_error());
            const ab_op_cost *c = ab_prof_ops(be, &n);
            text = NULL, len = 0;
            f = open_memstream(&text, &len);
            if (f) {
                ab_prof_report(f, c, n, ab_backend_prof_inner(be));
                fclose(f);
            }
            AB_CHECK(n == 3 && text && strstr(text, "convolution forward ") &&
                         strstr(text, "convolution backward-data ") && strstr(text, "convolution filter gradient "),
                     "%zu records; the table lacks a convolution kind:\n%s", n, text ? text : "(none)");
            free(text);
            ab_prof_clear(be);
        }
        free(x), free(w), free(y), free(dx), free(dw);
    }
    ab_release(be, AB_MEM_ACTIVATIONS, A, M * K * 4);
    ab_release(be, AB_MEM_ACTIVATIONS, B, K * N * 4);
    ab_release(be, AB_MEM_ACTIVATIONS, C, M * N * 4);
    AB_CHECK(be->mem.current_total == 0, "%zu bytes still charged after the releases", be->mem.current_total);
    free(C2);
    be->ops->destroy(be);
    ref->ops->destroy(ref);
    if (failures) {
        fprintf(stderr, "test_prof: %d failure(s)\n", failures);
        return 1;
    }
    printf("test_prof: the wrapped CPU backend's results, memory and op records agree\n");
    return 0;
}
