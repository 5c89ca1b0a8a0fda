/* The engine interface (src/engine/engine.h) on the CPU: its forward is transformer_forward's, its
 * draws are dmol.c's from each image's stream, and every call outside its capacity is refused
 * with a message (never run). The GPU engine is held to the same through tests/cuda/test_cuda.c. */
#include "testutil.h"

#include "engine/dmol.h"
#include "engine/engine.h"
#include "engine/transformer.h"

static Model load(const char *name) {
    Model m;
    Err e;
    if (model_load(&m, name, &e)) fail_msg("%s", e.msg);
    return m;
}

/* forward in two pieces (a prefill of 5, then a step) = transformer_forward on its own state */
static void test_forward_is_transformers(void **state) {
    (void)state;
    Model m = load(FIXTURE("tiny-linear-mnist.bin"));
    const Config *c = &m.cfg;
    enum { B = 3, T = 5 };
    int tok[B * T];
    for (int i = 0; i < B * T; i++) tok[i] = i % T == 0 ? BOS_TOKEN : (i * 37) % 256;
    Err e;
    Engine *en = engine_new(&m, DEVICE_CPU, B, T, ENGINE_EXACT, &e);
    assert_non_null(en);
    assert_string_equal(en->ops->name, "cpu");
    RunState s;
    assert_int_equal(runstate_init(&s, c, B, T, &e), 0);
    s.exact = 1;
    size_t K = 3 * (size_t)c->n_mix;
    for (int pass = 0; pass < 2; pass++) {   /* the second after a reset: the same numbers */
        engine_reset(en);
        runstate_reset(&s, c);
        assert_int_equal(engine_forward(en, tok, B, T, &e), 0);
        transformer_forward(&m, &s, tok, B, T);
        assert_memory_equal(en->out, s.out, B * T * K * sizeof(float));
        assert_int_equal(en->n_pos, T);
        int next[B] = {1, 2, 3};
        assert_int_equal(engine_forward(en, next, B, 1, &e), 0);
        transformer_forward(&m, &s, next, B, 1);
        assert_memory_equal(en->out, s.out, B * K * sizeof(float));
        assert_int_equal(en->n_pos, T + 1);
    }
    runstate_free(&s);
    engine_free(en);
    model_free(&m);
}

/* draws: image b's x(t) from its own stream and the head outputs of its own inputs */
static void test_draws_follow_the_streams(void **state) {
    (void)state;
    Model m = load(FIXTURE("tiny-softmax-mnist.bin"));
    const Config *c = &m.cfg;
    int N = c->seq_len;
    enum { B = 2, P = 3, STEPS = 6 };
    Err e;
    Engine *en = engine_new(&m, DEVICE_CPU, B, P, ENGINE_DRAWS, &e);
    assert_non_null(en);
    unsigned char *img = calloc((size_t)B * N, 1), *ref = calloc((size_t)B * N, 1);
    for (int i = 0; i < B * N; i++) img[i] = ref[i] = (unsigned char)(i * 7);
    Rng rng[B], rref[B];
    for (int b = 0; b < B; b++) rng_init(&rng[b], 5, (uint64_t)b), rng_init(&rref[b], 5, (uint64_t)b);
    int tok[B * P];
    for (int b = 0; b < B; b++) input_tokens(tok + b * P, img + (size_t)b * N, 0, P);
    assert_int_equal(engine_forward(en, tok, B, P, &e), 0);
    assert_int_equal(engine_draw_begin(en, img, rng, B, &e), 0);
    for (int i = 0; i < STEPS; i++) assert_int_equal(engine_draw_step(en, 0.8, 1, &e), 0);
    assert_int_equal(engine_draw_end(en, &e), 0);
    assert_int_equal(en->n_pos, P + STEPS);
    /* the reference: each image alone, a step at a time */
    for (int b = 0; b < B; b++) {
        RunState s;
        assert_int_equal(runstate_init(&s, c, 1, 1, &e), 0);
        unsigned char *x = ref + (size_t)b * N;
        for (int t = 0; t < P + STEPS; t++) {
            int one;
            input_tokens(&one, x, t, 1);
            transformer_forward(&m, &s, &one, 1, 1);
            if (t >= P) x[t] = (unsigned char)dmol_sample_temp(s.out, c->n_mix, 0.8, &rref[b]);
        }
        runstate_free(&s);
        assert_memory_equal(&rng[b], &rref[b], sizeof(Rng));   /* advanced as far */
    }
    assert_memory_equal(img, ref, (size_t)B * N);
    free(img);
    free(ref);
    engine_free(en);
    model_free(&m);
}

/* outside the capacity: refused with a message, the position unchanged */
static void test_refusals(void **state) {
    (void)state;
    Model m = load(FIXTURE("tiny-linear-mnist.bin"));
    int N = m.cfg.seq_len;
    Err e = {""};
    assert_null(engine_new(&m, DEVICE_CPU, 0, 1, 0, &e));
    assert_non_null(strstr(e.msg, "out of range"));
    assert_null(engine_new(&m, DEVICE_CPU, 1, N + 1, 0, &e));
#ifndef LINGEN_CUDA
    assert_null(engine_new(&m, DEVICE_CUDA, 1, 1, 0, &e));
    assert_non_null(strstr(e.msg, "built without CUDA"));
#endif
    Engine *en = engine_new(&m, DEVICE_CPU, 2, 4, 0, &e);
    assert_non_null(en);
    int tok[12] = {BOS_TOKEN, 1, 2, 3, BOS_TOKEN, 1, 2, 3, BOS_TOKEN, 1, 2, 3};
    assert_int_equal(engine_forward(en, tok, 3, 4, &e), -1);   /* more sequences */
    assert_int_equal(engine_forward(en, tok, 2, 5, &e), -1);   /* more positions */
    tok[1] = 257;
    assert_int_equal(engine_forward(en, tok, 2, 4, &e), -1);
    assert_non_null(strstr(e.msg, "token 257"));
    tok[1] = -1;
    assert_int_equal(engine_forward(en, tok, 2, 4, &e), -1);
    assert_int_equal(en->n_pos, 0);
    assert_int_equal(engine_draw_step(en, 1, 1, &e), -1);      /* no draw begun */
    unsigned char *img = calloc(2, N);
    Rng rng[3];
    assert_int_equal(engine_draw_begin(en, img, rng, 3, &e), -1);
    /* the memory full: no forward, no draw past the last position */
    tok[1] = 1;
    for (int t = 0; t + 4 <= N; t += 4) assert_int_equal(engine_forward(en, tok, 2, 4, &e), 0);
    assert_int_equal(engine_forward(en, tok, 2, 4, &e), -1);
    assert_int_equal(engine_draw_begin(en, img, rng, 2, &e), -1);
    free(img);
    engine_free(en);
    model_free(&m);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_forward_is_transformers),
        cmocka_unit_test(test_draws_follow_the_streams),
        cmocka_unit_test(test_refusals),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
