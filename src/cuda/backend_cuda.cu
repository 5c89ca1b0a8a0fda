/* The CUDA backend: transformer.c's forward pass, the two attentions and the DMOL sampler on
 * one GPU (lingen_cuda.h). Layout and arithmetic follow the CPU code:
 *   - Linear layers: y = x W^T, W row-major [out, in], as the model file holds it. A weight
 *     whose every value is a half (the model files hold F16) runs on the FP16 tensor cores
 *     without losing float32's accuracy: x = hi + lo, two halves (hi = half(x), lo = half(x - hi)),
 *     so x W^T = [hi lo] [W W]^T, one GEMM of twice the depth accumulated in float32; what is
 *     lost is lo's rounding, |x| 2^-22 at most (2^-24 would be float32's own). Other weights:
 *     cuBLAS SGEMM in plain FP32 (no TF32: the head outputs must match the CPU's to 1e-4). At
 *     most 8 rows (a step at batch 1..8: latency): a warp-per-output kernel on the float weights.
 *     The bias is added by the kernel that consumes the product (one pass fewer).
 *   - Linear attention: one (image, head) pair per D threads, S's column e in thread e's
 *     registers, the positions in order (the RNN, also for the parallel form: the same sums as
 *     the chunked form up to rounding). Softmax: the new keys and values appended to the cache;
 *     a step (one position) then runs one block per (image, head) over its prefix, several
 *     positions at once (evaluation, a prefix) run as attention_softmax.c does, a head and a
 *     block of queries at a time: scores and their sum of values by cuBLAS SGEMM, batched over
 *     the images, the masked softmax between them.
 *   - The sampler: dmol_draw.h, the CPU's own source (double arithmetic, rng.h's PCG32 streams),
 *     one thread per image.
 * The current position lives in GPU memory and each forward ends by advancing it, so one CUDA
 * graph of a whole step (every layer, the head, the sampler) replays for every position. */
#include <cublas_v2.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lingen_cuda.h"   /* what the two halves share; like it, the two below depend on no -march */
extern "C" {
#include "../dmol_draw.h"
}

/* ---------------------------------------------------------------- error checks */

/* The first failure of a call, as "file:line: call: error" (later ones would only repeat it). */
static char first_error[512];
static int failed;

static bool note(bool ok, const char *what, const char *why, const char *file, int line) {
    if (!ok && !failed) {
        snprintf(first_error, sizeof first_error, "%s:%d: %s: %s", file, line, what, why);
        failed = 1;
    }
    return ok;
}
#define CK(x) note_cuda((x), #x, __FILE__, __LINE__)
#define CKB(x) note_cublas((x), #x, __FILE__, __LINE__)
#define CKL(what) note_cuda(cudaGetLastError(), what, __FILE__, __LINE__)   /* after a launch */

static bool note_cuda(cudaError_t r, const char *what, const char *file, int line) {
    return note(r == cudaSuccess, what, cudaGetErrorString(r), file, line);
}
static bool note_cublas(cublasStatus_t r, const char *what, const char *file, int line) {
    return note(r == CUBLAS_STATUS_SUCCESS, what, cublasGetStatusString(r), file, line);
}
/* Returns -1 with the recorded failure in e, and clears it for the next run. */
static int take_error(Err *e) {
    err_set(e, "CUDA: %s", failed ? first_error : "unknown failure");
    failed = 0;
    return -1;
}

extern "C" int cuda_probe(Err *e) {
    int n = 0;
    cudaError_t r = cudaGetDeviceCount(&n);
    if (r != cudaSuccess) return err_set(e, "no CUDA device: %s", cudaGetErrorString(r));
    if (n < 1) return err_set(e, "no CUDA device");
    return 0;
}

extern "C" int cuda_use_device(int index, Err *e) {
    int n = 0;
    cudaError_t r = cudaGetDeviceCount(&n);
    if (r == cudaSuccess && n < 1) return err_set(e, "no CUDA device");
    if (r == cudaSuccess) r = cudaSetDevice(index % n);
    if (r != cudaSuccess) return err_set(e, "cannot use CUDA device %d: %s", n > 0 ? index % n : index, cudaGetErrorString(r));
    return 0;
}

/* ---------------------------------------------------------------- device code */

#define LN_THREADS 256     /* 8 rows (warps) per block */
#define SMALL_ROWS 8       /* at most this many rows: small_linear_kernel (its RESIDUAL: a warp a row of one block) */
#define SOFTMAX_THREADS 128
#define QBLOCK 256                 /* softmax, several positions: queries a block (attention_softmax.c's 64) */
#define SCORES_BYTES (512u << 20)  /* ... and at most this much of their scores at once */

__device__ __forceinline__ float warp_sum(float v) {
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}
__device__ __forceinline__ float warp_max(float v) {
    for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
    return v;
}

/* x[r] = concat(emb[token], pe[t0 + r % T]); t0 = *pos. */
__global__ void embed_kernel(float *x, const int *tok, const float *emb, const float *pe, const int *pos,
                             int rows, int T, int d, int N) {
    int r = blockIdx.x, h = d / 2;
    if (r >= rows) return;
    int t = *pos + r % T, k = tok[r];
    k = k < 0 ? 0 : k > BOS_TOKEN ? BOS_TOKEN : k;   /* the host checks tokens; never read outside */
    t = t < N ? t : N - 1;
    for (int i = threadIdx.x; i < h; i += blockDim.x) {
        x[(size_t)r * d + i] = emb[(size_t)k * h + i];
        x[(size_t)r * d + h + i] = pe[(size_t)t * h + i];
    }
}

/* One warp per row: mean, then the variance of the deviations (as layernorm_row), then the
 * normalized row. The warp's lanes each own the same columns in every pass. */
__device__ void ln_row(float *o, const float *x, const float *w, const float *b, int d, int lane) {
    float s = 0;
    for (int i = lane; i < d; i += 32) s += x[i];
    float mean = warp_sum(s) / d, v = 0;
    for (int i = lane; i < d; i += 32) v += (x[i] - mean) * (x[i] - mean);
    float inv = 1.0f / sqrtf(warp_sum(v) / d + LN_EPS);
    for (int i = lane; i < d; i += 32) o[i] = (x[i] - mean) * inv * w[i] + b[i];
}

__global__ void layernorm_kernel(float *out, const float *x, const float *w, const float *b, int rows, int d) {
    int r = blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32;
    if (r >= rows) return;
    ln_row(out + (size_t)r * d, x + (size_t)r * d, w, b, d, threadIdx.x & 31);
}

/* Value c of a row of n, as the next product's input: [hi lo] halves in the row of 2n (the header). */
__device__ __forceinline__ void put_split(__half *row2, int n, int c, float v) {
    __half hi = __float2half_rn(v);
    row2[c] = hi;
    row2[n + c] = __float2half_rn(v - __half2float(hi));
}

/* One warp, one row of d: x += y + bias, then (post-norm) x = LN(x) with (w, b); with x2r also
 * x as the next product's halves; with fw, also xn = LN_final(x). y is read through L2
 * (__ldcg): other blocks of a product wrote it. */
__device__ void residual_row(float *xr, const float *yr, const float *bias, const float *w, const float *b, int d,
                             int post, __half *x2r, const float *fw, const float *fb, float *xnr, int lane) {
    for (int i = lane; i < d; i += 32) xr[i] += __ldcg(yr + i) + bias[i];
    __syncwarp();
    if (post) ln_row(xr, xr, w, b, d, lane);
    __syncwarp();
    if (x2r)
        for (int i = lane; i < d; i += 32) put_split(x2r, d, i, xr[i]);
    if (fw) ln_row(xnr, xr, fw, fb, d, lane);
}

/* residual_row for every row, a warp each. */
__global__ void residual_kernel(float *x, const float *y, const float *bias, const float *w, const float *b,
                                int rows, int d, int post, __half *x2, const float *fw, const float *fb, float *xn) {
    int r = blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32;
    if (r >= rows) return;
    size_t at = (size_t)r * d;
    residual_row(x + at, y + at, bias, w, b, d, post, x2 ? x2 + 2 * at : NULL, fw, fb, xn ? xn + at : NULL,
                 threadIdx.x & 31);
}

/* LN of a row held as V float4s a lane (lane e: float4s e, e + 32, ...), in place; s: this
 * lane's sum of its values. */
template <int V>
__device__ __forceinline__ void ln_row4(float4 (&v)[V], float s, const float *g, const float *c, int lane) {
    constexpr int d = 128 * V;
    float mean = warp_sum(s) / d, q = 0;
#pragma unroll
    for (int j = 0; j < V; j++) {
        float4 t = v[j];
        q += ((t.x - mean) * (t.x - mean) + (t.y - mean) * (t.y - mean)) +
             ((t.z - mean) * (t.z - mean) + (t.w - mean) * (t.w - mean));
    }
    float inv = 1.0f / sqrtf(warp_sum(q) / d + LN_EPS);
#pragma unroll
    for (int j = 0; j < V; j++) {
        int i = lane + 32 * j;
        float4 t = v[j], gg = ((const float4 *)g)[i], cc = ((const float4 *)c)[i];
        v[j] = make_float4((t.x - mean) * inv * gg.x + cc.x, (t.y - mean) * inv * gg.y + cc.y,
                           (t.z - mean) * inv * gg.z + cc.z, (t.w - mean) * inv * gg.w + cc.w);
    }
}
__device__ __forceinline__ float sum4(float4 t) { return (t.x + t.y) + (t.z + t.w); }

/* residual_row for rows of d = 128 V (the large batches' rows), the row in registers: x read
 * once and written once, 16 bytes at a time. The sums run in another order than
 * residual_row's: the same to float32 rounding. */
template <int V>
__global__ void residual_vec_kernel(float *x, const float *y, const float *bias, const float *w, const float *b,
                                    int rows, int post, __half *x2, const float *fw, const float *fb, float *xn) {
    constexpr int d = 128 * V;
    int r = blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32, lane = threadIdx.x & 31;
    if (r >= rows) return;
    size_t at = (size_t)r * d;
    float4 *xr = (float4 *)(x + at), v[V];
    float s = 0;
#pragma unroll
    for (int j = 0; j < V; j++) {
        int i = lane + 32 * j;
        float4 a = xr[i], c = __ldcg((const float4 *)(y + at) + i), e = ((const float4 *)bias)[i];
        v[j] = make_float4(a.x + (c.x + e.x), a.y + (c.y + e.y), a.z + (c.z + e.z), a.w + (c.w + e.w));
        s += sum4(v[j]);
    }
    if (post) {
        ln_row4<V>(v, s, w, b, lane);
        s = 0;
#pragma unroll
        for (int j = 0; j < V; j++) s += sum4(v[j]);
    }
#pragma unroll
    for (int j = 0; j < V; j++) {
        int i = lane + 32 * j;
        xr[i] = v[j];
        if (x2) {
            __half *row2 = x2 + 2 * at;
            put_split(row2, d, 4 * i, v[j].x), put_split(row2, d, 4 * i + 1, v[j].y);
            put_split(row2, d, 4 * i + 2, v[j].z), put_split(row2, d, 4 * i + 3, v[j].w);
        }
    }
    if (fw) {
        ln_row4<V>(v, s, fw, fb, lane);
#pragma unroll
        for (int j = 0; j < V; j++) ((float4 *)(xn + at))[lane + 32 * j] = v[j];
    }
}

__device__ __forceinline__ float activate(float v, int gelu);
/* h = act(h + bias): relu, or the exact gelu; with x2, written there as halves instead. Columns
 * W c .. W c + W - 1 of row blockIdx.y (and every gridDim.y-th row after): no division to find
 * them. W = 2 (d_ff even): 8-byte loads, both halves of a pair converted and stored at once. */
template <int W>
__global__ void activation_kernel(float *h, const float *bias, int rows, int dff, int gelu, __half *x2) {
    int c = W * (blockIdx.x * blockDim.x + threadIdx.x);
    if (c >= dff) return;
    for (int r = blockIdx.y; r < rows; r += gridDim.y) {
        size_t at = (size_t)r * dff;
        if constexpr (W == 2) {
            float2 hv = *(const float2 *)(h + at + c), bc = *(const float2 *)(bias + c);
            float v0 = activate(hv.x + bc.x, gelu), v1 = activate(hv.y + bc.y, gelu);
            if (x2) {   /* put_split of both */
                __half2 hi = __floats2half2_rn(v0, v1);
                float2 hf = __half22float2(hi);
                *(__half2 *)(x2 + 2 * at + c) = hi;
                *(__half2 *)(x2 + 2 * at + dff + c) = __floats2half2_rn(v0 - hf.x, v1 - hf.y);
            } else
                *(float2 *)(h + at + c) = make_float2(v0, v1);
        } else {
            float v = activate(h[at + c] + bias[c], gelu);
            if (x2) put_split(x2 + 2 * at, dff, c, v);
            else h[at + c] = v;
        }
    }
}

/* out += bias; log-scales clamped below. */
__global__ void head_kernel(float *out, const float *bias, int rows, int M) {
    int i = blockIdx.x * blockDim.x + threadIdx.x, K = 3 * M;
    if (i >= rows * K) return;
    int k = i % K;
    float v = out[i] + bias[k];
    out[i] = k >= 2 * M && v < LOG_SCALE_MIN ? LOG_SCALE_MIN : v;
}

__global__ void advance_kernel(int *pos, int T) { *pos += T; }

__device__ __forceinline__ float activate(float v, int gelu) {   /* relu, or the exact gelu */
    return gelu ? 0.5f * v * (1.0f + erff(v * 0.70710678118654752f)) : (v > 0 ? v : 0);
}

/* What the small product does with its outputs (at most 8 rows: a step at batch 1..8, where
 * every launch is latency). ACT: y = act(y + bias). HEAD: y += bias, log-scales clamped below
 * (head_kernel). RESIDUAL: the last block to finish adds y + bias to x and normalizes the rows
 * (residual_kernel; with fw, also xn = LN_final(x)). ATTN (after the qkv product): the last
 * block runs the linear attention. A layer is then four launches instead of seven. */
enum { EPI_NONE, EPI_ACT, EPI_HEAD, EPI_RESIDUAL, EPI_ATTN };
struct Epi {
    int kind, gelu, post, M;
    const float *bias, *w, *b, *fw, *fb;   /* w, b: the layer's norm; fw, fb: the final norm, or NULL */
    float *x, *xn;
    unsigned *counter;                     /* blocks finished; the last one sets it back to 0 */
    __half *x2;                            /* large rows: the result also (ACT: only) as the next product's halves */
    float *S, *z, *out;                    /* ATTN: the layer's state, the attention's output */
    int H, T;
};

/* phi(u) = elu(u) + 1, as attention_linear.c: u + 1 above 0, exp(u) at or below. */
__device__ __forceinline__ float phi(float u) { return u > 0 ? u + 1.0f : expf(fminf(u, 0.0f)); }

/* linear_attention_kernel's RNN for one (image, head) pair of head width 32, by one warp: lane e
 * holds column e of S, the others' values come by shuffles; the same sums in the same order. */
__device__ void attention_pair_warp(float *Sp, float *zp, const float *qkv, const float *qkv_b, float *out, int b,
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

/* Y[rows, n_out] = X[rows, n_in] W^T for rows <= R: one warp per output column, W's row read
 * once; then the epilogue. Blocks of 8 warps: in RESIDUAL, warp r of the last block takes row r. */
template <int R>
__global__ void small_linear_kernel(float *Y, const float *X, const float *W, int rows, int n_in, int n_out, Epi epi) {
    int o = (int)(((size_t)blockIdx.x * blockDim.x + threadIdx.x) >> 5), lane = threadIdx.x & 31;
    if (o < n_out) {
        const float *w = W + (size_t)o * n_in;
        float acc[R];
#pragma unroll
        for (int r = 0; r < R; r++) acc[r] = 0;
        if (n_in % 4 == 0) {   /* 16-byte loads: a quarter of the dependent loads (latency) */
            for (int i = 4 * lane; i < n_in; i += 128) {
                float4 wi = *(const float4 *)(w + i);
#pragma unroll
                for (int r = 0; r < R; r++)
                    if (r < rows) {
                        float4 xi = *(const float4 *)(X + (size_t)r * n_in + i);
                        acc[r] += wi.x * xi.x + wi.y * xi.y + wi.z * xi.z + wi.w * xi.w;
                    }
            }
        } else
            for (int i = lane; i < n_in; i += 32) {
                float wi = w[i];
#pragma unroll
                for (int r = 0; r < R; r++)
                    if (r < rows) acc[r] += wi * X[(size_t)r * n_in + i];
            }
#pragma unroll
        for (int r = 0; r < R; r++) {
            float s = warp_sum(acc[r]);
            if (epi.kind == EPI_ACT) s = activate(s + epi.bias[o], epi.gelu);
            if (epi.kind == EPI_HEAD) {
                s += epi.bias[o];
                if (o >= 2 * epi.M && s < LOG_SCALE_MIN) s = LOG_SCALE_MIN;
            }
            if (lane == 0 && r < rows) Y[(size_t)r * n_out + o] = s;
        }
    }
    if (epi.kind != EPI_RESIDUAL && epi.kind != EPI_ATTN) return;
    __shared__ bool last;
    __threadfence();   /* this block's outputs, visible to every block before it is counted */
    __syncthreads();
    if (threadIdx.x == 0) last = atomicAdd(epi.counter, 1u) == gridDim.x - 1;
    __syncthreads();
    if (!last) return;
    int r = threadIdx.x >> 5;
    if (epi.kind == EPI_ATTN) {   /* the linear attention of every (image, head) pair, a warp each */
        int B = rows / epi.T, d = n_out / 3;
        for (int pair = r; pair < B * epi.H; pair += blockDim.x >> 5)
            attention_pair_warp(epi.S + (size_t)pair * 32 * 32, epi.z + (size_t)pair * 32, Y, epi.bias, epi.out,
                                pair / epi.H, pair % epi.H, epi.T, d, lane);
        if (threadIdx.x == 0) *epi.counter = 0;
        return;
    }
    if (r < rows) {
        size_t at = (size_t)r * n_out;
        residual_row(epi.x + at, Y + at, epi.bias, epi.w, epi.b, n_out, epi.post, NULL, epi.fw, epi.fb,
                     epi.fw ? epi.xn + at : NULL, lane);
    }
    if (threadIdx.x == 0) *epi.counter = 0;
}

/* X2[r] = [hi lo] of X[r] (n values each): hi = half(x), lo = half(x - hi), for the tensor-core
 * product (the header). Activations stay far inside the half range (65504): the inputs of the
 * products are layer-normed rows, attention outputs and the feed-forward's hidden values. */
__global__ void split_kernel(__half *X2, const float *X, int rows, int n) {
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < (size_t)rows * n) put_split(X2 + i / n * 2 * n, n, (int)(i % n), X[i]);
}

/* Linear attention over T positions in order, the RNN of attention_linear.c's step():
 *   S += phi(k) v^T,  z += phi(k),  out = phi(q)^T S / (phi(q)^T z + eps).
 * Block: P pairs (image, head) of D threads; thread e holds column e of its pair's S. */
template <int D>
__global__ void linear_attention_kernel(float *S, float *z, const float *qkv, const float *qkv_b, float *out,
                                        __half *out2, int B, int H, int T) {
    constexpr int P = D >= 128 ? 1 : 128 / D;
    __shared__ float sq[P][D], sk[P][D], sz[P][D];
    int y = threadIdx.y, e = threadIdx.x, d = H * D;
    int pair = blockIdx.x * P + y;
    bool live = pair < B * H;
    int b = live ? pair / H : 0, h = live ? pair % H : 0;
    float *Sp = S + (size_t)pair * D * D;
    float Sc[D];
    if (live) {
#pragma unroll
        for (int a = 0; a < D; a++) Sc[a] = Sp[(size_t)a * D + e];
        sz[y][e] = z[(size_t)pair * D + e];
    }
    float bq = qkv_b[h * D + e], bk = qkv_b[d + h * D + e], bv = qkv_b[2 * d + h * D + e];
    for (int t = 0; t < T; t++) {
        size_t row = (size_t)b * T + t;
        const float *base = qkv + row * 3 * d + h * D;
        float v = 0;
        if (live) {
            sq[y][e] = phi(base[e] + bq);
            sk[y][e] = phi(base[d + e] + bk);
            v = base[2 * d + e] + bv;
        }
        __syncthreads();
        if (live) sz[y][e] += sk[y][e];
        __syncthreads();
        if (live) {
            float den = 0, num = 0;
#pragma unroll
            for (int a = 0; a < D; a++) {
                den += sq[y][a] * sz[y][a];
                Sc[a] += sk[y][a] * v;
                num += sq[y][a] * Sc[a];
            }
            float o = num / (den + LINEAR_EPS);
            if (out2) put_split(out2 + row * 2 * d, d, h * D + e, o);   /* only the next product reads it */
            else out[row * d + h * D + e] = o;
        }
        __syncthreads();
    }
    if (live) {
#pragma unroll
        for (int a = 0; a < D; a++) Sp[(size_t)a * D + e] = Sc[a];
        z[(size_t)pair * D + e] = sz[y][e];
    }
}

/* Softmax, part 1: append the T new keys and values (with their bias) at positions t0.. */
__global__ void kv_append_kernel(float *kc, float *vc, const float *qkv, const float *qkv_b, const int *pos,
                                 int B, int T, int H, int D, int cap) {
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    int d = H * D;
    if (i >= (size_t)B * T * d) return;
    int c = (int)(i % d);
    size_t row = i / d;
    int b = (int)(row / T), t = (int)(row % T), h = c / D, e = c % D, p = *pos + t;
    if (p >= cap) return;
    size_t at = (((size_t)b * H + h) * cap + p) * D + e;
    kc[at] = qkv[row * 3 * d + d + c] + qkv_b[d + c];
    vc[at] = qkv[row * 3 * d + 2 * d + c] + qkv_b[2 * d + c];
}

__device__ float block_reduce(float v, float *red, bool is_max) {
    int lane = threadIdx.x & 31, w = threadIdx.x / 32, nw = blockDim.x / 32;
    v = is_max ? warp_max(v) : warp_sum(v);
    __syncthreads();   /* red may still be read from the last call */
    if (lane == 0) red[w] = v;
    __syncthreads();
    float r = red[0];
    for (int i = 1; i < nw; i++) r = is_max ? fmaxf(r, red[i]) : r + red[i];
    return r;
}

/* Softmax, part 2: one block per (row, head): the query at position p = t0 + t against the keys
 * 0..p, scale 1/sqrt(D). Shared: the p+1 scores, the query, partial sums. */
__global__ void softmax_attention_kernel(const float *kc, const float *vc, const float *qkv, const float *qkv_b,
                                         float *out, const int *pos, int T, int H, int D, int cap) {
    extern __shared__ float sh[];
    float *sc = sh, *sq = sh + cap, *part = sq + D;   /* part: SOFTMAX_THREADS floats */
    __shared__ float red[32];
    int row = blockIdx.x / H, h = blockIdx.x % H, b = row / T, t = row % T, d = H * D, tid = threadIdx.x;
    int p = *pos + t;
    if (p >= cap) p = cap - 1;
    const float *K = kc + ((size_t)b * H + h) * cap * D, *V = vc + ((size_t)b * H + h) * cap * D;
    for (int e = tid; e < D; e += blockDim.x) sq[e] = qkv[(size_t)row * 3 * d + h * D + e] + qkv_b[h * D + e];
    __syncthreads();
    float scale = 1.0f / sqrtf((float)D), mx = -INFINITY;
    for (int j = tid; j <= p; j += blockDim.x) {
        float s = 0;
        for (int e = 0; e < D; e++) s += sq[e] * K[(size_t)j * D + e];
        sc[j] = scale * s;
        mx = fmaxf(mx, sc[j]);
    }
    mx = block_reduce(mx, red, true);
    float sum = 0;
    for (int j = tid; j <= p; j += blockDim.x) {
        sc[j] = expf(sc[j] - mx);
        sum += sc[j];
    }
    sum = block_reduce(sum, red, false);   /* its barrier also publishes sc */
    float inv = 1.0f / sum;
    int G = blockDim.x / D;                 /* groups of D threads split the keys */
    int e = tid % D, g = tid / D;
    float acc = 0;
    if (g < G)
        for (int j = g; j <= p; j += G) acc += sc[j] * V[(size_t)j * D + e];
    part[tid] = acc;
    __syncthreads();
    if (tid < D) {
        float s = 0;
        for (int k = 0; k < G; k++) s += part[k * D + tid];
        out[(size_t)row * d + h * D + tid] = s * inv;
    }
}

/* Softmax, several positions, head h: the queries i0 .. i0+n-1 of images b0 .. b0+nb-1 with their
 * bias, as [image][query][D] for the batched product. */
__global__ void query_block_kernel(float *qb, const float *qkv, const float *qkv_b, int b0, int nb, int i0, int n,
                                   int T, int H, int D, int h) {
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= (size_t)nb * n * D) return;
    int e = (int)(i % D), q = (int)(i / D % n), b = b0 + (int)(i / D / n), d = H * D;
    qb[i] = qkv[((size_t)b * T + i0 + q) * 3 * d + h * D + e] + qkv_b[h * D + e];
}

/* One block a row of scores (P keys): query p0 + r % n sees keys 0 .. p0 + r % n; the row becomes
 * its softmax there and 0 beyond, as attention_softmax.c's softmax_row. */
__global__ void softmax_rows_kernel(float *sc, int n, int P, int p0) {
    __shared__ float red[32];
    float *row = sc + (size_t)blockIdx.x * P;
    int len = p0 + (int)(blockIdx.x % n) + 1;
    float mx = -INFINITY, sum = 0;
    for (int j = threadIdx.x; j < len; j += blockDim.x) mx = fmaxf(mx, row[j]);
    mx = block_reduce(mx, red, true);
    for (int j = threadIdx.x; j < len; j += blockDim.x) {
        row[j] = expf(row[j] - mx);
        sum += row[j];
    }
    float inv = 1.0f / block_reduce(sum, red, false);
    for (int j = threadIdx.x; j < P; j += blockDim.x) row[j] = j < len ? row[j] * inv : 0.0f;
}

/* ---- the sampler: dmol_draw.h, the same source as the CPU's dmol_sample and rng_uniform */

/* Position *pos - 1 (the one just run) of image b: draw, store it, and make it the next step's token. */
__global__ void sample_kernel(const float *out, int M, Rng *rng, unsigned char *img, int *tok, const int *pos,
                              int B, int N) {
    int b = blockIdx.x * blockDim.x + threadIdx.x;
    if (b >= B) return;
    int x = dmol_draw(out + (size_t)b * 3 * M, M, 1.0, &rng[b]), p = *pos - 1;   /* the forward advanced it */
    if (p >= 0 && p < N) img[(size_t)b * N + p] = (unsigned char)x;
    tok[b] = x;
}

__global__ void sample_test_kernel(const float *out, int M, Rng *rng, int *x, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) x[i] = dmol_draw(out + (size_t)i * 3 * M, M, 1.0, &rng[i]);
}

/* ---------------------------------------------------------------- host side */

/* A Linear's weight: w as floats, and h2 = [W W] as halves when every value of W is a half. */
struct GpuLin { float *w; __half *h2; };
struct DevLayer { GpuLin qkv, out, ff1, ff2; float *qkv_b, *out_b, *n1w, *n1b, *n2w, *n2b, *ff1_b, *ff2_b; };

struct CudaForward {
    Config c;
    int B, T;                     /* capacity */
    cudaStream_t stream;
    cublasHandle_t blas;
    void *blas_ws;
    float *weights;               /* one allocation: every tensor below */
    __half *weights16;            /* one allocation: the [W W] halves of GpuLin.h2 */
    float *emb, *pe, *norm_w, *norm_b, *head_b;
    GpuLin head;
    DevLayer *layers;             /* host array of device pointers */
    float *x, *xn, *qkv, *att, *hid, *out;
    __half *x2;                   /* a product's input as [hi lo] halves */
    bool halves;                  /* every Linear has its [W W] halves */
    float *S, *z, *kc, *vc;
    size_t state_floats;          /* S and z, or one of kc / vc */
    float *sc, *qblk;             /* softmax, several positions: scores and queries of a block */
    int sc_images;                /* images a block's scratch holds */
    int *tok, *pos;
    unsigned *counter;            /* small_linear_kernel's RESIDUAL: blocks finished */
    int n_pos;                    /* host copy of *pos */
    int tf32;                     /* cuBLAS on TF32 tensor cores: not exact, benchmark only */
    /* generation (made with draws): each image's values and random stream, and the step's graph */
    Rng *rng;                     /* [B] */
    unsigned char *img;           /* [B][N] */
    cudaGraph_t graph;
    cudaGraphExec_t exec;
};

static size_t lin_floats(int n_in, int n_out) { return (size_t)n_in * n_out; }

/* A Linear's weight, row-major [n_out, n_in] as the file holds it (halves or floats), into
 * dst as floats; with h2, also [W W] as halves there (row o: W[o], then W[o] again), so that the
 * tensor-core product is as exact as SGEMM (the header). A float weight that is not a half
 * clears *all_halves. The element order is the file's own: no layout to get wrong. */
__global__ void widen_kernel(float *dst, __half *h2, const void *src, int half, int n_in, int n_out, int *all_halves) {
    size_t k = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (k >= (size_t)n_in * n_out) return;
    size_t o = k / n_in, i = k % n_in;
    float v;
    __half hv;
    if (half) {
        __half_raw raw;
        raw.x = ((const unsigned short *)src)[k];
        hv = raw;
        v = __half2float(hv);
    } else {
        v = ((const float *)src)[k];
        hv = __float2half_rn(v);
        if (__half2float(hv) != v) *all_halves = 0;
    }
    dst[k] = v;
    if (h2) h2[o * 2 * n_in + i] = h2[o * 2 * n_in + n_in + i] = hv;
}

/* PE(t, 2i) = sin(t / 10000^(2i/h)), PE(t, 2i+1) = cos(...), in double (as runstate_init). */
__global__ void pe_kernel(float *pe, int N, int h) {
    size_t k = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (k >= (size_t)N * h) return;
    int t = (int)(k / h), i = (int)(k % h), i2 = i & ~1;
    double ang = t / pow(10000.0, (double)i2 / h);
    pe[k] = (float)(i & 1 ? cos(ang) : sin(ang));
}

static int upload_weights(CudaForward *f, const GpuModel *m) {
    const Config *c = &m->cfg;
    int d = c->d, F = c->d_ff, M = c->n_mix, h = d / 2, N = c->seq_len, L = c->n_layers, n_lin = 4 * L + 1;
    /* f->weights: the small tensors (embedding, norms, biases; each 16-byte aligned for the small
     * kernel's loads), then the position code, then the Linears; the first part is staged in host
     * and goes up in one copy, the others are computed on the GPU */
    size_t small = (size_t)N_TOKENS * h + 2 * d + 3 * M + (size_t)L * (3 * d + d + 4 * d + F + d) + 3 * (6 + 12 * (size_t)L);
    size_t lins = L * (lin_floats(d, 3 * d) + lin_floats(d, d) + lin_floats(d, F) + lin_floats(F, d)) + lin_floats(d, 3 * M);
    size_t total = small + (size_t)N * h + 3 + lins + 3 * (size_t)n_lin;
    /* the halves only where a product can take them: more than 8 rows (else the small kernel);
     * GpuModel.sgemm: SGEMM everywhere */
    bool want = (size_t)f->B * f->T > SMALL_ROWS && !f->tf32 && !m->sgemm;
    size_t biggest = 0;   /* floats of the largest Linear */
    int shapes[5][2] = {{d, 3 * d}, {d, d}, {d, F}, {F, d}, {d, 3 * M}};
    for (int k = 0; k < 5; k++) {
        size_t v = lin_floats(shapes[k][0], shapes[k][1]);
        biggest = v > biggest ? v : biggest;
    }
    float *host = (float *)malloc(small * sizeof(float));
    int *flags_host = (int *)malloc(n_lin * sizeof(int)), *flags = NULL;
    GpuLin **lin_of = (GpuLin **)malloc(n_lin * sizeof(GpuLin *));
    f->layers = (DevLayer *)calloc(L, sizeof(DevLayer));
    if (!host || !flags_host || !lin_of || !f->layers) {
        free(host), free(flags_host), free(lin_of);
        return note(false, "malloc", "out of memory", __FILE__, __LINE__) ? 0 : -1;
    }
    void *stage = NULL;   /* one Linear as the file holds it, at a time */
    bool ok = CK(cudaMalloc((void **)&f->weights, total * sizeof(float))) &&
              (!want || CK(cudaMalloc((void **)&f->weights16, 2 * lins * sizeof(__half)))) &&
              CK(cudaMalloc(&stage, biggest * sizeof(float))) && CK(cudaMalloc((void **)&flags, n_lin * sizeof(int)));
    for (int k = 0; k < n_lin; k++) flags_host[k] = 1;
    ok = ok && CK(cudaMemcpy(flags, flags_host, n_lin * sizeof(int), cudaMemcpyHostToDevice));
    size_t at = 0, at_lin = (small + (size_t)N * h + 3) / 4 * 4, at16 = 0;
    int lin = 0;
    auto put = [&](const float *src, size_t n) {   /* a small tensor, staged */
        if (at + n <= small) memcpy(host + at, src, n * sizeof(float));
        float *p = f->weights + at;
        at = (at + n + 3) / 4 * 4;
        return p;
    };
    auto put_lin = [&](GpuLin *g, FileWeight file, int n_in, int n_out) {   /* a Linear, widened there */
        size_t n = lin_floats(n_in, n_out);
        g->w = f->weights + at_lin;
        g->h2 = want ? f->weights16 + at16 : NULL;
        ok = ok && CK(cudaMemcpy(stage, file.w, n * (file.half ? 2 : 4), cudaMemcpyHostToDevice));
        if (ok) widen_kernel<<<(unsigned)((n + 255) / 256), 256>>>(g->w, g->h2, stage, file.half, n_in, n_out, flags + lin);
        ok = ok && CKL("widen_kernel");
        lin_of[lin++] = g;
        at_lin = (at_lin + n + 3) / 4 * 4, at16 += want ? 2 * n : 0;
    };
    f->emb = put(m->emb, (size_t)N_TOKENS * h);
    f->norm_w = put(m->norm_w, d);
    f->norm_b = put(m->norm_b, d);
    put_lin(&f->head, m->head, d, 3 * M);
    f->head_b = put(m->head_b, 3 * M);
    for (int l = 0; l < L; l++) {
        const GpuLayer *w = &m->layers[l];
        DevLayer *g = &f->layers[l];
        put_lin(&g->qkv, w->qkv, d, 3 * d);
        g->qkv_b = put(w->qkv_b, 3 * d);
        put_lin(&g->out, w->out, d, d);
        g->out_b = put(w->out_b, d);
        g->n1w = put(w->norm1_w, d);
        g->n1b = put(w->norm1_b, d);
        g->n2w = put(w->norm2_w, d);
        g->n2b = put(w->norm2_b, d);
        put_lin(&g->ff1, w->ff1, d, F);
        g->ff1_b = put(w->ff1_b, F);
        put_lin(&g->ff2, w->ff2, F, d);
        g->ff2_b = put(w->ff2_b, d);
    }
    f->pe = f->weights + small;
    if (ok) pe_kernel<<<(unsigned)(((size_t)N * h + 255) / 256), 256>>>(f->pe, N, h);
    if (at > small || at_lin > total) ok = note(false, "upload_weights", "size mismatch", __FILE__, __LINE__);
    ok = ok && CKL("pe_kernel") && CK(cudaMemcpy(f->weights, host, at * sizeof(float), cudaMemcpyHostToDevice)) &&
         CK(cudaMemcpy(flags_host, flags, n_lin * sizeof(int), cudaMemcpyDeviceToHost));   /* waits for the kernels */
    f->halves = want;
    for (int k = 0; ok && k < lin; k++)   /* a float weight that is not all halves: SGEMM */
        if (!flags_host[k]) lin_of[k]->h2 = NULL, f->halves = false;
    cudaFree(stage), cudaFree(flags);
    free(host), free(flags_host), free(lin_of);
    return ok ? 0 : -1;
}

static void forward_destroy(CudaForward *f) {
    if (!f) return;
    /* frees after a failure too: their own errors would only hide the first one */
    cudaFree(f->weights); cudaFree(f->weights16); cudaFree(f->x2); cudaFree(f->x); cudaFree(f->xn); cudaFree(f->qkv); cudaFree(f->att); cudaFree(f->hid);
    cudaFree(f->out); cudaFree(f->S); cudaFree(f->kc); cudaFree(f->vc); cudaFree(f->tok); cudaFree(f->pos); cudaFree(f->counter);
    cudaFree(f->sc); cudaFree(f->qblk);
    if (f->exec) cudaGraphExecDestroy(f->exec);
    if (f->graph) cudaGraphDestroy(f->graph);
    cudaFree(f->rng); cudaFree(f->img);
    cudaFree(f->blas_ws);
    if (f->blas) cublasDestroy(f->blas);
    if (f->stream) cudaStreamDestroy(f->stream);
    free(f->layers);
    free(f);
}

#define BLAS_WORKSPACE (32u << 20)   /* set explicitly: cuBLAS must not allocate inside a graph capture */

static CudaForward *forward_create(const GpuModel *m, int B, int T, int tf32) {
    const Config *c = &m->cfg;
    CudaForward *f = (CudaForward *)calloc(1, sizeof *f);
    if (!f) { note(false, "calloc", "out of memory", __FILE__, __LINE__); return NULL; }
    f->c = *c;
    f->B = B;
    f->T = T;
    f->tf32 = tf32;
    size_t R = (size_t)B * T, d = c->d, L = c->n_layers, H = c->n_heads, D = c->d_head;
    bool ok = D == 8 || D == 16 || D == 32 || D == 64;
    if (!ok) note(false, "model", "head width must be 8, 16, 32 or 64 on the GPU", __FILE__, __LINE__);
    ok = ok && (c->d % 2 == 0);
    ok = ok && CK(cudaStreamCreateWithFlags(&f->stream, cudaStreamNonBlocking));
    /* cuBLAS only where a product can use it (its start is a good part of a batch-1 image's time) */
    bool blas = R > SMALL_ROWS || tf32;
    ok = ok && (!blas || (CKB(cublasCreate(&f->blas)) && CKB(cublasSetStream(f->blas, f->stream)) &&
         CKB(cublasSetMathMode(f->blas, tf32 ? CUBLAS_TF32_TENSOR_OP_MATH : CUBLAS_DEFAULT_MATH)) &&
         CK(cudaMalloc(&f->blas_ws, BLAS_WORKSPACE)) && CKB(cublasSetWorkspace(f->blas, f->blas_ws, BLAS_WORKSPACE))));
    ok = ok && upload_weights(f, m) == 0;
    ok = ok && CK(cudaMalloc((void **)&f->x, R * d * 4)) && CK(cudaMalloc((void **)&f->xn, R * d * 4)) &&
         CK(cudaMalloc((void **)&f->qkv, R * 3 * d * 4)) && CK(cudaMalloc((void **)&f->att, R * d * 4)) &&
         CK(cudaMalloc((void **)&f->hid, R * c->d_ff * 4)) &&
         CK(cudaMalloc((void **)&f->x2, R * 2 * ((size_t)c->d_ff > d ? (size_t)c->d_ff : d) * sizeof(__half))) && CK(cudaMalloc((void **)&f->out, R * 3 * c->n_mix * 4)) &&
         CK(cudaMalloc((void **)&f->tok, R * sizeof(int))) && CK(cudaMalloc((void **)&f->pos, sizeof(int))) &&
         CK(cudaMalloc((void **)&f->counter, sizeof(unsigned))) && CK(cudaMemset(f->counter, 0, sizeof(unsigned)));
    if (c->attention == ATTN_LINEAR) {
        f->state_floats = L * B * H * (D * D + D);
        ok = ok && CK(cudaMalloc((void **)&f->S, f->state_floats * 4));
        if (ok) f->z = f->S + L * B * H * D * D;
    } else {
        f->state_floats = L * B * H * (size_t)c->seq_len * D;
        ok = ok && CK(cudaMalloc((void **)&f->kc, f->state_floats * 4)) && CK(cudaMalloc((void **)&f->vc, f->state_floats * 4));
        if (T > 1 && blas) {   /* a block of queries of as many images as SCORES_BYTES of scores hold */
            size_t per = (size_t)(T < QBLOCK ? T : QBLOCK) * c->seq_len * 4;
            f->sc_images = (int)(SCORES_BYTES / per < (size_t)B ? SCORES_BYTES / per : (size_t)B);
            if (f->sc_images < 1) f->sc_images = 1;
            ok = ok && CK(cudaMalloc((void **)&f->sc, f->sc_images * per)) &&
                 CK(cudaMalloc((void **)&f->qblk, (size_t)f->sc_images * (T < QBLOCK ? T : QBLOCK) * D * 4));
        }
    }
    ok = ok && CK(cudaMemset(f->tok, 0, R * sizeof(int)));
    /* the copies and memsets above ran on the legacy stream, which f->stream does not wait for */
    ok = ok && CK(cudaDeviceSynchronize());
    if (!ok) { forward_destroy(f); return NULL; }
    return f;
}

static bool reset(CudaForward *f) {
    f->n_pos = 0;
    bool ok = CK(cudaMemsetAsync(f->pos, 0, sizeof(int), f->stream));
    if (f->S) ok = ok && CK(cudaMemsetAsync(f->S, 0, f->state_floats * 4, f->stream));
    return ok;
}

/* Whether linear() runs the warp-per-output kernel, epilogue included. */
static bool small(const CudaForward *f, int rows) { return rows <= SMALL_ROWS && !f->tf32; }

static Epi epi_act(const CudaForward *f, const float *bias, __half *x2) {
    Epi e = {};
    e.kind = EPI_ACT, e.bias = bias, e.gelu = f->c.gelu, e.x2 = x2;
    return e;
}
static Epi epi_head(const CudaForward *f) {
    Epi e = {};
    e.kind = EPI_HEAD, e.bias = f->head_b, e.M = f->c.n_mix;
    return e;
}
/* x += y + bias, then (post-norm) x = LN(x) with (w, b); with a final norm fw, also xn = LN(x). */
static Epi epi_residual(CudaForward *f, const float *bias, const float *w, const float *b, const float *fw, const float *fb,
                        __half *x2) {
    Epi e = {};
    e.kind = EPI_RESIDUAL, e.bias = bias, e.w = w, e.b = b, e.fw = fw, e.fb = fb, e.post = !f->c.pre_norm;
    e.x = f->x, e.xn = f->xn, e.counter = f->counter, e.x2 = x2;
    return e;
}

/* The linear attention of layer l after its qkv product, in the product's last block: a few rows
 * and heads of width 32 (a warp each). */
static bool attn_in_product(const CudaForward *f, int rows) {
    return small(f, rows) && f->c.attention == ATTN_LINEAR && f->c.d_head == 32;
}
static Epi epi_attn(CudaForward *f, int l, int T) {
    Epi e = {};
    int H = f->c.n_heads, D = f->c.d_head;
    e.kind = EPI_ATTN, e.bias = f->layers[l].qkv_b, e.counter = f->counter, e.out = f->att, e.H = H, e.T = T;
    e.S = f->S + (size_t)l * f->B * H * D * D, e.z = f->z + (size_t)l * f->B * H * D;
    return e;
}

static bool layernorm(CudaForward *f, float *out, const float *x, const float *w, const float *b, int rows) {
    int per = LN_THREADS / 32;
    layernorm_kernel<<<(rows + per - 1) / per, LN_THREADS, 0, f->stream>>>(out, x, w, b, rows, f->c.d);
    return CKL("layernorm_kernel");
}

/* Y[rows, n_out] = X[rows, n_in] W^T (row-major; cuBLAS sees the column-major transposes), then
 * the epilogue: in the same launch for a few rows, else in kernels of its own. X = NULL: the
 * kernel before wrote the input as halves into f->x2 (tensor-core path only). */
static bool linear(CudaForward *f, float *Y, const float *X, GpuLin W, int rows, int n_in, int n_out, Epi epi = Epi()) {
    if (small(f, rows)) {
        int threads = 256, blocks = (n_out * 32 + threads - 1) / threads;   /* 8 warps: RESIDUAL's 8 rows */
        if (rows <= 1) small_linear_kernel<1><<<blocks, threads, 0, f->stream>>>(Y, X, W.w, rows, n_in, n_out, epi);
        else if (rows <= 4) small_linear_kernel<4><<<blocks, threads, 0, f->stream>>>(Y, X, W.w, rows, n_in, n_out, epi);
        else small_linear_kernel<8><<<blocks, threads, 0, f->stream>>>(Y, X, W.w, rows, n_in, n_out, epi);
        return CKL("small_linear_kernel");
    }
    const float one = 1.0f, zero = 0.0f;
    bool ok;
    if (W.h2 && !f->tf32) {   /* [hi lo] [W W]^T on the tensor cores, float32 accumulation */
        size_t n = (size_t)rows * n_in;
        if (X) split_kernel<<<(unsigned)((n + 255) / 256), 256, 0, f->stream>>>(f->x2, X, rows, n_in);
        ok = CKL("split_kernel") &&
             CKB(cublasGemmEx(f->blas, CUBLAS_OP_T, CUBLAS_OP_N, n_out, rows, 2 * n_in, &one, W.h2, CUDA_R_16F, 2 * n_in,
                              f->x2, CUDA_R_16F, 2 * n_in, &zero, Y, CUDA_R_32F, n_out, CUBLAS_COMPUTE_32F,
                              CUBLAS_GEMM_DEFAULT));
    } else
        ok = CKB(cublasSgemm(f->blas, CUBLAS_OP_T, CUBLAS_OP_N, n_out, rows, n_in, &one, W.w, n_in, X, n_in, &zero, Y, n_out));
    size_t n = (size_t)rows * n_out;
    int per = LN_THREADS / 32;
    switch (ok ? epi.kind : EPI_NONE) {
    case EPI_ACT: {
        unsigned ry = rows < 65535 ? rows : 65535;
        if (n_out % 2 == 0)
            activation_kernel<2><<<dim3((n_out / 2 + 255) / 256, ry), 256, 0, f->stream>>>(Y, epi.bias, rows, n_out,
                                                                                         epi.gelu, epi.x2);
        else
            activation_kernel<1><<<dim3((n_out + 255) / 256, ry), 256, 0, f->stream>>>(Y, epi.bias, rows, n_out,
                                                                                     epi.gelu, epi.x2);
        return CKL("activation_kernel");
    }
    case EPI_HEAD:
        head_kernel<<<(unsigned)((n + 255) / 256), 256, 0, f->stream>>>(Y, epi.bias, rows, epi.M);
        return CKL("head_kernel");
    case EPI_RESIDUAL: {
        unsigned grid = (rows + per - 1) / per;
#define RES(V) residual_vec_kernel<V><<<grid, LN_THREADS, 0, f->stream>>>(epi.x, Y, epi.bias, epi.w, epi.b, rows, \
                                                                        epi.post, epi.x2, epi.fw, epi.fb, epi.xn)
        if (n_out == 128) RES(1);
        else if (n_out == 256) RES(2);
        else if (n_out == 512) RES(4);
#undef RES
        else
            residual_kernel<<<grid, LN_THREADS, 0, f->stream>>>(epi.x, Y, epi.bias, epi.w, epi.b, rows, n_out, epi.post,
                                                               epi.x2, epi.fw, epi.fb, epi.xn);
        return CKL("residual_kernel");
    }
    }
    return ok;
}

/* Softmax over positions t0 .. t0+T-1 of B images, the keys and values already in the cache (kc,
 * vc of this layer): a head and a block of n queries at a time, scores = Q K^T / sqrt(D) over
 * the P = t0 + i0 + n keys the block can see, then softmax, then scores V into f->att. cuBLAS
 * is column-major: the row-major [n, P] scores are its [P, n], K^T Q^T, and so on. */
static bool softmax_blocks(CudaForward *f, const float *kc, const float *vc, const float *qkv_b, int B, int T, int t0) {
    const Config *c = &f->c;
    int H = c->n_heads, D = c->d_head, N = c->seq_len, d = c->d;
    float scale = 1.0f / sqrtf((float)D), one = 1.0f, zero = 0.0f;
    long long kv_stride = (long long)H * N * D;   /* one image to the next, same head */
    bool ok = true;
    for (int b0 = 0; ok && b0 < B; b0 += f->sc_images) {
        int nb = B - b0 < f->sc_images ? B - b0 : f->sc_images;
        for (int h = 0; ok && h < H; h++)
            for (int i0 = 0; ok && i0 < T; i0 += QBLOCK) {
                int n = T - i0 < QBLOCK ? T - i0 : QBLOCK, P = t0 + i0 + n;
                size_t nq = (size_t)nb * n * D;
                query_block_kernel<<<(unsigned)((nq + 255) / 256), 256, 0, f->stream>>>(f->qblk, f->qkv, qkv_b, b0, nb,
                                                                                     i0, n, T, H, D, h);
                const float *K = kc + ((size_t)b0 * H + h) * N * D, *V = vc + ((size_t)b0 * H + h) * N * D;
                ok = CKL("query_block_kernel") &&
                     CKB(cublasSgemmStridedBatched(f->blas, CUBLAS_OP_T, CUBLAS_OP_N, P, n, D, &scale, K, D, kv_stride,
                                                   f->qblk, D, (long long)n * D, &zero, f->sc, P, (long long)n * P, nb));
                if (!ok) break;
                softmax_rows_kernel<<<(unsigned)(nb * n), SOFTMAX_THREADS, 0, f->stream>>>(f->sc, n, P, t0 + i0);
                ok = CKL("softmax_rows_kernel") &&
                     CKB(cublasSgemmStridedBatched(f->blas, CUBLAS_OP_N, CUBLAS_OP_N, D, n, P, &one, V, D, kv_stride,
                                                   f->sc, P, (long long)n * P, &zero,
                                                   f->att + ((size_t)b0 * T + i0) * d + h * D, d, (long long)T * d, nb));
            }
    }
    return ok;
}

/* out2: the linear attention's output only as the next product's halves (NULL: f->att). */
static bool attention(CudaForward *f, int l, int B, int T, __half *out2) {
    const Config *c = &f->c;
    int H = c->n_heads, D = c->d_head, N = c->seq_len;
    const float *qb = f->layers[l].qkv_b;
    if (c->attention == ATTN_LINEAR) {
        float *S = f->S + (size_t)l * f->B * H * D * D, *z = f->z + (size_t)l * f->B * H * D;
        int pairs = B * H;
#define LIN(DD) do { constexpr int P = 128 / DD; \
        linear_attention_kernel<DD><<<(pairs + P - 1) / P, dim3(DD, P), 0, f->stream>>>(S, z, f->qkv, qb, f->att, out2, B, H, T); } while (0)
        if (D == 8) LIN(8); else if (D == 16) LIN(16); else if (D == 32) LIN(32); else LIN(64);
#undef LIN
        return CKL("linear_attention_kernel");
    }
    size_t off = (size_t)l * f->B * H * N * D;
    size_t n = (size_t)B * T * c->d;
    kv_append_kernel<<<(unsigned)((n + 255) / 256), 256, 0, f->stream>>>(f->kc + off, f->vc + off, f->qkv, qb, f->pos,
                                                                       B, T, H, D, N);
    if (!CKL("kv_append_kernel")) return false;
    if (T > 1 && f->sc) return softmax_blocks(f, f->kc + off, f->vc + off, qb, B, T, f->n_pos);
    size_t shmem = ((size_t)N + D + SOFTMAX_THREADS) * sizeof(float);
    softmax_attention_kernel<<<(unsigned)((size_t)B * T * H), SOFTMAX_THREADS, shmem, f->stream>>>(
        f->kc + off, f->vc + off, f->qkv, qb, f->att, f->pos, T, H, D, N);
    return CKL("softmax_attention_kernel");
}

/* The forward pass of B x T tokens already in f->tok, from position *pos; head outputs in f->out
 * (bias added, clamped); *pos advanced by T. Only launches: capturable. */
static bool forward(CudaForward *f, int B, int T) {
    const Config *c = &f->c;
    int d = c->d, rows = B * T, pre = c->pre_norm, M = c->n_mix;
    bool ok = true;
    embed_kernel<<<rows, 128, 0, f->stream>>>(f->x, f->tok, f->emb, f->pe, f->pos, rows, T, d, c->seq_len);
    ok = ok && CKL("embed_kernel");
    /* Post-norm on the tensor cores: each kernel before a product writes its input as halves
     * (the residual, the activation, the linear attention), so no product splits its own. */
    bool fused = f->halves && !pre && !small(f, rows) && !f->tf32;
    __half *x2 = fused ? f->x2 : NULL, *att2 = fused && c->attention == ATTN_LINEAR ? f->x2 : NULL;
    for (int l = 0; l < c->n_layers && ok; l++) {
        const DevLayer *w = &f->layers[l];
        const float *in = f->x;
        bool last = l == c->n_layers - 1;   /* its residual also takes the final norm */
        if (pre) { ok = ok && layernorm(f, f->xn, f->x, w->n1w, w->n1b, rows); in = f->xn; }
        if (attn_in_product(f, rows)) ok = ok && linear(f, f->qkv, in, w->qkv, rows, d, 3 * d, epi_attn(f, l, T));
        else ok = ok && linear(f, f->qkv, x2 && l > 0 ? NULL : in, w->qkv, rows, d, 3 * d) && attention(f, l, B, T, att2);
        ok = ok &&
             linear(f, f->xn, att2 ? NULL : f->att, w->out, rows, d, d,
                    epi_residual(f, w->out_b, w->n1w, w->n1b, NULL, NULL, x2));
        in = f->x;
        if (pre) { ok = ok && layernorm(f, f->xn, f->x, w->n2w, w->n2b, rows); in = f->xn; }
        ok = ok && linear(f, f->hid, x2 ? NULL : in, w->ff1, rows, d, c->d_ff, epi_act(f, w->ff1_b, x2)) &&
             linear(f, f->xn, x2 ? NULL : f->hid, w->ff2, rows, c->d_ff, d,
                    epi_residual(f, w->ff2_b, w->n2w, w->n2b, last ? f->norm_w : NULL, last ? f->norm_b : NULL,
                                 last ? NULL : x2));
    }
    if (c->n_layers == 0) ok = ok && layernorm(f, f->xn, f->x, f->norm_w, f->norm_b, rows);
    ok = ok && linear(f, f->out, f->xn, f->head, rows, d, 3 * M, epi_head(f));
    if (ok) advance_kernel<<<1, 1, 0, f->stream>>>(f->pos, T);
    return ok && CKL("advance_kernel");
}

/* ---------------------------------------------------------------- the forward API */

/* The canary (the header): the B rows of BOS, CANARY_TOKEN, ... (T positions a call, the rest
 * CANARY_TOKEN too), from position 0, through the same launches as a run of this engine; the
 * head outputs of positions 0 and 1 against the CPU's (the causal mask makes them those of the
 * canary's two tokens alone); then back to position 0. With T = 1, two calls. TF32 products (a
 * diagnostic, not float32) are not checked. */
static int canary(CudaForward *f, const GpuModel *m, int T, Err *e) {
    if (f->tf32 || f->c.seq_len < 2) return 0;
    int B = f->B, K = 3 * f->c.n_mix, calls = T == 1 ? 2 : 1;
    size_t R = (size_t)B * T;
    int *tok = (int *)xmalloc(R * sizeof(int));
    float *out = (float *)xmalloc(R * K * sizeof(float)), *got = (float *)xmalloc((size_t)B * 2 * K * sizeof(float));
    bool ok = reset(f);
    for (int call = 0; call < calls && ok; call++) {
        for (size_t r = 0; r < R; r++) tok[r] = call == 0 && r % T == 0 ? BOS_TOKEN : CANARY_TOKEN;
        ok = CK(cudaMemcpyAsync(f->tok, tok, R * sizeof(int), cudaMemcpyHostToDevice, f->stream)) && forward(f, B, T) &&
             CK(cudaMemcpyAsync(out, f->out, R * K * sizeof(float), cudaMemcpyDeviceToHost, f->stream)) &&
             CK(cudaStreamSynchronize(f->stream));
        for (int b = 0; b < B && ok; b++)   /* got [B][2][K]: positions 0 and 1 */
            memcpy(got + ((size_t)b * 2 + call) * K, out + (size_t)b * T * K, (size_t)(2 - (calls - 1)) * K * sizeof(float));
    }
    ok = ok && reset(f);
    int rc = ok ? gpu_canary_check(m->canary, got, B, (size_t)2 * K, K, e) : take_error(e);
    free(tok);
    free(out);
    free(got);
    return rc;
}

/* ---------------------------------------------------------------- generation */

/* One step of every image: the forward pass of the B tokens at *pos (which advances it), then
 * the sampler, which writes that position of each image and makes it the next token. */
static bool step_launches(CudaForward *f) {
    if (!forward(f, f->B, 1)) return false;
    sample_kernel<<<(f->B + 127) / 128, 128, 0, f->stream>>>(f->out, f->c.n_mix, f->rng, f->img, f->tok, f->pos, f->B,
                                                            f->c.seq_len);
    return CKL("sample_kernel");
}

/* The draws' buffers and the graph of one step, captured once and replayed at every position. */
static bool draws_init(CudaForward *f) {
    size_t B = f->B, N = f->c.seq_len;
    bool ok = CK(cudaMalloc((void **)&f->rng, B * sizeof(Rng))) && CK(cudaMalloc((void **)&f->img, B * N)) &&
              CK(cudaMemset(f->img, 0, B * N)) &&
              /* a valid PCG32 state until cuda_draw_begin sets the streams (all-zero would never
               * leave 0, and pcg32_uniform redraws 0) */
              CK(cudaMemset(f->rng, 0xff, B * sizeof(Rng))) && CK(cudaDeviceSynchronize());
    /* one step run directly first (from position 0, so every index stays in bounds): it loads
     * every kernel and cuBLAS's state outside the capture (lazy module loading) */
    ok = ok && reset(f) && step_launches(f) && CK(cudaStreamSynchronize(f->stream));
    /* capture the step once; the capture is ended even when a launch in it failed */
    ok = ok && CK(cudaStreamBeginCapture(f->stream, cudaStreamCaptureModeThreadLocal));
    if (ok) {
        bool launched = step_launches(f);
        cudaGraph_t g = NULL;
        ok = CK(cudaStreamEndCapture(f->stream, &g)) && launched;
        f->graph = g;
    }
    return ok && CK(cudaGraphInstantiate(&f->exec, f->graph, 0)) && reset(f) && CK(cudaStreamSynchronize(f->stream));
}

/* ---------------------------------------------------------------- the C API */

extern "C" CudaForward *cuda_forward_new(const GpuModel *m, int B, int T, int draws, Err *e) {
    if (B < 1 || T < 1 || T > m->cfg.seq_len) { err_set(e, "CUDA forward: bad capacity B=%d T=%d", B, T); return NULL; }
    /* TF32: diagnostics of the forward pass, how far it moves the outputs; never for drawing */
    CudaForward *f = forward_create(m, B, T, draws ? 0 : m->tf32);
    if (!f || (draws && !draws_init(f))) { forward_destroy(f); take_error(e); return NULL; }
    /* the canary's positions: those of a step when drawing, else enough rows that the products
     * take the path of a run's many rows */
    int Tc = 1;
    while (!draws && Tc < T && (size_t)B * Tc <= SMALL_ROWS) Tc++;
    if (canary(f, m, Tc, e)) { forward_destroy(f); return NULL; }
    return f;
}

extern "C" void cuda_forward_reset(CudaForward *f) { reset(f); }
extern "C" void cuda_forward_free(CudaForward *f) { forward_destroy(f); }

extern "C" int cuda_forward_run(CudaForward *f, const int *tokens, int B, int T, float *out, Err *e) {
    const Config *c = &f->c;
    if (B < 1 || T < 1 || B > f->B || T > f->T || f->n_pos + T > c->seq_len)
        return err_set(e, "CUDA forward: B=%d T=%d at position %d exceeds its capacity %dx%d", B, T, f->n_pos, f->B, f->T);
    for (size_t i = 0; i < (size_t)B * T; i++)
        if (tokens[i] < 0 || tokens[i] > BOS_TOKEN) return err_set(e, "CUDA forward: token %d out of range", tokens[i]);
    size_t K = 3 * (size_t)c->n_mix;
    bool ok = !failed && CK(cudaMemcpyAsync(f->tok, tokens, (size_t)B * T * sizeof(int), cudaMemcpyHostToDevice, f->stream)) &&
              forward(f, B, T) &&
              CK(cudaMemcpyAsync(out, f->out, (size_t)B * T * K * sizeof(float), cudaMemcpyDeviceToHost, f->stream)) &&
              CK(cudaStreamSynchronize(f->stream));
    if (!ok) return take_error(e);
    f->n_pos += T;
    return 0;
}

extern "C" int cuda_draw_begin(CudaForward *f, const unsigned char *img, const Rng *rng, int B, Err *e) {
    int N = f->c.seq_len, t = f->n_pos;
    if (!f->exec) return err_set(e, "CUDA draws: the engine was made without them");
    if (B < 1 || B > f->B || t >= N) return err_set(e, "CUDA draws: %d images at position %d", B, t);
    /* position t's input: x(t-1), BOS at 0; the rows past B run too (the graph's), on BOS */
    int *tok = (int *)xmalloc((size_t)f->B * sizeof(int));
    for (int b = 0; b < f->B; b++) tok[b] = b < B && t > 0 ? img[(size_t)b * N + t - 1] : BOS_TOKEN;
    bool ok = !failed && CK(cudaMemcpyAsync(f->img, img, (size_t)B * N, cudaMemcpyHostToDevice, f->stream)) &&
              CK(cudaMemcpyAsync(f->rng, rng, (size_t)B * sizeof(Rng), cudaMemcpyHostToDevice, f->stream)) &&
              CK(cudaMemcpyAsync(f->tok, tok, (size_t)f->B * sizeof(int), cudaMemcpyHostToDevice, f->stream)) &&
              CK(cudaStreamSynchronize(f->stream));
    free(tok);
    return ok ? 0 : take_error(e);
}

extern "C" int cuda_draw_step(CudaForward *f, int wait, Err *e) {
    if (f->n_pos >= f->c.seq_len) return err_set(e, "CUDA draws: past the last position");
    bool ok = !failed && CK(cudaGraphLaunch(f->exec, f->stream)) && (!wait || CK(cudaStreamSynchronize(f->stream)));
    if (!ok) return take_error(e);
    f->n_pos++;
    return 0;
}

extern "C" int cuda_draw_end(CudaForward *f, unsigned char *img, Rng *rng, int B, Err *e) {
    bool ok = !failed && CK(cudaMemcpyAsync(img, f->img, (size_t)B * f->c.seq_len, cudaMemcpyDeviceToHost, f->stream)) &&
              CK(cudaMemcpyAsync(rng, f->rng, (size_t)B * sizeof(Rng), cudaMemcpyDeviceToHost, f->stream)) &&
              CK(cudaStreamSynchronize(f->stream));
    return ok ? 0 : take_error(e);
}

/* ---------------------------------------------------------------- for tests and the benchmark */

extern "C" int cuda_dmol_sample_batch(const float *out, int n, int M, Rng *rngs, int *x, Err *e) {
    float *d_out = NULL;
    Rng *d_rng = NULL;
    int *d_x = NULL;
    bool ok = CK(cudaMalloc((void **)&d_out, (size_t)n * 3 * M * sizeof(float))) &&
              CK(cudaMalloc((void **)&d_rng, (size_t)n * sizeof(Rng))) && CK(cudaMalloc((void **)&d_x, (size_t)n * sizeof(int))) &&
              CK(cudaMemcpy(d_out, out, (size_t)n * 3 * M * sizeof(float), cudaMemcpyHostToDevice)) &&
              CK(cudaMemcpy(d_rng, rngs, (size_t)n * sizeof(Rng), cudaMemcpyHostToDevice));
    if (ok) sample_test_kernel<<<(n + 127) / 128, 128>>>(d_out, M, d_rng, d_x, n);
    ok = ok && CKL("sample_test_kernel") && CK(cudaDeviceSynchronize()) &&
         CK(cudaMemcpy(x, d_x, (size_t)n * sizeof(int), cudaMemcpyDeviceToHost)) &&
         CK(cudaMemcpy(rngs, d_rng, (size_t)n * sizeof(Rng), cudaMemcpyDeviceToHost));
    cudaFree(d_out);
    cudaFree(d_rng);
    cudaFree(d_x);
    return ok ? 0 : take_error(e);
}

extern "C" int cuda_bench_step(const GpuModel *m, int B, int steps, int tf32, double *sec_per_step, Err *e) {
    int N = m->cfg.seq_len, warm = 8;
    if (steps + warm > N) steps = N - warm;
    if (steps < 1) return err_set(e, "cuda_bench_step: too few positions");
    CudaForward *f = forward_create(m, B, 1, tf32);
    if (!f || !draws_init(f)) { forward_destroy(f); return take_error(e); }
    if (canary(f, m, 1, e)) { forward_destroy(f); return -1; }
    unsigned char *img = (unsigned char *)xcalloc((size_t)B, N);
    Rng *rng = (Rng *)xcalloc(B, sizeof(Rng));
    for (int b = 0; b < B; b++) rng_init(&rng[b], 1, (uint64_t)b);
    cudaEvent_t a = NULL, z = NULL;
    bool ok = cuda_draw_begin(f, img, rng, B, e) == 0 && CK(cudaEventCreate(&a)) && CK(cudaEventCreate(&z));
    for (int i = 0; i < warm && ok; i++) ok = CK(cudaGraphLaunch(f->exec, f->stream));
    ok = ok && CK(cudaEventRecord(a, f->stream));
    for (int i = 0; i < steps && ok; i++) ok = CK(cudaGraphLaunch(f->exec, f->stream));
    ok = ok && CK(cudaEventRecord(z, f->stream)) && CK(cudaEventSynchronize(z));
    float ms = 0;
    ok = ok && CK(cudaEventElapsedTime(&ms, a, z));
    if (a) cudaEventDestroy(a);
    if (z) cudaEventDestroy(z);
    free(img);
    free(rng);
    forward_destroy(f);
    if (!ok) return failed ? take_error(e) : -1;
    *sec_per_step = ms / 1e3 / steps;
    return 0;
}
