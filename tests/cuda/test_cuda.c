/* The CUDA backend against the CPU engine and the PyTorch reference, on one GPU:
 *   1. head outputs to 1e-4 in step form, parallel form, prefill-then-steps and mixed pieces:
 *      the golden fixtures (scripts/make_fixtures.py) against the reference and the CPU, and
 *      the four shipped models on two test images against the CPU (MODEL_SHARE);
 *   2. bits/dim of test images (parallel and step form) equal to the CPU's to 1e-4, each image
 *      to 3e-4 or as close as the CPU's own two forms (IMAGE_TOL): 100 MNIST, 10 CIFAR-10 images;
 *   3. the GPU sampler: the same draws as dmol_sample from the same streams, and a chi-square
 *      test of its draws against dmol_pmf (with a control that the test rejects a wrong PMF);
 *   4. generate() and a completion on the GPU against the CPU's float32 products: the same
 *      images, byte for byte;
 *   5. bad requests fail with a message, and the start-up canary refuses a weight laid out
 *      wrongly (and what it costs);
 *   6. LINGEN_CUDA_PDL=1 and LINGEN_CUDA_FUSED=1 draw the same images.
 * The CPU side runs its products in float32 throughout (plan_set_precision).
 * Plain C (no cmocka): it also runs from a packed folder. One line per check, "ok" or "FAIL"
 * with its numbers; exit status 1 if any check failed.
 * Usage: test_cuda [ROOT]   ROOT holds tests/fixtures/ and models/ (default .); data from
 * $LINGEN_DATA (MNIST's first 100 and CIFAR-10's first 10 test images are enough). */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/commands.h"
#include "cuda/lingen_cuda.h"
#include "io/dataset.h"
#include "engine/engine.h"
#include "engine/dmol.h"
#include "engine/dmol_draw.h"
#include "engine/evaluate.h"
#include "engine/generate.h"
#include "cuda/gpu_model.h"
#include "io/safetensors.h"
#include "engine/transformer.h"

#define TOL 1e-4
/* A trained model has positions where float32 itself is ill-conditioned (a softmax model's
 * peaked attention over large scores): there the CPU's own step and parallel forms differ by
 * more than TOL, and so does float32 PyTorch from float64. A shipped model's head outputs pass
 * when no more values are beyond TOL (relative to max(|x|, 1)) of the CPU's than 1 in
 * MODEL_SHARE or SHARE_FACTOR times as many as the CPU's step form has from its parallel form,
 * and none is farther than SPREAD_FACTOR times the CPU's own step-to-parallel spread (the GPU's
 * products split their inputs into two halves, 2^-22 of |x| against float32's 2^-24). A weight
 * laid out wrongly moves nearly every value, and the golden fixtures hold every form to TOL. */
#define MODEL_SHARE 1000
#define SHARE_FACTOR 2
#define SPREAD_FACTOR 16
/* One image's bits/dim: the GPU's within IMAGE_TOL of the CPU's, or, where float32 itself moves
 * an image's figure more (the sharpest model, cifar-softmax.bin, whose CPU step and parallel
 * forms part by more than IMAGE_TOL on some images), within IMAGE_SPREAD_FACTOR times the CPU's
 * own step-to-parallel difference on the images beyond IMAGE_TOL, computed in the same run when
 * needed (a softmax step form reads its whole KV cache at every position: those images only).
 * TF32 products, a real loss of precision, move that model's figures farther still. */
#define IMAGE_TOL 3e-4
#define IMAGE_SPREAD_FACTOR 3

static int n_failed, n_checks;
static const char *root = ".";

static void check(int pass, const char *name, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void check(int pass, const char *name, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    printf("%-4s %-48s ", pass ? "ok" : "FAIL", name);
    vprintf(fmt, ap);
    printf("\n");
    fflush(stdout);
    va_end(ap);
    n_checks++;
    if (!pass) n_failed++;
}

static void path_of(char *buf, size_t n, const char *rel) { snprintf(buf, n, "%s/%s", root, rel); }

/* ---------------------------------------------------------------- 1. golden fixtures */

typedef struct {
    Model m;
    int B, T, K;
    int *tokens;   /* [B][T] */
    float *ref;    /* [B][T][K] */
} Golden;

static int golden_load(Golden *G, const char *name) {
    char path[4096], rel[512];
    Err e;
    SafeTensors g;
    snprintf(rel, sizeof rel, "tests/fixtures/%s.bin", name);
    path_of(path, sizeof path, rel);
    if (model_load_with(&G->m, path, NULL, MODEL_FILE_WEIGHTS, &e)) { check(0, name, "%s", e.msg); return -1; }
    snprintf(rel, sizeof rel, "tests/fixtures/%s.golden", name);
    path_of(path, sizeof path, rel);
    if (st_open(&g, path, &e)) { check(0, name, "%s", e.msg); model_free(&G->m); return -1; }
    const StTensor *tok = st_find(&g, "tokens"), *out = st_find(&g, "out");
    if (!tok || !out) { check(0, name, "golden file without tokens/out"); st_close(&g); model_free(&G->m); return -1; }
    G->B = (int)tok->shape[0];
    G->T = (int)tok->shape[1];
    G->K = (int)out->shape[2];
    float *tf = xmalloc(st_numel(tok) * sizeof(float));
    st_to_f32(tok, tf);
    G->tokens = xmalloc(st_numel(tok) * sizeof(int));
    for (size_t i = 0; i < st_numel(tok); i++) G->tokens[i] = (int)tf[i];
    free(tf);
    G->ref = xmalloc(st_numel(out) * sizeof(float));
    st_to_f32(out, G->ref);
    st_close(&g);
    return 0;
}

static void golden_free(Golden *G) {
    free(G->tokens);
    free(G->ref);
    model_free(&G->m);
}

/* Max |a - b| over n values; NaN anywhere makes it NaN (so it fails). */
static double max_diff(const float *a, const float *b, size_t n) {
    double w = 0;
    for (size_t i = 0; i < n; i++) {
        double d = fabs((double)a[i] - b[i]);
        if (!(d <= w)) w = d;
    }
    return w;
}

/* Max |a - b| over n doubles; NaN anywhere makes it NaN (so it fails). */
static double max_abs_diff(const double *a, const double *b, int n) {
    double w = 0;
    for (int i = 0; i < n; i++) {
        double d = fabs(a[i] - b[i]);
        if (!(d <= w)) w = d;
    }
    return w;
}

/* The values of a farther from b's than tol relative to max(|b|, 1). */
static size_t n_beyond(const float *a, const float *b, size_t n, double tol) {
    size_t k = 0;
    for (size_t i = 0; i < n; i++)
        if (!(fabs((double)a[i] - b[i]) <= tol * fmax(1, fabs((double)b[i])))) k++;
    return k;
}

/* Where got and want [B][T][K] differ most: "image b, position t, output k (a log-scale): got,
 * want", and the same for the CPU's step form (cpu1) at that place, into buf. */
static void worst_place(const float *got, const float *want, const float *cpu1, int B, int T, int K, char *buf,
                        size_t n) {
    size_t at = 0;
    double w = -1;
    for (size_t i = 0; i < (size_t)B * T * K; i++) {
        double d = fabs((double)got[i] - want[i]);
        if (!(d <= w)) w = d, at = i;
    }
    int k = (int)(at % K), t = (int)(at / K % T), b = (int)(at / K / T);
    snprintf(buf, n, "; worst at image %d, position %d, output %d%s: GPU %.7g, CPU %.7g, CPU step form %.7g", b, t, k,
             k >= 2 * K / 3 ? " (a log-scale)" : "", got[at], want[at], cpu1 ? cpu1[at] : NAN);
}

/* The GPU over the whole sequence in pieces of the given lengths (cycled); all head outputs in
 * got [B][T][K]. Returns 0, or -1 with the error printed. */
static int gpu_pieces(const Golden *G, const int *pieces, int n_pieces, float *got) {
    int maxT = 0;
    for (int i = 0; i < n_pieces; i++) maxT = pieces[i] > maxT ? pieces[i] : maxT;
    if (maxT > G->T) maxT = G->T;
    Err e;
    Engine *en = engine_new(&G->m, DEVICE_CUDA, G->B, maxT, 0, &e);
    if (!en) { printf("     %s\n", e.msg); return -1; }
    int *tok = xmalloc((size_t)G->B * maxT * sizeof(int));
    int rc = 0;
    for (int t = 0, p = 0; t < G->T; p++) {
        int T = pieces[p % n_pieces];
        if (t + T > G->T) T = G->T - t;
        for (int b = 0; b < G->B; b++) memcpy(tok + b * T, G->tokens + (size_t)b * G->T + t, T * sizeof(int));
        if (engine_forward(en, tok, G->B, T, &e)) { printf("     %s\n", e.msg); rc = -1; break; }
        for (int b = 0; b < G->B; b++)
            memcpy(got + ((size_t)b * G->T + t) * G->K, en->out + (size_t)b * T * G->K, (size_t)T * G->K * sizeof(float));
        t += T;
    }
    free(tok);
    engine_free(en);
    return rc;
}

/* G's head outputs on the GPU in four forms against the CPU's parallel form (and G->ref, the
 * reference's, where given). */
static void check_forms(const Golden *Gp, const char *name) {
    const Golden G = *Gp;
    size_t n = (size_t)G.B * G.T * G.K;
    float *got = xcalloc(n, sizeof(float)), *cpu = xcalloc(n, sizeof(float));
    /* the CPU, parallel form, for the GPU-CPU difference */
    RunState s;
    Err e;
    if (runstate_init(&s, &G.m.cfg, G.B, G.T, &e) == 0) {
        s.exact = 1;
        transformer_forward(&G.m, &s, G.tokens, G.B, G.T);
        memcpy(cpu, s.out, n * sizeof(float));
        runstate_free(&s);
    }
    /* the CPU's step form too, to tell a GPU difference from a CPU one */
    float *cpu1 = xcalloc(n, sizeof(float));
    if (runstate_init(&s, &G.m.cfg, G.B, 1, &e) == 0) {
        s.exact = 1;
        int *tok = xmalloc((size_t)G.B * sizeof(int));
        for (int t = 0; t < G.T; t++) {
            for (int b = 0; b < G.B; b++) tok[b] = G.tokens[(size_t)b * G.T + t];
            transformer_forward(&G.m, &s, tok, G.B, 1);
            for (int b = 0; b < G.B; b++)
                memcpy(cpu1 + ((size_t)b * G.T + t) * G.K, s.out + (size_t)b * G.K, G.K * sizeof(float));
        }
        free(tok);
        runstate_free(&s);
    }
    char cpu_forms[160];
    snprintf(cpu_forms, sizeof cpu_forms, "%s: the CPU's step form against its parallel form", name);
    double spread = max_diff(cpu1, cpu, n);
    size_t cpu_beyond = n_beyond(cpu1, cpu, n, TOL);
    if (G.ref) check(spread <= TOL, cpu_forms, "max |step - parallel| %.2e (tolerance %.0e)", spread, TOL);
    else printf("info %-48s max |step - parallel| %.2e, %zu of %zu values beyond %.0e relative\n", cpu_forms, spread,
                cpu_beyond, n, TOL);
    int N = G.T, third = N / 3;
    const struct { const char *form; int pieces[3], n; } forms[] = {
        {"step form", {1}, 1},
        {"parallel form", {N}, 1},
        {"prefill then steps", {0}, 0},   /* one prefill of N/3, then steps: built below */
        {"pieces 64,1,5", {64, 1, 5}, 3},
    };
    for (size_t i = 0; i < sizeof forms / sizeof *forms; i++) {
        char label[128];
        snprintf(label, sizeof label, "%s: %s", name, forms[i].form);
        int pieces[3];
        memcpy(pieces, forms[i].pieces, sizeof pieces);
        int rc;
        if (forms[i].n == 0) {
            int *seq = xmalloc((size_t)(N - third + 1) * sizeof(int));
            seq[0] = third;
            for (int k = 1; k <= N - third; k++) seq[k] = 1;
            rc = gpu_pieces(&G, seq, N - third + 1, got);
            free(seq);
        } else rc = gpu_pieces(&G, pieces, forms[i].n, got);
        if (rc) { check(0, label, "the GPU run failed"); continue; }
        double dr = G.ref ? max_diff(got, G.ref, n) : 0, dc = max_diff(got, cpu, n);
        char where[320] = "";
        if (dc > TOL) worst_place(got, cpu, cpu1, G.B, G.T, G.K, where, sizeof where);
        if (G.ref) check(dr <= TOL && dc <= TOL, label, "max |GPU - PyTorch| %.2e, |GPU - CPU| %.2e (tolerance %.0e)%s", dr, dc, TOL, where);
        else {   /* a shipped model: see MODEL_SHARE */
            size_t beyond = n_beyond(got, cpu, n, TOL), allowed = n / MODEL_SHARE;
            if (SHARE_FACTOR * cpu_beyond > allowed) allowed = SHARE_FACTOR * cpu_beyond;
            double bound = fmax(TOL, SPREAD_FACTOR * spread);
            check(dc <= bound && beyond <= allowed, label,
                  "max |GPU - CPU| %.2e (bound %.2e), %zu of %zu values beyond %.0e relative (allowed %zu)%s", dc, bound,
                  beyond, n, TOL, allowed, where);
        }
    }
    free(got);
    free(cpu);
    free(cpu1);
}

static void test_fixture(const char *name) {
    Golden G;
    if (golden_load(&G, name)) return;
    check_forms(&G, name);
    golden_free(&G);
}

/* A shipped model's head outputs on its first two test images, in the four forms. */
static void test_model_forms(const char *model_rel) {
    char path[4096];
    path_of(path, sizeof path, model_rel);
    Golden G = {.B = 2};
    Err e;
    if (model_load_with(&G.m, path, NULL, MODEL_FILE_WEIGHTS, &e)) { check(0, model_rel, "%s", e.msg); return; }
    Dataset ds;
    if (dataset_load(&ds, dataset_root(NULL), G.m.cfg.dataset, "test", G.B, &e)) {
        check(0, model_rel, "%s", e.msg);
        model_free(&G.m);
        return;
    }
    G.T = G.m.cfg.seq_len;
    G.K = 3 * G.m.cfg.n_mix;
    G.tokens = xmalloc((size_t)G.B * G.T * sizeof(int));
    for (int b = 0; b < G.B; b++) input_tokens(G.tokens + (size_t)b * G.T, ds.images + (size_t)b * G.T, 0, G.T);
    check_forms(&G, model_rel);
    dataset_free(&ds);
    golden_free(&G);
}

/* ---------------------------------------------------------------- 2. bits/dim */

static void test_bits(const char *model_rel, int n_imgs, int batch, int step_form) {
    char path[4096], label[160];
    path_of(path, sizeof path, model_rel);
    snprintf(label, sizeof label, "bits/dim %s, %d images, %s", model_rel, n_imgs, step_form ? "step form" : "parallel");
    Model m;
    Err e;
    if (model_load_with(&m, path, NULL, MODEL_FILE_WEIGHTS, &e)) { check(0, label, "%s", e.msg); return; }
    Dataset ds;
    if (dataset_load(&ds, dataset_root(NULL), m.cfg.dataset, "test", n_imgs, &e)) {
        check(0, label, "%s", e.msg);
        model_free(&m);
        return;
    }
    double *cpu = xcalloc(ds.n, sizeof(double)), *gpu = xcalloc(ds.n, sizeof(double));
    double t0 = now_seconds();
    int rc = evaluate_bits_per_dim(&m, DEVICE_CPU, ds.images, ds.n, 16, 0, cpu, NULL, NULL, NULL, &e);
    double t_cpu = now_seconds() - t0;
    if (rc >= 0) {
        t0 = now_seconds();
        rc = evaluate_bits_per_dim(&m, DEVICE_CUDA, ds.images, ds.n, batch, step_form, gpu, NULL, NULL, NULL, &e);
    }
    double t_gpu = now_seconds() - t0;
    if (rc < 0) check(0, label, "%s", e.msg);
    else {
        double worst = max_abs_diff(cpu, gpu, ds.n), bound = IMAGE_TOL, mc, mg, se;
        char own[96] = "";
        if (worst > IMAGE_TOL) {   /* how far the CPU's own two forms part on the images beyond it */
            int T = m.cfg.seq_len, k = 0;
            unsigned char *far = xmalloc((size_t)ds.n * T);
            double *par = xcalloc(ds.n, sizeof(double)), *step = xcalloc(ds.n, sizeof(double));
            for (int i = 0; i < ds.n; i++)
                if (!(fabs(cpu[i] - gpu[i]) <= IMAGE_TOL)) {
                    memcpy(far + (size_t)k * T, ds.images + (size_t)i * T, T);
                    par[k++] = cpu[i];
                }
            if (evaluate_bits_per_dim(&m, DEVICE_CPU, far, k, 16, 1, step, NULL, NULL, NULL, &e) == k) {
                double spread = max_abs_diff(par, step, k);
                bound = fmax(IMAGE_TOL, IMAGE_SPREAD_FACTOR * spread);
                snprintf(own, sizeof own, ", bound %.2e: the CPU's step form %.2e from its parallel form there", bound,
                         spread);
            }
            free(far);
            free(par);
            free(step);
        }
        mean_and_stderr(cpu, ds.n, &mc, &se);
        mean_and_stderr(gpu, ds.n, &mg, &se);
        check(fabs(mc - mg) <= TOL && worst <= bound && ds.n == n_imgs, label,
              "CPU %.6f GPU %.6f, max per-image diff %.2e%s (%d images; CPU %.2f s, GPU %.2f s)", mc, mg, worst, own,
              ds.n, t_cpu, t_gpu);
        if (!step_form) {   /* not a check: how far TF32 tensor cores (LINGEN_CUDA_TF32) would move it */
            setenv("LINGEN_CUDA_TF32", "1", 1);
            if (evaluate_bits_per_dim(&m, DEVICE_CUDA, ds.images, ds.n, batch, 0, gpu, NULL, NULL, NULL, &e) == ds.n) {
                worst = max_abs_diff(cpu, gpu, ds.n);
                mean_and_stderr(gpu, ds.n, &mg, &se);
                printf("info %-48s TF32 GEMMs: GPU %.6f, max per-image diff %.2e from the CPU\n", label, mg, worst);
            }
            unsetenv("LINGEN_CUDA_TF32");
        }
    }
    free(cpu);
    free(gpu);
    dataset_free(&ds);
    model_free(&m);
}

/* ---------------------------------------------------------------- 3. the sampler */

#define N_DRAWS 200000

/* Pearson's chi-square of draws x[n] against pmf (as tests/test_dmol.c: bins with expected count
 * < 5 merged with their neighbours); *df the degrees of freedom. */
static double chi_square(const int *x, int n, const double *p, int *df) {
    long count[256] = {0};
    for (int i = 0; i < n; i++) count[x[i] & 255]++;
    double ge[256], go[256], e = 0, o = 0;
    int ng = 0;
    for (int v = 0; v < 256; v++) {
        e += n * p[v];
        o += count[v];
        if (e >= 5) { ge[ng] = e; go[ng] = o; ng++; e = o = 0; }
    }
    if (ng == 0) { ge[0] = e; go[0] = o; ng = 1; }
    else { ge[ng - 1] += e; go[ng - 1] += o; }
    double chi2 = 0;
    for (int g = 0; g < ng; g++) chi2 += (go[g] - ge[g]) * (go[g] - ge[g]) / ge[g];
    *df = ng - 1;
    return chi2;
}

static double chi2_q999(int df) {   /* Wilson-Hilferty */
    const double z = 3.090232306167813;
    double h = 2.0 / (9.0 * df);
    return df * pow(1 - h + z * sqrt(h), 3);
}

static const float SHARP[3] = {0, 0.3f + 0.4f / 255, -7};
static const float SHARP_EDGE[3] = {0, -0.995f, -9};
static const float BROAD[3] = {0, 0.1f, -1};
static const float VERY_BROAD[3] = {0, 0, 2};
static const float MIXTURE[30] = {
    1.0f, 0.5f, -0.3f, 2.0f, -1.0f, 0.0f, 0.7f, -2.0f, 1.5f, 0.2f,
    -0.9f, -0.5f, 0.0f, 0.31f, 0.6f, 0.95f, 1.5f, -1.3f, 0.45f, -0.1f,
    -7, -5, -3, -6.5f, -2, -4, -1, -2.5f, -7, 0.5f,
};

/* n GPU draws of one head output from streams 0..n-1 of seed; also the CPU's from the same. */
static int draws(const float *out, int M, uint64_t seed, int *gx, int *cx) {
    float *outs = xmalloc((size_t)N_DRAWS * 3 * M * sizeof(float));
    Rng *rg = xmalloc(N_DRAWS * sizeof(Rng));
    for (int i = 0; i < N_DRAWS; i++) {
        memcpy(outs + (size_t)i * 3 * M, out, 3 * M * sizeof(float));
        rng_init(&rg[i], seed, (uint64_t)i);
        Rng rc = rg[i];
        cx[i] = dmol_sample(out, M, &rc);
    }
    Err e;
    int rc = cuda_dmol_sample_batch(outs, N_DRAWS, M, rg, gx, &e);
    if (rc) printf("     %s\n", e.msg);
    free(outs);
    free(rg);
    return rc;
}

static void test_sampler(void) {
    const struct { const char *name; const float *out; int M; } sets[] = {
        {"sharp", SHARP, 1}, {"sharp edge", SHARP_EDGE, 1}, {"broad", BROAD, 1}, {"very broad", VERY_BROAD, 1}, {"mixture", MIXTURE, 10},
    };
    int *gx = xmalloc(N_DRAWS * sizeof(int)), *cx = xmalloc(N_DRAWS * sizeof(int));
    for (size_t s = 0; s < sizeof sets / sizeof *sets; s++) {
        char label[128];
        snprintf(label, sizeof label, "sampler %s", sets[s].name);
        if (draws(sets[s].out, sets[s].M, 11 + s, gx, cx)) { check(0, label, "the GPU sampler failed"); continue; }
        long same = 0, bad = 0;
        for (int i = 0; i < N_DRAWS; i++) { same += gx[i] == cx[i]; bad += gx[i] < 0 || gx[i] > 255; }
        double p[256];
        dmol_pmf(sets[s].out, sets[s].M, p);
        int df;
        double chi2 = chi_square(gx, N_DRAWS, p, &df), q = chi2_q999(df);
        /* identical streams and the same double arithmetic: a draw may differ only where a
         * rounding in exp/log moves y across a bin edge */
        check(!bad && same >= N_DRAWS - 20 && df >= 1 && chi2 < q, label,
              "GPU = CPU in %ld of %d draws; chi2 %.1f < %.1f (df %d, 0.999 quantile)", same, N_DRAWS, chi2, q, df);
    }
    /* control: the same statistic rejects draws from another PMF (a scale error of e^2) */
    if (draws(BROAD, 1, 5, gx, cx) == 0) {
        double p[256];
        const float wrong[3] = {0, 0.1f, -3};
        dmol_pmf(wrong, 1, p);
        int df;
        double chi2 = chi_square(gx, N_DRAWS, p, &df), q = chi2_q999(df);
        check(chi2 >= q, "sampler control: a wrong PMF is rejected", "chi2 %.1f >= %.1f (df %d)", chi2, q, df);
    }
    free(gx);
    free(cx);
}

/* ---------------------------------------------------------------- 4. generation */

/* Why image `index`'s value t differs between two runs that agree before it (x: the CPU's
 * image, the prefix both saw; want, got: the CPU's and the GPU's value at t; draws from
 * position P on, from stream (seed, index)). It is a rounding flip when each device's head
 * outputs at t, given that prefix, draw its own value from the stream's state there, and the
 * two outputs differ by float32 rounding alone (FLIP_TOL relative): the draw landed within that
 * rounding of an edge. Returns 1 for such a flip (why: the draw's margins), else 0 (why: what
 * disagreed). */
#define FLIP_TOL 1e-3
static int rounding_flip(const Model *m, uint64_t seed, int index, const unsigned char *x, int t, int P, int want,
                         int got, char *why, size_t n) {
    int K = 3 * m->cfg.n_mix, M = m->cfg.n_mix, rc = 0;
    int *tok = xmalloc((size_t)(t + 1) * sizeof(int));
    input_tokens(tok, x, 0, t + 1);
    float *oc = xcalloc(K, sizeof(float)), *og = xcalloc(K, sizeof(float));
    RunState s;
    Err e;
    Engine *en = NULL;
    if (runstate_init(&s, &m->cfg, 1, t + 1, &e)) { snprintf(why, n, "%.200s", e.msg); goto out; }
    s.exact = 1;
    transformer_forward(m, &s, tok, 1, t + 1);
    memcpy(oc, s.out + (size_t)t * K, K * sizeof(float));
    runstate_free(&s);
    if (!(en = engine_new(m, DEVICE_CUDA, 1, t + 1, ENGINE_EXACT, &e)) || engine_forward(en, tok, 1, t + 1, &e)) {
        snprintf(why, n, "%.200s", e.msg);
        goto out;
    }
    memcpy(og, en->out + (size_t)t * K, K * sizeof(float));
    Rng r;
    rng_init(&r, seed, (uint64_t)index);
    for (int j = P; j < t; j++) (void)dmol_draw(oc, M, 1.0, &r);   /* two uniforms a draw, whatever the outputs */
    Rng rc_ = r, rg = r;
    int xc = dmol_draw(oc, M, 1.0, &rc_), xg = dmol_draw(og, M, 1.0, &rg);
    double worst = 0;
    for (int k = 0; k < K; k++) worst = fmax(worst, fabs((double)og[k] - oc[k]) / fmax(1, fabs((double)oc[k])));
    double u1 = pcg32_uniform(&r), u2 = pcg32_uniform(&r);
    (void)u1;
    snprintf(why, n, "value %d at position %d: CPU %d, GPU %d (each drawn again: %d, %d), outputs %.1e apart "
             "(relative), logistic u %.6f", want, t, want, got, xc, xg, worst, u2);
    rc = xc == want && xg == got && worst <= FLIP_TOL;
out:
    engine_free(en);
    free(tok);
    free(oc);
    free(og);
    return rc;
}

static void test_generate(const char *model_rel, int n, int batch, int prefix) {
    char path[4096], label[160];
    path_of(path, sizeof path, model_rel);
    snprintf(label, sizeof label, "%s %s, %d images, batch %d", prefix ? "complete" : "sample", model_rel, n, batch);
    Model m;
    Err e;
    if (model_load_with(&m, path, NULL, MODEL_FILE_WEIGHTS, &e)) { check(0, label, "%s", e.msg); return; }
    int N = m.cfg.seq_len, P = prefix ? N / 2 : 0;
    unsigned char *cpu = xcalloc((size_t)n, N), *gpu = xcalloc((size_t)n, N), *pre = xcalloc((size_t)n, N);
    for (size_t i = 0; i < (size_t)n * N; i++) pre[i] = (unsigned char)((i * 2654435761u) >> 13);
    GenOptions o = {.seed = 3, .batch = batch, .prefix = prefix ? pre : NULL, .prefix_len = P};
    double t0 = now_seconds();
    int dc = generate(&m, cpu, n, &o, &e);
    double t_cpu = now_seconds() - t0;
    int dg = -1;
    if (dc == n) {
        o.device = DEVICE_CUDA;
        t0 = now_seconds();
        dg = generate(&m, gpu, n, &o, &e);
    }
    double t_gpu = now_seconds() - t0;
    if (dc != n || dg != n) check(0, label, "generate returned %d (CPU), %d (GPU): %s", dc, dg, e.msg);
    else {
        long same = 0, kept = 0, first_diff = -1;
        int flips = 0, unexplained = 0;
        char why[400] = "";
        for (int k = 0; k < n; k++) {
            int first = -1;
            for (int t = 0; t < N; t++) {
                size_t i = (size_t)k * N + t;
                same += cpu[i] == gpu[i];
                if (cpu[i] != gpu[i] && first < 0) first = t;
                if (t < P) kept += gpu[i] == pre[i];
            }
            if (first < 0) continue;
            if (first_diff < 0 || first < first_diff) first_diff = first;
            /* the same streams, and head outputs equal to float32 rounding: an image may part
             * only where a draw lands within that rounding of an edge; from there on it is
             * another image */
            size_t i = (size_t)k * N + first;
            if (rounding_flip(&m, o.seed, k, cpu + (size_t)k * N, first, P, cpu[i], gpu[i], why, sizeof why)) flips++;
            else unexplained++;
            printf("     image %d: %s\n", k, why);
        }
        double frac = (double)same / ((double)n * N);
        check(unexplained == 0 && kept == (long)n * P, label,
              "%.2f%% of values equal to the CPU's (earliest difference at position %ld; %d of %d images parted at a "
              "rounding flip, %d otherwise), prefix kept %ld/%ld; CPU %.2f s, GPU %.2f s",
              100 * frac, first_diff, flips, n, unexplained, kept, (long)n * P, t_cpu, t_gpu);
    }
    free(cpu);
    free(gpu);
    free(pre);
    model_free(&m);
}

/* ---------------------------------------------------------------- 5. bad requests */

static void test_errors(void) {
    char path[4096];
    path_of(path, sizeof path, "tests/fixtures/tiny-linear-mnist.bin");
    Model m;
    Err e;
    if (model_load_with(&m, path, NULL, MODEL_FILE_WEIGHTS, &e)) { check(0, "errors", "%s", e.msg); return; }
    GpuModel g;
    CudaForward *f = NULL;
    if (gpu_model_init(&g, &m, &e) == 0) {
        f = cuda_forward_new(&g, 2, 4, 0, &e);
        gpu_model_free(&g);
    }
    if (!f) { check(0, "errors", "%s", e.msg); model_free(&m); return; }
    int tok[10] = {256, 1, 2, 3, 4, 256, 1, 2, 3, 4};
    float out[10 * 30];
    int too_long = cuda_forward_run(f, tok, 2, 5, out, &e);
    check(too_long != 0, "errors: T over capacity is refused", "%s", too_long ? e.msg : "accepted");
    tok[1] = 999;
    int bad_tok = cuda_forward_run(f, tok, 2, 2, out, &e);
    check(bad_tok != 0, "errors: a token out of range is refused", "%s", bad_tok ? e.msg : "accepted");
    tok[1] = 1;
    int fine = cuda_forward_run(f, tok, 2, 2, out, &e);
    check(fine == 0, "errors: then a good run works", "%s", fine ? e.msg : "");
    cuda_forward_free(f);
    model_free(&m);
}

/* The layer-0 qkv weight of g with output rows o and o + 1 swapped (as panels read with the
 * wrong width scramble rows), in bad (the caller's, 3d x d values); returns the good view. */
static FileWeight swap_rows(GpuModel *g, unsigned char *bad, int o) {
    const Config *c = &g->cfg;
    FileWeight good = g->layers[0].qkv;
    size_t elem = good.half ? 2 : 4, row = (size_t)c->d * elem;
    memcpy(bad, good.w, 3 * (size_t)c->d * row);
    memcpy(bad + o * row, (const unsigned char *)good.w + (o + 1) * row, row);
    memcpy(bad + (o + 1) * row, (const unsigned char *)good.w + o * row, row);
    g->layers[0].qkv.w = bad;
    return good;
}

/* The canary: a model whose weight reaches the GPU in another layout (two output rows of a
 * Linear swapped: of the values, which position 0 alone sees, and of the queries, which only a
 * later position sees) is refused by every entry point; and what the check costs. */
static void test_canary(const char *model_rel) {
    char path[4096], label[160];
    path_of(path, sizeof path, model_rel);
    Model m;
    Err e;
    if (model_load_with(&m, path, NULL, MODEL_FILE_WEIGHTS, &e)) { check(0, "canary", "%s", e.msg); return; }
    GpuModel g;
    double t0 = now_seconds();
    if (gpu_model_init(&g, &m, &e)) { check(0, "canary", "%s", e.msg); model_free(&m); return; }
    double t_cpu = now_seconds() - t0;
    const Config *c = &m.cfg;
    unsigned char *bad = xmalloc((size_t)3 * c->d * c->d * 4);
    const struct { const char *what; int row; } swaps[] = {{"values", 2 * c->d}, {"queries", 0}};
    const int shapes[][2] = {{1, 1}, {4, 1}, {16, 1}, {4, 64}};   /* B x T: the small kernel and the GEMMs */
    for (size_t w = 0; w < sizeof swaps / sizeof *swaps; w++) {
        FileWeight good = swap_rows(&g, bad, swaps[w].row);
        for (size_t k = 0; k < sizeof shapes / sizeof *shapes; k++) {
            snprintf(label, sizeof label, "canary: %s, two rows of %s swapped, %dx%d", model_rel, swaps[w].what,
                     shapes[k][0], shapes[k][1]);
            CudaForward *f = cuda_forward_new(&g, shapes[k][0], shapes[k][1], 0, &e);
            check(!f && strstr(e.msg, "differs from the CPU's"), label, "%s", f ? "accepted" : e.msg);
            cuda_forward_free(f);
        }
        CudaForward *f = cuda_forward_new(&g, 2, 1, 1, &e);   /* a sampling engine: its step graph */
        snprintf(label, sizeof label, "canary: %s, two rows of %s swapped, sampling", model_rel, swaps[w].what);
        check(!f && strstr(e.msg, "differs from the CPU's"), label, "%s", f ? "sampled" : e.msg);
        cuda_forward_free(f);
        g.layers[0].qkv = good;
    }
    /* its cost: the CPU's two tokens (above) and a GPU forward at batch 64, against a run */
    t0 = now_seconds();
    CudaForward *f = cuda_forward_new(&g, 64, 1, 0, &e);
    double t_new = now_seconds() - t0;
    check(f != NULL, "canary: the right layout passes", "%s", f ? "" : e.msg);
    if (f) {
        int tok[64];
        float *out = xmalloc((size_t)64 * 3 * c->n_mix * sizeof(float));
        for (int b = 0; b < 64; b++) tok[b] = BOS_TOKEN;
        t0 = now_seconds();
        cuda_forward_run(f, tok, 64, 1, out, &e);
        double t_step = now_seconds() - t0;
        printf("info canary %s: the CPU's two tokens %.2f ms, a GPU step at batch 64 %.3f ms (the check takes two), "
               "engine creation with it %.1f ms; a run takes %d steps\n",
               model_rel, t_cpu * 1e3, t_step * 1e3, t_new * 1e3, c->seq_len);
        free(out);
        cuda_forward_free(f);
    }
    free(bad);
    gpu_model_free(&g);
    model_free(&m);
}

/* LINGEN_CUDA_PDL=1 (the few-row products as programmatic dependents) changes when a kernel
 * starts, LINGEN_CUDA_FUSED=1 (a few-row step in one kernel) how many kernels run, neither what
 * is computed: n images at this batch, the same bytes with var=1 and with var=0. */
static void test_launches(const char *var, const char *model_rel, int n, int batch) {
    char path[4096], label[160];
    path_of(path, sizeof path, model_rel);
    snprintf(label, sizeof label, "%s=1 %s, %d images, batch %d", var, model_rel, n, batch);
    Model m;
    Err e;
    if (model_load_with(&m, path, NULL, MODEL_FILE_WEIGHTS, &e)) { check(0, label, "%s", e.msg); return; }
    size_t N = (size_t)m.cfg.seq_len;
    unsigned char *plain = xcalloc(n, N), *early = xcalloc(n, N);
    GenOptions o = {.device = DEVICE_CUDA, .seed = 7, .batch = batch};
    setenv(var, "0", 1);
    double t0 = now_seconds();
    int d0 = generate(&m, plain, n, &o, &e);
    double t_plain = now_seconds() - t0;
    setenv(var, "1", 1);
    t0 = now_seconds();
    int d1 = d0 == n ? generate(&m, early, n, &o, &e) : -1;
    double t_early = now_seconds() - t0;
    unsetenv(var);
    if (d0 != n || d1 != n) check(0, label, "generate returned %d, %d: %s", d0, d1, e.msg);
    else
        check(!memcmp(plain, early, n * N), label, "%s (%.3f s against %.3f s)",
              memcmp(plain, early, n * N) ? "other images" : "the same images as with 0", t_early, t_plain);
    free(plain);
    free(early);
    model_free(&m);
}

int main(int argc, char **argv) {
    if (argc > 1) root = argv[1];
    plan_set_precision(PRECISION_F32);   /* the CPU's products in float32, the GPU's arithmetic */
    cli_set_threads(0);   /* the CPU references: every core, OpenBLAS single-threaded inside */
    Err e;
    if (cuda_probe(&e)) { printf("FAIL no GPU: %s\n", e.msg); return 1; }
    const char *fixtures[] = {"tiny-linear-mnist", "tiny-softmax-mnist", "tiny-linear-cifar", "tiny-softmax-cifar",
                              "tiny-heads32-mnist"};
    for (size_t i = 0; i < sizeof fixtures / sizeof *fixtures; i++) test_fixture(fixtures[i]);
    const char *models[] = {"models/mnist.bin", "models/mnist-softmax.bin", "models/cifar.bin", "models/cifar-softmax.bin"};
    for (size_t i = 0; i < sizeof models / sizeof *models; i++) test_model_forms(models[i]);
    test_errors();
    test_canary("models/mnist.bin");
    test_canary("tests/fixtures/tiny-softmax-mnist.bin");
    test_sampler();
    test_bits("models/mnist.bin", 100, 16, 0);
    test_bits("models/mnist.bin", 20, 20, 1);
    test_bits("models/mnist-softmax.bin", 100, 16, 0);
    test_bits("models/cifar.bin", 10, 4, 0);
    test_bits("models/cifar-softmax.bin", 10, 5, 0);
    test_generate("tests/fixtures/tiny-linear-mnist.bin", 6, 4, 0);
    test_generate("tests/fixtures/tiny-softmax-mnist.bin", 6, 4, 0);
    test_generate("models/mnist.bin", 8, 8, 0);
    test_generate("models/mnist.bin", 4, 4, 1);
    test_generate("models/mnist-softmax.bin", 4, 4, 0);
    test_generate("models/cifar.bin", 4, 4, 0);
    test_launches("LINGEN_CUDA_PDL", "models/mnist.bin", 4, 4);
    test_launches("LINGEN_CUDA_PDL", "models/mnist.bin", 1, 1);
    test_launches("LINGEN_CUDA_PDL", "tests/fixtures/tiny-softmax-mnist.bin", 8, 8);
    test_launches("LINGEN_CUDA_FUSED", "models/mnist.bin", 4, 4);
    test_launches("LINGEN_CUDA_FUSED", "models/mnist.bin", 1, 1);
    test_launches("LINGEN_CUDA_FUSED", "models/mnist.bin", 8, 8);
    test_launches("LINGEN_CUDA_FUSED", "models/cifar.bin", 2, 2);
    test_launches("LINGEN_CUDA_FUSED", "models/mnist-softmax.bin", 4, 4);
    test_launches("LINGEN_CUDA_FUSED", "models/mnist-softmax.bin", 1, 1);
    test_launches("LINGEN_CUDA_FUSED", "models/cifar-softmax.bin", 1, 1);
    printf("%s: %d of %d checks failed\n", n_failed ? "FAIL" : "ok", n_failed, n_checks);
    return n_failed ? 1 : 0;
}
