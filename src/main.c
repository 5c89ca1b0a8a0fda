/* lingen: generate images pixel by pixel with linear transformers run as RNNs. */
#include <stdio.h>
#include <string.h>

#include <cblas.h>
#include <unistd.h>

#include "commands.h"

static const struct { const char *name; int (*fn)(int, char **); const char *help; } COMMANDS[] = {
    {"sample", cmd_sample, "generate images (RNN mode for linear models, KV cache for softmax)"},
    {"info", cmd_info, "show a model's configuration, size and per-image memory"},
};
#define N_COMMANDS (int)(sizeof COMMANDS / sizeof COMMANDS[0])

static void usage(FILE *f) {
    fprintf(f, "usage: lingen <command> [options]\n\ncommands:\n");
    for (int i = 0; i < N_COMMANDS; i++) fprintf(f, "  %-10s %s\n", COMMANDS[i].name, COMMANDS[i].help);
    fprintf(f, "\n'lingen <command> --help' shows a command's options.\n"
               "exit codes: 0 ok, 1 failure, 2 usage error, 130 interrupted\n");
}

const char *cli_model_path(const char *flag, const char *dflt) {
    if (flag) return flag;
    if (access(dflt, R_OK) == 0) return dflt;
    static char beside[4096];   /* models/ next to the executable, for runs from elsewhere */
    ssize_t n = readlink("/proc/self/exe", beside, sizeof beside - 64);
    if (n > 0) {
        beside[n] = 0;
        char *slash = strrchr(beside, '/');
        if (slash) {
            snprintf(slash + 1, sizeof beside - (slash + 1 - beside), "%s", dflt);
            if (access(beside, R_OK) == 0) return beside;
        }
    }
    return dflt;
}

int cli_load_model(Model *m, const char *path) {
    Err e;
    if (model_load(m, path, &e) == 0) return 0;
    fprintf(stderr, "lingen: %s\n", e.msg);
    return -1;
}

void cli_set_threads(long threads) {
    if (threads <= 0) threads = sysconf(_SC_NPROCESSORS_ONLN);
    openblas_set_num_threads((int)threads);
}

int main(int argc, char **argv) {
    if (argc < 2) { usage(stderr); return 2; }
    if (!strcmp(argv[1], "-h") || !strcmp(argv[1], "--help") || !strcmp(argv[1], "help")) { usage(stdout); return 0; }
    for (int i = 0; i < N_COMMANDS; i++)
        if (!strcmp(argv[1], COMMANDS[i].name)) return COMMANDS[i].fn(argc, argv);
    fprintf(stderr, "lingen: unknown command '%s'\n", argv[1]);
    usage(stderr);
    return 2;
}
