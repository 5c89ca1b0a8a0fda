/* The subcommands (one file each) and what they share. */
#ifndef LINGEN_COMMANDS_H
#define LINGEN_COMMANDS_H
#include "model.h"

int cmd_sample(int argc, char **argv);
int cmd_info(int argc, char **argv);
int cmd_eval(int argc, char **argv);

/* The model path: the flag, else models/mnist.bin here, else beside the executable. */
const char *cli_model_path(const char *flag, const char *dflt);
/* Load a model or print "lingen: <file>: <problem>"; returns 0 on success. */
int cli_load_model(Model *m, const char *path);
/* Threads for OpenBLAS (0: every core). */
void cli_set_threads(long threads);
#endif
