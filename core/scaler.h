/* Loss scaling. Dynamic, with GradScaler semantics: on any inf/NaN gradient the step is skipped
 * and the scale multiplied by backoff_factor; after growth_interval clean steps in a row it is
 * multiplied by growth_factor. Static (ab_scaler_init_static): one scale for the whole run; a step
 * with an inf/NaN gradient is still skipped and recorded, and the scale never changes (at scale 1:
 * AMP without loss scaling, as PyTorch's GradScaler(enabled=False) plus the inf check). Every
 * overflow is recorded, and every change of the scale. */
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
    int dynamic; /* 1: growth and backoff; 0 (static, or disabled): the scale never changes */
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
/* A static scale: enabled, never grows or backs off. scale must be finite and in
 * [AB_SCALER_STATIC_MIN, FLT_MAX]: below 2^-24 every scaled loss gradient would round to zero in
 * fp16 (and the trainer takes a scale under 2^-24 for a collapsed dynamic one). */
#define AB_SCALER_STATIC_MIN 0x1.0p-24f
int ab_scaler_init_static(ab_scaler *s, float scale);
/* "dynamic" | "static" | "none" (disabled), as the result record names the mode */
const char *ab_scaler_mode(const ab_scaler *s);
/* Takes the all-reduced found_inf of this step; returns 1 when the optimizer step is to be
 * taken, 0 when it is skipped, -1 on allocation failure. A static scaler records the skipped
 * step as an overflow event with scale_before == scale_after. */
int ab_scaler_update(ab_scaler *s, int found_inf, long step, int epoch);
void ab_scaler_free(ab_scaler *s);

#endif
