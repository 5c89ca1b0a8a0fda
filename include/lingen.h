/* liblingen: lingen's image models from C. Open a model file (a Linear Transformer trained on
 * MNIST or CIFAR-10), read its configuration, sample images into your buffer, score your images
 * in bits per dimension, and complete images from their top rows. The `lingen` command is built
 * on these calls (its sample, eval, complete and info): given the same model, seed, batch and
 * precision, this library's images are the command's byte for byte.
 *
 * Build against it with pkg-config:   cc prog.c $(pkg-config --cflags --libs lingen)
 * (static: pkg-config --static --libs lingen, which adds OpenBLAS, cJSON, libm and pthreads).
 *
 * IMAGES. An image is height x width x channels bytes, 0..255, row by row, the channels of a
 * pixel side by side (gray for MNIST: 1 channel; RGB for CIFAR-10: 3): the order a PNG's rows
 * hold them, and the order the model reads them (lingen_seq_len values). n images lie one after
 * another: n * lingen_seq_len bytes.
 *
 * ERRORS. Every function that can fail returns a lingen_status: LINGEN_OK (0), or a code saying
 * what kind of failure, and fills the caller's lingen_error (when not NULL) with the code and a
 * one-line message naming the problem ("mnistt: no such model file, ...", "n = -1: must be 0 or
 * more"). No error is printed, and no bad input makes it exit() or abort. Outputs are written only
 * where the contract says (a failed call may have written part of an output buffer).
 *
 * THREADS. Every function may be called from any thread. The computing calls (lingen_open,
 * lingen_sample, lingen_bits_per_dim, lingen_complete) take one lock for the whole process: two
 * of them at once, on one model or on two, run one after the other. They must: lingen computes
 * on one set of worker threads per process, and each call sets their number (its threads)
 * before it starts. Each model keeps its own weights, precision, device and default threads;
 * two open models share nothing else. What the process shares, and each call leaves as it was:
 *   - the worker threads: started at the first call, sized at each call, kept (asleep) after
 *     the last model is closed, for the next call;
 *   - OpenBLAS's thread count: set to 1 during a call (lingen's threads call it from each of
 *     theirs), then put back to what it was (numpy's BLAS in the same process keeps its own);
 *   - the environment (lingen(1), ENVIRONMENT): LINGEN_MODELS, LINGEN_BF16 and LINGEN_INT8 read
 *     at each open (the model search; LINGEN_PRECISION_AUTO), LINGEN_AMX once, with the
 *     processor's features, at the first open; LINGEN_FORCE_THREADS at each call; LINGEN_PROFILE
 *     at the first (its report is printed at exit); LINGEN_CUDA_SGEMM, LINGEN_CUDA_TF32 at each
 *     call on a GPU.
 * The accessors (lingen_height, ...) take no lock: they read what lingen_open set. Close a
 * model only once no call on it is running, and use it no more afterwards. A progress callback
 * runs on the calling thread, inside the lock: it must not call lingen_open, lingen_sample,
 * lingen_bits_per_dim or lingen_complete (they return LINGEN_ERR_ARGUMENT there). After fork(),
 * the child may use the library if no call was running in the parent when it forked.
 *
 * MEMORY. Before a run allocates, its need is checked against the memory the process can get
 * (MemAvailable, cgroup and RLIMIT_AS limits): too much fails with LINGEN_ERR_MEMORY and a
 * message naming the largest batch that fits, not with the OOM killer later. The library owns
 * the model (lingen_close frees it) and every string an accessor returns (valid until close);
 * the caller owns every buffer it passes, and the library keeps no pointer to one after a call
 * returns. */
#ifndef LINGEN_H
#define LINGEN_H
#include <signal.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The version of lingen this header belongs to; lingen_version() gives the library's. The
 * shared library's soname, liblingen.so.LINGEN_ABI, changes whenever a function's signature or
 * a struct of this header changes (a new struct field included); other changes keep it. */
#define LINGEN_VERSION_MAJOR 1
#define LINGEN_VERSION_MINOR 0
#define LINGEN_VERSION_PATCH 0
#define LINGEN_VERSION "1.0.0"
#define LINGEN_ABI 0

typedef enum {
    LINGEN_OK = 0,
    LINGEN_ERR_ARGUMENT,   /* a bad argument: NULL where a pointer is needed, a count or option out of range */
    LINGEN_ERR_NOT_FOUND,  /* no model file of that name in the model directories, or no such path */
    LINGEN_ERR_MODEL,      /* the file is unreadable or not a valid lingen model */
    LINGEN_ERR_MEMORY,     /* the run does not fit in the memory available (a smaller batch may) */
    LINGEN_ERR_DEVICE,     /* the device cannot run it: CUDA not built in, no GPU answers */
    LINGEN_ERR_RUN,        /* the run failed: a GPU error, numbers that overflowed */
    LINGEN_STOPPED,        /* the options' stop flag was set: the images finished (bits/dim: their figures) are there */
} lingen_status;

/* A failure's code and message; filled by a call that fails, and on success set to LINGEN_OK and
 * "". The message of lingen_sample, lingen_bits_per_dim and lingen_complete starts with the
 * call's name and ": " ("sample: ", "bits_per_dim: ", "complete: "). Owned by the caller: one per
 * thread, or one per call. */
typedef struct lingen_error {
    lingen_status status;
    char message[512];
} lingen_error;

typedef enum { LINGEN_DEVICE_CPU = 0, LINGEN_DEVICE_CUDA = 1 } lingen_device;

/* The arithmetic of the sampling steps' products on the CPU (bits/dim is float32 always; a GPU
 * computes in float32 whatever this says). */
typedef enum {
    LINGEN_PRECISION_AUTO = 0,   /* the fastest this processor has, per batch (or what LINGEN_BF16 /
                                  * LINGEN_INT8 ask for); the `lingen` command's default */
    LINGEN_PRECISION_F32,        /* float32 */
    LINGEN_PRECISION_BF16,       /* bfloat16 where the processor has AVX512-BF16, else float32 */
    LINGEN_PRECISION_INT8,       /* 8-bit weights at every batch */
    LINGEN_PRECISION_FASTEST,    /* as AUTO, whatever LINGEN_BF16 and LINGEN_INT8 say (the `lingen`
                                  * command's --precision auto) */
} lingen_precision;

/* How a model is opened. All zeros (or NULL) is the default: the CPU, automatic precision,
 * every usable core. */
typedef struct lingen_open_options {
    lingen_device device;
    lingen_precision precision;
    int threads;   /* the default threads of this model's calls: 1..1024, or 0 for every core the
                    * process may run on; at most that many unless LINGEN_FORCE_THREADS=1 */
} lingen_open_options;

/* How a run goes. lingen_run_options_default() gives the defaults below; NULL options mean
 * them too. Start from it, so that a field you leave is its default. */
typedef struct lingen_run_options {
    uint64_t seed;        /* random seed (default 1): image k of a run draws from random stream k of it */
    int64_t first;        /* the buffer's image 0 is image `first` of the job (default 0): images
                           * first .. first + n - 1 of the seed's streams, as one run of the whole
                           * job would draw them; so jobs can be split */
    double temperature;   /* 0.01..100 (default 1: the model's distribution; 0 counts as 1): mixture
                           * logits / T, scales x T. A GPU draws at 1 only */
    int batch;            /* images at once (default 0: as the `lingen` command: sample 64 on the CPU,
                           * on a GPU as many as 8 GB of state hold up to 4096; bits/dim 16 (MNIST)
                           * or 4 (CIFAR-10), on a GPU up to 256; complete 16). The images do not
                           * depend on it, but the kernel picked may (int8 at small batches): equal
                           * bytes need equal batches and precision */
    int threads;          /* 1..1024, or 0 (default): the model's (lingen_open_options) */
    int step_form;        /* bits/dim only: 1 = one position at a time (teacher forcing), 0 (default) =
                           * the parallel form; the same figures to float32's rounding */
    /* Or NULL (default): called now and then during the run with the work done and the total,
     * in positions drawn for sampling and completion (n * values each), in images for bits/dim. */
    void (*progress)(void *user, double done, double total);
    void *progress_user;
    /* Or NULL (default): when *stop becomes nonzero (a signal handler or the progress callback
     * may set it), sampling and completion stop after the position in hand and return
     * LINGEN_STOPPED, with the images finished before it in the buffer; bits/dim stops after the
     * pass in hand (the step form: the position) and returns LINGEN_STOPPED, with the figures of
     * the images finished before it. */
    volatile sig_atomic_t *stop;
} lingen_run_options;

typedef struct lingen_model lingen_model;

/* The library's version, "1.0.0": LINGEN_VERSION of the header it was built with. */
const char *lingen_version(void);

/* A status's name as the enum spells it ("LINGEN_ERR_MEMORY"); "LINGEN_UNKNOWN" for another value. */
const char *lingen_status_name(lingen_status status);

/* The defaults of lingen_run_options (seed 1, every other field 0 or NULL). */
lingen_run_options lingen_run_options_default(void);

/* Open a model: name_or_path is a path when it holds a '/' or names an existing file; otherwise
 * a name looked up as NAME, then NAME.bin, in these directories in turn, as `lingen --model`:
 * each of $LINGEN_MODELS (':' between them), ./models, models/ and ../share/lingen/models from
 * the running executable, and the models directory `make install` filled. The file is read,
 * checked and loaded for options' device and precision (NULL: the defaults). On success *model
 * is the open model (close it with lingen_close); on failure *model is NULL and the status says
 * why: LINGEN_ERR_NOT_FOUND (the message lists the directories searched), LINGEN_ERR_MODEL (the
 * file and its problem), LINGEN_ERR_DEVICE, LINGEN_ERR_ARGUMENT. Takes the process's lock. */
lingen_status lingen_open(const char *name_or_path, const lingen_open_options *options, lingen_model **model,
                          lingen_error *err);

/* Free the model and everything it owns; NULL does nothing. No call on it may be running. */
void lingen_close(lingen_model *model);

/* The configuration of an open model (none of them fails on one). */
int lingen_height(const lingen_model *model);     /* image height in pixels (28, 32) */
int lingen_width(const lingen_model *model);      /* image width */
int lingen_channels(const lingen_model *model);   /* 1 (gray) or 3 (RGB) */
int lingen_seq_len(const lingen_model *model);    /* values per image: height * width * channels */
int lingen_layers(const lingen_model *model);     /* transformer layers */
int lingen_heads(const lingen_model *model);      /* attention heads per layer */
int lingen_d_model(const lingen_model *model);    /* the model's width d: heads x head size */
int lingen_d_ff(const lingen_model *model);       /* the feed-forward width */
int lingen_mixtures(const lingen_model *model);   /* logistics in each value's output mixture */
size_t lingen_parameters(const lingen_model *model);       /* trained parameters */
const char *lingen_attention(const lingen_model *model);   /* "linear" (sampled as an RNN) or "softmax" */
const char *lingen_dataset(const lingen_model *model);     /* "mnist" or "cifar10" */
const char *lingen_path(const lingen_model *model);        /* the file opened (the name resolved) */
lingen_device lingen_model_device(const lingen_model *model);
/* The file's metadata, all strings (e.g. "test_bits_per_dim", "epochs"): how many entries, the
 * key and value of entry i (0 .. count-1; NULL outside), and the value of a key (NULL if absent). */
int lingen_meta_count(const lingen_model *model);
const char *lingen_meta_key(const lingen_model *model, int i);
const char *lingen_meta_value(const lingen_model *model, int i);
const char *lingen_meta(const lingen_model *model, const char *key);

/* Draw n images (n >= 0) from the model into images [n][seq_len], one value at a time. Image k
 * of the buffer depends only on the seed, first + k, the temperature, and (through the kernel)
 * the batch and precision. *done (when not NULL) receives the number of images finished: n on
 * success, those before the stop with LINGEN_STOPPED, 0 on an error. Statuses: LINGEN_OK,
 * LINGEN_STOPPED, LINGEN_ERR_ARGUMENT (model or images NULL, n < 0, first < 0, a temperature
 * or batch or threads out of range), LINGEN_ERR_MEMORY, LINGEN_ERR_RUN. */
lingen_status lingen_sample(lingen_model *model, int n, const lingen_run_options *options, uint8_t *images,
                            int *done, lingen_error *err);

/* Bits per dimension of n images [n][seq_len] under the model, in float32 products: per_image[i]
 * receives -(sum of log2 p over all seq_len values of image i) / seq_len, the first value
 * predicted from the start token; and per_image_given[i] (when not NULL) the same sum without
 * the first value, over seq_len - 1 (the paper's convention). The mean of per_image over a
 * dataset's test split is what `lingen eval bits-per-dim` reports. Images finish a batch at a
 * time, in order: with LINGEN_STOPPED, images 0 .. k-1 have their figures (those of a run to the
 * end) and the entries of images k .. n-1 are NAN in both arrays; a finished image's per_image
 * is never NAN, so k is the first NAN's index. Statuses: LINGEN_OK, LINGEN_STOPPED,
 * LINGEN_ERR_ARGUMENT, LINGEN_ERR_MEMORY, LINGEN_ERR_RUN (a log-probability not finite). */
lingen_status lingen_bits_per_dim(lingen_model *model, const uint8_t *images, int n, double *per_image,
                                  double *per_image_given, const lingen_run_options *options, lingen_error *err);

/* Which call lingen_batch asks about. */
typedef enum { LINGEN_TASK_SAMPLE, LINGEN_TASK_BITS_PER_DIM, LINGEN_TASK_COMPLETE } lingen_task;

/* The batch a call of task over n images (complete: n inputs x samples completions) with these
 * options (NULL: the defaults) runs at: options' batch if set, else the default that
 * lingen_run_options describes; never more than n, and at least 1. For a caller that reports it
 * or plans memory by it. 0 for a NULL model. */
int lingen_batch(const lingen_model *model, lingen_task task, int n, const lingen_run_options *options);

/* The kernel of the layers' products in a call of task over n images with these options (NULL:
 * the defaults), at the batch lingen_batch gives: "float32", "bfloat16", "AMX-BF16" (bfloat16 on
 * AMX tiles) or "int8" (8-bit weights) for the steps of sampling and completion; "float32" or
 * "AMX" (float32 on AMX tiles) for bits/dim. On a GPU "float32". NULL for a NULL model. */
const char *lingen_kernel(const lingen_model *model, lingen_task task, int n, const lingen_run_options *options);

/* Memory, in bytes, for a caller that checks its run, its own buffers too, against the memory
 * available (each call checks its own need: MEMORY above): the model's weights as loaded, every
 * copy its kernels use included; and what a call of task holds beside them while it runs `batch`
 * images at once (keep: completion's kept values, else 0; options: NULL or the call's, for its
 * step_form): the attention memory (RNN state, or KV cache at full length) and the activations.
 * Batch 0 gives the part that does not grow with the batch. 0 for a NULL model or a batch below 0. */
size_t lingen_weight_bytes(const lingen_model *model);
size_t lingen_run_bytes(const lingen_model *model, lingen_task task, int batch, int keep,
                        const lingen_run_options *options);

/* Complete n inputs [n][seq_len] `samples` times each (samples >= 1, n * samples <= INT_MAX):
 * completion k of input i, out[i * samples + k] of out [n * samples][seq_len], keeps the input's
 * first `keep` values (0 .. seq_len - 1; the top R rows: R * width * channels) and draws the rest
 * from random stream i * samples + k of the seed (options' first is not used). The kept values
 * go through the parallel form once, then the model carries on one value at a time. *done, the
 * statuses: as lingen_sample's, counting completions. */
lingen_status lingen_complete(lingen_model *model, const uint8_t *inputs, int n, int keep, int samples,
                              const lingen_run_options *options, uint8_t *out, int *done, lingen_error *err);

#ifdef __cplusplus
}
#endif
#endif
