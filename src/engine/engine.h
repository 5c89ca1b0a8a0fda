/* An engine: one loaded model made ready to run on one device, the CPU (engine_cpu.c) or an
 * NVIDIA GPU (engine_cuda.c, builds made with CUDA=1). generate(), evaluate_bits_per_dim() and
 * compare's rows are written once against this interface; what differs between devices (where
 * the memory lives, whether a step is a CUDA graph, where the sampler runs) stays inside the
 * engine.
 *
 * An engine holds the attention memory of up to `batch` sequences: the RNN state S, z of a
 * linear model (constant in the position) or a softmax model's KV cache. A forward runs T new
 * positions of B sequences on top of the positions already run; reset empties the memory.
 * Generation runs through the draw calls, which keep the images and their random streams where
 * the engine computes (on the GPU: one CUDA graph replay a position, layers, head and sampler). */
#ifndef LINGEN_ENGINE_H
#define LINGEN_ENGINE_H
#include "model.h"
#include "rng.h"
#include "io/util.h"

typedef enum { DEVICE_CPU, DEVICE_CUDA } Device;

/* engine_new's flags */
enum {
    ENGINE_EXACT = 1,   /* every product in float32 (bits/dim of the model itself); the GPU always is */
    ENGINE_DRAWS = 2,   /* will generate (engine_draw_*): the GPU captures its step graph at creation */
};

typedef struct Engine Engine;

/* What an engine implements; the wrappers below check the arguments first. */
typedef struct {
    const char *name;   /* "cpu", "cuda" */
    int  (*forward)(Engine *en, const int *tokens, int B, int T, Err *e);
    int  (*draw_begin)(Engine *en, Err *e);   /* en->img, rng, draw_B set */
    int  (*draw_step)(Engine *en, double temperature, int wait, Err *e);
    int  (*draw_end)(Engine *en, Err *e);
    void (*reset)(Engine *en);
    void (*free)(Engine *en);
} EngineOps;

struct Engine {
    const EngineOps *ops;
    const Model *model;   /* not owned: it outlives the engine */
    int batch, positions; /* capacity: sequences, and positions one forward takes */
    int n_pos;            /* positions run since the last reset */
    int async;            /* a draw step may return before it is done (engine_draw_step's wait) */
    float *out;           /* [batch][positions][3M] on the host: the last forward's head outputs
                           * (the implementation's buffer) */
    /* the draw in progress (engine_draw_begin) */
    unsigned char *img;
    Rng *rng;
    int draw_B;
    void *impl;           /* the device's own state */
};

/* An engine for m on device d, for up to B sequences and T positions a forward (flags above).
 * m must have been loaded for d (device_model_load). NULL and why on failure: a GPU engine
 * fails when its start-up canary disagrees with the CPU (cuda/lingen_cuda.h). */
Engine *engine_new(const Model *m, Device d, int B, int T, int flags, Err *e);
void engine_free(Engine *en);
/* Back to position 0: every sequence's memory empty. */
void engine_reset(Engine *en);
/* tokens [B][T] (BOS at position 0: transformer.h's input_tokens) of B <= batch sequences, T <= positions
 * new positions, after the n_pos already run; the head outputs in en->out [B][T][3M]. 0, or -1 and
 * why (the capacity exceeded, a token out of range, a device error). */
int engine_forward(Engine *en, const int *tokens, int B, int T, Err *e);
/* Generation of B <= batch images from position t = n_pos on: img [B][N] holds each image's
 * values before t (a prefix), rng [B] its random stream. Each engine_draw_step runs position t
 * (its input x(t-1), BOS at 0), draws x(t) from the model's distribution at the temperature
 * (dmol.h) into img and advances t. wait = 0 lets an async engine return before the step is done;
 * img and rng hold the draws after engine_draw_end. 0, or -1 and why. */
int engine_draw_begin(Engine *en, unsigned char *img, Rng *rng, int B, Err *e);
int engine_draw_step(Engine *en, double temperature, int wait, Err *e);
int engine_draw_end(Engine *en, Err *e);
/* A GPU answers, and this process runs on GPU index (modulo those it sees) from now on: 0, or -1
 * and why (engine_cuda.c; CUDA=1 builds only). */
int engine_cuda_use(int index, Err *e);
/* Whether this machine's memory holds a CPU run of m (reslimits.h): `batch` sequences of T
 * positions at once (their attention memory and activations), plus the weights and `extra`
 * bytes. 0, or -1 and what it needs against what is available (what names the run). */
int engine_check_memory(const Model *m, const char *what, long batch, int T, size_t extra, Err *e);
/* The devices' constructors (engine.c picks one) */
Engine *engine_cpu_new(const Model *m, int B, int T, int flags, Err *e);
Engine *engine_cuda_new(const Model *m, int B, int T, int flags, Err *e);
/* What both start from: the common fields set, impl and out left to the device. */
Engine *engine_alloc(const EngineOps *ops, const Model *m, int B, int T);
#endif
