/* The commands' shared steps (cli_job.h): options, --json, the model, threads, memory, agreement
 * between ranks, and the report of sample's and eval's speed. */
#include <stdio.h>
#include <string.h>

#include "cli_job.h"
#include "commands.h"
#include "engine/device.h"
#include "jsonout.h"
#include "io/output.h"
#include "io/reslimits.h"
#include "engine/shard.h"

int cli_job_options(CliJob *j, int probe) {
    output_set_force(j->force);
    if (cli_precision(j->cmd, j->precision)) return j->rc = EXIT_USAGE;
    if (j->device) j->rc = device_option(j->device, j->cmd, probe, &j->dev);
    return j->rc;
}

int cli_job_json(CliJob *j) {
    if (!j->rc && j->json && shard_rank() == 0 && jsonout_prepare(j->json)) j->rc = EXIT_FAIL;
    return j->rc;
}

int cli_job_open_model(CliJob *j) {
    if (j->rc) return j->rc;
    if (modelpath_find(j->model ? j->model : "mnist", j->found, sizeof j->found)) return j->rc = EXIT_FAIL;
    j->model = j->found;
    lingen_open_options o = {j->dev == DEVICE_CUDA ? LINGEN_DEVICE_CUDA : LINGEN_DEVICE_CPU, cli_lib_precision(j->precision), 0};
    lingen_error err;
    if (lingen_open(j->found, &o, &j->m, &err)) {
        fprintf(stderr, "lingen: %s\n", err.message);
        return j->rc = EXIT_FAIL;
    }
    j->run = lingen_run_options_default();
    return 0;
}

int cli_job_threads(CliJob *j) {
    if (!j->rc) j->threads = cli_set_threads(j->threads);
    return j->rc;
}

int cli_job_memory(CliJob *j, lingen_task task, long batch, int keep, size_t extra) {
    if (j->rc) return j->rc;
    size_t base = lingen_run_bytes(j->m, task, 0, keep, &j->run), fixed = lingen_weight_bytes(j->m) + base + extra;
    size_t per_image = lingen_run_bytes(j->m, task, 1, keep, &j->run) - base;
    Err e;
    if (reslimits_check_batch(fixed, per_image, batch, reslimits_available_memory(), j->cmd, &e)) cli_job_fail(j, &e);
    return j->rc;
}

/* The library's progress callback: the line that p draws (progress.h). */
static void show_progress(void *p, double done, double total) {
    (void)total;   /* p's own: the whole job's, where this process runs a share of it */
    progress_update(p, done);
}

lingen_run_options *cli_job_run(CliJob *j, Progress *p) {
    j->run.batch = (int)j->batch;
    j->run.threads = (int)j->threads;
    j->run.progress = p ? show_progress : NULL;
    j->run.progress_user = p;
    return &j->run;
}

int cli_job_fail(CliJob *j, const Err *e) {
    fprintf(stderr, "lingen: %s\n", e->msg);
    return j->rc = EXIT_FAIL;
}

const char *cli_job_problem(const lingen_error *err) {
    const char *colon = strstr(err->message, ": ");
    return colon && !memchr(err->message, ' ', (size_t)(colon - err->message)) ? colon + 2 : err->message;
}

int cli_job_agree(CliJob *j) { return j->rc = shard_agree(j->rc); }

void cli_job_free(CliJob *j) {
    lingen_close(j->m);
    j->m = NULL;
}

const char *cli_ranks_text(char *buf, size_t n) {
    buf[0] = 0;
    if (shard_size() > 1) snprintf(buf, n, ", %d ranks", shard_size());
    return buf;
}

void cli_report_ceiling(CliReport *r, const char *label, int form, StateTraffic st) {
    /* flops per image / sgemm GFLOP/s: the most images/s these cores allow */
    if (r->ceiling) r->sgemm = ceiling_report(label, r->flops, r->images / r->seconds, form, st);
}

int cli_report_json(cJSON *o, const CliReport *r, const char *path) {
    if (r) {
        jsonout_ranks(o);
        if (r->ceiling) cJSON_AddItemToObject(o, "ceiling", jsonout_ceiling(r->flops, r->images / r->seconds, &r->sgemm));
    }
    Err e;
    int rc = jsonout_write(o, path, &e) ? EXIT_FAIL : EXIT_OK;
    if (rc) fprintf(stderr, "lingen: %s\n", e.msg);
    cJSON_Delete(o);
    return rc;
}
