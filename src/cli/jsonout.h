/* --json FILE: a command's figures as JSON, to a file (written atomically) or, for "-", to
 * standard output, the text report then going to standard error so that stdout is pure JSON. */
#ifndef LINGEN_JSONOUT_H
#define LINGEN_JSONOUT_H
#include <cjson/cJSON.h>
#include "engine/ceiling.h"
#include "io/util.h"

/* Before the work starts: check that path can be written (a probe that leaves nothing), or for
 * "-" move the text report to stderr. Returns 0, or -1 after printing the problem. */
int jsonout_prepare(const char *path);
/* Write o, indented, to path ("-": the standard output saved by jsonout_prepare). */
int jsonout_write(const cJSON *o, const char *path, Err *e);
/* {"flops_per_image", "useful_gflops", "sgemm_gflops", "fraction_of_sgemm"}: what --ceiling prints;
 * with a state's pass measured, also "state_gbs", "bound_images_per_s", "bound_fraction_of_sgemm"
 * and "fraction_of_bound". */
cJSON *jsonout_ceiling(double flops_per_image, double images_per_s, const Ceiling *p);
/* In an MPI job (shard.h): {"ranks", "threads_per_rank"} added to o; nothing for one process. */
void jsonout_ranks(cJSON *o);
#endif
