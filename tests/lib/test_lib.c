/* liblingen as a program outside the tree uses it: built against the installed header and library
 * (pkg-config), checked against the `lingen` command's own outputs: its sample and completion
 * grids (PNG, decoded here with libpng), its bits/dim (--json) and its model info (--json).
 *
 *   test_lib [--quick]        environment: LINGEN (the command), LINGEN_TEST_MODEL (an MNIST
 *                             model's path), LINGEN_DATA (the MNIST test set), TMPDIR,
 *                             LINGEN_TEST_DEVICE (cpu, the default, or cuda)
 * One line per check, "ok   NAME" or "FAIL NAME: why"; exit 1 if any failed. --quick: the
 * checks of a link (a static build) or a device: open, info, a sample grid, bits/dim; on cuda,
 * the model opened there and the command run with --device cuda. */
#include <lingen.h>

#include <cjson/cJSON.h>
#include <math.h>
#include <png.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

static int fails;
static const char *cli, *model_path, *tmp, *device_opt = "";   /* device_opt: the command's --device */
static lingen_device device = LINGEN_DEVICE_CPU;

static void check(int cond, const char *name, const char *fmt, ...) {
    if (cond) {
        printf("ok   %s\n", name);
        return;
    }
    char why[1024] = "";
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(why, sizeof why, fmt, ap);
    va_end(ap);
    printf("FAIL %s: %s\n", name, why);
    fails++;
}

/* Run the command line, its output to a file; 0 on success. */
static int run(const char *fmt, ...) {
    char cmd[4096];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(cmd, sizeof cmd, fmt, ap);
    va_end(ap);
    char full[4200];
    snprintf(full, sizeof full, "%s > %s/cli.out 2>&1", cmd, tmp);
    int rc = system(full);
    if (rc) fprintf(stderr, "test_lib: `%s` failed (%d)\n", cmd, rc);
    return rc;
}

static cJSON *read_json(const char *path) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    char buf[1 << 16];
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = 0;
    return cJSON_Parse(buf);
}

static double json_number(const cJSON *o, const char *key) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    return cJSON_IsNumber(v) ? v->valuedouble : -1;
}

/* The tiles of a grid the command wrote: n images h x w x ch, ceil(sqrt(n)) columns (cols > 0:
 * that many), each tile 2 pixels after the last with a 2-pixel border around the whole
 * (README: the grid). 0 on success. */
static int read_grid(const char *path, int n, int cols, int h, int w, int ch, unsigned char *tiles) {
    png_image im;
    memset(&im, 0, sizeof im);
    im.version = PNG_IMAGE_VERSION;
    if (!png_image_begin_read_from_file(&im, path)) return -1;
    im.format = ch == 1 ? PNG_FORMAT_GRAY : PNG_FORMAT_RGB;
    if (cols <= 0)
        for (cols = 1; cols * cols < n; cols++) {}
    int rows = (n + cols - 1) / cols, gw = cols * (w + 2) + 2, gh = rows * (h + 2) + 2;
    if ((int)im.width != gw || (int)im.height != gh) {
        fprintf(stderr, "test_lib: %s is %ux%u, a grid of %d needs %dx%d\n", path, im.width, im.height, n, gw, gh);
        png_image_free(&im);
        return -1;
    }
    unsigned char *px = malloc((size_t)gw * gh * ch);
    int okay = png_image_finish_read(&im, NULL, px, 0, NULL);
    for (int i = 0; okay && i < n; i++)
        for (int y = 0; y < h; y++) {
            int y0 = 2 + (i / cols) * (h + 2), x0 = 2 + (i % cols) * (w + 2);
            memcpy(tiles + ((size_t)i * h + y) * w * ch, px + ((size_t)(y0 + y) * gw + x0) * ch, (size_t)w * ch);
        }
    free(px);
    return okay ? 0 : -1;
}

/* The first n MNIST test images, read here from the IDX file (big-endian header). */
static unsigned char *mnist_test(int n) {
    char path[4096];
    snprintf(path, sizeof path, "%s/mnist/t10k-images-idx3-ubyte.gz", getenv("LINGEN_DATA") ? getenv("LINGEN_DATA") : "data");
    gzFile f = gzopen(path, "rb");
    unsigned char head[16], *x = malloc((size_t)n * 784);
    int got = f && gzread(f, head, 16) == 16 && head[2] == 8 && head[3] == 3 && gzread(f, x, n * 784) == n * 784;
    if (f) gzclose(f);
    if (!got) {
        fprintf(stderr, "test_lib: cannot read %s\n", path);
        free(x);
        return NULL;
    }
    return x;
}

static lingen_model *open_model(lingen_precision p, int threads) {
    lingen_open_options o = {device, p, threads};
    lingen_model *m = NULL;
    lingen_error err;
    if (lingen_open(model_path, &o, &m, &err)) fprintf(stderr, "test_lib: %s\n", err.message);
    return m;
}

static void test_open_errors(void) {
    lingen_model *m = (lingen_model *)&m;
    lingen_error err;
    lingen_status s = lingen_open("no-such-model-xyz", NULL, &m, &err);
    check(s == LINGEN_ERR_NOT_FOUND && !m && strstr(err.message, "no-such-model-xyz") && err.status == s,
          "open: an unknown name is LINGEN_ERR_NOT_FOUND, named", "%s: %s", lingen_status_name(s), err.message);
    s = lingen_open("/nonexistent/dir/m.bin", NULL, &m, &err);
    check(s == LINGEN_ERR_NOT_FOUND, "open: a missing path is LINGEN_ERR_NOT_FOUND", "%s: %s", lingen_status_name(s),
          err.message);
    char junk[4200];
    snprintf(junk, sizeof junk, "%s/junk.bin", tmp);
    FILE *f = fopen(junk, "wb");
    fputs("not a model", f);
    fclose(f);
    s = lingen_open(junk, NULL, &m, &err);
    check(s == LINGEN_ERR_MODEL && strstr(err.message, "junk.bin"), "open: a file that is no model is LINGEN_ERR_MODEL",
          "%s: %s", lingen_status_name(s), err.message);
    lingen_open_options bad = {LINGEN_DEVICE_CPU, LINGEN_PRECISION_AUTO, -1};
    s = lingen_open(model_path, &bad, &m, &err);
    check(s == LINGEN_ERR_ARGUMENT && strstr(err.message, "threads"), "open: threads -1 is LINGEN_ERR_ARGUMENT", "%s: %s",
          lingen_status_name(s), err.message);
    bad = (lingen_open_options){(lingen_device)7, LINGEN_PRECISION_AUTO, 0};
    s = lingen_open(model_path, &bad, &m, &err);
    check(s == LINGEN_ERR_ARGUMENT, "open: device 7 is LINGEN_ERR_ARGUMENT", "%s", lingen_status_name(s));
    check(lingen_open(NULL, NULL, &m, NULL) == LINGEN_ERR_ARGUMENT && lingen_open(model_path, NULL, NULL, NULL) == LINGEN_ERR_ARGUMENT,
          "open: NULL name or NULL model is LINGEN_ERR_ARGUMENT, err may be NULL", "");
    bad = (lingen_open_options){LINGEN_DEVICE_CUDA, LINGEN_PRECISION_AUTO, 0};
    s = lingen_open(model_path, &bad, &m, &err);
    check(s == LINGEN_OK || s == LINGEN_ERR_DEVICE, "open: device cuda opens or is LINGEN_ERR_DEVICE", "%s: %s",
          lingen_status_name(s), err.message);
    lingen_close(m);
    lingen_close(NULL);
}

/* The accessors against lingen info --json. */
static void test_info(lingen_model *m) {
    char json[4200];
    snprintf(json, sizeof json, "%s/info.json", tmp);
    cJSON *o = run("%s info -m %s --json %s", cli, model_path, json) ? NULL : read_json(json);
    check(o != NULL, "info: lingen info --json ran", "");
    if (!o) return;
    const cJSON *att = cJSON_GetObjectItemCaseSensitive(o, "attention"), *ds = cJSON_GetObjectItemCaseSensitive(o, "dataset");
    const cJSON *meta = cJSON_GetObjectItemCaseSensitive(o, "metadata");
    int same = json_number(o, "height") == lingen_height(m) && json_number(o, "width") == lingen_width(m) &&
               json_number(o, "channels") == lingen_channels(m) && json_number(o, "seq_len") == lingen_seq_len(m) &&
               json_number(o, "layers") == lingen_layers(m) && json_number(o, "n_heads") == lingen_heads(m) &&
               json_number(o, "d") == lingen_d_model(m) && json_number(o, "d_ff") == lingen_d_ff(m) &&
               json_number(o, "n_mix") == lingen_mixtures(m) && json_number(o, "parameters") == (double)lingen_parameters(m) &&
               cJSON_IsString(att) && !strcmp(att->valuestring, lingen_attention(m)) && cJSON_IsString(ds) &&
               !strcmp(ds->valuestring, lingen_dataset(m)) && cJSON_GetArraySize(meta) == lingen_meta_count(m);
    for (int i = 0; same && i < lingen_meta_count(m); i++) {
        const cJSON *v = cJSON_GetObjectItemCaseSensitive(meta, lingen_meta_key(m, i));
        same = cJSON_IsString(v) && !strcmp(v->valuestring, lingen_meta_value(m, i)) &&
               lingen_meta(m, lingen_meta_key(m, i)) == lingen_meta_value(m, i);
    }
    check(same, "info: every accessor equals lingen info --json", "height %d width %d channels %d layers %d %s",
          lingen_height(m), lingen_width(m), lingen_channels(m), lingen_layers(m), lingen_attention(m));
    check(lingen_meta(m, "no such key") == NULL && lingen_meta_key(m, -1) == NULL && lingen_meta_key(m, lingen_meta_count(m)) == NULL,
          "info: an absent key or index is NULL", "");
    if (device == LINGEN_DEVICE_CPU)   /* the command's info reads the model for the CPU */
        check(json_number(o, "weight_bytes_held") == (double)lingen_weight_bytes(m) && lingen_weight_bytes(NULL) == 0,
              "info: lingen_weight_bytes equals lingen info's weights held", "%zu vs %.0f", lingen_weight_bytes(m),
              json_number(o, "weight_bytes_held"));
    cJSON_Delete(o);
}

/* The library's images of a run equal the command's grid: seed 7, batch (0: both default). */
static void test_sample_grid(lingen_model *m, int n, int batch, const char *name) {
    int N = lingen_seq_len(m);
    unsigned char *cli_imgs = malloc((size_t)n * N), *lib = malloc((size_t)n * N);
    char grid[4200], opt[32] = "";
    snprintf(grid, sizeof grid, "%s/grid.png", tmp);
    if (batch) snprintf(opt, sizeof opt, "-b %d", batch);
    int got = !run("%s sample -m %s -n %d -s 7 %s%s -o %s", cli, model_path, n, opt, device_opt, grid) &&
              !read_grid(grid, n, 0, lingen_height(m), lingen_width(m), lingen_channels(m), cli_imgs);
    lingen_run_options o = lingen_run_options_default();
    o.seed = 7;
    o.batch = batch;
    int done = -1;
    lingen_error err;
    lingen_status s = lingen_sample(m, n, &o, lib, &done, &err);
    check(got && s == LINGEN_OK && done == n && !memcmp(cli_imgs, lib, (size_t)n * N), name, "grid read %d, %s, done %d: %s",
          got, lingen_status_name(s), done, s ? err.message : "the bytes differ");
    free(cli_imgs);
    free(lib);
}

/* first: a run of images 2, 3 alone equals the last two of a run of four (the same batch). */
static void test_first(lingen_model *m) {
    int N = lingen_seq_len(m);
    unsigned char *all = malloc(4 * (size_t)N), *tail = malloc(2 * (size_t)N), *one = malloc(4 * (size_t)N);
    lingen_run_options o = lingen_run_options_default();
    o.batch = 2;
    lingen_status a = lingen_sample(m, 4, &o, all, NULL, NULL);
    o.first = 2;
    lingen_status b = lingen_sample(m, 2, &o, tail, NULL, NULL);
    check(!a && !b && !memcmp(all + 2 * (size_t)N, tail, 2 * (size_t)N), "sample: first = 2 gives images 2 and 3 of the job",
          "%s %s", lingen_status_name(a), lingen_status_name(b));
    o.first = 0;
    o.threads = 1;
    lingen_status c = lingen_sample(m, 4, &o, one, NULL, NULL);
    check(!c && !memcmp(all, one, 4 * (size_t)N), "sample: one thread draws the same bytes as every core", "%s",
          lingen_status_name(c));
    free(all);
    free(tail);
    free(one);
}

/* Completions equal the command's: its grid has, per input, the original, the occluded input,
 * then the samples. */
static void test_complete(lingen_model *m, const unsigned char *test) {
    int N = lingen_seq_len(m), h = lingen_height(m), w = lingen_width(m), K = 2, n = 2, rows = 14;
    unsigned char *tiles = malloc((size_t)n * (K + 2) * N), *out = malloc((size_t)n * K * N);
    char grid[4200];
    snprintf(grid, sizeof grid, "%s/complete.png", tmp);
    int got = !run("%s complete -m %s -i 0-1 -k %d -r %d -o %s", cli, model_path, K, rows, grid) &&
              !read_grid(grid, n * (K + 2), K + 2, h, w, lingen_channels(m), tiles);
    int done = -1;
    lingen_error err;
    lingen_status s = lingen_complete(m, test, n, rows * w, K, NULL, out, &done, &err);
    int same = got && s == LINGEN_OK && done == n * K;
    for (int i = 0; same && i < n; i++)
        same = !memcmp(tiles + ((size_t)i * (K + 2) + 2) * N, out + (size_t)i * K * N, (size_t)K * N) &&
               !memcmp(out + (size_t)i * K * N, test + (size_t)i * N, (size_t)rows * w);
    check(same, "complete: equal to lingen complete's grid, the kept rows the inputs'", "grid read %d, %s, done %d: %s", got,
          lingen_status_name(s), done, s ? err.message : "the bytes differ");
    free(tiles);
    free(out);
}

/* The batches a call runs at: the defaults of lingen sample, eval and complete (their --help) on
 * the CPU, an option's batch, never more than the images. */
static void test_batch(lingen_model *m) {
    lingen_run_options o = lingen_run_options_default();
    int sample = lingen_batch(m, LINGEN_TASK_SAMPLE, 1000, NULL), bpd = lingen_batch(m, LINGEN_TASK_BITS_PER_DIM, 1000, NULL),
        complete = lingen_batch(m, LINGEN_TASK_COMPLETE, 1000, NULL), few = lingen_batch(m, LINGEN_TASK_SAMPLE, 3, NULL);
    o.batch = 5;
    int asked = lingen_batch(m, LINGEN_TASK_BITS_PER_DIM, 1000, &o), none = lingen_batch(m, LINGEN_TASK_SAMPLE, 0, NULL);
    check(sample == 64 && bpd == 16 && complete == 16 && few == 3 && asked == 5 && none == 1 && !lingen_batch(NULL, 0, 1, NULL),
          "batch: the command's defaults (64, 16, 16), min(n, ...), the option's", "%d %d %d %d %d %d", sample, bpd, complete,
          few, asked, none);
}

/* The memory a call holds beside the weights: more for a bigger batch, by at least an image's
 * attention memory (a linear model's RNN state, a softmax model's KV cache: lingen info's
 * figures, from the accessors); the parallel form holds every position, the step form one. */
static void test_run_bytes(lingen_model *m) {
    size_t L = lingen_layers(m), H = lingen_heads(m), D = lingen_d_model(m) / H, N = lingen_seq_len(m);
    size_t image = strcmp(lingen_attention(m), "linear") ? L * N * 2 * H * D * 4 : L * H * (D * D + D) * 4;
    size_t s0 = lingen_run_bytes(m, LINGEN_TASK_SAMPLE, 0, 0, NULL), s1 = lingen_run_bytes(m, LINGEN_TASK_SAMPLE, 1, 0, NULL),
           s64 = lingen_run_bytes(m, LINGEN_TASK_SAMPLE, 64, 0, NULL);
    check(s0 > 0 && s1 - s0 >= image && s64 - s0 >= 64 * image, "run_bytes: a sampled image adds its attention memory at least",
          "%zu %zu %zu, an image's %zu", s0, s1, s64, image);
    lingen_run_options step = lingen_run_options_default();
    step.step_form = 1;
    size_t par = lingen_run_bytes(m, LINGEN_TASK_BITS_PER_DIM, 1, 0, NULL), one = lingen_run_bytes(m, LINGEN_TASK_BITS_PER_DIM, 1, 0, &step);
    size_t kept = lingen_run_bytes(m, LINGEN_TASK_COMPLETE, 1, (int)N / 2, NULL);
    check(par > one && one == s1 && kept > s1 && kept < par, "run_bytes: the parallel form, a prefill of half, a step",
          "%zu, %zu, %zu, %zu", par, kept, one, s1);
    check(lingen_run_bytes(NULL, LINGEN_TASK_SAMPLE, 1, 0, NULL) == 0 && lingen_run_bytes(m, LINGEN_TASK_SAMPLE, -1, 0, NULL) == 0,
          "run_bytes: 0 for a NULL model or batch -1", "");
}

/* The kernel named for a call: the command's (its --json "products"), float32 for an f32 model and
 * for bits/dim, int8 at every batch under LINGEN_INT8=1 but for LINGEN_PRECISION_FASTEST. */
static void test_kernel(lingen_model *m) {
    char json[4200];
    snprintf(json, sizeof json, "%s/kernel.json", tmp);
    cJSON *o = run("%s sample -m %s -n 8 -b 8 -o %s/k.png --json %s", cli, model_path, tmp, json) ? NULL : read_json(json);
    const cJSON *products = o ? cJSON_GetObjectItemCaseSensitive(o, "products") : NULL;
    lingen_run_options eight = lingen_run_options_default();
    eight.batch = 8;
    const char *k = lingen_kernel(m, LINGEN_TASK_SAMPLE, 8, &eight), *want = !k ? "" : !strcmp(k, "AMX-BF16") ? "bfloat16" : k;
    check(cJSON_IsString(products) && !strcmp(products->valuestring, want), "kernel: the command's products at batch 8",
          "%s vs %s", k ? k : "NULL", cJSON_IsString(products) ? products->valuestring : "?");
    cJSON_Delete(o);
    lingen_model *f32 = open_model(LINGEN_PRECISION_F32, 0);
    check(f32 && !strcmp(lingen_kernel(f32, LINGEN_TASK_SAMPLE, 64, NULL), "float32") && !lingen_kernel(NULL, 0, 1, NULL),
          "kernel: float32 for an f32 model; NULL for NULL", "");
    lingen_close(f32);
    setenv("LINGEN_INT8", "1", 1);   /* read at each open */
    lingen_model *env = open_model(LINGEN_PRECISION_AUTO, 0), *fastest = open_model(LINGEN_PRECISION_FASTEST, 0);
    unsetenv("LINGEN_INT8");
    const char *bpd = env ? lingen_kernel(env, LINGEN_TASK_BITS_PER_DIM, 64, NULL) : "";
    check(env && fastest && !strcmp(lingen_kernel(env, LINGEN_TASK_SAMPLE, 64, NULL), "int8") &&
          strcmp(lingen_kernel(fastest, LINGEN_TASK_SAMPLE, 64, NULL), "int8") && (!strcmp(bpd, "float32") || !strcmp(bpd, "AMX")),
          "kernel: LINGEN_INT8=1 gives int8 at batch 64, not to FASTEST nor to bits/dim", "bits/dim %s", bpd);
    lingen_close(env);
    lingen_close(fastest);
}

/* bits/dim of the first n test images: their mean equals lingen eval's, both conventions. */
static void test_bits_per_dim(lingen_model *m, const unsigned char *test, int n) {
    char json[4200];
    snprintf(json, sizeof json, "%s/eval.json", tmp);
    cJSON *o = run("%s eval bits-per-dim -m %s --limit %d%s --json %s", cli, model_path, n, device_opt, json) ? NULL : read_json(json);
    double *per = calloc(n, sizeof(double)), *given = calloc(n, sizeof(double)), mean = 0, mean_given = 0;
    lingen_error err;
    lingen_status s = lingen_bits_per_dim(m, test, n, per, given, NULL, &err);
    for (int i = 0; i < n; i++) mean += per[i], mean_given += given[i];
    mean /= n;
    mean_given /= n;
    double want = o ? json_number(o, "bits_per_dim") : -1, want_given = o ? json_number(o, "bits_per_dim_first_given") : -1;
    check(o && s == LINGEN_OK && fabs(mean - want) < 1e-9 && fabs(mean_given - want_given) < 1e-9,
          "bits_per_dim: the mean equals lingen eval's (1e-9), first value given too", "%s %s: %.12f vs %.12f, %.12f vs %.12f",
          lingen_status_name(s), s ? err.message : "", mean, want, mean_given, want_given);
    lingen_run_options ro = lingen_run_options_default();
    ro.step_form = 1;
    ro.batch = 3;
    double *step = calloc(n, sizeof(double)), worst = 0;
    int n_step = n < 4 ? n : 4;   /* the step form is the slow one */
    s = lingen_bits_per_dim(m, test, n_step, step, NULL, &ro, &err);
    for (int i = 0; i < n_step; i++) worst = fabs(step[i] - per[i]) > worst ? fabs(step[i] - per[i]) : worst;
    check(s == LINGEN_OK && worst < 1e-4, "bits_per_dim: the step form agrees per image (1e-4)", "%s, %g",
          lingen_status_name(s), worst);
    cJSON_Delete(o);
    free(per);
    free(given);
    free(step);
}

typedef struct {
    volatile sig_atomic_t stop;
    lingen_model *m;
    int calls, monotone, nested;
    double last, total;
} Watch;

static void on_progress(void *user, double done, double total) {
    Watch *w = user;
    if (done < w->last) w->monotone = 0;
    w->last = done;
    w->total = total;
    if (w->calls++ == 0 && w->m) {   /* back into lingen from its own callback */
        unsigned char one[4096];
        w->nested = lingen_sample(w->m, 1, NULL, one, NULL, NULL);
    }
    if (done > total / 2) w->stop = 1;
}

/* A stop flag set halfway: the first batch finished, the status LINGEN_STOPPED; the progress
 * counts up to the positions drawn; a call from inside the callback is refused. */
static void test_stop_progress(lingen_model *m, const unsigned char *full) {
    int N = lingen_seq_len(m);
    unsigned char *imgs = calloc(4, N);
    Watch w = {0, m, 0, 1, -1, 0, 0};
    lingen_run_options o = lingen_run_options_default();
    o.batch = 2;
    o.stop = &w.stop;
    o.progress = on_progress;
    o.progress_user = &w;
    int done = -1;
    lingen_error err;
    lingen_status s = lingen_sample(m, 4, &o, imgs, &done, &err);
    check(s == LINGEN_STOPPED && done == 2 && err.status == s && !memcmp(imgs, full, 2 * (size_t)N),
          "sample: a stop halfway returns LINGEN_STOPPED and the first batch's images", "%s, done %d",
          lingen_status_name(s), done);
    check(w.calls > 0 && w.monotone && w.total == 4.0 * N, "sample: progress counts up, of n x values positions",
          "%d calls, total %g", w.calls, w.total);
    check(w.nested == LINGEN_ERR_ARGUMENT, "sample: a call from inside its progress callback is refused", "%s",
          lingen_status_name(w.nested));
    free(imgs);
}

/* bits/dim of 5 images at batch 2, stopped by the progress callback past half of them: in the
 * parallel form after the second batch's pass (4 finished), in the step form inside it (2). The
 * finished figures equal an unstopped run's; the others are NAN; progress counts images. */
static void test_bits_per_dim_stop(lingen_model *m, const unsigned char *test) {
    for (int form = 0; form < 2; form++) {
        double per[5], given[5], whole[5], whole_given[5];
        Watch w = {0, NULL, 0, 1, -1, 0, 0};
        lingen_run_options o = lingen_run_options_default();
        o.batch = 2;
        o.step_form = form;
        lingen_error err;
        lingen_status s0 = lingen_bits_per_dim(m, test, 5, whole, whole_given, &o, &err);
        o.stop = &w.stop;
        o.progress = on_progress;
        o.progress_user = &w;
        lingen_status s = lingen_bits_per_dim(m, test, 5, per, given, &o, &err);
        int k = form ? 2 : 4, same = 1;
        for (int i = 0; i < 5; i++)
            same &= i < k ? per[i] == whole[i] && given[i] == whole_given[i] : isnan(per[i]) && isnan(given[i]);
        char want[64];
        snprintf(want, sizeof want, "bits_per_dim: stopped after %d of 5 images", k);
        check(s0 == LINGEN_OK && s == LINGEN_STOPPED && err.status == s && !strcmp(err.message, want) && same,
              form ? "bits_per_dim: a stop in the step form: the batches before it, the rest NAN"
                   : "bits_per_dim: a stop past half: the batches finished, the rest NAN",
              "%s, %s", lingen_status_name(s), err.message);
        check(w.calls > 0 && w.monotone && w.total == 5, "bits_per_dim: progress counts up, in images", "%d calls, total %g",
              w.calls, w.total);
    }
}

static void test_bad_arguments(lingen_model *m) {
    unsigned char buf[4096];
    double d[4];
    lingen_error err;
    lingen_run_options o = lingen_run_options_default();
    check(lingen_sample(m, -1, NULL, buf, NULL, &err) == LINGEN_ERR_ARGUMENT && strstr(err.message, "n = -1"),
          "bad: n = -1", "%s", err.message);
    check(lingen_sample(m, 1, NULL, NULL, NULL, &err) == LINGEN_ERR_ARGUMENT, "bad: a NULL buffer", "%s", err.message);
    check(lingen_sample(NULL, 1, NULL, buf, NULL, &err) == LINGEN_ERR_ARGUMENT, "bad: a NULL model", "%s", err.message);
    o.temperature = 0.001;
    check(lingen_sample(m, 1, &o, buf, NULL, &err) == LINGEN_ERR_ARGUMENT && strstr(err.message, "temperature"),
          "bad: temperature 0.001", "%s", err.message);
    o = lingen_run_options_default();
    o.first = -5;
    check(lingen_sample(m, 1, &o, buf, NULL, &err) == LINGEN_ERR_ARGUMENT, "bad: first -5", "%s", err.message);
    o = lingen_run_options_default();
    o.step_form = 2;
    check(lingen_bits_per_dim(m, buf, 1, d, NULL, &o, &err) == LINGEN_ERR_ARGUMENT, "bad: step_form 2", "%s", err.message);
    check(lingen_bits_per_dim(m, buf, 1, NULL, NULL, NULL, &err) == LINGEN_ERR_ARGUMENT, "bad: bits_per_dim without per_image",
          "%s", err.message);
    int N = lingen_seq_len(m);
    check(lingen_complete(m, buf, 1, N, 1, NULL, buf, NULL, &err) == LINGEN_ERR_ARGUMENT && strstr(err.message, "keep"),
          "bad: keep = seq_len", "%s", err.message);
    check(lingen_complete(m, buf, 1, 0, 0, NULL, buf, NULL, &err) == LINGEN_ERR_ARGUMENT, "bad: samples 0", "%s", err.message);
    check(lingen_complete(m, buf, 3, 0, 0x40000000, NULL, buf, NULL, &err) == LINGEN_ERR_ARGUMENT,
          "bad: n x samples over INT_MAX", "%s", err.message);
    o = lingen_run_options_default();
    o.batch = 1 << 30;
    lingen_status s = lingen_sample(m, 1 << 30, &o, buf, NULL, &err);
    check(s == LINGEN_ERR_MEMORY && strstr(err.message, "batch"), "bad: a batch no memory holds is LINGEN_ERR_MEMORY",
          "%s: %s", lingen_status_name(s), err.message);
    check(lingen_sample(m, 0, NULL, NULL, NULL, &err) == LINGEN_OK && err.status == LINGEN_OK && !err.message[0],
          "sample: n = 0 is fine, and err says LINGEN_OK", "%s", err.message);
    check(!strcmp(lingen_status_name(LINGEN_ERR_MEMORY), "LINGEN_ERR_MEMORY") &&
          !strcmp(lingen_status_name((lingen_status)99), "LINGEN_UNKNOWN"), "status names", "");
}

/* Two models at once, on two threads, each with its own precision and threads: each draws what
 * it draws alone. */
typedef struct {
    lingen_model *m;
    unsigned char *out;
    lingen_status s;
} Job;

/* Three runs of the same two images (a race shows on some runs only): the status of the first
 * that fails or draws other bytes than the first run. */
static void *job(void *p) {
    Job *j = p;
    lingen_run_options o = lingen_run_options_default();
    o.seed = 3;
    size_t bytes = 2 * (size_t)lingen_seq_len(j->m);
    unsigned char *again = malloc(bytes);
    j->s = lingen_sample(j->m, 2, &o, j->out, NULL, NULL);
    for (int k = 0; k < 2 && !j->s; k++)
        if ((j->s = lingen_sample(j->m, 2, &o, again, NULL, NULL)) == LINGEN_OK && memcmp(again, j->out, bytes))
            j->s = LINGEN_ERR_RUN;
    free(again);
    return NULL;
}

static void test_two_models(lingen_model *a) {
    lingen_model *b = open_model(LINGEN_PRECISION_F32, 1);
    int N = lingen_seq_len(a);
    unsigned char *alone = malloc(4 * (size_t)N), *both = malloc(4 * (size_t)N);
    Job ja = {a, alone, 0}, jb = {b, alone + 2 * (size_t)N, 0};
    job(&ja);
    if (b) job(&jb);
    Job ka = {a, both, 0}, kb = {b, both + 2 * (size_t)N, 0};
    pthread_t ta, tb;
    pthread_create(&ta, NULL, job, &ka);
    if (b) pthread_create(&tb, NULL, job, &kb);
    pthread_join(ta, NULL);
    if (b) pthread_join(tb, NULL);
    check(b && !ja.s && !jb.s && !ka.s && !kb.s && !memcmp(alone, both, 4 * (size_t)N),
          "two models (auto, f32 on 1 thread) sampling on two threads at once draw as each alone", "%s %s",
          lingen_status_name(ka.s), lingen_status_name(kb.s));
    lingen_close(b);
    free(alone);
    free(both);
}

int main(int argc, char **argv) {
    setvbuf(stdout, NULL, _IOLBF, 0);   /* each line as it comes, between the command's runs */
    int quick = argc > 1 && !strcmp(argv[1], "--quick");
    cli = getenv("LINGEN") ? getenv("LINGEN") : "./lingen";
    model_path = getenv("LINGEN_TEST_MODEL") ? getenv("LINGEN_TEST_MODEL") : "models/mnist.bin";
    tmp = getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
    char version[64];
    snprintf(version, sizeof version, "lingen %s\n", LINGEN_VERSION);
    char path[4200], line[256] = "";
    snprintf(path, sizeof path, "%s/cli.out", tmp);
    FILE *f = run("%s --version", cli) ? NULL : fopen(path, "r");
    if (f) {
        if (!fgets(line, sizeof line, f)) line[0] = 0;
        fclose(f);
    }
    check(!strcmp(lingen_version(), LINGEN_VERSION) && !strcmp(line, version), "version: the header's, the library's, the command's",
          "%s, %s, %s", LINGEN_VERSION, lingen_version(), line);
    if (getenv("LINGEN_TEST_DEVICE") && !strcmp(getenv("LINGEN_TEST_DEVICE"), "cuda")) {
        device = LINGEN_DEVICE_CUDA;
        device_opt = " --device cuda";
    }
    lingen_model *m = open_model(LINGEN_PRECISION_AUTO, 0);
    check(m != NULL && !strcmp(lingen_dataset(m), "mnist") && lingen_model_device(m) == device, "open: an MNIST model",
          "%s", model_path);
    if (!m) return 1;
    test_info(m);
    test_sample_grid(m, 4, 0, "sample: equal to lingen sample's grid, byte for byte (seed 7, default batch)");
    unsigned char *test = mnist_test(10);
    check(test != NULL, "the MNIST test images read", "");
    if (test) test_bits_per_dim(m, test, 10);
    if (!quick) {
        test_sample_grid(m, 5, 2, "sample: equal to lingen sample's grid, byte for byte (seed 7, batch 2)");
        test_open_errors();
        test_first(m);
        test_bad_arguments(m);
        if (device == LINGEN_DEVICE_CPU) {
            test_batch(m);
            test_run_bytes(m);
            test_kernel(m);
        }
        unsigned char *full = malloc(4 * (size_t)lingen_seq_len(m));
        lingen_run_options o = lingen_run_options_default();
        o.batch = 2;
        lingen_sample(m, 4, &o, full, NULL, NULL);
        test_stop_progress(m, full);
        free(full);
        if (test) test_bits_per_dim_stop(m, test);
        test_two_models(m);
        if (test) test_complete(m, test);
    }
    free(test);
    lingen_close(m);
    printf("%d failed\n", fails);
    return fails ? 1 : 0;
}
