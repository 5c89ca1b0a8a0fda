/* lingen complete: the hand-off (a prefix run through the parallel form, then steps) draws exactly
 * the images that feeding the prefix one step at a time draws; so does sampling from scratch,
 * from BOS; index lists; the grid's tiles. */
#include "testutil.h"

#include <string.h>

#include "engine/complete.h"
#include "engine/dmol.h"
#include "engine/rng.h"
#include "engine/transformer.h"

/* The reference: one image, every position in step form (T = 1), BOS first, prefix values fed
 * back as they are, the rest drawn from random stream `stream` at temperature temp. */
static void complete_stepwise(const Model *m, const unsigned char *input, int P, uint64_t seed, uint64_t stream,
                              double temp, unsigned char *img) {
    const Config *c = &m->cfg;
    RunState s;
    Err e;
    if (runstate_init(&s, c, 1, 1, &e)) fail_msg("%s", e.msg);
    Rng rng;
    rng_init(&rng, seed, stream);
    for (int t = 0; t < c->seq_len; t++) {
        int tok = t == 0 ? BOS_TOKEN : img[t - 1];
        transformer_forward(m, &s, &tok, 1, 1);
        img[t] = t < P ? input[t] : (unsigned char)dmol_sample_temp(s.out, c->n_mix, temp, &rng);
    }
    runstate_free(&s);
}

static void check_handoff(const char *name) {
    enum { n = 2, K = 3 };
    const uint64_t seed = 11;
    Model m;
    Err e;
    if (model_load(&m, name, &e)) fail_msg("%s", e.msg);
    const Config *c = &m.cfg;
    int N = c->seq_len, row = c->width * c->channels;
    /* inputs: the model's own samples, so that the prefixes are ones it finds plausible */
    unsigned char *inputs = malloc((size_t)n * N), *out = malloc((size_t)n * K * N), *ref = malloc(N);
    GenOptions plain = {.seed = 99, .batch = n};
    assert_int_equal(generate(&m, inputs, n, &plain, &e), n);

    /* one value, one row, the top half (the CLI's default), all but the last value */
    int prefixes[] = {1, row, c->height / 2 * row, N - 1};
    for (int p = 0; p < 4; p++) {
        int P = prefixes[p];
        GenOptions o = {.seed = seed, .batch = 4};   /* 6 images: batches of 4 and 2 */
        memset(out, 0, (size_t)n * K * N);
        assert_int_equal(complete_images(&m, inputs, n, K, P, &o, out, &e), n * K);
        int differ = 0;
        for (int j = 0; j < n * K; j++) {
            const unsigned char *in = inputs + (size_t)(j / K) * N, *got = out + (size_t)j * N;
            assert_memory_equal(got, in, P);   /* the kept part, byte for byte */
            complete_stepwise(&m, in, P, seed, j, 1.0, ref);
            if (memcmp(got, ref, N)) {
                int t = 0;
                while (got[t] == ref[t]) t++;
                fail_msg("%s, prefix %d, completion %d: prefill+steps differs from steps at value %d (%d vs %d)",
                         name, P, j, t, got[t], ref[t]);
            }
            if (j % K && memcmp(got, got - N, N)) differ++;
        }
        if (P < N - 1) assert_true(differ > 0);   /* the K completions of an input use their own streams */
        printf("%s: prefix %4d of %d: %d completions equal to the step-by-step reference\n", name, P, N, n * K);
    }
    free(inputs);
    free(out);
    free(ref);
    model_free(&m);
}

static void test_handoff_linear(void **st) { (void)st; check_handoff(FIXTURE("tiny-linear-mnist.bin")); }
static void test_handoff_softmax(void **st) { (void)st; check_handoff(FIXTURE("tiny-softmax-mnist.bin")); }
static void test_handoff_linear_rgb(void **st) { (void)st; check_handoff(FIXTURE("tiny-linear-cifar.bin")); }

/* Sampling from scratch (no prefix): generate() in batches equals the step-by-step reference that
 * starts from BOS, image k on stream first + k; at temperature 1 (also when left unset) and
 * at 0.5, and from first = 7 (an MPI rank's share of a job). Feeding token 0 instead of BOS at
 * the first position changes every image. */
static void check_from_scratch(const char *name) {
    enum { n = 5 };
    Model m;
    Err e;
    if (model_load(&m, name, &e)) fail_msg("%s", e.msg);
    int N = m.cfg.seq_len;
    unsigned char *out = malloc((size_t)n * N), *ref = malloc(N);
    const double temps[] = {0, 1, 0.5, 1};
    const long firsts[] = {0, 0, 0, 7};
    for (int i = 0; i < 4; i++) {
        GenOptions o = {.seed = 21, .first = firsts[i], .batch = 3, .temperature = temps[i]};   /* batches of 3 and 2 */
        assert_int_equal(generate(&m, out, n, &o, &e), n);
        for (int k = 0; k < n; k++) {
            complete_stepwise(&m, NULL, 0, 21, (uint64_t)(firsts[i] + k), temps[i] > 0 ? temps[i] : 1.0, ref);
            const unsigned char *got = out + (size_t)k * N;
            if (memcmp(got, ref, N)) {
                int t = 0;
                while (got[t] == ref[t]) t++;
                fail_msg("%s, temperature %g, image %ld: generate differs from the BOS-first steps at value %d (%d vs %d)",
                         name, temps[i], firsts[i] + k, t, got[t], ref[t]);
            }
        }
    }
    printf("%s: %d images from scratch equal to the step-by-step reference at T = 1 and 0.5, from image 0 and 7\n", name, n);
    free(out);
    free(ref);
    model_free(&m);
}

static void test_from_scratch_linear(void **st) { (void)st; check_from_scratch(FIXTURE("tiny-linear-mnist.bin")); }
static void test_from_scratch_softmax(void **st) { (void)st; check_from_scratch(FIXTURE("tiny-softmax-mnist.bin")); }

/* Parses s against n_avail images; returns the count (the indices in got), or -1. */
static int parse(const char *s, int n_avail, int *got, Err *e) {
    int *idx, n;
    if (index_list_parse(s, n_avail, &idx, &n, e)) {
        assert_null(idx);
        return -1;
    }
    memcpy(got, idx, (n < 64 ? n : 64) * sizeof(int));
    free(idx);
    return n;
}

static void test_index_lists(void **st) {
    (void)st;
    int got[64];
    Err e;
    assert_int_equal(parse("0-9", 10000, got, &e), 10);
    for (int i = 0; i < 10; i++) assert_int_equal(got[i], i);
    assert_int_equal(parse("3", 10000, got, &e), 1);
    assert_int_equal(got[0], 3);
    int want[] = {0, 1, 2, 3, 4, 7};
    assert_int_equal(parse("0-4,7", 10000, got, &e), 6);
    assert_memory_equal(got, want, sizeof want);
    int order[] = {9, 2, 2, 5, 6};   /* the order given, repeats kept */
    assert_int_equal(parse("9,2,2,5-6", 10, got, &e), 5);
    assert_memory_equal(got, order, sizeof order);
    assert_int_equal(parse("9999", 10000, got, &e), 1);   /* the last one */
    assert_int_equal(parse("4-4", 5, got, &e), 1);

    const char *bad[] = {"", ",", "a", "1-", "-1", "1,,2", "1,", ",1", "1-2-3", " 1", "1 ", "0x10", "+3", "1.5",
                         "99999999999999999999999"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        if (parse(bad[i], 10000, got, &e) != -1) fail_msg("'%s' was accepted", bad[i]);
        assert_non_null(strstr(e.msg, "such as 0-9"));
    }
    assert_int_equal(parse("5-2", 10000, got, &e), -1);
    assert_non_null(strstr(e.msg, "runs backwards"));

    /* out of range: the message names the index and the valid range */
    assert_int_equal(parse("10000", 10000, got, &e), -1);
    assert_non_null(strstr(e.msg, "index 10000 is out of range 0-9999"));
    assert_int_equal(parse("0-4,9990-10003", 10000, got, &e), -1);
    assert_non_null(strstr(e.msg, "index 10003"));
    assert_int_equal(parse("0", 0, got, &e), -1);
    /* too many: bounded before anything is allocated for them */
    assert_int_equal(parse("0-99999,0-99999", 100000, got, &e), -1);
    assert_non_null(strstr(e.msg, "more than"));
}

/* 2 inputs of 2x3 gray, K = 2, the first row (3 values) kept. */
static void test_tiles(void **st) {
    (void)st;
    enum { n = 2, K = 2, N = 6, P = 3 };
    unsigned char in[n][N] = {{1, 2, 3, 4, 5, 6}, {11, 12, 13, 14, 15, 16}};
    unsigned char comp[n * K][N] = {{1, 2, 3, 40, 50, 60}, {1, 2, 3, 41, 51, 61},
                                    {11, 12, 13, 70, 80, 90}, {11, 12, 13, 71, 81, 91}};
    unsigned char tiles[n][K + 2][N];
    memset(tiles, 0xEE, sizeof tiles);
    complete_tiles(&in[0][0], &comp[0][0], n, K, N, P, &tiles[0][0][0]);
    for (int i = 0; i < n; i++) {
        assert_memory_equal(tiles[i][0], in[i], N);                 /* the original */
        assert_memory_equal(tiles[i][1], in[i], P);                 /* occluded: the kept row ... */
        for (int t = P; t < N; t++) assert_int_equal(tiles[i][1][t], COMPLETE_GREY);   /* ... then grey */
        for (int k = 0; k < K; k++) assert_memory_equal(tiles[i][2 + k], comp[i * K + k], N);
    }
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_handoff_linear),
        cmocka_unit_test(test_handoff_softmax),
        cmocka_unit_test(test_handoff_linear_rgb),
        cmocka_unit_test(test_from_scratch_linear),
        cmocka_unit_test(test_from_scratch_softmax),
        cmocka_unit_test(test_index_lists),
        cmocka_unit_test(test_tiles),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
