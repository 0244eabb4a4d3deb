/* Private to kernels/cpu: the CPU backend's ops, declared from the op list. backend_cpu.c,
 * layers_cpu.c and transformer_cpu.c all stand on the runtime of runtime_cpu.h. */
#ifndef AB_CPU_INTERNAL_H
#define AB_CPU_INTERNAL_H

#include "backend.h"
#include "runtime_cpu.h"

/* Every compute op of core/backend_ops.def, as ab_cpu_<op>: backend_cpu.c (GEMM, element-wise,
 * loss, optimizer, gathers, census), layers_cpu.c (convolutional layers, image assembly),
 * transformer_cpu.c (the transformer ops); backend_cpu.c's table is built from this list. */
#define AB_OP(name, params, args) int ab_cpu_##name AB_OP_PARAMS params;
#include "backend_ops.def"

#endif
