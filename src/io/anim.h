/* Animated GIFs of sampling (lingen sample --animate): the grid of images (image.h's layout)
 * filling in one sub-pixel at a time, a frame every `every` positions.
 *
 * Generation draws position t of every image at step t and never changes it afterwards
 * (generate.h), so the grid after p steps is the finished grid with each image's positions
 * p..N-1 not yet drawn; those show as 0 (black), as the images start. The frames are made from
 * the finished images, which every device and an MPI job's rank 0 have.
 *
 * Colours: gray images are exact (a palette of the 256 levels). GIF frames take at most 256
 * colours, and a sample grid of RGB images has thousands, so RGB is rounded to a fixed 6x7x6
 * cube: each channel to the nearest of 6 evenly spaced levels (red, blue: at most 25 off in
 * 255) or 7 (green, the eye's most sensitive: at most 21 off). A palette per region of a frame
 * could be exact, but that makes each frame several images with no delay between them, and
 * browsers give a frame without a delay their own default delay: the parts would show in turn. */
#ifndef LINGEN_ANIM_H
#define LINGEN_ANIM_H
#include "output.h"
#include "util.h"

#define ANIM_LIMIT_BYTES 64000000L   /* an animation that could be larger is refused (64 MB) */
#define ANIM_DEFAULT_FRAMES 64       /* the default every: N / 64, rounded up */
#define ANIM_DELAY_MS 50             /* default delay of a frame */
#define ANIM_HOLD_MS 2000            /* the last frame shows at least this long */
#define ANIM_RGB_LEVELS_R 6
#define ANIM_RGB_LEVELS_G 7
#define ANIM_RGB_LEVELS_B 6

/* The frames of images of N positions: the empty grid, then the grid after every `every`
 * positions, the last one after all N: 1 + ceil(N / every). */
long anim_frames(int N, int every);
/* --frame-every's default for N positions: ceil(N / ANIM_DEFAULT_FRAMES). */
int anim_default_every(int N);
/* An upper bound on the GIF's bytes for n images of h x w x ch: each frame's LZW codes are at
 * most one a pixel, 12 bits each, plus the table's clear codes and the framing. */
double anim_max_bytes(int n, int h, int w, int ch, int every);
/* The first p positions of each of the n images of N positions in imgs, the rest 0, into part:
 * the images as generation holds them after p steps. */
void anim_partial(unsigned char *part, const unsigned char *imgs, int n, int N, int p);
/* The palette index of an RGB colour in the 6x7x6 cube (the nearest colour; a tie to either). */
int anim_rgb_index(const unsigned char *rgb);
/* The GIF of the n images (h x w x ch, ch 1 or 3) filling in, a frame every `every` positions
 * shown delay_ms (a multiple of 10; the last at least ANIM_HOLD_MS), looping, added to g (all
 * or nothing with the group's other files). Returns 0, or -1 and a message naming path. */
int anim_stage(OutputGroup *g, const char *path, const unsigned char *imgs, int n, int h, int w, int ch,
               int every, int delay_ms, Err *e);
#endif
