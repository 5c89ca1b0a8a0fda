/* y = x W^T + b on Intel AMX tiles (processors with AMX-BF16), for float16 weights, at
 * float32's accuracy, or as matmul.h's bfloat16 products.
 *
 * A tile product takes bfloat16 values (8 significant bits) and sums in float32. A float16 weight
 * (11 bits) is two bfloat16 exactly, W = Wh + Wl, and a float32 input (24 bits) three,
 * x = xh + xm + xl. Of the six products five are taken, each exact in float32; the sixth, xl Wl,
 * is below float32's rounding of the sum:
 *     x W = xh Wh + xh Wl + xm Wh + xm Wl + xl Wh.
 * The weights are split when the model is loaded, so a product only loads its tiles and never
 * splits a weight again: 4 bytes a weight, beside the 2 of matmul.c's panels.
 *
 * The model uses it for the parallel form (transformer.c: evaluation, a prefix), where a
 * product has hundreds of rows or more and the tiles outrun matmul.c's AVX-512 kernel, with the
 * same bits/dim to 5 digits. A sampling step in float32 is not worth it there (five tile
 * products per value, on a few rows); its bfloat16 products are (matmul.h): each input rounded
 * once, against Wh alone, one tile product per value. docs/speed.md gives the figures (The
 * kernel a step takes; The parallel form on AMX).
 *
 * Packed layout: output columns in tiles of 16, padded to a multiple of 32 (the kernel takes two
 * column tiles at once), inputs in blocks of 32 (zero padded). Column pair p holds block by block
 * the Wh tiles of its two column tiles, then block by block their Wl tiles; a tile is 16 rows of
 * 16 (column, pair of inputs) bfloat16: TDPBF16PS's layout of its second operand. */
#ifndef LINGEN_MATMUL_AMX_H
#define LINGEN_MATMUL_AMX_H
#include <stddef.h>
#include <stdint.h>

/* Whether this process can use the tiles: the processor has AMX-BF16, Linux grants the tile
 * state, and LINGEN_AMX is not 0. Asked once; the first call asks the kernel. A row's outputs do
 * not depend on the rows beside it, as with matmul.c's kernels. */
int matmul_amx_ready(void);
/* bfloat16 values that a packed [n_out, n_in] weight takes, where W[o][i]'s Wh is held, and how
 * far its Wl is held after it. */
size_t matmul_amx_values(int n_in, int n_out);
size_t matmul_amx_index(int n_in, int o, int i);
size_t matmul_amx_low(int n_in);
/* Split and pack W, row-major [n_out, n_in] float16 (half.h), into dst. */
void matmul_amx_pack(uint16_t *dst, const uint16_t *W, int n_in, int n_out);
/* out[rows, n_out] = x[rows, n_in] W^T + b (b may be NULL), then act (matmul.h) on every output.
 * bf16 = 1: matmul.h's bfloat16 products instead (a sampling step): each input rounded to
 * bfloat16, times Wh (the weight rounded to bfloat16), summed in float32; one tile product per
 * value, against five. x16, out16 (bf16 = 1 only; either may be NULL): the input already rounded,
 * the outputs rounded too, as matmul.h's Rounded (n_in and n_out multiples of 32). */
void matmul_amx(float *out, const float *x, const uint16_t *W, const float *b, int rows, int n_in, int n_out,
                int act, int bf16, const uint16_t *x16, uint16_t *out16);
#endif
