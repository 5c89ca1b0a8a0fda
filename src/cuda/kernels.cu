/* The CUDA engine's kernels, all but the products' own (products.cu) and the weight upload's
 * (upload.cu): embedding, layer norm, residual, activation, head, the linear and softmax
 * attentions and the DMOL sampler. Each comes with a host function that launches it on a stream
 * (internal.cuh), its launch configuration beside its code. */
#include <math.h>

#include "device.cuh"   /* with the sampler source, engine/dmol_draw.h */
#include "internal.cuh"

#define LN_THREADS 256     /* 8 rows (warps) per block */

/* x[r] = concat(emb[token], pe[t0 + r % T]); t0 = *pos. */
__global__ void embed_kernel(float *x, const int *tok, const float *emb, const float *pe, const int *pos,
                             int rows, int T, int d, int N) {
    int r = blockIdx.x;
    if (r < rows) embed_row(x + (size_t)r * d, emb, pe, tok[r], *pos + r % T, d, N, threadIdx.x, blockDim.x);
}

void launch_embed(cudaStream_t stream, float *x, const int *tok, const float *emb, const float *pe, const int *pos,
                  int rows, int T, int d, int N) {
    embed_kernel<<<rows, 128, 0, stream>>>(x, tok, emb, pe, pos, rows, T, d, N);
}

__global__ void layernorm_kernel(float *out, const float *x, const float *w, const float *b, int rows, int d) {
    int r = blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32;
    if (r >= rows) return;
    ln_row(out + (size_t)r * d, x + (size_t)r * d, w, b, d, threadIdx.x & 31);
}

void launch_layernorm(cudaStream_t stream, float *out, const float *x, const float *w, const float *b, int rows,
                      int d) {
    int per = LN_THREADS / 32;
    layernorm_kernel<<<(rows + per - 1) / per, LN_THREADS, 0, stream>>>(out, x, w, b, rows, d);
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

/* residual_vec_kernel where d is 128, 256 or 512, else residual_kernel. */
void launch_residual(cudaStream_t stream, float *x, const float *y, const float *bias, const float *w, const float *b,
                     int rows, int d, int post, __half *x2, const float *fw, const float *fb, float *xn) {
    int per = LN_THREADS / 32;
    unsigned grid = (rows + per - 1) / per;
#define RES(V) residual_vec_kernel<V><<<grid, LN_THREADS, 0, stream>>>(x, y, bias, w, b, rows, post, x2, fw, fb, xn)
    if (d == 128) RES(1);
    else if (d == 256) RES(2);
    else if (d == 512) RES(4);
#undef RES
    else
        residual_kernel<<<grid, LN_THREADS, 0, stream>>>(x, y, bias, w, b, rows, d, post, x2, fw, fb, xn);
}

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

void launch_activation(cudaStream_t stream, float *h, const float *bias, int rows, int dff, int gelu, __half *x2) {
    unsigned ry = rows < 65535 ? rows : 65535;
    if (dff % 2 == 0)
        activation_kernel<2><<<dim3((dff / 2 + 255) / 256, ry), 256, 0, stream>>>(h, bias, rows, dff, gelu, x2);
    else
        activation_kernel<1><<<dim3((dff + 255) / 256, ry), 256, 0, stream>>>(h, bias, rows, dff, gelu, x2);
}

/* out += bias. The log-scales stay as the model gives them, as on the CPU: the likelihood and
 * the sampler (dmol.c, dmol_draw.h) clamp them where they read them. */
__global__ void head_kernel(float *out, const float *bias, int rows, int M) {
    int i = blockIdx.x * blockDim.x + threadIdx.x, K = 3 * M;
    if (i >= rows * K) return;
    out[i] += bias[i % K];
}

void launch_head(cudaStream_t stream, float *out, const float *bias, int rows, int M) {
    size_t n = (size_t)rows * (3 * M);   /* the kernel's rows * K */
    head_kernel<<<(unsigned)((n + 255) / 256), 256, 0, stream>>>(out, bias, rows, M);
}

__global__ void advance_kernel(int *pos, int T) { *pos += T; }
void launch_advance(cudaStream_t stream, int *pos, int T) { advance_kernel<<<1, 1, 0, stream>>>(pos, T); }

/* Linear attention over T positions in order, the RNN of attention_linear.c's step():
 *   S += phi(k) v^T,  z += phi(k),  out = phi(q)^T S / (phi(q)^T z + eps).
 * Block: P pairs (image, head) of D threads; thread e holds column e of its pair's S. A pair of
 * D <= 32 lies in one warp, whose barrier is enough; D = 64 takes the block's. Position t + 1's
 * q, k, v are loaded while t is computed (the loads are the loop's latency). */
template <int D>
__device__ __forceinline__ void pair_sync() {
    if (D <= 32) __syncwarp();
    else __syncthreads();
}

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
    const float *base = qkv + (size_t)b * T * 3 * d + h * D;   /* position t's q of this pair */
    float q = 0, k = 0, v = 0;   /* the next position's, as loaded */
    if (live && T > 0) q = base[e], k = base[d + e], v = base[2 * d + e];
    for (int t = 0; t < T; t++) {
        size_t row = (size_t)b * T + t;
        float vt = v + bv;
        if (live) {
            sq[y][e] = phi(q + bq);
            sk[y][e] = phi(k + bk);
            if (t + 1 < T) {
                const float *next = base + (size_t)(t + 1) * 3 * d;
                q = next[e], k = next[d + e], v = next[2 * d + e];
            }
        }
        pair_sync<D>();
        if (live) sz[y][e] += sk[y][e];
        pair_sync<D>();
        if (live) {
            float den = 0, num = 0;
#pragma unroll
            for (int a = 0; a < D; a++) {
                den += sq[y][a] * sz[y][a];
                Sc[a] += sk[y][a] * vt;
                num += sq[y][a] * Sc[a];
            }
            float o = num / (den + LINEAR_EPS);
            if (out2) put_split(out2 + row * 2 * d, d, h * D + e, o);   /* only the next product reads it */
            else out[row * d + h * D + e] = o;
        }
        pair_sync<D>();
    }
    if (live) {
#pragma unroll
        for (int a = 0; a < D; a++) Sp[(size_t)a * D + e] = Sc[a];
        z[(size_t)pair * D + e] = sz[y][e];
    }
}

void launch_linear_attention(cudaStream_t stream, float *S, float *z, const float *qkv, const float *qkv_b, float *out,
                             __half *out2, int B, int H, int T, int D) {
    int pairs = B * H;
#define LIN(DD) do { constexpr int P = 128 / DD; \
        linear_attention_kernel<DD><<<(pairs + P - 1) / P, dim3(DD, P), 0, stream>>>(S, z, qkv, qkv_b, out, out2, B, H, T); \
    } while (0)
    if (D == 8) LIN(8); else if (D == 16) LIN(16); else if (D == 32) LIN(32); else LIN(64);
#undef LIN
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

void launch_kv_append(cudaStream_t stream, float *kc, float *vc, const float *qkv, const float *qkv_b, const int *pos,
                      int B, int T, int H, int D, int cap) {
    size_t n = (size_t)B * T * (H * D);   /* the kernel's B * T * d */
    kv_append_kernel<<<(unsigned)((n + 255) / 256), 256, 0, stream>>>(kc, vc, qkv, qkv_b, pos, B, T, H, D, cap);
}

/* Softmax, part 2: one block per (row, head): the query at position p = t0 + t against the keys
 * 0..p (softmax_query). */
__global__ void softmax_attention_kernel(const float *kc, const float *vc, const float *qkv, const float *qkv_b,
                                         float *out, const int *pos, int T, int H, int D, int cap) {
    extern __shared__ float sh[];
    __shared__ float red[32];
    int row = blockIdx.x / H, h = blockIdx.x % H, b = row / T, t = row % T, d = H * D;
    int p = *pos + t;
    if (p >= cap) p = cap - 1;
    const float *K = kc + ((size_t)b * H + h) * cap * D, *V = vc + ((size_t)b * H + h) * cap * D;
    softmax_query(out + (size_t)row * d + h * D, qkv + (size_t)row * 3 * d + h * D, qkv_b + h * D, K, V, p, D, cap, sh,
                  red);
}

/* Its B * T * H blocks: B images of T positions. */
void launch_softmax_attention(cudaStream_t stream, int B, const float *kc, const float *vc, const float *qkv,
                              const float *qkv_b, float *out, const int *pos, int T, int H, int D, int cap) {
    size_t shmem = ((size_t)cap + D + SOFTMAX_THREADS) * sizeof(float);
    softmax_attention_kernel<<<(unsigned)((size_t)B * T * H), SOFTMAX_THREADS, shmem, stream>>>(
        kc, vc, qkv, qkv_b, out, pos, T, H, D, cap);
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

void launch_query_block(cudaStream_t stream, float *qb, const float *qkv, const float *qkv_b, int b0, int nb, int i0,
                        int n, int T, int H, int D, int h) {
    size_t nq = (size_t)nb * n * D;
    query_block_kernel<<<(unsigned)((nq + 255) / 256), 256, 0, stream>>>(qb, qkv, qkv_b, b0, nb, i0, n, T, H, D, h);
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

/* Its nb * n rows: nb images of n queries. */
void launch_softmax_rows(cudaStream_t stream, int nb, float *sc, int n, int P, int p0) {
    softmax_rows_kernel<<<(unsigned)(nb * n), SOFTMAX_THREADS, 0, stream>>>(sc, n, P, p0);
}

/* ---- the sampler: dmol_draw.h, the same source as the CPU's dmol_sample and rng_uniform (double
 * arithmetic, rng.h's PCG32 streams), one thread per image */

/* Position *pos - 1 (the one just run) of image b: draw, store it, and make it the next step's token. */
__global__ void sample_kernel(const float *out, int M, Rng *rng, unsigned char *img, int *tok, const int *pos,
                              int B, int N) {
    int b = blockIdx.x * blockDim.x + threadIdx.x;
    if (b < B) draw_value(out, M, rng, img, tok, b, *pos - 1, N);   /* the forward advanced *pos */
}

void launch_sample(cudaStream_t stream, const float *out, int M, Rng *rng, unsigned char *img, int *tok, const int *pos,
                   int B, int N) {
    sample_kernel<<<(B + 127) / 128, 128, 0, stream>>>(out, M, rng, img, tok, pos, B, N);
}

__global__ void sample_test_kernel(const float *out, int M, Rng *rng, int *x, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) x[i] = dmol_draw(out + (size_t)i * 3 * M, M, 1.0, &rng[i]);
}

/* On the legacy default stream. */
void launch_sample_test(const float *out, int M, Rng *rng, int *x, int n) {
    sample_test_kernel<<<(n + 127) / 128, 128>>>(out, M, rng, x, n);
}
