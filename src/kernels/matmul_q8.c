/* Products with 8-bit weights (matmul_q8.h): x's rows first become 16-bit integers, then a panel
 * of 32 outputs runs against up to Q8_MR rows at a time, block by block, its integer sums exact;
 * with AVX-512 the block's weights widen to 16 bits 32 at a time as they are read and two inputs
 * go into one instruction, elsewhere the same sums in the same order in C. */
#include "matmul_q8.h"

#include <float.h>
#include <limits.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "io/half.h"
#include "store.h"
#include "threads.h"
#include "io/util.h"

#if defined(__AVX512F__)
#include <cpuid.h>
#include <immintrin.h>
#define Q8_AVX512 1
#endif

#define Q8_MR 4    /* rows at a time: 4 x 2 sums and 4 x 2 block sums in registers */
#define Q8_ROWS 16 /* rows an item takes, Q8_MR at a time, against one panel */
#define Q8_SMALL 16384 /* bytes of x as integers that matmul_q8 keeps on its stack */

/* A scale as bfloat16, rounded up (never down: no weight of its block then needs more than 127
 * steps): a float's top 16 bits, plus one where the bottom 16 are not all zero. */
static uint16_t bf16_up(float f) {
    uint32_t b;
    memcpy(&b, &f, 4);
    return (uint16_t)((b >> 16) + ((b & 0xffff) != 0));
}

static int blocks(int n_in) { return (n_in + Q8_KB - 1) / Q8_KB; }
static int panels(int n_out) { return (n_out + Q8_NR - 1) / Q8_NR; }

size_t matmul_q8_bytes(int n_in, int n_out) { return (size_t)panels(n_out) * blocks(n_in) * Q8_BLOCK; }

static unsigned char *block_at(const void *W, int n_in, int p, int k) {
    return (unsigned char *)W + ((size_t)p * blocks(n_in) + k) * Q8_BLOCK;
}

/* Input i (of the block's 32) of output c: inputs in pairs, a pair's 32 outputs side by side,
 * each output's two integers together (as vpdpwssd takes them). */
static int q_index(int i, int c) { return i / 2 * 2 * Q8_NR + c * 2 + i % 2; }

/* Output c's scale in a block: bfloat16, after the block's integers. */
static float scale_at(const unsigned char *blk, int c) {
    uint16_t h;
    memcpy(&h, blk + Q8_KB * Q8_NR + c * 2, 2);
    return bf16_to_float(h);
}

void matmul_q8_pack(void *dst, const float *W, int n_in, int n_out) {
    memset(dst, 0, matmul_q8_bytes(n_in, n_out));
    for (int o = 0; o < n_out; o++)
        for (int k = 0; k < blocks(n_in); k++) {
            int i0 = k * Q8_KB, n = n_in - i0 < Q8_KB ? n_in - i0 : Q8_KB;
            const float *w = W + (size_t)o * n_in + i0;
            float m = 0;
            for (int i = 0; i < n; i++) m = fabsf(w[i]) > m ? fabsf(w[i]) : m;
            uint16_t h = bf16_up(m / 127);
            float s = bf16_to_float(h);
            unsigned char *blk = block_at(dst, n_in, o / Q8_NR, k);
            int8_t *q = (int8_t *)blk;
            memcpy(blk + Q8_KB * Q8_NR + (o % Q8_NR) * 2, &h, 2);
            if (s > 0)
                for (int i = 0; i < n; i++) q[q_index(i, o % Q8_NR)] = (int8_t)nearbyintf(w[i] / s);   /* |.| <= 127 */
        }
}

float matmul_q8_get(const void *W, int n_in, int o, int i) {
    const unsigned char *blk = block_at(W, n_in, o / Q8_NR, i / Q8_KB);
    return scale_at(blk, o % Q8_NR) * ((const int8_t *)blk)[q_index(i % Q8_KB, o % Q8_NR)];
}

/* x's rows as 16-bit integers, each row with its scale: x ~ s qx, s = max |x| / 32767 of the row,
 * qx = x * (32767 / max |x|) rounded to nearest (|qx| <= 32767), zero past n_in to a whole block.
 * A row of zeros (or one whose largest is below 2^-100, where the reciprocal would overflow) takes
 * s = 0; a row with an infinity or a NaN takes s = NaN, so its outputs are NaN as float32 sums'
 * would be. Each value within s / 2 of x: a 65,534th of the row's largest. */
static void quantize_row(int16_t *qx, float *s, const float *x, int n_in) {
    float m = 0;
    int finite = 1;
    for (int i = 0; i < n_in; i++) {
        float a = fabsf(x[i]);
        finite &= a <= FLT_MAX;
        m = a > m ? a : m;
    }
    float inv = finite && m >= 0x1p-100f ? 32767.0f / m : 0;
    *s = !finite ? NAN : inv > 0 ? m / 32767.0f : 0;
    int i = 0;
#if Q8_AVX512
    for (__m512 v = _mm512_set1_ps(inv); i + 16 <= n_in; i += 16)   /* cvtps: nearest, as nearbyintf */
        _mm256_storeu_si256((__m256i *)(qx + i), _mm512_cvtsepi32_epi16(_mm512_cvtps_epi32(_mm512_mul_ps(_mm512_loadu_ps(x + i), v))));
#endif
    for (; i < n_in; i++) qx[i] = (int16_t)nearbyintf(x[i] * inv);
    for (; i < blocks(n_in) * Q8_KB; i++) qx[i] = 0;
}

#if Q8_AVX512
/* acc + the sums of adjacent products of a's and b's 16-bit integers, 16 int32 lanes: exact (a
 * block's 32 terms of at most 127 x 32767 stay below 2^31). vpdpwssd (AVX512-VNNI) where the
 * processor has it, which the x86-64-v4 build may not assume: in asm, so the compiler emits it
 * nowhere else; else vpmaddwd and vpaddd, the same bits in two instructions. */
static inline __attribute__((always_inline)) __m512i dot_pairs(__m512i acc, __m512i a, __m512i b, int vnni) {
    if (!vnni) return _mm512_add_epi32(acc, _mm512_madd_epi16(a, b));
    __asm__("vpdpwssd %2, %1, %0" : "+v"(acc) : "v"(a), "v"(b));
    return acc;
}
#endif

/* R rows of qx against P panels from p on (R, P and vnni constants where it is inlined): out =
 * b + s_x * (sum over blocks of s_w * (the block's integer sum)), ncols of the last panel's 32
 * columns, through relu as they are stored if relu. The integer sums are exact and the float
 * ones run block by block in one order whatever R and P (so image k does not depend on the
 * batch, and the C below gives the same bits); at a row or two, P panels side by side give the
 * multiply-adds P chains to run in, where one panel is a chain of dependent ones. */
static inline __attribute__((always_inline)) void panel_rows(int R, int P, int vnni, float *out, int ldo,
                                                             const int16_t *qx, const float *sx, int ldq, const void *W,
                                                             int n_in, int p, const float *b, int ncols, int relu) {
#if Q8_AVX512
    __mmask16 m0 = ncols >= 16 ? 0xffff : (__mmask16)((1u << ncols) - 1);
    __mmask16 m1 = ncols >= 32 ? 0xffff : ncols <= 16 ? 0 : (__mmask16)((1u << (ncols - 16)) - 1);
    __m512 sum[Q8_MR][Q8_MR][2];   /* [row][panel][half] */
    for (int r = 0; r < R; r++)
        for (int j = 0; j < P; j++) sum[r][j][0] = sum[r][j][1] = _mm512_setzero_ps();
    for (int k = 0; k < blocks(n_in); k++) {
        const unsigned char *blk[Q8_MR];
        __m512i acc[Q8_MR][Q8_MR][2];
        for (int j = 0; j < P; j++) blk[j] = block_at(W, n_in, p + j, k);
        for (int r = 0; r < R; r++)
            for (int j = 0; j < P; j++) acc[r][j][0] = acc[r][j][1] = _mm512_setzero_si512();
        for (int i = 0; i < Q8_KB; i += 2)   /* a pair of inputs: 64 bytes, 16 outputs' pairs twice */
            for (int j = 0; j < P; j++) {
                const unsigned char *q = blk[j] + i * Q8_NR;
                __m512i w0 = _mm512_cvtepi8_epi16(_mm256_loadu_si256((const __m256i *)q));
                __m512i w1 = _mm512_cvtepi8_epi16(_mm256_loadu_si256((const __m256i *)(q + 32)));
                for (int r = 0; r < R; r++) {
                    int32_t pair;
                    memcpy(&pair, qx + (size_t)r * ldq + k * Q8_KB + i, 4);
                    __m512i xb = _mm512_set1_epi32(pair);
                    acc[r][j][0] = dot_pairs(acc[r][j][0], w0, xb, vnni);
                    acc[r][j][1] = dot_pairs(acc[r][j][1], w1, xb, vnni);
                }
            }
        for (int j = 0; j < P; j++) {
            const __m256i *s = (const __m256i *)(blk[j] + Q8_KB * Q8_NR);   /* bfloat16: a float's top half */
            __m512 s0 = _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(_mm256_loadu_si256(s)), 16));
            __m512 s1 = _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(_mm256_loadu_si256(s + 1)), 16));
            for (int r = 0; r < R; r++) {
                sum[r][j][0] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(acc[r][j][0]), s0, sum[r][j][0]);
                sum[r][j][1] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(acc[r][j][1]), s1, sum[r][j][1]);
            }
        }
    }
    for (int j = 0; j < P; j++) {
        __mmask16 k0 = j == P - 1 ? m0 : 0xffff, k1 = j == P - 1 ? m1 : 0xffff;
        const float *bj = b ? b + j * Q8_NR : NULL;
        __m512 b0 = bj ? _mm512_maskz_loadu_ps(k0, bj) : _mm512_setzero_ps();
        __m512 b1 = bj ? _mm512_maskz_loadu_ps(k1, bj + 16) : _mm512_setzero_ps();
        for (int r = 0; r < R; r++) {
            __m512 s = _mm512_set1_ps(sx[r]);
            __m512 y0 = _mm512_fmadd_ps(sum[r][j][0], s, b0), y1 = _mm512_fmadd_ps(sum[r][j][1], s, b1);
            if (relu) y0 = _mm512_max_ps(y0, _mm512_setzero_ps()), y1 = _mm512_max_ps(y1, _mm512_setzero_ps());
            _mm512_mask_storeu_ps(out + (size_t)r * ldo + j * Q8_NR, k0, y0);
            _mm512_mask_storeu_ps(out + (size_t)r * ldo + j * Q8_NR + 16, k1, y1);
        }
    }
#else
    (void)vnni;
    for (int r = 0; r < R; r++)
        for (int j = 0; j < P; j++) {
            int nc = j == P - 1 ? ncols : Q8_NR;
            float sum[Q8_NR];
            int32_t acc[Q8_NR];
            for (int c = 0; c < nc; c++) sum[c] = 0;
            for (int k = 0; k < blocks(n_in); k++) {
                const unsigned char *blk = block_at(W, n_in, p + j, k);
                for (int c = 0; c < nc; c++) acc[c] = 0;
                for (int i = 0; i < Q8_KB; i++) {
                    int32_t xi = qx[(size_t)r * ldq + k * Q8_KB + i];
                    for (int c = 0; c < nc; c++) acc[c] += xi * ((const int8_t *)blk)[q_index(i, c)];
                }
                for (int c = 0; c < nc; c++) sum[c] = fmaf((float)acc[c], scale_at(blk, c), sum[c]);
            }
            for (int c = 0; c < nc; c++) {
                float y = fmaf(sum[c], sx[r], b ? b[j * Q8_NR + c] : 0);
                out[(size_t)r * ldo + j * Q8_NR + c] = relu && !(y > 0) ? 0 : y;
            }
        }
#endif
}

/* AVX512-VNNI (CPUID leaf 7, ECX bit 11) where the processor has it and want allows. */
int matmul_q8_vnni(int want) {
    static int have = -1, on = 1;
    if (have < 0) {
        have = 0;
#if Q8_AVX512
        unsigned a, b, c, d;
        have = __get_cpuid_count(7, 0, &a, &b, &c, &d) && (c >> 11 & 1);
#endif
    }
    if (want >= 0) on = want;
    return have && on;
}

typedef struct {
    float *out, *sx;
    const float *x, *b;
    int16_t *qx;
    const void *W;
    int rows, n_in, n_out, act, row_blocks, group, ldq, vnni;   /* group: panels an item takes (one row) */
} Product;

/* One item of the first loop: Q8_ROWS rows of x as integers. */
static void quantize_item(void *ctx, int item, int thread) {
    (void)thread;
    const Product *q = ctx;
    Slice sl = item_slice(item, Q8_ROWS, q->rows);
    for (int r = sl.lo; r < sl.hi; r++)
        quantize_row(q->qx + (size_t)r * q->ldq, q->sx + r, q->x + (size_t)r * q->n_in, q->n_in);
}

/* R rows against P panels: R, P and vnni constants in each instance of panel_rows. */
static void rows_panels(int R, int P, int vnni, const Product *q, int r, int p, int ncols) {
    float *o = q->out + (size_t)r * q->n_out + p * Q8_NR;
    const float *b = q->b ? q->b + p * Q8_NR : NULL;
    const int16_t *qx = q->qx + (size_t)r * q->ldq;
    int relu = q->act == MATMUL_RELU;   /* in the store; gelu in a pass after */
#define ROWS(R, P)                                                                                      \
    (vnni ? panel_rows(R, P, 1, o, q->n_out, qx, q->sx + r, q->ldq, q->W, q->n_in, p, b, ncols, relu)   \
          : panel_rows(R, P, 0, o, q->n_out, qx, q->sx + r, q->ldq, q->W, q->n_in, p, b, ncols, relu))
    if (P == 4) ROWS(1, 4);
    else if (P == 2) ROWS(1, 2);
    else switch (R) {
        case 1: ROWS(1, 1); break;
        case 2: ROWS(2, 1); break;
        case 3: ROWS(3, 1); break;
        default: ROWS(4, 1); break;
        }
#undef ROWS
}

/* One item of the second: Q8_ROWS rows against one panel, or one row against a group of panels;
 * a thread's range runs down a panel, whose weights then come from its cache after the first
 * rows. */
static void product_item(void *ctx, int item, int thread) {
    (void)thread;
    const Product *q = ctx;
    int p = item / q->row_blocks * q->group, r0 = item % q->row_blocks * Q8_ROWS;
    int r1 = r0 + Q8_ROWS < q->rows ? r0 + Q8_ROWS : q->rows, P = panels(q->n_out) - p < q->group ? panels(q->n_out) - p : q->group;
    int ncols = q->n_out - (p + P - 1) * Q8_NR < Q8_NR ? q->n_out - (p + P - 1) * Q8_NR : Q8_NR;
    for (int r = r0; r < r1; r += Q8_MR) {
        if (P == 4 || P == 2 || P == 1) rows_panels(r1 - r < Q8_MR ? r1 - r : Q8_MR, P, q->vnni, q, r, p, ncols);
        else   /* groups come at one row only (matmul_q8); a last, odd group panel by panel */
            for (int j = 0; j < P; j++) rows_panels(1, 1, q->vnni, q, r, p + j, j < P - 1 ? Q8_NR : ncols);
    }
    if (q->act && q->act != MATMUL_RELU)
        matmul_activate(q->out + (size_t)r0 * q->n_out + p * Q8_NR, q->n_out, r1 - r0, (P - 1) * Q8_NR + ncols, q->act);
}

void matmul_q8(float *out, const float *x, const void *W, const float *b, int rows, int n_in, int n_out, int act) {
    int row_blocks = items_of(rows, Q8_ROWS), np = panels(n_out), group = 1, ldq = blocks(n_in) * Q8_KB;
    /* one row: panels in groups of up to 4, as large as still gives every thread two items */
    while (rows == 1 && group < 4 && (np + 2 * group - 1) / (2 * group) >= 2 * threads_count()) group *= 2;
    /* x as integers: on the stack where it fits (a step at batch 1 or a few), so the step loop
     * allocates nothing */
    float small[Q8_SMALL / sizeof(float)];
    size_t bytes = (size_t)rows * (sizeof(float) + ldq * sizeof(int16_t));
    float *sx = bytes <= sizeof small ? small : xmalloc(bytes);
    Product q = {out, sx, x, b, (int16_t *)(sx + rows), W, rows, n_in, n_out, act, row_blocks, group, ldq, matmul_q8_vnni(-1)};
    parallel_for_if(rows > Q8_ROWS, row_blocks, quantize_item, &q, (double)rows * n_in);
    parallel_for((np + group - 1) / group * row_blocks, product_item, &q, (double)rows * n_in * n_out);
    if (sx != small) free(sx);
}
