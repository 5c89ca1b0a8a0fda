/* y = x W^T + b with W held as 8-bit integers: a sampling step at a small batch streams every
 * weight from memory and does little arithmetic on it, so half the bytes of bfloat16 is up to
 * twice the speed where memory is the limit. Which runs take them is plan.h's to say.
 *
 * W is cut into blocks of 32 inputs of one output, each held as 32 integers q in -127..127 and a
 * scale s = max |w| / 127 of the block, rounded up to bfloat16 (2 bytes, the idea of llama.cpp's
 * Q8_0 with its float16 scale; bfloat16 keeps float32's range), w ~ s q: a weight off by at most
 * s / 2, about a 254th of its block's largest. A row of x is taken as 16-bit integers in the
 * same way, qx in -32767..32767 with one scale t = max |x| / 32767 for the row (off by at most
 * t / 2, a 65,534th of its largest), so each block's sum of qx q is an exact integer:
 *     y = b + t * (sum over blocks of s * (sum over the block's inputs of qx q)),
 * the block sums in int32 (vpdpwssd: two inputs an instruction, where float32 takes one), the
 * rest in float32, one multiply-add (one rounding) per term. On MNIST's model (500 test images)
 * and CIFAR-10's (100) bits/dim move by less than 1e-3 against float32 (models/README.md).
 *
 * Packed layout: output columns in panels of 32, inputs in blocks of 32 (zero past the last);
 * panel p holds its blocks in turn, each 16 pairs of inputs x 32 outputs of int8 (a pair's 32
 * outputs side by side, each output's two together) and then the 32 outputs' scales: 1,088
 * bytes (1.0625 a weight), read front to back. */
#ifndef LINGEN_MATMUL_Q8_H
#define LINGEN_MATMUL_Q8_H
#include <stddef.h>

#define Q8_NR 32   /* outputs in a panel */
#define Q8_KB 32   /* inputs in a block */
#define Q8_BLOCK (Q8_KB * Q8_NR + Q8_NR * 2)   /* bytes */

/* Bytes a packed [n_out, n_in] weight takes. */
size_t matmul_q8_bytes(int n_in, int n_out);
/* Quantize and pack W, row-major [n_out, n_in] floats, into dst. */
void matmul_q8_pack(void *dst, const float *W, int n_in, int n_out);
/* W[o][i] as held: s q. */
float matmul_q8_get(const void *W, int n_in, int o, int i);
/* Whether the products take AVX512-VNNI's vpdpwssd (else vpmaddwd and vpaddd, the same bits):
 * where the processor has it, unless want = 0 turned it off; want = 1 turns it back on, -1 asks. */
int matmul_q8_vnni(int want);
/* out[rows, n_out] = x[rows, n_in] W^T + b (b may be NULL), then act (matmul.h's MATMUL_*). */
void matmul_q8(float *out, const float *x, const void *W, const float *b, int rows, int n_in, int n_out, int act);
#endif
