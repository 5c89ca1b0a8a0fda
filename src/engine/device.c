/* --device (device.h). */
#include "device.h"

#include <stdio.h>
#include <string.h>

#include "shard.h"
#include "transformer.h"

int device_parse(const char *name, const char *cmd, Device *d) {
    if (!strcmp(name, "cpu")) { *d = DEVICE_CPU; return 0; }
    if (strcmp(name, "cuda")) {
        fprintf(stderr, "lingen %s: --device must be cpu or cuda, not '%s'\n", cmd, name);
        return EXIT_USAGE;
    }
#ifndef LINGEN_CUDA
    fprintf(stderr, "lingen %s: --device cuda: this lingen was built without CUDA (build it with make CUDA=1)\n", cmd);
    return EXIT_FAIL;
#else
    *d = DEVICE_CUDA;
    return 0;
#endif
}

int device_model_load(Model *m, Device d, const char *path, Err *e) {
    if (d != DEVICE_CUDA) return model_load_with(m, path, NULL, 0, e);
    Plan f32 = plan_make((Caps){0, 0, 0}, PRECISION_F32);
    return model_load_with(m, path, &f32, MODEL_FILE_WEIGHTS, e);
}

int device_option(const char *name, const char *cmd, int probe, Device *d) {
    int rc = device_parse(name, cmd, d);
    if (rc) return rc;
    Err e;
#ifdef LINGEN_CUDA
    /* the ranks of an MPI job that share a node take its GPUs in turn (shard.h) */
    if (*d == DEVICE_CUDA && probe && engine_cuda_use(shard_local_rank(), &e)) {
        fprintf(stderr, "lingen %s: --device %s: %s\n", cmd, name, e.msg);
        return EXIT_FAIL;
    }
#else
    (void)probe;
    (void)e;
#endif
    return 0;
}

long device_default_batch(const Config *c, Device d, RunKind k, int T) {
    int gpu = d == DEVICE_CUDA;
    if (k == RUN_COMPLETE) return 16;
    if (k == RUN_BITS_PER_DIM) {
        long cpu = c->seq_len > 1000 ? 4 : 16;
        return gpu ? device_batch_fit((double)(runstate_bytes(c, 1, T) - runstate_bytes(c, 0, T)), cpu, 256) : cpu;
    }
    return gpu ? device_batch_fit((double)model_state_bytes(c, c->seq_len), 64, 4096) : 64;
}

long device_batch_fit(double bytes_per_image, long lo, long hi) {
    if (bytes_per_image <= 0 || GPU_BATCH_BYTES / bytes_per_image >= hi) return hi;
    long fit = (long)(GPU_BATCH_BYTES / bytes_per_image);
    return fit < lo ? lo : fit;
}
