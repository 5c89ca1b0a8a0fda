/* Causal softmax attention with a KV cache: the keys and values of every earlier position are
 * kept, so each new position costs time and memory that grow with its index. Scale 1/sqrt(D).
 * Several positions at once are computed one head and 64 queries at a time: never more than a
 * 64 x (t0+T) block of scores, and no scores for the keys the causal mask hides from a whole block. */
#include <cblas.h>
#include <math.h>
#include <string.h>

#include "attention.h"
#include "kernels/fastexp.h"
#include "kernels/threads.h"

#define QBLOCK 64   /* queries per score block: bounds the scratch, and skips the masked-out keys */

/* row[0..len) <- softmax(row[0..len)), row[len..P) <- 0 (the keys the causal mask hides) */
static void softmax_row(float *restrict row, int len, int P) {
    float mx = row[0], sum = 0;
    #pragma omp simd reduction(max : mx)
    for (int j = 1; j < len; j++) mx = row[j] > mx ? row[j] : mx;
    #pragma omp simd reduction(+ : sum)
    for (int j = 0; j < len; j++) { row[j] = exp_nonpositive(row[j] - mx); sum += row[j]; }
    float inv = 1.0f / sum;
    #pragma omp simd
    for (int j = 0; j < len; j++) row[j] *= inv;
    for (int j = len; j < P; j++) row[j] = 0;
}

size_t softmax_attention_scratch(const Config *c, int T, int cap) {
    (void)c;
    return (size_t)(T < QBLOCK ? T : QBLOCK) * cap;
}

typedef struct {
    const Config *c;
    float *kc, *vc, *out, *scratch;
    const float *qkv;
    int cap, t0, T;
    size_t per_thread;
} Attn;

static void attention_item(void *ctx, int bh, int thread) {
    const Attn *a = ctx;
    int H = a->c->n_heads, D = a->c->d_head, d = a->c->d, T = a->T, t0 = a->t0, cap = a->cap;
    int b = bh / H, h = bh % H;
    float scale = 1.0f / sqrtf((float)D);
    float *K = a->kc + (size_t)bh * cap * D, *V = a->vc + (size_t)bh * cap * D;
    const float *q = a->qkv + (size_t)b * T * 3 * d + h * D;
    for (int t = 0; t < T; t++) {   /* append the new keys and values to the cache */
        memcpy(K + (size_t)(t0 + t) * D, q + (size_t)t * 3 * d + d, D * sizeof(float));
        memcpy(V + (size_t)(t0 + t) * D, q + (size_t)t * 3 * d + 2 * d, D * sizeof(float));
    }
    for (int i0 = 0; i0 < T; i0 += QBLOCK) {
        int n = T - i0 < QBLOCK ? T - i0 : QBLOCK, P = t0 + i0 + n;   /* keys this block can see */
        /* scores = Q K^T / sqrt(D), [n, P]; row i sees positions 0 .. t0+i0+i */
        float *Sc = a->scratch + thread * a->per_thread;
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, n, P, D, scale, q + (size_t)i0 * 3 * d,
                    3 * d, K, D, 0.0f, Sc, P);
        for (int i = 0; i < n; i++)
            softmax_row(Sc + (size_t)i * P, t0 + i0 + i + 1, P);
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, D, P, 1.0f, Sc, P, V, D, 0.0f,
                    a->out + ((size_t)b * T + i0) * d + h * D, d);
    }
}

double softmax_attention_flops(const Config *c, int T) {
    double H = c->n_heads, D = c->d_head, f = 0;
    for (int t0 = 0; t0 < c->seq_len; t0 += T) {   /* calls */
        int len = c->seq_len - t0 < T ? c->seq_len - t0 : T;
        for (int i0 = 0; i0 < len; i0 += QBLOCK) {
            double n = len - i0 < QBLOCK ? len - i0 : QBLOCK, P = t0 + i0 + n;
            f += H * 2 * (2 * n * P * D);   /* scores, then their sum of values */
        }
    }
    return f;
}

void softmax_attention(const Config *c, float *kc, float *vc, int cap, int t0, const float *qkv,
                       float *out, int B, int T, float *scratch) {
    Attn a = {c, kc, vc, out, scratch, qkv, cap, t0, T, softmax_attention_scratch(c, T, cap)};
    parallel_for(B * c->n_heads, attention_item, &a, (double)T * (t0 + T));
}
