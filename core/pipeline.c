/* Pipeline schedules and the balanced cut (core/pipeline.h). */
#include "pipeline.h"

#include <stdlib.h>
#include <string.h>

static const char *const schedule_names[] = {"gpipe", "1f1b"};

int ab_pp_schedule_parse(const char *s, ab_pp_schedule *out) {
    for (int i = 0; i < 2; i++)
        if (strcmp(s, schedule_names[i]) == 0) {
            *out = (ab_pp_schedule)i;
            return 0;
        }
    return ab_usage_errorf("unknown pipeline schedule '%s' (expected gpipe or 1f1b)", s);
}

const char *ab_pp_schedule_name(ab_pp_schedule s) { return (unsigned)s < 2 ? schedule_names[s] : "?"; }

int ab_pp_slots(ab_pp_schedule kind, int P, int s, int M) {
    if (kind == AB_PP_GPIPE) return M;
    return P - s < M ? P - s : M;
}

typedef struct {
    ab_pp_item *items;
    int n, first, last; /* the stage is the first, the last */
} prog;

static void compute(prog *p, ab_pp_kind kind, int mb) {
    p->items[p->n++] = (ab_pp_item){.kind = kind, .mb = mb, .send_act = -1, .send_grad = -1, .recv_act = -1,
                                    .recv_grad = -1};
}

/* one exchange; the halves a first or last stage has no neighbour for are left out, and an
 * exchange left with nothing is not added */
static void exchange(prog *p, int send_act, int send_grad, int recv_act, int recv_grad) {
    if (p->last) send_act = recv_grad = -1;
    if (p->first) send_grad = recv_act = -1;
    if (send_act < 0 && send_grad < 0 && recv_act < 0 && recv_grad < 0) return;
    p->items[p->n++] = (ab_pp_item){.kind = AB_PP_EXCHANGE, .mb = -1, .send_act = send_act, .send_grad = send_grad,
                                    .recv_act = recv_act, .recv_grad = recv_grad};
}

static void gpipe(prog *p, int M) {
    for (int k = 0; k < M; k++) {
        exchange(p, -1, -1, k, -1);
        compute(p, AB_PP_FORWARD, k);
        exchange(p, k, -1, -1, -1);
    }
    for (int k = 0; k < M; k++) {
        exchange(p, -1, -1, -1, k);
        compute(p, AB_PP_BACKWARD, k);
        exchange(p, -1, k, -1, -1);
    }
}

/* Megatron-LM's forward_backward_pipelining_without_interleaving: the steady state pairs each
 * forward's send with the receipt of the oldest micro-batch's gradient, and each backward's
 * send with the receipt of the next micro-batch's input */
static void one_f_one_b(prog *p, int P, int s, int M) {
    const int warm = P - s - 1 < M ? P - s - 1 : M, rest = M - warm;
    for (int k = 0; k < warm; k++) {
        exchange(p, -1, -1, k, -1);
        compute(p, AB_PP_FORWARD, k);
        exchange(p, k, -1, -1, -1);
    }
    if (rest > 0) exchange(p, -1, -1, warm, -1);
    for (int i = 0; i < rest; i++) {
        const int f = warm + i;
        compute(p, AB_PP_FORWARD, f);
        exchange(p, f, -1, -1, i);
        compute(p, AB_PP_BACKWARD, i);
        if (i == rest - 1) exchange(p, -1, i, -1, -1);
        else exchange(p, -1, i, f + 1, -1);
    }
    for (int i = rest; i < M; i++) {
        exchange(p, -1, -1, -1, i);
        compute(p, AB_PP_BACKWARD, i);
        exchange(p, -1, i, -1, -1);
    }
}

int ab_pp_program(ab_pp_schedule kind, int P, int s, int M, ab_pp_item *items) {
    prog p = {.items = items, .first = s == 0, .last = s == P - 1};
    if (kind == AB_PP_GPIPE) gpipe(&p, M);
    else one_f_one_b(&p, P, s, M);
    return p.n;
}

int ab_pp_cut(const double *cost, int n, int P, int *bounds) {
    if (P < 1 || n < P)
        return ab_usage_errorf("--pipeline-parallel %d: the model has %d unit%s to cut into stages (at least one a "
                               "stage)",
                               P, n, n == 1 ? "" : "s");
    /* best[k][j]: the least largest stage of units [0, j) in k stages; from[k][j] its last cut */
    double *pre = malloc(((size_t)n + 1) * sizeof *pre), *best = malloc((size_t)(P + 1) * (n + 1) * sizeof *best);
    int *from = malloc((size_t)(P + 1) * (n + 1) * sizeof *from);
    if (!pre || !best || !from) {
        free(pre), free(best), free(from);
        return ab_errorf("out of host memory cutting the pipeline");
    }
    pre[0] = 0.0;
    for (int j = 0; j < n; j++) pre[j + 1] = pre[j] + cost[j];
#define AT(k, j) ((size_t)(k) * (n + 1) + (j))
    for (int j = 0; j <= n; j++) best[AT(1, j)] = pre[j], from[AT(1, j)] = 0;
    for (int k = 2; k <= P; k++)
        for (int j = k; j <= n; j++) {
            best[AT(k, j)] = -1.0;
            for (int i = k - 1; i < j; i++) { /* stages 1..k-1 take [0, i), stage k takes [i, j) */
                const double last = pre[j] - pre[i], worst = best[AT(k - 1, i)] > last ? best[AT(k - 1, i)] : last;
                if (best[AT(k, j)] < 0.0 || worst < best[AT(k, j)]) best[AT(k, j)] = worst, from[AT(k, j)] = i;
            }
        }
    bounds[P] = n;
    for (int k = P; k >= 1; k--) bounds[k - 1] = k == 1 ? 0 : from[AT(k, bounds[k])];
#undef AT
    free(pre), free(best), free(from);
    return 0;
}
