/* The CUDA engine (the .cu files of src/cuda/, built with `make CUDA=1`): the same model and
 * the same arithmetic as transformer.c, attention_*.c and dmol.c, on one NVIDIA GPU.
 *
 * This header is what the C and CUDA halves of a build share, and nvcc compiles the CUDA half
 * without the host compiler's -march: it holds plain data only, and it and every header it
 * includes are free of anything that depends on the processor's instruction set
 * (tests/test_cli_cuda_build.sh checks). The engine takes the weights in the model file's own
 * layout (config.h's FileWeight), never the CPU engine's packed panels.
 *
 * Weights are uploaded once per engine as float32; the RNN state (S, z) or the KV cache and
 * every activation stay on the GPU. Before its first use, each engine runs a canary: its head
 * outputs for two tokens (BOS, then CANARY_TOKEN: at position 0 the attention returns v alone,
 * at 1 the queries and keys count too), through the products a run takes, against the CPU's
 * float32 ones (GpuModel.canary); a mismatch fails the creation with both values named. Every CUDA and
 * cuBLAS call is checked: a failure returns -1 (or NULL) with "file:line: call: error" in e.
 * Without CUDA the entry points fail (device.c). */
#ifndef LINGEN_CUDA_H
#define LINGEN_CUDA_H
#ifdef __cplusplus
extern "C" {   /* the C headers too: their functions are C's */
#endif
#include "engine/config.h"
#include "engine/rng.h"
#include "io/util.h"

/* One layer's tensors: the Linears as the file holds them, the rest as floats. */
typedef struct {
    FileWeight qkv, out, ff1, ff2;   /* [3d, d], [d, d], [d_ff, d], [d, d_ff] */
    const float *qkv_b, *out_b, *norm1_w, *norm1_b, *norm2_w, *norm2_b, *ff1_b, *ff2_b;
} GpuLayer;

/* What the engine is given (gpu_model.h makes it from a loaded Model). */
typedef struct {
    Config cfg;
    const float *emb;              /* [257, d/2] */
    GpuLayer *layers;              /* [n_layers] */
    const float *norm_w, *norm_b;  /* [d] */
    FileWeight head;               /* [3M, d] */
    const float *head_b;           /* [3M] */
    const float *canary;           /* [2][3M]: the CPU's float32 head outputs for the canary's tokens */
    int sgemm;                     /* LINGEN_CUDA_SGEMM=1: every product in plain SGEMM */
    int tf32;                      /* LINGEN_CUDA_TF32=1: on TF32 tensor cores (diagnostics, not float32) */
    int pdl;                       /* LINGEN_CUDA_PDL=1: programmatic dependent launch of small products */
    int fused;                     /* a few-row step in one kernel (step.cu), unless LINGEN_CUDA_FUSED=0 */
} GpuModel;

/* The canary: positions 0 and 1 of a sequence BOS, CANARY_TOKEN. Its comparison (C,
 * gpu_model.c): rows of [2][K] head outputs, `stride` floats apart in got, each value within
 * CANARY_TOL of the CPU's (relative to max(|CPU's|, 1)). 0, or -1 and a message naming the row,
 * the position, the output and both numbers. The tolerance: float32 sums in another order move
 * these outputs by a small fraction of it, while a single pair of query rows exchanged in layer
 * 0 moves position 1's by several times it (there the queries only weigh two keys). */
#define CANARY_TOKEN 77
#define CANARY_TOL 1e-4
int gpu_canary_check(const float *cpu, const float *got, int rows, size_t stride, int K, Err *e);

/* 0 when a CUDA GPU answers, else -1 and why. */
int cuda_probe(Err *e);
/* Run on GPU `index` modulo the number this process sees (CUDA_VISIBLE_DEVICES), from now on:
 * the ranks of an MPI job on one node pass their local rank, and each gets a GPU of its own. */
int cuda_use_device(int index, Err *e);

/* transformer_forward() on the GPU: B sequences of T new positions on top of the memory of
 * those already run; head outputs copied to out [B][T][3M] (host). Capacity B x T is fixed at
 * creation; reset empties the memory (position 0). draws = 1: also generation (below), whose
 * step (every layer, the head and the sampler) is captured as one CUDA graph at creation. */
typedef struct CudaForward CudaForward;
CudaForward *cuda_forward_new(const GpuModel *g, int B, int T, int draws, Err *e);
int  cuda_forward_run(CudaForward *f, const int *tokens, int B, int T, float *out, Err *e);
void cuda_forward_reset(CudaForward *f);
void cuda_forward_free(CudaForward *f);

/* Generation from the current position t (engine.h's engine_draw_*): begin uploads the B images
 * [B][N] (their values before t) and streams [B]; each step replays the graph: position t's
 * inputs x(t-1) through the model, then dmol.c's draw (rng.c's streams, temperature 1) of x(t)
 * into the GPU's copy of the images; wait = 0 returns without waiting for it. end copies the
 * images and the advanced streams back. */
int cuda_draw_begin(CudaForward *f, const unsigned char *img, const Rng *rng, int B, Err *e);
int cuda_draw_step(CudaForward *f, int wait, Err *e);
int cuda_draw_end(CudaForward *f, unsigned char *img, Rng *rng, int B, Err *e);

#ifdef LINGEN_CUDA
/* For tests and the benchmark only (not in the CPU-only build). */
/* The GPU sampler on given head outputs: out [n][3M], rngs [n] (advanced), draws x [n]. */
int cuda_dmol_sample_batch(const float *out, int n, int M, Rng *rngs, int *x, Err *e);
/* Seconds per RNN step (whole graph: layers, head, sampler) at batch B, timed over `steps`
 * replays after a warm-up; tf32: cuBLAS may use TF32 tensor cores (not exact: benchmark only). */
int cuda_bench_step(const GpuModel *g, int B, int steps, int tf32, double *sec_per_step, Err *e);
/* The GPU memory's bandwidth as a device-to-device copy of `bytes` sees it, bytes read plus
 * written per second (the best of a few copies): what bounds a step that streams the state. */
int cuda_copy_bandwidth(size_t bytes, double *bytes_per_s, Err *e);
/* Seconds a grid barrier of the fused step's shape takes (one block an SM, 256 threads), from
 * the time of many in one cooperative kernel: the fused step pays one where forward() ends a
 * kernel. */
int cuda_barrier_seconds(double *sec, Err *e);
#endif

#ifdef __cplusplus
}
#endif
#endif
