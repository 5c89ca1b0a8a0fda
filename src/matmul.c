/* y = x W^T + b with W packed into panels of 16 output columns (matmul.h).
 *
 * The work is split into (block of up to 64 rows) x (panel) pieces. A 64-row block of x
 * (256 KB at most for n_in = 1024) stays in L2 while the panels pass through it, and every
 * panel is read once per block, front to back. At a sampling step (rows = batch <= 64) the
 * threads share out the panels, so each streams its own part of the weights. */
#include <string.h>
#if defined(__AVX2__) && defined(__FMA__)
#include <immintrin.h>
#endif

#include "matmul.h"

#define NR MATMUL_NR
#define MR 6    /* rows per tile: 6 x 2 accumulators + 2 weight vectors + 1 broadcast = 15 of 16 AVX registers */
#define MB 64   /* rows per block */

size_t matmul_packed_floats(int n_in, int n_out) { return (size_t)((n_out + NR - 1) / NR) * n_in * NR; }

size_t matmul_packed_index(int n_in, int o, int i) { return ((size_t)(o / NR) * n_in + i) * NR + o % NR; }

void matmul_pack(float *dst, const float *W, int n_in, int n_out) {
    memset(dst, 0, matmul_packed_floats(n_in, n_out) * sizeof *dst);
    for (int o = 0; o < n_out; o++)
        for (int i = 0; i < n_in; i++) dst[matmul_packed_index(n_in, o, i)] = W[(size_t)o * n_in + i];
}

/* The micro-kernel: R rows of x times one panel, out[r][0..16) = b + sum_i x[r][i] Wp[i][0..16).
 * R is a constant at every call site, so the loops over r unroll and the accumulators stay
 * in registers. */
static inline __attribute__((always_inline)) void tile(const int R, float *out, int ldo, const float *x,
                                                        int ldx, const float *Wp, int n_in, const float *b) {
#if defined(__AVX2__) && defined(__FMA__)
    __m256 lo[MR], hi[MR];
    for (int r = 0; r < R; r++) { lo[r] = _mm256_loadu_ps(b); hi[r] = _mm256_loadu_ps(b + 8); }
    for (int i = 0; i < n_in; i++) {
        __m256 w0 = _mm256_loadu_ps(Wp + (size_t)i * NR), w1 = _mm256_loadu_ps(Wp + (size_t)i * NR + 8);
        for (int r = 0; r < R; r++) {
            __m256 xr = _mm256_broadcast_ss(x + (size_t)r * ldx + i);
            lo[r] = _mm256_fmadd_ps(xr, w0, lo[r]);
            hi[r] = _mm256_fmadd_ps(xr, w1, hi[r]);
        }
    }
    for (int r = 0; r < R; r++) {
        _mm256_storeu_ps(out + (size_t)r * ldo, lo[r]);
        _mm256_storeu_ps(out + (size_t)r * ldo + 8, hi[r]);
    }
#else   /* portable: the same arithmetic, left to the compiler */
    float acc[MR][NR];
    for (int r = 0; r < R; r++) memcpy(acc[r], b, sizeof acc[r]);
    for (int i = 0; i < n_in; i++)
        for (int r = 0; r < R; r++)
            for (int j = 0; j < NR; j++) acc[r][j] += x[(size_t)r * ldx + i] * Wp[(size_t)i * NR + j];
    for (int r = 0; r < R; r++) memcpy(out + (size_t)r * ldo, acc[r], sizeof acc[r]);
#endif
}

/* rows x ncols (ncols <= 16) of out from one panel; a narrower last panel goes through tmp. */
static void panel(float *out, int ldo, const float *x, int ldx, const float *Wp, int n_in,
                  const float *b, int rows, int ncols) {
    float tmp[MR * NR], bias[NR] = {0};
    if (ncols < NR) b = memcpy(bias, b, ncols * sizeof *b);
    for (int r = 0; r < rows; r += MR) {
        int R = rows - r < MR ? rows - r : MR, ld = ncols < NR ? NR : ldo;
        float *o = ncols < NR ? tmp : out + (size_t)r * ldo;
        const float *xr = x + (size_t)r * ldx;
        switch (R) {
        case 6: tile(6, o, ld, xr, ldx, Wp, n_in, b); break;
        case 5: tile(5, o, ld, xr, ldx, Wp, n_in, b); break;
        case 4: tile(4, o, ld, xr, ldx, Wp, n_in, b); break;
        case 3: tile(3, o, ld, xr, ldx, Wp, n_in, b); break;
        case 2: tile(2, o, ld, xr, ldx, Wp, n_in, b); break;
        default: tile(1, o, ld, xr, ldx, Wp, n_in, b); break;
        }
        if (ncols < NR)
            for (int k = 0; k < R; k++) memcpy(out + (size_t)(r + k) * ldo, tmp + k * NR, ncols * sizeof *out);
    }
}

void matmul(float *out, const float *x, const float *Wp, const float *b, int rows, int n_in, int n_out) {
    int np = (n_out + NR - 1) / NR, nb = (rows + MB - 1) / MB;
    #pragma omp parallel for collapse(2) schedule(static)
    for (int rb = 0; rb < nb; rb++)
        for (int p = 0; p < np; p++) {
            int r0 = rb * MB, c0 = p * NR;
            panel(out + (size_t)r0 * n_out + c0, n_out, x + (size_t)r0 * n_in, n_in, Wp + (size_t)p * n_in * NR,
                  n_in, b + c0, rows - r0 < MB ? rows - r0 : MB, n_out - c0 < NR ? n_out - c0 : NR);
        }
}
