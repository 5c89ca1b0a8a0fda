/* What the subcommands share: finding and loading the model and the dataset, threads. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <strings.h>

#include <cblas.h>
#include <unistd.h>

#include "commands.h"
#include "engine/device.h"
#include "io/modelpath.h"
#include "io/output.h"
#include "kernels/plan.h"
#include "io/reslimits.h"
#include "io/settings.h"
#include "engine/shard.h"
#include "kernels/threads.h"
#include "engine/transformer.h"

int cli_check_image_name(const char *cmd, const char *opt, const char *path, const char *ext, const char *kind) {
    size_t n = strlen(path), k = strlen(ext);
    if (n > 1 && path[n - 1] == '/') {
        fprintf(stderr, "lingen %s: %s %s: a name ending in '/' is a directory's; give a file name ending in %s\n", cmd,
                opt, path, ext);
        return EXIT_USAGE;
    }
    if (!strcmp(path, "-") || (n > k && !strcasecmp(path + n - k, ext))) return 0;
    /* an existing device, FIFO or directory is not a file name to judge: the output check says
     * what it is (a device or FIFO is written directly, a directory refused) */
    struct stat st;
    if (stat(path, &st) == 0 && !S_ISREG(st.st_mode)) return 0;
    fprintf(stderr, "lingen %s: %s %s: only %s images are written; give a name ending in %s\n", cmd, opt, path, kind,
            ext);
    return EXIT_USAGE;
}

int cli_check_png_name(const char *cmd, const char *path) { return cli_check_image_name(cmd, "-o", path, ".png", "PNG"); }

int cli_check_distinct(const char *cmd, const char *opt_a, const char *a, const char *opt_b, const char *b) {
    if (!a || !b || !output_same(a, b)) return 0;
    fprintf(stderr, "lingen %s: %s %s and %s %s are one file: the second would replace the first\n", cmd, opt_a, a,
            opt_b, b);
    return EXIT_USAGE;
}

int cli_load_model(Model *m, Device d, const char *path) {
    Err e;
    if (device_model_load(m, d, path, &e) == 0) return 0;
    fprintf(stderr, "lingen: %s\n", e.msg);
    return -1;
}

CliShape cli_shape(const lingen_model *m) {
    return (CliShape){lingen_dataset(m), lingen_height(m), lingen_width(m), lingen_channels(m)};
}

int cli_linear(const lingen_model *m) { return !strcmp(lingen_attention(m), "linear"); }

int cli_load_dataset(Dataset *ds, const CliShape *c, const char *model_path, const char *data, const char *split,
                     int limit) {
    Err e;
    if (dataset_load(ds, dataset_root(data), c->dataset, split, limit, &e)) {
        fprintf(stderr, "lingen: %s\n", e.msg);
        return -1;
    }
    if (limit > ds->n && shard_rank() == 0)   /* not silently fewer than asked for */
        fprintf(stderr, "lingen: --limit %d: the %s split has %d images; all of them are used\n", limit, split, ds->n);
    if (ds->height * ds->width * ds->channels != c->height * c->width * c->channels) {
        fprintf(stderr, "lingen: %s: images are %dx%dx%d, the model %s needs %dx%dx%d\n", dataset_root(data),
                ds->height, ds->width, ds->channels, model_path, c->height, c->width, c->channels);
        dataset_free(ds);
        return -1;
    }
    return 0;
}

int cli_precision(const char *cmd, const char *word) {
    Precision p;
    if (!word) return 0;
    if (plan_parse_precision(word, &p)) {
        fprintf(stderr, "lingen %s: --precision must be auto, f32, bf16 or int8, not '%s'\n", cmd, word);
        return EXIT_USAGE;
    }
    plan_set_precision(p);
    return 0;
}

lingen_precision cli_lib_precision(const char *word) {
    static const lingen_precision lib[] = {[PRECISION_AUTO] = LINGEN_PRECISION_FASTEST, [PRECISION_F32] = LINGEN_PRECISION_F32,
                                           [PRECISION_BF16] = LINGEN_PRECISION_BF16, [PRECISION_INT8] = LINGEN_PRECISION_INT8};
    Precision p;
    return word && !plan_parse_precision(word, &p) ? lib[p] : LINGEN_PRECISION_AUTO;
}

int cli_check_ceiling(const char *cmd, int ceiling) {
    if (!ceiling || shard_size() == 1) return 0;
    fprintf(stderr, "lingen %s: --ceiling measures one process: run it without MPI\n", cmd);
    return EXIT_USAGE;
}

/* The default threads of a rank of an MPI job (shard.h): its part of the cores it shares with
 * other ranks on its node (all of them when the launcher bound none), so that together they do
 * not run more threads than there are cores; a rank bound to cores of its own uses them all (0). */
static long rank_threads(void) {
    int ranks = shard_cores_shared();
    if (ranks == 1) return 0;
    long t = threads_usable_cores() / ranks;
    return t > 0 ? t : 1;
}

/* OpenBLAS built with its own threads starts them as it loads, and one left idle spins on
 * sched_yield: at the start of every run it takes a core from lingen's threads (docs/speed.md,
 * Threads). Its shutdown function, where the library has one
 * (not in its serial or OpenMP builds: a weak symbol), stops them; OpenBLAS starts them again
 * if it ever needs them. */
extern void blas_thread_shutdown_(void) __attribute__((weak));
void cli_stop_blas_threads(void) {
    openblas_set_num_threads(1);
    if (blas_thread_shutdown_) blas_thread_shutdown_();
}

/* The threads are lingen's own (threads.h); the sgemms inside their items run on one thread
 * each, so OpenBLAS keeps to one thread per call and the two never compete for the cores. */
long cli_set_threads(long threads) {
    if (!threads) threads = rank_threads();
    long asked = threads;
    char note[200];
    threads = reslimits_pick_threads(threads, threads_usable_cores(), settings_read().force_threads, note, sizeof note);
    if (note[0]) fprintf(stderr, "lingen: %s\n", note);
    threads_set(asked ? (int)threads : 0);   /* 0: the cores this process may use */
    cli_stop_blas_threads();   /* again: setting OpenBLAS's count can start its threads anew */
    return asked;
}

int cli_check_memory(const Model *m, const char *what, long batch, int T, size_t extra) {
    Err e;
    if (engine_check_memory(m, what, batch, T, extra, &e) == 0) return 0;
    fprintf(stderr, "lingen: %s\n", e.msg);
    return -1;
}
