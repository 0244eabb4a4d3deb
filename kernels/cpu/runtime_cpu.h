/* Private to kernels/cpu: the runtime under the CPU backend's ops (runtime_cpu.c): its state,
 * host memory charged to the backend's tracker, scratch buffers charged to AB_MEM_CPU_SCRATCH
 * (allocated once, grown, kept until destroy), the exact fp16/bf16 <-> fp32 conversions, a
 * small thread pool for the loops around the GEMMs, and sgemm over that pool. */
#ifndef AB_RUNTIME_CPU_H
#define AB_RUNTIME_CPU_H

#include "backend.h"
#include "cpu_features.h"

typedef struct {
    void *p;
    size_t bytes;
} scratch_buf;

/* Scratch slots. 0-4 belong to backend_cpu.c (gemm, its roles CPU_GEMM_A to CPU_GEMM_ROWS: widened
 * A, B widened or copied untransposed (fp32 too), fp32 product, widened bias, the parts' epilogue
 * rows; col_sum and transformer_cpu.c's sum_squares and unscale_check with the squares, which call
 * no product, reuse 2);
 * CPU_SLOT_GEMM_SERIAL + 0-4 the same roles for a product that runs in one part, on the calling
 * thread alone (a bf16 product cut by columns on the CPU's own bf16 instructions keeps 2-4 for its
 * epilogue, which runs on the calling thread after the pool's parts wrote the sums); the rest to
 * layers_cpu.c, one per role so that an op's buffers never alias each other (a convolution calls
 * ab_cpu_gemm, which uses 0-4 and the serial five only). */
enum { CPU_GEMM_A, CPU_GEMM_B, CPU_GEMM_SUMS, CPU_GEMM_BIAS, CPU_GEMM_ROWS, CPU_GEMM_SLOTS };
enum {
    CPU_SLOT_LAYER_X = CPU_GEMM_SLOTS, /* fp32 input chunk (widened x, or dy for backward_filter's x) */
    CPU_SLOT_LAYER_COL,    /* im2col columns / dcol */
    CPU_SLOT_LAYER_W,      /* widened filter, or forward's w^T copied (fp32 too) */
    CPU_SLOT_LAYER_OUT,    /* fp32 result chunk before the one rounding */
    CPU_SLOT_LAYER_DY,     /* widened dy chunk */
    CPU_SLOT_LAYER_ACC,    /* fp32 accumulators: dw, per-thread partial sums */
    /* A product small enough to run in one part (the MLP's second layer, a classifier head) widens
     * its operands and holds its sums in slots of its own, which only the calling thread writes, not
     * in the pool's 0-4, whose lines the pool's other thread wrote last in the products before it:
     * the MLP's 10 x 256 x 64 weight gradient under AMP took 9.3-28.2 us a step (median 9.7) in
     * the step's sequence of ops with the shared slots and 5.0-5.6 us (5.1) with its own, the same
     * bits (Zen 4 EPYC, 2 threads, results/cpu/2026-12-07-epyc-zen4-2core/serial-slots/). */
    CPU_SLOT_GEMM_SERIAL,
    CPU_SCRATCH_COUNT = CPU_SLOT_GEMM_SERIAL + CPU_GEMM_SLOTS
};

typedef struct cpu_pool cpu_pool;
typedef struct cpu_bf16_part cpu_bf16_part;

typedef struct {
    scratch_buf scratch[CPU_SCRATCH_COUNT];
    int threads;    /* threads for the loops around the GEMMs (OpenBLAS's own count) */
    cpu_pool *pool; /* started on first use, NULL with one thread */
    int bf16_native;             /* bf16 x bf16 products on the CPU's bf16 instructions (onednn_cpu.c) */
    cpu_bf16_part *bf16_parts;   /* their oneDNN primitives, one set per part of the pool */
    int bf16_nparts;
    const char *bf16_fail_step;  /* the first failed oneDNN call since the last message, or NULL */
    int bf16_fail_status;
} cpu_state;

/* Host memory of bytes (64-byte aligned) charged to category cat of be->mem, or NULL with
 * ab_error (out of memory, or over the memory limit); release credits it back, given the same
 * bytes. Where CPU_HUGE_OWN_MAPPING, a buffer of CPU_HUGE_MIN bytes or more (rounded to 64) is a
 * mapping of its own, CPU_HUGE_ALIGN-aligned, that asks for transparent huge pages, the buffer 64
 * bytes past its start (runtime_cpu.c); under AddressSanitizer every buffer stays with the
 * allocator, which checks its bounds. */
#define CPU_HUGE_MIN ((size_t)4 << 20)
#define CPU_HUGE_ALIGN ((size_t)2 << 20)
#if defined(__SANITIZE_ADDRESS__)
#define CPU_UNDER_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define CPU_UNDER_ASAN 1
#endif
#endif
#if !defined(CPU_UNDER_ASAN) && defined(__linux__)
#define CPU_HUGE_OWN_MAPPING 1
#else
#define CPU_HUGE_OWN_MAPPING 0
#endif
void *cpu_alloc(ab_backend *be, ab_mem_category cat, size_t bytes);
void cpu_release(ab_backend *be, ab_mem_category cat, void *p, size_t bytes);

/* fp32 scratch of at least n elements in slot (grown, never shrunk); NULL with ab_error. */
float *cpu_scratch_get(ab_backend *be, int slot, size_t n);
/* every fp16 bit pattern's fp32 value (65536 entries), built on first use */
const float *cpu_f16_table(void);
/* dst = src exactly (fp16/bf16 -> fp32) */
void cpu_widen(size_t n, ab_dtype t, const void *src, float *dst);
/* dst = src rounded once to nearest even (fp32 -> fp16/bf16), F16C where the CPU has it */
void cpu_narrow(size_t n, const float *src, ab_dtype t, void *dst);
/* y = a + b over fp16 (with relu, put through the ReLU: below 0 and -0 become +0, NaN stays), each
 * value widened, added and rounded once in registers (AVX-512, or AVX2 with F16C); 0 when the CPU
 * has neither and nothing was done (the caller converts through fp32 blocks). y may be a or b. */
int cpu_add_f16(size_t n, const uint16_t *a, const uint16_t *b, int relu, uint16_t *y);
/* dst[i] = lut[src[i]] over n bytes, in t (fp32, or fp16 rounded as cpu_narrow rounds): 16 look-ups
 * at a time in registers (AVX-512); 0 when the CPU has no AVX-512 or t is bf16, and nothing was
 * done (the caller looks up one byte at a time) */
int cpu_lut_u8(size_t n, const uint8_t *src, const float *lut, ab_dtype t, void *dst);
/* the same over rows x cols values, src's rows lds elements apart and dst's ldd (one call for the
 * rows of an attention head, a column tile: rows of 10 to 64 values, a call each, cost as much as
 * their conversion) */
void cpu_widen_rows(size_t rows, size_t cols, ab_dtype t, const void *src, size_t lds, float *dst, size_t ldd);
void cpu_narrow_rows(size_t rows, size_t cols, const float *src, size_t lds, ab_dtype t, void *dst, size_t ldd);
/* dst = src rounded once to t (fp16/bf16) and widened back exactly, or with accumulate dst + that
 * (old value first): cpu_narrow then cpu_widen (then the add) in one pass; src may be dst. 1 when
 * a value it stores is infinite or NaN, else 0. */
int cpu_round_trip(size_t n, ab_dtype t, const float *src, float *dst, int accumulate);

/* elements a thread's part of an optimizer pass holds from which it stores its state past the
 * caches (backend_cpu.c's adamw_range and sgd_range): 1 MiB an array and more, where the pass
 * moves more than the caches keep */
enum { CPU_STREAM_MIN = 1 << 18 };

/* elements per thread below which a second thread does not pay for a conversion or an add: the
 * pool's workers spin between the ops of a step (a job reaches a spinning worker in about 0.1 us),
 * and 8K values take about 0.25 us to widen (Zen 5, AVX-512). The MLP's step widens 16K to 50K
 * values at a time (its batch, its hidden layer) before products that every thread then reads. */
enum { CONVERT_MIN = 1 << 13 };
/* the two above over the pool, in ranges of at least CONVERT_MIN elements */
void cpu_widen_par(ab_backend *be, size_t n, ab_dtype t, const void *src, float *dst);
void cpu_narrow_par(ab_backend *be, size_t n, const float *src, ab_dtype t, void *dst);
/* dst (cols x rows, leading dimension ldd, fp32) = src^T (rows x cols of type t, leading dimension
 * lds) widened exactly, over the pool: what the products multiply instead of a transposed B
 * (oneDNN's sgemm takes a B stored untransposed faster; runtime_cpu.c says by how much) */
void cpu_transpose_par(ab_backend *be, int rows, int cols, ab_dtype t, const void *src, int lds, float *dst,
                       int ldd);
/* the same on the calling thread alone */
void cpu_transpose(int rows, int cols, ab_dtype t, const void *src, int lds, float *dst, int ldd);

/* Runs fn(ctx, part, lo, hi) over [0, n) cut into `part`s 0, 1, ... of contiguous ranges, at
 * most st->threads of them and none under min_per_thread items, the calling thread taking part 0;
 * returns when all are done. part indexes per-thread scratch. The split depends only on n and the
 * thread count, and callers keep their sums independent of it. */
typedef void (*cpu_range_fn)(void *ctx, int part, size_t lo, size_t hi);

/* Reductions that vectorize and give the same bits in every copy: CPU_LANES lanes, lane l taking
 * elements l, l + CPU_LANES, ... (a loop over whole groups of CPU_LANES, then the tail into the
 * first lanes), the lanes then added pairwise in a fixed tree by these */
enum { CPU_LANES = 16 };
static inline __attribute__((always_inline)) double cpu_lanes_sum_d(double *a) {
    for (int w = CPU_LANES / 2; w > 0; w /= 2)
        for (int l = 0; l < w; l++) a[l] += a[l + w];
    return a[0];
}
static inline __attribute__((always_inline)) float cpu_lanes_sum_f(float *a) {
    for (int w = CPU_LANES / 2; w > 0; w /= 2)
        for (int l = 0; l < w; l++) a[l] += a[l + w];
    return a[0];
}

/* CPU_RANGE_AVX512(name) defines the cpu_range_fn `name` from the always-inline name##_body: the
 * body compiled as the build targets it, and again for AVX-512 (16 floats, 8 doubles a vector) and
 * for AVX2 with FMA (8 and 4), the widest copy the CPU has taken. The CPU backend is compiled with
 * -ffp-contract=off, so no copy fuses a multiply and an add that the source does not (an explicit
 * fmaf, as in core/kernel_math.h's polynomials, is one rounding in every copy: an instruction where
 * the target has FMA, libm's exact fmaf where it has not), and vectorizing across independent
 * elements keeps every element's (and every per-channel sum's) order: the copies give the same
 * bits. */
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define CPU_RANGE_AVX512(name)                                                                     \
    __attribute__((target("avx512f,avx512dq,avx512bw,avx512vl"))) static void name##_avx512(      \
        void *ctx, int part, size_t lo, size_t hi) {                                               \
        name##_body(ctx, part, lo, hi);                                                            \
    }                                                                                              \
    __attribute__((target("avx2,fma"))) static void name##_avx2(void *ctx, int part, size_t lo,    \
                                                                size_t hi) {                       \
        name##_body(ctx, part, lo, hi);                                                            \
    }                                                                                              \
    static void name(void *ctx, int part, size_t lo, size_t hi) {                                  \
        if (ab_cpu_has_avx512())                                                                   \
            name##_avx512(ctx, part, lo, hi);                                                      \
        else if (ab_cpu_has_avx2())                                                                \
            name##_avx2(ctx, part, lo, hi);                                                        \
        else                                                                                       \
            name##_body(ctx, part, lo, hi);                                                        \
    }
#else
#define CPU_RANGE_AVX512(name)                                                                     \
    static void name(void *ctx, int part, size_t lo, size_t hi) { name##_body(ctx, part, lo, hi); }
#endif
void cpu_parallel_for(ab_backend *be, size_t n, size_t min_per_thread, cpu_range_fn fn, void *ctx);
/* the parts cpu_parallel_for splits n items into (per-part scratch is sized by it) */
int cpu_parallel_parts(ab_backend *be, size_t n, size_t min_per_thread);
void cpu_pool_free(cpu_state *st);

/* C = alpha op(A) op(B) + beta C, row-major, over the pool: oneDNN's sgemm (OpenBLAS's without
 * it) runs single-threaded (a library's own spinning workers would otherwise compete with the
 * pool's for the same cores), one call a tile of C's rows (of its columns when it has fewer rows
 * than columns; cpu_gemm_tile), so that every element comes from one call of a shape that does
 * not depend on the threads. B is multiplied as it is stored: a caller whose B is transposed copies
 * it untransposed first where that pays (cpu_transpose_par, CPU_SGEMM_TRANSPOSE_MIN_M). */
void cpu_sgemm(ab_backend *be, int ta, int tb, int M, int N, int K, float alpha, const float *A, int lda,
               const float *B, int ldb, float beta, float *C, int ldc);
/* the same on the calling thread alone (one part's product) */
void cpu_sgemm_1(int ta, int tb, int M, int N, int K, float alpha, const float *A, int lda, const float *B, int ldb,
                 float beta, float *C, int ldc);
/* below this many multiply-adds, or under 2 x CPU_GEMM_MIN_SPLIT rows (columns), a product takes
 * one part: a second thread's start costs more */
enum { CPU_GEMM_PAR_MIN_MACS = 1 << 18, CPU_GEMM_MIN_SPLIT = 32, CPU_GEMM_MAX_TILE = 512 };
/* a transposed 16-bit A of at most this many floats (as stored: the MLP's first-layer weight
 * gradient reads dH^T, 16K; also the pooler's weight gradient and ResNet-50's filter gradients
 * where a batch's rows are few, as in layers 2 to 4 on CIFAR's 32x32 with the 7x7 stem) in a
 * product cut by rows over more than one part is widened by each part into its own copy, the
 * columns its tiles read, not once over the pool: a part then reads no line of A the other thread
 * wrote, and the pool is not woken for A's pass (B, where it needs widening, still is). The
 * MLP's first-layer weight gradient (about 150 us in AMP) took 1.4 to 3.2 us less so in each of
 * 11 processes, and 17 us less in a twelfth that met one of the machine's slow spells (Zen 4 EPYC,
 * 2 threads, the two ways taking turns in each process: results/cpu/2026-12-07-epyc-zen4-2core/
 * dw1-split/; the other products were not timed apart). A larger A is widened over the pool once:
 * each part's copy, full-size so that every library call's shape stays as on one thread, would be
 * as large as A. The same bound takes a 16-bit A, transposed or not, of a product cut by columns
 * over more than one part: each part widens the whole of it into its own copy (the MLP's first
 * layer reads the batch, 50K values: 137 us against 145 with the pool's one widening). */
enum { CPU_GEMM_OWN_A_MAX = 1 << 16 };
/* below this many rows of C an fp32 product reads a transposed B as it is stored: the copy
 * (cpu_transpose_par) would cost more than it saves. A 16-bit B is widened anyway, and is copied
 * untransposed whatever the rows. */
enum { CPU_SGEMM_TRANSPOSE_MIN_M = 16 };
/* whether a product of `rows` rows of C copies its transposed B of type bt untransposed first (the
 * one rule for ab_cpu_gemm, the batched products and the convolutions' forward) */
static inline int cpu_copies_bt(ab_dtype bt, size_t rows) {
    return bt != AB_F32 || rows >= CPU_SGEMM_TRANSPOSE_MIN_M;
}

/* Products are cut into tiles of rows (columns) by their shape alone, about eight of 32 to 512,
 * and the pool shares the tiles out: every library call's shape, and so every sum (a library may
 * choose its kernels by the call's shape), is the same whatever the number of threads. The tile
 * for `along` rows (columns) of a product of `macs` multiply-adds; `along` itself for one tile. */
static inline int cpu_gemm_tile(int along, double macs) {
    if (macs < CPU_GEMM_PAR_MIN_MACS || along < 2 * CPU_GEMM_MIN_SPLIT) return along;
    int t = (along / 8 + CPU_GEMM_MIN_SPLIT - 1) / CPU_GEMM_MIN_SPLIT * CPU_GEMM_MIN_SPLIT;
    if (t < CPU_GEMM_MIN_SPLIT) t = CPU_GEMM_MIN_SPLIT;
    return t > CPU_GEMM_MAX_TILE ? CPU_GEMM_MAX_TILE : t;
}

/* whether a product of M rows, N columns and `macs` multiply-adds is cut by columns (few rows, many
 * columns: one tile of rows, several of columns). ab_cpu_gemm then converts B a column tile at a
 * time in each part's cache, and cpu_sgemm cuts the same columns. */
static inline int cpu_gemm_by_columns(int M, int N, double macs) {
    return cpu_gemm_tile(M, macs) == M && cpu_gemm_tile(N, macs) < N;
}
/* the tiles cpu_gemm_tile cuts `along` rows (columns) into */
static inline int cpu_gemm_tiles(int along, double macs) {
    const int t = cpu_gemm_tile(along, macs);
    return (along + t - 1) / t;
}
/* whether ab_cpu_gemm (emulated products) cuts a product by columns: as cpu_gemm_by_columns, and
 * also where B is transposed and copied untransposed first (copies_bt: cpu_copies_bt) and its
 * columns make more tiles than its rows. Cut by rows, every part would read the whole copy, half
 * of it written by the other thread just before; cut by columns, each part copies only its own
 * columns of B and multiplies them while they are in its cache. The MLP's
 * first layer at batch 64 (64 x 256 x 784, W1 transposed: two tiles of rows, eight of columns)
 * took 134 us instead of 166 in fp32 and 137 instead of 167 in fp16, the same bits (Zen 4 EPYC, 2
 * threads, the ways taking turns in one process: results/cpu/2026-12-07-epyc-zen4-2core/fwd-cols/).
 * A weight gradient whose 16-bit B is the batch (the MLP's dW1, 256 x 784 x 64: eight tiles of
 * rows, seven of columns) stays cut by rows; by columns it took longer (146 against 137 us). So
 * do the products with an untransposed 16-bit B that the rule leaves alone (ResNet-50's
 * convolutions at 128 or fewer rows of pixels): they were not timed by columns. */
static inline int cpu_gemm_copies_by_columns(int M, int N, double macs, int copies_bt) {
    return cpu_gemm_by_columns(M, N, macs) || (copies_bt && cpu_gemm_tiles(N, macs) > cpu_gemm_tiles(M, macs));
}

/* onednn_cpu.c: C = alpha op(A) op(B) + beta C in oneDNN's sgemm on the calling thread alone;
 * -1 when it fails or the build has no oneDNN (the caller then uses OpenBLAS). The version
 * ("oneDNN 2.6.3"), or NULL without it. */
int cpu_sgemm_onednn(int ta, int tb, int M, int N, int K, float alpha, const float *A, int lda, const float *B,
                     int ldb, float beta, float *C, int ldc);
const char *cpu_onednn_version(void);
/* onednn_cpu.c: whether this CPU and build can multiply bf16 natively (AVX512-BF16 or AMX,
 * through oneDNN), and a few words saying so or why not ("native (AVX512-BF16, oneDNN 2.6.3
 * matmul)", "emulated (no AVX512-BF16 or AMX on this CPU; ...)"). */
int cpu_bf16_native_available(void);
const char *cpu_bf16_native_describe(void);
/* C (M x N, fp32, leading dimension ldc) = op(A) op(B) for bf16 A and B, row-major, over the pool
 * like cpu_sgemm; -1 with ab_error when oneDNN fails or is absent. */
int cpu_gemm_bf16_native(ab_backend *be, int ta, int tb, int M, int N, int K, const uint16_t *A, int lda,
                         const uint16_t *B, int ldb, float *C, int ldc);
/* the same on the calling thread alone, as part `part` of the pool (its own oneDNN primitives),
 * -1 without ab_error on failure (the caller, back on its own thread, reports it);
 * cpu_bf16_parts_ready (-1 with ab_error) first, outside the pool's parts */
int cpu_bf16_parts_ready(ab_backend *be);
int cpu_gemm_bf16_on_part(ab_backend *be, int part, int ta, int tb, int M, int N, int K, const uint16_t *A, int lda,
                          const uint16_t *B, int ldb, float *C, int ldc);
void cpu_bf16_parts_free(cpu_state *st);
/* "dnnl_primitive_create: out_of_memory": the first oneDNN call that failed since the last time
 * this was asked (for the calling thread's error message) */
const char *cpu_bf16_failure(ab_backend *be);

#endif
