/* lingen eval bits-per-dim: the test-set likelihood of a model, in bits per dimension. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "args.h"
#include "engine/ceiling.h"
#include "cli_job.h"
#include "commands.h"
#include "io/dataset.h"
#include "engine/evaluate.h"
#include "lib/engine_model.h"
#include "engine/paper.h"
#include "engine/shard.h"
#include "engine/transformer.h"

/* A run of lingen eval: its options, then what its steps found. */
typedef struct {
    CliJob job;
    const char *metric, *split, *mode;
    int n_metric;              /* positional arguments given: 1, the metric */
    long limit;
    int rnn;                   /* the step form (one position at a time), else the parallel form */
    Dataset ds;
    long first, count;         /* this rank's images; rank 0 gathers their figures */
    double *per, *given;       /* [ds.n]: each image's bits/dim, all sub-pixels and the first given */
} Evaluation;

/* The figures of the report: bits/dim both ways with their standard errors, the model card's
 * (NULL: none) and the paper's (0: none). */
typedef struct {
    double mean, se, mean_given, se_given, paper;
    const char *card;
} Figures;

/* argv's options into v (args.h): 0, -1 after --help, or EXIT_USAGE after a message. */
static int eval_parse(Evaluation *v, int argc, char **argv) {
    CliJob *j = &v->job;
    Opt opts[] = {
        OPT_MODEL(j->model),
        OPT_DATA(j->data),
        {"split", 0, OPT_STR, &v->split, "test|train", "which split (default test)", 0, 0},
        OPT_LIMIT(v->limit, "only the first N images (default all)"),
        OPT_BATCH(j->batch, 4096, "images per pass (default: 16 for MNIST, 4 for CIFAR-10; on a GPU up to 256, as 8 GB hold)"),
        {"mode", 0, OPT_STR, &v->mode, "parallel|rnn", "parallel form (default) or step form with teacher forcing", 0, 0},
        OPT_THREADS(j->threads),
        OPT_DEVICE(j->device),
        OPT_REPORT_ROWS(j),
    };
    return args_parse(argc, argv, 2, opts, sizeof opts / sizeof opts[0], "eval bits-per-dim",
                      "Bits per dimension of the test images under the model: -(sum of log2 p)/N over all N\n"
                      "sub-pixels of each image (the first predicted from BOS), averaged over images, with its\n"
                      "standard error; and the paper's convention: the first sub-pixel given, the mean over N-1.",
                      &v->metric, 1, &v->n_metric);
}

/* The metric, --split, --mode and --ceiling. Returns 0, or EXIT_USAGE after a message. */
static int check_options(Evaluation *v) {
    if (v->n_metric != 1 || strcmp(v->metric, "bits-per-dim")) {
        fprintf(stderr, "lingen eval: the metric must be 'bits-per-dim' (see lingen eval --help)\n");
        return EXIT_USAGE;
    }
    if (strcmp(v->split, "test") && strcmp(v->split, "train")) {
        fprintf(stderr, "lingen eval: --split must be test or train, not '%s'\n", v->split);
        return EXIT_USAGE;
    }
    if (strcmp(v->mode, "parallel") && strcmp(v->mode, "rnn")) {
        fprintf(stderr, "lingen eval: --mode must be parallel or rnn, not '%s'\n", v->mode);
        return EXIT_USAGE;
    }
    if (cli_check_ceiling("eval", v->job.ceiling)) return EXIT_USAGE;
    v->rnn = !strcmp(v->mode, "rnn");
    return EXIT_OK;
}

/* Before the work, on every rank: --json, the model, threads, the images, this rank's share of
 * them and the memory checked. Returns the rc every rank agreed. */
static int prepare(Evaluation *v) {
    CliJob *j = &v->job;
    cli_job_json(j);
    if (cli_job_open_model(j)) return cli_job_agree(j);
    j->run.step_form = v->rnn;
    cli_job_threads(j);
    CliShape c = cli_shape(j->m);
    if (cli_load_dataset(&v->ds, &c, j->model, j->data, v->split, (int)v->limit)) j->rc = EXIT_FAIL;
    j->batch = lingen_batch(j->m, LINGEN_TASK_BITS_PER_DIM, v->ds.n, cli_job_run(j, NULL));   /* at most the images */
    shard_range(v->ds.n, shard_rank(), shard_size(), &v->first, &v->count);
    cli_job_memory(j, LINGEN_TASK_BITS_PER_DIM, j->batch < v->count ? j->batch : v->count, 0,
                   (size_t)v->ds.n * lingen_seq_len(j->m));
    return cli_job_agree(j);
}

/* The figures' lines (stdout). */
static void print_figures(const Evaluation *v, const Figures *f) {
    const lingen_model *m = v->job.m;
    const char *attn = lingen_attention(m), *dataset = lingen_dataset(m);
    int N = lingen_seq_len(m);
    if (v->ds.n > 1) {
        printf("bits/dim     %.5f +- %.5f (standard error over %d %s images, all %d dims)\n", f->mean, f->se, v->ds.n,
               v->split, N);
        printf("paper conv.  %.5f +- %.5f (first sub-pixel given: the mean over the other %d, as the paper counts)\n",
               f->mean_given, f->se_given, N - 1);
    } else {   /* one image has no spread to measure */
        printf("bits/dim     %.5f (1 %s image, all %d dims; the standard error needs two or more)\n", f->mean, v->split, N);
        printf("paper conv.  %.5f (first sub-pixel given: the mean over the other %d, as the paper counts)\n",
               f->mean_given, N - 1);
    }
    char *file = text_escape(v->job.model);   /* the file's name and text: no terminal escapes */
    printf("model        %s (%s attention, %s)\n", file, attn, dataset);
    free(file);
    char *card = f->card ? text_escape(f->card) : NULL;
    if (card) printf("model card   %s (full test set, PyTorch evaluation at export)\n", card);
    free(card);
    if (f->paper)
        printf("paper        %.3g (Katharopoulos et al. 2020: %s attention on %s, first sub-pixel given)\n", f->paper,
               attn, dataset);
}

/* --json: what the lines print. */
static cJSON *eval_json(const Evaluation *v, const Figures *f, double secs) {
    const lingen_model *m = v->job.m;
    cJSON *o = cJSON_CreateObject();
    cJSON_AddNumberToObject(o, "bits_per_dim", f->mean);
    cJSON_AddNumberToObject(o, "bits_per_dim_stderr", f->se);
    cJSON_AddNumberToObject(o, "bits_per_dim_first_given", f->mean_given);
    cJSON_AddNumberToObject(o, "bits_per_dim_first_given_stderr", f->se_given);
    cJSON_AddNumberToObject(o, "images", v->ds.n);
    cJSON_AddStringToObject(o, "split", v->split);
    cJSON_AddNumberToObject(o, "dims", lingen_seq_len(m));
    cJSON_AddStringToObject(o, "model", v->job.model);
    cJSON_AddStringToObject(o, "attention", lingen_attention(m));
    cJSON_AddStringToObject(o, "dataset", lingen_dataset(m));
    if (f->card) cJSON_AddNumberToObject(o, "model_card_bits_per_dim", atof(f->card));
    if (f->paper) cJSON_AddNumberToObject(o, "paper_bits_per_dim", f->paper);
    cJSON_AddNumberToObject(o, "images_per_s", v->ds.n / secs);
    cJSON_AddNumberToObject(o, "seconds", secs);
    cJSON_AddStringToObject(o, "form", v->rnn ? "rnn" : "parallel");
    cJSON_AddNumberToObject(o, "batch", v->job.batch);
    return o;
}

/* Rank 0's report of the images' figures and the run's speed in secs: the lines, --ceiling's and
 * --json. Returns 0, or EXIT_FAIL for a JSON not written. */
static int report(const Evaluation *v, double secs) {
    const CliJob *j = &v->job;
    const Config *c = &lib_engine_model(j->m)->cfg;   /* --ceiling's figures */
    Figures f = {.card = lingen_meta(j->m, "test_bits_per_dim")};
    mean_and_stderr(v->per, v->ds.n, &f.mean, &f.se);
    mean_and_stderr(v->given, v->ds.n, &f.mean_given, &f.se_given);
    const PaperFigure *pf = paper_figure(lingen_dataset(j->m), cli_linear(j->m) ? ATTN_LINEAR : ATTN_SOFTMAX);
    f.paper = pf ? pf->bits_per_dim : 0;
    print_figures(v, &f);
    char ranks[32];
    printf("speed        %.2f images/s, %.1f s, %s form, batch %ld%s\n", v->ds.n / secs, secs,
           v->rnn ? "step (RNN)" : "parallel", j->batch, cli_ranks_text(ranks, sizeof ranks));
    /* the arithmetic of an image in the form that ran (transformer.h); the steps in float32 */
    CliReport r = {.images = v->ds.n, .seconds = secs, .flops = transformer_flops(c, v->rnn ? 1 : c->seq_len),
                   .ceiling = j->ceiling};
    cli_report_ceiling(&r, "ceiling      ", v->rnn ? CEILING_FLOAT32 : CEILING_PARALLEL,
                       v->rnn ? ceiling_state_traffic(c, j->batch) : (StateTraffic){0, 0, 0});
    return j->json ? cli_report_json(eval_json(v, &f, secs), &r, j->json) : EXIT_OK;
}

/* Each rank's share of the images evaluated, their figures gathered on rank 0, and the report. */
static int run(Evaluation *v) {
    CliJob *j = &v->job;
    v->per = xcalloc(v->ds.n, sizeof(double));
    v->given = xcalloc(v->ds.n, sizeof(double));
    Progress prog;
    progress_start(&prog, "images", v->ds.n);
    progress_share(&prog, (double)v->count / v->ds.n, shard_rank() == 0);
    double t0 = now_seconds();
    lingen_error err;
    /* No stop flag (run.stop NULL): SIGINT and SIGTERM end the command by their default action,
     * before any figure is printed or --json written, rather than report a part of the images. */
    if (lingen_bits_per_dim(j->m, v->ds.images + v->first * lingen_seq_len(j->m), (int)v->count, v->per + v->first,
                            v->given + v->first, cli_job_run(j, &prog), &err)) {
        fprintf(stderr, "lingen: %s\n", cli_job_problem(&err));
        j->rc = EXIT_FAIL;
    }
    progress_end(&prog);
    if (cli_job_agree(j)) return j->rc;
    shard_gather(v->per + v->first, v->count, sizeof(double));   /* rank 0: every image's figures, in order */
    shard_gather(v->given + v->first, v->count, sizeof(double));
    double secs = now_seconds() - t0;   /* so far as the slowest rank */
    return shard_rank() == 0 ? report(v, secs) : EXIT_OK;
}

int cmd_eval(int argc, char **argv) {
    Evaluation v = {.job = {.cmd = "eval", .device = "cpu"}, .split = "test", .mode = "parallel"};
    int rc = eval_parse(&v, argc, argv);
    if (rc) return rc < 0 ? EXIT_OK : rc;
    /* a device this build or machine lacks fails (rc set), after the usage errors below */
    if (cli_job_options(&v.job, 1) == EXIT_USAGE || check_options(&v)) return EXIT_USAGE;
    /* From here a failure can be one rank's alone (a file, a GPU): every rank learns of it at the
     * next agreement (cli_job.h), and all stop together. */
    rc = prepare(&v);
    if (!rc) rc = run(&v);
    free(v.per);
    free(v.given);
    dataset_free(&v.ds);
    cli_job_free(&v.job);
    return rc ? EXIT_FAIL : EXIT_OK;
}
