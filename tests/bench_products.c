/* A sampling step's products alone, timed: where a kernel loses time, without the attention,
 * the residuals or the draws around it (make bench-products; tools/pack_remote.sh packs
 * it for another machine).
 *
 *     bench_products [MODEL [ROWS [THREADS [REPS]]]]   (models/mnist.bin, 64, every core, 20)
 *
 * For each layer the step's four products (qkv, out, ff1 with the activation and its outputs
 * rounded, ff2) on inputs already rounded to bfloat16, as transformer.c calls them: first over
 * every layer in turn (the weights stream from memory, as in a step), then over layer 0 alone
 * (its weights stay in the caches), then each product by itself, and last a parallel loop of
 * empty items (what a loop's start and end cost). A product runs on the kernel a step of ROWS
 * images takes (transformer_kernel: 8-bit weights, AMX tiles, AVX512-BF16, float32). */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>

#include "cli/commands.h"
#include "kernels/matmul.h"
#include "engine/model.h"
#include "kernels/product.h"
#include "kernels/threads.h"
#include "engine/transformer.h"
#include "io/util.h"

typedef struct { const char *name; Kernel k; Packed W; const float *b; int n_in, n_out, act; } Product;

/* The layer's products on the kernels a step of `rows` images takes (transformer_kernel). */
static void layer_products(const Model *m, int l, int rows, Product p[4]) {
    const LayerWeights *w = &m->layers[l];
    int d = m->cfg.d, ff = m->cfg.d_ff, act = m->cfg.gelu ? MATMUL_GELU : MATMUL_RELU;
    p[0] = (Product){"qkv", transformer_kernel(m, w->qkv_w, rows, 1, 0), w->qkv_w, w->qkv_b, d, 3 * d, MATMUL_NONE};
    p[1] = (Product){"out", transformer_kernel(m, w->out_w, rows, 1, 0), w->out_w, w->out_b, d, d, MATMUL_NONE};
    p[2] = (Product){"ff1", transformer_kernel(m, w->ff1_w, rows, 1, 0), w->ff1_w, w->ff1_b, d, ff, act};
    p[3] = (Product){"ff2", transformer_kernel(m, w->ff2_w, rows, 1, 0), w->ff2_w, w->ff2_b, ff, d, MATMUL_NONE};
}

static float *x, *out;
static uint16_t *x16, *out16;

static void run(const Product *p, int rows) {   /* ff1's outputs rounded for ff2, as in a step */
    product(p->k, out, x, p->W, p->b, rows, p->n_in, p->n_out, p->act, (Rounded){x16, p->act ? out16 : NULL});
}

static void nothing(void *ctx, int item, int thread) { (void)ctx, (void)item, (void)thread; }

int main(int argc, char **argv) {
    const char *path = argc > 1 ? argv[1] : "models/mnist.bin";
    int rows = argc > 2 ? atoi(argv[2]) : 64, threads = argc > 3 ? atoi(argv[3]) : 0, reps = argc > 4 ? atoi(argv[4]) : 20;
    if (argc > 5 || rows < 1 || rows > 4096 || threads < 0 || reps < 1) {
        fprintf(stderr, "usage: bench_products [MODEL [ROWS 1-4096 [THREADS [REPS]]]]\n");
        return 2;
    }
    Model m;
    Err e;
    if (model_load(&m, path, &e)) { fprintf(stderr, "bench_products: %s\n", e.msg); return 1; }
    const Config *c = &m.cfg;
    if (c->n_layers < 1) { fprintf(stderr, "bench_products: %s has no layers\n", path); return 1; }
    threads_set(threads);
    cli_stop_blas_threads();   /* as lingen does: OpenBLAS's idle threads would spin beside ours */
    size_t wide = (size_t)MATMUL_ROUNDED_ROWS(rows) * (c->d_ff > 3 * c->d ? c->d_ff : 3 * c->d);
    /* on cache lines, as a step's buffers are */
    x = try_calloc_lines(wide, sizeof *x, "inputs", &e);
    out = x ? try_calloc_lines(wide, sizeof *out, "outputs", &e) : NULL;
    x16 = out ? try_calloc_lines(wide, sizeof *x16, "inputs", &e) : NULL;
    out16 = x16 ? try_calloc_lines(wide, sizeof *out16, "outputs", &e) : NULL;
    if (!out16) { fprintf(stderr, "bench_products: %s\n", e.msg); return 1; }
    for (size_t i = 0; i < wide; i++) x[i] = (float)((i * 2654435761u) % 1000) / 1000.0f - 0.5f;
    matmul_round_bf16(x16, x, (int)((size_t)rows * (c->d_ff > c->d ? c->d_ff : c->d)));
    double flops_layer = 2.0 * rows * (4.0 * c->d * c->d + 2.0 * c->d * c->d_ff);
    printf("%s: %d rows, %d threads, %s products\n", path, rows, threads_count(),
           plan_kernel_name(transformer_products(&m, rows, 1, 0)));
    for (int hot = 0; hot <= 1; hot++) {
        double t = 0;
        for (int pass = 0; pass < 2; pass++) {   /* the first warms up */
            double t0 = now_seconds();
            for (int r = 0; r < reps; r++)
                for (int l = 0; l < c->n_layers; l++) {
                    Product p[4];
                    layer_products(&m, hot ? 0 : l, rows, p);
                    for (int k = 0; k < 4; k++) run(&p[k], rows);
                }
            t = now_seconds() - t0;
        }
        printf("%-28s %9.1f us a step, %6.0f GFLOP/s\n", hot ? "layer 0 again and again:" : "every layer in turn:",
               1e6 * t / reps, flops_layer * c->n_layers * reps / t / 1e9);
    }
    Product p[4];
    layer_products(&m, 0, rows, p);
    for (int k = 0; k < 4; k++) {
        int n = reps * c->n_layers;
        for (int r = 0; r < 5; r++) run(&p[k], rows);
        double t0 = now_seconds();
        for (int r = 0; r < n; r++) run(&p[k], rows);
        double t = now_seconds() - t0;
        printf("  %s %dx%dx%d: %8.2f us, %6.0f GFLOP/s\n", p[k].name, rows, p[k].n_in, p[k].n_out, 1e6 * t / n,
               2.0 * rows * p[k].n_in * p[k].n_out * n / t / 1e9);
    }
    /* what a parallel loop costs in itself: items that do nothing, every thread taking part */
    threads_adapt(0);
    int items = 2 * threads_count(), n = 20000;
    for (int pass = 0; pass < 2; pass++) {
        double t0 = now_seconds();
        for (int r = 0; r < n; r++) parallel_for(items, nothing, NULL, 1.0);
        if (pass) printf("  an empty loop of %d items: %.2f us\n", items, 1e6 * (now_seconds() - t0) / n);
    }
    free_lines(x), free_lines(out), free_lines(x16), free_lines(out16);
    model_free(&m);
    return 0;
}
