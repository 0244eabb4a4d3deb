/* ampbench model-step (model_step.c) */
#ifndef AB_MODEL_STEP_H
#define AB_MODEL_STEP_H

/* argv[1] is "model-step"; prints the modelled steps; 0, or 2 with one line on stderr */
int ab_model_step_main(int argc, char **argv);

#include "train.h"

/* the modelled step of c (its model, batch, micro-batches, precision, optimizer and clipping) for
 * samples s on gpu, fp32 products as m says */
int ab_model_step_estimate(const ab_train_config *c, const ab_sample_info *s, const char *gpu, ab_fp32_math m,
                           ab_step_model_result *out);
/* ab_train_config.step_model for ampbench's runs: the modelled step of c (its model, batch, micro-
 * batches, precision, optimizer and clipping; fp32 as IEEE products) for samples s on gpu */
int ab_model_step_hook(const ab_train_config *c, const ab_sample_info *s, const char *gpu, ab_step_model_result *out);

#endif
