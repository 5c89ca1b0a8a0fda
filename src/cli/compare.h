/* The speed table of `lingen compare`: its rows, the arithmetic on them (speed-ups, the
 * sgemm ceiling, the recompute baseline extrapolated from a sample of positions), the printed
 * table and the JSON. Pure functions of measured numbers, so tests need no timings. */
#ifndef LINGEN_COMPARE_H
#define LINGEN_COMPARE_H
#include <stddef.h>
#include <stdio.h>
#include "io/util.h"

/* The rows, in table order. */
enum { ROW_LINEAR_RNN, ROW_SOFTMAX_KV, ROW_SOFTMAX_RECOMPUTE, ROW_LINEAR_RECOMPUTE, N_ROWS };

typedef struct {
    double bits_per_dim, bits_se;    /* of the row's model on the test images (parallel form) */
    double images_per_s;             /* at the comparison's batch */
    double speedup_kv, speedup_recompute;   /* against rows 2 and 3: set by compare_finish */
    size_t memory_bytes;             /* per image: state, KV cache or activations (row_memory_kind) */
    double peak_rss_bytes;           /* of the process that measured the row */
    int n_lat;                       /* per-step latency: seconds for one batch step at each ... */
    int *lat_pos;                    /* ... 0-based position (all N, or the sampled ones) */
    double *lat_sec;
    double *lat_rss;                 /* rows 1-2: resident bytes after each position (NULL: none) */
} CompareRow;

typedef struct {
    const char *dataset, *linear_model, *softmax_model;
    int seq_len, n_images, batch, test_images, threads;
    int gpu;                         /* the model ran on the GPU (--device cuda): its memory is not in the RSS */
    double sgemm_gflops;             /* 1024^3 product in the same run, same threads: the fastest of
                                      * sgemm and the step kernels (ceiling.h) */
    double flops_per_image;          /* the linear model in step form */
    double ceiling_ips, ceiling_fraction;   /* set by compare_finish */
    CompareRow rows[N_ROWS];
} Comparison;

const char *row_name(int row);         /* "linear, RNN mode (state S, z)", ... */
const char *row_key(int row);          /* JSON: "linear_rnn", ... */
const char *row_memory_kind(int row);  /* "state", "KV cache", "activations" */
int row_extrapolated(int row);         /* images/s estimated from sampled positions */

/* Up to k positions spread evenly over 0..N-1, both ends included; returns how many. */
int compare_positions(int N, int k, int *pos);
/* The sum over all positions 0..N-1 of a per-step time measured at the increasing positions
 * pos[0..k): linear interpolation between them (trapezoid rule), constant beyond the ends.
 * Exact when the time is linear in the position. */
double compare_extrapolate(const int *pos, const double *sec, int k, int N);
/* Mean per-step time of the first and the last 10% of n positions. */
void compare_edges(const double *sec, int n, double *first, double *last);
/* Speed-ups against rows 2 and 3, the ceiling and RNN mode's fraction of it. */
void compare_finish(Comparison *c);

void compare_print(FILE *f, const Comparison *c);
int  compare_write_json(const Comparison *c, const char *path, Err *e);   /* jsonout_write: "-" is stdout */
#endif
