/* PNG output (stb_image_write, encoded in memory, then written by output.c: atomically, a crash
 * or a full disk never leaves a half-written PNG under the final name) and PNG input (libpng). */
#include "image.h"

#include <errno.h>
#include <math.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <png.h>

#include "output.h"

#define STB_IMAGE_WRITE_IMPLEMENTATION
#define STB_IMAGE_WRITE_STATIC       /* private to this file: no clash with another copy */
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wunused-function"
#pragma GCC diagnostic ignored "-Wunused-parameter"
#pragma GCC diagnostic ignored "-Wsign-compare"
#pragma GCC diagnostic ignored "-Wmissing-field-initializers"
#include <stb/stb_image_write.h>
#pragma GCC diagnostic pop

#define BORDER 2

/* ---------------------------------------------------------------- writing */

/* stb_image_write's output callback: the bytes into a ByteBuf. */
static void membuf_write(void *ctx, void *data, int size) {
    if (size > 0) bytebuf_append(ctx, data, (size_t)size);
}

/* Can a PNG of ch channels be written? (grids and tiles: gray or RGB) */
static int writable_channels(int ch) { return ch == 1 || ch == 3; }

unsigned char *image_encode_png(const unsigned char *img, int h, int w, int ch, size_t *len, const char *path,
                                Err *e) {
    if (h <= 0 || w <= 0 || (!writable_channels(ch) && ch != 4)) {
        err_set(e, "%s: cannot write a %dx%d image with %d channels", path, w, h, ch);
        return NULL;
    }
    if ((size_t)w * (size_t)ch > INT32_MAX / 2 || (size_t)h > INT32_MAX / 2) {
        err_set(e, "%s: image too large (%dx%d)", path, w, h);
        return NULL;
    }
    ByteBuf m = {0};
    int ok = stbi_write_png_to_func(membuf_write, &m, w, h, ch, img, w * ch);
    if (!ok || m.oom) {
        free(m.data);
        err_set(e, "%s: cannot encode the PNG (out of memory?)", path);
        return NULL;
    }
    *len = m.len;
    return m.data;
}

int image_write_png(const char *path, const unsigned char *img, int h, int w, int ch, Err *e) {
    size_t len;
    unsigned char *png = image_encode_png(img, h, w, ch, &len, path, e);
    if (!png) return -1;
    int rc = output_write_file(path, png, len, e);
    free(png);
    return rc;
}

static int grid_cols(int n, int cols) {
    if (n < 1) n = 1;
    if (cols <= 0) {                     /* ceil(sqrt(n)), exactly */
        cols = (int)ceil(sqrt((double)n));
        while (cols > 1 && (cols - 1) * (cols - 1) >= n) cols--;
        while (cols * cols < n) cols++;
    }
    return cols < n ? cols : n;          /* no empty columns */
}

/* Tiles of (h + 2) x (w + 2): a 2-pixel border around every tile, shared between neighbours,
 * plus 2 more on the right and bottom: out = cols * (w + 2) + 2 by rows * (h + 2) + 2. */
void image_grid_size(int n, int h, int w, int cols, int *out_h, int *out_w) {
    cols = grid_cols(n, cols);
    int rows = (n + cols - 1) / cols;
    if (rows < 1) rows = 1;
    *out_w = cols * (w + BORDER) + BORDER;
    *out_h = rows * (h + BORDER) + BORDER;
}

/* The most bytes of filtered pixels ((width * channels + 1) * height) the bundled stb_image_write
 * encodes: it counts in int, and the buffer of its compressed stream (at most 9/8 of its input, a
 * few bytes more) doubles its capacity, which must stay below 2^31. (954,437,160 is the bound; a
 * grid of a million MNIST images is 900,150,006.) */
#define PNG_MAX_FILTERED 950000000u

/* The grid's filtered bytes for n images (PNG_MAX_FILTERED's measure). */
static size_t grid_filtered_bytes(int n, int h, int w, int ch, int cols) {
    int gh, gw;
    image_grid_size(n, h, w, cols, &gh, &gw);
    return ((size_t)gw * ch + 1) * (size_t)gh;
}

int image_check_grid(const char *path, int n, int h, int w, int ch, int cols, Err *e) {
    size_t bytes = grid_filtered_bytes(n, h, w, ch, cols);
    if (bytes <= PNG_MAX_FILTERED) return 0;
    int fit = 1, over = n;   /* the bytes grow with n: bisect for the most that fit */
    while (over - fit > 1) {
        int mid = fit + (over - fit) / 2;
        if (grid_filtered_bytes(mid, h, w, ch, cols) <= PNG_MAX_FILTERED) fit = mid;
        else over = mid;
    }
    return err_set(e, "%s: a grid of %d images of %dx%dx%d is %.2f GB of pixels, more than the PNG encoder takes "
                   "(%.2f GB): at most %d images fit in one grid", path, n, h, w, ch, bytes / 1e9,
                   PNG_MAX_FILTERED / 1e9, fit);
}

void image_grid_fill(unsigned char *grid, const unsigned char *imgs, int n, int h, int w, int ch, int cols) {
    cols = grid_cols(n, cols);
    int gh, gw;
    image_grid_size(n, h, w, cols, &gh, &gw);
    size_t tile = (size_t)h * w * ch, row_bytes = (size_t)w * ch, grid_row = (size_t)gw * ch;
    for (int i = 0; i < n; i++) {
        int y0 = BORDER + (i / cols) * (h + BORDER), x0 = BORDER + (i % cols) * (w + BORDER);
        for (int y = 0; y < h; y++)
            memcpy(grid + (size_t)(y0 + y) * grid_row + (size_t)x0 * ch,
                   imgs + i * tile + (size_t)y * row_bytes, row_bytes);
    }
}

/* The grid's PNG bytes (malloc'd), or NULL and a message. */
static unsigned char *encode_grid(const char *path, const unsigned char *imgs, int n, int h, int w, int ch,
                                  int cols, size_t *len, Err *e) {
    if (n < 1 || h <= 0 || w <= 0 || !writable_channels(ch)) {
        err_set(e, "%s: cannot write a grid of %d images %dx%dx%d", path, n, w, h, ch);
        return NULL;
    }
    if (image_check_grid(path, n, h, w, ch, grid_cols(n, cols), e)) return NULL;
    int gh, gw;
    image_grid_size(n, h, w, cols, &gh, &gw);
    unsigned char *grid = try_calloc((size_t)gh * gw, (size_t)ch, path, e);   /* zeros: the border */
    if (!grid) return NULL;
    image_grid_fill(grid, imgs, n, h, w, ch, cols);
    unsigned char *png = image_encode_png(grid, gh, gw, ch, len, path, e);
    free(grid);
    return png;
}

int image_write_grid(const char *path, const unsigned char *imgs, int n, int h, int w, int ch,
                     int cols, Err *e) {
    size_t len;
    unsigned char *png = encode_grid(path, imgs, n, h, w, ch, cols, &len, e);
    if (!png) return -1;
    int rc = output_write_file(path, png, len, e);
    free(png);
    return rc;
}

/* outdir/sample_<k>.png (5 digits at least) into path; -1 and a message when it does not fit. */
static int tile_path(char *path, size_t n, const char *outdir, long k, Err *e) {
    if (snprintf(path, n, "%s/sample_%05ld.png", outdir, k) >= (int)n) return err_set(e, "%s: path too long", outdir);
    return 0;
}

int image_check_outputs(const char *grid, const char *outdir, long first, long n_tiles, int ch, Err *e) {
    if (!grid && !outdir) return 0;
    if (!writable_channels(ch))
        return err_set(e, "%s: cannot write images of %d channels (PNG output takes 1 or 3)", grid ? grid : outdir, ch);
    if (grid && output_check(grid, e)) return -1;
    if (!outdir) return 0;
    if (output_check_dir(outdir, e)) return -1;
    char path[4096];
    for (long k = first; k < first + n_tiles; k++)   /* a tile already there that may not be replaced */
        if (tile_path(path, sizeof path, outdir, k, e) || output_check_existing(path, e)) return -1;
    return 0;
}

int image_stage_grid(OutputGroup *g, const char *path, const unsigned char *imgs, int n, int h, int w, int ch,
                     Err *e) {
    size_t len;
    unsigned char *png = encode_grid(path, imgs, n, h, w, ch, 0, &len, e);
    int rc = png ? output_group_add(g, path, png, len, e) : -1;
    free(png);
    return rc;
}

int image_stage_tiles(OutputGroup *g, const char *outdir, const unsigned char *imgs, long first, int n, int h,
                      int w, int ch, Err *e) {
    size_t len, tile = (size_t)h * w * ch;
    if (output_group_mkdir(g, outdir, e)) return -1;
    for (int k = 0; k < n; k++) {
        char path[4096];
        if (tile_path(path, sizeof path, outdir, first + k, e)) return -1;
        unsigned char *png = image_encode_png(imgs + k * tile, h, w, ch, &len, path, e);
        int rc = png ? output_group_add(g, path, png, len, e) : -1;
        free(png);
        if (rc) return -1;
    }
    return 0;
}

int image_write_set(const char *grid, const char *outdir, const unsigned char *imgs, int n, int h, int w,
                    int ch, Err *e) {
    OutputGroup g = {0};
    int rc = image_stage_grid(&g, grid, imgs, n, h, w, ch, e);
    if (!rc && outdir) rc = image_stage_tiles(&g, outdir, imgs, 0, n, h, w, ch, e);
    if (rc) {
        output_group_abort(&g);
        return -1;
    }
    return output_group_commit(&g, e);
}

/* ---------------------------------------------------------------- reading */

/* libpng reports errors through longjmp. Everything the error path must free lives in this
 * struct, owned by the caller, so no local of the setjmp function changes after setjmp. */
typedef struct {
    const unsigned char *data;   /* the file in memory (image_decode_png) ... */
    size_t len, pos;
    FILE *f;                     /* ... or read as libpng asks (image_read_png) */
    size_t idat, idat_max;    /* bytes of image data (IDAT) read so far, and the most taken */
    char msg[200];
    unsigned width, height;
    unsigned char *rgba;      /* width * height * 4 */
    png_bytep *rows;
} PngRead;

static void png_on_error(png_structp png, png_const_charp msg) {
    PngRead *r = png_get_error_ptr(png);
    snprintf(r->msg, sizeof r->msg, "%s", msg);
    png_longjmp(png, 1);
}

static void png_on_warning(png_structp png, png_const_charp msg) { (void)png; (void)msg; }

#define PNG_IDAT ((png_uint_32)'I' << 24 | (png_uint_32)'D' << 16 | (png_uint_32)'A' << 8 | (png_uint_32)'T')

/* The compressed image data is counted as it is read: libpng inflates all of it, also what
 * follows the last row (to find the stream's end), so a 4x4 image whose stream inflates to
 * gigabytes would keep it busy for as long. */
static void count_image_data(png_structp png, PngRead *r, size_t n) {
    if (png_get_io_chunk_type(png) != PNG_IDAT || !(png_get_io_state(png) & PNG_IO_CHUNK_DATA)) return;
    r->idat += n;
    if (r->idat_max && r->idat > r->idat_max) png_error(png, "more compressed image data than the image holds");
}

/* libpng's input, from memory or from the file: only what it asks for is read (not, say, a
 * gigabyte after the image's end). */
static void png_read_input(png_structp png, png_bytep out, size_t n) {
    PngRead *r = png_get_io_ptr(png);
    count_image_data(png, r, n);
    if (r->f) {
        if (fread(out, 1, n, r->f) != n) png_error(png, ferror(r->f) ? "read error" : "truncated file");
        return;
    }
    if (n > r->len - r->pos) png_error(png, "truncated file");
    memcpy(out, r->data + r->pos, n);
    r->pos += n;
}

/* Decode to 8-bit RGBA. Returns 0, -1 (r->msg says why), or 1 if the size is not want_w x want_h
 * (checked before any pixel memory is allocated). */
static int png_decode(PngRead *r, unsigned want_w, unsigned want_h) {
    png_structp png = png_create_read_struct(PNG_LIBPNG_VER_STRING, r, png_on_error, png_on_warning);
    png_infop info = png ? png_create_info_struct(png) : NULL;
    if (!info) {
        png_destroy_read_struct(&png, NULL, NULL);
        snprintf(r->msg, sizeof r->msg, "out of memory");
        return -1;
    }
    if (setjmp(png_jmpbuf(png))) {
        png_destroy_read_struct(&png, &info, NULL);
        return -1;
    }
    png_set_read_fn(png, r, png_read_input);
    /* Skip every ancillary chunk but tRNS unread: libpng buffers a text or palette chunk
     * whole before checking it, so a 60-byte file claiming a 1 GB sPLT made it malloc 1 GB. */
    static const png_byte skip[] = "bKGD\0cHRM\0eXIf\0gAMA\0hIST\0iCCP\0iTXt\0oFFs\0pCAL\0pHYs\0"
                                   "sBIT\0sCAL\0sPLT\0sRGB\0sTER\0tEXt\0tIME\0zTXt";
    png_set_keep_unknown_chunks(png, PNG_HANDLE_CHUNK_NEVER, NULL, 0);   /* unknown chunks too */
    png_set_keep_unknown_chunks(png, PNG_HANDLE_CHUNK_NEVER, skip, (int)(sizeof skip / 5));
    png_read_info(png, info);
    r->width = png_get_image_width(png, info);
    r->height = png_get_image_height(png, info);
    if (r->width != want_w || r->height != want_h) {
        png_destroy_read_struct(&png, &info, NULL);
        return 1;
    }
    /* Compressed, the pixels take less than twice their raw size (filter bytes, interlacing's
     * passes and zlib's stored blocks included), and a few bytes of framing */
    r->idat_max = 2 * (size_t)r->height * (png_get_rowbytes(png, info) + 1) + 4096;
    /* everything to 8-bit RGBA: palette and low bit depths expanded, tRNS to alpha,
     * 16 bits scaled (rounded) to 8, gray replicated, opaque alpha added where missing */
    int color = png_get_color_type(png, info);
    png_set_expand(png);
    png_set_scale_16(png);
    if (!(color & PNG_COLOR_MASK_COLOR)) png_set_gray_to_rgb(png);
    if (!(color & PNG_COLOR_MASK_ALPHA) && !png_get_valid(png, info, PNG_INFO_tRNS))
        png_set_add_alpha(png, 0xff, PNG_FILLER_AFTER);
    png_set_interlace_handling(png);
    png_read_update_info(png, info);
    if (png_get_rowbytes(png, info) != (size_t)r->width * 4) png_error(png, "unexpected pixel layout");
    r->rgba = malloc((size_t)r->width * r->height * 4);
    r->rows = malloc(r->height * sizeof *r->rows);
    if (!r->rgba || !r->rows) png_error(png, "out of memory");
    for (unsigned y = 0; y < r->height; y++) r->rows[y] = r->rgba + (size_t)y * r->width * 4;
    png_read_image(png, r->rows);
    png_read_end(png, NULL);
    png_destroy_read_struct(&png, &info, NULL);
    return 0;
}

/* Decode r (its signature checked) as exactly h x w x ch into img; a message naming path. */
static int decode(PngRead *r, const char *path, unsigned char *img, int h, int w, int ch, Err *e) {
    int rc = png_decode(r, (unsigned)w, (unsigned)h);
    if (rc == 0) {
        /* alpha composited on black (MNIST-style background); gray as luminance with the ITU-R
         * 601 weights in 16-bit fixed point, as PIL's convert("L") does: exact for gray input */
        for (size_t i = 0, n = (size_t)w * h; i < n; i++) {
            const unsigned char *p = r->rgba + 4 * i;
            unsigned a = p[3], c[3];
            for (int k = 0; k < 3; k++) c[k] = (p[k] * a + 127) / 255;
            if (ch == 1) img[i] = (unsigned char)((c[0] * 19595 + c[1] * 38470 + c[2] * 7471 + 0x8000) >> 16);
            else for (int k = 0; k < 3; k++) img[3 * i + k] = (unsigned char)c[k];
        }
    }
    free(r->rgba);
    free(r->rows);
    if (rc < 0) return err_set(e, "%s: corrupt PNG: %s", path, r->msg);
    if (rc > 0)
        return err_set(e, "%s: image is %ux%u, the model needs %dx%d", path, r->width, r->height, w, h);
    return 0;
}

int image_read_png(const char *path, unsigned char *img, int h, int w, int ch, Err *e) {
    if (ch != 1 && ch != 3) return err_set(e, "%s: cannot read as %d channels", path, ch);
    int fd = open_regular(path, e);
    if (fd < 0) return -1;
    FILE *f = fdopen(fd, "rb");
    if (!f) {
        close(fd);
        return err_set(e, "%s: %s", path, strerror(errno));
    }
    unsigned char sig[8];
    int rc;
    if (fread(sig, 1, sizeof sig, f) != sizeof sig || png_sig_cmp(sig, 0, 8) || fseek(f, 0, SEEK_SET))
        rc = err_set(e, "%s: not a PNG file", path);
    else {
        PngRead r = {.f = f};
        rc = decode(&r, path, img, h, w, ch, e);
    }
    fclose(f);
    return rc;
}

int image_decode_png(const unsigned char *data, size_t len, const char *path, unsigned char *img,
                     int h, int w, int ch, Err *e) {
    if (ch != 1 && ch != 3) return err_set(e, "%s: cannot read as %d channels", path, ch);
    if (len < 8 || png_sig_cmp(data, 0, 8)) return err_set(e, "%s: not a PNG file", path);
    PngRead r = {.data = data, .len = len};
    return decode(&r, path, img, h, w, ch, e);
}
