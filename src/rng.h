/* Seeded random numbers, one independent stream per image index:
 * image k of a run depends only on (seed, k), never on the batch it was drawn in. */
#ifndef LINGEN_RNG_H
#define LINGEN_RNG_H
#include <stdint.h>

typedef struct { uint64_t state, inc; } Rng;   /* PCG32 */

void     rng_init(Rng *r, uint64_t seed, uint64_t stream);
uint32_t rng_u32(Rng *r);
double   rng_uniform(Rng *r);       /* in the open interval (0, 1) */
#endif
