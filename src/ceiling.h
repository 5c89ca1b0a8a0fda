/* The compute ceiling that speeds are measured against: what this machine's sgemm does now,
 * with the threads OpenBLAS was given (a large square product, 1024^3). */
#ifndef LINGEN_CEILING_H
#define LINGEN_CEILING_H
double sgemm_gflops(void);
#endif
