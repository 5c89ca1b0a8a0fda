/* A loaded model as the CUDA engine takes it (cuda/lingen_cuda.h's GpuModel): the C side of
 * the hand-over, compiled in every build so that `make test` checks it without a GPU. */
#ifndef LINGEN_GPU_MODEL_H
#define LINGEN_GPU_MODEL_H
#include "lingen_cuda.h"
#include "engine/model.h"

/* g's views of m's tensors (m must outlive g) and the canary: the CPU's float32 head outputs for
 * BOS at position 0. m must have been loaded with MODEL_FILE_WEIGHTS: else -1 and why. */
int gpu_model_init(GpuModel *g, const Model *m, Err *e);
void gpu_model_free(GpuModel *g);
#endif
