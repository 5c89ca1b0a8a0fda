/* What a model is, as plain data: its configuration, the constants of its arithmetic, and a
 * Linear weight in the model file's own layout. Both engines include this header, the C one and
 * the CUDA one (src/cuda/), and nvcc compiles the latter without the host's -march: nothing here,
 * or in any header the CUDA engine includes, may depend on the processor's instruction set, so
 * that no constant or layout can differ between the two halves of one build
 * (tests/test_cli_cuda_build.sh checks every such header under two instruction sets). */
#ifndef LINGEN_CONFIG_H
#define LINGEN_CONFIG_H

#define BOS_TOKEN 256
#define N_TOKENS 257
#define LINEAR_EPS 1e-6f
#define LN_EPS 1e-5f
#define LOG_SCALE_MIN -7.0f
#define MAX_SIDE 64   /* height and width at most (docs/model-format.md) */

typedef enum { ATTN_LINEAR, ATTN_SOFTMAX } AttnKind;

typedef struct {
    AttnKind attention;
    int n_layers, n_heads, d_head, d_ff, n_mix;
    int height, width, channels;
    int pre_norm;      /* 0: post-norm (the paper), 1: pre-norm */
    int gelu;          /* 0: relu (the paper), 1: gelu */
    char dataset[16];  /* "mnist" | "cifar10" */
    int d;             /* n_heads * d_head */
    int seq_len;       /* height * width * channels */
} Config;

/* A Linear weight W as the model file stores it: row-major [n_out][n_in] (PyTorch's
 * Linear.weight), W[o][i] at w[o * n_in + i]; IEEE halves (half = 1) where the file holds F16,
 * else floats (F32, and BF16 widened exactly). */
typedef struct {
    const void *w;
    int half;
} FileWeight;
#endif
