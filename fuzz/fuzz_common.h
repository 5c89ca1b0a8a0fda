/* Shared by the fuzz targets: what every error path must still get right. */
#ifndef LINGEN_FUZZ_COMMON_H
#define LINGEN_FUZZ_COMMON_H
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "io/util.h"

/* A failure must say what failed in one line that starts with the input's name: the CLI
 * prints it as is. A wrong message is a bug too, so make it a crash the fuzzer reports. */
static inline void check_error(const Err *e, const char *name) {
    size_t n = strlen(name);
    if (!e->msg[0] || strncmp(e->msg, name, n) != 0 || strchr(e->msg, '\n')) {
        fprintf(stderr, "bad error message: '%s'\n", e->msg);
        abort();
    }
}

#define FUZZ_CHECK(cond)                                                                \
    do {                                                                                \
        if (!(cond)) {                                                                  \
            fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #cond);   \
            abort();                                                                    \
        }                                                                               \
    } while (0)
#endif
