/* lingen complete, its testable parts: which test images (index lists), the completions
 * (generate() with each input's kept values as the prefix: prefill, then steps), and the tiles of
 * the comparison grid. */
#ifndef LINGEN_COMPLETE_H
#define LINGEN_COMPLETE_H
#include "generate.h"
#include "model.h"

#define COMPLETE_MAX_INPUTS 100000   /* bounds the memory an index list can ask for */
#define COMPLETE_GREY 128            /* the hidden part of an occluded input */

/* "0-9", "3", "0-4,7": indices into a set of n_avail images, in the order given (repeats allowed).
 * Returns 0 and a malloc'ed list, or -1 with a message (bad syntax, index out of range, too many). */
int index_list_parse(const char *s, int n_avail, int **idx, int *n, Err *e);

/* Complete n inputs [n][N] K times each into out [n*K][N]: completion k of input i is out[i*K + k],
 * keeps the input's first prefix_len values and draws the rest from random stream i*K + k. o's prefix fields are ignored (they are set here). Returns generate's. */
int complete_images(const Model *m, const unsigned char *inputs, int n, int K, int prefix_len,
                    const GenOptions *o, unsigned char *out, Err *e);

/* The grid's tiles [n][K+2][N], one row of K+2 per input: the original, the occluded input (values
 * from prefix_len on COMPLETE_GREY), then its K completions. */
void complete_tiles(const unsigned char *inputs, const unsigned char *completions, int n, int K, int N,
                    int prefix_len, unsigned char *tiles);
#endif
