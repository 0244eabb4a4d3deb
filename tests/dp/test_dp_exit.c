/* A rank that goes away, for tests/dp/test_dp_fail.sh (run under mpirun -np 2). Both ranks train a
 * few data-parallel steps; then, by mode:
 *   exit N  rank 1 leaves with exit code N without MPI_Finalize while rank 0 keeps training;
 *   hang    rank 1 stops calling collectives but stays alive; rank 0's collective times out
 *           after --comm-timeout-like 3 s, it reports and aborts the job (as ampbench does).
 * The job must end with a non-zero status within bounded time; the script checks. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "comm_engines.h"
#include "dp_util.h"

int main(int argc, char **argv) {
    if (argc < 2 || (strcmp(argv[1], "exit") != 0 && strcmp(argv[1], "hang") != 0)) {
        fprintf(stderr, "usage: test_dp_exit exit CODE | hang\n");
        return 2;
    }
    const int code = argc > 2 ? atoi(argv[2]) : 3;
    char dir[256];
    snprintf(dir, sizeof dir, "/tmp/ab_test_dp_exit.%ld", (long)getpid());
    if (mkdir(dir, 0700) != 0 || dp_write_dataset(dir, 256, 16, 8, 8, 5) != 0) {
        fprintf(stderr, "cannot write a data set under %s\n", dir);
        return 2;
    }
    ab_train_config c = dp_config(dir, AB_PREC_FP32, 16, 16, "mpi");
    c.comm_timeout_s = 3.0;
    ab_run_record rec;
    ab_trainer *t;
    if (ab_trainer_create(&c, &rec, &t) != 0) {
        fprintf(stderr, "test_dp_exit: %s\n", ab_error());
        ab_mpi_abort(2);
        return 2;
    }
    dp_remove_dataset(dir); /* loaded: the files are not needed any more, and this run ends abruptly */
    const int rank = ab_trainer_comm(t)->rank, N = ab_trainer_train_samples(t);
    int32_t *order = malloc((size_t)N * sizeof *order);
    for (int i = 0; i < N; i++) order[i] = i;
    int rc = 0;
    for (long s = 0; rc == 0; s = (s + 1) % 8) { /* rank 0 trains until something stops it */
        if (rank == 1 && s == 3) {
            fprintf(stderr, "test_dp_exit: rank 1 %s now\n", argv[1]);
            fflush(stderr);
            if (strcmp(argv[1], "exit") == 0) exit(code); /* no MPI_Finalize, on purpose */
            sleep(600);
        }
        ab_step_result r;
        rc = ab_trainer_step(t, order + s * 32, 32, s, 1, &r);
    }
    fprintf(stderr, "test_dp_exit: rank %d: %s\n", rank, ab_error());
    fflush(stderr);
    ab_mpi_abort(1); /* what ampbench's main does when a step fails */
    return 1;
}
