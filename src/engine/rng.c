/* PCG32 (M. O'Neill, "PCG: A Family of Simple Fast Space-Efficient Statistically Good
 * Algorithms for Random Number Generation", 2014): 64-bit LCG state, 32-bit permuted output. */
#include "rng.h"

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

uint32_t rng_u32(Rng *r) { return pcg32_next(r); }

double rng_uniform(Rng *r) { return pcg32_uniform(r); }
