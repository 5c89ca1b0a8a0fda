/* libFuzzer target: the model file loader. The input is a whole model file. It goes through
 * the safetensors parser alone (every tensor widened, whatever its name), then through
 * model_load_buffer, which also checks the metadata config and every weight's shape. */
#include <math.h>
#include <stdint.h>

#include "fuzz_common.h"
#include "engine/model.h"
#include "io/safetensors.h"

#define NAME "fuzz.bin"

/* Both parsers take ownership of their buffer. */
static unsigned char *copy(const uint8_t *data, size_t size) {
    unsigned char *b = malloc(size ? size : 1);
    FUZZ_CHECK(b);
    if (size) memcpy(b, data, size);
    return b;
}

static void check_container(const SafeTensors *st) {
    uint64_t hlen = 0;
    for (int i = 7; i >= 0; i--) hlen = hlen << 8 | st->buf[i];
    FUZZ_CHECK(hlen <= ST_MAX_HEADER && hlen <= st->len - 8);
    size_t covered = 0;   /* the ranges tile the data section: their sizes add up to it */
    for (int i = 0; i < st->n; i++) covered += st->t[i].nbytes;
    FUZZ_CHECK(covered == st->len - 8 - hlen);
    for (int i = 0; i < st->n; i++) {
        const StTensor *t = &st->t[i];
        size_t n = st_numel(t);
        /* the byte range must lie inside the buffer and match the shape exactly */
        FUZZ_CHECK(t->data >= st->buf && t->nbytes <= st->len);
        FUZZ_CHECK((size_t)(t->data - st->buf) <= st->len - t->nbytes);
        FUZZ_CHECK(n * (size_t)st_dtype_size(t->dtype) == t->nbytes);
        FUZZ_CHECK(st_find(st, t->name) == t);   /* names are unique */
        float *f = malloc(n ? n * sizeof *f : 1);
        FUZZ_CHECK(f);
        st_to_f32(t, f);
        free(f);
        char s[24];   /* short on purpose: the shape must be cut, not overflow */
        st_format_shape(t->shape, t->ndim, s, sizeof s);
        FUZZ_CHECK(strlen(s) < sizeof s);
    }
    for (int i = 0; i < st->n_meta; i++) FUZZ_CHECK(st_meta(st, st->meta_keys[i]) == st->meta_vals[i]);
}

static void check_model(const Model *m) {
    const Config *c = &m->cfg;
    FUZZ_CHECK(c->n_layers > 0 && c->n_heads > 0 && c->d_head > 0 && c->d_ff > 0 && c->n_mix > 0);
    FUZZ_CHECK(c->d == c->n_heads * c->d_head && c->d % 2 == 0);
    FUZZ_CHECK(c->seq_len == c->height * c->width * c->channels);
    size_t d = (size_t)c->d, f = (size_t)c->d_ff;
    size_t per_layer = 3 * d * d + 3 * d + d * d + d + 4 * d + f * d + f + d * f + d;
    size_t want = N_TOKENS * (d / 2) + c->n_layers * per_layer + 2 * d + 3 * (size_t)c->n_mix * (d + 1);
    FUZZ_CHECK(m->n_params == want);
    /* the last weight ends inside the arena (packed and aligned: it may hold more than n_params) */
    FUZZ_CHECK(m->arena_floats >= m->n_params && m->head_b + 3 * c->n_mix <= m->arena + m->arena_floats);
    FUZZ_CHECK(c->height <= MAX_SIDE && c->width <= MAX_SIDE && (c->channels == 1 || c->channels == 3));
    for (size_t i = 0; i < m->arena_floats; i++) FUZZ_CHECK(isfinite(m->arena[i]));
    (void)model_state_bytes(c, c->seq_len);
    (void)model_meta(m, "dataset");
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    Err e = {{0}};
    SafeTensors st;
    if (st_parse(&st, copy(data, size), size, NAME, &e) == 0) {
        check_container(&st);
        st_close(&st);
    } else {
        check_error(&e, NAME);
    }

    Model m;
    memset(&e, 0, sizeof e);
    if (model_load_buffer(&m, copy(data, size), size, NAME, &e) == 0) {
        check_model(&m);
        model_free(&m);
    } else {
        check_error(&e, NAME);
    }
    return 0;
}
