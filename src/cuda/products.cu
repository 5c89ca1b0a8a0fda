/* The products: linear(), y = x W^T, on cuBLAS SGEMM, on the FP16 tensor cores as an exact
 * [hi lo] split, or for a few rows in small_linear_kernel (a warp an output); and the epilogues
 * (Epi) that add the bias and run what follows the product (activation, head, residual and
 * norm, the linear attention). */
#include "device.cuh"
#include "internal.cuh"

/* Y[rows, n_out] = X[rows, n_in] W^T for rows <= R: one warp per output column, W's row read
 * once; then the epilogue. Blocks of 8 warps: in RESIDUAL, warp r of the last block takes row r.
 * Launched as a programmatic dependent (GpuModel.pdl), it lets the next kernel start at once and
 * loads the first PREFETCH float4s of its weight row (which no kernel writes) before it waits
 * for the kernel before (griddepcontrol.wait: that grid done, its writes visible); launched
 * plainly, the wait returns at once. The sums are the same either way. */
template <int R>
__global__ void small_linear_kernel(float *Y, const float *X, const float *W, int rows, int n_in, int n_out, Epi epi) {
    asm volatile("griddepcontrol.launch_dependents;");
    int o = (int)(((size_t)blockIdx.x * blockDim.x + threadIdx.x) >> 5), lane = threadIdx.x & 31;
    const float *w = W + (size_t)o * n_in;
    const float4 *w4 = (const float4 *)w;
    bool vec = o < n_out && n_in % 4 == 0;   /* 16-byte loads: a quarter of the dependent loads (latency) */
    float4 pre[PREFETCH];
    prefetch_row(pre, w4, n_in / 4, lane, vec);
    asm volatile("griddepcontrol.wait;" ::: "memory");
    if (o < n_out) {
        float acc[R];
        if (vec) row_dots<R>(acc, pre, w4, X, rows, n_in, lane);
        else {
#pragma unroll
            for (int r = 0; r < R; r++) acc[r] = 0;
            for (int i = lane; i < n_in; i += 32) {
                float wi = w[i];
#pragma unroll
                for (int r = 0; r < R; r++)
                    if (r < rows) acc[r] += wi * X[(size_t)r * n_in + i];
            }
        }
#pragma unroll
        for (int r = 0; r < R; r++) {
            float s = warp_sum(acc[r]);
            if (epi.kind == EPI_ACT) s = activate(s + epi.bias[o], epi.gelu);
            if (epi.kind == EPI_HEAD) s += epi.bias[o];
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
 * product (linear()). Activations stay far inside the half range (65504): the inputs of the
 * products are layer-normed rows, attention outputs and the feed-forward's hidden values. */
__global__ void split_kernel(__half *X2, const float *X, int rows, int n) {
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < (size_t)rows * n) put_split(X2 + i / n * 2 * n, n, (int)(i % n), X[i]);
}

/* Whether linear() runs the warp-per-output kernel, epilogue included. */
bool small(const CudaForward *f, int rows) { return rows <= SMALL_ROWS && !f->tf32; }

Epi epi_act(const CudaForward *f, const float *bias, __half *x2) {
    Epi e = {};
    e.kind = EPI_ACT, e.bias = bias, e.gelu = f->c.gelu, e.x2 = x2;
    return e;
}
Epi epi_head(const CudaForward *f) {
    Epi e = {};
    e.kind = EPI_HEAD, e.bias = f->head_b, e.M = f->c.n_mix;
    return e;
}
/* x += y + bias, then (post-norm) x = LN(x) with (w, b); with a final norm fw, also xn = LN(x). */
Epi epi_residual(CudaForward *f, const float *bias, const float *w, const float *b, const float *fw, const float *fb,
                 __half *x2) {
    Epi e = {};
    e.kind = EPI_RESIDUAL, e.bias = bias, e.w = w, e.b = b, e.fw = fw, e.fb = fb, e.post = !f->c.pre_norm;
    e.x = f->x, e.xn = f->xn, e.counter = f->counter, e.x2 = x2;
    return e;
}

/* The linear attention of layer l after its qkv product, in the product's last block: a few rows
 * and heads of width 32 (a warp each). */
bool attn_in_product(const CudaForward *f, int rows) {
    return small(f, rows) && f->c.attention == ATTN_LINEAR && f->c.d_head == 32;
}
Epi epi_attn(CudaForward *f, int l, int T) {
    Epi e = {};
    int H = f->c.n_heads, D = f->c.d_head;
    e.kind = EPI_ATTN, e.bias = f->layers[l].qkv_b, e.counter = f->counter, e.out = f->att, e.H = H, e.T = T;
    e.S = f->S + (size_t)l * f->B * H * D * D, e.z = f->z + (size_t)l * f->B * H * D;
    return e;
}

/* Y[rows, n_out] = X[rows, n_in] W^T (row-major; cuBLAS sees the column-major transposes), then
 * the epilogue: in the same launch for a few rows, else in kernels of its own. X = NULL: the
 * kernel before wrote the input as halves into f->x2 (tensor-core path only). W is row-major
 * [out, in], as the model file holds it. The paths:
 *   - A weight whose every value is a half (the model files hold F16) runs on the FP16 tensor
 *     cores without losing float32's accuracy: x = hi + lo, two halves (hi = half(x), lo =
 *     half(x - hi)), so x W^T = [hi lo] [W W]^T, one GEMM of twice the depth accumulated in
 *     float32; what is lost is lo's rounding, |x| 2^-22 at most (2^-24 would be float32's own).
 *   - Other weights: cuBLAS SGEMM in plain FP32 (no TF32: the head outputs must match the CPU's
 *     to 1e-4).
 *   - At most 8 rows (a step at batch 1..8: latency): small_linear_kernel on the float weights.
 * The bias is added by the kernel that consumes the product (one pass fewer). */
/* small_linear_kernel<R> on f's stream, as a programmatic dependent when f->pdl. */
template <int R>
static bool launch_small(CudaForward *f, float *Y, const float *X, const float *W, int rows, int n_in, int n_out,
                         Epi epi) {
    cudaLaunchConfig_t cfg = {};
    cudaLaunchAttribute early[1];
    early[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
    early[0].val.programmaticStreamSerializationAllowed = 1;
    cfg.blockDim = dim3(256);   /* 8 warps: RESIDUAL's 8 rows */
    cfg.gridDim = dim3((n_out * 32 + 255) / 256);
    cfg.stream = f->stream;
    cfg.attrs = early;
    cfg.numAttrs = f->pdl ? 1 : 0;
    return CK(cudaLaunchKernelEx(&cfg, small_linear_kernel<R>, Y, X, W, rows, n_in, n_out, epi));
}

bool linear(CudaForward *f, float *Y, const float *X, GpuLin W, int rows, int n_in, int n_out, Epi epi) {
    if (small(f, rows)) {
        if (rows <= 1) return launch_small<1>(f, Y, X, W.w, rows, n_in, n_out, epi);
        if (rows <= 4) return launch_small<4>(f, Y, X, W.w, rows, n_in, n_out, epi);
        return launch_small<8>(f, Y, X, W.w, rows, n_in, n_out, epi);
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
    switch (ok ? epi.kind : EPI_NONE) {
    case EPI_ACT:
        launch_activation(f->stream, Y, epi.bias, rows, n_out, epi.gelu, epi.x2);
        return CKL("activation_kernel");
    case EPI_HEAD:
        launch_head(f->stream, Y, epi.bias, rows, epi.M);
        return CKL("head_kernel");
    case EPI_RESIDUAL:
        launch_residual(f->stream, epi.x, Y, epi.bias, epi.w, epi.b, rows, n_out, epi.post, epi.x2, epi.fw, epi.fb,
                        epi.xn);
        return CKL("residual_kernel");
    }
    return ok;
}

