/* y = x W^T + b with W packed into panels of MATMUL_NR output columns (matmul.h).
 *
 * The work is split into (block of up to 64 rows) x (panel) pieces. A 64-row block of x
 * (256 KB at most for n_in = 1024) stays in L2 while the panels pass through it, and every
 * panel is read once per block, front to back. At a sampling step (rows = batch <= 64) the
 * threads share out the panels, so each streams its own part of the weights.
 *
 * The products are bound by arithmetic, so memory reads can hide behind them if they are
 * asked for early: every tile prefetches a share of the next panel (only a panel's first tile
 * reads it from memory, and would otherwise wait). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "io/half.h"
#include "matmul.h"
#include "threads.h"
#include "io/util.h"

/* The micro-kernel's vectors: a panel row (NR = 2 vectors) times R broadcast x values, with
 * 2R accumulators in registers. AVX-512 has 32 registers of 16 floats, AVX2 16 of 8. */
#if defined(__AVX512F__)
#include <immintrin.h>
#define SIMD 1
typedef __m512 vec;
#define VW 16
#define vload _mm512_loadu_ps
#define vstore _mm512_storeu_ps
#define vbroadcast(p) _mm512_set1_ps(*(p))
#define vfma _mm512_fmadd_ps
#define vmax0(v) _mm512_max_ps(v, _mm512_setzero_ps())
#define vload_half(p) _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(p)))
/* Rows per tile, at most 14: 14 x 2 accumulators + 2 weight vectors + 1 broadcast = 31 of 32.
 * A tile loads and widens (float16 to float32) a panel's two weight vectors per input, so for
 * panels of halves (the models') more rows a tile do fewer of those per multiply-add; panels
 * of floats, with nothing to widen, run faster in tiles of 8 (docs/speed.md, The kernel a step
 * takes). */
#define MR 14
#define MR_FLOAT 8
#elif defined(__AVX2__) && defined(__FMA__) && defined(__F16C__)
#include <immintrin.h>
#define SIMD 1
typedef __m256 vec;
#define VW 8
#define vload _mm256_loadu_ps
#define vstore _mm256_storeu_ps
#define vbroadcast _mm256_broadcast_ss
#define vfma _mm256_fmadd_ps
#define vmax0(v) _mm256_max_ps(v, _mm256_setzero_ps())
#define vload_half(p) _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(p)))
#define MR 6    /* rows per tile: 6 x 2 accumulators + 2 weight vectors + 1 broadcast = 15 of 16 */
#define MR_FLOAT 6
#else
#define SIMD 0
#define MR 6
#define MR_FLOAT 6
#endif

/* bfloat16 pairs (matmul_bf16_pack) with the AVX-512 kernel (not the AVX2 one that the tests
 * build with -U__AVX512F__): vdpbf16ps takes two inputs of each output per instruction, where
 * vfmadd takes one. Its instructions are built whatever the build's -march and run only where
 * the processor has them (matmul_bf16_ready), so one binary for AVX-512 machines serves both. */
#if SIMD && VW == 16 && defined(__GNUC__)
#define BF16 1
#ifndef __AVX512BF16__
#pragma GCC target("avx512bf16")   /* the compiler emits these instructions only for their intrinsics */
#endif
#include <cpuid.h>
#else
#define BF16 0
#endif

#define NR MATMUL_NR
#if SIMD && NR != 2 * VW
#error "matmul.h's MATMUL_NR must be two of the micro-kernel's vectors"
#endif
#define MB 64   /* rows per block */
#define PF_LOCALITY 2   /* __builtin_prefetch's: 3 = all cache levels, 0 = none */

const char *matmul_kernel_name(void) {
#if defined(__AVX512F__)
    return "AVX-512";
#elif SIMD
    return "AVX2";
#else
    return "portable";
#endif
}

size_t matmul_packed_values(int n_in, int n_out) { return (size_t)((n_out + NR - 1) / NR) * n_in * NR; }

size_t matmul_packed_index(int n_in, int o, int i) { return ((size_t)(o / NR) * n_in + i) * NR + o % NR; }

/* A panel's values, `half` in this file: 0 floats, 1 halves, 2 bfloat16 in pairs of inputs
 * (Packed.bf16). The kernel's loop takes one input a step, or one pair; a step reads x as one
 * float or one pair of bfloat16, 4 bytes either way, so a row of x is `steps` such values. */
#define PAIRS 2
static int steps(int n_in, int half) { return half == PAIRS ? (n_in + 1) / 2 : n_in; }
static size_t value_bytes(int half) { return half ? sizeof(uint16_t) : sizeof(float); }
static size_t panel_bytes(int n_in, int half) {
    return (size_t)steps(n_in, half) * NR * value_bytes(half) * (half == PAIRS ? 2 : 1);
}

void matmul_pack(void *dst, const void *W, int half, int n_in, int n_out) {
    size_t size = value_bytes(half);
    memset(dst, 0, matmul_packed_values(n_in, n_out) * size);
    for (int o = 0; o < n_out; o++)
        for (int i = 0; i < n_in; i++)
            memcpy((char *)dst + matmul_packed_index(n_in, o, i) * size, (const char *)W + ((size_t)o * n_in + i) * size,
                   size);
}

float matmul_packed_get(Packed W, int n_in, int o, int i) {
    size_t k = matmul_packed_index(n_in, o, i);
    return W.half ? half_to_float(((const uint16_t *)W.p)[k]) : ((const float *)W.p)[k];
}

size_t matmul_bf16_values(int n_in, int n_out) { return (size_t)((n_out + NR - 1) / NR) * ((n_in + 1) / 2) * 2 * NR; }

void matmul_bf16_pack(uint16_t *dst, const float *W, int n_in, int n_out) {
    size_t pairs = (size_t)(n_in + 1) / 2;
    memset(dst, 0, matmul_bf16_values(n_in, n_out) * sizeof *dst);
    for (int o = 0; o < n_out; o++)
        for (int i = 0; i < n_in; i++)
            dst[(((size_t)(o / NR) * pairs + i / 2) * NR + o % NR) * 2 + i % 2] = float_to_bf16(W[(size_t)o * n_in + i]);
}

/* A slice of the next panel to prefetch while a tile computes: `lines` cache lines from p. */
typedef struct { const char *p; int lines; } Prefetch;

#define MIN_STEPS 4   /* steps of the kernel's loop per prefetched line, at least */

/* The k-th of n equal slices of `lines` lines from p, at most steps / MIN_STEPS of them. */
static Prefetch slice(const char *p, size_t lines, size_t k, size_t n, int steps) {
    size_t l0 = lines * k / n, l1 = lines * (k + 1) / n, most = (size_t)steps / MIN_STEPS;
    return (Prefetch){p ? p + (l0 << 6) : NULL, (int)(l1 - l0 < most ? l1 - l0 : most)};
}

#if SIMD
/* Values k .. k + VW - 1 of a panel of floats or of halves (half, a constant), as floats. */
static inline __attribute__((always_inline)) vec panel_vec(const int half, const void *W, size_t k) {
    return half ? vload_half((const uint16_t *)W + k) : vload((const float *)W + k);
}

/* One step of the micro-kernel's loop: R rows of x times row i of a panel (floats or halves:
 * input i) or pair i (bfloat16: inputs 2i and 2i + 1), added to the rows' accumulators. */
static inline __attribute__((always_inline)) void kstep(const int R, const int half, vec *lo, vec *hi,
                                                         const void *x, int ldx, const void *Wp, size_t i) {
#if BF16
    if (half == PAIRS) {
        const uint16_t *w = (const uint16_t *)Wp + i * 2 * NR;
        __m512bh w0 = (__m512bh)_mm512_loadu_si512(w), w1 = (__m512bh)_mm512_loadu_si512(w + 2 * VW);
        for (int r = 0; r < R; r++) {
            __m512bh xr = (__m512bh)_mm512_broadcastd_epi32(_mm_loadu_si32((const char *)x + ((size_t)r * ldx + i) * 4));
            lo[r] = _mm512_dpbf16_ps(lo[r], xr, w0);
            hi[r] = _mm512_dpbf16_ps(hi[r], xr, w1);
        }
        return;
    }
#endif
    vec w0 = panel_vec(half, Wp, i * NR), w1 = panel_vec(half, Wp, i * NR + VW);
    for (int r = 0; r < R; r++) {
        vec xr = vbroadcast((const float *)x + (size_t)r * ldx + i);
        lo[r] = vfma(xr, w0, lo[r]);
        hi[r] = vfma(xr, w1, hi[r]);
    }
}
#endif

/* The micro-kernel: R rows of x times one panel, out[r][0..NR) = b + sum_i x[r][i] Wp[i][0..NR),
 * the panel's values floats or halves (half). R and half are constants at every call site, so
 * the loops over r unroll, the accumulators stay in registers and the load is the one needed.
 * The loop over i runs in segments, one line of g prefetched per segment, so that the loads
 * spread over the arithmetic. */
static inline __attribute__((always_inline)) void tile(const int R, const int half, float *out, int ldo,
                                                        const void *x, int ldx, const void *Wp, int n_in,
                                                        const float *b, Prefetch g, int relu, uint16_t *o16) {
    int n = steps(n_in, half), nseg = g.lines, len = n / (nseg ? nseg : 1), i = 0;
#if !BF16
    (void)o16;   /* given only with bfloat16 weights, which this build has no kernel for */
#endif
#if SIMD
    vec lo[MR], hi[MR];
    for (int r = 0; r < R; r++) { lo[r] = vload(b); hi[r] = vload(b + VW); }
#else   /* portable: the same arithmetic, left to the compiler */
    float acc[MR][NR];
    for (int r = 0; r < R; r++) memcpy(acc[r], b, sizeof acc[r]);
#endif
    for (int s = 0; s == 0 || s < nseg; s++) {
        if (s < g.lines) __builtin_prefetch(g.p + ((size_t)s << 6), 0, PF_LOCALITY);
        for (int end = s + 1 >= nseg ? n : i + len; i < end; i++) {
#if SIMD
            kstep(R, half, lo, hi, x, ldx, Wp, (size_t)i);
#else
            float w[NR];
            for (int j = 0; j < NR; j++)
                w[j] = half ? half_to_float(((const uint16_t *)Wp)[(size_t)i * NR + j]) : ((const float *)Wp)[(size_t)i * NR + j];
            for (int r = 0; r < R; r++)
                for (int j = 0; j < NR; j++) acc[r][j] += ((const float *)x)[(size_t)r * ldx + i] * w[j];
#endif
        }
    }
#if SIMD
    for (int r = 0; r < R; r++) {
        if (relu) lo[r] = vmax0(lo[r]), hi[r] = vmax0(hi[r]);
        vstore(out + (size_t)r * ldo, lo[r]);
        vstore(out + (size_t)r * ldo + VW, hi[r]);
#if BF16
        if (o16)   /* as matmul_round_bf16_rows rounds */
            _mm512_storeu_si512(o16 + (size_t)r * ldo, (__m512i)_mm512_cvtne2ps_pbh(hi[r], lo[r]));
#endif
    }
#else
    for (int r = 0; r < R; r++)
        for (int j = 0; j < NR; j++) out[(size_t)r * ldo + j] = relu && acc[r][j] < 0 ? 0 : acc[r][j];
#endif
}

/* One tile of R rows, R from 1 to MR, as a constant. */
#define TILE(n, h) case n: tile(n, h, o, ld, xr, ldx, Wp.p, n_in, b, g, relu, o16); break;
#if MR == 14
#define TILE_14_7(h) TILE(14, h) TILE(13, h) TILE(12, h) TILE(11, h) TILE(10, h) TILE(9, h) TILE(8, h) TILE(7, h)
#else
#define TILE_14_7(h)
#endif
#define TILES(h) switch (R) { \
        TILE_14_7(h) \
        TILE(6, h) TILE(5, h) TILE(4, h) TILE(3, h) TILE(2, h) \
        default: tile(1, h, o, ld, xr, ldx, Wp.p, n_in, b, g, relu, o16); break; \
    }

/* rows x ncols (ncols <= NR) of out from one panel; a narrower last panel goes through tmp.
 * relu: max(0, .) on the sums before they are stored; out16 (or NULL; whole panels of bfloat16
 * weights only): the outputs rounded to bfloat16 there as well, rows ldo apart. */
static void panel(float *out, int ldo, const void *x, int ldx, Packed Wp, int n_in, const float *b,
                  int rows, int ncols, const char *next, int relu, uint16_t *out16) {
    float tmp[MR * NR], bias[NR] = {0};
    if (ncols < NR) b = memcpy(bias, b, ncols * sizeof *b);
    int mr = Wp.half ? MR : MR_FLOAT, tiles = (rows + mr - 1) / mr;
    for (int r = 0; r < rows; r += mr) {
        /* this tile's share of the next panel's weights: only the first tile reads a panel from
         * memory, and the arithmetic would wait for it */
        Prefetch g = slice(next, next ? panel_bytes(n_in, Wp.half) / 64 : 0, r / mr, tiles, steps(n_in, Wp.half));
        int R = rows - r < mr ? rows - r : mr, ld = ncols < NR ? NR : ldo;
        float *o = ncols < NR ? tmp : out + (size_t)r * ldo;
        uint16_t *o16 = out16 && ncols == NR ? out16 + (size_t)r * ldo : NULL;
        const char *xr = (const char *)x + (size_t)r * ldx * 4;
#if BF16
        if (Wp.half == PAIRS) TILES(2) else
#endif
        if (Wp.half) TILES(1)
        else TILES(0)
        if (ncols < NR)
            for (int k = 0; k < R; k++) memcpy(out + (size_t)(r + k) * ldo, tmp + k * NR, ncols * sizeof *out);
    }
}

/* One or two rows against G panels at once: the same sums as tile()'s, output by output and
 * in the same order (so the same bits), but with G times the independent accumulators. One
 * row against one panel is a chain of fused multiply-adds each waiting for the last (2 in
 * flight, where the core could run 8 or more): a sampling step at batch 1 or 2 is that case. */
#if SIMD
#if defined(__AVX512F__)
#define GROUP_ACC 16   /* accumulators a group may take: 16 of AVX-512's 32 registers */
#else
#define GROUP_ACC 8    /* 8 of AVX2's 16 */
#endif
static inline __attribute__((always_inline)) void tile_group(const int R, const int half, const int G, float *out,
                                                              int ldo, const void *x, int ldx, const char *Wp,
                                                              size_t stride, int n_in, const float *b) {
    vec lo[GROUP_ACC / 2], hi[GROUP_ACC / 2];
    for (int g = 0; g < G; g++)
        for (int r = 0; r < R; r++) { lo[g * R + r] = vload(b + g * NR); hi[g * R + r] = vload(b + g * NR + VW); }
    for (int i = 0, n = steps(n_in, half); i < n; i++)
        for (int g = 0; g < G; g++) kstep(R, half, lo + g * R, hi + g * R, x, ldx, Wp + g * stride, (size_t)i);
    for (int g = 0; g < G; g++)
        for (int r = 0; r < R; r++) {
            vstore(out + (size_t)r * ldo + g * NR, lo[g * R + r]);
            vstore(out + (size_t)r * ldo + g * NR + VW, hi[g * R + r]);
        }
}

/* Panels that many at a time for rows rows: 1 (no groups) where the accumulators would not fit. */
static int group_max(int rows) { return rows <= 2 ? GROUP_ACC / (2 * rows) : 1; }

/* rows (1 or 2) x G whole panels from Wp on; G and rows, as constants, pick the instance. */
static void panels_group(float *out, int ldo, const void *x, int ldx, Packed Wp, size_t stride, int n_in,
                         const float *b, int rows, int G) {
#define GROUP(H, R, GG) if ((GG) * 2 * (R) <= GROUP_ACC) tile_group(R, H, GG, out, ldo, x, ldx, Wp.p, stride, n_in, b)
#define GROUPS(H, R) switch (G) { case 2: GROUP(H, R, 2); break; case 4: GROUP(H, R, 4); break; default: GROUP(H, R, 8); break; }
#if BF16
    if (Wp.half == PAIRS) { if (rows == 1) GROUPS(2, 1) else GROUPS(2, 2) } else
#endif
    if (Wp.half) { if (rows == 1) GROUPS(1, 1) else GROUPS(1, 2) }
    else { if (rows == 1) GROUPS(0, 1) else GROUPS(0, 2) }
#undef GROUPS
#undef GROUP
}
#else
static int group_max(int rows) { (void)rows; return 1; }
#endif

/* One parallel loop: items are (row block, group of G panels), row block major. */
typedef struct {
    float *out;
    const void *x;   /* floats, or bfloat16 pairs (W.half == PAIRS): rows of ldx 4-byte values */
    const float *b;
    Packed W;
    int rows, n_in, n_out, np, mb, act, G, ng, ldx;
    uint16_t *out16;   /* or NULL: the outputs rounded to bfloat16 too (Rounded) */
} Product;

static void product_item(void *ctx, int item, int thread) {
    (void)thread;
    const Product *q = ctx;
    int rb = item / q->ng, p0 = item % q->ng * q->G, r0 = rb * q->mb;
    int rows = q->rows - r0 < q->mb ? q->rows - r0 : q->mb;
    size_t stride = panel_bytes(q->n_in, q->W.half);
    const char *panels = q->W.p;
    const char *x = (const char *)q->x + (size_t)r0 * q->ldx * 4;
    int p = p0, p1 = p0 + q->G < q->np ? p0 + q->G : q->np, relu = q->act == MATMUL_RELU, grouped = 0;
    /* relu and the rounding to bfloat16 are taken in the tiles' registers (reading the stored
     * outputs back costs more: at d_ff = 1,024 their rows are 4 KB apart and crowd one set of
     * the L1 cache); gelu, and both after a group of panels, at the end */
    int round_in_tiles = q->out16 && q->act != MATMUL_GELU;
#if SIMD
    if (q->G > 1 && p1 - p0 == q->G && (p1 < q->np || q->n_out % NR == 0)) {   /* a whole group of whole panels */
        panels_group(q->out + (size_t)r0 * q->n_out + p0 * NR, q->n_out, x, q->ldx,
                     (Packed){panels + p0 * stride, q->W.half, NULL, NULL, NULL}, stride, q->n_in, q->b + p0 * NR, rows, q->G);
        p = p1, grouped = 1;
    }
#endif
    for (; p < p1; p++) {   /* panel by panel */
        int c0 = p * NR, ncols = q->n_out - c0 < NR ? q->n_out - c0 : NR;
        const char *next = p + 1 < q->np ? panels + (p + 1) * stride : NULL;
        Packed Wp = {panels + p * stride, q->W.half, NULL, NULL, NULL};
        panel(q->out + (size_t)r0 * q->n_out + c0, q->n_out, x, q->ldx, Wp, q->n_in, q->b + c0, rows, ncols,
              next, relu, round_in_tiles ? q->out16 + (size_t)r0 * q->n_out + c0 : NULL);
    }
    if (grouped ? q->act || q->out16 : q->act == MATMUL_GELU) {   /* one pass, while the outputs are in the cache */
        size_t at = (size_t)r0 * q->n_out + p0 * NR;
        int c1 = p1 * NR < q->n_out ? p1 * NR : q->n_out;
        matmul_store_rows(q->out + at, q->n_out, q->out16 ? q->out16 + at : NULL, q->n_out, q->out + at, q->n_out, rows,
                          c1 - p0 * NR, q->act);
    }
}

#if BF16
typedef struct { const float *x; uint16_t *buf; size_t ld; int rows, n_in; } Rounding;
enum { ROUND_ROWS = 16 };   /* rows an item of the rounding loop */

static void round_rows(void *ctx, int item, int thread) {
    (void)thread;
    const Rounding *q = ctx;
    Slice sl = item_slice(item, ROUND_ROWS, q->rows);
    for (int r = sl.lo; r < sl.hi; r++) {
        uint16_t *br = q->buf + (size_t)r * q->ld;
        matmul_round_bf16(br, q->x + (size_t)r * q->n_in, q->n_in);
        if (q->ld > (size_t)q->n_in) br[q->n_in] = 0;   /* the last pair's second value */
    }
}

/* x [rows, n_in] as bfloat16 pairs [rows, (n_in + 1) / 2], the last pair padded with 0: the
 * calling thread's buffer, grown as needed. 1/32 of the product's instructions, done once; on
 * all the threads where that beats one more loop's end (at a large batch on many threads, the
 * caller rounding alone would keep the others waiting at every product: docs/speed.md, Memory). */
static const void *bf16_rows(const float *x, int rows, int n_in) {
    static _Thread_local uint16_t *buf;
    static _Thread_local size_t cap;
    size_t ld = (size_t)(n_in + 1) / 2 * 2, need = (size_t)rows * ld;
    if (need > cap) {
        free(buf);
        buf = xmalloc(need * sizeof *buf);
        cap = need;
    }
    Rounding q = {x, buf, ld, rows, n_in};
    int items = items_of(rows, ROUND_ROWS);
    parallel_for_if((size_t)rows * n_in >= 65536 && threads_count() > 1, items, round_rows, &q, (double)rows * n_in);
    return buf;
}
#endif

/* The product on W's panels (bf16 = 0: W.p, floats or halves) or its bfloat16 pairs (W.bf16). */
static void product_on(float *out, const float *x, Packed W, int bf16, const float *b, int rows, int n_in, int n_out,
                       int act, Rounded r) {
    const void *xs = x;
    if (!bf16 || n_in % MATMUL_ROUNDED_ALIGN) r.x16 = NULL;
    if (!bf16 || n_out % MATMUL_ROUNDED_ALIGN) r.out16 = NULL;
#if BF16
    if (bf16) {
        xs = r.x16 ? r.x16 : bf16_rows(x, rows, n_in);
        W = (Packed){W.bf16, PAIRS, NULL, NULL, NULL};
    }
#else
    (void)bf16;
#endif
    int np = (n_out + NR - 1) / NR, mb = MB, threads = threads_count();
    /* Smaller row blocks when there would be too few items to keep every thread busy to the
     * end: each panel is then read by several blocks, from the shared cache. */
    /* A step's rows split evenly, a block a thread: each thread takes its own rows, as in the
     * step's other loops, so its inputs are in its own cache (matmul_amx.c says more;
     * docs/speed.md, Threads: the row split) */
    int share = threads_even_share(rows, 2 * MR);
    if (share && share <= MB) mb = share;
    else
        while (mb > MR && (size_t)((rows + mb - 1) / mb) * np < 4 * (size_t)threads) mb = (mb / 2 + MR - 1) / MR * MR;
    int nb = (rows + mb - 1) / mb;
    /* one or two rows: panels in groups, as large as still gives every thread two items */
    int G = group_max(rows);
    while (G > 1 && (np + G - 1) / G < 2 * threads) G /= 2;
    int ng = (np + G - 1) / G;
    Product q = {out, xs, b, W, rows, n_in, n_out, np, mb, act, G, ng, steps(n_in, W.half), r.out16};
    parallel_for(nb * ng, product_item, &q, (double)rows * n_in * n_out);
}

void matmul_bf16(float *out, const float *x, Packed W, const float *b, int rows, int n_in, int n_out, int act,
                 Rounded r) {
    product_on(out, x, W, 1, b, rows, n_in, n_out, act, r);
}

void matmul_ex(float *out, const float *x, Packed W, const float *b, int rows, int n_in, int n_out, int act) {
    product_on(out, x, W, 0, b, rows, n_in, n_out, act, (Rounded){NULL, NULL});
}

void matmul(float *out, const float *x, Packed W, const float *b, int rows, int n_in, int n_out) {
    matmul_ex(out, x, W, b, rows, n_in, n_out, MATMUL_NONE);
}
