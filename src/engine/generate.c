#include "generate.h"

#include <stdlib.h>
#include <string.h>

#include "engine.h"
#include "rng.h"
#include "transformer.h"
#include "io/util.h"

/* An async engine (the GPU) is waited for at every WAIT_EVERY-th position, and at every one when
 * the caller times each step: the progress and the stop flag are looked at then. */
#define WAIT_EVERY 32

int generate(const Model *m, unsigned char *imgs, int n, const GenOptions *o, Err *e) {
    const Config *c = &m->cfg;
    int N = c->seq_len, B = o->batch < n ? o->batch : n, P = o->prefix_len;
    double temp = o->temperature > 0 ? o->temperature : 1.0;
    if (B < 1) B = 1;
    if (P < 0 || P >= N) return err_set(e, "prefix of %d values: must be in 0..%d", P, N - 1);
    if (n <= 0) return 0;
    Engine *en = engine_new(m, o->device, B, P > 1 ? P : 1, ENGINE_DRAWS, e);
    if (!en) return -1;
    int *tok = xcalloc((size_t)B * (P > 1 ? P : 1), sizeof(int));
    Rng *rng = xcalloc(B, sizeof(Rng));
    int done = 0, rc = 0;
    for (int start = 0; start < n && !rc; start += B) {
        int nb = n - start < B ? n - start : B;
        unsigned char *img = imgs + (size_t)start * N;
        for (int b = 0; b < nb; b++) rng_init(&rng[b], o->seed, (uint64_t)(o->first + start + b));
        engine_reset(en);
        if (P > 0) {   /* prefill: positions 0..P-1 in parallel form, tokens BOS, x1 .. x(P-1) */
            for (int b = 0; b < nb; b++) {
                memcpy(img + (size_t)b * N, o->prefix + (size_t)(start + b) * N, P);
                input_tokens(tok + b * P, img + (size_t)b * N, 0, P);
            }
            if ((rc = engine_forward(en, tok, nb, P, e))) break;
        }
        if ((rc = engine_draw_begin(en, img, rng, nb, e))) break;
        int stopped = 0;
        for (int t = P; t < N && !rc && !stopped; t++) {   /* position t sees x(t-1) and draws x(t) */
            int wait = !en->async || o->on_step || t % WAIT_EVERY == WAIT_EVERY - 1 || t == N - 1;
            if (o->on_step) o->on_step(o->user, t, 0);
            if ((rc = engine_draw_step(en, temp, wait, e))) break;
            if (o->on_step) o->on_step(o->user, t, 1);
            if (wait && o->progress) progress_update(o->progress, (double)start * (N - P) + (double)nb * (t + 1 - P));
            stopped = wait && o->stop && *o->stop;
        }
        if (!rc) rc = engine_draw_end(en, e);
        if (rc || stopped) break;
        done += nb;
    }
    free(tok);
    free(rng);
    engine_free(en);
    return rc ? -1 : done;
}
