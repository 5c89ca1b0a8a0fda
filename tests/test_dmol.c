/* The discretized logistic mixture: the PMF is a distribution, log_prob agrees with the
 * PyTorch reference (tests/fixtures/dmol_ref.txt, from tests/gen_dmol_ref.py), and the sampler
 * draws from exactly that PMF (chi-square), a test shown to catch the paper's scale bug. */
#include "testutil.h"

#include <math.h>
#include <string.h>
#include "engine/dmol.h"
#include "engine/model.h"

/* ---------------------------------------------------------------- the PMF */

static double pmf_sum(const float *out, int M) {
    double p[256], s = 0;
    dmol_pmf(out, M, p);
    for (int x = 0; x < 256; x++) {
        assert_true(p[x] >= 0 && p[x] <= 1);
        s += p[x];
    }
    return s;
}

static void test_pmf_sums_to_one(void **state) {
    (void)state;
    const float log_s[] = {-9, -7, -6.5f, -3, 0, 2, 5, 800};
    const float mu[] = {-30, -1.2f, -1, -0.999f, -0.3f, 0, 1.0f / 255, 0.77f, 1, 1.5f, 30};
    for (size_t i = 0; i < sizeof log_s / sizeof *log_s; i++)
        for (size_t j = 0; j < sizeof mu / sizeof *mu; j++) {
            float out[3] = {0.0f, mu[j], log_s[i]};
            double s = pmf_sum(out, 1);
            if (fabs(s - 1) > 1e-9) fail_msg("M=1 mu=%g log_s=%g: sum %.17g", mu[j], log_s[i], s);
        }
    /* M = 10, logits spread over +-1e3, components everywhere */
    Rng r;
    rng_init(&r, 7, 0);
    for (int trial = 0; trial < 50; trial++) {
        float out[30];
        for (int k = 0; k < 10; k++) {
            out[k] = (float)((rng_uniform(&r) * 2 - 1) * (trial % 2 ? 1e3 : 3));
            out[10 + k] = (float)((rng_uniform(&r) * 2 - 1) * (trial % 3 ? 1.5 : 30));
            out[20 + k] = (float)(rng_uniform(&r) * 12 - 7 - (trial % 5 == 0 ? 3 : 0));
        }
        double s = pmf_sum(out, 10);
        if (fabs(s - 1) > 1e-9) fail_msg("M=10 trial %d: sum %.17g", trial, s);
    }
}

/* log_prob and pmf are the same function. */
static void test_log_prob_matches_pmf(void **state) {
    (void)state;
    const float out[6] = {0.3f, -1.0f, 0.25f, -0.6f, -4.0f, -2.0f};
    double p[256];
    dmol_pmf(out, 2, p);
    for (int x = 0; x < 256; x++) assert_true(fabs(log(p[x]) - dmol_log_prob(out, 2, x)) < 1e-12);
}

/* The clamp at LOG_SCALE_MIN: a log-scale below it behaves as if it were at it. */
static void test_log_scale_clamp(void **state) {
    (void)state;
    const float a[3] = {0, 0.3f, -12.0f}, b[3] = {0, 0.3f, LOG_SCALE_MIN};
    for (int x = 0; x < 256; x++) assert_true(dmol_log_prob(a, 1, x) == dmol_log_prob(b, 1, x));
}

/* Compare with PyTorch: |C - torch| <= 1e-9 * max(1, |torch|) (relative for large |log p|:
 * torch's softplus returns x itself above x = 20, an absolute error up to 2e-9 there, only
 * where log p < -11); -inf exactly where torch has -inf. */
static void test_log_prob_matches_torch(void **state) {
    (void)state;
    FILE *f = fopen(FIXTURE("dmol_ref.txt"), "r");
    if (!f) fail_msg("cannot open %s (run /usr/bin/python3 tests/gen_dmol_ref.py)", FIXTURE("dmol_ref.txt"));
    int M, n_cases = 0, n_inf = 0;
    double worst = 0;
    while (fscanf(f, "%d", &M) == 1) {
        assert_true(M >= 1 && M <= 64);
        float out[3 * 64];
        for (int i = 0; i < 3 * M; i++) {
            double v;
            assert_int_equal(fscanf(f, "%lf", &v), 1);
            out[i] = (float)v;   /* exact: the file holds float32 values */
        }
        for (int x = 0; x < 256; x++) {
            double ref, c = dmol_log_prob(out, M, x);
            assert_int_equal(fscanf(f, "%lf", &ref), 1);
            if (isinf(ref)) {
                if (!(isinf(c) && c < 0)) fail_msg("case %d x=%d: torch -inf, C %.17g", n_cases, x, c);
                n_inf++;
                continue;
            }
            double err = fabs(c - ref) / fmax(1.0, fabs(ref));
            if (!(err <= 1e-9)) fail_msg("case %d (M=%d) x=%d: C %.17g torch %.17g", n_cases, M, x, c, ref);
            if (err > worst) worst = err;
        }
        n_cases++;
    }
    fclose(f);
    assert_true(n_cases >= 15);
    assert_true(n_inf > 0);   /* the fixture does exercise the -inf path */
    printf("   %d cases vs torch, worst relative-ish error %.2e\n", n_cases, worst);
}

/* ---------------------------------------------------------------- sampling */

typedef int (*Sampler)(const float *out, int M, Rng *r);

/* A sampler with the same structure as dmol_sample and a deliberate bug. */
static int buggy_sample(const float *out, int M, Rng *r, int scale_bug, int floor_bug) {
    double mx = -INFINITY, total = 0, cum = 0;
    for (int k = 0; k < M; k++) if (out[k] > mx) mx = out[k];
    for (int k = 0; k < M; k++) total += exp(out[k] - mx);
    double target = rng_uniform(r) * total;
    int k = 0;
    for (; k < M - 1; k++) { cum += exp(out[k] - mx); if (cum > target) break; }
    double ls = fmax(out[2 * M + k], LOG_SCALE_MIN), u = rng_uniform(r);
    double s = scale_bug ? exp(-ls) : exp(ls);     /* the paper's sampler: exp(-log_scale) */
    double t = (out[M + k] + s * (log(u) - log1p(-u)) + 1) * 127.5;
    t = floor_bug ? floor(t) : round(t);            /* floor: bins shifted by half a value */
    return t < 0 ? 0 : t > 255 ? 255 : (int)t;
}
static int sample_scale_bug(const float *out, int M, Rng *r) { return buggy_sample(out, M, r, 1, 0); }
static int sample_floor_bug(const float *out, int M, Rng *r) { return buggy_sample(out, M, r, 0, 1); }
static int sample_reference(const float *out, int M, Rng *r) { return buggy_sample(out, M, r, 0, 0); }

static double chi_temp = 1;   /* the temperature of the PMF that chi_square compares with */

/* Pearson's chi-square of n draws against dmol_pmf_temp at chi_temp; bins with expected count < 5 are merged with
 * their neighbours (in value order). Returns the statistic, *df the degrees of freedom. */
static double chi_square(const float *out, int M, Sampler draw, int n, uint64_t seed, int *df) {
    double p[256];
    long count[256] = {0};
    dmol_pmf_temp(out, M, chi_temp, p);
    Rng r;
    rng_init(&r, seed, 0);
    for (int i = 0; i < n; i++) {
        int x = draw(out, M, &r);
        assert_true(x >= 0 && x <= 255);
        count[x]++;
    }
    double ge[256], go[256];   /* merged groups: expected, observed */
    int ng = 0;
    double e = 0, o = 0;
    for (int x = 0; x < 256; x++) {
        e += n * p[x];
        o += count[x];
        if (e >= 5) { ge[ng] = e; go[ng] = o; ng++; e = o = 0; }
    }
    if (ng == 0) { ge[0] = e; go[0] = o; ng = 1; }
    else { ge[ng - 1] += e; go[ng - 1] += o; }     /* leftover tail joins the last group */
    double chi2 = 0;
    for (int g = 0; g < ng; g++) chi2 += (go[g] - ge[g]) * (go[g] - ge[g]) / ge[g];
    *df = ng - 1;
    return chi2;
}

/* The 0.999 quantile of chi-square(df), Wilson-Hilferty: (X/df)^(1/3) ~ normal. */
static double chi2_q999(int df) {
    const double z = 3.090232306167813;   /* the standard normal's 0.999 quantile */
    double h = 2.0 / (9.0 * df);
    return df * pow(1 - h + z * sqrt(h), 3);
}

#define N_DRAWS 200000

/* Parameter sets: sharp (log-scale at and below the clamp), near the edges, broad, a mixture. */
static const float SHARP[3] = {0, 0.3f + 0.4f / 255, -7};
static const float SHARP_EDGE[3] = {0, -0.995f, -9};              /* clamped to -7, mass in bin 0 and 1 */
static const float BROAD[3] = {0, 0.1f, -1};                       /* s = 47 values, both edges hit */
static const float VERY_BROAD[3] = {0, 0, 2};                      /* mostly the two open edge bins */
static const float MIXTURE[30] = {
    1.0f, 0.5f, -0.3f, 2.0f, -1.0f, 0.0f, 0.7f, -2.0f, 1.5f, 0.2f,           /* logits */
    -0.9f, -0.5f, 0.0f, 0.31f, 0.6f, 0.95f, 1.5f, -1.3f, 0.45f, -0.1f,       /* means */
    -7, -5, -3, -6.5f, -2, -4, -1, -2.5f, -7, 0.5f,                          /* log-scales */
};

static int chi_square_passes(const float *out, int M, Sampler draw, const char *name, uint64_t seed) {
    int df;
    double chi2 = chi_square(out, M, draw, N_DRAWS, seed, &df);
    assert_true(df >= 1);
    double q = chi2_q999(df);
    printf("   %-12s df %3d  chi2 %12.1f  (0.999 quantile %.1f)\n", name, df, chi2, q);
    return chi2 < q;
}

static void test_sampler_matches_pmf(void **state) {
    (void)state;
    assert_true(chi_square_passes(SHARP, 1, dmol_sample, "sharp", 1));
    assert_true(chi_square_passes(SHARP_EDGE, 1, dmol_sample, "sharp edge", 2));
    assert_true(chi_square_passes(BROAD, 1, dmol_sample, "broad", 3));
    assert_true(chi_square_passes(VERY_BROAD, 1, dmol_sample, "very broad", 4));
    assert_true(chi_square_passes(MIXTURE, 10, dmol_sample, "mixture", 5));
    /* the test's own copy of the algorithm, minus bugs, passes too (so the failures below are the bugs) */
    assert_true(chi_square_passes(MIXTURE, 10, sample_reference, "reference", 6));
}

/* The check has power: the paper's exp(-log_scale) sampler and a half-bin shift both fail it. */
static void test_chi_square_catches_bugs(void **state) {
    (void)state;
    assert_false(chi_square_passes(SHARP, 1, sample_scale_bug, "scale bug", 1));
    assert_false(chi_square_passes(BROAD, 1, sample_scale_bug, "scale bug", 3));
    assert_false(chi_square_passes(VERY_BROAD, 1, sample_scale_bug, "scale bug", 4));
    assert_false(chi_square_passes(MIXTURE, 10, sample_scale_bug, "scale bug", 5));
    assert_false(chi_square_passes(SHARP, 1, sample_floor_bug, "floor bug", 1));
    assert_false(chi_square_passes(MIXTURE, 10, sample_floor_bug, "floor bug", 5));
}

/* Same seed, same samples; always in 0..255, even for extreme head outputs. */
static void test_sample_deterministic_and_in_range(void **state) {
    (void)state;
    Rng a, b;
    rng_init(&a, 42, 3);
    rng_init(&b, 42, 3);
    for (int i = 0; i < 1000; i++) assert_int_equal(dmol_sample(MIXTURE, 10, &a), dmol_sample(MIXTURE, 10, &b));
    const float extreme[][6] = {
        {1000, -1000, 30, -30, 5, 5},  {-1000, 1000, 30, -30, -7, -7}, {0, 0, 1e30f, -1e30f, 80, 80},
        {0, 0, 0, 0, 800, -800},       {3e38f, -3e38f, 0, 0, 0, 0},
    };
    for (size_t c = 0; c < sizeof extreme / sizeof *extreme; c++)
        for (int i = 0; i < 1000; i++) {
            int x = dmol_sample(extreme[c], 2, &a);
            assert_true(x >= 0 && x <= 255);
        }
    /* mean far above the range: always 255; far below: always 0 */
    const float hi[3] = {0, 30, -7}, lo[3] = {0, -30, -7};
    for (int i = 0; i < 1000; i++) {
        assert_int_equal(dmol_sample(hi, 1, &a), 255);
        assert_int_equal(dmol_sample(lo, 1, &a), 0);
    }
}

/* ---------------------------------------------------------------- temperature */

/* The tempered PMF from its definition, in double: weights softmax(logits / T), component k a
 * logistic of mean mu_k and scale T exp(max(log_s_k, LOG_SCALE_MIN)), P(x) the mass of bin x
 * (edges open) as a difference of sigmoids. */
static void tempered_pmf_ref(const float *out, int M, double T, double p[256]) {
    double w[64], total = 0, mx = -INFINITY;
    for (int k = 0; k < M; k++) mx = fmax(mx, out[k] / T);
    for (int k = 0; k < M; k++) total += w[k] = exp(out[k] / T - mx);
    for (int x = 0; x < 256; x++) {
        double c = x / 127.5 - 1;
        p[x] = 0;
        for (int k = 0; k < M; k++) {
            double s = T * exp(fmax(out[2 * M + k], LOG_SCALE_MIN)), mu = out[M + k];
            double hi = x == 255 ? 1 : 1 / (1 + exp(-(c + 1.0 / 255 - mu) / s));
            double lo = x == 0 ? 0 : 1 / (1 + exp(-(c - 1.0 / 255 - mu) / s));
            p[x] += w[k] / total * (hi - lo);
        }
    }
}

static double entropy_bits(const double p[256]) {
    double h = 0;
    for (int x = 0; x < 256; x++) if (p[x] > 0) h -= p[x] * log2(p[x]);
    return h;
}

/* Head outputs that stay inside the range (no mass piled on the open edge bins), where the
 * entropy of the values falls with the temperature. */
static const float INSIDE[30] = {
    1.0f, 0.5f, -0.3f, 2.0f, -1.0f, 0.0f, 0.7f, -2.0f, 1.5f, 0.2f,
    -0.6f, -0.5f, 0.0f, 0.31f, 0.6f, 0.55f, 0.2f, -0.3f, 0.45f, -0.1f,
    -3.5f, -5, -3, -6.5f, -4, -4, -3, -4.5f, -7, -3.2f,
};

/* dmol_pmf_temp is the definition above at every T (and T = 1 is dmol_pmf bit for bit). */
static void test_temperature_pmf(void **state) {
    (void)state;
    const double temps[] = {0.05, 0.25, 0.5, 1, 1.5, 3};
    const float *cases[] = {MIXTURE, INSIDE, SHARP, BROAD};
    const int Ms[] = {10, 10, 1, 1};
    for (int c = 0; c < 4; c++) {
        double p1[256], p[256], ref[256];
        dmol_pmf(cases[c], Ms[c], p1);
        dmol_pmf_temp(cases[c], Ms[c], 1.0, p);
        assert_memory_equal(p, p1, sizeof p);
        for (size_t i = 0; i < sizeof temps / sizeof *temps; i++) {
            dmol_pmf_temp(cases[c], Ms[c], temps[i], p);
            tempered_pmf_ref(cases[c], Ms[c], temps[i], ref);
            for (int x = 0; x < 256; x++)
                if (!(fabs(p[x] - ref[x]) <= 1e-12))
                    fail_msg("case %d T=%g x=%d: dmol_pmf_temp %.17g, definition %.17g", c, temps[i], x, p[x], ref[x]);
        }
    }
}

/* Lower T, lower entropy: of the PMF, and of the values actually drawn. */
static void test_temperature_lowers_entropy(void **state) {
    (void)state;
    const double temps[] = {2, 1, 0.5, 0.25};
    double prev = INFINITY, prev_drawn = INFINITY;
    for (int i = 0; i < 4; i++) {
        double p[256], q[256] = {0};
        dmol_pmf_temp(INSIDE, 10, temps[i], p);
        Rng r;
        rng_init(&r, 9, 0);
        for (int j = 0; j < N_DRAWS; j++) q[dmol_sample_temp(INSIDE, 10, temps[i], &r)] += 1.0 / N_DRAWS;
        double h = entropy_bits(p), h_drawn = entropy_bits(q);
        printf("   T = %-4g entropy %.3f bits (PMF), %.3f bits (%d draws)\n", temps[i], h, h_drawn, N_DRAWS);
        assert_true(h < prev - 0.1);
        assert_true(h_drawn < prev_drawn - 0.1);
        assert_true(fabs(h_drawn - h) < 0.02);
        prev = h;
        prev_drawn = h_drawn;
    }
}

/* The sampler draws from the tempered PMF (chi-square), and at T = 1 draws the very values
 * dmol_sample draws. */
static int sample_at_temp(const float *out, int M, Rng *r) { return dmol_sample_temp(out, M, chi_temp, r); }

static void test_temperature_sampler(void **state) {
    (void)state;
    Rng a, b;
    rng_init(&a, 5, 1);
    rng_init(&b, 5, 1);
    for (int i = 0; i < 10000; i++) assert_int_equal(dmol_sample_temp(MIXTURE, 10, 1.0, &a), dmol_sample(MIXTURE, 10, &b));
    const double temps[] = {0.3, 0.7, 2};
    for (int i = 0; i < 3; i++) {
        chi_temp = temps[i];
        char name[32];
        snprintf(name, sizeof name, "T = %g", temps[i]);
        assert_true(chi_square_passes(MIXTURE, 10, sample_at_temp, name, 10 + i));
        assert_true(chi_square_passes(INSIDE, 10, sample_at_temp, name, 20 + i));
        assert_true(chi_square_passes(BROAD, 1, sample_at_temp, name, 30 + i));
    }
    chi_temp = 0.5;   /* power: the model's own draws are not the PMF at another temperature */
    assert_false(chi_square_passes(MIXTURE, 10, dmol_sample, "T = 1 vs 0.5", 40));
    chi_temp = 1;
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_pmf_sums_to_one),
        cmocka_unit_test(test_log_prob_matches_pmf),
        cmocka_unit_test(test_log_scale_clamp),
        cmocka_unit_test(test_log_prob_matches_torch),
        cmocka_unit_test(test_sampler_matches_pmf),
        cmocka_unit_test(test_chi_square_catches_bugs),
        cmocka_unit_test(test_sample_deterministic_and_in_range),
        cmocka_unit_test(test_temperature_pmf),
        cmocka_unit_test(test_temperature_lowers_entropy),
        cmocka_unit_test(test_temperature_sampler),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
