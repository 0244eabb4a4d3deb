/* Common definitions for the ampbench core: status convention, element types, host/device
 * qualifier for math shared between the CPU backend and CUDA kernels. */
#ifndef AB_AB_H
#define AB_AB_H

#include <stddef.h>
#include <stdint.h>

#ifdef __CUDACC__
#define AB_HD __host__ __device__
#else
#define AB_HD
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* Library functions return 0 on success and -1 on failure after recording a one-line message
 * with ab_errorf(); only main() decides to exit. */
int ab_errorf(const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 1, 2)))
#endif
    ;
const char *ab_error(void);
void ab_error_clear(void);
/* ab_errorf for a refusal of what the options ask (a model that cannot split as asked): the
 * message, and ab_error_is_usage() says 1 until the next ab_errorf, so that the program can exit
 * as it does for a bad option (2) rather than as for a failure */
int ab_usage_errorf(const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 1, 2)))
#endif
    ;
int ab_error_is_usage(void);

#define AB_TRY(expr)                                                                                \
    do {                                                                                            \
        if ((expr) != 0) return -1;                                                                 \
    } while (0)

typedef enum { AB_F32 = 0, AB_F16 = 1, AB_BF16 = 2, AB_DTYPE_COUNT } ab_dtype;

size_t ab_dtype_size(ab_dtype t);
const char *ab_dtype_name(ab_dtype t);

/* Run-time precision policy. AMP = fp16 compute copies, fp32 master weights, loss scaling. */
typedef enum { AB_PREC_FP32 = 0, AB_PREC_AMP = 1, AB_PREC_BF16 = 2, AB_PREC_COUNT } ab_precision;

const char *ab_precision_name(ab_precision p);
int ab_precision_parse(const char *s, ab_precision *out);
/* element type the matrix products read and activations are stored in */
ab_dtype ab_precision_compute_dtype(ab_precision p);

#ifdef __cplusplus
}
#endif
#endif
