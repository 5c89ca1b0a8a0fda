/* lingen sample: generate images and write them as a PNG grid (and one PNG each). */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "args.h"
#include "ceiling.h"
#include "commands.h"
#include "device.h"
#include "generate.h"
#include "image.h"
#include "transformer.h"

static volatile sig_atomic_t interrupted;
static void on_sigint(int sig) { (void)sig; interrupted = 1; }

/* The grid, then one PNG per image in outdir. */
static int write_images(const Model *m, const unsigned char *imgs, int n, const char *grid, const char *outdir) {
    const Config *c = &m->cfg;
    Err e;
    if (image_write_grid(grid, imgs, n, c->height, c->width, c->channels, 0, &e)) {
        fprintf(stderr, "lingen: %s\n", e.msg);
        return -1;
    }
    if (!outdir) return 0;
    if (mkdir(outdir, 0777) && errno != EEXIST) {
        fprintf(stderr, "lingen: %s: cannot create directory: %s\n", outdir, strerror(errno));
        return -1;
    }
    for (int k = 0; k < n; k++) {
        char path[4096];
        snprintf(path, sizeof path, "%s/sample_%05d.png", outdir, k);
        if (image_write_png(path, imgs + (size_t)k * c->seq_len, c->height, c->width, c->channels, &e)) {
            fprintf(stderr, "lingen: %s\n", e.msg);
            return -1;
        }
    }
    return 0;
}

int cmd_sample(int argc, char **argv) {
    const char *path = NULL, *out = "samples.png", *outdir = NULL;
    long n = 16, batch = 0, seed = 1, threads = 0;
    int ceiling = 0;
    const char *device = "cpu";
    Opt opts[] = {
        {"model", 'm', OPT_STR, &path, "FILE", "model file (default models/mnist.bin)", 0, 0},
        {"n", 'n', OPT_INT, &n, "N", "number of images (default 16)", 1, 1000000},
        {"batch", 'b', OPT_INT, &batch, "B", "images generated at once (default min(N, 64))", 1, 4096},
        {"seed", 's', OPT_INT, &seed, "S", "random seed (default 1); image k depends only on (seed, k)", 0, 0x7fffffffffffffffL},
        {"threads", 't', OPT_INT, &threads, "T", "threads (default: every core)", 0, 1024},
        {"device", 0, OPT_STR, &device, "cpu|cuda", "run the model on the CPU (default) or an NVIDIA GPU (builds made with CUDA=1)", 0, 0},
        {"output", 'o', OPT_STR, &out, "FILE", "PNG grid (default samples.png)", 0, 0},
        {"outdir", 0, OPT_STR, &outdir, "DIR", "also write one PNG per image into DIR", 0, 0},
        {"ceiling", 0, OPT_FLAG, &ceiling, NULL, "also measure sgemm now and report the fraction of it reached", 0, 0},
    };
    int r = args_parse(argc, argv, 2, opts, sizeof opts / sizeof opts[0], "sample",
                       "Generate images one sub-pixel at a time: linear-attention models run as RNNs\n"
                       "(constant memory per image), softmax models with a KV cache. Ctrl-C writes the\n"
                       "images finished so far and exits with code 130.",
                       NULL, 0, NULL);
    if (r) return r < 0 ? 0 : r;
    if ((r = device_option(device, "sample", 1))) return r;
    if (!batch) batch = n < 64 ? n : 64;
    path = cli_find_file(path, "models/mnist.bin");
    Model m;
    if (cli_load_model(&m, path)) return 1;
    const Config *c = &m.cfg;
    cli_set_threads(threads);

    if (batch > n) batch = n;   /* generate() never runs more at once */
    if (cli_check_memory(&m, "sample", batch, 1, (size_t)n * c->seq_len)) { model_free(&m); return 1; }
    Err e;
    size_t need = runstate_bytes(c, (int)batch, 1);
    unsigned char *imgs = try_calloc((size_t)n, c->seq_len, "images", &e);
    if (!imgs) { fprintf(stderr, "lingen: %s\n", e.msg); model_free(&m); return 1; }

    struct sigaction sa = {0};
    sa.sa_handler = on_sigint;
    sigaction(SIGINT, &sa, NULL);
    Progress prog;
    progress_start(&prog, "images", n);
    GenOptions go = {.seed = (uint64_t)seed, .batch = (int)batch, .stop = &interrupted, .progress = &prog};
    double t0 = now_seconds();
    int done = generate(&m, imgs, (int)n, &go, &e);
    double secs = now_seconds() - t0;
    progress_end(&prog);
    int rc = 0;
    if (done < 0) {
        fprintf(stderr, "lingen: %s (needs %.1f MB for batch %ld)\n", e.msg, need / 1e6, batch);
        rc = 1;
    } else if (interrupted) {
        if (done > 0 && write_images(&m, imgs, done, out, outdir) == 0)
            fprintf(stderr, "lingen: interrupted: wrote the %d finished image%s to %s\n", done, done == 1 ? "" : "s", out);
        else if (done == 0)
            fprintf(stderr, "lingen: interrupted before any image was finished; nothing written\n");
        rc = 130;
    } else if (write_images(&m, imgs, done, out, outdir)) {
        rc = 1;
    } else {
        printf("sampled %d images (%dx%dx%d, %s attention, batch %ld) in %.2f s: %.3f images/s -> %s\n", done,
               c->height, c->width, c->channels, c->attention == ATTN_LINEAR ? "linear/RNN" : "softmax/KV-cache",
               batch, secs, done / secs, out);
        if (ceiling)   /* FLOP per image / sgemm GFLOP/s: the most images/s these cores allow */
            ceiling_report("ceiling: ", transformer_flops_per_image(c), done / secs);
    }
    free(imgs);
    model_free(&m);
    return rc;
}
