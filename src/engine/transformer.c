/* The transformer forward pass, shared by the step (RNN) form and the parallel form.
 * A layer is: attention sublayer, feed-forward sublayer, each with a residual and a LayerNorm,
 * after the sum (post-norm, the paper) or before the sublayer (pre-norm). */
#include "transformer.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "attention.h"
#include "kernels/matmul.h"
#include "kernels/product.h"
#include "kernels/threads.h"

/* The RNN state S, z (returned) or the KV cache (*kv floats of keys, as many of values) of B
 * sequences: model_state_bytes at full length, split by kind. */
static size_t state_floats(const Config *c, int B, size_t *kv) {
    size_t all = (size_t)B * model_state_bytes(c, c->seq_len) / sizeof(float);
    if (c->attention == ATTN_LINEAR) { *kv = 0; return all; }
    *kv = all / 2;
    return 0;
}

/* Attention workspace: one slice per thread. */
static size_t scratch_floats(const Config *c, int T) {
    return (size_t)threads_count() * (c->attention == ATTN_LINEAR ? linear_attention_scratch(c, T)
                                                                        : softmax_attention_scratch(c, T, c->seq_len));
}

size_t runstate_bytes(const Config *c, int B, int T) {
    size_t rows = (size_t)B * T, kv;
    size_t lin = state_floats(c, B, &kv);
    size_t act = rows * (4 * (size_t)c->d + 3 * (size_t)c->d + c->d_ff + 3 * (size_t)c->n_mix);
    size_t rounded = MATMUL_ROUNDED_ROWS((size_t)B) * (2 * (size_t)c->d + c->d_ff);   /* halves */
    return 4 * (act + lin + 2 * kv + scratch_floats(c, T) + (size_t)c->seq_len * c->d / 2) + 2 * rounded;
}

int runstate_init(RunState *s, const Config *c, int B, int T, Err *e) {
    memset(s, 0, sizeof *s);
    s->B = B; s->T = T;
    size_t rows = (size_t)B * T, kv, lin = state_floats(c, B, &kv);
    s->x   = try_calloc_lines(rows * c->d, 4, "activations", e);
    s->xn  = s->x   ? try_calloc_lines(rows * c->d, 4, "activations", e) : NULL;
    s->qkv = s->xn  ? try_calloc_lines(rows * 3 * c->d, 4, "activations", e) : NULL;
    s->att = s->qkv ? try_calloc_lines(rows * c->d, 4, "activations", e) : NULL;
    s->hid = s->att ? try_calloc_lines(rows * c->d_ff, 4, "activations", e) : NULL;
    s->out = s->hid ? try_calloc_lines(rows * 3 * c->n_mix, 4, "head outputs", e) : NULL;
    s->scratch = s->out ? try_calloc_lines(scratch_floats(c, T), 4, "attention workspace", e) : NULL;
    s->pe = s->scratch ? try_calloc_lines((size_t)c->seq_len * (c->d / 2), 4, "positional encoding", e) : NULL;
    size_t padded = MATMUL_ROUNDED_ROWS((size_t)B);   /* zero rows past B, for the tiles */
    s->x16 = s->pe ? try_calloc_lines(padded * c->d, 2, "activations", e) : NULL;
    s->att16 = s->x16 ? try_calloc_lines(padded * c->d, 2, "activations", e) : NULL;
    s->hid16 = s->att16 ? try_calloc_lines(padded * c->d_ff, 2, "activations", e) : NULL;
    if (s->hid16 && c->attention == ATTN_LINEAR) {
        s->S = try_calloc_lines(lin, 4, "RNN state", e);
        s->z = s->S ? s->S + (size_t)c->n_layers * B * c->n_heads * c->d_head * c->d_head : NULL;
    } else if (s->hid16) {
        s->kc = try_calloc_lines(kv, 4, "KV cache (keys)", e);
        s->vc = s->kc ? try_calloc_lines(kv, 4, "KV cache (values)", e) : NULL;
    }
    if (!s->S && !s->vc) { runstate_free(s); return -1; }
    /* PE(t, 2i) = sin(t / 10000^(2i/h)), PE(t, 2i+1) = cos(...), h = d/2, in double like the reference */
    int h = c->d / 2;
    for (int t = 0; t < c->seq_len; t++)
        for (int i = 0; i < h; i += 2) {
            double ang = t / pow(10000.0, (double)i / h);
            s->pe[(size_t)t * h + i] = (float)sin(ang);
            if (i + 1 < h) s->pe[(size_t)t * h + i + 1] = (float)cos(ang);
        }
    return 0;
}

void runstate_free(RunState *s) {
    void *bufs[] = {s->x, s->xn, s->qkv, s->att, s->hid, s->out, s->scratch, s->pe, s->S, s->kc, s->vc,
                    s->x16, s->att16, s->hid16};
    for (size_t k = 0; k < sizeof bufs / sizeof *bufs; k++) free_lines(bufs[k]);
    memset(s, 0, sizeof *s);
}

void runstate_reset(RunState *s, const Config *c) {
    size_t kv, lin = state_floats(c, s->B, &kv);
    if (s->S) memset(s->S, 0, lin * 4);   /* the KV cache needs no clearing: n_pos bounds it */
    s->n_pos = 0;
}

static void layernorm_row(float *o, const float *x, const float *w, const float *b, int d) {
    float mean = 0, var = 0;   /* omp simd: the sums in vector lanes, then added up */
    #pragma omp simd reduction(+:mean)
    for (int i = 0; i < d; i++) mean += x[i];
    mean /= d;
    #pragma omp simd reduction(+:var)
    for (int i = 0; i < d; i++) var += (x[i] - mean) * (x[i] - mean);
    float inv = 1.0f / sqrtf(var / d + LN_EPS);
    #pragma omp simd
    for (int i = 0; i < d; i++) o[i] = (x[i] - mean) * inv * w[i] + b[i];
}

/* Row-wise work (layer norms, residuals) in parallel items of ROWS_PER_ITEM rows; a step's
 * few rows are not worth a parallel loop. */
#define ROWS_PER_ITEM 16
typedef struct { float *out, *x; const float *y, *w, *b; uint16_t *r16; int rows, d, post; } Rows;   /* r16: or NULL */

static void layernorm_item(void *ctx, int item, int thread) {
    (void)thread;
    const Rows *q = ctx;
    Slice sl = item_slice(item, ROWS_PER_ITEM, q->rows);
    for (int r = sl.lo; r < sl.hi; r++) {
        layernorm_row(q->out + (size_t)r * q->d, q->x + (size_t)r * q->d, q->w, q->b, q->d);
        if (q->r16) matmul_round_bf16(q->r16 + (size_t)r * q->d, q->out + (size_t)r * q->d, q->d);
    }
}

static void over_rows_named(ParallelFn fn, const Rows *q, const char *name) {
    int items = items_of(q->rows, ROWS_PER_ITEM);
    parallel_for_if_named(items >= 4, items, fn, (void *)q, (double)q->rows * q->d, name);
}
#define over_rows(fn, ...) over_rows_named(fn, __VA_ARGS__, __FILE__ ":" #fn)   /* the loop named as fn (threads.h) */

/* out = LN(x), and rounded to bfloat16 into r16 unless it is NULL */
static void layernorm(float *out, const float *x, const float *w, const float *b, int rows, int d, uint16_t *r16) {
    over_rows(layernorm_item, &(Rows){out, (float *)x, NULL, w, b, r16, rows, d, 0});
}

/* x = x + y, then (post-norm) x = LN(x) and x rounded into r16 unless it is NULL, a row at a
 * time (one pass, one loop). */
static void residual_item(void *ctx, int item, int thread) {
    (void)thread;
    const Rows *q = ctx;
    Slice sl = item_slice(item, ROWS_PER_ITEM, q->rows);
    for (int r = sl.lo; r < sl.hi; r++) {
        float *xr = q->x + (size_t)r * q->d;
        const float *yr = q->y + (size_t)r * q->d;
        #pragma omp simd
        for (int i = 0; i < q->d; i++) xr[i] += yr[i];
        if (q->post) layernorm_row(xr, xr, q->w, q->b, q->d);
        if (q->r16) matmul_round_bf16(q->r16 + (size_t)r * q->d, xr, q->d);
    }
}

static void residual(float *x, const float *y, const float *w, const float *b, int rows, int d, int post, uint16_t *r16) {
    over_rows(residual_item, &(Rows){NULL, x, y, w, b, r16, rows, d, post});
}

/* The kernel of a product of this call (plan.h decides, on the copies the weight holds). A run's
 * images all take the same kernel. Between runs of other batches images can differ in the last
 * bits of a sum and then in a draw: the tiles' float32 sums of the same bfloat16 products are
 * not vdpbf16ps's, nor the 8-bit weights'. */
Kernel transformer_kernel(const Model *m, Packed w, int B, int T, int exact) {
    Copies c = {w.bf16 != NULL, w.amx != NULL, w.q8 != NULL};
    return plan_kernel(&m->plan, c, T, B, exact);
}

/* The kernel of weight w's product in this call (transformer_kernel). */
static Kernel kernel(const Model *m, Packed w, const RunState *s, int T) {
    return transformer_kernel(m, w, s->B, T, s->exact);
}

Kernel transformer_products(const Model *m, int B, int T, int exact) {
    if (m->cfg.n_layers == 0) return KERNEL_F32;
    return transformer_kernel(m, m->layers[0].qkv_w, B, T, exact);
}

/* Whether this call's products take bfloat16 inputs rounded by the loops that write them: a
 * step with bfloat16 products (the rounding is the products' own, so the numbers are the same). */
static int rounds_inputs(const Model *m, const RunState *s, int T) {
    Kernel k = transformer_products(m, s->B, T, s->exact);
    return k == KERNEL_BF16 || k == KERNEL_AMX_BF16;
}

static void layer_forward(const Model *m, RunState *s, int l, int B, int T, int r16) {
    const Config *c = &m->cfg;
    const LayerWeights *w = &m->layers[l];
    int d = c->d, rows = B * T, pre = c->pre_norm, lin = c->attention == ATTN_LINEAR;
    size_t H = c->n_heads, D = c->d_head;
    /* the inputs of the qkv and ff1 products (x, or LN(x) pre-norm) rounded into x16, as they are
     * written; the attention's (linear) into att16, ff1's outputs into hid16 */
    uint16_t *x16 = r16 ? s->x16 : NULL, *att16 = r16 && lin ? s->att16 : NULL, *hid16 = r16 ? s->hid16 : NULL;

    /* attention sublayer */
    const float *in = s->x;
    if (pre) { layernorm(s->xn, s->x, w->norm1_w, w->norm1_b, rows, d, x16); in = s->xn; }
    product(kernel(m, w->qkv_w, s, T), s->qkv, in, w->qkv_w, w->qkv_b, rows, d, 3 * d, MATMUL_NONE, (Rounded){x16, NULL});
    if (lin)
        linear_attention(c, s->S + l * s->B * H * D * D, s->z + l * s->B * H * D, s->qkv, s->att, att16, B, T, s->scratch);
    else {
        size_t off = l * s->B * H * (size_t)c->seq_len * D;
        softmax_attention(c, s->kc + off, s->vc + off, c->seq_len, s->n_pos, s->qkv, s->att, B, T, s->scratch);
    }
    product(kernel(m, w->out_w, s, T), s->xn, s->att, w->out_w, w->out_b, rows, d, d, MATMUL_NONE, (Rounded){att16, NULL});
    residual(s->x, s->xn, w->norm1_w, w->norm1_b, rows, d, !pre, pre ? NULL : x16);

    /* feed-forward sublayer */
    in = s->x;
    if (pre) { layernorm(s->xn, s->x, w->norm2_w, w->norm2_b, rows, d, x16); in = s->xn; }
    product(kernel(m, w->ff1_w, s, T), s->hid, in, w->ff1_w, w->ff1_b, rows, d, c->d_ff, c->gelu ? MATMUL_GELU : MATMUL_RELU,
                   (Rounded){x16, hid16});
    product(kernel(m, w->ff2_w, s, T), s->xn, s->hid, w->ff2_w, w->ff2_b, rows, c->d_ff, d, MATMUL_NONE, (Rounded){hid16, NULL});
    residual(s->x, s->xn, w->norm2_w, w->norm2_b, rows, d, !pre, pre ? NULL : x16);
}

void transformer_forward(const Model *m, RunState *s, const int *tokens, int B, int T) {
    const Config *c = &m->cfg;
    int d = c->d, h = d / 2, rows = B * T, M = c->n_mix, r16 = rounds_inputs(m, s, T);
    /* e_t = concat(E[token_t], PE(t)) */
    for (int b = 0; b < B; b++)
        for (int t = 0; t < T; t++) {
            float *xr = s->x + ((size_t)b * T + t) * d;
            memcpy(xr, m->emb + (size_t)tokens[b * T + t] * h, h * sizeof(float));
            memcpy(xr + h, s->pe + (size_t)(s->n_pos + t) * h, h * sizeof(float));
            if (r16 && !c->pre_norm) matmul_round_bf16(s->x16 + (size_t)b * d, xr, d);   /* T = 1 */
        }
    for (int l = 0; l < c->n_layers; l++) layer_forward(m, s, l, B, T, r16);
    layernorm(s->xn, s->x, m->norm_w, m->norm_b, rows, d, NULL);
    product(kernel(m, m->head_w, s, T), s->out, s->xn, m->head_w, m->head_b, rows, d, 3 * M, MATMUL_NONE,
            (Rounded){NULL, NULL});   /* dmol.c clamps the log-scales */
    s->n_pos += T;
}

void input_tokens(int *tok, const unsigned char *x, int t0, int T) {
    for (int t = 0; t < T; t++) tok[t] = t0 + t == 0 ? BOS_TOKEN : x[t0 + t - 1];
}

double transformer_flops(const Config *c, int T) {
    double d = c->d, N = c->seq_len;
    double proj = 2 * (3 * d * d + d * d + 2 * d * c->d_ff);   /* per token per layer */
    double attn = c->attention == ATTN_LINEAR ? linear_attention_flops(c, T) : softmax_attention_flops(c, T);
    return c->n_layers * (N * proj + attn) + N * 2 * d * 3 * c->n_mix;
}

double transformer_flops_per_image(const Config *c) { return transformer_flops(c, 1); }
