/* Dataset readers: the real MNIST / CIFAR-10 files under $LINGEN_DATA, and every
 * error path on small broken files written to a temporary directory. */
#include "testutil.h"
#include "io/dataset.h"

#include <dirent.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

/* ---------------------------------------------------------------------------
 * Helpers: a temp root with mnist/ and cifar-10/, files written plain or gzipped */

typedef struct { char root[64]; char path[4096]; } Tmp;

static int tmp_setup(void **state) {
    Tmp *t = calloc(1, sizeof *t);
    assert_non_null(t);
    strcpy(t->root, "/tmp/lingen_test_dataset_XXXXXX");
    assert_non_null(mkdtemp(t->root));
    char sub[128];
    snprintf(sub, sizeof sub, "%s/mnist", t->root);
    assert_int_equal(mkdir(sub, 0777), 0);
    snprintf(sub, sizeof sub, "%s/cifar-10", t->root);
    assert_int_equal(mkdir(sub, 0777), 0);
    *state = t;
    return 0;
}

static void rm_dir(const char *dir) {
    DIR *dp = opendir(dir);
    if (!dp) return;
    struct dirent *de;
    char p[4096];
    while ((de = readdir(dp))) {
        if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0) continue;
        snprintf(p, sizeof p, "%s/%s", dir, de->d_name);
        unlink(p);
    }
    closedir(dp);
    rmdir(dir);
}

static int tmp_teardown(void **state) {
    Tmp *t = *state;
    dataset_cifar_batch_records = 10000;   /* some tests lower it */
    char sub[128];
    snprintf(sub, sizeof sub, "%s/mnist", t->root);
    rm_dir(sub);
    snprintf(sub, sizeof sub, "%s/cifar-10", t->root);
    rm_dir(sub);
    rmdir(t->root);
    free(t);
    return 0;
}

/* t->path = root/sub/name; returns it. */
static const char *tpath(Tmp *t, const char *sub, const char *name) {
    snprintf(t->path, sizeof t->path, "%s/%s/%s", t->root, sub, name);
    return t->path;
}

static void write_plain(const char *path, const void *buf, size_t n) {
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(buf, 1, n, f), n);
    assert_int_equal(fclose(f), 0);
}

static void write_gz(const char *path, const void *buf, size_t n) {
    gzFile gz = gzopen(path, "wb");
    assert_non_null(gz);
    assert_int_equal(gzwrite(gz, buf, (unsigned)n), (int)n);
    assert_int_equal(gzclose(gz), Z_OK);
}

static unsigned char *slurp(const char *path, size_t *n) {
    Err e;
    unsigned char *b = read_file(path, n, &e);
    assert_non_null(b);
    return b;
}

static void put_be32(unsigned char *p, unsigned v) {
    p[0] = v >> 24; p[1] = v >> 16; p[2] = v >> 8; p[3] = v;
}

/* A synthetic idx3 file: header (magic, n, rows, cols) then `pixels` bytes of pattern. */
static unsigned char *make_idx3(unsigned magic, unsigned n, unsigned rows, unsigned cols, size_t pixels, size_t *len) {
    unsigned char *b = calloc(16 + pixels, 1);
    assert_non_null(b);
    put_be32(b, magic); put_be32(b + 4, n); put_be32(b + 8, rows); put_be32(b + 12, cols);
    for (size_t i = 0; i < pixels; i++) b[16 + i] = (unsigned char)(i * 7);
    *len = 16 + pixels;
    return b;
}

static unsigned char *make_idx1(unsigned magic, unsigned n, size_t count, size_t *len) {
    unsigned char *b = calloc(8 + count, 1);
    assert_non_null(b);
    put_be32(b, magic); put_be32(b + 4, n);
    for (size_t i = 0; i < count; i++) b[8 + i] = (unsigned char)(i % 10);
    *len = 8 + count;
    return b;
}

/* A valid MNIST test split of n images (plain files) in t. */
static void write_mnist(Tmp *t, unsigned n) {
    size_t len;
    unsigned char *b = make_idx3(0x803, n, 28, 28, (size_t)n * 784, &len);
    write_plain(tpath(t, "mnist", "t10k-images-idx3-ubyte"), b, len);
    free(b);
    b = make_idx1(0x801, n, n, &len);
    write_plain(tpath(t, "mnist", "t10k-labels-idx1-ubyte"), b, len);
    free(b);
}

/* Synthetic CIFAR records: label (first + i) % 10, then R plane = i, G = 100 + i, B = 200 + p % 50. */
static unsigned char *make_cifar(int n, int first, size_t *len) {
    unsigned char *b = calloc((size_t)n, 3073);
    assert_non_null(b);
    for (int i = 0; i < n; i++) {
        unsigned char *r = b + (size_t)i * 3073;
        r[0] = (unsigned char)((first + i) % 10);
        for (int p = 0; p < 1024; p++) {
            r[1 + p] = (unsigned char)(first + i);
            r[1 + 1024 + p] = (unsigned char)(100 + first + i);
            r[1 + 2048 + p] = (unsigned char)(200 + p % 50);
        }
    }
    *len = (size_t)n * 3073;
    return b;
}

/* The load must fail, and the message must name `path` and contain `phrase`. */
static void expect_fail(const char *root, const char *dataset, const char *split, int limit,
                        const char *path, const char *phrase) {
    Dataset d;
    Err e = {{0}};
    int rc = dataset_load(&d, root, dataset, split, limit, &e);
    if (rc == 0 || (path && !strstr(e.msg, path)) || !strstr(e.msg, phrase))
        print_error("expected failure naming '%s' with '%s'; rc=%d msg='%s'\n", path ? path : "", phrase, rc, e.msg);
    assert_int_not_equal(rc, 0);
    if (path) assert_non_null(strstr(e.msg, path));
    assert_non_null(strstr(e.msg, phrase));
    assert_null(strchr(e.msg, '\n'));   /* one line */
    assert_null(d.images);               /* nothing left allocated */
    assert_null(d.labels);
    assert_int_equal(d.n, 0);
}

/* ---------------------------------------------------------------------------
 * Real data */

static long sum_bytes(const unsigned char *p, size_t n) {
    long s = 0;
    for (size_t i = 0; i < n; i++) s += p[i];
    return s;
}

static void test_mnist_test_split(void **state) {
    (void)state;
    Dataset d;
    Err e;
    assert_int_equal(dataset_load(&d, test_data_dir(), "mnist", "test", 0, &e), 0);
    assert_int_equal(d.n, 10000);
    assert_int_equal(d.height, 28);
    assert_int_equal(d.width, 28);
    assert_int_equal(d.channels, 1);
    assert_int_equal(d.labels[0], 7);
    /* Computed independently with python3:
     *   im = gzip.open('mnist/t10k-images-idx3-ubyte.gz').read()
     *   sum(im[16:16+784]) -> 18454;  sum(im[16:]) -> 264923200 */
    assert_int_equal(sum_bytes(d.images, 784), 18454);
    assert_int_equal(sum_bytes(d.images, (size_t)784 * 10000), 264923200);
    /* Label histogram of the test set, from /work/shared/data/README.md. */
    static const int want[10] = {980, 1135, 1032, 1010, 982, 892, 958, 1028, 974, 1009};
    int hist[10] = {0};
    for (int i = 0; i < d.n; i++) {
        assert_true(d.labels[i] < 10);
        hist[d.labels[i]]++;
    }
    for (int k = 0; k < 10; k++) assert_int_equal(hist[k], want[k]);
    dataset_free(&d);
    assert_null(d.images);
}

static void test_mnist_train_limit(void **state) {
    (void)state;
    Dataset d;
    Err e;
    assert_int_equal(dataset_load(&d, test_data_dir(), "mnist", "train", 3, &e), 0);
    assert_int_equal(d.n, 3);
    /* python3: tr = gzip.open('mnist/train-images-idx3-ubyte.gz').read(); sum(tr[16:16+784]) -> 27525,
     * and the first train label is 5. */
    assert_int_equal(d.labels[0], 5);
    assert_int_equal(sum_bytes(d.images, 784), 27525);
    dataset_free(&d);
}

static void test_mnist_train_full(void **state) {
    (void)state;
    Dataset d;
    Err e;
    assert_int_equal(dataset_load(&d, test_data_dir(), "mnist", "train", 0, &e), 0);
    assert_int_equal(d.n, 60000);
    /* python3: last train label 8, sum of the last image's pixels sum(tr[-784:]) -> 20920 */
    assert_int_equal(d.labels[59999], 8);
    assert_int_equal(sum_bytes(d.images + (size_t)59999 * 784, 784), 20920);
    static const int want[10] = {5923, 6742, 5958, 6131, 5842, 5421, 5918, 6265, 5851, 5949};  /* data README */
    int hist[10] = {0};
    for (int i = 0; i < d.n; i++) hist[d.labels[i]]++;
    for (int k = 0; k < 10; k++) assert_int_equal(hist[k], want[k]);
    dataset_free(&d);
}

static void test_cifar_test_limit(void **state) {
    (void)state;
    Dataset d;
    Err e;
    assert_int_equal(dataset_load(&d, test_data_dir(), "cifar10", "test", 10, &e), 0);
    assert_int_equal(d.n, 10);
    assert_int_equal(d.height, 32);
    assert_int_equal(d.width, 32);
    assert_int_equal(d.channels, 3);
    /* python3: c = gzip.open('cifar-10/test_batch.bin.gz').read(); labels c[i*3073] for i < 10 */
    static const int labels[10] = {3, 8, 8, 0, 6, 6, 1, 6, 3, 1};
    for (int i = 0; i < 10; i++) assert_int_equal(d.labels[i], labels[i]);
    /* Interleaving, from the planes in python3: pixel 0 of record 0 is
     * R=c[1]=158, G=c[1+1024]=112, B=c[1+2048]=49; pixel (row 5, col 7) is
     * c[1+167], c[1+1024+167], c[1+2048+167] = 167, 115, 41; the last pixel of record 9
     * is c[9*3073+1+1023], c[9*3073+1+2047], c[9*3073+1+3071] = 186, 185, 223. */
    const unsigned char *im = d.images;
    assert_int_equal(im[0], 158); assert_int_equal(im[1], 112); assert_int_equal(im[2], 49);
    const unsigned char *px = im + 3 * (5 * 32 + 7);
    assert_int_equal(px[0], 167); assert_int_equal(px[1], 115); assert_int_equal(px[2], 41);
    px = im + (size_t)9 * 3072 + 3 * 1023;
    assert_int_equal(px[0], 186); assert_int_equal(px[1], 185); assert_int_equal(px[2], 223);
    /* python3: sum of all pixel bytes of the first 10 records -> 3755088 */
    assert_int_equal(sum_bytes(im, (size_t)10 * 3072), 3755088);
    dataset_free(&d);
}

static void test_cifar_test_full(void **state) {
    (void)state;
    Dataset d;
    Err e;
    assert_int_equal(dataset_load(&d, test_data_dir(), "cifar10", "test", 0, &e), 0);
    assert_int_equal(d.n, 10000);
    int hist[10] = {0};
    for (int i = 0; i < d.n; i++) hist[d.labels[i]]++;
    for (int k = 0; k < 10; k++) assert_int_equal(hist[k], 1000);   /* 1000 per class (data README) */
    dataset_free(&d);
}

static void test_cifar_train_limit(void **state) {
    (void)state;
    Dataset d;
    Err e;
    assert_int_equal(dataset_load(&d, test_data_dir(), "cifar10", "train", 10, &e), 0);
    assert_int_equal(d.n, 10);
    /* python3 on data_batch_1.bin.gz: labels 6,9,9,4,1,1,2,7,8,3; pixel 0 R,G,B = 59,62,63 */
    static const int labels[10] = {6, 9, 9, 4, 1, 1, 2, 7, 8, 3};
    for (int i = 0; i < 10; i++) assert_int_equal(d.labels[i], labels[i]);
    assert_int_equal(d.images[0], 59); assert_int_equal(d.images[1], 62); assert_int_equal(d.images[2], 63);
    dataset_free(&d);
}

static void test_root(void **state) {
    (void)state;
    const char *old = getenv("LINGEN_DATA");
    char *saved = old ? strdup(old) : NULL;
    assert_string_equal(dataset_root("/flag"), "/flag");
    setenv("LINGEN_DATA", "/env", 1);
    assert_string_equal(dataset_root(NULL), "/env");
    assert_string_equal(dataset_root(""), "/env");
    setenv("LINGEN_DATA", "", 1);
    assert_string_equal(dataset_root(NULL), "data");
    unsetenv("LINGEN_DATA");
    assert_string_equal(dataset_root(NULL), "data");
    if (saved) setenv("LINGEN_DATA", saved, 1);
    free(saved);
}

/* ---------------------------------------------------------------------------
 * Synthetic files: what works */

/* Train reads data_batch_1..5 in order, mixing plain and gzipped files; a limit
 * stops after the batches it needs (missing later batches are never opened). */
static void test_cifar_batches_and_limit(void **state) {
    Tmp *t = *state;
    char name[64];
    dataset_cifar_batch_records = 2;
    for (int b = 1; b <= 5; b++) {
        size_t len;
        unsigned char *buf = make_cifar(2, 2 * (b - 1), &len);
        snprintf(name, sizeof name, "data_batch_%d.bin%s", b, b % 2 ? "" : ".gz");
        if (b % 2) write_plain(tpath(t, "cifar-10", name), buf, len);
        else write_gz(tpath(t, "cifar-10", name), buf, len);
        free(buf);
    }
    Dataset d;
    Err e;
    assert_int_equal(dataset_load(&d, t->root, "cifar10", "train", 0, &e), 0);
    assert_int_equal(d.n, 10);
    for (int i = 0; i < 10; i++) {
        assert_int_equal(d.labels[i], i % 10);
        const unsigned char *im = d.images + (size_t)i * 3072;
        for (int p = 0; p < 1024; p++) {
            assert_int_equal(im[3 * p + 0], i);
            assert_int_equal(im[3 * p + 1], 100 + i);
            assert_int_equal(im[3 * p + 2], 200 + p % 50);
        }
    }
    dataset_free(&d);

    /* Only data_batch_1 left: a limit within it works, one past it needs data_batch_2. */
    for (int b = 2; b <= 5; b++) {
        snprintf(name, sizeof name, "data_batch_%d.bin%s", b, b % 2 ? "" : ".gz");
        assert_int_equal(unlink(tpath(t, "cifar-10", name)), 0);
    }
    assert_int_equal(dataset_load(&d, t->root, "cifar10", "train", 2, &e), 0);
    assert_int_equal(d.n, 2);
    assert_int_equal(d.labels[1], 1);
    dataset_free(&d);
    expect_fail(t->root, "cifar10", "train", 3, tpath(t, "cifar-10", "data_batch_2.bin"), "not found");
}

/* The plain name wins over .gz when both exist. */
static void test_plain_before_gz(void **state) {
    Tmp *t = *state;
    write_mnist(t, 2);
    write_plain(tpath(t, "mnist", "t10k-images-idx3-ubyte.gz"), "garbage", 7);
    Dataset d;
    Err e;
    assert_int_equal(dataset_load(&d, t->root, "mnist", "test", 0, &e), 0);
    assert_int_equal(d.n, 2);
    assert_int_equal(d.images[1], 7);
    assert_int_equal(d.labels[1], 1);
    dataset_free(&d);
}

/* ---------------------------------------------------------------------------
 * Synthetic files: every error */

static void test_missing(void **state) {
    Tmp *t = *state;
    expect_fail(t->root, "mnist", "test", 0, tpath(t, "mnist", "t10k-images-idx3-ubyte"), "not found");
    expect_fail(t->root, "mnist", "test", 0, "t10k-images-idx3-ubyte.gz", "tried");
    expect_fail(t->root, "cifar10", "test", 0, tpath(t, "cifar-10", "test_batch.bin"), "not found");
    /* images present, labels missing */
    size_t len;
    unsigned char *b = make_idx3(0x803, 1, 28, 28, 784, &len);
    write_plain(tpath(t, "mnist", "t10k-images-idx3-ubyte"), b, len);
    free(b);
    expect_fail(t->root, "mnist", "test", 0, tpath(t, "mnist", "t10k-labels-idx1-ubyte"), "not found");
}

static void test_bad_args(void **state) {
    Tmp *t = *state;
    expect_fail(t->root, "imagenet", "test", 0, NULL, "unknown dataset 'imagenet'");
    expect_fail(t->root, "mnist", "valid", 0, NULL, "unknown split 'valid'");
}

static void test_bad_magic(void **state) {
    Tmp *t = *state;
    size_t len;
    unsigned char *b = make_idx3(0x804, 1, 28, 28, 784, &len);
    write_plain(tpath(t, "mnist", "t10k-images-idx3-ubyte"), b, len);
    free(b);
    expect_fail(t->root, "mnist", "test", 0, tpath(t, "mnist", "t10k-images-idx3-ubyte"),
                "bad magic 0x00000804, expected 0x00000803 (idx3 images)");
    write_mnist(t, 1);
    b = make_idx1(0x803, 1, 1, &len);
    write_plain(tpath(t, "mnist", "t10k-labels-idx1-ubyte"), b, len);
    free(b);
    expect_fail(t->root, "mnist", "test", 0, tpath(t, "mnist", "t10k-labels-idx1-ubyte"),
                "bad magic 0x00000803, expected 0x00000801 (idx1 labels)");
}

static void test_truncated(void **state) {
    Tmp *t = *state;
    write_mnist(t, 3);
    const char *img = tpath(t, "mnist", "t10k-images-idx3-ubyte");
    /* header says 3 images, only 1000 bytes in all: plain, then the same content gzipped */
    size_t len;
    unsigned char *b = make_idx3(0x803, 3, 28, 28, 1000 - 16, &len);
    write_plain(img, b, len);
    expect_fail(t->root, "mnist", "test", 0, img, "truncated: expected 2368 bytes of images, got 1000");
    /* a limit the file could satisfy does not hide the missing rest: every file is read whole */
    expect_fail(t->root, "mnist", "test", 1, img, "truncated: 1368 bytes of images missing");
    expect_fail(t->root, "mnist", "test", 2, img, "truncated: expected at least 1584 bytes of images, got 1000");
    assert_int_equal(unlink(img), 0);
    char gz[4200];
    snprintf(gz, sizeof gz, "%s.gz", img);
    write_gz(gz, b, len);
    expect_fail(t->root, "mnist", "test", 0, gz, "truncated: expected 2368 bytes of images, got 1000");
    free(b);

    /* a gzip stream cut off in the middle (full-size content, half the compressed bytes) */
    b = make_idx3(0x803, 3, 28, 28, 3 * 784, &len);
    write_gz(gz, b, len);
    free(b);
    b = slurp(gz, &len);
    write_plain(gz, b, len / 2);
    free(b);
    expect_fail(t->root, "mnist", "test", 0, gz, "truncated gzip stream");

    /* a header shorter than 16 bytes */
    assert_int_equal(unlink(gz), 0);
    write_plain(img, "\0\0\x08\x03\0\0", 6);
    expect_fail(t->root, "mnist", "test", 0, img, "truncated: expected a 16-byte idx3 header, got 6 bytes");

    /* labels truncated */
    write_mnist(t, 3);
    b = make_idx1(0x801, 3, 2, &len);
    write_plain(tpath(t, "mnist", "t10k-labels-idx1-ubyte"), b, len);
    free(b);
    expect_fail(t->root, "mnist", "test", 0, tpath(t, "mnist", "t10k-labels-idx1-ubyte"),
                "truncated: expected 11 bytes of labels, got 10");
}

/* A header that promises 2^31-1 images in a tiny gzipped file: truncated, no giant allocation. */
static void test_huge_count(void **state) {
    Tmp *t = *state;
    size_t len;
    write_mnist(t, 1);
    unsigned char *b = make_idx3(0x803, 0x7fffffff, 28, 28, 784, &len);
    char gz[4200];
    snprintf(gz, sizeof gz, "%s.gz", tpath(t, "mnist", "t10k-images-idx3-ubyte"));
    assert_int_equal(unlink(tpath(t, "mnist", "t10k-images-idx3-ubyte")), 0);
    write_gz(gz, b, len);
    free(b);
    b = make_idx1(0x801, 0x7fffffff, 1, &len);
    write_plain(tpath(t, "mnist", "t10k-labels-idx1-ubyte"), b, len);
    free(b);
    expect_fail(t->root, "mnist", "test", 0, gz, "header says 2147483647 images (MNIST files hold 1 to 60000)");
}

static void test_wrong_dims(void **state) {
    Tmp *t = *state;
    write_mnist(t, 1);
    size_t len;
    unsigned char *b = make_idx3(0x803, 1, 32, 32, 1024, &len);
    write_plain(tpath(t, "mnist", "t10k-images-idx3-ubyte"), b, len);
    free(b);
    expect_fail(t->root, "mnist", "test", 0, tpath(t, "mnist", "t10k-images-idx3-ubyte"),
                "images are 32x32, expected 28x28");
}

static void test_label_count_mismatch(void **state) {
    Tmp *t = *state;
    write_mnist(t, 3);
    size_t len;
    unsigned char *b = make_idx1(0x801, 2, 2, &len);
    write_plain(tpath(t, "mnist", "t10k-labels-idx1-ubyte"), b, len);
    free(b);
    expect_fail(t->root, "mnist", "test", 0, tpath(t, "mnist", "t10k-labels-idx1-ubyte"), "2 labels, but");
    char want[4200];
    snprintf(want, sizeof want, "but %s has 3 images", tpath(t, "mnist", "t10k-images-idx3-ubyte"));
    expect_fail(t->root, "mnist", "test", 0, NULL, want);
}

static void test_mnist_bad_label_and_extra_data(void **state) {
    Tmp *t = *state;
    write_mnist(t, 2);
    size_t len;
    unsigned char *b = make_idx1(0x801, 2, 2, &len);
    b[9] = 10;
    write_plain(tpath(t, "mnist", "t10k-labels-idx1-ubyte"), b, len);
    free(b);
    expect_fail(t->root, "mnist", "test", 0, tpath(t, "mnist", "t10k-labels-idx1-ubyte"),
                "label 10 of image 1 is not a digit");
    /* past --limit too: the labels that are not used are checked all the same */
    expect_fail(t->root, "mnist", "test", 1, tpath(t, "mnist", "t10k-labels-idx1-ubyte"),
                "label 10 of image 1 is not a digit");
    write_mnist(t, 2);
    b = make_idx3(0x803, 2, 28, 28, 3 * 784, &len);   /* one image more than the header says */
    write_plain(tpath(t, "mnist", "t10k-images-idx3-ubyte"), b, len);
    free(b);
    expect_fail(t->root, "mnist", "test", 0, tpath(t, "mnist", "t10k-images-idx3-ubyte"),
                "longer than its header says");
}

static void test_corrupt_gzip(void **state) {
    Tmp *t = *state;
    write_mnist(t, 1);
    char gz[4200];
    snprintf(gz, sizeof gz, "%s.gz", tpath(t, "mnist", "t10k-images-idx3-ubyte"));
    assert_int_equal(unlink(tpath(t, "mnist", "t10k-images-idx3-ubyte")), 0);
    /* a valid 10-byte gzip header, then garbage: 0xff starts a deflate block of the reserved type 3 */
    unsigned char bad[64] = {0x1f, 0x8b, 0x08, 0x00, 0, 0, 0, 0, 0x00, 0x03};
    memset(bad + 10, 0xff, sizeof bad - 10);
    write_plain(gz, bad, sizeof bad);
    expect_fail(t->root, "mnist", "test", 0, gz, "corrupt gzip stream: invalid block type");

    /* intact deflate data, wrong CRC in the trailer: caught when the whole file is read */
    size_t len;
    unsigned char *b = make_idx3(0x803, 1, 28, 28, 784, &len);
    write_gz(gz, b, len);
    free(b);
    b = slurp(gz, &len);
    b[len - 8] ^= 0xff;
    write_plain(gz, b, len);
    free(b);
    expect_fail(t->root, "mnist", "test", 0, gz, "corrupt gzip stream: incorrect data check");
    /* the same happens for a corrupt CIFAR batch */
    snprintf(gz, sizeof gz, "%s", tpath(t, "cifar-10", "test_batch.bin.gz"));
    write_plain(gz, bad, sizeof bad);
    expect_fail(t->root, "cifar10", "test", 0, gz, "corrupt gzip stream");
}

static void test_cifar_bad_size(void **state) {
    Tmp *t = *state;
    size_t len;
    unsigned char *b = make_cifar(2, 0, &len);
    const char *p = tpath(t, "cifar-10", "test_batch.bin");
    dataset_cifar_batch_records = 2;
    write_plain(p, b, len - 5);
    expect_fail(t->root, "cifar10", "test", 0, p, "size 6141 bytes is not a multiple of 3073");
    /* a limit of one record does not hide the bad tail: every file is read whole */
    expect_fail(t->root, "cifar10", "test", 1, p, "size 6141 bytes is not a multiple of 3073");
    write_gz(p, b, len - 5);   /* gzipped content under the plain name works the same */
    expect_fail(t->root, "cifar10", "test", 0, p, "not a multiple of 3073");
    write_plain(p, b, 0);
    expect_fail(t->root, "cifar10", "test", 0, p, "empty file, no records");
    free(b);
}

static void test_cifar_bad_label(void **state) {
    Tmp *t = *state;
    size_t len;
    unsigned char *b = make_cifar(3, 0, &len);
    b[2 * 3073] = 10;
    dataset_cifar_batch_records = 3;
    const char *p = tpath(t, "cifar-10", "test_batch.bin");
    write_plain(p, b, len);
    free(b);
    expect_fail(t->root, "cifar10", "test", 0, p, "record 2 has label 10, expected 0..9");
}

/* A CIFAR-10 batch is exactly 10,000 records: fewer is an error, and a gzip bomb of more is
 * refused at record 10,001 (a 30 KB file of zeros decompresses to 30 MB and beyond). */
static void test_cifar_record_count(void **state) {
    Tmp *t = *state;
    const char *p = tpath(t, "cifar-10", "test_batch.bin.gz");
    size_t len;
    unsigned char *b = make_cifar(3, 0, &len);
    write_gz(p, b, len);
    free(b);
    expect_fail(t->root, "cifar10", "test", 0, p, "3 records, a CIFAR-10 batch holds exactly 10000");
    b = calloc(10001, 3073);
    assert_non_null(b);
    write_gz(p, b, (size_t)10001 * 3073);
    expect_fail(t->root, "cifar10", "test", 0, p, "more than 10000 records");
    expect_fail(t->root, "cifar10", "test", 5, p, "more than 10000 records");   /* --limit too */
    write_gz(p, b, (size_t)10000 * 3073);
    Dataset d;
    Err e;
    if (dataset_load(&d, t->root, "cifar10", "test", 0, &e)) fail_msg("%s", e.msg);
    assert_int_equal(d.n, 10000);
    dataset_free(&d);
    free(b);
}

/* A gzip file without its 8-byte trailer (CRC and length), or with a wrong CRC, is refused
 * even when --limit needs only its start (1.5 MB: more than zlib decodes ahead). */
static void test_gzip_trailer(void **state) {
    Tmp *t = *state;
    write_mnist(t, 2000);
    const char *img = tpath(t, "mnist", "t10k-images-idx3-ubyte");
    size_t len, glen;
    unsigned char *b = slurp(img, &len);
    assert_int_equal(unlink(img), 0);
    char gz[4200];
    snprintf(gz, sizeof gz, "%s.gz", img);
    write_gz(gz, b, len);
    free(b);
    unsigned char *g = slurp(gz, &glen);
    write_plain(gz, g, glen - 8);   /* no trailer */
    expect_fail(t->root, "mnist", "test", 0, gz, "truncated gzip stream");
    expect_fail(t->root, "mnist", "test", 1, gz, "truncated gzip stream");
    g[glen - 8] ^= 1;               /* a wrong CRC */
    write_plain(gz, g, glen);
    expect_fail(t->root, "mnist", "test", 1, gz, "incorrect data check");
    free(g);
    /* the same for a CIFAR batch */
    dataset_cifar_batch_records = 200;
    const char *p = tpath(t, "cifar-10", "test_batch.bin.gz");
    b = make_cifar(200, 0, &len);
    write_gz(p, b, len);
    free(b);
    g = slurp(p, &glen);
    write_plain(p, g, glen - 8);
    expect_fail(t->root, "cifar10", "test", 1, p, "truncated gzip stream");
    free(g);
}

/* A gzip file is whole gzip members and nothing after them: a byte after the trailer is
 * refused, with --limit too (the file is read to its end all the same); two members (split
 * inside an image) load as their data joined. */
static void test_gzip_after_end(void **state) {
    Tmp *t = *state;
    write_mnist(t, 3);
    Dataset want, d;
    Err e;
    if (dataset_load(&want, t->root, "mnist", "test", 0, &e)) fail_msg("%s", e.msg);
    const char *img = tpath(t, "mnist", "t10k-images-idx3-ubyte");
    size_t len, n, n1, n2, split = 16 + 784 + 100;
    unsigned char *b = slurp(img, &len);
    assert_int_equal(unlink(img), 0);
    char gz[4200];
    snprintf(gz, sizeof gz, "%s.gz", img);
    write_gz(gz, b, len);
    unsigned char *one = slurp(gz, &n);
    unsigned char *more = malloc(n + 4);
    assert_non_null(more);
    memcpy(more, one, n);
    memcpy(more + n, "junk", 4);
    write_plain(gz, more, n + 4);
    expect_fail(t->root, "mnist", "test", 0, gz, "corrupt gzip stream: data after its end");
    expect_fail(t->root, "mnist", "test", 1, gz, "corrupt gzip stream: data after its end");
    more[n] = 0;   /* a single zero byte */
    write_plain(gz, more, n + 1);
    expect_fail(t->root, "mnist", "test", 0, gz, "corrupt gzip stream: data after its end");

    write_gz(gz, b, split);
    unsigned char *m1 = slurp(gz, &n1);
    write_gz(gz, b + split, len - split);
    unsigned char *m2 = slurp(gz, &n2);
    unsigned char *two = malloc(n1 + n2);
    assert_non_null(two);
    memcpy(two, m1, n1);
    memcpy(two + n1, m2, n2);
    write_plain(gz, two, n1 + n2);
    if (dataset_load(&d, t->root, "mnist", "test", 0, &e)) fail_msg("two gzip members: %s", e.msg);
    assert_int_equal(d.n, 3);
    assert_memory_equal(d.images, want.images, (size_t)3 * 784);
    assert_memory_equal(d.labels, want.labels, 3);
    dataset_free(&d);
    dataset_free(&want);
    free(b);
    free(one);
    free(more);
    free(m1);
    free(m2);
    free(two);
}

/* Only regular files: a directory or a FIFO in a file's place is named as such, at once (a FIFO
 * with no writer would block a plain open for ever: the alarm turns that into a failure). */
static void test_not_regular_files(void **state) {
    Tmp *t = *state;
    write_mnist(t, 1);
    const char *img = tpath(t, "mnist", "t10k-images-idx3-ubyte");
    assert_int_equal(unlink(img), 0);
    assert_int_equal(mkdir(img, 0700), 0);
    expect_fail(t->root, "mnist", "test", 0, img, "is a directory");
    assert_int_equal(rmdir(img), 0);
    assert_int_equal(mkfifo(img, 0600), 0);
    alarm(20);
    expect_fail(t->root, "mnist", "test", 0, img, "not a regular file");
    alarm(0);
    assert_int_equal(unlink(img), 0);
}

#define T(f) cmocka_unit_test_setup_teardown(f, tmp_setup, tmp_teardown)

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_root),
        cmocka_unit_test(test_mnist_test_split),
        cmocka_unit_test(test_mnist_train_limit),
        cmocka_unit_test(test_mnist_train_full),
        cmocka_unit_test(test_cifar_test_limit),
        cmocka_unit_test(test_cifar_test_full),
        cmocka_unit_test(test_cifar_train_limit),
        T(test_cifar_batches_and_limit),
        T(test_plain_before_gz),
        T(test_missing),
        T(test_bad_args),
        T(test_bad_magic),
        T(test_truncated),
        T(test_huge_count),
        T(test_wrong_dims),
        T(test_label_count_mismatch),
        T(test_mnist_bad_label_and_extra_data),
        T(test_corrupt_gzip),
        T(test_cifar_bad_size),
        T(test_cifar_bad_label),
        T(test_cifar_record_count),
        T(test_gzip_trailer),
        T(test_gzip_after_end),
        T(test_not_regular_files),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
