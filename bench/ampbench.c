/* ampbench: trains a workload in a chosen precision and writes one JSON result (train), or
 * times repeated runs and prints medians (bench). */
#include <errno.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "comm.h"
#include "train.h"
#include "version.h"

static const char usage[] =
    "usage: ampbench train [options]     train one workload, write one JSON result\n"
    "       ampbench bench [options]     repeat training runs and print median epoch time and samples/s\n"
    "       ampbench --help | --version\n"
    "       mpirun -np N ampbench train|bench [options]   data parallel: N ranks, rank 0 prints and writes\n"
    "\n"
    "options:\n"
    "  --model NAME            mlp (784-256-10, ReLU)                              [mlp]\n"
    "  --dataset NAME          mnist | fashion-mnist                               [mnist]\n"
    "  --data DIR              folder with the IDX files (.gz or raw)\n"
    "                          [mnist: " AB_DEFAULT_DATA_ROOT "/mnist, fashion-mnist: /usr/share/datasets/fashion-mnist]\n"
    "  --precision P           fp32 | amp (fp16 autocast + loss scaling) | bf16   [fp32]\n"
    "  --device D              cpu | cuda | auto                                   [cpu]\n"
    "  --epochs N              [1]\n"
    "  --batch-size B          per micro-batch                                     [64]\n"
    "  --accum-steps K         micro-batches per optimizer step                    [1]\n"
    "  --max-steps N           stop after N optimizer steps in all (0 = no limit)  [0]\n"
    "  --optimizer O           sgd | adamw                                         [sgd]\n"
    "  --lr LR                 [0.01]\n"
    "  --momentum M            SGD momentum                                        [0]\n"
    "  --weight-decay WD       [0]\n"
    "  --hidden H              MLP hidden width                                    [256]\n"
    "  --seed S                initialisation and shuffling                        [1]\n"
    "  --no-shuffle            keep the data set's order\n"
    "  --init-scale S          loss scale at start (amp)                           [65536]\n"
    "  --growth-factor F       [2]\n"
    "  --backoff-factor F      [0.5]\n"
    "  --growth-interval N     clean steps before the scale grows                  [2000]\n"
    "  --log-interval N        print and record the loss every N steps             [100]\n"
    "  --threads N             CPU BLAS threads (0 = OpenBLAS default)             [0]\n"
    "  --out FILE.json         result record (written atomically after each epoch)\n"
    "  --quiet                 no progress lines\n"
    "  --repeats N             bench: number of runs                               [5]\n"
    "data parallel (docs/data-parallel.md):\n"
    "  --comm C                auto | self | mpi | nccl; auto = nccl under mpirun with --device cuda,\n"
    "                          mpi under mpirun, else self (world size 1)          [auto]\n"
    "  --allreduce-dtype T     fp32 | fp16 (fp16 needs --precision amp)            [fp32]\n"
    "  --comm-timeout S        a collective unfinished after S seconds fails the run [300]\n"
    "  --inject-inf-step N     fault injection: +inf in one gradient at step N     [-1 = never]\n"
    "  --inject-inf-rank R     ... on rank R only                                  [-1 = every rank]\n"
    "  --proj-gpu-bw B/S       projection: GPU ring bus bandwidth       [2.4e10, or the measured NCCL one]\n"
    "  --proj-gpu-latency S    projection: GPU all-reduce latency per step         [2e-05]\n"
    "  --proj-node-bw B/S      projection: per-node network bandwidth (100 Gb/s)   [1.25e10]\n"
    "  --proj-node-latency S   projection: node all-reduce latency per step        [5e-05]\n";

static int parse_long(const char *flag, const char *v, long lo, long hi, long *out) {
    char *end;
    errno = 0;
    const long x = strtol(v, &end, 10);
    if (errno || *end || end == v || x < lo || x > hi)
        return ab_errorf("%s: '%s' is not an integer in [%ld, %ld]", flag, v, lo, hi);
    *out = x;
    return 0;
}

static int parse_float(const char *flag, const char *v, float *out) {
    char *end;
    errno = 0;
    const double x = strtod(v, &end);
    if (errno || *end || end == v || !isfinite(x)) return ab_errorf("%s: '%s' is not a finite number", flag, v);
    *out = (float)x;
    return 0;
}

static int parse_args(int argc, char **argv, ab_train_config *c, int *repeats) {
    for (int i = 0; i < argc; i++) {
        const char *f = argv[i];
        long l;
        if (strcmp(f, "--no-shuffle") == 0) {
            c->shuffle = 0;
            continue;
        }
        if (strcmp(f, "--quiet") == 0) {
            c->quiet = 1;
            continue;
        }
        if (strncmp(f, "--", 2) != 0) return ab_errorf("unexpected argument '%s' (see ampbench --help)", f);
        if (i + 1 >= argc) return ab_errorf("%s needs a value", f);
        const char *v = argv[++i];
        if (strcmp(f, "--model") == 0) c->model = v;
        else if (strcmp(f, "--dataset") == 0) c->dataset = v;
        else if (strcmp(f, "--data") == 0) c->data_dir = v;
        else if (strcmp(f, "--out") == 0) c->out_path = v;
        else if (strcmp(f, "--device") == 0) c->device = v;
        else if (strcmp(f, "--precision") == 0) AB_TRY(ab_precision_parse(v, &c->precision));
        else if (strcmp(f, "--optimizer") == 0) AB_TRY(ab_optimizer_parse(v, &c->optimizer));
        else if (strcmp(f, "--epochs") == 0) { AB_TRY(parse_long(f, v, 1, 100000, &l)); c->epochs = (int)l; }
        else if (strcmp(f, "--batch-size") == 0) { AB_TRY(parse_long(f, v, 1, 1 << 20, &l)); c->batch_size = (int)l; }
        else if (strcmp(f, "--accum-steps") == 0) { AB_TRY(parse_long(f, v, 1, 1 << 16, &l)); c->accum_steps = (int)l; }
        else if (strcmp(f, "--max-steps") == 0) { AB_TRY(parse_long(f, v, 0, 1L << 40, &l)); c->max_steps = l; }
        else if (strcmp(f, "--hidden") == 0) { AB_TRY(parse_long(f, v, 1, 1 << 16, &l)); c->hidden = (int)l; }
        else if (strcmp(f, "--seed") == 0) { AB_TRY(parse_long(f, v, 0, 1L << 62, &l)); c->seed = (uint64_t)l; }
        else if (strcmp(f, "--growth-interval") == 0) { AB_TRY(parse_long(f, v, 1, 1L << 30, &l)); c->growth_interval = (int)l; }
        else if (strcmp(f, "--log-interval") == 0) { AB_TRY(parse_long(f, v, 1, 1L << 30, &l)); c->log_interval = (int)l; }
        else if (strcmp(f, "--threads") == 0) { AB_TRY(parse_long(f, v, 0, 1024, &l)); c->threads = (int)l; }
        else if (strcmp(f, "--repeats") == 0) { AB_TRY(parse_long(f, v, 1, 1000, &l)); *repeats = (int)l; }
        else if (strcmp(f, "--lr") == 0) AB_TRY(parse_float(f, v, &c->lr));
        else if (strcmp(f, "--momentum") == 0) AB_TRY(parse_float(f, v, &c->momentum));
        else if (strcmp(f, "--weight-decay") == 0) AB_TRY(parse_float(f, v, &c->weight_decay));
        else if (strcmp(f, "--init-scale") == 0) AB_TRY(parse_float(f, v, &c->init_scale));
        else if (strcmp(f, "--growth-factor") == 0) AB_TRY(parse_float(f, v, &c->growth_factor));
        else if (strcmp(f, "--backoff-factor") == 0) AB_TRY(parse_float(f, v, &c->backoff_factor));
        else if (strcmp(f, "--comm") == 0) { ab_comm_kind k; AB_TRY(ab_comm_parse(v, &k)); c->comm = v; }
        else if (strcmp(f, "--allreduce-dtype") == 0) {
            if (strcmp(v, "fp32") == 0) c->allreduce_dtype = AB_F32;
            else if (strcmp(v, "fp16") == 0) c->allreduce_dtype = AB_F16;
            else return ab_errorf("--allreduce-dtype: '%s' is not fp32 or fp16", v);
        }
        else if (strcmp(f, "--inject-inf-step") == 0) { AB_TRY(parse_long(f, v, -1, 1L << 40, &l)); c->inject_inf_step = l; }
        else if (strcmp(f, "--inject-inf-rank") == 0) { AB_TRY(parse_long(f, v, -1, 1 << 20, &l)); c->inject_inf_rank = (int)l; }
        else if (strcmp(f, "--comm-timeout") == 0 || strncmp(f, "--proj-", 7) == 0) {
            float x;
            AB_TRY(parse_float(f, v, &x));
            if (!(x > 0.0f)) return ab_errorf("%s: '%s' must be positive", f, v);
            if (strcmp(f, "--comm-timeout") == 0) c->comm_timeout_s = x;
            else if (strcmp(f, "--proj-gpu-bw") == 0) c->proj_gpu_bw = x;
            else if (strcmp(f, "--proj-gpu-latency") == 0) c->proj_gpu_latency = x;
            else if (strcmp(f, "--proj-node-bw") == 0) c->proj_node_bw = x;
            else if (strcmp(f, "--proj-node-latency") == 0) c->proj_node_latency = x;
            else return ab_errorf("unknown option '%s' (see ampbench --help)", f);
        }
        else return ab_errorf("unknown option '%s' (see ampbench --help)", f);
    }
    return 0;
}

/* The first INT/TERM asks the run to stop after the current step and keep its result. A repeat
 * more than a second later ends the process at once; one within that second is taken as the
 * same request delivered twice (a terminal's Ctrl-C reaches a launcher script and its child). */
static void on_signal(int sig) {
    static struct timespec first;
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    if (!ab_stop_requested) {
        ab_stop_requested = 1;
        first = now;
    } else if ((double)(now.tv_sec - first.tv_sec) + 1e-9 * (double)(now.tv_nsec - first.tv_nsec) > 1.0) {
        signal(sig, SIG_DFL);
        raise(sig);
    }
}

static int cmp_double(const void *a, const void *b) {
    const double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* sorts v; the middle value, or the mean of the two middle ones */
static double median(double *v, int n) {
    qsort(v, (size_t)n, sizeof(double), cmp_double);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

static int run_bench(ab_train_config *c, int repeats) {
    double *epoch_s = calloc((size_t)repeats, sizeof(double)), *sps = calloc((size_t)repeats, sizeof(double));
    if (!epoch_s || !sps) return ab_errorf("out of memory");
    c->quiet = 1;
    const int lead = ab_comm_launcher_rank() == 0;
    if (lead)
        printf("ampbench bench: model %s, %s, precision %s, device %s, batch %d, %d run(s) of %d epoch(s)\n", c->model,
           c->dataset, ab_precision_name(c->precision), c->device, c->batch_size, repeats, c->epochs);
    int rc = 0;
    for (int r = 0; r < repeats && rc == 0 && !ab_stop_requested; r++) {
        ab_run_record rec;
        rc = ab_train_run(c, &rec);
        if (rc == 0 && lead) {
            double t = 0.0, n = 0.0;
            for (int e = 0; e < rec.n_epochs; e++) {
                t += rec.epochs[e].time_s;
                n += (double)rec.epochs[e].samples;
            }
            epoch_s[r] = rec.n_epochs ? t / rec.n_epochs : NAN;
            sps[r] = n / t;
            printf("  run %d: %.3f s/epoch, %.0f samples/s, test accuracy %.2f%%, data %.3f s, peak memory %zu B\n",
                   r + 1, epoch_s[r], sps[r], rec.n_epochs ? rec.epochs[rec.n_epochs - 1].test_accuracy : NAN,
                   rec.n_epochs ? rec.epochs[rec.n_epochs - 1].data_time_s : NAN, rec.mem.peak_total);
            if (rec.world_size > 1 || c->accum_steps > 1)
                printf("         world %d (%s), all-reduce %.3f s in %ld calls, %.0f bytes, %.3g B/s, "
                       "all collectives %.3f s\n",
                       rec.world_size, rec.comm_engine, rec.allreduce_time_s, rec.allreduce_calls,
                       rec.bytes_allreduced, rec.allreduce_time_s > 0 ? rec.bytes_allreduced / rec.allreduce_time_s : 0.0,
                       rec.comm_time_s);
        }
        ab_run_record_free(&rec);
    }
    if (rc == 0 && lead) {
        const double med_epoch = median(epoch_s, repeats), med_sps = median(sps, repeats); /* sorts both */
        printf("median: %.3f s/epoch (min %.3f, max %.3f), %.0f samples/s\n", med_epoch, epoch_s[0],
               epoch_s[repeats - 1], med_sps);
        if (strcmp(c->device, "cpu") == 0) {
            const char *hint = ab_backend_cpu_blas_hint();
            printf("BLAS: %s\n", ab_backend_cpu_blas_info());
            if (hint) printf("note: %s\n", hint);
        }
    }
    free(epoch_s);
    free(sps);
    return rc;
}

int main(int argc, char **argv) {
    if (argc < 2 || strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0) {
        fputs(usage, argc < 2 ? stderr : stdout);
        return argc < 2 ? 2 : 0;
    }
    if (strcmp(argv[1], "--version") == 0) {
        printf("ampbench %s%s\n", ab_git_commit(), ab_git_dirty() ? " (modified)" : "");
        return 0;
    }
    const int is_train = strcmp(argv[1], "train") == 0, is_bench = strcmp(argv[1], "bench") == 0;
    if (!is_train && !is_bench) {
        fprintf(stderr, "ampbench: unknown command '%s' (expected train or bench; see --help)\n", argv[1]);
        return 2;
    }
    ab_train_config cfg;
    ab_train_config_defaults(&cfg);
    int repeats = 5;
    for (int i = 2; i < argc; i++)
        if (strcmp(argv[i], "--help") == 0) {
            fputs(usage, stdout);
            return 0;
        }
    if (parse_args(argc - 2, argv + 2, &cfg, &repeats) != 0) {
        fprintf(stderr, "ampbench: %s\n", ab_error());
        return 2;
    }
    signal(SIGINT, on_signal);
    signal(SIGTERM, on_signal);
    int rc;
    if (is_bench) {
        rc = run_bench(&cfg, repeats);
    } else {
        ab_run_record rec;
        rc = ab_train_run(&cfg, &rec);
        if (rc == 0 && cfg.out_path && !cfg.quiet && rec.rank == 0) printf("result: %s%s\n", cfg.out_path, rec.interrupted ? " (interrupted)" : "");
        if (rc == 0 && rec.interrupted) rc = 130;
        ab_run_record_free(&rec);
    }
    if (rc == -1) {
        int world = 1;
        if (ab_comm_launched(&world) && world > 1) {
            /* the other ranks may be waiting in a collective: end the whole job now */
            fprintf(stderr, "ampbench: rank %d: %s\n", ab_comm_launcher_rank(), ab_error());
            fflush(stderr);
            ab_mpi_abort(1);
        }
        fprintf(stderr, "ampbench: %s\n", ab_error());
        ab_mpi_finalize();
        return 1;
    }
    ab_mpi_finalize();
    return rc;
}
