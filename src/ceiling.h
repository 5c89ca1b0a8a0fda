/* The compute ceiling that speeds are measured against: what this machine's sgemm does now,
 * with the threads OpenBLAS was given (a large square product, 1024^3). */
#ifndef LINGEN_CEILING_H
#define LINGEN_CEILING_H
double sgemm_gflops(void);
/* Measure sgemm now and print, after `label`, the GFLOP/s a run of images_per_s reached
 * (flops_per_image of useful work each) as a fraction of it. Returns sgemm's GFLOP/s. */
double ceiling_report(const char *label, double flops_per_image, double images_per_s);
#endif
