/* The CPU engine (engine.h): transformer_forward on a RunState, the sampler on the host. */
#include "engine.h"

#include <stdlib.h>

#include "dmol.h"
#include "kernels/threads.h"
#include "transformer.h"

typedef struct {
    RunState s;
    int *tok;   /* [batch]: a draw step's inputs */
} Cpu;

static Cpu *cpu(Engine *en) { return en->impl; }

static int cpu_forward(Engine *en, const int *tokens, int B, int T, Err *e) {
    (void)e;
    Cpu *c = cpu(en);
    transformer_forward(en->model, &c->s, tokens, B, T);   /* en->out is s.out */
    return 0;
}

/* Draw x(t) of each image from its mixture: little work an image, but at a large batch enough
 * that the caller alone would hold up every step, so in a parallel loop where the batch is
 * large (docs/speed.md, Where the time goes). Each image has its own generator: the draws do
 * not depend on the thread. */
#define DRAWS_PER_ITEM 16
typedef struct { const float *out; unsigned char *img; Rng *rng; int nb, N, M, t; double temp; } Draws;

static void draw_item(void *ctx, int item, int thread) {
    (void)thread;
    const Draws *d = ctx;
    Slice sl = item_slice(item, DRAWS_PER_ITEM, d->nb);
    for (int b = sl.lo; b < sl.hi; b++)
        d->img[(size_t)b * d->N + d->t] =
            (unsigned char)dmol_sample_temp(d->out + (size_t)b * 3 * d->M, d->M, d->temp, &d->rng[b]);
}

static int cpu_draw_begin(Engine *en, Err *e) {
    (void)en;
    (void)e;
    return 0;
}

/* position t = n_pos: the inputs x(t-1) from the images, one step, the draws into the images */
static int cpu_draw_step(Engine *en, double temperature, int wait, Err *e) {
    (void)wait;
    (void)e;
    Cpu *c = cpu(en);
    const Config *cf = &en->model->cfg;
    int nb = en->draw_B, N = cf->seq_len, t = en->n_pos;
    for (int b = 0; b < nb; b++) input_tokens(c->tok + b, en->img + (size_t)b * N, t, 1);
    transformer_forward(en->model, &c->s, c->tok, nb, 1);
    Draws d = {c->s.out, en->img, en->rng, nb, N, cf->n_mix, t, temperature};
    int items = items_of(nb, DRAWS_PER_ITEM);
    parallel_for_if(items >= 4, items, draw_item, &d, nb);
    return 0;
}

static int cpu_draw_end(Engine *en, Err *e) {
    (void)en;
    (void)e;
    return 0;
}

static void cpu_reset(Engine *en) { runstate_reset(&cpu(en)->s, &en->model->cfg); }

static void cpu_free(Engine *en) {
    Cpu *c = cpu(en);
    if (!c) return;
    runstate_free(&c->s);
    free(c->tok);
    free(c);
}

static const EngineOps CPU_OPS = {"cpu", cpu_forward, cpu_draw_begin, cpu_draw_step, cpu_draw_end, cpu_reset, cpu_free};

Engine *engine_cpu_new(const Model *m, int B, int T, int flags, Err *e) {
    Engine *en = engine_alloc(&CPU_OPS, m, B, T);
    Cpu *c = xcalloc(1, sizeof *c);
    en->impl = c;
    if (runstate_init(&c->s, &m->cfg, B, T, e)) {
        engine_free(en);
        return NULL;
    }
    c->s.exact = (flags & ENGINE_EXACT) != 0;
    en->out = c->s.out;
    c->tok = xcalloc((size_t)B, sizeof(int));
    return en;
}
