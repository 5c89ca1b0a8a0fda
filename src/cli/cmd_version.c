/* lingen version (and --version): what this build runs on, for bug reports and speed figures. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cblas.h>

#include "args.h"
#include "commands.h"
#include "kernels/matmul.h"
#include "kernels/plan.h"
#include "io/settings.h"
#include "version.h"

/* Whether the CUDA backend is built in: a build with it defines LINGEN_CUDA. */
static const char *cuda_built_in(void) {
#ifdef LINGEN_CUDA
    return "yes";
#else
    return "no";
#endif
}

int cmd_version(int argc, char **argv) {
    int r = args_parse(argc, argv, 2, NULL, 0, "version",
                       "Show the version, the matrix micro-kernel this build uses, the OpenBLAS library\n"
                       "loaded (version and the CPU core type it picked), the default thread count, and\n"
                       "whether CUDA is built in.",
                       NULL, 0, NULL);
    if (r) return r < 0 ? EXIT_OK : r;
    const char *config = openblas_get_config();   /* "OpenBLAS 0.3.21 DYNAMIC_ARCH ... MAX_THREADS=64" */
    char ver[32] = "unknown";
    if (config && !strncmp(config, "OpenBLAS ", 9)) sscanf(config + 9, "%31s", ver);
    printf("lingen %s\n", LINGEN_VERSION);
    Plan plan = plan_default();
    Copies all = plan_copies(&plan, 1, 0);   /* a float16 weight's */
    printf("micro-kernel %s%s\n", matmul_kernel_name(),
           all.amx ? "; AMX tiles for the parallel form (evaluation, a prefix)" : "");
    printf("precision    %s: steps at batch 64 in %s", plan_precision_name(plan.precision),
           plan_kernel_name(plan_kernel(&plan, all, 1, 64, 0)));
    if (plan.q8_batch > 0 && plan.q8_batch < 64) printf(", at batch 1-%d in int8", plan.q8_batch);
    printf("\n");
    printf("OpenBLAS     %s, core %s (%s)\n", ver, openblas_get_corename(), config ? config : "");
    printf("threads      %ld (every online core; --threads T changes it)\n", sysconf(_SC_NPROCESSORS_ONLN));
    printf("CUDA         %s\n", cuda_built_in());
    for (int i = 0; settings_names[i]; i++)   /* the environment lingen reads, where set */
        if (getenv(settings_names[i])) {
            char *v = text_escape(getenv(settings_names[i]));
            printf("environment  %s=%s\n", settings_names[i], v);
            free(v);
        }
    return EXIT_OK;
}
