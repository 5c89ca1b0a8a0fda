/* The kernel plan (src/kernels/plan.c) as a table: for every processor (the capabilities' 8 combinations)
 * and precision, which copies a float16 weight gets, and which kernel a product takes at each
 * batch and form; written out here from the rules in plan.h, independently of plan.c's code.
 * And the environment's precision (settings.c). */
#include "testutil.h"

#include <limits.h>
#include "kernels/plan.h"
#include "io/settings.h"
#include "io/util.h"

/* What plan.h says, one case at a time. */
static Kernel expected(Caps c, Precision p, int half, int head, int T, int B, int exact) {
    int bf16_steps = c.bf16 && (p == PRECISION_AUTO || p == PRECISION_BF16) && half && !head;
    int q8_batch = p == PRECISION_INT8 ? INT_MAX : p == PRECISION_AUTO && c.bf16 && c.vnni ? (c.amx ? 1 : 4) : 0;
    int has_q8 = !head && (p == PRECISION_INT8 || (q8_batch > 0 && bf16_steps));
    int amx = half && c.amx;
    if (T == 1 && !exact) {
        if (has_q8 && B <= q8_batch) return KERNEL_INT8;
        if (bf16_steps) return amx ? KERNEL_AMX_BF16 : KERNEL_BF16;
        return KERNEL_F32;
    }
    return T > 1 && amx ? KERNEL_AMX : KERNEL_F32;
}

static void test_table(void **state) {
    (void)state;
    const int batches[] = {1, 2, 3, 4, 5, 8, 64, 256}, forms[][2] = {{1, 0}, {1, 1}, {784, 0}, {784, 1}, {17, 0}};
    int cases = 0;
    for (int bits = 0; bits < 8; bits++) {
        Caps c = {bits & 1, bits >> 1 & 1, bits >> 2 & 1};
        for (int p = PRECISION_AUTO; p <= PRECISION_INT8; p++) {
            Plan plan = plan_make(c, (Precision)p);
            for (int half = 0; half <= 1; half++)
                for (int head = 0; head <= 1; head++) {
                    Copies cp = plan_copies(&plan, half, head);
                    for (size_t f = 0; f < sizeof forms / sizeof *forms; f++)
                        for (size_t b = 0; b < sizeof batches / sizeof *batches; b++) {
                            Kernel got = plan_kernel(&plan, cp, forms[f][0], batches[b], forms[f][1]);
                            Kernel want = expected(c, (Precision)p, half, head, forms[f][0], batches[b], forms[f][1]);
                            if (got != want)
                                fail_msg("caps bf16 %d vnni %d amx %d, %s, half %d head %d, T %d B %d exact %d: %s, "
                                         "expected %s", c.bf16, c.vnni, c.amx, plan_precision_name((Precision)p), half,
                                         head, forms[f][0], batches[b], forms[f][1], plan_kernel_name(got),
                                         plan_kernel_name(want));
                            cases++;
                        }
                }
        }
    }
    assert_int_equal(cases, 8 * 4 * 4 * 5 * 8);
}

/* A few rows of the table spelled out, the ones docs/speed.md names. */
static void test_named_rows(void **state) {
    (void)state;
    Caps xeon = {1, 1, 1}, epyc = {1, 1, 0}, avx2 = {0, 0, 0};
    Plan p = plan_make(xeon, PRECISION_AUTO);
    Copies w = plan_copies(&p, 1, 0), head = plan_copies(&p, 1, 1);
    assert_int_equal(p.q8_batch, 1);
    assert_int_equal(plan_kernel(&p, w, 1, 1, 0), KERNEL_INT8);
    assert_int_equal(plan_kernel(&p, w, 1, 2, 0), KERNEL_AMX_BF16);
    assert_int_equal(plan_kernel(&p, w, 784, 16, 1), KERNEL_AMX);
    assert_int_equal(plan_kernel(&p, w, 1, 64, 1), KERNEL_F32);   /* an exact step */
    assert_int_equal(plan_kernel(&p, head, 1, 64, 0), KERNEL_F32);
    p = plan_make(epyc, PRECISION_AUTO);
    w = plan_copies(&p, 1, 0);
    assert_int_equal(p.q8_batch, 4);
    assert_int_equal(plan_kernel(&p, w, 1, 4, 0), KERNEL_INT8);
    assert_int_equal(plan_kernel(&p, w, 1, 5, 0), KERNEL_BF16);
    assert_int_equal(plan_kernel(&p, w, 784, 5, 0), KERNEL_F32);
    p = plan_make(avx2, PRECISION_AUTO);
    w = plan_copies(&p, 1, 0);
    assert_int_equal(w.bf16 + w.amx + w.q8, 0);
    p = plan_make(avx2, PRECISION_INT8);
    w = plan_copies(&p, 1, 0);
    assert_int_equal(plan_kernel(&p, w, 1, 256, 0), KERNEL_INT8);
    p = plan_make(xeon, PRECISION_F32);
    w = plan_copies(&p, 1, 0);
    assert_int_equal(plan_kernel(&p, w, 1, 1, 0), KERNEL_F32);
    assert_int_equal(plan_kernel(&p, w, 784, 1, 0), KERNEL_AMX);
}

static void test_precision_words(void **state) {
    (void)state;
    Precision p;
    const char *words[] = {"auto", "f32", "bf16", "int8"};
    for (int k = 0; k < 4; k++) {
        assert_int_equal(plan_parse_precision(words[k], &p), 0);
        assert_int_equal(p, k);
        assert_string_equal(plan_precision_name(p), words[k]);
    }
    assert_int_equal(plan_parse_precision("fp32", &p), -1);
    assert_int_equal(plan_parse_precision("", &p), -1);
}

/* The environment's precision: LINGEN_INT8=1 first, then LINGEN_BF16=0, then LINGEN_INT8=0. */
static void test_environment(void **state) {
    (void)state;
    const struct { const char *int8, *bf16; Precision want; } rows[] = {
        {NULL, NULL, PRECISION_AUTO}, {"1", NULL, PRECISION_INT8}, {"1", "0", PRECISION_INT8},
        {NULL, "0", PRECISION_F32},   {"0", "0", PRECISION_F32},   {"0", NULL, PRECISION_BF16},
        {"2", NULL, PRECISION_AUTO},  {NULL, "1", PRECISION_AUTO},
    };
    for (size_t i = 0; i < sizeof rows / sizeof *rows; i++) {
        if (rows[i].int8) setenv("LINGEN_INT8", rows[i].int8, 1); else unsetenv("LINGEN_INT8");
        if (rows[i].bf16) setenv("LINGEN_BF16", rows[i].bf16, 1); else unsetenv("LINGEN_BF16");
        assert_int_equal(settings_read().precision, rows[i].want);
    }
    unsetenv("LINGEN_INT8");
    unsetenv("LINGEN_BF16");
    setenv("LINGEN_AMX", "0", 1);
    assert_true(settings_read().amx_off);
    unsetenv("LINGEN_AMX");
    assert_false(settings_read().amx_off);
}

/* Every variable settings.c reads is in the man page's ENVIRONMENT section. */
static void test_man_page(void **state) {
    (void)state;
    size_t len;
    Err e;
    char *man = (char *)read_file("docs/lingen.1", &len, &e);
    if (!man) fail_msg("%s", e.msg);
    char *env = strstr(man, ".SH ENVIRONMENT"), *end = env ? strstr(env + 1, "\n.SH ") : NULL;
    assert_non_null(env);
    assert_non_null(end);
    *end = 0;
    for (int i = 0; settings_names[i]; i++) {
        char want[64];
        snprintf(want, sizeof want, "\n.B %s\n", settings_names[i]);
        if (!strstr(env, want)) fail_msg("docs/lingen.1: ENVIRONMENT does not list %s", settings_names[i]);
    }
    free(man);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_table),
        cmocka_unit_test(test_named_rows),
        cmocka_unit_test(test_precision_words),
        cmocka_unit_test(test_environment),
        cmocka_unit_test(test_man_page),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
