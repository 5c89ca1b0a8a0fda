#include "jsonout.h"
#include "io/output.h"
#include "engine/shard.h"
#include "kernels/threads.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

static int json_fd = -1;   /* the standard output that "-" writes to, once the text is moved off it */

int jsonout_prepare(const char *path) {
    Err e;
    if (strcmp(path, "-")) {
        if (output_check(path, &e)) { fprintf(stderr, "lingen: %s\n", e.msg); return -1; }
        return 0;
    }
    fflush(stdout);
    if (json_fd < 0 && ((json_fd = dup(STDOUT_FILENO)) < 0 || dup2(STDERR_FILENO, STDOUT_FILENO) < 0)) {
        fprintf(stderr, "lingen: --json -: %s\n", strerror(errno));
        return -1;
    }
    return 0;
}

int jsonout_write(const cJSON *o, const char *path, Err *e) {
    char *text = cJSON_Print(o);
    if (!text) return err_set(e, "%s: out of memory", path);
    int rc;
    if (!strcmp(path, "-")) {
        fflush(stdout);
        FILE *f = json_fd >= 0 ? fdopen(dup(json_fd), "w") : NULL;
        rc = f && fprintf(f, "%s\n", text) >= 0 ? 0 : -1;
        if (f && fclose(f)) rc = -1;
        if (rc) err_set(e, "standard output: write failed");
    } else {
        AtomicFile a;
        rc = atomic_open(&a, path, e);
        if (rc == 0) {
            fputs(text, a.f);
            fputc('\n', a.f);
            rc = atomic_commit(&a, e);
        }
    }
    cJSON_free(text);
    return rc;
}

cJSON *jsonout_ceiling(double flops_per_image, double images_per_s, const Ceiling *p) {
    cJSON *o = cJSON_CreateObject();
    double useful = flops_per_image * images_per_s / 1e9;
    cJSON_AddNumberToObject(o, "flops_per_image", flops_per_image);
    cJSON_AddNumberToObject(o, "useful_gflops", useful);
    cJSON_AddNumberToObject(o, "sgemm_gflops", p->gflops);
    cJSON_AddNumberToObject(o, "fraction_of_sgemm", useful / p->gflops);
    if (p->bound_ips > 0) {
        cJSON_AddNumberToObject(o, "state_gbs", p->state_gbs);
        cJSON_AddNumberToObject(o, "bound_images_per_s", p->bound_ips);
        cJSON_AddNumberToObject(o, "bound_fraction_of_sgemm", flops_per_image * p->bound_ips / 1e9 / p->gflops);
        cJSON_AddNumberToObject(o, "fraction_of_bound", images_per_s / p->bound_ips);
    }
    return o;
}

void jsonout_ranks(cJSON *o) {
    if (shard_size() == 1) return;
    cJSON_AddNumberToObject(o, "ranks", shard_size());
    cJSON_AddNumberToObject(o, "threads_per_rank", threads_count());
}
