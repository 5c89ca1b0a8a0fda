/* The sampling temperature's check, shared by lingen sample and lingen complete (the range:
 * dmol.h). NaN fails both comparisons. The GPU sampler draws at T = 1 only. */
#include <stdio.h>
#include <string.h>

#include "commands.h"

int cli_check_temperature(const char *cmd, double T, const char *device) {
    if (!(T >= TEMPERATURE_MIN && T <= TEMPERATURE_MAX)) {
        fprintf(stderr, "lingen %s: --temperature %g: must be in %g..%g (1 is the model's distribution)\n", cmd, T,
                TEMPERATURE_MIN, TEMPERATURE_MAX);
        return EXIT_USAGE;
    }
    if (T != 1 && strcmp(device, "cpu")) {
        fprintf(stderr, "lingen %s: --temperature needs --device cpu\n", cmd);
        return EXIT_USAGE;
    }
    return 0;
}
