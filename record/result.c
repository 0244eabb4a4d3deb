/* The result record as JSON (harness/schema/result.schema.json), written atomically
 * (ab_write_parts_atomic: a temporary file in the same folder, fsync, then rename over the target). */
#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "census.h"
#include "dpmodel.h"
#include "fileio.h"
#include "record.h"
#include "train.h"
#include "version.h"

static cJSON *num(double v) { return isfinite(v) ? cJSON_CreateNumber(v) : cJSON_CreateNull(); }

static void add_dp_models(cJSON *p, const ab_train_config *c, const ab_run_record *r, double t_compute,
                          double grad_bytes, double gpu_bw, double gpu_lat, double node_bw, double node_lat);

/* data_parallel: what this run measured of its ranks' synchronisation (a run of more than one
 * rank, or with accumulation); busy is the reductions' own time, algbw payload / busy */
static void add_dp_measured(cJSON *o, const ab_train_config *c, const ab_run_record *r, int W, long steps, double busy,
                            double algbw) {
    cJSON *d = cJSON_AddObjectToObject(o, "data_parallel");
    cJSON_AddNumberToObject(d, "world_size", W);
    cJSON_AddNumberToObject(d, "accum_steps", c->accum_steps);
    cJSON_AddStringToObject(d, "engine", r->comm_engine[0] ? r->comm_engine : "none");
    cJSON_AddStringToObject(d, "allreduce_dtype", ab_dtype_name(c->allreduce_dtype));
    cJSON_AddItemToObject(d, "comm_time_s", num(r->comm_time_s));
    cJSON_AddItemToObject(d, "comm_time_per_step_s", num(steps ? r->comm_time_s / (double)steps : 0.0));
    cJSON_AddNumberToObject(d, "bytes_allreduced", r->bytes_allreduced);
    cJSON_AddItemToObject(d, "allreduce_time_s", num(r->allreduce_time_s));
    cJSON_AddItemToObject(d, "allreduce_bandwidth_Bps", num(algbw));
    /* overlap: the part of the all-reduce the steps waited for (exposed) and its whole time
     * (busy); the bytes a rank passes per step, and what a ring sends and receives for them */
    const int Wd = r->data_parallel > 0 ? r->data_parallel : W; /* the ring: a data group's ranks */
    cJSON_AddBoolToObject(d, "overlap", c->dp_overlap && Wd > 1);
    cJSON_AddNumberToObject(d, "buckets", r->buckets);
    cJSON_AddNumberToObject(d, "bucket_mb", c->bucket_mb);
    const double per = steps ? 1.0 / (double)steps : 0.0;
    cJSON_AddItemToObject(d, "allreduce_exposed_time_per_step_s", num(r->allreduce_time_s * per));
    cJSON_AddItemToObject(d, "allreduce_busy_time_per_step_s", num(busy * per));
    cJSON_AddNumberToObject(d, "bytes_per_step", r->bytes_allreduced * per);
    cJSON_AddNumberToObject(d, "ring_bytes_sent_per_step", 2.0 * (Wd - 1) / Wd * r->bytes_allreduced * per);
    /* how the gradients met: the ring, or the parameter server (its pull's time apart) */
    cJSON_AddStringToObject(d, "sync", ab_dp_sync_name(W > 1 ? c->dp_sync : AB_DP_RING));
    cJSON_AddNumberToObject(d, "ps_shards", W > 1 && c->dp_sync == AB_DP_PS ? c->ps_shards : 0);
    cJSON_AddItemToObject(d, "ps_pull_time_per_step_s", num(r->ps_pull_time_s * per));
    cJSON_AddStringToObject(d, "traffic_model",
                            "bytes as the pattern moves them, per synchronising step: ring 2(W-1)/W of the "
                            "payload each way; ps a rank pushes the payload it does not serve and receives the "
                            "weights it does not serve, a server receives W-1 pushes of its shard and sends W-1 "
                            "copies of its weights (the library may route them otherwise)");
    cJSON *sent = cJSON_AddArrayToObject(d, "bytes_sent_per_step_per_rank");
    cJSON *recv = cJSON_AddArrayToObject(d, "bytes_received_per_step_per_rank");
    for (int i = 0; r->dp_sent_per_rank && i < W; i++) {
        cJSON_AddItemToArray(sent, cJSON_CreateNumber(r->dp_sent_per_rank[i]));
        cJSON_AddItemToArray(recv, cJSON_CreateNumber(r->dp_received_per_rank[i]));
    }
    cJSON *pm = cJSON_AddArrayToObject(d, "peak_memory_bytes_per_rank");
    for (int i = 0; r->peak_memory_per_rank && i < W; i++)
        cJSON_AddItemToArray(pm, cJSON_CreateNumber((double)r->peak_memory_per_rank[i]));
    /* the rule each rank's GPU comes from (ab_comm_gpu_index), and the GPU it ran on */
    cJSON_AddStringToObject(d, "gpu_rule", "node-local rank modulo the GPUs the rank sees");
    cJSON *gp = cJSON_AddArrayToObject(d, "gpu_per_rank");
    for (int i = 0; r->gpu_per_rank && i < W; i++)
        cJSON_AddItemToArray(gp, cJSON_CreateNumber((double)r->gpu_per_rank[i]));
}

/* projection (not measured): the epoch on 1-8 GPUs and nodes under the ring cost model
 *   t_step(N)  = t_compute + 2(N-1)/N * grad_bytes / bandwidth + latency   (N > 1; t_compute at N = 1)
 *   epoch(N)   = ceil(train_samples / (N * batch * accum)) * t_step(N)     (per-rank batch fixed)
 * and the patterns' model (add_dp_models). t_compute is the step step_source names. The
 * bandwidth is the per-rank bus bandwidth of the ring; a measured all-reduce gives
 * bus = algorithm bandwidth * 2(W-1)/W. */
static void add_projection(cJSON *o, const ab_train_config *c, const ab_run_record *r, int W, double time, long steps,
                           double grad_bytes, double algbw) {
    /* the step the projection scales: a GPU run's own (measured), else the modelled GPU step of
     * the same configuration; the CPU's only when there is no model (a CPU step says nothing about
     * a GPU's scaling: the record says which) */
    const double t_measured = (time - r->comm_time_s) / (double)steps;
    const int on_gpu = !r->device.is_host;
    const int modelled = !on_gpu && r->step_model.valid;
    const double t_compute = modelled ? r->step_model.est.time_s : t_measured;
    char step_source[48];
    if (on_gpu) snprintf(step_source, sizeof step_source, "measured-gpu");
    else if (modelled) snprintf(step_source, sizeof step_source, "modelled:%s", r->step_model.gpu);
    else snprintf(step_source, sizeof step_source, "measured-cpu");
    /* the GPU figures take a measured NCCL bandwidth where this run had one; CPU processes
     * sharing memory say nothing about GPU links, nor does any run here about a network */
    const int Wd = r->data_parallel > 0 ? r->data_parallel : W; /* the gradients' ring: a data group */
    const int measured = algbw > 0 && Wd > 1 && strcmp(r->comm_engine, "nccl") == 0;
    const double gpu_bw = c->proj_gpu_bw > 0 ? c->proj_gpu_bw : measured ? algbw * 2.0 * (Wd - 1) / Wd : AB_PROJ_GPU_BW;
    const char *gpu_src = c->proj_gpu_bw > 0 ? "option" : measured ? "measured" : "default";
    const double gpu_lat = c->proj_gpu_latency > 0 ? c->proj_gpu_latency : AB_PROJ_GPU_LATENCY;
    const double node_bw = c->proj_node_bw > 0 ? c->proj_node_bw : AB_PROJ_NODE_BW;
    const double node_lat = c->proj_node_latency > 0 ? c->proj_node_latency : AB_PROJ_NODE_LATENCY;
    cJSON *p = cJSON_AddObjectToObject(o, "projection");
    cJSON_AddBoolToObject(p, "projected", 1);
    cJSON_AddStringToObject(p, "method",
                            "PROJECTED, not measured: ring all-reduce cost model, t_step(N) = t_compute + "
                            "2(N-1)/N * grad_bytes / bandwidth + latency (N > 1), epoch(N) = "
                            "ceil(train_samples / (N * batch * accum)) * t_step(N), per-rank batch fixed, "
                            "t_compute as step_source says");
    cJSON_AddStringToObject(p, "step_source", step_source);
    cJSON_AddItemToObject(p, "compute_time_per_step_s", num(t_compute));
    cJSON_AddItemToObject(p, "measured_compute_time_per_step_s", num(t_measured));
    cJSON_AddNumberToObject(p, "grad_bytes", grad_bytes);
    cJSON_AddItemToObject(p, "bandwidth_Bps", num(gpu_bw));
    cJSON_AddItemToObject(p, "latency_s", num(gpu_lat));
    cJSON_AddStringToObject(p, "bandwidth_source", gpu_src);
    cJSON *pts = cJSON_AddArrayToObject(p, "points");
    const double per_step = (double)c->batch_size * c->accum_steps;
    const double epoch1 = ceil((double)r->train_samples / per_step) * t_compute;
    for (int kind = 0; kind < 2; kind++)
        for (int n = 1; n <= 8; n *= 2) {
            const double bw = kind ? node_bw : gpu_bw, lat = kind ? node_lat : gpu_lat;
            const double t_step = t_compute + (n > 1 ? 2.0 * (n - 1) / n * grad_bytes / bw + lat : 0.0);
            const double epoch = ceil((double)r->train_samples / (n * per_step)) * t_step;
            cJSON *j = cJSON_CreateObject();
            cJSON_AddStringToObject(j, "kind", kind ? "nodes" : "gpus");
            cJSON_AddNumberToObject(j, "n", n);
            cJSON_AddItemToObject(j, "epoch_time_s", num(epoch));
            cJSON_AddItemToObject(j, "speedup", num(epoch1 / epoch));
            cJSON_AddItemToObject(j, "efficiency", num(epoch1 / epoch / n));
            cJSON_AddItemToObject(j, "bandwidth_Bps", num(bw));
            cJSON_AddItemToObject(j, "latency_s", num(lat));
            cJSON_AddItemToArray(pts, j);
        }
    add_dp_models(p, c, r, t_compute, grad_bytes, gpu_bw, gpu_lat, node_bw, node_lat);
}

/* model_parallel: the grid (data x tensor x pipeline) and what crossed rank 0's tensor group in
 * the training steps, measured, beside the cost model's bytes */
static void add_model_parallel(cJSON *o, const ab_run_record *r) {
    if (r->tensor_parallel <= 1 && r->pipeline_parallel <= 1) return;
    long steps = 0;
    for (int i = 0; i < r->n_epochs; i++) steps += r->epochs[i].steps;
    const double per = steps ? 1.0 / (double)steps : 0.0;
    cJSON *m = cJSON_AddObjectToObject(o, "model_parallel");
    cJSON_AddNumberToObject(m, "data", r->data_parallel);
    cJSON_AddNumberToObject(m, "tensor", r->tensor_parallel);
    cJSON_AddNumberToObject(m, "pipeline", r->pipeline_parallel);
    cJSON_AddItemToObject(m, "tensor_allreduces_per_step", num((double)r->tp_calls * per));
    cJSON_AddItemToObject(m, "tensor_bytes_sent_per_step", num(r->tp_bytes_sent * per));
    cJSON_AddItemToObject(m, "tensor_bytes_sent_per_step_model", num(r->tp_model_bytes * per));
    cJSON_AddItemToObject(m, "tensor_allreduce_time_per_step_s", num(r->tp_time_s * per));
    if (r->pipeline_parallel > 1 && r->pp_busy_s) {
        const int P = r->pipeline_parallel;
        cJSON_AddStringToObject(m, "pipeline_schedule", r->pp_schedule);
        cJSON_AddNumberToObject(m, "micro_batches", r->pp_micro_batches);
        cJSON_AddNumberToObject(m, "units", r->pp_units);
        cJSON *st = cJSON_AddArrayToObject(m, "stages");
        for (int s = 0; s < P; s++) {
            cJSON *j = cJSON_CreateObject();
            cJSON_AddNumberToObject(j, "first_unit", r->pp_bounds[s]);
            cJSON_AddNumberToObject(j, "end_unit", r->pp_bounds[s + 1]);
            cJSON_AddItemToObject(j, "busy_s", num(r->pp_busy_s[s]));
            cJSON_AddItemToObject(j, "wait_s", num(r->pp_wait_s[s]));
            /* idle time over busy time: what the bubble costs, against (P - 1) / M */
            cJSON_AddItemToObject(j, "idle_share", num(r->pp_busy_s[s] > 0 ? r->pp_wait_s[s] / r->pp_busy_s[s] : NAN));
            cJSON_AddItemToObject(j, "bytes_sent_per_step", num(r->pp_bytes_sent[s]));
            cJSON_AddItemToObject(j, "bytes_sent_per_step_model", num(r->pp_bytes_model ? r->pp_bytes_model[s] : NAN));
            cJSON_AddItemToObject(j, "parameters", num(r->pp_params ? r->pp_params[s] : NAN));
            cJSON_AddItemToObject(j, "macs_per_sample", num(r->pp_stage_macs[s]));
            cJSON_AddItemToArray(st, j);
        }
        cJSON_AddItemToObject(m, "bubble_model", num((double)(P - 1) / (r->pp_micro_batches > 0 ? r->pp_micro_batches : 1)));
        cJSON_AddStringToObject(m, "pipeline_traffic_model",
                                "a stage sends its output activation on and its input's gradient back, once a "
                                "micro-batch: batch x the activation's elements x the element size each; the bubble "
                                "(P - 1) / M of the busy time, each stage idle while the pipe fills and drains");
    }
    cJSON_AddStringToObject(m, "tensor_traffic_model",
                            "per rank, 2(T-1)/T of each activation all-reduce's payload, as a ring moves it; the "
                            "model: the activations the model all-reduces per sample (the MLP its logits; BERT four "
                            "of sequence x hidden per layer) x the rank's samples");
}

/* data_parallel (measured) and projection (modelled) */
static void add_data_parallel(cJSON *o, const ab_train_config *c, const ab_run_record *r) {
    const int W = r->world_size > 0 ? r->world_size : 1;
    double time = 0.0;
    long steps = 0;
    for (int i = 0; i < r->n_epochs; i++) {
        time += r->epochs[i].time_s;
        steps += r->epochs[i].steps;
    }
    const double grad_bytes = (double)r->parameters * (double)ab_dtype_size(c->allreduce_dtype);
    /* the all-reduce's own time: under overlap the buckets' start to completion, part of it hidden */
    const double busy = r->allreduce_busy_s > 0 ? r->allreduce_busy_s : r->allreduce_time_s;
    const double algbw = busy > 0 ? r->bytes_allreduced / busy : 0.0;
    if (W > 1 || c->accum_steps > 1) add_dp_measured(o, c, r, W, steps, busy, algbw);
    if (steps > 0 && r->train_samples > 0) add_projection(o, c, r, W, time, steps, grad_bytes, algbw);
}

/* The ring against the parameter server (one server, and one per device), with and without
 * overlap, with and without accumulation (4 micro-batches per synchronisation), on 2-8 GPUs and
 * 2-8 nodes: core/dpmodel.h's model from the projection's step and links. */
static void add_dp_models(cJSON *p, const ab_train_config *c, const ab_run_record *r, double t_compute,
                          double grad_bytes, double gpu_bw, double gpu_lat, double node_bw, double node_lat) {
    const double t_mb = t_compute / (c->accum_steps > 0 ? c->accum_steps : 1);
    const double weight_bytes = 4.0 * (double)r->parameters;
    /* the buckets of --bucket-mb over the fp32 gradients (this run's own count where it had them) */
    const double cap = c->bucket_mb > 0 ? c->bucket_mb * 1e6 : 25e6;
    const int nb = r->buckets > 0         ? r->buckets
                   : r->bucket_layout > 0 ? r->bucket_layout
                                          : (int)fmax(1.0, ceil(weight_bytes / cap));
    const double bwd = 2.0 / 3.0;
    cJSON *m = cJSON_AddObjectToObject(p, "dp_models");
    cJSON_AddStringToObject(m, "method",
                            "MODELLED, not measured (core/dpmodel.h): ring comm = 2(p-1)/p G/bw + nb 2(p-1) lat; "
                            "parameter server with k server devices push = (p-1)/k G/bw + nb (p-1) lat, pull = "
                            "(p-1)/k W/bw + (p-1) lat; overlap hides at most backward (nb-1)/nb and never the last bucket, the "
                            "pull never; t_step = accum t_mb + exposed; speed-up over one device's epoch");
    cJSON_AddItemToObject(m, "micro_batch_time_s", num(t_mb));
    cJSON_AddNumberToObject(m, "backward_share", bwd);
    cJSON_AddNumberToObject(m, "buckets", nb);
    cJSON_AddNumberToObject(m, "grad_bytes", grad_bytes);
    cJSON_AddNumberToObject(m, "weight_bytes", weight_bytes);
    cJSON *rows = cJSON_AddArrayToObject(m, "rows");
    static const int accums[2] = {1, 4};
    for (int kind = 0; kind < 2; kind++)
        for (int n = 2; n <= 8; n *= 2)
            for (int pat = 0; pat < 3; pat++) /* ring, one server, one server per device */
                for (int ov = 0; ov < 2; ov++)
                    for (int a = 0; a < 2; a++) {
                        const ab_dpm_in in = {.pattern = pat ? AB_DPM_PS : AB_DPM_RING,
                                              .p = n,
                                              .shards = pat == 2 ? n : 1,
                                              .overlap = ov,
                                              .accum = accums[a],
                                              .buckets = ov || pat ? nb : 1,
                                              .t_mb = t_mb,
                                              .backward_share = bwd,
                                              .grad_bytes = grad_bytes,
                                              .weight_bytes = weight_bytes,
                                              .bw = kind ? node_bw : gpu_bw,
                                              .lat = kind ? node_lat : gpu_lat};
                        ab_dpm_out o;
                        if (ab_dpm_step(&in, &o) != 0) {
                            ab_error_clear();
                            continue;
                        }
                        const double one = ab_dpm_epoch_one(&in, r->train_samples, c->batch_size);
                        const double epoch = ab_dpm_epoch(&in, &o, r->train_samples, c->batch_size);
                        cJSON *j = cJSON_CreateObject();
                        cJSON_AddStringToObject(j, "kind", kind ? "nodes" : "gpus");
                        cJSON_AddNumberToObject(j, "n", n);
                        cJSON_AddStringToObject(j, "sync", pat ? "ps" : "ring");
                        cJSON_AddNumberToObject(j, "shards", pat ? in.shards : 0);
                        cJSON_AddBoolToObject(j, "overlap", ov);
                        cJSON_AddNumberToObject(j, "accum", in.accum);
                        cJSON_AddItemToObject(j, "comm_s", num(o.comm_s));
                        cJSON_AddItemToObject(j, "exposed_s", num(o.exposed_s));
                        cJSON_AddItemToObject(j, "step_s", num(o.step_s));
                        cJSON_AddItemToObject(j, "epoch_time_s", num(epoch));
                        cJSON_AddItemToObject(j, "speedup", num(epoch > 0 ? one / epoch : NAN));
                        cJSON_AddItemToArray(rows, j);
                    }
}

/* The modelled GPU step (core/stepmodel.h) of the run's configuration: modelled, never measured */
static void add_step_model(cJSON *o, const ab_step_model_result *m) {
    if (!m->valid) return;
    cJSON *s = cJSON_AddObjectToObject(o, "step_model");
    cJSON_AddStringToObject(s, "method",
                            "MODELLED, not measured: each op of the step at the longer of its FLOPs at the GPU's "
                            "peak for its precision and its bytes at the memory bandwidth, derated by the efficiency "
                            "table, plus a gap per kernel (docs/step-model.md)");
    cJSON_AddStringToObject(s, "gpu", m->gpu);
    cJSON_AddStringToObject(s, "gpu_label", m->gpu_label);
    cJSON_AddItemToObject(s, "step_time_s", num(m->est.time_s));
    cJSON_AddItemToObject(s, "math_bound_s", num(m->est.math_bound_s));
    cJSON_AddItemToObject(s, "memory_bound_s", num(m->est.memory_bound_s));
    cJSON_AddItemToObject(s, "gap_s", num(m->est.gap_s));
    cJSON_AddNumberToObject(s, "flops", m->est.flops);
    cJSON_AddNumberToObject(s, "bytes", m->est.bytes);
    cJSON_AddNumberToObject(s, "kernels", (double)m->est.kernels);
    cJSON *e = cJSON_AddObjectToObject(s, "efficiency");
    cJSON_AddNumberToObject(e, "tensor", m->eff.tensor);
    cJSON_AddNumberToObject(e, "fp32", m->eff.fp32);
    cJSON_AddNumberToObject(e, "memory", m->eff.memory);
    cJSON_AddNumberToObject(e, "gap_s", m->eff.gap_s);
    cJSON_AddNumberToObject(e, "sync_s", m->eff.sync_s);
}

/* A device backend's description: what it is, and the driver's view of its memory beside the
 * tracked allocator's (peak_memory_bytes), so the two can be compared. */
static void add_gpu(cJSON *o, const ab_device_info *d) {
    cJSON *g = cJSON_AddObjectToObject(o, "gpu");
    char cc[16];
    snprintf(cc, sizeof cc, "%d.%d", d->cc_major, d->cc_minor);
    cJSON_AddStringToObject(g, "name", d->name);
    cJSON_AddStringToObject(g, "compute_capability", cc);
    cJSON_AddStringToObject(g, "driver_version", d->driver);
    cJSON_AddStringToObject(g, "cuda_runtime_version", d->runtime);
    cJSON_AddStringToObject(g, "cublas_version", d->blas);
    cJSON_AddStringToObject(g, "cudnn_version", d->dnn);
    cJSON_AddNumberToObject(g, "memory_total_bytes", (double)d->mem_total);
    cJSON_AddNumberToObject(g, "driver_used_bytes_before", (double)d->mem_used_start);
    cJSON_AddNumberToObject(g, "driver_used_bytes_peak", (double)d->mem_used_peak);
    cJSON_AddNumberToObject(g, "driver_used_bytes_by_run", (double)(d->mem_used_peak - d->mem_used_start));
    cJSON_AddNumberToObject(g, "resident_data_bytes", (double)d->data_bytes);
    cJSON_AddBoolToObject(g, "cuda_graph", d->graph_used);
}

/* RFC 4648 base64 of n bytes into a new string (NULL when out of memory) */
static char *base64(const uint8_t *in, size_t n) {
    static const char A[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    char *out = malloc(4 * ((n + 2) / 3) + 1), *o = out;
    if (!out) return NULL;
    for (size_t i = 0; i < n; i += 3) {
        const uint32_t v = (uint32_t)in[i] << 16 | (i + 1 < n ? (uint32_t)in[i + 1] << 8 : 0) |
                           (i + 2 < n ? (uint32_t)in[i + 2] : 0);
        *o++ = A[v >> 18 & 63];
        *o++ = A[v >> 12 & 63];
        *o++ = i + 1 < n ? A[v >> 6 & 63] : '=';
        *o++ = i + 2 < n ? A[v & 63] : '=';
    }
    *o = 0;
    return out;
}

/* the last evaluation example by example: predicted classes (one byte each, two little-endian
 * past 256 classes) and a bitset of the right ones (bit i % 8 of byte i / 8), both base64 */
static cJSON *predictions_json(const ab_run_record *r) {
    const size_t n = (size_t)r->n_test_pred, w = r->n_classes > 256 ? 2 : 1;
    uint8_t *p = malloc(n * w + 1), *h = calloc(n / 8 + 1, 1);
    char *ps = NULL, *hs = NULL;
    cJSON *o = NULL;
    if (p && h) {
        for (size_t i = 0; i < n; i++) {
            p[i * w] = (uint8_t)(r->test_pred[i] & 255);
            if (w == 2) p[i * w + 1] = (uint8_t)(r->test_pred[i] >> 8 & 255);
            if (r->test_hit[i]) h[i / 8] |= (uint8_t)(1u << (i % 8));
        }
        ps = base64(p, n * w);
        hs = base64(h, (n + 7) / 8);
    }
    if (ps && hs && (o = cJSON_CreateObject())) {
        cJSON_AddNumberToObject(o, "n", (double)n);
        cJSON_AddNumberToObject(o, "classes", r->n_classes);
        cJSON_AddStringToObject(o, "encoding", w == 2 ? "base64; predicted: uint16 little-endian per example; "
                                                        "correct: bit i%8 of byte i/8"
                                                      : "base64; predicted: one byte per example; correct: bit "
                                                        "i%8 of byte i/8");
        cJSON_AddStringToObject(o, "predicted", ps);
        cJSON_AddStringToObject(o, "correct", hs);
    }
    free(p);
    free(h);
    free(ps);
    free(hs);
    return o;
}

/* where the record comes from: the program, the source, when, and whether the run is whole */
static void add_provenance(cJSON *o, const ab_run_record *r) {
    cJSON_AddNumberToObject(o, "schema_version", 1);
    cJSON_AddStringToObject(o, "tool", "ampbench");
    cJSON_AddStringToObject(o, "git_commit", ab_git_commit());
    if (ab_git_dirty() >= 0) cJSON_AddBoolToObject(o, "git_dirty", ab_git_dirty()); /* left out when unknown */
    cJSON_AddStringToObject(o, "started_at", r->started_at);
    cJSON_AddBoolToObject(o, "complete", r->complete);
    cJSON_AddBoolToObject(o, "interrupted", r->interrupted);
    if (r->checkpoints_written) { /* --checkpoint-dir: what writing them cost this process */
        cJSON *ck = cJSON_AddObjectToObject(o, "checkpoints");
        cJSON_AddNumberToObject(ck, "written", (double)r->checkpoints_written);
        cJSON_AddItemToObject(ck, "time_s", num(r->checkpoint_time_s));
        cJSON_AddItemToObject(ck, "write_time_s", num(r->checkpoint_write_s));
        cJSON_AddNumberToObject(ck, "bytes", r->checkpoint_bytes);
    }
    if (r->n_resumes) { /* a run continued from checkpoints (--resume): at which steps, the last from where */
        cJSON *ra = cJSON_AddArrayToObject(o, "resumed_at_steps");
        for (int i = 0; i < r->n_resumes; i++) cJSON_AddItemToArray(ra, cJSON_CreateNumber((double)r->resumed_at[i]));
        cJSON_AddStringToObject(o, "resumed_from", r->resumed_from);
    }
}

/* what was trained, on what data, with which recipe */
static void add_workload(cJSON *o, const ab_train_config *c, const ab_run_record *r) {
    cJSON *w = cJSON_AddObjectToObject(o, "workload");
    cJSON_AddStringToObject(w, "model", c->model);
    cJSON_AddStringToObject(w, "dataset", c->dataset);
    cJSON_AddNumberToObject(w, "train_samples", (double)r->train_samples);
    cJSON_AddNumberToObject(w, "test_samples", (double)r->test_samples);
    cJSON_AddNumberToObject(w, "batch_size", c->batch_size);
    cJSON_AddNumberToObject(w, "epochs", c->epochs);
    cJSON_AddNumberToObject(w, "max_steps", (double)c->max_steps);
    cJSON_AddStringToObject(w, "optimizer", ab_optimizer_name(c->optimizer));
    cJSON_AddItemToObject(w, "lr", num(c->lr));
    cJSON_AddItemToObject(w, "momentum", num(c->momentum));
    cJSON_AddItemToObject(w, "weight_decay", num(c->weight_decay));
    cJSON_AddNumberToObject(w, "seed", (double)c->seed);
    cJSON_AddNumberToObject(w, "accum_steps", c->accum_steps);
    cJSON_AddNumberToObject(w, "parameters", (double)r->parameters);
    cJSON_AddNumberToObject(w, "macs_per_sample", r->macs_per_sample);
    cJSON_AddStringToObject(w, "lr_schedule", ab_lr_schedule_name(c->lr_schedule));
    cJSON_AddNumberToObject(w, "warmup_steps", (double)c->warmup_steps);
    cJSON_AddNumberToObject(w, "timing_skip_steps", (double)c->timing_skip_steps);
    cJSON_AddStringToObject(w, "weight_decay_excludes", c->wd_exclude ? "biases and normalisation weights" : "nothing");
    cJSON_AddNumberToObject(w, "clip_grad_norm", c->clip_grad_norm);
    cJSON_AddStringToObject(w, "metric", r->metric[0] ? r->metric : "accuracy");
    if (r->seq_len > 0) {
        cJSON_AddNumberToObject(w, "max_seq_len", r->seq_len);
        if (c->dropout >= 0.0f) cJSON_AddNumberToObject(w, "dropout", c->dropout);
        else cJSON_AddStringToObject(w, "dropout", "the architecture's");
    }
    cJSON_AddNumberToObject(w, "total_steps", (double)r->total_steps);
    cJSON_AddBoolToObject(w, "shuffle", c->shuffle);
    cJSON_AddBoolToObject(w, "augment", c->augment);
    cJSON_AddNumberToObject(w, "train_subset", c->train_subset);
    cJSON_AddNumberToObject(w, "test_subset", c->test_subset);
    cJSON_AddStringToObject(w, "train_data", r->train_data);
    cJSON_AddStringToObject(w, "test_data", r->test_data);
    cJSON_AddStringToObject(w, "weights", r->weights_from);
    if (c->save_path) cJSON_AddStringToObject(w, "saved_to", c->save_path);
    if (r->model_notes) cJSON_AddStringToObject(w, "notes", r->model_notes);
}

/* the machine: this host, and the GPU where the run was on one */
static void add_host(cJSON *o, const ab_train_config *c, const ab_run_record *r) {
    cJSON *h = cJSON_AddObjectToObject(o, "host");
    char hostname[256] = "unknown";
    gethostname(hostname, sizeof hostname - 1);
    cJSON_AddStringToObject(h, "hostname", hostname);
    cJSON_AddStringToObject(h, "cpu", r->device.is_host ? r->device_name : "");
    cJSON_AddNumberToObject(h, "cores", (double)sysconf(_SC_NPROCESSORS_ONLN));
    cJSON_AddNumberToObject(h, "threads", c->threads);
    cJSON_AddStringToObject(h, "backend", r->backend);
    cJSON_AddStringToObject(h, "device", r->device_name);
    cJSON_AddStringToObject(h, "blas", r->blas);
    if (r->device.name[0] && !r->device.is_host) add_gpu(o, &r->device);
}

/* each epoch's times, counts and evaluation, and the run's totals from them */
static void add_epochs(cJSON *o, const ab_run_record *r) {
    cJSON *ep = cJSON_AddArrayToObject(o, "epochs");
    double total = 0.0, samples = 0.0;
    for (int i = 0; i < r->n_epochs; i++) {
        const ab_epoch_record *e = &r->epochs[i];
        cJSON *j = cJSON_CreateObject();
        cJSON_AddNumberToObject(j, "epoch", e->epoch);
        cJSON_AddItemToObject(j, "time_s", num(e->time_s));
        cJSON_AddItemToObject(j, "compute_time_s", num(e->compute_time_s));
        cJSON_AddItemToObject(j, "data_time_s", num(e->data_time_s));
        cJSON_AddItemToObject(j, "eval_time_s", num(e->eval_time_s));
        cJSON_AddNumberToObject(j, "steps", (double)e->steps);
        cJSON_AddNumberToObject(j, "skipped_steps", (double)e->skipped_steps);
        cJSON_AddItemToObject(j, "train_loss", num(e->train_loss));
        cJSON_AddItemToObject(j, "test_loss", num(e->test_loss));
        cJSON_AddItemToObject(j, "test_accuracy", num(e->test_accuracy));
        cJSON_AddItemToObject(j, "test_metric", num(e->test_metric));
        cJSON_AddNumberToObject(j, "clipped_steps", (double)e->clipped_steps);
        cJSON_AddNumberToObject(j, "samples", (double)e->samples);
        cJSON_AddNumberToObject(j, "timed_samples", (double)e->timed_samples);
        cJSON_AddItemToArray(ep, j);
        total += e->time_s;
        samples += (double)e->timed_samples;
    }
    cJSON_AddItemToObject(o, "total_time_s", num(total));
    cJSON_AddItemToObject(o, "samples_per_s", num(total > 0 ? samples / total : 0.0));
    cJSON_AddItemToObject(o, "final_test_accuracy", num(r->n_epochs ? r->epochs[r->n_epochs - 1].test_accuracy : NAN));
    cJSON_AddItemToObject(o, "final_test_metric", num(r->n_epochs ? r->epochs[r->n_epochs - 1].test_metric : NAN));
}

/* the peaks by category, the memory cap, and what did not fit */
static void add_memory(cJSON *o, const ab_train_config *c, const ab_run_record *r) {
    cJSON *m = cJSON_AddObjectToObject(o, "peak_memory_bytes");
    for (int k = 0; k < AB_MEM_COUNT; k++)
        cJSON_AddNumberToObject(m, ab_mem_category_name((ab_mem_category)k), (double)r->mem.peak[k]);
    cJSON_AddNumberToObject(m, "total", (double)r->mem.peak_total);
    /* total: what a GPU run of this configuration holds; total_with_cpu_scratch adds the buffers
     * only the CPU implementation needs (cpu_scratch), peak of the sum */
    cJSON_AddNumberToObject(m, "total_with_cpu_scratch", (double)r->mem.peak_all);
    /* the memory cap, and whether the run fitted under it (or under the device's own memory) */
    if (c->memory_limit) cJSON_AddNumberToObject(o, "memory_limit_bytes", (double)c->memory_limit);
    cJSON_AddBoolToObject(o, "fits_in_memory", !r->mem.oom);
    if (r->mem.oom) {
        cJSON *oom = cJSON_AddObjectToObject(o, "out_of_memory");
        cJSON_AddNumberToObject(oom, "requested_bytes", (double)r->mem.oom_bytes);
        cJSON_AddStringToObject(oom, "category", ab_mem_category_name(r->mem.oom_cat));
        cJSON_AddStringToObject(oom, "allocating", r->mem.oom_label[0] ? r->mem.oom_label : "?");
        cJSON_AddNumberToObject(oom, "in_use_bytes", (double)r->mem.oom_in_use);
        cJSON_AddNumberToObject(oom, "would_need_bytes", (double)(r->mem.oom_in_use + r->mem.oom_bytes));
    }
}

/* the loss scaler: its settings, each overflow, and how its scale moved */
static void add_mixed_precision(cJSON *o, const ab_train_config *c, const ab_run_record *r) {
    const ab_scaler *s = &r->scaler;
    /* mixed precision in general (fp16 under amp, bf16, or none): "amp" names the fp16 precision alone */
    cJSON *a = cJSON_AddObjectToObject(o, "mixed_precision");
    cJSON_AddBoolToObject(a, "enabled", c->precision != AB_PREC_FP32);
    cJSON_AddStringToObject(a, "dtype", c->precision == AB_PREC_AMP ? "fp16" : c->precision == AB_PREC_BF16 ? "bf16" : "none");
    cJSON_AddBoolToObject(a, "dynamic", s->enabled && s->dynamic);
    cJSON_AddStringToObject(a, "loss_scale_mode", ab_scaler_mode(s));
    cJSON_AddNumberToObject(a, "init_scale", s->init_scale);
    if (s->dynamic || !s->enabled) { /* a static scale has no growth or backoff */
        cJSON_AddNumberToObject(a, "growth_factor", c->growth_factor);
        cJSON_AddNumberToObject(a, "backoff_factor", c->backoff_factor);
        cJSON_AddNumberToObject(a, "growth_interval", c->growth_interval);
    }
    cJSON_AddNumberToObject(a, "final_scale", s->scale);
    cJSON_AddNumberToObject(a, "skipped_steps", (double)s->skipped);
    cJSON *ev = cJSON_AddArrayToObject(a, "overflow_events");
    for (size_t i = 0; i < s->n_events; i++) {
        cJSON *j = cJSON_CreateObject();
        cJSON_AddNumberToObject(j, "step", (double)s->events[i].step);
        cJSON_AddNumberToObject(j, "epoch", s->events[i].epoch);
        cJSON_AddNumberToObject(j, "scale_before", s->events[i].scale_before);
        cJSON_AddNumberToObject(j, "scale_after", s->events[i].scale_after);
        cJSON_AddItemToArray(ev, j);
    }
    cJSON *sh = cJSON_AddObjectToObject(a, "scale_history");
    cJSON_AddNumberToObject(sh, "min", s->min_scale);
    cJSON_AddNumberToObject(sh, "max", s->max_scale);
    cJSON_AddNumberToObject(sh, "growths", (double)s->growths);
    cJSON_AddNumberToObject(sh, "backoffs", (double)s->backoffs);
    cJSON *ch = cJSON_AddArrayToObject(sh, "changes");
    for (size_t i = 0; i < s->n_changes; i++) {
        cJSON *j = cJSON_CreateObject();
        cJSON_AddNumberToObject(j, "step", (double)s->changes[i].step);
        cJSON_AddNumberToObject(j, "scale", s->changes[i].scale);
        cJSON_AddItemToArray(ch, j);
    }
}

static void add_loss_curve(cJSON *o, const ab_run_record *r) {
    cJSON *lc = cJSON_AddArrayToObject(o, "loss_curve");
    for (size_t i = 0; i < r->n_curve; i++) {
        cJSON *j = cJSON_CreateObject();
        cJSON_AddNumberToObject(j, "step", (double)r->curve[i].step);
        cJSON_AddNumberToObject(j, "epoch", r->curve[i].epoch);
        cJSON_AddItemToObject(j, "loss", num(r->curve[i].loss));
        cJSON_AddNumberToObject(j, "scale", r->curve[i].scale);
        cJSON_AddItemToArray(lc, j);
    }
}

/* the record, part by part in the schema's order (harness/schema/result.schema.json) */
static cJSON *build(const ab_train_config *c, const ab_run_record *r) {
    cJSON *o = cJSON_CreateObject();
    add_provenance(o, r);
    add_workload(o, c, r);
    cJSON_AddStringToObject(o, "precision", ab_precision_name(c->precision));
    cJSON_AddNumberToObject(o, "world_size", r->world_size > 0 ? r->world_size : 1);
    add_host(o, c, r);
    add_epochs(o, r);
    add_memory(o, c, r);
    add_mixed_precision(o, c, r);
    add_data_parallel(o, c, r);
    add_model_parallel(o, r);
    add_step_model(o, &r->step_model);
    add_loss_curve(o, r);
    if (r->census) cJSON_AddItemToObject(o, "grad_census", ab_census_json(r->census));
    if (r->test_pred && r->n_test_pred > 0) {
        cJSON *tp = predictions_json(r);
        if (tp) cJSON_AddItemToObject(o, "test_predictions", tp);
    }
    return o;
}

int ab_json_write_atomic(const char *path, const char *text) {
    const ab_file_part parts[2] = {{text, strlen(text)}, {"\n", 1}};
    return ab_write_parts_atomic(path, parts, 2);
}

int ab_result_write(const char *path, const ab_train_config *cfg, const ab_run_record *rec) {
    cJSON *o = build(cfg, rec);
    char *text = o ? cJSON_Print(o) : NULL;
    cJSON_Delete(o);
    if (!text) return ab_errorf("%s: out of memory building the result", path);
    const int rc = ab_json_write_atomic(path, text);
    cJSON_free(text);
    return rc;
}

const ab_record_ops ab_record_json = {.write = ab_result_write};
