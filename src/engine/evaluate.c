#include "evaluate.h"

#include <math.h>
#include <stdlib.h>

#include "dmol.h"
#include "kernels/threads.h"
#include "transformer.h"

/* The negative log-likelihoods of one pass's outputs, an image per parallel item: the host
 * computes them for every device, and on a GPU they would otherwise be much of a full-set
 * evaluation's time. Each image's sum runs in position order, whatever the threads. */
typedef struct {
    const float *out;
    const unsigned char *x;   /* the pass's first image */
    double *per_image, *first;
    int N, M, T, t0;
} Nll;

static void nll_item(void *ctx, int b, int thread) {
    (void)thread;
    const Nll *q = ctx;
    for (int t = 0; t < q->T; t++) {
        double nll = -dmol_log_prob(q->out + ((size_t)b * q->T + t) * 3 * q->M, q->M, q->x[(size_t)b * q->N + q->t0 + t]);
        q->per_image[b] += nll;
        if (q->t0 + t == 0) q->first[b] = nll;
    }
}

int evaluate_bits_per_dim(const Model *m, Device d, const unsigned char *imgs, int n, int batch, int step_form,
                          double *per_image, double *per_image_given, Progress *progress,
                          volatile sig_atomic_t *stop, Err *e) {
    const Config *c = &m->cfg;
    int N = c->seq_len, M = c->n_mix, B = batch < n ? batch : n, T = step_form ? 1 : N;
    if (B < 1) B = 1;
    Engine *en = engine_new(m, d, B, T, ENGINE_EXACT, e);   /* bits/dim of the model itself, in either form */
    if (!en) return -1;
    int *tok = xcalloc((size_t)B * T, sizeof(int));
    double *first = xcalloc(B, sizeof(double));   /* -log p of each image's first sub-pixel */
    int rc = 0, done = 0, stopped = 0;
    for (int start = 0; start < n && !stopped; start += B) {
        int nb = n - start < B ? n - start : B, t0;
        const unsigned char *x = imgs + (size_t)start * N;
        engine_reset(en);
        for (int b = 0; b < nb; b++) per_image[start + b] = 0;
        /* inputs BOS, x1 .. x(N-1); the output at position t predicts x(t) (0-based: x[t]) */
        for (t0 = 0; t0 < N && !stopped; t0 += T) {
            for (int b = 0; b < nb; b++) input_tokens(tok + b * T, x + (size_t)b * N, t0, T);
            if ((rc = engine_forward(en, tok, nb, T, e))) break;
            Nll q = {en->out, x, per_image + start, first, N, M, T, t0};
            parallel_for(nb, nll_item, &q, (double)T * M);
            if (progress) progress_update(progress, start + (double)nb * (t0 + T) / N);
            stopped = stop && *stop;
        }
        if (rc || t0 < N) break;   /* an error, or stopped inside the batch: its sums are partial */
        for (int b = 0; b < nb && !rc; b++) {
            if (per_image_given)
                per_image_given[start + b] = N > 1 ? (per_image[start + b] - first[b]) / ((N - 1) * log(2.0)) : NAN;
            per_image[start + b] /= N * log(2.0);
            if (!isfinite(per_image[start + b]))   /* weights are finite, but the numbers overflowed */
                rc = err_set(e, "image %d: the log-probability is not finite (the model's activations overflow "
                             "float32): no bits/dim", start + b);
        }
        if (rc) break;
        done += nb;
    }
    free(first);
    free(tok);
    engine_free(en);
    return rc ? -1 : done;
}

void mean_and_stderr(const double *v, int n, double *mean, double *se) {
    double s = 0, ss = 0;
    for (int i = 0; i < n; i++) s += v[i];
    *mean = n ? s / n : NAN;
    for (int i = 0; i < n; i++) ss += (v[i] - *mean) * (v[i] - *mean);
    *se = n > 1 ? sqrt(ss / (n - 1) / n) : 0;
}
