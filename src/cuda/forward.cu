/* The CUDA engine (lingen_cuda.h): CudaForward made and freed, the forward pass (forward(): the
 * layers, the attentions, the head), the canary, the draws and the C API. The current position
 * lives in GPU memory and each forward ends by advancing it, so one CUDA graph of a whole step
 * (every layer, the head, the sampler) replays for every position. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "internal.cuh"

#define QBLOCK 256                 /* softmax, several positions: queries a block (attention_softmax.c's 64) */
#define SCORES_BYTES (512u << 20)  /* ... and at most this much of their scores at once */

/* Frees f and all it holds; NULL: nothing. */
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
    cudaFree(f->step_layers);
    free(f->layers);
    free(f);
}

#define BLAS_WORKSPACE (32u << 20)   /* set explicitly: cuBLAS must not allocate inside a graph capture */

/* An engine of capacity B x T, its weights uploaded and its buffers made; NULL with the failure
 * recorded. tf32: cuBLAS on the TF32 tensor cores. */
static CudaForward *forward_create(const GpuModel *m, int B, int T, int tf32) {
    const Config *c = &m->cfg;
    CudaForward *f = (CudaForward *)calloc(1, sizeof *f);
    if (!f) { note(false, "calloc", "out of memory", __FILE__, __LINE__); return NULL; }
    f->c = *c;
    f->B = B;
    f->T = T;
    f->tf32 = tf32;
    f->pdl = m->pdl;
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
    ok = ok && upload_weights(f, m) == 0 && fused_step_setup(f, m->fused) == 0;
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

/* Back to position 0: *pos and the linear attention's state zeroed (on the stream). */
static bool reset(CudaForward *f) {
    f->n_pos = 0;
    bool ok = CK(cudaMemsetAsync(f->pos, 0, sizeof(int), f->stream));
    if (f->S) ok = ok && CK(cudaMemsetAsync(f->S, 0, f->state_floats * 4, f->stream));
    return ok;
}

/* out = LN(x) with (w, b), rows of d. */
static bool layernorm(CudaForward *f, float *out, const float *x, const float *w, const float *b, int rows) {
    launch_layernorm(f->stream, out, x, w, b, rows, f->c.d);
    return CKL("layernorm_kernel");
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
                launch_query_block(f->stream, f->qblk, f->qkv, qkv_b, b0, nb, i0, n, T, H, D, h);
                const float *K = kc + ((size_t)b0 * H + h) * N * D, *V = vc + ((size_t)b0 * H + h) * N * D;
                ok = CKL("query_block_kernel") &&
                     CKB(cublasSgemmStridedBatched(f->blas, CUBLAS_OP_T, CUBLAS_OP_N, P, n, D, &scale, K, D, kv_stride,
                                                   f->qblk, D, (long long)n * D, &zero, f->sc, P, (long long)n * P, nb));
                if (!ok) break;
                launch_softmax_rows(f->stream, nb, f->sc, n, P, t0 + i0);
                ok = CKL("softmax_rows_kernel") &&
                     CKB(cublasSgemmStridedBatched(f->blas, CUBLAS_OP_N, CUBLAS_OP_N, D, n, P, &one, V, D, kv_stride,
                                                   f->sc, P, (long long)n * P, &zero,
                                                   f->att + ((size_t)b0 * T + i0) * d + h * D, d, (long long)T * d, nb));
            }
    }
    return ok;
}

/* Layer l's attention of B x T rows, from f->qkv into f->att. Linear: one (image, head) pair per
 * D threads, S's column e in thread e's registers, the positions in order (the RNN, also for the
 * parallel form: the same sums as the chunked form up to rounding). Softmax: the new keys and
 * values appended to the cache; a step (one position) then runs one block per (image, head)
 * over its prefix, several positions at once (evaluation, a prefix) run as attention_softmax.c
 * does (softmax_blocks). out2: the linear attention's output only as the next product's halves
 * (NULL: f->att). */
static bool attention(CudaForward *f, int l, int B, int T, __half *out2) {
    const Config *c = &f->c;
    int H = c->n_heads, D = c->d_head, N = c->seq_len;
    const float *qb = f->layers[l].qkv_b;
    if (c->attention == ATTN_LINEAR) {
        float *S = f->S + (size_t)l * f->B * H * D * D, *z = f->z + (size_t)l * f->B * H * D;
        launch_linear_attention(f->stream, S, z, f->qkv, qb, f->att, out2, B, H, T, D);
        return CKL("linear_attention_kernel");
    }
    size_t off = (size_t)l * f->B * H * N * D;
    launch_kv_append(f->stream, f->kc + off, f->vc + off, f->qkv, qb, f->pos, B, T, H, D, N);
    if (!CKL("kv_append_kernel")) return false;
    if (T > 1 && f->sc) return softmax_blocks(f, f->kc + off, f->vc + off, qb, B, T, f->n_pos);
    launch_softmax_attention(f->stream, B, f->kc + off, f->vc + off, f->qkv, qb, f->att, f->pos, T, H, D, N);
    return CKL("softmax_attention_kernel");
}

/* The forward pass of B x T tokens already in f->tok, from position *pos; head outputs in f->out
 * (bias added); *pos advanced by T. Only launches: capturable. */
static bool forward(CudaForward *f, int B, int T) {
    const Config *c = &f->c;
    int d = c->d, rows = B * T, pre = c->pre_norm, M = c->n_mix;
    if (fused_step(f, rows, T)) return launch_fused_step(f, rows, false);
    bool ok = true;
    launch_embed(f->stream, f->x, f->tok, f->emb, f->pe, f->pos, rows, T, d, c->seq_len);
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
    if (ok) launch_advance(f->stream, f->pos, T);
    return ok && CKL("advance_kernel");
}

/* ---------------------------------------------------------------- the forward API */

/* The canary (lingen_cuda.h): the B rows of BOS, CANARY_TOKEN, ... (T positions a call, the rest
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
 * the sampler, which writes that position of each image and makes it the next token; or the
 * fused step, which does both. */
static bool step_launches(CudaForward *f) {
    if (fused_step(f, f->B, 1)) return launch_fused_step(f, f->B, true);
    if (!forward(f, f->B, 1)) return false;
    launch_sample(f->stream, f->out, f->c.n_mix, f->rng, f->img, f->tok, f->pos, f->B, f->c.seq_len);
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
    if (ok) launch_sample_test(d_out, M, d_rng, d_x, n);
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

extern "C" int cuda_copy_bandwidth(size_t bytes, double *bytes_per_s, Err *e) {
    void *src = NULL, *dst = NULL;
    cudaEvent_t a = NULL, z = NULL;
    bool ok = CK(cudaMalloc(&src, bytes)) && CK(cudaMalloc(&dst, bytes)) && CK(cudaMemset(src, 1, bytes)) &&
              CK(cudaEventCreate(&a)) && CK(cudaEventCreate(&z));
    float best = 0;
    for (int i = 0; i < 6 && ok; i++) {   /* the first copy warms up; the fastest counts */
        float ms = 0;
        ok = CK(cudaEventRecord(a)) && CK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice)) &&
             CK(cudaEventRecord(z)) && CK(cudaEventSynchronize(z)) && CK(cudaEventElapsedTime(&ms, a, z));
        if (ok && i > 0 && (best == 0 || ms < best)) best = ms;
    }
    if (a) cudaEventDestroy(a);
    if (z) cudaEventDestroy(z);
    cudaFree(src);
    cudaFree(dst);
    if (!ok || best <= 0) return failed ? take_error(e) : err_set(e, "cuda_copy_bandwidth: no time measured");
    *bytes_per_s = 2.0 * (double)bytes / (best / 1e3);
    return 0;
}
