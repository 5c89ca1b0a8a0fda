/* libFuzzer target: the PNG reader (the --prefix images of `lingen sample`), through the
 * in-memory entry point image_decode_png. The size asked for is the one in the IHDR chunk
 * when that is small, so whole files get decoded, not just rejected for their size; the
 * channels (1 or 3) come from the length's parity, so both conversions get exercised. */
#include <stdint.h>

#include "fuzz_common.h"
#include "io/image.h"

#define NAME "fuzz.png"
#define MAX_PIXELS (1 << 16)

static uint32_t be32(const uint8_t *p) {
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    int w = 28, h = 28, ch = size % 2 ? 3 : 1;
    if (size >= 24) {   /* signature, IHDR length and type, then width and height */
        uint32_t iw = be32(data + 16), ih = be32(data + 20);
        if (iw && ih && iw <= MAX_PIXELS && ih <= MAX_PIXELS / iw) { w = (int)iw; h = (int)ih; }
    }
    unsigned char *img = malloc((size_t)w * h * ch);
    FUZZ_CHECK(img);
    Err e = {{0}};
    if (image_decode_png(data, size, NAME, img, h, w, ch, &e)) check_error(&e, NAME);
    free(img);
    return 0;
}
