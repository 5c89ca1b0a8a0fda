/* Bits/dim of real MNIST test images under the tiny fixture models: the parallel form, the
 * step form (teacher forcing) and the PyTorch reference (float64) agree to 1e-4, in both
 * conventions (all N sub-pixels; the first given, N-1). A stop flag ends a run early with the
 * finished images' figures those of a whole run. */
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
    assert_int_equal(evaluate_bits_per_dim(&m, DEVICE_CPU, ds.images, n, 3, 0, par, par_given, NULL, NULL, &e), n);   /* batch 3: a partial batch too */
    assert_int_equal(evaluate_bits_per_dim(&m, DEVICE_CPU, ds.images, n, 2, 1, rnn, rnn_given, NULL, NULL, &e), n);
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
        assert_int_equal(evaluate_bits_per_dim(&m, DEVICE_CPU, img, 1, 1, form, per, NULL, NULL, NULL, &e), -1);
        assert_non_null(strstr(e.msg, "image 0: the log-probability is not finite"));
    }
    model_free(&m);
}

/* The stop flag of a run: set before it (at < 0), or by its progress once `at` images are done. */
typedef struct {
    volatile sig_atomic_t flag;
    double at;
} Stopper;

static void stop_at(void *user, double done, double total) {
    (void)total;
    Stopper *s = user;
    if (s->at >= 0 && done >= s->at) s->flag = 1;
}

/* A run of 5 images at batch 2 in the form given, stopped as s says: evaluate's return. */
static int stopped_run(const Model *m, const unsigned char *imgs, int form, Stopper *s, double *per, double *given) {
    Err e = {{0}};
    Progress p;
    progress_start(&p, "images", 5);
    progress_report_to(&p, stop_at, s);
    s->flag = s->at < 0;
    int done = evaluate_bits_per_dim(m, DEVICE_CPU, imgs, 5, 2, form, per, given, &p, &s->flag, &e);
    if (done < 0) fail_msg("%s", e.msg);
    return done;
}

/* A stop ends the run after the forward call in hand: in the parallel form, after the batch's pass
 * (its images finished); in the step form, after the position, the batch unfinished. The images
 * finished before it have the figures of a run to the end, bit for bit (same batch, same order). */
static void test_stop(void **st) {
    (void)st;
    Err e = {{0}};
    Model m;
    if (model_load(&m, FIXTURE("tiny-linear-mnist.bin"), &e)) fail_msg("%s", e.msg);
    Dataset ds;
    if (dataset_load(&ds, test_data_dir(), "mnist", "test", 5, &e)) fail_msg("%s", e.msg);
    struct {
        int form;
        double at;      /* images done when the flag is set; < 0: before the run */
        int finished;   /* what the run returns */
    } cases[] = {
        {0, -1, 2},    /* set before: the first pass still runs, and finishes its batch */
        {0, 3, 4},     /* set in the second pass: that batch finished */
        {0, 5, 5},     /* set in the last pass: the run is whole */
        {1, -1, 0},    /* the step form: after the first position, no image finished */
        {1, 2.5, 2},   /* half way through the second batch */
    };
    double whole[2][5], whole_given[2][5];
    for (int form = 0; form < 2; form++) {
        Stopper never = {0, 1e9};
        assert_int_equal(stopped_run(&m, ds.images, form, &never, whole[form], whole_given[form]), 5);
    }
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        double per[5], given[5];
        Stopper s = {0, cases[k].at};
        int form = cases[k].form, done = stopped_run(&m, ds.images, form, &s, per, given);
        printf("form %d, stop at %g: %d images finished\n", form, cases[k].at, done);
        assert_int_equal(done, cases[k].finished);
        for (int i = 0; i < done; i++) {
            assert_true(per[i] == whole[form][i]);
            assert_true(given[i] == whole_given[form][i]);
        }
    }
    dataset_free(&ds);
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
        cmocka_unit_test(test_stop),
        cmocka_unit_test(test_mean_and_stderr),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
