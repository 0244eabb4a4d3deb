/* The communicator engines against host arithmetic: all-reduce SUM and AVG of fp32 and fp16
 * buffers (seeded random values, different on every rank), int64 MIN/MAX/SUM, double SUM/AVG,
 * all-gather, broadcast and barrier, on whatever world mpirun gives (1 without it).
 *   test_comm mpi    CPU backend, OpenMPI (label mpi, mpirun -np 2)
 *   test_comm nccl   CUDA backend, NCCL (label gpu): prints SKIPPED and exits 77 when the build
 *                    has no NCCL or no GPU is usable.
 * fp32 sums over W ranks are compared with a float64 sum (AB_TOL_FP32_REL); fp16 with the sum
 * of the fp16 inputs rounded once per pairwise add, so to fp16 storage (AB_TOL_FP16_NMSE), and
 * with 2 ranks bit for bit against the scalar reference (fp32 add, one rounding to fp16). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "comm.h"
#include "device.h"
#include "half.h"
#include "rng.h"
#include "tolerances.h"

static int failures = 0;

#define N_ELEMS 4099 /* not a multiple of any chunking */

static void fill(float *x, size_t n, int rank) {
    ab_rng r;
    ab_rng_seed(&r, 77 + (uint64_t)rank);
    for (size_t i = 0; i < n; i++) x[i] = (float)ab_rng_normal(&r);
}

static void test_allreduce(ab_comm *c, ab_backend *be, ab_dtype t, ab_reduce_op op) {
    const int W = c->size;
    const size_t es = ab_dtype_size(t);
    float *mine = malloc(N_ELEMS * sizeof(float)), *other = malloc(N_ELEMS * sizeof(float));
    double *expect = calloc(N_ELEMS, sizeof(double));
    uint16_t *h16 = malloc(N_ELEMS * sizeof(uint16_t));
    float *got = malloc(N_ELEMS * sizeof(float));
    for (int r = 0; r < W; r++) {
        fill(other, N_ELEMS, r);
        for (size_t i = 0; i < N_ELEMS; i++)
            expect[i] += t == AB_F16 ? (double)ab_f16_to_f32(ab_f32_to_f16(other[i])) : (double)other[i];
    }
    if (op == AB_RED_AVG)
        for (size_t i = 0; i < N_ELEMS; i++) expect[i] /= W;
    fill(mine, N_ELEMS, c->rank);
    void *buf = be->ops->alloc(be, AB_MEM_WORKSPACE, N_ELEMS * es);
    if (t == AB_F16)
        for (size_t i = 0; i < N_ELEMS; i++) h16[i] = ab_f32_to_f16(mine[i]);
    int rc = buf ? 0 : -1;
    if (rc == 0) rc = be->ops->upload(be, buf, t == AB_F16 ? (void *)h16 : (void *)mine, N_ELEMS * es);
    if (rc == 0) rc = c->ops->allreduce(c, buf, N_ELEMS, t, op);
    if (rc == 0) rc = be->ops->download(be, t == AB_F16 ? (void *)h16 : (void *)got, buf, N_ELEMS * es);
    char what[96];
    snprintf(what, sizeof what, "%s allreduce %s %s (world %d)", c->ops->name, ab_dtype_name(t),
             op == AB_RED_AVG ? "avg" : "sum", W);
    if (rc != 0) {
        fprintf(stderr, "FAIL %s: %s\n", what, ab_error());
        failures++;
    } else {
        if (t == AB_F16 && W == 2) { /* one pairwise sum (then an exact halving): bit for bit */
            float a[N_ELEMS];
            fill(a, N_ELEMS, 0);
            fill(other, N_ELEMS, 1);
            size_t bad = 0, first = 0;
            for (size_t i = 0; i < N_ELEMS; i++) {
                uint16_t e = ab_f32_to_f16(ab_f16_to_f32(ab_f32_to_f16(a[i])) + ab_f16_to_f32(ab_f32_to_f16(other[i])));
                if (op == AB_RED_AVG) e = ab_f32_to_f16(ab_f16_to_f32(e) * 0.5f);
                if (h16[i] != e && !bad++) first = i;
            }
            AB_CHECK(bad == 0, "%s: %zu elements differ from the scalar fp16 reference, first %zu: 0x%04x", what, bad,
                     first, h16[first]);
        }
        if (t == AB_F16)
            for (size_t i = 0; i < N_ELEMS; i++) got[i] = ab_f16_to_f32(h16[i]);
        /* fp32: W-term sums, ~W * 2^-24 relative; NMSE (AB_TOL_FP32_REL)^2 */
        const double tol = t == AB_F16 ? AB_TOL_FP16_NMSE : AB_TOL_FP32_REL * AB_TOL_FP32_REL;
        if (ab_check_nmse(what, got, expect, N_ELEMS, tol)) failures++;
        else if (c->rank == 0) printf("ok   %s\n", what);
    }
    if (buf) be->ops->release(be, AB_MEM_WORKSPACE, buf, N_ELEMS * es);
    free(mine), free(other), free(expect), free(h16), free(got);
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

int main(int argc, char **argv) {
    const int nccl = argc > 1 && strcmp(argv[1], "nccl") == 0;
    ab_comm *c = NULL;
    ab_backend *be = NULL;
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
        be = ab_backend_create_on("cuda", c->local_rank, 0, 1);
    } else {
        if (ab_comm_create(AB_COMM_MPI, "cpu", 60.0, &c) != 0) {
            fprintf(stderr, "FAIL mpi communicator: %s\n", ab_error());
            return 1;
        }
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
    const ab_dtype types[2] = {AB_F32, AB_F16};
    for (int i = 0; i < 2; i++) {
        test_allreduce(c, be, types[i], AB_RED_SUM);
        test_allreduce(c, be, types[i], AB_RED_AVG);
    }
    test_host(c, be);
    ab_comm_destroy(c);
    be->ops->destroy(be);
    if (failures) {
        fprintf(stderr, "test_comm: %d failure(s)\n", failures);
        ab_mpi_abort(1);
    }
    ab_mpi_finalize();
    return failures ? 1 : 0;
}
