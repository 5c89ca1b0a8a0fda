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
#include "ceiling.h"
#include "commands.h"
#include "device.h"
#include "compare.h"
#include "gpu_model.h"
#include "dataset.h"
#include "evaluate.h"
#include "generate.h"
#include "output.h"
#include "jsonout.h"
#include "modelpath.h"
#include "reslimits.h"
#include "threads.h"
#include "transformer.h"

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
static int load_noted(Model *m, const char *path, ModelId *id) {
    int before = file_id(path, id);
    if (cli_load_model(m, path)) return -1;
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
    GenOptions go = {.seed = 1, .batch = j->batch, .on_step = clock_step, .user = &clock, .progress = &p};
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
    const Config *c = &m->cfg;
    int N = c->seq_len, B = j->batch;
    RunState s = {0};
    CudaForward *g = NULL;   /* on the GPU (--device cuda), else s */
    float *out = NULL;
    if (device_current() == DEVICE_CUDA) {
        if (!(g = gpu_forward_new(m, B, N, e))) return -1;
        out = xcalloc((size_t)B * N * 3 * c->n_mix, sizeof(float));
    } else if (runstate_init(&s, c, B, N, e)) return -1;
    int *tok = xcalloc((size_t)B * N, sizeof(int));
    int k = compare_positions(N, RECOMPUTE_POSITIONS, pos);
    long tokens = 0, done = 0;   /* progress in prefix tokens: the time grows with them */
    for (int i = 0; i < k; i++) tokens += pos[i] + 1;
    Progress p;
    progress_start(&p, j->what, tokens);
    for (int i = 0; i < k; i++) {
        int T = pos[i] + 1;
        for (int b = 0; b < B; b++)   /* test images stand in for samples: the time is the same */
            input_tokens(tok + b * T, j->imgs + (size_t)(b % j->n_imgs) * N, 0, T);
        if (g) cuda_forward_reset(g);
        else runstate_reset(&s, c);
        double t0 = now_seconds();
        if (!g) transformer_forward(m, &s, tok, B, T);
        else if (cuda_forward_run(g, tok, B, T, out, e)) {   /* its time includes the copy back */
            free(tok); free(out); cuda_forward_free(g);
            return -1;
        }
        sec[i] = now_seconds() - t0;
        rss[i] = NAN;
        progress_update(&p, done += T);
    }
    progress_end(&p);
    r->value = B / compare_extrapolate(pos, sec, k, N);
    r->n_lat = k;
    free(tok);
    free(out);
    if (g) cuda_forward_free(g);
    else runstate_free(&s);
    return 0;
}

static int job_bits(const Job *j, const Model *m, Report *r, int *pos, double *sec, double *rss, Err *e) {
    (void)pos; (void)sec; (void)rss;
    double *per = xcalloc(j->n_imgs, sizeof(double));
    Progress p;
    progress_start(&p, j->what, j->n_imgs);
    int rc = evaluate_bits_per_dim(m, j->imgs, j->n_imgs, j->batch, 0, per, NULL, &p, e);
    progress_end(&p);
    if (rc == 0) mean_and_stderr(per, j->n_imgs, &r->value, &r->value_se);
    free(per);
    return rc;
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
    int loaded = j->model && device_model_load(&m, j->model, &e) == 0;
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

int cmd_compare(int argc, char **argv) {
    const char *lin_path = NULL, *soft_path = NULL, *dataset = NULL, *data = NULL, *json = NULL;
    long n = 0, batch = 0, limit = 0, threads = 0;
    int softmax = 0;
    const char *device = "cpu", *precision = NULL;
    int force = 0;
    Opt opts[] = {
        {"softmax", 0, OPT_FLAG, &softmax, NULL, "compare against softmax attention (the default, and the only comparison)", 0, 0},
        {"dataset", 0, OPT_STR, &dataset, "NAME", "mnist or cifar10: picks the default models (default mnist)", 0, 0},
        OPT_MODEL_HELP(lin_path, "linear model, file or name (default mnist, or cifar)"),
        {"softmax-model", 0, OPT_STR, &soft_path, "NAME", "softmax model, file or name (default mnist-softmax, or cifar-softmax)", 0, 0},
        OPT_IMAGES(n, "images generated per row (default 16 MNIST, 4 CIFAR-10)"),
        OPT_BATCH(batch, 4096, "images at once, every row (default min(N, 16), 4 for CIFAR-10)"),
        OPT_LIMIT(limit, "test images for bits/dim (default 100 MNIST, 20 CIFAR-10)"),
        OPT_THREADS(threads),
        OPT_DEVICE(device),
        OPT_PRECISION(precision),
        OPT_DATA(data),
        OPT_JSON_HELP(json, "write every figure and the per-step latencies as JSON (- for stdout; scripts/plot_compare.py draws them)"),
        OPT_FORCE(force),
    };
    int r = args_parse(argc, argv, 2, opts, sizeof opts / sizeof opts[0], "compare",
                       "Linear attention run as an RNN against softmax attention, measured in this run: bits/dim,\n"
                       "images/s, speed-ups, memory per image and peak RSS for (1) linear, RNN mode, (2) softmax\n"
                       "with a KV cache, (3) softmax recomputing the whole prefix at every step (the paper's\n"
                       "baseline) and (4) the linear model recomputing its prefix. Rows 3 and 4 are timed at a\n"
                       "sample of positions and extrapolated. Every row runs in its own process.",
                       NULL, 0, NULL);
    if (r) return r < 0 ? 0 : r;
    output_set_force(force);
    /* no probe here: the measuring processes are fork()ed, and CUDA must start in them, not before */
    if (cli_precision("compare", precision)) return 2;
    if ((r = device_option(device, "compare", 0))) return r;
    if (dataset && strcmp(dataset, "mnist") && strcmp(dataset, "cifar10")) {
        fprintf(stderr, "lingen compare: --dataset must be mnist or cifar10, not '%s'\n", dataset);
        return 2;
    }
    int cifar = dataset && !strcmp(dataset, "cifar10");
    char lin_found[MODELPATH_LEN], soft_found[MODELPATH_LEN];
    if (modelpath_find(lin_path ? lin_path : cifar ? "cifar" : "mnist", lin_found, sizeof lin_found) ||
        modelpath_find(soft_path ? soft_path : cifar ? "cifar-softmax" : "mnist-softmax", soft_found, sizeof soft_found))
        return 1;
    lin_path = lin_found;
    soft_path = soft_found;
    if (json && jsonout_prepare(json)) return 1;   /* fail before minutes of measuring, not after */
    Model lm = {0}, sm = {0};
    Dataset ds = {0};
    ModelId lin_id, soft_id;
    int ok = load_noted(&lm, lin_path, &lin_id) == 0 && load_noted(&sm, soft_path, &soft_id) == 0 &&
             check_pair(&lm, lin_path, &sm, soft_path, dataset) == 0;
    int big = lm.cfg.seq_len > 1000;   /* CIFAR-10: 3072 positions, a 4x longer KV cache */
    if (!n) n = big ? 4 : 16;
    if (!batch) batch = big ? 4 : 16;
    if (batch > n) batch = n;
    if (!limit) limit = big ? 20 : 100;
    ok = ok && cli_load_dataset(&ds, &lm, lin_path, data, "test", (int)limit) == 0 && check_memory(&sm, soft_path, batch) == 0;
    Config lc = lm.cfg, sc = sm.cfg;
    model_free(&lm);   /* each measuring process loads its own copy, checked to be this one */
    model_free(&sm);
    if (!ok) { dataset_free(&ds); return 1; }
    cli_set_threads(threads);

    int N = lc.seq_len;
    Comparison c = {.dataset = lc.dataset, .linear_model = lin_path, .softmax_model = soft_path, .seq_len = N,
                    .n_images = (int)n, .batch = (int)batch, .test_images = ds.n, .threads = threads_count(),
                    .flops_per_image = transformer_flops_per_image(&lc), .gpu = device_current() == DEVICE_CUDA};
    c.rows[ROW_LINEAR_RNN].memory_bytes = model_state_bytes(&lc, N);
    c.rows[ROW_SOFTMAX_KV].memory_bytes = model_state_bytes(&sc, N);
    c.rows[ROW_SOFTMAX_RECOMPUTE].memory_bytes = runstate_bytes(&sc, 1, N);
    c.rows[ROW_LINEAR_RECOMPUTE].memory_bytes = runstate_bytes(&lc, 1, N);
    enum { SGEMM, SPEED, BITS };   /* what a job's report gives */
    const struct { JobFn *run; const char *model; const ModelId *id; const char *what; int gives, row; } plan[] = {
        {job_sgemm, NULL, NULL, "sgemm", SGEMM, -1},
        {job_generate, lin_path, &lin_id, "1/4 linear, RNN mode: images", SPEED, ROW_LINEAR_RNN},
        {job_generate, soft_path, &soft_id, "2/4 softmax, KV cache: images", SPEED, ROW_SOFTMAX_KV},
        {job_recompute, soft_path, &soft_id, "3/4 softmax, recomputing: prefix tokens", SPEED, ROW_SOFTMAX_RECOMPUTE},
        {job_recompute, lin_path, &lin_id, "4/4 linear, recomputing: prefix tokens", SPEED, ROW_LINEAR_RECOMPUTE},
        {job_bits, lin_path, &lin_id, "bits/dim, linear: images", BITS, ROW_LINEAR_RNN},
        {job_bits, soft_path, &soft_id, "bits/dim, softmax: images", BITS, ROW_SOFTMAX_KV},
    };
    for (int i = 0; i < N_ROWS; i++) {
        c.rows[i].lat_pos = xcalloc(N, sizeof(int));
        c.rows[i].lat_sec = xcalloc(N, sizeof(double));
        if (!row_extrapolated(i)) c.rows[i].lat_rss = xcalloc(N, sizeof(double));
    }
    int *no_pos = xcalloc(N, sizeof(int));   /* for what a job sends that no row keeps */
    double *no_sec = xcalloc(N, sizeof(double)), *no_rss = xcalloc(N, sizeof(double));
    int rc = 0;
    for (size_t i = 0; i < sizeof plan / sizeof plan[0] && rc == 0; i++) {
        /* the sgemm ceiling is the CPU's: a GPU run has none to set beside it */
        if (plan[i].gives == SGEMM && c.gpu) continue;
        Job j = {plan[i].run, plan[i].model, plan[i].id, plan[i].what, ds.images, ds.n, (int)n, (int)batch};
        CompareRow *w = plan[i].row >= 0 ? &c.rows[plan[i].row] : NULL;
        int speed = plan[i].gives == SPEED;
        Report rep;
        if (run_job(&j, &rep, speed ? w->lat_pos : no_pos, speed ? w->lat_sec : no_sec,
                    speed && w->lat_rss ? w->lat_rss : no_rss, N)) rc = 1;
        else if (plan[i].gives == SGEMM) c.sgemm_gflops = rep.value;
        else if (speed) {
            w->images_per_s = rep.value;
            w->n_lat = rep.n_lat;
            w->peak_rss_bytes = rep.peak_rss;
        } else {   /* bits/dim: the RNN and the recompute rows share a model */
            CompareRow *twin = &c.rows[plan[i].row == ROW_LINEAR_RNN ? ROW_LINEAR_RECOMPUTE : ROW_SOFTMAX_RECOMPUTE];
            w->bits_per_dim = twin->bits_per_dim = rep.value;
            w->bits_se = twin->bits_se = rep.value_se;
        }
    }
    if (rc == 0) {
        Err e;
        compare_finish(&c);
        compare_print(stdout, &c);
        if (json && compare_write_json(&c, json, &e)) { fprintf(stderr, "lingen: %s\n", e.msg); rc = 1; }
        if (rc == 0 && json && strcmp(json, "-")) {
            printf("json: %s\n", json);
            printf("plot: python3 %s %s compare.png\n", modelpath_shared_file("scripts/plot_compare.py"), json);
        }
    }
    for (int i = 0; i < N_ROWS; i++) { free(c.rows[i].lat_pos); free(c.rows[i].lat_sec); free(c.rows[i].lat_rss); }
    free(no_pos);
    free(no_sec);
    free(no_rss);
    dataset_free(&ds);
    return rc;
}
