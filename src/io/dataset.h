/* Dataset readers: MNIST idx files and CIFAR-10 binary batches, gzipped or not.
 * Images come out as uint8 [n][N], N = h*w*c, channels interleaved per pixel (R,G,B,...). */
#ifndef LINGEN_DATASET_H
#define LINGEN_DATASET_H
#include "util.h"

typedef struct {
    int n, height, width, channels;
    unsigned char *images;   /* [n][height*width*channels] */
    unsigned char *labels;   /* [n] */
} Dataset;

/* dataset: "mnist" | "cifar10"; split: "train" | "test"; dir: the root holding mnist/ and cifar-10/.
 * limit > 0 reads at most that many images. */
int  dataset_load(Dataset *d, const char *dir, const char *dataset, const char *split, int limit, Err *e);
void dataset_free(Dataset *d);
/* Records in a CIFAR-10 batch file, each file exactly this many: 10000 (the tests and the
 * fuzzer lower it, to keep their files small). */
extern int dataset_cifar_batch_records;
/* The root: --data if given, else $LINGEN_DATA, else "./data". */
const char *dataset_root(const char *flag);
#endif
