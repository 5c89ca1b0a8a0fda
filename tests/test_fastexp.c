/* exp_nonpositive, the exp of both attentions: within 2 ulp of exp over [-87, 0], exactly 1 at
 * 0, and 0 (never a subnormal) below -87. */
#include "testutil.h"

#include <float.h>
#include <math.h>
#include "kernels/fastexp.h"

/* distance in units in the last place of the float nearest to the exact value */
static double ulps(float got, double want) {
    float w = (float)want;
    double ulp = nextafterf(w, INFINITY) - w;
    return fabs((double)got - want) / ulp;
}

static void test_within_two_ulp(void **state) {
    (void)state;
    double worst = 0;
    for (int i = 0; i <= 2000000; i++) {   /* every 4.35e-5 over [-87, 0], and both ends */
        float u = -87.0f * (float)i / 2000000;
        double e = ulps(exp_nonpositive(u), exp((double)u));
        worst = e > worst ? e : worst;
    }
    assert_true(worst < 2.0);
    assert_true(worst > 0.5);   /* the check can see an error: the polynomial is not exact */
    assert_true(exp_nonpositive(0.0f) == 1.0f);
}

static void test_zero_below_range(void **state) {
    (void)state;
    const float below[] = {-87.001f, -88.0f, -103.0f, -1e4f, -INFINITY};
    for (size_t i = 0; i < sizeof below / sizeof *below; i++) assert_true(exp_nonpositive(below[i]) == 0.0f);
    assert_true(exp_nonpositive(-87.0f) >= FLT_MIN);   /* the last value kept is a normal float */
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_within_two_ulp),
        cmocka_unit_test(test_zero_below_range),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
