/* Discretized mixture of logistics: the likelihood (as scripts/model.py dmol_log_prob) and a
 * sampler that draws from exactly that PMF. Everything is computed in double from the float
 * head outputs, like the reference's dmol_pmf (out.double()). */
#include "dmol.h"

#include <math.h>
#include "dmol_draw.h"
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

/* The sampler itself is in dmol_draw.h (one source for the CPU and the GPU). */
int dmol_sample_temp(const float *out, int M, double T, Rng *r) { return dmol_draw(out, M, T, r); }
int dmol_sample(const float *out, int M, Rng *r) { return dmol_draw(out, M, 1.0, r); }
