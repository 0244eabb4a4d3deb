/* Loading a run folder (ampbench's result records, the PyTorch peers' records in the same format,
 * run.json), grouping runs by workload, the ratios, and harness/reported.json look-ups. */
#define _POSIX_C_SOURCE 200809L
#include <dirent.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fileio.h"
#include "harness.h"

double hr_num(const cJSON *o, const char *key, double dflt) {
    const cJSON *v = o ? cJSON_GetObjectItemCaseSensitive(o, key) : NULL;
    return cJSON_IsNumber(v) ? v->valuedouble : dflt;
}

const char *hr_str(const cJSON *o, const char *key, const char *dflt) {
    const cJSON *v = o ? cJSON_GetObjectItemCaseSensitive(o, key) : NULL;
    return cJSON_IsString(v) && v->valuestring ? v->valuestring : dflt;
}

static void copy_str(char *dst, size_t n, const char *src) { snprintf(dst, n, "%s", src ? src : ""); }

/* The tools whose records the harness reads: ampbench itself and its peers (peers/). */
static int known_tool(const char *t) { return !strcmp(t, "ampbench") || !strcmp(t, "pytorch"); }

/* In the order of core/mem.h's categories; their JSON keys are the core's (ab_mem_category_name). */
const char *const hr_mem_labels[] = {"weights (what the forward reads)", "master weights (fp32)", "gradients",
                                     "optimizer state", "activations", "workspace"};
_Static_assert(sizeof hr_mem_labels / sizeof hr_mem_labels[0] == HR_MEM_CATS,
               "a label for each memory category of core/mem.h in the comparable total");
/* every category but cpu_scratch counts in the comparable total (ab_mem_in_total): the first HR_MEM_CATS */
_Static_assert(AB_MEM_CPU_SCRATCH == AB_MEM_COUNT - 1, "cpu_scratch must stay the last memory category");

double hr_mem_cat(const hr_run *r, int k) { return k >= 0 && k < HR_MEM_CATS ? r->peak_cat[k] : NAN; }

int hr_read_file(const char *path, char **text) {
    FILE *f = fopen(path, "rb");
    if (!f) return ab_errorf("%s: cannot open: %s", path, strerror(errno));
    size_t cap = 1 << 16, len = 0;
    char *buf = malloc(cap);
    if (!buf) {
        fclose(f);
        return ab_errorf("%s: out of memory", path);
    }
    size_t got;
    while ((got = fread(buf + len, 1, cap - len - 1, f)) > 0) {
        len += got;
        if (cap - len - 1 == 0) {
            char *nb = realloc(buf, cap * 2);
            if (!nb) {
                free(buf);
                fclose(f);
                return ab_errorf("%s: out of memory", path);
            }
            buf = nb;
            cap *= 2;
        }
    }
    const int err = ferror(f);
    fclose(f);
    if (err) {
        free(buf);
        return ab_errorf("%s: read error", path);
    }
    buf[len] = 0;
    *text = buf;
    return 0;
}

int hr_mkdir_p(const char *path) { return ab_mkdir_p(path); }

int hr_write_atomic(const char *path, const char *text) { return ab_write_file_atomic(path, text, strlen(text)); }

const cJSON *hr_mixed_precision(const cJSON *record) {
    const cJSON *m = cJSON_GetObjectItemCaseSensitive(record, "mixed_precision");
    return m ? m : cJSON_GetObjectItemCaseSensitive(record, "amp");
}

/* the record's model_parallel block (absent: a run of one replica per rank) and the most memory
 * any rank held */
static void load_model_parallel(const cJSON *j, const cJSON *dp, hr_run *r) {
    const cJSON *m = cJSON_GetObjectItemCaseSensitive(j, "model_parallel"), *x;
    r->tensor_parallel = (int)hr_num(m, "tensor", 1);
    r->pipeline_parallel = (int)hr_num(m, "pipeline", 1);
    r->data_parallel = (int)hr_num(m, "data", r->world_size);
    r->model_split = r->tensor_parallel > 1 || r->pipeline_parallel > 1;
    r->tp_calls_step = hr_num(m, "tensor_allreduces_per_step", NAN);
    r->tp_bytes_step = hr_num(m, "tensor_bytes_sent_per_step", NAN);
    r->tp_bytes_model = hr_num(m, "tensor_bytes_sent_per_step_model", NAN);
    copy_str(r->pp_schedule, sizeof r->pp_schedule, hr_str(m, "pipeline_schedule", ""));
    r->pp_micro = (int)hr_num(m, "micro_batches", 0);
    r->pp_bubble_model = hr_num(m, "bubble_model", NAN);
    r->pp_bytes_max = r->pp_bytes_model_max = r->pp_idle_max = r->pp_stage0_bytes_model = NAN;
    int s = 0;
    cJSON_ArrayForEach(x, cJSON_GetObjectItemCaseSensitive(m, "stages")) {
        const double b = hr_num(x, "bytes_sent_per_step", NAN), bm = hr_num(x, "bytes_sent_per_step_model", NAN),
                     idle = hr_num(x, "idle_share", NAN);
        if (!(b <= r->pp_bytes_max)) r->pp_bytes_max = b;
        if (!(bm <= r->pp_bytes_model_max)) r->pp_bytes_model_max = bm;
        if (!(idle <= r->pp_idle_max)) r->pp_idle_max = idle;
        if (s++ == 0) r->pp_stage0_bytes_model = bm;
    }
    r->peak_rank_max = r->peak_total;
    cJSON_ArrayForEach(x, cJSON_GetObjectItemCaseSensitive(dp, "peak_memory_bytes_per_rank")) {
        if (cJSON_IsNumber(x) && !(x->valuedouble <= r->peak_rank_max)) r->peak_rank_max = x->valuedouble;
    }
}

/* Fills r from a parsed record; a record missing a required field is an error naming it. */
static int load_hits(const char *path, const cJSON *j, hr_run *r);

static int run_from_json(const char *path, cJSON *j, hr_run *r) {
    memset(r, 0, sizeof *r);
    copy_str(r->path, sizeof r->path, path);
    const char *base = strrchr(path, '/');
    base = base ? base + 1 : path;
    copy_str(r->name, sizeof r->name, base);
    char *dot = strrchr(r->name, '.');
    if (dot && strcmp(dot, ".json") == 0) *dot = 0;

    static const char *const required[] = {"workload", "precision", "epochs", "total_time_s", "samples_per_s",
                                           "peak_memory_bytes", "world_size", "host"};
    for (size_t i = 0; i < sizeof required / sizeof required[0]; i++)
        if (!cJSON_GetObjectItemCaseSensitive(j, required[i]))
            return ab_errorf("%s: not a complete %s result: no '%s'", path, hr_str(j, "tool", "ampbench"),
                             required[i]);
    const cJSON *wl = cJSON_GetObjectItemCaseSensitive(j, "workload");
    const cJSON *host = cJSON_GetObjectItemCaseSensitive(j, "host");
    const cJSON *ep = cJSON_GetObjectItemCaseSensitive(j, "epochs");
    const cJSON *mem = cJSON_GetObjectItemCaseSensitive(j, "peak_memory_bytes");
    const cJSON *amp = hr_mixed_precision(j);
    if (!amp)
        return ab_errorf("%s: not a complete %s result: no 'mixed_precision' (or 'amp', its older name)", path,
                         hr_str(j, "tool", "ampbench"));
    const cJSON *dp = cJSON_GetObjectItemCaseSensitive(j, "data_parallel");
    if (!cJSON_IsArray(ep)) return ab_errorf("%s: 'epochs' is not an array", path);
    if (!cJSON_IsObject(mem) || !cJSON_IsNumber(cJSON_GetObjectItemCaseSensitive(mem, "total")))
        return ab_errorf("%s: 'peak_memory_bytes.total' is missing", path);
    if (!cJSON_IsNumber(cJSON_GetObjectItemCaseSensitive(j, "samples_per_s")) ||
        !cJSON_IsNumber(cJSON_GetObjectItemCaseSensitive(j, "total_time_s")))
        return ab_errorf("%s: 'samples_per_s' or 'total_time_s' is not a number", path);

    copy_str(r->tool, sizeof r->tool, hr_str(j, "tool", "ampbench"));
    r->peer = strcmp(r->tool, "ampbench") != 0;
    copy_str(r->model, sizeof r->model, hr_str(wl, "model", "?"));
    copy_str(r->dataset, sizeof r->dataset, hr_str(wl, "dataset", "?"));
    copy_str(r->precision, sizeof r->precision, hr_str(j, "precision", "?"));
    copy_str(r->backend, sizeof r->backend, hr_str(host, "backend", "?"));
    copy_str(r->device, sizeof r->device, hr_str(host, "device", hr_str(host, "cpu", "?")));
    copy_str(r->engine, sizeof r->engine, hr_str(dp, "engine", ""));
    r->world_size = (int)hr_num(j, "world_size", 1);
    if (r->world_size < 1) r->world_size = 1;
    r->seed = (int)hr_num(wl, "seed", 1);
    r->complete = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(j, "complete"));
    r->interrupted = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(j, "interrupted"));
    r->resumes = cJSON_GetArraySize(cJSON_GetObjectItemCaseSensitive(j, "resumed_at_steps"));
    copy_str(r->commit, sizeof r->commit, hr_str(j, "git_commit", "unknown"));
    const cJSON *dirty = cJSON_GetObjectItemCaseSensitive(j, "git_dirty");
    r->dirty = cJSON_IsBool(dirty) ? cJSON_IsTrue(dirty) : -1;
    r->epochs_requested = (int)hr_num(wl, "epochs", 0);
    r->max_steps = (long)hr_num(wl, "max_steps", 0);
    r->batch_size = (long)hr_num(wl, "batch_size", 0);
    r->train_samples = (long)hr_num(wl, "train_samples", 0);
    r->test_samples = (long)hr_num(wl, "test_samples", 0);
    r->train_subset = (long)hr_num(wl, "train_subset", 0);
    r->test_subset = (long)hr_num(wl, "test_subset", 0);
    r->epochs_done = cJSON_GetArraySize(ep);
    r->final_accuracy = NAN;
    r->final_train_loss = NAN;
    double sum_t = 0;
    const cJSON *e;
    cJSON_ArrayForEach(e, ep) {
        r->steps += (long)hr_num(e, "steps", 0);
        sum_t += hr_num(e, "time_s", 0);
        r->final_accuracy = hr_num(e, "test_accuracy", NAN);
        r->final_train_loss = hr_num(e, "train_loss", NAN);
    }
    r->final_accuracy = hr_num(j, "final_test_accuracy", r->final_accuracy);
    r->mean_epoch_time_s = r->epochs_done ? sum_t / r->epochs_done : NAN;
    r->total_time_s = hr_num(j, "total_time_s", NAN);
    r->samples_per_s = hr_num(j, "samples_per_s", NAN);
    r->peak_total = hr_num(mem, "total", NAN);
    for (int k = 0; k < HR_MEM_CATS; k++) r->peak_cat[k] = hr_num(mem, ab_mem_category_name((ab_mem_category)k), 0);
    r->peak_cpu_scratch = hr_num(mem, ab_mem_category_name(AB_MEM_CPU_SCRATCH), NAN);
    r->peak_total_with_scratch = hr_num(mem, "total_with_cpu_scratch", NAN);
    copy_str(r->mem_method, sizeof r->mem_method, hr_str(mem, "method", ""));
    /* a peer on a CPU may record no memory at all (total 0): not measured, not zero */
    if (r->peer && !(r->peak_total > 0)) r->peak_total = NAN;
    const cJSON *ov = cJSON_GetObjectItemCaseSensitive(amp, "overflow_events");
    r->overflow_events = cJSON_IsArray(ov) ? cJSON_GetArraySize(ov) : 0;
    r->skipped_steps = (long)hr_num(amp, "skipped_steps", 0);
    r->init_scale = hr_num(amp, "init_scale", NAN);
    r->final_scale = hr_num(amp, "final_scale", NAN);
    r->static_scale = strcmp(hr_str(amp, "loss_scale_mode", "dynamic"), "static") == 0 ? r->init_scale : 0.0;
    const cJSON *proj = cJSON_GetObjectItemCaseSensitive(j, "projection");
    r->has_projection = cJSON_IsArray(cJSON_GetObjectItemCaseSensitive(proj, "points"));
    copy_str(r->step_source, sizeof r->step_source, hr_str(proj, "step_source", ""));
    const cJSON *sm = cJSON_GetObjectItemCaseSensitive(j, "step_model");
    r->model_step_s = hr_num(sm, "step_time_s", NAN);
    r->model_samples_per_step = (double)r->batch_size * hr_num(wl, "accum_steps", 1) * hr_num(j, "world_size", 1);
    copy_str(r->model_gpu, sizeof r->model_gpu, hr_str(sm, "gpu", ""));
    copy_str(r->model_gpu_label, sizeof r->model_gpu_label, hr_str(sm, "gpu_label", ""));
    r->did_not_fit = cJSON_IsFalse(cJSON_GetObjectItemCaseSensitive(j, "fits_in_memory"));
    r->memory_limit = hr_num(j, "memory_limit_bytes", NAN);
    r->oom_would_need = hr_num(cJSON_GetObjectItemCaseSensitive(j, "out_of_memory"), "would_need_bytes", NAN);
    copy_str(r->dp_sync, sizeof r->dp_sync, hr_str(dp, "sync", "ring"));
    r->dp_shards = (int)hr_num(dp, "ps_shards", 0);
    const cJSON *ovl = cJSON_GetObjectItemCaseSensitive(dp, "overlap");
    r->dp_overlap = cJSON_IsBool(ovl) ? cJSON_IsTrue(ovl) : 1;
    r->accum_steps = (int)hr_num(wl, "accum_steps", hr_num(dp, "accum_steps", 1));
    r->dp_exposed_s = hr_num(dp, "allreduce_exposed_time_per_step_s", NAN);
    r->dp_busy_s = hr_num(dp, "allreduce_busy_time_per_step_s", NAN);
    r->dp_pull_s = hr_num(dp, "ps_pull_time_per_step_s", 0);
    r->dp_sent_max = NAN;
    const cJSON *sent = cJSON_GetObjectItemCaseSensitive(dp, "bytes_sent_per_step_per_rank"), *b;
    cJSON_ArrayForEach(b, sent) {
        if (cJSON_IsNumber(b) && !(b->valuedouble <= r->dp_sent_max)) r->dp_sent_max = b->valuedouble;
    }
    load_model_parallel(j, dp, r);
    AB_TRY(load_hits(path, j, r));
    r->json = j;
    return 0;
}

int hr_run_load(const char *path, hr_run *r) {
    char *text;
    AB_TRY(hr_read_file(path, &text));
    cJSON *j = cJSON_Parse(text);
    free(text);
    if (!j) return ab_errorf("%s: not valid JSON", path);
    if (!cJSON_IsObject(j) || !known_tool(hr_str(j, "tool", ""))) {
        cJSON_Delete(j);
        return ab_errorf("%s: not an ampbench or peer result (no \"tool\": \"ampbench\" or \"pytorch\")", path);
    }
    if (run_from_json(path, j, r) != 0) {
        cJSON_Delete(j);
        r->json = NULL;
        free(r->hit);
        r->hit = NULL;
        return -1;
    }
    return 0;
}

void hr_run_free(hr_run *r) {
    cJSON_Delete(r->json);
    r->json = NULL;
    free(r->hit);
    r->hit = NULL;
}

/* base64 (RFC 4648) into out (at most cap bytes); the bytes written, or -1 when it is not base64 */
static long unbase64(const char *in, uint8_t *out, size_t cap) {
    uint32_t v = 0;
    int bits = 0;
    size_t n = 0;
    for (const char *p = in; *p && *p != '='; p++) {
        const char c = *p;
        const int d = c >= 'A' && c <= 'Z' ? c - 'A' : c >= 'a' && c <= 'z' ? c - 'a' + 26
                      : c >= '0' && c <= '9' ? c - '0' + 52 : c == '+' ? 62 : c == '/' ? 63 : -1;
        if (d < 0) return -1;
        v = v << 6 | (uint32_t)d;
        bits += 6;
        if (bits >= 8) {
            bits -= 8;
            if (n >= cap) return -1;
            out[n++] = (uint8_t)(v >> bits & 255);
        }
    }
    return (long)n;
}

/* test_predictions.correct into r->hit; a record without it keeps NULL, one that lies is an error */
static int load_hits(const char *path, const cJSON *j, hr_run *r) {
    const cJSON *tp = cJSON_GetObjectItemCaseSensitive(j, "test_predictions");
    if (!tp) return 0;
    const long n = (long)hr_num(tp, "n", 0);
    const char *bits = hr_str(tp, "correct", NULL);
    if (n <= 0 || !bits) return ab_errorf("%s: test_predictions without n or correct", path);
    const size_t bytes = (size_t)(n + 7) / 8;
    uint8_t *raw = malloc(bytes + 3), *hit = malloc((size_t)n);
    if (!raw || !hit) {
        free(raw);
        free(hit);
        return ab_errorf("out of memory for %s's predictions", path);
    }
    const long got = unbase64(bits, raw, bytes + 3);
    if (got != (long)bytes) {
        free(raw);
        free(hit);
        return ab_errorf("%s: test_predictions.correct holds %ld bytes, %zu for %ld examples", path, got, bytes, n);
    }
    for (long i = 0; i < n; i++) hit[i] = raw[i / 8] >> (i % 8) & 1;
    free(raw);
    r->hit = hit;
    r->n_hit = n;
    return 0;
}

void hr_run_summary_line(const hr_run *r, char *buf, size_t n) {
    char mem[48];
    if (isfinite(r->peak_total)) snprintf(mem, sizeof mem, "peak %.2f MB", r->peak_total / 1e6);
    else snprintf(mem, sizeof mem, "peak memory not measured");
    char prec[96];
    if (r->static_scale > 0) snprintf(prec, sizeof prec, "%s (static loss scale %g)", r->precision, r->static_scale);
    else snprintf(prec, sizeof prec, "%s", r->precision);
    snprintf(buf, n, "%s%s%s %s %d rank%s: %ld steps in %.2f s, %.0f samples/s, %s, %.2f%% test accuracy%s",
             r->peer ? r->tool : "", r->peer ? " " : "", prec, r->backend, r->world_size,
             r->world_size == 1 ? "" : "s", r->steps, r->total_time_s, r->samples_per_s, mem, r->final_accuracy,
             r->complete ? "" : (r->interrupted ? " (interrupted)" : " (incomplete)"));
}

static int cmp_str(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

static void load_manifest(hr_runset *rs, const char *path) {
    char *text;
    if (hr_read_file(path, &text) != 0) return;
    rs->manifest = cJSON_Parse(text);
    free(text);
    const cJSON *runs = cJSON_GetObjectItemCaseSensitive(rs->manifest, "runs");
    const cJSON *e;
    cJSON_ArrayForEach(e, runs) {
        if (rs->n_planned >= HR_MAX_RUNS) break;
        hr_planned *p = &rs->planned[rs->n_planned++];
        copy_str(p->name, sizeof p->name, hr_str(e, "name", ""));
        copy_str(p->workload, sizeof p->workload, hr_str(e, "workload", ""));
        copy_str(p->mode, sizeof p->mode, hr_str(e, "mode", ""));
        copy_str(p->status, sizeof p->status, hr_str(e, "status", ""));
        copy_str(p->reason, sizeof p->reason, hr_str(e, "reason", ""));
        copy_str(p->tool, sizeof p->tool, hr_str(e, "tool", "ampbench"));
    }
    copy_str(rs->peers_note, sizeof rs->peers_note, hr_str(rs->manifest, "peers", ""));
}

static int fit_from_json(const char *path, const cJSON *j, hr_runset *rs) {
    if (rs->n_fits >= HR_MAX_RUNS) return ab_errorf("%s: more than %d --find-max-batch records", rs->dir, HR_MAX_RUNS);
    hr_fit *f = &rs->fits[rs->n_fits];
    memset(f, 0, sizeof *f);
    const char *base = strrchr(path, '/');
    snprintf(f->name, sizeof f->name, "%.127s", base ? base + 1 : path);
    char *dot = strrchr(f->name, '.');
    if (dot && strcmp(dot, ".json") == 0) *dot = 0;
    const double mb = hr_num(j, "max_batch", NAN), pk = hr_num(j, "peak_memory_at_max_batch_bytes", NAN);
    if (!isfinite(mb) || mb < 0 || !isfinite(pk) || !*hr_str(j, "model", "") || !*hr_str(j, "precision", ""))
        return ab_errorf("%s: not a complete --find-max-batch record (model, precision, max_batch, "
                         "peak_memory_at_max_batch_bytes)", path);
    copy_str(f->model, sizeof f->model, hr_str(j, "model", ""));
    copy_str(f->precision, sizeof f->precision, hr_str(j, "precision", ""));
    copy_str(f->backend, sizeof f->backend, hr_str(j, "backend", "?"));
    copy_str(f->limited_by, sizeof f->limited_by, hr_str(j, "limited_by", "?"));
    f->memory_limit = hr_num(j, "memory_limit_bytes", NAN);
    f->max_batch = (long)mb;
    f->peak_at_max = pk;
    f->first_refused = (long)hr_num(j, "first_batch_refused", 0);
    f->refused_would_need = hr_num(j, "refused_would_need_bytes", NAN);
    f->max_seq_len = (int)hr_num(j, "max_seq_len", 0);
    rs->n_fits++;
    return 0;
}

/* The fewest micro-batches per synchronisation any of a model's ampbench runs used: the workload's
 * own (0 when none ran) */
static int base_accum(const hr_runset *rs, const char *model) {
    int a = 0;
    for (int i = 0; i < rs->n_runs; i++) {
        const hr_run *r = &rs->runs[i];
        if (!r->peer && !strcmp(r->model, model) && (a == 0 || r->accum_steps < a)) a = r->accum_steps;
    }
    return a;
}

/* the mode run_all.sh planned for a run of this name ("" when the folder has no manifest) */
static const char *planned_mode(const hr_runset *rs, const char *name) {
    for (int i = 0; i < rs->n_planned; i++)
        if (!strcmp(rs->planned[i].name, name)) return rs->planned[i].mode;
    return "";
}

/* whether r is a data-parallel run of another pattern than the standard one: the parameter
 * server, no overlap, more micro-batches per synchronisation than the workload's own, or a run
 * run_all.sh planned as one of those (dp-amp-ps, dp-amp-off, dp-amp-acc4) */
static int dp_variant(const hr_runset *rs, const hr_run *r) {
    if (r->peer || r->world_size <= 1) return 0;
    const int base = base_accum(rs, r->model);
    return strcmp(r->dp_sync, "ring") != 0 || !r->dp_overlap || (base > 0 && r->accum_steps > base) ||
           strncmp(planned_mode(rs, r->name), "dp-amp-", 7) == 0;
}

int hr_runset_load(const char *dir, hr_runset *rs) {
    memset(rs, 0, sizeof *rs);
    copy_str(rs->dir, sizeof rs->dir, dir);
    DIR *d = opendir(dir);
    if (!d) return ab_errorf("%s: cannot open run folder: %s", dir, strerror(errno));
    char **names = NULL;
    int n = 0, cap = 0, rc = 0;
    struct dirent *de;
    while ((de = readdir(d))) {
        const size_t len = strlen(de->d_name);
        if (len < 6 || strcmp(de->d_name + len - 5, ".json") != 0) continue;
        if (n == cap) {
            cap = cap ? 2 * cap : 256;
            char **nn = realloc(names, (size_t)cap * sizeof *names);
            if (!nn) {
                rc = ab_errorf("%s: out of memory", dir);
                break;
            }
            names = nn;
        }
        if (!(names[n] = strdup(de->d_name))) {
            rc = ab_errorf("%s: out of memory", dir);
            break;
        }
        n++;
    }
    closedir(d);
    if (n > 0) qsort(names, (size_t)n, sizeof names[0], cmp_str);
    for (int i = 0; i < n && rc == 0; i++) {
        char path[1200];
        snprintf(path, sizeof path, "%s/%s", dir, names[i]);
        if (strcmp(names[i], "run.json") == 0) {
            load_manifest(rs, path);
            continue;
        }
        char *text;
        if (hr_read_file(path, &text) != 0) {
            rc = -1;
            break;
        }
        cJSON *j = cJSON_Parse(text);
        free(text);
        if (!j) {
            rc = ab_errorf("%s: not valid JSON", path);
            break;
        }
        if (cJSON_IsObject(j) && !strcmp(hr_str(j, "tool", ""), "ampbench-fit")) {
            rc = fit_from_json(path, j, rs);
            cJSON_Delete(j);
            continue;
        }
        if (!cJSON_IsObject(j) || !known_tool(hr_str(j, "tool", ""))) {
            cJSON_Delete(j); /* another tool's file (benchmark JSON, ...) */
            continue;
        }
        if (rs->n_runs >= HR_MAX_RUNS) {
            cJSON_Delete(j);
            rc = ab_errorf("%s: more than %d results", dir, HR_MAX_RUNS);
            break;
        }
        if (run_from_json(path, j, &rs->runs[rs->n_runs]) != 0) {
            cJSON_Delete(j);
            rc = -1;
            break;
        }
        rs->n_runs++;
    }
    for (int i = 0; i < n; i++) free(names[i]);
    free(names);
    for (int i = 0; rc == 0 && i < rs->n_runs; i++) rs->runs[i].dp_variant = dp_variant(rs, &rs->runs[i]);
    if (rc != 0) hr_runset_free(rs);
    return rc;
}

void hr_runset_free(hr_runset *rs) {
    for (int i = 0; i < rs->n_runs; i++) hr_run_free(&rs->runs[i]);
    rs->n_runs = 0;
    cJSON_Delete(rs->manifest);
    rs->manifest = NULL;
}

/* When several runs fit a slot, the complete one with the most steps wins. */
static const hr_run *better(const hr_run *cur, const hr_run *cand) {
    if (!cur) return cand;
    if (cand->complete != cur->complete) return cand->complete ? cand : cur;
    return cand->steps > cur->steps ? cand : cur;
}

/* The slots hold the lowest seed's run; among runs of one seed, better() decides. */
static const hr_run *pick(const hr_run *cur, const hr_run *cand) {
    if (!cur || cand->seed < cur->seed) return cand;
    if (cand->seed > cur->seed) return cur;
    return better(cur, cand);
}

static int same_mode(const hr_run *a, const hr_run *b) {
    return !strcmp(a->tool, b->tool) && !strcmp(a->precision, b->precision) && a->world_size == b->world_size;
}

const hr_run *hr_mode_run(const hr_run *const *list, int n, const hr_run *r) {
    const hr_run *best = NULL;
    for (int i = 0; i < n; i++)
        if (same_mode(list[i], r)) best = pick(best, list[i]);
    return best;
}

/* The most distinct seeds that any one mode (tool, precision, ranks) of list[0..n) ran with. */
static int most_seeds(const hr_run *const *list, int n) {
    int most = 1;
    for (int m = 0; m < n; m++) {
        int first_of_mode = 1;
        for (int k = 0; k < m && first_of_mode; k++) first_of_mode = !same_mode(list[k], list[m]);
        if (!first_of_mode) continue; /* each mode is counted once, from its first run */
        int count = 0;
        for (int i = m; i < n; i++) {
            if (!same_mode(list[i], list[m])) continue;
            int new_seed = 1;
            for (int k = m; k < i && new_seed; k++)
                new_seed = !(same_mode(list[k], list[m]) && list[k]->seed == list[i]->seed);
            count += new_seed;
        }
        if (count > most) most = count;
    }
    return most;
}

static int run_order(const hr_run *r) {
    const int p = !strcmp(r->precision, "fp32") ? 0 : !strcmp(r->precision, "amp") ? 1 : 2;
    return (r->world_size > 1 ? 10 : 0) + p;
}

/* Inserts r into list (n entries) in run_order: FP32, AMP, BF16, then the data-parallel runs. */
static void insert_ordered(const hr_run **list, int *n, const hr_run *r) {
    int at = *n;
    while (at > 0 && run_order(list[at - 1]) > run_order(r)) {
        list[at] = list[at - 1];
        at--;
    }
    list[at] = r;
    (*n)++;
}

/* one run per variant (sync, servers, overlap, accumulation): the lowest seed's */
static void add_variant(hr_workload *w, const hr_run *r) {
    for (int k = 0; k < w->n_dp_var; k++) {
        const hr_run *v = w->dp_var[k];
        if (!strcmp(v->dp_sync, r->dp_sync) && v->dp_shards == r->dp_shards && v->dp_overlap == r->dp_overlap &&
            v->accum_steps == r->accum_steps && v->world_size == r->world_size && !strcmp(v->precision, r->precision)) {
            w->dp_var[k] = pick(v, r);
            return;
        }
    }
    if (w->n_dp_var < (int)(sizeof w->dp_var / sizeof w->dp_var[0])) w->dp_var[w->n_dp_var++] = r;
}

int hr_group_workloads(const hr_runset *rs, hr_workload *out, int max, int *n) {
    *n = 0;
    for (int i = 0; i < rs->n_runs; i++) {
        const hr_run *r = &rs->runs[i];
        hr_workload *w = NULL;
        for (int k = 0; k < *n; k++)
            if (strcmp(out[k].model, r->model) == 0) w = &out[k];
        if (!w) {
            if (*n >= max) return ab_errorf("%s: more than %d workloads", rs->dir, max);
            w = &out[(*n)++];
            memset(w, 0, sizeof *w);
            copy_str(w->model, sizeof w->model, r->model);
        }
        /* tables and plot legends in run_order; a peer's runs never fill ampbench's slots */
        const hr_run **fp32 = r->peer ? &w->peer_fp32 : &w->fp32, **amp = r->peer ? &w->peer_amp : &w->amp,
                     **dp = r->peer ? &w->peer_dp : &w->dp;
        if (r->model_split && !r->peer) { /* tensor groups or pipeline stages: compared apart */
            const hr_run **slot = r->tensor_parallel > 1 ? &w->tp : &w->pp;
            *slot = pick(*slot, r);
            continue;
        }
        if (r->dp_variant) { /* another data-parallel pattern, fitted or not: compared apart */
            add_variant(w, r);
            continue;
        }
        if (r->did_not_fit && !r->peer) { /* a measured "no", not a run to take ratios from */
            if (r->world_size == 1 && !strcmp(r->precision, "fp32")) w->oom_fp32 = r;
            if (r->world_size == 1 && !strcmp(r->precision, "amp")) w->oom_amp = r;
            if (r->world_size > 1 && !strcmp(r->precision, "amp")) w->oom_dp = r;
            continue;
        }
        if (r->static_scale > 0) { /* the ablation: beside AMP, not in its place */
            const hr_run **st = r->peer ? &w->peer_amp_static : &w->amp_static;
            if (r->world_size == 1) *st = pick(*st, r);
            continue;
        }
        if (r->peer) {
            insert_ordered(w->peer_all, &w->n_peer, r);
            copy_str(w->peer_tool, sizeof w->peer_tool, r->tool);
        } else {
            insert_ordered(w->all, &w->n_all, r);
        }
        if (r->world_size == 1 && strcmp(r->precision, "fp32") == 0) *fp32 = pick(*fp32, r);
        if (r->world_size == 1 && strcmp(r->precision, "amp") == 0) *amp = pick(*amp, r);
        if (r->world_size > 1 && strcmp(r->precision, "amp") == 0) *dp = pick(*dp, r);
    }
    for (int k = 0; k < *n; k++) {
        const int a = most_seeds(out[k].all, out[k].n_all), p = most_seeds(out[k].peer_all, out[k].n_peer);
        out[k].max_seeds = a > p ? a : p;
    }
    for (int i = 0; i < rs->n_fits; i++)
        for (int k = 0; k < *n; k++) {
            if (strcmp(out[k].model, rs->fits[i].model) != 0) continue;
            if (!strcmp(rs->fits[i].precision, "fp32")) out[k].fit_fp32 = &rs->fits[i];
            if (!strcmp(rs->fits[i].precision, "amp")) out[k].fit_amp = &rs->fits[i];
        }
    return 0;
}

void hr_peer_view(const hr_workload *w, hr_workload *view) {
    memset(view, 0, sizeof *view);
    copy_str(view->model, sizeof view->model, w->model);
    view->fp32 = w->peer_fp32;
    view->amp = w->peer_amp;
    view->dp = w->peer_dp;
    memcpy(view->all, w->peer_all, sizeof view->all);
    view->n_all = w->n_peer;
    view->max_seeds = w->max_seeds;
}

void hr_mean_sd(const double *v, int n, double *mean, double *sd) {
    double sum = 0, ss = 0;
    for (int i = 0; i < n; i++) sum += v[i];
    *mean = n > 0 ? sum / n : NAN;
    for (int i = 0; i < n; i++) ss += (v[i] - *mean) * (v[i] - *mean);
    *sd = n > 1 ? sqrt(ss / (n - 1)) : NAN;
}

static void group_stats(hr_seed_group *g) {
    double acc[HR_MAX_RUNS] = {0}, loss = 0;
    int n_loss = 0;
    g->acc_min = g->n ? INFINITY : NAN;
    g->acc_max = g->n ? -INFINITY : NAN;
    for (int i = 0; i < g->n; i++) {
        acc[i] = g->runs[i]->final_accuracy;
        g->acc_min = fmin(g->acc_min, acc[i]);
        g->acc_max = fmax(g->acc_max, acc[i]);
        if (isfinite(g->runs[i]->final_train_loss)) {
            loss += g->runs[i]->final_train_loss;
            n_loss++;
        }
    }
    hr_mean_sd(acc, g->n, &g->acc_mean, &g->acc_sd);
    g->loss_mean = n_loss ? loss / n_loss : NAN;
}

/* Adds the runs of list to the groups: one group per mode, one run per seed (ascending). */
static int add_groups(const hr_run *const *list, int n_list, int complete_only, hr_seed_group *out, int max,
                      int *n) {
    for (int i = 0; i < n_list; i++) {
        const hr_run *r = list[i];
        if (complete_only && (!r->complete || !isfinite(r->final_accuracy))) continue;
        hr_seed_group *g = NULL;
        for (int k = 0; k < *n && !g; k++)
            if (!strcmp(out[k].tool, r->tool) && !strcmp(out[k].precision, r->precision) &&
                out[k].world_size == r->world_size)
                g = &out[k];
        if (!g) {
            if (*n >= max) return ab_errorf("%s: more than %d tool and mode groups", r->model, max);
            g = &out[(*n)++];
            memset(g, 0, sizeof *g);
            copy_str(g->tool, sizeof g->tool, r->tool);
            copy_str(g->precision, sizeof g->precision, r->precision);
            g->world_size = r->world_size;
            g->peer = r->peer;
        }
        int at = 0;
        while (at < g->n && g->runs[at]->seed < r->seed) at++;
        if (at < g->n && g->runs[at]->seed == r->seed) { /* the same seed twice: one run stands for it */
            g->runs[at] = pick(g->runs[at], r);
            continue;
        }
        memmove(&g->runs[at + 1], &g->runs[at], (size_t)(g->n - at) * sizeof g->runs[0]);
        g->runs[at] = r;
        g->n++;
    }
    return 0;
}

int hr_seed_groups(const hr_workload *w, int complete_only, hr_seed_group *out, int max, int *n) {
    *n = 0;
    AB_TRY(add_groups(w->all, w->n_all, complete_only, out, max, n));
    AB_TRY(add_groups(w->peer_all, w->n_peer, complete_only, out, max, n));
    for (int k = 0; k < *n; k++) group_stats(&out[k]);
    return 0;
}

double hr_t95(double df) {
    /* two-sided 95%: the 0.975 quantile of Student's t */
    static const double t[31] = {NAN,   12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228,
                                 2.201, 2.179,  2.160, 2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086, 2.080,
                                 2.074, 2.069,  2.064, 2.060, 2.056, 2.052, 2.048, 2.045, 2.042};
    if (!(df >= 1)) return NAN;
    /* a fractional df (Welch's) is rounded down: the larger quantile, the wider interval */
    return df > 30 ? 1.96 : t[(int)floor(df)];
}

/* N when every run of g was evaluated on the same N test examples, else 0 */
static long group_test_n(const hr_seed_group *g) {
    long n = g->n ? g->runs[0]->test_samples : 0;
    for (int i = 1; i < g->n; i++)
        if (g->runs[i]->test_samples != n) return 0;
    return n > 0 ? n : 0;
}

void hr_diff_interval(const hr_seed_group *a, const hr_seed_group *b, int allow_pairing, hr_interval *o) {
    memset(o, 0, sizeof *o);
    o->n_a = a->n;
    o->n_b = b->n;
    o->mean = a->acc_mean - b->acc_mean;
    o->df = o->t = o->lo = o->hi = o->se_seeds = o->se_test = NAN;
    int same = allow_pairing && a->n == b->n;
    for (int i = 0; i < a->n && same; i++) same = a->runs[i]->seed == b->runs[i]->seed;
    o->paired = same;
    const long na = group_test_n(a), nb = group_test_n(b);
    o->test_n = na && na == nb ? na : 0;
    int with_hits = same && o->test_n;
    for (int i = 0; i < a->n && with_hits; i++)
        with_hits = a->runs[i]->hit && b->runs[i]->hit && a->runs[i]->n_hit == o->test_n &&
                    b->runs[i]->n_hit == o->test_n;
    if (with_hits) { /* the covariance known, seed by seed */
        const double N = (double)o->test_n;
        double se_sum = 0.0;
        for (int i = 0; i < a->n; i++) {
            long ab = 0, ba = 0;
            for (long k = 0; k < o->test_n; k++) {
                ab += a->runs[i]->hit[k] && !b->runs[i]->hit[k];
                ba += !a->runs[i]->hit[k] && b->runs[i]->hit[k];
            }
            o->disc_ab[i] = ab, o->disc_ba[i] = ba, o->seed[i] = a->runs[i]->seed;
            o->mcnemar_p[i] = hr_mcnemar_p(ab, ba);
            const double p10 = ab / N, p01 = ba / N;
            se_sum += sqrt(fmax(0.0, p10 + p01 - (p10 - p01) * (p10 - p01)) / N);
        }
        o->se_test = 100.0 * se_sum / a->n;
        o->test_paired = 1;
    } else if (o->test_n) {
        const double pa = a->acc_mean / 100.0, pb = b->acc_mean / 100.0;
        o->se_test = 100.0 * sqrt(fmax(0.0, pa * (1.0 - pa) + pb * (1.0 - pb)) / (double)o->test_n);
    }
    if (a->n < 2 || b->n < 2) return;
    if (same) {
        /* per-seed differences: the seed fixes the initialisation and the data order in both runs */
        const int n = a->n;
        double d[HR_MAX_RUNS], sd;
        for (int i = 0; i < n; i++) d[i] = a->runs[i]->final_accuracy - b->runs[i]->final_accuracy;
        hr_mean_sd(d, n, &o->mean, &sd);
        o->df = n - 1;
        o->t = hr_t95(o->df);
        o->se_seeds = sd / sqrt((double)n);
    } else {
        const double va = a->acc_sd * a->acc_sd / a->n, vb = b->acc_sd * b->acc_sd / b->n;
        const double se2 = va + vb;
        /* Welch-Satterthwaite; with no spread on either side the pooled df stands in */
        o->df = se2 > 0 ? se2 * se2 / (va * va / (a->n - 1) + vb * vb / (b->n - 1)) : a->n + b->n - 2;
        o->t = hr_t95(o->df);
        o->se_seeds = sqrt(se2);
    }
    double ht = isfinite(o->se_test) ? 1.96 * o->se_test : 0.0;
    if (o->test_paired) ht = fmax(ht, 100.0 * (1.0 - pow(0.025, 1.0 / (double)o->test_n)));
    const double hs = o->t * o->se_seeds;
    const double half = sqrt(hs * hs + ht * ht);
    o->lo = o->mean - half;
    o->hi = o->mean + half;
}

double hr_mcnemar_p(long b, long c) {
    const long n = b + c, k = b < c ? b : c;
    if (n == 0) return 1.0;
    /* 2 P(X <= k), X ~ Binomial(n, 1/2), through log-gamma for large n */
    double p = 0.0;
    for (long i = 0; i <= k; i++) p += exp(lgamma(n + 1.0) - lgamma(i + 1.0) - lgamma(n - i + 1.0) - n * log(2.0));
    return fmin(1.0, 2.0 * p);
}

const hr_run *hr_projection_run(const hr_workload *w) {
    /* A multi-GPU run's projection rests on a measured NCCL bandwidth; otherwise the single-device
     * AMP run's compute time is the clean base (CPU ranks contend for the same cores). */
    if (w->dp && w->dp->has_projection && strcmp(w->dp->engine, "nccl") == 0) return w->dp;
    if (w->amp && w->amp->has_projection) return w->amp;
    if (w->dp && w->dp->has_projection) return w->dp;
    for (int i = 0; i < w->n_all; i++)
        if (w->all[i]->has_projection) return w->all[i];
    return NULL;
}

static int usable(const hr_run *r) { return r && isfinite(r->samples_per_s) && r->samples_per_s > 0; }

void hr_compute_ratios(const hr_workload *w, int proj_n, const char *proj_kind, hr_ratios *o) {
    memset(o, 0, sizeof *o);
    o->amp_time_saving_pct = o->amp_memory_saving_pct = o->amp_accuracy_delta = NAN;
    o->dp_speedup_vs_amp = o->dp_speedup_vs_fp32 = o->dp_efficiency_pct = o->dp_time_saving_pct = NAN;
    o->proj_speedup = o->proj_efficiency_pct = o->proj_epoch_time_s = o->proj_speedup_vs_fp32 = NAN;
    o->proj_bandwidth_Bps = o->proj_latency_s = NAN;
    o->model_amp_time_saving_pct = NAN;
    o->model_gpu[0] = o->model_gpu_label[0] = 0;
    const hr_run *f = w->fp32, *a = w->amp, *d = w->dp;
    if (f && a && f->model_step_s > 0 && a->model_step_s > 0 && strcmp(f->model_gpu, a->model_gpu) == 0 &&
        f->model_samples_per_step > 0 && a->model_samples_per_step > 0) {
        /* per sample: the two runs may differ in batch (AMP at a batch FP32 cannot hold) */
        o->model_amp_time_saving_pct = 100.0 * (1.0 - (a->model_step_s / a->model_samples_per_step) /
                                                          (f->model_step_s / f->model_samples_per_step));
        copy_str(o->model_gpu, sizeof o->model_gpu, a->model_gpu);
        copy_str(o->model_gpu_label, sizeof o->model_gpu_label, a->model_gpu_label);
    }
    if (usable(f) && usable(a)) {
        /* Same work in both runs, so the time ratio is the inverse throughput ratio; throughput
         * also stays comparable when one of the two was interrupted. */
        o->amp_time_saving_pct = 100.0 * (1.0 - f->samples_per_s / a->samples_per_s);
        if (f->peak_total > 0 && isfinite(a->peak_total))
            o->amp_memory_saving_pct = 100.0 * (1.0 - a->peak_total / f->peak_total);
        if (isfinite(f->final_accuracy) && isfinite(a->final_accuracy))
            o->amp_accuracy_delta = a->final_accuracy - f->final_accuracy;
    }
    if (usable(d)) {
        o->dp_ranks = d->world_size;
        if (usable(a)) {
            o->dp_speedup_vs_amp = d->samples_per_s / a->samples_per_s;
            o->dp_efficiency_pct = 100.0 * o->dp_speedup_vs_amp / d->world_size;
            o->dp_time_saving_pct = 100.0 * (1.0 - 1.0 / o->dp_speedup_vs_amp);
        }
        if (usable(f)) o->dp_speedup_vs_fp32 = d->samples_per_s / f->samples_per_s;
    }
    const hr_run *pr = hr_projection_run(w);
    if (pr) {
        const cJSON *pts = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(pr->json, "projection"),
                                                            "points");
        const cJSON *p, *best = NULL;
        /* the requested kind (gpus or nodes) first, the other one when it is missing */
        cJSON_ArrayForEach(p, pts) {
            if ((int)hr_num(p, "n", 0) != proj_n) continue;
            if (!best || (strcmp(hr_str(p, "kind", ""), proj_kind) == 0 && strcmp(hr_str(best, "kind", ""), proj_kind) != 0))
                best = p;
        }
        if (best) {
            o->proj_n = proj_n;
            copy_str(o->proj_kind, sizeof o->proj_kind, hr_str(best, "kind", "gpus"));
            o->proj_speedup = hr_num(best, "speedup", NAN);
            o->proj_efficiency_pct = 100.0 * hr_num(best, "efficiency", NAN);
            o->proj_epoch_time_s = hr_num(best, "epoch_time_s", NAN);
            o->proj_bandwidth_Bps = hr_num(best, "bandwidth_Bps", NAN);
            o->proj_latency_s = hr_num(best, "latency_s", NAN);
            if (usable(a) && usable(f)) o->proj_speedup_vs_fp32 = o->proj_speedup * a->samples_per_s / f->samples_per_s;
        }
    }
}

int hr_reported_load(const char *path, hr_reported *rep) {
    rep->json = NULL;
    char *text;
    AB_TRY(hr_read_file(path, &text));
    rep->json = cJSON_Parse(text);
    free(text);
    if (!rep->json) return ab_errorf("%s: not valid JSON", path);
    if (!cJSON_IsArray(cJSON_GetObjectItemCaseSensitive(rep->json, "claims"))) {
        cJSON_Delete(rep->json);
        rep->json = NULL;
        return ab_errorf("%s: no 'claims' array", path);
    }
    return 0;
}

void hr_reported_free(hr_reported *rep) {
    cJSON_Delete(rep->json);
    rep->json = NULL;
}

const char *hr_reported_key(const hr_reported *rep, const char *model) {
    const cJSON *wls = cJSON_GetObjectItemCaseSensitive(rep ? rep->json : NULL, "workloads"), *wl;
    if (!wls || cJSON_GetObjectItemCaseSensitive(wls, model)) return model;
    const char *best = NULL;
    cJSON_ArrayForEach(wl, wls) {
        const size_t l = strlen(wl->string);
        if (strncmp(model, wl->string, l) == 0 && model[l] == '-' && (!best || l > strlen(best))) best = wl->string;
    }
    return best ? best : model;
}

const cJSON *hr_reported_claim(const hr_reported *rep, const char *workload, const char *metric, int fallback) {
    if (!rep || !rep->json) return NULL;
    workload = hr_reported_key(rep, workload);
    const cJSON *claims = cJSON_GetObjectItemCaseSensitive(rep->json, "claims"), *c;
    cJSON_ArrayForEach(c, claims) {
        if (strcmp(hr_str(c, "workload", ""), workload) == 0 && strcmp(hr_str(c, "metric", ""), metric) == 0) return c;
    }
    if (!fallback) return NULL;
    cJSON_ArrayForEach(c, claims) {
        if (strcmp(hr_str(c, "metric", ""), metric) == 0) return c;
    }
    return NULL;
}

const cJSON *hr_reported_claim_mode(const hr_reported *rep, const char *workload, const char *mode, const char *metric) {
    if (!rep || !rep->json) return NULL;
    workload = hr_reported_key(rep, workload);
    const cJSON *claims = cJSON_GetObjectItemCaseSensitive(rep->json, "claims"), *c;
    cJSON_ArrayForEach(c, claims) {
        if (!strcmp(hr_str(c, "workload", ""), workload) && !strcmp(hr_str(c, "mode", ""), mode) &&
            !strcmp(hr_str(c, "metric", ""), metric))
            return c;
    }
    return NULL;
}

const cJSON *hr_reported_workload(const hr_reported *rep, const char *model) {
    if (!rep || !rep->json) return NULL;
    return cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(rep->json, "workloads"),
                                            hr_reported_key(rep, model));
}
