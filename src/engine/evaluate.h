/* Test-set likelihood: bits per dimension of images under a model, over all N dimensions (the
 * first predicted from BOS) and over the N-1 after the first (the paper's convention: the first
 * is given), by the parallel form (one pass per batch) or the step form (teacher forcing). */
#ifndef LINGEN_EVALUATE_H
#define LINGEN_EVALUATE_H
#include <signal.h>

#include "engine.h"
#include "model.h"
#include "io/progress.h"

/* imgs [n][N] on device d, the products in float32; per_image [n] receives -sum(log2 p)/N of each
 * image, and per_image_given [n] (or NULL) the same sum without the first sub-pixel over N-1.
 * stop (or NULL) is looked at after each forward call (a batch's pass in the parallel form, a
 * position in the step form): once set, the run stops there. Images finish batch by batch, in
 * order. Returns the number of images whose figures are complete (n unless stopped; the entries
 * after them hold no figure), or -1 with e. */
int evaluate_bits_per_dim(const Model *m, Device d, const unsigned char *imgs, int n, int batch, int step_form,
                          double *per_image, double *per_image_given, Progress *progress,
                          volatile sig_atomic_t *stop, Err *e);
/* Mean and its standard error across images. */
void mean_and_stderr(const double *v, int n, double *mean, double *se);
#endif
