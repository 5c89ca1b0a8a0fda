/* lingen: generate images pixel by pixel with linear transformers run as RNNs. */
#include <stdio.h>
#include <string.h>

#include "args.h"
#include "commands.h"

static const struct { const char *name; int (*fn)(int, char **); const char *help; } COMMANDS[] = {
    {"sample", cmd_sample, "generate images (RNN mode for linear models, KV cache for softmax)"},
    {"complete", cmd_complete, "finish partly hidden images: keep the top rows, sample the rest"},
    {"eval", cmd_eval, "bits per dimension on the test set (parallel or step form)"},
    {"compare", cmd_compare, "linear (RNN mode) against softmax: bits/dim, images/s, memory (--softmax)"},
    {"info", cmd_info, "show a model's configuration, size and per-image memory"},
    {"models", cmd_models, "list the models that --model NAME finds, and where it looks"},
    {"version", cmd_version, "version, micro-kernel, OpenBLAS, threads, CUDA (also --version)"},
};
#define N_COMMANDS (int)(sizeof COMMANDS / sizeof COMMANDS[0])

static void usage(FILE *f) {
    fprintf(f, "usage: lingen <command> [options]\n\ncommands:\n");
    for (int i = 0; i < N_COMMANDS; i++) fprintf(f, "  %-10s %s\n", COMMANDS[i].name, COMMANDS[i].help);
    fprintf(f, "\n'lingen <command> --help' shows a command's options; 'lingen --version' the build.\n"
               "exit codes: 0 ok, 1 failure, 2 usage error, 130 interrupted\n");
}

int main(int argc, char **argv) {
    if (argc < 2) { usage(stderr); return 2; }
    if (!strcmp(argv[1], "-h") || !strcmp(argv[1], "--help") || !strcmp(argv[1], "help")) { usage(stdout); return 0; }
    if (!strcmp(argv[1], "--version") || !strcmp(argv[1], "-V")) return cmd_version(argc, argv);
    const char *names[N_COMMANDS + 1];
    for (int i = 0; i < N_COMMANDS; i++) {
        if (!strcmp(argv[1], COMMANDS[i].name)) return COMMANDS[i].fn(argc, argv);
        names[i] = COMMANDS[i].name;
    }
    names[N_COMMANDS] = "help";
    const char *near = args_nearest(argv[1], names, N_COMMANDS + 1);
    if (near) {
        fprintf(stderr, "lingen: unknown command \"%s\": did you mean \"%s\"? (see lingen --help)\n", argv[1], near);
    } else {
        fprintf(stderr, "lingen: unknown command '%s'\n", argv[1]);
        usage(stderr);
    }
    return 2;
}
