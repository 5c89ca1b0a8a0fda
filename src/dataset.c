/* Dataset readers: MNIST idx files and CIFAR-10 binary batches.
 * Every file is read through zlib, which reads gzipped and plain files alike, so
 * "name" and "name.gz" both work (the plain name is tried first). */
#include "dataset.h"

#include <errno.h>
#include <limits.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#define PATH_CAP 4096

const char *dataset_root(const char *flag) {
    if (flag && *flag) return flag;
    const char *env = getenv("LINGEN_DATA");
    if (env && *env) return env;
    return "data";
}

void dataset_free(Dataset *d) {
    free(d->images);
    free(d->labels);
    memset(d, 0, sizeof *d);
}

/* ----------------------------------------------------------------------------
 * Reading through zlib */

/* Open dir/sub/name, or else dir/sub/name.gz; path receives the one opened. */
static gzFile open_data(const char *dir, const char *sub, const char *name, char path[PATH_CAP], Err *e) {
    const char *suffix[2] = {"", ".gz"};
    for (int i = 0; i < 2; i++) {
        if (snprintf(path, PATH_CAP, "%s/%s/%s%s", dir, sub, name, suffix[i]) >= PATH_CAP) {
            err_set(e, "%s/%s/%s: path too long", dir, sub, name);
            return NULL;
        }
        errno = 0;
        gzFile gz = gzopen(path, "rb");
        if (gz) {
            gzbuffer(gz, 1 << 17);   /* fewer, larger reads than the 8 KB default */
            return gz;
        }
        /* A file that exists but cannot be opened is an error in its own right. */
        if (errno != ENOENT) {
            err_set(e, "%s: cannot open: %s", path, errno ? strerror(errno) : "out of memory");
            return NULL;
        }
    }
    snprintf(path, PATH_CAP, "%s/%s/%s", dir, sub, name);
    err_set(e, "%s: not found (tried %s and %s.gz); see data/README.md, or set --data / LINGEN_DATA",
            path, name, name);
    return NULL;
}

/* The zlib error on gz as one line; gzerror's text already starts with the path, so drop that. */
static int gz_fail(gzFile gz, const char *path, Err *e) {
    int code;
    const char *msg = gzerror(gz, &code);
    size_t n = strlen(path);
    if (strncmp(msg, path, n) == 0 && msg[n] == ':') msg += n + (msg[n + 1] == ' ' ? 2 : 1);
    if (code == Z_DATA_ERROR) return err_set(e, "%s: corrupt gzip stream: %s", path, msg);
    if (code == Z_BUF_ERROR) return err_set(e, "%s: truncated gzip stream (%s)", path, msg);
    return err_set(e, "%s: read error: %s", path, msg);
}

/* Read up to n bytes; *got says how many came before the end of the input.
 * Returns nonzero only on a zlib or I/O error. */
static int read_upto(gzFile gz, const char *path, unsigned char *buf, size_t n, size_t *got, Err *e) {
    *got = 0;
    while (*got < n) {
        size_t left = n - *got;
        unsigned chunk = left > (1u << 30) ? 1u << 30 : (unsigned)left;   /* gzread takes an unsigned */
        int r = gzread(gz, buf + *got, chunk);
        int code;
        gzerror(gz, &code);
        if (r < 0 || code != Z_OK) return gz_fail(gz, path, e);
        if (r == 0) break;
        *got += (size_t)r;
    }
    return 0;
}

/* Read n bytes into a new buffer. The buffer grows as data arrives, so a corrupt
 * header that promises gigabytes makes a "truncated" error, not a huge allocation.
 * *got < n means the input ended early (the caller words that error). */
static unsigned char *read_block(gzFile gz, const char *path, size_t n, size_t *got, Err *e) {
    unsigned char *buf = NULL;
    size_t cap = 0;
    *got = 0;
    while (*got < n) {
        size_t grow = cap < (1u << 20) ? (1u << 20) : cap;   /* double, starting at 1 MB */
        cap = n - cap < grow ? n : cap + grow;
        unsigned char *nb = realloc(buf, cap);
        if (!nb) {
            free(buf);
            err_set(e, "%s: cannot allocate %.1f MB", path, (double)cap / 1e6);
            return NULL;
        }
        buf = nb;
        size_t r;
        if (read_upto(gz, path, buf + *got, cap - *got, &r, e)) { free(buf); return NULL; }
        *got += r;
        if (*got < cap) break;   /* end of input */
    }
    if (!buf) buf = xmalloc(1);   /* n == 0 */
    return buf;
}

/* After reading everything a header promised: the input must end here. Reading past
 * the end also makes zlib check the gzip trailer (CRC and length). */
static int expect_end(gzFile gz, const char *path, const char *what, Err *e) {
    unsigned char extra;
    size_t got;
    if (read_upto(gz, path, &extra, 1, &got, e)) return -1;
    if (got) return err_set(e, "%s: longer than its header says (extra data after the %s)", path, what);
    return 0;
}

static uint32_t be32(const unsigned char *p) {
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

/* ----------------------------------------------------------------------------
 * MNIST: idx3 images (magic 0x803, n, rows, cols, then n*rows*cols bytes) and
 * idx1 labels (magic 0x801, n, then n bytes); all header fields big-endian. */

enum { IDX3_MAGIC = 0x803, IDX1_MAGIC = 0x801, MNIST_SIDE = 28 };

static int load_mnist(Dataset *d, const char *dir, const char *split, int limit, Err *e) {
    const char *prefix = strcmp(split, "train") == 0 ? "train" : "t10k";
    char img_name[64], lab_name[64], img_path[PATH_CAP], lab_path[PATH_CAP];
    snprintf(img_name, sizeof img_name, "%s-images-idx3-ubyte", prefix);
    snprintf(lab_name, sizeof lab_name, "%s-labels-idx1-ubyte", prefix);
    gzFile gi = NULL, gl = NULL;
    int rc = -1;
    unsigned char h[16];
    size_t got;

    /* Both headers first, so a mismatch is reported before any big read. */
    if (!(gi = open_data(dir, "mnist", img_name, img_path, e))) goto out;
    if (read_upto(gi, img_path, h, 16, &got, e)) goto out;
    if (got < 16) { err_set(e, "%s: truncated: expected a 16-byte idx3 header, got %zu bytes", img_path, got); goto out; }
    uint32_t magic = be32(h), n = be32(h + 4), rows = be32(h + 8), cols = be32(h + 12);
    if (magic != IDX3_MAGIC) {
        err_set(e, "%s: bad magic 0x%08x, expected 0x%08x (idx3 images)", img_path, (unsigned)magic, IDX3_MAGIC);
        goto out;
    }
    if (rows != MNIST_SIDE || cols != MNIST_SIDE) {
        err_set(e, "%s: images are %ux%u, expected 28x28 (MNIST)", img_path, (unsigned)rows, (unsigned)cols);
        goto out;
    }
    if (n == 0 || n > INT_MAX) { err_set(e, "%s: header says %u images", img_path, (unsigned)n); goto out; }

    if (!(gl = open_data(dir, "mnist", lab_name, lab_path, e))) goto out;
    if (read_upto(gl, lab_path, h, 8, &got, e)) goto out;
    if (got < 8) { err_set(e, "%s: truncated: expected an 8-byte idx1 header, got %zu bytes", lab_path, got); goto out; }
    uint32_t lmagic = be32(h), ln = be32(h + 4);
    if (lmagic != IDX1_MAGIC) {
        err_set(e, "%s: bad magic 0x%08x, expected 0x%08x (idx1 labels)", lab_path, (unsigned)lmagic, IDX1_MAGIC);
        goto out;
    }
    if (ln != n) { err_set(e, "%s: %u labels, but %s has %u images", lab_path, (unsigned)ln, img_path, (unsigned)n); goto out; }

    size_t want = limit > 0 && (uint32_t)limit < n ? (size_t)limit : n;
    size_t npix = (size_t)MNIST_SIDE * MNIST_SIDE;
    d->images = read_block(gi, img_path, want * npix, &got, e);
    if (!d->images) goto out;
    if (got < want * npix) {
        err_set(e, "%s: truncated: expected %s%zu bytes of images, got %zu (the header says %u images)",
                img_path, want < n ? "at least " : "", 16 + want * npix, 16 + got, (unsigned)n);
        goto out;
    }
    if (want == n && expect_end(gi, img_path, "images", e)) goto out;

    d->labels = read_block(gl, lab_path, want, &got, e);
    if (!d->labels) goto out;
    if (got < want) {
        err_set(e, "%s: truncated: expected %s%zu bytes of labels, got %zu (the header says %u labels)",
                lab_path, want < n ? "at least " : "", 8 + want, 8 + got, (unsigned)n);
        goto out;
    }
    if (want == n && expect_end(gl, lab_path, "labels", e)) goto out;
    for (size_t i = 0; i < want; i++)
        if (d->labels[i] > 9) { err_set(e, "%s: label %u of image %zu is not a digit 0..9", lab_path, d->labels[i], i); goto out; }

    d->n = (int)want;
    d->height = d->width = MNIST_SIDE;
    d->channels = 1;
    rc = 0;
out:
    if (gi) gzclose(gi);
    if (gl) gzclose(gl);
    return rc;
}

/* ----------------------------------------------------------------------------
 * CIFAR-10 binary: records of 1 label byte, then 1024 R, 1024 G, 1024 B bytes
 * (32x32, row-major). Train is data_batch_1..5 in order, test is test_batch. */

enum { CIFAR_SIDE = 32, CIFAR_PIX = CIFAR_SIDE * CIFAR_SIDE, CIFAR_REC = 1 + 3 * CIFAR_PIX };

/* Append the records of one batch file to d, stopping once d holds `limit` images (0: no limit). */
static int read_cifar_batch(Dataset *d, int *cap, const char *dir, const char *name, int limit, Err *e) {
    char path[PATH_CAP];
    gzFile gz = open_data(dir, "cifar-10", name, path, e);
    if (!gz) return -1;
    unsigned char rec[CIFAR_REC];
    long records = 0;
    int rc = -1;
    for (;;) {
        if (limit > 0 && d->n >= limit) { rc = 0; break; }   /* the rest of the file is not needed */
        size_t got;
        if (read_upto(gz, path, rec, CIFAR_REC, &got, e)) break;
        if (got == 0) {
            if (records == 0) err_set(e, "%s: empty file, no records", path);
            else rc = 0;
            break;
        }
        if (got < CIFAR_REC) {
            err_set(e, "%s: size %ld bytes is not a multiple of 3073 (the record size)",
                    path, records * CIFAR_REC + (long)got);
            break;
        }
        if (rec[0] > 9) { err_set(e, "%s: record %ld has label %u, expected 0..9", path, records, rec[0]); break; }
        if (d->n == *cap) {   /* grow both arrays; limit or 10000 (one batch) is the usual first size */
            if (*cap > INT_MAX / 2) { err_set(e, "%s: too many records", path); break; }
            int ncap = *cap ? 2 * *cap : (limit > 0 ? limit : 10000);
            unsigned char *im = realloc(d->images, (size_t)ncap * 3 * CIFAR_PIX);
            if (im) d->images = im;
            unsigned char *lb = im ? realloc(d->labels, (size_t)ncap) : NULL;
            if (lb) d->labels = lb;
            if (!im || !lb) { err_set(e, "%s: cannot allocate memory for %d images", path, ncap); break; }
            *cap = ncap;
        }
        /* planar R,G,B -> interleaved per pixel */
        unsigned char *out = d->images + (size_t)d->n * 3 * CIFAR_PIX;
        for (int p = 0; p < CIFAR_PIX; p++)
            for (int c = 0; c < 3; c++) out[3 * p + c] = rec[1 + c * CIFAR_PIX + p];
        d->labels[d->n++] = rec[0];
        records++;
    }
    gzclose(gz);
    return rc;
}

static int load_cifar(Dataset *d, const char *dir, const char *split, int limit, Err *e) {
    static const char *train[] = {"data_batch_1.bin", "data_batch_2.bin", "data_batch_3.bin",
                                  "data_batch_4.bin", "data_batch_5.bin"};
    static const char *test[] = {"test_batch.bin"};
    int is_train = strcmp(split, "train") == 0;
    const char **files = is_train ? train : test;
    int nfiles = is_train ? 5 : 1, cap = 0;
    for (int i = 0; i < nfiles && !(limit > 0 && d->n >= limit); i++)
        if (read_cifar_batch(d, &cap, dir, files[i], limit, e)) return -1;
    d->height = d->width = CIFAR_SIDE;
    d->channels = 3;
    return 0;
}

int dataset_load(Dataset *d, const char *dir, const char *dataset, const char *split, int limit, Err *e) {
    memset(d, 0, sizeof *d);
    if (!dir) dir = dataset_root(NULL);
    if (!split || (strcmp(split, "train") != 0 && strcmp(split, "test") != 0))
        return err_set(e, "unknown split '%s' (expected train or test)", split ? split : "(null)");
    int rc;
    if (dataset && strcmp(dataset, "mnist") == 0) rc = load_mnist(d, dir, split, limit, e);
    else if (dataset && strcmp(dataset, "cifar10") == 0) rc = load_cifar(d, dir, split, limit, e);
    else return err_set(e, "unknown dataset '%s' (expected mnist or cifar10)", dataset ? dataset : "(null)");
    if (rc) dataset_free(d);
    return rc;
}
