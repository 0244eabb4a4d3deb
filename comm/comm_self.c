/* The self communicator engine: world size 1, no MPI at all (no launcher, no MPI_Init). */
#include <stdlib.h>

#include "comm_engines.h"

static int self_allreduce(ab_comm *c, void *buf, size_t n, ab_dtype t, ab_reduce_op op) {
    (void)c, (void)buf, (void)n;
    if (t != AB_F32 && t != AB_F16 && t != AB_BF16)
        return ab_errorf("allreduce: %s buffers are not supported", ab_dtype_name(t));
    if (op != AB_RED_SUM && op != AB_RED_AVG) return ab_errorf("allreduce: buffers take SUM or AVG only");
    return 0;
}
static int self_allreduce_i64(ab_comm *c, int64_t *v, int n, ab_reduce_op op) {
    (void)c, (void)v, (void)n, (void)op;
    return 0;
}
static int self_allreduce_f64(ab_comm *c, double *v, int n, ab_reduce_op op) {
    (void)c, (void)v, (void)n, (void)op;
    return 0;
}
static int self_allgather_i64(ab_comm *c, int64_t v, int64_t *out) {
    (void)c;
    out[0] = v;
    return 0;
}
static int self_broadcast(ab_comm *c, void *buf, size_t bytes, int root) {
    (void)c, (void)buf, (void)bytes;
    return root == 0 ? 0 : ab_errorf("broadcast: root %d outside a world of 1", root);
}
static int self_barrier(ab_comm *c) {
    (void)c;
    return 0;
}
static void self_destroy(ab_comm *c) { free(c); }
static int self_ireduce(ab_comm *c, void *buf, size_t n, ab_dtype t, int root, ab_comm_req *req) {
    req->done = 1;
    if (root > 0) return ab_errorf("reduce: root %d outside a world of 1", root);
    return self_allreduce(c, buf, n, t, AB_RED_SUM);
}
static int self_test(ab_comm *c, ab_comm_req *req) {
    (void)c, (void)req;
    return 0;
}

static int self_split(ab_comm *c, int color, int key, ab_comm **out) {
    (void)color, (void)key;
    AB_TRY(ab_comm_self_create(out));
    (*out)->device = c->device;
    (*out)->be = c->be;
    (*out)->timeout_s = c->timeout_s;
    return 0;
}
/* a world of one has no peer: every half must be left out */
static int self_sendrecv(ab_comm *c, const void *sbuf, size_t sbytes, int dst, void *rbuf, size_t rbytes, int src) {
    (void)c, (void)sbuf, (void)sbytes, (void)rbuf, (void)rbytes;
    if (dst >= 0 || src >= 0) return ab_errorf("sendrecv: peer %d outside a world of 1", dst >= 0 ? dst : src);
    return 0;
}

static const ab_comm_ops self_ops = {.name = "self", .allreduce = self_allreduce, .allreduce_i64 = self_allreduce_i64,
                                     .allreduce_f64 = self_allreduce_f64, .allgather_i64 = self_allgather_i64,
                                     .broadcast = self_broadcast, .barrier = self_barrier, .destroy = self_destroy,
                                     .ireduce = self_ireduce, .test = self_test, .wait = self_test,
                                     .split = self_split, .sendrecv = self_sendrecv};

int ab_comm_self_create(ab_comm **out) {
    ab_comm *c = calloc(1, sizeof *c);
    if (!c) return ab_errorf("out of host memory for a communicator");
    *c = (ab_comm){.ops = &self_ops, .rank = 0, .size = 1, .local_rank = 0, .local_size = 1, .device = -1,
                   .timeout_s = 300.0};
    *out = c;
    return 0;
}
