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
#include "modelpath.h"
#include "device.h"
#include "generate.h"
#include "image.h"
#include "stop.h"
#include "jsonout.h"
#include "transformer.h"

/* The grid, then one PNG per image in outdir (all or nothing). */
static int write_images(const Model *m, const unsigned char *imgs, int n, const char *grid, const char *outdir) {
    const Config *c = &m->cfg;
    Err e;
    if (image_write_set(grid, outdir, imgs, n, c->height, c->width, c->channels, &e) == 0) return 0;
    fprintf(stderr, "lingen: %s\n", e.msg);
    return -1;
}

/* --json: what the closing line (and --ceiling's) prints. */
static cJSON *sample_json(const char *path, const Config *c, int done, long batch, long seed, double secs,
                          const char *out, const char *outdir) {
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "model", path);
    cJSON_AddStringToObject(o, "dataset", c->dataset);
    cJSON_AddStringToObject(o, "attention", c->attention == ATTN_LINEAR ? "linear" : "softmax");
    cJSON_AddStringToObject(o, "mode", c->attention == ATTN_LINEAR ? "RNN" : "KV cache");
    cJSON_AddNumberToObject(o, "height", c->height);
    cJSON_AddNumberToObject(o, "width", c->width);
    cJSON_AddNumberToObject(o, "channels", c->channels);
    cJSON_AddNumberToObject(o, "images", done);
    cJSON_AddNumberToObject(o, "batch", batch);
    cJSON_AddNumberToObject(o, "seed", (double)seed);
    cJSON_AddNumberToObject(o, "seconds", secs);
    cJSON_AddNumberToObject(o, "images_per_s", done / secs);
    cJSON_AddStringToObject(o, "output", out);
    if (outdir) cJSON_AddStringToObject(o, "outdir", outdir);
    return o;
}

int cmd_sample(int argc, char **argv) {
    const char *path = NULL, *out = "samples.png", *outdir = NULL, *json = NULL;
    long n = 16, batch = 0, seed = 1, threads = 0;
    double temperature = 1;
    int ceiling = 0;
    const char *device = "cpu";
    Opt opts[] = {
        {"model", 'm', OPT_STR, &path, "NAME", "model file, or a name from lingen models (default mnist)", 0, 0},
        {"n", 'n', OPT_INT, &n, "N", "number of images (default 16)", 1, 1000000},
        {"batch", 'b', OPT_INT, &batch, "B", "images generated at once (default min(N, 64))", 1, 4096},
        {"seed", 's', OPT_INT, &seed, "S", "random seed (default 1); image k depends only on (seed, k)", 0, 0x7fffffffffffffffL},
        {"temperature", 0, OPT_DOUBLE, &temperature, "T", TEMPERATURE_HELP, 0, 0},
        {"threads", 't', OPT_INT, &threads, "T", "threads (default: every usable core; more: LINGEN_FORCE_THREADS=1)", 0, 1024},
        {"device", 0, OPT_STR, &device, "cpu|cuda", "run the model on the CPU (default) or an NVIDIA GPU (builds made with CUDA=1)", 0, 0},
        {"output", 'o', OPT_STR, &out, "FILE", "PNG grid, a name ending in .png (default samples.png)", 0, 0},
        {"outdir", 0, OPT_STR, &outdir, "DIR", "also write one PNG per image into DIR", 0, 0},
        {"ceiling", 0, OPT_FLAG, &ceiling, NULL, "also measure sgemm now and report the fraction of it reached", 0, 0},
        {"json", 0, OPT_STR, &json, "FILE", "also write the figures as JSON (- for stdout; the text goes to stderr)", 0, 0},
    };
    int r = args_parse(argc, argv, 2, opts, sizeof opts / sizeof opts[0], "sample",
                       "Generate images one sub-pixel at a time: linear-attention models run as RNNs\n"
                       "(constant memory per image), softmax models with a KV cache. Ctrl-C (SIGINT) or\n"
                       "SIGTERM writes the images finished so far and exits with code 130 or 143.\n"
                       "-o - writes the PNG to standard output.",
                       NULL, 0, NULL);
    if (r) return r < 0 ? 0 : r;
    if (cli_check_png_name("sample", out)) return 2;
    if (json && !strcmp(json, "-") && !strcmp(out, "-")) {
        fprintf(stderr, "lingen sample: --json - and -o - cannot both write to standard output\n");
        return 2;
    }
    if (json && jsonout_prepare(json)) return 1;
    if (cli_check_temperature("sample", temperature)) return 2;
    if ((r = device_option(device, "sample", 1))) return r;
    if (temperature != 1 && strcmp(device, "cpu")) {   /* the GPU sampler draws at T = 1 only */
        fprintf(stderr, "lingen sample: --temperature needs --device cpu\n");
        return 2;
    }
    if (!batch) batch = n < 64 ? n : 64;
    char found[MODELPATH_LEN];
    Model m;
    if (modelpath_find(path ? path : "mnist", found, sizeof found) || cli_load_model(&m, path = found)) return 1;
    const Config *c = &m.cfg;
    Err e;
    if (image_check_outputs(out, outdir, c->channels, &e)) {   /* before the work, not after */
        fprintf(stderr, "lingen: %s\n", e.msg);
        model_free(&m);
        return 1;
    }
    cli_set_threads(threads);

    if (batch > n) batch = n;   /* generate() never runs more at once */
    if (cli_check_memory(&m, "sample", batch, 1, (size_t)n * c->seq_len)) { model_free(&m); return 1; }
    size_t need = runstate_bytes(c, (int)batch, 1);
    unsigned char *imgs = try_calloc((size_t)n, c->seq_len, "images", &e);
    if (!imgs) { fprintf(stderr, "lingen: %s\n", e.msg); model_free(&m); return 1; }

    stop_on_signals();
    Progress prog;
    progress_start_positions(&prog, "sampling", n, c->seq_len);
    GenOptions go = {.seed = (uint64_t)seed, .batch = (int)batch, .temperature = temperature, .stop = &stop_signal,
                     .progress = &prog};
    double t0 = now_seconds();
    int done = generate(&m, imgs, (int)n, &go, &e);
    double secs = now_seconds() - t0;
    progress_end(&prog);
    int rc = 0;
    if (done < 0) {
        fprintf(stderr, "lingen: %s (needs %.1f MB for batch %ld)\n", e.msg, need / 1e6, batch);
        rc = 1;
    } else if (stop_signal) {
        if (done > 0 && write_images(&m, imgs, done, out, outdir) == 0)
            fprintf(stderr, "lingen: interrupted: wrote the %d finished image%s to %s\n", done, done == 1 ? "" : "s", out);
        else if (done == 0)
            fprintf(stderr, "lingen: interrupted before any image was finished; nothing written\n");
        rc = 128 + stop_signal;
    } else if (write_images(&m, imgs, done, out, outdir)) {
        rc = 1;
    } else {
        char temp[48] = "";
        if (temperature != 1) snprintf(temp, sizeof temp, ", temperature %g", temperature);
        FILE *info = strcmp(out, "-") ? stdout : stderr;   /* -o -: stdout is the PNG */
        fprintf(info, "sampled %d image%s (%dx%dx%d, %s attention, batch %ld%s) in %.2f s: %.3f images/s -> %s\n", done,
                done == 1 ? "" : "s", c->height, c->width, c->channels,
                c->attention == ATTN_LINEAR ? "linear/RNN" : "softmax/KV-cache", batch, temp, secs, done / secs, out);
        double flops = transformer_flops_per_image(c), sgemm = 0;
        if (ceiling)   /* FLOP per image / sgemm GFLOP/s: the most images/s these cores allow */
            sgemm = ceiling_report("ceiling: ", flops, done / secs);
        if (json) {
            cJSON *o = sample_json(path, c, done, batch, seed, secs, out, outdir);
            if (ceiling) cJSON_AddItemToObject(o, "ceiling", jsonout_ceiling(flops, done / secs, sgemm));
            if (jsonout_write(o, json, &e)) { fprintf(stderr, "lingen: %s\n", e.msg); rc = 1; }
            cJSON_Delete(o);
        }
    }
    free(imgs);
    model_free(&m);
    return rc;
}
