/* Discretized mixture of logistics (PixelCNN++ style) over the values 0..255.
 * Head outputs per sub-pixel: [M logits | M means | M log-scales], c = x/127.5 - 1,
 * bin half-width 1/255, the bins of 0 and 255 open to -inf / +inf.
 * Sampling draws from exactly the PMF whose log is dmol_log_prob. */
#ifndef LINGEN_DMOL_H
#define LINGEN_DMOL_H
#include "rng.h"

double dmol_log_prob(const float *out, int n_mix, int x);   /* natural log of P(x) */
void   dmol_pmf(const float *out, int n_mix, double pmf[256]);
int    dmol_sample(const float *out, int n_mix, Rng *r);

/* At temperature T > 0: the mixture logits divided by T and every logistic's scale multiplied
 * by T (log-scale + log T, after the clamp). T = 1 is the model's PMF, bit for bit; T < 1
 * sharpens it, T > 1 flattens it. Sampling draws from exactly dmol_pmf_temp's PMF. */
/* The temperatures lingen samples at (sample, complete, the library). Below 0.01 the draws are
 * already the mixture's most likely component at a near-zero scale; above 100 nearly all mass is
 * in the two open edge bins. */
#define TEMPERATURE_MIN 0.01
#define TEMPERATURE_MAX 100.0
void   dmol_pmf_temp(const float *out, int n_mix, double T, double pmf[256]);
int    dmol_sample_temp(const float *out, int n_mix, double T, Rng *r);
#endif
