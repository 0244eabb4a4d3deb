/* The device pass of test_backend_ops (ops_test.h) for the transformer ops: the backend under test
 * (CUDA, or a second CPU backend under --stand-in) against the CPU backend, on fresh seeded
 * random inputs in fp32, fp16 and bf16: batched strided products (all transposes, padded leading
 * dimensions and batch strides, attention's strided heads, an operand shared by every product
 * (stride 0), beta 0 and 1, mixed types, NaN); layer norm forward and backward (mixed x/y types,
 * a mean far from zero, acc 0 and 1, in place, NaN rows); GELU and tanh forward and backward
 * with specials (NaN, infinities, 65504, subnormals), in place; the masked attention softmax
 * (masked keys, a sequence with no key, NaN and inf scores, in place) and its backward; dropout
 * (the mask bit for bit, in place, rate 0, bad rates refused); BERT's embeddings with bad ids and
 * types, and their gradients (acc 0 and 1, a position table longer than L, NaN, infinities and
 * subnormals in the tables and the gradient); row gathers from a mapped set (word and byte
 * copies); sum_squares (NaN, inf) and scale. Shapes are odd on purpose (rows not a multiple of any
 * block, C = 1, 13, 384, 768). Whole tensors are compared by NMSE and by the largest element error
 * (tests/tolerances.h); ops whose every output is one fp32 expression evaluated alike on both
 * sides are compared bit for bit (NaN as NaN). Every device output has sentinels after it that
 * must survive. Each call of an op under test opens a case (op_case), described by its element
 * types first, then its shape and variant. */

#include "dev_pair.h"

/* int32 data (ids, types, masks), both copies, no sentinels needed: the ops only read them */
typedef struct {
    size_t n;
    int32_t *h, *d;
} ipair;

static ipair ipair_new(size_t n, int lo, int hi) { /* uniform in [lo, hi] */
    ipair p = {.n = n};
    p.h = malloc(n * sizeof(int32_t));
    if (!p.h) die("host buffer");
    for (size_t i = 0; i < n; i++) p.h[i] = lo + (int32_t)ab_rng_below(&rng, (uint64_t)(hi - lo + 1));
    p.d = ab_alloc(gpu, AB_MEM_WORKSPACE, n * sizeof(int32_t));
    if (!p.d) die("device buffer");
    return p;
}

static void ipair_push(const ipair *p) {
    if (gpu->ops->upload(gpu, p->d, p->h, p->n * sizeof(int32_t)) != 0) die("upload");
}

static void ipair_free(ipair *p) {
    ab_release(gpu, AB_MEM_WORKSPACE, p->d, p->n * sizeof(int32_t));
    free(p->h);
}

/* byte for byte (copies of raw rows) */
static void compare_bytes(const char *what, const pair *p) {
    unsigned char *g = fetch(what, p);
    const unsigned char *h = p->h;
    for (size_t b = 0; b < p->n * p->es; b++)
        if (g[b] != h[b]) {
            fprintf(stderr, "FAIL %s: byte %zu differs: got 0x%02x, expected 0x%02x; first of the mismatches\n", what,
                    b, g[b], h[b]);
            failures++;
            break;
        }
    free(g);
}

/* ---- batched products ------------------------------------------------------------------------ */

typedef struct {
    int ta, tb, M, N, K, batch;
    int lda, ldb, ldc;
    long long sa, sb, sc;
    size_t na, nb, nc; /* elements of the three buffers */
} gb_shape;

/* a shape with every leading dimension padded by pad and every batch stride by 3 elements */
static gb_shape gb_padded(int ta, int tb, int M, int N, int K, int batch, int pad) {
    gb_shape s = {ta, tb, M, N, K, batch, 0, 0, 0, 0, 0, 0, 0, 0, 0};
    const int ra = ta ? K : M, rb = tb ? N : K;
    s.lda = (ta ? M : K) + pad, s.ldb = (tb ? K : N) + pad, s.ldc = N + pad;
    s.sa = (long long)ra * s.lda + 3, s.sb = (long long)rb * s.ldb + 3, s.sc = (long long)M * s.ldc + 3;
    s.na = (size_t)(batch - 1) * s.sa + (size_t)ra * s.lda;
    s.nb = (size_t)(batch - 1) * s.sb + (size_t)rb * s.ldb;
    s.nc = (size_t)(batch - 1) * s.sc + (size_t)M * s.ldc;
    return s;
}

/* nan: 1 plants NaN in A (op(A)[2][1] of the last product: that row of C is NaN), in the gap
 * past B's row (never read) and in C with beta 0 (overwritten) */
static void gb_one(const char *name, const gb_shape *s, ab_dtype at, ab_dtype bt, ab_dtype ct, float alpha, float beta,
                   int nan) {
    char what[240];
    pair A = pair_new(s->na, at, -1.0f, 1.0f), B = pair_new(s->nb, bt, -1.0f, 1.0f);
    pair C = pair_new(s->nc, ct, -1.0f, 1.0f);
    C.cols = (size_t)s->ldc;
    if (nan) {
        const size_t z = (size_t)(s->batch - 1) * (size_t)s->sa;
        const int m = 2 % s->M, k = 1 % s->K;
        pair_set(&A, z + (s->ta ? (size_t)k * s->lda + m : (size_t)m * s->lda + k), NAN);
        if (s->ldb > (s->tb ? s->K : s->N)) pair_set(&B, (size_t)s->ldb - 1, NAN);
        if (beta == 0.0f) pair_set(&C, 0, NAN);
    }
    op_case_label(what, sizeof what, AB_OP_gemm_batched,
              "%s x %s -> %s %s ta=%d tb=%d M=%d N=%d K=%d batch %d alpha %g beta %g%s", ab_dtype_name(at),
              ab_dtype_name(bt), ab_dtype_name(ct), name, s->ta, s->tb, s->M, s->N, s->K, s->batch, (double)alpha,
              (double)beta, nan ? " NaN" : "");
    op_ok(what,
          cpu->ops->gemm_batched(cpu, s->ta, s->tb, s->M, s->N, s->K, alpha, at, A.h, s->lda, s->sa, bt, B.h, s->ldb,
                                 s->sb, beta, ct, C.h, s->ldc, s->sc, s->batch),
          gpu->ops->gemm_batched(gpu, s->ta, s->tb, s->M, s->N, s->K, alpha, at, A.d, s->lda, s->sa, bt, B.d, s->ldb,
                                 s->sb, beta, ct, C.d, s->ldc, s->sc, s->batch));
    /* the whole buffer: the gaps between rows and products must be untouched on both */
    if (ct != AB_F32)
        compare_t(what, &C, 0.0);
    else
        compare(what, &C, at == AB_F32 && bt == AB_F32 ? AB_TOL_GPU_GEMM_FP32_NMSE : AB_TOL_GPU_GEMM_LOWP_FP32OUT_NMSE,
                AB_TOL_GPU_LAYER_FP32_MAXREL);
    pair_free(&A);
    pair_free(&B);
    pair_free(&C);
}

/* attention's products over strided heads (core/layers.c): q, k, v, ctx (L, H), heads at column
 * h * D; scores and probabilities (heads, L, L) */
static void gb_heads(ab_dtype t) {
    enum { L = 128, D = 64, A = 12, H = A * D };
    const size_t LL = (size_t)L * L;
    char what[240];
    pair q = pair_rows(L, H, t, -1.0f, 1.0f), k = pair_rows(L, H, t, -1.0f, 1.0f), v = pair_rows(L, H, t, -1.0f, 1.0f);
    pair sc = pair_rows((size_t)A * L, L, t, -1.0f, 1.0f), ctx = pair_rows(L, H, t, -1.0f, 1.0f);
    const char *tn = ab_dtype_name(t);
    op_case_label(what, sizeof what, AB_OP_gemm_batched, "%s attention scores q k^T, 12 heads of 128x64 strided", tn);
    op_ok(what, cpu->ops->gemm_batched(cpu, 0, 1, L, L, D, 1.0f, t, q.h, H, D, t, k.h, H, D, 0.0f, t, sc.h, L, LL, A),
          gpu->ops->gemm_batched(gpu, 0, 1, L, L, D, 1.0f, t, q.d, H, D, t, k.d, H, D, 0.0f, t, sc.d, L, LL, A));
    compare_t(what, &sc, AB_TOL_GPU_GEMM_FP32_NMSE);
    pair_push(&sc); /* the same scores on both sides from here on */
    op_case_label(what, sizeof what, AB_OP_gemm_batched, "%s attention context P v, 12 heads of 128x64 strided", tn);
    op_ok(what, cpu->ops->gemm_batched(cpu, 0, 0, L, D, L, 1.0f, t, sc.h, L, LL, t, v.h, H, D, 0.0f, t, ctx.h, H, D, A),
          gpu->ops->gemm_batched(gpu, 0, 0, L, D, L, 1.0f, t, sc.d, L, LL, t, v.d, H, D, 0.0f, t, ctx.d, H, D, A));
    compare_t(what, &ctx, AB_TOL_GPU_GEMM_FP32_NMSE);
    op_case_label(what, sizeof what, AB_OP_gemm_batched, "%s attention dv = P^T dctx, 12 heads of 128x64 strided", tn);
    op_ok(what, cpu->ops->gemm_batched(cpu, 1, 0, L, D, L, 1.0f, t, sc.h, L, LL, t, q.h, H, D, 0.0f, t, v.h, H, D, A),
          gpu->ops->gemm_batched(gpu, 1, 0, L, D, L, 1.0f, t, sc.d, L, LL, t, q.d, H, D, 0.0f, t, v.d, H, D, A));
    compare_t(what, &v, AB_TOL_GPU_GEMM_FP32_NMSE);
    pair_free(&q);
    pair_free(&k);
    pair_free(&v);
    pair_free(&sc);
    pair_free(&ctx);
}

static void test_gemm_batched(void) {
    static const struct {
        const char *name;
        int ta, tb, M, N, K, batch, pad;
    } cases[] = {
        {"small odd", 0, 0, 13, 7, 5, 3, 0},       {"A^T, K = 384, padded", 1, 0, 37, 65, 384, 2, 3},
        {"B^T, K = 768", 0, 1, 64, 64, 768, 2, 1}, {"both transposed, padded", 1, 1, 70, 13, 33, 4, 2},
        {"one element", 0, 0, 1, 1, 1, 1, 0},      {"tall: M past two tiles", 0, 1, 129, 3, 17, 1, 0},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const gb_shape s =
            gb_padded(cases[i].ta, cases[i].tb, cases[i].M, cases[i].N, cases[i].K, cases[i].batch, cases[i].pad);
        for (int k = 0; k < 3; k++) {
            gb_one(cases[i].name, &s, TYPES[k], TYPES[k], TYPES[k], 1.0f, 0.0f, 0);
            gb_one(cases[i].name, &s, TYPES[k], TYPES[k], TYPES[k], 0.7f, 1.0f, 0); /* one rounding with old C */
        }
        gb_one(cases[i].name, &s, AB_F16, AB_F16, AB_F32, 1.0f, 1.0f, 0);
        gb_one(cases[i].name, &s, AB_BF16, AB_BF16, AB_F32, 1.0f, 0.0f, 0);
        gb_one(cases[i].name, &s, AB_F32, AB_F16, AB_BF16, 1.0f, 0.5f, 0);
        gb_one(cases[i].name, &s, AB_F16, AB_BF16, AB_F16, 1.0f, 1.0f, 0);
    }
    /* one operand shared by every product (batch stride 0): a broadcast in the batched layouts */
    gb_shape bc = gb_padded(0, 1, 33, 20, 48, 5, 1);
    bc.sb = 0, bc.nb = (size_t)bc.N * (size_t)bc.ldb;
    gb_shape ac = gb_padded(1, 0, 17, 24, 40, 3, 0);
    ac.sa = 0, ac.na = (size_t)ac.K * (size_t)ac.lda;
    for (int k = 0; k < 3; k++) {
        gb_one("B shared (sb = 0)", &bc, TYPES[k], TYPES[k], TYPES[k], 1.0f, 1.0f, 0);
        gb_one("A shared (sa = 0)", &ac, TYPES[k], TYPES[k], TYPES[k], 0.5f, 0.0f, 0);
    }
    const gb_shape s = gb_padded(1, 0, 9, 11, 6, 2, 2);
    for (int k = 0; k < 3; k++) {
        gb_one("NaN", &s, TYPES[k], TYPES[k], TYPES[k], 1.0f, 0.0f, 1);
        gb_one("NaN", &s, TYPES[k], TYPES[k], TYPES[k], 1.0f, 1.0f, 1);
        gb_heads(TYPES[k]);
    }
    /* batch 0 does nothing, on both */
    pair c = pair_new(4, AB_F32, -1.0f, 1.0f);
    op_case(AB_OP_gemm_batched, "fp32 x fp32 -> fp32 batch 0 (nothing written)");
    op_ok("gemm_batched batch 0",
          cpu->ops->gemm_batched(cpu, 0, 0, 2, 2, 2, 1.0f, AB_F32, c.h, 2, 4, AB_F32, c.h, 2, 4, 0.0f, AB_F32, c.h, 2,
                                 4, 0),
          gpu->ops->gemm_batched(gpu, 0, 0, 2, 2, 2, 1.0f, AB_F32, c.d, 2, 4, AB_F32, c.d, 2, 4, 0.0f, AB_F32, c.d, 2,
                                 4, 0));
    compare_exact("gemm_batched batch 0", &c);
    pair_free(&c);
}

/* ---- layer norm ------------------------------------------------------------------------------ */

static void ln_one(int R, int C, float offset, ab_dtype xt, ab_dtype yt, int nan) {
    const float eps = 1e-12f; /* BERT's */
    char what[240], tag[120];
    snprintf(tag, sizeof tag, "%s -> %s R=%d C=%d offset %g%s", ab_dtype_name(xt), ab_dtype_name(yt), R, C,
             (double)offset, nan ? " NaN" : "");
    pair x = pair_rows(R, C, xt, offset - 1.0f, offset + 1.0f), y = pair_rows(R, C, yt, -1.0f, 1.0f);
    pair gamma = pair_new((size_t)C, AB_F32, 0.5f, 1.5f), beta = pair_new((size_t)C, AB_F32, -0.5f, 0.5f);
    pair mean = pair_new((size_t)R, AB_F32, -1.0f, 1.0f), rstd = pair_new((size_t)R, AB_F32, -1.0f, 1.0f);
    if (nan) pair_set(&x, (size_t)(R / 2) * C + (size_t)(C / 2), NAN); /* row R / 2: all of it NaN */

    op_case_label(what, sizeof what, AB_OP_layernorm_forward, "%s%s", tag, nan ? " in x (one row)" : "");
    op_ok(what, cpu->ops->layernorm_forward(cpu, R, C, xt, x.h, gamma.h, beta.h, eps, mean.h, rstd.h, yt, y.h),
          gpu->ops->layernorm_forward(gpu, R, C, xt, x.d, gamma.d, beta.d, eps, mean.d, rstd.d, yt, y.d));
    compare_t(what, &y, AB_TOL_GPU_LN_FP32_NMSE);
    snprintf(what, sizeof what, "layernorm_forward %s: mean", tag);
    compare(what, &mean, AB_TOL_GPU_LN_FP32_NMSE, AB_TOL_GPU_LAYER_FP32_MAXREL);
    snprintf(what, sizeof what, "layernorm_forward %s: rstd", tag);
    compare(what, &rstd, AB_TOL_GPU_LN_FP32_NMSE, AB_TOL_GPU_LAYER_FP32_MAXREL);

    if (xt == yt && !nan) { /* y over x, on a copy of x the rest does not need */
        pair xe = pair_rows(R, C, xt, offset - 1.0f, offset + 1.0f);
        pair me = pair_new((size_t)R, AB_F32, -1.0f, 1.0f), re = pair_new((size_t)R, AB_F32, -1.0f, 1.0f);
        op_case_label(what, sizeof what, AB_OP_layernorm_forward, "%s in place", tag);
        op_ok(what, cpu->ops->layernorm_forward(cpu, R, C, xt, xe.h, gamma.h, beta.h, eps, me.h, re.h, yt, xe.h),
              gpu->ops->layernorm_forward(gpu, R, C, xt, xe.d, gamma.d, beta.d, eps, me.d, re.d, yt, xe.d));
        compare_t(what, &xe, AB_TOL_GPU_LN_FP32_NMSE);
        pair_free(&xe);
        pair_free(&me);
        pair_free(&re);
    }

    /* backward from the CPU's statistics on both sides, so only the backward is compared; acc 0
     * with dx apart, then acc 1 with dx over dy where the types allow it */
    pair_push(&mean);
    pair_push(&rstd);
    pair dy = pair_rows(R, C, yt, -1.0f, 1.0f), dx = pair_rows(R, C, xt, -1.0f, 1.0f);
    pair dg = pair_new((size_t)C, AB_F32, -1.0f, 1.0f), db = pair_new((size_t)C, AB_F32, -1.0f, 1.0f);
    if (nan) pair_set(&dy, (size_t)(R / 3) * C, NAN);
    for (int acc = 0; acc < 2; acc++) {
        const int inplace = acc == 1 && xt == yt;
        const pair *out = inplace ? &dy : &dx;
        op_case_label(what, sizeof what, AB_OP_layernorm_backward, "%s%s acc %d%s", tag, nan ? " in x and dy" : "", acc,
                  inplace ? " in place" : "");
        op_ok(what,
              cpu->ops->layernorm_backward(cpu, R, C, xt, x.h, yt, dy.h, gamma.h, mean.h, rstd.h, (float)acc, dg.h,
                                           db.h, out->h),
              gpu->ops->layernorm_backward(gpu, R, C, xt, x.d, yt, dy.d, gamma.d, mean.d, rstd.d, (float)acc, dg.d,
                                           db.d, out->d));
        compare_t(what, out, AB_TOL_GPU_LN_FP32_NMSE);
        snprintf(what, sizeof what, "layernorm_backward %s acc %d: dgamma", tag, acc);
        compare(what, &dg, AB_TOL_GPU_LN_FP32_NMSE, AB_TOL_GPU_LAYER_FP32_MAXREL);
        snprintf(what, sizeof what, "layernorm_backward %s acc %d: dbeta", tag, acc);
        compare(what, &db, AB_TOL_GPU_LN_FP32_NMSE, AB_TOL_GPU_LAYER_FP32_MAXREL);
        pair_push(&dg); /* the next round adds to the same values on both sides */
        pair_push(&db);
        pair_push(out);
    }
    pair_free(&x);
    pair_free(&y);
    pair_free(&gamma);
    pair_free(&beta);
    pair_free(&mean);
    pair_free(&rstd);
    pair_free(&dy);
    pair_free(&dx);
    pair_free(&dg);
    pair_free(&db);
}

static void test_layernorm(void) {
    static const struct {
        int R, C;
        float offset; /* x around offset: the mean far from zero must not cancel the variance away */
    } cases[] = {{37, 13, 0.0f}, {300, 384, 3.0f}, {64, 768, 0.0f}, {5, 1, 0.0f}, {33, 1000, 100.0f}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        for (int k = 0; k < 3; k++) ln_one(cases[i].R, cases[i].C, cases[i].offset, TYPES[k], TYPES[k], 0);
        /* BERT's embedding layer norm: fp32 sums in, the compute type out */
        ln_one(cases[i].R, cases[i].C, cases[i].offset, AB_F32, AB_F16, 0);
        ln_one(cases[i].R, cases[i].C, cases[i].offset, AB_F32, AB_BF16, 0);
    }
    for (int k = 0; k < 3; k++) ln_one(40, 13, 1.0f, TYPES[k], TYPES[k], 1);
}

/* ---- GELU and tanh ----------------------------------------------------------------------------- */

/* planted every 13 elements: NaN, the infinities, signed zeros, values where GELU and tanh
 * saturate, a tiny normal fp32 value, fp16's largest and smallest subnormal (normal in fp32 and
 * bf16), and an fp32 subnormal (bf16's too; fp16 rounds it to zero) */
static const float SPECIALS[] = {NAN,  INFINITY, -INFINITY, 0.0f,     -0.0f, 10.0f,  -10.0f,
                                 5.5f, -5.5f,    1e-30f,    65504.0f, 6e-8f, -1e-40f};
enum { NSPECIAL = sizeof SPECIALS / sizeof SPECIALS[0] };

static void plant_specials(pair *p) {
    for (int i = 0; i < NSPECIAL; i++) pair_set(p, (size_t)i * 13, SPECIALS[i]);
}

static void test_activations(void) {
    const size_t n = 100003; /* not a multiple of any block */
    char what[240];
    for (int k = 0; k < 3; k++) {
        const ab_dtype t = TYPES[k];
        const char *tn = ab_dtype_name(t);
        pair x = pair_new(n, t, -4.0f, 4.0f), y = pair_new(n, t, -1.0f, 1.0f), dy = pair_new(n, t, -1.0f, 1.0f);
        pair dx = pair_new(n, t, -1.0f, 1.0f);
        plant_specials(&x);
        pair_set(&dy, 1, NAN);

        op_case_label(what, sizeof what, AB_OP_gelu_forward, "%s n=%zu NaN, inf, 65504, subnormals in x", tn, n);
        op_ok(what, cpu->ops->gelu_forward(cpu, n, t, x.h, y.h), gpu->ops->gelu_forward(gpu, n, t, x.d, y.d));
        compare_t(what, &y, AB_TOL_GPU_ACT_FP32_NMSE);
        op_case_label(what, sizeof what, AB_OP_gelu_backward, "%s n=%zu NaN, inf, 65504, subnormals in x, NaN in dy", tn,
                  n);
        op_ok(what, cpu->ops->gelu_backward(cpu, n, t, x.h, dy.h, dx.h),
              gpu->ops->gelu_backward(gpu, n, t, x.d, dy.d, dx.d));
        compare_t(what, &dx, AB_TOL_GPU_ACT_FP32_NMSE);
        op_case_label(what, sizeof what, AB_OP_tanh_forward, "%s n=%zu NaN, inf, 65504, subnormals in x", tn, n);
        op_ok(what, cpu->ops->tanh_forward(cpu, n, t, x.h, y.h), gpu->ops->tanh_forward(gpu, n, t, x.d, y.d));
        compare_t(what, &y, AB_TOL_GPU_ACT_FP32_NMSE);
        pair_push(&y); /* backward from the same y on both sides */
        op_case_label(what, sizeof what, AB_OP_tanh_backward, "%s n=%zu y the tanh of the specials, NaN in dy", tn, n);
        op_ok(what, cpu->ops->tanh_backward(cpu, n, t, y.h, dy.h, dx.h),
              gpu->ops->tanh_backward(gpu, n, t, y.d, dy.d, dx.d));
        compare_t(what, &dx, AB_TOL_GPU_ACT_FP32_NMSE);

        /* in place, as the models call them: dx over dy, then y over x */
        op_case_label(what, sizeof what, AB_OP_tanh_backward, "%s n=%zu y the tanh of the specials, NaN in dy, in place",
                  tn, n);
        op_ok(what, cpu->ops->tanh_backward(cpu, n, t, y.h, dy.h, dy.h),
              gpu->ops->tanh_backward(gpu, n, t, y.d, dy.d, dy.d));
        compare_t(what, &dy, AB_TOL_GPU_ACT_FP32_NMSE);
        pair_push(&dy);
        op_case_label(what, sizeof what, AB_OP_gelu_backward, "%s n=%zu specials in x, NaN in dy, in place", tn, n);
        op_ok(what, cpu->ops->gelu_backward(cpu, n, t, x.h, dy.h, dy.h),
              gpu->ops->gelu_backward(gpu, n, t, x.d, dy.d, dy.d));
        compare_t(what, &dy, AB_TOL_GPU_ACT_FP32_NMSE);
        op_case_label(what, sizeof what, AB_OP_gelu_forward, "%s n=%zu specials in x, in place", tn, n);
        op_ok(what, cpu->ops->gelu_forward(cpu, n, t, x.h, x.h), gpu->ops->gelu_forward(gpu, n, t, x.d, x.d));
        compare_t(what, &x, AB_TOL_GPU_ACT_FP32_NMSE);
        pair_push(&x);
        op_case_label(what, sizeof what, AB_OP_tanh_forward, "%s n=%zu GELU of the specials, in place", tn, n);
        op_ok(what, cpu->ops->tanh_forward(cpu, n, t, x.h, x.h), gpu->ops->tanh_forward(gpu, n, t, x.d, x.d));
        compare_t(what, &x, AB_TOL_GPU_ACT_FP32_NMSE);
        pair_free(&x);
        pair_free(&y);
        pair_free(&dy);
        pair_free(&dx);
    }
}

/* ---- the attention softmax ------------------------------------------------------------------- */

/* mask: sequence 0 random with key 0 masked and key 1 kept, the last (B > 1) with no key at all;
 * nan: row 1 of sequence 0 gets a NaN at a kept key (the row becomes NaN), row 2 a NaN at the
 * masked key 0 (no effect), row 3 +inf at a kept key (inf - inf: NaN) */
static void softmax_one(int B, int heads, int L, ab_dtype t, int nan) {
    const size_t rows = (size_t)B * heads * L;
    const float scale = 0.125f;
    char what[240], tag[100];
    snprintf(tag, sizeof tag, "%s B=%d heads=%d L=%d%s", ab_dtype_name(t), B, heads, L, nan ? " NaN/inf" : "");
    ipair mask = ipair_new((size_t)B * L, 0, 3); /* 0 in a quarter of the keys */
    for (int j = 0; j < L; j++) mask.h[j] = mask.h[j] != 0;
    mask.h[0] = 0;
    mask.h[1] = 1;
    if (B > 1)
        for (int j = 0; j < L; j++) mask.h[(size_t)(B - 1) * L + j] = 0;
    ipair_push(&mask);
    pair x = pair_rows(rows, L, t, -4.0f, 4.0f), p = pair_rows(rows, L, t, -1.0f, 1.0f);
    if (nan) {
        pair_set(&x, 1 * (size_t)L + 1, NAN);
        pair_set(&x, 2 * (size_t)L + 0, NAN);
        pair_set(&x, 3 * (size_t)L + 1, INFINITY);
    }
    op_case_label(what, sizeof what, AB_OP_softmax_forward, "%s%s", tag,
              B > 1 ? " masked keys, a sequence with none left" : " masked keys");
    op_ok(what, cpu->ops->softmax_forward(cpu, B, heads, L, t, scale, x.h, mask.h, p.h),
          gpu->ops->softmax_forward(gpu, B, heads, L, t, scale, x.d, mask.d, p.d));
    compare_t(what, &p, AB_TOL_GPU_ACT_FP32_NMSE);
    /* the CPU's own output must have the shape the op promises: else both could agree on nonsense */
    {
        int bad = 0;
        for (size_t r = 0; r < rows && !bad; r++) {
            const int32_t *mk = mask.h + (r / ((size_t)heads * L)) * L;
            for (int j = 0; j < L; j++) {
                const float v = ab_load(p.h, r * L + j, t);
                if (nan && r / L == 0 && (r % L == 1 || r % L == 3))
                    bad |= !isnan(v);
                else if (!mk[j])
                    bad |= v != 0.0f;
                else
                    bad |= !(v >= 0.0f && v <= 1.0f);
            }
        }
        AB_CHECK(!bad, "%s: the reference gives a probability outside the contract (masked keys 0, NaN rows)", what);
    }
    op_case_label(what, sizeof what, AB_OP_softmax_forward, "%s masked keys, in place", tag);
    op_ok(what, cpu->ops->softmax_forward(cpu, B, heads, L, t, scale, x.h, mask.h, x.h),
          gpu->ops->softmax_forward(gpu, B, heads, L, t, scale, x.d, mask.d, x.d));
    compare_t(what, &x, AB_TOL_GPU_ACT_FP32_NMSE);

    /* backward from the CPU's probabilities on both sides */
    pair_push(&p);
    pair dp = pair_rows(rows, L, t, -1.0f, 1.0f), dx = pair_rows(rows, L, t, -1.0f, 1.0f);
    op_case_label(what, sizeof what, AB_OP_softmax_backward, "%s p from the masked forward", tag);
    op_ok(what, cpu->ops->softmax_backward(cpu, (int)rows, L, t, scale, p.h, dp.h, dx.h),
          gpu->ops->softmax_backward(gpu, (int)rows, L, t, scale, p.d, dp.d, dx.d));
    compare_t(what, &dx, AB_TOL_GPU_ACT_FP32_NMSE);
    op_case_label(what, sizeof what, AB_OP_softmax_backward, "%s p from the masked forward, in place", tag);
    op_ok(what, cpu->ops->softmax_backward(cpu, (int)rows, L, t, scale, p.h, dp.h, dp.h),
          gpu->ops->softmax_backward(gpu, (int)rows, L, t, scale, p.d, dp.d, dp.d));
    compare_t(what, &dp, AB_TOL_GPU_ACT_FP32_NMSE);
    ipair_free(&mask);
    pair_free(&x);
    pair_free(&p);
    pair_free(&dp);
    pair_free(&dx);
}

static void test_softmax(void) {
    static const int shapes[][3] = {{3, 2, 13}, {2, 12, 128}, {1, 3, 384}, {2, 1, 1}};
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++)
        for (int k = 0; k < 3; k++) softmax_one(shapes[i][0], shapes[i][1], shapes[i][2], TYPES[k], 0);
    for (int k = 0; k < 3; k++) softmax_one(2, 2, 37, TYPES[k], 1);
}

/* ---- dropout --------------------------------------------------------------------------------- */

static void test_dropout(void) {
    const size_t n = 100003;
    const float rates[] = {0.0f, 0.1f, 0.5f, 0.9f};
    char what[240];
    for (int k = 0; k < 3; k++)
        for (size_t ri = 0; ri < sizeof rates / sizeof rates[0]; ri++) {
            const ab_dtype t = TYPES[k];
            const float rate = rates[ri];
            const uint64_t seed = 0x9E3779B97F4A7C15ull * (ri + 1) + (uint64_t)k;
            pair x = pair_new(n, t, -1.0f, 1.0f), y = pair_new(n, t, -1.0f, 1.0f);
            plant_specials(&x);
            op_case_label(what, sizeof what, AB_OP_dropout_forward, "%s n=%zu rate %g NaN, inf, 65504, subnormals",
                      ab_dtype_name(t), n, (double)rate);
            op_ok(what, cpu->ops->dropout_forward(cpu, n, t, rate, seed, x.h, y.h),
                  gpu->ops->dropout_forward(gpu, n, t, rate, seed, x.d, y.d));
            compare_exact(what, &y); /* the mask and one multiply: the same bits */
            {
                size_t zeros = 0;
                for (size_t i = NSPECIAL * 13; i < n; i++) zeros += ab_load(y.h, i, t) == 0.0f;
                const double frac = (double)zeros / (double)(n - NSPECIAL * 13);
                AB_CHECK(fabs(frac - rate) < 0.01, "%s: %.4f of the elements dropped", what, frac);
            }
            op_case_label(what, sizeof what, AB_OP_dropout_backward, "%s n=%zu rate %g the forward's output, in place",
                      ab_dtype_name(t), n, (double)rate);
            op_ok(what, cpu->ops->dropout_backward(cpu, n, t, rate, seed, y.h, y.h),
                  gpu->ops->dropout_backward(gpu, n, t, rate, seed, y.d, y.d));
            compare_exact(what, &y);
            op_case_label(what, sizeof what, AB_OP_dropout_forward,
                      "%s n=%zu rate %g NaN, inf, 65504, subnormals, in place, another seed", ab_dtype_name(t), n,
                      (double)rate);
            op_ok(what, cpu->ops->dropout_forward(cpu, n, t, rate, seed + 1, x.h, x.h),
                  gpu->ops->dropout_forward(gpu, n, t, rate, seed + 1, x.d, x.d));
            compare_exact(what, &x);
            pair_free(&x);
            pair_free(&y);
        }
    /* rates outside [0, 1) are refused by both, and x is left alone */
    pair x = pair_new(16, AB_F32, -1.0f, 1.0f);
    const float bad[] = {1.0f, -0.1f, NAN, 2.0f};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        op_case_label(what, sizeof what, AB_OP_dropout_forward, "fp32 rate %g is refused", (double)bad[i]);
        AB_CHECK(gpu->ops->dropout_forward(gpu, 16, AB_F32, bad[i], 1, x.d, x.d) != 0 &&
                     cpu->ops->dropout_forward(cpu, 16, AB_F32, bad[i], 1, x.h, x.h) != 0,
                 "dropout_forward took rate %g", (double)bad[i]);
        compare_exact(what, &x);
        op_case_label(what, sizeof what, AB_OP_dropout_backward, "fp32 rate %g is refused", (double)bad[i]);
        AB_CHECK(gpu->ops->dropout_backward(gpu, 16, AB_F32, bad[i], 1, x.d, x.d) != 0, "dropout_backward took rate %g",
                 (double)bad[i]);
        AB_CHECK(cpu->ops->dropout_backward(cpu, 16, AB_F32, bad[i], 1, x.h, x.h) != 0,
                 "the CPU backend's dropout_backward took rate %g", (double)bad[i]);
        compare_exact(what, &x);
    }
    pair_free(&x);
}

/* ---- embeddings ------------------------------------------------------------------------------ */

/* specials: NaN, the infinities and fp32 subnormals in the rows of the tables that row 0 reads
 * (column 0 NaN, column 1 a subnormal sum, column 2 -inf + inf: NaN) and in dy (rows 5 to 8, the
 * tables' gradients take them: rows 6 and 7 of one type bring inf and -inf to one element of the
 * type table); C >= 3, L > 8 */
static void emb_one(int B, int L, int C, int vocab, int specials) {
    const int R = B * L, T = 2, P = L + 5; /* a position table longer than the sequences */
    char what[240], tag[120];
    snprintf(tag, sizeof tag, "fp32 R=%d L=%d C=%d vocab %d, bad ids and types%s", R, L, C, vocab,
             specials ? ", NaN, inf, subnormals" : "");
    ipair ids = ipair_new((size_t)R, 0, vocab - 1), types = ipair_new((size_t)R, 0, T - 1);
    ids.h[3] = vocab; /* out of range: NaN rows, skipped by backward */
    ids.h[10 % R] = -1;
    types.h[20 % R] = T;
    if (specials) types.h[6] = types.h[7] = 1;
    ipair_push(&ids);
    ipair_push(&types);
    pair word = pair_rows((size_t)vocab, C, AB_F32, -1.0f, 1.0f), pos = pair_rows((size_t)P, C, AB_F32, -1.0f, 1.0f);
    pair type = pair_rows(T, C, AB_F32, -1.0f, 1.0f), y = pair_rows((size_t)R, C, AB_F32, -1.0f, 1.0f);
    if (specials) {
        const size_t w0 = (size_t)ids.h[0] * C, t0 = (size_t)types.h[0] * C;
        pair_set(&word, w0 + 0, NAN);
        pair_set(&word, w0 + 1, 1e-40f);
        pair_set(&pos, 1, 0.0f);
        pair_set(&type, t0 + 1, 2e-40f);
        pair_set(&word, w0 + 2, -INFINITY);
        pair_set(&pos, 2, INFINITY);
    }
    op_case_label(what, sizeof what, AB_OP_embedding_forward, "%s", tag);
    op_ok(what, cpu->ops->embedding_forward(cpu, R, L, C, ids.h, types.h, word.h, vocab, pos.h, type.h, T, y.h),
          gpu->ops->embedding_forward(gpu, R, L, C, ids.d, types.d, word.d, vocab, pos.d, type.d, T, y.d));
    compare_exact(what, &y); /* two fp32 adds in the same order */
    AB_CHECK(isnan(ab_load(y.h, 3 * (size_t)C, AB_F32)) && isnan(ab_load(y.h, (size_t)(20 % R) * C, AB_F32)),
             "%s: the reference has no NaN row for a bad id or type", what);

    pair dy = pair_rows((size_t)R, C, AB_F32, -1.0f, 1.0f);
    if (specials) {
        pair_set(&dy, 5 * (size_t)C + 0, NAN);
        pair_set(&dy, 6 * (size_t)C + 1, INFINITY);
        pair_set(&dy, 7 * (size_t)C + 1, -INFINITY);
        pair_set(&dy, 8 * (size_t)C + 2, 1e-40f);
    }
    for (int acc = 0; acc < 2; acc++) {
        op_case_label(what, sizeof what, AB_OP_embedding_backward, "%s acc %d", tag, acc);
        op_ok(what,
              cpu->ops->embedding_backward(cpu, R, L, C, ids.h, types.h, dy.h, vocab, T, acc, word.h, pos.h, type.h),
              gpu->ops->embedding_backward(gpu, R, L, C, ids.d, types.d, dy.d, vocab, T, acc, word.d, pos.d, type.d));
        snprintf(what, sizeof what, "embedding_backward %s acc %d: word table", tag, acc);
        compare(what, &word, AB_TOL_GPU_SCATTER_FP32_NMSE, AB_TOL_GPU_LAYER_FP32_MAXREL);
        snprintf(what, sizeof what, "embedding_backward %s acc %d: position table (rows past L untouched)", tag, acc);
        compare_exact(what, &pos); /* row order on both */
        snprintf(what, sizeof what, "embedding_backward %s acc %d: type table", tag, acc);
        compare_exact(what, &type);
        pair_push(&word); /* acc 1 adds to the same tables on both sides */
    }
    ipair_free(&ids);
    ipair_free(&types);
    pair_free(&word);
    pair_free(&pos);
    pair_free(&type);
    pair_free(&y);
    pair_free(&dy);
}

static void test_embedding(void) {
    emb_one(4, 37, 13, 50, 0);
    emb_one(3, 29, 384, 5, 0); /* a handful of ids: each repeated ~17 times */
    emb_one(2, 128, 768, 300, 0);
    emb_one(3, 11, 7, 20, 1);
}

/* ---- row gathers ----------------------------------------------------------------------------- */

static void test_gather_rows(void) {
    const int N = 200;
    const size_t row_sizes[] = {148, 7, 1536}; /* 37 ints; bytes; a row of 768 fp16 */
    const int Bs[] = {64, 5, 64};
    char what[240];
    for (size_t si = 0; si < sizeof row_sizes / sizeof row_sizes[0]; si++) {
        const size_t rb = row_sizes[si];
        unsigned char *set = malloc((size_t)N * rb);
        if (!set) die("host buffer");
        for (size_t i = 0; i < (size_t)N * rb; i++) set[i] = (unsigned char)ab_rng_below(&rng, 256);
        const void *cs, *gs;
        op_ok("map_data", cpu->ops->map_data(cpu, set, (size_t)N * rb, &cs),
              gpu->ops->map_data(gpu, set, (size_t)N * rb, &gs));
        for (size_t bi = 0; bi < sizeof Bs / sizeof Bs[0]; bi++)
            for (int off = 0; off < 2; off++) { /* off 1: the output one byte in (the byte copy) */
                const int B = Bs[bi];
                int32_t idx[64];
                for (int b = 0; b < B; b++) idx[b] = (int32_t)ab_rng_below(&rng, (uint64_t)N);
                idx[0] = N - 1;
                pair out = pair_new(((size_t)B * rb + 1 + 3) / 4, AB_F32, 0.0f, 0.0f); /* compared as bytes */
                op_case_label(what, sizeof what, AB_OP_gather_rows, "%zu-byte rows of a set of %d, B=%d, output offset %d",
                          rb, N, B, off);
                op_ok(what, cpu->ops->gather_rows(cpu, B, rb, cs, idx, (char *)out.h + off),
                      gpu->ops->gather_rows(gpu, B, rb, gs, idx, (char *)out.d + off));
                memset(idx, 0xff, sizeof idx); /* the op must have taken what it needs already */
                compare_bytes(what, &out);
                pair_free(&out);
            }
        if (!self_check) { /* a negative index is refused (on the CPU it would read before the set) */
            int32_t idx[2] = {0, -1};
            pair out = pair_new(2 * rb, AB_F32, 0.0f, 0.0f);
            op_case_label(what, sizeof what, AB_OP_gather_rows, "%zu-byte rows: index -1 is refused", rb);
            AB_CHECK(gpu->ops->gather_rows(gpu, 2, rb, gs, idx, out.d) != 0, "gather_rows took index -1");
            pair_free(&out);
        }
        gpu->ops->unmap_data(gpu, gs, (size_t)N * rb);
        cpu->ops->unmap_data(cpu, cs, (size_t)N * rb);
        free(set);
    }
}

/* ---- the gradient-norm helpers --------------------------------------------------------------- */

static void test_norm_helpers(void) {
    const size_t ns[] = {0, 1, 1000, 300007, 5000011};
    static const char *const PLANTED[3] = {"", " NaN", " inf"};
    char what[240];
    for (size_t i = 0; i < sizeof ns / sizeof ns[0]; i++)
        for (int planted = 0; planted < 3; planted++) { /* nothing, a NaN, an inf in the middle */
            const size_t n = ns[i];
            if (planted && n == 0) continue;
            pair x = pair_new(n ? n : 1, AB_F32, -2.0f, 2.0f), out = pair_new(1, AB_F32, 1.25f, 1.25f);
            if (planted) pair_set(&x, n / 2, planted == 1 ? NAN : INFINITY);
            op_case_label(what, sizeof what, AB_OP_sum_squares, "fp32 n=%zu%s", n, PLANTED[planted]);
            op_ok(what, cpu->ops->sum_squares(cpu, n, x.h, out.h), gpu->ops->sum_squares(gpu, n, x.d, out.d));
            compare(what, &out, AB_TOL_GPU_SUMSQ_REL * AB_TOL_GPU_SUMSQ_REL, AB_TOL_GPU_SUMSQ_REL);
            /* a second call adds to the first (the CPU's value on both sides) */
            pair_push(&out);
            op_case_label(what, sizeof what, AB_OP_sum_squares, "fp32 n=%zu%s, added to the first call's sum", n,
                      PLANTED[planted]);
            op_ok(what, cpu->ops->sum_squares(cpu, n, x.h, out.h), gpu->ops->sum_squares(gpu, n, x.d, out.d));
            compare(what, &out, AB_TOL_GPU_SUMSQ_REL * AB_TOL_GPU_SUMSQ_REL, AB_TOL_GPU_SUMSQ_REL);
            if (n > 1) {
                plant_specials(&x);
                op_case_label(what, sizeof what, AB_OP_scale, "fp32 n=%zu by 0.37, NaN, inf, 65504, subnormals%s", n,
                          PLANTED[planted]);
                op_ok(what, cpu->ops->scale(cpu, n, x.h, 0.37f), gpu->ops->scale(gpu, n, x.d, 0.37f));
                compare_exact(what, &x); /* one multiply */
            }
            pair_free(&x);
            pair_free(&out);
        }
}

/* unscale_check with the squares (clipping's norm in the unscaling's pass): g and found_inf as
 * unscale_check's, the sum as sum_squares's within its tolerance; and on the device the bits of
 * its own unscale_check then sum_squares over a copy. The shared rng is left as it was. */
static void test_unscale_squares(void) {
    const ab_rng kept = rng;
    const size_t ns[] = {1, 1000, 300007, 5000011};
    static const char *const PLANTED[3] = {"", " NaN", " inf"};
    char what[240];
    for (size_t i = 0; i < sizeof ns / sizeof ns[0]; i++)
        for (int planted = 0; planted < 3; planted++)
            for (int unit = 0; unit < 2; unit++) { /* inv_scale 2^-16, and 1: the check alone */
                const size_t n = ns[i];
                const float inv = unit ? 1.0f : 0x1p-16f;
                pair g = pair_new(n, AB_F32, -3e4f, 3e4f), g2 = pair_new(n, AB_F32, 0.0f, 0.0f);
                pair out = pair_new(1, AB_F32, 1.25f, 1.25f), out2 = pair_new(1, AB_F32, 1.25f, 1.25f);
                pair flag = flag_new(), flag2 = flag_new();
                if (planted) pair_set(&g, n / 2, planted == 1 ? NAN : INFINITY);
                memcpy(g2.h, g.h, n * sizeof(float));
                pair_push(&g2);
                op_case_label(what, sizeof what, AB_OP_unscale_check, "fp32 n=%zu inv_scale %s, the squares in the pass%s",
                              n, unit ? "1" : "2^-16", PLANTED[planted]);
                op_ok(what, cpu->ops->unscale_check(cpu, n, g.h, inv, flag.h, out.h),
                      gpu->ops->unscale_check(gpu, n, g.d, inv, flag.d, out.d));
                compare_exact(what, &g);
                compare_flag(what, &flag, planted != 0);
                compare(what, &out, AB_TOL_GPU_SUMSQ_REL * AB_TOL_GPU_SUMSQ_REL, AB_TOL_GPU_SUMSQ_REL);
                float s1 = 0.0f, s2 = 0.0f;
                if (gpu->ops->unscale_check(gpu, n, g2.d, inv, flag2.d, NULL) != 0 ||
                    gpu->ops->sum_squares(gpu, n, g2.d, out2.d) != 0 || gpu->ops->download(gpu, &s1, out.d, 4) != 0 ||
                    gpu->ops->download(gpu, &s2, out2.d, 4) != 0)
                    AB_CHECK(0, "%s: the device's unscale_check and sum_squares: %s", what, ab_error());
                else
                    AB_CHECK(memcmp(&s1, &s2, 4) == 0 || (isnan(s1) && isnan(s2)),
                             "%s: on the device %.9g, its unscale_check then sum_squares %.9g", what, (double)s1,
                             (double)s2);
                pair_free(&g), pair_free(&g2), pair_free(&out), pair_free(&out2), pair_free(&flag), pair_free(&flag2);
            }
    rng = kept;
}

/* ---- errors are reported, not crashed on --------------------------------------------------- */

static void test_bad_arguments(void) {
    pair a = pair_new(64, AB_F32, -1.0f, 1.0f), m = pair_new(64, AB_F32, -1.0f, 1.0f);
    ipair ids = ipair_new(8, 0, 0);
    ipair_push(&ids);
    /* each op on both backends: [0] the CPU, [1] the backend under test */
    ab_backend *const be[2] = {cpu, gpu};
    const char *const bn[2] = {"cpu", "gpu"};
    void *const pa[2] = {a.h, a.d};
    float *const pm[2] = {(float *)m.h, (float *)m.d};
    const int32_t *const pi[2] = {ids.h, ids.d};
    op_case(AB_OP_gemm_batched, "fp32 x fp32 -> fp32 M = 0 is refused");
    for (int k = 0; k < 2; k++)
        AB_CHECK(be[k]->ops->gemm_batched(be[k], 0, 0, 0, 2, 2, 1.0f, AB_F32, pa[k], 2, 4, AB_F32, pa[k], 2, 4, 0.0f,
                                          AB_F32, pa[k], 2, 4, 1) != 0,
                 "%s gemm_batched took M = 0", bn[k]);
    op_case(AB_OP_layernorm_forward, "fp32 -> fp32 R = 0 is refused");
    for (int k = 0; k < 2; k++)
        AB_CHECK(be[k]->ops->layernorm_forward(be[k], 0, 4, AB_F32, pa[k], pm[k], pm[k], 1e-5f, pm[k], pm[k], AB_F32,
                                               pa[k]) != 0,
                 "%s layernorm_forward took R = 0", bn[k]);
    op_case(AB_OP_softmax_forward, "fp32 L = 0 is refused");
    for (int k = 0; k < 2; k++)
        AB_CHECK(be[k]->ops->softmax_forward(be[k], 1, 1, 0, AB_F32, 1.0f, pa[k], pi[k], pa[k]) != 0,
                 "%s softmax_forward took L = 0", bn[k]);
    op_case(AB_OP_embedding_forward, "fp32 R = 7 rows in sequences of L = 2 is refused");
    for (int k = 0; k < 2; k++)
        AB_CHECK(be[k]->ops->embedding_forward(be[k], 7, 2, 4, pi[k], pi[k], pm[k], 1, pm[k], pm[k], 1, pm[k]) != 0,
                 "%s embedding_forward took R = 7 rows of L = 2", bn[k]);
    op_case(AB_OP_gelu_forward, "element type 7 is refused");
    for (int k = 0; k < 2; k++)
        AB_CHECK(be[k]->ops->gelu_forward(be[k], 4, (ab_dtype)7, pa[k], pa[k]) != 0,
                 "%s gelu_forward took element type 7", bn[k]);
    op_case(AB_OP_gemm_batched, "lda 3 for K 4, ldb 3 for N 4 (fp16), ldc 3 for N 4 are refused");
    for (int k = 0; k < 2; k++) {
        AB_CHECK(be[k]->ops->gemm_batched(be[k], 0, 0, 4, 4, 4, 1.0f, AB_F32, pa[k], 3, 16, AB_F32, pa[k], 4, 16,
                                          0.0f, AB_F32, pm[k], 4, 16, 1) != 0,
                 "%s gemm_batched took lda 3 for K 4", bn[k]);
        AB_CHECK(be[k]->ops->gemm_batched(be[k], 0, 0, 4, 4, 4, 1.0f, AB_F16, pa[k], 4, 16, AB_F16, pa[k], 3, 16,
                                          0.0f, AB_F32, pm[k], 4, 16, 1) != 0,
                 "%s gemm_batched took ldb 3 for N 4", bn[k]);
        AB_CHECK(be[k]->ops->gemm_batched(be[k], 1, 1, 4, 4, 4, 1.0f, AB_F32, pa[k], 4, 16, AB_F32, pa[k], 4, 16,
                                          0.0f, AB_F32, pm[k], 3, 16, 1) != 0,
                 "%s gemm_batched took ldc 3 for N 4", bn[k]);
    }
    pair_free(&a);
    pair_free(&m);
    ipair_free(&ids);
}

void dev_transformer_run(void) {
    test_gemm_batched();
    test_layernorm();
    test_activations();
    test_softmax();
    test_dropout();
    test_embedding();
    test_gather_rows();
    test_norm_helpers();
    test_unscale_squares();
    test_bad_arguments();
}
