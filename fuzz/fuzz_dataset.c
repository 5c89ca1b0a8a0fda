/* libFuzzer target: the MNIST and CIFAR-10 readers, gzipped or plain.
 *
 * dataset_load reads files from a directory, so each input is written as a small dataset
 * tree in a private temporary directory (in /dev/shm when there is one: no disk traffic):
 *
 *   byte 0   bit 0: cifar10 (else mnist); bit 1: the train split (else test);
 *            bit 2: file names end in .gz (zlib reads gzip and plain data alike either way)
 *   byte 1   limit (0: no limit)
 *   rest     the files' contents, separated by SEP: MNIST images then labels;
 *            CIFAR-10 test_batch, or data_batch_1 .. data_batch_5 (missing ones are absent);
 *            a CIFAR-10 batch holds exactly 2 records here (10,000 in lingen). */
#ifndef _POSIX_C_SOURCE
#define _POSIX_C_SOURCE 200809L   /* mkdtemp */
#endif
#include <stdint.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include "io/dataset.h"
#include "fuzz_common.h"

#define SEP "|NEXT|"
#define MAX_FILES 5

static char root[256];
static char written[MAX_FILES][512];   /* the files of the last input, removed before the next */
static const uint8_t *contents[MAX_FILES];   /* ... and what each holds */
static size_t sizes[MAX_FILES];
static int n_written;

static void remove_written(void) {
    for (int i = 0; i < n_written; i++) unlink(written[i]);
    n_written = 0;
}

static void cleanup(void) {
    remove_written();
    char p[300];
    snprintf(p, sizeof p, "%s/mnist", root);
    rmdir(p);
    snprintf(p, sizeof p, "%s/cifar-10", root);
    rmdir(p);
    rmdir(root);
}

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc;
    (void)argv;
    struct stat sb;
    const char *base = stat("/dev/shm", &sb) == 0 && S_ISDIR(sb.st_mode) ? "/dev/shm" : "/tmp";
    snprintf(root, sizeof root, "%s/lingen-fuzz-dataset-XXXXXX", base);
    FUZZ_CHECK(mkdtemp(root));
    char p[300];
    snprintf(p, sizeof p, "%s/mnist", root);
    FUZZ_CHECK(mkdir(p, 0700) == 0);
    snprintf(p, sizeof p, "%s/cifar-10", root);
    FUZZ_CHECK(mkdir(p, 0700) == 0);
    atexit(cleanup);
    dataset_cifar_batch_records = 2;   /* the seeds' batches: small, but the count is enforced */
    return 0;
}

static void write_file(const char *sub, const char *name, int gz, const uint8_t *data, size_t n) {
    contents[n_written] = data;
    sizes[n_written] = n;
    char *p = written[n_written++];
    snprintf(p, sizeof written[0], "%s/%s/%s%s", root, sub, name, gz ? ".gz" : "");
    FILE *f = fopen(p, "wb");
    FUZZ_CHECK(f);
    FUZZ_CHECK(fwrite(data, 1, n, f) == n);
    FUZZ_CHECK(fclose(f) == 0);
}

/* Whether data[0..n) is whole gzip members and nothing after them, by zlib alone: what a
 * gzipped file that dataset_load read to its end must be. */
static int whole_gzip(const uint8_t *data, size_t n) {
    while (n > 0) {
        z_stream z;
        memset(&z, 0, sizeof z);
        FUZZ_CHECK(inflateInit2(&z, 15 + 16) == Z_OK);   /* 16: the gzip wrapper only */
        z.next_in = (unsigned char *)data;
        z.avail_in = (uInt)n;
        unsigned char out[4096];
        int rc;
        do {
            z.next_out = out;
            z.avail_out = sizeof out;
            rc = inflate(&z, Z_NO_FLUSH);
        } while (rc == Z_OK);
        size_t used = n - z.avail_in;
        inflateEnd(&z);
        if (rc != Z_STREAM_END) return 0;
        data += used;
        n -= used;
    }
    return 1;
}

/* The first SEP in [p, end), or NULL (memmem is a GNU extension). */
static const uint8_t *find_sep(const uint8_t *p, const uint8_t *end) {
    size_t k = strlen(SEP);
    for (; (size_t)(end - p) >= k; p++)
        if (memcmp(p, SEP, k) == 0) return p;
    return NULL;
}

/* The next part of the input, up to SEP or the end; NULL after the last one. */
static const uint8_t *next_part(const uint8_t **p, const uint8_t *end, size_t *n) {
    if (!*p) return NULL;
    const uint8_t *start = *p;
    const uint8_t *sep = find_sep(start, end);
    *n = (size_t)((sep ? sep : end) - start);
    *p = sep ? sep + strlen(SEP) : NULL;
    return start;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 2) return 0;
    int cifar = data[0] & 1, train = data[0] >> 1 & 1, gz = data[0] >> 2 & 1, limit = data[1];
    const uint8_t *p = data + 2, *end = data + size;
    remove_written();
    if (cifar) {
        const char *files[MAX_FILES] = {"data_batch_1.bin", "data_batch_2.bin", "data_batch_3.bin",
                                        "data_batch_4.bin", "data_batch_5.bin"};
        int nfiles = train ? MAX_FILES : 1;
        if (!train) files[0] = "test_batch.bin";
        size_t n;
        const uint8_t *part;
        for (int i = 0; i < nfiles && (part = next_part(&p, end, &n)); i++)
            write_file("cifar-10", files[i], gz, part, n);
    } else {
        const char *pre = train ? "train" : "t10k";
        char img[64], lab[64];
        snprintf(img, sizeof img, "%s-images-idx3-ubyte", pre);
        snprintf(lab, sizeof lab, "%s-labels-idx1-ubyte", pre);
        size_t n;
        const uint8_t *part = next_part(&p, end, &n);
        write_file("mnist", img, gz, part, n);
        if ((part = next_part(&p, end, &n))) write_file("mnist", lab, gz, part, n);
    }

    Dataset d;
    Err e = {{0}};
    if (dataset_load(&d, root, cifar ? "cifar10" : "mnist", train ? "train" : "test", limit, &e) == 0) {
        FUZZ_CHECK(d.n > 0 && (limit == 0 || d.n <= limit));
        FUZZ_CHECK(d.height == (cifar ? 32 : 28) && d.width == d.height && d.channels == (cifar ? 3 : 1));
        for (int i = 0; i < d.n; i++) FUZZ_CHECK(d.labels[i] <= 9);
        /* every file was read to its end (not the CIFAR-10 train batches past --limit) */
        if (!(cifar && train && limit))
            for (int i = 0; i < n_written; i++)
                if (sizes[i] >= 2 && contents[i][0] == 0x1f && contents[i][1] == 0x8b)
                    FUZZ_CHECK(whole_gzip(contents[i], sizes[i]));
        /* touch every pixel: ASan flags a buffer shorter than the header promised */
        unsigned sum = 0;
        for (size_t i = 0, np = (size_t)d.n * d.height * d.width * d.channels; i < np; i++) sum += d.images[i];
        (void)sum;
        dataset_free(&d);
    } else {
        check_error(&e, root);
        FUZZ_CHECK(!d.images && !d.labels && d.n == 0);
    }
    return 0;
}
