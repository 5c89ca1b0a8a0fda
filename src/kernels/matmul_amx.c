/* y = x W^T + b on AMX tiles: float16 weights split into two bfloat16, float32 inputs into three
 * (matmul_amx.h); or, for a sampling step's bfloat16 products, each input rounded to one
 * bfloat16 against Wh alone.
 *
 * There are 8 tiles of up to 16 rows x 64 bytes (tmm0-7). The float32 kernel keeps two 16 x 16
 * float32 sums (tmm0, tmm1: two column tiles), the four weight tiles of a block of 32 inputs
 * (tmm2-5: Wh and Wl of both column tiles) and the pieces of the inputs in turn (tmm6, tmm7): 7
 * loads and 10 products per block. The bfloat16 kernel keeps the sums of two row tiles (tmm0, 1
 * and tmm4, 5) against the two Wh tiles (tmm2, 3): 4 loads and 4 products per block. Fewer
 * than 16 rows (a step at a small batch) are tiles of that many rows. The inputs are split once
 * per product, 16 rows at a time, in a parallel loop of their own (a few rows by the caller
 * alone), unless the loop that wrote them rounded them already (matmul.h's Rounded: a sampling
 * step's bfloat16 products). The items are (column tile pairs) x (row tiles); the weights come split from the
 * model (matmul_amx_pack).
 *
 * The tile instructions are inline assembly (binutils 2.36 or later), so that no compiler flag
 * is needed: nothing here runs unless matmul_amx_ready() said so. Built with
 * LINGEN_AMX_EMULATE, the same three instructions run as C on a register file in memory, so that
 * the layout and the kernel are tested on any machine (tests/test_matmul.c). */
#define _DEFAULT_SOURCE   /* syscall() */
#include "matmul_amx.h"

#include <stdlib.h>
#include <string.h>

#include "io/half.h"
#include "store.h"
#include "threads.h"
#include "io/util.h"
#if defined(__AVX512F__) && !defined(LINGEN_AMX_EMULATE)
#include <immintrin.h>
#define SPLIT_AVX512 1
#endif

#define TR 16   /* rows of a tile */
#define TC 16   /* float32 columns of a sum tile */
#define KB 32   /* inputs per block: 16 pairs of bfloat16 */
#define PIECES 3
#define CHUNK 1024   /* rows split at once: 6 bytes an input, 6 MB for 1,024 inputs */
#define TILE (TR * 32)   /* halves in a tile */

static int round_up(int n, int m) { return (n + m - 1) / m * m; }

#if defined(LINGEN_AMX_EMULATE)
/* The instructions as C: TDPBF16PS adds, for each pair of inputs in turn, both products (exact
 * in float32) to the sum, one rounding each. */
static _Thread_local unsigned char tmm[8][TR][64];
static _Thread_local int tmm_rows[8];   /* as the configuration sets them */
static void emu_load(int t, const void *p, long stride) {
    for (int r = 0; r < tmm_rows[t]; r++) memcpy(tmm[t][r], (const char *)p + r * stride, 64);
}
static void emu_store(int t, void *p, long stride) {
    for (int r = 0; r < tmm_rows[t]; r++) memcpy((char *)p + r * stride, tmm[t][r], 64);
}
static void emu_dp(int c, int a, int b) {
    for (int m = 0; m < tmm_rows[c]; m++)
        for (int n = 0; n < TC; n++) {
            float sum;
            memcpy(&sum, &tmm[c][m][4 * n], 4);
            for (int k = 0; k < KB / 2; k++)
                for (int p = 0; p < 2; p++) {
                    uint16_t x, w;
                    memcpy(&x, &tmm[a][m][4 * k + 2 * p], 2);
                    memcpy(&w, &tmm[b][k][4 * n + 2 * p], 2);
                    sum += bf16_to_float(x) * bf16_to_float(w);
                }
            memcpy(&tmm[c][m][4 * n], &sum, 4);
        }
}
#define TILE_LOAD(t, p, stride) emu_load(t, p, stride)
#define TILE_STORE(t, p, stride) emu_store(t, p, stride)
#define TILE_DP(c, a, b) emu_dp(c, a, b)
#define TILES_RELEASE() ((void)0)
static void tiles_configure(int rows, int weights) {
    for (int t = 0; t < 8; t++) tmm_rows[t] = t >= 2 && t < 2 + weights ? TR : rows;
}
static int ready = 1;
int matmul_amx_ready(void) { return ready; }
#elif defined(__x86_64__) && defined(__linux__)
#include <cpuid.h>
#include <sys/syscall.h>
#include <unistd.h>
#define TILE_LOAD(t, p, stride) \
    __asm__ volatile("tileloadd (%0,%1,1), %%tmm" #t ::"r"(p), "r"((long)(stride)) : "memory")
#define TILE_STORE(t, p, stride) \
    __asm__ volatile("tilestored %%tmm" #t ", (%0,%1,1)" ::"r"(p), "r"((long)(stride)) : "memory")
#define TILE_DP(c, a, b) __asm__ volatile("tdpbf16ps %%tmm" #b ", %%tmm" #a ", %%tmm" #c ::)
/* The tiles back in their initial state: a thread switched out between loops then has no 8 KB of
 * tile data for the kernel to save and restore. */
#define TILES_RELEASE() __asm__ volatile("tilerelease" ::: "memory")

/* Every tile 64 bytes wide (palette 1): the weights' (tmm2 .. 2 + weights - 1) 16 rows, the
 * others `rows`. A thread's tile configuration is its own: each item sets it. */
static void tiles_configure(int rows, int weights) {
    struct { uint8_t palette, start_row, reserved[14]; uint16_t colsb[16]; uint8_t rows[16]; } cfg;
    memset(&cfg, 0, sizeof cfg);
    cfg.palette = 1;
    for (int t = 0; t < 8; t++) cfg.colsb[t] = 64, cfg.rows[t] = (uint8_t)(t >= 2 && t < 2 + weights ? TR : rows);
    __asm__ volatile("ldtilecfg %0" ::"m"(cfg));
}

#define ARCH_REQ_XCOMP_PERM 0x1023
#define XFEATURE_XTILEDATA 18
static int ready = -1;
int matmul_amx_ready(void) {
    if (ready < 0) {
        unsigned a, b, c, d;
        ready = __get_cpuid_count(7, 0, &a, &b, &c, &d) &&
                (d >> 22 & 1) && (d >> 24 & 1)   /* AMX-BF16, AMX-TILE */
                && syscall(SYS_arch_prctl, ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA) == 0;
    }
    return ready;
}
#else
#define TILE_LOAD(t, p, stride) ((void)(p), (void)(stride), abort())
#define TILE_STORE(t, p, stride) ((void)(p), (void)(stride), abort())
#define TILE_DP(c, a, b) abort()
#define TILES_RELEASE() abort()
static void tiles_configure(int rows, int weights) { (void)rows, (void)weights; }
static int ready = 0;
int matmul_amx_ready(void) { return ready; }
#endif


size_t matmul_amx_values(int n_in, int n_out) { return (size_t)2 * round_up(n_out, 2 * TC) * round_up(n_in, KB); }

/* Column pair o / 32 holds, block by block (k = i / 32), the Wh tiles of its two column tiles,
 * then the same for Wl: a bfloat16 product streams Wh alone, front to back. In a tile, row
 * (i % 32) / 2, column o % 16, and which of the pair. */
size_t matmul_amx_low(int n_in) { return (size_t)2 * (round_up(n_in, KB) / KB) * TILE; }
size_t matmul_amx_index(int n_in, int o, int i) {
    size_t blocks = (size_t)round_up(n_in, KB) / KB;
    return ((size_t)(o / (2 * TC)) * blocks * 4 + (size_t)(i / KB) * 2 + o / TC % 2) * TILE +
           (size_t)(i % KB / 2) * 32 + (o % TC) * 2 + i % 2;
}

void matmul_amx_pack(uint16_t *dst, const uint16_t *W, int n_in, int n_out) {
    memset(dst, 0, matmul_amx_values(n_in, n_out) * sizeof *dst);
    size_t low = matmul_amx_low(n_in);
    for (int o = 0; o < n_out; o++)
        for (int i = 0; i < n_in; i++) {
            size_t k = matmul_amx_index(n_in, o, i);
            float f = half_to_float(W[(size_t)o * n_in + i]);
            dst[k] = float_to_bf16(f);
            dst[k + low] = float_to_bf16(f - bf16_to_float(dst[k]));   /* exact: the 3 bits left */
        }
}

/* Pieces of 16 floats at once: hi = v rounded to bfloat16, then the rest rounded, and so on;
 * each rest fits in what is left (a float16's 3 bits in one, a float32's 16 bits in two). */
#if SPLIT_AVX512
static inline void split16(__m512 f, uint16_t *const *dst, int pieces, int i) {
    const __m512i half_ulp = _mm512_set1_epi32(0x7fff), one = _mm512_set1_epi32(1), top = _mm512_set1_epi32(-65536);
    for (int p = 0; p < pieces; p++) {
        __m512i u = _mm512_castps_si512(f);
        __m512i r = _mm512_and_si512(_mm512_add_epi32(u, _mm512_add_epi32(half_ulp, _mm512_and_si512(_mm512_srli_epi32(u, 16), one))), top);
        _mm256_storeu_si256((__m256i *)(dst[p] + i), _mm512_cvtepi32_epi16(_mm512_srli_epi32(r, 16)));
        f = _mm512_sub_ps(f, _mm512_castsi512_ps(r));
    }
}
#else
static inline void split1(float f, uint16_t *const *dst, int pieces, int i) {
    for (int p = 0; p < pieces; p++) {
        dst[p][i] = float_to_bf16(f);
        f -= bf16_to_float(dst[p][i]);
    }
}
#endif

/* n floats (a multiple of 16) into hi, mid, lo; or hi alone (pieces = 1) */
static void split_floats(const float *v, uint16_t *const *dst, int pieces, int n) {
#if SPLIT_AVX512
    for (int i = 0; i < n; i += 16) split16(_mm512_loadu_ps(v + i), dst, pieces, i);
#else
    for (int i = 0; i < n; i++) split1(v[i], dst, pieces, i);
#endif
}

typedef struct {
    float *out;
    const float *x, *b;
    const uint16_t *w;
    uint16_t *pieces;   /* n_pieces x [row tiles x 16][ld]: xh, xm, xl; or xh alone */
    const uint16_t *in; /* what the tiles read: pieces, or the input as its writer rounded it */
    uint16_t *out16;    /* or NULL: the outputs rounded to bfloat16 too (matmul.h's Rounded) */
    int rows, n_in, n_out, ld, act, pairs_per_item, col_groups, tiles_per_item;
    int n_pieces, tile_rows;   /* 3 (float32) or 1 (bfloat16); rows of a row tile, 16 or fewer */
} Product;

/* The rows of row tile `item` of x into their pieces (zero past the last row and input) */
static void split_rows(void *ctx, int item, int thread) {
    (void)thread;
    const Product *q = ctx;
    size_t plane = (size_t)round_up(q->rows, TR) * q->ld;
    float v[q->ld];
    for (int r = item * TR; r < item * TR + q->tile_rows; r++) {
        uint16_t *h = q->pieces + (size_t)r * q->ld, *dst[3] = {h, h + plane, h + 2 * plane};
        int n = r < q->rows ? q->n_in : 0;
        if (n) memcpy(v, q->x + (size_t)r * q->n_in, n * sizeof *v);
        memset(v + n, 0, (q->ld - n) * sizeof *v);
        if (q->n_pieces == 1) matmul_round_bf16(h, v, q->ld);   /* as the writers of rounded inputs round */
        else split_floats(v, dst, q->n_pieces, q->ld);
    }
}

/* The sums of row tile rt, column tiles c0 .. c0 + 31 (tile registers a and b), into out with
 * the activation, and rounded into out16: a whole block with neither straight from the tiles,
 * else through buf (its rows 128 bytes apart, in the L1 cache). Reading stored outputs back
 * from out costs more: its rows are n_out floats apart, 4 KB at d_ff = 1,024, and a block's 16
 * rows crowd one L1 set (docs/speed.md, Memory: sums through the L1 cache). */
#define STORE_SUMS(a, b, rt)                                                                            \
    do {                                                                                                \
        int r0_ = (rt) * TR, nr_ = q->rows - r0_ < q->tile_rows ? q->rows - r0_ : q->tile_rows;         \
        int nc_ = q->n_out - c0 < 2 * TC ? q->n_out - c0 : 2 * TC;                                     \
        float *o_ = q->out + (size_t)r0_ * q->n_out + c0;                                               \
        if (nr_ == q->tile_rows && nc_ == 2 * TC && !q->act && !q->out16) {                             \
            TILE_STORE(a, o_, (long)q->n_out * 4);                                                      \
            TILE_STORE(b, o_ + TC, (long)q->n_out * 4);                                                 \
        } else {                                                                                        \
            TILE_STORE(a, buf[0], 2 * TC * 4);                                                          \
            TILE_STORE(b, buf[0] + TC, 2 * TC * 4);                                                     \
            matmul_store_rows(o_, q->n_out, q->out16 ? q->out16 + (size_t)r0_ * q->n_out + c0 : NULL, q->n_out, \
                              buf[0], 2 * TC, nr_, nc_, q->act);                                      \
        }                                                                                               \
    } while (0)

/* One item: column tile pairs p0 .. p1 - 1 against row tiles t0 .. t1 - 1. */
static void product_item(void *ctx, int item, int thread) {
    (void)thread;
    const Product *q = ctx;
    int pairs = round_up(q->n_out, 2 * TC) / (2 * TC), row_tiles = (q->rows + TR - 1) / TR, blocks = q->ld / KB;
    int p0 = item % q->col_groups * q->pairs_per_item, p1 = p0 + q->pairs_per_item < pairs ? p0 + q->pairs_per_item : pairs;
    int t0 = item / q->col_groups * q->tiles_per_item, t1 = t0 + q->tiles_per_item < row_tiles ? t0 + q->tiles_per_item : row_tiles;
    size_t plane = (size_t)row_tiles * TR * q->ld;
    long lda = (long)q->ld * 2;
    float edge[2 * TC], buf[TR][2 * TC] __attribute__((aligned(64)));
    tiles_configure(q->tile_rows, q->n_pieces == 1 ? 2 : 4);
    for (int p = p0; p < p1; p++) {
        const uint16_t *wp = q->w + (size_t)p * blocks * 4 * TILE, *wl = wp + (size_t)blocks * 2 * TILE;   /* Wh, Wl */
        int c0 = 2 * p * TC;
        /* the sums start at the bias, as matmul.c's: its 32 values (zero past n_out) loaded into
         * every row of a sum tile at once, by a tile load whose rows are 0 bytes apart */
        const float *init = edge;
        if (q->b && c0 + 2 * TC <= q->n_out) init = q->b + c0;
        else
            for (int j = 0; j < 2 * TC; j++) edge[j] = q->b && c0 + j < q->n_out ? q->b[c0 + j] : 0;
        if (q->n_pieces == 1) {   /* bfloat16: two row tiles at a time against Wh */
            for (int rt = t0; rt < t1; rt += 2) {
                const uint16_t *a = q->in + (size_t)rt * TR * q->ld;
                int two = rt + 1 < t1;
                TILE_LOAD(0, init, 0);
                TILE_LOAD(1, init + TC, 0);
                if (two) { TILE_LOAD(4, init, 0); TILE_LOAD(5, init + TC, 0); }
                for (int k = 0; k < blocks; k++) {
                    const uint16_t *wk = wp + (size_t)k * 2 * TILE, *ak = a + k * KB;
                    TILE_LOAD(2, wk, 64);
                    TILE_LOAD(3, wk + TILE, 64);
                    TILE_LOAD(6, ak, lda);
                    TILE_DP(0, 6, 2); TILE_DP(1, 6, 3);
                    if (two) {
                        TILE_LOAD(7, ak + (size_t)TR * q->ld, lda);
                        TILE_DP(4, 7, 2); TILE_DP(5, 7, 3);
                    }
                }
                STORE_SUMS(0, 1, rt);
                if (two) STORE_SUMS(4, 5, rt + 1);
            }
            continue;
        }
        for (int rt = t0; rt < t1; rt++) {
            const uint16_t *a = q->in + (size_t)rt * TR * q->ld;
            TILE_LOAD(0, init, 0);
            TILE_LOAD(1, init + TC, 0);
            for (int k = 0; k < blocks; k++) {
                const uint16_t *wk = wp + (size_t)k * 2 * TILE, *lk = wl + (size_t)k * 2 * TILE, *ak = a + k * KB;
                TILE_LOAD(2, wk, 64);              /* Wh, first column tile */
                TILE_LOAD(3, wk + TILE, 64);       /* Wh, second */
                TILE_LOAD(4, lk, 64);              /* Wl, first */
                TILE_LOAD(5, lk + TILE, 64);       /* Wl, second */
                TILE_LOAD(6, ak, lda);             /* xh */
                TILE_DP(0, 6, 2); TILE_DP(1, 6, 3); TILE_DP(0, 6, 4); TILE_DP(1, 6, 5);
                TILE_LOAD(7, ak + plane, lda);     /* xm */
                TILE_DP(0, 7, 2); TILE_DP(1, 7, 3); TILE_DP(0, 7, 4); TILE_DP(1, 7, 5);
                TILE_LOAD(6, ak + 2 * plane, lda); /* xl */
                TILE_DP(0, 6, 2); TILE_DP(1, 6, 3);
            }
            STORE_SUMS(0, 1, rt);
        }
    }
    TILES_RELEASE();
}
#undef STORE_SUMS

/* The inputs' pieces, kept from one product to the next: a sampling step takes dozens of
 * products, and a fresh buffer of this size would be mapped (and faulted in) for each. The
 * products run one at a time, from the thread that calls them. */
static uint16_t *scratch;
static size_t scratch_size;

void matmul_amx(float *out, const float *x, const uint16_t *W, const float *b, int rows, int n_in, int n_out,
                int act, int bf16, const uint16_t *x16, uint16_t *out16) {
    int ld = round_up(n_in, KB), pairs = round_up(n_out, 2 * TC) / (2 * TC), pieces = bf16 ? 1 : PIECES;
    /* items: every thread two, if the work allows; eight beyond two threads, where a loop's end
     * waits for the slowest of many: a thread done early takes over part of a slow one's share */
    int threads = threads_count();
    size_t enough = (size_t)(threads > 2 ? 8 : 2) * threads;
    for (int r0 = 0; r0 < rows; r0 += CHUNK) {
        int n = rows - r0 < CHUNK ? rows - r0 : CHUNK, row_tiles = (n + TR - 1) / TR;
        size_t need = (size_t)pieces * row_tiles * TR * ld;
        if (!x16 && need > scratch_size) free(scratch), scratch = xmalloc(need * sizeof *scratch), scratch_size = need;
        /* A step's rows split evenly, a row tile or more a thread: each thread its own rows, all the
         * columns, in two items (a thread done early takes another's second). The threads' ranges
         * (threads.c) then give every thread the rows that it wrote and will read next in the step's
         * other loops (layer norms, attention, residuals: rows in order too), so no input comes from
         * another core's cache (docs/speed.md, Threads: the row split). One row tile a thread is
         * enough, though the kernel takes tiles in twos. */
        int share = bf16 && pairs > 1 ? threads_even_share(row_tiles, 1) : 0;
        int per = share ? (pairs + 1) / 2 : pairs, tiles = share ? share : row_tiles;
        if (!share) {   /* one pair an item before the rows are split: each item streams its pairs' weights once */
            while (per > 1 && (size_t)((pairs + per - 1) / per) < enough) per = (per + 1) / 2;
            while (tiles > (bf16 ? 2 : 1) && (size_t)((pairs + per - 1) / per) * ((row_tiles + tiles - 1) / tiles) < enough)
                tiles = (tiles + 1) / 2;   /* the bfloat16 kernel takes row tiles in twos */
        }
        int col_groups = (pairs + per - 1) / per, items = col_groups * ((row_tiles + tiles - 1) / tiles);
        Product q = {out + (size_t)r0 * n_out, x + (size_t)r0 * n_in, b, W, scratch,
                     x16 ? x16 + (size_t)r0 * ld : scratch, out16 ? out16 + (size_t)r0 * n_out : NULL,
                     n, n_in, n_out, ld, act, per, col_groups, tiles, pieces, n < TR ? n : TR};
        if (!x16)   /* else rounded by the loop that wrote x; a few rows (a sampling step): split
                     * here rather than wait at one more loop's end */
            parallel_for_if(row_tiles > 4, row_tiles, split_rows, &q, (double)n * n_in);
        parallel_for(items, product_item, &q, (double)n * n_in * n_out);
    }
}
