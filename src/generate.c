#include "generate.h"

#include <stdlib.h>
#include <string.h>

#include "device.h"
#include "dmol.h"
#include "gpu_model.h"
#include "rng.h"
#include "threads.h"
#include "transformer.h"
#include "util.h"

/* Draw x(t) of each image from its mixture: a few hundred nanoseconds an image, so in a
 * parallel loop where the batch is large (batch 256 on 16 Xeon threads: 0.01-0.02 s of a run in
 * the loop, about 0.1 s on the caller alone). Each image has its own generator: the draws do not
 * depend on the thread. */
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

static void draw(const Draws *d) {
    int items = items_of(d->nb, DRAWS_PER_ITEM);
    parallel_for_if(items >= 4, items, draw_item, (void *)d, d->nb);
}

/* generate() on the GPU engine */
static int generate_gpu(const Model *m, unsigned char *imgs, int n, const GenOptions *o, Err *e) {
    GpuModel g;
    if (gpu_model_init(&g, m, e)) return -1;
    int done = cuda_generate(&g, imgs, n, o, e);
    gpu_model_free(&g);
    return done;
}

int generate(const Model *m, unsigned char *imgs, int n, const GenOptions *o, Err *e) {
    if (device_current() == DEVICE_CUDA) return generate_gpu(m, imgs, n, o, e);
    const Config *c = &m->cfg;
    int N = c->seq_len, M = c->n_mix, B = o->batch < n ? o->batch : n, P = o->prefix_len;
    double temp = o->temperature > 0 ? o->temperature : 1.0;
    if (B < 1) B = 1;
    if (P < 0 || P >= N) return err_set(e, "prefix of %d values: must be in 0..%d", P, N - 1);
    RunState s;
    if (runstate_init(&s, c, B, P > 1 ? P : 1, e)) return -1;
    int *tok = xcalloc((size_t)B * (P > 1 ? P : 1), sizeof(int));
    Rng *rng = xcalloc(B, sizeof(Rng));
    int done = 0;
    for (int start = 0; start < n; start += B) {
        int nb = n - start < B ? n - start : B;
        unsigned char *img = imgs + (size_t)start * N;
        for (int b = 0; b < nb; b++) rng_init(&rng[b], o->seed, (uint64_t)(o->first + start + b));
        runstate_reset(&s, c);
        if (P > 0) {   /* prefill: positions 0..P-1 in parallel form, tokens BOS, x1 .. x(P-1) */
            for (int b = 0; b < nb; b++) {
                memcpy(img + (size_t)b * N, o->prefix + (size_t)(start + b) * N, P);
                input_tokens(tok + b * P, img + (size_t)b * N, 0, P);
            }
            transformer_forward(m, &s, tok, nb, P);
        }
        for (int t = P; t < N; t++) {   /* position t sees x(t-1) (BOS at 0) and draws x(t) */
            if (o->on_step) o->on_step(o->user, t, 0);
            for (int b = 0; b < nb; b++) input_tokens(tok + b, img + (size_t)b * N, t, 1);
            transformer_forward(m, &s, tok, nb, 1);
            draw(&(Draws){s.out, img, rng, nb, N, M, t, temp});
            if (o->on_step) o->on_step(o->user, t, 1);
            if (o->progress) progress_update(o->progress, (double)start * (N - P) + (double)nb * (t + 1 - P));
            if (o->stop && *o->stop) goto out;
        }
        done += nb;
    }
out:
    free(tok);
    free(rng);
    runstate_free(&s);
    return done;
}
