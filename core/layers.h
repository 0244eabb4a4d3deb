/* Layers with explicit forward and backward over the backend. Activations are in the
 * parameters' compute type; shapes are in the comments. The set grows with the workloads
 * (convolution, batch norm, pooling, embedding, layer norm, attention, GELU, dropout). */
#ifndef AB_LAYERS_H
#define AB_LAYERS_H

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
/* dy (B, out), x (B, in) -> d_weight, d_bias (ab_param_g, folded); dx (B, in) unless NULL */
int ab_linear_backward(const ab_params *p, const ab_linear *l, int B, const void *x, const void *dy, void *dx);

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
/* dy (B, P, Q, K) -> d_weight (ab_param_g, folded); dx (B, H, W, C) unless NULL */
int ab_conv_backward(const ab_params *p, const ab_conv *c, int B, const void *x, const void *dy, void *dx);
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
int ab_batchnorm_backward(const ab_params *p, const ab_batchnorm *bn, int M, const void *x, const void *dy, void *dx);

#endif
