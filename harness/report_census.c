/* The gradient range of a workload: REPORT.md's part and its two plots (grad_hist.gp,
 * grad_layers.gp), from the grad_census of ampbench's FP32 run, its AMP run under the dynamic
 * scale and its AMP run at a static scale (run_all.sh --loss-scale-ablation). The figures are
 * the ones ampbench derived for each census (grad_census.records[].derived, core/census.h); the
 * plots draw the histograms themselves. Activation gradients are what the claim is about: the
 * gradient arriving at each layer's output in backward. */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "census.h"
#include "harness.h"

/* census record i of r (i < 0: from the end), NULL when r has none */
static const cJSON *census_record(const hr_run *r, int i) {
    if (!r) return NULL;
    const cJSON *recs = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(r->json, "grad_census"),
                                                         "records");
    const int n = cJSON_GetArraySize(recs);
    if (n == 0) return NULL;
    return cJSON_GetArrayItem(recs, i < 0 ? n + i : i);
}

static const cJSON *derived(const cJSON *rec, const char *kind) {
    return cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(rec, "derived"), kind);
}

/* the share (0..1) of a kind's finite non-zero values that fp16 holds as `what` (flush,
 * subnormal, overflow) at `at` (at_scale_1, at_loss_scale); NAN when not recorded */
static double share(const cJSON *rec, const char *kind, const char *at, const char *what) {
    return hr_num(cJSON_GetObjectItemCaseSensitive(derived(rec, kind), at), what, NAN);
}

static double zero_share(const cJSON *rec, const char *kind) {
    const cJSON *d = derived(rec, kind);
    const double n = hr_num(d, "n", 0);
    return n > 0 ? hr_num(d, "zeros", 0) / n : NAN;
}

static const char *pct(char *buf, size_t n, double v) {
    if (!isfinite(v)) snprintf(buf, n, "-");
    else if (v > 0 && v < 1e-5) snprintf(buf, n, "%.2g%%", 100.0 * v);
    else snprintf(buf, n, "%.3f%%", 100.0 * v);
    return buf;
}

/* the run whose activation gradients stand for the true values: FP32's census, else AMP's */
static const hr_run *reference_run(const hr_workload *w) {
    if (census_record(w->fp32, 0)) return w->fp32;
    if (census_record(w->amp, 0)) return w->amp;
    return census_record(w->amp_static, 0) ? w->amp_static : NULL;
}

static void range_row(FILE *f, const char *label, const hr_run *r) {
    if (!r) return;
    const cJSON *first = census_record(r, 0), *last = census_record(r, -1);
    char a[32], b[32], c[32], z[32], acc[32], sc[32] = "-";
    if (strcmp(r->precision, "fp32") != 0) snprintf(sc, sizeof sc, "%g", r->final_scale);
    const double safe = hr_num(derived(last, "activation"), "safe_scale_log2", NAN);
    char safe_s[32] = "-";
    if (last && isfinite(safe)) snprintf(safe_s, sizeof safe_s, "2^%.0f", safe);
    else if (last) snprintf(safe_s, sizeof safe_s, "none");
    /* an AMP run at scale 1 holds fp16 values as they came out: what fp16 flushed is already an
     * exact zero (in the zero column, beside ReLU's), so its flushed share and the scale its
     * surviving values would bear say nothing: not shown as figures */
    const int unscaled_fp16 = strcmp(r->precision, "fp32") != 0 && r->static_scale == 1.0;
    if (unscaled_fp16) {
        fprintf(f, "| %s | %s | %ld | %.4g | %s | %s | not observable: fp16 made them zeros (in the zero column) | "
                   "same | - |\n",
                label, sc, r->skipped_steps, r->final_train_loss, pct(acc, sizeof acc, r->final_accuracy / 100.0),
                pct(z, sizeof z, zero_share(last, "activation")));
        return;
    }
    fprintf(f, "| %s | %s | %ld | %.4g | %s | %s | %s / %s | %s | %s |\n", label,
            sc, r->skipped_steps,
            r->final_train_loss, pct(acc, sizeof acc, r->final_accuracy / 100.0), pct(z, sizeof z, zero_share(last, "activation")),
            pct(a, sizeof a, share(first, "activation", "at_scale_1", "flush")),
            pct(b, sizeof b, share(last, "activation", "at_scale_1", "flush")),
            strcmp(r->precision, "fp32") ? pct(c, sizeof c, share(last, "activation", "at_loss_scale", "flush")) : "-",
            safe_s);
}

/* What the measurement says beside the articles' claim, in words. */
static void range_meaning(FILE *f, const hr_workload *w, const hr_run *ref) {
    const cJSON *first = census_record(ref, 0), *last = census_record(ref, -1);
    const double f0 = share(first, "activation", "at_scale_1", "flush"), f1 = share(last, "activation", "at_scale_1", "flush");
    const double s0 = share(first, "activation", "at_scale_1", "subnormal"), s1 = share(last, "activation", "at_scale_1", "subnormal");
    char a[32], b[32], c[32], d[32];
    fprintf(f, "What it means: in the %s run, %s of the non-zero activation gradients at its last census (step %.0f) "
               "lie below 2^-25, where fp16 rounds them to zero at scale 1, against %s at step 1; %s more "
               "(%s at step 1) would be fp16 subnormals, keeping fewer than 10 significant bits. ",
            strcmp(ref->precision, "fp32") ? "AMP" : "FP32", pct(a, sizeof a, f1), hr_num(last, "step", NAN),
            pct(b, sizeof b, f0), pct(c, sizeof c, s1), pct(d, sizeof d, s0));
    const cJSON *al = census_record(w->amp, -1);
    if (al)
        fprintf(f, "AMP's dynamic scale (%g at that census) leaves %s of its stored activation gradients in the flush "
                   "range and %s subnormal. ",
                hr_num(al, "loss_scale", NAN), pct(a, sizeof a, share(al, "activation", "at_loss_scale", "flush")),
                pct(b, sizeof b, share(al, "activation", "at_loss_scale", "subnormal")));
    if (w->amp_static && w->amp)
        fprintf(f, "Without loss scaling (AMP at scale %g) the run ends at %.2f%% test accuracy and train loss %.4g, "
                   "against %.2f%% and %.4g under the dynamic scale%s; %ld of its steps were skipped. ",
                w->amp_static->static_scale, w->amp_static->final_accuracy, w->amp_static->final_train_loss,
                w->amp->final_accuracy, w->amp->final_train_loss,
                w->fp32 ? " (FP32 in the row above)" : "", w->amp_static->skipped_steps);
    if (isfinite(f1) && f1 < 1e-3)
        fprintf(f, "So here fp16 would flush %s of the activation gradients even without a scale: the underflow the "
                   "articles describe does not show at this length and scale, and loss scaling rescues little.\n\n",
                f1 > 0 ? "under 0.1%" : "none");
    else if (isfinite(f1))
        fprintf(f, "So the underflow the articles describe shows here: without a loss scale fp16 loses %s of the "
                   "activation gradients to zero%s.\n\n",
                pct(a, sizeof a, f1), isfinite(f0) && f1 > f0 ? ", more late in training than at the start" : "");
    else
        fprintf(f, "\n\n");
}

void hr_write_grad_range(FILE *f, const hr_workload *w) {
    const hr_run *ref = reference_run(w);
    if (!ref && !w->amp_static) return;
    fprintf(f, "### Gradient range: what loss scaling rescues\n\n"
               "The articles' claim: late in training gradients, especially where activations are flat, become so "
               "small that fp16 flushes them to zero (梯度下溢), and dynamic loss scaling is what lets training run "
               "in fp16. Measured by a gradient census (`--grad-census K`: at step 1 and every K steps, a histogram "
               "of floor(log2 |g|) of every layer's output gradient and every weight gradient, as the run holds them). "
               "fp16 rounds |g| < 2^-25 to zero and holds 2^-25 .. 2^-14 as subnormals; an AMP run's values carry "
               "its loss scale, so \"at scale 1\" divides it out. Shares are of the finite non-zero activation "
               "gradients; \"zero\" is the share of exact zeros (ReLU's, and under AMP those fp16 already flushed).\n\n");
    fprintf(f, "| run | loss scale (end) | skipped steps | final train loss | test accuracy | activation gradients: zero "
               "(last census) | flushed at scale 1: step 1 / last census | flushed at the run's scale (last) | smallest "
               "safe scale (last) |\n|---|---|---|---|---|---|---|---|---|\n");
    range_row(f, "FP32", w->fp32);
    range_row(f, "AMP, dynamic scale", w->amp);
    if (w->amp_static) {
        char label[64];
        snprintf(label, sizeof label, "AMP, static scale %g", w->amp_static->static_scale);
        range_row(f, label, w->amp_static);
    }
    fprintf(f, "\n");
    if (ref) range_meaning(f, w, ref);
    else fprintf(f, "No run of this workload took a gradient census (`--grad-census K`).\n\n");
}

/* ---- plots ---- */

/* the activation gradients of record rec pooled: hist (bins), and their finite non-zero count */
static double pooled_activation(const cJSON *rec, double *hist, int bins) {
    for (int i = 0; i < bins; i++) hist[i] = 0;
    double nonzero = 0;
    const cJSON *t;
    cJSON_ArrayForEach(t, cJSON_GetObjectItemCaseSensitive(rec, "tensors")) {
        if (strcmp(hr_str(t, "kind", ""), "activation") != 0) continue;
        const cJSON *h = cJSON_GetObjectItemCaseSensitive(t, "hist");
        for (int i = 0; i < bins && i < cJSON_GetArraySize(h); i++) {
            const double v = cJSON_GetArrayItem(h, i)->valuedouble;
            hist[i] += v;
            nonzero += v;
        }
    }
    return nonzero;
}

/* the pooled activation-gradient histogram of the reference run at its first and last census,
 * at scale 1, and the last one where AMP's dynamic scale puts it (Micikevicius et al.'s Figure 3):
 * three series of "log2|g| share" (share of the finite non-zero values), blank-line separated */
static int plot_hist(const hr_workload *w, const hr_run *ref, const char *model, const char *dd, const char *gp,
                     char drawn[][128], int max, int *n) {
    const cJSON *gc = cJSON_GetObjectItemCaseSensitive(ref->json, "grad_census");
    const int lo = (int)hr_num(gc, "log2_min", -64), hi = (int)hr_num(gc, "log2_max", 15), bins = hi - lo + 1;
    if (bins < 2 || bins > 512) return ab_errorf("%s: grad_census bins %d .. %d", ref->path, lo, hi);
    const cJSON *rec[2] = {census_record(ref, 0), census_record(ref, -1)}, *al = census_record(w->amp, -1);
    /* AMP's scale at its last census: where it moves the values (0 without an AMP census) */
    const int shift = al ? (int)lround(log2(hr_num(al, "loss_scale", 1))) : 0;
    double *hist = malloc((size_t)bins * sizeof *hist);
    char name[160];
    snprintf(name, sizeof name, "grad_hist_%s.dat", model);
    FILE *f = hist ? hr_open_data(dd, name) : NULL;
    if (!f) {
        free(hist);
        return hist ? -1 : ab_errorf("out of memory");
    }
    fprintf(f, "# log2|g| (a bin's lower edge, at scale 1) and the share of the finite non-zero activation gradients;\n"
               "# series: the first census, the last, the last at AMP's scale 2^%d\n", shift);
    for (int k = 0; k < 3; k++) {
        const cJSON *r = rec[k == 0 ? 0 : 1];
        const double nz = pooled_activation(r, hist, bins);
        /* values stored at scale S (an AMP reference) sit log2 S bins above their value at scale 1 */
        const int at1 = -(int)lround(log2(hr_num(r, "loss_scale", 1))) + (k == 2 ? shift : 0);
        for (int i = 0; i < bins; i++) fprintf(f, "%d %.6g\n", lo + i + at1, nz > 0 ? hist[i] / nz : NAN);
        fprintf(f, "\n\n");
    }
    fclose(f);
    free(hist);
    char vars[2048], out[160];
    snprintf(out, sizeof out, "grad_hist_%s.png", model);
    snprintf(vars, sizeof vars,
             "out='../%s'; w=%d; h=%d; file='%s'; workload='%s'; ref='%s'; step0=%.0f; step1=%.0f; shift=%d; amp=%d", out,
             HR_PLOT_W, HR_PLOT_H, name, model, strcmp(ref->precision, "fp32") ? "AMP" : "FP32",
             hr_num(rec[0], "step", 1), hr_num(rec[1], "step", 1), shift, al != NULL);
    AB_TRY(hr_gnuplot(dd, gp, "grad_hist.gp", vars));
    return hr_add_drawn(drawn, max, n, out);
}

/* the share of a census tensor's finite non-zero values fp16 would flush at scale 1, its values
 * stored at `scale`: core/census.h's own classing of the bins (ab_census_shares_at) */
static double tensor_flush(const cJSON *t, int lo, double scale) {
    const cJSON *h = cJSON_GetObjectItemCaseSensitive(t, "hist");
    int64_t hist[AB_CENSUS_BINS];
    const int nbins = cJSON_GetArraySize(h) < AB_CENSUS_BINS ? cJSON_GetArraySize(h) : AB_CENSUS_BINS;
    for (int i = 0; i < nbins; i++) hist[i] = (int64_t)cJSON_GetArrayItem(h, i)->valuedouble;
    const char *dt = hr_str(t, "dtype", "fp32");
    const ab_dtype held = !strcmp(dt, "fp16") ? AB_F16 : !strcmp(dt, "bf16") ? AB_BF16 : AB_F32;
    ab_census_shares sh;
    ab_census_shares_at(hist, lo, nbins, held, scale, 1.0, &sh);
    return sh.flush;
}

/* per layer (backward order: the output's first), the share of its activation gradients fp16
 * would flush at scale 1, at the reference run's last census; and AMP's at its own scale */
static int plot_layers(const hr_workload *w, const hr_run *ref, const char *model, const char *dd, const char *gp,
                       char drawn[][128], int max, int *n) {
    const cJSON *last = census_record(ref, -1), *al = census_record(w->amp, -1), *t;
    const int lo = (int)hr_num(cJSON_GetObjectItemCaseSensitive(ref->json, "grad_census"), "log2_min", -64);
    char name[160];
    snprintf(name, sizeof name, "grad_layers_%s.dat", model);
    FILE *f = hr_open_data(dd, name);
    if (!f) return -1;
    fprintf(f, "# layer flushed_at_scale_1_%% flushed_in_amp_at_its_scale_%% label\n");
    int layers = 0;
    cJSON_ArrayForEach(t, cJSON_GetObjectItemCaseSensitive(last, "tensors")) layers += !strcmp(hr_str(t, "kind", ""), "activation");
    const int every = layers > 40 ? (layers + 29) / 30 : 1; /* about 30 labels at most */
    int i = 0;
    cJSON_ArrayForEach(t, cJSON_GetObjectItemCaseSensitive(last, "tensors")) {
        if (strcmp(hr_str(t, "kind", ""), "activation") != 0) continue;
        const char *layer = hr_str(t, "name", "?");
        double amp = NAN;
        const cJSON *u;
        cJSON_ArrayForEach(u, cJSON_GetObjectItemCaseSensitive(al, "tensors"))
            if (!strcmp(hr_str(u, "kind", ""), "activation") && !strcmp(hr_str(u, "name", ""), layer))
                amp = tensor_flush(u, lo, 1.0); /* at the stored scale: what AMP lost */
        char label[96];
        hr_safe_label(label, sizeof label, i % every == 0 ? layer : "");
        fprintf(f, "%d %.6g %.6g \"%s\"\n", i, 100.0 * tensor_flush(t, lo, hr_num(last, "loss_scale", 1)), 100.0 * amp,
                label);
        i++;
    }
    fclose(f);
    if (layers == 0) return 0;
    char vars[2048], out[160];
    snprintf(out, sizeof out, "grad_layers_%s.png", model);
    snprintf(vars, sizeof vars, "out='../%s'; w=%d; h=%d; file='%s'; workload='%s'; ref='%s'; step=%.0f; amp=%d", out,
             HR_PLOT_W, HR_PLOT_H, name, model, strcmp(ref->precision, "fp32") ? "AMP" : "FP32",
             hr_num(last, "step", 1), al != NULL);
    AB_TRY(hr_gnuplot(dd, gp, "grad_layers.gp", vars));
    return hr_add_drawn(drawn, max, n, out);
}

int hr_plot_grad_range(const hr_workload *w, const char *dd, const char *gp, char drawn[][128], int max, int *n) {
    const hr_run *ref = reference_run(w);
    if (!ref) return 0;
    char model[64];
    hr_safe_label(model, sizeof model, w->model);
    AB_TRY(plot_hist(w, ref, model, dd, gp, drawn, max, n));
    return plot_layers(w, ref, model, dd, gp, drawn, max, n);
}
