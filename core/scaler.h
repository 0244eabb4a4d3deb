/* Dynamic loss scaling with GradScaler semantics: on any inf/NaN gradient the step is skipped
 * and the scale multiplied by backoff_factor; after growth_interval clean steps in a row it is
 * multiplied by growth_factor. Every overflow is recorded, and every change of the scale. */
#ifndef AB_SCALER_H
#define AB_SCALER_H

#include <stddef.h>

typedef struct {
    long step; /* 0-based global optimizer step */
    int epoch; /* 1-based */
    float scale_before, scale_after;
} ab_overflow_event;

typedef struct {
    long step; /* the scale holds from this step on */
    float scale;
} ab_scale_change;

typedef struct {
    int enabled; /* disabled: scale stays 1, nothing is checked */
    float scale, init_scale, growth_factor, backoff_factor;
    int growth_interval, tracker;
    float min_scale, max_scale;
    long growths, backoffs, skipped;
    ab_overflow_event *events;
    size_t n_events, cap_events;
    ab_scale_change *changes;
    size_t n_changes, cap_changes;
} ab_scaler;

int ab_scaler_init(ab_scaler *s, int enabled, float init_scale, float growth_factor, float backoff_factor,
                   int growth_interval);
/* Takes the all-reduced found_inf of this step; returns 1 when the optimizer step is to be
 * taken, 0 when it is skipped, -1 on allocation failure. */
int ab_scaler_update(ab_scaler *s, int found_inf, long step, int epoch);
void ab_scaler_free(ab_scaler *s);

#endif
