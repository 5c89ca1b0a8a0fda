/* The C forward pass against the PyTorch reference (scripts/make_fixtures.py): the step form,
 * the parallel form, and every split in between (prefill then steps) give the reference's
 * head outputs to 1e-4. The shipped MNIST model's steps in bfloat16 against the same steps in
 * float32: the bits/dim of real test images within 1e-3. */
#include "testutil.h"

#include <limits.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "io/dataset.h"
#include "engine/dmol.h"
#include "kernels/matmul.h"
#include "kernels/matmul_amx.h"
#include "kernels/matmul_q8.h"
#include "engine/model.h"
#include "io/safetensors.h"
#include "engine/transformer.h"
#include "io/util.h"

typedef struct {
    Model m;
    SafeTensors g;
    int B, T, K;       /* sequences, positions, 3M */
    int *tokens;       /* [B][T] */
    float *ref;        /* [B][T][K] */
} Golden;

/* name: a fixture in tests/fixtures, or a path without extension (one with a '/'). Loaded with
 * float32 products, the reference's arithmetic, also where its weights are float16 (whose steps
 * would otherwise take bfloat16 or 8-bit products: test_bf16_steps, test_int8_steps). */
static void golden_load(Golden *G, const char *name) {
    char path[4096];
    Err e;
    const char *dir = strchr(name, '/') ? "" : FIXTURE("");
    snprintf(path, sizeof path, "%s%s.bin", dir, name);
    Plan plan = plan_make(plan_caps(), PRECISION_F32);
    if (model_load_with(&G->m, path, &plan, 0, &e)) fail_msg("%s", e.msg);
    snprintf(path, sizeof path, "%s%s.golden", dir, name);
    if (st_open(&G->g, path, &e)) fail_msg("%s", e.msg);
    const StTensor *tok = st_find(&G->g, "tokens"), *out = st_find(&G->g, "out");
    assert_non_null(tok);
    assert_non_null(out);
    G->B = (int)tok->shape[0];
    G->T = (int)tok->shape[1];
    G->K = (int)out->shape[2];
    assert_int_equal(G->T, G->m.cfg.seq_len);
    assert_int_equal(G->K, 3 * G->m.cfg.n_mix);
    float *tf = malloc(st_numel(tok) * sizeof(float));
    st_to_f32(tok, tf);
    G->tokens = malloc(st_numel(tok) * sizeof(int));
    for (size_t i = 0; i < st_numel(tok); i++) G->tokens[i] = (int)tf[i];
    free(tf);
    G->ref = malloc(st_numel(out) * sizeof(float));
    st_to_f32(out, G->ref);
    /* The reference's input rows are the image shifted right behind BOS: input_tokens of it,
     * whole and from a later position on. */
    unsigned char *x = malloc(G->T);
    int *row = malloc(G->T * sizeof(int));
    for (int b = 0; b < G->B; b++) {
        const int *ref = G->tokens + (size_t)b * G->T;
        for (int t = 0; t < G->T; t++) x[t] = (unsigned char)(t + 1 < G->T ? ref[t + 1] : 0);
        input_tokens(row, x, 0, G->T);
        assert_memory_equal(row, ref, G->T * sizeof(int));
        input_tokens(row, x, G->T / 3, G->T - G->T / 3);
        assert_memory_equal(row, ref + G->T / 3, (G->T - G->T / 3) * sizeof(int));
    }
    free(x);
    free(row);
}

static void golden_free(Golden *G) {
    free(G->tokens);
    free(G->ref);
    st_close(&G->g);
    model_free(&G->m);
}

/* Run sequence positions in pieces of the given lengths (cycled), compare every head output. */
static double run_pieces(Golden *G, int B, const int *pieces, int n_pieces) {
    int maxT = 0;
    for (int i = 0; i < n_pieces; i++) maxT = pieces[i] > maxT ? pieces[i] : maxT;
    RunState s;
    Err e;
    if (runstate_init(&s, &G->m.cfg, B, maxT, &e)) fail_msg("%s", e.msg);
    int *tok = malloc((size_t)B * maxT * sizeof(int));
    double worst = 0;
    for (int t = 0, p = 0; t < G->T; p++) {
        int T = pieces[p % n_pieces];
        if (t + T > G->T) T = G->T - t;
        for (int b = 0; b < B; b++) memcpy(tok + b * T, G->tokens + (size_t)b * G->T + t, T * sizeof(int));
        transformer_forward(&G->m, &s, tok, B, T);
        assert_int_equal(s.n_pos, t + T);
        for (int b = 0; b < B; b++)
            for (int i = 0; i < T; i++)
                for (int k = 0; k < G->K; k++) {
                    double d = fabs(s.out[((size_t)b * T + i) * G->K + k] - G->ref[((size_t)b * G->T + t + i) * G->K + k]);
                    if (!(d <= worst)) worst = d;   /* NaN-safe: a NaN makes worst NaN */
                }
        t += T;
    }
    free(tok);
    runstate_free(&s);
    return worst;
}

static void check_fixture(const char *name) {
    Golden G;
    golden_load(&G, name);
    int step[] = {1}, par[] = {G.T}, prefill[] = {G.T / 2, 1}, odd[] = {100, 1, 63, 65, 7};
    double e_step = run_pieces(&G, G.B, step, 1);
    double e_par = run_pieces(&G, G.B, par, 1);
    double e_pre = run_pieces(&G, G.B, prefill, 2);   /* prefill half, then steps: the hand-off */
    double e_odd = run_pieces(&G, G.B, odd, 5);       /* chunk boundaries anywhere */
    double e_one = run_pieces(&G, 1, step, 1);        /* batch 1: image 0 alone */
    const char *base = strrchr(name, '/') ? strrchr(name, '/') + 1 : name;
    printf("%s: max |C - torch| step %.2e, parallel %.2e, prefill+step %.2e, mixed %.2e, B=1 %.2e\n",
           base, e_step, e_par, e_pre, e_odd, e_one);
    assert_true(e_step <= 1e-4);
    assert_true(e_par <= 1e-4);
    assert_true(e_pre <= 1e-4);
    assert_true(e_odd <= 1e-4);
    assert_true(e_one <= 1e-4);
    golden_free(&G);
}

static void test_linear_mnist(void **st) { (void)st; check_fixture("tiny-linear-mnist"); }
static void test_softmax_mnist(void **st) { (void)st; check_fixture("tiny-softmax-mnist"); }
static void test_linear_cifar(void **st) { (void)st; check_fixture("tiny-linear-cifar"); }
static void test_softmax_cifar(void **st) { (void)st; check_fixture("tiny-softmax-cifar"); }
static void test_heads32_mnist(void **st) { (void)st; check_fixture("tiny-heads32-mnist"); }

/* A model from outside (argv[1]), e.g. the one tests/test_reference.py trains and exports. */
static const char *extra_fixture;
static void test_extra_fixture(void **st) { (void)st; check_fixture(extra_fixture); }

/* Bits/dim of each of n images [n][N], teacher-forced through the step form. */
static void step_bits(const Model *m, RunState *s, const unsigned char *x, int n, double *bpd) {
    int N = m->cfg.seq_len, M = m->cfg.n_mix, tok[16];
    runstate_reset(s, &m->cfg);
    for (int b = 0; b < n; b++) bpd[b] = 0;
    for (int t = 0; t < N; t++) {
        for (int b = 0; b < n; b++) input_tokens(tok + b, x + (size_t)b * N, t, 1);
        transformer_forward(m, s, tok, n, 1);
        for (int b = 0; b < n; b++) bpd[b] -= dmol_log_prob(s->out + (size_t)b * 3 * M, M, x[(size_t)b * N + t]);
    }
    for (int b = 0; b < n; b++) bpd[b] /= N * log(2.0);
}

/* Images for test_bf16_steps: fewer under the sanitizers, whose build (make asan) has no -march
 * and so runs the portable kernel, slowly. */
#if defined(__SANITIZE_ADDRESS__)
#define N_IMAGES 2
#else
#define N_IMAGES 16
#endif

/* Sampling steps take their products in bfloat16 where the processor has AVX512-BF16 and the
 * model's weights are float16 (matmul.h, model.c): on the shipped MNIST model and 16 MNIST test
 * images (2 under the sanitizers), the bits/dim those steps give stay within 1e-3 of the float32 steps' (and of the
 * parallel form's, 1e-4 from them); without the instructions the two runs are the same bits. */
static double steps_moved(int int8, double *moved) {
    Model m;
    Dataset ds;
    Err e;
    enum { n = N_IMAGES };
    Plan plan = plan_make(plan_caps(), int8 ? PRECISION_INT8 : PRECISION_AUTO);
    if (model_load_with(&m, "models/mnist.bin", &plan, 0, &e)) fail_msg("%s", e.msg);
    if (dataset_load(&ds, test_data_dir(), "mnist", "test", n, &e)) fail_msg("%s", e.msg);
    RunState s;
    if (runstate_init(&s, &m.cfg, n, 1, &e)) fail_msg("%s", e.msg);
    double exact[n], fast[n], mean = 0;
    s.exact = 1;
    step_bits(&m, &s, ds.images, n, exact);
    s.exact = 0;
    step_bits(&m, &s, ds.images, n, fast);
    *moved = 0;
    for (int b = 0; b < n; b++) mean += (fast[b] - exact[b]) / n, *moved += fabs(fast[b] - exact[b]);
    printf("bits/dim of %d images, float32 steps %.5f, %s steps %+.5f\n", n, exact[0],
           int8 ? "8-bit weights'" : plan_caps().bf16 ? "bfloat16" : "bfloat16 (not ready: float32)", mean);
    for (int b = 0; b < n; b++) assert_true(exact[b] > 0.01 && exact[b] < 8);   /* real bits/dim, not zeros */
    runstate_free(&s);
    dataset_free(&ds);
    model_free(&m);
    return mean;
}

static void test_bf16_steps(void **st) {
    (void)st;
    double moved, mean = steps_moved(0, &moved);
    assert_true(fabs(mean) <= 1e-3);
    if (plan_caps().bf16) assert_true(moved > 0);   /* the bfloat16 products ran */
    else assert_true(moved == 0);
}

/* With --precision int8 the steps take 8-bit weights (matmul_q8.h) on any processor: the bits/dim
 * of 16 images stay within 1e-3 of the float32 steps' as well. One image's move by a few
 * thousandths either way (their spread over 1,000: 0.0025, the mean's +0.00005), so the 2 images
 * under the sanitizers are held to 5e-3. */
static void test_int8_steps(void **st) {
    (void)st;
    double moved, mean = steps_moved(1, &moved);
    assert_true(fabs(mean) <= (N_IMAGES >= 16 ? 1e-3 : 5e-3));
    assert_true(moved > 0);   /* the 8-bit weights were used */
}

/* Image 0's head outputs [P][3M] over the first P steps of a run of B images (fixed tokens). */
static void first_steps(const Model *m, int B, int P, float *out) {
    RunState s;
    Err e;
    int K = 3 * m->cfg.n_mix, tok[4];
    assert_true(B <= 4);
    if (runstate_init(&s, &m->cfg, B, 1, &e)) fail_msg("%s", e.msg);
    for (int t = 0; t < P; t++) {
        for (int b = 0; b < B; b++) tok[b] = t == 0 ? BOS_TOKEN : (37 * b + 11 * t) % 256;
        transformer_forward(m, &s, tok, B, 1);
        memcpy(out + (size_t)t * K, s.out, K * sizeof(float));
    }
    runstate_free(&s);
}

static Model load_precision(const char *path, Precision p) {
    Model m;
    Err e;
    Plan plan = plan_make(plan_caps(), p);
    if (model_load_with(&m, path, &plan, 0, &e)) fail_msg("%s", e.msg);
    return m;
}

/* A run's batch picks its steps' kernel (plan.h): runs of at most the plan's q8_batch images
 * take the 8-bit weights, larger ones the others, and each image of a run gets the same. The
 * precision sets it as the model loads: int8 every batch, bf16 none (no 8-bit copy held); auto,
 * the small batches where the processor has AVX512-VNNI (and AVX512-BF16), else none. */
static void test_int8_batch(void **st) {
    (void)st;
    enum { P = 5, K_MAX = 30 };
    Model m = load_precision(FIXTURE("tiny-linear-mnist.bin"), PRECISION_INT8);
    size_t K = 3 * (size_t)m.cfg.n_mix, n = P * K * sizeof(float);
    assert_true(K <= K_MAX);
    assert_int_equal(m.plan.q8_batch, INT_MAX);
    assert_non_null(m.layers[0].qkv_w.q8);
    assert_int_equal(transformer_products(&m, 64, 1, 0), KERNEL_INT8);
    float a[P * K_MAX], b[P * K_MAX], c[P * K_MAX], d[P * K_MAX], f[P * K_MAX];
    m.plan.q8_batch = 1;
    assert_int_equal(transformer_products(&m, 1, 1, 0), KERNEL_INT8);
    assert_int_not_equal(transformer_products(&m, 2, 1, 0), KERNEL_INT8);
    first_steps(&m, 1, P, a);   /* 8-bit */
    first_steps(&m, 2, P, b);   /* not */
    m.plan.q8_batch = INT_MAX;
    first_steps(&m, 2, P, c);   /* 8-bit at batch 2: image 0 as at batch 1 */
    m.plan.q8_batch = 0;
    first_steps(&m, 2, P, d);   /* the others at batch 2 */
    first_steps(&m, 1, P, f);   /* and at batch 1 */
    assert_memory_equal(a, c, n);
    assert_memory_equal(b, d, n);
    assert_memory_equal(b, f, n);
    assert_memory_not_equal(a, f, n);   /* the 8-bit weights did run */
    for (size_t i = 0; i < P * K; i++) assert_true(fabsf(a[i] - f[i]) <= 0.05f * (1 + fabsf(f[i])));
    model_free(&m);

    m = load_precision("models/mnist.bin", PRECISION_BF16);
    assert_int_equal(m.plan.q8_batch, 0);
    assert_null(m.layers[0].qkv_w.q8);
    assert_int_not_equal(transformer_products(&m, 1, 1, 0), KERNEL_INT8);
    model_free(&m);

    m = load_precision("models/mnist.bin", PRECISION_AUTO);   /* float16 weights: the small batches where VNNI is */
    Caps caps = plan_caps();
    int small = m.plan.q8_batch, bf16 = caps.bf16;
    Kernel larger = caps.amx && bf16 ? KERNEL_AMX_BF16 : bf16 ? KERNEL_BF16 : KERNEL_F32;
    assert_int_equal(small > 0, bf16 && caps.vnni);
    assert_true(small >= 0 && small < 64);
    assert_true((m.layers[0].qkv_w.q8 != NULL) == (small > 0));
    assert_null(m.head_w.q8);
    for (int B = 1; B <= small; B++) assert_int_equal(transformer_products(&m, B, 1, 0), KERNEL_INT8);
    assert_int_equal(transformer_products(&m, small + 1, 1, 0), larger);
    assert_int_equal(transformer_products(&m, 64, 1, 0), larger);
    model_free(&m);
    m = load_precision(FIXTURE("tiny-linear-mnist.bin"), PRECISION_AUTO);   /* float32 weights: the steps never on the tiles */
    assert_null(m.layers[0].qkv_w.q8);
    assert_int_equal(transformer_products(&m, 1, 1, 0), KERNEL_F32);
    model_free(&m);
}

/* The RNN's memory does not grow: the state is the same size after N positions as after 1. */
static void test_state_bytes(void **st) {
    (void)st;
    Config c = {.attention = ATTN_LINEAR, .n_layers = 8, .n_heads = 8, .d_head = 32, .d_ff = 1024, .n_mix = 10,
                .height = 28, .width = 28, .channels = 1, .d = 256, .seq_len = 784};
    assert_int_equal(model_state_bytes(&c, 1), 8 * 8 * (32 * 32 + 32) * 4);
    assert_int_equal(model_state_bytes(&c, 784), 270336);
    c.attention = ATTN_SOFTMAX;
    assert_int_equal(model_state_bytes(&c, 784), 8 * 784 * 512 * 4);
    double f = transformer_flops_per_image(&(Config){.attention = ATTN_LINEAR, .n_layers = 8, .n_heads = 8, .d_head = 32,
        .d_ff = 1024, .n_mix = 10, .d = 256, .seq_len = 784});
    assert_true(f > 9.9e9 && f < 10.3e9);   /* DESIGN.md: ~10.1 GFLOP per MNIST image */
}

/* The run state's buffers start on cache lines, so that threads writing side by side (a
 * product's columns, the attention's (image, head) pairs) share no line at their edges: every
 * buffer, and a pair's S and z within the state, at a multiple of 64 bytes; all zero at start.
 * try_calloc_lines itself: odd sizes, the whole size writable, its overflow refused. */
static void test_runstate_lines(void **st) {
    (void)st;
    Err e;
    for (size_t n = 1; n < 5000; n = n * 3 + 1) {
        unsigned char *p = try_calloc_lines(n, 1, "test", &e);
        assert_non_null(p);
        assert_int_equal((uintptr_t)p % 64, 0);
        for (size_t i = 0; i < n; i++) assert_int_equal(p[i], 0);
        memset(p, 0xab, n);   /* the sanitizers see any byte past the block */
        free_lines(p);
    }
    free_lines(NULL);
    /* a block of several 2 MB pages (advised as huge pages): zeroed and all of it ours */
    size_t big = ((size_t)5 << 20) + 12345;
    unsigned char *p = try_calloc_lines(big, 1, "test", &e);
    assert_non_null(p);
    assert_int_equal((uintptr_t)p % 64, 0);
    for (size_t i = 0; i < big; i += 4093) assert_int_equal(p[i], 0);
    assert_int_equal(p[big - 1], 0);
    memset(p, 0xcd, big);
    free_lines(p);
    advise_huge_pages(NULL, 0);   /* no whole 2 MB page in the range: nothing asked */
    assert_null(try_calloc_lines((size_t)-1 / 2, 4, "huge", &e));
    assert_non_null(strstr(e.msg, "huge"));
    Config c = {.attention = ATTN_LINEAR, .n_layers = 2, .n_heads = 3, .d_head = 32, .d_ff = 96, .n_mix = 10,
                .height = 4, .width = 4, .channels = 1, .d = 96, .seq_len = 16};
    for (int B = 1; B <= 5; B += 2) {
        RunState s;
        if (runstate_init(&s, &c, B, 1, &e)) fail_msg("%s", e.msg);
        const void *bufs[] = {s.x, s.xn, s.qkv, s.att, s.hid, s.out, s.scratch, s.pe, s.S, s.z, s.x16, s.att16, s.hid16};
        for (size_t k = 0; k < sizeof bufs / sizeof *bufs; k++) assert_int_equal((uintptr_t)bufs[k] % 64, 0);
        size_t pairs = (size_t)c.n_layers * B * c.n_heads;
        for (size_t i = 0; i < pairs * (32 * 32 + 32); i++) assert_true(s.S[i] == 0);
        runstate_free(&s);
    }
    c.attention = ATTN_SOFTMAX;
    RunState s;
    if (runstate_init(&s, &c, 2, 1, &e)) fail_msg("%s", e.msg);
    assert_int_equal((uintptr_t)s.kc % 64, 0);
    assert_int_equal((uintptr_t)s.vc % 64, 0);
    runstate_free(&s);
}

/* FLOPs counted for the form that runs: the parallel form's attention computes other products
 * than the step form's; the projections are the same. Counted here independently, per chunk. */
static void test_flops_per_form(void **st) {
    (void)st;
    Config c = {.attention = ATTN_LINEAR, .n_layers = 8, .n_heads = 8, .d_head = 32, .d_ff = 1024, .n_mix = 10,
                .d = 256, .seq_len = 784};
    double L = 8, H = 8, D = 32, N = 784, d = 256;
    double proj = N * L * 2 * (4 * d * d + 2 * d * 1024) + N * 2 * d * 30;
    assert_float_equal(transformer_flops(&c, 1), proj + L * N * H * 4 * D * D, 1);
    /* parallel form: 12 chunks of 64 and one of 16, each QK^T and AV (n x n x D), QS and K^T V (n x D x D) */
    double chunks = 12 * (4 * 64.0 * 64 * D + 4 * 64 * D * D) + (4 * 16.0 * 16 * D + 4 * 16 * D * D);
    assert_float_equal(transformer_flops(&c, 784), proj + L * H * chunks, 1);
    assert_float_equal(transformer_flops_per_image(&c), transformer_flops(&c, 1), 0);
    /* softmax, step form: position t attends to t+1 keys; parallel form: 64-query blocks see
     * every key up to the block's last one */
    c.attention = ATTN_SOFTMAX;
    assert_float_equal(transformer_flops(&c, 1), proj + L * H * 4 * D * N * (N + 1) / 2, 1);
    double blocks = 0;
    for (int i0 = 0; i0 < 784; i0 += 64) {
        double n = 784 - i0 < 64 ? 784 - i0 : 64;
        blocks += 4 * n * (i0 + n) * D;
    }
    assert_float_equal(transformer_flops(&c, 784), proj + L * H * blocks, 1);
}

int main(int argc, char **argv) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_linear_mnist),
        cmocka_unit_test(test_softmax_mnist),
        cmocka_unit_test(test_linear_cifar),
        cmocka_unit_test(test_softmax_cifar),
        cmocka_unit_test(test_heads32_mnist),
        cmocka_unit_test(test_flops_per_form),
        cmocka_unit_test(test_state_bytes),
        cmocka_unit_test(test_runstate_lines),
        cmocka_unit_test(test_bf16_steps),
        cmocka_unit_test(test_int8_steps),
        cmocka_unit_test(test_int8_batch),
    };
    if (argc > 1) {   /* test_transformer DIR/NAME: check NAME.bin against NAME.golden only */
        extra_fixture = argv[1];
        const struct CMUnitTest extra[] = {cmocka_unit_test(test_extra_fixture)};
        return cmocka_run_group_tests(extra, NULL, NULL);
    }
    return cmocka_run_group_tests(tests, NULL, NULL);
}
