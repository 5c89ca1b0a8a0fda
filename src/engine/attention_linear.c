/* Causal linear attention ("Transformers are RNNs", section 3.2 and 3.4).
 * phi(u) = elu(u) + 1. Per head, with S = sum phi(k_j) v_j^T and z = sum phi(k_j) over j <= i:
 *     out_i = phi(q_i)^T S / (phi(q_i)^T z + eps)
 * One position at a time this is the RNN: S and z are the whole memory. Several positions
 * at once use the chunked form, which gives the same numbers. */
#include <cblas.h>
#include <string.h>

#include "attention.h"
#include "kernels/fastexp.h"
#include "kernels/matmul.h"
#include "kernels/threads.h"

#define CHUNK 64
#define STEP_ALONE_FLOATS 32768   /* a step's state below this many floats: on the caller alone */

/* phi(u) = elu(u) + 1: u + 1 above 0, exp(u) at or below. */
static inline float phi(float u) {
    float e = exp_nonpositive(u < 0 ? u : 0);   /* both sides, then a select: no branch */
    return u > 0 ? u + 1.0f : e;
}

static inline void phi_row(float *restrict out, const float *restrict u, int n) {
    #pragma omp simd
    for (int a = 0; a < n; a++) out[a] = phi(u[a]);
}

size_t linear_attention_scratch(const Config *c, int T) {
    int n = T < CHUNK ? T : CHUNK;
    return (size_t)3 * n * c->d_head + (size_t)n * n + n;   /* Q, K, V of a chunk, A, den */
}

double linear_attention_flops(const Config *c, int T) {
    double H = c->n_heads, D = c->d_head, f = 0;
    if (T == 1) return c->seq_len * H * 4 * D * D;   /* S update and readout, per position */
    for (int t0 = 0; t0 < c->seq_len; t0 += T) {   /* calls */
        int len = c->seq_len - t0 < T ? c->seq_len - t0 : T;
        for (int t = 0; t < len; t += CHUNK) {
            double n = len - t < CHUNK ? len - t : CHUNK;
            f += H * (2 * n * n * D * 2 + 2 * n * D * D * 2);   /* QK^T, AV; QS, K^T V */
        }
    }
    return f;
}

/* The RNN step (paper eq. 16-20):
 *     S_i = S_i-1 + phi(k_i) v_i^T,   z_i = z_i-1 + phi(k_i),
 *     out_i = phi(q_i)^T S_i / (phi(q_i)^T z_i + eps).   */
static inline __attribute__((always_inline)) void step(const int D, float *restrict S, float *restrict z,
        const float *restrict q, const float *restrict k, const float *restrict v, float *restrict out) {
    float pq[D], pk[D];   /* D is the head width: small */
    phi_row(pq, q, D);
    phi_row(pk, k, D);
    float den = 0;
    for (int a = 0; a < D; a++) { z[a] += pk[a]; den += pq[a] * z[a]; }
    /* Rows of S in pairs, each updated and then read out (one pass over S). The readout sums over
     * the rows one add after another: two sums, of the even and the odd rows, halve the chain of
     * dependent adds it waits on (docs/speed.md, Where the time goes). */
    float even[D], odd[D];
    for (int e = 0; e < D; e++) even[e] = odd[e] = 0;
    int a = 0;
    for (; a + 1 < D; a += 2) {
        float *restrict Sa = S + a * D, *restrict Sb = Sa + D;
        float ka = pk[a], qa = pq[a], kb = pk[a + 1], qb = pq[a + 1];
        for (int e = 0; e < D; e++) {
            Sa[e] += ka * v[e];
            even[e] += qa * Sa[e];
            Sb[e] += kb * v[e];
            odd[e] += qb * Sb[e];
        }
    }
    if (a < D) {   /* an odd head width's last row */
        float *restrict Sa = S + a * D;
        for (int e = 0; e < D; e++) {
            Sa[e] += pk[a] * v[e];
            even[e] += pq[a] * Sa[e];
        }
    }
    float inv = 1.0f / (den + LINEAR_EPS);
    for (int e = 0; e < D; e++) out[e] = (even[e] + odd[e]) * inv;
}

/* n positions at once (rows of q, k, v and out are `ld` apart):
 *     out = ((phi(Q) phi(K)^T * mask) V + phi(Q) S) / (rowsum(phi(Q) phi(K)^T * mask) + phi(Q) z + eps)
 * then the state absorbs the chunk: S += phi(K)^T V, z += colsum(phi(K)). */
static void chunk(int D, int n, float *S, float *z, const float *q, const float *k, const float *v,
                  int ld, float *out, int ldo, float *work) {
    float *Q = work, *K = Q + n * D, *V = K + n * D, *A = V + n * D, *den = A + n * n;
    for (int i = 0; i < n; i++) {
        phi_row(Q + i * D, q + (size_t)i * ld, D);
        phi_row(K + i * D, k + (size_t)i * ld, D);
        memcpy(V + i * D, v + (size_t)i * ld, D * sizeof *V);
    }
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, n, n, D, 1.0f, Q, D, K, D, 0.0f, A, n);
    for (int i = 0; i < n; i++) {
        float s = 0;
        #pragma omp simd reduction(+ : s)
        for (int j = 0; j <= i; j++) s += A[i * n + j];
        for (int j = i + 1; j < n; j++) A[i * n + j] = 0;   /* causal mask */
        #pragma omp simd reduction(+ : s)
        for (int a = 0; a < D; a++) s += Q[i * D + a] * z[a];
        den[i] = s;
    }
    /* numerator: phi(Q) S (earlier chunks) + masked A V (this chunk), written into out */
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, D, D, 1.0f, Q, D, S, D, 0.0f, out, ldo);
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, D, n, 1.0f, A, n, V, D, 1.0f, out, ldo);
    for (int i = 0; i < n; i++) {
        float inv = 1.0f / (den[i] + LINEAR_EPS);
        for (int e = 0; e < D; e++) out[(size_t)i * ldo + e] *= inv;
    }
    cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, D, D, n, 1.0f, K, D, V, D, 1.0f, S, D);
    for (int i = 0; i < n; i++)
        for (int a = 0; a < D; a++) z[a] += K[i * D + a];
}

typedef struct {
    const Config *c;
    float *S, *z, *out, *scratch;
    uint16_t *out16;
    const float *qkv;
    int T, pairs, per_item;   /* (image, head) pairs, and how many one parallel item takes */
    size_t per_thread;
} Attn;

static void attention_item(void *ctx, int item, int thread) {
    const Attn *a = ctx;
    int H = a->c->n_heads, D = a->c->d_head, d = a->c->d, T = a->T;
    Slice sl = item_slice(item, a->per_item, a->pairs);
    for (int bh = sl.lo; bh < sl.hi; bh++) {
        int b = bh / H, h = bh % H;
        float *Sbh = a->S + (size_t)bh * D * D, *zbh = a->z + (size_t)bh * D;
        const float *q = a->qkv + (size_t)b * T * 3 * d + h * D, *k = q + d, *v = q + 2 * d;
        float *o = a->out + (size_t)b * T * d + h * D;
        if (T == 1) {   /* the paper's head width as a constant: out and v stay in registers */
            if (D == 32) step(32, Sbh, zbh, q, k, v, o);
            else step(D, Sbh, zbh, q, k, v, o);
            continue;
        }
        for (int t = 0; t < T; t += CHUNK) {
            int n = T - t < CHUNK ? T - t : CHUNK;
            size_t r = (size_t)t * 3 * d;
            chunk(D, n, Sbh, zbh, q + r, k + r, v + r, 3 * d, o + (size_t)t * d, d,
                  a->scratch + thread * a->per_thread);
        }
    }
    if (a->out16) {   /* a step's outputs of this item's pairs are one run: pair bh at bh * D */
        int bh0 = item * a->per_item, bh1 = bh0 + a->per_item < a->pairs ? bh0 + a->per_item : a->pairs;
        matmul_round_bf16(a->out16 + (size_t)bh0 * D, a->out + (size_t)bh0 * D, (bh1 - bh0) * D);
    }
}

void linear_attention(const Config *c, float *S, float *z, const float *qkv, float *out, uint16_t *out16,
                      int B, int T, float *scratch) {
    int pairs = B * c->n_heads;
    /* A step's pair is little work: take several at once, about 8 items per thread. */
    int per_item = T > 1 ? 1 : pairs / (8 * threads_count());
    if (per_item < 1) per_item = 1;
    Attn a = {c, S, z, out, scratch, T == 1 ? out16 : NULL, qkv, T, pairs, per_item, linear_attention_scratch(c, T)};
    int items = items_of(pairs, per_item);
    /* A step's state of a few tens of KB (batch 1 to 3 of 8 heads of 32) is less work than
     * handing it out to the other threads costs, and its S then stays in the caller's cache
     * (docs/speed.md, Memory: batch 1). */
    parallel_for_if(T > 1 || (size_t)pairs * c->d_head * c->d_head >= STEP_ALONE_FLOATS, items, attention_item, &a,
                    (double)pairs * T);
}
