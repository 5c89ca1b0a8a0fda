/* The compute ceiling that speeds are measured against: the best a large sgemm (1024^3) does
 * now on the same threads and cores as the run. The product is split into items the way the
 * run's products are, on lingen's threads (threads.h), and done two ways: OpenBLAS's sgemm on
 * one thread per item, and lingen's own kernel (matmul.h); the faster one is the ceiling.
 * OpenBLAS's own threading is not used: it may pick other cores and counts, and on a processor
 * it does not know it falls back to slow kernels, which made a ceiling below the run itself. */
#ifndef LINGEN_CEILING_H
#define LINGEN_CEILING_H
#include <stddef.h>

#include "model.h"

typedef struct {
    double gflops;            /* the ceiling: the larger of the two */
    double state_gbs;         /* ceiling_report with a state: its in-place pass's GB/s, read + written */
    double bound_ips;         /* ... and the images/s the run could reach at most (ceiling_bound) */
    double openblas, lingen;  /* GFLOP/s of each way */
    int threads;
    const char *kernel;       /* lingen's: matmul.h's, "AVX512-BF16" (matmul.h), "AMX" or "AMX-BF16" (matmul_amx.h) */
} Ceiling;
/* The form of the run's products (transformer.c):
 *   CEILING_STEPS     sampling's steps, in bfloat16 where matmul_bf16_ready(): lingen's kernel is
 *                     the faster of matmul.h's float kernel and its bfloat16 one (twice the
 *                     multiply-adds per instruction), and where the processor has AMX, the
 *                     tiles' bfloat16 products;
 *   CEILING_PARALLEL  the parallel form, on AMX tiles where the model holds them: the faster of
 *                     matmul.h's and the tiles';
 *   CEILING_FLOAT32   float32 steps (evaluation's step form): matmul.h's float kernel. */
enum { CEILING_STEPS, CEILING_PARALLEL, CEILING_FLOAT32 };
Ceiling ceiling_measure(int form);

/* A sampling step also reads and writes its state, for a few FLOPs a float (the linear
 * attention's S and z, once a step): at batch 64 that is megabytes a step, more than the caches
 * keep, and its time is memory's, not the products'. */
typedef struct {
    double bytes_per_image;   /* read, and as many written, over one image */
    double flops_per_image;   /* of the run's FLOPs, those on the state */
    size_t resident;          /* the run's whole state (all its images'): the measured pass covers as much */
} StateTraffic;
/* Passes adding 1 to each of x[0 .. n) in place, spread over the threads in contiguous shares
 * as the attention spreads its state: GB/s read + written of the best window, and how many
 * passes ran in all (each float of x is then that many). */
typedef struct { double gbs; int passes; } StatePass;
StatePass ceiling_state_pass(float *x, size_t n);
/* The most images/s a run allows when its products run at gflops and its state moves at gbs,
 * the two one after the other as a step takes them (a layer's attention needs its qkv product,
 * the next product its output): one image's product FLOPs / gflops + its state bytes / gbs. */
double ceiling_bound(double flops_per_image, StateTraffic st, double gflops, double gbs);
/* A step's state traffic for `images` run at once: the linear attention's S, z; none (all zero)
 * for softmax, whose KV cache grows with the position. */
StateTraffic ceiling_state_traffic(const Config *c, long images);

/* Measure the ceiling now and print, after `label`, the GFLOP/s a run of images_per_s reached
 * (flops_per_image of arithmetic each, counted for the form that ran) as a fraction of it;
 * with a state (st.resident > 0), measure its pass too and print the bound it sets. */
Ceiling ceiling_report(const char *label, double flops_per_image, double images_per_s, int form, StateTraffic st);
#endif
