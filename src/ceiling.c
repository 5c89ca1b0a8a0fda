#include "ceiling.h"

#include <cblas.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>

#include "util.h"

#define SGEMM_N 1024
#define WINDOWS 4        /* timed windows ... */
#define WINDOW_SECONDS 0.4 /* ... of at least this long; the best one is the ceiling, since noise
                            * from other tenants of a shared machine only ever slows it down */

double sgemm_gflops(void) {
    int before = openblas_get_num_threads();
    openblas_set_num_threads(omp_get_max_threads());   /* the ceiling: OpenBLAS on every thread lingen uses */
    size_t n = SGEMM_N;
    float *a = xmalloc(3 * n * n * sizeof(float)), *b = a + n * n, *c = b + n * n;
    for (size_t i = 0; i < 2 * n * n; i++) a[i] = (float)(i % 7) * 0.1f;   /* not zeros: they can run faster */
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, n, n, 1, a, n, b, n, 0, c, n);   /* warm-up */
    double best = 0;
    for (int w = 0; w < WINDOWS; w++) {
        int reps = 0;
        double t0 = now_seconds(), secs;
        do {
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, n, n, 1, a, n, b, n, 0, c, n);
            reps++;
        } while ((secs = now_seconds() - t0) < WINDOW_SECONDS || reps < 2);
        double gflops = 2.0 * n * n * n * reps / secs / 1e9;
        if (gflops > best) best = gflops;
    }
    free(a);
    openblas_set_num_threads(before);
    return best;
}

double ceiling_report(const char *label, double flops_per_image, double images_per_s) {
    double useful = flops_per_image * images_per_s / 1e9, peak = sgemm_gflops();
    printf("%s%.1f GFLOP/s = %.0f%% of sgemm's %.1f GFLOP/s (1024^3, same threads, best of 4 windows just after)\n",
           label, useful, 100 * useful / peak, peak);
    return peak;
}
