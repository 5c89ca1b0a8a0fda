/* --device: where the model runs, the CPU (always) or an NVIDIA GPU (builds with `make CUDA=1`).
 * A command holds its choice and hands it to what it runs (engine.h); nothing is process-wide
 * but the GPU this process takes. */
#ifndef LINGEN_DEVICE_H
#define LINGEN_DEVICE_H
#include "engine.h"
#include "model.h"
#include "io/util.h"

/* "cpu" | "cuda" -> *d; otherwise prints "lingen <cmd>: ..." and returns 2 (usage). A CUDA
 * device in a build without CUDA prints "built without CUDA" and returns 1. */
int device_parse(const char *name, const char *cmd, Device *d);
/* --device NAME of command cmd, parsed into *d; with probe and a GPU, also checked now that it
 * answers, and this rank's GPU taken (shard.h: its local rank; not before fork()ing children that
 * use it). Returns 0, or the exit code after printing the problem: 2 for a bad name, 1 for no
 * CUDA (in the build or on the machine). */
int device_option(const char *name, const char *cmd, int probe, Device *d);
/* Load a model for device d: for the CPU on plan_default(); for the GPU with its
 * weights in the file's layout too (the GPU engine takes those) and no copy for a CPU kernel
 * (the CPU computes only the canary's reference, in float32). */
int device_model_load(Model *m, Device d, const char *path, Err *e);
/* A GPU's default batch: as many images as GPU_BATCH_BYTES (8 GB) hold at bytes_per_image, within
 * [lo, hi]: a GPU pass or step takes little longer for thousands of images than for a few. */
#define GPU_BATCH_BYTES 8e9
long device_batch_fit(double bytes_per_image, long lo, long hi);
/* What a run does, for its default batch. */
typedef enum { RUN_SAMPLE, RUN_COMPLETE, RUN_BITS_PER_DIM } RunKind;
/* The default batch of a run of kind k of a model of config c on device d, decided here for the
 * commands and the library alike (T: the positions a bits/dim forward takes): sampling 64 images
 * on the CPU, on a GPU as many as GPU_BATCH_BYTES of state or KV cache hold, up to 4,096;
 * completion 16 (its prefill holds batch x kept positions); bits/dim 16 MNIST or 4 CIFAR-10
 * images on the CPU, on a GPU as many as GPU_BATCH_BYTES of activations hold, up to 256. The
 * caller caps it at its number of images. */
long device_default_batch(const Config *c, Device d, RunKind k, int T);
#endif
