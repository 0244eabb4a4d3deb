/* Layers with explicit forward and backward over the backend. Activations are in the
 * parameters' compute type; shapes are in the comments. The set grows with the workloads
 * (convolution, batch norm, pooling, embedding, layer norm, attention, GELU, dropout). */
#ifndef AB_LAYERS_H
#define AB_LAYERS_H

#include "parallel.h"
#include "params.h"

/* y = x W^T + b.  W: (out, in), b: (out) at offsets into the parameter buffers. */
typedef struct {
    int in, out;
    const ab_param_spec *w, *b;
} ab_linear;

/* fills two specs (weight, bias) with PyTorch's default nn.Linear initialisation */
void ab_linear_specs(ab_param_spec *w, ab_param_spec *b, const char *wname, const char *bname, int in, int out);
void ab_linear_bind(ab_linear *l, const ab_param_spec *w, const ab_param_spec *b);

/* x (B, in) -> y (B, out); epi fuses a ReLU into the product's epilogue */
int ab_linear_forward(const ab_params *p, const ab_linear *l, int B, const void *x, void *y, ab_epilogue epi);
/* dy (B, out), x (B, in) -> d_weight, d_bias (folded into the fp32 gradient: under amp/bf16 the
 * weight's by gemm_fold, the bias's through ab_param_grad_at); dx (B, in) unless NULL */
int ab_linear_backward(const ab_params *p, const ab_grad_sink *g, const ab_linear *l, int B, const void *x, const void *dy, void *dx);

/* Tensor parallelism over linear layers (core/parallel.h), after ab_linear_specs and before
 * the parameters are laid out. Column-parallel: the weight's rows (output features) and the bias
 * split among tp's ranks; the input whole, the output this rank's block of features. Row-parallel:
 * the weight's columns (input features) split, the bias whole; the input this rank's block, the
 * output whole after ab_linear_row_forward's all-reduce. -1 with an error naming the tensor when
 * the features do not divide among the ranks. A group of 1 splits nothing. */
int ab_linear_column_parallel(ab_param_spec *w, ab_param_spec *b, const ab_tp *tp);
int ab_linear_row_parallel(ab_param_spec *w, const ab_tp *tp);
/* the row-parallel forward: y (B, out) = all-reduce over tp of x_block W_block^T, then + b once,
 * after the sum (Megatron's g operator and its bias); ones: B ones in the compute type
 * (ab_fill_ones), through which the bias is added as a rank-1 product. Its backward is
 * ab_linear_backward (identity: every rank has the whole dy; the bias's gradient is the same on
 * every rank). */
int ab_linear_row_forward(const ab_params *p, const ab_linear *l, ab_tp *tp, int B, const void *x, void *y,
                          const void *ones);
/* n ones of the compute type into dst (backend memory) */
int ab_fill_ones(const ab_params *p, size_t n, void *dst);

/* A 2-D convolution without bias: filter (K, R, S, C) at a spec of the compute region,
 * initialised as torchvision's ResNets do (Kaiming normal, fan-out). Channels-last
 * activations; shape.N is set per call to the batch. */
typedef struct {
    ab_conv_shape shape; /* for the model's largest batch */
    const ab_param_spec *w;
} ab_conv;

void ab_conv_spec(ab_param_spec *w, const char *name, int C, int K, int R, int S);
/* fills shape from an input (H, W, C) and binds w; -1 when the filter does not fit */
int ab_conv_bind(ab_conv *c, const ab_param_spec *w, int max_batch, int H, int W, int C, int stride, int pad);
/* x (B, H, W, C) -> y (B, P, Q, K) */
int ab_conv_forward(const ab_params *p, const ab_conv *c, int B, const void *x, void *y);
/* dy (B, P, Q, K) -> d_weight (folded into the fp32 gradient; under amp/bf16 by
 * conv2d_backward_filter_fold); dx (B, H, W, C) unless NULL */
int ab_conv_backward(const ab_params *p, const ab_grad_sink *g, const ab_conv *c, int B, const void *x, const void *dy, void *dx);
/* multiply-adds of one sample */
double ab_conv_macs(const ab_conv *c);

/* Batch normalisation over channels-last rows: scale and shift in the fp32 region (autocast
 * keeps them fp32), running statistics as buffers; momentum 0.1, eps 1e-5 as PyTorch. */
typedef struct {
    int C;
    float eps, momentum;
    const ab_param_spec *gamma, *beta, *mean, *var;
    float *save_mean, *save_invstd; /* (C) fp32, activation arena: the batch's, for backward */
} ab_batchnorm;

/* four specs: <prefix>.weight, .bias, .running_mean, .running_var; names point into names,
 * which must outlive the specs (4 x 64 bytes) */
void ab_batchnorm_specs(ab_param_spec s[4], char names[4][64], const char *prefix, int C);
void ab_batchnorm_bind(ab_batchnorm *bn, const ab_param_spec s[4]);
/* x (M, C) -> y (M, C); y may alias x. training: batch statistics (saved) and running update;
 * relu: the ReLU that follows, fused */
int ab_batchnorm_forward(const ab_params *p, const ab_batchnorm *bn, int M, const void *x, void *y, int training,
                         int relu);
int ab_batchnorm_backward(const ab_params *p, const ab_grad_sink *g, const ab_batchnorm *bn, int M, const void *x, const void *dy, void *dx);

/* Layer normalisation over rows of C (Hugging Face's "LayerNorm": weight, bias in the fp32
 * region, excluded from weight decay); statistics in fp32 whatever the storage types. */
typedef struct {
    int C;
    float eps;
    const ab_param_spec *gamma, *beta;
} ab_layernorm;

/* two specs: <prefix>.weight (1) and <prefix>.bias (0); names point into names (2 x 96 bytes) */
void ab_layernorm_specs(ab_param_spec s[2], char names[2][96], const char *prefix, int C);
void ab_layernorm_bind(ab_layernorm *ln, const ab_param_spec s[2], float eps);
/* x (R, C) of type xt -> y (R, C) of type yt; mean, rstd (R) fp32 kept for backward */
int ab_layernorm_forward(const ab_params *p, const ab_layernorm *ln, int R, ab_dtype xt, const void *x, float *mean,
                         float *rstd, ab_dtype yt, void *y);
/* dy (R, C, yt) -> d_weight, d_bias (fp32 region) and dx (R, C, xt; may alias dy when xt == yt) */
int ab_layernorm_backward(const ab_params *p, const ab_grad_sink *g, const ab_layernorm *ln, int R, ab_dtype xt, const void *x, ab_dtype yt,
                          const void *dy, const float *mean, const float *rstd, void *dx);

/* Multi-head scaled dot-product attention without its projections, as BERT's self-attention:
 * q, k, v (B, L, H) in the compute type, heads of D = H / heads columns each (head h is
 * columns [h D, (h + 1) D) of every row); scores = q_h k_h^T / sqrt(D) per sequence and head,
 * softmax over the keys with the padding mask (B, L) (int32, 1 = a real token), dropout on the
 * probabilities (rate, seeded), ctx_h = probs_h v_h written back into (B, L, H). */
typedef struct {
    int heads;
    float dropout;
} ab_attention;

/* probs (B, heads, L, L): the softmax output kept for backward; drop (same size): the dropped
 * probabilities (only when dropout is on in training; NULL otherwise) */
int ab_attention_forward(const ab_params *p, const ab_attention *a, int B, int L, int H, const void *q, const void *k,
                         const void *v, const int32_t *mask, int training, uint64_t seed, void *probs, void *drop,
                         void *ctx);
/* dctx (B, L, H) -> dq, dk, dv (B, L, H); scratch (B, heads, L, L) is overwritten; drop as the
 * forward left it (or NULL); dctx is not changed */
int ab_attention_backward(const ab_params *p, const ab_attention *a, int B, int L, int H, const void *q, const void *k,
                          const void *v, const void *probs, const void *drop, int training, uint64_t seed,
                          const void *dctx, void *scratch, void *dq, void *dk, void *dv);

#endif
