/* The dynamic loss scaler: growth after the interval, backoff on overflow; and in the real
 * training step, an injected inf in one gradient skips the step, leaves every weight
 * bit-identical, halves the scale and records the event. Without a scaler (fp32) the same
 * fault ends the run with a clear error instead of training on NaN. A static scale: never grows
 * or backs off, yet skips and records an overflowing step (unit and in training, at scale 1 and
 * 1024); bad static scales are refused. Under AMP and bf16 the forward's working copy is the
 * master weights rounded at every step, whether the update or the step's start wrote it. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "half.h"
#include "params.h"
#include "tolerances.h"
#include "workloads.h"
#include "platform.h"
#include "train.h"

static int failures = 0;

static void test_scaler_unit(void) {
    ab_scaler s;
    AB_CHECK(ab_scaler_init(&s, 1, 65536.0f, 2.0f, 0.5f, 3) == 0, "%s", ab_error());
    AB_CHECK(ab_scaler_update(&s, 0, 0, 1) == 1 && s.scale == 65536.0f, "no growth before the interval");
    AB_CHECK(ab_scaler_update(&s, 0, 1, 1) == 1 && s.scale == 65536.0f, "no growth before the interval");
    AB_CHECK(ab_scaler_update(&s, 0, 2, 1) == 1 && s.scale == 131072.0f, "doubles after 3 clean steps: %g", s.scale);
    AB_CHECK(ab_scaler_update(&s, 0, 3, 1) == 1, "clean step taken");
    AB_CHECK(ab_scaler_update(&s, 1, 4, 2) == 0 && s.scale == 65536.0f, "overflow halves: %g", s.scale);
    AB_CHECK(s.n_events == 1 && s.events[0].step == 4 && s.events[0].epoch == 2 &&
                 s.events[0].scale_before == 131072.0f && s.events[0].scale_after == 65536.0f,
             "event recorded");
    /* the tracker restarts after an overflow: 2 clean steps are not enough */
    ab_scaler_update(&s, 0, 5, 2);
    ab_scaler_update(&s, 0, 6, 2);
    AB_CHECK(s.scale == 65536.0f, "tracker reset by the overflow");
    ab_scaler_update(&s, 0, 7, 2);
    AB_CHECK(s.scale == 131072.0f && s.growths == 2 && s.backoffs == 1 && s.skipped == 1, "counters");
    AB_CHECK(s.n_changes == 4 && s.changes[3].step == 8, "history of changes: %zu", s.n_changes);
    ab_scaler_free(&s);
    ab_scaler d;
    ab_scaler_init(&d, 0, 65536.0f, 2.0f, 0.5f, 3);
    AB_CHECK(ab_scaler_update(&d, 1, 0, 1) == 1 && d.scale == 1.0f, "disabled scaler never skips");
    ab_scaler_free(&d);
    AB_CHECK(ab_scaler_init(&d, 1, 65536.0f, 0.5f, 0.5f, 3) != 0, "growth factor < 1 rejected");
    ab_scaler_free(&d);
}

static void test_static_unit(void) {
    ab_scaler s;
    AB_CHECK(ab_scaler_init_static(&s, 1024.0f) == 0, "%s", ab_error());
    AB_CHECK(s.enabled && !s.dynamic && strcmp(ab_scaler_mode(&s), "static") == 0, "mode %s", ab_scaler_mode(&s));
    AB_CHECK(s.scale == 1024.0f && s.init_scale == 1024.0f && s.min_scale == 1024.0f && s.max_scale == 1024.0f,
             "scale %g", s.scale);
    /* far more clean steps than any growth interval: no growth */
    for (long k = 0; k < 5000; k++)
        if (ab_scaler_update(&s, 0, k, 1) != 1) {
            AB_CHECK(0, "clean step %ld not taken", k);
            break;
        }
    AB_CHECK(s.scale == 1024.0f && s.growths == 0, "static scale grew to %g", s.scale);
    /* an overflow: skipped, recorded with the same scale before and after, no backoff */
    AB_CHECK(ab_scaler_update(&s, 1, 5000, 3) == 0, "overflowing step taken");
    AB_CHECK(ab_scaler_update(&s, 1, 5001, 3) == 0, "second overflowing step taken");
    AB_CHECK(ab_scaler_update(&s, 0, 5002, 3) == 1, "clean step after overflows skipped");
    AB_CHECK(s.scale == 1024.0f && s.backoffs == 0 && s.skipped == 2, "scale %g backoffs %ld skipped %ld", s.scale,
             s.backoffs, s.skipped);
    AB_CHECK(s.n_events == 2 && s.events[0].step == 5000 && s.events[0].epoch == 3 &&
                 s.events[0].scale_before == 1024.0f && s.events[0].scale_after == 1024.0f && s.events[1].step == 5001,
             "events: %zu", s.n_events);
    AB_CHECK(s.n_changes == 1 && s.changes[0].step == 0 && s.changes[0].scale == 1024.0f, "changes: %zu", s.n_changes);
    ab_scaler_free(&s);
    AB_CHECK(ab_scaler_init_static(&s, 1.0f) == 0 && s.scale == 1.0f, "scale 1: %s", ab_error());
    AB_CHECK(ab_scaler_update(&s, 1, 0, 1) == 0 && s.scale == 1.0f && s.n_events == 1, "scale 1 still skips");
    ab_scaler_free(&s);
    const float bad[] = {0.0f, -1.0f, NAN, INFINITY, -INFINITY, 0x1.0p-25f};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        AB_CHECK(ab_scaler_init_static(&s, bad[i]) != 0 && strstr(ab_error(), "static scale") != NULL,
                 "static scale %g accepted", (double)bad[i]);
        ab_scaler_free(&s);
    }
    AB_CHECK(ab_scaler_init_static(&s, 0x1.0p-24f) == 0, "2^-24 refused: %s", ab_error());
    ab_scaler_free(&s);
    ab_scaler d;
    ab_scaler_init(&d, 1, 65536.0f, 2.0f, 0.5f, 3);
    AB_CHECK(d.dynamic && strcmp(ab_scaler_mode(&d), "dynamic") == 0, "dynamic mode %s", ab_scaler_mode(&d));
    ab_scaler_free(&d);
    ab_scaler_init(&d, 0, 65536.0f, 2.0f, 0.5f, 3);
    AB_CHECK(!d.dynamic && strcmp(ab_scaler_mode(&d), "none") == 0, "disabled mode %s", ab_scaler_mode(&d));
    ab_scaler_free(&d);
}

static ab_train_config base_config(ab_precision prec) {
    ab_train_config c;
    ab_train_config_defaults(&c);
    c.workload = &ab_workloads;
    c.platform = &ab_platform;
    c.precision = prec;
    c.quiet = 1;
    c.batch_size = 32;
    c.growth_interval = 2;
    return c;
}

/* a trainer over real MNIST, or NULL after counting a failure */
static ab_trainer *make_trainer(const ab_train_config *c, ab_run_record *rec) {
    ab_trainer *t;
    if (ab_trainer_create(c, rec, &t) != 0) {
        fprintf(stderr, "FAIL trainer: %s\n", ab_error());
        failures++;
        return NULL;
    }
    return t;
}

static void test_skip_in_training(void) {
    ab_train_config c = base_config(AB_PREC_AMP);
    c.inject_inf_step = 1;
    ab_run_record rec;
    ab_trainer *t = make_trainer(&c, &rec);
    if (!t) return;
    const size_t n = ab_trainer_params(t)->n;
    float *w0 = malloc(n * 4), *w1 = malloc(n * 4), *w2 = malloc(n * 4);
    int32_t order[32];
    for (int i = 0; i < 32; i++) order[i] = i * 7;
    ab_step_result r;
    const ab_scaler *sc = ab_trainer_scaler(t);
    AB_CHECK(ab_trainer_step(t, order, 32, 0, 1, &r) == 0 && r.applied == 1, "clean step 0: %s", ab_error());
    AB_CHECK(isfinite(r.loss) && r.loss > 0.5 && r.loss < 5.0, "first loss %g", r.loss);
    ab_trainer_weights(t, w0);
    const float scale0 = sc->scale;
    AB_CHECK(ab_trainer_step(t, order, 32, 1, 1, &r) == 0, "%s", ab_error());
    ab_trainer_weights(t, w1);
    AB_CHECK(r.applied == 0, "step with an injected inf must be skipped");
    AB_CHECK(memcmp(w0, w1, n * 4) == 0, "weights bit-identical after the skipped step");
    AB_CHECK(r.scale == scale0 && sc->scale == scale0 * 0.5f, "scale halved: %g -> %g", scale0, sc->scale);
    AB_CHECK(sc->n_events == 1 && sc->events[0].step == 1 && sc->events[0].scale_before == scale0,
             "overflow event recorded");
    AB_CHECK(ab_trainer_step(t, order, 32, 2, 1, &r) == 0 && r.applied == 1, "clean step 2");
    ab_trainer_weights(t, w2);
    AB_CHECK(memcmp(w1, w2, n * 4) != 0, "a clean step changes the weights");
    AB_CHECK(ab_trainer_step(t, order, 32, 3, 1, &r) == 0 && r.applied == 1, "clean step 3");
    AB_CHECK(sc->scale == scale0, "scale doubles again after growth_interval = 2 clean steps: %g", sc->scale);
    ab_trainer_destroy(t);
    /* the record holds the scaler's history once the trainer is gone */
    AB_CHECK(rec.scaler.scale == scale0 && rec.scaler.n_events == 1 && rec.scaler.events[0].step == 1,
             "the record's scaler: scale %g, %zu events", rec.scaler.scale, rec.scaler.n_events);
    ab_run_record_free(&rec);
    free(w0);
    free(w1);
    free(w2);
}

/* The forward's working copy (fp16 under AMP, bf16) is the master weights rounded at every step's
 * start, whether the update refreshed it in its own pass (an applied step) or the step's start did
 * (after the skipped step, and the first): checked after each step of a run whose second step is
 * skipped under AMP (bf16 has no scaler: its steps all apply), and after an evaluation. */
static int copy_is_master_rounded(ab_trainer *t, float *w, uint16_t *c, const char *when) {
    const ab_params *p = ab_trainer_params(t);
    if (ab_trainer_weights(t, w) != 0 ||
        p->be->ops->download(p->be, c, p->compute_weights, p->n_compute * sizeof(uint16_t)) != 0) {
        fprintf(stderr, "FAIL %s: %s\n", when, ab_error());
        failures++;
        return 0;
    }
    for (size_t i = 0; i < p->n_compute; i++) {
        const uint16_t want = ab_f32_to_16(p->compute_type, w[i]);
        if (c[i] != want) {
            fprintf(stderr, "FAIL %s: the %s working copy's element %zu is 0x%04x, the master weight %.9g rounds to "
                            "0x%04x\n",
                    when, ab_dtype_name(p->compute_type), i, c[i], (double)w[i], want);
            failures++;
            return 0;
        }
    }
    return 1;
}

static void test_copy_in_training(ab_precision prec) {
    ab_train_config c = base_config(prec);
    const int skip = prec == AB_PREC_AMP; /* bf16 has no scaler to skip a step: every step applies */
    if (skip) c.inject_inf_step = 1;
    ab_run_record rec;
    ab_trainer *t = make_trainer(&c, &rec);
    if (!t) return;
    const ab_params *p = ab_trainer_params(t);
    float *w = malloc(p->n * 4);
    uint16_t *cp = malloc(p->n_compute * 2 + 2);
    int32_t order[32];
    for (int i = 0; i < 32; i++) order[i] = i * 5;
    ab_step_result r;
    const char *name = ab_precision_name(prec);
    int ok = w && cp && copy_is_master_rounded(t, w, cp, "before the first step");
    for (long k = 0; ok && k < 4; k++) {
        AB_CHECK(ab_trainer_step(t, order, 32, k, 1, &r) == 0, "%s step %ld: %s", name, k, ab_error());
        AB_CHECK(r.applied == (!skip || k != 1), "%s step %ld applied %d", name, k, r.applied);
        char when[64];
        snprintf(when, sizeof when, "%s, after step %ld", name, k);
        ok = copy_is_master_rounded(t, w, cp, when);
        if (ok && k == 2) {
            double loss, acc;
            AB_CHECK(ab_trainer_evaluate(t, &loss, &acc) == 0 && isfinite(loss), "%s evaluation: %s", name,
                     ab_error());
            ok = copy_is_master_rounded(t, w, cp, "after the evaluation");
        }
    }
    if (ok) printf("ok %s: the working copy is the master weights rounded after every step\n", name);
    ab_trainer_destroy(t);
    ab_run_record_free(&rec);
    free(w);
    free(cp);
}

/* A static scale in the real step: the injected inf skips the step with every weight unchanged,
 * the scale stays, the event is recorded, clean steps are taken; fp32 refuses a static scale */
static void test_static_skip_in_training(float scale) {
    ab_train_config c = base_config(AB_PREC_AMP);
    c.loss_scale = scale;
    c.inject_inf_step = 1;
    ab_run_record rec;
    ab_trainer *t = make_trainer(&c, &rec);
    if (!t) return;
    const size_t n = ab_trainer_params(t)->n;
    float *w0 = malloc(n * 4), *w1 = malloc(n * 4);
    int32_t order[32];
    for (int i = 0; i < 32; i++) order[i] = i * 7;
    ab_step_result r;
    const ab_scaler *sc = ab_trainer_scaler(t);
    AB_CHECK(ab_trainer_step(t, order, 32, 0, 1, &r) == 0 && r.applied == 1, "static %g: step 0: %s", (double)scale,
             ab_error());
    AB_CHECK(isfinite(r.loss) && r.loss > 0.5 && r.loss < 5.0, "static %g: first loss %g", (double)scale, r.loss);
    ab_trainer_weights(t, w0);
    AB_CHECK(ab_trainer_step(t, order, 32, 1, 1, &r) == 0 && r.applied == 0 && r.scale == scale,
             "static %g: the step with an injected inf must be skipped", (double)scale);
    ab_trainer_weights(t, w1);
    AB_CHECK(memcmp(w0, w1, n * 4) == 0, "static %g: weights bit-identical after the skipped step", (double)scale);
    AB_CHECK(sc->scale == scale && sc->skipped == 1 && sc->n_events == 1 && sc->events[0].step == 1 &&
                 sc->events[0].scale_before == scale && sc->events[0].scale_after == scale,
             "static %g: scale %g, skipped %ld, events %zu", (double)scale, sc->scale, sc->skipped, sc->n_events);
    for (long k = 2; k < 5; k++)
        AB_CHECK(ab_trainer_step(t, order, 32, k, 1, &r) == 0 && r.applied == 1, "static %g: clean step %ld",
                 (double)scale, k);
    AB_CHECK(sc->scale == scale && sc->n_changes == 1, "static %g: the scale moved to %g", (double)scale, sc->scale);
    ab_trainer_destroy(t);
    /* the record holds the static scaler's history once the trainer is gone */
    AB_CHECK(rec.scaler.scale == scale && !rec.scaler.dynamic && rec.scaler.n_events == 1 && rec.scaler.skipped == 1,
             "static %g: the record's scaler: scale %g, %zu events", (double)scale, rec.scaler.scale,
             rec.scaler.n_events);
    ab_run_record_free(&rec);
    free(w0);
    free(w1);
    /* a static scale belongs to amp */
    c = base_config(AB_PREC_FP32);
    c.loss_scale = scale;
    AB_CHECK(ab_trainer_create(&c, &rec, &t) != 0 && strstr(ab_error(), "needs precision amp") != NULL,
             "fp32 with a static scale: '%s'", ab_error());
    ab_run_record_free(&rec);
}

static void test_fp32_fault_is_an_error(void) {
    ab_train_config c = base_config(AB_PREC_FP32);
    c.inject_inf_step = 0;
    ab_run_record rec;
    ab_trainer *t = make_trainer(&c, &rec);
    if (!t) return;
    int32_t order[32];
    for (int i = 0; i < 32; i++) order[i] = i;
    ab_step_result r;
    int rc = 0;
    for (long s = 0; s < 3 && rc == 0; s++) rc = ab_trainer_step(t, order, 32, s, 1, &r);
    AB_CHECK(rc != 0 && strstr(ab_error(), "loss is NaN") != NULL, "fp32 NaN loss must stop the run: rc=%d, '%s'", rc,
             ab_error());
    ab_trainer_destroy(t);
    ab_run_record_free(&rec);
}

int main(void) {
    test_scaler_unit();
    test_static_unit();
    test_skip_in_training();
    test_static_skip_in_training(1.0f);
    test_static_skip_in_training(1024.0f);
    test_fp32_fault_is_an_error();
    test_copy_in_training(AB_PREC_AMP);
    test_copy_in_training(AB_PREC_BF16);
    printf("loss scaler: %d failures\n", failures);
    return failures ? 1 : 0;
}
