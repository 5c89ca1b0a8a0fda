/* The CUDA backend (src/cuda/backend_cuda.cu, built with `make CUDA=1`): the same model and
 * the same arithmetic as transformer.c, attention_*.c and dmol.c, on one NVIDIA GPU.
 * Weights are uploaded once per run as float32; the RNN state (S, z) or the KV cache and every
 * activation stay on the GPU. Every CUDA and cuBLAS call is checked: a failure returns -1 (or
 * NULL) with "file:line: call: error" in e. Without CUDA the entry points fail (device.c). */
#ifndef LINGEN_CUDA_H
#define LINGEN_CUDA_H
#include "../generate.h"
#include "../model.h"
#include "../rng.h"

#ifdef __cplusplus
extern "C" {
#endif

/* 0 when a CUDA GPU answers, else -1 and why. */
int cuda_probe(Err *e);
/* Run on GPU `index` modulo the number this process sees (CUDA_VISIBLE_DEVICES), from now on:
 * the ranks of an MPI job on one node pass their local rank, and each gets a GPU of its own. */
int cuda_use_device(int index, Err *e);

/* generate() on the GPU: the same images array, options and per-image streams. Each step of a
 * batch (every layer, the head and the sampler) is one CUDA graph replay; the sampler draws
 * from dmol.c's PMF with rng.c's streams. */
int cuda_generate(const Model *m, unsigned char *imgs, int n, const GenOptions *o, Err *e);

/* transformer_forward() on the GPU: B sequences of T new positions on top of the memory of
 * those already run; head outputs copied to out [B][T][3M] (host). Capacity B x T is fixed at
 * creation; reset empties the memory (position 0). */
typedef struct CudaForward CudaForward;
CudaForward *cuda_forward_new(const Model *m, int B, int T, Err *e);
int  cuda_forward_run(CudaForward *f, const int *tokens, int B, int T, float *out, Err *e);
void cuda_forward_reset(CudaForward *f);
void cuda_forward_free(CudaForward *f);

#ifdef LINGEN_CUDA
/* For tests and the benchmark only (not in the CPU-only build). */
/* The GPU sampler on given head outputs: out [n][3M], rngs [n] (advanced), draws x [n]. */
int cuda_dmol_sample_batch(const float *out, int n, int M, Rng *rngs, int *x, Err *e);
/* Seconds per RNN step (whole graph: layers, head, sampler) at batch B, timed over `steps`
 * replays after a warm-up; tf32: cuBLAS may use TF32 tensor cores (not exact: benchmark only). */
int cuda_bench_step(const Model *m, int B, int steps, int tf32, double *sec_per_step, Err *e);
#endif

#ifdef __cplusplus
}
#endif
#endif
