/* safetensors and the PyTorch-named checkpoints:
 *   - the writer and reader round trip bit for bit (F32, F16, BF16, I64 scalars, an empty tensor);
 *   - every kind of lying file is refused with a message naming the file and what is wrong: a
 *     file shorter than the length field, a header claiming more than the file or than 100 MB,
 *     JSON that is not an object, an unknown dtype, a shape whose bytes differ from its offsets,
 *     offsets past the buffer, overlapping tensors, a hole, a duplicate name, a truncated file;
 *   - a model's weights (resnet-tiny: conv filters permuted OHWI <-> OIHW, batch-norm buffers,
 *     num_batches_tracked) saved and loaded back bit for bit; fp16-stored weights load as their
 *     exact fp32 values; a checkpoint of another model, a wrong shape, a missing or an
 *     unexpected tensor are refused naming the tensor. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "backend_cpu.h"
#include "checkpoint.h"
#include "half.h"
#include "workloads.h"
#include "safetensors.h"
#include "tolerances.h"

static int failures = 0;
static char path[256];

static void test_round_trip(void) {
    const float a[6] = {1.0f, -2.5f, 3.25f, NAN, INFINITY, -0.0f};
    uint16_t h[4], bf[3];
    for (int i = 0; i < 4; i++) h[i] = ab_f32_to_f16(0.1f * (float)(i + 1));
    for (int i = 0; i < 3; i++) bf[i] = ab_f32_to_bf16(-7.0f * (float)i);
    const int64_t steps = 123456789012345LL;
    const ab_st_entry e[] = {
        {.name = "a.weight", .dtype = AB_ST_F32, .ndim = 2, .shape = {2, 3}, .data = a},
        {.name = "h", .dtype = AB_ST_F16, .ndim = 1, .shape = {4}, .data = h},
        {.name = "bf", .dtype = AB_ST_BF16, .ndim = 3, .shape = {1, 3, 1}, .data = bf},
        {.name = "bn.num_batches_tracked", .dtype = AB_ST_I64, .ndim = 0, .data = &steps},
        {.name = "empty", .dtype = AB_ST_F32, .ndim = 2, .shape = {0, 5}, .data = NULL},
    };
    AB_CHECK(ab_st_write(path, e, 5) == 0, "%s", ab_error());
    ab_safetensors st;
    if (ab_st_open(path, &st) != 0) {
        fprintf(stderr, "FAIL reading back: %s\n", ab_error());
        failures++;
        return;
    }
    AB_CHECK(st.n == 5, "%d tensors read back", st.n);
    for (int i = 0; i < 5; i++) {
        const ab_st_tensor *t = ab_st_find(&st, e[i].name);
        AB_CHECK(t && t->dtype == e[i].dtype && t->ndim == e[i].ndim, "%s: missing, or dtype/rank differ", e[i].name);
        if (!t) continue;
        size_t bytes = ab_st_dtype_size(t->dtype);
        for (int d = 0; d < t->ndim; d++) {
            AB_CHECK(t->shape[d] == e[i].shape[d], "%s: dimension %d", e[i].name, d);
            bytes *= (size_t)e[i].shape[d];
        }
        AB_CHECK(t->bytes == bytes && (bytes == 0 || memcmp(t->data, e[i].data, bytes) == 0), "%s: bytes differ",
                 e[i].name);
    }
    /* the data section starts 8-byte aligned, as the reference writer leaves it */
    const ab_st_tensor *t0 = ab_st_find(&st, "a.weight");
    AB_CHECK(t0 && (t0->data - st.base) % 8 == 0, "the buffer is not 8-byte aligned in the file");
    float f[4];
    const ab_st_tensor *th = ab_st_find(&st, "h");
    AB_CHECK(th && ab_st_to_f32(th, f) == 0 && f[2] == ab_f16_to_f32(h[2]), "F16 -> F32 is not exact");
    const ab_st_tensor *ti = ab_st_find(&st, "bn.num_batches_tracked");
    AB_CHECK(ti && ab_st_to_f32(ti, f) != 0, "I64 converted to fp32 without complaint");
    ab_st_close(&st);
    printf("ok   round trip: F32 (NaN, inf, -0), F16, BF16, I64 scalar, an empty tensor, bit for bit\n");
}

/* a file of a given header and buffer; expect it refused with needle in the message */
static void lie(const char *what, const char *header, long long claimed_len, const char *buffer, size_t buf_len,
                const char *needle) {
    FILE *f = fopen(path, "wb");
    const size_t hl = strlen(header);
    const unsigned long long L = claimed_len >= 0 ? (unsigned long long)claimed_len : hl;
    uint8_t len8[8];
    for (int i = 0; i < 8; i++) len8[i] = (uint8_t)(L >> (8 * i));
    fwrite(len8, 1, 8, f);
    fwrite(header, 1, hl, f);
    if (buf_len) fwrite(buffer, 1, buf_len, f);
    fclose(f);
    ab_safetensors st;
    const int rc = ab_st_open(path, &st);
    AB_CHECK(rc != 0, "%s: accepted", what);
    if (rc == 0) {
        ab_st_close(&st);
        return;
    }
    AB_CHECK(strstr(ab_error(), needle) && strstr(ab_error(), path), "%s: message '%s' does not say '%s'", what,
             ab_error(), needle);
    if (getenv("AB_VERBOSE")) printf("  %-26s %s\n", what, ab_error());
}

static void test_lies(void) {
    const char buf[64] = {0};
    lie("an empty header", "", 0, NULL, 0, "not a JSON object");
    {
        FILE *f = fopen(path, "wb");
        fwrite("\x10\0\0", 1, 3, f);
        fclose(f);
        ab_safetensors st;
        AB_CHECK(ab_st_open(path, &st) != 0 && strstr(ab_error(), "shorter than the 8-byte"), "3-byte file: '%s'",
                 ab_error());
    }
    lie("header past the file", "{}", 4096, NULL, 0, "truncated");
    lie("huge header", "{}", (long long)200 << 20, NULL, 0, "more than");
    lie("not an object", "[1, 2]", -1, NULL, 0, "not a JSON object");
    lie("invalid JSON", "{\"a\": {\"dtype\": ", -1, NULL, 0, "not valid JSON");
    lie("unknown dtype", "{\"a\":{\"dtype\":\"F33\",\"shape\":[1],\"data_offsets\":[0,4]}}", -1, buf, 4, "unknown dtype");
    lie("missing offsets", "{\"a\":{\"dtype\":\"F32\",\"shape\":[1]}}", -1, buf, 4, "needs dtype, shape and data_offsets");
    lie("shape vs offsets", "{\"a\":{\"dtype\":\"F32\",\"shape\":[2,3],\"data_offsets\":[0,20]}}", -1, buf, 20,
        "needs 24 bytes");
    lie("negative dimension", "{\"a\":{\"dtype\":\"F32\",\"shape\":[-1],\"data_offsets\":[0,4]}}", -1, buf, 4,
        "not a non-negative integer");
    lie("overflowing shape",
        "{\"a\":{\"dtype\":\"F32\",\"shape\":[4294967296,4294967296],\"data_offsets\":[0,4]}}", -1, buf, 4,
        "needs");
    lie("offsets past the buffer", "{\"a\":{\"dtype\":\"F32\",\"shape\":[4],\"data_offsets\":[0,16]}}", -1, buf, 8,
        "run past");
    lie("begin after end", "{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[8,4]}}", -1, buf, 8, "begin <= end");
    lie("overlap",
        "{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
        "\"b\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[4,12]}}",
        -1, buf, 12, "overlaps");
    lie("hole",
        "{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]},"
        "\"b\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[8,12]}}",
        -1, buf, 12, "belong to no tensor");
    lie("bytes after the last", "{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}", -1, buf, 12,
        "after the last tensor");
    lie("duplicate name",
        "{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]},"
        "\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[4,8]}}",
        -1, buf, 8, "appears twice");
    lie("metadata not strings", "{\"__metadata__\":{\"format\":1}}", -1, NULL, 0, "not a string");
    /* a real file cut short by one byte */
    const float w[3] = {1, 2, 3};
    const ab_st_entry e = {.name = "w", .dtype = AB_ST_F32, .ndim = 1, .shape = {3}, .data = w};
    ab_st_write(path, &e, 1);
    AB_CHECK(truncate(path, 8 + 8) == 0, "truncate");
    ab_safetensors st;
    AB_CHECK(ab_st_open(path, &st) != 0 && strstr(ab_error(), "truncated"), "a cut file: '%s'", ab_error());
    ab_st_write(path, &e, 1);
    FILE *f = fopen(path, "rb");
    fseek(f, 0, SEEK_END);
    const long size = ftell(f);
    fclose(f);
    AB_CHECK(truncate(path, size - 1) == 0, "truncate");
    AB_CHECK(ab_st_open(path, &st) != 0 && strstr(ab_error(), "run past"), "a file one byte short: '%s'", ab_error());
    printf("ok   lying files refused: length, huge header, JSON, dtype, shape, offsets, overlap, hole, duplicate, "
           "truncation\n");
}

static ab_model *model(const char *name, ab_backend *be, ab_params *p, uint64_t seed) {
    ab_train_config c;
    ab_train_config_defaults(&c);
    c.model = name;
    c.batch_size = 2;
    ab_sample_info si = {.kind = AB_SAMPLE_IMAGE, .C = 3, .H = 16, .W = 16, .n_classes = 10};
    if (strcmp(name, "mlp") == 0) si = (ab_sample_info){.kind = AB_SAMPLE_IMAGE, .C = 1, .H = 28, .W = 28, .n_classes = 10};
    ab_model *m = NULL;
    ab_rng r;
    ab_rng_seed(&r, seed);
    if (ab_workloads.create_model(&c, &si, NULL, &m) != 0 || ab_params_init(p, be, AB_PREC_FP32, m->specs, m->n_specs, &r) != 0 ||
        ab_model_bind(m, p) != 0) {
        fprintf(stderr, "FAIL %s: %s\n", name, ab_error());
        failures++;
        return NULL;
    }
    return m;
}

static void test_checkpoint(void) {
    ab_backend *be = ab_backend_cpu_create(1);
    if (!be) {
        fprintf(stderr, "test_safetensors: %s\n", ab_error());
        exit(1);
    }
    ab_params a, b;
    ab_model *ma = model("resnet-tiny", be, &a, 1), *mb = model("resnet-tiny", be, &b, 2);
    if (!ma || !mb) return;
    for (size_t i = 0; i < a.n_bufs; i++) a.bufs[i] = (float)i * 0.25f; /* running statistics that are not 0/1 */
    ma->batches_tracked = 42;
    AB_CHECK(ab_checkpoint_save(path, ma, &a) == 0, "%s", ab_error());
    char from[512];
    AB_CHECK(ab_checkpoint_load(path, mb, &b, NULL, from, sizeof from) == 0, "%s", ab_error());
    AB_CHECK(memcmp(a.master, b.master, a.n * sizeof(float)) == 0 && memcmp(a.bufs, b.bufs, a.n_bufs * sizeof(float)) == 0,
             "resnet-tiny: weights or buffers differ after save and load");
    AB_CHECK(mb->batches_tracked == 42, "num_batches_tracked %ld, saved 42", mb->batches_tracked);
    AB_CHECK(strstr(from, "tensors from") && strstr(from, "F32"), "account of the load: '%s'", from);
    /* the file has PyTorch's layout: conv1.weight (K, C, R, S), and every batch norm's step count */
    ab_safetensors st;
    AB_CHECK(ab_st_open(path, &st) == 0, "%s", ab_error());
    const ab_st_tensor *c1 = ab_st_find(&st, "conv1.weight"), *nbt = ab_st_find(&st, "layer1.0.bn2.num_batches_tracked");
    const int s0 = ab_params_find(&a, "conv1.weight");
    AB_CHECK(c1 && c1->ndim == 4 && c1->shape[0] == 8 && c1->shape[1] == 3 && c1->shape[2] == 3 && c1->shape[3] == 3,
             "conv1.weight is not (8, 3, 3, 3) in the file");
    if (c1 && s0 >= 0) { /* torch [k][c][r][s] == ours [k][r][s][c] */
        float v[8 * 27];
        ab_st_to_f32(c1, v);
        const float *w = a.master + a.specs[s0].offset;
        AB_CHECK(v[((1 * 3 + 2) * 3 + 0) * 3 + 1] == w[((1 * 3 + 0) * 3 + 1) * 3 + 2], "conv1.weight not permuted to OIHW");
    }
    AB_CHECK(nbt && nbt->dtype == AB_ST_I64 && nbt->ndim == 0, "no I64 scalar num_batches_tracked");

    /* fp16-stored: the same names with F16 data load as the exact widened values */
    ab_st_entry *e = calloc((size_t)st.n, sizeof *e);
    uint16_t **hv = calloc((size_t)st.n, sizeof *hv);
    for (int i = 0; i < st.n; i++) {
        const ab_st_tensor *t = &st.t[i];
        e[i] = (ab_st_entry){.name = t->name, .dtype = t->dtype, .ndim = t->ndim, .data = t->data};
        for (int d = 0; d < t->ndim; d++) e[i].shape[d] = t->shape[d];
        if (t->dtype == AB_ST_F32) {
            float *v = malloc(t->numel * sizeof *v + 1);
            hv[i] = malloc(t->numel * 2 + 1);
            ab_st_to_f32(t, v);
            for (size_t k = 0; k < t->numel; k++) hv[i][k] = ab_f32_to_f16(v[k]);
            e[i].dtype = AB_ST_F16;
            e[i].data = hv[i];
            free(v);
        }
    }
    char p16[300];
    snprintf(p16, sizeof p16, "%s.f16", path);
    AB_CHECK(ab_st_write(p16, e, st.n) == 0, "%s", ab_error());
    AB_CHECK(ab_checkpoint_load(p16, mb, &b, NULL, from, sizeof from) == 0 && strstr(from, "F16"), "%s", ab_error());
    int exact = 1;
    for (size_t i = 0; i < a.n; i++) exact &= b.master[i] == ab_f16_to_f32(ab_f32_to_f16(a.master[i]));
    AB_CHECK(exact, "fp16-stored weights did not load as their exact values");
    /* another model's checkpoint, a wrong shape, a missing and an unexpected tensor */
    ab_params pm;
    ab_model *mm = model("mlp", be, &pm, 3);
    AB_CHECK(mm && ab_checkpoint_load(path, mm, &pm, NULL, from, sizeof from) != 0 && strstr(ab_error(), "fc1.weight"),
             "an mlp loaded a resnet checkpoint: '%s'", ab_error());
    for (int i = 0; i < st.n; i++)
        if (strcmp(e[i].name, "fc.weight") == 0) e[i].shape[0] = 5, e[i].shape[1] *= 2; /* same bytes, other shape */
    AB_CHECK(ab_st_write(p16, e, st.n) == 0, "%s", ab_error());
    AB_CHECK(ab_checkpoint_load(p16, mb, &b, NULL, from, sizeof from) != 0 && strstr(ab_error(), "fc.weight") &&
                 strstr(ab_error(), "shape"),
             "a wrong shape: '%s'", ab_error());
    for (int i = 0; i < st.n; i++)
        if (strcmp(e[i].name, "fc.weight") == 0) e[i].shape[0] = 10, e[i].shape[1] /= 2;
    AB_CHECK(ab_st_write(p16, e, st.n - 1) == 0, "%s", ab_error()); /* the last one (fc.bias) left out */
    AB_CHECK(ab_checkpoint_load(p16, mb, &b, NULL, from, sizeof from) != 0 && strstr(ab_error(), "no tensor 'fc.bias'"),
             "a missing tensor: '%s'", ab_error());
    e[0].name = "extra.weight";
    const char *ignore[] = {"extra.weight", NULL};
    ab_st_entry *e2 = calloc((size_t)st.n + 1, sizeof *e2);
    memcpy(e2, e, (size_t)st.n * sizeof *e);
    e2[st.n] = e2[0];
    e2[0] = (ab_st_entry){.name = st.t[0].name, .dtype = st.t[0].dtype, .ndim = st.t[0].ndim, .data = st.t[0].data};
    for (int d = 0; d < st.t[0].ndim; d++) e2[0].shape[d] = st.t[0].shape[d];
    AB_CHECK(ab_st_write(p16, e2, st.n + 1) == 0, "%s", ab_error());
    AB_CHECK(ab_checkpoint_load(p16, mb, &b, NULL, from, sizeof from) != 0 && strstr(ab_error(), "unexpected tensor 'extra.weight'"),
             "an unexpected tensor: '%s'", ab_error());
    AB_CHECK(ab_checkpoint_load(p16, mb, &b, ignore, from, sizeof from) == 0, "an ignored extra tensor: %s", ab_error());
    printf("ok   checkpoint: resnet-tiny saved and loaded bit for bit (OIHW in the file, num_batches_tracked), "
           "F16-stored, wrong model/shape/missing/unexpected refused\n");
    for (int i = 0; i < st.n; i++) free(hv[i]);
    free(hv), free(e), free(e2);
    unlink(p16);
    ab_st_close(&st);
    ab_model_destroy(ma);
    ab_model_destroy(mb);
    ab_params_free(&a);
    ab_params_free(&b);
    if (mm) {
        ab_model_destroy(mm);
        ab_params_free(&pm);
    }
    be->ops->destroy(be);
}

int main(void) {
    snprintf(path, sizeof path, "/tmp/ab_test_safetensors.%ld.safetensors", (long)getpid());
    test_round_trip();
    test_lies();
    test_checkpoint();
    unlink(path);
    if (failures) fprintf(stderr, "test_safetensors: %d failure(s)\n", failures);
    return failures ? 1 : 0;
}
