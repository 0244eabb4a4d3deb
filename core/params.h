/* A model's parameters: one contiguous fp32 buffer of all weights, carved into named tensors
 * by a spec table, plus the buffers the precision policy adds:
 *   fp32: master = the weights (charged as parameters), grad = fp32 gradients;
 *   amp/bf16: master = fp32 master weights, compute_weights = the fp16/bf16 working copy the
 *   forward reads, grad = fp32 gradients, compute_grad = a compute-type scratch of the largest
 *   tensor: backward writes one tensor's gradient there and ab_param_grad_done adds it into
 *   grad at once, as autograd's AccumulateGrad does, so no compute-type copy of all the
 *   gradients is ever held. The weights of the linear and convolution layers are rounded and
 *   folded by one op (gemm_fold, conv2d_backward_filter_fold), which may use the scratch.
 * Specs fall in three regions, laid out in this order:
 *   AB_REGION_COMPUTE  weights the matrix products read: a compute-type copy under amp/bf16
 *                      (elements [0, n_compute) of master, compute_weights and grad);
 *   AB_REGION_FP32     weights autocast keeps in fp32 (batch-norm scale and shift): read from
 *                      master and their gradients written straight into grad in fp32
 *                      (elements [n_compute, n));
 *   AB_REGION_BUFFER   state that is saved but not trained (batch-norm running statistics):
 *                      fp32, in their own buffer `bufs` (n_bufs elements), no gradient. */
#ifndef AB_PARAMS_H
#define AB_PARAMS_H

#include "backend.h"
#include "rng.h"

#define AB_MAX_DIMS 4

typedef enum {
    AB_INIT_ZERO = 0,
    AB_INIT_UNIFORM_FAN_IN,    /* U(-1/sqrt(fan_in), 1/sqrt(fan_in)): PyTorch's nn.Linear default */
    AB_INIT_ONE,
    AB_INIT_KAIMING_NORMAL_OUT, /* N(0, 2 / fan_out): torchvision's ResNet convolutions */
    AB_INIT_NORMAL,             /* N(0, std^2) */
} ab_init_kind;

typedef enum { AB_REGION_COMPUTE = 0, AB_REGION_FP32 = 1, AB_REGION_BUFFER = 2 } ab_param_region;

/* How the tensor is stored here against how PyTorch stores it (checkpoints permute). */
typedef enum {
    AB_LAYOUT_SAME = 0,
    AB_LAYOUT_OHWI = 1, /* a convolution filter stored (K, R, S, C); PyTorch's is (K, C, R, S) */
} ab_param_layout;

typedef struct ab_param_spec {
    const char *name; /* PyTorch state_dict key: "layer1.0.conv1.weight" */
    int ndim;
    int shape[AB_MAX_DIMS]; /* as stored here (see layout) */
    ab_init_kind init;
    int fan_in;  /* AB_INIT_UNIFORM_FAN_IN */
    int fan_out; /* AB_INIT_KAIMING_NORMAL_OUT */
    float std;   /* AB_INIT_NORMAL */
    ab_param_region region;
    ab_param_layout layout;
    int no_decay; /* 1: excluded from weight decay (biases, normalisation weights) */
    /* tensor parallelism (core/parallel.h): split_parts > 1 cuts the whole tensor along dimension
     * split_dim (as stored here) into that many equal blocks, and shape is block split_index's;
     * the initialisation draws the whole tensor and keeps the block, so that every block equals
     * the matching slice of an unsplit run's tensor. 0 or 1: the whole tensor (replicated). */
    int split_dim, split_parts, split_index;
    /* pipeline parallelism (core/pipeline.h): the pipeline unit this tensor belongs to (the model's
     * numbering), and absent = 1 on a stage that does not hold that unit: no storage (numel 0),
     * its initial values drawn and discarded, so that the stage's tensors start where a one-rank
     * run's do */
    int unit, absent;
    size_t offset; /* elements from the start of its region's buffer, filled by ab_params_init */
    size_t numel;
} ab_param_spec;

typedef struct ab_params {
    ab_backend *be;
    ab_precision prec;
    ab_dtype compute_type; /* what the forward reads and backward writes: fp32, fp16 or bf16 */
    int n_specs;
    ab_param_spec *specs;
    size_t n;              /* trained elements (compute and fp32 regions) */
    size_t n_compute;      /* elements of the compute region: [0, n_compute) */
    size_t n_bufs;         /* elements of the buffer region */
    float *master;         /* (n) fp32 */
    void *compute_weights; /* (n_compute) the weights in compute_type; == master under fp32 */
    float *grad;           /* (n) fp32 */
    void *compute_grad;    /* (n_compute_grad) compute_type: one tensor's gradient before its fold;
                              == grad under fp32 */
    size_t n_compute_grad; /* the largest compute-region tensor (n under fp32) */
    float *bufs;           /* (n_bufs) fp32, or NULL */
} ab_params;

/* What a backward pass does with the weight gradients it produces, said by the trainer for each
 * micro-batch and handed to every layer's backward as an argument:
 *   AB_GRAD_WRITE       the step's first micro-batch: each gradient is written into grad over
 *                       whatever it held (beta 0: what zeroing grad and adding would give, without
 *                       a pass over the memory);
 *   AB_GRAD_ACCUMULATE  every later micro-batch: each gradient is added to what grad holds. */
typedef enum { AB_GRAD_WRITE = 0, AB_GRAD_ACCUMULATE = 1 } ab_grad_mode;

/* Where one backward pass delivers its gradients. observe (optional, NULL: none) is shown the
 * gradient arriving at the output of each layer that has weights (named by that weight's spec),
 * in the compute type, before the layer's backward reads it; it reads and never writes.
 * ready (optional, NULL: none) is told of each trained tensor once its gradient of this pass is
 * in the fp32 gradient buffer (ab_param_grad_done): in the step's last micro-batch that gradient
 * is final, and the data-parallel buckets (core/buckets.c) start its all-reduce there, while the
 * rest of backward runs, as DDP's gradient hooks do. Every layer reports every weight it has. */
typedef struct ab_grad_sink {
    ab_grad_mode mode;
    int (*observe)(void *ctx, const ab_param_spec *w, ab_dtype t, size_t n, const void *dy);
    void *ctx;
    int (*ready)(void *ctx, const ab_param_spec *w);
    void *ready_ctx;
    /* The loss scaler's check taken as the gradients are written (optional, NULL: none). found_inf
     * (the backend's memory) is handed to the ops that fold a gradient into the fp32 buffer
     * (gemm_fold, conv2d_backward_filter_fold, accumulate), which set it to 1 where they store an
     * infinite or NaN value; checked (host, one byte a spec, or NULL) is set for each tensor whose
     * gradient of this pass such an op stored (ab_grad_folded), so that the trainer's own pass
     * over the gradients can leave it out. */
    int32_t *found_inf;
    unsigned char *checked;
} ab_grad_sink;

/* cuts s along dim into parts blocks and keeps block index (see split_parts); -1 with an error
 * naming the tensor when its dimension does not divide */
int ab_spec_split(ab_param_spec *s, int dim, int parts, int index);
/* s as a whole (unsplit) tensor: shape and numel of the whole, split_parts 0 */
ab_param_spec ab_spec_whole(const ab_param_spec *s);
/* copies s's block out of whole (the whole tensor, row-major) into block, or back (to_whole) */
void ab_spec_block_copy(const ab_param_spec *s, float *whole, float *block, int to_whole);

/* Lays out the specs (offsets), allocates the buffers and initialises the weights on the host
 * with the given RNG in spec order; rng NULL leaves them unset (a backend that only counts ops,
 * kernels/cost: nothing reads them). */
int ab_params_init(ab_params *p, ab_backend *be, ab_precision prec, ab_param_spec *specs, int n_specs, ab_rng *rng);
void ab_params_free(ab_params *p);
/* refresh the compute copy from the master weights (no-op under fp32) */
int ab_params_refresh(ab_params *p);
/* index of the spec named name, or -1 */
int ab_params_find(const ab_params *p, const char *name);
/* element pointer into a buffer of type t, and the same into a read-only one */
static inline void *ab_at(void *base, ab_dtype t, size_t off) { return (char *)base + off * ab_dtype_size(t); }
static inline const void *ab_at_const(const void *base, ab_dtype t, size_t off) {
    return (const char *)base + off * ab_dtype_size(t);
}
/* The weight of s as the forward reads it (compute copy, or fp32 master for the fp32 region),
 * and a buffer-region tensor. */
static inline const void *ab_param_weight(const ab_params *p, const ab_param_spec *s) {
    return s->region == AB_REGION_COMPUTE ? ab_at_const(p->compute_weights, p->compute_type, s->offset)
                                          : (const void *)(p->master + s->offset);
}
static inline float *ab_param_buf(const ab_params *p, const ab_param_spec *s) { return p->bufs + s->offset; }
/* 1 when s's gradient goes through the compute-type scratch (amp/bf16, compute region) */
static inline int ab_param_via_scratch(const ab_params *p, const ab_param_spec *s) {
    return s->region == AB_REGION_COMPUTE && p->compute_type != AB_F32;
}
/* Where backward writes s's gradient, in p->compute_type for the compute region, fp32 for the fp32
 * region: the fp32 gradient itself, or under amp/bf16 the compute-type scratch (then call
 * ab_param_grad_done before the next tensor's gradient is written). */
static inline void *ab_param_grad_at(const ab_params *p, const ab_param_spec *s) {
    if (ab_param_via_scratch(p, s)) return p->compute_grad;
    return s->region == AB_REGION_COMPUTE ? ab_at(p->compute_grad, p->compute_type, s->offset)
                                          : (void *)(p->grad + s->offset);
}
/* beta for writing s's gradient at ab_param_grad_at: 1 to add into what earlier micro-batches left
 * in the fp32 gradient (AB_GRAD_ACCUMULATE); the scratch is always overwritten */
static inline float ab_param_grad_beta(const ab_params *p, const ab_grad_sink *g, const ab_param_spec *s) {
    return !ab_param_via_scratch(p, s) && g->mode == AB_GRAD_ACCUMULATE ? 1.0f : 0.0f;
}
/* shows g's observer the gradient dy (n elements of type t) arriving at the output of the layer
 * whose weight is w */
static inline int ab_grad_observe(const ab_grad_sink *g, const ab_param_spec *w, ab_dtype t, size_t n,
                                  const void *dy) {
    return g->observe ? g->observe(g->ctx, w, t, n, dy) : 0;
}
/* after s's gradient is written at ab_param_grad_at: adds the scratch into the fp32 gradient
 * (overwrites it on a step's first micro-batch) where it went through the scratch, then tells
 * g's ready hook that s's gradient of this pass is in place */
int ab_param_grad_done(const ab_params *p, const ab_grad_sink *g, const ab_param_spec *s);
/* after a folding op (gemm_fold, conv2d_backward_filter_fold, accumulate) stored s's gradient of
 * this pass into the fp32 gradient, checking it into g->found_inf: s marked checked, then g's
 * ready hook told */
int ab_grad_folded(const ab_params *p, const ab_grad_sink *g, const ab_param_spec *s);
/* The stretches of the fp32 gradient whose values of this step no folding op checked (checked:
 * one byte a spec, as ab_grad_folded set them; NULL: none): the trained tensors left unmarked,
 * sorted and merged into as few [out[i][0], out[i][1]) ranges as the layout allows. out holds
 * n_specs pairs; returns how many it filled. */
size_t ab_grad_unchecked(const ab_params *p, const unsigned char *checked, size_t (*out)[2]);
/* the loss scaler's check at factor 1 (unscale_check, into found_inf) of the gradients no folding op
 * checked (ab_grad_unchecked) */
int ab_grad_check_unchecked(const ab_params *p, const unsigned char *checked, int32_t *found_inf);
/* the ready hook alone, for a gradient written straight into the fp32 buffer */
static inline int ab_grad_ready(const ab_grad_sink *g, const ab_param_spec *s) {
    return g->ready ? g->ready(g->ready_ctx, s) : 0;
}

#endif
