/* The pipeline schedules and the cut (core/pipeline.h), for P = 1 .. 6 stages and M = 1 .. 12
 * micro-batches, gpipe and 1f1b, by simulating every stage's program together:
 *   - every micro-batch's forward and backward run exactly once a stage, the backward after the
 *     forward;
 *   - the micro-batches in flight (forward done, backward not) never pass ab_pp_slots: M for
 *     gpipe, P - s for 1f1b (the bound the schedule is for);
 *   - every exchange pairs with its neighbour's (an activation sent on with the same micro-batch's
 *     receipt, a gradient sent back likewise), and all programs finish: no schedule deadlocks
 *     (blocking sendrecv semantics: an exchange completes once each of its halves has met the
 *     peer's complementary half in the peer's current exchange);
 *   - a stage's forward of micro-batch k starts only after the stage before finished it, its
 *     backward only after the stage after finished its backward;
 *   - with uniform stages (forward 1, backward 2 time units) and free messages, every stage idles
 *     (P - 1) / M of its busy time: the bubble.
 * And the cut: contiguous, non-empty, and the least largest stage (against all cuts, by brute
 * force, for small cases); fewer units than stages is refused. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pipeline.h"
#include "tolerances.h"

static int failures = 0;

enum { MAXP = 6, MAXM = 12, MAXI = 6 * MAXM + 4 };

typedef struct {
    ab_pp_item it[MAXI];
    int n, pc;        /* items, the next one */
    double clock;     /* when the stage reaches its next item */
    int matched[4];   /* the current exchange's halves done: send_act, send_grad, recv_act, recv_grad */
    double when[4];
    double busy;
    double fwd_done[MAXM], bwd_done[MAXM];
} stage;

static int half_wanted(const ab_pp_item *x, int h) {
    return h == 0 ? x->send_act : h == 1 ? x->send_grad : h == 2 ? x->recv_act : x->recv_grad;
}

/* the half of the peer's exchange that completes half h of stage s's: its index and the peer */
static int partner(int s, int h, int *peer) {
    switch (h) {
    case 0: *peer = s + 1; return 2;  /* send_act -> the next stage's recv_act */
    case 1: *peer = s - 1; return 3;  /* send_grad -> the previous stage's recv_grad */
    case 2: *peer = s - 1; return 0;  /* recv_act <- the previous stage's send_act */
    default: *peer = s + 1; return 1; /* recv_grad <- the next stage's send_grad */
    }
}

static void simulate(ab_pp_schedule kind, int P, int M) {
    static stage st[MAXP];
    const char *name = ab_pp_schedule_name(kind);
    for (int s = 0; s < P; s++) {
        memset(&st[s], 0, sizeof st[s]);
        st[s].n = ab_pp_program(kind, P, s, M, st[s].it);
        AB_CHECK(st[s].n <= 6 * M + 4, "%s P %d M %d stage %d: %d items", name, P, M, s, st[s].n);
    }
    int live[MAXP] = {0}, peak[MAXP] = {0}, fdone[MAXP][MAXM] = {{0}}, bdone[MAXP][MAXM] = {{0}};
    for (int progress = 1; progress;) {
        progress = 0;
        for (int s = 0; s < P; s++) {
            stage *a = &st[s];
            if (a->pc >= a->n) continue;
            const ab_pp_item *x = &a->it[a->pc];
            if (x->kind != AB_PP_EXCHANGE) {
                const int k = x->mb, f = x->kind == AB_PP_FORWARD;
                double start = a->clock;
                if (f) {
                    AB_CHECK(!fdone[s][k], "%s P %d M %d stage %d: forward %d twice", name, P, M, s, k);
                    if (s > 0) AB_CHECK(fdone[s - 1][k], "%s P %d M %d: stage %d runs forward %d before stage %d",
                                        name, P, M, s, k, s - 1);
                    if (s > 0 && st[s - 1].fwd_done[k] > start) start = st[s - 1].fwd_done[k];
                    fdone[s][k] = 1;
                    if (++live[s] > peak[s]) peak[s] = live[s];
                } else {
                    AB_CHECK(fdone[s][k] && !bdone[s][k], "%s P %d M %d stage %d: backward %d without its forward "
                             "or twice", name, P, M, s, k);
                    if (s < P - 1) AB_CHECK(bdone[s + 1][k], "%s P %d M %d: stage %d runs backward %d before stage %d",
                                            name, P, M, s, k, s + 1);
                    if (s < P - 1 && st[s + 1].bwd_done[k] > start) start = st[s + 1].bwd_done[k];
                    bdone[s][k] = 1;
                    live[s]--;
                }
                const double cost = f ? 1.0 : 2.0;
                a->clock = start + cost;
                a->busy += cost;
                if (f) a->fwd_done[k] = a->clock;
                else a->bwd_done[k] = a->clock;
                a->pc++;
                progress = 1;
                continue;
            }
            /* an exchange: match each open half with the peer's current exchange */
            int all = 1;
            for (int h = 0; h < 4; h++) {
                const int mb = half_wanted(x, h);
                if (mb < 0 || a->matched[h]) continue;
                int peer;
                const int ph = partner(s, h, &peer);
                AB_CHECK(peer >= 0 && peer < P, "%s P %d M %d stage %d: an exchange with stage %d", name, P, M, s, peer);
                if (peer < 0 || peer >= P) continue;
                stage *b = &st[peer];
                const ab_pp_item *y = b->pc < b->n ? &b->it[b->pc] : NULL;
                if (y && y->kind == AB_PP_EXCHANGE && half_wanted(y, ph) >= 0 && !b->matched[ph]) {
                    AB_CHECK(half_wanted(y, ph) == mb, "%s P %d M %d: stage %d's half carries micro-batch %d, stage "
                             "%d's %d", name, P, M, s, mb, peer, half_wanted(y, ph));
                    const double t = a->clock > b->clock ? a->clock : b->clock;
                    a->matched[h] = b->matched[ph] = 1;
                    a->when[h] = b->when[ph] = t;
                    progress = 1;
                } else {
                    all = 0;
                }
            }
            if (all) {
                for (int h = 0; h < 4; h++)
                    if (half_wanted(x, h) >= 0 && a->when[h] > a->clock) a->clock = a->when[h];
                memset(a->matched, 0, sizeof a->matched);
                a->pc++;
                progress = 1;
            }
        }
    }
    double makespan = 0.0;
    for (int s = 0; s < P; s++) makespan = fmax(makespan, st[s].clock);
    for (int s = 0; s < P; s++) {
        AB_CHECK(st[s].pc == st[s].n, "%s P %d M %d: deadlock, stage %d stopped at item %d of %d", name, P, M, s,
                 st[s].pc, st[s].n);
        for (int k = 0; k < M; k++)
            AB_CHECK(fdone[s][k] && bdone[s][k], "%s P %d M %d stage %d: micro-batch %d not run", name, P, M, s, k);
        AB_CHECK(peak[s] <= ab_pp_slots(kind, P, s, M), "%s P %d M %d stage %d: %d micro-batches in flight, bound %d",
                 name, P, M, s, peak[s], ab_pp_slots(kind, P, s, M));
        const double idle = makespan - st[s].busy, bubble = (double)(P - 1) / M;
        AB_CHECK(fabs(idle / st[s].busy - bubble) < 1e-9, "%s P %d M %d stage %d: idle %.4g of busy, bubble %.4g", name,
                 P, M, s, idle / st[s].busy, bubble);
    }
    if (kind == AB_PP_1F1B) /* the bound is reached, or 1f1b would be gpipe */
        AB_CHECK(peak[0] == (P < M ? P : M), "1f1b P %d M %d: stage 0 holds %d", P, M, peak[0]);
}

/* the least largest stage over every cut of n units into P stages */
static double brute(const double *c, int n, int P, int from) {
    if (P == 1) {
        double s = 0.0;
        for (int j = from; j < n; j++) s += c[j];
        return s;
    }
    double best = INFINITY, s = 0.0;
    for (int j = from; j <= n - P; j++) {
        s += c[j];
        const double rest = brute(c, n, P - 1, j + 1);
        best = fmin(best, fmax(s, rest));
    }
    return best;
}

static void check_cut(const double *c, int n, int P) {
    int b[MAXP + 1];
    if (ab_pp_cut(c, n, P, b) != 0) {
        AB_CHECK(0, "cut of %d units into %d: %s", n, P, ab_error());
        return;
    }
    double worst = 0.0;
    AB_CHECK(b[0] == 0 && b[P] == n, "cut bounds %d .. %d of %d", b[0], b[P], n);
    for (int s = 0; s < P; s++) {
        AB_CHECK(b[s + 1] > b[s], "cut of %d into %d: stage %d empty", n, P, s);
        double sum = 0.0;
        for (int j = b[s]; j < b[s + 1]; j++) sum += c[j];
        worst = fmax(worst, sum);
    }
    AB_CHECK(fabs(worst - brute(c, n, P, 0)) < 1e-9, "cut of %d into %d: largest stage %g, best %g", n, P, worst,
             brute(c, n, P, 0));
}

int main(void) {
    for (int k = 0; k < 2; k++)
        for (int P = 1; P <= MAXP; P++)
            for (int M = 1; M <= MAXM; M++) simulate((ab_pp_schedule)k, P, M);
    printf("ok   gpipe and 1f1b, P 1..%d x M 1..%d: each micro-batch once, in order, within the in-flight bound, "
           "every exchange paired, no deadlock, bubble (P-1)/M\n",
           MAXP, MAXM);
    /* BERT-base's units (embeddings, 12 layers, head) and irregular costs */
    const double bert[14] = {0.1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 0.05};
    const double odd[9] = {5, 1, 1, 1, 9, 2, 2, 3, 1};
    for (int P = 1; P <= 6; P++) {
        check_cut(bert, 14, P);
        check_cut(odd, 9, P);
    }
    int b[4];
    AB_CHECK(ab_pp_cut(odd, 2, 3, b) != 0 && ab_error_is_usage() && strstr(ab_error(), "2 units"),
             "3 stages of 2 units: %s", ab_error());
    ab_pp_schedule s;
    AB_CHECK(ab_pp_schedule_parse("1f1b", &s) == 0 && s == AB_PP_1F1B && ab_pp_schedule_parse("zb", &s) != 0,
             "schedule names");
    printf("ok   the cut: contiguous, non-empty, the least largest stage (against every cut); 3 stages of 2 units "
           "refused\n");
    if (failures) fprintf(stderr, "test_pipeline: %d failure(s)\n", failures);
    return failures ? 1 : 0;
}
