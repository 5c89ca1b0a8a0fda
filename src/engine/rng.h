/* Seeded random numbers, one independent stream per image index:
 * image k of a run depends only on (seed, k), never on the batch it was drawn in. */
#ifndef LINGEN_RNG_H
#define LINGEN_RNG_H
#include <stdint.h>

typedef struct { uint64_t state, inc; } Rng;   /* PCG32 */

#ifdef __CUDACC__
#define LINGEN_HD __host__ __device__
#else
#define LINGEN_HD
#endif

#define PCG_MULT 6364136223846793005ULL

/* PCG32's step: 64-bit LCG state, 32-bit permuted output. */
static inline LINGEN_HD uint32_t pcg32_next(Rng *r) {
    uint64_t old = r->state;
    r->state = old * PCG_MULT + r->inc;
    uint32_t xorshifted = (uint32_t)(((old >> 18) ^ old) >> 27);
    uint32_t rot = (uint32_t)(old >> 59);
    return (xorshifted >> rot) | (xorshifted << ((32 - rot) & 31));
}

/* k / 2^53 for a 53-bit k != 0: the values 2^-53 .. 1 - 2^-53 on an exact grid, so the
 * interval is open, symmetric (u and 1 - u are both on the grid, and 1 - u is exact), and
 * log(u) and log(1 - u) are always finite. k = 0 (probability 2^-53) is redrawn. */
static inline LINGEN_HD double pcg32_uniform(Rng *r) {
    for (;;) {
        uint64_t hi = pcg32_next(r);         /* two statements: the draw order is fixed */
        uint64_t lo = pcg32_next(r);
        uint64_t k = (hi << 21) | (lo >> 11);
        if (k) return (double)k * 0x1p-53;
    }
}

void     rng_init(Rng *r, uint64_t seed, uint64_t stream);
uint32_t rng_u32(Rng *r);          /* pcg32_next */
double   rng_uniform(Rng *r);       /* in the open interval (0, 1): pcg32_uniform */
#endif
