/* What the CUDA engine's files (check.cu, kernels.cu, products.cu, upload.cu, forward.cu) share,
 * private to them: the error recording, the engine (CudaForward) and its weights, the products'
 * epilogues (Epi), and the host functions that launch another file's kernels. Each kernel is
 * launched from its own file, so every file compiles on its own (no -rdc). */
#ifndef LINGEN_CUDA_INTERNAL_CUH
#define LINGEN_CUDA_INTERNAL_CUH
#include <cublas_v2.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include "lingen_cuda.h"   /* what the C and CUDA halves share (free of -march) */

/* ---------------------------------------------------------------- error checks (check.cu) */

/* A call has failed since the last take_error (its message is kept). */
extern int failed;
/* ok, unchanged; when false and no failure is recorded yet, records "file:line: what: why". */
bool note(bool ok, const char *what, const char *why, const char *file, int line);
/* note() of a CUDA result, of a cuBLAS status. */
bool note_cuda(cudaError_t r, const char *what, const char *file, int line);
bool note_cublas(cublasStatus_t r, const char *what, const char *file, int line);
/* Returns -1 with the recorded failure in e, and clears it for the next run. */
int take_error(Err *e);
#define CK(x) note_cuda((x), #x, __FILE__, __LINE__)
#define CKB(x) note_cublas((x), #x, __FILE__, __LINE__)
#define CKL(what) note_cuda(cudaGetLastError(), what, __FILE__, __LINE__)   /* after a launch */

#define SMALL_ROWS 8       /* at most this many rows: small_linear_kernel (its RESIDUAL: a warp a row of one block) */

/* ---------------------------------------------------------------- the engine (forward.cu) */

/* A Linear's weight: w as floats, and h2 = [W W] as halves when every value of W is a half. */
struct GpuLin { float *w; __half *h2; };
struct DevLayer { GpuLin qkv, out, ff1, ff2; float *qkv_b, *out_b, *n1w, *n1b, *n2w, *n2b, *ff1_b, *ff2_b; };

/* The engine: capacity, stream and cuBLAS, weights, activations, the attention's memory, draws. */
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
    int pdl;                      /* small products launched as programmatic dependents (GpuModel.pdl) */
    int step_blocks;              /* the fused step's grid (one block an SM); 0: no fused step */
    DevLayer *step_layers;        /* the layers' pointers in device memory, for the fused step */
    /* generation (made with draws): each image's values and random stream, and the step's graph */
    Rng *rng;                     /* [B] */
    unsigned char *img;           /* [B][N] */
    cudaGraph_t graph;
    cudaGraphExec_t exec;
};

/* ---------------------------------------------------------------- the products (products.cu) */

/* What the small product does with its outputs (at most 8 rows: a step at batch 1..8, where
 * every launch is latency). ACT: y = act(y + bias). HEAD: y += bias
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

/* Whether linear() runs the warp-per-output kernel, epilogue included. */
bool small(const CudaForward *f, int rows);
/* The epilogues that forward() gives linear() (products.cu says what each does). */
Epi epi_act(const CudaForward *f, const float *bias, __half *x2);
Epi epi_head(const CudaForward *f);
Epi epi_residual(CudaForward *f, const float *bias, const float *w, const float *b, const float *fw, const float *fb,
                 __half *x2);
/* Whether the linear attention runs in the qkv product's last block (epi_attn). */
bool attn_in_product(const CudaForward *f, int rows);
Epi epi_attn(CudaForward *f, int l, int T);
/* Y[rows, n_out] = X[rows, n_in] W^T, then the epilogue (products.cu). */
bool linear(CudaForward *f, float *Y, const float *X, GpuLin W, int rows, int n_in, int n_out, Epi epi = Epi());

/* ---------------------------------------------------------------- the fused step (step.cu) */

/* Sets f up for the fused step when on and the model and GPU allow it (else f keeps forward()'s
 * kernels); 0, or -1 with the failure recorded. After upload_weights. */
int fused_step_setup(CudaForward *f, int on);
/* Whether a forward of rows x T runs as the fused step. */
bool fused_step(const CudaForward *f, int rows, int T);
/* The fused step of rows images at *pos (which it advances); with draw, also the draw of each. */
bool launch_fused_step(CudaForward *f, int rows, bool draw);

/* ---------------------------------------------------------------- the weights (upload.cu) */

/* The model's tensors into f->weights (and the halves into f->weights16); 0, or -1 with the
 * failure recorded. */
int upload_weights(CudaForward *f, const GpuModel *m);

/* ---------------------------------------------------------------- the kernels (kernels.cu) */

/* Each launches its kernel (kernels.cu says what it computes) on the stream, with the kernel's
 * own arguments after any count its grid needs (B images, nb images); launch_sample_test on the
 * legacy default stream. The caller checks the launch (CKL). */
void launch_embed(cudaStream_t stream, float *x, const int *tok, const float *emb, const float *pe, const int *pos,
                  int rows, int T, int d, int N);
void launch_layernorm(cudaStream_t stream, float *out, const float *x, const float *w, const float *b, int rows,
                      int d);
void launch_residual(cudaStream_t stream, float *x, const float *y, const float *bias, const float *w, const float *b,
                     int rows, int d, int post, __half *x2, const float *fw, const float *fb, float *xn);
void launch_activation(cudaStream_t stream, float *h, const float *bias, int rows, int dff, int gelu, __half *x2);
void launch_head(cudaStream_t stream, float *out, const float *bias, int rows, int M);
void launch_advance(cudaStream_t stream, int *pos, int T);
void launch_linear_attention(cudaStream_t stream, float *S, float *z, const float *qkv, const float *qkv_b, float *out,
                             __half *out2, int B, int H, int T, int D);
void launch_kv_append(cudaStream_t stream, float *kc, float *vc, const float *qkv, const float *qkv_b, const int *pos,
                      int B, int T, int H, int D, int cap);
void launch_softmax_attention(cudaStream_t stream, int B, const float *kc, const float *vc, const float *qkv,
                              const float *qkv_b, float *out, const int *pos, int T, int H, int D, int cap);
void launch_query_block(cudaStream_t stream, float *qb, const float *qkv, const float *qkv_b, int b0, int nb, int i0,
                        int n, int T, int H, int D, int h);
void launch_softmax_rows(cudaStream_t stream, int nb, float *sc, int n, int P, int p0);
void launch_sample(cudaStream_t stream, const float *out, int M, Rng *rng, unsigned char *img, int *tok, const int *pos,
                   int B, int N);
void launch_sample_test(const float *out, int M, Rng *rng, int *x, int n);

#endif
