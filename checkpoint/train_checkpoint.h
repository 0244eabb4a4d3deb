/* The checkpoint store (core/trainstate.h's ab_checkpoint_ops): one folder per checkpoint,
 * DIR/ckpt-<step, 9 digits>/, holding
 *   weights.safetensors  the fp32 master weights and buffers exactly as --save writes them
 *                        (PyTorch's names and layouts; --init-from reads it);
 *   state.safetensors    the optimizer's state ("optimizer.exp_avg.<name>", "optimizer.exp_avg_sq.
 *                        <name>", "optimizer.momentum_buffer.<name>"), the compute-type copy of the
 *                        weights ("compute.<name>", F16 or BF16), every other rank's buffers
 *                        ("rank<r>.<name>") and the last evaluation's predictions
 *                        ("record.test_pred" I32, "record.test_hit" U8);
 *   state.json           what must match the resuming run (keys), the position, each rank's
 *                        counters, the loss scaler, the epoch's tally, the record so far, and each
 *                        tensor file's size and CRC-32.
 * A checkpoint is written into a temporary folder, each file fsynced, then renamed into place, so
 * that a crash leaves only whole checkpoints; the reader checks everything before it hands over a
 * value (docs/checkpoints.md). */
#ifndef AB_TRAIN_CHECKPOINT_H
#define AB_TRAIN_CHECKPOINT_H

#include <stddef.h>

#include "trainstate.h"

extern const ab_checkpoint_ops ab_checkpoint_store;

/* The parts of load that read bytes, for the fuzz target: state.json's text (n bytes) into s as
 * load would, the keys compared (named as `name` in errors). */
int ab_checkpoint_parse_state(const char *text, size_t n, const char *name, ab_train_state *s);

#endif
