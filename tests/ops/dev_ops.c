/* The device pass of test_backend_ops (ops_test.h) for the MLP's ops: the backend under test
 * (CUDA, or the stand-in) against the CPU backend, on fresh seeded random inputs in fp32, fp16 and
 * bf16: GEMM in every transpose, with and without bias/ReLU epilogues and beta accumulation
 * (cuBLASLt's direct path and our fallback), casts, accumulate, ReLU forward and backward, column
 * sums, the fused softmax cross-entropy, unscale-and-check, SGD and AdamW steps, the gradient
 * census's log2 histogram and batch gathering from a device-resident data set. Whole tensors are
 * compared by NMSE with the tolerances of tests/tolerances.h; ops whose arithmetic is the shared
 * AB_HD code and has no reduction are compared bit for bit. NaN, +-inf, +-0, 65504 and subnormals
 * are planted and must show in the same places. Every device output has sentinels after it that
 * must survive (out-of-bounds writes). Also: GEMMs run twice (the second time from cached plans,
 * positive or negative), biases at every alignment from 256 bytes down to one element, labels
 * outside [0, C) (NaN loss and a NaN gradient row on both backends), same-type casts between
 * overlapping buffers (memmove), a gather straight after a large data set is mapped, and NaN
 * through cuBLASLt's own ReLU epilogues (beta 0: the MLP's fc1 forward), checked element by element
 * against the CPU's NaN positions. Buffers held on both backends and their comparisons: dev_pair.h. */
#include <float.h>

#include "dev_pair.h"

/* "fp16", or "fp16 x fp32 -> fp32" where the operand types differ */
static const char *types3(char *buf, size_t cap, ab_dtype a, ab_dtype b, ab_dtype c) {
    if (a == b && b == c)
        snprintf(buf, cap, "%s", ab_dtype_name(a));
    else
        snprintf(buf, cap, "%s x %s -> %s", ab_dtype_name(a), ab_dtype_name(b), ab_dtype_name(c));
    return buf;
}

/* tolerance for a GEMM output of type ct from inputs of type at */
static double gemm_tol(ab_dtype at, ab_dtype ct) {
    if (ct == AB_F16) return AB_TOL_FP16_NMSE;
    if (ct == AB_BF16) return AB_TOL_BF16_NMSE;
    return at == AB_F32 ? AB_TOL_GPU_GEMM_FP32_NMSE : AB_TOL_GPU_GEMM_LOWP_FP32OUT_NMSE;
}

typedef struct {
    int ta, tb, M, N, K, pad_ld; /* pad_ld: extra leading-dimension elements on every operand */
    int bias;
    ab_epilogue epi;
    float alpha, beta;
    const char *note; /* what the shape is in training, or what it exercises */
} gemm_case;

/* cached: the second run of a case, whose plan the backend finds in its cache */
static void test_gemm_case(const gemm_case *c, ab_dtype at, ab_dtype bt, ab_dtype ct, int cached) {
    const int ar = c->ta ? c->K : c->M, ac = c->ta ? c->M : c->K; /* stored rows, cols */
    const int br = c->tb ? c->N : c->K, bc = c->tb ? c->K : c->N;
    const int lda = ac + c->pad_ld, ldb = bc + c->pad_ld, ldc = c->N + c->pad_ld;
    pair A = pair_rows((size_t)ar, (size_t)lda, at, -1.0f, 1.0f),
         B = pair_rows((size_t)br, (size_t)ldb, bt, -1.0f, 1.0f);
    pair C = pair_rows((size_t)c->M, (size_t)ldc, ct, -1.0f, 1.0f), bias = pair_new((size_t)c->N, bt, -1.0f, 1.0f);
    char what[240], ty[40], ld[16] = "";
    if (c->pad_ld) snprintf(ld, sizeof ld, " ld +%d", c->pad_ld);
    op_case_label(what, sizeof what, AB_OP_gemm, "%s %dx%dx%d ta %d tb %d%s%s%s alpha %g beta %g (%s%s)",
              types3(ty, sizeof ty, at, bt, ct), c->M, c->N, c->K, c->ta, c->tb, ld, c->bias ? " bias" : "",
              c->epi == AB_EPI_RELU ? " relu" : "", (double)c->alpha, (double)c->beta, c->note,
              cached ? ", plan cached" : "");
    const int r1 = cpu->ops->gemm(cpu, c->ta, c->tb, c->M, c->N, c->K, c->alpha, at, A.h, lda, bt, B.h, ldb,
                                  c->bias ? bias.h : NULL, c->epi, c->beta, ct, C.h, ldc);
    const int r2 = gpu->ops->gemm(gpu, c->ta, c->tb, c->M, c->N, c->K, c->alpha, at, A.d, lda, bt, B.d, ldb,
                                  c->bias ? bias.d : NULL, c->epi, c->beta, ct, C.d, ldc);
    op_ok(what, r1, r2);
    compare_nmse(what, &C, gemm_tol(at, ct));
    pair_free(&A);
    pair_free(&B);
    pair_free(&C);
    pair_free(&bias);
}

static void test_gemm(void) {
    const gemm_case cases[] = {
        {0, 1, 64, 256, 784, 0, 1, AB_EPI_RELU, 1.0f, 0.0f, "MLP fc1 forward"},
        {0, 1, 64, 10, 256, 0, 1, AB_EPI_NONE, 1.0f, 0.0f, "fc2 forward"},
        {1, 0, 10, 256, 64, 0, 0, AB_EPI_NONE, 1.0f, 0.0f, "d_weight"},
        {1, 0, 256, 784, 64, 0, 0, AB_EPI_NONE, 1.0f, 1.0f, "d_weight accumulated over micro-batches"},
        {0, 0, 64, 256, 10, 0, 0, AB_EPI_NONE, 1.0f, 0.0f, "dx"},
        {1, 1, 33, 17, 29, 0, 1, AB_EPI_RELU, 0.5f, 1.0f, "relu with beta: the fallback epilogue"},
        {0, 0, 5, 7, 3, 3, 1, AB_EPI_NONE, 1.0f, 0.5f, "padded leading dimensions"},
        {1, 1, 100, 3, 200, 1, 0, AB_EPI_RELU, 2.0f, 0.0f, "odd alignments"},
    };
    /* twice: the second pass finds every plan in the cache, those with an algorithm and those
     * cuBLASLt had none for (the fallback, taken without asking again) */
    for (int pass = 0; pass < 2; pass++)
        for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
            for (int t = 0; t < 3; t++) test_gemm_case(&cases[i], TYPES[t], TYPES[t], TYPES[t], pass);
    /* fp16/bf16 inputs, fp32 output (bias fp16: not cuBLASLt's default bias type -> fallback) */
    test_gemm_case(&cases[0], AB_F16, AB_F16, AB_F32, 0);
    test_gemm_case(&cases[2], AB_BF16, AB_BF16, AB_F32, 0);
    /* fp32 inputs, fp16 output (no cuBLASLt kernel -> fp32 product then our epilogue) */
    test_gemm_case(&cases[1], AB_F32, AB_F32, AB_F16, 0);
    /* mixed input types: widened to fp32 first */
    test_gemm_case(&cases[4], AB_F16, AB_F32, AB_F32, 0);

    /* One shape, the bias at every alignment: 256 bytes, then 128 (a 100-wide fp16 bias after
     * another, as --hidden 100 lays them out), 64, 32, 16, then 2 or 4 (one element: the fallback).
     * The plan chosen for one alignment must not be reused for a bias aligned less. */
    for (int t = 0; t < 3; t++) {
        const ab_dtype dt = TYPES[t];
        const int M = 64, N = 100, K = 96;
        const size_t es = ab_dtype_size(dt);
        const int offsets[] = {0, (int)(128 / es), (int)(64 / es), (int)(32 / es), (int)(16 / es), 1, 0};
        pair A = pair_rows((size_t)M, (size_t)K, dt, -1, 1), B = pair_rows((size_t)N, (size_t)K, dt, -1, 1),
             bias = pair_new((size_t)N + 256 / es, dt, -1, 1);
        for (size_t k = 0; k < sizeof offsets / sizeof offsets[0]; k++) {
            pair C = pair_rows((size_t)M, (size_t)N, dt, -1, 1);
            const size_t off = (size_t)offsets[k] * es;
            for (int epi = 0; epi < 2; epi++) { /* bias, then bias + ReLU (C overwritten: beta 0) */
                char what[160];
                op_case_label(what, sizeof what, AB_OP_gemm,
                          "%s %dx%dx%d ta 0 tb 1 bias %zu bytes past a 256-byte boundary%s", ab_dtype_name(dt), M, N, K,
                          off, epi ? " relu" : "");
                op_ok(what,
                      cpu->ops->gemm(cpu, 0, 1, M, N, K, 1.0f, dt, A.h, K, dt, B.h, K, (char *)bias.h + off,
                                     (ab_epilogue)epi, 0.0f, dt, C.h, N),
                      gpu->ops->gemm(gpu, 0, 1, M, N, K, 1.0f, dt, A.d, K, dt, B.d, K, (char *)bias.d + off,
                                     (ab_epilogue)epi, 0.0f, dt, C.d, N));
                compare_nmse(what, &C, gemm_tol(dt, dt));
            }
            pair_free(&C);
        }
        pair_free(&A);
        pair_free(&B);
        pair_free(&bias);
    }

    /* NaN parity: a NaN in row 3 of A makes row 3 of C NaN on both; also through ReLU with beta
     * accumulation (always our fallback epilogue, whose ReLU keeps NaN as the CPU's does). ReLU
     * with beta 0, cuBLASLt's own epilogue: test_gemm_relu_nan_direct. */
    for (int relu = 0; relu < 2; relu++)
        for (int t = 0; t < 3; t++) {
            const ab_dtype dt = TYPES[t];
            const ab_epilogue epi = relu ? AB_EPI_RELU : AB_EPI_NONE;
            const float beta = relu ? 1.0f : 0.0f;
            pair A = pair_rows(16, 48, dt, -1, 1), B = pair_rows(32, 48, dt, -1, 1), C = pair_rows(16, 32, dt, -1, 1),
                 bias = pair_new(32, dt, -1, 1);
            pair_set(&A, 3 * 48 + 7, NAN);
            char what[128];
            op_case_label(what, sizeof what, AB_OP_gemm, "%s 16x32x48 ta 0 tb 1 bias%s, NaN in row 3 of A (NaN parity)",
                      ab_dtype_name(dt), relu ? " relu beta 1" : "");
            op_ok(
                what,
                cpu->ops->gemm(cpu, 0, 1, 16, 32, 48, 1.0f, dt, A.h, 48, dt, B.h, 48, bias.h, epi, beta, dt, C.h, 32),
                gpu->ops->gemm(gpu, 0, 1, 16, 32, 48, 1.0f, dt, A.d, 48, dt, B.d, 48, bias.d, epi, beta, dt, C.d, 32));
            compare_nmse(what, &C, gemm_tol(dt, dt));
            pair_free(&A);
            pair_free(&B);
            pair_free(&C);
            pair_free(&bias);
        }
}

/* The CPU's NaN positions against the GPU's, element by element: compare's NMSE says only that
 * NaN parity fails somewhere, this says how (NaN lost or made, and where first). expect: how many
 * NaN the planted ones make on the CPU, the test's own premise, checked too. */
static void check_nan_positions(const char *what, const pair *p, size_t expect, const char *if_lost) {
    unsigned char *g = fetch(what, p);
    size_t cpu_nan = 0, lost = 0, made = 0, first = p->n;
    for (size_t i = 0; i < p->n; i++) {
        const int on_cpu = isnan(ab_load(p->h, i, p->t)) != 0, on_gpu = isnan(ab_load(g, i, p->t)) != 0;
        cpu_nan += (size_t)on_cpu;
        lost += (size_t)(on_cpu && !on_gpu);
        made += (size_t)(!on_cpu && on_gpu);
        if (on_cpu != on_gpu && first == p->n) first = i;
    }
    AB_CHECK(cpu_nan == expect, "%s: the CPU backend has %zu NaN, the planted ones make %zu", what, cpu_nan, expect);
    if (lost || made) {
        char at[160];
        where(at, sizeof at, p, first);
        fprintf(stderr,
                "FAIL %s: %zu of the CPU's %zu NaN are not NaN on the GPU, %zu NaN are new; first at %s: got "
                "%.9g, expected %.9g%s%s\n",
                what, lost, cpu_nan, made, at, (double)ab_load(g, first, p->t), (double)ab_load(p->h, first, p->t),
                lost ? ". " : "", lost ? if_lost : "");
        failures++;
    }
    free(g);
}

/* NaN through cuBLASLt's own ReLU epilogues: beta 0 and a bias of the output type, 16-byte aligned
 * (RELU_BIAS), or no bias (RELU), which gemm_strided (kernels/cuda/backend_cuda.cu) sends straight
 * to cublasLtMatmul. cublasLt.h defines that ReLU only as x := max(x, 0), silent on NaN, where the
 * CPU backend keeps NaN; so a NaN in the product may come back 0 from the GPU. The shape, types and
 * layout are the MLP's fc1 forward (x (64, 784) times W (256, 784) transposed, plus b, in fp32,
 * fp16 or bf16), so the plan is the one training uses. A NaN in row 3 of x makes row 3 NaN before
 * the ReLU; a NaN in b[5] (RELU_BIAS) or in row 5 of W (RELU) makes column 5 NaN: M + N - 1 NaN. */
static void test_gemm_relu_nan_direct(void) {
    enum { M = 64, N = 256, K = 784, NAN_ROW = 3, NAN_COL = 5 };
    static const char if_lost[] = "cuBLASLt's ReLU epilogue does not keep NaN as the CPU backend does: see the note "
                                  "where CUBLASLT_EPILOGUE_RELU_BIAS is chosen, kernels/cuda/backend_cuda.cu";
    for (int with_bias = 1; with_bias >= 0; with_bias--)
        for (int t = 0; t < 3; t++) {
            const ab_dtype dt = TYPES[t];
            pair A = pair_rows(M, K, dt, -1, 1), B = pair_rows(N, K, dt, -1, 1), C = pair_rows(M, N, dt, -1, 1),
                 bias = pair_new(N, dt, -1, 1);
            pair_set(&A, (size_t)NAN_ROW * K + 7, NAN);
            if (with_bias)
                pair_set(&bias, NAN_COL, NAN);
            else
                pair_set(&B, (size_t)NAN_COL * K + 11, NAN);
            char what[200], second[32];
            snprintf(second, sizeof second, with_bias ? "bias element %d" : "row %d of B", NAN_COL);
            op_case_label(what, sizeof what, AB_OP_gemm,
                      "%s %dx%dx%d ta 0 tb 1%s relu beta 0 (MLP fc1), NaN in row %d of A and in %s: cuBLASLt's %s "
                      "epilogue",
                      ab_dtype_name(dt), M, N, K, with_bias ? " bias" : "", NAN_ROW, second,
                      with_bias ? "RELU_BIAS" : "RELU");
            op_ok(what,
                  cpu->ops->gemm(cpu, 0, 1, M, N, K, 1.0f, dt, A.h, K, dt, B.h, K, with_bias ? bias.h : NULL,
                                 AB_EPI_RELU, 0.0f, dt, C.h, N),
                  gpu->ops->gemm(gpu, 0, 1, M, N, K, 1.0f, dt, A.d, K, dt, B.d, K, with_bias ? bias.d : NULL,
                                 AB_EPI_RELU, 0.0f, dt, C.d, N));
            check_nan_positions(what, &C, M + N - 1, if_lost);
            compare_nmse(what, &C, gemm_tol(dt, dt));
            pair_free(&A);
            pair_free(&B);
            pair_free(&C);
            pair_free(&bias);
        }
}

/* NaN, +-inf, +-0, fp16's largest (65504), a value fp16 rounds to inf (65520), one past it, fp16's
 * smallest subnormal and an fp32 subnormal, at elements 0, 7, 14, ...; rotate: element 7k gets
 * special k + rotate (so a second tensor can pair each special of the first with another one) */
enum { N_SPECIALS = 10 };
static void plant_specials_rotated(pair *p, size_t rotate) {
    const float specials[N_SPECIALS] = {NAN,      INFINITY, -INFINITY, 0.0f,  -0.0f,
                                        65504.0f, 65520.0f, -70000.0f, 6e-8f, 3e-39f};
    for (size_t k = 0; k < N_SPECIALS && k * 7 < p->n; k++) pair_set(p, k * 7, specials[(k + rotate) % N_SPECIALS]);
}

static void plant_specials(pair *p) { plant_specials_rotated(p, 0); }

static void test_elementwise(void) {
    const size_t n = 100003; /* not a multiple of any block size */
    char what[128];
    for (int s = 0; s < 3; s++) {
        for (int d = 0; d < 3; d++) { /* cast, every pair, specials included: bit-exact */
            pair x = pair_new(n, TYPES[s], -4.0f, 4.0f), y = pair_new(n, TYPES[d], -1.0f, 1.0f);
            plant_specials(&x);
            op_case_label(what, sizeof what, AB_OP_cast, "%s -> %s n %zu, specials", ab_dtype_name(TYPES[s]),
                      ab_dtype_name(TYPES[d]), n);
            op_ok(what, cpu->ops->cast(cpu, n, x.t, x.h, y.t, y.h), gpu->ops->cast(gpu, n, x.t, x.d, y.t, y.d));
            compare_bits(what, &y);
            pair_free(&x);
            pair_free(&y);
        }
        /* accumulate, ReLU forward and unscale: bit-exact, except that a NaN passed through
         * arithmetic comes out as the GPU's canonical NaN where x86 keeps the operand's payload
         * (seen on the H200): there NaN matches NaN (compare_exact) */
        for (int acc = 0; acc < 2; acc++) { /* accumulate into fp32: one add, bit-exact */
            pair x = pair_new(n, TYPES[s], -4.0f, 4.0f), y = pair_new(n, AB_F32, -1.0f, 1.0f), flag = flag_new();
            plant_specials(&x);
            op_case_label(what, sizeof what, AB_OP_accumulate, "%s -> fp32 n %zu, specials, %s, found_inf",
                          ab_dtype_name(TYPES[s]), n, acc ? "accumulate 1 (dst += src)" : "accumulate 0 (dst = src)");
            op_ok(what, cpu->ops->accumulate(cpu, n, x.t, x.h, y.h, acc, flag.h),
                  gpu->ops->accumulate(gpu, n, x.t, x.d, y.d, acc, flag.d));
            compare_exact(what, &y);
            compare_flag(what, &flag, any_nonfinite(y.h, n));
            pair_free(&x);
            pair_free(&y);
            pair_free(&flag);
        }
        { /* relu forward and backward (dx aliasing dy, as the MLP does): bit-exact. dy gets the
           * specials too, rotated against y's: dy's NaN, inf and 65520 meet a positive y (passed
           * on), its -inf, 65504 and subnormals a NaN or zero y (zeroed) */
            const ab_dtype t = TYPES[s];
            pair x = pair_new(n, t, -2.0f, 2.0f), y = pair_new(n, t, -1.0f, 1.0f), dy = pair_new(n, t, -1.0f, 1.0f);
            plant_specials(&x);
            plant_specials_rotated(&dy, 5);
            op_case_label(what, sizeof what, AB_OP_relu_forward, "%s n %zu, specials", ab_dtype_name(t), n);
            op_ok(what, cpu->ops->relu_forward(cpu, n, t, x.h, y.h), gpu->ops->relu_forward(gpu, n, t, x.d, y.d));
            compare_exact(what, &y);
            op_case_label(what, sizeof what, AB_OP_relu_backward, "%s n %zu, dx aliasing dy, specials in y and dy",
                      ab_dtype_name(t), n);
            op_ok(what, cpu->ops->relu_backward(cpu, n, t, y.h, dy.h, dy.h),
                  gpu->ops->relu_backward(gpu, n, t, y.d, dy.d, dy.d));
            compare_bits(what, &dy);
            /* the premise, on the CPU: dy's NaN passed where y is 65504, its 65504 zeroed where y is NaN */
            AB_CHECK(isnan(ab_load(dy.h, 5 * 7, t)) && ab_load(dy.h, 0, t) == 0.0f,
                     "%s: the CPU's dx is %g where dy is NaN and y 65504, %g where dy is 65504 and y NaN", what,
                     (double)ab_load(dy.h, 5 * 7, t), (double)ab_load(dy.h, 0, t));
            pair_free(&x);
            pair_free(&y);
            pair_free(&dy);
        }
        /* column sums (bias gradients): an MLP batch, and rows enough for the kernel's four loads
         * in flight with a tail (1000 = 7 x 128 + 104), N = 1 and N past a multiple of 32 */
        const int cs_shape[3][2] = {{64, 300}, {1000, 1}, {1000, 33}};
        for (int k = 0; k < 6; k++) {
            const int beta = k % 2, M = cs_shape[k / 2][0], N = cs_shape[k / 2][1];
            const ab_dtype t = TYPES[s];
            /* a positive mean, as a sum of the same terms in another order is compared: a column
             * summing to near 0 would make any reordering look large against its own size */
            pair X = pair_new((size_t)M * N, t, -0.5f, 1.0f), out = pair_new((size_t)N, t, -1.0f, 1.0f);
            op_case_label(what, sizeof what, AB_OP_col_sum, "%s %dx%d beta %d", ab_dtype_name(t), M, N, beta);
            op_ok(what, cpu->ops->col_sum(cpu, M, N, t, X.h, (float)beta, t, out.h),
                  gpu->ops->col_sum(gpu, M, N, t, X.d, (float)beta, t, out.d));
            compare_nmse(what, &out,
                         t == AB_F32   ? AB_TOL_GPU_COLSUM_FP32_NMSE
                         : t == AB_F16 ? AB_TOL_FP16_NMSE
                                       : AB_TOL_BF16_NMSE);
            pair_free(&X);
            pair_free(&out);
        }
    }
}

static void test_softmax_xent(void) {
    const int Bs[] = {64, 100}, C = 10;
    char what[128];
    for (int s = 0; s < 3; s++)
        for (int bi = 0; bi < 2; bi++)
            for (int inplace = 0; inplace < 2; inplace++) {
                const int B = Bs[bi];
                const ab_dtype t = TYPES[s];
                op_case_label(what, sizeof what, AB_OP_softmax_xent, "%s B %d C %d grad_scale 65536%s%s", ab_dtype_name(t),
                          B, C, bi == 1 ? ", a NaN logit in row 5" : "", inplace ? ", in place" : "");
                pair L = pair_new((size_t)B * C, t, -6.0f, 6.0f), D = pair_new((size_t)B * C, t, 0.0f, 0.0f);
                pair y = pair_new((size_t)B, AB_F32, 0.0f, 0.0f), stats = pair_new(2, AB_F32, 0.0f, 0.0f);
                int32_t *lab = y.h;
                for (int i = 0; i < B; i++) lab[i] = (int32_t)ab_rng_below(&rng, C);
                if (gpu->ops->upload(gpu, y.d, y.h, (size_t)B * 4) != 0) failures++;
                if (bi == 1) pair_set(&L, 5 * C + 3, NAN); /* row 5: NaN loss, NaN gradient row */
                float *loss_h = stats.h, *loss_d = stats.d;
                int32_t *corr_h = (int32_t *)stats.h + 1, *corr_d = (int32_t *)stats.d + 1;
                const pair *out = inplace ? &L : &D;
                op_ok(what, cpu->ops->softmax_xent(cpu, B, C, t, L.h, y.h, 65536.0f, t, out->h, loss_h, corr_h),
                      gpu->ops->softmax_xent(gpu, B, C, t, L.d, y.d, 65536.0f, t, out->d, loss_d, corr_d));
                compare_nmse(what, out,
                             t == AB_F32   ? AB_TOL_GPU_TRANSC_NMSE
                             : t == AB_F16 ? AB_TOL_FP16_NMSE
                                           : AB_TOL_BF16_NMSE);
                float g[2];
                if (gpu->ops->download(gpu, g, stats.d, sizeof g) != 0) failures++;
                int32_t gc;
                memcpy(&gc, &g[1], sizeof gc);
                const double ref = *loss_h;
                if (bi == 1) {
                    AB_CHECK(isnan(g[0]) && isnan(ref), "%s: loss NaN on both (gpu %g, cpu %g)", what, (double)g[0],
                             ref);
                } else {
                    AB_CHECK(fabs(g[0] - ref) <= AB_TOL_GPU_LOSS_SUM_REL * fabs(ref), "%s: loss sum gpu %.9g cpu %.9g",
                             what, (double)g[0], ref);
                }
                AB_CHECK(gc == *corr_h, "%s: correct gpu %d cpu %d", what, gc, *corr_h);
                pair_free(&L);
                pair_free(&D);
                pair_free(&y);
                pair_free(&stats);
            }
}

/* Labels outside [0, C) (a corrupt data set): no error from either backend, NaN loss, and every
 * element of the row's gradient NaN (so an fp32 run stops on the loss and an amp step is skipped),
 * also in place, where leaving the row alone would pass the raw logits off as the gradient. */
static void test_softmax_xent_bad_labels(void) {
    enum { B = 40, C = 10 };
    const int bad_rows[] = {3, 17, 39}, bad_labels[] = {C, -1, 1000};
    char what[128];
    for (int s = 0; s < 3; s++)
        for (int mode = 0; mode < 3; mode++) { /* separate dlogits, in place, loss only */
            const ab_dtype t = TYPES[s];
            op_case_label(what, sizeof what, AB_OP_softmax_xent,
                      "%s B %d C %d, labels %d, %d, %d (outside [0, %d)) in rows %d, %d, %d%s", ab_dtype_name(t), B, C,
                      bad_labels[0], bad_labels[1], bad_labels[2], C, bad_rows[0], bad_rows[1], bad_rows[2],
                      mode == 1   ? ", in place"
                      : mode == 2 ? ", loss only"
                                  : "");
            pair L = pair_new((size_t)B * C, t, -6.0f, 6.0f), D = pair_new((size_t)B * C, t, -1.0f, 1.0f);
            pair y = pair_new((size_t)B, AB_F32, 0.0f, 0.0f), stats = pair_new(2, AB_F32, 0.0f, 0.0f);
            int32_t *lab = y.h;
            for (int i = 0; i < B; i++) lab[i] = (int32_t)ab_rng_below(&rng, C);
            for (int k = 0; k < 3; k++) lab[bad_rows[k]] = bad_labels[k];
            if (gpu->ops->upload(gpu, y.d, y.h, (size_t)B * 4) != 0) failures++;
            float *loss_h = stats.h, *loss_d = stats.d;
            int32_t *corr_h = (int32_t *)stats.h + 1, *corr_d = (int32_t *)stats.d + 1;
            const pair *out = mode == 1 ? &L : mode == 0 ? &D : NULL;
            const int rc_cpu =
                cpu->ops->softmax_xent(cpu, B, C, t, L.h, y.h, 1024.0f, t, out ? out->h : NULL, loss_h, corr_h);
            const int rc_gpu =
                gpu->ops->softmax_xent(gpu, B, C, t, L.d, y.d, 1024.0f, t, out ? out->d : NULL, loss_d, corr_d);
            op_ok(what, rc_cpu, rc_gpu);
            if (out) {
                compare_nmse(what, out,
                             t == AB_F32   ? AB_TOL_GPU_TRANSC_NMSE
                             : t == AB_F16 ? AB_TOL_FP16_NMSE
                                           : AB_TOL_BF16_NMSE);
                void *g = fetch(what, out);
                for (int i = 0, k = 0; i < B; i++) {
                    const int bad = k < 3 && i == bad_rows[k];
                    k += bad;
                    int nans = 0;
                    for (int j = 0; j < C; j++) nans += isnan(ab_load(g, (size_t)i * C + j, t)) != 0;
                    AB_CHECK(nans == (bad ? C : 0), "%s: row %d (label %d) has %d NaN of %d", what, i, lab[i], nans, C);
                }
                free(g);
            }
            float gs[2];
            if (gpu->ops->download(gpu, gs, stats.d, sizeof gs) != 0) failures++;
            int32_t gc;
            memcpy(&gc, &gs[1], sizeof gc);
            AB_CHECK(isnan(gs[0]) && isnan(*loss_h), "%s: loss NaN on both (gpu %g, cpu %g)", what, (double)gs[0],
                     (double)*loss_h);
            AB_CHECK(gc == *corr_h && gc <= B - 3, "%s: correct gpu %d cpu %d (bad rows never count)", what, gc,
                     *corr_h);
            pair_free(&L);
            pair_free(&D);
            pair_free(&y);
            pair_free(&stats);
        }
}

/* A same-type cast is memmove: overlapping source and destination, shifted either way. */
static void test_overlapping_cast(void) {
    const size_t n = 50001, shift = 1237;
    char what[96];
    for (int s = 0; s < 3; s++)
        for (int up = 0; up < 2; up++) {
            const ab_dtype t = TYPES[s];
            pair buf = pair_new(n + shift, t, -4.0f, 4.0f);
            const size_t from = up ? 0 : shift, to = up ? shift : 0, es = buf.es;
            op_case_label(what, sizeof what, AB_OP_cast, "%s -> %s n %zu, overlapping buffers (dst %zu elements %s src)",
                      ab_dtype_name(t), ab_dtype_name(t), n, shift, up ? "after" : "before");
            char *want = malloc((n + shift) * es); /* what memmove makes of it, for the CPU's own result */
            memcpy(want, buf.h, (n + shift) * es);
            memmove(want + to * es, want + from * es, n * es);
            op_ok(what, cpu->ops->cast(cpu, n, t, (char *)buf.h + from * es, t, (char *)buf.h + to * es),
                  gpu->ops->cast(gpu, n, t, (char *)buf.d + from * es, t, (char *)buf.d + to * es));
            AB_CHECK(memcmp(want, buf.h, (n + shift) * es) == 0, "%s: the CPU backend's result is not memmove's", what);
            compare_bits(what, &buf);
            free(want);
            pair_free(&buf);
        }
}

/* an optimizer's working copy on the device: each element the device's own new weight rounded to
 * the copy's type (a NaN for a NaN: the device's payload is its own) */
static void copy_of_own(const char *what, const pair *w, const pair *wc) {
    unsigned char *gw = fetch(what, w), *gc = fetch(what, wc);
    for (size_t i = 0; i < w->n; i++) {
        const float want = ab_round_to(ab_load(gw, i, AB_F32), wc->t), got = ab_load(gc, i, wc->t);
        if (!(got == want || (isnan(got) && isnan(want)))) {
            fprintf(stderr, "FAIL %s: the %s copy's element %zu is %.9g, the device's new weight %.9g rounds to %.9g\n",
                    what, ab_dtype_name(wc->t), i, (double)got, (double)ab_load(gw, i, AB_F32), (double)want);
            failures++;
            break;
        }
    }
    free(gw);
    free(gc);
}

static void test_unscale_and_optimizers(void) {
    const size_t n = 203530; /* the MLP's parameter count */
    char what[128];
    for (int plant = 0; plant < 3; plant++) { /* clean, +inf, NaN */
        pair g = pair_new(n, AB_F32, -3e4f, 3e4f), flag = pair_new(1, AB_F32, 0.0f, 0.0f);
        if (plant) pair_set(&g, n - 1 - (size_t)plant * 999, plant == 1 ? INFINITY : NAN);
        op_case_label(what, sizeof what, AB_OP_unscale_check, "fp32 n %zu inv_scale 2^-16, %s", n,
                  plant == 0   ? "all finite"
                  : plant == 1 ? "a +inf planted"
                               : "a NaN planted");
        op_ok(what, cpu->ops->unscale_check(cpu, n, g.h, 1.0f / 65536.0f, flag.h, NULL),
              gpu->ops->unscale_check(gpu, n, g.d, 1.0f / 65536.0f, flag.d, NULL));
        compare_exact(what, &g);
        int32_t fg = -1;
        if (gpu->ops->download(gpu, &fg, flag.d, 4) != 0) failures++;
        AB_CHECK(fg == *(int32_t *)flag.h && fg == (plant != 0), "%s: found_inf gpu %d cpu %d", what, fg,
                 *(int32_t *)flag.h);
        pair_free(&g);
        pair_free(&flag);
    }
    { /* at inv_scale 1 the check alone (the trainer's, when the optimizer unscales): g as it was
       * on both, found_inf set by a planted inf on both */
        op_case_label(what, sizeof what, AB_OP_unscale_check, "fp32 n %zu inv_scale 1 (the check alone), a +inf planted",
                      n);
        pair g = pair_new(n, AB_F32, -100.0f, 100.0f), flag = pair_new(1, AB_F32, 0.0f, 0.0f);
        pair_set(&g, n / 3, INFINITY);
        unsigned char *before = fetch(what, &g);
        op_ok(what, cpu->ops->unscale_check(cpu, n, g.h, 1.0f, flag.h, NULL), gpu->ops->unscale_check(gpu, n, g.d, 1.0f, flag.d, NULL));
        compare_bits(what, &g);
        unsigned char *after = fetch(what, &g);
        AB_CHECK(memcmp(before, after, n * sizeof(float)) == 0, "%s: the device changed g at factor 1", what);
        int32_t fg = -1;
        if (gpu->ops->download(gpu, &fg, flag.d, 4) != 0) failures++;
        AB_CHECK(fg == 1 && *(int32_t *)flag.h == 1, "%s: found_inf gpu %d cpu %d", what, fg, *(int32_t *)flag.h);
        free(before);
        free(after);
        pair_free(&g);
        pair_free(&flag);
    }
    { /* found_inf is never reset by a clean pass */
        op_case_label(what, sizeof what, AB_OP_unscale_check, "fp32 n 1000 inv_scale 0.5, all finite, found_inf already 1");
        pair g = pair_new(1000, AB_F32, -1.0f, 1.0f), flag = pair_new(1, AB_F32, 0.0f, 0.0f);
        const int32_t one = 1;
        if (gpu->ops->upload(gpu, flag.d, &one, 4) != 0) failures++;
        op_ok(what, 0, gpu->ops->unscale_check(gpu, 1000, g.d, 0.5f, flag.d, NULL));
        int32_t fg = 0;
        if (gpu->ops->download(gpu, &fg, flag.d, 4) != 0) failures++;
        AB_CHECK(fg == 1, "%s: found_inf reset to %d", what, fg);
        pair_free(&g);
        pair_free(&flag);
    }
    const float moms[] = {0.0f, 0.9f}, wds[] = {0.0f, 1e-2f};
    for (int mi = 0; mi < 2; mi++)
        for (int wi = 0; wi < 2; wi++)
            for (int first = 0; first < 2; first++) {
                /* a working copy on the first steps: fp16 without momentum, bf16 with */
                const ab_dtype ct = !first ? AB_F32 : mi ? AB_BF16 : AB_F16;
                pair w = pair_new(n, AB_F32, -0.1f, 0.1f), g = pair_new(n, AB_F32, -1.0f, 1.0f),
                     buf = pair_new(n, AB_F32, -1.0f, 1.0f), wc = pair_new(n, ct, 0.0f, 0.0f);
                op_case_label(what, sizeof what, AB_OP_sgd_step,
                              "fp32 n %zu lr 0.01 momentum %g weight_decay %g grad_scale 0.37%s%s%s", n,
                              (double)moms[mi], (double)wds[wi], first ? ", first step" : "",
                              ct != AB_F32 ? ", a working copy in " : "", ct != AB_F32 ? ab_dtype_name(ct) : "");
                op_ok(what,
                      cpu->ops->sgd_step(cpu, n, w.h, g.h, moms[mi] != 0.0f ? buf.h : NULL, 0.01f, moms[mi], wds[wi],
                                         first, 0.37f, ct, ct != AB_F32 ? wc.h : NULL),
                      gpu->ops->sgd_step(gpu, n, w.d, g.d, moms[mi] != 0.0f ? buf.d : NULL, 0.01f, moms[mi], wds[wi],
                                         first, 0.37f, ct, ct != AB_F32 ? wc.d : NULL));
                compare_nmse(what, &w, AB_TOL_GPU_ELEMWISE_NMSE);
                if (moms[mi] != 0.0f) compare_nmse(what, &buf, AB_TOL_GPU_ELEMWISE_NMSE);
                if (ct != AB_F32) copy_of_own(what, &w, &wc);
                pair_free(&w);
                pair_free(&g);
                pair_free(&buf);
                pair_free(&wc);
            }
    const int steps[] = {1, 5};
    for (int si = 0; si < 2; si++) {
        pair w = pair_new(n, AB_F32, -0.1f, 0.1f), g = pair_new(n, AB_F32, -1.0f, 1.0f),
             m = pair_new(n, AB_F32, -0.1f, 0.1f), v = pair_new(n, AB_F32, 0.0f, 0.01f);
        op_case_label(what, sizeof what, AB_OP_adamw_step,
                  "fp32 n %zu lr 1e-3 betas 0.9, 0.999 eps 1e-8 weight_decay 0.01 "
                  "step %d grad_scale %g",
                  n, steps[si], si ? 0.37 : 1.0);
        const float gs = si ? 0.37f : 1.0f;
        /* the second case with an fp16 working copy */
        const ab_dtype ct = si ? AB_F16 : AB_F32;
        pair wc = pair_new(n, ct, 0.0f, 0.0f);
        op_ok(what,
              cpu->ops->adamw_step(cpu, n, w.h, g.h, m.h, v.h, 1e-3f, 0.9f, 0.999f, 1e-8f, 0.01f, steps[si], gs, ct,
                                   si ? wc.h : NULL),
              gpu->ops->adamw_step(gpu, n, w.d, g.d, m.d, v.d, 1e-3f, 0.9f, 0.999f, 1e-8f, 0.01f, steps[si], gs, ct,
                                   si ? wc.d : NULL));
        compare_nmse(what, &w, AB_TOL_GPU_ELEMWISE_NMSE);
        compare_nmse(what, &m, AB_TOL_GPU_ELEMWISE_NMSE);
        compare_nmse(what, &v, AB_TOL_GPU_ELEMWISE_NMSE);
        if (si) copy_of_own(what, &w, &wc);
        pair_free(&wc);
        pair_free(&w);
        pair_free(&g);
        pair_free(&m);
        pair_free(&v);
    }
}

/* The census histogram: counts bit for bit those of the CPU backend, in the census's 80 bins and in
 * 300 that clamp nothing; each type over random magnitudes across the census range with the specials
 * planted (65504, 65520, +-inf, NaN, +-0, the smallest subnormals), then every fp16 and bf16 pattern;
 * the counts start non-zero and are compared after a first call and after a second (the op adds);
 * n = 1,000,003 passes the kernel's grid cap (1024 blocks of 256 threads), so its grid-stride loop
 * runs too. */
static int64_t *counts_dev(size_t slots, const int64_t *init) {
    int64_t *d = ab_alloc(gpu, AB_MEM_WORKSPACE, slots * sizeof(int64_t));
    if (!d || gpu->ops->upload(gpu, d, init, slots * sizeof(int64_t)) != 0) die("counts buffer");
    return d;
}

/* desc: the values (type, count, what they hold); each of the two calls is a case */
static void check_hist(const char *desc, size_t n, ab_dtype t, const void *h, const void *d, int log2_min, int nbins) {
    const size_t slots = (size_t)nbins + 2;
    int64_t *ref = malloc(slots * sizeof *ref), *got = malloc(slots * sizeof *got);
    if (!ref || !got) die("host buffer");
    for (size_t b = 0; b < slots; b++) ref[b] = (int64_t)(b * 7 + 1);
    int64_t *dc = counts_dev(slots, ref);
    for (int call = 0; call < 2; call++) {
        char what[200];
        op_case_label(what, sizeof what, AB_OP_log2_hist, "%s, log2_min %d, %d bins, %s", desc, log2_min, nbins,
                  call ? "a second call adding to the first's counts" : "counts non-zero before");
        op_ok(what, cpu->ops->log2_hist(cpu, n, t, h, log2_min, nbins, ref),
              gpu->ops->log2_hist(gpu, n, t, d, log2_min, nbins, dc));
        if (gpu->ops->sync(gpu) != 0 || gpu->ops->download(gpu, got, dc, slots * sizeof *got) != 0) die(what);
        for (size_t b = 0; b < slots; b++)
            if (got[b] != ref[b]) {
                fprintf(stderr, "FAIL %s: slot %zu of %zu (%s) got %lld, expected %lld\n", what, b, slots,
                        b < (size_t)nbins    ? "bin"
                        : b == (size_t)nbins ? "zeros"
                                             : "non-finite",
                        (long long)got[b], (long long)ref[b]);
                failures++;
                break;
            }
    }
    ab_release(gpu, AB_MEM_WORKSPACE, dc, slots * sizeof(int64_t));
    free(ref);
    free(got);
}

static void test_log2_hist(void) {
    const size_t n = 1000003;
    const int layouts[2][2] = {{-64, 80}, {-160, 300}};
    char what[128];
    for (int s = 0; s < 3; s++) {
        pair x = pair_new(n, TYPES[s], 0.0f, 1.0f);
        for (size_t i = 0; i < n; i++) /* magnitudes 2^-80 .. 2^20, both signs */
            ab_store(x.h, i, x.t,
                     (i & 1 ? -1.0f : 1.0f) *
                         ldexpf(ab_rng_uniform_range(&rng, 1.0f, 2.0f), (int)ab_rng_below(&rng, 101) - 80));
        pair_push(&x);
        plant_specials(&x);
        const float more[] = {0x1.0p-24f, 0x1.0p-149f, 0x1.0p-133f, 0x1.0p-14f, 0x1.ff8p-15f, -0x1.0p-64f, 0x1.0p15f};
        for (size_t k = 0; k < sizeof more / sizeof more[0]; k++) pair_set(&x, 5 + k * 11, more[k]);
        snprintf(what, sizeof what, "%s n %zu, magnitudes 2^-80..2^20 and specials", ab_dtype_name(x.t), n);
        for (int l = 0; l < 2; l++) check_hist(what, n, x.t, x.h, x.d, layouts[l][0], layouts[l][1]);
        snprintf(what, sizeof what, "%s n 5, the first five of those", ab_dtype_name(x.t));
        check_hist(what, 5, x.t, x.h, x.d, -64, 80);
        pair_free(&x);
    }
    for (int s = 1; s < 3; s++) { /* every fp16 and bf16 bit pattern */
        pair x = pair_new(65536, TYPES[s], 0.0f, 1.0f);
        for (uint32_t u = 0; u < 65536; u++) ((uint16_t *)x.h)[u] = (uint16_t)u;
        pair_push(&x);
        snprintf(what, sizeof what, "%s n 65536, every bit pattern", ab_dtype_name(x.t));
        check_hist(what, 65536, x.t, x.h, x.d, -160, 300);
        pair_free(&x);
    }
}

static void test_gather(void) {
    const int N = 1000, D = 784;
    uint8_t *data = malloc((size_t)N * D), *labels = malloc((size_t)N);
    for (size_t i = 0; i < (size_t)N * D; i++) data[i] = (uint8_t)ab_rng_below(&rng, 256);
    for (int i = 0; i < N; i++) labels[i] = (uint8_t)ab_rng_below(&rng, 10);
    const void *cx = NULL, *cy = NULL, *gx = NULL, *gy = NULL;
    const int Bs[] = {64, 100, 7, 64, 100}; /* growth of the staging buffer, and its ring reused */
    char what[128];
    for (int s = 0; s < 3; s++)
        for (int bi = 0; bi < 5; bi++) {
            const int B = Bs[bi];
            int32_t idx[100];
            for (int b = 0; b < B; b++) idx[b] = (int32_t)ab_rng_below(&rng, (uint64_t)N);
            pair out = pair_new((size_t)B * D, TYPES[s], 0.0f, 0.0f), lab = pair_new((size_t)B, AB_F32, 0.0f, 0.0f);
            op_case_label(what, sizeof what, AB_OP_gather_normalize, "%s B %d D %d from a set of %d samples%s",
                      ab_dtype_name(TYPES[s]), B, D, N, bi >= 3 ? ", staging ring reused" : "");
            if (s == 0 && bi == 0) /* the set is mapped in the first case, so a failure there is that case's */
                op_ok("map_data",
                      cpu->ops->map_data(cpu, data, (size_t)N * D, &cx) |
                          cpu->ops->map_data(cpu, labels, (size_t)N, &cy),
                      gpu->ops->map_data(gpu, data, (size_t)N * D, &gx) |
                          gpu->ops->map_data(gpu, labels, (size_t)N, &gy));
            op_ok(what, cpu->ops->gather_normalize(cpu, B, D, cx, cy, idx, 0.1307f, 0.3081f, TYPES[s], out.h, lab.h),
                  gpu->ops->gather_normalize(gpu, B, D, gx, gy, idx, 0.1307f, 0.3081f, TYPES[s], out.d, lab.d));
            memset(idx, 0xff, sizeof idx); /* the op must have copied what it needs of idx already */
            compare_bits(what, &out);
            compare_bits(what, &lab);
            pair_free(&out);
            pair_free(&lab);
        }
    gpu->ops->unmap_data(gpu, gx, (size_t)N * D);
    gpu->ops->unmap_data(gpu, gy, (size_t)N);
    free(data);
    free(labels);

    { /* a large set mapped, then gathered from at once, from its last samples: the copy must
       * have landed before a kernel on the backend's stream reads it */
        const int BN = 40000, BD = 784, b = 64;
        uint8_t *big = malloc((size_t)BN * BD), *blab = malloc((size_t)BN);
        for (size_t i = 0; i < (size_t)BN * BD; i += 8) {
            const uint64_t r = ab_rng_u64(&rng);
            memcpy(big + i, &r, (size_t)BN * BD - i < 8 ? (size_t)BN * BD - i : 8);
        }
        for (int i = 0; i < BN; i++) blab[i] = (uint8_t)ab_rng_below(&rng, 10);
        int32_t idx[64];
        for (int k = 0; k < b; k++) idx[k] = BN - 1 - k;
        pair out = pair_new((size_t)b * BD, AB_F32, 0.0f, 0.0f), lab = pair_new((size_t)b, AB_F32, 0.0f, 0.0f);
        char what[160], what_labels[176];
        op_case_label(what, sizeof what, AB_OP_gather_normalize,
                  "fp32 B %d D %d, the last samples of a set of %d mapped just before", b, BD, BN);
        snprintf(what_labels, sizeof what_labels, "%s (labels)", what);
        op_ok("map_data (31 MB)",
              cpu->ops->map_data(cpu, big, (size_t)BN * BD, &cx) | cpu->ops->map_data(cpu, blab, (size_t)BN, &cy),
              gpu->ops->map_data(gpu, big, (size_t)BN * BD, &gx) | gpu->ops->map_data(gpu, blab, (size_t)BN, &gy));
        op_ok(what, cpu->ops->gather_normalize(cpu, b, BD, cx, cy, idx, 0.1307f, 0.3081f, AB_F32, out.h, lab.h),
              gpu->ops->gather_normalize(gpu, b, BD, gx, gy, idx, 0.1307f, 0.3081f, AB_F32, out.d, lab.d));
        compare_bits(what, &out);
        compare_bits(what_labels, &lab);
        pair_free(&out);
        pair_free(&lab);
        gpu->ops->unmap_data(gpu, gx, (size_t)BN * BD);
        gpu->ops->unmap_data(gpu, gy, (size_t)BN);
        free(big);
        free(blab);
    }
}

/* Column sums whose input and output types differ (every pair), on an odd shape, beta 1 (the output
 * read back in its own type), with non-finite values in some columns: a NaN (column 1), +inf (2),
 * -inf (3), +inf and -inf (4: NaN), and 65504 twice (5: finite in fp32 and bf16, beyond fp16's
 * range, inf there on both backends whatever the order of the sum). */
static void test_col_sum_mixed(void) {
    enum { M = 37, N = 19 };
    char what[160];
    for (int s = 0; s < 3; s++)
        for (int d = 0; d < 3; d++) {
            if (s == d) continue;
            const ab_dtype xt = TYPES[s], ot = TYPES[d];
            op_case_label(what, sizeof what, AB_OP_col_sum, "%s -> %s %dx%d beta 1, NaN, +-inf and 2 x 65504 in columns",
                      ab_dtype_name(xt), ab_dtype_name(ot), M, N);
            pair X = pair_rows(M, N, xt, -0.5f, 1.0f), out = pair_new(N, ot, -1.0f, 1.0f);
            pair_set(&X, 5 * N + 1, NAN);
            pair_set(&X, 9 * N + 2, INFINITY);
            pair_set(&X, 11 * N + 3, -INFINITY);
            pair_set(&X, 0 * N + 4, INFINITY);
            pair_set(&X, 36 * N + 4, -INFINITY);
            pair_set(&X, 2 * N + 5, 65504.0f);
            pair_set(&X, 30 * N + 5, 65504.0f);
            op_ok(what, cpu->ops->col_sum(cpu, M, N, xt, X.h, 1.0f, ot, out.h),
                  gpu->ops->col_sum(gpu, M, N, xt, X.d, 1.0f, ot, out.d));
            /* the premise, on the CPU's sums: the planted values made what they should */
            const float c1 = ab_load(out.h, 1, ot), c2 = ab_load(out.h, 2, ot), c3 = ab_load(out.h, 3, ot);
            const float c4 = ab_load(out.h, 4, ot), c5 = ab_load(out.h, 5, ot);
            AB_CHECK(isnan(c1) && c2 == INFINITY && c3 == -INFINITY && isnan(c4) && (ot == AB_F16) == (c5 == INFINITY),
                     "%s: the CPU's columns 1..5 are %g %g %g %g %g", what, (double)c1, (double)c2, (double)c3,
                     (double)c4, (double)c5);
            compare_nmse(what, &out,
                         ot == AB_F32   ? AB_TOL_GPU_COLSUM_FP32_NMSE
                         : ot == AB_F16 ? AB_TOL_FP16_NMSE
                                        : AB_TOL_BF16_NMSE);
            pair_free(&X);
            pair_free(&out);
        }
}

/* Softmax cross-entropy with logits and gradient of different types (every pair), on an odd batch
 * and class count. Row 7 holds the largest logit fp16 has (65504) on its label and its negation
 * beside it, which only the subtraction of the row's maximum keeps finite; row 9 a -inf logit
 * (probability 0) off its label. */
static void test_softmax_xent_mixed(void) {
    enum { B = 37, C = 13 };
    char what[160];
    for (int s = 0; s < 3; s++)
        for (int d = 0; d < 3; d++) {
            if (s == d) continue;
            const ab_dtype lt = TYPES[s], dt = TYPES[d];
            op_case_label(what, sizeof what, AB_OP_softmax_xent,
                      "%s -> %s B %d C %d grad_scale 1024, +-65504 in row 7, -inf in row 9", ab_dtype_name(lt),
                      ab_dtype_name(dt), B, C);
            pair L = pair_new((size_t)B * C, lt, -6.0f, 6.0f), D = pair_new((size_t)B * C, dt, -1.0f, 1.0f);
            pair y = pair_new((size_t)B, AB_F32, 0.0f, 0.0f), stats = pair_new(2, AB_F32, 0.0f, 0.0f);
            int32_t *lab = y.h;
            for (int i = 0; i < B; i++) lab[i] = (int32_t)ab_rng_below(&rng, C);
            if (gpu->ops->upload(gpu, y.d, y.h, (size_t)B * 4) != 0) failures++;
            pair_set(&L, (size_t)7 * C + (size_t)lab[7], 65504.0f);
            pair_set(&L, (size_t)7 * C + (size_t)((lab[7] + 1) % C), -65504.0f);
            pair_set(&L, (size_t)9 * C + (size_t)((lab[9] + 1) % C), -INFINITY);
            float *loss_h = stats.h, *loss_d = stats.d;
            int32_t *corr_h = (int32_t *)stats.h + 1, *corr_d = (int32_t *)stats.d + 1;
            op_ok(what, cpu->ops->softmax_xent(cpu, B, C, lt, L.h, y.h, 1024.0f, dt, D.h, loss_h, corr_h),
                  gpu->ops->softmax_xent(gpu, B, C, lt, L.d, y.d, 1024.0f, dt, D.d, loss_d, corr_d));
            compare_nmse(what, &D,
                         dt == AB_F32   ? AB_TOL_GPU_TRANSC_NMSE
                         : dt == AB_F16 ? AB_TOL_FP16_NMSE
                                        : AB_TOL_BF16_NMSE);
            float g[2];
            if (gpu->ops->download(gpu, g, stats.d, sizeof g) != 0) failures++;
            int32_t gc;
            memcpy(&gc, &g[1], sizeof gc);
            const double ref = *loss_h;
            AB_CHECK(isfinite(ref) && fabs(g[0] - ref) <= AB_TOL_GPU_LOSS_SUM_REL * fabs(ref),
                     "%s: loss sum gpu %.9g cpu %.9g", what, (double)g[0], ref);
            AB_CHECK(gc == *corr_h, "%s: correct gpu %d cpu %d", what, gc, *corr_h);
            pair_free(&L);
            pair_free(&D);
            pair_free(&y);
            pair_free(&stats);
        }
}

/* Unscaling at the edges, on an odd count: results that are subnormal (rounded there, or 0 from the
 * smallest subnormal), inputs that are subnormal, +-0, +-FLT_MAX and 65504, all finite after a
 * 2^-16 scale (found_inf stays 0, and no backend may flush a subnormal to 0); then a scale of 4 that
 * takes a finite 1e38 past FLT_MAX (found_inf 1 from a finite input). */
static void test_unscale_edges(void) {
    const size_t n = 100003;
    const float edges[] = {
        -0.0f,        0.0f,    FLT_MAX, -FLT_MAX, 0x1.8p-126f, -0x1.000002p-126f, 0x1.0p-149f, 0x1.fffffep-127f,
        -0x1.0p-140f, 65504.0f};
    char what[160];
    for (int over = 0; over < 2; over++) {
        const float inv_scale = over ? 4.0f : 1.0f / 65536.0f;
        op_case_label(what, sizeof what, AB_OP_unscale_check, "fp32 n %zu inv_scale %s, subnormals, +-0, %s", n,
                  over ? "4" : "2^-16", over ? "1e38 overflowing to inf" : "+-FLT_MAX");
        pair g = pair_new(n, AB_F32, -3e4f, 3e4f), flag = pair_new(1, AB_F32, 0.0f, 0.0f);
        for (size_t k = 0; k < sizeof edges / sizeof edges[0]; k++)
            if (!over || fabsf(edges[k]) < 1e30f) pair_set(&g, k * 7 + 3, edges[k]); /* at 4, 1e38 overflows alone */
        if (over) pair_set(&g, n - 2, 1e38f);
        op_ok(what, cpu->ops->unscale_check(cpu, n, g.h, inv_scale, flag.h, NULL),
              gpu->ops->unscale_check(gpu, n, g.d, inv_scale, flag.d, NULL));
        compare_exact(what, &g);
        /* the premise: at 2^-16, 1.5 2^-126 became a subnormal (and the largest subnormal a smaller
         * one); at 4, the 1e38 inf */
        const float sub = ab_load(g.h, 4 * 7 + 3, AB_F32), sub2 = ab_load(g.h, 7 * 7 + 3, AB_F32);
        if (over)
            AB_CHECK(isinf(ab_load(g.h, n - 2, AB_F32)), "%s: the CPU's 4 x 1e38 is finite", what);
        else
            AB_CHECK(fpclassify(sub) == FP_SUBNORMAL && fpclassify(sub2) == FP_SUBNORMAL,
                     "%s: the CPU's results %g and %g are not subnormal", what, (double)sub, (double)sub2);
        int32_t fg = -1;
        if (gpu->ops->download(gpu, &fg, flag.d, 4) != 0) failures++;
        AB_CHECK(fg == *(int32_t *)flag.h && fg == over, "%s: found_inf gpu %d cpu %d, expected %d", what, fg,
                 *(int32_t *)flag.h, over);
        pair_free(&g);
        pair_free(&flag);
    }
}

/* The optimizer steps on an odd count with a NaN, a +inf and a -inf gradient: each must reach the
 * weight (and the momentum buffer, or AdamW's moments) in the same place on both backends, not be
 * dropped or spread. */
static void test_optimizers_nonfinite(void) {
    const size_t n = 1001, at[3] = {17, 500, 999};
    const float bad[3] = {NAN, INFINITY, -INFINITY};
    char what[160];
    for (int mi = 0; mi < 2; mi++) {
        const float momentum = mi ? 0.9f : 0.0f, wd = mi ? 1e-2f : 0.0f;
        op_case_label(what, sizeof what, AB_OP_sgd_step,
                  "fp32 n %zu lr 0.01 momentum %g weight_decay %g, NaN and +-inf gradients", n, (double)momentum,
                  (double)wd);
        pair w = pair_new(n, AB_F32, -0.1f, 0.1f), g = pair_new(n, AB_F32, -1.0f, 1.0f),
             buf = pair_new(n, AB_F32, -1.0f, 1.0f);
        for (int k = 0; k < 3; k++) pair_set(&g, at[k], bad[k]);
        op_ok(what, cpu->ops->sgd_step(cpu, n, w.h, g.h, mi ? buf.h : NULL, 0.01f, momentum, wd, 0, 1.0f, AB_F32, NULL),
              gpu->ops->sgd_step(gpu, n, w.d, g.d, mi ? buf.d : NULL, 0.01f, momentum, wd, 0, 1.0f, AB_F32, NULL));
        compare_nmse(what, &w, AB_TOL_GPU_ELEMWISE_NMSE);
        if (mi) compare_nmse(what, &buf, AB_TOL_GPU_ELEMWISE_NMSE);
        for (int k = 0; k < 3; k++) /* the premise: each reached the CPU's weight */
            AB_CHECK(!isfinite(ab_load(w.h, at[k], AB_F32)), "%s: the CPU's weight %zu is finite", what, at[k]);
        pair_free(&w);
        pair_free(&g);
        pair_free(&buf);
    }
    op_case_label(what, sizeof what, AB_OP_adamw_step,
              "fp32 n %zu lr 1e-3 betas 0.9, 0.999 eps 1e-8 weight_decay 0.01 step 3, NaN and +-inf gradients", n);
    pair w = pair_new(n, AB_F32, -0.1f, 0.1f), g = pair_new(n, AB_F32, -1.0f, 1.0f),
         m = pair_new(n, AB_F32, -0.1f, 0.1f), v = pair_new(n, AB_F32, 0.0f, 0.01f);
    for (int k = 0; k < 3; k++) pair_set(&g, at[k], bad[k]);
    op_ok(what, cpu->ops->adamw_step(cpu, n, w.h, g.h, m.h, v.h, 1e-3f, 0.9f, 0.999f, 1e-8f, 0.01f, 3, 1.0f, AB_F32, NULL),
          gpu->ops->adamw_step(gpu, n, w.d, g.d, m.d, v.d, 1e-3f, 0.9f, 0.999f, 1e-8f, 0.01f, 3, 1.0f, AB_F32, NULL));
    compare_nmse(what, &w, AB_TOL_GPU_ELEMWISE_NMSE);
    compare_nmse(what, &m, AB_TOL_GPU_ELEMWISE_NMSE);
    compare_nmse(what, &v, AB_TOL_GPU_ELEMWISE_NMSE);
    for (int k = 0; k < 3; k++)
        AB_CHECK(!isfinite(ab_load(w.h, at[k], AB_F32)), "%s: the CPU's weight %zu is finite", what, at[k]);
    pair_free(&w);
    pair_free(&g);
    pair_free(&m);
    pair_free(&v);
}

static void test_memory_and_describe(void) {
    const size_t before = gpu->mem.current[AB_MEM_ACTIVATIONS];
    void *p = ab_alloc(gpu, AB_MEM_ACTIVATIONS, 12345);
    AB_CHECK(p != NULL, "alloc: %s", ab_error());
    AB_CHECK(gpu->mem.current[AB_MEM_ACTIVATIONS] == before + 12345, "alloc charged to activations");
    AB_CHECK(gpu->ops->zero(gpu, p, 12345) == 0, "zero: %s", ab_error());
    ab_release(gpu, AB_MEM_ACTIVATIONS, p, 12345);
    AB_CHECK(gpu->mem.current[AB_MEM_ACTIVATIONS] == before, "release credited");
    ab_device_info info;
    AB_CHECK(gpu->ops->describe(gpu, &info) == 0, "describe");
    AB_CHECK(info.is_host == gpu->ops->is_host, "describe says is_host %d, the ops %d", info.is_host,
             gpu->ops->is_host);
    if (gpu->ops->is_host) { /* the CPU stand-in: the host CPU and its BLAS, no device fields */
        AB_CHECK(info.name[0] && info.blas[0] && info.mem_total == 0, "describe of the host: '%s', '%s', %zu",
                 info.name, info.blas, info.mem_total);
        return;
    }
    AB_CHECK(info.name[0] && info.mem_total > 0 && info.mem_used_peak >= info.mem_used_start,
             "describe: '%s' total %zu", info.name, info.mem_total);
    printf("device: %s (cc %d.%d), driver %s, runtime %s, %s, %s\n", info.name, info.cc_major, info.cc_minor,
           info.driver, info.runtime, info.blas, info.dnn);
}

/* gemm_fold: the device's product into ws, then its fold, against the CPU's fused op; G holds a
 * draw where accumulated. The tolerance of a product stored in ct (the rounding to ct is the
 * one difference the two paths may show; the fold is exact) */
static void test_gemm_fold(void) {
    const struct {
        int ta, tb, M, N, K;
        const char *note;
    } cases[] = {
        {1, 0, 256, 784, 64, "the MLP's fc1 weight"},
        {1, 0, 10, 256, 64, "fc2's weight"},
        {1, 0, 33, 300, 40, "few rows: the CPU's tiles of columns"},
        {1, 1, 19, 23, 31, "odd shapes"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        for (int t = 0; t < 3; t++)
            for (int acc = 0; acc < 2; acc++) {
                const ab_dtype dt = TYPES[t];
                const int ta = cases[i].ta, tb = cases[i].tb, M = cases[i].M, N = cases[i].N, K = cases[i].K;
                pair A = pair_rows((size_t)(ta ? K : M), (size_t)(ta ? M : K), dt, -1.0f, 1.0f),
                     B = pair_rows((size_t)(tb ? N : K), (size_t)(tb ? K : N), dt, -1.0f, 1.0f),
                     ws = pair_rows((size_t)M, (size_t)N, dt, -1.0f, 1.0f),
                     G = pair_rows((size_t)M, (size_t)N, AB_F32, -1.0f, 1.0f), flag = flag_new();
                char what[240];
                op_case_label(what, sizeof what, AB_OP_gemm_fold, "%s %dx%dx%d ta %d tb %d %s (%s)", ab_dtype_name(dt),
                              M, N, K, ta, tb, acc ? "G + round(AB)" : "G = round(AB)", cases[i].note);
                op_ok(what,
                      cpu->ops->gemm_fold(cpu, ta, tb, M, N, K, dt, A.h, ta ? M : K, dt, B.h, tb ? K : N, dt, ws.h,
                                          (float *)G.h, acc, flag.h),
                      gpu->ops->gemm_fold(gpu, ta, tb, M, N, K, dt, A.d, ta ? M : K, dt, B.d, tb ? K : N, dt, ws.d,
                                          (float *)G.d, acc, flag.d));
                compare_nmse(what, &G, gemm_tol(dt, dt));
                compare_flag(what, &flag, 0);
                pair_free(&flag);
                pair_free(&A);
                pair_free(&B);
                pair_free(&ws);
                pair_free(&G);
            }
}

/* gemm_fold's found_inf where the rounded product overflows fp16 (sums of 64 products of values
 * up to 300): set on both backends; G itself is not compared (which sums cross 65504 may differ
 * with the summation order) */
static void test_gemm_fold_overflow(void) {
    for (int acc = 0; acc < 2; acc++) {
        pair A = pair_rows(64, 64, AB_F16, -300.0f, 300.0f), B = pair_rows(64, 64, AB_F16, -300.0f, 300.0f),
             ws = pair_rows(64, 64, AB_F16, -1.0f, 1.0f), G = pair_rows(64, 64, AB_F32, -1.0f, 1.0f), flag = flag_new();
        char what[160];
        op_case_label(what, sizeof what, AB_OP_gemm_fold, "fp16 64x64x64 %s, the product overflowing fp16: found_inf",
                      acc ? "G + round(AB)" : "G = round(AB)");
        op_ok(what,
              cpu->ops->gemm_fold(cpu, 1, 0, 64, 64, 64, AB_F16, A.h, 64, AB_F16, B.h, 64, AB_F16, ws.h, (float *)G.h,
                                  acc, flag.h),
              gpu->ops->gemm_fold(gpu, 1, 0, 64, 64, 64, AB_F16, A.d, 64, AB_F16, B.d, 64, AB_F16, ws.d, (float *)G.d,
                                  acc, flag.d));
        AB_CHECK(any_nonfinite(G.h, 64 * 64), "%s: the CPU's G holds no infinity (the case does not overflow)", what);
        compare_flag(what, &flag, 1);
        pair_free(&A);
        pair_free(&B);
        pair_free(&ws);
        pair_free(&G);
        pair_free(&flag);
    }
}

void dev_ops_run(void) {
    test_memory_and_describe();
    test_gemm();
    test_gemm_relu_nan_direct();
    test_elementwise();
    test_softmax_xent();
    test_softmax_xent_bad_labels();
    test_overlapping_cast();
    test_unscale_and_optimizers();
    test_log2_hist();
    test_gather();
    /* cases added after the others, so the inputs of those stay what they were */
    test_col_sum_mixed();
    test_softmax_xent_mixed();
    test_unscale_edges();
    test_optimizers_nonfinite();
    test_gemm_fold();
    test_gemm_fold_overflow();
}
