/* The subcommands (one file each) and what they share. */
#ifndef LINGEN_COMMANDS_H
#define LINGEN_COMMANDS_H
#include "lingen.h"
#include "io/dataset.h"
#include "engine/dmol.h"
#include "engine/engine.h"
#include "engine/model.h"

int cmd_sample(int argc, char **argv);
int cmd_info(int argc, char **argv);
int cmd_eval(int argc, char **argv);
int cmd_compare(int argc, char **argv);
int cmd_complete(int argc, char **argv);
int cmd_models(int argc, char **argv);
int cmd_version(int argc, char **argv);

/* -o FILE: lingen writes PNG only, so the name must end in .png ("-": standard output). Returns 0,
 * or EXIT_USAGE after a message. */
int cli_check_png_name(const char *cmd, const char *path);
/* The same for option opt's file, images of a kind ("GIF") whose names end in ext (".gif"). */
int cli_check_image_name(const char *cmd, const char *opt, const char *path, const char *ext, const char *kind);
/* Two outputs (option opt_a's value a, opt_b's b; NULL: not given) that name one file, the
 * second replacing the first: refused (EXIT_USAGE, after a message). */
int cli_check_distinct(const char *cmd, const char *opt_a, const char *a, const char *opt_b, const char *b);
/* --ceiling measures one process: refused (EXIT_USAGE, after a message) in a job of several ranks. */
int cli_check_ceiling(const char *cmd, int ceiling);
/* Load a model or print "lingen: <file>: <problem>"; returns 0 on success. */
int cli_load_model(Model *m, Device d, const char *path);
/* The images a model takes: its dataset ("mnist", "cifar10") and their shape. */
typedef struct { const char *dataset; int height, width, channels; } CliShape;
/* ... an open model's (lingen.h). */
CliShape cli_shape(const lingen_model *m);
/* Whether an open model's attention is linear (sampled as an RNN), else softmax (a KV cache). */
int cli_linear(const lingen_model *m);
/* A split ("test" | "train") of the model's dataset from --data, $LINGEN_DATA or ./data, checked
 * against the model's image shape c (limit > 0: the first limit images). Prints "lingen: <problem>"
 * and returns -1 on failure. */
int cli_load_dataset(Dataset *ds, const CliShape *c, const char *model_path, const char *data, const char *split,
                     int limit);
/* Refuse, with a message naming the largest batch that fits, a run of `batch` sequences of T
 * positions at once (plus `extra` bytes) that the memory available now cannot hold. */
int cli_check_memory(const Model *m, const char *what, long batch, int T, size_t extra);
/* Threads for the computation (0: every core this process may run on; for a rank of an MPI job
 * that shares its node with others, its part of them: cli.c). Returns the threads asked for, those
 * a library call takes (lingen_run_options' threads; 0: every core). */
long cli_set_threads(long threads);
/* Before anything else: no idle OpenBLAS threads beside lingen's (cli.c). */
void cli_stop_blas_threads(void);

/* --force of every command that writes files (output.h: output_set_force). */
#define FORCE_HELP "replace outputs that are read-only too (a file without write permission)"
/* --temperature of sample and complete: checked against dmol.h's range; prints
 * "lingen <cmd>: --temperature ..." and returns EXIT_USAGE outside it. */
#define TEMPERATURE_HELP "sampling temperature (default 1, the model's distribution): mixture logits / T, scales x T"
int cli_check_temperature(const char *cmd, double T, const char *device);
/* The option rows (args.h) that commands share, each defined once: a row takes the variable it
 * fills and, where the commands' help texts differ, its text (and range). */
#define OPT_MODEL_HELP(var, help) {"model", 'm', OPT_STR, &(var), "NAME", help, 0, 0}
#define OPT_MODEL(var) OPT_MODEL_HELP(var, "model file, or a name from lingen models (default mnist)")
#define OPT_DATA(var) \
    {"data", 'd', OPT_STR, &(var), "DIR", "dataset root holding mnist/ and cifar-10/ (default $LINGEN_DATA, else ./data)", 0, 0}
#define OPT_IMAGES(var, help) {"n", 'n', OPT_INT, &(var), "N", help, 1, 1000000}
#define OPT_LIMIT(var, help) {"limit", 'l', OPT_INT, &(var), "N", help, 1, 1000000}
#define OPT_BATCH(var, max, help) {"batch", 'b', OPT_INT, &(var), "B", help, 1, max}
#define OPT_SEED(var, help) {"seed", 's', OPT_INT, &(var), "S", help, 0, 0x7fffffffffffffffL}
#define OPT_TEMPERATURE(var) {"temperature", 0, OPT_DOUBLE, &(var), "T", TEMPERATURE_HELP, 0, 0}
#define OPT_THREADS(var) \
    {"threads", 't', OPT_INT, &(var), "T", "threads (default: every usable core; more: LINGEN_FORCE_THREADS=1)", 0, 1024}
#define OPT_OUTPUT(var, help) {"output", 'o', OPT_STR, &(var), "FILE", help, 0, 0}
#define OPT_CEILING(var) \
    {"ceiling", 0, OPT_FLAG, &(var), NULL, \
     "also measure sgemm now (and a linear step's state traffic) and report the fraction of the ceiling reached", 0, 0}
#define OPT_JSON_HELP(var, help) {"json", 0, OPT_STR, &(var), "FILE", help, 0, 0}
#define OPT_JSON(var) OPT_JSON_HELP(var, "also write the figures as JSON (- for stdout; the text goes to stderr)")
#define OPT_FORCE(var) {"force", 0, OPT_FLAG, &(var), NULL, FORCE_HELP, 0, 0}
#define OPT_DEVICE(var) \
    {"device", 0, OPT_STR, &(var), "cpu|cuda", "run the model on the CPU (default) or an NVIDIA GPU (builds made with CUDA=1)", 0, 0}
#define OPT_PRECISION(var) \
    {"precision", 0, OPT_STR, &(var), "auto|f32|bf16|int8", \
     "the CPU's arithmetic for sampling steps (default auto: the fastest this processor has; lingen version says)", 0, 0}
/* Rows that commands list together, for a job j (cli_job.h: CliJob *): how the model runs
 * (--threads, --device, --precision), and sample's and eval's last three (--ceiling, --json,
 * --force). */
#define OPT_RUN_ROWS(j) OPT_THREADS((j)->threads), OPT_DEVICE((j)->device), OPT_PRECISION((j)->precision)
#define OPT_REPORT_ROWS(j) OPT_CEILING((j)->ceiling), OPT_JSON((j)->json), OPT_FORCE((j)->force)
/* --precision WORD of command cmd (NULL: not given): from now on the plan's precision
 * (plan.h), before the model is loaded. 0, or EXIT_USAGE after a message. */
int cli_precision(const char *cmd, const char *word);
/* The same word (checked by cli_precision) as lingen_open's: not given, the library's default
 * (the environment's choice); given, that precision, auto the fastest whatever the environment. */
lingen_precision cli_lib_precision(const char *word);
#endif
