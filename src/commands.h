/* The subcommands (one file each) and what they share. */
#ifndef LINGEN_COMMANDS_H
#define LINGEN_COMMANDS_H
#include "dataset.h"
#include "dmol.h"
#include "model.h"

int cmd_sample(int argc, char **argv);
int cmd_info(int argc, char **argv);
int cmd_eval(int argc, char **argv);
int cmd_compare(int argc, char **argv);
int cmd_complete(int argc, char **argv);
int cmd_models(int argc, char **argv);
int cmd_version(int argc, char **argv);

/* -o FILE: lingen writes PNG only, so the name must end in .png ("-": standard output). Returns 0,
 * or 2 after a usage message. */
int cli_check_png_name(const char *cmd, const char *path);
/* The same for option opt's file, images of a kind ("GIF") whose names end in ext (".gif"). */
int cli_check_image_name(const char *cmd, const char *opt, const char *path, const char *ext, const char *kind);
/* Two outputs (option opt_a's value a, opt_b's b; NULL: not given) that name one file, the
 * second replacing the first: refused (2, after a usage message). */
int cli_check_distinct(const char *cmd, const char *opt_a, const char *a, const char *opt_b, const char *b);
/* --ceiling measures one process: refused (2, after a usage message) in a job of several ranks. */
int cli_check_ceiling(const char *cmd, int ceiling);
/* Load a model or print "lingen: <file>: <problem>"; returns 0 on success. */
int cli_load_model(Model *m, const char *path);
/* --model NAME (NULL: mnist) resolved into found (modelpath.h; MODELPATH_LEN bytes), *name then
 * pointing at it, and loaded; prints the problem and returns -1 on failure. */
int cli_open_model(Model *m, const char **name, char *found);
/* A split ("test" | "train") of the model's dataset from --data, $LINGEN_DATA or ./data, checked
 * against the model's image shape (limit > 0: the first limit images). Prints "lingen: <problem>"
 * and returns -1 on failure. */
int cli_load_dataset(Dataset *ds, const Model *m, const char *model_path, const char *data, const char *split,
                     int limit);
/* Refuse, with a message naming the largest batch that fits, a run of `batch` sequences of T
 * positions at once (plus `extra` bytes) that the memory available now cannot hold. */
int cli_check_memory(const Model *m, const char *what, long batch, int T, size_t extra);
/* Threads for the computation (0: every core this process may run on; for a rank of an MPI job
 * that shares its node with others, its part of them: cli.c). */
void cli_set_threads(long threads);
/* Before anything else: no idle OpenBLAS threads beside lingen's (cli.c). */
void cli_stop_blas_threads(void);

/* --force of every command that writes files (output.h: output_set_force). */
#define FORCE_HELP "replace outputs that are read-only too (a file without write permission)"
/* --temperature of sample and complete: checked against dmol.h's range; prints
 * "lingen <cmd>: --temperature ..." and returns 2 (a usage error) outside it. */
#define TEMPERATURE_HELP "sampling temperature (default 1, the model's distribution): mixture logits / T, scales x T"
int cli_check_temperature(const char *cmd, double T, const char *device);
/* The option rows every command that runs the model shares. */
#define OPT_DEVICE(var) \
    {"device", 0, OPT_STR, &(var), "cpu|cuda", "run the model on the CPU (default) or an NVIDIA GPU (builds made with CUDA=1)", 0, 0}
#define OPT_PRECISION(var) \
    {"precision", 0, OPT_STR, &(var), "auto|f32|bf16|int8", \
     "the CPU's arithmetic for sampling steps (default auto: the fastest this processor has; lingen version says)", 0, 0}
/* --precision WORD of command cmd (NULL: not given): from now on the plan's precision
 * (plan.h), before the model is loaded. 0, or 2 after a usage message. */
int cli_precision(const char *cmd, const char *word);
#endif
