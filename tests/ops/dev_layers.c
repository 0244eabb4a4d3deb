/* The device pass of test_backend_ops (ops_test.h) for the convolutional-layer ops: the backend
 * under test (CUDA, or a second CPU backend under --stand-in) against the CPU backend, on fresh
 * seeded random inputs in fp32, fp16 and bf16, channels-last: convolution forward, backward-data
 * and backward-filter (beta 0 and 1), on small odd shapes and real ResNet-50 shapes; batch norm
 * training (with the running statistics), evaluation and backward (acc 0 and 1, in place); max
 * pooling forward and backward (overlapping windows, ties, NaN, infinities, 65504, subnormals,
 * signed zeros); global average pooling; add; image batch assembly with crops, flips and zero
 * padding. Whole tensors are compared by NMSE and by the largest element error
 * (tests/tolerances.h); ops that select or round a single fp32 value the same way on both sides
 * are compared bit for bit (NaN as NaN). NaN is planted and must show in the same places; every
 * device output has sentinels after it that must survive. On failure the worst element is
 * printed with its index (and its n, h, w, c). Each call of an op under test opens a case
 * (op_case), described by its element type first, then its shape and variant. */

#include "dev_pair.h"

/* ---- convolutions ---------------------------------------------------------------------------- */

typedef struct {
    const char *name;
    int N, H, W, C, K, R, S, sh, sw, ph, pw;
} conv_case;

static void conv_one(const conv_case *cc, ab_dtype t) {
    ab_conv_shape s = {.N = cc->N,
                       .H = cc->H,
                       .W = cc->W,
                       .C = cc->C,
                       .K = cc->K,
                       .R = cc->R,
                       .S = cc->S,
                       .stride_h = cc->sh,
                       .stride_w = cc->sw,
                       .pad_h = cc->ph,
                       .pad_w = cc->pw};
    if (ab_conv_shape_init(&s) != 0) die(cc->name);
    const double tol = AB_TOL_GPU_CONV_FP32_NMSE;
    char what[240];
    pair x = pair_img(s.N, s.H, s.W, s.C, t, -1.0f, 1.0f), w = pair_img(s.K, s.R, s.S, s.C, t, -1.0f, 1.0f);
    pair y = pair_img(s.N, s.P, s.Q, s.K, t, -1.0f, 1.0f), dy = pair_img(s.N, s.P, s.Q, s.K, t, -1.0f, 1.0f);
    pair dx = pair_img(s.N, s.H, s.W, s.C, t, -1.0f, 1.0f), dw = pair_img(s.K, s.R, s.S, s.C, t, -1.0f, 1.0f);
    const char *tn = ab_dtype_name(t);

    op_case_label(what, sizeof what, AB_OP_conv2d_forward, "%s %s", tn, cc->name);
    op_ok(what, cpu->ops->conv2d_forward(cpu, &s, t, x.h, w.h, y.h),
          gpu->ops->conv2d_forward(gpu, &s, t, x.d, w.d, y.d));
    compare_t(what, &y, tol);
    /* the same shape again: the cached plan, no new memory */
    const size_t mem_before = gpu->mem.current_all;
    op_case_label(what, sizeof what, AB_OP_conv2d_forward, "%s %s again (the cached plan, no new memory)", tn, cc->name);
    op_ok(what, cpu->ops->conv2d_forward(cpu, &s, t, x.h, w.h, y.h),
          gpu->ops->conv2d_forward(gpu, &s, t, x.d, w.d, y.d));
    compare_t(what, &y, tol);
    AB_CHECK(gpu->mem.current_all == mem_before, "%s: device memory grew from %zu to %zu bytes on a repeated call",
             what, mem_before, gpu->mem.current_all);

    op_case_label(what, sizeof what, AB_OP_conv2d_backward_data, "%s %s", tn, cc->name);
    op_ok(what, cpu->ops->conv2d_backward_data(cpu, &s, t, dy.h, w.h, dx.h),
          gpu->ops->conv2d_backward_data(gpu, &s, t, dy.d, w.d, dx.d));
    compare_t(what, &dx, tol);

    for (int beta = 0; beta < 2; beta++) { /* beta 1: the second micro-batch adds to the first's dw */
        op_case_label(what, sizeof what, AB_OP_conv2d_backward_filter, "%s %s beta %d", tn, cc->name, beta);
        op_ok(what, cpu->ops->conv2d_backward_filter(cpu, &s, t, x.h, dy.h, (float)beta, dw.h),
              gpu->ops->conv2d_backward_filter(gpu, &s, t, x.d, dy.d, (float)beta, dw.d));
        compare_t(what, &dw, tol);
    }
    /* the filter gradient folded into fp32 (the second micro-batch's adds to the first's) */
    pair ws = pair_img(s.K, s.R, s.S, s.C, t, -1.0f, 1.0f), dw32 = pair_img(s.K, s.R, s.S, s.C, AB_F32, -1.0f, 1.0f);
    for (int acc = 0; acc < 2; acc++) {
        pair flag = flag_new();
        op_case_label(what, sizeof what, AB_OP_conv2d_backward_filter_fold, "%s %s accumulate %d", tn, cc->name, acc);
        op_ok(what, cpu->ops->conv2d_backward_filter_fold(cpu, &s, t, x.h, dy.h, ws.h, (float *)dw32.h, acc, flag.h),
              gpu->ops->conv2d_backward_filter_fold(gpu, &s, t, x.d, dy.d, ws.d, (float *)dw32.d, acc, flag.d));
        compare_flag(what, &flag, 0);
        pair_free(&flag);
        /* fp32 values rounded through t: t's tolerances */
        if (t == AB_F16)
            compare(what, &dw32, AB_TOL_FP16_NMSE, AB_TOL_GPU_LAYER_FP16_MAXREL);
        else if (t == AB_BF16)
            compare(what, &dw32, AB_TOL_BF16_NMSE, AB_TOL_GPU_LAYER_BF16_MAXREL);
        else
            compare_t(what, &dw32, tol);
    }
    pair_free(&ws);
    pair_free(&dw32);
    pair_free(&x);
    pair_free(&w);
    pair_free(&y);
    pair_free(&dy);
    pair_free(&dx);
    pair_free(&dw);
}

/* NaN parity: a NaN in x makes NaN every output whose window covers it (forward) and every
 * filter tap that met it (backward filter); a NaN in dy spreads through backward data */
static void conv_nan(ab_dtype t) {
    ab_conv_shape s = {
        .N = 2, .H = 6, .W = 7, .C = 8, .K = 8, .R = 3, .S = 3, .stride_h = 1, .stride_w = 2, .pad_h = 1, .pad_w = 1};
    if (ab_conv_shape_init(&s) != 0) die("conv NaN shape");
    char what[240];
    pair x = pair_img(s.N, s.H, s.W, s.C, t, -1.0f, 1.0f), w = pair_img(s.K, s.R, s.S, s.C, t, -1.0f, 1.0f);
    pair y = pair_img(s.N, s.P, s.Q, s.K, t, -1.0f, 1.0f), dy = pair_img(s.N, s.P, s.Q, s.K, t, -1.0f, 1.0f);
    pair dx = pair_img(s.N, s.H, s.W, s.C, t, -1.0f, 1.0f), dw = pair_img(s.K, s.R, s.S, s.C, t, -1.0f, 1.0f);
    pair_set(&x, ((size_t)(1 * s.H + 3) * s.W + 4) * s.C + 5, NAN); /* n 1, h 3, w 4, c 5 */
    pair_set(&dy, ((size_t)(0 * s.P + 2) * s.Q + 1) * s.K + 2, NAN);
    const char *tn = ab_dtype_name(t), *shape = "2x6x7x8 3x3 stride 1x2 pad 1 K=8";
    op_case_label(what, sizeof what, AB_OP_conv2d_forward, "%s %s NaN in x", tn, shape);
    op_ok(what, cpu->ops->conv2d_forward(cpu, &s, t, x.h, w.h, y.h),
          gpu->ops->conv2d_forward(gpu, &s, t, x.d, w.d, y.d));
    compare_t(what, &y, AB_TOL_GPU_CONV_FP32_NMSE);
    op_case_label(what, sizeof what, AB_OP_conv2d_backward_data, "%s %s NaN in dy", tn, shape);
    op_ok(what, cpu->ops->conv2d_backward_data(cpu, &s, t, dy.h, w.h, dx.h),
          gpu->ops->conv2d_backward_data(gpu, &s, t, dy.d, w.d, dx.d));
    compare_t(what, &dx, AB_TOL_GPU_CONV_FP32_NMSE);
    op_case_label(what, sizeof what, AB_OP_conv2d_backward_filter, "%s %s NaN in x and dy", tn, shape);
    op_ok(what, cpu->ops->conv2d_backward_filter(cpu, &s, t, x.h, dy.h, 0.0f, dw.h),
          gpu->ops->conv2d_backward_filter(gpu, &s, t, x.d, dy.d, 0.0f, dw.d));
    compare_t(what, &dw, AB_TOL_GPU_CONV_FP32_NMSE);
    pair_free(&x);
    pair_free(&w);
    pair_free(&y);
    pair_free(&dy);
    pair_free(&dx);
    pair_free(&dw);
}

/* tensors that are not 16-byte aligned (an arena may carve them anywhere): one element in, in
 * every direction (the plan cached for the aligned shape must not be taken for these) */
static void conv_misaligned(ab_dtype t) {
    ab_conv_shape s = {
        .N = 2, .H = 9, .W = 9, .C = 16, .K = 24, .R = 3, .S = 3, .stride_h = 1, .stride_w = 1, .pad_h = 1, .pad_w = 1};
    if (ab_conv_shape_init(&s) != 0) die("conv misaligned shape");
    char what[240];
    const size_t nx = (size_t)s.N * s.H * s.W * s.C, ny = (size_t)s.N * s.P * s.Q * s.K;
    const size_t nw = (size_t)s.K * s.R * s.S * s.C;
    pair x = pair_new(nx + 1, t, -1.0f, 1.0f), w = pair_img(s.K, s.R, s.S, s.C, t, -1, 1);
    pair y = pair_new(ny + 1, t, -1.0f, 1.0f), dy = pair_new(ny + 1, t, -1.0f, 1.0f);
    pair dx = pair_new(nx + 1, t, -1.0f, 1.0f), dw = pair_new(nw + 1, t, -1.0f, 1.0f);
    const size_t es = x.es;
    const char *tn = ab_dtype_name(t), *shape = "2x9x9x16 3x3 pad 1 K=24";
    op_case_label(what, sizeof what, AB_OP_conv2d_forward, "%s %s x and y one element off alignment", tn, shape);
    op_ok(what, cpu->ops->conv2d_forward(cpu, &s, t, (char *)x.h + es, w.h, (char *)y.h + es),
          gpu->ops->conv2d_forward(gpu, &s, t, (char *)x.d + es, w.d, (char *)y.d + es));
    compare_t(what, &y, AB_TOL_GPU_CONV_FP32_NMSE);
    op_case_label(what, sizeof what, AB_OP_conv2d_backward_data, "%s %s dy and dx one element off alignment", tn, shape);
    op_ok(what, cpu->ops->conv2d_backward_data(cpu, &s, t, (char *)dy.h + es, w.h, (char *)dx.h + es),
          gpu->ops->conv2d_backward_data(gpu, &s, t, (char *)dy.d + es, w.d, (char *)dx.d + es));
    compare_t(what, &dx, AB_TOL_GPU_CONV_FP32_NMSE);
    op_case_label(what, sizeof what, AB_OP_conv2d_backward_filter, "%s %s x, dy and dw one element off alignment, beta 1",
              tn, shape);
    op_ok(what,
          cpu->ops->conv2d_backward_filter(cpu, &s, t, (char *)x.h + es, (char *)dy.h + es, 1.0f, (char *)dw.h + es),
          gpu->ops->conv2d_backward_filter(gpu, &s, t, (char *)x.d + es, (char *)dy.d + es, 1.0f, (char *)dw.d + es));
    compare_t(what, &dw, AB_TOL_GPU_CONV_FP32_NMSE);
    pair_free(&x);
    pair_free(&w);
    pair_free(&y);
    pair_free(&dy);
    pair_free(&dx);
    pair_free(&dw);
}

static void test_conv(void) {
    static const conv_case cases[] = {
        /* small and odd: channel counts tensor cores cannot take, asymmetric strides and padding */
        {"3x3 C=3 K=5 7x5", 2, 7, 5, 3, 5, 3, 3, 1, 1, 1, 1},
        {"3x2 stride 2x1 pad 1x0 C=6 K=10", 3, 9, 11, 6, 10, 3, 2, 2, 1, 1, 0},
        {"1x1 stride 2 C=8 K=16", 1, 5, 5, 8, 16, 1, 1, 2, 2, 0, 0},
        {"7x7 stride 2 pad 3 C=3 K=8 17x13", 2, 17, 13, 3, 8, 7, 7, 2, 2, 3, 3},
        /* ResNet-50 (torchvision v1.5), batch 2 */
        {"resnet50 conv1 7x7/2 224x224x3->64", 2, 224, 224, 3, 64, 7, 7, 2, 2, 3, 3},
        {"resnet50 layer1 3x3 56x56x64->64", 2, 56, 56, 64, 64, 3, 3, 1, 1, 1, 1},
        {"resnet50 layer2 downsample 1x1/2 56x56x256->512", 2, 56, 56, 256, 512, 1, 1, 2, 2, 0, 0},
        {"resnet50 layer3 3x3/2 28x28x256->256", 2, 28, 28, 256, 256, 3, 3, 2, 2, 1, 1},
        {"resnet50 layer4 1x1 7x7x2048->512", 2, 7, 7, 2048, 512, 1, 1, 1, 1, 0, 0},
        /* the step tests' shapes (8 CIFAR-10 images): ResNet-50 with the CIFAR stem and resnet-tiny */
        {"cifar stem 3x3 32x32x3->64 batch 8", 8, 32, 32, 3, 64, 3, 3, 1, 1, 1, 1},
        {"resnet-tiny stem 3x3 32x32x3->8 batch 8", 8, 32, 32, 3, 8, 3, 3, 1, 1, 1, 1},
        {"cifar layer1 1x1 32x32x64->64 batch 8", 8, 32, 32, 64, 64, 1, 1, 1, 1, 0, 0},
        {"cifar layer1 3x3 32x32x64->64 batch 8", 8, 32, 32, 64, 64, 3, 3, 1, 1, 1, 1},
        {"cifar layer2 3x3/2 32x32x128->128 batch 8", 8, 32, 32, 128, 128, 3, 3, 2, 2, 1, 1},
        {"cifar layer2 downsample 1x1/2 32x32x256->512 batch 8", 8, 32, 32, 256, 512, 1, 1, 2, 2, 0, 0},
        {"cifar layer4 3x3 4x4x512->512 batch 8", 8, 4, 4, 512, 512, 3, 3, 1, 1, 1, 1},
        /* the torchvision stem on 32x32 images: layer4 works on 2x2 and 1x1 maps */
        {"torchvision stem 7x7/2 32x32x3->64 batch 8", 8, 32, 32, 3, 64, 7, 7, 2, 2, 3, 3},
        {"torchvision layer4 3x3/2 2x2x512->512 batch 8", 8, 2, 2, 512, 512, 3, 3, 2, 2, 1, 1},
        {"torchvision layer4 3x3 1x1x512->512 batch 8", 8, 1, 1, 512, 512, 3, 3, 1, 1, 1, 1},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        for (int k = 0; k < 3; k++) conv_one(&cases[i], TYPES[k]);
    for (int k = 0; k < 3; k++) {
        conv_nan(TYPES[k]);
        conv_misaligned(TYPES[k]);
    }
}

/* ---- batch norm ------------------------------------------------------------------------------ */

typedef struct {
    int M, C;
    float offset; /* x around offset: a mean far from zero must not cancel the variance away */
} bn_case;

static void bn_one(const bn_case *bc, ab_dtype t, int nan) {
    const int M = bc->M, C = bc->C;
    const size_t n = (size_t)M * C;
    const float o = bc->offset, eps = 1e-5f, mom = 0.1f;
    char what[240], tag[96];
    snprintf(tag, sizeof tag, "%s M=%d C=%d offset %g%s", ab_dtype_name(t), M, C, (double)o, nan ? " NaN" : "");
    pair x = pair_new(n, t, o - 1.0f, o + 1.0f), y = pair_new(n, t, -1.0f, 1.0f);
    pair gamma = pair_new((size_t)C, AB_F32, 0.5f, 1.5f), beta = pair_new((size_t)C, AB_F32, -0.5f, 0.5f);
    pair rm = pair_new((size_t)C, AB_F32, -0.1f, 0.1f), rv = pair_new((size_t)C, AB_F32, 0.5f, 1.5f);
    pair sm = pair_new((size_t)C, AB_F32, -1.0f, 1.0f), si = pair_new((size_t)C, AB_F32, -1.0f, 1.0f);
    x.dims[0] = 1, x.dims[1] = 1, x.dims[2] = M, x.dims[3] = C;
    y.dims[0] = 1, y.dims[1] = 1, y.dims[2] = M, y.dims[3] = C;
    if (nan) pair_set(&x, (size_t)(M / 2) * C + (size_t)(C > 2 ? 2 : 0), NAN); /* channel 2: all of it NaN */

    op_case_label(what, sizeof what, AB_OP_batchnorm_forward_train, "%s%s", tag, nan ? " in x (channel 2)" : "");
    op_ok(
        what,
        cpu->ops->batchnorm_forward_train(cpu, M, C, t, x.h, gamma.h, beta.h, eps, mom, rm.h, rv.h, sm.h, si.h, 0, y.h),
        gpu->ops->batchnorm_forward_train(gpu, M, C, t, x.d, gamma.d, beta.d, eps, mom, rm.d, rv.d, sm.d, si.d, 0,
                                          y.d));
    compare_t(what, &y, AB_TOL_GPU_BN_FP32_NMSE);
    snprintf(what, sizeof what, "batchnorm_forward_train %s: save_mean", tag);
    compare(what, &sm, AB_TOL_GPU_BN_FP32_NMSE, AB_TOL_GPU_LAYER_FP32_MAXREL);
    snprintf(what, sizeof what, "batchnorm_forward_train %s: save_invstd", tag);
    compare(what, &si, AB_TOL_GPU_BN_FP32_NMSE, AB_TOL_GPU_LAYER_FP32_MAXREL);
    snprintf(what, sizeof what, "batchnorm_forward_train %s: running_mean", tag);
    compare(what, &rm, AB_TOL_GPU_BN_FP32_NMSE, AB_TOL_GPU_LAYER_FP32_MAXREL);
    snprintf(what, sizeof what, "batchnorm_forward_train %s: running_var", tag);
    compare(what, &rv, AB_TOL_GPU_BN_FP32_NMSE, AB_TOL_GPU_LAYER_FP32_MAXREL);

    if (!nan) {
        op_case_label(what, sizeof what, AB_OP_batchnorm_forward_eval, "%s", tag);
        op_ok(what, cpu->ops->batchnorm_forward_eval(cpu, M, C, t, x.h, gamma.h, beta.h, rm.h, rv.h, eps, 0, y.h),
              gpu->ops->batchnorm_forward_eval(gpu, M, C, t, x.d, gamma.d, beta.d, rm.d, rv.d, eps, 0, y.d));
        compare_t(what, &y, AB_TOL_GPU_BN_FP32_NMSE);
        /* in place (y over x), on a copy of x that the rest of this case does not need */
        pair xe = pair_new(n, t, o - 1.0f, o + 1.0f);
        xe.dims[0] = 1, xe.dims[1] = 1, xe.dims[2] = M, xe.dims[3] = C;
        op_case_label(what, sizeof what, AB_OP_batchnorm_forward_eval, "%s in place, fused ReLU", tag);
        op_ok(what, cpu->ops->batchnorm_forward_eval(cpu, M, C, t, xe.h, gamma.h, beta.h, rm.h, rv.h, eps, 1, xe.h),
              gpu->ops->batchnorm_forward_eval(gpu, M, C, t, xe.d, gamma.d, beta.d, rm.d, rv.d, eps, 1, xe.d));
        compare_t(what, &xe, AB_TOL_GPU_BN_FP32_NMSE);
        pair_free(&xe);
    }

    /* backward from the same saved statistics on both sides (the CPU's, uploaded), so that only
     * the backward op is compared; acc 0 then 1, dx apart and then in place over dy */
    if (gpu->ops->upload(gpu, sm.d, sm.h, (size_t)C * 4) != 0 || gpu->ops->upload(gpu, si.d, si.h, (size_t)C * 4) != 0)
        die("upload");
    pair dy = pair_new(n, t, -1.0f, 1.0f), dx = pair_new(n, t, -1.0f, 1.0f);
    pair dg = pair_new((size_t)C, AB_F32, -1.0f, 1.0f), db = pair_new((size_t)C, AB_F32, -1.0f, 1.0f);
    dx.dims[0] = dy.dims[0] = 1, dx.dims[1] = dy.dims[1] = 1, dx.dims[2] = dy.dims[2] = M, dx.dims[3] = dy.dims[3] = C;
    if (nan) pair_set(&dy, (size_t)(M / 3) * C, NAN); /* channel 0 */
    for (int acc = 0; acc < 2; acc++) {
        const int inplace = acc == 1;
        const pair *out = inplace ? &dy : &dx;
        op_case_label(what, sizeof what, AB_OP_batchnorm_backward, "%s%s acc %d%s", tag, nan ? " in x and dy" : "", acc,
                  inplace ? " in place" : "");
        op_ok(
            what,
            cpu->ops->batchnorm_backward(cpu, M, C, t, x.h, dy.h, gamma.h, sm.h, si.h, (float)acc, dg.h, db.h, out->h),
            gpu->ops->batchnorm_backward(gpu, M, C, t, x.d, dy.d, gamma.d, sm.d, si.d, (float)acc, dg.d, db.d, out->d));
        compare_t(what, out, AB_TOL_GPU_BN_FP32_NMSE);
        snprintf(what, sizeof what, "batchnorm_backward %s acc %d: dgamma", tag, acc);
        compare(what, &dg, AB_TOL_GPU_BN_FP32_NMSE, AB_TOL_GPU_LAYER_FP32_MAXREL);
        snprintf(what, sizeof what, "batchnorm_backward %s acc %d: dbeta", tag, acc);
        compare(what, &db, AB_TOL_GPU_BN_FP32_NMSE, AB_TOL_GPU_LAYER_FP32_MAXREL);
    }

    if (!nan) { /* training in place, y over x (as the model does) */
        op_case_label(what, sizeof what, AB_OP_batchnorm_forward_train, "%s in place, fused ReLU, no running statistics",
                  tag);
        op_ok(what,
              cpu->ops->batchnorm_forward_train(cpu, M, C, t, x.h, gamma.h, beta.h, eps, mom, NULL, NULL, sm.h, si.h, 1,
                                                x.h),
              gpu->ops->batchnorm_forward_train(gpu, M, C, t, x.d, gamma.d, beta.d, eps, mom, NULL, NULL, sm.d, si.d, 1,
                                                x.d));
        compare_t(what, &x, AB_TOL_GPU_BN_FP32_NMSE);
    }
    pair_free(&x);
    pair_free(&y);
    pair_free(&gamma);
    pair_free(&beta);
    pair_free(&rm);
    pair_free(&rv);
    pair_free(&sm);
    pair_free(&si);
    pair_free(&dy);
    pair_free(&dx);
    pair_free(&dg);
    pair_free(&db);
}

static void test_batchnorm(void) {
    static const bn_case cases[] = {
        {37, 5, 0.0f},             /* odd: fewer rows than a block's lanes, channels not a multiple of 32 */
        {1000, 3, 4.0f},           /* mean four times the spread */
        {2, 33, 0.0f},             /* the fewest rows training takes */
        {2 * 112 * 112, 64, 0.0f}, /* ResNet-50 stem, batch 2 */
        {2 * 56 * 56, 256, 3.0f},  /* layer1 expansion */
        {2 * 7 * 7, 2048, 0.0f},   /* layer4 output */
        {8 * 32 * 32, 64, 0.0f},   /* the step tests' CIFAR stem, batch 8 */
        {8 * 32 * 32, 256, 1.0f},  /* ... layer1 expansion */
        {8 * 4 * 4, 512, 0.0f},    /* ... layer4 */
        {8, 2048, 0.0f},           /* the torchvision stem on 32x32 images: layer4 on 1x1 maps */
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        for (int k = 0; k < 3; k++) bn_one(&cases[i], TYPES[k], 0);
    const bn_case small = {64, 7, 1.0f};
    for (int k = 0; k < 3; k++) bn_one(&small, TYPES[k], 1);
}

/* ---- pooling and add ------------------------------------------------------------------------- */

typedef struct {
    const char *name;
    int N, H, W, C, R, S, sh, sw, ph, pw;
} pool_case;

/* values max pooling passes through as they are: the infinities, fp16's largest, subnormals
 * (fp16's smallest, an fp32 one, which fp16 rounds to zero) and the signed zeros (equal: the
 * first in the window wins) */
static const float POOL_SPECIALS[] = {INFINITY, -INFINITY, 65504.0f, -65504.0f, 6e-8f, -6e-8f, 1e-40f, 0.0f, -0.0f};
enum { NPOOL_SPECIALS = sizeof POOL_SPECIALS / sizeof POOL_SPECIALS[0] };

/* mode 0: random x; 1: constant x (every window ties: the first position takes dy); 2: NaN
 * planted; 3: x -1 but every third element, which takes the specials in turn, and dy with inf,
 * NaN and 65504 every fifth element (two of those routed to one x overflow fp16) */
static void maxpool_one(const pool_case *pc, ab_dtype t, int mode) {
    ab_pool_shape s = {.N = pc->N,
                       .H = pc->H,
                       .W = pc->W,
                       .C = pc->C,
                       .R = pc->R,
                       .S = pc->S,
                       .stride_h = pc->sh,
                       .stride_w = pc->sw,
                       .pad_h = pc->ph,
                       .pad_w = pc->pw};
    if (ab_pool_shape_init(&s) != 0) die(pc->name);
    static const char *const MODE[4] = {"", " ties", " NaN", " inf, 65504, subnormals, signed zeros"};
    char what[240];
    pair x = pair_img(s.N, s.H, s.W, s.C, t, -2.0f, 2.0f), y = pair_img(s.N, s.P, s.Q, s.C, t, -1.0f, 1.0f);
    pair dy = pair_img(s.N, s.P, s.Q, s.C, t, -1.0f, 1.0f), dx = pair_img(s.N, s.H, s.W, s.C, t, -1.0f, 1.0f);
    if (mode == 1) pair_fill(&x, 0.5f);
    if (mode == 2) {
        pair_set(&x, 0, NAN);
        pair_set(&x, x.n / 2 + 1, NAN);
        pair_set(&x, x.n - 1, NAN);
    }
    if (mode == 3) {
        for (size_t i = 0; i < x.n; i++) ab_store(x.h, i, t, i % 3 ? -1.0f : POOL_SPECIALS[i / 3 % NPOOL_SPECIALS]);
        pair_push(&x);
        for (size_t i = 0; i < dy.n; i += 5) ab_store(dy.h, i, t, 65504.0f);
        ab_store(dy.h, 1, t, INFINITY);
        ab_store(dy.h, dy.n / 2 + 1, t, NAN);
        pair_push(&dy);
    }
    op_case_label(what, sizeof what, AB_OP_maxpool_forward, "%s %s%s", ab_dtype_name(t), pc->name, MODE[mode]);
    op_ok(what, cpu->ops->maxpool_forward(cpu, &s, t, x.h, y.h), gpu->ops->maxpool_forward(gpu, &s, t, x.d, y.d));
    compare_exact(what, &y); /* a selection: the same value */
    /* backward from the same y on both sides (the CPU's), so a NaN in y is the same NaN */
    if (gpu->ops->upload(gpu, y.d, y.h, y.n * y.es) != 0) die("upload");
    op_case_label(what, sizeof what, AB_OP_maxpool_backward, "%s %s%s", ab_dtype_name(t), pc->name, MODE[mode]);
    op_ok(what, cpu->ops->maxpool_backward(cpu, &s, t, x.h, y.h, dy.h, dx.h),
          gpu->ops->maxpool_backward(gpu, &s, t, x.d, y.d, dy.d, dx.d));
    compare_t(what, &dx, AB_TOL_GPU_ELEMWISE_NMSE);
    pair_free(&x);
    pair_free(&y);
    pair_free(&dy);
    pair_free(&dx);
}

static void test_pool_add(void) {
    char what[240];
    static const pool_case cases[] = {
        {"resnet50 stem 3x3/2 pad 1 112x112x64", 2, 112, 112, 64, 3, 3, 2, 2, 1, 1},
        {"3x2 stride 2x1 pad 1x1 7x6x5", 3, 7, 6, 5, 3, 2, 2, 1, 1, 1},
        {"2x2/2 5x5x3 (last row and column dropped)", 1, 5, 5, 3, 2, 2, 2, 2, 0, 0},
        {"torchvision stem on 32x32 images 3x3/2 pad 1 16x16x64 batch 8", 8, 16, 16, 64, 3, 3, 2, 2, 1, 1},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        for (int k = 0; k < 3; k++)
            for (int mode = 0; mode < 4; mode++)
                if (mode == 0 || i > 0) maxpool_one(&cases[i], TYPES[k], mode);

    static const int shapes[][3] = {{2, 49, 2048}, {3, 5, 7}, {1, 1, 3}, {8, 16, 2048}, {8, 1, 2048}}; /* N, HW, C */
    for (int i = 0; i < (int)(sizeof shapes / sizeof shapes[0]); i++)
        for (int k = 0; k < 3; k++) {
            const int N = shapes[i][0], HW = shapes[i][1], C = shapes[i][2];
            const ab_dtype t = TYPES[k];
            pair x = pair_img(N, 1, HW, C, t, -2.0f, 2.0f), y = pair_img(N, 1, 1, C, t, -1.0f, 1.0f);
            pair dx = pair_img(N, 1, HW, C, t, -1.0f, 1.0f);
            const int specials = i == 1;
            if (specials) {
                /* image 0: a NaN in channel 0, channel 2 all 65504 (the fp32 sum does not overflow);
                 * image 1: an inf in channel 1, channel 3 all fp16's smallest subnormal; image 2:
                 * inf and -inf in channel 1 (NaN), channel 4 all an fp32 subnormal */
                pair_set(&x, 7, NAN);
                pair_set(&x, ((size_t)1 * HW + 2) * C + 1, INFINITY);
                pair_set(&x, ((size_t)2 * HW + 0) * C + 1, -INFINITY);
                pair_set(&x, ((size_t)2 * HW + 3) * C + 1, INFINITY);
                for (int p = 0; p < HW; p++) {
                    pair_set(&x, ((size_t)0 * HW + p) * C + 2, 65504.0f);
                    pair_set(&x, ((size_t)1 * HW + p) * C + 3, 6e-8f);
                    pair_set(&x, ((size_t)2 * HW + p) * C + 4, 1e-40f);
                }
            }
            const char *tag = specials ? " NaN, inf, 65504, subnormals" : "";
            op_case_label(what, sizeof what, AB_OP_avgpool_forward, "%s N=%d HW=%d C=%d%s", ab_dtype_name(t), N, HW, C,
                      tag);
            op_ok(what, cpu->ops->avgpool_forward(cpu, N, HW, C, t, x.h, y.h),
                  gpu->ops->avgpool_forward(gpu, N, HW, C, t, x.d, y.d));
            compare_t(what, &y, AB_TOL_GPU_ELEMWISE_NMSE);
            op_case_label(what, sizeof what, AB_OP_avgpool_backward, "%s N=%d HW=%d C=%d%s", ab_dtype_name(t), N, HW, C,
                      tag);
            op_ok(what, cpu->ops->avgpool_backward(cpu, N, HW, C, t, y.h, dx.h),
                  gpu->ops->avgpool_backward(gpu, N, HW, C, t, y.d, dx.d));
            compare_exact(what, &dx); /* one division, one rounding */
            pair_free(&x);
            pair_free(&y);
            pair_free(&dx);
        }

    const size_t n = 100003; /* not a multiple of any block size */
    const float specials[] = {NAN, INFINITY, -INFINITY, 0.0f, -0.0f, 65504.0f, 65520.0f, -70000.0f, 6e-8f, 3e-39f};
    for (int k = 0; k < 3; k++)
        for (int alias = 0; alias < 2; alias++) { /* y apart, then y over a (the residual add) */
            const ab_dtype t = TYPES[k];
            pair a = pair_new(n, t, -4.0f, 4.0f), b = pair_new(n, t, -4.0f, 4.0f), y = pair_new(n, t, -1.0f, 1.0f);
            for (size_t i = 0; i < sizeof specials / sizeof specials[0]; i++) {
                pair_set(&a, i * 7, specials[i]);
                pair_set(&b, i * 11 + 3, specials[sizeof specials / sizeof specials[0] - 1 - i]);
            }
            pair_set(&a, 500, INFINITY); /* inf + -inf = NaN on both */
            pair_set(&b, 500, -INFINITY);
            const pair *out = alias ? &a : &y;
            op_case_label(what, sizeof what, AB_OP_add, "%s n=%zu NaN, inf, 65504, 65520, subnormals, signed zeros%s",
                      ab_dtype_name(t), n, alias ? " in place, fused ReLU" : "");
            op_ok(what, cpu->ops->add(cpu, n, t, a.h, b.h, alias, out->h),
                  gpu->ops->add(gpu, n, t, a.d, b.d, alias, out->d));
            compare_exact(what, out); /* one fp32 add, one rounding */
            pair_free(&a);
            pair_free(&b);
            pair_free(&y);
        }
}

/* ---- image batch assembly -------------------------------------------------------------------- */

typedef struct {
    const char *name;
    ab_image_layout L;
    int pad;     /* crop padding; -1: no augmentation struct at all */
    int aug_set; /* 0: an augmentation struct whose aug is NULL */
} gather_case;

static void test_gather_images(void) {
    static const gather_case cases[] = {
        {"CIFAR-10 planar 3x32x32, crop pad 4 + flip",
         {3, 32, 32, 1, {0.4914f, 0.4822f, 0.4465f}, {0.2470f, 0.2435f, 0.2616f}},
         4,
         1},
        {"interleaved 9x7x3, crop pad 2 + flip", {3, 9, 7, 0, {0.5f, 0.4f, 0.3f}, {0.25f, 0.2f, 0.3f}}, 2, 1},
        {"MNIST 1x28x28, no augmentation", {1, 28, 28, 0, {0.1307f}, {0.3081f}}, -1, 0},
        {"planar 4x5x6, augmentation struct without offsets",
         {4, 5, 6, 1, {0.1f, 0.2f, 0.3f, 0.4f}, {0.5f, 0.6f, 0.7f, 0.8f}},
         3,
         0},
    };
    const int N = 300;
    const int Bs[] = {64, 100, 7, 64}; /* growth of the staging buffer, and its ring reused */
    char what[240];
    for (size_t ci = 0; ci < sizeof cases / sizeof cases[0]; ci++) {
        const gather_case *gc = &cases[ci];
        const size_t D = (size_t)gc->L.C * gc->L.H * gc->L.W;
        uint8_t *data = malloc((size_t)N * D), *labels = malloc((size_t)N);
        if (!data || !labels) die("host buffer");
        for (size_t i = 0; i < (size_t)N * D; i++) data[i] = (uint8_t)ab_rng_below(&rng, 256);
        for (int i = 0; i < N; i++) labels[i] = (uint8_t)ab_rng_below(&rng, 10);
        const void *cx, *cy, *gx, *gy;
        op_ok("map_data",
              cpu->ops->map_data(cpu, data, (size_t)N * D, &cx) | cpu->ops->map_data(cpu, labels, (size_t)N, &cy),
              gpu->ops->map_data(gpu, data, (size_t)N * D, &gx) | gpu->ops->map_data(gpu, labels, (size_t)N, &gy));
        for (int k = 0; k < 3; k++)
            for (size_t bi = 0; bi < sizeof Bs / sizeof Bs[0]; bi++) {
                const int B = Bs[bi];
                const ab_dtype t = TYPES[k];
                int32_t idx[100], augv[300];
                for (int b = 0; b < B; b++) {
                    idx[b] = (int32_t)ab_rng_below(&rng, (uint64_t)N);
                    const int p = gc->pad > 0 ? gc->pad : 0;
                    augv[3 * b] = (int32_t)ab_rng_below(&rng, (uint64_t)(2 * p + 1));
                    augv[3 * b + 1] = (int32_t)ab_rng_below(&rng, (uint64_t)(2 * p + 1));
                    augv[3 * b + 2] = (int32_t)ab_rng_below(&rng, 2);
                }
                augv[0] = 0, augv[1] = 2 * (gc->pad > 0 ? gc->pad : 0), augv[2] = 1; /* the extremes */
                const ab_image_aug aug = {gc->pad > 0 ? gc->pad : 0, gc->aug_set ? augv : NULL};
                const ab_image_aug *ap = gc->pad < 0 ? NULL : &aug;
                pair out = pair_img(B, gc->L.H, gc->L.W, gc->L.C, t, 0.0f, 0.0f);
                pair lab = pair_new((size_t)B, AB_F32, 0.0f, 0.0f);
                op_case_label(what, sizeof what, AB_OP_gather_images, "%s %s B=%d", ab_dtype_name(t), gc->name, B);
                op_ok(what, cpu->ops->gather_images(cpu, B, &gc->L, ap, cx, cy, idx, t, out.h, lab.h),
                      gpu->ops->gather_images(gpu, B, &gc->L, ap, gx, gy, idx, t, out.d, lab.d));
                /* the op must have taken what it needs of idx and aug already */
                memset(idx, 0xff, sizeof idx);
                memset(augv, 0xff, sizeof augv);
                compare_exact(what, &out); /* gather_normalize's expression on both sides */
                snprintf(what, sizeof what, "gather_images %s %s B=%d: labels", ab_dtype_name(t), gc->name, B);
                compare_exact(what, &lab);
                pair_free(&out);
                pair_free(&lab);
            }
        /* a crop offset out of range is refused, before anything is queued */
        {
            int32_t idx1[1] = {0}, bad[3] = {0, 2 * (gc->pad > 0 ? gc->pad : 0) + 1, 0};
            const ab_image_aug aug = {gc->pad > 0 ? gc->pad : 0, bad};
            pair out = pair_img(1, gc->L.H, gc->L.W, gc->L.C, AB_F32, 0.0f, 0.0f);
            op_case_label(what, sizeof what, AB_OP_gather_images, "fp32 %s: a crop offset out of range is refused",
                      gc->name);
            AB_CHECK(gpu->ops->gather_images(gpu, 1, &gc->L, &aug, gx, gy, idx1, AB_F32, out.d, NULL) != 0,
                     "%s: accepted", what);
            AB_CHECK(cpu->ops->gather_images(cpu, 1, &gc->L, &aug, cx, cy, idx1, AB_F32, out.h, NULL) != 0,
                     "%s: accepted by the CPU backend", what);
            pair_free(&out);
        }
        gpu->ops->unmap_data(gpu, gx, (size_t)N * D);
        gpu->ops->unmap_data(gpu, gy, (size_t)N);
        cpu->ops->unmap_data(cpu, cx, (size_t)N * D);
        cpu->ops->unmap_data(cpu, cy, (size_t)N);
        free(data);
        free(labels);
    }
}

/* ---- errors are reported, not crashed on --------------------------------------------------- */

static void test_bad_arguments(void) {
    ab_conv_shape s = {.N = 1, .H = 4, .W = 4, .C = 2, .K = 2, .R = 3, .S = 3, .stride_h = 1, .stride_w = 1};
    if (ab_conv_shape_init(&s) != 0) die("bad-argument shape");
    s.P += 1; /* not what the shape makes */
    pair x = pair_img(1, 4, 4, 2, AB_F32, -1, 1), w = pair_img(2, 3, 3, 2, AB_F32, -1, 1),
         y = pair_img(1, 3, 2, 2, AB_F32, -1, 1);
    op_case(AB_OP_conv2d_forward, "fp32 an output size the shape does not make is refused");
    AB_CHECK(gpu->ops->conv2d_forward(gpu, &s, AB_F32, x.d, w.d, y.d) != 0, "conv2d_forward took a wrong output size");
    AB_CHECK(cpu->ops->conv2d_forward(cpu, &s, AB_F32, x.h, w.h, y.h) != 0,
             "the CPU backend's conv2d_forward took a wrong output size");
    pair g = pair_new(2, AB_F32, 1, 1), sm = pair_new(2, AB_F32, 0, 0);
    op_case(AB_OP_batchnorm_forward_train, "fp32 one row (M = 1) is refused");
    AB_CHECK(gpu->ops->batchnorm_forward_train(gpu, 1, 2, AB_F32, x.d, g.d, g.d, 1e-5f, 0.1f, NULL, NULL, sm.d, sm.d, 0,
                                               y.d) != 0,
             "batchnorm_forward_train took one row");
    AB_CHECK(cpu->ops->batchnorm_forward_train(cpu, 1, 2, AB_F32, x.h, g.h, g.h, 1e-5f, 0.1f, NULL, NULL, sm.h, sm.h, 0,
                                               y.h) != 0,
             "the CPU backend's batchnorm_forward_train took one row");
    pair_free(&x);
    pair_free(&w);
    pair_free(&y);
    pair_free(&g);
    pair_free(&sm);
}

void dev_layers_run(void) {
    test_conv();
    test_batchnorm();
    test_pool_add();
    test_gather_images();
    test_bad_arguments();
}
