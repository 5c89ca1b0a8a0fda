/* The compute ceiling that speeds are measured against: the best a large sgemm (1024^3) does
 * now on the same threads and cores as the run. The product is split into items the way the
 * run's products are, on lingen's threads (threads.h), and done two ways: OpenBLAS's sgemm on
 * one thread per item, and lingen's own kernel (matmul.h); the faster one is the ceiling.
 * OpenBLAS's own threading is not used: it may pick other cores and counts, and on a processor
 * it does not know it falls back to slow kernels, which made a ceiling below the run itself. */
#ifndef LINGEN_CEILING_H
#define LINGEN_CEILING_H
typedef struct {
    double gflops;            /* the ceiling: the larger of the two */
    double openblas, lingen;  /* GFLOP/s of each way */
    int threads;
    const char *kernel;       /* lingen's: matmul.h's, "AVX512-BF16" (matmul.h), "AMX" or "AMX-BF16" (matmul_amx.h) */
} Ceiling;
/* parallel_form: the run's products were the parallel form's, on AMX tiles where the model holds
 * them (transformer.c): lingen's kernel is the faster of matmul.h's and the tiles'. Otherwise
 * they were the steps', in bfloat16 where matmul_bf16_ready(): the faster of matmul.h's float
 * kernel and its bfloat16 one, which does twice the multiply-adds per instruction, and where
 * the processor has AMX, the tiles' bfloat16 products. */
Ceiling ceiling_measure(int parallel_form);
/* Measure the ceiling now and print, after `label`, the GFLOP/s a run of images_per_s reached
 * (flops_per_image of arithmetic each, counted for the form that ran) as a fraction of it. */
double ceiling_report(const char *label, double flops_per_image, double images_per_s, int parallel_form);   /* returns the ceiling */
#endif
