/* GPU sampling speed of lingen's RNN step: images/s at each batch from the time of a few hundred
 * steps (a step is one CUDA graph replay: every layer, the head and the sampler), the state-
 * traffic limit at that batch, and the latency of a whole image at batch 1.
 * Usage: bench_cuda MODEL BATCH... [--steps N] [--tf32] [--image]
 *   --tf32: also time cuBLAS with TF32 tensor cores (not the engine's exact FP32: a bound only)
 *   --image: also time one whole image at batch 1 through generate() (sample --device cuda)
 * Output, one line per batch: "lingen-cuda MODEL batch B: X images/s (Y ms/step) ...". */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cuda/lingen_cuda.h"
#include "engine/engine.h"
#include "engine/generate.h"
#include "cuda/gpu_model.h"

int main(int argc, char **argv) {
    if (argc < 3) { fprintf(stderr, "usage: bench_cuda MODEL BATCH... [--steps N] [--tf32] [--image]\n"); return 2; }
    int steps = 300, tf32 = 0, image = 0, nb = 0, batches[32];
    for (int i = 2; i < argc; i++) {
        if (!strcmp(argv[i], "--steps") && i + 1 < argc) steps = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--tf32")) tf32 = 1;
        else if (!strcmp(argv[i], "--image")) image = 1;
        else if (nb < 32 && atoi(argv[i]) > 0) batches[nb++] = atoi(argv[i]);
        else { fprintf(stderr, "bench_cuda: bad argument '%s'\n", argv[i]); return 2; }
    }
    Model m;
    Err e;
    if (model_load_with(&m, argv[1], NULL, MODEL_FILE_WEIGHTS, &e)) { fprintf(stderr, "bench_cuda: %s\n", e.msg); return 1; }
    if (cuda_probe(&e)) { fprintf(stderr, "bench_cuda: %s\n", e.msg); return 1; }
    GpuModel g;
    if (gpu_model_init(&g, &m, &e)) { fprintf(stderr, "bench_cuda: %s\n", e.msg); return 1; }
    const Config *c = &m.cfg;
    int N = c->seq_len, rc = 0;
    /* bytes of S and z read and written per image per step, against the memory's bandwidth as
     * a 1 GiB device-to-device copy measures it: the state-traffic limit of a step */
    double state = 2.0 * model_state_bytes(c, N), bandwidth = 0;
    if (cuda_copy_bandwidth((size_t)1 << 30, &bandwidth, &e)) { fprintf(stderr, "bench_cuda: %s\n", e.msg); return 1; }
    printf("lingen-cuda copy bandwidth %.0f GB/s (read + write, 1 GiB device to device)\n", bandwidth / 1e9);
    for (int i = 0; i < nb; i++) {
        for (int fast = 0; fast <= tf32; fast++) {
            double sec;
            if (cuda_bench_step(&g, batches[i], steps, fast, &sec, &e)) {
                printf("lingen-cuda %s batch %d%s: failed: %s\n", argv[1], batches[i], fast ? " tf32" : "", e.msg);
                rc = 1;
                continue;
            }
            double ips = batches[i] / (sec * N);
            double limit = c->attention == ATTN_LINEAR ? bandwidth / (state * N) : 0;
            printf("lingen-cuda %s batch %d%s: %.1f images/s (%.3f ms/step)", argv[1], batches[i], fast ? " TF32" : " FP32",
                   ips, sec * 1e3);
            if (limit > 0) printf(", state-traffic limit %.0f images/s (%.0f%% of it)", limit, 100 * ips / limit);
            printf("\n");
            fflush(stdout);
        }
    }
    if (image) {   /* a whole image at batch 1: plain launches, programmatic dependents, one kernel a step */
        static const char *const ways[] = {NULL, "LINGEN_CUDA_PDL", "LINGEN_CUDA_FUSED"};   /* each alone */
        unsigned char *img = xcalloc(1, N);
        GenOptions o = {.device = DEVICE_CUDA, .seed = 1, .batch = 1};
        double plain = 0, barrier = 0;
        if (cuda_barrier_seconds(&barrier, &e) == 0)
            printf("lingen-cuda grid barrier of the fused step (a block an SM): %.2f us\n", barrier * 1e6);
        for (int k = 0; k < 3; k++) {
            setenv("LINGEN_CUDA_PDL", "0", 1);
            setenv("LINGEN_CUDA_FUSED", "0", 1);
            if (ways[k]) setenv(ways[k], "1", 1);
            generate(&m, img, 1, &o, &e);   /* warm: the first run also loads the kernels */
            double t0 = now_seconds();
            int done = generate(&m, img, 1, &o, &e);
            double s = now_seconds() - t0;
            char with[64] = "";
            if (ways[k]) snprintf(with, sizeof with, " with %s=1", ways[k]);
            if (done != 1) {
                printf("lingen-cuda %s batch 1 whole image%s: failed: %s\n", argv[1], with, e.msg);
                rc = 1;
                continue;
            }
            printf("lingen-cuda %s batch 1 whole image%s: %.3f s (%d steps, %.1f us/step, weights upload and graph "
                   "capture included)", argv[1], with, s, N, s / N * 1e6);
            if (k > 0 && plain > 0) printf(", %.2fx the plain launches", plain / s);
            printf("\n");
            if (k == 0) plain = s;
        }
        unsetenv("LINGEN_CUDA_PDL");
        unsetenv("LINGEN_CUDA_FUSED");
        free(img);
    }
    gpu_model_free(&g);
    model_free(&m);
    return rc;
}
