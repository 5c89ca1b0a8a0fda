/* The model: its configuration and its weights, loaded from a lingen model file
 * (safetensors, docs/model-format.md). Weights are widened to float32. */
#ifndef LINGEN_MODEL_H
#define LINGEN_MODEL_H
#include <stddef.h>
#include "config.h"
#include "kernels/matmul.h"
#include "kernels/plan.h"
#include "io/util.h"

/* Linear weights (the file has PyTorch's [out, in]) are held packed for matmul() (matmul.h):
 * panels of NR = MATMUL_NR output columns, [n_out/NR][in][NR], as halves if the file stores
 * them as F16, else as floats; and, loaded with MODEL_FILE_WEIGHTS, also as the file has them
 * (config.h's FileWeight: what the GPU engine takes). Every tensor starts on a cache line. */
typedef struct {
    Packed qkv_w;              /* [3d, d]: outputs all q, then all k, then all v */
    float *qkv_b;              /* [3d] */
    Packed out_w;              /* [d, d] */
    float *out_b;              /* [d] */
    float *norm1_w, *norm1_b;  /* [d] */
    float *norm2_w, *norm2_b;  /* [d] */
    Packed ff1_w;              /* [d_ff, d] */
    float *ff1_b;              /* [d_ff] */
    Packed ff2_w;              /* [d, d_ff] */
    float *ff2_b;              /* [d] */
    FileWeight qkv_f, out_f, ff1_f, ff2_f;   /* the same four in the file's layout, or all NULL */
} LayerWeights;

typedef struct Model {
    Config cfg;
    float *emb;                /* [257, d/2] */
    LayerWeights *layers;      /* [n_layers] */
    float *norm_w, *norm_b;    /* [d] */
    Packed head_w;             /* [3M, d] */
    float *head_b;             /* [3M] */
    FileWeight head_f;         /* the head's weight in the file's layout, or NULL */
    float *arena;              /* all weights, one allocation */
    size_t arena_floats;       /* its size in floats: the tensors, the panels' padding, the alignment */
    size_t n_params;
    Plan plan;                 /* the kernels: which copies of the weights are held (Packed), and
                                * which one each product takes (transformer.c) */
    int n_meta;                /* metadata, all strings */
    char **meta_keys, **meta_vals;
} Model;

/* Load and validate a model file; on error a one-line message naming the file and the problem. */
int model_load(Model *m, const char *path, Err *e);
/* The same on a plan (NULL: plan_default()), keeping what keep asks for beside what the CPU
 * engine needs. */
enum { MODEL_FILE_WEIGHTS = 1 };   /* every Linear weight in the file's own layout too (FileWeight) */
int model_load_with(Model *m, const char *path, const Plan *plan, int keep, Err *e);
/* The same from a file already in memory (fuzzing, tests); takes buf, as st_parse does.
 * name stands for the file in error messages. */
int model_load_buffer(Model *m, unsigned char *buf, size_t len, const char *name, Err *e);
void model_free(Model *m);
const char *model_meta(const Model *m, const char *key);   /* NULL if absent */

/* Bytes of per-image attention memory: RNN state (linear) or KV cache over n positions (softmax). */
size_t model_state_bytes(const Config *c, int n_positions);
#endif
