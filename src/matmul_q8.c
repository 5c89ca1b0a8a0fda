/* Products with 8-bit weights (matmul_q8.h): a panel of 32 outputs against up to Q8_MR rows at a
 * time, block by block; with AVX-512 the block's integers widen to floats 16 at a time as they
 * are read, elsewhere the same sums in the same order in C. */
#include "matmul_q8.h"

#include <limits.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "half.h"
#include "matmul.h"
#include "matmul_amx.h"
#include "threads.h"

#if defined(__AVX512F__)
#include <immintrin.h>
#define Q8_AVX512 1
#endif

#define Q8_MR 4    /* rows at a time: 4 x 2 sums and 4 x 2 block sums in registers */
#define Q8_ROWS 16 /* rows an item takes, Q8_MR at a time, against one panel */

int matmul_q8_batch(void) {
    const char *env = getenv("LINGEN_INT8");
    if (env && !strcmp(env, "1")) return INT_MAX;
    if (env && !strcmp(env, "0")) return 0;
    return matmul_amx_ready() && matmul_bf16_ready();
}

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
                for (int i = 0; i < n; i++) q[i * Q8_NR + o % Q8_NR] = (int8_t)nearbyintf(w[i] / s);   /* |.| <= 127 */
        }
}

float matmul_q8_get(const void *W, int n_in, int o, int i) {
    const unsigned char *blk = block_at(W, n_in, o / Q8_NR, i / Q8_KB);
    return scale_at(blk, o % Q8_NR) * ((const int8_t *)blk)[i % Q8_KB * Q8_NR + o % Q8_NR];
}

/* R rows of x against P panels from p on (R and P constants where it is inlined): sums into
 * out, ncols of the last panel's 32 columns, starting from the bias, through relu as they are
 * stored if relu. Each output's sum runs in one order whatever R and P (so image k does not
 * depend on the batch); at a row or two, P panels side by side give the multiply-adds P chains
 * to run in, where one panel is a chain of dependent ones. */
static inline __attribute__((always_inline)) void panel_rows(int R, int P, float *out, int ldo, const float *x,
                                                             int ldx, const void *W, int n_in, int p, const float *b,
                                                             int ncols, int relu) {
#if Q8_AVX512
    __mmask16 m0 = ncols >= 16 ? 0xffff : (__mmask16)((1u << ncols) - 1);
    __mmask16 m1 = ncols >= 32 ? 0xffff : ncols <= 16 ? 0 : (__mmask16)((1u << (ncols - 16)) - 1);
    __m512 sum[Q8_MR][Q8_MR][2];   /* [row][panel][half] */
    for (int j = 0; j < P; j++) {
        __mmask16 k0 = j == P - 1 ? m0 : 0xffff, k1 = j == P - 1 ? m1 : 0xffff;
        const float *bj = b ? b + j * Q8_NR : NULL;
        __m512 b0 = bj ? _mm512_maskz_loadu_ps(k0, bj) : _mm512_setzero_ps();
        __m512 b1 = bj ? _mm512_maskz_loadu_ps(k1, bj + 16) : _mm512_setzero_ps();
        for (int r = 0; r < R; r++) sum[r][j][0] = b0, sum[r][j][1] = b1;
    }
    for (int k = 0; k < blocks(n_in); k++) {
        int i0 = k * Q8_KB, n = n_in - i0 < Q8_KB ? n_in - i0 : Q8_KB;
        const unsigned char *blk[Q8_MR];
        __m512 acc[Q8_MR][Q8_MR][2];
        for (int j = 0; j < P; j++) blk[j] = block_at(W, n_in, p + j, k);
        for (int r = 0; r < R; r++)
            for (int j = 0; j < P; j++) acc[r][j][0] = acc[r][j][1] = _mm512_setzero_ps();
        for (int i = 0; i < n; i++)
            for (int j = 0; j < P; j++) {
                const unsigned char *q = blk[j] + i * Q8_NR;
                __m512 w0 = _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128((const __m128i *)q)));
                __m512 w1 = _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128((const __m128i *)(q + 16))));
                for (int r = 0; r < R; r++) {
                    __m512 xb = _mm512_set1_ps(x[(size_t)r * ldx + i0 + i]);
                    acc[r][j][0] = _mm512_fmadd_ps(xb, w0, acc[r][j][0]);
                    acc[r][j][1] = _mm512_fmadd_ps(xb, w1, acc[r][j][1]);
                }
            }
        for (int j = 0; j < P; j++) {
            const __m256i *s = (const __m256i *)(blk[j] + Q8_KB * Q8_NR);   /* bfloat16: a float's top half */
            __m512 s0 = _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(_mm256_loadu_si256(s)), 16));
            __m512 s1 = _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(_mm256_loadu_si256(s + 1)), 16));
            for (int r = 0; r < R; r++) {
                sum[r][j][0] = _mm512_fmadd_ps(acc[r][j][0], s0, sum[r][j][0]);
                sum[r][j][1] = _mm512_fmadd_ps(acc[r][j][1], s1, sum[r][j][1]);
            }
        }
    }
    for (int j = 0; j < P; j++) {
        __mmask16 k0 = j == P - 1 ? m0 : 0xffff, k1 = j == P - 1 ? m1 : 0xffff;
        for (int r = 0; r < R; r++) {
            if (relu) sum[r][j][0] = _mm512_max_ps(sum[r][j][0], _mm512_setzero_ps()),
                      sum[r][j][1] = _mm512_max_ps(sum[r][j][1], _mm512_setzero_ps());
            _mm512_mask_storeu_ps(out + (size_t)r * ldo + j * Q8_NR, k0, sum[r][j][0]);
            _mm512_mask_storeu_ps(out + (size_t)r * ldo + j * Q8_NR + 16, k1, sum[r][j][1]);
        }
    }
#else
    for (int r = 0; r < R; r++)
        for (int j = 0; j < P; j++) {
            int nc = j == P - 1 ? ncols : Q8_NR;
            float sum[Q8_NR], acc[Q8_NR];
            for (int c = 0; c < nc; c++) sum[c] = b ? b[j * Q8_NR + c] : 0;
            for (int k = 0; k < blocks(n_in); k++) {
                const unsigned char *blk = block_at(W, n_in, p + j, k);
                int i0 = k * Q8_KB, n = n_in - i0 < Q8_KB ? n_in - i0 : Q8_KB;
                for (int c = 0; c < nc; c++) acc[c] = 0;
                for (int i = 0; i < n; i++) {
                    float xi = x[(size_t)r * ldx + i0 + i];
                    const int8_t *q = (const int8_t *)blk + i * Q8_NR;
                    for (int c = 0; c < nc; c++) acc[c] = fmaf(xi, q[c], acc[c]);
                }
                for (int c = 0; c < nc; c++) sum[c] = fmaf(acc[c], scale_at(blk, c), sum[c]);
            }
            for (int c = 0; c < nc; c++) out[(size_t)r * ldo + j * Q8_NR + c] = relu && !(sum[c] > 0) ? 0 : sum[c];
        }
#endif
}

typedef struct {
    float *out;
    const float *x, *b;
    const void *W;
    int rows, n_in, n_out, act, row_blocks, group;   /* group: panels an item takes (one row) */
} Product;

/* One item: Q8_ROWS rows against one panel, or one row against a group of panels; a thread's
 * range runs down a panel, whose weights then come from its cache after the first rows. */
static void product_item(void *ctx, int item, int thread) {
    (void)thread;
    const Product *q = ctx;
    int p = item / q->row_blocks * q->group, r0 = item % q->row_blocks * Q8_ROWS;
    int r1 = r0 + Q8_ROWS < q->rows ? r0 + Q8_ROWS : q->rows, P = panels(q->n_out) - p < q->group ? panels(q->n_out) - p : q->group;
    int c0 = p * Q8_NR, ncols = q->n_out - c0 - (P - 1) * Q8_NR < Q8_NR ? q->n_out - c0 - (P - 1) * Q8_NR : Q8_NR;
    const float *b = q->b ? q->b + c0 : NULL;
    int relu = q->act == MATMUL_RELU;   /* in the store; gelu in a pass after */
    for (int r = r0; r < r1; r += Q8_MR) {
        float *o = q->out + (size_t)r * q->n_out + c0;
        const float *x = q->x + (size_t)r * q->n_in;
        /* R and P constants in each instance; groups come at one row only (matmul_q8) */
#define ROWS(R, P) panel_rows(R, P, o, q->n_out, x, q->n_in, q->W, q->n_in, p, b, ncols, relu)
        if (P == 4) ROWS(1, 4);
        else if (P == 2) ROWS(1, 2);
        else if (P > 1)   /* a last, odd group panel by panel (a panel's sums are the same either way) */
            for (int j = 0; j < P; j++)
                panel_rows(1, 1, o + j * Q8_NR, q->n_out, x, q->n_in, q->W, q->n_in, p + j, b ? b + j * Q8_NR : NULL,
                           j < P - 1 ? Q8_NR : ncols, relu);
        else switch (r1 - r < Q8_MR ? r1 - r : Q8_MR) {
            case 1: ROWS(1, 1); break;
            case 2: ROWS(2, 1); break;
            case 3: ROWS(3, 1); break;
            default: ROWS(4, 1); break;
            }
#undef ROWS
    }
    if (q->act && !relu) matmul_activate(q->out + (size_t)r0 * q->n_out + c0, q->n_out, r1 - r0, (P - 1) * Q8_NR + ncols, q->act);
}

void matmul_q8(float *out, const float *x, const void *W, const float *b, int rows, int n_in, int n_out, int act) {
    int row_blocks = (rows + Q8_ROWS - 1) / Q8_ROWS, np = panels(n_out), group = 1;
    /* one row: panels in groups of up to 4, as large as still gives every thread two items */
    while (rows == 1 && group < 4 && (np + 2 * group - 1) / (2 * group) >= 2 * threads_count()) group *= 2;
    Product q = {out, x, b, W, rows, n_in, n_out, act, row_blocks, group};
    parallel_for((np + group - 1) / group * row_blocks, product_item, &q, (double)rows * n_in * n_out);
}
