/* The floor of a GPU/CPU training comparison: how far the CPU's own training moves when its
 * weights start one rounding apart. A third trainer, on the CPU, starts from the same weights
 * with a random share of them moved by about one unit in the last place of the compute type:
 * every other weight by one fp32 ulp under fp32; under fp16 and bf16 a share 2^-23 / ulp (2^-13,
 * 2^-16; 16 weights at least) by one ulp of the type. That is how often, and by how much, one
 * operation's result rounds differently when the same sum is added up in another order (the
 * GPU's case: each product and sum is the CPU's, in another order). A deep network can magnify
 * that a hundred-thousandfold: ResNet-50 at torchvision's initialisation, batch 8, moves its first
 * update by NMSE 1e-4 to 2e-4 in fp32 and 0.2 to 1 in fp16 and bf16 from such a change on the CPU
 * alone (PyTorch's ResNet-50 the same: 1.7e-4 in fp32 from one ulp on every other weight), and
 * no tolerance below that can be met by another correct implementation. So a tolerance is the
 * larger of tests/tolerances.h's and AB_FLOOR_K times the floor, and the tests print both.
 * (test_cuda_step, test_cuda_train) */
#ifndef AB_TEST_FLOOR_H
#define AB_TEST_FLOOR_H

#include <math.h>
#include <stdint.h>

#include "params.h"
#include "train.h"

#define AB_FLOOR_K 10.0

/* moves the CPU trainer t's weights as above (its backend keeps them in host memory) and
 * refreshes its compute copy; *moved = how many weights moved. 0, or -1 with ab_error(). */
static inline int ab_floor_perturb(ab_trainer *t, size_t *moved) {
    ab_params *p = (ab_params *)ab_trainer_params(t);
    const float ulp = p->compute_type == AB_F32 ? 0x1p-23f : p->compute_type == AB_F16 ? 0x1p-10f : 0x1p-7f;
    const double share = p->compute_type == AB_F32 ? 0.5 : fmax(0x1p-23 / ulp, 16.0 / (double)p->n);
    uint64_t st = 0x9e3779b97f4a7c15ull;
    *moved = 0;
    for (size_t i = 0; i < p->n; i++) {
        st = st * 6364136223846793005ull + 1442695040888963407ull; /* a fixed LCG draw per weight */
        if ((double)(st >> 11) * 0x1p-53 < share) p->master[i] *= 1.0f + ulp, (*moved)++;
    }
    return ab_params_refresh(p);
}

#endif
