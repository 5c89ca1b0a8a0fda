/* The device functions that the kernels of kernels.cu, products.cu and step.cu share: warp
 * sums, a few-row product's dots, a row's embedding and layer norm, the [hi lo] halves of a
 * value, a row's residual, the activation, one warp's linear attention of a head, a query's
 * softmax attention and an image's draw. Included by those three files only, so each compiles
 * its own copy (no -rdc). */
#ifndef LINGEN_CUDA_DEVICE_CUH
#define LINGEN_CUDA_DEVICE_CUH
#include <cuda_fp16.h>
#include <math.h>

#include "lingen_cuda.h"
extern "C" {
#include "engine/dmol_draw.h"   /* the CPU's own sampler source; like lingen_cuda.h, free of -march */
}

__device__ __forceinline__ float warp_sum(float v) {
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}
__device__ __forceinline__ float warp_max(float v) {
    for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
    return v;
}

#define PREFETCH 8   /* float4s of its weight row a lane loads ahead of the product's input */

/* acc[r] += wi . float4 i of X's row r, for the rows < rows. */
template <int R>
__device__ __forceinline__ void dot4(float (&acc)[R], float4 wi, const float *X, int rows, int n_in, int i) {
#pragma unroll
    for (int r = 0; r < R; r++)
        if (r < rows) {
            float4 xi = *(const float4 *)(X + (size_t)r * n_in + 4 * i);
            acc[r] += wi.x * xi.x + wi.y * xi.y + wi.z * xi.z + wi.w * xi.w;
        }
}

/* The first PREFETCH float4s of a lane's part of a weight row of n4 float4s (lane, lane + 32,
 * ...); nothing when !on. Weights are never written, so they load before the input is ready. */
__device__ __forceinline__ void prefetch_row(float4 (&pre)[PREFETCH], const float4 *w4, int n4, int lane, bool on) {
#pragma unroll
    for (int k = 0; k < PREFETCH; k++)
        if (on && lane + 32 * k < n4) pre[k] = w4[lane + 32 * k];
}

/* acc[r] = a lane's share of X's row r . the weight row w4 (n_in % 4 == 0), rows < rows: the
 * prefetched float4s, then the rest, in the order of their index; warp_sum adds the shares. One
 * function for every few-row product, so that all of them round alike. */
template <int R>
__device__ __forceinline__ void row_dots(float (&acc)[R], const float4 (&pre)[PREFETCH], const float4 *w4,
                                         const float *X, int rows, int n_in, int lane) {
    int n4 = n_in / 4;
#pragma unroll
    for (int r = 0; r < R; r++) acc[r] = 0;
#pragma unroll
    for (int k = 0; k < PREFETCH; k++)
        if (lane + 32 * k < n4) dot4(acc, pre[k], X, rows, n_in, lane + 32 * k);
    for (int i = lane + 32 * PREFETCH; i < n4; i += 32) dot4(acc, w4[i], X, rows, n_in, i);
}

/* A row of x: concat(emb[k], pe[t]), its values i0, i0 + step, ... of each half; the token k
 * clamped (the host checks tokens: never read outside) and t past the last position the last. */
__device__ __forceinline__ void embed_row(float *xr, const float *emb, const float *pe, int k, int t, int d, int N,
                                          int i0, int step) {
    int h = d / 2;
    k = k < 0 ? 0 : k > BOS_TOKEN ? BOS_TOKEN : k;
    t = t < N ? t : N - 1;
    for (int i = i0; i < h; i += step) {
        xr[i] = emb[(size_t)k * h + i];
        xr[h + i] = pe[(size_t)t * h + i];
    }
}

/* One warp per row: mean, then the variance of the deviations (as layernorm_row), then the
 * normalized row. The warp's lanes each own the same columns in every pass. */
static __device__ void ln_row(float *o, const float *x, const float *w, const float *b, int d, int lane) {
    float s = 0;
    for (int i = lane; i < d; i += 32) s += x[i];
    float mean = warp_sum(s) / d, v = 0;
    for (int i = lane; i < d; i += 32) v += (x[i] - mean) * (x[i] - mean);
    float inv = 1.0f / sqrtf(warp_sum(v) / d + LN_EPS);
    for (int i = lane; i < d; i += 32) o[i] = (x[i] - mean) * inv * w[i] + b[i];
}

/* Value c of a row of n, as the next product's input: [hi lo] halves in the row of 2n (linear(),
 * products.cu). */
__device__ __forceinline__ void put_split(__half *row2, int n, int c, float v) {
    __half hi = __float2half_rn(v);
    row2[c] = hi;
    row2[n + c] = __float2half_rn(v - __half2float(hi));
}

/* One warp, one row of d: x += y + bias, then (post-norm) x = LN(x) with (w, b); with x2r also
 * x as the next product's halves; with fw, also xn = LN_final(x). y is read through L2
 * (__ldcg): other blocks of a product wrote it. */
static __device__ void residual_row(float *xr, const float *yr, const float *bias, const float *w, const float *b, int d,
                             int post, __half *x2r, const float *fw, const float *fb, float *xnr, int lane) {
    for (int i = lane; i < d; i += 32) xr[i] += __ldcg(yr + i) + bias[i];
    __syncwarp();
    if (post) ln_row(xr, xr, w, b, d, lane);
    __syncwarp();
    if (x2r)
        for (int i = lane; i < d; i += 32) put_split(x2r, d, i, xr[i]);
    if (fw) ln_row(xnr, xr, fw, fb, d, lane);
}

__device__ __forceinline__ float activate(float v, int gelu) {   /* relu, or the exact gelu */
    return gelu ? 0.5f * v * (1.0f + erff(v * 0.70710678118654752f)) : (v > 0 ? v : 0);
}

/* phi(u) = elu(u) + 1, as attention_linear.c: u + 1 above 0, exp(u) at or below. */
__device__ __forceinline__ float phi(float u) { return u > 0 ? u + 1.0f : expf(fminf(u, 0.0f)); }

/* linear_attention_kernel's RNN for one (image, head) pair of head width 32, by one warp: lane e
 * holds column e of S, the others' values come by shuffles; the same sums in the same order. */
static __device__ void attention_pair_warp(float *Sp, float *zp, const float *qkv, const float *qkv_b, float *out, int b,
                                    int h, int T, int d, int lane) {
    float Sc[32], zc = zp[lane];
#pragma unroll
    for (int a = 0; a < 32; a++) Sc[a] = Sp[a * 32 + lane];
    float bq = qkv_b[h * 32 + lane], bk = qkv_b[d + h * 32 + lane], bv = qkv_b[2 * d + h * 32 + lane];
    for (int t = 0; t < T; t++) {
        size_t row = (size_t)b * T + t;
        const float *base = qkv + row * 3 * d + h * 32;
        float q = phi(__ldcg(base + lane) + bq), k = phi(__ldcg(base + d + lane) + bk), v = __ldcg(base + 2 * d + lane) + bv;
        zc += k;
        float den = 0, num = 0;
#pragma unroll
        for (int a = 0; a < 32; a++) {
            float qa = __shfl_sync(0xffffffffu, q, a);
            den += qa * __shfl_sync(0xffffffffu, zc, a);
            Sc[a] += __shfl_sync(0xffffffffu, k, a) * v;
            num += qa * Sc[a];
        }
        out[row * d + h * 32 + lane] = num / (den + LINEAR_EPS);
    }
#pragma unroll
    for (int a = 0; a < 32; a++) Sp[a * 32 + lane] = Sc[a];
    zp[lane] = zc;
}

/* The block's max (is_max) or sum of v, every thread of the block taking part; red: 32 floats of
 * shared memory. */
static __device__ float block_reduce(float v, float *red, bool is_max) {
    int lane = threadIdx.x & 31, w = threadIdx.x / 32, nw = blockDim.x / 32;
    v = is_max ? warp_max(v) : warp_sum(v);
    __syncthreads();   /* red may still be read from the last call */
    if (lane == 0) red[w] = v;
    __syncthreads();
    float r = red[0];
    for (int i = 1; i < nw; i++) r = is_max ? fmaxf(r, red[i]) : r + red[i];
    return r;
}

#define SOFTMAX_THREADS 128   /* the threads of a block that run a query's softmax attention */

/* o[D] = softmax(q K^T / sqrt(D)) V over the keys 0..p of one head's cache rows K, V (D floats a
 * position), q[D] + qb[D] the query, by the block's first SOFTMAX_THREADS threads. Threads past
 * them only join the barriers and reductions, with values that change no sum or max, so a block
 * of any size computes the same values. sh: cap + D + SOFTMAX_THREADS floats of shared memory
 * (the scores, the query, partial sums), red: 32. q is read through L2 (another block may have
 * written it). */
static __device__ void softmax_query(float *o, const float *q, const float *qb, const float *K, const float *V, int p,
                                     int D, int cap, float *sh, float *red) {
    const int nt = SOFTMAX_THREADS;
    float *sc = sh, *sq = sh + cap, *part = sq + D;
    int tid = threadIdx.x;
    bool mine = tid < nt;
    if (mine)
        for (int e = tid; e < D; e += nt) sq[e] = __ldcg(q + e) + qb[e];
    __syncthreads();
    float scale = 1.0f / sqrtf((float)D), mx = -INFINITY;
    if (mine)
        for (int j = tid; j <= p; j += nt) {
            float s = 0;
            for (int e = 0; e < D; e++) s += sq[e] * K[(size_t)j * D + e];
            sc[j] = scale * s;
            mx = fmaxf(mx, sc[j]);
        }
    mx = block_reduce(mx, red, true);
    float sum = 0;
    if (mine)
        for (int j = tid; j <= p; j += nt) {
            sc[j] = expf(sc[j] - mx);
            sum += sc[j];
        }
    sum = block_reduce(sum, red, false);   /* its barrier also publishes sc */
    float inv = 1.0f / sum;
    int G = nt / D;                         /* groups of D threads split the keys */
    int e = tid % D, g = tid / D;
    float acc = 0;
    if (mine && g < G)
        for (int j = g; j <= p; j += G) acc += sc[j] * V[(size_t)j * D + e];
    if (mine) part[tid] = acc;
    __syncthreads();
    if (tid < D) {
        float s = 0;
        for (int k = 0; k < G; k++) s += part[k * D + tid];
        o[tid] = s * inv;
    }
}

/* Image b's value at position p, drawn from its head outputs out[b] (3M) with its stream: into
 * the image while p is one of its N positions, and the next step's token. */
__device__ __forceinline__ void draw_value(const float *out, int M, Rng *rng, unsigned char *img, int *tok, int b, int p,
                                           int N) {
    int x = dmol_draw(out + (size_t)b * 3 * M, M, 1.0, &rng[b]);
    if (p >= 0 && p < N) img[(size_t)b * N + p] = (unsigned char)x;
    tok[b] = x;
}

#endif
