/* The gradient census as the result record's "grad_census" object (record.h). */
#include <cjson/cJSON.h>
#include <math.h>

#include "census.h"
#include "record.h"

static cJSON *num(double v) { return isfinite(v) ? cJSON_CreateNumber(v) : cJSON_CreateNull(); }

static cJSON *shares_json(const ab_census_shares *s) {
    cJSON *o = cJSON_CreateObject();
    cJSON_AddItemToObject(o, "flush", num(s->flush));
    cJSON_AddItemToObject(o, "subnormal", num(s->subnormal));
    cJSON_AddItemToObject(o, "overflow", num(s->overflow));
    cJSON_AddItemToObject(o, "may_overflow", num(s->may_overflow));
    return o;
}

static cJSON *figures_json(const ab_census_figures *f) {
    cJSON *o = cJSON_CreateObject();
    cJSON_AddNumberToObject(o, "tensors", (double)f->tensors);
    cJSON_AddStringToObject(o, "dtype", ab_dtype_name(f->dtype));
    cJSON_AddNumberToObject(o, "n", (double)f->n);
    cJSON_AddNumberToObject(o, "zeros", (double)f->zeros);
    cJSON_AddNumberToObject(o, "nonfinite", (double)f->nonfinite);
    cJSON_AddNumberToObject(o, "nonzero", (double)f->nonzero);
    cJSON_AddItemToObject(o, "at_scale_1", shares_json(&f->at_scale_1));
    cJSON_AddItemToObject(o, "at_loss_scale", shares_json(&f->at_loss_scale));
    const int safe = f->has_safe, max = f->nonzero && f->max_log2 != INT32_MIN;
    cJSON_AddItemToObject(o, "safe_scale", safe ? cJSON_CreateNumber(ldexp(1.0, f->safe_log2)) : cJSON_CreateNull());
    cJSON_AddItemToObject(o, "safe_scale_log2", safe ? cJSON_CreateNumber(f->safe_log2) : cJSON_CreateNull());
    cJSON_AddItemToObject(o, "max_scale_without_overflow", max ? cJSON_CreateNumber(ldexp(1.0, f->max_log2)) : cJSON_CreateNull());
    cJSON_AddItemToObject(o, "max_scale_without_overflow_log2", max ? cJSON_CreateNumber(f->max_log2) : cJSON_CreateNull());
    return o;
}

cJSON *ab_census_json(const ab_census *c) {
    cJSON *o = cJSON_CreateObject();
    if (!o) return NULL;
    cJSON_AddNumberToObject(o, "interval", c->interval);
    cJSON_AddNumberToObject(o, "log2_min", c->log2_min);
    cJSON_AddNumberToObject(o, "log2_max", c->log2_max);
    cJSON *recs = cJSON_AddArrayToObject(o, "records");
    for (size_t i = 0; recs && i < c->n_records; i++) {
        const ab_census_record *r = &c->records[i];
        cJSON *j = cJSON_CreateObject();
        cJSON_AddNumberToObject(j, "step", (double)r->step);
        cJSON_AddNumberToObject(j, "loss_scale", r->loss_scale);
        cJSON *ts = cJSON_AddArrayToObject(j, "tensors");
        for (size_t k = 0; ts && k < r->n_tensors; k++) {
            const ab_census_tensor *e = &r->tensors[k];
            cJSON *t = cJSON_CreateObject();
            cJSON_AddStringToObject(t, "name", e->name);
            cJSON_AddStringToObject(t, "kind", ab_census_kind_name(e->kind));
            cJSON_AddStringToObject(t, "dtype", ab_dtype_name(e->dtype));
            cJSON_AddNumberToObject(t, "n", (double)e->n);
            cJSON_AddNumberToObject(t, "zeros", (double)e->zeros);
            cJSON_AddNumberToObject(t, "nonfinite", (double)e->nonfinite);
            cJSON *h = cJSON_AddArrayToObject(t, "hist");
            for (int b = 0; h && b < AB_CENSUS_BINS; b++) cJSON_AddItemToArray(h, cJSON_CreateNumber((double)e->hist[b]));
            cJSON_AddItemToArray(ts, t);
        }
        cJSON *d = cJSON_AddObjectToObject(j, "derived");
        for (int kind = 0; d && kind < AB_CENSUS_KINDS; kind++) {
            ab_census_figures f;
            ab_census_figures_of(c, r, (ab_census_kind)kind, &f);
            cJSON_AddItemToObject(d, ab_census_kind_name((ab_census_kind)kind), figures_json(&f));
        }
        cJSON_AddItemToArray(recs, j);
    }
    return o;
}
