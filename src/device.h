/* Where the model runs: the CPU (always) or an NVIDIA GPU (builds with `make CUDA=1`).
 * The choice is process-wide: the commands set it from --device before any work, and
 * generate(), evaluate_bits_per_dim() and compare's recompute rows consult it. */
#ifndef LINGEN_DEVICE_H
#define LINGEN_DEVICE_H
#include "engine.h"
#include "model.h"
#include "util.h"

/* "cpu" | "cuda" -> *d; otherwise prints "lingen <cmd>: ..." and returns 2 (usage). A CUDA
 * device in a build without CUDA prints "built without CUDA" and returns 1. */
int device_parse(const char *name, const char *cmd, Device *d);
/* Select d; probe: also check now that a GPU answers, and take this rank's GPU (shard.h: its local
 * rank; not before fork()ing children that use it). */
int device_select(Device d, int probe, Err *e);
Device device_current(void);
/* --device NAME of command cmd: parse and select (probe as above). Returns 0, or the exit code
 * after printing the problem: 2 for a bad name, 1 for no CUDA (in the build or on the machine). */
int device_option(const char *name, const char *cmd, int probe);
/* Load a model for the current device: for the CPU on plan_default(); for the GPU with its
 * weights in the file's layout too (the GPU engine takes those) and no copy for a CPU kernel
 * (the CPU computes only the canary's reference, in float32). */
int device_model_load(Model *m, const char *path, Err *e);
/* A GPU's default batch: as many images as GPU_BATCH_BYTES (8 GB) hold at bytes_per_image, within
 * [lo, hi]: a GPU pass or step takes little longer for thousands of images than for a few. */
#define GPU_BATCH_BYTES 8e9
long device_batch_fit(double bytes_per_image, long lo, long hi);
#endif
