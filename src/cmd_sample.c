/* lingen sample: generate images and write them as a PNG grid (and one PNG each). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "anim.h"
#include "args.h"
#include "ceiling.h"
#include "commands.h"
#include "modelpath.h"
#include "output.h"
#include "device.h"
#include "generate.h"
#include "image.h"
#include "jsonout.h"
#include "shard.h"
#include "stop.h"
#include "transformer.h"

/* --animate: the GIF (path NULL: none), a frame every `every` positions shown delay_ms each (0
 * until set: the defaults). */
typedef struct { const char *path; long every, delay_ms; } Animation;

/* The grid of the `total` images gathered on rank 0 (and its animation), and each rank's `done`
 * tiles (image first on) in outdir: each rank writes its files to temporary names, and only when
 * every rank has done so are they all renamed into place (an MPI job: shard.h; one process is
 * rank 0 of 1). */
static int write_images(const Config *c, const unsigned char *imgs, long total, long done, long first,
                        const char *grid, const char *outdir, const Animation *anim) {
    OutputGroup g = {0};
    Err e;
    int rc = 0;
    if (shard_rank() == 0 && total > 0) rc = image_stage_grid(&g, grid, imgs, (int)total, c->height, c->width, c->channels, &e);
    if (!rc && shard_rank() == 0 && total > 0 && anim->path)
        rc = anim_stage(&g, anim->path, imgs, (int)total, c->height, c->width, c->channels, (int)anim->every,
                        (int)anim->delay_ms, &e);
    if (!rc && outdir && done > 0) rc = image_stage_tiles(&g, outdir, imgs, first, (int)done, c->height, c->width,
                                                          c->channels, &e);
    if (rc) fprintf(stderr, "lingen: %s\n", e.msg);
    if (shard_agree(rc ? EXIT_FAIL : 0)) {
        /* the temporary files of every rank first, then the directory one of them made */
        char *made = g.made_dir;
        g.made_dir = NULL;
        output_group_abort(&g);
        shard_barrier();
        if (made) rmdir(made);
        free(made);
        return EXIT_FAIL;
    }
    if (output_group_commit(&g, &e)) {
        fprintf(stderr, "lingen: %s\n", e.msg);
        rc = EXIT_FAIL;
    }
    return shard_agree(rc);
}

/* Is path one of the n tiles that --outdir writes (outdir/sample_00000.png, ...)? */
static int names_tile(const char *path, const char *outdir, long n) {
    const char *slash = strrchr(path, '/'), *base = slash ? slash + 1 : path;
    if (strncmp(base, "sample_", 7) || base[7] < '0' || base[7] > '9') return 0;
    long k = strtol(base + 7, NULL, 10);
    char name[64], tile[MODELPATH_LEN + 64];
    snprintf(name, sizeof name, "sample_%05ld.png", k);   /* the tile's name exactly, zeros and all */
    if (k >= n || strcmp(name, base) || snprintf(tile, sizeof tile, "%s/%s", outdir, name) >= (int)sizeof tile) return 0;
    return output_same(path, tile);
}

/* -o, --outdir's tiles and --json: no two of them one file. Returns 0, or 2 after a usage message. */
static int check_outputs_distinct(const char *out, const char *outdir, const char *json, const char *anim, long n) {
    const char *names[3][2] = {{"-o", out}, {"--json", json}, {"--animate", anim}};
    for (int i = 0; i < 3; i++)
        for (int k = i + 1; k < 3; k++)
            if (cli_check_distinct("sample", names[i][0], names[i][1], names[k][0], names[k][1])) return 2;
    for (int i = 0; i < 3 && outdir; i++)
        if (names[i][1] && names_tile(names[i][1], outdir, n)) {
            fprintf(stderr, "lingen sample: %s %s is one of the images --outdir %s writes\n", names[i][0], names[i][1], outdir);
            return 2;
        }
    return 0;
}

/* 64 images at once on the CPU. A GPU's step takes about as long for 4,096 images as for 64
 * (README, Speed: the GPU table): up to 4,096 there, as many as 8 GB of state or KV cache hold. */
static long default_batch(const Config *c) {
    if (device_current() != DEVICE_CUDA) return 64;
    return device_batch_fit((double)model_state_bytes(c, c->seq_len), 64, 4096);
}

/* The kernel of the layers' products in a run of this batch (plan.h); the GPU's keep float32's
 * accuracy. */
static Kernel products(const Model *m, long batch) {
    if (device_current() == DEVICE_CUDA) return KERNEL_F32;
    return transformer_step_products(m, (int)batch);
}

/* --animate's options, before the model is read: its name, the delay a GIF can hold (hundredths
 * of a second), at most one output on standard output. Returns 0, or 2 after a usage message. */
static int check_animation(Animation *a, const char *out, const char *json) {
    if (!a->path) {
        if (!a->every && !a->delay_ms) return 0;
        fprintf(stderr, "lingen sample: --%s needs --animate FILE\n", a->every ? "frame-every" : "frame-delay");
        return 2;
    }
    if (cli_check_image_name("sample", "--animate", a->path, ".gif", "GIF")) return 2;
    if (a->delay_ms % 10) {
        fprintf(stderr, "lingen sample: --frame-delay %ld: a GIF's delays are in hundredths of a second; "
                        "give a multiple of 10\n", a->delay_ms);
        return 2;
    }
    if (!strcmp(a->path, "-") && (!strcmp(out, "-") || (json && !strcmp(json, "-")))) {
        fprintf(stderr, "lingen sample: --animate - and %s cannot both write to standard output\n",
                !strcmp(out, "-") ? "-o -" : "--json -");
        return 2;
    }
    if (!a->delay_ms) a->delay_ms = ANIM_DELAY_MS;
    return 0;
}

/* Before the work: can the animation of n images be written, and is its size bounded by
 * ANIM_LIMIT_BYTES? (sets the default frame spacing). Returns 0, 1 (an unwritable path) or 2 (too
 * large: a usage error), after a message. */
static int check_animation_size(Animation *a, const Config *c, long n) {
    if (!a->every) a->every = anim_default_every(c->seq_len);
    double bytes = anim_max_bytes((int)n, c->height, c->width, c->channels, (int)a->every);
    if (bytes > ANIM_LIMIT_BYTES) {
        fprintf(stderr, "lingen sample: --animate %s: %ld frames of %ld images could take %.0f MB, over the "
                        "limit of %.0f MB; give a larger --frame-every or a smaller -n\n", a->path,
                anim_frames(c->seq_len, (int)a->every), n, bytes / 1e6, ANIM_LIMIT_BYTES / 1e6);
        return 2;
    }
    Err e;
    if (output_check(a->path, &e)) {
        fprintf(stderr, "lingen: %s\n", e.msg);
        return 1;
    }
    return 0;
}

/* The products' arithmetic, as --json names it and as the closing line does ("" for float32). */
static const char *arithmetic(Kernel k) {
    return k == KERNEL_INT8 ? "int8" : k == KERNEL_BF16 || k == KERNEL_AMX_BF16 ? "bfloat16" : "float32";
}
static const char *arithmetic_note(Kernel k) {
    return k == KERNEL_INT8       ? ", 8-bit weights"
           : k == KERNEL_AMX_BF16 ? ", bfloat16 products on AMX tiles"
           : k == KERNEL_BF16     ? ", bfloat16 products"
                                  : "";
}

/* --json: what the closing line (and --ceiling's) prints. */
static cJSON *sample_json(const char *path, const Config *c, const char *arith, long done, long batch, long seed,
                          double secs, const char *out, const char *outdir, const Animation *anim) {
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
    cJSON_AddStringToObject(o, "products", arith);
    cJSON_AddNumberToObject(o, "seed", (double)seed);
    cJSON_AddNumberToObject(o, "seconds", secs);
    cJSON_AddNumberToObject(o, "images_per_s", done / secs);
    cJSON_AddStringToObject(o, "output", out);
    if (outdir) cJSON_AddStringToObject(o, "outdir", outdir);
    if (anim->path) {
        cJSON_AddStringToObject(o, "animation", anim->path);
        cJSON_AddNumberToObject(o, "frames", anim_frames(c->seq_len, (int)anim->every));
        cJSON_AddNumberToObject(o, "frame_every", anim->every);
        cJSON_AddNumberToObject(o, "frame_delay_ms", anim->delay_ms);
    }
    jsonout_ranks(o);
    return o;
}

int cmd_sample(int argc, char **argv) {
    const char *path = NULL, *out = "samples.png", *outdir = NULL, *json = NULL;
    long n = 16, batch = 0, seed = 1, threads = 0;
    double temperature = 1;
    int ceiling = 0;
    const char *device = "cpu", *precision = NULL;
    Animation anim = {0};
    int force = 0;
    Opt opts[] = {
        OPT_MODEL(path),
        OPT_IMAGES(n, "number of images (default 16)"),
        OPT_BATCH(batch, 65536, "images generated at once (default min(N, 64); on a GPU up to 4096, as 8 GB hold)"),
        OPT_SEED(seed, "random seed (default 1); image k depends only on (seed, k)"),
        OPT_TEMPERATURE(temperature),
        OPT_THREADS(threads),
        OPT_DEVICE(device),
        OPT_PRECISION(precision),
        OPT_OUTPUT(out, "PNG grid, a name ending in .png (default samples.png)"),
        {"outdir", 0, OPT_STR, &outdir, "DIR", "also write one PNG per image into DIR", 0, 0},
        {"animate", 0, OPT_STR, &anim.path, "FILE", "also write a looping GIF of the grid filling in, sub-pixel by sub-pixel (a name ending in .gif)", 0, 0},
        {"frame-every", 0, OPT_INT, &anim.every, "K", "--animate: a frame every K sub-pixels (default: N/64 rounded up, 13 for MNIST, 48 for CIFAR-10; 1 + ceil(N/K) frames, the first empty)", 1, 1000000},
        {"frame-delay", 0, OPT_INT, &anim.delay_ms, "MS", "--animate: milliseconds a frame, a multiple of 10 (default 50); the last shows at least 2000", 20, 10000},
        OPT_CEILING(ceiling),
        OPT_JSON(json),
        OPT_FORCE(force),
    };
    int r = args_parse(argc, argv, 2, opts, sizeof opts / sizeof opts[0], "sample",
                       "Generate images one sub-pixel at a time: linear-attention models run as RNNs\n"
                       "(constant memory per image), softmax models with a KV cache. Ctrl-C (SIGINT) or\n"
                       "SIGTERM writes the images finished so far and exits with code 130 or 143.\n"
                       "-o - writes the PNG to standard output. On a CPU with AVX512-BF16 the layers'\n"
                       "products run in bfloat16 (LINGEN_BF16=0: float32; bits/dim within 1e-3); at\n"
                       "small batches on a CPU with AVX512-VNNI too on 8-bit weights, where memory is\n"
                       "the limit (bits/dim within 1e-3 too; LINGEN_INT8=1 every batch, =0 never).\n"
                       "--animate FILE also writes a GIF of the grid filling in, in the order drawn:\n"
                       "gray exact, RGB rounded to a 6x7x6 colour cube; refused before any work if it\n"
                       "could exceed 64 MB. It is made from the finished images, on any device.",
                       NULL, 0, NULL);
    if (r) return r < 0 ? 0 : r;
    output_set_force(force);
    if (cli_check_png_name("sample", out) || check_animation(&anim, out, json)) return 2;
    if (json && !strcmp(json, "-") && !strcmp(out, "-")) {
        fprintf(stderr, "lingen sample: --json - and -o - cannot both write to standard output\n");
        return 2;
    }
    if (check_outputs_distinct(out, outdir, json, anim.path, n)) return 2;
    if (cli_check_temperature("sample", temperature, device)) return 2;
    if (cli_check_ceiling("sample", ceiling)) return 2;
    if (cli_precision("sample", precision)) return 2;
    if ((r = device_option(device, "sample", 1)) == EXIT_USAGE) return r;
    /* From here a failure can be one rank's alone (a file, a GPU): every rank learns of it at the
     * next shard_agree, and all stop together. */
    int rc = r, rank = shard_rank();
    if (!rc && json && rank == 0 && jsonout_prepare(json)) rc = EXIT_FAIL;
    long first, count;   /* this rank's images; rank 0 gathers them all */
    shard_range(n, rank, shard_size(), &first, &count);
    char found[MODELPATH_LEN];
    Model m = {0};
    if (!rc && cli_open_model(&m, &path, found)) rc = EXIT_FAIL;
    const Config *c = &m.cfg;
    if (!batch) batch = rc ? 1 : default_batch(c);
    if (batch > n) batch = n;   /* generate() never runs more at once */
    Err e;
    if (!rc && (image_check_outputs(rank == 0 ? out : NULL, outdir, first, count, c->channels, &e) ||   /* before the work */
                (rank == 0 && image_check_grid(out, (int)n, c->height, c->width, c->channels, 0, &e)))) {
        fprintf(stderr, "lingen: %s\n", e.msg);
        rc = EXIT_FAIL;
    }
    if (!rc && anim.path && rank == 0) rc = check_animation_size(&anim, c, n);
    if (!rc) cli_set_threads(threads);
    long held = rank == 0 ? n : count, rank_batch = batch < count ? batch : count;
    if (!rc && cli_check_memory(&m, "sample", rank_batch, 1, (size_t)held * c->seq_len))
        rc = EXIT_FAIL;
    unsigned char *imgs = NULL;
    if (!rc && !(imgs = try_calloc(held > 0 ? held : 1, c->seq_len, "images", &e))) {
        fprintf(stderr, "lingen: %s\n", e.msg);
        rc = EXIT_FAIL;
    }
    if ((rc = shard_agree(rc))) goto out;

    stop_on_signals();
    Progress prog;
    progress_start_positions(&prog, "sampling", n, c->seq_len);
    progress_share(&prog, (double)count / n, rank == 0);
    GenOptions go = {.seed = (uint64_t)seed, .first = first, .batch = (int)batch, .temperature = temperature,
                     .stop = &stop_signal, .progress = &prog};
    double t0 = now_seconds();
    int done = generate(&m, imgs, (int)count, &go, &e);
    progress_end(&prog);
    if (done < 0) {
        size_t need = runstate_bytes(c, (int)batch, 1);
        fprintf(stderr, "lingen: %s (needs %.1f MB for batch %ld)\n", e.msg, need / 1e6, batch);
        rc = EXIT_FAIL;
    }
    if ((rc = shard_agree(rc))) goto out;
    int stopped = shard_max(stop_signal);   /* a signal to any rank stops the job */
    long total = shard_gather(imgs, done, c->seq_len);   /* on rank 0: every rank's finished images */
    double secs = now_seconds() - t0;                    /* so far as the slowest rank */
    int written = write_images(c, imgs, total, done, first, out, outdir, &anim) == 0;
    if (stopped) {
        if (written && total > 0 && rank == 0)
            fprintf(stderr, "lingen: interrupted: wrote the %ld finished image%s to %s\n", total, total == 1 ? "" : "s", out);
        else if (total == 0 && rank == 0)
            fprintf(stderr, "lingen: interrupted before any image was finished; nothing written\n");
        rc = 128 + stopped;
    } else if (!written) {
        rc = EXIT_FAIL;
    } else if (rank == 0) {
        char temp[48] = "", ranks[32] = "";
        Kernel kern = products(&m, batch);
        const char *arith = arithmetic(kern);
        if (temperature != 1) snprintf(temp, sizeof temp, ", temperature %g", temperature);
        if (shard_size() > 1) snprintf(ranks, sizeof ranks, ", %d ranks", shard_size());
        /* -o - or --animate -: stdout is the image */
        FILE *info = strcmp(out, "-") && !(anim.path && !strcmp(anim.path, "-")) ? stdout : stderr;
        char animated[4200] = "";
        if (anim.path)
            snprintf(animated, sizeof animated, "; %ld frames -> %s", anim_frames(c->seq_len, (int)anim.every),
                     anim.path);
        fprintf(info, "sampled %ld image%s (%dx%dx%d, %s attention, batch %ld%s%s%s) in %.2f s: %.3f images/s -> %s%s\n",
                total, total == 1 ? "" : "s", c->height, c->width, c->channels,
                c->attention == ATTN_LINEAR ? "linear/RNN" : "softmax/KV-cache", batch,
                arithmetic_note(kern),
                temp, ranks, secs, total / secs, out, animated);
        double flops = transformer_flops_per_image(c);
        Ceiling sgemm = {0};
        if (ceiling)   /* FLOP per image / sgemm GFLOP/s: the most images/s these cores allow */
            sgemm = ceiling_report("ceiling: ", flops, total / secs, CEILING_STEPS,
                                   ceiling_state_traffic(c, batch));
        if (json) {
            cJSON *o = sample_json(path, c, arith, total, batch, seed, secs, out, outdir, &anim);
            if (ceiling) cJSON_AddItemToObject(o, "ceiling", jsonout_ceiling(flops, total / secs, &sgemm));
            if (jsonout_write(o, json, &e)) { fprintf(stderr, "lingen: %s\n", e.msg); rc = 1; }
            cJSON_Delete(o);
        }
    }
out:
    free(imgs);
    model_free(&m);
    return rc;
}
