/* lingen sample: generate images and write them as a PNG grid (and one PNG each). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "io/anim.h"
#include "args.h"
#include "engine/ceiling.h"
#include "cli_job.h"
#include "commands.h"
#include "lib/engine_model.h"
#include "io/modelpath.h"
#include "io/output.h"
#include "io/image.h"
#include "engine/shard.h"
#include "stop.h"
#include "engine/transformer.h"

/* --animate: the GIF (path NULL: none), a frame every `every` positions shown delay_ms each (0
 * until set: the defaults). */
typedef struct { const char *path; long every, delay_ms; } Animation;

/* A run of lingen sample: its options, then what its steps found. */
typedef struct {
    CliJob job;
    const char *out, *outdir;   /* -o, --outdir (NULL: none) */
    long n, seed;
    double temperature;
    Animation anim;
    long first, count;          /* this rank's images; rank 0 gathers them all */
    unsigned char *imgs;        /* [n on rank 0, else count][seq_len] */
} Sampling;

/* The grid of the `total` images gathered on rank 0 (and its animation), and each rank's `done`
 * tiles (image first on) in outdir: each rank writes its files to temporary names, and only when
 * every rank has done so are they all renamed into place (an MPI job: shard.h; one process is
 * rank 0 of 1). */
static int write_images(const CliShape *c, const unsigned char *imgs, long total, long done, long first,
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

/* -o, --outdir's tiles and --json: no two of them one file. Returns 0, or EXIT_USAGE after a message. */
static int check_outputs_distinct(const char *out, const char *outdir, const char *json, const char *anim, long n) {
    const char *names[3][2] = {{"-o", out}, {"--json", json}, {"--animate", anim}};
    for (int i = 0; i < 3; i++)
        for (int k = i + 1; k < 3; k++)
            if (cli_check_distinct("sample", names[i][0], names[i][1], names[k][0], names[k][1])) return EXIT_USAGE;
    for (int i = 0; i < 3 && outdir; i++)
        if (names[i][1] && names_tile(names[i][1], outdir, n)) {
            fprintf(stderr, "lingen sample: %s %s is one of the images --outdir %s writes\n", names[i][0], names[i][1], outdir);
            return EXIT_USAGE;
        }
    return 0;
}

/* --animate's options, before the model is read: its name, the delay a GIF can hold (hundredths
 * of a second), at most one output on standard output. Returns 0, or EXIT_USAGE after a message. */
static int check_animation(Animation *a, const char *out, const char *json) {
    if (!a->path) {
        if (!a->every && !a->delay_ms) return 0;
        fprintf(stderr, "lingen sample: --%s needs --animate FILE\n", a->every ? "frame-every" : "frame-delay");
        return EXIT_USAGE;
    }
    if (cli_check_image_name("sample", "--animate", a->path, ".gif", "GIF")) return EXIT_USAGE;
    if (a->delay_ms % 10) {
        fprintf(stderr, "lingen sample: --frame-delay %ld: a GIF's delays are in hundredths of a second; "
                        "give a multiple of 10\n", a->delay_ms);
        return EXIT_USAGE;
    }
    if (!strcmp(a->path, "-") && (!strcmp(out, "-") || (json && !strcmp(json, "-")))) {
        fprintf(stderr, "lingen sample: --animate - and %s cannot both write to standard output\n",
                !strcmp(out, "-") ? "-o -" : "--json -");
        return EXIT_USAGE;
    }
    if (!a->delay_ms) a->delay_ms = ANIM_DELAY_MS;
    return 0;
}

/* Before the work: can the animation of n images be written, and is its size bounded by
 * ANIM_LIMIT_BYTES? (sets the default frame spacing). Returns 0, EXIT_FAIL (an unwritable path) or EXIT_USAGE (too
 * large: a usage error), after a message. */
static int check_animation_size(Animation *a, const lingen_model *m, long n) {
    int N = lingen_seq_len(m);
    if (!a->every) a->every = anim_default_every(N);
    double bytes = anim_max_bytes((int)n, lingen_height(m), lingen_width(m), lingen_channels(m), (int)a->every);
    if (bytes > ANIM_LIMIT_BYTES) {
        fprintf(stderr, "lingen sample: --animate %s: %ld frames of %ld images could take %.0f MB, over the "
                        "limit of %.0f MB; give a larger --frame-every or a smaller -n\n", a->path,
                anim_frames(N, (int)a->every), n, bytes / 1e6, ANIM_LIMIT_BYTES / 1e6);
        return EXIT_USAGE;
    }
    Err e;
    if (output_check(a->path, &e)) {
        fprintf(stderr, "lingen: %s\n", e.msg);
        return EXIT_FAIL;
    }
    return 0;
}

/* The products' arithmetic of a kernel (lingen_kernel's name), as --json names it and as the
 * closing line does ("" for float32). */
static const char *arithmetic(const char *kernel) {
    if (!strcmp(kernel, "int8")) return "int8";
    return !strcmp(kernel, "bfloat16") || !strcmp(kernel, "AMX-BF16") ? "bfloat16" : "float32";
}
static const char *arithmetic_note(const char *kernel) {
    return !strcmp(kernel, "int8")       ? ", 8-bit weights"
           : !strcmp(kernel, "AMX-BF16") ? ", bfloat16 products on AMX tiles"
           : !strcmp(kernel, "bfloat16") ? ", bfloat16 products"
                                         : "";
}

/* --json: what the closing line (and --ceiling's) prints. */
static cJSON *sample_json(const Sampling *s, const char *arith, long done, double secs) {
    const lingen_model *m = s->job.m;
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "model", s->job.model);
    cJSON_AddStringToObject(o, "dataset", lingen_dataset(m));
    cJSON_AddStringToObject(o, "attention", lingen_attention(m));
    cJSON_AddStringToObject(o, "mode", cli_linear(m) ? "RNN" : "KV cache");
    cJSON_AddNumberToObject(o, "height", lingen_height(m));
    cJSON_AddNumberToObject(o, "width", lingen_width(m));
    cJSON_AddNumberToObject(o, "channels", lingen_channels(m));
    cJSON_AddNumberToObject(o, "images", done);
    cJSON_AddNumberToObject(o, "batch", s->job.batch);
    cJSON_AddStringToObject(o, "products", arith);
    cJSON_AddNumberToObject(o, "seed", (double)s->seed);
    cJSON_AddNumberToObject(o, "seconds", secs);
    cJSON_AddNumberToObject(o, "images_per_s", done / secs);
    cJSON_AddStringToObject(o, "output", s->out);
    if (s->outdir) cJSON_AddStringToObject(o, "outdir", s->outdir);
    if (s->anim.path) {
        cJSON_AddStringToObject(o, "animation", s->anim.path);
        cJSON_AddNumberToObject(o, "frames", anim_frames(lingen_seq_len(m), (int)s->anim.every));
        cJSON_AddNumberToObject(o, "frame_every", s->anim.every);
        cJSON_AddNumberToObject(o, "frame_delay_ms", s->anim.delay_ms);
    }
    return o;
}

/* argv's options into s (args.h): 0, -1 after --help, or EXIT_USAGE after a message. */
static int sample_parse(Sampling *s, int argc, char **argv) {
    CliJob *j = &s->job;
    Opt opts[] = {
        OPT_MODEL(j->model),
        OPT_IMAGES(s->n, "number of images (default 16)"),
        OPT_BATCH(j->batch, 65536, "images generated at once (default min(N, 64); on a GPU up to 4096, as 8 GB hold)"),
        OPT_SEED(s->seed, "random seed (default 1); image k depends only on (seed, k)"),
        OPT_TEMPERATURE(s->temperature),
        OPT_RUN_ROWS(j),
        OPT_OUTPUT(s->out, "PNG grid, a name ending in .png (default samples.png)"),
        {"outdir", 0, OPT_STR, &s->outdir, "DIR", "also write one PNG per image into DIR", 0, 0},
        {"animate", 0, OPT_STR, &s->anim.path, "FILE", "also write a looping GIF of the grid filling in, sub-pixel by sub-pixel (a name ending in .gif)", 0, 0},
        {"frame-every", 0, OPT_INT, &s->anim.every, "K", "--animate: a frame every K sub-pixels (default: N/64 rounded up, 13 for MNIST, 48 for CIFAR-10; 1 + ceil(N/K) frames, the first empty)", 1, 1000000},
        {"frame-delay", 0, OPT_INT, &s->anim.delay_ms, "MS", "--animate: milliseconds a frame, a multiple of 10 (default 50); the last shows at least 2000", 20, 10000},
        OPT_REPORT_ROWS(j),
    };
    return args_parse(argc, argv, 2, opts, sizeof opts / sizeof opts[0], "sample",
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
}

/* The options' values that need no model: the outputs' names, --temperature, --ceiling. Returns
 * 0, or EXIT_USAGE after a message. */
static int check_options(Sampling *s) {
    const char *out = s->out, *json = s->job.json;
    if (cli_check_png_name("sample", out) || check_animation(&s->anim, out, json)) return EXIT_USAGE;
    if (json && !strcmp(json, "-") && !strcmp(out, "-")) {
        fprintf(stderr, "lingen sample: --json - and -o - cannot both write to standard output\n");
        return EXIT_USAGE;
    }
    if (check_outputs_distinct(out, s->outdir, json, s->anim.path, s->n)) return EXIT_USAGE;
    if (cli_check_temperature("sample", s->temperature, s->job.device)) return EXIT_USAGE;
    if (cli_check_ceiling("sample", s->job.ceiling)) return EXIT_USAGE;
    return EXIT_OK;
}

/* Before the work, on every rank: --json, the model, this rank's share of the images, the
 * outputs, threads and memory checked, and the images' buffer. Returns the rc every rank agreed. */
static int prepare(Sampling *s) {
    CliJob *j = &s->job;
    int rank = shard_rank();
    cli_job_json(j);
    shard_range(s->n, rank, shard_size(), &s->first, &s->count);
    if (cli_job_open_model(j)) return cli_job_agree(j);
    CliShape c = cli_shape(j->m);
    size_t N = (size_t)lingen_seq_len(j->m);
    j->batch = lingen_batch(j->m, LINGEN_TASK_SAMPLE, (int)s->n, cli_job_run(j, NULL));   /* at most n */
    Err e;
    if (image_check_outputs(rank == 0 ? s->out : NULL, s->outdir, s->first, s->count, c.channels, &e) ||
        (rank == 0 && image_check_grid(s->out, (int)s->n, c.height, c.width, c.channels, 0, &e)))
        cli_job_fail(j, &e);   /* before the work, not after */
    if (!j->rc && s->anim.path && rank == 0) j->rc = check_animation_size(&s->anim, j->m, s->n);
    cli_job_threads(j);
    long held = rank == 0 ? s->n : s->count, rank_batch = j->batch < s->count ? j->batch : s->count;
    cli_job_memory(j, LINGEN_TASK_SAMPLE, rank_batch, 0, (size_t)held * N);
    if (!j->rc && !(s->imgs = try_calloc(held > 0 ? held : 1, N, "images", &e))) cli_job_fail(j, &e);
    return cli_job_agree(j);
}

/* Rank 0's closing line (on stdout, or stderr where stdout is an image), --ceiling's lines and
 * --json, for the total images done in secs. Returns 0, or EXIT_FAIL for a JSON not written. */
static int report(const Sampling *s, long total, double secs) {
    const CliJob *j = &s->job;
    const Config *c = &lib_engine_model(j->m)->cfg;   /* --ceiling's figures */
    char temp[48] = "", ranks[32], animated[4200] = "";
    const char *kernel = lingen_kernel(j->m, LINGEN_TASK_SAMPLE, (int)s->n, &j->run);
    if (s->temperature != 1) snprintf(temp, sizeof temp, ", temperature %g", s->temperature);
    /* -o - or --animate -: stdout is the image */
    FILE *info = strcmp(s->out, "-") && !(s->anim.path && !strcmp(s->anim.path, "-")) ? stdout : stderr;
    if (s->anim.path)
        snprintf(animated, sizeof animated, "; %ld frames -> %s", anim_frames(lingen_seq_len(j->m), (int)s->anim.every),
                 s->anim.path);
    fprintf(info, "sampled %ld image%s (%dx%dx%d, %s attention, batch %ld%s%s%s) in %.2f s: %.3f images/s -> %s%s\n",
            total, total == 1 ? "" : "s", lingen_height(j->m), lingen_width(j->m), lingen_channels(j->m),
            cli_linear(j->m) ? "linear/RNN" : "softmax/KV-cache", j->batch, arithmetic_note(kernel), temp,
            cli_ranks_text(ranks, sizeof ranks), secs, total / secs, s->out, animated);
    CliReport r = {.images = total, .seconds = secs, .flops = transformer_flops_per_image(c), .ceiling = j->ceiling};
    cli_report_ceiling(&r, "ceiling: ", CEILING_STEPS, ceiling_state_traffic(c, j->batch));
    return j->json ? cli_report_json(sample_json(s, arithmetic(kernel), total, secs), &r, j->json) : EXIT_OK;
}

/* The images generated (a signal stops them early), gathered on rank 0 and written, and the
 * report. Returns the exit code: 128 + the signal's number where one stopped the job. */
static int run(Sampling *s) {
    CliJob *j = &s->job;
    int rank = shard_rank(), N = lingen_seq_len(j->m), done = 0;
    stop_on_signals();
    Progress prog;
    progress_start_positions(&prog, "sampling", s->n, N);
    progress_share(&prog, (double)s->count / s->n, rank == 0);
    lingen_run_options *o = cli_job_run(j, &prog);
    o->seed = (uint64_t)s->seed;
    o->first = s->first;
    o->temperature = s->temperature;
    o->stop = &stop_signal;
    double t0 = now_seconds();
    lingen_error err;
    lingen_status st = lingen_sample(j->m, (int)s->count, o, s->imgs, &done, &err);
    progress_end(&prog);
    if (st && st != LINGEN_STOPPED) {
        size_t need = lingen_run_bytes(j->m, LINGEN_TASK_SAMPLE, (int)j->batch, 0, o);
        fprintf(stderr, "lingen: %s (needs %.1f MB for batch %ld)\n", cli_job_problem(&err), need / 1e6, j->batch);
        j->rc = EXIT_FAIL;
    }
    if (cli_job_agree(j)) return j->rc;
    int stopped = shard_max(stop_signal);   /* a signal to any rank stops the job */
    long total = shard_gather(s->imgs, done, N);   /* on rank 0: every rank's finished images */
    double secs = now_seconds() - t0;              /* so far as the slowest rank */
    CliShape c = cli_shape(j->m);
    int written = write_images(&c, s->imgs, total, done, s->first, s->out, s->outdir, &s->anim) == 0;
    if (stopped) {
        if (written && total > 0 && rank == 0)
            fprintf(stderr, "lingen: interrupted: wrote the %ld finished image%s to %s\n", total, total == 1 ? "" : "s",
                    s->out);
        else if (total == 0 && rank == 0)
            fprintf(stderr, "lingen: interrupted before any image was finished; nothing written\n");
        return 128 + stopped;
    }
    if (!written) return EXIT_FAIL;
    return rank == 0 ? report(s, total, secs) : EXIT_OK;
}

int cmd_sample(int argc, char **argv) {
    Sampling s = {.job = {.cmd = "sample", .device = "cpu"}, .out = "samples.png", .n = 16, .seed = 1,
                  .temperature = 1};
    int rc = sample_parse(&s, argc, argv);
    if (rc) return rc < 0 ? EXIT_OK : rc;
    if (check_options(&s)) return EXIT_USAGE;
    /* From here a failure can be one rank's alone (a file, a GPU): every rank learns of it at the
     * next agreement (cli_job.h), and all stop together. */
    if (cli_job_options(&s.job, 1) == EXIT_USAGE) return EXIT_USAGE;
    rc = prepare(&s);
    if (!rc) rc = run(&s);
    free(s.imgs);
    cli_job_free(&s.job);
    return rc;
}
