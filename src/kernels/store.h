/* What the three product kernels (matmul.c, matmul_amx.c, matmul_q8.c) share, below all of
 * them: the activations, the rounding to bfloat16 and the store of a block of outputs. */
#ifndef LINGEN_STORE_H
#define LINGEN_STORE_H
#include <stddef.h>
#include <stdint.h>

/* The activation a product applies to its outputs: exact, as PyTorch's. */
enum { MATMUL_NONE, MATMUL_RELU, MATMUL_GELU };

/* bfloat16 products (AVX512-BF16's vdpbf16ps): each weight and each input rounded to bfloat16,
 * their exact products summed in float32, two inputs per instruction where float32 takes one.
 * Whether the build has the instructions and the processor runs them (probed once); where they
 * run is plan.h's to say. */
int matmul_bf16_ready(void);
/* act on rows x ncols outputs, rows ldo apart. */
void matmul_activate(float *o, int ldo, int rows, int ncols, int act);
/* rows x n outputs from src (a block in the cache, rows lds floats apart) into out (ldo apart;
 * out = src: in place), act applied, and rounded to bfloat16 into out16 (ldd apart) unless it is
 * NULL: one pass (the products end with it where their kernel did not). src is overwritten where
 * act is gelu. */
void matmul_store_rows(float *out, size_t ldo, uint16_t *out16, size_t ldd, float *src, size_t lds, int rows, int n,
                       int act);
/* x[n] rounded to bfloat16 as the bfloat16 products round their inputs (half.h's float_to_bf16). */
void matmul_round_bf16(uint16_t *dst, const float *x, int n);
/* The same for rows of n values, ldx floats apart in x and ldd halves apart in dst. */
void matmul_round_bf16_rows(uint16_t *dst, size_t ldd, const float *x, size_t ldx, int rows, int n);
#endif
