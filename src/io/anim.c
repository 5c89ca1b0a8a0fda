/* Animated GIFs of sampling (anim.h): giflib encodes into memory, output.c's group writes the
 * file atomically. */
#include "anim.h"

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <gif_lib.h>

#include "image.h"

long anim_frames(int N, int every) { return 1 + (N + (long)every - 1) / every; }

int anim_default_every(int N) { return (N + ANIM_DEFAULT_FRAMES - 1) / ANIM_DEFAULT_FRAMES; }

/* giflib's encoder (egif_lib.c) starts each frame with a clear code and clears its table again
 * each time it has added 4095 - 257 entries, one for every code after the first; codes are at
 * most 12 bits (LZ_BITS) and each stands for one pixel or more. */
#define GIF_CODES_PER_CLEAR 3838.0

double anim_max_bytes(int n, int h, int w, int ch, int every) {
    int gh, gw;
    image_grid_size(n, h, w, 0, &gh, &gw);
    double pixels = (double)gh * gw;
    double codes = pixels + pixels / GIF_CODES_PER_CLEAR + 2;   /* and the end code */
    double data = codes * 12 / 8 + 1;
    /* sub-blocks of 255 bytes, a length byte each and a terminator; the graphic control
     * extension (8 bytes), the image descriptor (10) and the code size (1) */
    double frame = data + data / 255 + 2 + 8 + 10 + 1;
    /* the header (6), screen descriptor (7), palette (768), loop extension (19), trailer (1) */
    return 801 + (double)anim_frames(h * w * ch, every) * frame;
}

void anim_partial(unsigned char *part, const unsigned char *imgs, int n, int N, int p) {
    for (int i = 0; i < n; i++) {
        memcpy(part + (size_t)i * N, imgs + (size_t)i * N, (size_t)p);
        memset(part + (size_t)i * N + p, 0, (size_t)(N - p));
    }
}

/* Level i of `levels` evenly spaced over 0..255, rounded half up. */
static int level(int i, int levels) { return (i * 510 + levels - 1) / (2 * (levels - 1)); }

/* The nearest of `levels` evenly spaced levels to v (level() rounds them to integers: a value
 * halfway between two may go to either, equally near). */
static int nearest(int v, int levels) { return (v * (levels - 1) + 127) / 255; }

int anim_rgb_index(const unsigned char *rgb) {
    return (nearest(rgb[0], ANIM_RGB_LEVELS_R) * ANIM_RGB_LEVELS_G + nearest(rgb[1], ANIM_RGB_LEVELS_G)) *
               ANIM_RGB_LEVELS_B + nearest(rgb[2], ANIM_RGB_LEVELS_B);
}

/* The 256-entry palette: the gray levels, or the RGB cube (its unused entries black). */
static ColorMapObject *palette(int ch) {
    GifColorType c[256] = {{0, 0, 0}};
    for (int i = 0; i < 256; i++) {
        if (ch == 1) {
            c[i] = (GifColorType){(GifByteType)i, (GifByteType)i, (GifByteType)i};
        } else if (i < ANIM_RGB_LEVELS_R * ANIM_RGB_LEVELS_G * ANIM_RGB_LEVELS_B) {
            int r = i / (ANIM_RGB_LEVELS_G * ANIM_RGB_LEVELS_B), g = i / ANIM_RGB_LEVELS_B % ANIM_RGB_LEVELS_G;
            c[i] = (GifColorType){(GifByteType)level(r, ANIM_RGB_LEVELS_R), (GifByteType)level(g, ANIM_RGB_LEVELS_G),
                                  (GifByteType)level(i % ANIM_RGB_LEVELS_B, ANIM_RGB_LEVELS_B)};
        }
    }
    return GifMakeMapObject(256, c);
}

/* giflib's output function: the bytes into the ByteBuf of UserData (0 written when out of memory,
 * which giflib reports as a failed write). */
static int gif_write(GifFileType *gif, const GifByteType *bytes, int len) {
    ByteBuf *b = gif->UserData;
    bytebuf_append(b, bytes, (size_t)len);
    return b->oom ? 0 : len;
}

/* The NETSCAPE2.0 application extension: play the frames in a loop, forever. */
static int put_loop(GifFileType *gif) {
    static const GifByteType forever[3] = {1, 0, 0};   /* sub-block 1: loop count 0 */
    return EGifPutExtensionLeader(gif, APPLICATION_EXT_FUNC_CODE) == GIF_OK &&
                   EGifPutExtensionBlock(gif, 11, "NETSCAPE2.0") == GIF_OK &&
                   EGifPutExtensionBlock(gif, 3, forever) == GIF_OK && EGifPutExtensionTrailer(gif) == GIF_OK
               ? 0
               : -1;
}

/* One frame: the rectangle (x0, y0, fw, fh) of the canvas's indices idx (gw wide) drawn over the
 * frame before it, shown delay_cs hundredths of a second. giflib masks the rows it is given to
 * the palette's bits in place (idx is not changed: 8 bits are every index). */
static int put_frame(GifFileType *gif, GifPixelType *idx, int gw, int x0, int y0, int fw, int fh, int delay_cs) {
    GraphicsControlBlock gcb = {.DisposalMode = DISPOSE_DO_NOT, .UserInputFlag = false, .DelayTime = delay_cs,
                                .TransparentColor = NO_TRANSPARENT_COLOR};
    GifByteType ext[4];
    size_t len = EGifGCBToExtension(&gcb, ext);
    if (EGifPutExtension(gif, GRAPHICS_EXT_FUNC_CODE, (int)len, ext) != GIF_OK ||
        EGifPutImageDesc(gif, x0, y0, fw, fh, false, NULL) != GIF_OK)
        return -1;
    for (int y = y0; y < y0 + fh; y++)
        if (EGifPutLine(gif, idx + (size_t)y * gw + x0, fw) != GIF_OK) return -1;
    return 0;
}

/* The frame of the grid whose palette indices are cur, the one before it prev (NULL: none, the
 * whole canvas): only the rectangle of the pixels that changed (one pixel where none did). */
static int put_changes(GifFileType *gif, GifPixelType *cur, const GifPixelType *prev, int gw, int gh,
                       int delay_cs) {
    if (!prev) return put_frame(gif, cur, gw, 0, 0, gw, gh, delay_cs);
    int x0 = gw, y0 = gh, x1 = -1, y1 = -1;
    for (int y = 0; y < gh; y++)
        for (int x = 0; x < gw; x++)
            if (cur[(size_t)y * gw + x] != prev[(size_t)y * gw + x]) {
                if (x < x0) x0 = x;
                if (x > x1) x1 = x;
                if (y < y0) y0 = y;
                y1 = y;
            }
    if (x1 < 0) x0 = y0 = x1 = y1 = 0;
    return put_frame(gif, cur, gw, x0, y0, x1 - x0 + 1, y1 - y0 + 1, delay_cs);
}

/* The frames into gif: the grid after each `every` positions, as palette indices. */
static int put_frames(GifFileType *gif, const unsigned char *imgs, int n, int h, int w, int ch, int every,
                      int delay_ms, unsigned char *part, unsigned char *grid, GifPixelType *idx) {
    int N = h * w * ch, gh, gw;
    image_grid_size(n, h, w, 0, &gh, &gw);
    size_t pixels = (size_t)gh * gw;
    GifPixelType *cur = idx, *prev = idx + pixels;
    long frames = anim_frames(N, every);
    for (long j = 0; j < frames; j++) {
        anim_partial(part, imgs, n, N, j * every < N ? (int)(j * every) : N);
        image_grid_fill(grid, part, n, h, w, ch, 0);
        for (size_t i = 0; i < pixels; i++)
            cur[i] = (GifPixelType)(ch == 1 ? grid[i] : anim_rgb_index(grid + 3 * i));
        int ms = j == frames - 1 && delay_ms < ANIM_HOLD_MS ? ANIM_HOLD_MS : delay_ms;
        if (put_changes(gif, cur, j ? prev : NULL, gw, gh, ms / 10)) return -1;
        GifPixelType *t = cur;
        cur = prev;
        prev = t;
    }
    return 0;
}

int anim_stage(OutputGroup *g, const char *path, const unsigned char *imgs, int n, int h, int w, int ch,
               int every, int delay_ms, Err *e) {
    if (n < 1 || (ch != 1 && ch != 3) || every < 1 || delay_ms < 10)
        return err_set(e, "%s: cannot animate %d images %dx%dx%d, a frame every %d positions", path, n, w, h, ch,
                       every);
    int gh, gw;
    image_grid_size(n, h, w, 0, &gh, &gw);
    if (gw > 65535 || gh > 65535)   /* a GIF's sizes are 16-bit */
        return err_set(e, "%s: a grid of %dx%d pixels is too large for a GIF", path, gw, gh);
    size_t pixels = (size_t)gh * gw;
    unsigned char *part = try_calloc((size_t)n, (size_t)h * w * ch, path, e);
    unsigned char *grid = part ? try_calloc(pixels, (size_t)ch, path, e) : NULL;   /* the border stays 0 */
    GifPixelType *idx = grid ? try_calloc(pixels, 2 * sizeof *idx, path, e) : NULL;
    ByteBuf out = {0};
    int gerr = 0, rc = -1;
    ColorMapObject *map = idx ? palette(ch) : NULL;
    GifFileType *gif = map ? EGifOpen(&out, gif_write, &gerr) : NULL;
    if (gif) {
        EGifSetGifVersion(gif, true);
        int ok = EGifPutScreenDesc(gif, gw, gh, 8, 0, map) == GIF_OK && !put_loop(gif) &&
                 !put_frames(gif, imgs, n, h, w, ch, every, delay_ms, part, grid, idx);
        if (!ok) gerr = gif->Error;
        int cerr = 0;   /* closing writes the trailer and frees gif */
        if (EGifCloseFile(gif, &cerr) == GIF_OK && ok) rc = 0;
        else if (ok) gerr = cerr;
        if (rc && out.oom) err_set(e, "%s: cannot encode the GIF (out of memory)", path);
        else if (rc) err_set(e, "%s: cannot encode the GIF: %s", path, GifErrorString(gerr));
    } else if (idx) {
        err_set(e, "%s: cannot start the GIF: %s", path, map ? GifErrorString(gerr) : "out of memory");
    }
    if (!rc) rc = output_group_add(g, path, out.data, out.len, e);
    if (map) GifFreeMapObject(map);
    free(out.data);
    free(idx);
    free(grid);
    free(part);
    return rc;
}
