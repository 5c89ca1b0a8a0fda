/* The engine interface (engine.h): the one place that picks a device's implementation, and the
 * argument checks every implementation relies on. */
#include "engine.h"

#include <stdlib.h>

#include "io/reslimits.h"
#include "transformer.h"

Engine *engine_alloc(const EngineOps *ops, const Model *m, int B, int T) {
    Engine *en = xcalloc(1, sizeof *en);
    en->ops = ops;
    en->model = m;
    en->batch = B;
    en->positions = T;
    return en;
}

Engine *engine_new(const Model *m, Device d, int B, int T, int flags, Err *e) {
    if (B < 1 || T < 1 || T > m->cfg.seq_len) {
        err_set(e, "an engine of %d sequences and %d positions a forward: out of range (1..%d positions)", B, T,
                m->cfg.seq_len);
        return NULL;
    }
    if (d == DEVICE_CUDA) {
#ifdef LINGEN_CUDA
        return engine_cuda_new(m, B, T, flags, e);
#else
        err_set(e, "this lingen was built without CUDA");
        return NULL;
#endif
    }
    return engine_cpu_new(m, B, T, flags, e);
}

void engine_free(Engine *en) {
    if (!en) return;
    en->ops->free(en);
    free(en);
}

void engine_reset(Engine *en) {
    en->ops->reset(en);
    en->n_pos = 0;
}

int engine_forward(Engine *en, const int *tokens, int B, int T, Err *e) {
    if (B < 1 || T < 1 || B > en->batch || T > en->positions || en->n_pos + T > en->model->cfg.seq_len)
        return err_set(e, "a forward of %d sequences x %d positions at position %d: over the engine's %d x %d", B, T,
                       en->n_pos, en->batch, en->positions);
    for (size_t i = 0; i < (size_t)B * T; i++)
        if (tokens[i] < 0 || tokens[i] > BOS_TOKEN) return err_set(e, "token %d out of range 0..%d", tokens[i], BOS_TOKEN);
    if (en->ops->forward(en, tokens, B, T, e)) return -1;
    en->n_pos += T;
    return 0;
}

int engine_draw_begin(Engine *en, unsigned char *img, Rng *rng, int B, Err *e) {
    if (B < 1 || B > en->batch || en->n_pos >= en->model->cfg.seq_len)
        return err_set(e, "a draw of %d images at position %d: over the engine's %d images, %d positions", B,
                       en->n_pos, en->batch, en->model->cfg.seq_len);
    en->img = img;
    en->rng = rng;
    en->draw_B = B;
    return en->ops->draw_begin(en, e);
}

int engine_draw_step(Engine *en, double temperature, int wait, Err *e) {
    if (!en->img) return err_set(e, "engine_draw_step without engine_draw_begin");
    if (en->n_pos >= en->model->cfg.seq_len) return err_set(e, "every position of the images is drawn");
    if (en->ops->draw_step(en, temperature, wait, e)) return -1;
    en->n_pos++;
    return 0;
}

int engine_draw_end(Engine *en, Err *e) {
    if (!en->img) return 0;
    int rc = en->ops->draw_end(en, e);
    en->img = NULL;
    en->rng = NULL;
    en->draw_B = 0;
    return rc;
}

int engine_check_memory(const Model *m, const char *what, long batch, int T, size_t extra, Err *e) {
    const Config *c = &m->cfg;
    size_t base = runstate_bytes(c, 0, T), fixed = m->arena_floats * sizeof(float) + base + extra;
    return reslimits_check_batch(fixed, runstate_bytes(c, 1, T) - base, batch, reslimits_available_memory(), what, e);
}
