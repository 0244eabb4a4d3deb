/* libFuzzer target for the checkpoint reader's state (checkpoint/train_checkpoint.c): the input is
 * a state.json, parsed as --resume parses it for a run of fixed keys (a 2-rank run of 3 epochs,
 * a gradient census on), with every tensor file check left to fuzz_safetensors. An accepted state
 * is checked for what the trainer relies on before its own consistency checks: a position inside
 * the run, the epochs listed that the position needs, counts that are not negative, a loss
 * scaler with a history; a refused one leaves a one-line error naming the file. What an input
 * allocates is freed after it (LeakSanitizer). */
#include "fuzz_file.h"

#include <math.h>

#include "ab.h"
#include "census.h"
#include "train.h"
#include "train_checkpoint.h"

#define EPOCHS 3
#define WORLD 2

static const char *const keys[][2] = {{"model", "fuzz"}, {"world_size", "2"}, {"epochs", "3"}};

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    static const char name[] = "fuzz/state.json";
    (void)fuzz_file_open, (void)fuzz_file_set; /* the input is parsed from memory: no file here */
    ab_run_record rec = {0};
    ab_epoch_record epochs[EPOCHS] = {{0}};
    int64_t passes[WORLD], bt[WORLD], peaks[WORLD];
    rec.epochs = epochs;
    rec.peak_memory_per_rank = peaks;
    FUZZ_CHECK(ab_census_create(10, &rec.census) == 0);
    ab_train_state s = {.world = WORLD, .passes = passes, .batches_tracked = bt, .rec = &rec};
    for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++) {
        snprintf(s.keys[i].key, sizeof s.keys[i].key, "%s", keys[i][0]);
        snprintf(s.keys[i].value, sizeof s.keys[i].value, "%s", keys[i][1]);
        s.n_keys++;
    }
    const int rc = ab_checkpoint_parse_state((const char *)data, size, name, &s);
    if (rc != 0) {
        FUZZ_CHECK(strstr(ab_error(), name) != NULL || strstr(ab_error(), "out of host memory") != NULL);
        FUZZ_CHECK(strchr(ab_error(), '\n') == NULL);
    } else {
        FUZZ_CHECK(s.epoch >= 1 && s.epoch <= EPOCHS + 1 && s.step >= 0 && s.epoch_step >= 0);
        FUZZ_CHECK(s.epoch_step == 0 || s.epoch <= EPOCHS);
        FUZZ_CHECK(rec.n_epochs >= 0 && rec.n_epochs <= EPOCHS);
        for (int r = 0; r < WORLD; r++) FUZZ_CHECK(passes[r] >= 0 && bt[r] >= 0 && peaks[r] >= 0);
        FUZZ_CHECK(s.scaler.n_changes >= 1 && s.scaler.scale > 0.0f && isfinite(s.scaler.scale));
        FUZZ_CHECK(rec.n_curve <= rec.cap_curve || rec.n_curve == 0);
        for (size_t i = 0; i < rec.census->n_records; i++)
            for (size_t k = 0; k < rec.census->records[i].n_tensors; k++)
                FUZZ_CHECK(rec.census->records[i].tensors[k].name != NULL);
    }
    ab_scaler_free(&s.scaler);
    ab_census_free(rec.census);
    free(rec.curve);
    free(rec.resumed_at);
    free(rec.test_pred);
    free(rec.test_hit);
    return 0;
}
