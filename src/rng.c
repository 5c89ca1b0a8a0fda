/* PCG32 (M. O'Neill, "PCG: A Family of Simple Fast Space-Efficient Statistically Good
 * Algorithms for Random Number Generation", 2014): 64-bit LCG state, 32-bit permuted output. */
#include "rng.h"

#define PCG_MULT 6364136223846793005ULL

/* splitmix64's finalizer (Steele, Lea, Flood 2014): a bijection that scatters nearby inputs. */
static uint64_t mix64(uint64_t z) {
    z += 0x9e3779b97f4a7c15ULL;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

/* The stream picks the LCG increment (PCG's stream selector). Raw increments 2k+1 and 2k+3
 * give visibly related sequences, and seeds s and s+1 start at neighbouring states, so both
 * go through mix64 first; the state depends on seed and stream together. */
void rng_init(Rng *r, uint64_t seed, uint64_t stream) {
    uint64_t hs = mix64(stream ^ 0x6a09e667f3bcc909ULL);
    r->state = 0;
    r->inc = (hs << 1) | 1u;                 /* must be odd */
    rng_u32(r);
    r->state += mix64(seed ^ mix64(hs));
    rng_u32(r);
}

uint32_t rng_u32(Rng *r) {
    uint64_t old = r->state;
    r->state = old * PCG_MULT + r->inc;
    uint32_t xorshifted = (uint32_t)(((old >> 18) ^ old) >> 27);
    uint32_t rot = (uint32_t)(old >> 59);
    return (xorshifted >> rot) | (xorshifted << ((32 - rot) & 31));
}

/* k / 2^53 for a 53-bit k != 0: the values 2^-53 .. 1 - 2^-53 on an exact grid, so the
 * interval is open, symmetric (u and 1 - u are both on the grid, and 1 - u is exact), and
 * log(u) and log(1 - u) are always finite. k = 0 (probability 2^-53) is redrawn. */
double rng_uniform(Rng *r) {
    for (;;) {
        uint64_t hi = rng_u32(r);            /* two statements: the draw order is fixed */
        uint64_t lo = rng_u32(r);
        uint64_t k = (hi << 21) | (lo >> 11);
        if (k) return (double)k * 0x1p-53;
    }
}
