/* Bits/dim of real MNIST test images under the tiny fixture models: the parallel form, the
 * step form (teacher forcing) and the PyTorch reference (float64) agree to 1e-4, in both
 * conventions (all N sub-pixels; the first given, N-1). */
#include "testutil.h"

#include <math.h>
#include <string.h>

#include "io/dataset.h"
#include "engine/dmol.h"
#include "engine/evaluate.h"
#include "engine/model.h"
#include "io/safetensors.h"
#include "engine/transformer.h"

static void check(const char *name) {
    char path[256];
    Err e;
    Model m;
    SafeTensors g;
    snprintf(path, sizeof path, FIXTURE("%s.bin"), name);
    if (model_load(&m, path, &e)) fail_msg("%s", e.msg);
    snprintf(path, sizeof path, FIXTURE("%s.golden"), name);
    if (st_open(&g, path, &e)) fail_msg("%s", e.msg);
    const StTensor *ref = st_find(&g, "eval_bpd");
    assert_non_null(ref);
    int n = (int)ref->shape[0];
    float want[16];
    assert_true(n <= 16);
    st_to_f32(ref, want);

    Dataset ds;
    if (dataset_load(&ds, test_data_dir(), "mnist", "test", n, &e)) fail_msg("%s", e.msg);
    double par[16], rnn[16], par_given[16], rnn_given[16];
    assert_int_equal(evaluate_bits_per_dim(&m, DEVICE_CPU, ds.images, n, 3, 0, par, par_given, NULL, &e), 0);   /* batch 3: a partial batch too */
    assert_int_equal(evaluate_bits_per_dim(&m, DEVICE_CPU, ds.images, n, 2, 1, rnn, rnn_given, NULL, &e), 0);
    /* The paper's convention from the reference: position 0 sees BOS alone, so its head output is
     * one step of BOS; the first given, the other N-1 carry N * torch's figure less its bits. */
    int N = m.cfg.seq_len, bos = BOS_TOKEN;
    RunState s;
    if (runstate_init(&s, &m.cfg, 1, 1, &e)) fail_msg("%s", e.msg);
    transformer_forward(&m, &s, &bos, 1, 1);
    for (int i = 0; i < n; i++) {
        double first_bits = -dmol_log_prob(s.out, m.cfg.n_mix, ds.images[(size_t)i * N]) / log(2.0);
        double want_given = (N * (double)want[i] - first_bits) / (N - 1);
        printf("%s image %d: torch %.6f parallel %.6f rnn %.6f; first given: %.6f %.6f %.6f\n", name, i, want[i],
               par[i], rnn[i], want_given, par_given[i], rnn_given[i]);
        assert_true(fabs(par[i] - want[i]) <= 1e-4);
        assert_true(fabs(rnn[i] - want[i]) <= 1e-4);
        assert_true(fabs(par[i] - rnn[i]) <= 1e-4);
        assert_true(fabs(par_given[i] - want_given) <= 1e-4);
        assert_true(fabs(rnn_given[i] - want_given) <= 1e-4);
    }
    runstate_free(&s);
    dataset_free(&ds);
    st_close(&g);
    model_free(&m);
}

static void test_linear(void **st) { (void)st; check("tiny-linear-mnist"); }
static void test_softmax(void **st) { (void)st; check("tiny-softmax-mnist"); }

/* Finite weights whose activations overflow float32: a clear error, not "inf +- nan". */
static void test_non_finite_log_prob(void **st) {
    (void)st;
    Err e = {{0}};
    Model m;
    if (model_load(&m, FIXTURE("tiny-linear-mnist.bin"), &e)) fail_msg("%s", e.msg);
    for (int i = 0; i < m.cfg.d; i++) m.norm_w[i] = m.norm_b[i] = 3e38f;
    unsigned char img[784] = {0};
    double per[2];
    for (int form = 0; form < 2; form++) {
        assert_int_equal(evaluate_bits_per_dim(&m, DEVICE_CPU, img, 1, 1, form, per, NULL, NULL, &e), -1);
        assert_non_null(strstr(e.msg, "image 0: the log-probability is not finite"));
    }
    model_free(&m);
}

static void test_mean_and_stderr(void **st) {
    (void)st;
    double v[] = {1, 2, 3, 4}, mean, se;
    mean_and_stderr(v, 4, &mean, &se);
    assert_true(fabs(mean - 2.5) < 1e-12);
    assert_true(fabs(se - sqrt((2.25 + 0.25 + 0.25 + 2.25) / 3 / 4)) < 1e-12);   /* sample std / sqrt(n) */
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_linear),
        cmocka_unit_test(test_softmax),
        cmocka_unit_test(test_non_finite_log_prob),
        cmocka_unit_test(test_mean_and_stderr),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
