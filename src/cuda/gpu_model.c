/* The hand-over from the C engine to the CUDA engine (gpu_model.h). */
#include "gpu_model.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "io/settings.h"
#include "engine/transformer.h"

int gpu_model_init(GpuModel *g, const Model *m, Err *e) {
    const Config *c = &m->cfg;
    memset(g, 0, sizeof *g);
    if (!m->head_f.w)
        return err_set(e, "the GPU engine takes the weights in the model file's layout: load the model with "
                          "MODEL_FILE_WEIGHTS");
    g->cfg = *c;
    Settings env = settings_read();
    g->sgemm = env.cuda_sgemm;
    g->tf32 = env.cuda_tf32;
    g->pdl = env.cuda_pdl;
    g->fused = env.cuda_fused;
    g->emb = m->emb;
    g->norm_w = m->norm_w;
    g->norm_b = m->norm_b;
    g->head = m->head_f;
    g->head_b = m->head_b;
    g->layers = xcalloc((size_t)c->n_layers > 0 ? (size_t)c->n_layers : 1, sizeof *g->layers);
    for (int l = 0; l < c->n_layers; l++) {
        const LayerWeights *w = &m->layers[l];
        g->layers[l] = (GpuLayer){w->qkv_f,   w->out_f,   w->ff1_f,   w->ff2_f,   w->qkv_b,   w->out_b,
                                  w->norm1_w, w->norm1_b, w->norm2_w, w->norm2_b, w->ff1_b,   w->ff2_b};
    }
    /* the canary's reference: its two tokens on the CPU, the products in float32 (exact) */
    RunState s;
    int T = c->seq_len > 1 ? 2 : 1, tok[2] = {BOS_TOKEN, CANARY_TOKEN};
    size_t K = 3 * (size_t)c->n_mix;
    if (runstate_init(&s, c, 1, T, e)) { gpu_model_free(g); return -1; }
    s.exact = 1;
    transformer_forward(m, &s, tok, 1, T);
    float *canary = xcalloc(2 * K, sizeof(float));
    memcpy(canary, s.out, T * K * sizeof(float));
    g->canary = canary;
    runstate_free(&s);
    return 0;
}

void gpu_model_free(GpuModel *g) {
    free(g->layers);
    free((void *)g->canary);
    memset(g, 0, sizeof *g);
}

int gpu_canary_check(const float *cpu, const float *got, int rows, size_t stride, int K, Err *e) {
    for (int r = 0; r < rows; r++)
        for (int k = 0; k < 2 * K; k++) {
            double want = cpu[k], have = got[(size_t)r * stride + k];
            double scale = fabs(want) > 1 ? fabs(want) : 1;
            if (!(fabs(have - want) <= CANARY_TOL * scale))   /* NaN fails too */
                return err_set(e, "the GPU's result differs from the CPU's (start-up check: head output %d at position "
                                  "%d of row %d is %.6g on the GPU, %.6g on the CPU, tolerance %g): this GPU build "
                                  "does not compute the model correctly, so nothing was run",
                               k % K, k / K, r, have, want, CANARY_TOL);
        }
    return 0;
}
