/* The weight upload: the model's tensors into one GPU allocation as floats, each Linear widened
 * on the GPU from the file's own layout (halves or floats) by widen_kernel, with its [W W] halves
 * for the tensor-core products, and the position code computed there (pe_kernel). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "internal.cuh"

static size_t lin_floats(int n_in, int n_out) { return (size_t)n_in * n_out; }

/* A Linear's weight, row-major [n_out, n_in] as the file holds it (halves or floats), into
 * dst as floats; with h2, also [W W] as halves there (row o: W[o], then W[o] again), so that the
 * tensor-core product is as exact as SGEMM (linear(), products.cu). A float weight that is not a
 * half clears *all_halves. The element order is the file's own: no layout to get wrong. */
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

/* The model's tensors into f: f->weights, f->weights16 where every Linear's values are halves
 * (f->halves), f->layers and the pointers into them; 0, or -1 with the failure recorded. */
int upload_weights(CudaForward *f, const GpuModel *m) {
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
