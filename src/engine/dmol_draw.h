/* The DMOL sampler as an inline function that compiles for the CPU (dmol.c) and, under nvcc,
 * for the GPU (src/cuda/kernels.cu): one source, so both draw from exactly the same PMF
 * (with rng.h's pcg32_uniform, likewise shared, the same per-image streams). */
#ifndef LINGEN_DMOL_DRAW_H
#define LINGEN_DMOL_DRAW_H
#include <math.h>
#include <stdint.h>

#include "config.h"   /* LOG_SCALE_MIN */
#include "rng.h"   /* pcg32_uniform, LINGEN_HD */

/* Sampling: a component k with probability softmax(logits)_k, then y ~ Logistic(mu_k, s_k) by
 * inversion, y = mu + s (log u - log(1 - u)), and x = the bin that contains y.
 * Why this is exactly the PMF of dmol_log_prob (dmol.c): bin x is c in [c_x - 1/255, c_x + 1/255] with
 * c_x = x/127.5 - 1, i.e. t = (y + 1) * 127.5 in [x - 1/2, x + 1/2], so x = round(t), and the
 * clamp to 0..255 makes the two edge bins open exactly like the likelihood's. The scale is
 * s = exp(log_s) with the same clamped log_s as the likelihood (whose inv_s = exp(-log_s));
 * using exp(-log_s) as the scale is the paper's sampling bug.
 * Ties: t lands exactly on a half-integer with probability ~2^-53 (a set of measure zero for the
 * continuous y), so round()'s tie direction does not change the distribution.
 * Precision: u has 53 random bits and never equals 0 or 1 (pcg32_uniform), and 1 - u is exact, so
 * the logistic's tails are followed out to |log u - log(1-u)| ~ 37, i.e. mass below ~1e-16 is
 * all that is cut; t is formed in double (float's ulp at |t| ~ 4000 would be 2e-4 of a bin,
 * and a float u would cut the tails at ~1e-7). */
/* At temperature T the mixture logits are divided by T and each logistic's scale multiplied by T
 * (x / 1.0 and log(1.0) = 0 are exact: T = 1 draws exactly the model's PMF). */
static inline LINGEN_HD int dmol_draw(const float *out, int M, double T, Rng *r) {
    const float *logit = out, *mu = out + M, *log_s = out + 2 * M;

    /* component: first k whose cumulative weight exceeds u * total */
    double mx = -INFINITY, total = 0;
    for (int k = 0; k < M; k++) if (logit[k] > mx) mx = logit[k];
    for (int k = 0; k < M; k++) total += exp((logit[k] - mx) / T);
    double target = pcg32_uniform(r) * total, cum = 0;
    int k = -1;
    for (int j = 0; j < M; j++) {
        double w = exp((logit[j] - mx) / T);
        if (w > 0) k = j;            /* rounding can leave cum < target: fall back to the last live one */
        cum += w;
        if (cum > target && w > 0) break;
    }
    if (k < 0) k = 0;                /* only with non-finite logits */

    /* logistic by inversion, then the bin */
    double u = pcg32_uniform(r);
    double y = (double)mu[k] + exp((log_s[k] < LOG_SCALE_MIN ? (double)LOG_SCALE_MIN : (double)log_s[k]) + log(T)) * (log(u) - log1p(-u));
    double t = (y + 1.0) * 127.5;
    if (!(t >= 0.5)) return 0;       /* also NaN: no UB in the int conversion */
    if (t >= 254.5) return 255;
    return (int)round(t);
}
#endif
