/* The commands' shared steps (cli_job.h): options, --json, the model, threads, memory, agreement
 * between ranks, and the report of sample's and eval's speed. */
#include <stdio.h>

#include "cli_job.h"
#include "commands.h"
#include "engine/device.h"
#include "jsonout.h"
#include "io/output.h"
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
    if (!j->rc && cli_open_model(&j->m, j->dev, &j->model, j->found)) j->rc = EXIT_FAIL;
    return j->rc;
}

int cli_job_threads(CliJob *j) {
    if (!j->rc) cli_set_threads(j->threads);
    return j->rc;
}

int cli_job_memory(CliJob *j, long batch, int T, size_t extra) {
    if (!j->rc && cli_check_memory(&j->m, j->cmd, batch, T, extra)) j->rc = EXIT_FAIL;
    return j->rc;
}

int cli_job_fail(CliJob *j, const Err *e) {
    fprintf(stderr, "lingen: %s\n", e->msg);
    return j->rc = EXIT_FAIL;
}

int cli_job_agree(CliJob *j) { return j->rc = shard_agree(j->rc); }

void cli_job_free(CliJob *j) { model_free(&j->m); }

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
