/* test_backend_ops (ops_test.h): runs the reference pass, then the device pass on every device
 * backend present, prints one line per case and, at the end, every op's case counts; fails when
 * a check fails or an op of the table has no case in a pass that ran.
 *
 *   test_backend_ops              reference pass; device pass on CUDA where a device is usable
 *                                 (else it says why it skipped it)
 *   test_backend_ops --stand-in   the device pass with a second CPU backend standing in for the
 *                                 device: checks this program's device cases, not a device
 *   test_backend_ops --list       every op with its number of cases in each pass (counted by
 *                                 running them, the device pass stood in for); fails when one
 *                                 has none
 *   --require-device              exit 77 (skipped) at once when no device is usable: the GPU
 *                                 check's form
 *   --group ops|layers|transformer  only that group's cases (both passes; coverage not checked)
 *   --skip-op NAME                the cases of op NAME still run but are not counted (removing
 *                                 an op's cases, for the test that coverage is enforced)
 *   -q                            one line per failing case only */
#include <stdarg.h>

#include "backend_cuda.h"
#include "ops_test.h"

int failures = 0;
ab_backend *cpu = NULL, *gpu = NULL;
int self_check = 0;
ab_rng rng;

static int pass = PASS_REFERENCE;
static int quiet = 0, skip_op = -1;
static int counts[2][AB_OP_COUNT];
static struct {
    int open, op, failures_at_start;
    char what[240];
    char notes[1024]; /* op_note lines, printed under the case's line */
} cur;

static const char *pass_backend(void) {
    return pass == PASS_REFERENCE ? "cpu" : self_check ? "stand-in" : gpu->ops->name;
}

static void case_close(void) {
    if (!cur.open) return;
    cur.open = 0;
    const int bad = failures - cur.failures_at_start;
    if (bad)
        printf("FAIL %-9s %-24s %s (%d check(s) failed, above)\n", pass_backend(), ab_op_name(cur.op), cur.what, bad);
    else if (!quiet)
        printf("ok   %-9s %-24s %s\n", pass_backend(), ab_op_name(cur.op), cur.what);
    if (!quiet || bad) fputs(cur.notes, stdout);
    cur.notes[0] = 0;
    fflush(stdout);
}

void op_case(int op, const char *fmt, ...) {
    case_close();
    if (op < 0 || op >= AB_OP_COUNT) {
        fprintf(stderr, "FAIL op_case: no op number %d\n", op);
        failures++;
        return;
    }
    cur.open = 1, cur.op = op, cur.failures_at_start = failures;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(cur.what, sizeof cur.what, fmt, ap);
    va_end(ap);
    if (op != skip_op) counts[pass][op]++;
}

void op_case_label(char *what, size_t cap, int op, const char *fmt, ...) {
    const int k = snprintf(what, cap, "%s ", ab_op_name(op));
    const size_t at = k < 0 ? 0 : (size_t)k < cap ? (size_t)k : cap - 1;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what + at, cap - at, fmt, ap);
    va_end(ap);
    op_case(op, "%s", what + at);
}

void op_note(const char *fmt, ...) {
    char line[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    const size_t used = strlen(cur.notes);
    snprintf(cur.notes + used, sizeof cur.notes - used, "     %s\n", line);
}

/* every op of the table present in a backend's table */
static void check_table(const ab_backend *be) {
    for (int op = 0; op < AB_OP_COUNT; op++)
        if (!ab_backend_op(be->ops, op)) {
            fprintf(stderr, "FAIL the %s backend's table has no %s\n", be->ops->name, ab_op_name(op));
            failures++;
        }
}

/* each group starts from its own seed, so adding cases to one leaves the others' inputs alone */
static void run_group(void (*run)(void), uint64_t seed) {
    ab_rng_seed(&rng, seed);
    run();
    case_close();
}

static int coverage(int p, int print) {
    int missing = 0;
    for (int op = 0; op < AB_OP_COUNT; op++)
        if (counts[p][op] == 0) {
            if (print)
                fprintf(stderr, "FAIL %s has no case in the %s pass\n", ab_op_name(op),
                        p == PASS_REFERENCE ? "reference" : "device");
            missing++;
        }
    return missing;
}

static int usage(const char *arg) {
    fprintf(stderr,
            "test_backend_ops: unknown argument '%s' (use --stand-in, --list, --require-device, --group "
            "ops|layers|transformer, --skip-op NAME, -q)\n",
            arg);
    return 2;
}

/* the groups: one reference and one device part each, with the seeds their inputs come from */
static const struct {
    const char *name;
    void (*ref)(void), (*dev)(void);
    uint64_t ref_seed, dev_seed;
} groups[] = {
    {"ops", ref_ops_run, dev_ops_run, 20261205, 20261130},
    {"layers", ref_layers_run, dev_layers_run, 20261201, 20261207},
    {"transformer", ref_transformer_run, dev_transformer_run, 20261202, 20261208},
};
enum { N_GROUPS = sizeof groups / sizeof groups[0] };

int main(int argc, char **argv) {
    int list = 0, stand_in = 0, require_device = 0, group = -1;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--list") == 0)
            list = 1;
        else if (strcmp(argv[i], "--stand-in") == 0)
            stand_in = 1;
        else if (strcmp(argv[i], "-q") == 0)
            quiet = 1;
        else if (strcmp(argv[i], "--require-device") == 0)
            require_device = 1;
        else if (strcmp(argv[i], "--group") == 0 && i + 1 < argc) {
            const char *name = argv[++i];
            for (int g = 0; g < N_GROUPS; g++)
                if (strcmp(groups[g].name, name) == 0) group = g;
            if (group < 0) {
                fprintf(stderr, "test_backend_ops: --group: no group '%s' (ops, layers, transformer)\n", name);
                return 2;
            }
        } else if (strcmp(argv[i], "--skip-op") == 0 && i + 1 < argc) {
            const char *name = argv[++i];
            for (int op = 0; op < AB_OP_COUNT; op++)
                if (strcmp(ab_op_name(op), name) == 0) skip_op = op;
            if (skip_op < 0) {
                fprintf(stderr, "test_backend_ops: --skip-op: no op named '%s' in the table\n", name);
                return 2;
            }
        } else
            return usage(argv[i]);
    }
    if (list) stand_in = 1, quiet = 1;
    const char *why = NULL;
    const int have_device = !stand_in && ab_cuda_device_count(&why) > 0;
    if (require_device && !stand_in && !have_device) {
        printf("SKIPPED: %s\n", why);
        return 77;
    }

    cpu = ab_backend_cpu_create(0);
    if (!cpu) die("creating the CPU backend");
    check_table(cpu);

    /* the reference pass: the CPU backend against double-precision references */
    pass = PASS_REFERENCE;
    for (int g = 0; g < N_GROUPS; g++)
        if (group < 0 || group == g) run_group(groups[g].ref, groups[g].ref_seed);

    /* the device pass */
    int ran_device = 0;
    if (!stand_in && !have_device) {
        printf("SKIPPED   device pass: %s (--stand-in checks its cases with a CPU backend standing in)\n", why);
    } else {
        self_check = stand_in;
        gpu = stand_in ? ab_backend_cpu_create(0) : ab_backend_cuda_create(0);
        if (!gpu) die(stand_in ? "creating the stand-in CPU backend" : "creating the CUDA backend");
        if (stand_in && !list) printf("SELF-CHECK: a second CPU backend stands in for the device (--stand-in)\n");
        check_table(gpu);
        pass = PASS_DEVICE;
        for (int g = 0; g < N_GROUPS; g++)
            if (group < 0 || group == g) run_group(groups[g].dev, groups[g].dev_seed);
        AB_CHECK(gpu->ops->sync(gpu) == 0, "final sync: %s", ab_error());
        gpu->ops->destroy(gpu);
        gpu = NULL;
        ran_device = 1;
    }
    cpu->ops->destroy(cpu);

    int total[2] = {0, 0};
    if (list) printf("%-24s %9s %9s\n", "op", "reference", "device");
    for (int op = 0; op < AB_OP_COUNT; op++) {
        total[0] += counts[0][op], total[1] += counts[1][op];
        if (list) printf("%-24s %9d %9d\n", ab_op_name(op), counts[0][op], counts[1][op]);
    }
    const int missing = group >= 0 ? 0 : coverage(PASS_REFERENCE, 1) + (ran_device ? coverage(PASS_DEVICE, 1) : 0);
    printf("test_backend_ops: %d ops, %d reference cases, %d device cases%s: %s\n", AB_OP_COUNT, total[0], total[1],
           ran_device ? (self_check ? " (stand-in)" : "") : " (device pass skipped)",
           failures || missing ? "FAILED" : "all passed");
    if (failures) fprintf(stderr, "test_backend_ops: %d check(s) failed\n", failures);
    if (missing) fprintf(stderr, "test_backend_ops: %d op(s) without cases\n", missing);
    return failures || missing ? 1 : 0;
}
