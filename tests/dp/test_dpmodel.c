/* The data-parallel cost model (core/dpmodel.h) against its formulas worked by hand: the ring and
 * the parameter server's bandwidth terms, a server per device moving the ring's bytes, overlap
 * bounded by the last bucket and never hiding the pull, accumulation dividing the exposed time
 * over more compute, and inputs out of range refused. */
#include <math.h>
#include <stdio.h>

#include "ab.h"
#include "dpmodel.h"
#include "tolerances.h"

static int failures = 0;

static int near(double a, double b) { return fabs(a - b) <= 1e-12 * fmax(1.0, fabs(b)); }

static ab_dpm_out step(ab_dpm_in in) {
    ab_dpm_out o;
    AB_CHECK(ab_dpm_step(&in, &o) == 0, "%s", ab_error());
    return o;
}

int main(void) {
    /* 100 MB of gradients over 10 GB/s: 0.01 s per G/bw */
    const ab_dpm_in base = {.pattern = AB_DPM_RING, .p = 4, .shards = 1, .accum = 1, .buckets = 1, .t_mb = 0.03,
                            .backward_share = 2.0 / 3.0, .grad_bytes = 1e8, .weight_bytes = 1e8, .bw = 1e10,
                            .lat = 0.0};
    ab_dpm_in in = base;
    ab_dpm_out o = step(in);
    AB_CHECK(near(o.comm_s, 2.0 * 3 / 4 * 0.01) && near(o.exposed_s, o.comm_s) && near(o.step_s, 0.03 + 0.015),
             "ring, 4 devices: comm %g exposed %g step %g (want 0.015, 0.015, 0.045)", o.comm_s, o.exposed_s, o.step_s);
    in.lat = 1e-5;
    in.buckets = 4;
    o = step(in);
    AB_CHECK(near(o.comm_s, 0.015 + 4 * 2 * 3 * 1e-5), "ring latency: %g", o.comm_s);
    in.pattern = AB_DPM_PS; /* a latency per message: p-1 per bucket pushed, p-1 pulled */
    o = step(in);
    AB_CHECK(near(o.comm_s, 0.06 + 4 * 3 * 1e-5 + 3 * 1e-5), "ps latency: %g", o.comm_s);
    in.shards = 4; /* a server per device: the ring's bytes, and with one bucket its latencies */
    in.buckets = 1;
    ab_dpm_out ring = step((ab_dpm_in){.pattern = AB_DPM_RING, .p = 4, .accum = 1, .buckets = 1, .t_mb = 0.03,
                                       .backward_share = 2.0 / 3.0, .grad_bytes = 1e8, .weight_bytes = 1e8,
                                       .bw = 1e10, .lat = 1e-5});
    o = step(in);
    AB_CHECK(near(o.comm_s, ring.comm_s), "a server per device: %g, the ring %g", o.comm_s, ring.comm_s);
    /* one server: (p-1) G/bw in, (p-1) W/bw out */
    in = base;
    in.pattern = AB_DPM_PS;
    o = step(in);
    AB_CHECK(near(o.comm_s, 3 * 0.01 + 3 * 0.01), "one server: comm %g (want 0.06)", o.comm_s);
    /* a server per device: the ring's bytes */
    in.shards = 4;
    o = step(in);
    AB_CHECK(near(o.comm_s, 2.0 * 3 / 4 * 0.01), "a server per device: comm %g (want the ring's 0.015)", o.comm_s);
    /* overlap: 4 buckets, backward 0.02 s, hidden at most 0.015 and never the last bucket */
    in = base;
    in.overlap = 1;
    in.buckets = 4;
    o = step(in);
    AB_CHECK(near(o.exposed_s, fmax(0.015 / 4, 0.015 - 0.02 * 3 / 4)) && near(o.hidden_s, o.comm_s - o.exposed_s),
             "ring overlap: exposed %g hidden %g", o.exposed_s, o.hidden_s);
    in.t_mb = 10.0; /* a long backward hides all but the last bucket */
    o = step(in);
    AB_CHECK(near(o.exposed_s, 0.015 / 4), "ring overlap, long backward: exposed %g (want 0.00375)", o.exposed_s);
    in.pattern = AB_DPM_PS; /* the pull stays exposed */
    o = step(in);
    AB_CHECK(near(o.exposed_s, 0.03 / 4 + 0.03), "ps overlap: exposed %g (want the last push bucket and the pull)",
             o.exposed_s);
    /* accumulation: the same exposed time over 4 micro-batches: a better speed-up */
    in = base;
    const ab_dpm_out o1 = step(in);
    in.accum = 4;
    const ab_dpm_out o4 = step(in);
    const double s1 = ab_dpm_epoch_one(&in, 1000, 10) / ab_dpm_epoch(&base, &o1, 1000, 10);
    const double s4 = ab_dpm_epoch_one(&in, 1000, 10) / ab_dpm_epoch(&in, &o4, 1000, 10);
    AB_CHECK(near(o4.step_s, 4 * 0.03 + 0.015) && s4 > s1 && s4 < 4.0,
             "accumulation: step %g, speed-up %g from %g on 4 devices", o4.step_s, s4, s1);
    AB_CHECK(near(s1, 4 * 0.03 / 0.045), "speed-up %g (want p t_mb / t_step = 2.667)", s1);
    /* one device: nothing to communicate */
    in = base;
    in.p = 1;
    o = step(in);
    AB_CHECK(o.comm_s == 0.0 && near(o.step_s, 0.03), "one device: comm %g step %g", o.comm_s, o.step_s);
    /* refused */
    ab_dpm_out x;
    in = base;
    in.pattern = AB_DPM_PS;
    in.shards = 5;
    AB_CHECK(ab_dpm_step(&in, &x) != 0, "5 servers among 4 devices accepted");
    in = base;
    in.bw = 0.0;
    AB_CHECK(ab_dpm_step(&in, &x) != 0, "bandwidth 0 accepted");
    printf("data-parallel cost model: %d failures\n", failures);
    return failures ? 1 : 0;
}
