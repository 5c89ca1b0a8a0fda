/* The steps that the commands which run the model (sample, eval, complete, compare, info) share,
 * and the report of what sample and eval measured. The model is opened, and sample's, eval's and
 * complete's work run, through liblingen (include/lingen.h). */
#ifndef LINGEN_CLI_JOB_H
#define LINGEN_CLI_JOB_H
#include <stddef.h>
#include <cjson/cJSON.h>

#include "lingen.h"
#include "engine/ceiling.h"
#include "engine/engine.h"
#include "io/modelpath.h"
#include "io/progress.h"
#include "io/util.h"

/* A command's run: the values of the options it shares with the other commands (commands.h: the
 * OPT_ rows fill them), its model once opened, and how it stands. rc is 0, or the exit code of a
 * failure of this process, its message printed; each step below does nothing once rc is set, and
 * returns rc. In an MPI job (shard.h) a failure may be one rank's alone: cli_job_agree gives
 * every rank the largest rc, so that all stop at the same point. */
typedef struct {
    const char *cmd;                 /* "sample": the messages' "lingen sample: ..." */
    const char *model;               /* --model (NULL: mnist); once opened, the file's path */
    const char *device;              /* --device; NULL: the command has none (the CPU) */
    Device dev;                      /* ... as parsed by cli_job_options */
    const char *precision, *data, *json;   /* NULL: not given */
    long threads, batch;             /* 0: not given; threads once applied: those asked of the library */
    int force, ceiling;
    int rc;
    lingen_model *m;                 /* cli_job_open_model's (NULL before) */
    lingen_run_options run;          /* the library's options for the work: the defaults from
                                      * cli_job_open_model on, the command's own (seed, ...) set on them */
    char found[MODELPATH_LEN];       /* the file --model names */
} CliJob;

/* --force (output.h), --precision (plan.h) and --device (device.h; probe: check now that the GPU
 * answers), in this order. Returns 0, or the exit code after a message, rc then set to it:
 * EXIT_USAGE for a bad word, EXIT_FAIL for a device that this build or machine lacks. */
int cli_job_options(CliJob *j, int probe);
/* --json FILE: on rank 0, checked before the work (jsonout.h: jsonout_prepare). */
int cli_job_json(CliJob *j);
/* --model found (else modelpath_find's listing printed) and opened by lingen_open for j->dev and
 * --precision; j->model then names the file, j->run holds the defaults. */
int cli_job_open_model(CliJob *j);
/* --threads applied (commands.h: cli_set_threads); j->threads then holds those asked for. */
int cli_job_threads(CliJob *j);
/* Room for a call of task running batch images at once (keep: complete's kept values) with
 * j->run, plus the command's extra bytes: the figures lingen_weight_bytes and lingen_run_bytes
 * give, against the memory available now; refused with a message naming the command and the
 * largest batch that fits. */
int cli_job_memory(CliJob *j, lingen_task task, long batch, int keep, size_t extra);
/* j->run for the call: --batch, --threads, and the progress line p (progress.h; NULL: none). */
lingen_run_options *cli_job_run(CliJob *j, Progress *p);
/* A failure that e describes: "lingen: <e>" printed, rc set to EXIT_FAIL. Returns EXIT_FAIL. */
int cli_job_fail(CliJob *j, const Err *e);
/* The problem a failed library call names, without the call's name it starts with (lingen.h). */
const char *cli_job_problem(const lingen_error *err);
/* Collective (shard.h: shard_agree): rc, the largest of every rank's. */
int cli_job_agree(CliJob *j);
/* The model closed. */
void cli_job_free(CliJob *j);

/* What a run of sample or eval measured, beside its own figures: `images` done in `seconds` by
 * the whole job, of `flops` arithmetic each; with --ceiling (ceiling set), the ceiling that
 * cli_report_ceiling measured. */
typedef struct {
    double images, seconds, flops;
    int ceiling;
    Ceiling sgemm;
} CliReport;

/* The text: ", 3 ranks" in an MPI job of several ranks, else "" (in buf, n bytes). */
const char *cli_ranks_text(char *buf, size_t n);
/* The text: with --ceiling, the ceiling measured now and its lines printed after label
 * (ceiling.h: ceiling_report, form and st as there); nothing without. */
void cli_report_ceiling(CliReport *r, const char *label, int form, StateTraffic st);
/* The JSON: o, a command's figures, with the job's ranks (jsonout.h: jsonout_ranks) and with
 * --ceiling its figures ("ceiling") added unless r is NULL, written to path (jsonout_write); o is
 * deleted. Returns 0, or EXIT_FAIL after "lingen: <problem>". */
int cli_report_json(cJSON *o, const CliReport *r, const char *path);
#endif
