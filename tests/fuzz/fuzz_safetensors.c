/* libFuzzer target for the safetensors reader: the input parsed from memory (ab_st_parse) and
 * mapped as a file (ab_st_open); every tensor of an accepted file is converted to fp32 into a
 * buffer of exactly numel floats, so a tensor whose bytes run past the file is caught. */
#include "fuzz_file.h"

#include "ab.h"
#include "safetensors.h"

static fuzz_file file;

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc, (void)argv;
    fuzz_file_open(&file, "safetensors");
    return 0;
}

static int is_float(ab_st_dtype t) { return t == AB_ST_F32 || t == AB_ST_F16 || t == AB_ST_BF16 || t == AB_ST_F64; }

static void check_tensors(const ab_safetensors *st) {
    for (int i = 0; i < st->n; i++) {
        const ab_st_tensor *t = &st->t[i];
        FUZZ_CHECK(t->name && ab_st_find(st, t->name) == t); /* names are unique */
        FUZZ_CHECK(t->ndim >= 0 && t->ndim <= AB_ST_MAX_DIMS);
        size_t numel = 1;
        for (int d = 0; d < t->ndim; d++) numel *= (size_t)t->shape[d];
        FUZZ_CHECK(numel == t->numel && t->bytes == t->numel * ab_st_dtype_size(t->dtype));
        FUZZ_CHECK(t->data >= st->base && (size_t)(t->data - st->base) + t->bytes <= st->size);
        if (is_float(t->dtype)) {
            float *out = malloc((t->numel ? t->numel : 1) * sizeof *out);
            FUZZ_CHECK(out != NULL);
            FUZZ_CHECK(ab_st_to_f32(t, out) == 0);
            if (t->dtype == AB_ST_F32) FUZZ_CHECK(memcmp(out, t->data, t->bytes) == 0); /* bit-exact */
            free(out);
        } else {
            float one;
            FUZZ_CHECK(ab_st_to_f32(t, &one) == (t->numel ? -1 : 0)); /* refused before any write */
        }
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    static const char name[] = "fuzz-input.safetensors";
    ab_safetensors a, b;
    const int rc_parse = ab_st_parse(data, size, name, &a);
    if (rc_parse != 0) {
        FUZZ_CHECK(a.t == NULL && a.n == 0);
        FUZZ_CHECK(strstr(ab_error(), name) != NULL); /* errors name the file */
    } else {
        check_tensors(&a);
    }
    fuzz_file_set(&file, data, size);
    const int rc_open = ab_st_open(file.path, &b);
    FUZZ_CHECK(rc_open == rc_parse);
    if (rc_open != 0) {
        FUZZ_CHECK(strstr(ab_error(), file.path) != NULL);
        return 0;
    }
    check_tensors(&b);
    FUZZ_CHECK(a.n == b.n);
    for (int i = 0; i < a.n; i++) {
        FUZZ_CHECK(strcmp(a.t[i].name, b.t[i].name) == 0 && a.t[i].dtype == b.t[i].dtype);
        FUZZ_CHECK(a.t[i].data - a.base == b.t[i].data - b.base && a.t[i].bytes == b.t[i].bytes);
    }
    ab_st_close(&a);
    ab_st_close(&b);
    return 0;
}
