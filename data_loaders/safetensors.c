/* safetensors reader (mmap + cJSON, every offset checked before use) and atomic writer. */
#include "safetensors.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ab.h"
#include "fileio.h"
#include "half.h"

static const struct {
    const char *name;
    size_t size;
} dtypes[AB_ST_DTYPE_COUNT] = {
    [AB_ST_F64] = {"F64", 8}, [AB_ST_F32] = {"F32", 4}, [AB_ST_F16] = {"F16", 2}, [AB_ST_BF16] = {"BF16", 2},
    [AB_ST_I64] = {"I64", 8}, [AB_ST_I32] = {"I32", 4}, [AB_ST_I16] = {"I16", 2}, [AB_ST_I8] = {"I8", 1},
    [AB_ST_U8] = {"U8", 1},   [AB_ST_BOOL] = {"BOOL", 1},
};

const char *ab_st_dtype_name(ab_st_dtype t) { return (unsigned)t < AB_ST_DTYPE_COUNT ? dtypes[t].name : "?"; }
size_t ab_st_dtype_size(ab_st_dtype t) { return (unsigned)t < AB_ST_DTYPE_COUNT ? dtypes[t].size : 0; }

static int parse_dtype(const char *s, ab_st_dtype *out) {
    for (int i = 0; i < AB_ST_DTYPE_COUNT; i++)
        if (strcmp(s, dtypes[i].name) == 0) {
            *out = (ab_st_dtype)i;
            return 0;
        }
    return -1;
}

/* a JSON number that is a whole number in [0, 2^53] */
static int json_count(const cJSON *v, uint64_t *out) {
    if (!cJSON_IsNumber(v)) return -1;
    const double d = v->valuedouble;
    if (!(d >= 0.0) || d > 9007199254740992.0 || floor(d) != d) return -1;
    *out = (uint64_t)d;
    return 0;
}

void ab_st_close(ab_safetensors *st) {
    for (int i = 0; i < st->n; i++) free(st->t[i].name);
    free(st->t);
    if (st->mapped && st->base) munmap((void *)st->base, st->size);
    memset(st, 0, sizeof *st);
}

static int by_offset(const void *a, const void *b) {
    const ab_st_tensor *x = *(const ab_st_tensor *const *)a, *y = *(const ab_st_tensor *const *)b;
    if (x->data != y->data) return x->data < y->data ? -1 : 1;
    return x->bytes < y->bytes ? -1 : x->bytes > y->bytes;
}

static int by_name(const void *a, const void *b) {
    return strcmp((*(const ab_st_tensor *const *)a)->name, (*(const ab_st_tensor *const *)b)->name);
}

static int parse_header(ab_safetensors *st, const char *nm) {
    if (st->size < 8) return ab_errorf("%s: truncated: %zu bytes, shorter than the 8-byte header length", nm, st->size);
    uint64_t hlen = 0;
    for (int i = 7; i >= 0; i--) hlen = (hlen << 8) | st->base[i];
    if (hlen > AB_ST_MAX_HEADER)
        return ab_errorf("%s: header of %llu bytes claimed, more than the %llu a safetensors file may have", nm,
                         (unsigned long long)hlen, (unsigned long long)AB_ST_MAX_HEADER);
    if (hlen > st->size - 8)
        return ab_errorf("%s: truncated: the header claims %llu bytes, the file has %zu after the length", nm,
                         (unsigned long long)hlen, st->size - 8);
    const char *h = (const char *)st->base + 8;
    if (hlen < 2 || h[0] != '{') return ab_errorf("%s: the header is not a JSON object", nm);
    const uint8_t *data = st->base + 8 + hlen;
    const size_t data_size = st->size - 8 - (size_t)hlen;
    cJSON *root = cJSON_ParseWithLength(h, (size_t)hlen);
    if (!root || !cJSON_IsObject(root)) {
        cJSON_Delete(root);
        return ab_errorf("%s: the header is not valid JSON", nm);
    }
    int count = 0;
    for (const cJSON *e = root->child; e; e = e->next) count++;
    st->t = calloc((size_t)(count ? count : 1), sizeof *st->t);
    ab_st_tensor **order = calloc((size_t)(count ? count : 1), sizeof *order);
    int rc = (!st->t || !order) ? ab_errorf("%s: out of host memory for %d header entries", nm, count) : 0;
    for (const cJSON *e = root->child; rc == 0 && e; e = e->next) {
        const char *key = e->string ? e->string : "";
        if (strcmp(key, "__metadata__") == 0) {
            if (!cJSON_IsObject(e)) rc = ab_errorf("%s: __metadata__ is not an object", nm);
            for (const cJSON *m = e->child; rc == 0 && m; m = m->next)
                if (!cJSON_IsString(m)) rc = ab_errorf("%s: __metadata__ value '%s' is not a string", nm, m->string);
            continue;
        }
        ab_st_tensor *t = &st->t[st->n];
        const cJSON *dt = cJSON_GetObjectItemCaseSensitive(e, "dtype");
        const cJSON *sh = cJSON_GetObjectItemCaseSensitive(e, "shape");
        const cJSON *of = cJSON_GetObjectItemCaseSensitive(e, "data_offsets");
        if (!cJSON_IsObject(e) || !cJSON_IsString(dt) || !cJSON_IsArray(sh) || !cJSON_IsArray(of) ||
            cJSON_GetArraySize(of) != 2) {
            rc = ab_errorf("%s: tensor '%s': needs dtype, shape and data_offsets [begin, end]", nm, key);
            break;
        }
        if (!(t->name = strdup(key))) {
            rc = ab_errorf("%s: out of host memory", nm);
            break;
        }
        st->n++;
        if (parse_dtype(dt->valuestring, &t->dtype) != 0) {
            rc = ab_errorf("%s: tensor '%s': unknown dtype '%.16s'", nm, key, dt->valuestring);
            break;
        }
        t->ndim = cJSON_GetArraySize(sh);
        if (t->ndim > AB_ST_MAX_DIMS) {
            rc = ab_errorf("%s: tensor '%s': %d dimensions (at most %d)", nm, key, t->ndim, AB_ST_MAX_DIMS);
            break;
        }
        /* numel * element size without overflow, and no more than the file could hold */
        uint64_t numel = 1;
        int d = 0;
        for (const cJSON *v = sh->child; v; v = v->next, d++) {
            uint64_t x;
            if (json_count(v, &x) != 0) {
                rc = ab_errorf("%s: tensor '%s': dimension %d is not a non-negative integer", nm, key, d);
                break;
            }
            t->shape[d] = (int64_t)x;
            if (x && numel > (uint64_t)st->size / x) numel = (uint64_t)st->size + 1; /* more than the file */
            else numel *= x;
        }
        if (rc) break;
        uint64_t begin, end;
        if (json_count(of->child, &begin) != 0 || json_count(of->child->next, &end) != 0 || end < begin) {
            rc = ab_errorf("%s: tensor '%s': data_offsets are not 0 <= begin <= end", nm, key);
            break;
        }
        if (end > data_size) {
            rc = ab_errorf("%s: tensor '%s': data_offsets [%llu, %llu] run past the %zu-byte buffer (truncated?)", nm,
                           key, (unsigned long long)begin, (unsigned long long)end, data_size);
            break;
        }
        const uint64_t need = numel > (uint64_t)st->size ? UINT64_MAX : numel * ab_st_dtype_size(t->dtype);
        if (need != end - begin) {
            rc = ab_errorf("%s: tensor '%s': %s of %llu elements needs %llu bytes, its offsets give %llu", nm, key,
                           ab_st_dtype_name(t->dtype), (unsigned long long)numel, (unsigned long long)need,
                           (unsigned long long)(end - begin));
            break;
        }
        t->numel = (size_t)numel;
        t->data = data + begin;
        t->bytes = (size_t)(end - begin);
    }
    cJSON_Delete(root);
    if (rc == 0) { /* a name twice: sorted by name, neighbours (linear in the entries, not quadratic) */
        for (int i = 0; i < st->n; i++) order[i] = &st->t[i];
        qsort(order, (size_t)st->n, sizeof *order, by_name);
        for (int i = 1; rc == 0 && i < st->n; i++)
            if (strcmp(order[i - 1]->name, order[i]->name) == 0)
                rc = ab_errorf("%s: tensor '%s' appears twice in the header", nm, order[i]->name);
    }
    if (rc == 0) { /* the tensors tile the buffer: no overlap, no hole */
        qsort(order, (size_t)st->n, sizeof *order, by_offset);
        size_t at = 0;
        for (int i = 0; rc == 0 && i < st->n; i++) {
            const size_t b = (size_t)(order[i]->data - data);
            if (b < at)
                rc = ab_errorf("%s: tensor '%s' overlaps the tensor before it in the buffer", nm, order[i]->name);
            else if (b > at)
                rc = ab_errorf("%s: bytes [%zu, %zu) of the buffer belong to no tensor", nm, at, b);
            at = b + order[i]->bytes;
        }
        if (rc == 0 && at != data_size)
            rc = ab_errorf("%s: %zu bytes after the last tensor belong to no tensor", nm, data_size - at);
    }
    free(order);
    return rc;
}

int ab_st_parse(const void *bytes, size_t size, const char *name, ab_safetensors *st) {
    memset(st, 0, sizeof *st);
    snprintf(st->path, sizeof st->path, "%s", name);
    st->base = bytes;
    st->size = size;
    if (parse_header(st, name) != 0) {
        ab_st_close(st);
        return -1;
    }
    return 0;
}

int ab_st_open(const char *path, ab_safetensors *st) {
    memset(st, 0, sizeof *st);
    const int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return ab_errorf("%s: cannot open (%s)", path, strerror(errno));
    struct stat sb;
    if (fstat(fd, &sb) != 0 || !S_ISREG(sb.st_mode)) {
        close(fd);
        return ab_errorf("%s: not a regular file", path);
    }
    void *p = NULL;
    if (sb.st_size > 0 && (p = mmap(NULL, (size_t)sb.st_size, PROT_READ, MAP_PRIVATE, fd, 0)) == MAP_FAILED) {
        close(fd);
        return ab_errorf("%s: cannot map (%s)", path, strerror(errno));
    }
    close(fd);
    snprintf(st->path, sizeof st->path, "%s", path);
    st->base = p;
    st->size = (size_t)sb.st_size;
    st->mapped = p != NULL;
    if (parse_header(st, path) != 0) {
        ab_st_close(st);
        return -1;
    }
    return 0;
}

const ab_st_tensor *ab_st_find(const ab_safetensors *st, const char *name) {
    for (int i = 0; i < st->n; i++)
        if (strcmp(st->t[i].name, name) == 0) return &st->t[i];
    return NULL;
}

int ab_st_to_f32(const ab_st_tensor *t, float *out) {
    const uint8_t *b = t->data;
    for (size_t i = 0; i < t->numel; i++) {
        switch (t->dtype) {
        case AB_ST_F32: {
            uint32_t u = (uint32_t)b[4 * i] | (uint32_t)b[4 * i + 1] << 8 | (uint32_t)b[4 * i + 2] << 16 |
                         (uint32_t)b[4 * i + 3] << 24;
            out[i] = ab_bits_f32(u);
            break;
        }
        case AB_ST_F16: out[i] = ab_f16_to_f32((uint16_t)(b[2 * i] | b[2 * i + 1] << 8)); break;
        case AB_ST_BF16: out[i] = ab_bf16_to_f32((uint16_t)(b[2 * i] | b[2 * i + 1] << 8)); break;
        case AB_ST_F64: {
            uint64_t u = 0;
            for (int k = 7; k >= 0; k--) u = (u << 8) | b[8 * i + (size_t)k];
            double d;
            memcpy(&d, &u, sizeof d);
            out[i] = (float)d;
            break;
        }
        default: return ab_errorf("tensor '%s': %s is not a floating-point type", t->name, ab_st_dtype_name(t->dtype));
        }
    }
    return 0;
}

static size_t entry_bytes(const ab_st_entry *e) {
    size_t n = ab_st_dtype_size(e->dtype);
    for (int d = 0; d < e->ndim; d++) n *= (size_t)e->shape[d];
    return n;
}

int ab_st_write(const char *path, const ab_st_entry *e, int n) {
    cJSON *root = cJSON_CreateObject();
    cJSON *meta = cJSON_CreateObject();
    int rc = (!root || !meta) ? -1 : 0;
    if (rc == 0) {
        cJSON_AddStringToObject(meta, "format", "pt");
        cJSON_AddItemToObject(root, "__metadata__", meta);
        meta = NULL;
    }
    size_t off = 0;
    for (int i = 0; rc == 0 && i < n; i++) {
        if ((unsigned)e[i].dtype >= AB_ST_DTYPE_COUNT || e[i].ndim < 0 || e[i].ndim > AB_ST_MAX_DIMS) {
            cJSON_Delete(root);
            return ab_errorf("%s: tensor '%s': bad dtype or rank", path, e[i].name);
        }
        cJSON *t = cJSON_CreateObject(), *sh = cJSON_CreateArray(), *of = cJSON_CreateArray();
        if (!t || !sh || !of) {
            cJSON_Delete(t), cJSON_Delete(sh), cJSON_Delete(of);
            rc = -1;
            break;
        }
        cJSON_AddStringToObject(t, "dtype", ab_st_dtype_name(e[i].dtype));
        for (int d = 0; d < e[i].ndim; d++) cJSON_AddItemToArray(sh, cJSON_CreateNumber((double)e[i].shape[d]));
        cJSON_AddItemToObject(t, "shape", sh);
        const size_t nb = entry_bytes(&e[i]);
        cJSON_AddItemToArray(of, cJSON_CreateNumber((double)off));
        cJSON_AddItemToArray(of, cJSON_CreateNumber((double)(off + nb)));
        cJSON_AddItemToObject(t, "data_offsets", of);
        cJSON_AddItemToObject(root, e[i].name, t);
        off += nb;
    }
    char *text = rc == 0 ? cJSON_PrintUnformatted(root) : NULL;
    cJSON_Delete(root);
    cJSON_Delete(meta);
    if (!text) return ab_errorf("%s: out of host memory building the header", path);
    const size_t tl = strlen(text), hlen = (tl + 8 + 7) / 8 * 8 - 8; /* data starts 8-byte aligned */
    /* the header's length, the header padded with spaces, then each tensor's bytes */
    const size_t n_parts = 3 + (size_t)(n > 0 ? n : 0);
    ab_file_part *parts = malloc(n_parts * sizeof *parts);
    if (!parts) {
        cJSON_free(text);
        return ab_errorf("%s: out of host memory", path);
    }
    uint8_t len8[8];
    for (int i = 0; i < 8; i++) len8[i] = (uint8_t)((uint64_t)hlen >> (8 * i));
    parts[0] = (ab_file_part){len8, 8};
    parts[1] = (ab_file_part){text, tl};
    parts[2] = (ab_file_part){"       ", hlen - tl};
    for (int i = 0; i < n; i++) parts[3 + i] = (ab_file_part){e[i].data, entry_bytes(&e[i])};
    rc = ab_write_parts_atomic(path, parts, n_parts);
    free(parts);
    cJSON_free(text);
    return rc;
}
