#include "compare.h"

#include <math.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "io/output.h"
#include "jsonout.h"
#include "engine/paper.h"

static const struct { const char *name, *key, *memory; int extrapolated; } ROWS[N_ROWS] = {
    {"linear, RNN mode (state S, z)", "linear_rnn", "state", 0},
    {"softmax, KV cache", "softmax_kv_cache", "KV cache", 0},
    {"softmax, recomputing the prefix", "softmax_recompute", "activations", 1},
    {"linear, recomputing the prefix", "linear_recompute", "activations", 1},
};

const char *row_name(int row) { return ROWS[row].name; }
const char *row_key(int row) { return ROWS[row].key; }
const char *row_memory_kind(int row) { return ROWS[row].memory; }
int row_extrapolated(int row) { return ROWS[row].extrapolated; }

int compare_positions(int N, int k, int *pos) {
    if (k > N) k = N;
    if (k <= 1) { pos[0] = 0; return 1; }
    for (int i = 0; i < k; i++)   /* spacing (N-1)/(k-1) >= 1, so rounding keeps them distinct */
        pos[i] = (int)(((long)i * (N - 1) + (k - 1) / 2) / (k - 1));
    return k;
}

double compare_extrapolate(const int *pos, const double *sec, int k, int N) {
    double sum = 0;
    int i = 0;
    for (int t = 0; t < N; t++) {
        while (i + 1 < k && pos[i + 1] <= t) i++;   /* segment pos[i] <= t < pos[i+1] */
        if (t <= pos[0]) sum += sec[0];
        else if (i + 1 >= k) sum += sec[k - 1];
        else sum += sec[i] + (sec[i + 1] - sec[i]) * (t - pos[i]) / (pos[i + 1] - pos[i]);
    }
    return sum;
}

void compare_edges(const double *sec, int n, double *first, double *last) {
    int m = n / 10 > 0 ? n / 10 : 1;
    double a = 0, b = 0;
    for (int i = 0; i < m; i++) { a += sec[i]; b += sec[n - m + i]; }
    *first = a / m;
    *last = b / m;
}

static double ratio(double a, double b) { return b > 0 ? a / b : NAN; }

void compare_finish(Comparison *c) {
    for (int r = 0; r < N_ROWS; r++) {
        CompareRow *w = &c->rows[r];
        w->speedup_kv = ratio(w->images_per_s, c->rows[ROW_SOFTMAX_KV].images_per_s);
        w->speedup_recompute = ratio(w->images_per_s, c->rows[ROW_SOFTMAX_RECOMPUTE].images_per_s);
    }
    c->ceiling_ips = ratio(c->sgemm_gflops * 1e9, c->flops_per_image);
    c->ceiling_fraction = ratio(c->rows[ROW_LINEAR_RNN].images_per_s, c->ceiling_ips);
}

/* ------------------------------------------------------------------ the printed table */

/* Three significant digits or so, whatever the magnitude: 317, 17.9, 2.39, 0.00952. */
static const char *fmt_num(char *buf, size_t n, double v) {
    if (!isfinite(v)) snprintf(buf, n, "-");
    else if (v >= 100) snprintf(buf, n, "%.0f", v);
    else if (v >= 10) snprintf(buf, n, "%.1f", v);
    else if (v >= 1) snprintf(buf, n, "%.2f", v);
    else snprintf(buf, n, "%.3g", v);
    return buf;
}

static const char *fmt_seconds(char *buf, size_t n, double v) {
    if (v >= 1) snprintf(buf, n, "%.2f s", v);
    else if (v >= 1e-3) snprintf(buf, n, "%.3g ms", v * 1e3);
    else snprintf(buf, n, "%.3g us", v * 1e6);
    return buf;
}

static const char *fmt_bytes(char *buf, size_t n, double v) {
    if (isnan(v)) snprintf(buf, n, "n/a");
    else if (v >= 1e9) snprintf(buf, n, "%.2f GB", v / 1e9);
    else if (v >= 1e6) snprintf(buf, n, "%.1f MB", v / 1e6);
    else if (v >= 1e3) snprintf(buf, n, "%.1f KB", v / 1e3);
    else snprintf(buf, n, "%.0f B", v);
    return buf;
}

void compare_print(FILE *f, const Comparison *c) {
    const CompareRow *rnn = &c->rows[ROW_LINEAR_RNN], *kv = &c->rows[ROW_SOFTMAX_KV];
    char a[32], b[32], s1[40], s2[40], mem[64];
    fprintf(f, "lingen compare: %s (N = %d), %d images per row at batch %d, ", c->dataset, c->seq_len, c->n_images,
            c->batch);
    if (c->gpu) fprintf(f, "on the GPU\n");
    else fprintf(f, "%d threads\n", c->threads);
    fprintf(f, "models: linear %s, softmax %s\n\n", c->linear_model, c->softmax_model);
    fprintf(f, "  %-33s %8s %9s %12s %13s  %-22s %9s\n", "", "bits/dim", "images/s", "vs KV cache", "vs recompute",
            "memory/image", "peak RSS");
    for (int r = 0; r < N_ROWS; r++) {
        const CompareRow *w = &c->rows[r];
        char name[48];
        snprintf(name, sizeof name, "%s%s", row_name(r), row_extrapolated(r) ? " *" : "");
        snprintf(s1, sizeof s1, "%sx", fmt_num(a, sizeof a, w->speedup_kv));
        snprintf(s2, sizeof s2, "%sx", fmt_num(a, sizeof a, w->speedup_recompute));
        snprintf(mem, sizeof mem, "%s %s", fmt_bytes(a, sizeof a, (double)w->memory_bytes), row_memory_kind(r));
        fprintf(f, "%d %-33s %8.4f %9s %12s %13s  %-22s %9s\n", r + 1, name, w->bits_per_dim,
                fmt_num(b, sizeof b, w->images_per_s), s1, s2, mem, fmt_bytes(a, sizeof a, w->peak_rss_bytes));
    }

    const CompareRow *rc = &c->rows[ROW_SOFTMAX_RECOMPUTE];
    fprintf(f, "\n* one forward pass over the whole prefix (%d sequences of length t+1) timed at %d positions t spread\n"
               "  over 0..%d, interpolated linearly between them and summed over all %d positions (trapezoid rule).\n",
            c->batch, rc->n_lat, c->seq_len - 1, c->seq_len);
    if (c->test_images > 1)
        fprintf(f, "bits/dim: parallel form on the first %d test images (standard error %.4f linear, %.4f softmax).\n",
                c->test_images, rnn->bits_se, kv->bits_se);
    else
        fprintf(f, "bits/dim: parallel form on the first test image (the standard error needs two or more).\n");
    fprintf(f, "memory/image: RNN state S, z; KV cache at full length; activations of one full forward (B = 1).\n"
               "peak RSS: of the process that measured the row, model and batch of %d included%s.\n", c->batch,
               c->gpu ? " (host memory: on the GPU the model and the state are not in it)" : "");
    fprintf(f, "per-step time, first 10%% vs last 10%% of positions:");
    for (int r = ROW_LINEAR_RNN; r <= ROW_SOFTMAX_KV; r++) {
        const CompareRow *w = &c->rows[r];
        double first, last;
        compare_edges(w->lat_sec, w->n_lat, &first, &last);
        fprintf(f, "%s %s %s -> %s (x%.2f)", r ? ";" : "", r ? "softmax KV cache" : "linear RNN",
                fmt_seconds(a, sizeof a, first), fmt_seconds(b, sizeof b, last), ratio(last, first));
    }
    fprintf(f, "\n%s after the first vs the last position:",
            c->gpu ? "host resident memory (the state and the KV cache are on the GPU)" : "resident memory");
    for (int r = ROW_LINEAR_RNN; r <= ROW_SOFTMAX_KV; r++) {
        const CompareRow *w = &c->rows[r];
        int have = w->lat_rss && w->n_lat > 0;
        double first = have ? w->lat_rss[0] : NAN, last = have ? w->lat_rss[w->n_lat - 1] : NAN;
        fprintf(f, "%s %s %s -> %s", r ? ";" : "", r ? "softmax KV cache" : "linear RNN",
                fmt_bytes(a, sizeof a, first), fmt_bytes(b, sizeof b, last));
    }
    fprintf(f, "\n");
    if (c->sgemm_gflops > 0)   /* measured on the CPU runs only */
        fprintf(f, "sgemm ceiling: 1024^3 product at %.1f GFLOP/s (the fastest of OpenBLAS's sgemm and lingen's "
                   "kernels for a step, %d threads) / %.2f GFLOP per image = %s images/s;\n"
                   "  RNN mode reaches %.1f%% of it.\n",
                c->sgemm_gflops, c->threads, c->flops_per_image / 1e9, fmt_num(a, sizeof a, c->ceiling_ips),
                100 * c->ceiling_fraction);
    const PaperFigure *ps = paper_figure(c->dataset, ATTN_SOFTMAX), *pl = paper_figure(c->dataset, ATTN_LINEAR);
    if (ps && pl)
        fprintf(f, "paper (on a GPU, tables 1-2): softmax %g bits/dim, %g images/s; linear %g bits/dim, %g images/s:\n"
                   "  %sx (here row 1 vs row 3: %sx).\n",
                ps->bits_per_dim, ps->images_per_s, pl->bits_per_dim, pl->images_per_s,
                fmt_num(s1, sizeof s1, pl->images_per_s / ps->images_per_s), fmt_num(s2, sizeof s2, rnn->speedup_recompute));
}

/* ------------------------------------------------------------------ the JSON */

static cJSON *row_json(const Comparison *c, int r) {
    const CompareRow *w = &c->rows[r];
    cJSON *o = cJSON_CreateObject();
    cJSON_AddNumberToObject(o, "row", r + 1);
    cJSON_AddStringToObject(o, "key", row_key(r));
    cJSON_AddStringToObject(o, "name", row_name(r));
    cJSON_AddStringToObject(o, "model", r == ROW_LINEAR_RNN || r == ROW_LINEAR_RECOMPUTE ? c->linear_model : c->softmax_model);
    cJSON_AddNumberToObject(o, "bits_per_dim", w->bits_per_dim);
    cJSON_AddNumberToObject(o, "bits_per_dim_stderr", w->bits_se);
    cJSON_AddNumberToObject(o, "images_per_s", w->images_per_s);
    cJSON_AddBoolToObject(o, "extrapolated", row_extrapolated(r));
    cJSON_AddNumberToObject(o, "speedup_vs_kv_cache", w->speedup_kv);
    cJSON_AddNumberToObject(o, "speedup_vs_recompute", w->speedup_recompute);
    cJSON_AddNumberToObject(o, "memory_bytes_per_image", (double)w->memory_bytes);
    cJSON_AddStringToObject(o, "memory_kind", row_memory_kind(r));
    cJSON_AddNumberToObject(o, "peak_rss_bytes", w->peak_rss_bytes);
    cJSON *lat = cJSON_AddObjectToObject(o, "latency");
    cJSON_AddItemToObject(lat, "positions", cJSON_CreateIntArray(w->lat_pos, w->n_lat));
    cJSON_AddItemToObject(lat, "seconds", cJSON_CreateDoubleArray(w->lat_sec, w->n_lat));
    if (!row_extrapolated(r)) {
        double first, last;
        compare_edges(w->lat_sec, w->n_lat, &first, &last);
        cJSON_AddNumberToObject(lat, "first_10pct_mean_s", first);
        cJSON_AddNumberToObject(lat, "last_10pct_mean_s", last);
        if (w->lat_rss) cJSON_AddItemToObject(lat, "rss_bytes", cJSON_CreateDoubleArray(w->lat_rss, w->n_lat));
    }
    return o;
}

static cJSON *comparison_json(const Comparison *c) {
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "dataset", c->dataset);
    cJSON_AddNumberToObject(o, "seq_len", c->seq_len);
    cJSON_AddNumberToObject(o, "n_images", c->n_images);
    cJSON_AddNumberToObject(o, "batch", c->batch);
    cJSON_AddNumberToObject(o, "test_images", c->test_images);
    cJSON_AddNumberToObject(o, "threads", c->threads);
    cJSON_AddStringToObject(o, "device", c->gpu ? "cuda" : "cpu");
    cJSON *models = cJSON_AddObjectToObject(o, "models");
    cJSON_AddStringToObject(models, "linear", c->linear_model);
    cJSON_AddStringToObject(models, "softmax", c->softmax_model);
    cJSON *rows = cJSON_AddArrayToObject(o, "rows");
    for (int r = 0; r < N_ROWS; r++) cJSON_AddItemToArray(rows, row_json(c, r));
    cJSON_AddStringToObject(o, "latency_unit", "seconds for one step of a batch (all of its images), by 0-based position");
    cJSON_AddStringToObject(o, "recompute_method",
                            "a full forward over the prefix (length t+1) timed at the sampled positions t; "
                            "linear interpolation between them summed over all positions (trapezoid rule)");
    if (c->sgemm_gflops > 0) {
        cJSON *sg = cJSON_AddObjectToObject(o, "sgemm");
        cJSON_AddNumberToObject(sg, "gflops", c->sgemm_gflops);
        cJSON_AddNumberToObject(sg, "size", 1024);
        cJSON *ceil = cJSON_AddObjectToObject(o, "ceiling");
        cJSON_AddNumberToObject(ceil, "flops_per_image", c->flops_per_image);
        cJSON_AddNumberToObject(ceil, "images_per_s", c->ceiling_ips);
        cJSON_AddNumberToObject(ceil, "rnn_fraction", c->ceiling_fraction);
    }
    const PaperFigure *ps = paper_figure(c->dataset, ATTN_SOFTMAX), *pl = paper_figure(c->dataset, ATTN_LINEAR);
    if (ps && pl) {
        cJSON *pj = cJSON_AddObjectToObject(o, "paper");
        cJSON_AddStringToObject(pj, "source", "Katharopoulos et al. 2020, tables 1 and 2, measured on a GPU");
        cJSON *s = cJSON_AddObjectToObject(pj, "softmax"), *l = cJSON_AddObjectToObject(pj, "linear");
        cJSON_AddNumberToObject(s, "bits_per_dim", ps->bits_per_dim);
        cJSON_AddNumberToObject(s, "images_per_s", ps->images_per_s);
        cJSON_AddNumberToObject(l, "bits_per_dim", pl->bits_per_dim);
        cJSON_AddNumberToObject(l, "images_per_s", pl->images_per_s);
    }
    return o;
}

int compare_write_json(const Comparison *c, const char *path, Err *e) {
    cJSON *o = comparison_json(c);
    int rc = jsonout_write(o, path, e);
    cJSON_Delete(o);
    return rc;
}
