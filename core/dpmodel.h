/* The data-parallel cost model (docs/data-parallel.md, "A cost model"): MODELLED, never measured.
 * One synchronising step of p devices, each computing A micro-batches of t_mb seconds, then
 * combining G bytes of gradients (the payload on the wire) over links of bandwidth bw (B/s,
 * per device, each way) with latency lat per collective, cut into nb buckets:
 *   ring   comm = 2(p-1)/p G/bw + nb 2(p-1) lat                 (reduce-scatter + all-gather)
 *   ps     push = (p-1)/k G/bw + nb (p-1) lat   at a server's link  (k servers among the p
 *          pull = (p-1)/k W/bw + (p-1) lat                      devices, each receiving p-1
 *                                                               pushes of G/k and sending p-1
 *                                                               copies of its W/k bytes of fp32
 *                                                               weights, a latency per message)
 * Overlap hides a bucket's reduction behind the backward still to run: backward is
 * backward_share of a micro-batch (2/3: twice the forward's FLOPs), and the first bucket is ready
 * after 1/nb of it, so at most h = backward (nb-1)/nb is hidden and never the last bucket:
 *   exposed = max(comm / nb, comm - h)   (overlap; else comm)
 * The parameter server's pull follows the update and is always exposed. A step is
 *   t_step = A t_mb + exposed, and an epoch of S samples at b per micro-batch, in the steady
 *   state (no partial last step), S / (p b A) t_step against one device's S / b t_mb: the
 *   speed-up p A t_mb / t_step. */
#ifndef AB_DPMODEL_H
#define AB_DPMODEL_H

#include <stddef.h>

typedef enum { AB_DPM_RING = 0, AB_DPM_PS = 1 } ab_dpm_pattern;

typedef struct {
    ab_dpm_pattern pattern;
    int p, shards, overlap, accum, buckets; /* shards: the parameter server's k (1 .. p) */
    double t_mb;           /* one micro-batch's compute, s */
    double backward_share; /* of t_mb */
    double grad_bytes;     /* G: the gradients on the wire */
    double weight_bytes;   /* W: the fp32 weights a parameter server sends back */
    double bw, lat;        /* B/s per device link, each way; s per collective */
} ab_dpm_in;

typedef struct {
    double comm_s;    /* the communication's whole time (ps: push and pull) */
    double hidden_s;  /* the part behind backward */
    double exposed_s; /* comm_s - hidden_s: what the step waits for */
    double step_s;    /* A t_mb + exposed_s */
} ab_dpm_out;

/* fills out; -1 (error set) when an input is out of range */
int ab_dpm_step(const ab_dpm_in *in, ab_dpm_out *out);
/* the steady-state epoch of S samples at b per micro-batch, and one device's (no communication) */
double ab_dpm_epoch(const ab_dpm_in *in, const ab_dpm_out *o, long samples, int batch);
double ab_dpm_epoch_one(const ab_dpm_in *in, long samples, int batch);

#endif
