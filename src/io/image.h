/* Image I/O: PNG grids written atomically (stb_image_write), PNG reading (libpng). */
#ifndef LINGEN_IMAGE_H
#define LINGEN_IMAGE_H
#include "output.h"
#include "util.h"

/* n images of h x w x ch (uint8, channels interleaved, row-major) tiled in rows of `cols`,
 * with a 2-pixel border (value 0). cols <= 0: ceil(sqrt(n)). */
int image_write_grid(const char *path, const unsigned char *imgs, int n, int h, int w, int ch,
                     int cols, Err *e);
int image_write_png(const char *path, const unsigned char *img, int h, int w, int ch, Err *e);
/* The PNG file's bytes (malloc'd; *len their number), or NULL and a message naming path. */
unsigned char *image_encode_png(const unsigned char *img, int h, int w, int ch, size_t *len, const char *path,
                                Err *e);
/* Before a run: can the grid (and outdir's tiles first .. first + n_tiles - 1) of ch-channel
 * images be written? (grid NULL: only the tiles; both NULL: nothing to check) */
int image_check_outputs(const char *grid, const char *outdir, long first, long n_tiles, int ch, Err *e);
/* Before a run: can the grid of n images (cols per row; <= 0: as image_write_grid) be encoded?
 * Else a message saying how many images fit in one. */
int image_check_grid(const char *path, int n, int h, int w, int ch, int cols, Err *e);
/* The grid, and with outdir one PNG per image (outdir/sample_00000.png, ...): all or nothing. */
int image_write_set(const char *grid, const char *outdir, const unsigned char *imgs, int n, int h, int w,
                    int ch, Err *e);
/* The same in parts, for a caller that commits (or aborts) them together, output.h's groups: the
 * grid of n images, and one PNG per image into outdir (made if missing), image first + k's named
 * outdir/sample_<first + k>.png (5 digits at least). */
int image_stage_grid(OutputGroup *g, const char *path, const unsigned char *imgs, int n, int h, int w, int ch,
                     Err *e);
int image_stage_tiles(OutputGroup *g, const char *outdir, const unsigned char *imgs, long first, int n, int h,
                      int w, int ch, Err *e);
/* Grid geometry (for tests and callers). */
void image_grid_size(int n, int h, int w, int cols, int *out_h, int *out_w);
/* The pixels of that grid: imgs tiled into grid (out_h x out_w x ch, as image_grid_size gives),
 * which the caller zeroed (the border is left as it is). */
void image_grid_fill(unsigned char *grid, const unsigned char *imgs, int n, int h, int w, int ch, int cols);
/* Read a PNG as exactly h x w x ch (ch 1 or 3; converts gray<->RGB, 16->8 bit);
 * alpha is composited onto black; a clear error for a corrupt file or a size mismatch. The
 * file is read as the decoder goes, up to its end chunk: nothing after it, and not at all
 * past a header of another size. */
int image_read_png(const char *path, unsigned char *img, int h, int w, int ch, Err *e);
/* The same from a PNG already in memory (fuzzing); path names it in error messages. */
int image_decode_png(const unsigned char *data, size_t len, const char *path, unsigned char *img,
                     int h, int w, int ch, Err *e);
#endif
