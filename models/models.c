/* Model registry: name -> constructor. */
#include <string.h>

#include "model.h"

int ab_model_create(const char *name, const ab_model_config *cfg, ab_model **out) {
    *out = NULL;
    if (strcmp(name, "mlp") == 0) return ab_mlp_create(cfg, out);
    return ab_errorf("unknown model '%s' (available: mlp)", name);
}
