/* The fused step: one position of a few images (at most SMALL_ROWS rows) of a post-norm model
 * (linear attention with heads of 32, or softmax) in one cooperative kernel, where forward()
 * launches a kernel a product. Its phases are forward()'s, with grid barriers where its kernels end:
 *   embed | per layer: qkv | attention | out | residual, ff1 | ff2 | residual | head, draw
 * A few-row step is latency: every launch and every dependent load costs more than the
 * arithmetic. So each block keeps the residual stream x of every row in shared memory and
 * computes it itself (every block gets the same x, so none waits for another to publish it),
 * each warp loads its next weight row before it waits at a barrier, and the head and the draw
 * run in block 0 alone (no barrier before the draw). What another block wrote (qkv, the
 * attention, a product) is read through L2 after a barrier.
 * Every value is computed as forward()'s few-row path computes it (the same device functions in
 * the same order: row_dots, warp_sum, residual_row, attention_pair_warp or softmax_query,
 * dmol_draw), so the outputs are the same bit for bit; test_cuda checks the images. */
#include <cooperative_groups.h>

#include "device.cuh"   /* with the sampler source, engine/dmol_draw.h */
#include "internal.cuh"

namespace cg = cooperative_groups;

#define STEP_THREADS 256
#define STEP_WARPS (STEP_THREADS / 32)

/* What the kernel reads and writes, by value. */
struct StepArgs {
    const DevLayer *layers;   /* [L], a copy in device memory */
    const float *emb, *pe, *norm_w, *norm_b, *head_w, *head_b;
    float *qkv, *att, *y, *hid, *out, *S, *z, *kc, *vc;
    int *tok, *pos;
    Rng *rng;
    unsigned char *img;
    int rows, B, d, d_ff, H, D, L, M, N, gelu, softmax, draw;
};

/* Y[r][o] = X[r] . W[o] for r < rows, then the epilogue (ACT: act(y + bias); HEAD: y + bias),
 * as small_linear_kernel: warp gw of nw takes outputs gw, gw + nw, ...; pre holds the first
 * one's prefetched weights (prefetch_row), the others load theirs here. X: rows of n_in in
 * shared memory. */
template <int R>
__device__ void product(float *Y, const float *X, const float *W, float4 (&pre)[PREFETCH], int rows, int n_in,
                        int n_out, int kind, const float *bias, int gelu, int gw, int nw, int lane) {
    for (int o = gw; o < n_out; o += nw) {
        const float4 *w4 = (const float4 *)(W + (size_t)o * n_in);
        if (o != gw) prefetch_row(pre, w4, n_in / 4, lane, true);
        float acc[R];
        row_dots<R>(acc, pre, w4, X, rows, n_in, lane);
#pragma unroll
        for (int r = 0; r < R; r++) {
            float s = warp_sum(acc[r]);
            if (kind == EPI_ACT) s = activate(s + bias[o], gelu);
            if (kind == EPI_HEAD) s += bias[o];
            if (lane == 0 && r < rows) Y[(size_t)r * n_out + o] = s;
        }
    }
}

/* Warp gw's first output row of a product of n_in inputs and n_out outputs, prefetched. */
__device__ __forceinline__ void prefetch_first(float4 (&pre)[PREFETCH], const float *W, int n_in, int n_out, int gw,
                                               int lane) {
    prefetch_row(pre, (const float4 *)(W + (size_t)gw * n_in), n_in / 4, lane, gw < n_out);
}

/* rows x n floats from global memory (another block wrote them) into the block's shared memory. */
__device__ __forceinline__ void load_rows(float *dst, const float *src, int rows, int n) {
    for (int i = threadIdx.x; i < rows * n / 4; i += blockDim.x)
        ((float4 *)dst)[i] = __ldcg((const float4 *)src + i);
    __syncthreads();
}

/* Layer l's attention of the rows at position p, from a.qkv into a.att: linear, a warp an (image,
 * head) pair (epi_attn's); softmax, a block a pair: the key and value appended to the cache
 * (kv_append_kernel's), then the query against the cache (softmax_query). */
__device__ void attention(const StepArgs &a, const DevLayer *w, int l, int p, float *sm, float *red, int gw, int nw,
                          int lane) {
    int d = a.d, H = a.H, D = a.D;
    if (!a.softmax) {
        float *S = a.S + (size_t)l * a.B * H * 32 * 32, *z = a.z + (size_t)l * a.B * H * 32;
        for (int pair = gw; pair < a.rows * H; pair += nw)
            attention_pair_warp(S + (size_t)pair * 32 * 32, z + (size_t)pair * 32, a.qkv, w->qkv_b, a.att, pair / H,
                                pair % H, 1, d, lane);
        return;
    }
    for (int pair = blockIdx.x; pair < a.rows * H; pair += gridDim.x) {
        int b = pair / H, h = pair % H;
        size_t at = (((size_t)l * a.B + b) * H + h) * a.N * D;   /* this pair's cache rows */
        const float *row = a.qkv + (size_t)b * 3 * d;
        if (p < a.N)
            for (int e = threadIdx.x; e < D; e += blockDim.x) {
                int c = h * D + e;
                a.kc[at + (size_t)p * D + e] = __ldcg(row + d + c) + w->qkv_b[d + c];
                a.vc[at + (size_t)p * D + e] = __ldcg(row + 2 * d + c) + w->qkv_b[2 * d + c];
            }
        __syncthreads();
        softmax_query(a.att + (size_t)b * d + h * D, row + h * D, w->qkv_b + h * D, a.kc + at, a.vc + at,
                      p < a.N ? p : a.N - 1, D, a.N, sm, red);
        __syncthreads();   /* sm, before the next pair */
    }
}

/* Shared memory: xs [R][d], the residual stream; in [R][max(d, d_ff)], a product's input; for a
 * softmax model also softmax_query's N + D + SOFTMAX_THREADS floats. */
template <int R>
__global__ void __launch_bounds__(STEP_THREADS, 1) fused_step_kernel(StepArgs a) {
    extern __shared__ float4 sh4[];
    __shared__ float red[32];
    float *xs = (float *)sh4, *in = xs + R * a.d, *sm = in + R * (a.d_ff > a.d ? a.d_ff : a.d);
    cg::grid_group grid = cg::this_grid();
    int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    int gw = blockIdx.x * STEP_WARPS + warp, nw = gridDim.x * STEP_WARPS;
    int d = a.d, rows = a.rows, p = *a.pos;   /* block 0 advances *pos after the last barrier */
    float4 pre[PREFETCH];
    prefetch_first(pre, a.layers[0].qkv.w, d, 3 * d, gw, lane);
    for (int r = warp; r < rows; r += STEP_WARPS)   /* embed_kernel's, in every block */
        embed_row(xs + r * d, a.emb, a.pe, a.tok[r], p, d, a.N, lane, 32);
    __syncthreads();
    for (int l = 0; l < a.L; l++) {
        const DevLayer *w = &a.layers[l];
        bool last = l == a.L - 1;
        product<R>(a.qkv, xs, w->qkv.w, pre, rows, d, 3 * d, EPI_NONE, NULL, 0, gw, nw, lane);
        grid.sync();
        attention(a, w, l, p, sm, red, gw, nw, lane);
        prefetch_first(pre, w->out.w, d, d, gw, lane);
        grid.sync();
        load_rows(in, a.att, rows, d);
        product<R>(a.y, in, w->out.w, pre, rows, d, d, EPI_NONE, NULL, 0, gw, nw, lane);
        prefetch_first(pre, w->ff1.w, d, a.d_ff, gw, lane);
        grid.sync();
        for (int r = warp; r < rows; r += STEP_WARPS)   /* epi_residual's, in every block */
            residual_row(xs + r * d, a.y + (size_t)r * d, w->out_b, w->n1w, w->n1b, d, 1, NULL, NULL, NULL, NULL, lane);
        __syncthreads();
        product<R>(a.hid, xs, w->ff1.w, pre, rows, d, a.d_ff, EPI_ACT, w->ff1_b, a.gelu, gw, nw, lane);
        prefetch_first(pre, w->ff2.w, a.d_ff, d, gw, lane);
        grid.sync();
        load_rows(in, a.hid, rows, a.d_ff);
        product<R>(a.y, in, w->ff2.w, pre, rows, a.d_ff, d, EPI_NONE, NULL, 0, gw, nw, lane);
        if (!last) prefetch_first(pre, a.layers[l + 1].qkv.w, d, 3 * d, gw, lane);
        else prefetch_first(pre, a.head_w, d, 3 * a.M, blockIdx.x == 0 ? warp : 3 * a.M, lane);
        grid.sync();
        for (int r = warp; r < rows; r += STEP_WARPS)   /* the last layer's also takes the final norm, into in */
            residual_row(xs + r * d, a.y + (size_t)r * d, w->ff2_b, w->n2w, w->n2b, d, 1, NULL,
                         last ? a.norm_w : NULL, last ? a.norm_b : NULL, last ? in + r * d : NULL, lane);
        __syncthreads();
    }
    if (blockIdx.x != 0) return;
    /* the head, and the draw that reads it, in block 0: its warps take the 3M outputs */
    product<R>(a.out, in, a.head_w, pre, rows, d, 3 * a.M, EPI_HEAD, a.head_b, 0, warp, STEP_WARPS, lane);
    __syncthreads();
    if (a.draw && threadIdx.x < rows) draw_value(a.out, a.M, a.rng, a.img, a.tok, threadIdx.x, p, a.N);   /* sample_kernel's */
    if (threadIdx.x == 0) *a.pos = p + 1;
}

/* Shared memory of fused_step_kernel<R> for f's model. */
static size_t step_smem(const CudaForward *f, int R) {
    const Config *c = &f->c;
    int d = c->d, wide = c->d_ff > d ? c->d_ff : d;
    size_t attn = c->attention == ATTN_SOFTMAX ? (size_t)c->seq_len + c->d_head + SOFTMAX_THREADS : 0;
    return ((size_t)R * (d + wide) + attn) * sizeof(float);
}

template <int R>
static bool step_setup(CudaForward *f, int *blocks) {
    int per_sm = 0;
    size_t smem = step_smem(f, R);
    bool ok = CK(cudaFuncSetAttribute(fused_step_kernel<R>, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem)) &&
              CK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, fused_step_kernel<R>, STEP_THREADS, smem));
    if (ok && per_sm < 1) *blocks = 0;
    return ok;
}

int fused_step_setup(CudaForward *f, int on) {
    const Config *c = &f->c;
    f->step_blocks = 0;
    f->step_layers = NULL;
    /* post-norm (the product's input is x itself), a linear attention of heads of 32 (a warp
     * each, as epi_attn) or a softmax one, float4 rows */
    bool attn = c->attention == ATTN_SOFTMAX || c->d_head == 32;
    if (!on || f->tf32 || c->pre_norm || !attn || c->n_layers < 1 || c->d % 4 || c->d_ff % 4 || f->B > SMALL_ROWS)
        return 0;
    int dev = 0, coop = 0, sms = 0, blocks = 1;
    bool ok = CK(cudaGetDevice(&dev)) && CK(cudaDeviceGetAttribute(&coop, cudaDevAttrCooperativeLaunch, dev)) &&
              CK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev));
    ok = ok && step_setup<1>(f, &blocks) && step_setup<4>(f, &blocks) && step_setup<8>(f, &blocks);
    if (!ok) return -1;
    if (!coop || !blocks) return 0;   /* forward()'s kernels then */
    size_t bytes = (size_t)c->n_layers * sizeof(DevLayer);
    ok = CK(cudaMalloc((void **)&f->step_layers, bytes)) &&
         CK(cudaMemcpy(f->step_layers, f->layers, bytes, cudaMemcpyHostToDevice));
    if (!ok) return -1;
    f->step_blocks = sms;   /* one block an SM: all of them resident, as the grid barrier needs */
    return 0;
}

bool fused_step(const CudaForward *f, int rows, int T) { return f->step_blocks > 0 && T == 1 && small(f, rows); }

/* A cooperative launch of `blocks` blocks of STEP_THREADS (all resident at once, as a grid
 * barrier needs); at: the attribute it points to. */
static cudaLaunchConfig_t coop_config(int blocks, size_t smem, cudaStream_t stream, cudaLaunchAttribute *at) {
    cudaLaunchConfig_t cfg = {};
    at->id = cudaLaunchAttributeCooperative;
    at->val.cooperative = 1;
    cfg.gridDim = dim3(blocks);
    cfg.blockDim = dim3(STEP_THREADS);
    cfg.dynamicSmemBytes = smem;
    cfg.stream = stream;
    cfg.attrs = at;
    cfg.numAttrs = 1;
    return cfg;
}

template <int R>
static bool launch_step(CudaForward *f, const StepArgs &a) {
    cudaLaunchAttribute at;
    cudaLaunchConfig_t cfg = coop_config(f->step_blocks, step_smem(f, R), f->stream, &at);
    return CK(cudaLaunchKernelEx(&cfg, fused_step_kernel<R>, a));
}

bool launch_fused_step(CudaForward *f, int rows, bool draw) {
    const Config *c = &f->c;
    StepArgs a = {};
    a.layers = f->step_layers;
    a.emb = f->emb, a.pe = f->pe, a.norm_w = f->norm_w, a.norm_b = f->norm_b, a.head_w = f->head.w, a.head_b = f->head_b;
    a.qkv = f->qkv, a.att = f->att, a.y = f->xn, a.hid = f->hid, a.out = f->out, a.S = f->S, a.z = f->z;
    a.kc = f->kc, a.vc = f->vc;
    a.tok = f->tok, a.pos = f->pos, a.rng = f->rng, a.img = f->img;
    a.rows = rows, a.B = f->B, a.d = c->d, a.d_ff = c->d_ff, a.H = c->n_heads, a.D = c->d_head, a.L = c->n_layers;
    a.M = c->n_mix, a.N = c->seq_len, a.gelu = c->gelu, a.softmax = c->attention == ATTN_SOFTMAX, a.draw = draw;
    if (rows <= 1) return launch_step<1>(f, a);
    if (rows <= 4) return launch_step<4>(f, a);
    return launch_step<8>(f, a);
}

/* ---------------------------------------------------------------- for the benchmark */

__global__ void __launch_bounds__(STEP_THREADS, 1) barriers_kernel(int n) {
    cg::grid_group grid = cg::this_grid();
    for (int i = 0; i < n; i++) grid.sync();
}

extern "C" int cuda_barrier_seconds(double *sec, Err *e) {
    const int n = 2000;
    int dev = 0, sms = 0;
    cudaEvent_t a = NULL, z = NULL;
    float ms = 0;
    bool ok = CK(cudaGetDevice(&dev)) && CK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev)) &&
              CK(cudaEventCreate(&a)) && CK(cudaEventCreate(&z));
    for (int run = 0; run < 2 && ok; run++) {   /* the first loads the kernel */
        cudaLaunchAttribute at;
        cudaLaunchConfig_t cfg = coop_config(sms, 0, NULL, &at);
        ok = CK(cudaEventRecord(a)) && CK(cudaLaunchKernelEx(&cfg, barriers_kernel, n)) && CK(cudaEventRecord(z)) &&
             CK(cudaEventSynchronize(z)) && CK(cudaEventElapsedTime(&ms, a, z));
    }
    if (a) cudaEventDestroy(a);
    if (z) cudaEventDestroy(z);
    if (!ok) return take_error(e);
    *sec = ms / 1e3 / n;
    return 0;
}
