/* The backend interface: a table of operations plus a context. The CPU backend
 * (kernels/cpu) is the reference every other backend is checked against. Pointers handed to
 * an op live in the backend's memory space (the host's when is_host, else the device's). The
 * core asks the table what a backend can do and never names one. Matrices are
 * row-major. Element types are explicit per operand; matrix products accumulate in fp32 and
 * round once to the output type, as tensor-core GEMMs with fp32 accumulation do. */
#ifndef AB_BACKEND_H
#define AB_BACKEND_H

#include <stddef.h>
#include <stdint.h>

#include "ab.h"
#include "mem.h"

typedef enum { AB_EPI_NONE = 0, AB_EPI_RELU = 1 } ab_epilogue;

typedef struct ab_backend ab_backend;

/* A 2-D convolution (cross-correlation, as every framework computes it), no bias, no groups or
 * dilation. Activations are channels-last: x (N, H, W, C), y (N, P, Q, K); filters are
 * (K, R, S, C) ("OHWI"), the layout cuDNN wants for NHWC tensor-core convolutions. The
 * checkpoint code permutes to and from PyTorch's (K, C, R, S). */
typedef struct {
    int N, H, W, C;    /* input */
    int K, R, S;       /* output channels, filter height and width */
    int stride_h, stride_w, pad_h, pad_w;
    int P, Q;          /* output height and width: (H + 2 pad_h - R) / stride_h + 1, ... */
} ab_conv_shape;

/* Fills P and Q from the rest; -1 (with ab_error) when a size is not positive or the filter
 * does not fit the padded input. */
int ab_conv_shape_init(ab_conv_shape *s);

/* A pooling window over channels-last x (N, H, W, C) -> y (N, P, Q, C). */
typedef struct {
    int N, H, W, C;
    int R, S, stride_h, stride_w, pad_h, pad_w;
    int P, Q;
} ab_pool_shape;
int ab_pool_shape_init(ab_pool_shape *s);

/* gemm_batched's arguments that every backend refuses alike: a size not positive (batch may be 0)
 * or a leading dimension shorter than the stored rows the products read (row-major: A is
 * (ta ? K x M : M x K), B (tb ? N x K : K x N), C M x N). -1 with ab_error, else 0. */
int ab_gemm_batched_args(int ta, int tb, int M, int N, int K, int lda, int ldb, int ldc, int batch);

/* How a data set stores one image, and how a batch of them is assembled: pixels are uint8;
 * planar = channel planes (C, H, W) as CIFAR-10 stores them, else interleaved (H, W, C) (with
 * C = 1 the two are the same). out[b, y, x, c] = (p / 255 - mean[c]) / std[c], where p is the
 * pixel of sample idx[b] after the crop and flip of aug (below); pixels of the zero padding read
 * as p = 0, as torchvision's RandomCrop(padding) pads the image before normalising. */
#define AB_MAX_CHANNELS 4
typedef struct {
    int C, H, W, planar;
    float mean[AB_MAX_CHANNELS], std[AB_MAX_CHANNELS];
} ab_image_layout;
/* Per-sample augmentation (host memory, 3 ints a sample): crop offsets dy, dx in [0, 2 pad]
 * into the image zero-padded by pad on every side, and flip (1 = mirror left-right after the
 * crop). aug NULL = no augmentation. */
typedef struct {
    int pad;
    const int32_t *aug; /* (B, 3): dy, dx, flip */
} ab_image_aug;

/* What a backend reports about itself (the describe op), for the record: what computes, with
 * which libraries, and for a device the driver's view of its memory (bytes). A host backend
 * fills is_host, name, blas and note and leaves the device fields 0. */
typedef struct {
    int is_host;                         /* as the backend's ops->is_host: name is the host CPU's */
    char name[160];                      /* "AMD EPYC 7B13" (/proc/cpuinfo's model name), "NVIDIA H200" */
    char blas[160], dnn[128];            /* "OpenBLAS 0.3.21 ..., single-threaded calls in a pool of 2 threads",
                                            "cuBLASLt 13.0.0"; "cuDNN 9.13.0" ("" when none) */
    char note[256];                      /* a set-up that costs speed, in one line (OpenBLAS on
                                            generic kernels), or "" */
    char driver[32], runtime[32];        /* CUDA driver and runtime versions, "13.0" */
    int cc_major, cc_minor;              /* compute capability */
    size_t mem_total;                    /* device memory, as the driver counts it */
    size_t mem_used_start;               /* in use (all processes) when the backend started */
    size_t mem_used_peak;                /* most seen in use at any sample (allocations, syncs) */
    size_t data_bytes;                   /* data sets resident on the device (map_data) */
    int graph_used;                      /* 1 if a CUDA graph replays the training step */
} ab_device_info;

/* the parameters of a compute op: the backend, then the op's own (backend_ops.def) */
#define AB_OP_PARAMS(...) (ab_backend * be, __VA_ARGS__)

/* The compute ops by number, in the order of backend_ops.def: AB_OP_gemm, ... AB_OP_COUNT. */
typedef enum {
#define AB_OP(name, params, args) AB_OP_##name,
#include "backend_ops.def"
    AB_OP_COUNT
} ab_op_id;
/* "gemm", ...; NULL outside [0, AB_OP_COUNT) */
const char *ab_op_name(int op);

typedef struct ab_backend_ops {
    const char *name; /* for people (the record's backend field); the core never compares it */
    /* 1: the backend's memory is the host's, so the host reads and writes its buffers directly
     * (upload and download are copies); 0: device memory, reached through upload and download */
    int is_host;
    void (*destroy)(ab_backend *be);

    /* memory: every allocation is charged to a category of be->mem */
    void *(*alloc)(ab_backend *be, ab_mem_category cat, size_t bytes);
    void (*release)(ab_backend *be, ab_mem_category cat, void *p, size_t bytes);
    int (*upload)(ab_backend *be, void *dst, const void *host_src, size_t bytes);
    int (*download)(ab_backend *be, void *host_dst, const void *src, size_t bytes);
    int (*zero)(ab_backend *be, void *p, size_t bytes);
    int (*sync)(ab_backend *be);
    /* Optional (NULL: none). The device stream every op runs on, in order (a cudaStream_t), or
     * NULL for a host backend: an engine that communicates on a stream of its own orders itself
     * after the work queued so far with an event on it, instead of a sync that would stop the
     * host from queueing the rest of backward (comm/comm_nccl.cu). */
    void *(*stream)(ab_backend *be);
    /* Makes a host data set readable by gather_normalize: the CPU backend uses the host bytes
     * as they are; a device backend copies them once to device memory. Not charged to the
     * training categories (a data set is not training memory); backends report it apart. */
    int (*map_data)(ab_backend *be, const void *host, size_t bytes, const void **mapped);
    void (*unmap_data)(ab_backend *be, const void *mapped, size_t bytes);

    /* the compute ops, from core/backend_ops.def (where each is described) */
#define AB_OP(name, params, args) int(*name) AB_OP_PARAMS params;
#include "backend_ops.def"

    /* fills info (above); 0 or -1 */
    int (*describe)(ab_backend *be, ab_device_info *info);
    /* Optional timing of batch assembly on the device's own clock (NULL: the caller times with
     * the host clock). data_mark(be, 1) / data_mark(be, 0) bracket one batch's gather; data_time
     * waits for the device, returns the seconds spent inside brackets since its previous call,
     * and starts a new count. */
    void (*data_mark)(ab_backend *be, int begin);
    int (*data_time)(ab_backend *be, double *seconds);
    /* Optional (NULL: nothing to do). The run's set-up steps (--timing-skip-steps) are over and
     * its timed part begins: a profiling backend starts its table again there (kernels/prof). */
    void (*timed_part_begins)(ab_backend *be);
} ab_backend_ops;

struct ab_backend {
    const ab_backend_ops *ops;
    ab_mem mem;
    void *impl; /* backend-private state */
};

/* op number op of table o as an untyped pointer (NULL: the table lacks it, or no such op): for
 * a check that a table is complete (test_backend_ops), never to call through */
const void *ab_backend_op(const struct ab_backend_ops *o, int op);

/* Tracked helpers over be->ops */
void *ab_alloc(ab_backend *be, ab_mem_category cat, size_t bytes);
/* ab_alloc, with what the memory is for said in an out-of-memory message ("the AdamW state of N
 * parameters"); the label holds for this allocation alone, whatever it returns */
void *ab_alloc_for(ab_backend *be, ab_mem_category cat, size_t bytes, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 4, 5)))
#endif
    ;
void ab_release(ab_backend *be, ab_mem_category cat, void *p, size_t bytes);

#endif
