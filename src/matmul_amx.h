/* y = x W^T + b on Intel AMX tiles (Xeon Sapphire Rapids and later), for float16 weights, at
 * float32's accuracy.
 *
 * A tile product takes bfloat16 values (8 significant bits) and sums in float32. A float16 weight
 * (11 bits) is two bfloat16 exactly, W = Wh + Wl, and a float32 input (24 bits) three,
 * x = xh + xm + xl. Of the six products five are taken, each exact in float32; the sixth, xl Wl,
 * is below float32's rounding of the sum:
 *     x W = xh Wh + xh Wl + xm Wh + xm Wl + xl Wh.
 * The weights stay float16 in memory (2 bytes to stream each, as matmul.c's): each tile of them
 * is split as it is used, once for all the rows of a product.
 *
 * The model uses it for the parallel form (transformer.c: evaluation, a prefix), where a
 * product has hundreds of rows or more: an evaluation of MNIST on a 16-core Xeon ran at 36.8
 * images/s against 22.7 with matmul.c's AVX-512 kernel (2 cores: 12.8 against 11.1), the same
 * bits/dim to 5 digits. A sampling step is not worth it: there the split of the weights and the
 * tiles' five products per value cost more than they save (batch 1: 5.8x slower, batch 64:
 * 1.7x slower, measured).
 *
 * Packed layout: output columns in tiles of 16, padded to a multiple of 32 (the kernel takes two
 * column tiles at once), inputs in blocks of 32 (zero padded); tile (c, k) is 16 rows of 16
 * (column, pair of inputs) halves: TDPBF16PS's layout of its second operand. */
#ifndef LINGEN_MATMUL_AMX_H
#define LINGEN_MATMUL_AMX_H
#include <stddef.h>
#include <stdint.h>

/* Whether this process can use the tiles: the processor has AMX-BF16, Linux grants the tile
 * state, and LINGEN_AMX is not 0. Asked once; the first call asks the kernel. A row's outputs do
 * not depend on the rows beside it, as with matmul.c's kernels. */
int matmul_amx_ready(void);
/* From now on, not: the model runs on a GPU (device.c), and the tiles' copy of the weights would
 * only take memory and load time. Before any model is loaded. */
void matmul_amx_off(void);
/* Halves that a packed [n_out, n_in] weight takes, and where W[o][i] is held. */
size_t matmul_amx_values(int n_in, int n_out);
size_t matmul_amx_index(int n_in, int o, int i);
/* Pack W, row-major [n_out, n_in] float16 (half.h), into dst. */
void matmul_amx_pack(uint16_t *dst, const uint16_t *W, int n_in, int n_out);
/* out[rows, n_out] = x[rows, n_in] W^T + b (b may be NULL), then act (matmul.h) on every output. */
void matmul_amx(float *out, const float *x, const uint16_t *W, const float *b, int rows, int n_in, int n_out,
                int act);
#endif
