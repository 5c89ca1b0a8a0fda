/* y = x W^T + b for the Linear layers, with W packed once, when the model is loaded.
 *
 * Packed layout: the output columns in panels of MATMUL_NR (32 with AVX-512, else 16); panel
 * p holds W[NR p + j][i] at [p][i][j], zero past the last column. A panel is the micro-kernel's whole
 * right-hand operand, read front to back, so no product packs the weights again: a sampling
 * step streams every weight from memory, and packing them in each product, as a BLAS does, would
 * stream them once more (docs/speed.md, The kernel a step takes). The products run on lingen's
 * threads (threads.h). */
#ifndef LINGEN_MATMUL_H
#define LINGEN_MATMUL_H
#include <stddef.h>
#include <stdint.h>

#include "store.h"

#if defined(__AVX512F__)
#define MATMUL_NR 32   /* two 16-float vectors */
#else
#define MATMUL_NR 16   /* two 8-float AVX2 vectors */
#endif

/* A packed weight: its panels, of floats or of IEEE halves (half.h). A model file's F16 weights
 * are held as halves: half the bytes to stream at every step, and the same products, since a
 * half widens to a float exactly (the kernels widen each panel row as they read it). */
typedef struct {
    const void *p;
    int half;              /* 0: float values, 1: uint16_t halves */
    const uint16_t *amx;   /* or NULL: the same halves packed for AMX tiles (matmul_amx.h) */
    const uint16_t *bf16;  /* or NULL: the same weights rounded to bfloat16, packed in pairs of
                            * inputs (matmul_bf16_pack) */
    const void *q8;        /* or NULL: the same as 8-bit integers (matmul_q8.h) */
} Packed;   /* the copies a model holds (plan.h's Copies); which one a product runs on is product.h's */

/* The micro-kernel this build uses: "AVX-512", "AVX2" or "portable" (chosen at compile time). */
const char *matmul_kernel_name(void);
/* Values (floats or halves) a packed [n_out, n_in] weight takes. */
size_t matmul_packed_values(int n_in, int n_out);
/* Where W[o][i] is held in the packed weight. */
size_t matmul_packed_index(int n_in, int o, int i);
/* Pack W, row-major [n_out, n_in] (PyTorch's Linear.weight) of floats or of halves (half = 1),
 * into dst of the same type. */
void matmul_pack(void *dst, const void *W, int half, int n_in, int n_out);
/* Values (bfloat16) a weight packed for them takes: panels of NR outputs, each of (n_in + 1) / 2
 * pairs of inputs, a pair's two values side by side per output; zero past the last. */
size_t matmul_bf16_values(int n_in, int n_out);
/* Pack W, row-major [n_out, n_in] floats, rounded to bfloat16 (float_to_bf16), into dst. */
void matmul_bf16_pack(uint16_t *dst, const float *W, int n_in, int n_out);
/* W[o][i] of a packed weight, as a float. */
float matmul_packed_get(Packed W, int n_in, int o, int i);
/* out[rows, n_out] = x[rows, n_in] W^T + b on W's panels (W.p) in float32; rows are n_in and
 * n_out apart. */
void matmul(float *out, const float *x, Packed W, const float *b, int rows, int n_in, int n_out);
/* The same, then the activation act on every output (MATMUL_RELU, MATMUL_GELU: exact, as PyTorch's),
 * while it is still in the cache. */
void matmul_ex(float *out, const float *x, Packed W, const float *b, int rows, int n_in, int n_out, int act);
/* A bfloat16 product's input already rounded, and its output rounded as well, for the next
 * product: a sampling step takes dozens of products, and the loop that writes a value rounds it
 * while it is in the cache, where each product would round its input again, alone or in one
 * more parallel loop. Rows n_in (x16) and n_out (out16) apart; a row count padded to a multiple
 * of 16 (the tiles' rows: zero rows, never written). Taken by the bfloat16 products where the
 * width is a multiple of MATMUL_ROUNDED_ALIGN, else ignored; either may be NULL. */
#define MATMUL_ROUNDED_ALIGN 32
#define MATMUL_ROUNDED_ROWS(rows) (((rows) + 15) / 16 * 16)
typedef struct { const uint16_t *x16; uint16_t *out16; } Rounded;
/* matmul_ex on W's bfloat16 copy (W.bf16) with vdpbf16ps, x rounded (or r.x16 taken as it). */
void matmul_bf16(float *out, const float *x, Packed W, const float *b, int rows, int n_in, int n_out, int act,
                 Rounded r);
#endif
