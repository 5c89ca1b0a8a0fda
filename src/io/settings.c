/* The environment (settings.h). */
#include "settings.h"

#include <stdlib.h>
#include <string.h>

const char *const settings_names[] = {"LINGEN_DATA", "LINGEN_MODELS", "LINGEN_INT8", "LINGEN_BF16", "LINGEN_AMX",
                                      "LINGEN_PROFILE", "LINGEN_FORCE_THREADS", "LINGEN_CUDA_SGEMM", "LINGEN_CUDA_TF32",
                                      "LINGEN_CUDA_PDL", "LINGEN_CUDA_FUSED", NULL};

static const char *nonempty(const char *name) {
    const char *v = getenv(name);
    return v && *v ? v : NULL;
}
static int is(const char *name, const char *value) {
    const char *v = getenv(name);
    return v && !strcmp(v, value);
}
/* set, and not "0" */
static int on(const char *name) {
    const char *v = nonempty(name);
    return v && strcmp(v, "0") != 0;
}

Settings settings_read(void) {
    Settings s;
    s.data = nonempty("LINGEN_DATA");
    s.models = getenv("LINGEN_MODELS");
    s.precision = is("LINGEN_INT8", "1")   ? PRECISION_INT8
                  : is("LINGEN_BF16", "0") ? PRECISION_F32
                  : is("LINGEN_INT8", "0") ? PRECISION_BF16
                                           : PRECISION_AUTO;
    s.amx_off = is("LINGEN_AMX", "0");
    s.profile = on("LINGEN_PROFILE");
    s.force_threads = on("LINGEN_FORCE_THREADS");
    s.cuda_sgemm = is("LINGEN_CUDA_SGEMM", "1");
    s.cuda_tf32 = is("LINGEN_CUDA_TF32", "1");
    s.cuda_pdl = is("LINGEN_CUDA_PDL", "1");
    s.cuda_fused = !is("LINGEN_CUDA_FUSED", "0");
    return s;
}
