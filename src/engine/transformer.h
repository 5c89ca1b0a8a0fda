/* The transformer: embedding, the layer stack, final norm and head.
 *
 * One forward function serves both forms. It runs T new positions of B sequences on top of
 * the attention memory of the positions already consumed (RunState.n_pos):
 *   step (RNN) form:  T = 1, called once per position;
 *   parallel form:    T = N (or any prefix), one call;
 *   prefill + decode: a parallel call over a prefix, then steps: the state carries over.
 * Only the attention differs between linear and softmax models (attention.h). */
#ifndef LINGEN_TRANSFORMER_H
#define LINGEN_TRANSFORMER_H
#include "model.h"

typedef struct {
    int B, T;          /* capacity: sequences per call, positions per call */
    int n_pos;         /* positions consumed so far, the same for every sequence */
    float *x;          /* [B*T, d]    residual stream */
    float *xn;         /* [B*T, d]    normed input (pre-norm), sublayer output */
    float *qkv;        /* [B*T, 3d] */
    float *att;        /* [B*T, d]    attention output, before the output projection */
    float *hid;        /* [B*T, d_ff] */
    float *out;        /* [B*T, 3M]   head outputs: mixture logits, means, log-scales */
    float *S, *z;      /* linear:  [L][B][H][D][D] and [L][B][H][D]: the whole RNN memory */
    float *kc, *vc;    /* softmax: [L][B][H][N][D] each: the KV cache */
    float *scratch;    /* attention workspace */
    float *pe;         /* [N, d/2] positional encodings */
    uint16_t *x16, *att16, *hid16;   /* [B rounded up to 16][d, d, d_ff]: at a step with bfloat16
                        * products, their inputs rounded as they are written (matmul.h's Rounded) */
    int exact;         /* 1: a step's products in float32 too (evaluation); 0 (runstate_init's):
                        * in bfloat16 where the model holds its weights so (model.h) */
} RunState;

int  runstate_init(RunState *s, const Config *c, int B, int T, Err *e);
void runstate_free(RunState *s);
void runstate_reset(RunState *s, const Config *c);   /* back to position 0 (empty memory) */
size_t runstate_bytes(const Config *c, int B, int T); /* what runstate_init allocates */

/* tokens [B][T] (BOS = 256 at position 0); head outputs for the T positions in s->out [B][T][3M].
 * Requires B <= s->B, T <= s->T and s->n_pos + T <= seq_len. */
void transformer_forward(const Model *m, RunState *s, const int *tokens, int B, int T);
/* The kernel (plan.h) the product of weight w takes in a call of T positions of B sequences,
 * exact (every product float32) or not. */
Kernel transformer_kernel(const Model *m, Packed w, int B, int T, int exact);
/* The same for the layers' products (all take the same kernel; a step: T = 1, exact = 0). */
Kernel transformer_products(const Model *m, int B, int T, int exact);
/* The inputs of positions t0 .. t0+T-1 for image x [N]: position t sees x[t-1], BOS at 0. */
void input_tokens(int *tok, const unsigned char *x, int t0, int T);

/* FLOPs per image for a full sequence in step form (matrix products and attention). */
double transformer_flops_per_image(const Config *c);
/* The same, run T positions per call (1: the step form, seq_len: the parallel form), counting
 * what that form computes (its attention differs). */
double transformer_flops(const Config *c, int T);
#endif
