/* The ceiling's state bound (ceiling.h): the in-place pass touches every float of its buffer
 * once a pass, on any thread count (so its bytes are counted right); the bound adds the
 * products' time at the ceiling's rate and the state's at the pass's, and never passes the
 * ceiling itself; a step's state traffic is the model's state, once a position. */
#include "testutil.h"

#include <math.h>
#include "engine/ceiling.h"
#include "kernels/threads.h"

static void test_pass_covers_every_float(void **state) {
    (void)state;
    const size_t sizes[] = {5, 100003};   /* fewer floats than items; a size no share divides */
    for (int threads = 1; threads <= 3; threads += 2) {
        threads_set(threads);
        for (int k = 0; k < 2; k++) {
            size_t n = sizes[k];
            float *x = calloc(n, sizeof *x);
            assert_non_null(x);
            StatePass p = ceiling_state_pass(x, n);
            assert_true(p.passes >= 2);
            assert_true(p.gbs > 0 && isfinite(p.gbs));
            /* float counts exactly to 2^24, where adding 1 leaves it (a short buffer can get there) */
            float want = p.passes < (1 << 24) ? (float)p.passes : (float)(1 << 24);
            size_t wrong = 0;
            for (size_t i = 0; i < n; i++) wrong += x[i] != want;
            assert_int_equal(wrong, 0);
            free(x);
        }
    }
    threads_set(0);
}

static void test_bound(void **state) {
    (void)state;
    /* 10 GFLOP an image, 0.2 G of them on a state of 200 MB (read, and as many written): at 100
     * GFLOP/s and 50 GB/s, 9.8 / 100 s of products and 400 MB / 50 GB/s of state */
    StateTraffic st = {200e6, 0.2e9, 1};
    assert_float_equal(ceiling_bound(10e9, st, 100, 50), 1 / (0.098 + 0.008), 1e-9);
    /* memory fast enough that the state's own arithmetic takes longer: that time counts */
    assert_float_equal(ceiling_bound(10e9, st, 100, 1e6), 1 / (0.098 + 0.002), 1e-9);
    /* no state: the ceiling's images/s; with one, never more, and fewer where memory is the slower */
    StateTraffic none = {0, 0, 0};
    assert_float_equal(ceiling_bound(10e9, none, 100, 50), 10, 1e-9);
    for (double gbs = 1; gbs < 1e4; gbs *= 3) {
        double b = ceiling_bound(10e9, st, 100, gbs);
        assert_true(b <= 10 * (1 + 1e-12));
        if (2 * st.bytes_per_image / gbs > st.flops_per_image / 100) assert_true(b < 10);
    }
}

static void test_state_traffic(void **state) {
    (void)state;
    Config c = {.attention = ATTN_LINEAR, .n_layers = 3, .n_heads = 2, .d_head = 8, .d_ff = 32, .n_mix = 2,
                .height = 4, .width = 5, .channels = 1, .d = 16, .seq_len = 20};
    /* S (8 x 8) and z (8) per head and layer, read and written at each of the 20 positions */
    StateTraffic st = ceiling_state_traffic(&c, 7);
    assert_float_equal(st.bytes_per_image, 20.0 * 3 * 2 * (64 + 8) * 4, 0);
    assert_int_equal(st.resident, 7 * 3 * 2 * (64 + 8) * 4);
    /* per position, layer and head: the update phi(k) v^T and the readout phi(q)^T S, 2 D^2 each */
    assert_float_equal(st.flops_per_image, 20.0 * 3 * 2 * 4 * 64, 0);
    c.attention = ATTN_SOFTMAX;   /* a KV cache grows with the position: no figure a step */
    st = ceiling_state_traffic(&c, 7);
    assert_true(st.bytes_per_image == 0 && st.flops_per_image == 0 && st.resident == 0);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_pass_covers_every_float),
        cmocka_unit_test(test_bound),
        cmocka_unit_test(test_state_traffic),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
