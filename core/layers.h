/* Layers with explicit forward and backward over the backend. Activations are in the
 * parameters' compute type; shapes are in the comments. The set grows with the workloads
 * (convolution, batch norm, pooling, embedding, layer norm, attention, GELU, dropout). */
#ifndef AB_LAYERS_H
#define AB_LAYERS_H

#include "params.h"

/* y = x W^T + b.  W: (out, in), b: (out) at offsets into the parameter buffers. */
typedef struct {
    int in, out;
    size_t w, b; /* spec indices are resolved to element offsets */
} ab_linear;

/* fills two specs (weight, bias) with PyTorch's default nn.Linear initialisation */
void ab_linear_specs(ab_param_spec *w, ab_param_spec *b, const char *wname, const char *bname, int in, int out);
void ab_linear_bind(ab_linear *l, const ab_param_spec *w, const ab_param_spec *b);

/* x (B, in) -> y (B, out); epi fuses a ReLU into the product's epilogue */
int ab_linear_forward(const ab_params *p, const ab_linear *l, int B, const void *x, void *y, ab_epilogue epi);
/* dy (B, out), x (B, in) -> d_weight, d_bias into p->gradc; dx (B, in) unless NULL */
int ab_linear_backward(const ab_params *p, const ab_linear *l, int B, const void *x, const void *dy, void *dx);

#endif
