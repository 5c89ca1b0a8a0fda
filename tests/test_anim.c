/* lingen sample --animate: the GIF decoded with giflib (DGifSlurp) and its frames drawn one over
 * another as a viewer does: every frame is the grid of the images as generation holds them after
 * that many steps (gray exactly; RGB as the palette colour nearest to it), the last one the PNG
 * grid of the same run; the frame count, delays and loop; the size bound against noise, LZW's
 * worst case. */
#include "testutil.h"

#include <gif_lib.h>

#include "io/anim.h"
#include "cli/commands.h"
#include "engine/generate.h"
#include "io/image.h"

/* ---------------------------------------------------------------- decoding */

static GifFileType *gif_read(const char *path) {
    int err = 0;
    GifFileType *gif = DGifOpenFileName(path, &err);
    if (!gif) fail_msg("%s: %s", path, GifErrorString(err));
    if (DGifSlurp(gif) != GIF_OK) fail_msg("%s: %s", path, GifErrorString(gif->Error));
    return gif;
}

static void gif_close(GifFileType *gif) {
    int err;
    DGifCloseFile(gif, &err);
}

/* Frame j drawn over canvas (SHeight x SWidth x 3): its rectangle in its colours; the frames must
 * keep what is under them (no disposal, no transparency) and the first must cover the canvas. */
static void draw_frame(const GifFileType *gif, int j, unsigned char *canvas) {
    const SavedImage *im = &gif->SavedImages[j];
    const GifImageDesc *d = &im->ImageDesc;
    const ColorMapObject *map = d->ColorMap ? d->ColorMap : gif->SColorMap;
    GraphicsControlBlock gcb;
    assert_int_equal(DGifSavedExtensionToGCB((GifFileType *)gif, j, &gcb), GIF_OK);
    assert_int_equal(gcb.DisposalMode, DISPOSE_DO_NOT);
    assert_int_equal(gcb.TransparentColor, NO_TRANSPARENT_COLOR);
    assert_non_null(map);
    if (j == 0) assert_true(d->Left == 0 && d->Top == 0 && d->Width == gif->SWidth && d->Height == gif->SHeight);
    assert_true(d->Left + d->Width <= gif->SWidth && d->Top + d->Height <= gif->SHeight);
    for (int y = 0; y < d->Height; y++)
        for (int x = 0; x < d->Width; x++) {
            int k = im->RasterBits[y * d->Width + x];
            assert_true(k < map->ColorCount);
            unsigned char *p = canvas + ((size_t)(d->Top + y) * gif->SWidth + d->Left + x) * 3;
            p[0] = map->Colors[k].Red;
            p[1] = map->Colors[k].Green;
            p[2] = map->Colors[k].Blue;
        }
}

/* Frame j's delay, in hundredths of a second. */
static int frame_delay(const GifFileType *gif, int j) {
    GraphicsControlBlock gcb;
    assert_int_equal(DGifSavedExtensionToGCB((GifFileType *)gif, j, &gcb), GIF_OK);
    return gcb.DelayTime;
}

/* Whether the first frame carries the NETSCAPE2.0 extension with loop count 0 (forever). */
static int loops_forever(const GifFileType *gif) {
    const SavedImage *im = &gif->SavedImages[0];
    for (int i = 0; i + 1 < im->ExtensionBlockCount; i++) {
        const ExtensionBlock *a = &im->ExtensionBlocks[i], *b = &im->ExtensionBlocks[i + 1];
        if (a->Function == APPLICATION_EXT_FUNC_CODE && a->ByteCount == 11 && !memcmp(a->Bytes, "NETSCAPE2.0", 11))
            return b->ByteCount == 3 && b->Bytes[0] == 1 && b->Bytes[1] == 0 && b->Bytes[2] == 0;
    }
    return 0;
}

static int dist2(const unsigned char *a, const GifColorType *c) {
    int r = a[0] - c->Red, g = a[1] - c->Green, b = a[2] - c->Blue;
    return r * r + g * g + b * b;
}

/* The canvas (gh x gw x 3) against the expected grid (gh x gw x ch): gray exactly; RGB a colour of
 * the palette as near to the expected one as any of its 256. */
static void assert_shows(const GifFileType *gif, const unsigned char *canvas, const unsigned char *want, int ch,
                         const char *what) {
    size_t pixels = (size_t)gif->SWidth * gif->SHeight;
    for (size_t i = 0; i < pixels; i++) {
        const unsigned char *got = canvas + 3 * i;
        if (ch == 1) {
            if (got[0] != want[i] || got[1] != want[i] || got[2] != want[i])
                fail_msg("%s: pixel %zu is (%d %d %d), the grid has %d", what, i, got[0], got[1], got[2], want[i]);
            continue;
        }
        const ColorMapObject *map = gif->SColorMap;
        GifColorType shown = {got[0], got[1], got[2]};
        int best = 1 << 30;
        for (int k = 0; k < map->ColorCount; k++)
            if (dist2(want + 3 * i, &map->Colors[k]) < best) best = dist2(want + 3 * i, &map->Colors[k]);
        if (dist2(want + 3 * i, &shown) != best)
            fail_msg("%s: pixel %zu is (%d %d %d) for (%d %d %d): a nearer palette colour is %d away (squared), not %d",
                     what, i, got[0], got[1], got[2], want[3 * i], want[3 * i + 1], want[3 * i + 2], best,
                     dist2(want + 3 * i, &shown));
    }
}

/* The GIF at path against n images (h x w x ch): frame j shows the grid of each image's first
 * min(j * every, N) positions (the rest 0), delay_ms each, the last at least ANIM_HOLD_MS. */
static void check_gif(const char *path, const unsigned char *imgs, int n, int h, int w, int ch, int every,
                      int delay_ms) {
    int N = h * w * ch, gh, gw;
    image_grid_size(n, h, w, 0, &gh, &gw);
    GifFileType *gif = gif_read(path);
    assert_int_equal(gif->SWidth, gw);
    assert_int_equal(gif->SHeight, gh);
    int frames = 1 + (N + every - 1) / every;
    assert_int_equal(gif->ImageCount, frames);
    assert_true(loops_forever(gif));
    unsigned char *canvas = calloc((size_t)gh * gw, 3), *part = malloc((size_t)n * N);
    unsigned char *want = calloc((size_t)gh * gw, ch);
    for (int j = 0; j < frames; j++) {
        int p = j * every < N ? j * every : N;
        for (int i = 0; i < n * N; i++) part[i] = i % N < p ? imgs[i] : 0;
        image_grid_fill(want, part, n, h, w, ch, 0);
        draw_frame(gif, j, canvas);
        char what[1200];
        snprintf(what, sizeof what, "%s, frame %d of %d (%d positions)", path, j, frames, p);
        assert_shows(gif, canvas, want, ch, what);
        int hold = delay_ms > ANIM_HOLD_MS ? delay_ms : ANIM_HOLD_MS;
        assert_int_equal(frame_delay(gif, j), (j == frames - 1 ? hold : delay_ms) / 10);
    }
    free(canvas);
    free(part);
    free(want);
    gif_close(gif);
}

/* ---------------------------------------------------------------- the module */

static void fill_noise(unsigned char *p, size_t n, unsigned seed) {
    uint32_t x = seed * 2654435761u + 1;
    for (size_t i = 0; i < n; i++) {
        x ^= x << 13, x ^= x >> 17, x ^= x << 5;
        p[i] = (unsigned char)(x >> 11);
    }
}

/* anim_stage's file, through an output group as cmd_sample writes it. */
static size_t stage(const char *path, const unsigned char *imgs, int n, int h, int w, int ch, int every,
                    int delay_ms) {
    OutputGroup g = {0};
    Err e;
    if (anim_stage(&g, path, imgs, n, h, w, ch, every, delay_ms, &e)) fail_msg("%s", e.msg);
    if (output_group_commit(&g, &e)) fail_msg("%s", e.msg);
    struct stat st;
    assert_int_equal(stat(path, &st), 0);
    return (size_t)st.st_size;
}

/* Gray images with every value 0..255: each frame exact, frames and delays as asked. */
static void test_gray_frames(void **state) {
    (void)state;
    enum { n = 5, h = 7, w = 9 };
    unsigned char imgs[n * h * w];
    fill_noise(imgs, sizeof imgs, 1);
    for (int v = 0; v < 256 && v < n * h * w; v++) imgs[(v * 37) % (n * h * w)] = (unsigned char)v;
    const int everies[] = {1, 10, 62, 63, 64, 1000}, delays[] = {20, 50, 1990, 3000};
    for (int i = 0; i < 6; i++) {
        const char *p = test_in_dir("gray.gif");
        stage(p, imgs, n, h, w, 1, everies[i], delays[i % 4]);
        check_gif(p, imgs, n, h, w, 1, everies[i], delays[i % 4]);
    }
}

/* RGB: each frame's pixels the nearest colours of the palette, which is the 6x7x6 cube (each
 * combination once); every value of every channel occurs, none is further from its level than
 * anim.h says (25 in red and blue, 21 in green). */
static void test_rgb_frames(void **state) {
    (void)state;
    enum { n = 3, h = 10, w = 10 };
    unsigned char imgs[n * h * w * 3];
    fill_noise(imgs, sizeof imgs, 2);
    for (int v = 0; v < 256; v++) {
        imgs[3 * v] = (unsigned char)v;
        imgs[3 * v + 1] = (unsigned char)(v * 7);   /* 7 is odd: every value once */
        imgs[3 * v + 2] = (unsigned char)(255 - v);
    }
    const char *p = test_in_dir("rgb.gif");
    stage(p, imgs, n, h, w, 3, 37, 40);
    check_gif(p, imgs, n, h, w, 3, 37, 40);
    GifFileType *gif = gif_read(p);
    int used[3][256] = {{0}}, levels[3] = {0};
    for (int k = 0; k < ANIM_RGB_LEVELS_R * ANIM_RGB_LEVELS_G * ANIM_RGB_LEVELS_B; k++) {
        const GifColorType *c = &gif->SColorMap->Colors[k];
        const int v[3] = {c->Red, c->Green, c->Blue};
        for (int a = 0; a < 3; a++)
            if (!used[a][v[a]]++) levels[a]++;
        for (int j = 0; j < k; j++) assert_true(memcmp(c, &gif->SColorMap->Colors[j], sizeof *c));
    }
    assert_int_equal(levels[0], 6);
    assert_int_equal(levels[1], 7);
    assert_int_equal(levels[2], 6);
    const int worst_want[3] = {25, 21, 25};
    for (int a = 0; a < 3; a++) {
        int worst = 0;
        for (int v = 0; v < 256; v++) {
            int near = 256;
            for (int l = 0; l < 256; l++)
                if (used[a][l] && abs(v - l) < near) near = abs(v - l);
            if (near > worst) worst = near;
        }
        assert_int_equal(worst, worst_want[a]);
    }
    gif_close(gif);
}

/* The size bound holds for noise, where LZW saves nothing: a frame of noise over the whole grid
 * stays within a frame's share of the bound, and comes near it (one byte a pixel would not do);
 * so do many frames. The bound grows with the frames and the grid. */
static void test_size_bound(void **state) {
    (void)state;
    enum { n = 16, h = 28, w = 28, N = h * w };
    unsigned char *imgs = malloc((size_t)n * N * 3), *zeros = calloc((size_t)n * N, 3);
    fill_noise(imgs, (size_t)n * N * 3, 3);
    int gh, gw;
    image_grid_size(n, h, w, 0, &gh, &gw);
    for (int ch = 1; ch <= 3; ch += 2) {
        const char *p = test_in_dir("noise.gif");
        /* the empty grid, then all of it: the second frame's bytes are what noise adds to zeros */
        size_t full = stage(p, imgs, n, h, w, ch, N * ch, 20), empty = stage(p, zeros, n, h, w, ch, N * ch, 20);
        double frame = anim_max_bytes(n, h, w, ch, N * ch / 2) - anim_max_bytes(n, h, w, ch, N * ch);
        double noise = (double)full - (double)empty;
        printf("noise, %d channel%s: a full frame %.0f bytes (%.2f a pixel), the bound's frame %.0f\n", ch,
               ch > 1 ? "s" : "", noise, noise / ((double)gh * gw), frame);
        assert_true(full <= anim_max_bytes(n, h, w, ch, N * ch));
        assert_true(noise <= frame);
        assert_true(noise > 1.1 * gh * gw);
        size_t many = stage(p, imgs, n, h, w, ch, 13, 20);
        assert_true(many <= anim_max_bytes(n, h, w, ch, 13));
    }
    assert_true(anim_max_bytes(n, h, w, 1, 13) > anim_max_bytes(n, h, w, 1, 26));
    assert_true(anim_max_bytes(2 * n, h, w, 1, 13) > anim_max_bytes(n, h, w, 1, 13));
    assert_int_equal(anim_frames(784, anim_default_every(784)), 62);
    assert_int_equal(anim_frames(3072, anim_default_every(3072)), 65);
    free(imgs);
    free(zeros);
}

/* ---------------------------------------------------------------- generation and the command */

/* Generation's own images after each step, against the finished images cut to that many
 * positions (the frames' source). */
typedef struct { const unsigned char *live, *final; unsigned char *part; int n, N, checked; } StepCheck;

static void compare_step(void *user, int t, int end) {
    StepCheck *s = user;
    if (!end) return;
    anim_partial(s->part, s->final, s->n, s->N, t + 1);
    if (memcmp(s->live, s->part, (size_t)s->n * s->N)) fail_msg("after position %d the images differ", t);
    s->checked++;
}

static void check_partial(const char *model) {
    enum { n = 3 };
    Model m;
    Err e;
    if (model_load(&m, model, &e)) fail_msg("%s", e.msg);
    int N = m.cfg.seq_len;
    unsigned char *final = malloc((size_t)n * N), *live = calloc((size_t)n, N), *part = malloc((size_t)n * N);
    GenOptions o = {.seed = 5, .batch = n};
    assert_int_equal(generate(&m, final, n, &o, &e), n);
    StepCheck s = {live, final, part, n, N, 0};
    o.on_step = compare_step;
    o.user = &s;
    assert_int_equal(generate(&m, live, n, &o, &e), n);
    assert_int_equal(s.checked, N);
    printf("%s: the images after each of %d steps are the finished ones cut there\n", model, N);
    free(final);
    free(live);
    free(part);
    model_free(&m);
}

static void test_partial_linear(void **st) { (void)st; check_partial(FIXTURE("tiny-linear-mnist.bin")); }
static void test_partial_softmax_rgb(void **st) { (void)st; check_partial(FIXTURE("tiny-softmax-cifar.bin")); }

/* lingen sample --animate with the PNG grid and the tiles of the same run: the GIF's last frame is
 * the grid, every frame the tiles cut to its positions. every 0: the default. */
static void check_sample(const char *model, int h, int w, int ch, int every, int delay_ms) {
    enum { n = 5 };
    char ev[16], de[16];
    snprintf(ev, sizeof ev, "%d", every);
    snprintf(de, sizeof de, "%d", delay_ms);
    char png[1024], gif[1024], tiles[1024];
    snprintf(png, sizeof png, "%s", test_in_dir("s.png"));
    snprintf(gif, sizeof gif, "%s", test_in_dir("s.gif"));
    snprintf(tiles, sizeof tiles, "%s", test_in_dir("tiles"));
    char *argv[24] = {"lingen", "sample", "--model", (char *)model, "-n", "5", "--seed", "3", "--threads", "1",
                      "-o", png, "--outdir", tiles, "--animate", gif};
    int argc = 16;
    if (every) argv[argc++] = "--frame-every", argv[argc++] = ev;
    if (delay_ms != ANIM_DELAY_MS) argv[argc++] = "--frame-delay", argv[argc++] = de;
    assert_int_equal(cmd_sample(argc, argv), 0);

    int N = h * w * ch, gh, gw;
    image_grid_size(n, h, w, 0, &gh, &gw);
    unsigned char *grid = malloc((size_t)gh * gw * ch), *imgs = malloc((size_t)n * N);
    Err e;
    if (image_read_png(png, grid, gh, gw, ch, &e)) fail_msg("%s", e.msg);
    for (int k = 0; k < n; k++) {
        char name[64];
        snprintf(name, sizeof name, "tiles/sample_%05d.png", k);
        if (image_read_png(test_in_dir(name), imgs + (size_t)k * N, h, w, ch, &e)) fail_msg("%s", e.msg);
    }
    if (!every) every = anim_default_every(N);
    check_gif(gif, imgs, n, h, w, ch, every, delay_ms);
    /* the last frame against the PNG grid itself */
    GifFileType *g = gif_read(gif);
    unsigned char *canvas = calloc((size_t)gh * gw, 3);
    for (int j = 0; j < g->ImageCount; j++) draw_frame(g, j, canvas);
    assert_shows(g, canvas, grid, ch, gif);
    printf("%s: %d frames, a frame every %d positions, %d ms; the last is the PNG grid%s\n", model, g->ImageCount,
           every, delay_ms, ch == 1 ? "" : " in the palette's nearest colours");
    gif_close(g);
    free(canvas);
    free(grid);
    free(imgs);
}

static void test_sample_linear_gray(void **st) {
    (void)st;
    check_sample(FIXTURE("tiny-linear-mnist.bin"), 28, 28, 1, 0, ANIM_DELAY_MS);
}
static void test_sample_softmax_gray(void **st) {
    (void)st;
    check_sample(FIXTURE("tiny-softmax-mnist.bin"), 28, 28, 1, 100, 120);
}
static void test_sample_linear_rgb(void **st) {
    (void)st;
    check_sample(FIXTURE("tiny-linear-cifar.bin"), 32, 32, 3, 500, 20);
}
static void test_sample_softmax_rgb(void **st) {
    (void)st;
    check_sample(FIXTURE("tiny-softmax-cifar.bin"), 32, 32, 3, 0, 3000);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        TEST_IN_DIR(test_gray_frames),
        TEST_IN_DIR(test_rgb_frames),
        TEST_IN_DIR(test_size_bound),
        cmocka_unit_test(test_partial_linear),
        cmocka_unit_test(test_partial_softmax_rgb),
        TEST_IN_DIR(test_sample_linear_gray),
        TEST_IN_DIR(test_sample_softmax_gray),
        TEST_IN_DIR(test_sample_linear_rgb),
        TEST_IN_DIR(test_sample_softmax_rgb),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
