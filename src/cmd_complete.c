/* lingen complete: keep the top rows of test images (or of PNG files) and sample the rest K times.
 * The kept rows go through the parallel form once, then the state carries on in step form. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "args.h"
#include "commands.h"
#include "modelpath.h"
#include "output.h"
#include "device.h"
#include "complete.h"
#include "image.h"
#include "transformer.h"

/* The inputs [n][N]: the test images listed by index (if any), then the PNG files.
 * Returns 0, or the exit code: 2 for a bad index list, 1 for missing data or a bad PNG. */
static int load_inputs(const Model *m, const char *path, const char *data, const char *index, const char **files,
                       int n_files, unsigned char **inputs, int *n) {
    const Config *c = &m->cfg;
    int N = c->seq_len, *idx = NULL, n_idx = 0;
    Err e;
    Dataset ds = {0};
    if (index) {
        if (cli_load_dataset(&ds, m, path, data, "test", 0)) return 1;
        if (index_list_parse(index, ds.n, &idx, &n_idx, &e)) {
            fprintf(stderr, "lingen complete: --index %s: %s\n", index, e.msg);
            dataset_free(&ds);
            return 2;
        }
    }
    *n = n_idx + n_files;
    *inputs = xcalloc((size_t)*n, N);
    for (int i = 0; i < n_idx; i++) memcpy(*inputs + (size_t)i * N, ds.images + (size_t)idx[i] * N, N);
    free(idx);
    dataset_free(&ds);
    for (int i = 0; i < n_files; i++) {
        if (image_read_png(files[i], *inputs + (size_t)(n_idx + i) * N, c->height, c->width, c->channels, &e)) {
            fprintf(stderr, "lingen: %s\n", e.msg);
            free(*inputs);
            *inputs = NULL;
            return 1;
        }
    }
    return 0;
}

int cmd_complete(int argc, char **argv) {
    const char *path = NULL, *data = NULL, *index = NULL, *out = "completions.png";
    long rows = 0, K = 4, seed = 1, batch = 0, threads = 0;
    double temperature = 1;
    const char *device = "cpu", *precision = NULL;
    int force = 0;
    Opt opts[] = {
        OPT_MODEL(path),
        OPT_DATA(data),
        {"index", 'i', OPT_STR, &index, "LIST", "test images, e.g. 0-9, 3 or 0-4,7 (default 0-9 when no PNG is given)", 0, 0},
        {"image", 0, OPT_POS, NULL, "PNG", "an image of the model's size to complete (repeatable)", 0, 0},
        {"rows", 'r', OPT_INT, &rows, "R", "keep the top R rows (default half the height)", 1, 1000000},
        {"samples", 'k', OPT_INT, &K, "K", "completions per input (default 4)", 1, 1024},
        OPT_SEED(seed, "random seed (default 1); completion j depends only on (seed, j)"),
        OPT_TEMPERATURE(temperature),
        OPT_BATCH(batch, 4096, "images generated at once (default min(inputs x K, 16))"),
        OPT_THREADS(threads),
        OPT_DEVICE(device),
        OPT_PRECISION(precision),
        OPT_OUTPUT(out, "PNG grid, a name ending in .png (default completions.png)"),
        OPT_FORCE(force),
    };
    const char **files = xcalloc((size_t)argc, sizeof *files);
    int n_files = 0;
    int r = args_parse(argc, argv, 2, opts, sizeof opts / sizeof opts[0], "complete",
                       "Keep the top R rows of each input and sample the rest K times. Inputs: test images by\n"
                       "--index, and PNG files given as arguments or with --image. The kept rows go through the\n"
                       "parallel form once; the attention memory (RNN state or KV cache) then continues in step\n"
                       "form. The grid has one row per input: the original, the input with its hidden part grey,\n"
                       "then the K completions.",
                       files, argc, &n_files);
    if (!r && cli_check_png_name("complete", out)) r = 2;
    if (r) { free(files); return r < 0 ? 0 : r; }
    output_set_force(force);
    if (cli_check_temperature("complete", temperature, device)) { free(files); return 2; }
    if (cli_precision("complete", precision)) { free(files); return 2; }
    if ((r = device_option(device, "complete", 1))) { free(files); return r; }
    if (!index && !n_files) index = "0-9";
    char found[MODELPATH_LEN];
    Model m;
    if (cli_open_model(&m, &path, found)) {
        free(files);
        return 1;
    }
    const Config *c = &m.cfg;
    if (!rows) rows = c->height / 2;
    if (rows >= c->height) {
        fprintf(stderr, "lingen complete: --rows %ld: must be in 1..%d for the model's %dx%d images\n", rows,
                c->height - 1, c->height, c->width);
        free(files);
        model_free(&m);
        return 2;
    }
    Err e;
    if (image_check_outputs(out, NULL, 0, 0, c->channels, &e)) {   /* before the work, not after */
        fprintf(stderr, "lingen: %s\n", e.msg);
        free(files);
        model_free(&m);
        return 1;
    }
    cli_set_threads(threads);

    unsigned char *inputs = NULL, *imgs = NULL, *tiles = NULL;
    int n = 0, N = c->seq_len, P = (int)rows * c->width * c->channels;
    int rc = load_inputs(&m, path, data, index, files, n_files, &inputs, &n);
    free(files);
    if (rc) { model_free(&m); return rc; }
    if (image_check_grid(out, n * ((int)K + 2), c->height, c->width, c->channels, (int)K + 2, &e)) {
        fprintf(stderr, "lingen: %s\n", e.msg);
        free(inputs);
        model_free(&m);
        return 1;
    }
    int total = n * (int)K;
    if (!batch) batch = total < 16 ? total : 16;   /* not sample's 64: the prefill holds B x P positions */
    if (batch > total) batch = total;
    if (cli_check_memory(&m, "complete", batch, P > 1 ? P : 1, (size_t)total * N + (size_t)n * (K + 2) * N)) {
        free(inputs);
        model_free(&m);
        return 1;
    }
    imgs = try_calloc((size_t)total, N, "images", &e);
    tiles = imgs ? try_calloc((size_t)n * (K + 2), N, "grid", &e) : NULL;
    if (!tiles) {
        fprintf(stderr, "lingen: %s\n", e.msg);
        rc = 1;
        goto out;
    }

    Progress prog;
    progress_start_positions(&prog, "completing", total, N - P);
    GenOptions go = {.seed = (uint64_t)seed, .batch = (int)batch, .temperature = temperature, .progress = &prog};
    double t0 = now_seconds();
    int done = complete_images(&m, inputs, n, (int)K, P, &go, imgs, &e);
    double secs = now_seconds() - t0;
    progress_end(&prog);
    if (done < 0) {
        fprintf(stderr, "lingen: %s (needs %.1f MB for batch %ld)\n", e.msg, runstate_bytes(c, (int)batch, P) / 1e6,
                batch);
        rc = 1;
        goto out;
    }
    complete_tiles(inputs, imgs, n, (int)K, N, P, tiles);
    if (image_write_grid(out, tiles, n * ((int)K + 2), c->height, c->width, c->channels, (int)K + 2, &e)) {
        fprintf(stderr, "lingen: %s\n", e.msg);
        rc = 1;
        goto out;
    }
    char temp[48] = "";
    if (temperature != 1) snprintf(temp, sizeof temp, ", temperature %g", temperature);
    fprintf(strcmp(out, "-") ? stdout : stderr,   /* -o -: stdout is the PNG */
            "completed %d input%s x %ld sample%s (top %ld of %d rows kept; %s attention, batch %ld%s) in %.2f s: "
            "%.3f images/s -> %s\n", n, n == 1 ? "" : "s", K, K == 1 ? "" : "s", rows, c->height,
            c->attention == ATTN_LINEAR ? "linear/RNN" : "softmax/KV-cache", batch, temp, secs, total / secs, out);
out:
    free(tiles);
    free(imgs);
    free(inputs);
    model_free(&m);
    return rc;
}
