/* The checkpoint store: folders of safetensors and JSON (train_checkpoint.h). */
#define _GNU_SOURCE /* renameat2 */
#include "train_checkpoint.h"

#include <cjson/cJSON.h>
#include <dirent.h>
#include <errno.h>
#include <float.h>
#include <fcntl.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include "census.h"
#include "checkpoint.h"
#include "fileio.h"
#include "safetensors.h"
#include "timer.h"
#include "train.h"

#define FORMAT "ampbench-checkpoint"
#define VERSION 1
#define MAX_STATE_JSON ((size_t)1 << 30)

/* ---- small helpers ---- */

/* a double exactly: 17 significant digits (strtod reads them back to the same bits); "nan",
 * "inf" and "-inf" as strings */
static cJSON *f64(double v) {
    if (isnan(v)) return cJSON_CreateString("nan");
    if (isinf(v)) return cJSON_CreateString(v > 0 ? "inf" : "-inf");
    char buf[40];
    snprintf(buf, sizeof buf, "%.17g", v);
    return cJSON_CreateRaw(buf);
}

/* 1 when v is a number in [lo, hi] (whole when whole is set) */
static int num_in(const cJSON *v, double lo, double hi, int whole) {
    return cJSON_IsNumber(v) && v->valuedouble >= lo && v->valuedouble <= hi &&
           (!whole || v->valuedouble == floor(v->valuedouble));
}

/* what f64 wrote: 0, or -1 when v is no such value */
static int f64_of(const cJSON *v, double *out) {
    if (cJSON_IsNumber(v)) return *out = v->valuedouble, 0;
    if (!cJSON_IsString(v)) return -1;
    if (strcmp(v->valuestring, "nan") == 0) return *out = NAN, 0;
    if (strcmp(v->valuestring, "inf") == 0) return *out = INFINITY, 0;
    if (strcmp(v->valuestring, "-inf") == 0) return *out = -INFINITY, 0;
    return -1;
}

static int get_f64(const cJSON *o, const char *key, double *out, const char *where) {
    *out = 0.0;
    if (f64_of(cJSON_GetObjectItemCaseSensitive(o, key), out) == 0) return 0;
    return ab_errorf("%s: '%s' is missing or not a number", where, key);
}

/* a loss scale: a positive float (read as a double, so first checked to be one) */
static int get_scale(const cJSON *o, const char *key, float *out, const char *where) {
    double v;
    AB_TRY(get_f64(o, key, &v, where));
    if (!(v > 0.0 && v <= FLT_MAX)) return ab_errorf("%s: '%s' is not a positive finite loss scale", where, key);
    *out = (float)v;
    return 0;
}

/* an integer in [lo, hi] */
static int get_i64(const cJSON *o, const char *key, long long lo, long long hi, long long *out, const char *where) {
    *out = 0;
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    if (!num_in(v, (double)lo, (double)hi, 1))
        return ab_errorf("%s: '%s' is missing or not an integer in [%lld, %lld]", where, key, lo, hi);
    *out = (long long)v->valuedouble;
    return 0;
}

static int get_long(const cJSON *o, const char *key, long *out, const char *where) {
    long long v = 0;
    AB_TRY(get_i64(o, key, 0, 1LL << 52, &v, where));
    *out = (long)v;
    return 0;
}

static const cJSON *get_array(const cJSON *o, const char *key, const char *where) {
    const cJSON *a = cJSON_GetObjectItemCaseSensitive(o, key);
    if (!cJSON_IsArray(a)) {
        ab_errorf("%s: '%s' is missing or not an array", where, key);
        return NULL;
    }
    return a;
}

static const cJSON *get_object(const cJSON *o, const char *key, const char *where) {
    const cJSON *a = cJSON_GetObjectItemCaseSensitive(o, key);
    if (!cJSON_IsObject(a)) {
        ab_errorf("%s: '%s' is missing or not an object", where, key);
        return NULL;
    }
    return a;
}

static int get_string(const cJSON *o, const char *key, char *out, size_t cap, const char *where) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    if (!cJSON_IsString(v) || strlen(v->valuestring) >= cap)
        return ab_errorf("%s: '%s' is missing or not a string (of under %zu bytes)", where, key, cap);
    snprintf(out, cap, "%s", v->valuestring);
    return 0;
}

/* a string of the file for an error message: control characters as '?', at most 60 bytes */
static const char *printable(const char *in, char out[64]) {
    size_t i = 0;
    for (; in && in[i] && i < 60; i++) out[i] = (unsigned char)in[i] < 0x20 || in[i] == 0x7f ? '?' : in[i];
    if (in && in[i]) out[i - 1] = '.';
    out[i] = 0;
    return out;
}

/* ---- the folder ---- */

#define PREFIX "ckpt-"

/* the step of a checkpoint folder's name "ckpt-<digits>", or -1 */
static long step_of(const char *name) {
    if (strncmp(name, PREFIX, strlen(PREFIX)) != 0) return -1;
    const char *d = name + strlen(PREFIX);
    if (!*d || strlen(d) > 15) return -1;
    long v = 0;
    for (; *d; d++) {
        if (*d < '0' || *d > '9') return -1;
        v = v * 10 + (*d - '0');
    }
    return v;
}

static int by_step_desc(const void *a, const void *b) {
    const long x = *(const long *)a, y = *(const long *)b;
    return (x < y) - (x > y);
}

/* the steps of dir's checkpoints, newest first (*n of them; *steps malloc'd); 0 with *n = 0 when
 * dir does not exist */
static int list_steps(const char *dir, long **steps, int *n) {
    *steps = NULL;
    *n = 0;
    DIR *d = opendir(dir);
    if (!d) return errno == ENOENT ? 0 : ab_errorf("%s: cannot read the checkpoint folder: %s", dir, strerror(errno));
    int cap = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        const long s = step_of(e->d_name);
        if (s < 0) continue;
        if (*n == cap) {
            cap = cap ? cap * 2 : 16;
            long *p = realloc(*steps, (size_t)cap * sizeof *p);
            if (!p) {
                closedir(d);
                free(*steps);
                *steps = NULL;
                *n = 0;
                return ab_errorf("out of host memory");
            }
            *steps = p;
        }
        (*steps)[(*n)++] = s;
    }
    closedir(d);
    if (*n) qsort(*steps, (size_t)*n, sizeof **steps, by_step_desc);
    return 0;
}

static int latest(const char *dir, char *path, size_t cap) {
    long *steps;
    int n;
    AB_TRY(list_steps(dir, &steps, &n));
    const int fits = !n || snprintf(path, cap, "%s/" PREFIX "%09ld", dir, steps[0]) < (int)cap;
    free(steps);
    if (!fits) return ab_errorf("%s: the checkpoint folder's path is too long", dir);
    return n > 0;
}

/* removes a checkpoint folder (or a temporary one): the files in it, then it */
static int remove_folder(const char *path) {
    DIR *d = opendir(path);
    if (!d) return errno == ENOENT ? 0 : ab_errorf("%s: cannot open: %s", path, strerror(errno));
    struct dirent *e;
    char f[1200];
    while ((e = readdir(d)) != NULL) {
        if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0) continue;
        snprintf(f, sizeof f, "%s/%s", path, e->d_name);
        if (unlink(f) != 0 && errno != ENOENT) {
            closedir(d);
            return ab_errorf("%s: cannot remove: %s", f, strerror(errno));
        }
    }
    closedir(d);
    if (rmdir(path) != 0 && errno != ENOENT) return ab_errorf("%s: cannot remove: %s", path, strerror(errno));
    return 0;
}

static int fsync_dir(const char *dir) {
    const int fd = open(dir, O_RDONLY | O_DIRECTORY);
    if (fd < 0) return ab_errorf("%s: cannot open: %s", dir, strerror(errno));
    const int rc = fsync(fd);
    close(fd);
    return rc == 0 ? 0 : ab_errorf("%s: cannot sync: %s", dir, strerror(errno));
}

/* a whole file mapped read-only (*size 0: nothing mapped) */
static int map_file(const char *path, const uint8_t **data, size_t *size) {
    *data = NULL;
    *size = 0;
    const int fd = open(path, O_RDONLY);
    if (fd < 0) return ab_errorf("%s: cannot open: %s", path, strerror(errno));
    struct stat st;
    if (fstat(fd, &st) != 0) {
        close(fd);
        return ab_errorf("%s: cannot stat: %s", path, strerror(errno));
    }
    if (st.st_size > 0) {
        void *m = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
        if (m == MAP_FAILED) {
            close(fd);
            return ab_errorf("%s: cannot map: %s", path, strerror(errno));
        }
        *data = m;
        *size = (size_t)st.st_size;
    }
    close(fd);
    return 0;
}

static void unmap_file(const uint8_t *data, size_t size) {
    if (size) munmap((void *)data, size);
}

/* the CRC-32 (zlib's) and size of a file */
static int file_crc(const char *path, unsigned long *crc, size_t *size) {
    const uint8_t *d;
    AB_TRY(map_file(path, &d, size));
    uLong c = crc32(0L, Z_NULL, 0);
    for (size_t off = 0; off < *size; off += (size_t)1 << 30) {
        const size_t k = *size - off < ((size_t)1 << 30) ? *size - off : (size_t)1 << 30;
        c = crc32(c, d + off, (uInt)k);
    }
    *crc = c;
    unmap_file(d, *size);
    return 0;
}

/* ---- writing ---- */

/* the tensors of a buffer laid out as params' regions (master-shaped: the compute and fp32
 * regions; or the buffer region), each under prefix + its name, in PyTorch's layout */
typedef struct {
    ab_st_entry *e;
    int n, cap;
    char **names;
    void **bufs;
    int n_bufs;
} entries;

static int entries_push(entries *es, const char *name, ab_st_dtype dt, int ndim, const int64_t *shape,
                        const void *data) {
    if (es->n == es->cap) {
        es->cap = es->cap ? es->cap * 2 : 256;
        ab_st_entry *e = realloc(es->e, (size_t)es->cap * sizeof *e);
        char **nm = realloc(es->names, (size_t)es->cap * sizeof *nm);
        if (e) es->e = e;
        if (nm) es->names = nm;
        if (!e || !nm) return ab_errorf("out of host memory");
    }
    char *copy = strdup(name);
    if (!copy) return ab_errorf("out of host memory");
    es->names[es->n] = copy;
    es->e[es->n] = (ab_st_entry){.name = copy, .dtype = dt, .ndim = ndim, .data = data};
    for (int d = 0; d < ndim; d++) es->e[es->n].shape[d] = shape[d];
    es->n++;
    return 0;
}

/* a buffer of host memory that lives until the entries are written */
static void *entries_buf(entries *es, size_t bytes) {
    void **b = realloc(es->bufs, (size_t)(es->n_bufs + 1) * sizeof *b);
    if (!b) return NULL;
    es->bufs = b;
    return (es->bufs[es->n_bufs++] = malloc(bytes ? bytes : 1));
}

static void entries_free(entries *es) {
    for (int i = 0; i < es->n; i++) free(es->names[i]);
    for (int i = 0; i < es->n_bufs; i++) free(es->bufs[i]);
    free(es->e);
    free(es->names);
    free(es->bufs);
    memset(es, 0, sizeof *es);
}

/* every spec of region class `buffers` (1: the buffer region; 0: the trained ones) of base
 * (elements of elem bytes at the spec's offset) as prefix.name */
static int push_set(entries *es, const ab_params *p, const char *prefix, int buffers, const void *base, size_t elem,
                    ab_st_dtype dt, int compute_only) {
    for (int i = 0; i < p->n_specs; i++) {
        const ab_param_spec *s = &p->specs[i];
        if ((s->region == AB_REGION_BUFFER) != buffers) continue;
        if (compute_only && s->region != AB_REGION_COMPUTE) continue;
        void *torch = entries_buf(es, s->numel * elem);
        if (!torch) return ab_errorf("out of host memory");
        ab_checkpoint_permute(s, (const char *)base + s->offset * elem, torch, elem, 1);
        long long shape[4];
        int64_t sh[4];
        const int nd = ab_checkpoint_torch_shape(s, shape);
        for (int d = 0; d < nd; d++) sh[d] = shape[d];
        char name[300];
        snprintf(name, sizeof name, "%s%s", prefix, s->name);
        AB_TRY(entries_push(es, name, dt, nd, sh, torch));
    }
    return 0;
}

static cJSON *epoch_json(const ab_epoch_record *e) {
    cJSON *o = cJSON_CreateObject();
    cJSON_AddNumberToObject(o, "epoch", e->epoch);
    cJSON_AddItemToObject(o, "time_s", f64(e->time_s));
    cJSON_AddItemToObject(o, "compute_time_s", f64(e->compute_time_s));
    cJSON_AddItemToObject(o, "data_time_s", f64(e->data_time_s));
    cJSON_AddItemToObject(o, "eval_time_s", f64(e->eval_time_s));
    cJSON_AddNumberToObject(o, "steps", (double)e->steps);
    cJSON_AddNumberToObject(o, "skipped_steps", (double)e->skipped_steps);
    cJSON_AddNumberToObject(o, "clipped_steps", (double)e->clipped_steps);
    cJSON_AddNumberToObject(o, "samples", (double)e->samples);
    cJSON_AddNumberToObject(o, "timed_samples", (double)e->timed_samples);
    cJSON_AddItemToObject(o, "train_loss", f64(e->train_loss));
    cJSON_AddItemToObject(o, "test_loss", f64(e->test_loss));
    cJSON_AddItemToObject(o, "test_accuracy", f64(e->test_accuracy));
    cJSON_AddItemToObject(o, "test_metric", f64(e->test_metric));
    return o;
}

static cJSON *scaler_json(const ab_scaler *s) {
    cJSON *o = cJSON_CreateObject();
    cJSON_AddItemToObject(o, "scale", f64(s->scale));
    cJSON_AddNumberToObject(o, "tracker", s->tracker);
    cJSON_AddItemToObject(o, "min_scale", f64(s->min_scale));
    cJSON_AddItemToObject(o, "max_scale", f64(s->max_scale));
    cJSON_AddNumberToObject(o, "growths", (double)s->growths);
    cJSON_AddNumberToObject(o, "backoffs", (double)s->backoffs);
    cJSON_AddNumberToObject(o, "skipped", (double)s->skipped);
    cJSON *ev = cJSON_AddArrayToObject(o, "events");
    for (size_t i = 0; i < s->n_events; i++) {
        cJSON *e = cJSON_CreateObject();
        cJSON_AddNumberToObject(e, "step", (double)s->events[i].step);
        cJSON_AddNumberToObject(e, "epoch", s->events[i].epoch);
        cJSON_AddItemToObject(e, "scale_before", f64(s->events[i].scale_before));
        cJSON_AddItemToObject(e, "scale_after", f64(s->events[i].scale_after));
        cJSON_AddItemToArray(ev, e);
    }
    cJSON *ch = cJSON_AddArrayToObject(o, "changes");
    for (size_t i = 0; i < s->n_changes; i++) {
        cJSON *e = cJSON_CreateObject();
        cJSON_AddNumberToObject(e, "step", (double)s->changes[i].step);
        cJSON_AddItemToObject(e, "scale", f64(s->changes[i].scale));
        cJSON_AddItemToArray(ch, e);
    }
    return o;
}

static cJSON *census_json(const ab_census *c) {
    cJSON *a = cJSON_CreateArray();
    for (size_t i = 0; c && i < c->n_records; i++) {
        const ab_census_record *r = &c->records[i];
        cJSON *o = cJSON_CreateObject();
        cJSON_AddNumberToObject(o, "step", (double)r->step);
        cJSON_AddItemToObject(o, "loss_scale", f64(r->loss_scale));
        cJSON *ts = cJSON_AddArrayToObject(o, "tensors");
        for (size_t k = 0; k < r->n_tensors; k++) {
            const ab_census_tensor *t = &r->tensors[k];
            cJSON *j = cJSON_CreateObject();
            cJSON_AddStringToObject(j, "name", t->name);
            cJSON_AddNumberToObject(j, "kind", t->kind);
            cJSON_AddNumberToObject(j, "dtype", t->dtype);
            cJSON_AddNumberToObject(j, "n", (double)t->n);
            cJSON_AddNumberToObject(j, "zeros", (double)t->zeros);
            cJSON_AddNumberToObject(j, "nonfinite", (double)t->nonfinite);
            cJSON *h = cJSON_AddArrayToObject(j, "hist");
            for (int b = 0; b < AB_CENSUS_BINS; b++) cJSON_AddItemToArray(h, cJSON_CreateNumber((double)t->hist[b]));
            cJSON_AddItemToArray(ts, j);
        }
        cJSON_AddItemToArray(a, o);
    }
    return a;
}

static cJSON *record_json(const ab_train_state *s) {
    const ab_run_record *r = s->rec;
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "started_at", r->started_at);
    cJSON_AddStringToObject(o, "weights_from", r->weights_from);
    cJSON_AddNumberToObject(o, "n_epochs", r->n_epochs);
    cJSON *ep = cJSON_AddArrayToObject(o, "epochs");
    const int listed = s->epoch_step > 0 ? s->epoch : r->n_epochs;
    for (int i = 0; i < listed; i++) cJSON_AddItemToArray(ep, epoch_json(&r->epochs[i]));
    cJSON *cv = cJSON_AddArrayToObject(o, "curve");
    for (size_t i = 0; i < r->n_curve; i++) {
        cJSON *p = cJSON_CreateArray();
        cJSON_AddItemToArray(p, cJSON_CreateNumber((double)r->curve[i].step));
        cJSON_AddItemToArray(p, cJSON_CreateNumber(r->curve[i].epoch));
        cJSON_AddItemToArray(p, f64(r->curve[i].loss));
        cJSON_AddItemToArray(p, f64(r->curve[i].scale));
        cJSON_AddItemToArray(cv, p);
    }
    cJSON_AddItemToObject(o, "census", census_json(r->census));
    cJSON_AddNumberToObject(o, "n_test_pred", r->n_test_pred);
    cJSON_AddNumberToObject(o, "n_classes", r->n_classes);
    cJSON_AddItemToObject(o, "comm_time_s", f64(r->comm_time_s));
    cJSON_AddItemToObject(o, "allreduce_time_s", f64(r->allreduce_time_s));
    cJSON_AddItemToObject(o, "allreduce_busy_s", f64(r->allreduce_busy_s));
    cJSON_AddItemToObject(o, "bytes_allreduced", f64(r->bytes_allreduced));
    cJSON_AddNumberToObject(o, "allreduce_calls", (double)r->allreduce_calls);
    cJSON *pk = cJSON_AddArrayToObject(o, "peak_memory_bytes");
    for (int k = 0; k < AB_MEM_COUNT; k++) cJSON_AddItemToArray(pk, cJSON_CreateNumber((double)r->mem.peak[k]));
    cJSON_AddNumberToObject(o, "peak_total_bytes", (double)r->mem.peak_total);
    cJSON_AddNumberToObject(o, "peak_all_bytes", (double)r->mem.peak_all);
    cJSON *ra = cJSON_AddArrayToObject(o, "resumed_at");
    for (int i = 0; i < r->n_resumes; i++) cJSON_AddItemToArray(ra, cJSON_CreateNumber((double)r->resumed_at[i]));
    return o;
}

/* state.json but its "files": a snapshot of the state and record, taken before training goes on */
static cJSON *state_json(const ab_train_state *s) {
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "format", FORMAT);
    cJSON_AddNumberToObject(o, "version", VERSION);
    cJSON *k = cJSON_AddObjectToObject(o, "keys");
    for (int i = 0; i < s->n_keys; i++) cJSON_AddStringToObject(k, s->keys[i].key, s->keys[i].value);
    cJSON *pos = cJSON_AddObjectToObject(o, "position");
    cJSON_AddNumberToObject(pos, "step", (double)s->step);
    cJSON_AddNumberToObject(pos, "epoch", s->epoch);
    cJSON_AddNumberToObject(pos, "epoch_step", (double)s->epoch_step);
    cJSON_AddNumberToObject(pos, "epoch_samples", (double)s->epoch_samples);
    char seed[24];
    snprintf(seed, sizeof seed, "%016llx", (unsigned long long)s->shuffle_seed);
    cJSON_AddStringToObject(pos, "shuffle_seed", seed);
    snprintf(seed, sizeof seed, "%016llx", (unsigned long long)s->augment_seed);
    cJSON_AddStringToObject(pos, "augment_seed", seed);
    cJSON_AddItemToObject(pos, "next_lr", f64(s->next_lr));
    cJSON *ranks = cJSON_AddArrayToObject(o, "ranks");
    for (int r = 0; r < s->world; r++) {
        cJSON *j = cJSON_CreateObject();
        cJSON_AddNumberToObject(j, "passes", (double)s->passes[r]);
        cJSON_AddNumberToObject(j, "batches_tracked", (double)s->batches_tracked[r]);
        cJSON_AddNumberToObject(j, "peak_memory_bytes",
                                s->rec->peak_memory_per_rank ? (double)s->rec->peak_memory_per_rank[r] : 0.0);
        cJSON_AddItemToArray(ranks, j);
    }
    cJSON *opt = cJSON_AddObjectToObject(o, "optimizer");
    cJSON_AddNumberToObject(opt, "steps", (double)s->opt_steps);
    cJSON_AddStringToObject(opt, "state", s->s2 ? "exp_avg, exp_avg_sq" : s->s1 ? "momentum_buffer" : "none");
    cJSON_AddItemToObject(o, "scaler", scaler_json(&s->scaler));
    cJSON *ta = cJSON_AddObjectToObject(o, "tally");
    cJSON_AddItemToObject(ta, "loss_sum", f64(s->tally.loss_sum));
    cJSON_AddItemToObject(ta, "interval_sum", f64(s->tally.interval_sum));
    cJSON_AddNumberToObject(ta, "finite_steps", (double)s->tally.finite_steps);
    cJSON_AddNumberToObject(ta, "interval_n", (double)s->tally.interval_n);
    cJSON_AddItemToObject(ta, "time_s", f64(s->tally.time_s));
    cJSON_AddItemToObject(ta, "data_s", f64(s->tally.data_s));
    cJSON_AddItemToObject(o, "record", record_json(s));
    return o;
}

/* the tensor files' sizes and CRC-32s into the snapshot, and its text (NULL when out of memory) */
static char *state_text(cJSON *o, const char *const files[2], const unsigned long crc[2], const size_t size[2]) {
    cJSON *fs = cJSON_AddObjectToObject(o, "files");
    for (int i = 0; fs && i < 2; i++) {
        cJSON *f = cJSON_AddObjectToObject(fs, files[i]);
        cJSON_AddNumberToObject(f, "bytes", (double)size[i]);
        char hex[16];
        snprintf(hex, sizeof hex, "%08lx", crc[i]);
        cJSON_AddStringToObject(f, "crc32", hex);
    }
    return fs ? cJSON_Print(o) : NULL;
}

static const char *const FILES[2] = {"weights.safetensors", "state.safetensors"};

/* state.safetensors's tensors */
static int state_entries(const ab_train_state *s, entries *es) {
    const ab_params *p = s->params;
    char prefix[64];
    if (s->s1) {
        snprintf(prefix, sizeof prefix, "optimizer.%s.", s->s1_name);
        AB_TRY(push_set(es, p, prefix, 0, s->s1, sizeof(float), AB_ST_F32, 0));
    }
    if (s->s2) {
        snprintf(prefix, sizeof prefix, "optimizer.%s.", s->s2_name);
        AB_TRY(push_set(es, p, prefix, 0, s->s2, sizeof(float), AB_ST_F32, 0));
    }
    if (s->compute_weights)
        AB_TRY(push_set(es, p, "compute.", 0, s->compute_weights, 2,
                        p->compute_type == AB_BF16 ? AB_ST_BF16 : AB_ST_F16, 1));
    for (int r = 1; r < s->world && p->n_bufs; r++) {
        snprintf(prefix, sizeof prefix, "rank%d.", r);
        AB_TRY(push_set(es, p, prefix, 1, s->bufs + (size_t)r * p->n_bufs, sizeof(float), AB_ST_F32, 0));
    }
    return 0;
}

/* the last evaluation's predictions, copied (the next evaluation rewrites the record's) */
static int prediction_entries(const ab_run_record *rec, entries *es) {
    if (rec->n_test_pred <= 0 || !rec->test_pred || !rec->test_hit) return 0;
    const int64_t n = rec->n_test_pred;
    void *pred = entries_buf(es, (size_t)n * sizeof(int32_t)), *hit = entries_buf(es, (size_t)n);
    if (!pred || !hit) return ab_errorf("out of host memory");
    memcpy(pred, rec->test_pred, (size_t)n * sizeof(int32_t));
    memcpy(hit, rec->test_hit, (size_t)n);
    AB_TRY(entries_push(es, "record.test_pred", AB_ST_I32, 1, &n, pred));
    return entries_push(es, "record.test_hit", AB_ST_U8, 1, &n, hit);
}

/* One checkpoint written in the background: the caller's host buffers (master, bufs) stay as
 * they are until flush, and so do wc, s1, s2 and the other ranks' buffers, which the writer
 * lays out for state.safetensors; what changes as training goes on is copied before save
 * returns (the predictions, the state and record as a JSON tree). One at a time: save waits for
 * the one before. */
typedef struct {
    pthread_t thread;
    int running, rc;
    char err[1024];
    char dir[1024], path[1100];
    int keep;
    long step;
    const ab_train_state *s; /* for master, bufs, params and the batch count: unchanged until flush */
    long long batches_tracked;
    entries es;
    cJSON *json;
    double seconds; /* the write's own time */
} write_job;

static write_job job;

/* the files into a temporary folder, then into place, then the old ones removed */
static int write_files(write_job *j) {
    const ab_train_state *s = j->s;
    char tmp[1100], f[1400];
    snprintf(tmp, sizeof tmp, "%s/.tmp-" PREFIX "%09ld.%ld", j->dir, j->step, (long)getpid());
    AB_TRY(remove_folder(tmp));
    if (mkdir(tmp, 0777) != 0) return ab_errorf("%s: cannot create: %s", tmp, strerror(errno));
    snprintf(f, sizeof f, "%s/%s", tmp, FILES[0]);
    int rc = ab_checkpoint_write(f, s->params, s->master, s->bufs, j->batches_tracked);
    snprintf(f, sizeof f, "%s/%s", tmp, FILES[1]);
    if (rc == 0) rc = state_entries(s, &j->es); /* after the predictions save copied */
    if (rc == 0) rc = ab_st_write(f, j->es.e, j->es.n);
    entries_free(&j->es); /* the host copies go as soon as they are on disk */
    unsigned long crc[2] = {0, 0};
    size_t size[2] = {0, 0};
    for (int i = 0; rc == 0 && i < 2; i++) {
        snprintf(f, sizeof f, "%s/%s", tmp, FILES[i]);
        rc = file_crc(f, &crc[i], &size[i]);
    }
    char *text = rc == 0 ? state_text(j->json, FILES, crc, size) : NULL;
    if (rc == 0 && !text) rc = ab_errorf("out of host memory writing the checkpoint's state");
    snprintf(f, sizeof f, "%s/state.json", tmp);
    if (rc == 0) rc = ab_write_file_atomic(f, text, strlen(text));
    free(text);
    if (rc == 0) rc = fsync_dir(tmp);
    /* into place. A checkpoint of the same step (a stop right after an epoch's end, the step
     * limit's epoch end after its mid-epoch one) is swapped with the new one in one atomic
     * exchange, so that some whole checkpoint of the step exists at every moment; the old one is
     * then in tmp and removed */
    struct stat st;
    const int existed = rc == 0 && stat(j->path, &st) == 0;
    if (rc == 0 && existed && renameat2(AT_FDCWD, tmp, AT_FDCWD, j->path, RENAME_EXCHANGE) != 0)
        rc = ab_errorf("%s: cannot replace: %s", j->path, strerror(errno));
    if (rc == 0 && !existed && rename(tmp, j->path) != 0)
        rc = ab_errorf("%s: cannot rename into place: %s", j->path, strerror(errno));
    if (rc == 0) rc = fsync_dir(j->dir);
    if (rc != 0) {
        char why[1024];
        snprintf(why, sizeof why, "%s", ab_error());
        if (!existed) remove_folder(tmp);
        return ab_errorf("checkpoint: %s", why);
    }
    if (existed) AB_TRY(remove_folder(tmp));
    /* the newest `keep`, and no one's leftovers */
    long *steps;
    int n;
    AB_TRY(list_steps(j->dir, &steps, &n));
    for (int i = j->keep; rc == 0 && i < n; i++) {
        snprintf(f, sizeof f, "%s/" PREFIX "%09ld", j->dir, steps[i]);
        rc = remove_folder(f);
    }
    free(steps);
    DIR *d = opendir(j->dir);
    struct dirent *e;
    while (rc == 0 && d && (e = readdir(d)) != NULL)
        if (strncmp(e->d_name, ".tmp-" PREFIX, 5 + strlen(PREFIX)) == 0) {
            snprintf(f, sizeof f, "%s/%s", j->dir, e->d_name);
            rc = remove_folder(f);
        }
    if (d) closedir(d);
    return rc;
}

static void *write_main(void *arg) {
    write_job *j = arg;
    const double t0 = ab_now();
    j->rc = write_files(j);
    if (j->rc != 0) snprintf(j->err, sizeof j->err, "%s", ab_error()); /* the error is this thread's */
    j->seconds = ab_now() - t0;
    return NULL;
}

static int flush(double *seconds) {
    if (seconds) *seconds = 0.0;
    if (!job.running) return 0;
    pthread_join(job.thread, NULL);
    job.running = 0;
    entries_free(&job.es);
    cJSON_Delete(job.json);
    job.json = NULL;
    if (seconds) *seconds = job.seconds;
    return job.rc == 0 ? 0 : ab_errorf("%s", job.err);
}

static int save(const char *dir, int keep, const ab_train_state *s, char *path, size_t cap, double *bytes) {
    AB_TRY(flush(NULL));
    AB_TRY(ab_mkdir_p(dir));
    if (snprintf(path, cap, "%s/" PREFIX "%09ld", dir, s->step) >= (int)cap || strlen(dir) > 900)
        return ab_errorf("%s: the checkpoint folder's path is too long", dir);
    write_job *j = &job;
    memset(j, 0, sizeof *j);
    snprintf(j->dir, sizeof j->dir, "%s", dir);
    snprintf(j->path, sizeof j->path, "%s", path);
    j->keep = keep;
    j->step = s->step;
    j->s = s;
    j->batches_tracked = s->batches_tracked[0];
    int rc = prediction_entries(s->rec, &j->es);
    if (rc == 0 && !(j->json = state_json(s))) rc = ab_errorf("out of host memory for the checkpoint's state");
    const ab_params *p = s->params;
    *bytes = (double)(p->n + p->n_bufs) * sizeof(float) +
             (double)p->n * sizeof(float) * ((s->s1 != NULL) + (s->s2 != NULL)) +
             (double)(s->world - 1) * (double)p->n_bufs * sizeof(float) +
             (s->compute_weights ? (double)p->n_compute * 2.0 : 0.0) + (double)s->rec->n_test_pred * 5.0;
    if (rc == 0 && pthread_create(&j->thread, NULL, write_main, j) != 0)
        rc = ab_errorf("cannot start the checkpoint writer thread");
    if (rc != 0) {
        entries_free(&j->es);
        cJSON_Delete(j->json);
        j->json = NULL;
        return rc;
    }
    j->running = 1;
    return 0;
}

/* ---- reading ---- */

static int parse_epoch(const cJSON *o, ab_epoch_record *e, const char *w) {
    long long ep;
    AB_TRY(get_i64(o, "epoch", 1, 1 << 30, &ep, w));
    e->epoch = (int)ep;
    AB_TRY(get_f64(o, "time_s", &e->time_s, w));
    AB_TRY(get_f64(o, "compute_time_s", &e->compute_time_s, w));
    AB_TRY(get_f64(o, "data_time_s", &e->data_time_s, w));
    AB_TRY(get_f64(o, "eval_time_s", &e->eval_time_s, w));
    AB_TRY(get_long(o, "steps", &e->steps, w));
    AB_TRY(get_long(o, "skipped_steps", &e->skipped_steps, w));
    AB_TRY(get_long(o, "clipped_steps", &e->clipped_steps, w));
    AB_TRY(get_long(o, "samples", &e->samples, w));
    AB_TRY(get_long(o, "timed_samples", &e->timed_samples, w));
    AB_TRY(get_f64(o, "train_loss", &e->train_loss, w));
    AB_TRY(get_f64(o, "test_loss", &e->test_loss, w));
    AB_TRY(get_f64(o, "test_accuracy", &e->test_accuracy, w));
    AB_TRY(get_f64(o, "test_metric", &e->test_metric, w));
    return 0;
}

static int parse_scaler(const cJSON *o, ab_scaler *s, const char *w) {
    long long x;
    AB_TRY(get_scale(o, "scale", &s->scale, w));
    AB_TRY(get_i64(o, "tracker", 0, 1 << 30, &x, w));
    s->tracker = (int)x;
    AB_TRY(get_scale(o, "min_scale", &s->min_scale, w));
    AB_TRY(get_scale(o, "max_scale", &s->max_scale, w));
    AB_TRY(get_long(o, "growths", &s->growths, w));
    AB_TRY(get_long(o, "backoffs", &s->backoffs, w));
    AB_TRY(get_long(o, "skipped", &s->skipped, w));
    const cJSON *ev = get_array(o, "events", w), *ch = get_array(o, "changes", w);
    if (!ev || !ch) return -1;
    const int ne = cJSON_GetArraySize(ev), nc = cJSON_GetArraySize(ch);
    s->events = calloc((size_t)ne + 1, sizeof *s->events);
    s->changes = calloc((size_t)nc + 1, sizeof *s->changes);
    if (!s->events || !s->changes) return ab_errorf("out of host memory");
    s->cap_events = (size_t)ne + 1;
    s->cap_changes = (size_t)nc + 1;
    const cJSON *e;
    cJSON_ArrayForEach(e, ev) {
        ab_overflow_event *x2 = &s->events[s->n_events++];
        long long epoch;
        AB_TRY(get_long(e, "step", &x2->step, w));
        AB_TRY(get_i64(e, "epoch", 0, 1 << 30, &epoch, w));
        x2->epoch = (int)epoch;
        AB_TRY(get_scale(e, "scale_before", &x2->scale_before, w));
        AB_TRY(get_scale(e, "scale_after", &x2->scale_after, w));
    }
    cJSON_ArrayForEach(e, ch) {
        ab_scale_change *x2 = &s->changes[s->n_changes++];
        AB_TRY(get_long(e, "step", &x2->step, w));
        AB_TRY(get_scale(e, "scale", &x2->scale, w));
    }
    if (s->n_changes == 0) return ab_errorf("%s: the loss scaler has no scale history", w);
    return 0;
}

static int parse_census(const cJSON *a, ab_census *c, const char *w) {
    const int n = cJSON_GetArraySize(a);
    if (!c) return n ? ab_errorf("%s: a gradient census this run does not take", w) : 0;
    if (c->n_records) return ab_errorf("%s: the census already holds records", w);
    if (!(c->records = calloc((size_t)n + 1, sizeof *c->records))) return ab_errorf("out of host memory");
    c->cap_records = (size_t)n + 1;
    const cJSON *o;
    cJSON_ArrayForEach(o, a) {
        ab_census_record *r = &c->records[c->n_records++];
        AB_TRY(get_long(o, "step", &r->step, w));
        AB_TRY(get_f64(o, "loss_scale", &r->loss_scale, w));
        if (!(r->loss_scale > 0.0 && isfinite(r->loss_scale))) return ab_errorf("%s: a census's loss scale is not positive", w);
        const cJSON *ts = get_array(o, "tensors", w), *j;
        if (!ts) return -1;
        const int k = cJSON_GetArraySize(ts);
        if (!(r->tensors = calloc((size_t)k + 1, sizeof *r->tensors))) return ab_errorf("out of host memory");
        r->cap_tensors = (size_t)k + 1;
        cJSON_ArrayForEach(j, ts) {
            ab_census_tensor *t = &r->tensors[r->n_tensors++];
            t->slot = -1;
            char name[256];
            long long kind, dt;
            AB_TRY(get_string(j, "name", name, sizeof name, w));
            if (!(t->name = strdup(name))) return ab_errorf("out of host memory");
            AB_TRY(get_i64(j, "kind", 0, AB_CENSUS_KINDS - 1, &kind, w));
            AB_TRY(get_i64(j, "dtype", 0, AB_DTYPE_COUNT - 1, &dt, w));
            t->kind = (ab_census_kind)kind;
            t->dtype = (ab_dtype)dt;
            long long v;
            AB_TRY(get_i64(j, "n", 0, 1LL << 52, &v, w));
            t->n = v;
            AB_TRY(get_i64(j, "zeros", 0, 1LL << 52, &v, w));
            t->zeros = v;
            AB_TRY(get_i64(j, "nonfinite", 0, 1LL << 52, &v, w));
            t->nonfinite = v;
            const cJSON *h = get_array(j, "hist", w), *b;
            if (!h) return -1;
            if (cJSON_GetArraySize(h) != AB_CENSUS_BINS)
                return ab_errorf("%s: a census histogram of %d bins, not %d", w, cJSON_GetArraySize(h), AB_CENSUS_BINS);
            int i = 0;
            int64_t sum = t->zeros + t->nonfinite;
            cJSON_ArrayForEach(b, h) {
                if (!num_in(b, 0, 0x1p52, 1)) return ab_errorf("%s: a census count is not a count", w);
                sum += t->hist[i++] = (int64_t)b->valuedouble;
            }
            if (sum != t->n) return ab_errorf("%s: a census's counts add up to %lld, not its %lld values", w,
                                              (long long)sum, (long long)t->n);
        }
    }
    return 0;
}

static int parse_record(const cJSON *o, ab_train_state *s, int max_epochs, const char *w) {
    ab_run_record *r = s->rec;
    AB_TRY(get_string(o, "started_at", r->started_at, sizeof r->started_at, w));
    AB_TRY(get_string(o, "weights_from", r->weights_from, sizeof r->weights_from, w));
    long long n;
    AB_TRY(get_i64(o, "n_epochs", 0, max_epochs, &n, w));
    r->n_epochs = (int)n;
    const cJSON *ep = get_array(o, "epochs", w), *e;
    if (!ep) return -1;
    const int listed = s->epoch_step > 0 ? s->epoch : r->n_epochs;
    if (cJSON_GetArraySize(ep) != listed)
        return ab_errorf("%s: %d epoch records, the position needs %d", w, cJSON_GetArraySize(ep), listed);
    int i = 0;
    cJSON_ArrayForEach(e, ep) {
        AB_TRY(parse_epoch(e, &r->epochs[i], w));
        if (r->epochs[i].epoch != i + 1) return ab_errorf("%s: epoch record %d says epoch %d", w, i + 1, r->epochs[i].epoch);
        i++;
    }
    const cJSON *cv = get_array(o, "curve", w), *p;
    if (!cv) return -1;
    const int nc = cJSON_GetArraySize(cv);
    if (!(r->curve = calloc((size_t)nc + 1, sizeof *r->curve))) return ab_errorf("out of host memory");
    r->cap_curve = (size_t)nc + 1;
    cJSON_ArrayForEach(p, cv) {
        if (!cJSON_IsArray(p) || cJSON_GetArraySize(p) != 4) return ab_errorf("%s: a loss-curve point is not 4 numbers", w);
        const cJSON *a = cJSON_GetArrayItem(p, 0), *b = cJSON_GetArrayItem(p, 1);
        double l, sc;
        if (!num_in(a, 0, 0x1p52, 1) || !num_in(b, 0, 0x1p30, 1) ||
            f64_of(cJSON_GetArrayItem(p, 2), &l) != 0 || f64_of(cJSON_GetArrayItem(p, 3), &sc) != 0 ||
            !(sc > 0.0 && sc <= FLT_MAX))
            return ab_errorf("%s: a loss-curve point is not [step, epoch, loss, scale]", w);
        ab_loss_point *lp = &r->curve[r->n_curve++];
        lp->step = (long)a->valuedouble;
        lp->epoch = (int)b->valuedouble;
        lp->loss = l;
        lp->scale = (float)sc;
    }
    const cJSON *cen = get_array(o, "census", w);
    if (!cen) return -1;
    AB_TRY(parse_census(cen, r->census, w));
    long long np, ncl;
    AB_TRY(get_i64(o, "n_test_pred", 0, INT32_MAX, &np, w));
    AB_TRY(get_i64(o, "n_classes", 0, INT32_MAX, &ncl, w));
    r->n_test_pred = (int)np;
    r->n_classes = (int)ncl;
    AB_TRY(get_f64(o, "comm_time_s", &r->comm_time_s, w));
    AB_TRY(get_f64(o, "allreduce_time_s", &r->allreduce_time_s, w));
    AB_TRY(get_f64(o, "allreduce_busy_s", &r->allreduce_busy_s, w));
    AB_TRY(get_f64(o, "bytes_allreduced", &r->bytes_allreduced, w));
    AB_TRY(get_long(o, "allreduce_calls", &r->allreduce_calls, w));
    const cJSON *pk = get_array(o, "peak_memory_bytes", w);
    if (!pk) return -1;
    if (cJSON_GetArraySize(pk) != AB_MEM_COUNT) return ab_errorf("%s: 'peak_memory_bytes' has %d categories, not %d", w, cJSON_GetArraySize(pk), AB_MEM_COUNT);
    i = 0;
    cJSON_ArrayForEach(p, pk) {
        if (!num_in(p, 0, 0x1p60, 1)) return ab_errorf("%s: a peak is not a byte count", w);
        r->mem.peak[i++] = (size_t)p->valuedouble;
    }
    long v;
    AB_TRY(get_long(o, "peak_total_bytes", &v, w));
    r->mem.peak_total = (size_t)v;
    AB_TRY(get_long(o, "peak_all_bytes", &v, w));
    r->mem.peak_all = (size_t)v;
    const cJSON *ra = get_array(o, "resumed_at", w);
    if (!ra) return -1;
    const int nr = cJSON_GetArraySize(ra);
    free(r->resumed_at);
    if (!(r->resumed_at = calloc((size_t)nr + 1, sizeof *r->resumed_at))) return ab_errorf("out of host memory");
    r->n_resumes = 0;
    cJSON_ArrayForEach(p, ra) {
        if (!num_in(p, 0, 0x1p52, 1)) return ab_errorf("%s: 'resumed_at' holds a non-step", w);
        r->resumed_at[r->n_resumes++] = (long)p->valuedouble;
    }
    return 0;
}

/* the keys: every one of this run's must be there with the same value, and no other */
static int check_keys(const cJSON *k, const ab_train_state *s, const char *w) {
    for (int i = 0; i < s->n_keys; i++) {
        const cJSON *v = cJSON_GetObjectItemCaseSensitive(k, s->keys[i].key);
        if (!cJSON_IsString(v)) return ab_errorf("%s: says nothing of %s (this run: %s)", w, s->keys[i].key, s->keys[i].value);
        char shown[64];
        if (strcmp(v->valuestring, s->keys[i].value) != 0)
            return ab_errorf("%s: a checkpoint of %s %s; this run has %s %s", w, s->keys[i].key,
                             printable(v->valuestring, shown), s->keys[i].key, s->keys[i].value);
    }
    const cJSON *v;
    cJSON_ArrayForEach(v, k) {
        int known = 0;
        for (int i = 0; !known && i < s->n_keys; i++) known = v->string && strcmp(v->string, s->keys[i].key) == 0;
        char shown[64];
        if (!known) return ab_errorf("%s: a key this run does not have: '%s'", w, printable(v->string, shown));
    }
    return 0;
}

int ab_checkpoint_parse_state(const char *text, size_t n, const char *w, ab_train_state *s) {
    cJSON *o = cJSON_ParseWithLength(text, n);
    if (!o) return ab_errorf("%s: not JSON (near byte %ld)", w, (long)(cJSON_GetErrorPtr() ? cJSON_GetErrorPtr() - text : 0));
    int rc = 0;
    char format[64];
    long long version, step, epoch, estep;
    const cJSON *pos, *ranks, *opt, *sc, *ta, *rec, *keys;
    if ((rc = get_string(o, "format", format, sizeof format, w)) != 0) goto done;
    if (strcmp(format, FORMAT) != 0) {
        char shown[64];
        rc = ab_errorf("%s: format '%s', not " FORMAT, w, printable(format, shown));
        goto done;
    }
    if ((rc = get_i64(o, "version", 0, 1 << 20, &version, w)) != 0) goto done;
    if (version != VERSION) {
        rc = ab_errorf("%s: version %lld; this build reads version %d", w, version, VERSION);
        goto done;
    }
    if (!(keys = get_object(o, "keys", w)) || (rc = check_keys(keys, s, w)) != 0) {
        rc = -1;
        goto done;
    }
    if (!(pos = get_object(o, "position", w)) || get_i64(pos, "step", 0, 1LL << 52, &step, w) ||
        get_i64(pos, "epoch", 1, 1 << 30, &epoch, w) || get_i64(pos, "epoch_step", 0, 1LL << 52, &estep, w)) {
        rc = -1;
        goto done;
    }
    s->step = (long)step;
    s->epoch = (int)epoch;
    s->epoch_step = (long)estep;
    long long samples;
    char seeds[2][24];
    if (get_i64(pos, "epoch_samples", 0, 1LL << 52, &samples, w) || get_f64(pos, "next_lr", &s->next_lr, w) ||
        get_string(pos, "shuffle_seed", seeds[0], sizeof seeds[0], w) ||
        get_string(pos, "augment_seed", seeds[1], sizeof seeds[1], w)) {
        rc = -1;
        goto done;
    }
    s->epoch_samples = (long)samples;
    uint64_t *const seed_of[2] = {&s->shuffle_seed, &s->augment_seed};
    for (int i = 0; i < 2; i++) {
        char *end;
        errno = 0;
        *seed_of[i] = strtoull(seeds[i], &end, 16);
        if (errno || *end || strlen(seeds[i]) != 16) {
            rc = ab_errorf("%s: a seed of the position is not 16 hex digits", w);
            goto done;
        }
    }
    if (!(ranks = get_array(o, "ranks", w))) {
        rc = -1;
        goto done;
    }
    if (cJSON_GetArraySize(ranks) != s->world) {
        rc = ab_errorf("%s: %d ranks' counters for a world of %d", w, cJSON_GetArraySize(ranks), s->world);
        goto done;
    }
    int r = 0;
    const cJSON *j;
    cJSON_ArrayForEach(j, ranks) {
        long long a, b, pk;
        if (get_i64(j, "passes", 0, 1LL << 52, &a, w) || get_i64(j, "batches_tracked", 0, 1LL << 52, &b, w) ||
            get_i64(j, "peak_memory_bytes", 0, 1LL << 52, &pk, w)) {
            rc = -1;
            goto done;
        }
        s->passes[r] = a;
        s->batches_tracked[r] = b;
        if (s->rec->peak_memory_per_rank) s->rec->peak_memory_per_rank[r] = pk;
        r++;
    }
    long long steps;
    if (!(opt = get_object(o, "optimizer", w)) || get_i64(opt, "steps", 0, 1LL << 52, &steps, w)) {
        rc = -1;
        goto done;
    }
    s->opt_steps = (long)steps;
    if (!(sc = get_object(o, "scaler", w)) || (rc = parse_scaler(sc, &s->scaler, w)) != 0) {
        rc = -1;
        goto done;
    }
    if (!(ta = get_object(o, "tally", w)) || get_f64(ta, "loss_sum", &s->tally.loss_sum, w) ||
        get_f64(ta, "interval_sum", &s->tally.interval_sum, w) || get_long(ta, "finite_steps", &s->tally.finite_steps, w) ||
        get_long(ta, "interval_n", &s->tally.interval_n, w) || get_f64(ta, "time_s", &s->tally.time_s, w) ||
        get_f64(ta, "data_s", &s->tally.data_s, w)) {
        rc = -1;
        goto done;
    }
    long long max_epochs = 0;
    for (int i = 0; i < s->n_keys; i++)
        if (strcmp(s->keys[i].key, "epochs") == 0) max_epochs = atoll(s->keys[i].value);
    if (s->epoch > max_epochs + 1 || (s->epoch_step > 0 && s->epoch > max_epochs)) {
        rc = ab_errorf("%s: position epoch %d is past the run's %lld epochs", w, s->epoch, max_epochs);
        goto done;
    }
    if (!(rec = get_object(o, "record", w)) || (rc = parse_record(rec, s, (int)max_epochs, w)) != 0) rc = -1;
done:
    cJSON_Delete(o);
    return rc;
}

/* state.safetensors's tensors named prefix.name of every spec of the class into base, in this
 * layout; each used tensor is marked */
static int read_set(const ab_safetensors *st, unsigned char *used, const ab_params *p, const char *prefix,
                    int buffers, void *base, size_t elem, ab_st_dtype dt, int compute_only, const char *w) {
    for (int i = 0; i < p->n_specs; i++) {
        const ab_param_spec *s = &p->specs[i];
        if ((s->region == AB_REGION_BUFFER) != buffers || (compute_only && s->region != AB_REGION_COMPUTE)) continue;
        char name[300];
        snprintf(name, sizeof name, "%s%s", prefix, s->name);
        const ab_st_tensor *t = ab_st_find(st, name);
        if (!t) return ab_errorf("%s: no tensor '%s'", w, name);
        used[t - st->t] = 1;
        long long shape[4];
        const int nd = ab_checkpoint_torch_shape(s, shape);
        int same = t->ndim == nd && t->dtype == dt;
        for (int d = 0; same && d < nd; d++) same = t->shape[d] == shape[d];
        if (!same) return ab_errorf("%s: tensor '%s' is %s of %d dimensions; the run needs %s of the weight's shape", w,
                                    name, ab_st_dtype_name(t->dtype), t->ndim, ab_st_dtype_name(dt));
        ab_checkpoint_permute(s, t->data, (char *)base + s->offset * elem, elem, 0);
    }
    return 0;
}

static int read_state_tensors(const char *path, ab_train_state *s) {
    ab_safetensors st;
    AB_TRY(ab_st_open(path, &st));
    unsigned char *used = calloc((size_t)st.n + 1, 1);
    const ab_params *p = s->params;
    int rc = used ? 0 : ab_errorf("out of host memory");
    char prefix[64];
    if (rc == 0 && s->s1) {
        snprintf(prefix, sizeof prefix, "optimizer.%s.", s->s1_name);
        rc = read_set(&st, used, p, prefix, 0, s->s1, sizeof(float), AB_ST_F32, 0, path);
    }
    if (rc == 0 && s->s2) {
        snprintf(prefix, sizeof prefix, "optimizer.%s.", s->s2_name);
        rc = read_set(&st, used, p, prefix, 0, s->s2, sizeof(float), AB_ST_F32, 0, path);
    }
    if (rc == 0 && s->compute_weights)
        rc = read_set(&st, used, p, "compute.", 0, s->compute_weights, 2,
                      p->compute_type == AB_BF16 ? AB_ST_BF16 : AB_ST_F16, 1, path);
    for (int r = 1; rc == 0 && r < s->world && p->n_bufs; r++) {
        snprintf(prefix, sizeof prefix, "rank%d.", r);
        rc = read_set(&st, used, p, prefix, 1, s->bufs + (size_t)r * p->n_bufs, sizeof(float), AB_ST_F32, 0, path);
    }
    ab_run_record *rec = s->rec;
    const ab_st_tensor *tp = ab_st_find(&st, "record.test_pred"), *th = ab_st_find(&st, "record.test_hit");
    if (rc == 0 && rec->n_test_pred > 0) {
        const size_t n = (size_t)rec->n_test_pred;
        if (!tp || !th || tp->dtype != AB_ST_I32 || th->dtype != AB_ST_U8 || tp->numel != n || th->numel != n)
            rc = ab_errorf("%s: the last evaluation's predictions are missing or not %zu int32 and uint8 values", path, n);
        if (rc == 0) {
            free(rec->test_pred);
            free(rec->test_hit);
            rec->test_pred = malloc(n * sizeof(int32_t));
            rec->test_hit = malloc(n);
            if (!rec->test_pred || !rec->test_hit) rc = ab_errorf("out of host memory");
        }
        if (rc == 0) {
            memcpy(rec->test_pred, tp->data, n * sizeof(int32_t));
            memcpy(rec->test_hit, th->data, n);
            used[tp - st.t] = used[th - st.t] = 1;
            for (size_t i = 0; rc == 0 && i < n; i++)
                if (rec->test_pred[i] < 0 || rec->test_pred[i] >= rec->n_classes || rec->test_hit[i] > 1)
                    rc = ab_errorf("%s: prediction %zu is not a class of %d", path, i, rec->n_classes);
        }
    }
    for (int i = 0; rc == 0 && i < st.n; i++)
        if (!used[i]) {
            char shown[64];
            rc = ab_errorf("%s: unexpected tensor '%s'", path, printable(st.t[i].name, shown));
        }
    free(used);
    ab_st_close(&st);
    return rc;
}

/* state.json's record of a tensor file: its size and CRC-32 */
static int check_file(const char *dir, const char *file, const char *text, size_t n) {
    char f[1200];
    snprintf(f, sizeof f, "%s/%s", dir, file);
    cJSON *o = cJSON_ParseWithLength(text, n);
    const cJSON *fs = o ? cJSON_GetObjectItemCaseSensitive(o, "files") : NULL;
    const cJSON *e = fs ? cJSON_GetObjectItemCaseSensitive(fs, file) : NULL;
    long long bytes = -1;
    char want[16] = "";
    int rc = e && get_i64(e, "bytes", 0, 1LL << 52, &bytes, "state.json") == 0 &&
                     get_string(e, "crc32", want, sizeof want, "state.json") == 0
                 ? 0
                 : ab_errorf("%s/state.json: no size and CRC-32 of %s", dir, file);
    cJSON_Delete(o);
    AB_TRY(rc);
    unsigned long crc;
    size_t size;
    AB_TRY(file_crc(f, &crc, &size));
    char got[16];
    snprintf(got, sizeof got, "%08lx", crc);
    if ((long long)size != bytes)
        return ab_errorf("%s: %zu bytes, state.json says %lld (truncated or replaced)", f, size, bytes);
    char shown[64];
    if (strcmp(got, want) != 0)
        return ab_errorf("%s: CRC-32 %s, state.json says %s (the file was changed)", f, got, printable(want, shown));
    return 0;
}

static int load(const char *path, ab_train_state *s) {
    char f[1200];
    snprintf(f, sizeof f, "%s/state.json", path);
    const uint8_t *text;
    size_t n;
    AB_TRY(map_file(f, &text, &n));
    int rc = n == 0 || n > MAX_STATE_JSON ? ab_errorf("%s: empty or too large (%zu bytes)", f, n) : 0;
    if (rc == 0) rc = ab_checkpoint_parse_state((const char *)text, n, f, s);
    for (int i = 0; rc == 0 && i < 2; i++) rc = check_file(path, FILES[i], (const char *)text, n);
    unmap_file(text, n);
    AB_TRY(rc);
    /* the weights as --save wrote them: rank 0's buffers and batch count with them */
    const ab_params *p = s->params;
    float *host = malloc((p->n + p->n_bufs + 1) * sizeof(float));
    if (!host) return ab_errorf("out of host memory");
    long long nbt = -1;
    char from[600];
    snprintf(f, sizeof f, "%s/%s", path, FILES[0]);
    rc = ab_checkpoint_read(f, p, NULL, host, &nbt, from, sizeof from);
    if (rc == 0) {
        memcpy(s->master, host, p->n * sizeof(float));
        memcpy(s->bufs, host + p->n, p->n_bufs * sizeof(float));
        if (nbt >= 0 && nbt != s->batches_tracked[0])
            rc = ab_errorf("%s: contradicts state.json: num_batches_tracked %lld, rank 0's count %lld", f, nbt,
                           (long long)s->batches_tracked[0]);
    }
    free(host);
    AB_TRY(rc);
    snprintf(f, sizeof f, "%s/%s", path, FILES[1]);
    return read_state_tensors(f, s);
}

const ab_checkpoint_ops ab_checkpoint_store = {.save = save, .flush = flush, .latest = latest, .load = load};
