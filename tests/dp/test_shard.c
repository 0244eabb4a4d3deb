/* The shards of one epoch (ab_shard_step over a seeded permutation): for every world size, batch
 * and accumulation tried, the ranks' shards are disjoint and together cover the data set exactly
 * once, no rank takes more than batch * accum samples a step, and the world's k-th micro-step
 * holds exactly the samples of one rank's k-th micro-batch of W*B (blocks of B dealt in turn). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rng.h"
#include "tolerances.h"
#include "train.h"

static int failures = 0;

static void check(int N, int W, int B, int K, uint64_t seed) {
    int32_t *perm = malloc((size_t)N * sizeof *perm), *out = malloc((size_t)B * K * sizeof *out);
    int *seen = calloc((size_t)N, sizeof *seen);
    ab_rng r;
    ab_rng_seed(&r, seed);
    ab_rng_permutation(&r, perm, (size_t)N);
    const int G = W * B * K;
    for (int pos = 0; pos < N; pos += G) {
        const int n = N - pos < G ? N - pos : G;
        int total = 0;
        for (int rank = 0; rank < W; rank++) {
            const int m = ab_shard_step(perm + pos, n, B, W, rank, out);
            AB_CHECK(m >= 0 && m <= B * K, "N %d W %d B %d K %d: rank %d takes %d samples a step", N, W, B, K, rank, m);
            total += m;
            for (int i = 0; i < m; i++) {
                AB_CHECK(out[i] >= 0 && out[i] < N, "sample index %d out of range", out[i]);
                if (out[i] >= 0 && out[i] < N) seen[out[i]]++;
                /* micro-batch k = i / B of this rank is block rank + k*W of the step */
                const int k = i / B, expect_pos = (rank + k * W) * B + i % B;
                AB_CHECK(expect_pos < n && out[i] == perm[pos + expect_pos],
                         "N %d W %d B %d K %d: rank %d sample %d is not block %d's", N, W, B, K, rank, i, rank + k * W);
            }
        }
        AB_CHECK(total == n, "N %d W %d B %d K %d: the ranks take %d of the step's %d samples", N, W, B, K, total, n);
    }
    for (int i = 0; i < N; i++)
        AB_CHECK(seen[i] == 1, "N %d W %d B %d K %d: sample %d taken %d times in the epoch", N, W, B, K, i, seen[i]);
    free(perm);
    free(out);
    free(seen);
}

int main(void) {
    const int Ns[] = {1, 7, 500, 1000, 60000}, Ws[] = {1, 2, 3, 4, 8}, Bs[] = {1, 16, 48, 64}, Ks[] = {1, 2, 3};
    for (size_t a = 0; a < sizeof Ns / sizeof *Ns; a++)
        for (size_t b = 0; b < sizeof Ws / sizeof *Ws; b++)
            for (size_t c = 0; c < sizeof Bs / sizeof *Bs; c++)
                for (size_t d = 0; d < sizeof Ks / sizeof *Ks; d++) {
                    const int before = failures;
                    check(Ns[a], Ws[b], Bs[c], Ks[d], 1000 + a * 7 + b);
                    if (failures > before) goto done;
                }
done:
    if (failures) fprintf(stderr, "test_shard: %d failure(s)\n", failures);
    else printf("test_shard: shards disjoint and covering for every case\n");
    return failures ? 1 : 0;
}
