/* The CUDA engine (engine.h) over cuda/lingen_cuda.h's CudaForward: the model handed over once
 * (gpu_model.h), the memory, the images and their streams on the GPU. Built with CUDA=1 only. */
#ifdef LINGEN_CUDA
#include "engine/engine.h"

#include <stdlib.h>
#include <string.h>

#include "gpu_model.h"

typedef struct {
    CudaForward *f;
    int *tok;    /* [batch][positions]: a draws engine's inputs, padded to its batch */
    int draws;
} Cuda;

static Cuda *gpu(Engine *en) { return en->impl; }

/* A draws engine's graph runs every row: a forward of fewer sequences fills the others with BOS,
 * so that they hold finite numbers too (each row is computed on its own). */
static int cuda_forward(Engine *en, const int *tokens, int B, int T, Err *e) {
    Cuda *g = gpu(en);
    if (!g->draws || B == en->batch) return cuda_forward_run(g->f, tokens, B, T, en->out, e);
    memcpy(g->tok, tokens, (size_t)B * T * sizeof(int));
    for (size_t i = (size_t)B * T; i < (size_t)en->batch * T; i++) g->tok[i] = BOS_TOKEN;
    return cuda_forward_run(g->f, g->tok, en->batch, T, en->out, e);
}

static int cuda_begin(Engine *en, Err *e) { return cuda_draw_begin(gpu(en)->f, en->img, en->rng, en->draw_B, e); }

static int cuda_step(Engine *en, double temperature, int wait, Err *e) {
    if (temperature != 1.0) return err_set(e, "the GPU draws at temperature 1 only (--temperature needs --device cpu)");
    return cuda_draw_step(gpu(en)->f, wait, e);
}

static int cuda_end(Engine *en, Err *e) { return cuda_draw_end(gpu(en)->f, en->img, en->rng, en->draw_B, e); }

static void cuda_reset(Engine *en) { cuda_forward_reset(gpu(en)->f); }

static void cuda_free(Engine *en) {
    Cuda *g = gpu(en);
    if (!g) return;
    cuda_forward_free(g->f);
    free(g->tok);
    free(en->out);
    free(g);
}

static const EngineOps CUDA_OPS = {"cuda", cuda_forward, cuda_begin, cuda_step, cuda_end, cuda_reset, cuda_free};

int engine_cuda_use(int index, Err *e) { return cuda_probe(e) || cuda_use_device(index, e) ? -1 : 0; }

Engine *engine_cuda_new(const Model *m, int B, int T, int flags, Err *e) {
    GpuModel gm;
    if (gpu_model_init(&gm, m, e)) return NULL;
    Engine *en = engine_alloc(&CUDA_OPS, m, B, T);
    Cuda *g = xcalloc(1, sizeof *g);
    en->impl = g;
    en->async = 1;
    g->draws = (flags & ENGINE_DRAWS) != 0;
    g->f = cuda_forward_new(&gm, B, T, g->draws, e);   /* the engine keeps no view of gm */
    gpu_model_free(&gm);
    if (!g->f) {
        engine_free(en);
        return NULL;
    }
    g->tok = xcalloc((size_t)B * T, sizeof(int));
    en->out = xcalloc((size_t)B * T * 3 * m->cfg.n_mix, sizeof(float));
    return en;
}
#else
typedef int engine_cuda_is_empty_without_cuda;   /* ISO C: a translation unit declares something */
#endif
