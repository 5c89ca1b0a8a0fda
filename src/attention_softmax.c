/* Causal softmax attention with a KV cache: the keys and values of every earlier position are
 * kept, so each new position costs time and memory that grow with its index. Scale 1/sqrt(D).
 * Several positions at once are computed one head at a time, never more than one head's
 * T x (t0+T) score block. */
#include <cblas.h>
#include <math.h>
#include <string.h>

#include "attention.h"

size_t softmax_attention_scratch(const Config *c, int T, int cap) {
    (void)c;
    return (size_t)T * cap;
}

void softmax_attention(const Config *c, float *kc, float *vc, int cap, int t0, const float *qkv,
                       float *out, int B, int T, float *scratch) {
    int H = c->n_heads, D = c->d_head, d = c->d, P = t0 + T;
    float scale = 1.0f / sqrtf((float)D);
    for (int b = 0; b < B; b++)
        for (int h = 0; h < H; h++) {
            float *K = kc + ((size_t)b * H + h) * cap * D, *V = vc + ((size_t)b * H + h) * cap * D;
            const float *q = qkv + (size_t)b * T * 3 * d + h * D;
            for (int t = 0; t < T; t++) {   /* append this chunk's keys and values to the cache */
                memcpy(K + (size_t)(t0 + t) * D, q + (size_t)t * 3 * d + d, D * sizeof(float));
                memcpy(V + (size_t)(t0 + t) * D, q + (size_t)t * 3 * d + 2 * d, D * sizeof(float));
            }
            /* scores = Q K^T / sqrt(D), [T, P]; row t sees positions 0 .. t0+t */
            float *Sc = scratch;
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, T, P, D, scale, q, 3 * d, K, D, 0.0f, Sc, P);
            for (int t = 0; t < T; t++) {
                float *row = Sc + (size_t)t * P;
                int n = t0 + t + 1;
                float mx = row[0];
                for (int j = 1; j < n; j++) mx = row[j] > mx ? row[j] : mx;
                float sum = 0;
                for (int j = 0; j < n; j++) { row[j] = expf(row[j] - mx); sum += row[j]; }
                float inv = 1.0f / sum;
                for (int j = 0; j < n; j++) row[j] *= inv;
                for (int j = n; j < P; j++) row[j] = 0;   /* causal mask */
            }
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, T, D, P, 1.0f, Sc, P, V, D, 0.0f,
                        out + (size_t)b * T * d + h * D, d);
        }
}
