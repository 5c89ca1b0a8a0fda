/* The arithmetic and the outputs of `lingen compare` (src/cli/compare.c) on made-up measurements:
 * sampled positions, the trapezoid extrapolation (exact for a per-step time linear in the
 * position), speed-ups and the sgemm ceiling, the printed table and the JSON's shape. No timing. */
#include "testutil.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <string.h>
#include <unistd.h>
#include "cli/compare.h"
#include "engine/paper.h"

static void test_positions(void **state) {
    (void)state;
    int pos[16];
    assert_int_equal(compare_positions(784, 12, pos), 12);
    assert_int_equal(pos[0], 0);
    assert_int_equal(pos[11], 783);
    for (int i = 1; i < 12; i++) assert_true(pos[i] > pos[i - 1]);
    assert_int_equal(compare_positions(5, 12, pos), 5);   /* fewer positions than asked: each once */
    for (int i = 0; i < 5; i++) assert_int_equal(pos[i], i);
    assert_int_equal(compare_positions(1, 12, pos), 1);
    assert_int_equal(pos[0], 0);
}

static void test_extrapolate_by_hand(void **state) {
    (void)state;
    /* interpolated values at t = 0..4: 1, 2, 3, 6, 9 */
    int pos[] = {0, 2, 4};
    double sec[] = {1, 3, 9};
    assert_float_equal(compare_extrapolate(pos, sec, 3, 5), 21, 1e-12);
    int one[] = {0};
    double c[] = {0.5};
    assert_float_equal(compare_extrapolate(one, c, 1, 10), 5, 1e-12);   /* one sample: constant */
}

/* A per-step time a + b t sums exactly over every position, from 12 samples. */
static void test_extrapolate_linear_is_exact(void **state) {
    (void)state;
    const int Ns[] = {784, 3072, 13};
    for (int k = 0; k < 3; k++) {
        int N = Ns[k], pos[12];
        double sec[12], exact = 0, a = 0.002, b = 3e-5;
        int n = compare_positions(N, 12, pos);
        for (int i = 0; i < n; i++) sec[i] = a + b * pos[i];
        for (int t = 0; t < N; t++) exact += a + b * t;
        assert_float_equal(compare_extrapolate(pos, sec, n, N), exact, 1e-9 * exact);
    }
}

/* A quadratic (softmax attention over the prefix) is overestimated, by little. */
static void test_extrapolate_quadratic_is_close(void **state) {
    (void)state;
    int N = 784, pos[12];
    double sec[12], exact = 0;
    int n = compare_positions(N, 12, pos);
    for (int i = 0; i < n; i++) sec[i] = 1e-3 + 1e-8 * pos[i] * pos[i];
    for (int t = 0; t < N; t++) exact += 1e-3 + 1e-8 * t * t;
    double est = compare_extrapolate(pos, sec, n, N);
    assert_true(est >= exact);
    assert_true(est < 1.01 * exact);
}

static void test_edges(void **state) {
    (void)state;
    double sec[100], first, last;
    for (int i = 0; i < 100; i++) sec[i] = i;
    compare_edges(sec, 100, &first, &last);
    assert_float_equal(first, 4.5, 1e-12);    /* mean of 0..9 */
    assert_float_equal(last, 94.5, 1e-12);    /* mean of 90..99 */
    compare_edges(sec, 5, &first, &last);     /* under 10 positions: one each */
    assert_float_equal(first, 0, 1e-12);
    assert_float_equal(last, 4, 1e-12);
}

static void test_paper(void **state) {
    (void)state;
    const PaperFigure *ms = paper_figure("mnist", ATTN_SOFTMAX), *ml = paper_figure("mnist", ATTN_LINEAR);
    const PaperFigure *cs = paper_figure("cifar10", ATTN_SOFTMAX), *cl = paper_figure("cifar10", ATTN_LINEAR);
    assert_non_null(ms);
    assert_non_null(ml);
    assert_non_null(cs);
    assert_non_null(cl);
    assert_float_equal(ms->bits_per_dim, 0.621, 1e-12);
    assert_float_equal(ml->bits_per_dim, 0.644, 1e-12);
    assert_float_equal(cs->bits_per_dim, 3.47, 1e-12);
    assert_float_equal(cl->bits_per_dim, 3.40, 1e-12);
    assert_float_equal(ml->images_per_s, 142.8, 1e-12);
    assert_int_equal((int)(ml->images_per_s / ms->images_per_s), 317);     /* the paper's 317x */
    assert_int_equal((int)(cl->images_per_s / cs->images_per_s), 4462);    /* and 4,462x */
    assert_null(paper_figure("fashion-mnist", ATTN_LINEAR));
}

/* ------------------------------------------------------------------ a made-up comparison */

#define N_POS 50
static int all_pos[N_POS], some_pos[4] = {0, 16, 33, 49};
static double lin_rss[N_POS], kv_rss[N_POS];
static double lin_sec[N_POS], kv_sec[N_POS], rc_sec[4] = {0.1, 1, 2, 3}, lr_sec[4] = {0.05, 0.2, 0.4, 0.6};

static Comparison made_up(void) {
    Comparison c = {.dataset = "mnist", .linear_model = "lin.bin", .softmax_model = "soft.bin", .seq_len = N_POS,
                    .n_images = 16, .batch = 8, .test_images = 100, .threads = 2,
                    .sgemm_gflops = 100, .flops_per_image = 1e10};
    for (int t = 0; t < N_POS; t++) {
        all_pos[t] = t;
        lin_sec[t] = 0.01;
        kv_sec[t] = 0.01 + 0.001 * t;
        lin_rss[t] = 5e7;
        kv_rss[t] = 6e7 + 1e6 * t;
    }
    const double ips[N_ROWS] = {10, 2, 0.1, 0.5};
    for (int r = 0; r < N_ROWS; r++) {
        CompareRow *w = &c.rows[r];
        w->images_per_s = ips[r];
        w->bits_per_dim = r == ROW_LINEAR_RNN || r == ROW_LINEAR_RECOMPUTE ? 0.86 : 0.81;
        w->bits_se = 0.02;
        w->memory_bytes = 1000u << r;
        w->peak_rss_bytes = 5e7;
        int sampled = r >= ROW_SOFTMAX_RECOMPUTE;
        w->n_lat = sampled ? 4 : N_POS;
        w->lat_pos = sampled ? some_pos : all_pos;
        w->lat_sec = r == ROW_LINEAR_RNN ? lin_sec : r == ROW_SOFTMAX_KV ? kv_sec : r == ROW_SOFTMAX_RECOMPUTE ? rc_sec : lr_sec;
        w->lat_rss = r == ROW_LINEAR_RNN ? lin_rss : r == ROW_SOFTMAX_KV ? kv_rss : NULL;
    }
    compare_finish(&c);
    return c;
}

static void test_finish(void **state) {
    (void)state;
    Comparison c = made_up();
    const double kv[N_ROWS] = {5, 1, 0.05, 0.25}, rc[N_ROWS] = {100, 20, 1, 5};
    for (int r = 0; r < N_ROWS; r++) {
        assert_float_equal(c.rows[r].speedup_kv, kv[r], 1e-12);
        assert_float_equal(c.rows[r].speedup_recompute, rc[r], 1e-12);
    }
    assert_float_equal(c.ceiling_ips, 10, 1e-12);        /* 100 GFLOP/s / 10 GFLOP per image */
    assert_float_equal(c.ceiling_fraction, 1, 1e-12);
    c.rows[ROW_SOFTMAX_KV].images_per_s = 0;             /* nothing measured: no ratio, not inf */
    compare_finish(&c);
    assert_true(isnan(c.rows[ROW_LINEAR_RNN].speedup_kv));
}

/* The printed table of c (free it). */
static char *printed(const Comparison *c) {
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    assert_non_null(f);
    compare_print(f, c);
    fclose(f);
    return buf;
}

/* The JSON that compare_write_json writes for c, parsed (cJSON_Delete it). */
static cJSON *written_json(const Comparison *c) {
    char path[] = "/tmp/lingen-test-compare-XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    close(fd);
    Err e;
    assert_int_equal(compare_write_json(c, path, &e), 0);
    size_t len;
    unsigned char *text = read_file(path, &len, &e);
    unlink(path);
    assert_non_null(text);
    cJSON *o = cJSON_ParseWithLength((const char *)text, len);
    free(text);
    assert_non_null(o);
    return o;
}

static void test_print(void **state) {
    (void)state;
    Comparison c = made_up();
    char *buf = printed(&c);
    for (int r = 0; r < N_ROWS; r++) assert_non_null(strstr(buf, row_name(r)));
    assert_non_null(strstr(buf, "5.00x"));       /* row 1 against the KV cache */
    assert_non_null(strstr(buf, "100x"));        /* row 1 against recomputing */
    assert_non_null(strstr(buf, "trapezoid"));
    assert_non_null(strstr(buf, "x1.00"));       /* flat linear per-step time */
    assert_non_null(strstr(buf, "0.621 bits/dim, 0.45 images/s"));
    assert_non_null(strstr(buf, "142.8 images/s"));
    assert_non_null(strstr(buf, "317x"));
    assert_non_null(strstr(buf, "100.0% of it"));
    assert_non_null(strstr(buf, "linear RNN 50.0 MB -> 50.0 MB; softmax KV cache 60.0 MB -> 109.0 MB"));
    free(buf);
}

static const cJSON *get(const cJSON *o, const char *key, cJSON_bool (*is)(const cJSON *)) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    if (!v || !is(v)) fail_msg("JSON key '%s' missing or of the wrong type", key);
    return v;
}

/* A GPU run measures no sgemm: its table and JSON name no ceiling (a CPU figure would read as
 * a percentage far over 100), no thread count, and say that the RSS is the host's. */
static void test_gpu_run(void **state) {
    (void)state;
    Comparison c = made_up();
    c.sgemm_gflops = 0, c.gpu = 1;
    compare_finish(&c);
    char *buf = printed(&c);
    assert_null(strstr(buf, "ceiling"));
    assert_null(strstr(buf, "threads"));
    assert_non_null(strstr(buf, "on the GPU"));
    assert_non_null(strstr(buf, "host resident memory"));   /* RSS is not where the KV cache grows */
    assert_non_null(strstr(buf, "142.8 images/s"));         /* the rest is printed */
    free(buf);
    cJSON *o = written_json(&c);
    assert_string_equal(get(o, "device", cJSON_IsString)->valuestring, "cuda");
    assert_null(cJSON_GetObjectItemCaseSensitive(o, "ceiling"));
    assert_null(cJSON_GetObjectItemCaseSensitive(o, "sgemm"));
    assert_non_null(cJSON_GetObjectItemCaseSensitive(o, "rows"));
    cJSON_Delete(o);
}

static void test_json_shape(void **state) {
    (void)state;
    Comparison c = made_up();
    cJSON *o = written_json(&c);

    assert_string_equal(get(o, "dataset", cJSON_IsString)->valuestring, "mnist");
    assert_string_equal(get(o, "device", cJSON_IsString)->valuestring, "cpu");
    assert_int_equal(get(o, "seq_len", cJSON_IsNumber)->valueint, N_POS);
    assert_int_equal(get(o, "batch", cJSON_IsNumber)->valueint, 8);
    get(o, "n_images", cJSON_IsNumber);
    get(o, "test_images", cJSON_IsNumber);
    get(o, "threads", cJSON_IsNumber);
    get(o, "latency_unit", cJSON_IsString);
    get(o, "recompute_method", cJSON_IsString);
    assert_string_equal(get(get(o, "models", cJSON_IsObject), "softmax", cJSON_IsString)->valuestring, "soft.bin");
    assert_float_equal(get(get(o, "sgemm", cJSON_IsObject), "gflops", cJSON_IsNumber)->valuedouble, 100, 1e-9);
    const cJSON *ceil = get(o, "ceiling", cJSON_IsObject);
    assert_float_equal(get(ceil, "images_per_s", cJSON_IsNumber)->valuedouble, 10, 1e-9);
    get(ceil, "flops_per_image", cJSON_IsNumber);
    get(ceil, "rnn_fraction", cJSON_IsNumber);
    const cJSON *paper = get(o, "paper", cJSON_IsObject);
    assert_float_equal(get(get(paper, "linear", cJSON_IsObject), "images_per_s", cJSON_IsNumber)->valuedouble, 142.8, 1e-9);
    get(get(paper, "softmax", cJSON_IsObject), "bits_per_dim", cJSON_IsNumber);

    const cJSON *rows = get(o, "rows", cJSON_IsArray);
    assert_int_equal(cJSON_GetArraySize(rows), N_ROWS);
    for (int r = 0; r < N_ROWS; r++) {
        const cJSON *w = cJSON_GetArrayItem(rows, r);
        assert_int_equal(get(w, "row", cJSON_IsNumber)->valueint, r + 1);
        assert_string_equal(get(w, "key", cJSON_IsString)->valuestring, row_key(r));
        get(w, "name", cJSON_IsString);
        get(w, "model", cJSON_IsString);
        get(w, "memory_kind", cJSON_IsString);
        get(w, "extrapolated", cJSON_IsBool);
        const char *num[] = {"bits_per_dim", "bits_per_dim_stderr", "images_per_s", "speedup_vs_kv_cache",
                             "speedup_vs_recompute", "memory_bytes_per_image", "peak_rss_bytes"};
        for (size_t i = 0; i < sizeof num / sizeof num[0]; i++) get(w, num[i], cJSON_IsNumber);
        assert_float_equal(get(w, "images_per_s", cJSON_IsNumber)->valuedouble, c.rows[r].images_per_s, 1e-12);
        const cJSON *lat = get(w, "latency", cJSON_IsObject);
        const cJSON *p = get(lat, "positions", cJSON_IsArray), *s = get(lat, "seconds", cJSON_IsArray);
        assert_int_equal(cJSON_GetArraySize(p), c.rows[r].n_lat);
        assert_int_equal(cJSON_GetArraySize(s), c.rows[r].n_lat);
        assert_int_equal(cJSON_GetArrayItem(p, c.rows[r].n_lat - 1)->valueint, N_POS - 1);
        assert_true(cJSON_IsNumber(cJSON_GetArrayItem(s, 0)));
        const cJSON *rss = cJSON_GetObjectItemCaseSensitive(lat, "rss_bytes");   /* rows 1-2 only */
        if (r <= ROW_SOFTMAX_KV) {
            assert_true(cJSON_IsArray(rss));
            assert_int_equal(cJSON_GetArraySize(rss), N_POS);
            assert_float_equal(cJSON_GetArrayItem(rss, N_POS - 1)->valuedouble, r ? 1.09e8 : 5e7, 1e-3);
        } else
            assert_null(rss);
    }
    assert_string_equal(get(cJSON_GetArrayItem(rows, 1), "model", cJSON_IsString)->valuestring, "soft.bin");
    assert_true(cJSON_IsTrue(get(cJSON_GetArrayItem(rows, 2), "extrapolated", cJSON_IsBool)));
    get(get(cJSON_GetArrayItem(rows, 0), "latency", cJSON_IsObject), "first_10pct_mean_s", cJSON_IsNumber);
    cJSON_Delete(o);
}

static void test_json_unwritable(void **state) {
    (void)state;
    Comparison c = made_up();
    Err e;
    assert_int_equal(compare_write_json(&c, "/nonexistent-dir/c.json", &e), -1);
    assert_non_null(strstr(e.msg, "/nonexistent-dir/c.json"));
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_positions),
        cmocka_unit_test(test_extrapolate_by_hand),
        cmocka_unit_test(test_extrapolate_linear_is_exact),
        cmocka_unit_test(test_extrapolate_quadratic_is_close),
        cmocka_unit_test(test_edges),
        cmocka_unit_test(test_paper),
        cmocka_unit_test(test_finish),
        cmocka_unit_test(test_print),
        cmocka_unit_test(test_json_shape),
        cmocka_unit_test(test_gpu_run),
        cmocka_unit_test(test_json_unwritable),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
