/* What the subcommands share: finding and loading the model, threads. */
#include <stdio.h>
#include <string.h>

#include <cblas.h>
#include <unistd.h>

#include "commands.h"

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
