/* Discretized mixture of logistics: the likelihood (as scripts/model.py dmol_log_prob) and a
 * sampler that draws from exactly that PMF. Everything is computed in double from the float
 * head outputs, like the reference's dmol_pmf (out.double()). */
#include "dmol.h"

#include <math.h>
#include "model.h"   /* LOG_SCALE_MIN */

/* log(1 + e^x) without overflow for large x or lost digits for very negative x. */
static double softplus(double x) {
    return x > 0 ? x + log1p(exp(-x)) : log1p(exp(x));
}

static double clamp_log_scale(float ls) {
    return ls < LOG_SCALE_MIN ? (double)LOG_SCALE_MIN : (double)ls;
}

/* log sum_k exp(logit_k / T), the softmax normaliser (T = 1: the same operations as without T). */
static double logit_lse(const float *logit, int M, double T) {
    double mx = -INFINITY, s = 0;
    for (int k = 0; k < M; k++) if (logit[k] > mx) mx = logit[k];
    if (mx == -INFINITY) return mx;
    for (int k = 0; k < M; k++) s += exp((logit[k] - mx) / T);
    return mx / T + log(s);
}

/* log P(x | component) for the logistic (mu, log_s), same operations and order as the reference:
 * a, b = the standardized upper / lower bin edges; log(sig(a) - sig(b)) written stably. */
static double log_bin(double mu, double log_s, int x) {
    double c = x / 127.5 - 1.0;
    double inv_s = exp(-log_s);
    double a = inv_s * (c - mu + 1.0 / 255);
    double b = inv_s * (c - mu - 1.0 / 255);
    if (x == 0) return -softplus(-a);      /* log sig(a):     the bin is open to -inf */
    if (x == 255) return -softplus(b);     /* log(1 - sig(b)): open to +inf */
    return a + log(-expm1(b - a)) - softplus(a) - softplus(b);
}

/* log P(x) at temperature T (dmol.h); log T is added to the clamped log-scale, so that T < 1 can
 * make a component sharper than LOG_SCALE_MIN allows the model itself. */
static double log_prob_temp(const float *out, int M, double T, int x) {
    const float *logit = out, *mu = out + M, *log_s = out + 2 * M;
    double lse = logit_lse(logit, M, T), log_T = log(T);
    /* logsumexp over components, online (running max m, sum s relative to it) */
    double m = -INFINITY, s = 0;
    for (int k = 0; k < M; k++) {
        double v = log_bin(mu[k], clamp_log_scale(log_s[k]) + log_T, x) + (logit[k] / T - lse);
        if (v == -INFINITY) continue;
        if (v > m) { s = s * exp(m - v) + 1.0; m = v; }
        else s += exp(v - m);
    }
    return m == -INFINITY ? m : m + log(s);
}

double dmol_log_prob(const float *out, int M, int x) { return log_prob_temp(out, M, 1.0, x); }

void dmol_pmf_temp(const float *out, int M, double T, double pmf[256]) {
    for (int x = 0; x < 256; x++) pmf[x] = exp(log_prob_temp(out, M, T, x));
}

void dmol_pmf(const float *out, int M, double pmf[256]) { dmol_pmf_temp(out, M, 1.0, pmf); }

/* Sampling: a component k with probability softmax(logits)_k, then y ~ Logistic(mu_k, s_k) by
 * inversion, y = mu + s (log u - log(1 - u)), and x = the bin that contains y.
 * Why this is exactly the PMF above: bin x is c in [c_x - 1/255, c_x + 1/255] with
 * c_x = x/127.5 - 1, i.e. t = (y + 1) * 127.5 in [x - 1/2, x + 1/2], so x = round(t), and the
 * clamp to 0..255 makes the two edge bins open exactly like the likelihood's. The scale is
 * s = exp(log_s) with the same clamped log_s as the likelihood (whose inv_s = exp(-log_s));
 * using exp(-log_s) as the scale is the paper's sampling bug.
 * Ties: t lands exactly on a half-integer with probability ~2^-53 (a set of measure zero for the
 * continuous y), so round()'s tie direction does not change the distribution.
 * Precision: u has 53 random bits and never equals 0 or 1 (rng_uniform), and 1 - u is exact, so
 * the logistic's tails are followed out to |log u - log(1-u)| ~ 37, i.e. mass below ~1e-16 is
 * all that is cut; t is formed in double (float's ulp at |t| ~ 4000 would be 2e-4 of a bin,
 * and a float u would cut the tails at ~1e-7). */
int dmol_sample_temp(const float *out, int M, double T, Rng *r) {
    const float *logit = out, *mu = out + M, *log_s = out + 2 * M;

    /* component: first k whose cumulative weight exceeds u * total; weights exp((logit - max) / T)
     * (x / 1.0 is exact: T = 1 draws the same values as the model's PMF always did) */
    double mx = -INFINITY, total = 0;
    for (int k = 0; k < M; k++) if (logit[k] > mx) mx = logit[k];
    for (int k = 0; k < M; k++) total += exp((logit[k] - mx) / T);
    double target = rng_uniform(r) * total, cum = 0;
    int k = -1;
    for (int j = 0; j < M; j++) {
        double w = exp((logit[j] - mx) / T);
        if (w > 0) k = j;            /* rounding can leave cum < target: fall back to the last live one */
        cum += w;
        if (cum > target && w > 0) break;
    }
    if (k < 0) k = 0;                /* only with non-finite logits */

    /* logistic by inversion, then the bin */
    double u = rng_uniform(r);
    double y = (double)mu[k] + exp(clamp_log_scale(log_s[k]) + log(T)) * (log(u) - log1p(-u));
    double t = (y + 1.0) * 127.5;
    if (!(t >= 0.5)) return 0;       /* also NaN: no UB in the int conversion */
    if (t >= 254.5) return 255;
    return (int)round(t);
}

int dmol_sample(const float *out, int M, Rng *r) { return dmol_sample_temp(out, M, 1.0, r); }
