/* The plots on fixture results: every PNG the harness draws is read back with libpng and must
 * be a valid PNG of the intended size (HR_PLOT_W x HR_PLOT_H) with something drawn on it (not one
 * flat colour), and the expected set of plots must be there. On the run-seeds fixture the accuracy
 * plot's data files must hold, per epoch, the mean, sd, min and max over the seeds (recomputed here
 * from the result files), and the loss plot draws one seed per mode. Skips (77) without gnuplot.
 * usage: test_harness_plots FIXTURES_DIR REPORTED_JSON GNUPLOT_SCRIPTS_DIR */
#define _POSIX_C_SOURCE 200809L
#include <dirent.h>
#include <math.h>
#include <png.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "harness.h"
#include "tolerances.h"

static int failures = 0;

#define CHECK AB_CHECK /* tests/tolerances.h */
#include "json_edit.h"

/* Reads path with libpng; returns 0 and the size and the share of pixels that differ from the
 * top-left (background) pixel, or -1 with a message. */
static int read_png(const char *path, unsigned *w, unsigned *h, double *ink, char *err, size_t errn) {
    FILE *f = fopen(path, "rb");
    if (!f) {
        snprintf(err, errn, "%s: cannot open", path);
        return -1;
    }
    unsigned char sig[8];
    if (fread(sig, 1, 8, f) != 8 || png_sig_cmp(sig, 0, 8) != 0) {
        fclose(f);
        snprintf(err, errn, "%s: not a PNG (bad signature)", path);
        return -1;
    }
    png_structp png = png_create_read_struct(PNG_LIBPNG_VER_STRING, NULL, NULL, NULL);
    png_infop info = png ? png_create_info_struct(png) : NULL;
    if (!png || !info) {
        fclose(f);
        snprintf(err, errn, "%s: libpng init failed", path);
        return -1;
    }
    if (setjmp(png_jmpbuf(png))) {
        png_destroy_read_struct(&png, &info, NULL);
        fclose(f);
        snprintf(err, errn, "%s: libpng could not decode it", path);
        return -1;
    }
    png_init_io(png, f);
    png_set_sig_bytes(png, 8);
    /* every pixel to 8-bit RGBA, whatever the colour type */
    png_read_png(png, info, PNG_TRANSFORM_STRIP_16 | PNG_TRANSFORM_PACKING | PNG_TRANSFORM_EXPAND, NULL);
    *w = png_get_image_width(png, info);
    *h = png_get_image_height(png, info);
    const int channels = png_get_channels(png, info);
    png_bytepp rows = png_get_rows(png, info);
    size_t differ = 0;
    for (unsigned y = 0; y < *h; y++)
        for (unsigned x = 0; x < *w; x++)
            if (memcmp(rows[y] + (size_t)x * channels, rows[0], (size_t)channels) != 0) differ++;
    *ink = (double)differ / ((double)*w * *h);
    png_destroy_read_struct(&png, &info, NULL);
    fclose(f);
    return 0;
}

/* Reads and checks every PNG of drawn[] in dir. */
static void check_pngs(const char *dir, char drawn[][128], int n) {
    for (int i = 0; i < n; i++) {
        char path[1300], err[1400];
        snprintf(path, sizeof path, "%s/%s", dir, drawn[i]);
        unsigned w = 0, h = 0;
        double ink = 0;
        if (read_png(path, &w, &h, &ink, err, sizeof err) != 0) {
            CHECK(0, "%s", err);
            continue;
        }
        CHECK(w == HR_PLOT_W && h == HR_PLOT_H, "%s: %ux%u, want %dx%d", drawn[i], w, h, HR_PLOT_W, HR_PLOT_H);
        /* axes, labels and lines cover well over 1% of a plot; a blank or failed plot is one colour */
        CHECK(ink > 0.01, "%s: only %.2f%% of the pixels differ from the background", drawn[i], 100 * ink);
        printf("%s: %ux%u, %.1f%% drawn\n", drawn[i], w, h, 100 * ink);
    }
}

/* The test accuracy after epoch e of a result file, read here (not through the harness). */
static double epoch_accuracy(const char *dir, const char *file, int e) {
    char path[1200], *text;
    snprintf(path, sizeof path, "%s/%s", dir, file);
    if (hr_read_file(path, &text) != 0) return NAN;
    cJSON *j = cJSON_Parse(text);
    free(text);
    const double v = hr_num(cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(j, "epochs"), e - 1), "test_accuracy", NAN);
    cJSON_Delete(j);
    return v;
}

/* plots/data/accuracy_mlp_<mode>.dat of the run-seeds fixture: "epoch mean sd min max seeds", the
 * band the plot draws, against the same figures computed from the three seeds' files. */
static void check_band(const char *fixture, const char *data_dir, const char *mode, const char *file_fmt) {
    char path[1300], line[512];
    snprintf(path, sizeof path, "%s/accuracy_mlp_%s.dat", data_dir, mode);
    FILE *f = fopen(path, "r");
    CHECK(f != NULL, "%s: no accuracy data file", path);
    if (!f) return;
    int rows = 0;
    while (fgets(line, sizeof line, f)) {
        if (line[0] == '#') continue;
        int e = 0, k = 0;
        double mean, sd, lo, hi;
        if (sscanf(line, "%d %lf %lf %lf %lf %d", &e, &mean, &sd, &lo, &hi, &k) != 6) {
            CHECK(0, "%s: '%s' is not 'epoch mean sd min max seeds'", path, line);
            continue;
        }
        double v[3], s = 0, ss = 0, vmin = INFINITY, vmax = -INFINITY;
        for (int i = 0; i < 3; i++) {
            char name[96];
            snprintf(name, sizeof name, file_fmt, i + 1);
            v[i] = epoch_accuracy(fixture, name, e);
            s += v[i];
            vmin = fmin(vmin, v[i]);
            vmax = fmax(vmax, v[i]);
        }
        const double m = s / 3;
        for (int i = 0; i < 3; i++) ss += (v[i] - m) * (v[i] - m);
        const double want_sd = sqrt(ss / 2);
        CHECK(k == 3 && fabs(mean - m) < 1e-3 && fabs(sd - want_sd) < 1e-3 && fabs(lo - vmin) < 1e-3 &&
                  fabs(hi - vmax) < 1e-3,
              "%s epoch %d: mean %g sd %g min %g max %g seeds %d, want %g %g %g %g 3", path, e, mean, sd, lo, hi, k, m,
              want_sd, vmin, vmax);
        rows++;
    }
    fclose(f);
    CHECK(rows == 2, "%s: %d epochs, want 2", path, rows);
}

/* Seeds drawn in the run-seeds fixture's plots: the accuracy band data, one loss line per mode. */
static void check_seeds(const char *fixtures, const hr_reported *rep, const char *gp, const char *tmp) {
    char dir[1100], out[1200], dd[1300];
    snprintf(dir, sizeof dir, "%s/run-seeds", fixtures);
    snprintf(out, sizeof out, "%s/seeds", tmp);
    snprintf(dd, sizeof dd, "%s/data", out);
    hr_runset *rs = runset_open(dir);
    if (!rs) return;
    char drawn[32][128];
    int n = 0;
    CHECK(hr_draw_plots(rs, rep, gp, out, drawn, 32, &n) == 0, "run-seeds: hr_draw_plots: %s", ab_error());
    int found = 0;
    for (int i = 0; i < n; i++) found |= !strcmp(drawn[i], "accuracy_mlp.png");
    CHECK(found, "run-seeds: accuracy_mlp.png was not drawn");
    check_pngs(out, drawn, n);
    check_band(dir, dd, "fp32", "mlp-fp32-s%d.json");
    check_band(dir, dd, "amp", "mlp-amp-s%d.json");
    check_band(dir, dd, "pytorch-fp32", "mlp-fp32-pytorch-s%d.json");
    /* the loss plot: FP32 and AMP once each (the lowest seed), not once per seed */
    int loss_files = 0;
    DIR *d = opendir(dd);
    for (struct dirent *de; d && (de = readdir(d));) loss_files += !strncmp(de->d_name, "loss_mlp_", 9);
    if (d) closedir(d);
    CHECK(loss_files == 2, "run-seeds: %d loss series, want 2 (one seed per mode)", loss_files);
    runset_close(rs);
}

int main(int argc, char **argv) {
    if (argc != 4) {
        fprintf(stderr, "usage: %s FIXTURES_DIR REPORTED_JSON GNUPLOT_SCRIPTS_DIR\n", argv[0]);
        return 2;
    }
    if (system("gnuplot --version > /dev/null 2>&1") != 0) {
        printf("SKIPPED: gnuplot not found (Debian: gnuplot-nox)\n");
        return 77;
    }
    char dir[1024];
    snprintf(dir, sizeof dir, "%s/run-basic", argv[1]);
    hr_reported rep;
    hr_runset *rs = calloc(1, sizeof *rs);
    if (hr_reported_load(argv[2], &rep) != 0 || hr_runset_load(dir, rs) != 0) {
        fprintf(stderr, "FAIL: %s\n", ab_error());
        return 1;
    }
    char tmpl[] = "/tmp/ab_harness_plots_XXXXXX";
    const char *tmp = mkdtemp(tmpl);
    if (!tmp) return 1;
    char drawn[32][128];
    int n = 0;
    CHECK(hr_draw_plots(rs, &rep, argv[3], tmp, drawn, 32, &n) == 0, "hr_draw_plots: %s", ab_error());

    static const char *const expected[] = {"amp_savings.png", "loss_resnet50.png", "scale_resnet50.png",
                                           "accuracy_resnet50.png", "scaling_resnet50.png"};
    for (size_t e = 0; e < sizeof expected / sizeof expected[0]; e++) {
        int found = 0;
        for (int i = 0; i < n; i++) found |= !strcmp(drawn[i], expected[e]);
        CHECK(found, "%s was not drawn", expected[e]);
    }
    check_pngs(tmp, drawn, n);
    /* one seed: the accuracy series is a line, its sd NaN and min = max = the one value */
    char acc[1300], line[256] = "";
    snprintf(acc, sizeof acc, "%s/data/accuracy_resnet50_fp32.dat", tmp);
    FILE *af = fopen(acc, "r");
    while (af && fgets(line, sizeof line, af) && line[0] == '#') {
    }
    if (af) fclose(af);
    CHECK(!strcmp(line, "1 70.0000 NaN 70.0000 70.0000 1\n"), "%s: first epoch '%s'", acc, line);
    /* the articles' 75% for ResNet-50 is the dashed line the accuracy plot draws, from this file */
    snprintf(acc, sizeof acc, "%s/data/accuracy_resnet50_reported.dat", tmp);
    af = fopen(acc, "r");
    line[0] = 0;
    while (af && fgets(line, sizeof line, af) && line[0] == '#') {
    }
    if (af) fclose(af);
    CHECK(!strcmp(line, "75\n"), "%s: the reported accuracy line reads '%s', not 75", acc, line);
    check_seeds(argv[1], &rep, argv[3], tmp);
    /* a file that is not a PNG is told apart */
    char fake[1300], err[1400];
    snprintf(fake, sizeof fake, "%s/fake.png", tmp);
    FILE *f = fopen(fake, "w");
    if (f) {
        fputs("not a png at all", f);
        fclose(f);
    }
    unsigned w, h;
    double ink;
    CHECK(read_png(fake, &w, &h, &ink, err, sizeof err) != 0, "a text file passed as a PNG");

    hr_runset_free(rs);
    free(rs);
    hr_reported_free(&rep);
    if (failures) {
        fprintf(stderr, "test_harness_plots: %d failures (files kept in %s)\n", failures, tmp);
        return 1;
    }
    char cmd[1200];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmp);
    if (system(cmd) != 0) fprintf(stderr, "note: could not remove %s\n", tmp);
    printf("test_harness_plots: %d plots checked\n", n);
    return 0;
}
