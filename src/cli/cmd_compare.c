/* lingen compare [--softmax]: linear attention as an RNN against softmax attention, measured in one
 * run. Each measurement runs in its own forked process so that its peak RSS is its own, and sends
 * its numbers back through a pipe; the table arithmetic and the JSON are in compare.c. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "args.h"
#include "engine/ceiling.h"
#include "cli_job.h"
#include "commands.h"
#include "engine/device.h"
#include "compare.h"
#include "io/dataset.h"
#include "engine/evaluate.h"
#include "engine/generate.h"
#include "io/modelpath.h"
#include "io/reslimits.h"
#include "kernels/threads.h"
#include "engine/transformer.h"

#define RECOMPUTE_POSITIONS 12   /* prefix lengths timed for the recompute rows */

/* What a measuring child sends back, followed by n_lat ints (positions), n_lat doubles (seconds)
 * and n_lat doubles (resident bytes; NAN where not measured). */
typedef struct {
    int failed;
    char msg[512];
    double value, value_se;     /* images/s, bits/dim (and its standard error) or GFLOP/s */
    double peak_rss;            /* bytes: the child's VmHWM */
    int n_lat;
} Report;

/* A model file as the parent found it: which file (device, inode), its size and modification
 * time, and the configuration the parent checked. A measuring process reloads the file by path
 * and must find all of these unchanged: its buffers are sized for that configuration. */
typedef struct {
    dev_t dev;
    ino_t ino;
    off_t size;
    struct timespec mtime;
    Config cfg;
} ModelId;

/* The identity of the file at path (cfg untouched); -1 when it cannot be stat()ed. */
static int file_id(const char *path, ModelId *id) {
    struct stat st;
    if (stat(path, &st)) return -1;
    id->dev = st.st_dev;
    id->ino = st.st_ino;
    id->size = st.st_size;
    id->mtime = st.st_mtim;
    return 0;
}

static int same_file(const ModelId *a, const ModelId *b) {
    return a->dev == b->dev && a->ino == b->ino && a->size == b->size && a->mtime.tv_sec == b->mtime.tv_sec &&
           a->mtime.tv_nsec == b->mtime.tv_nsec;
}

/* Load path into m and note in id what was loaded; prints the problem and returns -1 on failure,
 * also when the file changed while it was read. */
static int load_noted(Model *m, Device d, const char *path, ModelId *id) {
    int before = file_id(path, id);
    if (cli_load_model(m, d, path)) return -1;
    ModelId after;
    if (before || file_id(path, &after) || !same_file(id, &after)) {
        fprintf(stderr, "lingen: %s: the file changed while it was read\n", path);
        model_free(m);
        return -1;
    }
    id->cfg = m->cfg;
    return 0;
}

/* In a measuring process: is the model it loaded from path the one the parent checked? (The
 * configurations compare whole: both were zeroed before they were filled.) */
static int same_model(const char *path, const ModelId *id, const Model *m, Err *e) {
    ModelId now;
    if (file_id(path, &now) == 0 && same_file(id, &now) && !memcmp(&m->cfg, &id->cfg, sizeof m->cfg)) return 0;
    return err_set(e, "%s: the file changed while compare ran: not the model checked at the start", path);
}

/* A measurement, run in a child with its model loaded; fills r and, for a speed, the latencies. */
typedef struct Job Job;
typedef int JobFn(const Job *j, const Model *m, Report *r, int *pos, double *sec, double *rss, Err *e);
struct Job {
    JobFn *run;
    Device dev;                     /* where it runs */
    const char *model;              /* loaded in the child; NULL: none */
    const ModelId *id;              /* what the child must find there */
    const char *what;               /* progress label */
    const unsigned char *imgs;      /* test images [n_imgs][N] */
    int n_imgs, n, batch;
};

static int job_sgemm(const Job *j, const Model *m, Report *r, int *pos, double *sec, double *rss, Err *e) {
    (void)j; (void)m; (void)pos; (void)sec; (void)rss; (void)e;
    r->value = ceiling_measure(0).gflops;
    return 0;
}

/* Per position: its time summed over batches, and the resident bytes after it (the largest). */
typedef struct { double *sec, *rss, t0; } StepClock;

static void clock_step(void *user, int t, int end) {
    StepClock *k = user;
    if (!end) { k->t0 = now_seconds(); return; }
    k->sec[t] += now_seconds() - k->t0;
    double rss = reslimits_resident_bytes();
    if (!(k->rss[t] >= rss)) k->rss[t] = rss;
}

/* Rows 1 and 2: generate() as `lingen sample` runs it, with the time of every position and the
 * resident memory after it. */
static int job_generate(const Job *j, const Model *m, Report *r, int *pos, double *sec, double *rss, Err *e) {
    int N = m->cfg.seq_len, n_batches = (j->n + j->batch - 1) / j->batch;
    unsigned char *imgs = try_calloc((size_t)j->n, N, "images", e);
    if (!imgs) return -1;
    for (int t = 0; t < N; t++) sec[t] = 0, rss[t] = NAN;
    Progress p;
    progress_start_positions(&p, j->what, j->n, N);
    StepClock clock = {sec, rss, 0};
    GenOptions go = {.device = j->dev, .seed = 1, .batch = j->batch, .on_step = clock_step, .user = &clock, .progress = &p};
    double t0 = now_seconds();
    int done = generate(m, imgs, j->n, &go, e);
    double secs = now_seconds() - t0;
    progress_end(&p);
    free(imgs);
    if (done < 0) return -1;
    for (int t = 0; t < N; t++) { pos[t] = t; sec[t] /= n_batches; }   /* per step of one batch */
    r->value = done / secs;
    r->n_lat = N;
    return 0;
}

/* Rows 3 and 4: drawing position t without a state or cache means a forward over the whole prefix
 * (t+1 tokens) for the batch; time it at a few t and sum the interpolation over all N. */
static int job_recompute(const Job *j, const Model *m, Report *r, int *pos, double *sec, double *rss, Err *e) {
    int N = m->cfg.seq_len, B = j->batch;
    Engine *en = engine_new(m, j->dev, B, N, 0, e);
    if (!en) return -1;
    int *tok = xcalloc((size_t)B * N, sizeof(int));
    int k = compare_positions(N, RECOMPUTE_POSITIONS, pos), rc = 0;
    long tokens = 0, done = 0;   /* progress in prefix tokens: the time grows with them */
    for (int i = 0; i < k; i++) tokens += pos[i] + 1;
    Progress p;
    progress_start(&p, j->what, tokens);
    for (int i = 0; i < k && !rc; i++) {
        int T = pos[i] + 1;
        for (int b = 0; b < B; b++)   /* test images stand in for samples: the time is the same */
            input_tokens(tok + b * T, j->imgs + (size_t)(b % j->n_imgs) * N, 0, T);
        engine_reset(en);
        double t0 = now_seconds();
        rc = engine_forward(en, tok, B, T, e);   /* on a GPU, the time includes the copy back */
        sec[i] = now_seconds() - t0;
        rss[i] = NAN;
        progress_update(&p, done += T);
    }
    progress_end(&p);
    if (!rc) {
        r->value = B / compare_extrapolate(pos, sec, k, N);
        r->n_lat = k;
    }
    free(tok);
    engine_free(en);
    return rc;
}

static int job_bits(const Job *j, const Model *m, Report *r, int *pos, double *sec, double *rss, Err *e) {
    (void)pos; (void)sec; (void)rss;
    double *per = xcalloc(j->n_imgs, sizeof(double));
    Progress p;
    progress_start(&p, j->what, j->n_imgs);
    int done = evaluate_bits_per_dim(m, j->dev, j->imgs, j->n_imgs, j->batch, 0, per, NULL, &p, NULL, e);
    progress_end(&p);
    if (done >= 0) mean_and_stderr(per, j->n_imgs, &r->value, &r->value_se);   /* no stop: every image */
    free(per);
    return done < 0 ? -1 : 0;
}

static int write_all(int fd, const void *buf, size_t n) {
    for (const char *p = buf; n > 0;) {
        ssize_t w = write(fd, p, n);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) return -1;
        p += w;
        n -= (size_t)w;
    }
    return 0;
}

static int read_all(int fd, void *buf, size_t n) {
    for (char *p = buf; n > 0;) {
        ssize_t got = read(fd, p, n);
        if (got < 0 && errno == EINTR) continue;
        if (got <= 0) return -1;
        p += got;
        n -= (size_t)got;
    }
    return 0;
}

/* The child's side: load the model, run the job, send the report. Never returns. */
static void child(const Job *j, int fd, int *pos, double *sec, double *rss, pid_t parent) {
    /* ended with the parent: a SIGTERM to compare must not leave a measurement running */
    if (prctl(PR_SET_PDEATHSIG, SIGTERM) != 0 || getppid() != parent) _exit(EXIT_FAIL);
    Report r = {0};
    Err e = {""};
    Model m;
    int loaded = j->model && device_model_load(&m, j->dev, j->model, &e) == 0;
    if ((j->model && (!loaded || same_model(j->model, j->id, &m, &e))) ||
        j->run(j, loaded ? &m : NULL, &r, pos, sec, rss, &e)) {
        r.failed = 1;
        r.n_lat = 0;
        snprintf(r.msg, sizeof r.msg, "%s", e.msg);
    }
    if (loaded) model_free(&m);
    r.peak_rss = reslimits_peak_resident_bytes();
    int bad = write_all(fd, &r, sizeof r) || write_all(fd, pos, r.n_lat * sizeof *pos) ||
              write_all(fd, sec, r.n_lat * sizeof *sec) || write_all(fd, rss, r.n_lat * sizeof *rss);
    _exit(bad ? EXIT_FAIL : EXIT_OK);
}

/* Run j in a forked child; pos, sec and rss (capacity cap) receive its latencies and memory. A
 * report of more latencies than that is refused unread. */
static int run_job(const Job *j, Report *r, int *pos, double *sec, double *rss, int cap) {
    int fd[2];
    if (pipe(fd)) { fprintf(stderr, "lingen: pipe: %s\n", strerror(errno)); return -1; }
    fflush(stdout);
    fflush(stderr);
    pid_t parent = getpid(), pid = fork();
    if (pid < 0) { fprintf(stderr, "lingen: fork: %s\n", strerror(errno)); close(fd[0]); close(fd[1]); return -1; }
    if (pid == 0) { close(fd[0]); child(j, fd[1], pos, sec, rss, parent); }
    close(fd[1]);
    int bad = read_all(fd[0], r, sizeof *r) || r->n_lat < 0 || r->n_lat > cap || read_all(fd[0], pos, r->n_lat * sizeof *pos) ||
              read_all(fd[0], sec, r->n_lat * sizeof *sec) || read_all(fd[0], rss, r->n_lat * sizeof *rss);
    close(fd[0]);
    int status;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {}
    if (bad && WIFSIGNALED(status)) fprintf(stderr, "lingen: %s: the measuring process died (signal %d)\n", j->what, WTERMSIG(status));
    else if (bad) fprintf(stderr, "lingen: %s: the measuring process sent no result\n", j->what);
    else if (r->failed) fprintf(stderr, "lingen: %s: %.*s\n", j->what, (int)sizeof r->msg - 1, r->msg);
    return bad || r->failed ? -1 : 0;
}

/* The linear model, the softmax model and --dataset must agree. Prints the problem. */
static int check_pair(const Model *lin, const char *lin_path, const Model *soft, const char *soft_path, const char *dataset) {
    const char *problem = lin->cfg.attention != ATTN_LINEAR ? lin_path : soft->cfg.attention != ATTN_SOFTMAX ? soft_path : NULL;
    if (problem) {
        int want_linear = problem == lin_path;
        fprintf(stderr, "lingen: %s: %s needs a %s-attention model, this one is %s\n", problem,
                want_linear ? "--model" : "--softmax-model", want_linear ? "linear" : "softmax", want_linear ? "softmax" : "linear");
        return -1;
    }
    if (strcmp(lin->cfg.dataset, soft->cfg.dataset) || lin->cfg.seq_len != soft->cfg.seq_len) {
        fprintf(stderr, "lingen: %s (%s) and %s (%s) are not models of the same images\n", lin_path, lin->cfg.dataset,
                soft_path, soft->cfg.dataset);
        return -1;
    }
    if (dataset && strcmp(dataset, lin->cfg.dataset)) {
        fprintf(stderr, "lingen: %s is a %s model, not %s\n", lin_path, lin->cfg.dataset, dataset);
        return -1;
    }
    return 0;
}

/* The largest measuring process runs the softmax model over all N positions of a batch
 * (row 3, bits/dim): refuse a batch that cannot fit at once rather than be killed later. */
static int check_memory(const Model *soft, const char *soft_path, long batch) {
    return cli_check_memory(soft, soft_path, batch, soft->cfg.seq_len, 0);
}

/* A run of lingen compare: its options (job.model: the linear model), then what its steps found. */
typedef struct {
    CliJob job;
    const char *soft_path, *dataset;   /* --softmax-model, --dataset (NULL: not given) */
    long n, limit;
    int softmax;
    char soft_found[MODELPATH_LEN];
    ModelId lin_id, soft_id;           /* the models checked: each measuring process must find them */
    Config lc, sc;                     /* their configurations */
    Dataset ds;                        /* the test images */
} CompareRun;

/* The measurements, in order: each runs in its own process, on the linear model, the softmax
 * one or none, and gives the sgemm ceiling, a row's speed or its bits/dim. */
enum { SGEMM, SPEED, BITS };
enum { NO_MODEL, LINEAR, SOFTMAX };
static const struct { JobFn *run; int model; const char *what; int gives, row; } PLAN[] = {
    {job_sgemm, NO_MODEL, "sgemm", SGEMM, -1},
    {job_generate, LINEAR, "1/4 linear, RNN mode: images", SPEED, ROW_LINEAR_RNN},
    {job_generate, SOFTMAX, "2/4 softmax, KV cache: images", SPEED, ROW_SOFTMAX_KV},
    {job_recompute, SOFTMAX, "3/4 softmax, recomputing: prefix tokens", SPEED, ROW_SOFTMAX_RECOMPUTE},
    {job_recompute, LINEAR, "4/4 linear, recomputing: prefix tokens", SPEED, ROW_LINEAR_RECOMPUTE},
    {job_bits, LINEAR, "bits/dim, linear: images", BITS, ROW_LINEAR_RNN},
    {job_bits, SOFTMAX, "bits/dim, softmax: images", BITS, ROW_SOFTMAX_KV},
};

/* Latencies that a measurement sends and no row keeps: N of each. */
typedef struct { int *pos; double *sec, *rss; } Spare;

/* argv's options into r (args.h): 0, -1 after --help, or EXIT_USAGE after a message. */
static int compare_parse(CompareRun *r, int argc, char **argv) {
    CliJob *j = &r->job;
    Opt opts[] = {
        {"softmax", 0, OPT_FLAG, &r->softmax, NULL, "compare against softmax attention (the default, and the only comparison)", 0, 0},
        {"dataset", 0, OPT_STR, &r->dataset, "NAME", "mnist or cifar10: picks the default models (default mnist)", 0, 0},
        OPT_MODEL_HELP(j->model, "linear model, file or name (default mnist, or cifar)"),
        {"softmax-model", 0, OPT_STR, &r->soft_path, "NAME", "softmax model, file or name (default mnist-softmax, or cifar-softmax)", 0, 0},
        OPT_IMAGES(r->n, "images generated per row (default 16 MNIST, 4 CIFAR-10)"),
        OPT_BATCH(j->batch, 4096, "images at once, every row (default min(N, 16), 4 for CIFAR-10)"),
        OPT_LIMIT(r->limit, "test images for bits/dim (default 100 MNIST, 20 CIFAR-10)"),
        OPT_RUN_ROWS(j),
        OPT_DATA(j->data),
        OPT_JSON_HELP(j->json, "write every figure and the per-step latencies as JSON (- for stdout; scripts/plot_compare.py draws them)"),
        OPT_FORCE(j->force),
    };
    return args_parse(argc, argv, 2, opts, sizeof opts / sizeof opts[0], "compare",
                      "Linear attention run as an RNN against softmax attention, measured in this run: bits/dim,\n"
                      "images/s, speed-ups, memory per image and peak RSS for (1) linear, RNN mode, (2) softmax\n"
                      "with a KV cache, (3) softmax recomputing the whole prefix at every step (the paper's\n"
                      "baseline) and (4) the linear model recomputing its prefix. Rows 3 and 4 are timed at a\n"
                      "sample of positions and extrapolated. Every row runs in its own process.",
                      NULL, 0, NULL);
}

/* --dataset checked, the two models' files found, --json checked. Returns 0, or the exit code
 * after a message. */
static int find_models(CompareRun *r) {
    CliJob *j = &r->job;
    if (r->dataset && strcmp(r->dataset, "mnist") && strcmp(r->dataset, "cifar10")) {
        fprintf(stderr, "lingen compare: --dataset must be mnist or cifar10, not '%s'\n", r->dataset);
        return EXIT_USAGE;
    }
    int cifar = r->dataset && !strcmp(r->dataset, "cifar10");
    if (modelpath_find(j->model ? j->model : cifar ? "cifar" : "mnist", j->found, sizeof j->found) ||
        modelpath_find(r->soft_path ? r->soft_path : cifar ? "cifar-softmax" : "mnist-softmax", r->soft_found,
                       sizeof r->soft_found))
        return EXIT_FAIL;
    j->model = j->found;
    r->soft_path = r->soft_found;
    return cli_job_json(j);   /* fail before minutes of measuring, not after */
}

/* The two models loaded and checked against each other and --dataset, the defaults that depend
 * on them, the test images, and the memory of the largest measurement. The models are freed
 * again: each measuring process loads its own copy, checked to be this one. Returns 0, or
 * EXIT_FAIL after a message. */
static int load_models(CompareRun *r) {
    CliJob *j = &r->job;
    Model lm = {0}, sm = {0};
    int ok = load_noted(&lm, j->dev, j->model, &r->lin_id) == 0 &&
             load_noted(&sm, j->dev, r->soft_path, &r->soft_id) == 0 &&
             check_pair(&lm, j->model, &sm, r->soft_path, r->dataset) == 0;
    int big = lm.cfg.seq_len > 1000;   /* CIFAR-10: 3072 positions, a 4x longer KV cache */
    if (!r->n) r->n = big ? 4 : 16;
    if (!j->batch) j->batch = big ? 4 : 16;
    if (j->batch > r->n) j->batch = r->n;
    if (!r->limit) r->limit = big ? 20 : 100;
    CliShape shape = {lm.cfg.dataset, lm.cfg.height, lm.cfg.width, lm.cfg.channels};
    ok = ok && cli_load_dataset(&r->ds, &shape, j->model, j->data, "test", (int)r->limit) == 0 &&
         check_memory(&sm, r->soft_path, j->batch) == 0;
    r->lc = lm.cfg;
    r->sc = sm.cfg;
    model_free(&lm);
    model_free(&sm);
    return ok ? EXIT_OK : EXIT_FAIL;
}

/* The comparison's settings and each row's memory per image, with room for its latencies. */
static void setup(const CompareRun *r, Comparison *c) {
    const Config *lc = &r->lc, *sc = &r->sc;
    int N = lc->seq_len;
    *c = (Comparison){.dataset = lc->dataset, .linear_model = r->job.model, .softmax_model = r->soft_path,
                      .seq_len = N, .n_images = (int)r->n, .batch = (int)r->job.batch, .test_images = r->ds.n,
                      .threads = threads_count(), .flops_per_image = transformer_flops_per_image(lc),
                      .gpu = r->job.dev == DEVICE_CUDA};
    c->rows[ROW_LINEAR_RNN].memory_bytes = model_state_bytes(lc, N);
    c->rows[ROW_SOFTMAX_KV].memory_bytes = model_state_bytes(sc, N);
    c->rows[ROW_SOFTMAX_RECOMPUTE].memory_bytes = runstate_bytes(sc, 1, N);
    c->rows[ROW_LINEAR_RECOMPUTE].memory_bytes = runstate_bytes(lc, 1, N);
    for (int i = 0; i < N_ROWS; i++) {
        c->rows[i].lat_pos = xcalloc(N, sizeof(int));
        c->rows[i].lat_sec = xcalloc(N, sizeof(double));
        if (!row_extrapolated(i)) c->rows[i].lat_rss = xcalloc(N, sizeof(double));
    }
}

/* Measurement i of PLAN, run in its own process, and what it gives kept in c. Returns 0, or -1
 * after a message. */
static int measure(const CompareRun *r, Comparison *c, size_t i, const Spare *spare) {
    int lin = PLAN[i].model == LINEAR, soft = PLAN[i].model == SOFTMAX;
    Job job = {PLAN[i].run, r->job.dev, lin ? r->job.model : soft ? r->soft_path : NULL, lin ? &r->lin_id : soft ? &r->soft_id : NULL,
               PLAN[i].what, r->ds.images, r->ds.n, (int)r->n, (int)r->job.batch};
    CompareRow *w = PLAN[i].row >= 0 ? &c->rows[PLAN[i].row] : NULL;
    int speed = PLAN[i].gives == SPEED;
    Report rep;
    if (run_job(&job, &rep, speed ? w->lat_pos : spare->pos, speed ? w->lat_sec : spare->sec,
                speed && w->lat_rss ? w->lat_rss : spare->rss, c->seq_len))
        return -1;
    if (PLAN[i].gives == SGEMM) c->sgemm_gflops = rep.value;
    else if (speed) {
        w->images_per_s = rep.value;
        w->n_lat = rep.n_lat;
        w->peak_rss_bytes = rep.peak_rss;
    } else {   /* bits/dim: the RNN and the recompute rows share a model */
        CompareRow *twin = &c->rows[PLAN[i].row == ROW_LINEAR_RNN ? ROW_LINEAR_RECOMPUTE : ROW_SOFTMAX_RECOMPUTE];
        w->bits_per_dim = twin->bits_per_dim = rep.value;
        w->bits_se = twin->bits_se = rep.value_se;
    }
    return 0;
}

/* The table on stdout, and --json (with, for a file, where it went and how to plot it). Returns
 * 0, or EXIT_FAIL after a message. */
static int output(CompareRun *r, Comparison *c) {
    const char *json = r->job.json;
    Err e;
    compare_finish(c);
    compare_print(stdout, c);
    if (json && compare_write_json(c, json, &e)) return cli_job_fail(&r->job, &e);
    if (json && strcmp(json, "-")) {
        printf("json: %s\n", json);
        printf("plot: python3 %s %s compare.png\n", modelpath_shared_file("scripts/plot_compare.py"), json);
    }
    return EXIT_OK;
}

/* Every measurement in PLAN's order until one fails, then the output. Returns the exit code. */
static int measure_all(CompareRun *r) {
    Comparison c;
    setup(r, &c);
    int N = c.seq_len, rc = EXIT_OK;
    Spare spare = {xcalloc(N, sizeof(int)), xcalloc(N, sizeof(double)), xcalloc(N, sizeof(double))};
    for (size_t i = 0; i < sizeof PLAN / sizeof PLAN[0] && rc == EXIT_OK; i++)
        /* the sgemm ceiling is the CPU's: a GPU run has none to set beside it */
        if (!(PLAN[i].gives == SGEMM && c.gpu) && measure(r, &c, i, &spare)) rc = EXIT_FAIL;
    if (rc == EXIT_OK) rc = output(r, &c);
    for (int i = 0; i < N_ROWS; i++) {
        free(c.rows[i].lat_pos);
        free(c.rows[i].lat_sec);
        free(c.rows[i].lat_rss);
    }
    free(spare.pos);
    free(spare.sec);
    free(spare.rss);
    return rc;
}

int cmd_compare(int argc, char **argv) {
    CompareRun r = {.job = {.cmd = "compare", .device = "cpu"}};
    int rc = compare_parse(&r, argc, argv);
    if (rc) return rc < 0 ? EXIT_OK : rc;
    /* no probe here: the measuring processes are fork()ed, and CUDA must start in them, not before */
    if (!(rc = cli_job_options(&r.job, 0)) && !(rc = find_models(&r)) && !(rc = load_models(&r))) {
        cli_job_threads(&r.job);
        rc = measure_all(&r);
    }
    dataset_free(&r.ds);
    return rc;
}
