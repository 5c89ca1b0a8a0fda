/* lingen: generate images pixel by pixel with linear transformers run as RNNs. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "args.h"
#include "commands.h"
#include "engine/shard.h"

/* sharded: the command splits its work over the ranks of an MPI job (shard.h, make MPI=1); the
 * others run whole in every process they are started in, and start no MPI. */
static const struct { const char *name; int (*fn)(int, char **); int sharded; const char *help; } COMMANDS[] = {
    {"sample", cmd_sample, 1, "generate images (RNN mode for linear models, KV cache for softmax)"},
    {"complete", cmd_complete, 0, "finish partly hidden images: keep the top rows, sample the rest"},
    {"eval", cmd_eval, 1, "bits per dimension on the test set (parallel or step form)"},
    {"compare", cmd_compare, 0, "linear (RNN mode) against softmax: bits/dim, images/s, memory (--softmax)"},
    {"info", cmd_info, 0, "show a model's configuration, size and per-image memory"},
    {"models", cmd_models, 0, "list the models that --model NAME finds, and where it looks"},
    {"version", cmd_version, 0, "version, micro-kernel, OpenBLAS, threads, CUDA (also --version)"},
};
#define N_COMMANDS (int)(sizeof COMMANDS / sizeof COMMANDS[0])

static void usage(FILE *f) {
    fprintf(f, "usage: lingen <command> [options]\n\ncommands:\n");
    for (int i = 0; i < N_COMMANDS; i++) fprintf(f, "  %-10s %s\n", COMMANDS[i].name, COMMANDS[i].help);
    fprintf(f, "\n'lingen <command> --help' shows a command's options; 'lingen --version' the build.\n"
               "exit codes: 0 ok, 1 failure, 2 usage error, 130 interrupted\n");
}

/* Standard input, output and error that were closed (lingen >&-) are opened on /dev/null, read
 * only: a file lingen opens later never takes their numbers (a temporary PNG on descriptor 1
 * would receive the printed report), and writes to them fail, as they would have. */
static void hold_std_fds(void) {
    for (int fd = 0; fd <= 2; fd++)
        if (fcntl(fd, F_GETFD) < 0 && errno == EBADF) {
            int k = open("/dev/null", O_RDONLY);
            if (k >= 0 && k != fd) { dup2(k, fd); close(k); }
        }
}

/* The command named by argv[1], run; its exit code. */
static int run(int argc, char **argv) {
    cli_stop_blas_threads();
    if (argc < 2) { usage(stderr); return EXIT_USAGE; }
    if (!strcmp(argv[1], "-h") || !strcmp(argv[1], "--help") || !strcmp(argv[1], "help")) { usage(stdout); return EXIT_OK; }
    if (!strcmp(argv[1], "--version") || !strcmp(argv[1], "-V")) return cmd_version(argc, argv);
    const char *names[N_COMMANDS + 1];
    for (int i = 0; i < N_COMMANDS; i++) {
        names[i] = COMMANDS[i].name;
        if (strcmp(argv[1], COMMANDS[i].name)) continue;
        if (!COMMANDS[i].sharded) return COMMANDS[i].fn(argc, argv);
        shard_init(&argc, &argv);
        return shard_finish(COMMANDS[i].fn(argc, argv));
    }
    names[N_COMMANDS] = "help";
    const char *near = nearest_word(argv[1], names, N_COMMANDS + 1);
    if (near) {
        fprintf(stderr, "lingen: unknown command \"%s\": did you mean \"%s\"? (see lingen --help)\n", argv[1], near);
    } else {
        fprintf(stderr, "lingen: unknown command '%s'\n", argv[1]);
        usage(stderr);
    }
    return EXIT_USAGE;
}

/* A run that succeeded but could not write its standard output (a full disk, a closed
 * descriptor) fails: its report is lost. Else rc as it was. */
static int check_stdout(int rc) {
    errno = 0;
    int flush_failed = fflush(stdout) != 0, er = errno;
    if ((!flush_failed && !ferror(stdout)) || rc) return rc;
    if (flush_failed && er) fprintf(stderr, "lingen: standard output: write failed: %s\n", strerror(er));
    else fprintf(stderr, "lingen: standard output: write failed\n");
    return EXIT_FAIL;
}

int main(int argc, char **argv) {
    hold_std_fds();
    return check_stdout(run(argc, argv));
}
