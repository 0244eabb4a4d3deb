/* ampbench-report: reads a run folder (result records + run.json) and harness/reported.json,
 * draws the plots with gnuplot and writes REPORT.md, with reported and measured side by side.
 *   ampbench-report RUN_DIR [--reported FILE] [--gnuplot-dir DIR] [--copy-plots DIR] [--no-plots]
 *   ampbench-report --line RESULT.json      one summary line for one result (run_all.sh uses it) */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"

#ifndef AB_SOURCE_DIR
#define AB_SOURCE_DIR "."
#endif

static const char usage[] =
    "usage: ampbench-report RUN_DIR [options]   write RUN_DIR/REPORT.md and RUN_DIR/plots/*.png\n"
    "       ampbench-report --line RESULT.json   print one summary line for one result\n"
    "options:\n"
    "  --reported FILE     reported figures            [" AB_SOURCE_DIR "/harness/reported.json]\n"
    "  --gnuplot-dir DIR   gnuplot scripts             [" AB_SOURCE_DIR "/plots]\n"
    "  --copy-plots DIR    also copy the PNGs there (e.g. the repository's plots/)\n"
    "  --no-plots          write REPORT.md only\n";

static int copy_file(const char *from, const char *to) {
    FILE *in = fopen(from, "rb");
    if (!in) return ab_errorf("%s: cannot open: %s", from, strerror(errno));
    FILE *out = fopen(to, "wb");
    if (!out) {
        fclose(in);
        return ab_errorf("%s: cannot write: %s", to, strerror(errno));
    }
    char buf[65536];
    size_t n;
    int ok = 1;
    while ((n = fread(buf, 1, sizeof buf, in)) > 0) ok &= fwrite(buf, 1, n, out) == n;
    fclose(in);
    if (fclose(out) != 0 || !ok) return ab_errorf("%s: write failed", to);
    return 0;
}

int main(int argc, char **argv) {
    const char *dir = NULL, *reported = AB_SOURCE_DIR "/harness/reported.json", *gp = AB_SOURCE_DIR "/harness/plots";
    const char *copy_to = NULL, *line = NULL;
    int plots = 1;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
            fputs(usage, stdout);
            return 0;
        }
        if (strcmp(a, "--no-plots") == 0) {
            plots = 0;
            continue;
        }
        if (strcmp(a, "--reported") == 0 || strcmp(a, "--gnuplot-dir") == 0 || strcmp(a, "--copy-plots") == 0 ||
            strcmp(a, "--line") == 0) {
            if (i + 1 >= argc) {
                fprintf(stderr, "ampbench-report: %s needs a value\n", a);
                return 2;
            }
            const char *v = argv[++i];
            if (strcmp(a, "--reported") == 0) reported = v;
            else if (strcmp(a, "--gnuplot-dir") == 0) gp = v;
            else if (strcmp(a, "--copy-plots") == 0) copy_to = v;
            else line = v;
            continue;
        }
        if (a[0] == '-' || dir) {
            fprintf(stderr, "ampbench-report: unexpected argument '%s' (see --help)\n", a);
            return 2;
        }
        dir = a;
    }
    if (line) {
        hr_run r;
        if (hr_run_load(line, &r) != 0) {
            fprintf(stderr, "ampbench-report: %s\n", ab_error());
            return 2;
        }
        char buf[512];
        hr_run_summary_line(&r, buf, sizeof buf);
        printf("%s\n", buf);
        hr_run_free(&r);
        return 0;
    }
    if (!dir) {
        fputs(usage, stderr);
        return 2;
    }
    hr_reported rep;
    if (hr_reported_load(reported, &rep) != 0) {
        fprintf(stderr, "ampbench-report: %s\n", ab_error());
        return 2;
    }
    hr_runset *rs = calloc(1, sizeof *rs);
    if (!rs || hr_runset_load(dir, rs) != 0) {
        fprintf(stderr, "ampbench-report: %s\n", rs ? ab_error() : "out of memory");
        free(rs);
        hr_reported_free(&rep);
        return 2;
    }
    int rc = 0;
    char drawn[64][128];
    int n_drawn = 0;
    char plots_dir[1200], md[1200];
    snprintf(plots_dir, sizeof plots_dir, "%s/plots", dir);
    snprintf(md, sizeof md, "%s/REPORT.md", dir);
    if (plots) {
        if (hr_draw_plots(rs, &rep, gp, plots_dir, drawn, 64, &n_drawn) != 0) {
            /* the report still gets written, without plots; the exit status says it */
            fprintf(stderr, "ampbench-report: plots: %s\n", ab_error());
            rc = 1;
        }
        for (int i = 0; i < n_drawn && copy_to; i++) {
            char from[1400], to[1400];
            snprintf(from, sizeof from, "%s/%s", plots_dir, drawn[i]);
            snprintf(to, sizeof to, "%s/%s", copy_to, drawn[i]);
            if (hr_mkdir_p(copy_to) != 0 || copy_file(from, to) != 0) {
                fprintf(stderr, "ampbench-report: %s\n", ab_error());
                rc = 1;
                break;
            }
        }
    }
    if (hr_write_report(rs, &rep, md, "plots", drawn, n_drawn) != 0) {
        fprintf(stderr, "ampbench-report: %s\n", ab_error());
        rc = 2;
    } else {
        printf("report: %s (%d results, %d plots)\n", md, rs->n_runs, n_drawn);
    }
    hr_runset_free(rs);
    free(rs);
    hr_reported_free(&rep);
    return rc;
}
