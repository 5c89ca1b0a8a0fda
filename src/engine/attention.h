/* Causal attention over T new positions of B sequences, continuing from the memory of the
 * t0 positions before them. qkv [B][T][3d] (q | k | v, head h owns columns h*D..h*D+D-1 of
 * each) -> out [B][T][d]. The memory is extended by the T positions. The (image, head) pairs
 * are shared among lingen's threads (threads.h); scratch holds one *_scratch()-sized slice per thread. */
#ifndef LINGEN_ATTENTION_H
#define LINGEN_ATTENTION_H
#include <stddef.h>
#include "model.h"

/* Linear attention (paper eq. 10-12 / 16-20), phi(u) = elu(u) + 1:
 *   S_t = S_t-1 + phi(k_t) v_t^T,  z_t = z_t-1 + phi(k_t),
 *   out_t = phi(q_t)^T S_t / (phi(q_t)^T z_t + eps).
 * T > 1 uses the chunked form: masked product inside a chunk, the state between chunks.
 * S [B][H][D][D], z [B][H][D] for this layer. out16: or NULL, at a step (T = 1) out rounded to
 * bfloat16 too, for the next product (matmul.h's Rounded). */
void linear_attention(const Config *c, float *S, float *z, const float *qkv, float *out, uint16_t *out16,
                      int B, int T, float *scratch);
size_t linear_attention_scratch(const Config *c, int T);   /* floats */
/* Arithmetic (FLOPs, a multiply-add counts 2) of one layer's attention over one image's whole
 * sequence, run T positions per call: what the products compute, masked parts included. */
double linear_attention_flops(const Config *c, int T);

/* Softmax attention with a KV cache kc, vc [B][H][cap][D] for this layer, scale 1/sqrt(D). */
void softmax_attention(const Config *c, float *kc, float *vc, int cap, int t0, const float *qkv,
                       float *out, int B, int T, float *scratch);
size_t softmax_attention_scratch(const Config *c, int T, int cap);
double softmax_attention_flops(const Config *c, int T);
#endif
