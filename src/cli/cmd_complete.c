/* lingen complete: keep the top rows of test images (or of PNG files) and sample the rest K times.
 * The kept rows go through the parallel form once, then the state carries on in step form. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "args.h"
#include "cli_job.h"
#include "commands.h"
#include "engine/complete.h"
#include "io/image.h"

/* A run of lingen complete: its options, then what its steps found. */
typedef struct {
    CliJob job;
    const char *index, *out;    /* --index (NULL: none), -o */
    const char **files;         /* the PNG files, n_files of them */
    int n_files;
    long rows, K, seed;
    double temperature;
    int n, P;                   /* inputs; sub-pixels kept of each */
    unsigned char *inputs;      /* [n][N] */
    unsigned char *imgs;        /* [n * K][N]: the completions */
    unsigned char *tiles;       /* [n * (K + 2)][N]: the grid */
} Completion;

/* The inputs [n][N]: the test images listed by --index (if any), then the PNG files. Returns 0,
 * or the exit code after a message: EXIT_USAGE for a bad index list, EXIT_FAIL for missing data
 * or a bad PNG. */
static int load_inputs(Completion *k) {
    const CliJob *j = &k->job;
    CliShape c = cli_shape(j->m);
    int N = lingen_seq_len(j->m), *idx = NULL, n_idx = 0;
    Err e;
    Dataset ds = {0};
    if (k->index) {
        if (cli_load_dataset(&ds, &c, j->model, j->data, "test", 0)) return EXIT_FAIL;
        if (index_list_parse(k->index, ds.n, &idx, &n_idx, &e)) {
            fprintf(stderr, "lingen complete: --index %s: %s\n", k->index, e.msg);
            dataset_free(&ds);
            return EXIT_USAGE;
        }
    }
    k->n = n_idx + k->n_files;
    k->inputs = xcalloc((size_t)k->n, N);
    for (int i = 0; i < n_idx; i++) memcpy(k->inputs + (size_t)i * N, ds.images + (size_t)idx[i] * N, N);
    free(idx);
    dataset_free(&ds);
    for (int i = 0; i < k->n_files; i++)
        if (image_read_png(k->files[i], k->inputs + (size_t)(n_idx + i) * N, c.height, c.width, c.channels, &e)) {
            fprintf(stderr, "lingen: %s\n", e.msg);
            return EXIT_FAIL;
        }
    return EXIT_OK;
}

/* argv's options into k (args.h), then those that need no model checked and the shared ones
 * applied (cli_job.h). Returns 0, -1 after --help, or the exit code after a message. */
static int complete_options(Completion *k, int argc, char **argv) {
    CliJob *j = &k->job;
    Opt opts[] = {
        OPT_MODEL(j->model),
        OPT_DATA(j->data),
        {"index", 'i', OPT_STR, &k->index, "LIST", "test images, e.g. 0-9, 3 or 0-4,7 (default 0-9 when no PNG is given)", 0, 0},
        {"image", 0, OPT_POS, NULL, "PNG", "an image of the model's size to complete (repeatable)", 0, 0},
        {"rows", 'r', OPT_INT, &k->rows, "R", "keep the top R rows (default half the height)", 1, 1000000},
        {"samples", 'k', OPT_INT, &k->K, "K", "completions per input (default 4)", 1, 1024},
        OPT_SEED(k->seed, "random seed (default 1); completion j depends only on (seed, j)"),
        OPT_TEMPERATURE(k->temperature),
        OPT_BATCH(j->batch, 4096, "images generated at once (default min(inputs x K, 16))"),
        OPT_RUN_ROWS(j),
        OPT_OUTPUT(k->out, "PNG grid, a name ending in .png (default completions.png)"),
        OPT_FORCE(j->force),
    };
    int r = args_parse(argc, argv, 2, opts, sizeof opts / sizeof opts[0], "complete",
                       "Keep the top R rows of each input and sample the rest K times. Inputs: test images by\n"
                       "--index, and PNG files given as arguments or with --image. The kept rows go through the\n"
                       "parallel form once; the attention memory (RNN state or KV cache) then continues in step\n"
                       "form. The grid has one row per input: the original, the input with its hidden part grey,\n"
                       "then the K completions.",
                       k->files, argc, &k->n_files);
    if (!r && cli_check_png_name("complete", k->out)) r = EXIT_USAGE;
    if (r) return r;
    if (cli_check_temperature("complete", k->temperature, j->device)) return EXIT_USAGE;
    return cli_job_options(j, 1);
}

/* Before the work: the model, --rows, the output, threads, the inputs, the grid's size and the
 * memory checked, and the buffers. Returns 0, or the exit code after a message. */
static int prepare(Completion *k) {
    CliJob *j = &k->job;
    if (!k->index && !k->n_files) k->index = "0-9";
    if (cli_job_open_model(j)) return j->rc;
    CliShape c = cli_shape(j->m);
    if (!k->rows) k->rows = c.height / 2;
    if (k->rows >= c.height) {
        fprintf(stderr, "lingen complete: --rows %ld: must be in 1..%d for the model's %dx%d images\n", k->rows,
                c.height - 1, c.height, c.width);
        return EXIT_USAGE;
    }
    Err e;
    if (image_check_outputs(k->out, NULL, 0, 0, c.channels, &e)) return cli_job_fail(j, &e);   /* before the work */
    cli_job_threads(j);
    int rc = load_inputs(k), N = lingen_seq_len(j->m), cols = (int)k->K + 2;
    if (rc) return rc;
    if (image_check_grid(k->out, k->n * cols, c.height, c.width, c.channels, cols, &e)) return cli_job_fail(j, &e);
    int total = k->n * (int)k->K;
    j->batch = lingen_batch(j->m, LINGEN_TASK_COMPLETE, total, cli_job_run(j, NULL));   /* at most the completions */
    k->P = (int)k->rows * c.width * c.channels;
    if (cli_job_memory(j, LINGEN_TASK_COMPLETE, j->batch, k->P, (size_t)total * N + (size_t)k->n * cols * N))
        return j->rc;
    k->imgs = try_calloc((size_t)total, N, "images", &e);
    k->tiles = k->imgs ? try_calloc((size_t)k->n * cols, N, "grid", &e) : NULL;
    return k->tiles ? EXIT_OK : cli_job_fail(j, &e);
}

/* The completions sampled, the grid written and the closing line printed. Returns 0, or
 * EXIT_FAIL after a message. */
static int run(Completion *k) {
    CliJob *j = &k->job;
    CliShape c = cli_shape(j->m);
    int N = lingen_seq_len(j->m), total = k->n * (int)k->K, cols = (int)k->K + 2;
    Progress prog;
    progress_start_positions(&prog, "completing", total, N - k->P);
    lingen_run_options *o = cli_job_run(j, &prog);
    o->seed = (uint64_t)k->seed;
    o->temperature = k->temperature;
    double t0 = now_seconds();
    lingen_error err;
    lingen_status st = lingen_complete(j->m, k->inputs, k->n, k->P, (int)k->K, o, k->imgs, NULL, &err);
    double secs = now_seconds() - t0;
    progress_end(&prog);
    if (st) {
        size_t need = lingen_run_bytes(j->m, LINGEN_TASK_COMPLETE, (int)j->batch, k->P, o);
        fprintf(stderr, "lingen: %s (needs %.1f MB for batch %ld)\n", cli_job_problem(&err), need / 1e6, j->batch);
        return EXIT_FAIL;
    }
    complete_tiles(k->inputs, k->imgs, k->n, (int)k->K, N, k->P, k->tiles);
    Err e;
    if (image_write_grid(k->out, k->tiles, k->n * cols, c.height, c.width, c.channels, cols, &e))
        return cli_job_fail(j, &e);
    char temp[48] = "";
    if (k->temperature != 1) snprintf(temp, sizeof temp, ", temperature %g", k->temperature);
    fprintf(strcmp(k->out, "-") ? stdout : stderr,   /* -o -: stdout is the PNG */
            "completed %d input%s x %ld sample%s (top %ld of %d rows kept; %s attention, batch %ld%s) in %.2f s: "
            "%.3f images/s -> %s\n", k->n, k->n == 1 ? "" : "s", k->K, k->K == 1 ? "" : "s", k->rows, c.height,
            cli_linear(j->m) ? "linear/RNN" : "softmax/KV-cache", j->batch, temp, secs, total / secs, k->out);
    return EXIT_OK;
}

int cmd_complete(int argc, char **argv) {
    Completion k = {.job = {.cmd = "complete", .device = "cpu"}, .out = "completions.png", .K = 4, .seed = 1,
                    .temperature = 1};
    k.files = xcalloc((size_t)argc, sizeof *k.files);
    int rc = complete_options(&k, argc, argv);
    if (!rc) rc = prepare(&k);
    if (!rc) rc = run(&k);
    free(k.files);
    free(k.inputs);
    free(k.imgs);
    free(k.tiles);
    cli_job_free(&k.job);
    return rc < 0 ? EXIT_OK : rc;
}
