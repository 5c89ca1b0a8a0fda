/* Autoregressive generation: one sub-pixel at a time, for a batch of images at once.
 * Linear models run as RNNs (state S, z); softmax models keep a KV cache. Image k draws its
 * random numbers from stream k of the seed, so it does not depend on the batch it is in. */
#ifndef LINGEN_GENERATE_H
#define LINGEN_GENERATE_H
#include <signal.h>
#include <stdint.h>

#include "engine.h"
#include "io/progress.h"
#include "io/util.h"

typedef struct {
    Device device;                   /* where the model runs (DEVICE_CPU unless set) */
    uint64_t seed;
    long first;                      /* imgs[0] is image `first` of the job (its random stream) */
    int batch;                       /* images per batch */
    const unsigned char *prefix;     /* [n][N]: keep the first prefix_len values (NULL: none) */
    int prefix_len;                  /* they go through the parallel form once, then steps */
    double temperature;              /* dmol_sample_temp's T; 0 (unset) is 1, the model's PMF */
    volatile sig_atomic_t *stop;     /* when set, stop after the current position */
    /* Or NULL: called before (end = 0) and after (end = 1) position t of every batch, for a caller
     * that measures each step (compare's per-position time and memory). */
    void (*on_step)(void *user, int t, int end);
    void *user;
    Progress *progress;              /* or NULL: counts the positions drawn, n * (N - prefix_len) */
} GenOptions;

/* Fill imgs [n][N]; returns the number of finished images (n unless stopped), -1 on error. */
int generate(const Model *m, unsigned char *imgs, int n, const GenOptions *o, Err *e);
#endif
