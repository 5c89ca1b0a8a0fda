/* The CUDA engine's error recording and device choice: each CUDA or cuBLAS call of the engine
 * goes through CK, CKB or CKL (internal.cuh), which keep the first failure as "file:line: call:
 * error" until take_error hands it to the caller; and cuda_probe and cuda_use_device
 * (lingen_cuda.h). */
#include <stdio.h>

#include "internal.cuh"

/* The first failure of a call, as "file:line: call: error" (later ones would only repeat it). */
static char first_error[512];
int failed;

bool note(bool ok, const char *what, const char *why, const char *file, int line) {
    if (!ok && !failed) {
        snprintf(first_error, sizeof first_error, "%s:%d: %s: %s", file, line, what, why);
        failed = 1;
    }
    return ok;
}

bool note_cuda(cudaError_t r, const char *what, const char *file, int line) {
    return note(r == cudaSuccess, what, cudaGetErrorString(r), file, line);
}
bool note_cublas(cublasStatus_t r, const char *what, const char *file, int line) {
    return note(r == CUBLAS_STATUS_SUCCESS, what, cublasGetStatusString(r), file, line);
}
/* Returns -1 with the recorded failure in e, and clears it for the next run. */
int take_error(Err *e) {
    err_set(e, "CUDA: %s", failed ? first_error : "unknown failure");
    failed = 0;
    return -1;
}

extern "C" int cuda_probe(Err *e) {
    int n = 0;
    cudaError_t r = cudaGetDeviceCount(&n);
    if (r != cudaSuccess) return err_set(e, "no CUDA device: %s", cudaGetErrorString(r));
    if (n < 1) return err_set(e, "no CUDA device");
    return 0;
}

extern "C" int cuda_use_device(int index, Err *e) {
    int n = 0;
    cudaError_t r = cudaGetDeviceCount(&n);
    if (r == cudaSuccess && n < 1) return err_set(e, "no CUDA device");
    if (r == cudaSuccess) r = cudaSetDevice(index % n);
    if (r != cudaSuccess) return err_set(e, "cannot use CUDA device %d: %s", n > 0 ? index % n : index, cudaGetErrorString(r));
    return 0;
}
