/* The plots on fixture results: every PNG the harness draws is read back with libpng and must
 * be a valid PNG of the intended size (HR_PLOT_W x HR_PLOT_H) with something drawn on it (not one
 * flat colour), and the expected set of plots must be there. Skips (77) without gnuplot.
 * usage: test_harness_plots FIXTURES_DIR REPORTED_JSON GNUPLOT_SCRIPTS_DIR */
#define _POSIX_C_SOURCE 200809L
#include <png.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "harness.h"
#include "tolerances.h"

static int failures = 0;

#define CHECK AB_CHECK /* tests/tolerances.h */

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
    for (int i = 0; i < n; i++) {
        char path[1300], err[1400];
        snprintf(path, sizeof path, "%s/%s", tmp, drawn[i]);
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
