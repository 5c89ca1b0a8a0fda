/* IEEE 754 half precision (binary16) to float: exact for every half, subnormals, infinities and
 * NaNs included. The model files store their weights in it (safetensors F16), and matmul's
 * portable kernel reads weights held in it (matmul.h). */
#ifndef LINGEN_HALF_H
#define LINGEN_HALF_H
#include <stdint.h>
#include <string.h>

static inline float half_to_float(uint16_t h) {
    uint32_t sign = (uint32_t)(h & 0x8000) << 16, exp = (h >> 10) & 0x1f, man = h & 0x3ff, bits;
    if (exp == 0x1f) bits = sign | 0x7f800000u | man << 13;            /* inf, nan (payload kept) */
    else if (exp) bits = sign | (exp + 127 - 15) << 23 | man << 13;     /* normal: rebias exponent */
    else {                                                              /* zero, subnormal: man * 2^-24 */
        float f = (float)man * 0x1p-24f;                                /* exact in float32 */
        return sign ? -f : f;
    }
    float f;
    memcpy(&f, &bits, 4);
    return f;
}

/* float to bfloat16 (the top 16 bits of a float), rounded to nearest even, as the processors'
 * vcvtne2ps2bf16 does it: subnormals flushed to zero (its DAZ/FTZ), NaNs kept NaNs. */
static inline uint16_t float_to_bf16(float f) {
    uint32_t b;
    memcpy(&b, &f, 4);
    if ((b & 0x7f800000u) == 0) return (uint16_t)((b >> 16) & 0x8000);        /* zero, subnormal */
    if ((b & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((b >> 16) | 0x40); /* NaN stays NaN */
    return (uint16_t)((b + 0x7fffu + ((b >> 16) & 1)) >> 16);
}

static inline float bf16_to_float(uint16_t h) {
    uint32_t b = (uint32_t)h << 16;
    float f;
    memcpy(&f, &b, 4);
    return f;
}
#endif
