/* Loss-scale bookkeeping (host side; the unscale-and-check runs on the backend). */
#include "scaler.h"

#include <float.h>
#include <math.h>
#include <stdlib.h>

#include "ab.h"

static int grow(void **p, size_t *cap, size_t need, size_t elem) {
    if (need <= *cap) return 0;
    size_t c = *cap ? *cap * 2 : 64;
    while (c < need) c *= 2;
    void *q = realloc(*p, c * elem);
    if (!q) return ab_errorf("out of memory recording loss-scale history");
    *p = q;
    *cap = c;
    return 0;
}

static int record_change(ab_scaler *s, long step) {
    AB_TRY(grow((void **)&s->changes, &s->cap_changes, s->n_changes + 1, sizeof *s->changes));
    s->changes[s->n_changes++] = (ab_scale_change){.step = step, .scale = s->scale};
    if (s->scale < s->min_scale) s->min_scale = s->scale;
    if (s->scale > s->max_scale) s->max_scale = s->scale;
    return 0;
}

int ab_scaler_init(ab_scaler *s, int enabled, float init_scale, float growth_factor, float backoff_factor,
                   int growth_interval) {
    *s = (ab_scaler){.enabled = enabled, .dynamic = enabled, .scale = enabled ? init_scale : 1.0f,
                     .growth_factor = growth_factor, .backoff_factor = backoff_factor, .growth_interval = growth_interval};
    if (enabled && !(init_scale > 0.0f && growth_factor > 1.0f && backoff_factor > 0.0f && backoff_factor < 1.0f &&
                     growth_interval > 0))
        return ab_errorf("loss scaler: need init_scale > 0, growth_factor > 1, 0 < backoff_factor < 1, "
                         "growth_interval > 0 (got %g, %g, %g, %d)",
                         init_scale, growth_factor, backoff_factor, growth_interval);
    s->init_scale = s->scale;
    s->min_scale = s->max_scale = s->scale;
    return record_change(s, 0);
}

int ab_scaler_init_static(ab_scaler *s, float scale) {
    *s = (ab_scaler){.enabled = 1, .dynamic = 0, .scale = scale};
    if (!(isfinite(scale) && scale >= AB_SCALER_STATIC_MIN && scale <= FLT_MAX))
        return ab_errorf("loss scaler: a static scale must be finite and in [2^-24, %g] (got %g)", (double)FLT_MAX,
                         (double)scale);
    s->init_scale = s->min_scale = s->max_scale = scale;
    return record_change(s, 0);
}

const char *ab_scaler_mode(const ab_scaler *s) { return !s->enabled ? "none" : s->dynamic ? "dynamic" : "static"; }

int ab_scaler_update(ab_scaler *s, int found_inf, long step, int epoch) {
    if (!s->enabled) return 1;
    if (!s->dynamic) { /* static: skip and record, the scale stays */
        if (!found_inf) return 1;
        s->skipped++;
        if (grow((void **)&s->events, &s->cap_events, s->n_events + 1, sizeof *s->events) != 0) return -1;
        s->events[s->n_events++] =
            (ab_overflow_event){.step = step, .epoch = epoch, .scale_before = s->scale, .scale_after = s->scale};
        return 0;
    }
    if (found_inf) {
        const float before = s->scale;
        s->scale *= s->backoff_factor;
        s->tracker = 0;
        s->skipped++;
        s->backoffs++;
        if (grow((void **)&s->events, &s->cap_events, s->n_events + 1, sizeof *s->events) != 0) return -1;
        s->events[s->n_events++] =
            (ab_overflow_event){.step = step, .epoch = epoch, .scale_before = before, .scale_after = s->scale};
        return record_change(s, step + 1) == 0 ? 0 : -1;
    }
    if (++s->tracker >= s->growth_interval) {
        s->scale *= s->growth_factor;
        s->tracker = 0;
        s->growths++;
        if (record_change(s, step + 1) != 0) return -1;
    }
    return 1;
}

void ab_scaler_free(ab_scaler *s) {
    free(s->events);
    free(s->changes);
    s->events = NULL;
    s->changes = NULL;
}
