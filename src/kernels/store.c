/* What the three product kernels share (store.h): the activations, the rounding to bfloat16,
 * and the store of a block of outputs. Below the kernels: none of them is called from here. */
#include "store.h"

#include <math.h>

#include "io/half.h"

/* The AVX512-BF16 instructions are built whatever the build's -march (a pragma) and run only
 * where the processor has them (matmul_bf16_ready). */
#if defined(__AVX512F__) && defined(__GNUC__)
#define BF16 1
#ifndef __AVX512BF16__
#pragma GCC target("avx512bf16")
#endif
#include <cpuid.h>
#include <immintrin.h>
#else
#define BF16 0
#endif

int matmul_bf16_ready(void) {
    static int ready = -1;
    if (ready < 0) {
        ready = BF16;
#if BF16
        unsigned a, b, c, d;   /* CPUID leaf 7, subleaf 1: EAX bit 5 is AVX512-BF16 */
        ready = ready && __get_cpuid_count(7, 1, &a, &b, &c, &d) && (a >> 5 & 1);
#endif
    }
    return ready;
}

void matmul_activate(float *o, int ldo, int rows, int ncols, int act) {
    for (int r = 0; r < rows; r++) {
        float *v = o + (size_t)r * ldo;
        if (act == MATMUL_RELU)
            for (int j = 0; j < ncols; j++) v[j] = v[j] > 0 ? v[j] : 0;
        else   /* exact gelu, as torch.nn.functional.gelu */
            for (int j = 0; j < ncols; j++) v[j] = 0.5f * v[j] * (1.0f + erff(v[j] * 0.70710678118654752f));
    }
}

void matmul_round_bf16_rows(uint16_t *dst, size_t ldd, const float *x, size_t ldx, int rows, int n) {
#if BF16
    int fast = matmul_bf16_ready();   /* the instruction rounds as float_to_bf16 does */
#endif
    for (int r = 0; r < rows; r++, dst += ldd, x += ldx) {
        int i = 0;
#if BF16
        if (fast)
            for (; i + 32 <= n; i += 32)
                _mm512_storeu_si512(dst + i, (__m512i)_mm512_cvtne2ps_pbh(_mm512_loadu_ps(x + i + 16), _mm512_loadu_ps(x + i)));
#endif
        for (; i < n; i++) dst[i] = float_to_bf16(x[i]);
    }
}

void matmul_round_bf16(uint16_t *dst, const float *x, int n) { matmul_round_bf16_rows(dst, 0, x, 0, 1, n); }

void matmul_store_rows(float *out, size_t ldo, uint16_t *out16, size_t ldd, float *src, size_t lds, int rows, int n,
                       int act) {
    if (act == MATMUL_GELU) matmul_activate(src, (int)lds, rows, n, act), act = MATMUL_NONE;
    int relu = act == MATMUL_RELU;
#if BF16
    int fast = matmul_bf16_ready();
    const __m512 zero = _mm512_setzero_ps();
#endif
    for (int r = 0; r < rows; r++, out += ldo, src += lds) {
        uint16_t *o16 = out16 ? out16 + (size_t)r * ldd : NULL;
        int i = 0;
#if BF16
        if (fast)
            for (; i + 32 <= n; i += 32) {
                __m512 a = _mm512_loadu_ps(src + i), b = _mm512_loadu_ps(src + i + 16);
                if (relu) a = _mm512_max_ps(a, zero), b = _mm512_max_ps(b, zero);   /* NaN and -0 to +0, as below */
                _mm512_storeu_ps(out + i, a);
                _mm512_storeu_ps(out + i + 16, b);
                if (o16) _mm512_storeu_si512(o16 + i, (__m512i)_mm512_cvtne2ps_pbh(b, a));
            }
#endif
        for (; i < n; i++) {
            float v = relu && !(src[i] > 0) ? 0 : src[i];
            out[i] = v;
            if (o16) o16[i] = float_to_bf16(v);
        }
    }
}

