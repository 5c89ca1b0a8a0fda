/* A vectorizable exp for the arguments the attentions need: u <= 0 (phi = elu + 1 below 0,
 * softmax after the row maximum is subtracted). */
#ifndef LINGEN_FASTEXP_H
#define LINGEN_FASTEXP_H

#include <stdint.h>
#include <string.h>

/* exp(u) for u <= 0, within 2 ulp (1.7 at most against double exp over [-87, 0]), in plain
 * arithmetic that the compiler vectorizes (libm's expf is a call per value): u = k ln2 + r with
 * |r| <= ln2/2, exp(u) = 2^k exp(r), exp(r) by its Taylor series to r^7 (truncation error
 * < 1e-8 relative). Below -87 it gives 0: exp(-87) = 1.6e-38 is near the smallest normal
 * float, and zero keeps the products that follow (softmax's P V) out of the subnormal range,
 * which is many times slower on x86. */
static inline float exp_nonpositive(float u) {
    float x = u < -87.0f ? -87.0f : u;
    const float shift = 12582912.0f;            /* 1.5 * 2^23: adding it rounds to an integer */
    float kf = (x * 1.44269504f + shift) - shift;
    float r = (x - kf * 0.693145752f) - kf * 1.42860677e-6f;   /* ln2 in two parts: r exact */
    float p = 1.0f / 5040;
    p = p * r + 1.0f / 720; p = p * r + 1.0f / 120; p = p * r + 1.0f / 24;
    p = p * r + 1.0f / 6;   p = p * r + 0.5f;       p = p * r + 1.0f; p = p * r + 1.0f;
    int32_t bits = ((int32_t)kf + 127) << 23;   /* 2^k, k in -126..0 */
    float two_k;
    memcpy(&two_k, &bits, sizeof two_k);
    return u < -87.0f ? 0.0f : p * two_k;
}

#endif
