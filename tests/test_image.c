/* PNG grids: geometry, exact pixels back through the reader, every PNG flavour the reader must
 * take, clear one-line errors, and atomic writes (no temp files left behind, ever). */
#include "testutil.h"

#include <dirent.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <png.h>
#include <zlib.h>
#include "io/image.h"


/* Number of entries in test_dir, and whether any of them looks like a temp file ("name.XXXXXX"). */
static int dir_entries(int *n_temp) {
    DIR *d = opendir(test_dir);
    assert_non_null(d);
    int n = 0;
    *n_temp = 0;
    struct dirent *de;
    while ((de = readdir(d))) {
        if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, "..")) continue;
        n++;
        const char *dot = strrchr(de->d_name, '.');
        if (dot && strcmp(dot, ".png") && strcmp(dot, ".txt")) (*n_temp)++;
    }
    closedir(d);
    return n;
}

static void assert_error(const Err *e, const char *path, const char *text) {
    if (strncmp(e->msg, path, strlen(path)) != 0 || !strstr(e->msg, text) || strchr(e->msg, '\n'))
        fail_msg("error \"%s\": want one line starting with %s and containing \"%s\"", e->msg, path, text);
}

static void fill(unsigned char *p, size_t n, unsigned seed) {
    for (size_t i = 0; i < n; i++) p[i] = (unsigned char)((i * 2654435761u + seed * 40503u) >> 13);
}

/* ---------------------------------------------------------------- grids */

static void test_grid_size(void **state) {
    (void)state;
    int gh, gw;
    image_grid_size(5, 28, 28, 0, &gh, &gw);     /* ceil(sqrt(5)) = 3 columns, 2 rows */
    assert_int_equal(gw, 3 * 30 + 2);
    assert_int_equal(gh, 2 * 30 + 2);
    image_grid_size(16, 28, 28, 0, &gh, &gw);    /* 4 x 4 */
    assert_int_equal(gw, 4 * 30 + 2);
    assert_int_equal(gh, 4 * 30 + 2);
    image_grid_size(17, 32, 32, 0, &gh, &gw);    /* 5 columns, 4 rows */
    assert_int_equal(gw, 5 * 34 + 2);
    assert_int_equal(gh, 4 * 34 + 2);
    image_grid_size(1, 28, 28, 0, &gh, &gw);
    assert_int_equal(gw, 32);
    assert_int_equal(gh, 32);
    image_grid_size(10, 28, 20, 4, &gh, &gw);    /* explicit columns: 4, 3 rows */
    assert_int_equal(gw, 4 * 22 + 2);
    assert_int_equal(gh, 3 * 30 + 2);
    image_grid_size(3, 28, 28, 8, &gh, &gw);     /* more columns than images: no empty columns */
    assert_int_equal(gw, 3 * 30 + 2);
    assert_int_equal(gh, 32);
}

/* Grids the PNG encoder cannot hold (its sizes are ints) are refused before anything is
 * allocated, with the largest count that fits; a million MNIST images still fit. */
static void test_grid_limit(void **state) {
    (void)state;
    Err e;
    assert_int_equal(image_check_grid("g.png", 1000000, 28, 28, 1, 0, &e), 0);
    struct { int n, h, w, ch, cols; } big[] = {{1000000, 32, 32, 3, 0}, {330000, 64, 64, 3, 0}, {10000 * 1026, 32, 32, 3, 1026}};
    for (size_t i = 0; i < sizeof big / sizeof big[0]; i++) {
        int n = big[i].n, h = big[i].h, w = big[i].w, ch = big[i].ch, cols = big[i].cols;
        assert_int_not_equal(image_check_grid("g.png", n, h, w, ch, cols, &e), 0);
        const char *at = strstr(e.msg, "at most ");
        assert_non_null(at);
        assert_true(strncmp(e.msg, "g.png: a grid of ", 17) == 0);
        int fit = atoi(at + 8);   /* the largest that fits: it does, one more does not */
        assert_true(fit > 0 && fit < n);
        assert_int_equal(image_check_grid("g.png", fit, h, w, ch, cols, &e), 0);
        assert_int_not_equal(image_check_grid("g.png", fit + 1, h, w, ch, cols, &e), 0);
        int gh, gw;   /* the bound is below what stb's ints take: 9/8 of it, doubled, under 2^31 */
        image_grid_size(fit, h, w, cols, &gh, &gw);
        assert_true(((double)gw * ch + 1) * gh * 9 / 8 * 2 < 2147483647.0);
    }
    /* the writer refuses it too, before it reads an image or allocates the grid */
    static unsigned char one[64 * 64 * 3];
    assert_int_not_equal(image_write_grid(test_in_dir("g.png"), one, 330000, 64, 64, 3, 0, &e), 0);
    assert_non_null(strstr(e.msg, "more than the PNG encoder takes"));
    struct stat st;
    assert_int_not_equal(stat(test_in_dir("g.png"), &st), 0);
}

static void test_grid_round_trip(void **state) {
    (void)state;
    const int n = 5, h = 28, w = 28;
    unsigned char imgs[5 * 28 * 28];
    fill(imgs, sizeof imgs, 1);
    for (size_t i = 0; i < sizeof imgs; i++) if (!imgs[i]) imgs[i] = 1;   /* tiles never 0, borders are */
    const char *path = test_in_dir("grid.png");
    Err e = {{0}};
    if (image_write_grid(path, imgs, n, h, w, 1, 0, &e)) fail_msg("%s", e.msg);
    int gh, gw;
    image_grid_size(n, h, w, 0, &gh, &gw);
    unsigned char *g = malloc((size_t)gh * gw);
    if (image_read_png(path, g, gh, gw, 1, &e)) fail_msg("%s", e.msg);
    int cols = 3;
    for (int y = 0; y < gh; y++)
        for (int x = 0; x < gw; x++) {
            int ty = (y - 2) / (h + 2), tx = (x - 2) / (w + 2);
            int iy = (y - 2) % (h + 2), ix = (x - 2) % (w + 2);
            int tile = ty * cols + tx;
            int inside = y >= 2 && x >= 2 && iy < h && ix < w && tile < n;
            unsigned char want = inside ? imgs[(size_t)tile * h * w + iy * w + ix] : 0;
            if (g[(size_t)y * gw + x] != want)
                fail_msg("pixel (%d, %d): %d, want %d", x, y, g[(size_t)y * gw + x], want);
        }
    free(g);
    int n_temp;
    assert_int_equal(dir_entries(&n_temp), 1);
    assert_int_equal(n_temp, 0);
}

static void test_rgb_round_trip(void **state) {
    (void)state;
    const int h = 32, w = 32;
    unsigned char img[32 * 32 * 3], back[32 * 32 * 3], gray[32 * 32];
    fill(img, sizeof img, 7);
    const char *path = test_in_dir("rgb.png");
    Err e = {{0}};
    if (image_write_png(path, img, h, w, 3, &e)) fail_msg("%s", e.msg);
    if (image_read_png(path, back, h, w, 3, &e)) fail_msg("%s", e.msg);
    assert_memory_equal(img, back, sizeof img);
    /* as one channel: luminance, ITU-R 601 weights (PIL's "L") */
    if (image_read_png(path, gray, h, w, 1, &e)) fail_msg("%s", e.msg);
    for (int i = 0; i < h * w; i++) {
        double l = 0.299 * img[3 * i] + 0.587 * img[3 * i + 1] + 0.114 * img[3 * i + 2];
        assert_true(gray[i] >= l - 1 && gray[i] <= l + 1);
    }
    /* a grid of RGB images, explicit columns */
    unsigned char three[3 * 32 * 32 * 3];
    fill(three, sizeof three, 9);
    if (image_write_grid(path, three, 3, h, w, 3, 1, &e)) fail_msg("%s", e.msg);
    int gh, gw;
    image_grid_size(3, h, w, 1, &gh, &gw);
    assert_int_equal(gw, 36);
    assert_int_equal(gh, 3 * 34 + 2);
    unsigned char *g = malloc((size_t)gh * gw * 3);
    if (image_read_png(path, g, gh, gw, 3, &e)) fail_msg("%s", e.msg);
    for (int i = 0; i < 3; i++)   /* top-left pixel row of each tile */
        assert_memory_equal(g + ((size_t)(2 + i * 34) * gw + 2) * 3, three + (size_t)i * h * w * 3, w * 3);
    free(g);
}

/* ---------------------------------------------------------------- other PNG flavours */

/* Write a PNG with libpng's simplified API in the given format. */
static void write_with_libpng(const char *path, const void *pixels, int h, int w, png_uint_32 format,
                              const void *colormap, int n_colors) {
    png_image im;
    memset(&im, 0, sizeof im);
    im.version = PNG_IMAGE_VERSION;
    im.width = (png_uint_32)w;
    im.height = (png_uint_32)h;
    im.format = format;
    im.colormap_entries = (png_uint_32)n_colors;
    if (!png_image_write_to_file(&im, path, 0, pixels, 0, colormap)) fail_msg("libpng: %s", im.message);
}

static void test_read_flavours(void **state) {
    (void)state;
    enum { H = 4, W = 5, N = H * W };
    unsigned char g8[N], out1[N], out3[3 * N];
    fill(g8, N, 3);
    Err e = {{0}};
    /* gray + alpha (opaque): the gray values; as RGB: replicated */
    unsigned char ga[2 * N];
    for (int i = 0; i < N; i++) { ga[2 * i] = g8[i]; ga[2 * i + 1] = 255; }
    const char *p = test_in_dir("ga.png");
    write_with_libpng(p, ga, H, W, PNG_FORMAT_GA, NULL, 0);
    if (image_read_png(p, out1, H, W, 1, &e)) fail_msg("%s", e.msg);
    assert_memory_equal(out1, g8, N);
    if (image_read_png(p, out3, H, W, 3, &e)) fail_msg("%s", e.msg);
    for (int i = 0; i < N; i++)
        for (int k = 0; k < 3; k++) assert_int_equal(out3[3 * i + k], g8[i]);
    /* 16-bit gray: v * 257 reads back as v */
    png_uint_16 g16[N];
    for (int i = 0; i < N; i++) g16[i] = (png_uint_16)(g8[i] * 257);
    p = test_in_dir("g16.png");
    write_with_libpng(p, g16, H, W, PNG_FORMAT_LINEAR_Y, NULL, 0);
    if (image_read_png(p, out1, H, W, 1, &e)) fail_msg("%s", e.msg);
    assert_memory_equal(out1, g8, N);
    /* palette */
    unsigned char cmap[4 * 3] = {0, 0, 0, 255, 0, 0, 10, 200, 30, 255, 255, 255}, idx[N];
    for (int i = 0; i < N; i++) idx[i] = (unsigned char)(i % 4);
    p = test_in_dir("pal.png");
    write_with_libpng(p, idx, H, W, PNG_FORMAT_RGB_COLORMAP, cmap, 4);
    if (image_read_png(p, out3, H, W, 3, &e)) fail_msg("%s", e.msg);
    for (int i = 0; i < N; i++) assert_memory_equal(out3 + 3 * i, cmap + 3 * idx[i], 3);
    /* RGBA: alpha composited on black */
    unsigned char rgba[4 * N];
    for (int i = 0; i < N; i++) {
        rgba[4 * i] = 200; rgba[4 * i + 1] = 100; rgba[4 * i + 2] = 50;
        rgba[4 * i + 3] = (unsigned char)(i % 3 == 0 ? 0 : i % 3 == 1 ? 255 : 128);
    }
    p = test_in_dir("rgba.png");
    write_with_libpng(p, rgba, H, W, PNG_FORMAT_RGBA, NULL, 0);
    if (image_read_png(p, out3, H, W, 3, &e)) fail_msg("%s", e.msg);
    for (int i = 0; i < N; i++) {
        int a = rgba[4 * i + 3];
        for (int k = 0; k < 3; k++) assert_int_equal(out3[3 * i + k], (rgba[4 * i + k] * a + 127) / 255);
    }
}

/* ---------------------------------------------------------------- errors */

static void write_bytes(const char *path, const void *p, size_t n) {
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(p, 1, n, f), n);
    fclose(f);
}

static void test_read_errors(void **state) {
    (void)state;
    unsigned char img[28 * 28], big[30 * 30];
    fill(big, sizeof big, 5);
    Err e = {{0}};
    /* not a PNG: text, and a file shorter than the signature */
    const char *p = test_in_dir("notes.txt");
    write_bytes(p, "hello, this is not a PNG at all\n", 32);
    assert_int_not_equal(image_read_png(p, img, 28, 28, 1, &e), 0);
    assert_error(&e, p, "not a PNG file");
    write_bytes(p, "\x89PNG", 4);
    assert_int_not_equal(image_read_png(p, img, 28, 28, 1, &e), 0);
    assert_error(&e, p, "not a PNG file");
    /* missing file */
    p = test_in_dir("missing.png");
    assert_int_not_equal(image_read_png(p, img, 28, 28, 1, &e), 0);
    assert_error(&e, p, "No such file");
    /* wrong size */
    p = test_in_dir("big.png");
    if (image_write_png(p, big, 30, 30, 1, &e)) fail_msg("%s", e.msg);
    assert_int_not_equal(image_read_png(p, img, 28, 28, 1, &e), 0);
    assert_error(&e, p, "image is 30x30, the model needs 28x28");
    /* truncated at several points, and a flipped byte in the pixel data */
    size_t len;
    unsigned char *data = read_file(p, &len, &e);
    assert_non_null(data);
    const char *t = test_in_dir("trunc.png");
    size_t cuts[] = {8, 20, 40, len / 2, len - 13, len - 1};
    for (size_t i = 0; i < sizeof cuts / sizeof *cuts; i++) {
        write_bytes(t, data, cuts[i]);
        assert_int_not_equal(image_read_png(t, big, 30, 30, 1, &e), 0);
        assert_error(&e, t, "corrupt PNG: ");
    }
    data[len / 2] ^= 0x55;
    write_bytes(t, data, len);
    assert_int_not_equal(image_read_png(t, big, 30, 30, 1, &e), 0);
    assert_error(&e, t, "corrupt PNG: ");
    free(data);
}

/* ---------------------------------------------------------------- hostile chunks (fuzz_png) */

/* A PNG chunk (length, type, data, CRC) inserted into png at offset at; returns the new length. */
static size_t insert_chunk(unsigned char *png, size_t len, size_t at, const char *type, uint32_t n_claimed,
                           const void *data, uint32_t n) {
    unsigned char c[64];
    assert_true(n + 12 <= sizeof c);
    for (int i = 0; i < 4; i++) c[i] = (unsigned char)(n_claimed >> (24 - 8 * i));
    memcpy(c + 4, type, 4);
    memcpy(c + 8, data, n);
    uint32_t crc = (uint32_t)crc32(crc32(0, NULL, 0), c + 4, 4 + n);
    for (int i = 0; i < 4; i++) c[8 + n + i] = (unsigned char)(crc >> (24 - 8 * i));
    memmove(png + at + n + 12, png + at, len - at);
    memcpy(png + at, c, n + 12);
    return len + n + 12;
}

/* Read path as 28x28 gray in a child process; returns the child's peak resident memory in MB. */
static long read_in_child_mb(const char *path, const char *expect_error) {
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        unsigned char img[28 * 28];
        Err e = {{0}};
        int rc = image_read_png(path, img, 28, 28, 1, &e);
        _exit(rc != 0 && strstr(e.msg, expect_error) ? 0 : 1);
    }
    int st;
    assert_int_equal(waitpid(pid, &st, 0), pid);
    assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
    struct rusage ru;   /* the largest child waited for: the only one this test forks */
    getrusage(RUSAGE_CHILDREN, &ru);
    return ru.ru_maxrss / 1024;
}

/* A 60-byte PNG claiming a 1 GB sPLT chunk made libpng allocate and clear 1 GB before finding
 * the file truncated (found by fuzz_png). Ancillary chunks are now skipped unread; the ones a
 * real file carries must still read fine. */
static void test_huge_ancillary_chunk(void **state) {
    (void)state;
    unsigned char img[28 * 28], back[28 * 28], png[8192], orig[8192];
    fill(img, sizeof img, 9);
    Err e = {{0}};
    const char *p = test_in_dir("base.png");
    if (image_write_png(p, img, 28, 28, 1, &e)) fail_msg("%s", e.msg);
    size_t len;
    unsigned char *data = read_file(p, &len, &e);
    assert_non_null(data);
    assert_true(len + 200 < sizeof png);   /* room for the chunks below */
    memcpy(orig, data, len);
    memcpy(png, data, len);
    free(data);
    const size_t after_ihdr = 8 + 25;
    /* ordinary ancillary chunks (text, gamma, a small sPLT, a private one): same pixels */
    size_t n = insert_chunk(png, len, after_ihdr, "tEXt", 9, "Comment\0x", 9);
    n = insert_chunk(png, n, after_ihdr, "gAMA", 4, "\0\0\xb1\x8f", 4);
    n = insert_chunk(png, n, after_ihdr, "sPLT", 10, "pal\0\x08\1\2\3\4\5", 10);
    n = insert_chunk(png, n, after_ihdr, "prVt", 3, "abc", 3);
    p = test_in_dir("chunks.png");
    write_bytes(p, png, n);
    if (image_read_png(p, back, 28, 28, 1, &e)) fail_msg("%s", e.msg);
    assert_memory_equal(back, img, sizeof img);
    /* an sPLT that claims 1 GB: a clear error, and no gigabyte of memory on the way */
    memcpy(png, orig, len);
    insert_chunk(png, len, after_ihdr, "sPLT", 1u << 30, "pal\0\x08", 5);
    p = test_in_dir("huge-splt.png");
    write_bytes(p, png, after_ihdr + 17);
    long mb = read_in_child_mb(p, "corrupt PNG: truncated file");
    if (mb > 256) fail_msg("reading a 50-byte PNG took %ld MB", mb);
}

/* A PNG chunk (length, type, data, CRC) appended at out + *n. */
static void put_chunk(unsigned char *out, size_t *n, const char *type, const unsigned char *data, size_t len) {
    unsigned char *c = out + *n;
    for (int i = 0; i < 4; i++) c[i] = (unsigned char)(len >> (24 - 8 * i));
    memcpy(c + 4, type, 4);
    if (len) memcpy(c + 8, data, len);   /* IEND has no data (NULL) */
    uint32_t crc = (uint32_t)crc32(crc32(0, NULL, 0), c + 4, (uInt)(4 + len));
    for (int i = 0; i < 4; i++) c[8 + len + i] = (unsigned char)(crc >> (24 - 8 * i));
    *n += 12 + len;
}

/* A 4x4 gray PNG of pixels px whose one zlib stream holds its rows and then `extra` zero bytes
 * more (malloc'd, *len bytes). */
static unsigned char *png_with_extra_data(const unsigned char px[16], size_t extra, size_t *len) {
    unsigned char rows[20], zeros[1 << 16] = {0}, ihdr[13] = {0, 0, 0, 4, 0, 0, 0, 4, 8, 0, 0, 0, 0};
    for (int y = 0; y < 4; y++) { rows[5 * y] = 0; memcpy(rows + 5 * y + 1, px + 4 * y, 4); }
    size_t cap = 64 + extra / 512, z_len = 0;   /* zeros deflate about 1000:1 */
    unsigned char *z = malloc(cap), *out = malloc(cap + 64);
    z_stream s = {0};
    assert_int_equal(deflateInit(&s, 9), Z_OK);
    s.next_out = z;
    s.avail_out = (uInt)cap;
    s.next_in = rows;
    s.avail_in = sizeof rows;
    assert_int_equal(deflate(&s, Z_NO_FLUSH), Z_OK);
    for (size_t left = extra; left > 0;) {
        size_t k = left < sizeof zeros ? left : sizeof zeros;
        s.next_in = zeros;
        s.avail_in = (uInt)k;
        assert_int_equal(deflate(&s, Z_NO_FLUSH), Z_OK);
        left -= k;
    }
    assert_int_equal(deflate(&s, Z_FINISH), Z_STREAM_END);
    z_len = s.total_out;
    deflateEnd(&s);
    size_t n = 8;
    memcpy(out, "\x89PNG\r\n\x1a\n", 8);
    put_chunk(out, &n, "IHDR", ihdr, sizeof ihdr);
    put_chunk(out, &n, "IDAT", z, z_len);
    put_chunk(out, &n, "IEND", NULL, 0);
    free(z);
    *len = n;
    return out;
}

/* A 4x4 PNG whose image data inflates to 256 MB more than its 4 rows: refused once its
 * compressed data passes what a 4x4 image can take, not after inflating all of it. */
static void test_decompression_bomb(void **state) {
    (void)state;
    unsigned char px[16], back[16];
    fill(px, sizeof px, 3);
    Err e = {{0}};
    size_t len;
    unsigned char *png = png_with_extra_data(px, 0, &len);   /* the same file without the extra data reads */
    const char *p = test_in_dir("plain.png");
    write_bytes(p, png, len);
    free(png);
    if (image_read_png(p, back, 4, 4, 1, &e)) fail_msg("%s", e.msg);
    assert_memory_equal(back, px, sizeof px);
    png = png_with_extra_data(px, (size_t)256 << 20, &len);
    p = test_in_dir("bomb.png");
    write_bytes(p, png, len);
    assert_true(len > 100000);   /* its compressed data is far more than 4x4 pixels need */
    clock_t t0 = clock();
    assert_int_not_equal(image_decode_png(png, len, p, back, 4, 4, 1, &e), 0);
    assert_error(&e, p, "corrupt PNG: more compressed image data than the image holds");
    assert_int_not_equal(image_read_png(p, back, 4, 4, 1, &e), 0);
    assert_error(&e, p, "corrupt PNG: more compressed image data than the image holds");
    double cpu = (double)(clock() - t0) / CLOCKS_PER_SEC;
    if (cpu > 0.5) fail_msg("refusing the bomb took %.2f s of CPU", cpu);
    free(png);
}

static void test_write_errors_leave_nothing(void **state) {
    (void)state;
    unsigned char img[28 * 28] = {0};
    Err e = {{0}};
    const char *p = "/nonexistent-dir/x.png";
    assert_int_not_equal(image_write_grid(p, img, 1, 28, 28, 1, 0, &e), 0);
    assert_error(&e, p, "");
    /* the target is a directory: the temp file is written, the rename fails, the temp file goes */
    p = test_in_dir("adir");
    assert_int_equal(mkdir(p, 0700), 0);
    assert_int_not_equal(image_write_png(p, img, 28, 28, 1, &e), 0);
    assert_error(&e, p, "");
    int n_temp;
    assert_int_equal(dir_entries(&n_temp), 1);   /* only adir */
    assert_int_equal(n_temp, 0);
    /* a successful write replaces the old file and leaves only it */
    p = test_in_dir("out.png");
    if (image_write_png(p, img, 28, 28, 1, &e)) fail_msg("%s", e.msg);
    img[0] = 77;
    if (image_write_png(p, img, 28, 28, 1, &e)) fail_msg("%s", e.msg);
    unsigned char back[28 * 28];
    if (image_read_png(p, back, 28, 28, 1, &e)) fail_msg("%s", e.msg);
    assert_int_equal(back[0], 77);
    assert_int_equal(dir_entries(&n_temp), 2);
    assert_int_equal(n_temp, 0);
    /* invalid arguments */
    assert_int_not_equal(image_write_grid(p, img, 0, 28, 28, 1, 0, &e), 0);
    assert_int_not_equal(image_write_png(p, img, 28, 28, 2, &e), 0);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_grid_size),
        TEST_IN_DIR(test_grid_limit),
        TEST_IN_DIR(test_grid_round_trip),
        TEST_IN_DIR(test_rgb_round_trip),
        TEST_IN_DIR(test_read_flavours),
        TEST_IN_DIR(test_read_errors),
        TEST_IN_DIR(test_write_errors_leave_nothing),
        TEST_IN_DIR(test_huge_ancillary_chunk),
        TEST_IN_DIR(test_decompression_bomb),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
