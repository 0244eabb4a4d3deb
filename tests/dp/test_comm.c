/* The communicator engines against host arithmetic: all-reduce SUM and AVG of fp32 and fp16
 * buffers (seeded random values, different on every rank), int64 MIN/MAX/SUM, double SUM/AVG,
 * all-gather, broadcast and barrier, on whatever world mpirun gives (1 without it), and bf16 as
 * fp16 (each pairwise sum rounded once to bf16).
 *   test_comm mpi    CPU backend, OpenMPI (label mpi, mpirun -np 2)
 *   test_comm nccl   CUDA backend, NCCL (label gpu): prints SKIPPED and exits 77 when the build
 *                    has no NCCL or no GPU is usable. Without mpirun it is a world of one booted
 *                    without MPI (the GPU check's way): NCCL's init, the all-reduces (a world of
 *                    one gives its buffer back bit for bit) and teardown still run.
 * fp32 sums over W ranks are compared with a float64 sum (AB_TOL_FP32_REL); fp16 with the sum
 * of the fp16 inputs rounded once per pairwise add, so to fp16 storage (AB_TOL_FP16_NMSE), and
 * with 2 ranks bit for bit against the scalar reference (fp32 add, one rounding to fp16).
 * The fp16 semantics of core/comm.h, bit for bit on every world size: a sum reaching 65520 is
 * +-inf under SUM and AVG alike, a sum of 65504 is not, and AVG of W sevens is exactly 7 (the
 * scaling is one multiply after the sum; NCCL's ncclAvg, pre-multiplying by fp16(1/W), would
 * give 40000 for two ranks' 40000 and 6.996 for three ranks' 7). Also: --comm nccl with
 * --device cpu is refused, the GPU chosen for a node-local rank, and the device each engine
 * records. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend_cpu.h"
#include "backend_cuda.h"
#include "comm_engines.h"
#include "half.h"
#include "platform.h"
#include "rng.h"
#include "tolerances.h"

static int failures = 0;

#define N_ELEMS 4099 /* not a multiple of any chunking */

static void fill(float *x, size_t n, int rank) {
    ab_rng r;
    ab_rng_seed(&r, 77 + (uint64_t)rank);
    for (size_t i = 0; i < n; i++) x[i] = (float)ab_rng_normal(&r);
}

/* a 16-bit type's rounding and widening */
static uint16_t to16(ab_dtype t, float v) { return t == AB_F16 ? ab_f32_to_f16(v) : ab_f32_to_bf16(v); }
static float from16(ab_dtype t, uint16_t h) { return t == AB_F16 ? ab_f16_to_f32(h) : ab_bf16_to_f32(h); }

static void test_allreduce(ab_comm *c, ab_backend *be, ab_dtype t, ab_reduce_op op) {
    const int W = c->size, lowp = t != AB_F32;
    const size_t es = ab_dtype_size(t);
    float *mine = malloc(N_ELEMS * sizeof(float)), *other = malloc(N_ELEMS * sizeof(float));
    double *expect = calloc(N_ELEMS, sizeof(double));
    uint16_t *h16 = malloc(N_ELEMS * sizeof(uint16_t));
    float *got = malloc(N_ELEMS * sizeof(float));
    for (int r = 0; r < W; r++) {
        fill(other, N_ELEMS, r);
        for (size_t i = 0; i < N_ELEMS; i++)
            expect[i] += lowp ? (double)from16(t, to16(t, other[i])) : (double)other[i];
    }
    if (op == AB_RED_AVG)
        for (size_t i = 0; i < N_ELEMS; i++) expect[i] /= W;
    fill(mine, N_ELEMS, c->rank);
    void *buf = be->ops->alloc(be, AB_MEM_WORKSPACE, N_ELEMS * es);
    if (lowp)
        for (size_t i = 0; i < N_ELEMS; i++) h16[i] = to16(t, mine[i]);
    int rc = buf ? 0 : -1;
    if (rc == 0) rc = be->ops->upload(be, buf, lowp ? (void *)h16 : (void *)mine, N_ELEMS * es);
    if (rc == 0) rc = c->ops->allreduce(c, buf, N_ELEMS, t, op);
    if (rc == 0) rc = be->ops->download(be, lowp ? (void *)h16 : (void *)got, buf, N_ELEMS * es);
    char what[96];
    snprintf(what, sizeof what, "%s allreduce %s %s (world %d)", c->ops->name, ab_dtype_name(t),
             op == AB_RED_AVG ? "avg" : "sum", W);
    if (rc != 0) {
        fprintf(stderr, "FAIL %s: %s\n", what, ab_error());
        failures++;
    } else {
        if (lowp && W == 2) { /* one pairwise sum (then an exact halving): bit for bit */
            float a[N_ELEMS];
            fill(a, N_ELEMS, 0);
            fill(other, N_ELEMS, 1);
            size_t bad = 0, first = 0;
            for (size_t i = 0; i < N_ELEMS; i++) {
                uint16_t e = to16(t, from16(t, to16(t, a[i])) + from16(t, to16(t, other[i])));
                if (op == AB_RED_AVG) e = to16(t, from16(t, e) * 0.5f);
                if (h16[i] != e && !bad++) first = i;
            }
            AB_CHECK(bad == 0, "%s: %zu elements differ from the scalar %s reference, first %zu: 0x%04x", what, bad,
                     ab_dtype_name(t), first, h16[first]);
        }
        if (W == 1) { /* a world of one: the buffer comes back as it went, bit for bit (SUM and AVG) */
            size_t bad = 0;
            for (size_t i = 0; i < N_ELEMS; i++)
                bad += lowp ? h16[i] != to16(t, mine[i]) : memcmp(&got[i], &mine[i], sizeof(float)) != 0;
            AB_CHECK(bad == 0, "%s: %zu elements changed in a world of one", what, bad);
        }
        if (lowp)
            for (size_t i = 0; i < N_ELEMS; i++) got[i] = from16(t, h16[i]);
        /* fp32: W-term sums, ~W * 2^-24 relative; NMSE (AB_TOL_FP32_REL)^2 */
        const double tol = t == AB_F16 ? AB_TOL_FP16_NMSE : t == AB_BF16 ? AB_TOL_BF16_NMSE
                                                                         : AB_TOL_FP32_REL * AB_TOL_FP32_REL;
        if (ab_check_nmse(what, got, expect, N_ELEMS, tol)) failures++;
        else if (c->rank == 0) printf("ok   %s\n", what);
    }
    if (buf) be->ops->release(be, AB_MEM_WORKSPACE, buf, N_ELEMS * es);
    free(mine), free(other), free(expect), free(h16), free(got);
}

/* The non-blocking reduction (ireduce) to every rank (root -1) and to each rank in turn: queued
 * right behind backend ops that write the buffer (x2 eight times over 4 MB, on a GPU backend's own
 * stream: long enough that a reduction not ordered after them, comm_nccl's event, would read the
 * buffer half done), polled with test, then waited for. The root gets the sum of every rank's
 * values x256 (exact in fp32; W = 2: the sum exact too), the others keep their own. */
static void test_ireduce(ab_comm *c, ab_backend *be) {
    enum { N = 1 << 20, TIMES = 8 };
    const int W = c->size;
    float *mine = malloc(N * sizeof(float)), *other = malloc(N * sizeof(float));
    double *sum = calloc(N, sizeof(double));
    float *got = malloc(N * sizeof(float));
    for (int r = 0; r < W; r++) {
        fill(other, N, r);
        for (size_t i = 0; i < N; i++) sum[i] += 256.0 * other[i];
    }
    fill(mine, N, c->rank);
    float *buf = be->ops->alloc(be, AB_MEM_WORKSPACE, N * sizeof(float));
    for (int root = -1; root < W; root++) {
        char what[96];
        snprintf(what, sizeof what, "%s ireduce fp32 to %s%d (world %d)", c->ops->name, root < 0 ? "all, " : "rank ",
                 root, W);
        ab_comm_req req = {0};
        int rc = buf ? 0 : -1, polls = 0;
        if (rc == 0) rc = be->ops->upload(be, buf, mine, N * sizeof(float));
        for (int k = 0; rc == 0 && k < TIMES; k++) rc = be->ops->scale(be, N, buf, 2.0f);
        if (rc == 0) rc = c->ops->ireduce(c, buf, N, AB_F32, root, &req);
        while (rc == 0 && !req.done && polls++ < 1000) rc = c->ops->test(c, &req);
        if (rc == 0) rc = c->ops->wait(c, &req);
        if (rc == 0) rc = be->ops->download(be, got, buf, N * sizeof(float));
        if (rc != 0) {
            fprintf(stderr, "FAIL %s: %s\n", what, ab_error());
            failures++;
            break;
        }
        AB_CHECK(req.done, "%s: not done after wait", what);
        size_t bad = 0, first = 0;
        for (size_t i = 0; i < N; i++) {
            const double want = root < 0 || root == c->rank ? sum[i] : 256.0 * mine[i];
            const int ok = W <= 2 ? got[i] == (float)want : fabs(got[i] - want) <= 1e-5 * fmax(256.0, fabs(want));
            if (!ok && !bad++) first = i;
        }
        AB_CHECK(bad == 0, "%s: %zu elements wrong, first %zu: %g", what, bad, first, (double)got[first]);
        if (!bad && c->rank == 0) printf("ok   %s\n", what);
    }
    if (buf) be->ops->release(be, AB_MEM_WORKSPACE, buf, N * sizeof(float));
    free(mine), free(other), free(sum), free(got);
}

/* rank r's value of element e, all of them fp16 numbers, each element's values of one sign */
static float overflow_value(int e, int r) {
    switch (e) {
    case 0: return 40000.0f;                   /* W >= 2: past 65520 -> +inf */
    case 1: return -40000.0f;                  /* -> -inf */
    case 2: return r == 0 ? 32768.0f : 32752.0f; /* W = 2: 65520, the first sum that rounds to inf */
    case 3: return 32752.0f;                   /* W = 2: 65504, the largest finite fp16; W > 2: inf */
    default: return 7.0f;                      /* W sevens: AVG exactly 7 (W = 3, pre-multiplied: 6.996) */
    }
}

static void test_fp16_overflow(ab_comm *c, ab_backend *be, ab_reduce_op op) {
    enum { E = 5 };
    const int W = c->size;
    const char *opn = op == AB_RED_AVG ? "avg" : "sum";
    if (W < 2) {
        if (c->rank == 0) printf("skip %s fp16 %s overflow: a world of 1 adds nothing\n", c->ops->name, opn);
        return;
    }
    uint16_t mine[E], want[E], got[E];
    for (int e = 0; e < E; e++) {
        mine[e] = ab_f32_to_f16(overflow_value(e, c->rank));
        /* the sum in rank order, rounded to fp16 at each addition: each element's values have one
         * sign, so an overflow is one in any order, and with W = 2 there is no order */
        uint16_t s = ab_f32_to_f16(overflow_value(e, 0));
        for (int r = 1; r < W; r++) s = ab_f32_to_f16(ab_f16_to_f32(s) + ab_f16_to_f32(ab_f32_to_f16(overflow_value(e, r))));
        want[e] = op == AB_RED_AVG ? ab_f32_to_f16(ab_f16_to_f32(s) * (1.0f / (float)W)) : s;
    }
    void *buf = be->ops->alloc(be, AB_MEM_WORKSPACE, sizeof mine);
    int rc = buf ? be->ops->upload(be, buf, mine, sizeof mine) : -1;
    if (rc == 0) rc = c->ops->allreduce(c, buf, E, AB_F16, op);
    if (rc == 0) rc = be->ops->download(be, got, buf, sizeof got);
    char what[96];
    snprintf(what, sizeof what, "%s allreduce fp16 %s past 65504 (world %d)", c->ops->name, opn, W);
    if (rc != 0) {
        fprintf(stderr, "FAIL %s: %s\n", what, ab_error());
        failures++;
    } else {
        for (int e = 0; e < E; e++)
            AB_CHECK(got[e] == want[e], "%s: element %d is 0x%04x (%g), expected 0x%04x (%g)", what, e, got[e],
                     (double)ab_f16_to_f32(got[e]), want[e], (double)ab_f16_to_f32(want[e]));
        /* the promises themselves, not only agreement with the reference above */
        AB_CHECK(got[0] == 0x7c00 && got[1] == 0xfc00 && got[2] == 0x7c00, "%s: 0x%04x 0x%04x 0x%04x, expected +inf -inf +inf",
                 what, got[0], got[1], got[2]);
        if (W == 2)
            AB_CHECK(ab_f16_to_f32(got[3]) == (op == AB_RED_AVG ? 32752.0f : 65504.0f), "%s: 32752 + 32752 gave %g", what,
                     (double)ab_f16_to_f32(got[3]));
        AB_CHECK(ab_f16_to_f32(got[4]) == (op == AB_RED_AVG ? 7.0f : 7.0f * (float)W), "%s: %d sevens gave %.9g", what,
                 W, (double)ab_f16_to_f32(got[4]));
        if (c->rank == 0 && !failures) printf("ok   %s\n", what);
    }
    if (buf) be->ops->release(be, AB_MEM_WORKSPACE, buf, sizeof mine);
}

/* What needs no communicator: refusals and the GPU choice. */
static void test_setup_rules(void) {
    static ab_comm dummy;
    ab_comm *x = &dummy; /* must come back NULL */
    const int rc = ab_comm_create(AB_COMM_NCCL, "cpu", 10.0, &x);
    AB_CHECK(rc != 0 && x == NULL && strstr(ab_error(), "--device cuda"), "--comm nccl --device cpu: rc %d, '%s'", rc,
             rc ? ab_error() : "accepted");
    /* node-local rank -> GPU: one process seeing all GPUs, or each rank its own (a per-rank
     * CUDA_VISIBLE_DEVICES: every rank sees one GPU, GPU 0) */
    const int table[][3] = {{0, 8, 0}, {3, 8, 3}, {7, 8, 7}, {9, 8, 1}, {0, 1, 0}, {1, 1, 0}, {5, 1, 0}, {2, 0, -1}, {0, -1, -1}};
    for (size_t i = 0; i < sizeof table / sizeof table[0]; i++)
        AB_CHECK(ab_comm_gpu_index(table[i][0], table[i][1]) == table[i][2], "ab_comm_gpu_index(%d, %d) = %d, expected %d",
                 table[i][0], table[i][1], ab_comm_gpu_index(table[i][0], table[i][1]), table[i][2]);
}

static void test_host(ab_comm *c, ab_backend *be) {
    const int W = c->size, r = c->rank;
    int64_t v[3] = {10 + r, 10 + r, 10 + r};
    int rc = c->ops->allreduce_i64(c, &v[0], 1, AB_RED_MIN);
    if (rc == 0) rc = c->ops->allreduce_i64(c, &v[1], 1, AB_RED_MAX);
    if (rc == 0) rc = c->ops->allreduce_i64(c, &v[2], 1, AB_RED_SUM);
    AB_CHECK(rc == 0 && v[0] == 10 && v[1] == 10 + W - 1 && v[2] == 10LL * W + (int64_t)W * (W - 1) / 2,
             "int64 min/max/sum: %lld %lld %lld (%s)", (long long)v[0], (long long)v[1], (long long)v[2],
             rc ? ab_error() : "");
    double d[2] = {0.5 * r, 1.0 + r};
    rc = c->ops->allreduce_f64(c, d, 2, AB_RED_AVG);
    AB_CHECK(rc == 0 && fabs(d[0] - 0.25 * (W - 1)) < 1e-12 && fabs(d[1] - (1.0 + 0.5 * (W - 1))) < 1e-12,
             "double avg: %g %g", d[0], d[1]);
    int flag = r == W - 1;
    rc = ab_comm_flag_max(c, &flag);
    AB_CHECK(rc == 0 && flag == 1, "flag max from the last rank only: %d", flag);
    int64_t *all = malloc((size_t)W * sizeof *all);
    rc = c->ops->allgather_i64(c, 100 * r + 7, all);
    for (int i = 0; rc == 0 && i < W; i++) AB_CHECK(all[i] == 100 * i + 7, "allgather[%d] = %lld", i, (long long)all[i]);
    free(all);
    /* broadcast from the last rank of a buffer in backend memory */
    float src[33], got[33];
    fill(src, 33, W - 1);
    fill(got, 33, r);
    void *buf = be->ops->alloc(be, AB_MEM_WORKSPACE, sizeof got);
    rc = buf ? be->ops->upload(be, buf, got, sizeof got) : -1;
    if (rc == 0) rc = c->ops->broadcast(c, buf, sizeof got, W - 1);
    if (rc == 0) rc = be->ops->download(be, got, buf, sizeof got);
    AB_CHECK(rc == 0 && memcmp(src, got, sizeof got) == 0, "broadcast from rank %d (%s)", W - 1, rc ? ab_error() : "");
    if (buf) be->ops->release(be, AB_MEM_WORKSPACE, buf, sizeof got);
    AB_CHECK(c->ops->barrier(c) == 0, "barrier: %s", ab_error());
    if (c->rank == 0 && !failures) printf("ok   %s host reductions, all-gather, broadcast, barrier\n", c->ops->name);
}

/* split: the even and odd ranks form two groups ranked in reverse order (key -rank); a SUM in a
 * group adds only its members' values; the world is untouched. sendrecv: a ring within the world
 * (each rank sends to the next and receives from the one before, at once: blocking sends would
 * deadlock), then a chain whose ends leave a half out. */
static void test_split_sendrecv(ab_comm *c, ab_backend *be) {
    const int W = c->size, r = c->rank;
    ab_comm *g = NULL;
    if (c->ops->split(c, r % 2, -r, &g) != 0) {
        AB_CHECK(0, "split: %s", ab_error());
        return;
    }
    int members = 0, my_index = 0;
    for (int q = W - 1; q >= 0; q--) /* ranked by key -rank: the highest rank first */
        if (q % 2 == r % 2) {
            if (q == r) my_index = members;
            members++;
        }
    AB_CHECK(g->size == members && g->rank == my_index && g->be == be && g->device == c->device,
             "split: rank %d is %d of %d in its group (expected %d of %d)", r, g->rank, g->size, my_index, members);
    const size_t n = 33;
    float h[33], *d = be->ops->alloc(be, AB_MEM_WORKSPACE, n * sizeof(float));
    for (size_t i = 0; i < n; i++) h[i] = (float)(r + 1) * (float)(i + 1);
    AB_CHECK(d && be->ops->upload(be, d, h, sizeof h) == 0 && g->ops->allreduce(g, d, n, AB_F32, AB_RED_SUM) == 0 &&
                 be->ops->download(be, h, d, sizeof h) == 0,
             "split: all-reduce in the group: %s", ab_error());
    int sum = 0;
    for (int q = 0; q < W; q++) sum += q % 2 == r % 2 ? q + 1 : 0;
    for (size_t i = 0; i < n; i++)
        AB_CHECK(h[i] == (float)sum * (float)(i + 1), "split: group sum [%zu] = %g, expected %d", i, h[i],
                 sum * (int)(i + 1));
    int64_t v = 1;
    AB_CHECK(g->ops->allreduce_i64(g, &v, 1, AB_RED_SUM) == 0 && v == members, "split: int64 SUM %lld of %d",
             (long long)v, members);
    ab_comm_destroy(g);
    /* the ring: every rank's buffer comes from the rank before */
    const size_t m = 1000 + (size_t)r; /* counts differ by rank; each pair agrees */
    float *snd = be->ops->alloc(be, AB_MEM_WORKSPACE, 2000 * sizeof(float));
    float *rcv = be->ops->alloc(be, AB_MEM_WORKSPACE, 2000 * sizeof(float));
    float *hs = malloc(2000 * sizeof(float)), *hr = malloc(2000 * sizeof(float));
    for (size_t i = 0; i < 2000; i++) hs[i] = (float)r * 10000.0f + (float)i;
    const int next = (r + 1) % W, prev = (r + W - 1) % W;
    const size_t m_prev = 1000 + (size_t)prev;
    if (W > 1) {
        /* each rank sends m of its own; it receives what its predecessor sends, m_prev */
        AB_CHECK(be->ops->upload(be, snd, hs, 2000 * sizeof(float)) == 0 &&
                     c->ops->sendrecv(c, snd, m * sizeof(float), next, rcv, m_prev * sizeof(float), prev) == 0 &&
                     be->ops->download(be, hr, rcv, m_prev * sizeof(float)) == 0,
                 "sendrecv ring: %s", ab_error());
        for (size_t i = 0; i < m_prev; i++)
            AB_CHECK(hr[i] == (float)prev * 10000.0f + (float)i, "sendrecv ring: [%zu] = %g from rank %d", i, hr[i], prev);
        /* the chain 0 -> 1 -> ... -> W-1: the first rank only sends, the last only receives */
        AB_CHECK(c->ops->sendrecv(c, snd, 100 * sizeof(float), r + 1 < W ? r + 1 : -1, rcv, 100 * sizeof(float),
                                  r > 0 ? r - 1 : -1) == 0,
                 "sendrecv chain: %s", ab_error());
        if (r > 0 && be->ops->download(be, hr, rcv, 100 * sizeof(float)) == 0)
            AB_CHECK(hr[99] == (float)(r - 1) * 10000.0f + 99.0f, "sendrecv chain: %g from rank %d", hr[99], r - 1);
    }
    AB_CHECK(c->ops->sendrecv(c, snd, 4, W, rcv, 4, -1) != 0 && strstr(ab_error(), "outside a world"),
             "sendrecv to rank %d of %d was not refused", W, W);
    free(hs);
    free(hr);
    be->ops->release(be, AB_MEM_WORKSPACE, snd, 2000 * sizeof(float));
    be->ops->release(be, AB_MEM_WORKSPACE, rcv, 2000 * sizeof(float));
    be->ops->release(be, AB_MEM_WORKSPACE, d, n * sizeof(float));
    printf("ok   %s split into %d groups, sendrecv ring and chain (world %d)\n", c->ops->name, W > 1 ? 2 : 1, W);
}

int main(int argc, char **argv) {
    const int nccl = argc > 1 && strcmp(argv[1], "nccl") == 0;
    ab_comm *c = NULL;
    ab_backend *be = NULL;
    test_setup_rules();
    if (nccl) {
        const char *why = NULL;
        if (ab_cuda_device_count(&why) == 0) {
            printf("SKIPPED: test_comm nccl: no usable GPU (%s)\n", why ? why : "none");
            return 77;
        }
        if (ab_comm_create(AB_COMM_NCCL, "cuda", 60.0, &c) != 0) {
            if (strstr(ab_error(), "built without NCCL")) {
                printf("SKIPPED: test_comm nccl: %s\n", ab_error());
                return 77;
            }
            fprintf(stderr, "FAIL nccl communicator: %s\n", ab_error());
            ab_mpi_abort(1);
            return 1;
        }
        const int gpus = ab_cuda_device_count(NULL);
        AB_CHECK(c->device >= 0 && c->device == ab_comm_gpu_index(c->local_rank, gpus),
                 "nccl: rank %d (node-local %d) on GPU %d of %d", c->rank, c->local_rank, c->device, gpus);
        be = ab_backend_create_on("cuda", c->device, 0, 1);
    } else {
        if (ab_comm_create(AB_COMM_MPI, "cpu", 60.0, &c) != 0) {
            fprintf(stderr, "FAIL mpi communicator: %s\n", ab_error());
            return 1;
        }
        AB_CHECK(c->device == -1, "mpi engine with --device cpu records GPU %d", c->device);
        be = ab_backend_cpu_create(1);
    }
    if (!be) {
        fprintf(stderr, "FAIL backend: %s\n", ab_error());
        ab_mpi_abort(1);
        return 1;
    }
    ab_comm_bind(c, be);
    int world = 1;
    ab_comm_launched(&world);
    AB_CHECK(c->size == world && c->rank >= 0 && c->rank < c->size && c->local_rank < c->local_size,
             "rank %d of %d (launcher says %d), local %d of %d", c->rank, c->size, world, c->local_rank, c->local_size);
    const ab_dtype types[3] = {AB_F32, AB_F16, AB_BF16};
    for (int i = 0; i < 3; i++) {
        test_allreduce(c, be, types[i], AB_RED_SUM);
        test_allreduce(c, be, types[i], AB_RED_AVG);
    }
    test_fp16_overflow(c, be, AB_RED_SUM);
    test_fp16_overflow(c, be, AB_RED_AVG);
    test_ireduce(c, be);
    test_host(c, be);
    test_split_sendrecv(c, be);
    ab_comm_destroy(c);
    be->ops->destroy(be);
    if (failures) {
        fprintf(stderr, "test_comm: %d failure(s)\n", failures);
        ab_mpi_abort(1);
    }
    ab_mpi_finalize();
    return failures ? 1 : 0;
}
