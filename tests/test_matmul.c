/* matmul: x W^T + b with packed weights, against a plain double-precision loop, over shapes
 * that hit every row-tile remainder, a narrow last panel and more than one row block; weights
 * held as halves give the same bits as the same values held as floats, and the fused activations
 * the same bits as the plain products through them; a row's outputs do not depend on the other
 * rows. Where AMX is ready (or built
 * with LINGEN_AMX_EMULATE: its tiles as C, Makefile's test_matmul_amx), the same for its products
 * on the halves, to about twice float32's rounding. Where bfloat16 products are ready (AVX512-BF16),
 * theirs against the double-precision sums of the bfloat16-rounded inputs and weights. */
#include "testutil.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include "io/half.h"
#include "kernels/matmul.h"
#include "kernels/matmul_amx.h"
#include "kernels/matmul_q8.h"
#include "kernels/product.h"
#include "kernels/threads.h"

static float uniform(unsigned *s) { *s = *s * 1664525u + 1013904223u; return (float)(*s >> 8) / (1 << 24) - 0.5f; }
/* a random half of magnitude in [2^-14, 1): sign, exponent 1..14, any mantissa */
static uint16_t random_half(unsigned *s) {
    *s = *s * 1664525u + 1013904223u;
    unsigned r = *s >> 8;
    return (uint16_t)((r & 1) << 15 | (1 + (r >> 1) % 14) << 10 | ((r >> 5) & 0x3ff));
}

/* out against the double-precision sums, to tol times the sum of the terms' magnitudes */
/* A product on kernel k, with nothing rounded ahead. */
static void run(Kernel k, float *out, const float *x, Packed W, const float *b, int rows, int n_in, int n_out, int act) {
    product(k, out, x, W, b, rows, n_in, n_out, act, (Rounded){NULL, NULL});
}

static void expect_near(const char *what, const float *out, const float *x, const float *W, const float *b, int rows,
                        int n_in, int n_out, double tol) {
    for (int r = 0; r < rows; r++)
        for (int o = 0; o < n_out; o++) {
            double want = b[o], mag = fabs(b[o]);
            for (int i = 0; i < n_in; i++) {
                want += (double)x[r * n_in + i] * W[o * n_in + i];
                mag += fabs((double)x[r * n_in + i] * W[o * n_in + i]);
            }
            double got = out[r * n_out + o];
            if (!(fabs(got - want) <= tol * mag + 1e-7))
                fail_msg("%s: rows %d, n_in %d, n_out %d: out[%d][%d] = %.9g, expected %.9g", what, rows, n_in, n_out,
                         r, o, got, want);
        }
}

static void check(int rows, int n_in, int n_out) {
    unsigned seed = (unsigned)(rows * 7919 + n_in * 31 + n_out);
    float *W = malloc(sizeof(float) * n_in * n_out), *x = malloc(sizeof(float) * rows * n_in);
    float *b = malloc(sizeof(float) * n_out), *out = malloc(sizeof(float) * rows * n_out);
    float *Wf = malloc(sizeof(float) * matmul_packed_values(n_in, n_out));
    uint16_t *H = malloc(sizeof(uint16_t) * n_in * n_out), *Wh = malloc(sizeof(uint16_t) * matmul_packed_values(n_in, n_out));
    for (int i = 0; i < n_in * n_out; i++) W[i] = half_to_float(H[i] = random_half(&seed));
    for (int i = 0; i < rows * n_in; i++) x[i] = uniform(&seed);
    for (int i = 0; i < n_out; i++) b[i] = uniform(&seed);
    matmul_pack(Wf, W, 0, n_in, n_out);
    matmul_pack(Wh, H, 1, n_in, n_out);
    Packed Wp = {Wf, 0, NULL, NULL, NULL};
    for (int i = 0; i < rows * n_out; i++) out[i] = NAN;   /* every element must be written */
    matmul(out, x, Wp, b, rows, n_in, n_out);
    expect_near("floats", out, x, W, b, rows, n_in, n_out, 1e-6);
    /* the same values held as halves: the same products, bit for bit */
    float *again = malloc(sizeof(float) * rows * n_out);
    for (int i = 0; i < rows * n_out; i++) again[i] = NAN;
    matmul(again, x, (Packed){Wh, 1, NULL, NULL, NULL}, b, rows, n_in, n_out);
    assert_memory_equal(again, out, sizeof(float) * rows * n_out);
    /* activations (relu in the tiles' registers, or after a group of panels; gelu after): the
     * plain products through the activation, bit for bit, for floats and halves */
    float *want = malloc(sizeof(float) * rows * n_out);
    for (int act = MATMUL_RELU; act <= MATMUL_GELU; act++) {
        for (int i = 0; i < rows * n_out; i++) want[i] = out[i];
        matmul_activate(want, n_out, rows, n_out, act);
        for (int i = 0; i < rows * n_out && act == MATMUL_RELU; i++)
            assert_true(want[i] == (out[i] > 0 ? out[i] : 0));
        for (int half = 0; half <= 1; half++) {
            for (int i = 0; i < rows * n_out; i++) again[i] = NAN;
            matmul_ex(again, x, half ? (Packed){Wh, 1, NULL, NULL, NULL} : Wp, b, rows, n_in, n_out, act);
            assert_memory_equal(again, want, sizeof(float) * rows * n_out);
        }
    }
    free(want);
    if (matmul_amx_ready()) {   /* the tiles: the halves packed for them */
        uint16_t *A = malloc(sizeof(uint16_t) * matmul_amx_values(n_in, n_out));
        matmul_amx_pack(A, H, n_in, n_out);
        for (int i = 0; i < rows * n_out; i++) again[i] = NAN;
        run(KERNEL_AMX, again, x, (Packed){Wh, 1, A, NULL, NULL}, b, rows, n_in, n_out, MATMUL_NONE);
        /* the sum is rounded after each of 5 partial products: about twice float32's error */
        expect_near("AMX", again, x, W, b, rows, n_in, n_out, 3e-6);
        free(A);
    }
    if (matmul_bf16_ready()) {   /* the same weights rounded to bfloat16, and so is x: their exact
                                  * products summed in float32, to float32's rounding */
        uint16_t *B = malloc(sizeof(uint16_t) * matmul_bf16_values(n_in, n_out));
        float *Wr = malloc(sizeof(float) * n_in * n_out), *xr = malloc(sizeof(float) * rows * n_in);
        matmul_bf16_pack(B, W, n_in, n_out);
        for (int i = 0; i < n_in * n_out; i++) Wr[i] = bf16_to_float(float_to_bf16(W[i]));
        for (int i = 0; i < rows * n_in; i++) xr[i] = bf16_to_float(float_to_bf16(x[i]));
        Packed P = {Wh, 1, NULL, B, NULL};
        for (int i = 0; i < rows * n_out; i++) again[i] = NAN;
        run(KERNEL_BF16, again, x, P, b, rows, n_in, n_out, MATMUL_NONE);
        expect_near("bfloat16", again, xr, Wr, b, rows, n_in, n_out, 1e-6);
        float *more = malloc(sizeof(float) * rows * n_out);   /* relu: the same bits through it */
        run(KERNEL_BF16, more, x, P, b, rows, n_in, n_out, MATMUL_RELU);
        for (int i = 0; i < rows * n_out; i++) assert_true(more[i] == (again[i] > 0 ? again[i] : 0));
        if (matmul_amx_ready()) {   /* on the tiles (a sampling step where the processor has AMX):
                                     * the same rounded operands, summed in float32 */
            uint16_t *A = malloc(sizeof(uint16_t) * matmul_amx_values(n_in, n_out));
            matmul_amx_pack(A, H, n_in, n_out);
            Packed T = {Wh, 1, A, B, NULL};
            for (int i = 0; i < rows * n_out; i++) more[i] = NAN;
            run(KERNEL_AMX_BF16, more, x, T, b, rows, n_in, n_out, MATMUL_NONE);
            expect_near("AMX bfloat16", more, xr, Wr, b, rows, n_in, n_out, 1e-6);
            float *relu = malloc(sizeof(float) * rows * n_out);
            run(KERNEL_AMX_BF16, relu, x, T, b, rows, n_in, n_out, MATMUL_RELU);
            for (int i = 0; i < rows * n_out; i++) assert_true(relu[i] == (more[i] > 0 ? more[i] : 0));
            free(relu); free(A);
        }
        free(more); free(B); free(Wr); free(xr);
    }
    {   /* 8-bit weights: each within half a step of W (the step: its block's largest / 127, rounded
         * up to bfloat16, by less than 2^-7 of it), and the product that of the weights as held, to
         * float32's rounding; relu the same bits through */
        void *Q = malloc(matmul_q8_bytes(n_in, n_out));
        float *Wq = malloc(sizeof(float) * n_in * n_out), *relu = malloc(sizeof(float) * rows * n_out);
        matmul_q8_pack(Q, W, n_in, n_out);
        for (int o = 0; o < n_out; o++)
            for (int i = 0; i < n_in; i++) {
                float m = 0;
                for (int j = i / 32 * 32; j < n_in && j < i / 32 * 32 + 32; j++) m = fmaxf(m, fabsf(W[o * n_in + j]));
                Wq[o * n_in + i] = matmul_q8_get(Q, n_in, o, i);
                assert_true(fabsf(Wq[o * n_in + i] - W[o * n_in + i]) <= m / 127 * (1 + 0x1p-7f) * 0.5001f);
            }
        /* x as the product takes it: each row as integers within half a step of x, the step its
         * largest / 32767 */
        float *xq = malloc(sizeof(float) * rows * n_in);
        for (int r = 0; r < rows; r++) {
            float m = 0;
            for (int i = 0; i < n_in; i++) m = fmaxf(m, fabsf(x[r * n_in + i]));
            for (int i = 0; i < n_in; i++) xq[r * n_in + i] = m == 0 ? 0 : (float)(m / 32767 * (double)nearbyintf(x[r * n_in + i] * (32767.0f / m)));
        }
        Packed P = {Wh, 1, NULL, NULL, Q};
        for (int vnni = 0; vnni <= 1; vnni++) {   /* vpdpwssd, where the processor has it: the same bits */
            matmul_q8_vnni(vnni);
            for (int i = 0; i < rows * n_out; i++) again[i] = NAN;
            run(KERNEL_INT8, again, x, P, b, rows, n_in, n_out, MATMUL_NONE);
            expect_near("int8", again, xq, Wq, b, rows, n_in, n_out, 1e-6);
            if (vnni) assert_memory_equal(again, relu, sizeof(float) * rows * n_out);
            memcpy(relu, again, sizeof(float) * rows * n_out);
        }
        run(KERNEL_INT8, relu, x, P, b, rows, n_in, n_out, MATMUL_RELU);
        for (int i = 0; i < rows * n_out; i++) assert_true(relu[i] == (again[i] > 0 ? again[i] : 0));
        free(Q); free(Wq); free(relu); free(xq);
    }
    free(again);
    free(W); free(x); free(b); free(out); free(Wf); free(H); free(Wh);
}

static void test_against_reference(void **state) {
    (void)state;
    const int rows[] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 12, 13, 14, 15, 16, 17, 28, 29, 64, 65, 200};   /* tiles of 6 or 14 rows */
    const int n_in[] = {1, 3, 16, 33, 256};
    const int n_out[] = {1, 9, 16, 17, 30, 32, 33, 48, 70, 256};   /* panels of 16 or 32 columns */
    for (int t = 1; t <= 4; t *= 2) {   /* one, two and more threads share the work differently */
        threads_set(t);
        for (size_t a = 0; a < sizeof rows / sizeof *rows; a++)
            for (size_t c = 0; c < sizeof n_in / sizeof *n_in; c++)
                for (size_t k = 0; k < sizeof n_out / sizeof *n_out; k++) check(rows[a], n_in[c], n_out[k]);
    }
    check(1100, 40, 20);   /* AMX splits the inputs 1,024 rows at a time */
    check(300, 256, 40);   /* bfloat16 inputs rounded on both threads (300 x 256 >= 65,536 values) */
}

/* The packed layout: W[o][i] lands at matmul_packed_index, for floats and for halves, and reads
 * back through matmul_packed_get; the padding of the last panel is zero. */
static void test_pack_layout(void **state) {
    (void)state;
    enum { NR = MATMUL_NR, n_in = 5, n_out = NR + 4, packed = 2 * NR * n_in };
    float W[n_out * n_in], Wp[packed];
    uint16_t H[n_out * n_in], Hp[packed];
    for (int i = 0; i < n_out * n_in; i++) W[i] = half_to_float(H[i] = (uint16_t)(0x3c00 + i));   /* 1 + i/1024 */
    assert_int_equal(matmul_packed_values(n_in, n_out), packed);
    matmul_pack(Wp, W, 0, n_in, n_out);
    matmul_pack(Hp, H, 1, n_in, n_out);
    for (int o = 0; o < n_out; o++)
        for (int i = 0; i < n_in; i++) {
            assert_true(Wp[matmul_packed_index(n_in, o, i)] == W[o * n_in + i]);
            assert_true(Hp[matmul_packed_index(n_in, o, i)] == H[o * n_in + i]);
            assert_true(matmul_packed_get((Packed){Wp, 0, NULL, NULL, NULL}, n_in, o, i) == W[o * n_in + i]);
            assert_true(matmul_packed_get((Packed){Hp, 1, NULL, NULL, NULL}, n_in, o, i) == W[o * n_in + i]);
        }
    assert_int_equal(matmul_packed_index(n_in, NR + 1, 2), (1 * 5 + 2) * NR + 1);
    /* AMX's: W[o][i] split in two bfloat16, Wh + Wl, exactly; column pair o / 32 holds, for each
     * block i / 32, the Wh tiles of its two column tiles, then the same for Wl; in a tile, row
     * (i % 32) / 2, column o % 16, i % 2 of the pair */
    uint16_t A[2 * 32 * 64];
    size_t low = matmul_amx_low(40);
    assert_int_equal(low, 2 * 2 * 512);   /* 2 blocks of 2 tiles */
    assert_int_equal(matmul_amx_values(40, 17), sizeof A / sizeof *A);
    assert_int_equal(matmul_amx_index(n_in, 1, 2), 1 * 32 + 1 * 2);
    assert_int_equal(matmul_amx_index(40, 17, 33), (1 * 2 + 1) * 512 + 0 * 32 + 1 * 2 + 1);
    uint16_t H40[17 * 40];
    unsigned seed = 3;
    for (int i = 0; i < 17 * 40; i++) H40[i] = random_half(&seed);
    H40[0] = 0x3c01;   /* 1 + 2^-10: Wh = 1, Wl = 2^-10 */
    matmul_amx_pack(A, H40, 40, 17);
    int amx_zeros = 0;
    for (size_t i = 0; i < sizeof A / sizeof *A; i++) amx_zeros += A[i] == 0;
    for (int o = 0; o < 17; o++)
        for (int i = 0; i < 40; i++) {
            size_t k = matmul_amx_index(40, o, i);
            assert_true(bf16_to_float(A[k]) + bf16_to_float(A[k + low]) == half_to_float(H40[o * 40 + i]));
            assert_true(fabsf(bf16_to_float(A[k + low])) <= fabsf(bf16_to_float(A[k])) / 128);
            amx_zeros -= A[k + low] == 0;   /* a Wl of 0 is no padding */
        }
    assert_true(A[0] == 0x3f80 && A[low] == 0x3a80);
    assert_int_equal(amx_zeros, 2 * (32 * 64 - 17 * 40));   /* columns padded to 32, inputs to 64, in Wh and Wl */
    int zeros = 0, half_zeros = 0;
    for (int i = 0; i < packed; i++) zeros += Wp[i] == 0, half_zeros += Hp[i] == 0;
    assert_int_equal(zeros, (NR - 4) * n_in);   /* the last panel's padding columns */
    assert_int_equal(half_zeros, (NR - 4) * n_in);
}

/* A row's outputs do not depend on the rows beside it: every row of a product equals, bit for
 * bit, the product of that row alone (one or two rows take panels in groups, more rows in
 * tiles). Sampling relies on it: image k is the same at any batch size, in any MPI share. */
static void test_rows_independent(void **state) {
    (void)state;
    const int rows[] = {2, 3, 7, 64}, n_in[] = {256, 1024};
    enum { n_out = 256 };
    unsigned seed = 7;
    for (int t = 1; t <= 2; t++) {
        threads_set(t);
        for (size_t c = 0; c < sizeof n_in / sizeof *n_in; c++)
            for (int kind = 0; kind <= 2; kind++) {   /* floats, halves, bfloat16 pairs */
                int n = n_in[c], R = 64, half = kind > 0;
                if (kind == 2 && !matmul_bf16_ready()) continue;
                float *W = malloc(sizeof(float) * n * n_out), *x = malloc(sizeof(float) * R * n), b[n_out];
                uint16_t *H = malloc(sizeof(uint16_t) * n * n_out);
                void *Wp = malloc(sizeof(float) * matmul_packed_values(n, n_out));
                float *all = malloc(sizeof(float) * R * n_out), one[2 * n_out];
                for (int i = 0; i < n * n_out; i++) W[i] = half_to_float(H[i] = random_half(&seed));
                for (int i = 0; i < R * n; i++) x[i] = uniform(&seed);
                for (int i = 0; i < n_out; i++) b[i] = uniform(&seed);
                matmul_pack(Wp, half ? (void *)H : (void *)W, half, n, n_out);
                uint16_t *A = half && matmul_amx_ready() ? malloc(sizeof(uint16_t) * matmul_amx_values(n, n_out)) : NULL;
                if (A) matmul_amx_pack(A, H, n, n_out);
                uint16_t *B = kind == 2 ? malloc(sizeof(uint16_t) * matmul_bf16_values(n, n_out)) : NULL;
                if (B) matmul_bf16_pack(B, W, n, n_out);
                Packed P = {Wp, half, A, B, NULL};
                Kernel k = B ? (A ? KERNEL_AMX_BF16 : KERNEL_BF16) : A ? KERNEL_AMX : KERNEL_F32;
                for (size_t a = 0; a < sizeof rows / sizeof *rows; a++) {
                    run(k, all, x, P, b, rows[a], n, n_out, MATMUL_NONE);
                    for (int r = 0; r < rows[a]; r++) {
                        run(k, one, x + (size_t)r * n, P, b, 1, n, n_out, MATMUL_NONE);
                        assert_memory_equal(one, all + (size_t)r * n_out, sizeof(float) * n_out);
                    }
                    if (rows[a] < 3) continue;
                    run(k, one, x + n, P, b, 2, n, n_out, MATMUL_NONE);   /* rows 1-2 as a pair */
                    assert_memory_equal(one, all + n_out, sizeof(float) * 2 * n_out);
                }
                free(W); free(x); free(H); free(Wp); free(all); free(A); free(B);
            }
    }
}

/* matmul_round_bf16 rounds as float_to_bf16 (half.h) does, whichever instructions it takes:
 * halfway cases to even, subnormals to zero, NaN kept, infinities and the largest values. */
static void test_round_bf16(void **state) {
    (void)state;
    enum { N = 4096 + 7 };
    float x[N];
    uint16_t got[N];
    unsigned seed = 3;
    const uint32_t special[] = {0x3f808000u, 0x3f818000u, 0x3f80c000u, 0x00000001u, 0x807fffffu, 0x7f800000u,
                                0xff800000u, 0x7fc00001u, 0x7f7fffffu, 0x7f7f8000u, 0x00800000u, 0x80000000u};
    for (int i = 0; i < N; i++) {
        uint32_t u;
        seed = seed * 1664525u + 1013904223u;
        u = i < 12 ? special[i] : i % 3 ? seed : (seed & 0xffff0000u) | 0x8000u;   /* every third a tie */
        memcpy(&x[i], &u, 4);
    }
    matmul_round_bf16(got, x, N);
    for (int i = 0; i < N; i++)
        if (got[i] != float_to_bf16(x[i])) fail_msg("value %d (%a): 0x%04x, float_to_bf16 0x%04x", i, x[i], got[i], float_to_bf16(x[i]));
}

/* matmul_store_rows (the tiles' epilogue): each value through the activation into out, and
 * float_to_bf16 of that into out16, whichever instructions it takes; relu sends NaN and -0 to
 * +0; rows at their strides, nothing written past n. */
static void test_store_rows(void **state) {
    (void)state;
    enum { ROWS = 3, N = 45, LD = 48 };   /* a whole 32 and a tail of 13 */
    float src[ROWS * LD], keep[ROWS * LD], out[ROWS * LD];
    uint16_t out16[ROWS * LD];
    unsigned seed = 11;
    for (int i = 0; i < ROWS * LD; i++) {
        seed = seed * 1664525u + 1013904223u;
        keep[i] = ((int)(seed >> 8) % 2001 - 1000) / 37.0f;
    }
    keep[3] = -0.0f, keep[40] = NAN, keep[LD + 5] = NAN, keep[LD + 33] = -0.0f, keep[2 * LD + 7] = INFINITY;
    for (int act = MATMUL_NONE; act <= MATMUL_GELU; act++)
        for (int rounded = 0; rounded <= 1; rounded++) {
            memcpy(src, keep, sizeof src);
            for (int i = 0; i < ROWS * LD; i++) out[i] = 12345.0f, out16[i] = 0xabcd;
            matmul_store_rows(out, LD, rounded ? out16 : NULL, LD, src, LD, ROWS, N, act);
            for (int r = 0; r < ROWS; r++)
                for (int j = 0; j < LD; j++) {
                    int i = r * LD + j;
                    if (j >= N) {
                        assert_true(out[i] == 12345.0f);
                        assert_int_equal(out16[i], 0xabcd);
                        continue;
                    }
                    float want = keep[i];
                    if (act == MATMUL_RELU) want = keep[i] > 0 ? keep[i] : 0;
                    if (act == MATMUL_GELU) want = 0.5f * keep[i] * (1.0f + erff(keep[i] * 0.70710678118654752f));
                    uint32_t a, b;
                    memcpy(&a, &out[i], 4), memcpy(&b, &want, 4);
                    if (a != b && !(isnan(out[i]) && isnan(want))) fail_msg("act %d, row %d, column %d: %a, want %a", act, r, j, out[i], want);
                    assert_int_equal(out16[i], rounded ? float_to_bf16(want) : 0xabcd);
                }
        }
}

/* Rounded: an input given already rounded (x16) gives the bits that rounding x in the
 * product gives, whatever the padding rows hold, and the outputs come rounded too (out16, after
 * the activation); a width that is not a multiple of MATMUL_ROUNDED_ALIGN ignores both; float32
 * products (no bfloat16 weights) ignore both. On the tiles too, where they are ready. On 2 threads
 * a product splits by rows, a thread's own: on the tiles from 20 rows (1, 1, 2 and 3 row tiles
 * a thread at 20, 32, 64 and 96), in matmul.c from 64 (threads_even_share). */
static void test_rounded(void **state) {
    (void)state;
    if (!matmul_bf16_ready()) skip();
    const int rows[] = {1, 5, 16, 20, 32, 64, 96}, shapes[][2] = {{256, 96}, {64, 256}, {40, 64}, {64, 40}};
    unsigned seed = 11;
    for (int t = 1; t <= 2; t++) {
        threads_set(t);
        for (size_t s = 0; s < sizeof shapes / sizeof *shapes; s++)
            for (int amx = 0; amx <= matmul_amx_ready(); amx++) {
                int n_in = shapes[s][0], n_out = shapes[s][1], R = MATMUL_ROUNDED_ROWS(96) + 16;
                float *W = malloc(sizeof(float) * n_in * n_out), *x = malloc(sizeof(float) * R * n_in), b[256];
                uint16_t *H = malloc(sizeof(uint16_t) * n_in * n_out), *x16 = malloc(sizeof(uint16_t) * R * n_in);
                uint16_t *out16 = malloc(sizeof(uint16_t) * R * n_out), *want16 = malloc(sizeof(uint16_t) * n_out);
                uint16_t *Wh = malloc(sizeof(uint16_t) * matmul_packed_values(n_in, n_out));
                uint16_t *B = malloc(sizeof(uint16_t) * matmul_bf16_values(n_in, n_out));
                uint16_t *A = amx ? malloc(sizeof(uint16_t) * matmul_amx_values(n_in, n_out)) : NULL;
                float *want = malloc(sizeof(float) * R * n_out), *got = malloc(sizeof(float) * R * n_out);
                for (int i = 0; i < n_in * n_out; i++) W[i] = half_to_float(H[i] = random_half(&seed));
                for (int i = 0; i < R * n_in; i++) x[i] = uniform(&seed);
                for (int i = 0; i < n_out; i++) b[i] = uniform(&seed);
                matmul_pack(Wh, H, 1, n_in, n_out);
                matmul_bf16_pack(B, W, n_in, n_out);
                if (A) matmul_amx_pack(A, H, n_in, n_out);
                Packed P = {Wh, 1, A, B, NULL};
                Kernel k = A ? KERNEL_AMX_BF16 : KERNEL_BF16;
                for (size_t a = 0; a < sizeof rows / sizeof *rows; a++) {
                    int n = rows[a], aligned_in = n_in % MATMUL_ROUNDED_ALIGN == 0, aligned_out = n_out % MATMUL_ROUNDED_ALIGN == 0;
                    matmul_round_bf16(x16, x, n * n_in);
                    for (int i = n * n_in; i < R * n_in; i++) x16[i] = 0x7fc0;   /* padding: NaN must not matter */
                    if (!aligned_in) x16[0] ^= 0x1234;   /* a wrong value must not matter either */
                    for (int i = 0; i < R * n_out; i++) out16[i] = 0xabcd;
                    run(k, want, x, P, b, n, n_in, n_out, MATMUL_RELU);
                    run(k, got, x + (size_t)n * n_in, P, b, R - n, n_in, n_out, MATMUL_NONE);   /* other inputs, rounded in the product */
                    product(k, got, x, P, b, n, n_in, n_out, MATMUL_RELU, (Rounded){x16, out16});
                    assert_memory_equal(got, want, sizeof(float) * n * n_out);
                    for (int r = 0; r < n; r++) {
                        matmul_round_bf16(want16, want + (size_t)r * n_out, n_out);
                        for (int o = 0; o < n_out; o++)
                            assert_int_equal(out16[(size_t)r * n_out + o], aligned_out ? want16[o] : 0xabcd);
                    }
                    for (int i = n * n_out; i < R * n_out; i++) assert_int_equal(out16[i], 0xabcd);
                    /* float32 products: nothing rounded, nothing read rounded */
                    Packed F = {Wh, 1, NULL, NULL, NULL};
                    x16[0] ^= 0x1234;
                    matmul_ex(want, x, F, b, n, n_in, n_out, MATMUL_NONE);
                    product(KERNEL_F32, got, x, F, b, n, n_in, n_out, MATMUL_NONE, (Rounded){x16, out16});
                    assert_memory_equal(got, want, sizeof(float) * n * n_out);
                    if (!aligned_out) continue;
                    for (int r = 0; r < n; r++) {   /* out16 unchanged since the bfloat16 product */
                        run(k, want, x + (size_t)r * n_in, P, b, 1, n_in, n_out, MATMUL_RELU);
                        matmul_round_bf16(want16, want, n_out);
                        assert_memory_equal(out16 + (size_t)r * n_out, want16, sizeof(uint16_t) * n_out);
                    }
                }
                free(W); free(x); free(H); free(x16); free(out16); free(want16); free(Wh); free(B); free(A);
                free(want); free(got);
            }
    }
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_round_bf16),
        cmocka_unit_test(test_rounded),
        cmocka_unit_test(test_store_rows),
        cmocka_unit_test(test_against_reference),
        cmocka_unit_test(test_rows_independent),
        cmocka_unit_test(test_pack_layout),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
