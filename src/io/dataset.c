/* Dataset readers: MNIST idx files and CIFAR-10 binary batches.
 * Every file is read through zlib, which reads gzipped and plain files alike, so
 * "name" and "name.gz" both work (the plain name is tried first). Every file is read to its
 * end, --limit or not: a gzip stream must end with its trailer, CRC and length matching, and
 * nothing may follow what the format says the file holds. What a file may hold is capped
 * (MNIST: 60,000 images; CIFAR-10: exactly 10,000 records a batch), so a small file that
 * decompresses to gigabytes is refused once it passes the cap, not after. */
#include "settings.h"
#include "dataset.h"

#include <errno.h>
#include <limits.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>
#include <sys/stat.h>
#include <unistd.h>

#define PATH_CAP 4096

const char *dataset_root(const char *flag) {
    if (flag && *flag) return flag;
    const char *env = settings_read().data;
    if (env) return env;
    return "data";
}

void dataset_free(Dataset *d) {
    free(d->images);
    free(d->labels);
    memset(d, 0, sizeof *d);
}

/* ----------------------------------------------------------------------------
 * Reading a file, plain or gzipped (told apart by the gzip magic bytes 1f 8b). zlib's own
 * gzread accepts a gzip file whose trailer is missing when it met the end of the file early,
 * and ignores junk after the stream; so inflate is driven here, and a gzip file must reach
 * the end of its stream (Z_STREAM_END: trailer read, CRC and length matching) exactly where
 * the file ends (or where another gzip member begins). */

typedef struct {
    FILE *f;
    int gzip, ended;          /* a gzip file; its current member's stream has ended */
    z_stream z;
    unsigned char in[1 << 17];
} Src;

static void src_close(Src *s) {
    if (!s) return;
    if (s->gzip) inflateEnd(&s->z);
    if (s->f) fclose(s->f);
    free(s);
}

/* Refill the input buffer when empty; returns the bytes now available (0: end of file). */
static size_t src_fill(Src *s, const char *path, Err *e, int *err) {
    *err = 0;
    if (s->z.avail_in == 0) {
        s->z.next_in = s->in;
        s->z.avail_in = (uInt)fread(s->in, 1, sizeof s->in, s->f);
        if (ferror(s->f)) *err = err_set(e, "%s: read error: %s", path, strerror(errno));
    }
    return s->z.avail_in;
}

/* Open dir/sub/name, or else dir/sub/name.gz; path receives the one opened. */
static Src *open_data(const char *dir, const char *sub, const char *name, char path[PATH_CAP], Err *e) {
    const char *suffix[2] = {"", ".gz"};
    for (int i = 0; i < 2; i++) {
        if (snprintf(path, PATH_CAP, "%s/%s/%s%s", dir, sub, name, suffix[i]) >= PATH_CAP) {
            err_set(e, "%s/%s/%s: path too long", dir, sub, name);
            return NULL;
        }
        struct stat st;
        if (stat(path, &st) != 0 && errno == ENOENT) continue;
        /* A file that exists but cannot be read is an error in its own right; so is a
         * directory, a device or a FIFO (/dev/zero would never end) */
        int fd = open_regular(path, e);
        if (fd < 0) return NULL;
        Src *s = xcalloc(1, sizeof *s);
        s->f = fdopen(fd, "rb");
        if (!s->f) {
            close(fd);
            free(s);
            err_set(e, "%s: cannot open: %s", path, strerror(errno));
            return NULL;
        }
        int err;
        size_t have = src_fill(s, path, e, &err);
        if (err) { src_close(s); return NULL; }
        if (have >= 2 && s->in[0] == 0x1f && s->in[1] == 0x8b) {
            s->gzip = 1;
            if (inflateInit2(&s->z, 15 + 16) != Z_OK) {   /* 16: the gzip wrapper only */
                s->gzip = 0;
                src_close(s);
                err_set(e, "%s: cannot open: out of memory", path);
                return NULL;
            }
            s->z.next_in = s->in;   /* inflateInit2 keeps them, but say so */
            s->z.avail_in = (uInt)have;
        }
        return s;
    }
    snprintf(path, PATH_CAP, "%s/%s/%s", dir, sub, name);
    err_set(e, "%s: not found (tried %s and %s.gz); see data/README.md, or set --data / LINGEN_DATA",
            path, name, name);
    return NULL;
}

/* Read up to n bytes; *got says how many came before the end of the input.
 * Returns nonzero only on a corrupt stream or an I/O error. */
static int read_upto(Src *s, const char *path, unsigned char *buf, size_t n, size_t *got, Err *e) {
    *got = 0;
    int err;
    while (*got < n) {
        if (!s->gzip) {   /* plain: what is buffered, then straight from the file */
            size_t k = s->z.avail_in < n - *got ? s->z.avail_in : n - *got;
            memcpy(buf + *got, s->z.next_in, k);
            s->z.next_in += k;
            s->z.avail_in -= (uInt)k;
            *got += k;
            if (*got < n && !src_fill(s, path, e, &err)) return err;
            continue;
        }
        size_t have = src_fill(s, path, e, &err);
        if (err) return -1;
        if (s->ended) {
            if (!have) return 0;   /* the file ends with the stream: all checked */
            if (*s->z.next_in != 0x1f)
                return err_set(e, "%s: corrupt gzip stream: data after its end", path);
            inflateReset(&s->z);   /* another gzip member follows */
            s->ended = 0;
        }
        if (!have) return err_set(e, "%s: truncated gzip stream (unexpected end of file)", path);
        size_t left = n - *got;
        s->z.next_out = buf + *got;
        s->z.avail_out = left > (1u << 30) ? 1u << 30 : (uInt)left;
        uInt before = s->z.avail_out;
        int rc = inflate(&s->z, Z_NO_FLUSH);
        *got += before - s->z.avail_out;
        if (rc == Z_STREAM_END) s->ended = 1;
        else if (rc == Z_MEM_ERROR) return err_set(e, "%s: out of memory", path);
        else if (rc != Z_OK && rc != Z_BUF_ERROR)
            return err_set(e, "%s: corrupt gzip stream: %s", path, s->z.msg ? s->z.msg : "bad data");
    }
    return 0;
}

/* Read n bytes into a new buffer. The buffer grows as data arrives, so a corrupt
 * header that promises gigabytes makes a "truncated" error, not a huge allocation.
 * *got < n means the input ended early (the caller words that error). */
static unsigned char *read_block(Src *gz, const char *path, size_t n, size_t *got, Err *e) {
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
static int expect_end(Src *gz, const char *path, const char *what, Err *e) {
    unsigned char extra;
    size_t got;
    if (read_upto(gz, path, &extra, 1, &got, e)) return -1;
    if (got) return err_set(e, "%s: longer than its header says (extra data after the %s)", path, what);
    return 0;
}

/* Read and check the remaining `left` bytes of a file that --limit did not need, then its end
 * (the gzip trailer). Returns nonzero, with e, if there are fewer or more. */
static int skip_rest(Src *gz, const char *path, size_t left, const char *what, Err *e) {
    unsigned char buf[1 << 16];
    while (left > 0) {
        size_t got, n = left < sizeof buf ? left : sizeof buf;
        if (read_upto(gz, path, buf, n, &got, e)) return -1;
        if (got < n) return err_set(e, "%s: truncated: %zu bytes of %s missing", path, left - got, what);
        left -= n;
    }
    return expect_end(gz, path, what, e);
}

static uint32_t be32(const unsigned char *p) {
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

/* ----------------------------------------------------------------------------
 * MNIST: idx3 images (magic 0x803, n, rows, cols, then n*rows*cols bytes) and
 * idx1 labels (magic 0x801, n, then n bytes); all header fields big-endian. */

enum { IDX3_MAGIC = 0x803, IDX1_MAGIC = 0x801, MNIST_SIDE = 28, MNIST_MAX = 60000 /* the train split */ };

static int load_mnist(Dataset *d, const char *dir, const char *split, int limit, Err *e) {
    const char *prefix = strcmp(split, "train") == 0 ? "train" : "t10k";
    char img_name[64], lab_name[64], img_path[PATH_CAP], lab_path[PATH_CAP];
    snprintf(img_name, sizeof img_name, "%s-images-idx3-ubyte", prefix);
    snprintf(lab_name, sizeof lab_name, "%s-labels-idx1-ubyte", prefix);
    Src *gi = NULL, *gl = NULL;
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
    if (n == 0 || n > MNIST_MAX) {
        err_set(e, "%s: header says %u images (MNIST files hold 1 to %d)", img_path, (unsigned)n, MNIST_MAX);
        goto out;
    }

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
    if (skip_rest(gi, img_path, (n - want) * npix, "images", e)) goto out;

    /* every label, --limit or not (60,000 bytes at most): each one checked, the first `want` kept */
    d->labels = read_block(gl, lab_path, n, &got, e);
    if (!d->labels) goto out;
    if (got < n) {
        err_set(e, "%s: truncated: expected %zu bytes of labels, got %zu (the header says %u labels)", lab_path,
                8 + (size_t)n, 8 + got, (unsigned)n);
        goto out;
    }
    if (expect_end(gl, lab_path, "labels", e)) goto out;
    for (size_t i = 0; i < n; i++)
        if (d->labels[i] > 9) { err_set(e, "%s: label %u of image %zu is not a digit 0..9", lab_path, d->labels[i], i); goto out; }

    d->n = (int)want;
    d->height = d->width = MNIST_SIDE;
    d->channels = 1;
    rc = 0;
out:
    src_close(gi);
    src_close(gl);
    return rc;
}

/* ----------------------------------------------------------------------------
 * CIFAR-10 binary: records of 1 label byte, then 1024 R, 1024 G, 1024 B bytes
 * (32x32, row-major). Train is data_batch_1..5 in order, test is test_batch. */

enum { CIFAR_SIDE = 32, CIFAR_PIX = CIFAR_SIDE * CIFAR_SIDE, CIFAR_REC = 1 + 3 * CIFAR_PIX };

int dataset_cifar_batch_records = 10000;

/* Append the records of one batch file to d, up to `limit` images in d (0: no limit); the
 * rest of the file is read and checked all the same. */
static int read_cifar_batch(Dataset *d, int *cap, const char *dir, const char *name, int limit, Err *e) {
    char path[PATH_CAP];
    Src *gz = open_data(dir, "cifar-10", name, path, e);
    if (!gz) return -1;
    unsigned char rec[CIFAR_REC];
    long records = 0, want = dataset_cifar_batch_records;
    int rc = -1;
    for (;;) {
        size_t got;
        if (read_upto(gz, path, rec, CIFAR_REC, &got, e)) break;
        if (got == 0) {
            if (records == want) rc = 0;
            else if (records == 0) err_set(e, "%s: empty file, no records", path);
            else err_set(e, "%s: %ld records, a CIFAR-10 batch holds exactly %ld", path, records, want);
            break;
        }
        if (got < CIFAR_REC) {
            err_set(e, "%s: size %ld bytes is not a multiple of 3073 (the record size)",
                    path, records * CIFAR_REC + (long)got);
            break;
        }
        if (records == want) {   /* stop here: a gzip bomb is not decompressed any further */
            err_set(e, "%s: more than %ld records, a CIFAR-10 batch holds exactly %ld", path, want, want);
            break;
        }
        if (rec[0] > 9) { err_set(e, "%s: record %ld has label %u, expected 0..9", path, records, rec[0]); break; }
        records++;
        if (limit > 0 && d->n >= limit) continue;   /* not needed, but checked */
        if (d->n == *cap) {   /* grow both arrays; limit or one batch is the usual first size */
            if (*cap > INT_MAX / 2) { err_set(e, "%s: too many records", path); break; }
            int ncap = *cap ? 2 * *cap : (limit > 0 ? limit : (int)want);
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
    }
    src_close(gz);
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
