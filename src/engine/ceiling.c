#include "ceiling.h"

#include <cblas.h>
#include <stdio.h>
#include <stdlib.h>

#include "attention.h"
#include "kernels/matmul.h"
#include "kernels/matmul_amx.h"
#include "kernels/plan.h"
#include "kernels/product.h"
#include "kernels/threads.h"
#include "io/util.h"

#define SGEMM_N 1024
#define RB 128             /* OpenBLAS items: blocks of RB rows x CB columns of the product */
#define CB 256
#define WINDOWS 4          /* timed windows ... */
#define WINDOW_SECONDS 0.25 /* ... of at least this long; the best one counts, since noise
                            * from other tenants of a shared machine only ever slows it down */

typedef struct { const float *a, *b; float *c; } Blas;

static void blas_item(void *ctx, int item, int thread) {
    (void)thread;
    const Blas *q = ctx;
    size_t n = SGEMM_N, r = (size_t)(item / (SGEMM_N / CB)) * RB, col = (size_t)(item % (SGEMM_N / CB)) * CB;
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, RB, CB, n, 1, q->a + r * n, n, q->b + col, n, 0,
                q->c + r * n + col, n);
}

/* GFLOP/s of the best window of repeated 1024^3 products: OpenBLAS per item (own = 0, b the
 * matrix), or lingen's kernel on the packed weight W. */
static double best_gflops(int own, Kernel k, const float *a, const float *b, Packed W, const float *bias, float *c) {
    size_t n = SGEMM_N;
    Blas q = {a, b, c};
    double best = 0;
    for (int w = -1; w < WINDOWS; w++) {   /* window -1: warm-up */
        int reps = 0;
        double t0 = now_seconds(), secs;
        do {
            if (own) product(k, c, a, W, bias, n, n, n, MATMUL_NONE, (Rounded){NULL, NULL});
            else parallel_for((SGEMM_N / RB) * (SGEMM_N / CB), blas_item, &q, 0);
            reps++;
        } while ((secs = now_seconds() - t0) < (w < 0 ? 0.05 : WINDOW_SECONDS) || reps < 2);
        double gflops = 2.0 * n * n * n * reps / secs / 1e9;
        if (w >= 0 && gflops > best) best = gflops;
    }
    return best;
}

/* n halves (or bfloat16) of a few values, none zero: weights for a kernel's 1024^3 product. */
static uint16_t *some_values(size_t n, uint16_t first, uint16_t step) {
    uint16_t *h = xmalloc(n * sizeof *h);
    for (size_t i = 0; i < n; i++) h[i] = (uint16_t)(first + i % 7 * step);
    return h;
}

/* lingen's kernel: the faster of the two */
static void faster(Ceiling *r, double gflops, const char *kernel) {
    if (gflops > r->lingen) r->lingen = gflops, r->kernel = kernel;
}

Ceiling ceiling_measure(int form) {
    int before = openblas_get_num_threads();   /* 1 in lingen (cli.c); a library caller may differ */
    if (before != 1) openblas_set_num_threads(1);   /* one per item: the threads are lingen's (setting
                                                     * the count, even to 1, can start OpenBLAS's own) */
    size_t n = SGEMM_N, packed = matmul_packed_values(n, n);
    float *a = xmalloc((2 * n * n + packed + n) * sizeof(float)), *b = a + n * n, *c = b + packed, *bias = c + n * n;
    for (size_t i = 0; i < n * n + packed; i++) a[i] = (float)(i % 7) * 0.1f;   /* not zeros: they can run faster */
    for (size_t i = 0; i < n; i++) bias[i] = 0;
    Ceiling r = {.threads = threads_count(), .kernel = matmul_kernel_name()};
    r.openblas = best_gflops(0, KERNEL_F32, a, b, (Packed){0}, NULL, c);
    r.lingen = best_gflops(1, KERNEL_F32, a, NULL, (Packed){b, 0, NULL, NULL, NULL}, bias, c);   /* b read as packed weights: any values do */
    Plan plan = plan_default();
    Copies all = plan_copies(&plan, 1, 0);   /* a float16 weight's: what a model of the files holds */
    if (form == CEILING_PARALLEL && plan_kernel(&plan, all, 2, 1, 0) == KERNEL_AMX) {   /* the parallel form's products ran on AMX tiles */
        uint16_t *h = some_values(matmul_amx_values(n, n), 0x2c00, 0x100);
        faster(&r, best_gflops(1, KERNEL_AMX, a, NULL, (Packed){NULL, 1, h, NULL, NULL}, bias, c), "AMX");
        free(h);
    }
    if (form == CEILING_STEPS && all.bf16) {   /* the steps' products ran in bfloat16 (matmul.h) */
        uint16_t *h = some_values(matmul_bf16_values(n, n), 0x3d00, 0x10);
        faster(&r, best_gflops(1, KERNEL_BF16, a, NULL, (Packed){b, 0, NULL, h, NULL}, bias, c), "AVX512-BF16");
        if (all.amx) {   /* and on AMX tiles, where the processor has them */
            uint16_t *t = some_values(matmul_amx_values(n, n), 0x3d00, 0x10);
            faster(&r, best_gflops(1, KERNEL_AMX_BF16, a, NULL, (Packed){b, 0, t, h, NULL}, bias, c), "AMX-BF16");
            free(t);
        }
        free(h);
    }
    r.gflops = r.openblas > r.lingen ? r.openblas : r.lingen;
    free(a);
    if (before != 1) openblas_set_num_threads(before);
    return r;
}

typedef struct { float *x; size_t n; int items; } Pass;

static void pass_item(void *ctx, int item, int thread) {
    (void)thread;
    const Pass *p = ctx;
    size_t i0 = p->n * item / p->items, i1 = p->n * (item + 1) / p->items;
    float *restrict x = p->x;
    #pragma omp simd
    for (size_t i = i0; i < i1; i++) x[i] += 1.0f;
}

StatePass ceiling_state_pass(float *x, size_t n) {
    Pass p = {x, n, 8 * threads_count()};   /* as linear_attention: about 8 items a thread */
    StatePass r = {0, 0};
    for (int w = -1; w < WINDOWS; w++) {   /* window -1: warm-up (and the pages touched) */
        int reps = 0;
        double t0 = now_seconds(), secs;
        do {
            parallel_for(p.items, pass_item, &p, (double)n);
            reps++;
        } while ((secs = now_seconds() - t0) < (w < 0 ? 0.05 : WINDOW_SECONDS) || reps < 2);
        double gbs = 2.0 * n * sizeof *x * reps / secs / 1e9;
        if (w >= 0 && gbs > r.gbs) r.gbs = gbs;
        r.passes += reps;
    }
    return r;
}

double ceiling_bound(double flops_per_image, StateTraffic st, double gflops, double gbs) {
    double products = (flops_per_image - st.flops_per_image) / (gflops * 1e9);
    double state = 2 * st.bytes_per_image / (gbs * 1e9), arith = st.flops_per_image / (gflops * 1e9);
    return 1 / (products + (state > arith ? state : arith));
}

StateTraffic ceiling_state_traffic(const Config *c, long images) {
    StateTraffic st = {0, 0, 0};
    if (c->attention != ATTN_LINEAR) return st;
    size_t bytes = model_state_bytes(c, 0);
    st.bytes_per_image = (double)c->seq_len * bytes;
    st.flops_per_image = c->n_layers * linear_attention_flops(c, 1);
    st.resident = (size_t)images * bytes;
    return st;
}

Ceiling ceiling_report(const char *label, double flops_per_image, double images_per_s, int form, StateTraffic st) {
    double useful = flops_per_image * images_per_s / 1e9;
    Ceiling p = ceiling_measure(form);
    printf("%s%.1f GFLOP/s = %.0f%% of sgemm's %.1f GFLOP/s (1024^3 on the same %d thread%s, just after: "
           "OpenBLAS %.1f, lingen's %s kernel %.1f, best of %d windows)\n",
           label, useful, 100 * useful / p.gflops, p.gflops, p.threads, p.threads == 1 ? "" : "s", p.openblas,
           p.kernel, p.lingen, WINDOWS);
    if (useful > p.gflops)
        printf("%sabove 100%%: the run was faster than the ceiling measured just after it; the machine's "
               "load changed between the two, or the ceiling is wrong here\n", label);
    if (st.resident >= sizeof(float)) {
        size_t n = st.resident / sizeof(float);
        float *x = xcalloc(n, sizeof *x);
        p.state_gbs = ceiling_state_pass(x, n).gbs;
        free(x);
        p.bound_ips = ceiling_bound(flops_per_image, st, p.gflops, p.state_gbs);
        double bound = flops_per_image * p.bound_ips / 1e9;
        printf("%sthe state, %.1f MB for the run's images, read and written once a step: %.1f GB/s in place on "
               "the same threads (best of %d windows)\n",
               label, st.resident / 1e6, p.state_gbs, WINDOWS);
        printf("%swith the products at the ceiling's rate and the state at that, one after the other as a step "
               "takes them: at most %.3g images/s = %.0f%% of the ceiling; the run reached %.0f%% of that bound\n",
               label, p.bound_ips, 100 * bound / p.gflops, 100 * images_per_s / p.bound_ips);
    }
    return p;
}
