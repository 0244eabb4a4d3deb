/* The convolutional-layer ops of core/backend.h on the CUDA backend, channels-last throughout:
 * activations x (N, H, W, C) -> y (N, P, Q, K), filters (K, R, S, C), batch norm over the rows of
 * (M, C), pooling over (N, H, W, C) windows, images assembled as (B, H, W, C).
 * Convolutions go to cuDNN's graph API: one execution plan per (direction, type, shape, pointer
 * alignment), chosen once by cuDNN's heuristics and cached; its workspace comes from the tracked
 * allocator. Batch norm, pooling, add and batch assembly are kernels of our own with the header's
 * exact semantics; their reductions split the data the same way on every run and GPU (a fixed
 * partition that depends only on the shape) and add in a fixed order: no float atomics, so the
 * results are the same from run to run. cuDNN's own batch norm and pooling are not used: their
 * legacy calls are deprecated (below), and the header's contract is narrower than theirs: the
 * running variance unbiased with PyTorch's momentum, statistics from fp32 sums, and max-pool
 * backward routing each dy to the first maximum of the window in row-major order, where cuDNN
 * documents no choice among tied positions. */

/* Any deprecated cuDNN declaration used in this file is an error (--Werror=all-warnings): the one
 * deliberate use (the handle attributes, see set_handle) is silenced where it stands. */
#define CUDNN_WARN_DEPRECATED 1

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cuda_runtime.h>
#include <cudnn.h>

#include "cuda_internal.h"

extern "C" {
#include "half.h"
}

/* Why the graph (backend) API and not cudnnConvolutionForward & co.: in the cuDNN 9 headers this
 * builds against, every legacy convolution call is marked CUDNN_DEPRECATED in cudnn_cnn.h: the
 * three convolutions, cudnnFind*AlgorithmEx, cudnnGet*Algorithm_v7, the workspace queries, the
 * convolution descriptor and cudnnSetConvolutionMathType; so are cudnnSetFilter4dDescriptor,
 * batch norm and pooling in cudnn_ops.h. The graph API is the supported path, gets the new
 * engines, and lets us say exactly which arithmetic we accept through each engine's numerical
 * notes (below) instead of the legacy math-type switch. It costs verbosity, not speed: the plan
 * is built once per shape and each call is one variant pack and cudnnBackendExecute.
 *
 * Which engines: the first, in the heuristics' order (mode A, then the fallback list), whose
 * notes carry none of
 *   - TENSOR_CORE when the data is fp32: that is TF32, 10-bit products. fp32 is the exact
 *     reference mode here. PyTorch differs: torch.backends.cudnn.allow_tf32 is True by default,
 *     so PyTorch's "fp32" convolutions run in TF32 unless that flag is cleared;
 *   - DOWN_CONVERT_INPUTS, REDUCED_PRECISION_REDUCTION: the contract is fp32 accumulation and one
 *     rounding of each stored result;
 *   - FFT, WINOGRAD*: transforms with their own rounding errors and NaN spreading across a tile;
 *   - NONDETERMINISTIC (split reductions with atomics), and RUNTIME_COMPILATION (seconds of NVRTC
 *     per shape at start-up): both accepted only when no engine without them exists.
 * The choice is the heuristics' (not timed): the same plan on every run, so the same bits. */

/* ---- error checking (CU_CHECK, LAUNCH_CHECK, CUDNN_CHECK: cuda_internal.h) ------------------- */

/* as CUDNN_CHECK, but for functions that clean up: sets rc and jumps to label */
#define CUDNN_GOTO(call, label)                                                                     \
    do {                                                                                            \
        const cudnnStatus_t s_ = (call);                                                            \
        if (s_ != CUDNN_STATUS_SUCCESS) {                                                           \
            char m_[256];                                                                           \
            cudnnGetLastErrorString(m_, sizeof m_);                                                 \
            rc = ab_errorf("%s failed at %s:%d: %s (%s)", #call, __FILE__, __LINE__,                \
                           cudnnGetErrorString(s_), m_);                                            \
            goto label;                                                                             \
        }                                                                                           \
    } while (0)

/* ---- state ---------------------------------------------------------------------------------- */

enum { CONV_FWD = 0, CONV_BWD_DATA = 1, CONV_BWD_FILTER = 2 };
enum { UID_X = 1, UID_W = 2, UID_Y = 3 }; /* x or dx, w or dw, y or dy */
/* ResNet-50 has about 25 distinct convolution shapes, three directions each, training and
 * evaluation batch sizes: 128 plans hold them all; a full table evicts round-robin. */
enum { CONV_PLANS = 128 };
enum { D_X, D_W, D_Y, D_CONV, D_OP, D_GRAPH, D_CFG, PLAN_DESCS };
/* an engine needing more workspace than this is passed over for the next one */
static const int64_t MAX_CONV_WORKSPACE = (int64_t)256 << 20;

typedef struct {
    int dir, t, N, H, W, C, K, R, S, sh, sw, ph, pw;
    uint32_t beta_bits; /* backward_filter's blending beta (0 or 1); 0 otherwise */
    int align[3];       /* bytes, at most 16, of the x, w, y pointers (cuDNN is told, engines rely on it) */
} conv_key;

typedef struct {
    int used;
    conv_key key;
    /* the plan's ingredients, kept alive as long as the plan */
    cudnnBackendDescriptor_t d[PLAN_DESCS];
    cudnnBackendDescriptor_t plan;
    int64_t ws; /* workspace bytes the plan needs */
} conv_plan;

struct ab_cuda_layers {
    conv_plan plans[CONV_PLANS];
    int next;
    void *ws; /* cuDNN workspace: the largest any cached plan needs, unless a grow failed (then
               * NULL, ws_bytes 0, regrown by conv_run as plans need) (tracked, workspace) */
    size_t ws_bytes;
    float *bn; /* batch-norm partial sums and per-channel coefficients (tracked, workspace) */
    size_t bn_bytes;
};

static void conv_plan_free(conv_plan *p) {
    if (!p->used) return;
    if (p->plan) cudnnBackendDestroyDescriptor(p->plan);
    for (int i = 0; i < PLAN_DESCS; i++)
        if (p->d[i]) cudnnBackendDestroyDescriptor(p->d[i]);
    memset(p, 0, sizeof *p);
}

static ab_cuda_layers *layers_of(ab_backend *be) {
    ab_cuda_layers **slot = ab_cuda_layers_slot(be);
    if (!*slot) {
        *slot = (ab_cuda_layers *)calloc(1, sizeof **slot);
        if (!*slot) ab_errorf("out of host memory for the CUDA layer state");
    }
    return *slot;
}

void ab_cuda_layers_free(ab_backend *be) {
    ab_cuda_layers **slot = ab_cuda_layers_slot(be);
    ab_cuda_layers *L = *slot;
    if (!L) return;
    for (int i = 0; i < CONV_PLANS; i++) conv_plan_free(&L->plans[i]);
    ab_release(be, AB_MEM_WORKSPACE, L->ws, L->ws_bytes);
    ab_release(be, AB_MEM_WORKSPACE, L->bn, L->bn_bytes);
    free(L);
    *slot = NULL;
}

/* device scratch that only grows (tracked, charged to workspace): allocated when a shape first
 * needs more, never per call; the stream is drained first since queued work may still use it.
 * The old buffer goes before the new one is asked for (the two need not fit at once), so on
 * failure (-1, ab_error) *p is NULL and *cap 0: never a size the buffer does not have. What was
 * sized to the old buffer (the cached convolution plans) must then not trust it: conv_run checks
 * each plan's workspace against *cap before every execution. A failed drain leaves both as they
 * were, still consistent. */
static int grow(ab_backend *be, void **p, size_t *cap, size_t bytes) {
    if (*cap >= bytes) return 0;
    if (*p) CU_CHECK(cudaStreamSynchronize(ab_cuda_stream(be)));
    ab_release(be, AB_MEM_WORKSPACE, *p, *cap);
    *p = NULL;
    *cap = 0;
    if (!(*p = ab_alloc(be, AB_MEM_WORKSPACE, bytes))) return -1; /* *p NULL, *cap 0 */
    *cap = bytes;
    return 0;
}

/* largest power of two (<= 16) dividing the address */
static int align_of(const void *p) {
    const uintptr_t a = (uintptr_t)p;
    int al = 16;
    while (al > 1 && (a % (uintptr_t)al) != 0) al >>= 1;
    return al;
}

/* ---- convolutions: building a plan ---------------------------------------------------------- */

static cudnnDataType_t dnn_type(ab_dtype t) {
    return t == AB_F16 ? CUDNN_DATA_HALF : t == AB_BF16 ? CUDNN_DATA_BFLOAT16 : CUDNN_DATA_FLOAT;
}

/* A 4-D tensor: dims in cuDNN's (N, C, H, W) order whatever the layout, strides channels-last
 * (NHWC). The filter (K, R, S, C) is the same with (N, C, H, W) = (K, C, R, S). */
static int tensor_desc(cudnnBackendDescriptor_t *d, int64_t uid, ab_dtype t, int64_t n, int64_t c, int64_t h,
                       int64_t w, int64_t align) {
    const int64_t dims[4] = {n, c, h, w};
    const int64_t strides[4] = {h * w * c, 1, w * c, c};
    const cudnnDataType_t dt = dnn_type(t);
    CUDNN_CHECK(cudnnBackendCreateDescriptor(CUDNN_BACKEND_TENSOR_DESCRIPTOR, d));
    CUDNN_CHECK(cudnnBackendSetAttribute(*d, CUDNN_ATTR_TENSOR_DATA_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &dt));
    CUDNN_CHECK(cudnnBackendSetAttribute(*d, CUDNN_ATTR_TENSOR_DIMENSIONS, CUDNN_TYPE_INT64, 4, dims));
    CUDNN_CHECK(cudnnBackendSetAttribute(*d, CUDNN_ATTR_TENSOR_STRIDES, CUDNN_TYPE_INT64, 4, strides));
    CUDNN_CHECK(cudnnBackendSetAttribute(*d, CUDNN_ATTR_TENSOR_UNIQUE_ID, CUDNN_TYPE_INT64, 1, &uid));
    CUDNN_CHECK(cudnnBackendSetAttribute(*d, CUDNN_ATTR_TENSOR_BYTE_ALIGNMENT, CUDNN_TYPE_INT64, 1, &align));
    CUDNN_CHECK(cudnnBackendFinalize(*d));
    return 0;
}

static int conv_desc(cudnnBackendDescriptor_t *d, const conv_key *k) {
    const cudnnDataType_t comp = CUDNN_DATA_FLOAT; /* fp32 accumulation for every storage type */
    const cudnnConvolutionMode_t mode = CUDNN_CROSS_CORRELATION;
    const int64_t nd = 2, dil[2] = {1, 1}, str[2] = {k->sh, k->sw}, pad[2] = {k->ph, k->pw};
    CUDNN_CHECK(cudnnBackendCreateDescriptor(CUDNN_BACKEND_CONVOLUTION_DESCRIPTOR, d));
    CUDNN_CHECK(cudnnBackendSetAttribute(*d, CUDNN_ATTR_CONVOLUTION_COMP_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &comp));
    CUDNN_CHECK(cudnnBackendSetAttribute(*d, CUDNN_ATTR_CONVOLUTION_CONV_MODE, CUDNN_TYPE_CONVOLUTION_MODE, 1, &mode));
    CUDNN_CHECK(cudnnBackendSetAttribute(*d, CUDNN_ATTR_CONVOLUTION_SPATIAL_DIMS, CUDNN_TYPE_INT64, 1, &nd));
    CUDNN_CHECK(cudnnBackendSetAttribute(*d, CUDNN_ATTR_CONVOLUTION_DILATIONS, CUDNN_TYPE_INT64, 2, dil));
    CUDNN_CHECK(cudnnBackendSetAttribute(*d, CUDNN_ATTR_CONVOLUTION_FILTER_STRIDES, CUDNN_TYPE_INT64, 2, str));
    /* symmetric padding: P = (H + 2 pad_h - R) / stride_h + 1, as ab_conv_shape_init says */
    CUDNN_CHECK(cudnnBackendSetAttribute(*d, CUDNN_ATTR_CONVOLUTION_PRE_PADDINGS, CUDNN_TYPE_INT64, 2, pad));
    CUDNN_CHECK(cudnnBackendSetAttribute(*d, CUDNN_ATTR_CONVOLUTION_POST_PADDINGS, CUDNN_TYPE_INT64, 2, pad));
    CUDNN_CHECK(cudnnBackendFinalize(*d));
    return 0;
}

/* the operation node: which tensor plays which part, per direction */
static int conv_op(cudnnBackendDescriptor_t *d, int dir, cudnnBackendDescriptor_t *t, float beta) {
    static const cudnnBackendDescriptorType_t type[3] = {CUDNN_BACKEND_OPERATION_CONVOLUTION_FORWARD_DESCRIPTOR,
                                                         CUDNN_BACKEND_OPERATION_CONVOLUTION_BACKWARD_DATA_DESCRIPTOR,
                                                         CUDNN_BACKEND_OPERATION_CONVOLUTION_BACKWARD_FILTER_DESCRIPTOR};
    /* attribute names: x (or dx), w (or dw), y (or dy), convolution, alpha, beta */
    static const cudnnBackendAttributeName_t attr[3][6] = {
        {CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_X, CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_W,
         CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_Y, CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_CONV_DESC,
         CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_ALPHA, CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_BETA},
        {CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_DX, CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_W,
         CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_DY, CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_CONV_DESC,
         CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_ALPHA, CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_BETA},
        {CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_X, CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_DW,
         CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_DY, CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_CONV_DESC,
         CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_ALPHA, CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_BETA}};
    const cudnnBackendAttributeName_t *a = attr[dir];
    /* alpha and beta as float: the compute type is fp32 (double only with double compute) */
    const float alpha = 1.0f;
    CUDNN_CHECK(cudnnBackendCreateDescriptor(type[dir], d));
    CUDNN_CHECK(cudnnBackendSetAttribute(*d, a[0], CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &t[D_X]));
    CUDNN_CHECK(cudnnBackendSetAttribute(*d, a[1], CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &t[D_W]));
    CUDNN_CHECK(cudnnBackendSetAttribute(*d, a[2], CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &t[D_Y]));
    CUDNN_CHECK(cudnnBackendSetAttribute(*d, a[3], CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &t[D_CONV]));
    CUDNN_CHECK(cudnnBackendSetAttribute(*d, a[4], CUDNN_TYPE_FLOAT, 1, &alpha));
    CUDNN_CHECK(cudnnBackendSetAttribute(*d, a[5], CUDNN_TYPE_FLOAT, 1, &beta));
    CUDNN_CHECK(cudnnBackendFinalize(*d));
    return 0;
}

/* The handle on the operation graph and on the execution plan: a required attribute in the cuDNN
 * 9.0 documentation, what tells the heuristics and the plan which device (and its properties) they
 * build for. The 9.19 headers mark both attributes deprecated (9.8 added a device-properties
 * descriptor that can stand in for it, for building plans without a device); deprecated is still
 * honoured within cuDNN 9, so it is set on every runtime rather than left out on the strength of
 * behaviour no header documents. The one deliberate use of a deprecated name in this file. */
static int set_handle(ab_backend *be, cudnnBackendDescriptor_t d, int graph) {
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
    const cudnnBackendAttributeName_t name = graph ? CUDNN_ATTR_OPERATIONGRAPH_HANDLE : CUDNN_ATTR_EXECUTION_PLAN_HANDLE;
#pragma GCC diagnostic pop
    cudnnHandle_t h = ab_cuda_dnn(be);
    if (!h) return -1;
    CUDNN_CHECK(cudnnBackendSetAttribute(d, name, CUDNN_TYPE_HANDLE, 1, &h));
    return 0;
}

static int op_graph(ab_backend *be, cudnnBackendDescriptor_t *d, cudnnBackendDescriptor_t op) {
    CUDNN_CHECK(cudnnBackendCreateDescriptor(CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR, d));
    CUDNN_CHECK(cudnnBackendSetAttribute(*d, CUDNN_ATTR_OPERATIONGRAPH_OPS, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &op));
    AB_TRY(set_handle(be, *d, 1));
    CUDNN_CHECK(cudnnBackendFinalize(*d));
    return 0;
}

enum { ENGINE_OK = 0, ENGINE_LAST_RESORT = 1, ENGINE_NEVER = 2 };

/* what the engine of an engine config promises about its arithmetic (see the top of the file) */
static int engine_verdict(cudnnBackendDescriptor_t cfg, ab_dtype t, int *verdict) {
    int rc = 0;
    cudnnBackendDescriptor_t eng = NULL;
    cudnnBackendNumericalNote_t num[32];
    cudnnBackendBehaviorNote_t beh[32];
    int64_t n = 0, nn = 0, nb = 0;
    *verdict = ENGINE_OK;
    CUDNN_CHECK(cudnnBackendCreateDescriptor(CUDNN_BACKEND_ENGINE_DESCRIPTOR, &eng));
    /* a descriptor-valued attribute is copied into descriptors the caller made */
    CUDNN_GOTO(cudnnBackendGetAttribute(cfg, CUDNN_ATTR_ENGINECFG_ENGINE, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &n, &eng),
               done);
    CUDNN_GOTO(cudnnBackendGetAttribute(eng, CUDNN_ATTR_ENGINE_NUMERICAL_NOTE, CUDNN_TYPE_NUMERICAL_NOTE, 32, &nn, num),
               done);
    CUDNN_GOTO(cudnnBackendGetAttribute(eng, CUDNN_ATTR_ENGINE_BEHAVIOR_NOTE, CUDNN_TYPE_BEHAVIOR_NOTE, 32, &nb, beh),
               done);
    for (int64_t i = 0; i < nn && i < 32; i++) {
        switch (num[i]) {
        case CUDNN_NUMERICAL_NOTE_TENSOR_CORE:
            if (t == AB_F32) *verdict = ENGINE_NEVER; /* TF32 */
            break;
        case CUDNN_NUMERICAL_NOTE_DOWN_CONVERT_INPUTS:
        case CUDNN_NUMERICAL_NOTE_REDUCED_PRECISION_REDUCTION:
        case CUDNN_NUMERICAL_NOTE_FFT:
        case CUDNN_NUMERICAL_NOTE_WINOGRAD:
        case CUDNN_NUMERICAL_NOTE_WINOGRAD_TILE_4x4:
        case CUDNN_NUMERICAL_NOTE_WINOGRAD_TILE_6x6:
        case CUDNN_NUMERICAL_NOTE_WINOGRAD_TILE_13x13: *verdict = ENGINE_NEVER; break;
        case CUDNN_NUMERICAL_NOTE_NONDETERMINISTIC:
            if (*verdict == ENGINE_OK) *verdict = ENGINE_LAST_RESORT;
            break;
        default: break;
        }
    }
    for (int64_t i = 0; i < nb && i < 32; i++)
        if (beh[i] == CUDNN_BEHAVIOR_NOTE_RUNTIME_COMPILATION && *verdict == ENGINE_OK) *verdict = ENGINE_LAST_RESORT;
done:
    cudnnBackendDestroyDescriptor(eng);
    return rc;
}

/* Asks the heuristics (mode) for engine configs and builds a plan from the first acceptable one
 * (last_resort: engines that are non-deterministic or compiled at run time allowed too).
 * 1 = found (p->plan, p->d[D_CFG], p->ws set), 0 = none, -1 = error. */
static int try_heuristics(ab_backend *be, conv_plan *p, cudnnBackendHeurMode_t mode, int last_resort, char *why,
                          size_t why_cap) {
    int rc = 0, found = 0;
    cudnnBackendDescriptor_t heur = NULL, *cfg = NULL;
    int64_t count = 0, got = 0;
    cudnnStatus_t s;
    CUDNN_CHECK(cudnnBackendCreateDescriptor(CUDNN_BACKEND_ENGINEHEUR_DESCRIPTOR, &heur));
    CUDNN_GOTO(cudnnBackendSetAttribute(heur, CUDNN_ATTR_ENGINEHEUR_OPERATION_GRAPH, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1,
                                        &p->d[D_GRAPH]),
               done);
    CUDNN_GOTO(cudnnBackendSetAttribute(heur, CUDNN_ATTR_ENGINEHEUR_MODE, CUDNN_TYPE_HEUR_MODE, 1, &mode), done);
    /* a mode may have nothing for this graph: that is an answer, not an error */
    if ((s = cudnnBackendFinalize(heur)) != CUDNN_STATUS_SUCCESS) {
        char m[200];
        cudnnGetLastErrorString(m, sizeof m);
        snprintf(why, why_cap, "heuristics mode %d: cudnnBackendFinalize: %s (%s)", (int)mode, cudnnGetErrorString(s), m);
        goto done;
    }
    CUDNN_GOTO(cudnnBackendGetAttribute(heur, CUDNN_ATTR_ENGINEHEUR_RESULTS, CUDNN_TYPE_BACKEND_DESCRIPTOR, 0, &count,
                                        NULL),
               done);
    if (count <= 0) goto done;
    if (!(cfg = (cudnnBackendDescriptor_t *)calloc((size_t)count, sizeof *cfg))) {
        rc = ab_errorf("out of host memory for %lld engine configs", (long long)count);
        goto done;
    }
    for (int64_t i = 0; i < count; i++)
        CUDNN_GOTO(cudnnBackendCreateDescriptor(CUDNN_BACKEND_ENGINECFG_DESCRIPTOR, &cfg[i]), done);
    CUDNN_GOTO(cudnnBackendGetAttribute(heur, CUDNN_ATTR_ENGINEHEUR_RESULTS, CUDNN_TYPE_BACKEND_DESCRIPTOR, count, &got,
                                        cfg),
               done);
    for (int64_t i = 0; i < got && i < count && !found; i++) {
        int verdict = ENGINE_NEVER;
        if (engine_verdict(cfg[i], (ab_dtype)p->key.t, &verdict) != 0) {
            rc = -1;
            goto done;
        }
        if (verdict == ENGINE_NEVER || (verdict == ENGINE_LAST_RESORT && !last_resort)) continue;
        cudnnBackendDescriptor_t plan = NULL;
        int64_t ws = 0, n = 0;
        CUDNN_GOTO(cudnnBackendCreateDescriptor(CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR, &plan), done);
        s = cudnnBackendSetAttribute(plan, CUDNN_ATTR_EXECUTION_PLAN_ENGINE_CONFIG, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1,
                                     &cfg[i]);
        if (s == CUDNN_STATUS_SUCCESS && set_handle(be, plan, 0) != 0) {
            cudnnBackendDestroyDescriptor(plan);
            rc = -1; /* ab_error says why */
            goto done;
        }
        /* an engine may turn the shape down only here (alignment, layout): the next one then */
        if (s == CUDNN_STATUS_SUCCESS) s = cudnnBackendFinalize(plan);
        if (s == CUDNN_STATUS_SUCCESS)
            s = cudnnBackendGetAttribute(plan, CUDNN_ATTR_EXECUTION_PLAN_WORKSPACE_SIZE, CUDNN_TYPE_INT64, 1, &n, &ws);
        if (s != CUDNN_STATUS_SUCCESS || ws > MAX_CONV_WORKSPACE || ws < 0) {
            char m[200];
            cudnnGetLastErrorString(m, sizeof m);
            if (s != CUDNN_STATUS_SUCCESS)
                snprintf(why, why_cap, "engine config %lld of mode %d: %s (%s)", (long long)i, (int)mode,
                         cudnnGetErrorString(s), m);
            else
                snprintf(why, why_cap, "engine config %lld of mode %d wants %lld bytes of workspace", (long long)i,
                         (int)mode, (long long)ws);
            cudnnBackendDestroyDescriptor(plan);
            continue;
        }
        p->plan = plan;
        p->d[D_CFG] = cfg[i]; /* kept with the plan */
        cfg[i] = NULL;
        p->ws = ws;
        found = 1;
    }
done:
    if (cfg)
        for (int64_t i = 0; i < count; i++)
            if (cfg[i]) cudnnBackendDestroyDescriptor(cfg[i]);
    free(cfg);
    cudnnBackendDestroyDescriptor(heur);
    return rc != 0 ? -1 : found;
}

static const char *const DIR_NAME[3] = {"forward", "backward_data", "backward_filter"};

static int conv_plan_build(ab_backend *be, conv_plan *p) {
    const conv_key *k = &p->key;
    const ab_dtype t = (ab_dtype)k->t;
    const int P = (k->H + 2 * k->ph - k->R) / k->sh + 1, Q = (k->W + 2 * k->pw - k->S) / k->sw + 1;
    float beta;
    memcpy(&beta, &k->beta_bits, sizeof beta);
    AB_TRY(tensor_desc(&p->d[D_X], UID_X, t, k->N, k->C, k->H, k->W, k->align[0]));
    AB_TRY(tensor_desc(&p->d[D_W], UID_W, t, k->K, k->C, k->R, k->S, k->align[1]));
    AB_TRY(tensor_desc(&p->d[D_Y], UID_Y, t, k->N, k->K, P, Q, k->align[2]));
    AB_TRY(conv_desc(&p->d[D_CONV], k));
    AB_TRY(conv_op(&p->d[D_OP], k->dir, p->d, beta));
    AB_TRY(op_graph(be, &p->d[D_GRAPH], p->d[D_OP]));
    char why[400] = "the heuristics returned no engine config";
    static const cudnnBackendHeurMode_t modes[2] = {CUDNN_HEUR_MODE_A, CUDNN_HEUR_MODE_FALLBACK};
    for (int last_resort = 0; last_resort < 2; last_resort++)
        for (int m = 0; m < 2; m++) {
            const int rc = try_heuristics(be, p, modes[m], last_resort, why, sizeof why);
            if (rc < 0) return -1;
            if (rc == 1) return 0;
        }
    return ab_errorf("cuDNN has no acceptable engine for conv2d %s %s N=%d H=%d W=%d C=%d K=%d R=%d S=%d stride %dx%d "
                     "pad %dx%d (fp32 accumulation%s; no FFT/Winograd); last: %s",
                     DIR_NAME[k->dir], ab_dtype_name(t), k->N, k->H, k->W, k->C, k->K, k->R, k->S, k->sh, k->sw, k->ph,
                     k->pw, t == AB_F32 ? ", no TF32" : "", why);
}

/* the cached plan for key, built (and the workspace grown) on first sight */
static int conv_plan_get(ab_backend *be, const conv_key *key, conv_plan **out) {
    ab_cuda_layers *L = layers_of(be);
    if (!L) return -1;
    for (int i = 0; i < CONV_PLANS; i++)
        if (L->plans[i].used && memcmp(&L->plans[i].key, key, sizeof *key) == 0) {
            *out = &L->plans[i];
            return 0;
        }
    conv_plan *p = &L->plans[L->next];
    L->next = (L->next + 1) % CONV_PLANS;
    if (p->used) CU_CHECK(cudaStreamSynchronize(ab_cuda_stream(be))); /* rare: a full table */
    conv_plan_free(p);
    p->used = 1; /* from here conv_plan_free undoes what was made */
    p->key = *key;
    if (conv_plan_build(be, p) != 0 || grow(be, &L->ws, &L->ws_bytes, (size_t)p->ws) != 0) {
        char msg[1024];
        snprintf(msg, sizeof msg, "%s", ab_error());
        conv_plan_free(p);
        return ab_errorf("%s", msg);
    }
    *out = p;
    return 0;
}

/* ---- convolutions: running one ---------------------------------------------------------------- */

static int conv_run(ab_backend *be, int dir, const ab_conv_shape *s, ab_dtype t, float beta, const void *x,
                    const void *w, const void *y) {
    if (!dtype_ok(t)) return ab_errorf("conv2d %s: bad element type %d", DIR_NAME[dir], (int)t);
    ab_conv_shape chk = *s;
    if (ab_conv_shape_init(&chk) != 0) return -1;
    if (chk.P != s->P || chk.Q != s->Q)
        return ab_errorf("conv2d %s: output %dx%d given, the shape makes %dx%d (ab_conv_shape_init not called?)",
                         DIR_NAME[dir], s->P, s->Q, chk.P, chk.Q);
    if (!x || !w || !y) return ab_errorf("conv2d %s: NULL tensor", DIR_NAME[dir]);
    const void *ptr[3] = {x, w, y};
    conv_key key;
    memset(&key, 0, sizeof key);
    for (int i = 0; i < 3; i++) {
        key.align[i] = align_of(ptr[i]);
        if ((size_t)key.align[i] < ab_dtype_size(t))
            return ab_errorf("conv2d %s: tensor %d at %p is not aligned to its %s elements", DIR_NAME[dir], i, ptr[i],
                             ab_dtype_name(t));
    }
    key.dir = dir, key.t = (int)t, key.N = s->N, key.H = s->H, key.W = s->W, key.C = s->C, key.K = s->K;
    key.R = s->R, key.S = s->S, key.sh = s->stride_h, key.sw = s->stride_w, key.ph = s->pad_h, key.pw = s->pad_w;
    if (dir == CONV_BWD_FILTER) memcpy(&key.beta_bits, &beta, sizeof beta);
    AB_TRY(use_device(be));
    conv_plan *p = NULL;
    AB_TRY(conv_plan_get(be, &key, &p));
    ab_cuda_layers *L = layers_of(be);
    /* The plan was cached beside a workspace of at least p->ws bytes, but a later grow for another
     * plan may have failed after releasing it (grow leaves NULL and 0 then): grow again, or stop
     * here rather than hand cuDNN a workspace smaller than the plan was built for. */
    if ((size_t)p->ws > L->ws_bytes) {
        const size_t had = L->ws_bytes;
        if (grow(be, &L->ws, &L->ws_bytes, (size_t)p->ws) != 0) {
            char why[512];
            snprintf(why, sizeof why, "%s", ab_error());
            return ab_errorf("conv2d %s %s N=%d H=%d W=%d C=%d K=%d R=%d S=%d stride %dx%d pad %dx%d: the cached plan "
                             "needs %lld bytes of cuDNN workspace, the buffer has %zu and growing it failed: %s",
                             DIR_NAME[dir], ab_dtype_name(t), s->N, s->H, s->W, s->C, s->K, s->R, s->S, s->stride_h,
                             s->stride_w, s->pad_h, s->pad_w, (long long)p->ws, had, why);
        }
    }
    int rc = 0;
    cudnnBackendDescriptor_t vp = NULL;
    const int64_t uids[3] = {UID_X, UID_W, UID_Y};
    void *data[3] = {(void *)x, (void *)w, (void *)y};
    void *ws = L->ws;
    CUDNN_CHECK(cudnnBackendCreateDescriptor(CUDNN_BACKEND_VARIANT_PACK_DESCRIPTOR, &vp));
    CUDNN_GOTO(cudnnBackendSetAttribute(vp, CUDNN_ATTR_VARIANT_PACK_UNIQUE_IDS, CUDNN_TYPE_INT64, 3, uids), done);
    CUDNN_GOTO(cudnnBackendSetAttribute(vp, CUDNN_ATTR_VARIANT_PACK_DATA_POINTERS, CUDNN_TYPE_VOID_PTR, 3, data), done);
    CUDNN_GOTO(cudnnBackendSetAttribute(vp, CUDNN_ATTR_VARIANT_PACK_WORKSPACE, CUDNN_TYPE_VOID_PTR, 1, &ws), done);
    CUDNN_GOTO(cudnnBackendFinalize(vp), done);
    CUDNN_GOTO(cudnnBackendExecute(ab_cuda_dnn(be), p->plan, vp), done);
done:
    cudnnBackendDestroyDescriptor(vp);
    return rc;
}

int ab_cuda_conv2d_forward(ab_backend *be, const ab_conv_shape *s, ab_dtype t, const void *x, const void *w, void *y) {
    return conv_run(be, CONV_FWD, s, t, 0.0f, x, w, y);
}

int ab_cuda_conv2d_backward_data(ab_backend *be, const ab_conv_shape *s, ab_dtype t, const void *dy, const void *w,
                                 void *dx) {
    return conv_run(be, CONV_BWD_DATA, s, t, 0.0f, dx, w, dy);
}

int ab_cuda_conv2d_backward_filter(ab_backend *be, const ab_conv_shape *s, ab_dtype t, const void *x, const void *dy,
                                   float beta, void *dw) {
    if (beta != 0.0f && beta != 1.0f) return ab_errorf("conv2d backward_filter: beta %g (0 or 1)", (double)beta);
    return conv_run(be, CONV_BWD_FILTER, s, t, beta, x, dw, dy);
}

/* the filter gradient into ws (t, beta 0), then folded into the fp32 gradient */
int ab_cuda_conv2d_backward_filter_fold(ab_backend *be, const ab_conv_shape *s, ab_dtype t, const void *x,
                                        const void *dy, void *ws, float *dw, int accumulate, int32_t *found_inf) {
    AB_TRY(ab_cuda_conv2d_backward_filter(be, s, t, x, dy, 0.0f, ws));
    return ab_cuda_accumulate(be, (size_t)s->K * s->R * s->S * s->C, t, ws, dw, accumulate, found_inf);
}

/* ---- batch normalisation -------------------------------------------------------------------- */

/* Per-channel reductions over the rows of (M, C): a block covers 32 channels (threadIdx.x, so a
 * warp reads 32 neighbouring elements of a row) and one chunk of rows (blockIdx.y), its 8 row
 * lanes (threadIdx.y) striding through the chunk. Each thread keeps fp32 sums, the 8 lanes are
 * combined in lane order in shared memory, and one partial per (chunk, channel) is written; a
 * second kernel combines the chunks in chunk order (in double: C threads, a few hundred terms
 * each). The chunk count depends only on M and C, so every run adds the same numbers in the
 * same order. */
enum { BN_TX = 32, BN_TY = 8, BN_MIN_ROWS_PER_THREAD = 16, BN_TARGET_BLOCKS = 1024 };

typedef struct {
    int G;   /* chunks */
    int rpc; /* rows per chunk (the last may have fewer) */
} bn_split;

static bn_split bn_split_of(int M, int C) {
    const int ctiles = (C + BN_TX - 1) / BN_TX;
    long g = BN_TARGET_BLOCKS / ctiles;
    const long by_rows = ((long)M + BN_TY * BN_MIN_ROWS_PER_THREAD - 1) / (BN_TY * BN_MIN_ROWS_PER_THREAD);
    if (g > by_rows) g = by_rows;
    if (g < 1) g = 1;
    bn_split sp;
    sp.rpc = (int)(((long)M + g - 1) / g);
    sp.G = (int)(((long)M + sp.rpc - 1) / sp.rpc); /* no empty chunk */
    return sp;
}

/* Mean and sum of squared deviations (M2) of two disjoint sets, combined (Chan et al.). */
static __device__ __forceinline__ void chan_merge(float *ma, float *m2a, int *na, float mb, float m2b, int nb) {
    if (nb == 0) return;
    if (*na == 0) {
        *ma = mb, *m2a = m2b, *na = nb;
        return;
    }
    const int n = *na + nb;
    const float d = mb - *ma, fb = (float)nb / (float)n;
    *ma += d * fb;
    *m2a += m2b + d * d * ((float)*na * fb);
    *na = n;
}

/* part[g * C + c] = (mean, M2) of channel c over chunk g. Each thread sums deviations from the
 * first value it reads (a shift inside the data, so mean >> spread does not cancel away the
 * variance), then the lanes are merged. A NaN anywhere makes the channel's statistics NaN. */
__global__ void k_bn_stats(int M, int C, int rpc, ab_dtype t, const void *x, float2 *part) {
    __shared__ float s_mean[BN_TY][BN_TX], s_m2[BN_TY][BN_TX];
    __shared__ int s_n[BN_TY][BN_TX];
    const int tx = threadIdx.x, ty = threadIdx.y, c = blockIdx.x * BN_TX + tx, g = blockIdx.y;
    const int r0 = g * rpc, r1 = (int)min((long long)M, (long long)r0 + rpc);
    float k = 0.0f, s1 = 0.0f, s2 = 0.0f;
    int n = 0;
    if (c < C)
        for (int r = r0 + ty; r < r1; r += BN_TY) {
            const float v = ab_load(x, (size_t)r * (size_t)C + (size_t)c, t);
            if (n == 0) k = v;
            const float d = v - k;
            s1 += d;
            s2 += d * d;
            n++;
        }
    s_mean[ty][tx] = n ? k + s1 / (float)n : 0.0f;
    s_m2[ty][tx] = n ? s2 - s1 * (s1 / (float)n) : 0.0f;
    s_n[ty][tx] = n;
    __syncthreads();
    if (ty != 0 || c >= C) return;
    float mean = s_mean[0][tx], m2 = s_m2[0][tx];
    int na = s_n[0][tx];
    for (int j = 1; j < BN_TY; j++) chan_merge(&mean, &m2, &na, s_mean[j][tx], s_m2[j][tx], s_n[j][tx]);
    part[(size_t)g * (size_t)C + (size_t)c] = make_float2(mean, m2);
}

/* per channel: the chunks merged in order; save_mean/save_invstd and the running statistics */
__global__ void k_bn_finalize(int M, int C, int G, int rpc, const float2 *part, float eps, float momentum,
                              float *running_mean, float *running_var, float *save_mean, float *save_invstd) {
    const int c = blockIdx.x * blockDim.x + threadIdx.x;
    if (c >= C) return;
    double mean = 0.0, m2 = 0.0, na = 0.0;
    for (int g = 0; g < G; g++) {
        const double nb = (double)(min((long long)M, (long long)(g + 1) * rpc) - (long long)g * rpc);
        const float2 pg = part[(size_t)g * (size_t)C + (size_t)c];
        const double n = na + nb, d = (double)pg.x - mean;
        mean += d * (nb / n);
        m2 += (double)pg.y + d * d * (na * nb / n);
        na = n;
    }
    double var = m2 / (double)M; /* biased: what normalises */
    if (var < 0.0) var = 0.0;    /* rounding; NaN stays NaN */
    save_mean[c] = (float)mean;
    save_invstd[c] = (float)(1.0 / sqrt(var + (double)eps));
    const double mom = (double)momentum;
    if (running_mean) running_mean[c] = (float)((1.0 - mom) * (double)running_mean[c] + mom * mean);
    if (running_var) /* unbiased, as PyTorch keeps it */
        running_var[c] = (float)((1.0 - mom) * (double)running_var[c] + mom * var * ((double)M / (double)(M - 1)));
}

/* the CPU's relu_forward rule on an fp32 value: below 0 and -0 become +0, NaN stays */
static __device__ __forceinline__ float relu_value(float v) { return (v > 0.0f || v != v) ? v : 0.0f; }

/* y = (x - mean) * invstd * gamma + beta (then the fused ReLU), rounded once; y may alias x */
__global__ void k_bn_apply(size_t n, int C, ab_dtype t, const void *x, const float *mean, const float *invstd,
                           const float *gamma, const float *beta, int relu, void *y) {
    GRID_STRIDE(i, n) {
        const int c = (int)(i % (size_t)C);
        const float v = (ab_load(x, i, t) - mean[c]) * invstd[c] * gamma[c] + beta[c];
        ab_store(y, i, t, relu ? relu_value(v) : v);
    }
}

/* evaluation: invstd from the running variance, as the training finalize computes it */
__global__ void k_bn_eval_invstd(int C, const float *running_var, float eps, float *invstd) {
    const int c = blockIdx.x * blockDim.x + threadIdx.x;
    if (c < C) invstd[c] = (float)(1.0 / sqrt((double)running_var[c] + (double)eps));
}

/* part[g * C + c] = (sum dy, sum dy * xhat) of channel c over chunk g */
__global__ void k_bn_bwd_stats(int M, int C, int rpc, ab_dtype t, const void *x, const void *dy, const float *mean,
                               const float *invstd, float2 *part) {
    __shared__ float s_a[BN_TY][BN_TX], s_b[BN_TY][BN_TX];
    const int tx = threadIdx.x, ty = threadIdx.y, c = blockIdx.x * BN_TX + tx, g = blockIdx.y;
    const int r0 = g * rpc, r1 = (int)min((long long)M, (long long)r0 + rpc);
    float a = 0.0f, b = 0.0f;
    if (c < C) {
        const float mu = mean[c], is = invstd[c];
        for (int r = r0 + ty; r < r1; r += BN_TY) {
            const size_t i = (size_t)r * (size_t)C + (size_t)c;
            const float gy = ab_load(dy, i, t);
            a += gy;
            b += gy * ((ab_load(x, i, t) - mu) * is);
        }
    }
    s_a[ty][tx] = a;
    s_b[ty][tx] = b;
    __syncthreads();
    if (ty != 0 || c >= C) return;
    for (int j = 1; j < BN_TY; j++) {
        a += s_a[j][tx];
        b += s_b[j][tx];
    }
    part[(size_t)g * (size_t)C + (size_t)c] = make_float2(a, b);
}

/* per channel: dbeta, dgamma (accumulated when acc != 0) and coef = (mean dy, mean dy * xhat) */
__global__ void k_bn_bwd_finalize(int M, int C, int G, const float2 *part, float acc, float *dgamma, float *dbeta,
                                  float *coef) {
    const int c = blockIdx.x * blockDim.x + threadIdx.x;
    if (c >= C) return;
    double a = 0.0, b = 0.0;
    for (int g = 0; g < G; g++) {
        const float2 pg = part[(size_t)g * (size_t)C + (size_t)c];
        a += (double)pg.x;
        b += (double)pg.y;
    }
    /* acc = 0 overwrites (whatever was there, NaN included); 1 adds in fp32 */
    if (dbeta) dbeta[c] = acc != 0.0f ? acc * dbeta[c] + (float)a : (float)a;
    if (dgamma) dgamma[c] = acc != 0.0f ? acc * dgamma[c] + (float)b : (float)b;
    coef[c] = (float)(a / (double)M);
    coef[C + c] = (float)(b / (double)M);
}

/* dx = gamma * invstd * (dy - mean(dy) - xhat * mean(dy * xhat)); dx may alias dy */
__global__ void k_bn_bwd_dx(size_t n, int C, ab_dtype t, const void *x, const void *dy, const float *gamma,
                            const float *mean, const float *invstd, const float *coef, void *dx) {
    GRID_STRIDE(i, n) {
        const int c = (int)(i % (size_t)C);
        const float xhat = (ab_load(x, i, t) - mean[c]) * invstd[c];
        const float gy = ab_load(dy, i, t);
        ab_store(dx, i, t, gamma[c] * invstd[c] * (gy - coef[c] - xhat * coef[C + c]));
    }
}

static int bn_args(const char *what, int M, int C, ab_dtype t, const void *x, const void *y) {
    if (M < 1 || C < 1) return ab_errorf("%s: bad shape M=%d C=%d", what, M, C);
    if (!dtype_ok(t)) return ab_errorf("%s: bad element type %d", what, (int)t);
    if (!x || !y) return ab_errorf("%s: NULL tensor", what);
    return 0;
}

/* scratch for one batch-norm call: the partials (2 G C floats) then 4 C floats of per-channel
 * values */
static int bn_scratch(ab_backend *be, const bn_split *sp, int C, float2 **part, float **chan) {
    ab_cuda_layers *L = layers_of(be);
    if (!L) return -1;
    const size_t nf = 2 * (size_t)sp->G * (size_t)C + 4 * (size_t)C;
    AB_TRY(grow(be, (void **)&L->bn, &L->bn_bytes, nf * sizeof(float)));
    *part = (float2 *)L->bn;
    *chan = L->bn + 2 * (size_t)sp->G * (size_t)C;
    return 0;
}

int ab_cuda_batchnorm_forward_train(ab_backend *be, int M, int C, ab_dtype t, const void *x, const float *gamma,
                                    const float *beta, float eps, float momentum, float *running_mean,
                                    float *running_var, float *save_mean, float *save_invstd, int relu, void *y) {
    AB_TRY(bn_args("batchnorm_forward_train", M, C, t, x, y));
    if (M < 2) /* the unbiased running variance needs two; PyTorch refuses one value per channel too */
        return ab_errorf("batchnorm_forward_train: %d row(s): training needs at least 2 values per channel", M);
    if (!gamma || !beta) return ab_errorf("batchnorm_forward_train: NULL gamma or beta");
    AB_TRY(use_device(be));
    const bn_split sp = bn_split_of(M, C);
    float2 *part;
    float *chan;
    AB_TRY(bn_scratch(be, &sp, C, &part, &chan));
    float *mean = save_mean ? save_mean : chan, *invstd = save_invstd ? save_invstd : chan + C;
    cudaStream_t s = ab_cuda_stream(be);
    const dim3 block(BN_TX, BN_TY), grid((unsigned)((C + BN_TX - 1) / BN_TX), (unsigned)sp.G);
    k_bn_stats<<<grid, block, 0, s>>>(M, C, sp.rpc, t, x, part);
    LAUNCH_CHECK("batchnorm statistics");
    k_bn_finalize<<<(unsigned)((C + THREADS - 1) / THREADS), THREADS, 0, s>>>(M, C, sp.G, sp.rpc, part, eps, momentum,
                                                                              running_mean, running_var, mean, invstd);
    LAUNCH_CHECK("batchnorm finalize");
    const size_t n = (size_t)M * (size_t)C;
    k_bn_apply<<<blocks_for(n), THREADS, 0, s>>>(n, C, t, x, mean, invstd, gamma, beta, relu, y);
    LAUNCH_CHECK("batchnorm apply");
    return 0;
}

int ab_cuda_batchnorm_forward_eval(ab_backend *be, int M, int C, ab_dtype t, const void *x, const float *gamma,
                                   const float *beta, const float *running_mean, const float *running_var, float eps,
                                   int relu, void *y) {
    AB_TRY(bn_args("batchnorm_forward_eval", M, C, t, x, y));
    if (!gamma || !beta || !running_mean || !running_var)
        return ab_errorf("batchnorm_forward_eval: NULL gamma, beta or running statistics");
    AB_TRY(use_device(be));
    const bn_split sp = {1, M}; /* no partials: only the per-channel values */
    float2 *part;
    float *chan;
    AB_TRY(bn_scratch(be, &sp, C, &part, &chan));
    cudaStream_t s = ab_cuda_stream(be);
    k_bn_eval_invstd<<<(unsigned)((C + THREADS - 1) / THREADS), THREADS, 0, s>>>(C, running_var, eps, chan);
    LAUNCH_CHECK("batchnorm eval invstd");
    const size_t n = (size_t)M * (size_t)C;
    k_bn_apply<<<blocks_for(n), THREADS, 0, s>>>(n, C, t, x, running_mean, chan, gamma, beta, relu, y);
    LAUNCH_CHECK("batchnorm eval apply");
    return 0;
}

int ab_cuda_batchnorm_backward(ab_backend *be, int M, int C, ab_dtype t, const void *x, const void *dy,
                               const float *gamma, const float *save_mean, const float *save_invstd, float acc,
                               float *dgamma, float *dbeta, void *dx) {
    AB_TRY(bn_args("batchnorm_backward", M, C, t, x, dy));
    if (!dx || !gamma || !save_mean || !save_invstd)
        return ab_errorf("batchnorm_backward: NULL dx, gamma or saved statistics");
    AB_TRY(use_device(be));
    const bn_split sp = bn_split_of(M, C);
    float2 *part;
    float *chan;
    AB_TRY(bn_scratch(be, &sp, C, &part, &chan));
    cudaStream_t s = ab_cuda_stream(be);
    const dim3 block(BN_TX, BN_TY), grid((unsigned)((C + BN_TX - 1) / BN_TX), (unsigned)sp.G);
    k_bn_bwd_stats<<<grid, block, 0, s>>>(M, C, sp.rpc, t, x, dy, save_mean, save_invstd, part);
    LAUNCH_CHECK("batchnorm backward sums");
    k_bn_bwd_finalize<<<(unsigned)((C + THREADS - 1) / THREADS), THREADS, 0, s>>>(M, C, sp.G, part, acc, dgamma, dbeta,
                                                                                  chan);
    LAUNCH_CHECK("batchnorm backward finalize");
    const size_t n = (size_t)M * (size_t)C;
    k_bn_bwd_dx<<<blocks_for(n), THREADS, 0, s>>>(n, C, t, x, dy, gamma, save_mean, save_invstd, chan, dx);
    LAUNCH_CHECK("batchnorm backward dx");
    return 0;
}

/* ---- pooling and add ------------------------------------------------------------------------ */

/* one thread per output (n, p, q, c), channels fastest; the window scanned row-major, padding
 * skipped; NaN wins and stays */
__global__ void k_maxpool(ab_pool_shape s, ab_dtype t, const void *x, void *y) {
    const size_t n = (size_t)s.N * s.P * s.Q * s.C;
    GRID_STRIDE(i, n) {
        const int c = (int)(i % (size_t)s.C);
        size_t r = i / (size_t)s.C;
        const int q = (int)(r % (size_t)s.Q);
        r /= (size_t)s.Q;
        const int p = (int)(r % (size_t)s.P), b = (int)(r / (size_t)s.P);
        const int h0 = p * s.stride_h - s.pad_h, w0 = q * s.stride_w - s.pad_w;
        float m = -INFINITY;
        for (int dr = 0; dr < s.R; dr++) {
            const int h = h0 + dr;
            if (h < 0 || h >= s.H) continue;
            for (int ds = 0; ds < s.S; ds++) {
                const int w = w0 + ds;
                if (w < 0 || w >= s.W) continue;
                const float v = ab_load(x, (((size_t)b * s.H + h) * s.W + w) * s.C + c, t);
                if (v > m || (v != v && m == m)) m = v;
            }
        }
        ab_store(y, i, t, m); /* a value of x: exact */
    }
}

static __device__ __forceinline__ int same_value(float a, float b) { return a == b || (a != a && b != b); }

/* Backward as a gather, one thread per input element (n, h, w, c): it adds, in (p, q) order, the
 * dy of every window whose routed position it is, i.e. the first position of the window in
 * row-major order whose x equals y (a NaN window routes to its first NaN); fp32 sum, one
 * rounding. No atomics, so overlapping windows (3x3 stride 2) add in a fixed order. */
__global__ void k_maxpool_bwd(ab_pool_shape s, ab_dtype t, const void *x, const void *y, const void *dy, void *dx) {
    const size_t n = (size_t)s.N * s.H * s.W * s.C;
    GRID_STRIDE(i, n) {
        const int c = (int)(i % (size_t)s.C);
        size_t r = i / (size_t)s.C;
        const int w = (int)(r % (size_t)s.W);
        r /= (size_t)s.W;
        const int h = (int)(r % (size_t)s.H), b = (int)(r / (size_t)s.H);
        const float xv = ab_load(x, i, t);
        /* windows holding row h: p * stride_h - pad_h <= h <= p * stride_h - pad_h + R - 1 */
        const int hp = h + s.pad_h, wp = w + s.pad_w;
        const int p0 = hp - s.R + 1 <= 0 ? 0 : (hp - s.R + 1 + s.stride_h - 1) / s.stride_h;
        const int p1 = min(s.P - 1, hp / s.stride_h);
        const int q0 = wp - s.S + 1 <= 0 ? 0 : (wp - s.S + 1 + s.stride_w - 1) / s.stride_w;
        const int q1 = min(s.Q - 1, wp / s.stride_w);
        float acc = 0.0f;
        for (int p = p0; p <= p1; p++)
            for (int q = q0; q <= q1; q++) {
                const size_t o = (((size_t)b * s.P + p) * s.Q + q) * s.C + c;
                const float yv = ab_load(y, o, t);
                if (!same_value(xv, yv)) continue; /* the common case: not this window's max */
                /* is an earlier position of the window equal to y too? */
                const int h0 = p * s.stride_h - s.pad_h, w0 = q * s.stride_w - s.pad_w;
                int first = 1;
                for (int hh = h0 > 0 ? h0 : 0; hh <= h && first; hh++)
                    for (int ww = w0 > 0 ? w0 : 0; ww < min(w0 + s.S, s.W); ww++) {
                        if (hh == h && ww >= w) break;
                        if (same_value(ab_load(x, (((size_t)b * s.H + hh) * s.W + ww) * s.C + c, t), yv)) {
                            first = 0;
                            break;
                        }
                    }
                if (first) acc += ab_load(dy, o, t);
            }
        ab_store(dx, i, t, acc);
    }
}

/* y (N, C) = sum over HW rows (in order, fp32) / HW; one thread per (n, c) */
__global__ void k_avgpool(int N, int HW, int C, ab_dtype t, const void *x, void *y) {
    const size_t n = (size_t)N * (size_t)C;
    GRID_STRIDE(i, n) {
        const size_t b = i / (size_t)C, c = i % (size_t)C;
        float acc = 0.0f;
        for (int k = 0; k < HW; k++) acc += ab_load(x, (b * (size_t)HW + (size_t)k) * (size_t)C + c, t);
        ab_store(y, i, t, acc / (float)HW);
    }
}

/* dx (N, HW, C) = dy (N, C) / HW */
__global__ void k_avgpool_bwd(int N, int HW, int C, ab_dtype t, const void *dy, void *dx) {
    const size_t n = (size_t)N * (size_t)HW * (size_t)C;
    GRID_STRIDE(i, n) {
        const size_t c = i % (size_t)C, b = i / ((size_t)HW * (size_t)C);
        ab_store(dx, i, t, ab_load(dy, b * (size_t)C + c, t) / (float)HW);
    }
}

__global__ void k_add(size_t n, ab_dtype t, const void *a, const void *b, int relu, void *y) {
    GRID_STRIDE(i, n) {
        const float v = ab_load(a, i, t) + ab_load(b, i, t);
        ab_store(y, i, t, relu ? relu_value(v) : v);
    }
}

static int pool_args(const char *what, const ab_pool_shape *s, ab_dtype t) {
    ab_pool_shape chk = *s;
    if (ab_pool_shape_init(&chk) != 0) return -1;
    if (chk.P != s->P || chk.Q != s->Q)
        return ab_errorf("%s: output %dx%d given, the shape makes %dx%d (ab_pool_shape_init not called?)", what, s->P,
                         s->Q, chk.P, chk.Q);
    if (!dtype_ok(t)) return ab_errorf("%s: bad element type %d", what, (int)t);
    return 0;
}

int ab_cuda_maxpool_forward(ab_backend *be, const ab_pool_shape *s, ab_dtype t, const void *x, void *y) {
    AB_TRY(pool_args("maxpool_forward", s, t));
    AB_TRY(use_device(be));
    const size_t n = (size_t)s->N * s->P * s->Q * s->C;
    k_maxpool<<<blocks_for(n), THREADS, 0, ab_cuda_stream(be)>>>(*s, t, x, y);
    LAUNCH_CHECK("maxpool_forward");
    return 0;
}

int ab_cuda_maxpool_backward(ab_backend *be, const ab_pool_shape *s, ab_dtype t, const void *x, const void *y,
                             const void *dy, void *dx) {
    AB_TRY(pool_args("maxpool_backward", s, t));
    AB_TRY(use_device(be));
    const size_t n = (size_t)s->N * s->H * s->W * s->C;
    k_maxpool_bwd<<<blocks_for(n), THREADS, 0, ab_cuda_stream(be)>>>(*s, t, x, y, dy, dx);
    LAUNCH_CHECK("maxpool_backward");
    return 0;
}

int ab_cuda_avgpool_forward(ab_backend *be, int N, int HW, int C, ab_dtype t, const void *x, void *y) {
    if (N < 1 || HW < 1 || C < 1) return ab_errorf("avgpool_forward: bad shape N=%d HW=%d C=%d", N, HW, C);
    if (!dtype_ok(t)) return ab_errorf("avgpool_forward: bad element type %d", (int)t);
    AB_TRY(use_device(be));
    k_avgpool<<<blocks_for((size_t)N * C), THREADS, 0, ab_cuda_stream(be)>>>(N, HW, C, t, x, y);
    LAUNCH_CHECK("avgpool_forward");
    return 0;
}

int ab_cuda_avgpool_backward(ab_backend *be, int N, int HW, int C, ab_dtype t, const void *dy, void *dx) {
    if (N < 1 || HW < 1 || C < 1) return ab_errorf("avgpool_backward: bad shape N=%d HW=%d C=%d", N, HW, C);
    if (!dtype_ok(t)) return ab_errorf("avgpool_backward: bad element type %d", (int)t);
    AB_TRY(use_device(be));
    const size_t n = (size_t)N * HW * C;
    k_avgpool_bwd<<<blocks_for(n), THREADS, 0, ab_cuda_stream(be)>>>(N, HW, C, t, dy, dx);
    LAUNCH_CHECK("avgpool_backward");
    return 0;
}

int ab_cuda_add(ab_backend *be, size_t n, ab_dtype t, const void *a, const void *b, int relu, void *y) {
    if (!n) return 0;
    if (!dtype_ok(t)) return ab_errorf("add: bad element type %d", (int)t);
    AB_TRY(use_device(be));
    k_add<<<blocks_for(n), THREADS, 0, ab_cuda_stream(be)>>>(n, t, a, b, relu, y);
    LAUNCH_CHECK("add");
    return 0;
}

/* ---- image batch assembly ------------------------------------------------------------------- */

/* one thread per output element (b, y, x, c); sel = the device copy of idx (B) then aug (B, 3).
 * The normalisation is gather_normalize's expression, per channel. */
__global__ void k_gather_images(int B, ab_image_layout L, int pad, const int32_t *sel, int has_aug, const uint8_t *data,
                                const uint8_t *labels, ab_dtype ot, void *out, int32_t *labels_out) {
    const size_t n = (size_t)B * L.H * L.W * L.C, img = (size_t)L.C * L.H * L.W;
    GRID_STRIDE(i, n) {
        const int c = (int)(i % (size_t)L.C);
        size_t r = i / (size_t)L.C;
        const int xo = (int)(r % (size_t)L.W);
        r /= (size_t)L.W;
        const int yo = (int)(r % (size_t)L.H), b = (int)(r / (size_t)L.H);
        const int32_t smp = sel[b];
        int iy = yo, ix = xo;
        if (has_aug) { /* crop at (dy, dx) of the image padded by pad, then mirror the crop */
            const int32_t *a = sel + B + 3 * (size_t)b;
            const int xc = a[2] ? L.W - 1 - xo : xo;
            iy = yo + a[0] - pad;
            ix = xc + a[1] - pad;
        }
        float p = 0.0f; /* zero padding reads as pixel 0 */
        if (iy >= 0 && iy < L.H && ix >= 0 && ix < L.W) {
            const size_t off = L.planar ? ((size_t)c * L.H + iy) * L.W + ix : ((size_t)iy * L.W + ix) * L.C + c;
            p = (float)data[(size_t)smp * img + off];
        }
        ab_store(out, i, ot, (p / 255.0f - L.mean[c]) / L.std[c]);
        if (labels_out && yo == 0 && xo == 0 && c == 0) labels_out[b] = labels[smp];
    }
}

int ab_cuda_gather_images(ab_backend *be, int B, const ab_image_layout *L, const ab_image_aug *aug,
                          const uint8_t *data, const uint8_t *labels, const int32_t *idx, ab_dtype ot, void *out,
                          int32_t *labels_out) {
    if (B < 0 || !L || L->C < 1 || L->C > AB_MAX_CHANNELS || L->H < 1 || L->W < 1)
        return ab_errorf("gather_images: bad shape B=%d C=%d H=%d W=%d", B, L ? L->C : 0, L ? L->H : 0, L ? L->W : 0);
    if (!dtype_ok(ot)) return ab_errorf("gather_images: bad element type %d", (int)ot);
    if (!data || !idx || !out || (labels_out && !labels)) return ab_errorf("gather_images: NULL argument");
    const int has_aug = aug && aug->aug;
    const int pad = has_aug ? aug->pad : 0;
    if (has_aug) {
        if (pad < 0) return ab_errorf("gather_images: crop padding %d", pad);
        for (int b = 0; b < B; b++) {
            const int32_t *a = aug->aug + 3 * (size_t)b;
            if (a[0] < 0 || a[0] > 2 * pad || a[1] < 0 || a[1] > 2 * pad || (a[2] != 0 && a[2] != 1))
                return ab_errorf("gather_images: sample %d: crop (%d, %d) flip %d outside [0, %d] x [0, %d] x {0, 1}", b,
                                 (int)a[0], (int)a[1], (int)a[2], 2 * pad, 2 * pad);
        }
    }
    if (B == 0) return 0;
    AB_TRY(use_device(be));
    const int32_t *sel = NULL;
    AB_TRY(ab_cuda_stage_ints(be, idx, B, has_aug ? aug->aug : NULL, has_aug ? 3 * B : 0, &sel));
    const size_t n = (size_t)B * L->H * L->W * L->C;
    k_gather_images<<<blocks_for(n), THREADS, 0, ab_cuda_stream(be)>>>(B, *L, pad, sel, has_aug, data, labels, ot, out,
                                                                       labels_out);
    LAUNCH_CHECK("gather_images");
    return 0;
}
