/* Loading a lingen model file: the config from __metadata__, then every weight by name,
 * with its shape and dtype checked, widened to float32 into one arena. The file format is
 * documented in docs/model-format.md; scripts/modelfile.py writes it. */
#include "model.h"

#include <limits.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/matmul.h"
#include "kernels/matmul_amx.h"
#include "kernels/matmul_q8.h"
#include "kernels/plan.h"
#include "io/safetensors.h"

/* A metadata value for an error message: at most 40 characters, control characters hidden. */
static const char *clip(const char *s, char buf[48]) {
    size_t i = 0;
    for (; s[i] && i < 40; i++) buf[i] = (unsigned char)s[i] < 0x20 ? '?' : s[i];
    strcpy(buf + i, s[i] ? "..." : "");
    return buf;
}

static int get_meta(const SafeTensors *st, const char *key, const char **val, const char *path, Err *e) {
    *val = st_meta(st, key);
    return *val ? 0 : err_set(e, "%s: metadata: missing key '%s'", path, key);
}

/* A positive decimal integer (digits only, no sign or spaces) no bigger than max. */
static int meta_int(const SafeTensors *st, const char *key, int max, int *out, const char *path, Err *e) {
    const char *s;
    char b[48];
    if (get_meta(st, key, &s, path, e)) return -1;
    size_t nd = strspn(s, "0123456789");
    long v = 0;
    for (size_t i = 0; i < nd && v <= max; i++) v = v * 10 + (s[i] - '0');   /* stops before overflow */
    if (nd == 0 || s[nd] || v == 0)
        return err_set(e, "%s: metadata: %s = '%s' is not a positive integer", path, key, clip(s, b));
    if (v > max) return err_set(e, "%s: metadata: %s = '%s' is out of range (1..%d)", path, key, clip(s, b), max);
    *out = (int)v;
    return 0;
}

/* One of two words (or the one word a, when b is NULL): 0 for a, 1 for b. */
static int meta_choice(const SafeTensors *st, const char *key, const char *a, const char *b, int *out,
                       const char *path, Err *e) {
    const char *s;
    char c[48];
    if (get_meta(st, key, &s, path, e)) return -1;
    if (strcmp(s, a) == 0) *out = 0;
    else if (b && strcmp(s, b) == 0) *out = 1;
    else if (b) return err_set(e, "%s: metadata: %s = '%s', expected %s or %s", path, key, clip(s, c), a, b);
    else return err_set(e, "%s: metadata: %s = '%s', expected %s", path, key, clip(s, c), a);
    return 0;
}

static int parse_config(Config *c, const SafeTensors *st, const char *path, Err *e) {
    if (st->n_meta == 0) return err_set(e, "%s: no __metadata__ in the header: not a lingen model file", path);
    int x;
    if (meta_choice(st, "format", "lingen", NULL, &x, path, e)) return -1;
    if (meta_choice(st, "format_version", "1", NULL, &x, path, e)) return -1;
    /* Caps far above anything worth running on a CPU, low enough that every size derived
     * from them fits easily in 64 bits (the weights must be in the file anyway). The image
     * size is not paid for by the file: its caps (docs/model-format.md) keep a run finite,
     * and 1 or 3 channels are what the PNG output takes. */
    struct { const char *key; int *dst; int max; } ints[] = {
        {"n_layers", &c->n_layers, 1024}, {"n_heads", &c->n_heads, 1024}, {"d_head", &c->d_head, 4096},
        {"d_ff", &c->d_ff, 1 << 18},      {"n_mix", &c->n_mix, 1024},     {"height", &c->height, MAX_SIDE},
        {"width", &c->width, MAX_SIDE},   {"channels", &c->channels, 3},
    };
    for (size_t i = 0; i < sizeof ints / sizeof ints[0]; i++)
        if (meta_int(st, ints[i].key, ints[i].max, ints[i].dst, path, e)) return -1;
    if (c->channels == 2) return err_set(e, "%s: metadata: channels = '2': must be 1 (gray) or 3 (RGB)", path);
    int kind;
    if (meta_choice(st, "attention", "linear", "softmax", &kind, path, e) ||
        meta_choice(st, "norm", "post", "pre", &c->pre_norm, path, e) ||
        meta_choice(st, "activation", "relu", "gelu", &c->gelu, path, e) ||
        meta_choice(st, "dataset", "mnist", "cifar10", &x, path, e) ||
        meta_choice(st, "bos", "1", NULL, &x, path, e))
        return -1;
    c->attention = kind ? ATTN_SOFTMAX : ATTN_LINEAR;
    snprintf(c->dataset, sizeof c->dataset, "%s", st_meta(st, "dataset"));
    long d = (long)c->n_heads * c->d_head;
    if (d > 65536)
        return err_set(e, "%s: metadata: d = n_heads * d_head = %ld is too large (at most 65536)", path, d);
    if (d % 2)   /* the embedding and the positional encoding are d/2 wide each */
        return err_set(e, "%s: metadata: d = n_heads * d_head = %ld must be even", path, d);
    c->d = (int)d;
    c->seq_len = c->height * c->width * c->channels;
    return 0;
}

/* One tensor the file must hold: name, shape (1-D when cols is 0), and where it goes: dst, or
 * lin for a Linear weight (held packed). */
typedef struct {
    char name[64];
    int ndim;
    int64_t shape[2];
    float **dst;
    Packed *lin;
    FileWeight *file;          /* a Linear's copy in the file's layout, or NULL: not kept */
    Copies copies;             /* a Linear's other copies (plan.h) */
    const StTensor *t;
    size_t at;
} Want;

static void want(Want *w, int *n, const char *prefix, const char *suffix, float **dst, int64_t rows, int64_t cols) {
    Want *x = &w[(*n)++];
    snprintf(x->name, sizeof x->name, "%s%s", prefix, suffix);
    x->ndim = cols ? 2 : 1;
    x->shape[0] = rows;
    x->shape[1] = cols;
    x->dst = dst;
}

static void want_linear(Want *w, int *n, const char *prefix, const char *suffix, Packed *lin, FileWeight *file,
                        int64_t rows, int64_t cols) {
    want(w, n, prefix, suffix, NULL, rows, cols);
    w[*n - 1].lin = lin;
    w[*n - 1].file = file;
}

/* keep: MODEL_FILE_WEIGHTS or 0, whether the Linears' file-layout copies are wanted */
static int list_weights(Model *m, Want *w, int keep) {
    const Config *c = &m->cfg;
    int64_t d = c->d, f = c->d_ff;
    int n = 0, file = keep & MODEL_FILE_WEIGHTS;
    want(w, &n, "", "emb.weight", &m->emb, N_TOKENS, d / 2);
    for (int l = 0; l < c->n_layers; l++) {
        LayerWeights *L = &m->layers[l];
        char p[32];
        snprintf(p, sizeof p, "layers.%d.", l);
        want_linear(w, &n, p, "attn.qkv.weight", &L->qkv_w, file ? &L->qkv_f : NULL, 3 * d, d);
        want(w, &n, p, "attn.qkv.bias", &L->qkv_b, 3 * d, 0);
        want_linear(w, &n, p, "attn.out.weight", &L->out_w, file ? &L->out_f : NULL, d, d);
        want(w, &n, p, "attn.out.bias", &L->out_b, d, 0);
        want(w, &n, p, "norm1.weight", &L->norm1_w, d, 0);
        want(w, &n, p, "norm1.bias", &L->norm1_b, d, 0);
        want(w, &n, p, "norm2.weight", &L->norm2_w, d, 0);
        want(w, &n, p, "norm2.bias", &L->norm2_b, d, 0);
        want_linear(w, &n, p, "ff1.weight", &L->ff1_w, file ? &L->ff1_f : NULL, f, d);
        want(w, &n, p, "ff1.bias", &L->ff1_b, f, 0);
        want_linear(w, &n, p, "ff2.weight", &L->ff2_w, file ? &L->ff2_f : NULL, d, f);
        want(w, &n, p, "ff2.bias", &L->ff2_b, d, 0);
    }
    want(w, &n, "", "norm.weight", &m->norm_w, d, 0);
    want(w, &n, "", "norm.bias", &m->norm_b, d, 0);
    want_linear(w, &n, "", "head.weight", &m->head_w, file ? &m->head_f : NULL, 3 * (int64_t)c->n_mix, d);
    want(w, &n, "", "head.bias", &m->head_b, 3 * (int64_t)c->n_mix, 0);
    return n;
}
#define WEIGHTS_PER_LAYER 12

/* A Linear weight [out, in] is held packed for matmul() (matmul.h), as halves if the file has
 * them: floats' worth of the arena it takes. */
static int held_half(const Want *w) { return w->t->dtype == ST_F16; }
#define ALIGN 16   /* floats: every tensor starts on a 64-byte cache line */
#define HUGE_PAGE ((size_t)2 << 20)   /* bytes: the arena starts on a 2 MB page where it fills one */
/* A float16 weight may be held up to four times, one after the other, each on a cache line:
 * packed for matmul.c's kernel (the parallel form's products, exact in float32), and the copies
 * the plan gives it (plan.h: rounded to bfloat16, packed for AMX tiles, as 8-bit integers). */
static size_t align(size_t floats) { return (floats + ALIGN - 1) / ALIGN * ALIGN; }
static size_t panels_floats(const Want *w) {
    size_t n = matmul_packed_values((int)w->shape[1], (int)w->shape[0]);
    return held_half(w) ? (n + 1) / 2 : n;
}
static int held_bf16(const Want *w) { return w->copies.bf16; }
static int held_amx(const Want *w) { return w->copies.amx; }
static int held_q8(const Want *w) { return w->copies.q8; }
static size_t bf16_floats(const Want *w) { return (matmul_bf16_values((int)w->shape[1], (int)w->shape[0]) + 1) / 2; }
static size_t amx_floats(const Want *w) { return (matmul_amx_values((int)w->shape[1], (int)w->shape[0]) + 1) / 2; }
static size_t bf16_offset(const Want *w) { return align(panels_floats(w)); }
static size_t amx_offset(const Want *w) {
    return held_bf16(w) ? align(bf16_offset(w) + bf16_floats(w)) : bf16_offset(w);
}
static size_t amx_end(const Want *w) {
    if (held_amx(w)) return amx_offset(w) + amx_floats(w);
    return held_bf16(w) ? bf16_offset(w) + bf16_floats(w) : panels_floats(w);
}
static size_t q8_offset(const Want *w) { return align(amx_end(w)); }
static size_t q8_end(const Want *w) {
    size_t q8 = (matmul_q8_bytes((int)w->shape[1], (int)w->shape[0]) + 3) / 4;
    return held_q8(w) ? q8_offset(w) + q8 : amx_end(w);
}
/* last, where it is kept: the weight in the file's own layout, halves or floats as held_half */
static size_t file_offset(const Want *w) { return align(q8_end(w)); }
static size_t held_floats(const Want *w) {
    if (!w->lin) return (size_t)w->shape[0] * (w->ndim == 2 ? (size_t)w->shape[1] : 1);
    size_t n = (size_t)w->shape[0] * (size_t)w->shape[1];
    return w->file ? file_offset(w) + (held_half(w) ? (n + 1) / 2 : n) : q8_end(w);
}

/* Every weight must be a finite number: a NaN or Inf makes every image of a run all zeros,
 * and every likelihood NaN. The first bad value is named. */
static int check_finite(const float *v, size_t n, const char *path, const char *name, Err *e) {
    for (size_t i = 0; i < n; i++)
        if (!isfinite(v[i]))
            return err_set(e, "%s: tensor '%s' holds a non-finite value (%s at index %zu)", path, name,
                           isnan(v[i]) ? "NaN" : v[i] > 0 ? "+Inf" : "-Inf", i);
    return 0;
}

/* Widen one tensor into its place in the arena, dst (a Linear weight: packed, its halves as they
 * are), checked finite. */
static int widen(const Want *w, float *dst, const char *path, Err *e) {
    size_t n = st_numel(w->t);
    if (!w->lin) {
        *w->dst = dst;
        st_to_f32(w->t, dst);
        return check_finite(dst, n, path, w->name, e);
    }
    float *tmp = xmalloc(n * sizeof(float));
    st_to_f32(w->t, tmp);
    int rc = check_finite(tmp, n, path, w->name, e), half = held_half(w);
    int n_in = (int)w->t->shape[1], n_out = (int)w->t->shape[0];
    uint16_t *bf16 = held_bf16(w) ? (uint16_t *)(dst + bf16_offset(w)) : NULL;
    if (!rc && bf16) matmul_bf16_pack(bf16, tmp, n_in, n_out);
    void *q8 = held_q8(w) ? dst + q8_offset(w) : NULL;
    if (!rc && q8) matmul_q8_pack(q8, tmp, n_in, n_out);
    if (half) st_to_f16(w->t, (uint16_t *)tmp);   /* the floats are checked: the halves now, in their place */
    uint16_t *amx = held_amx(w) ? (uint16_t *)(dst + amx_offset(w)) : NULL;
    if (!rc) matmul_pack(dst, tmp, half, n_in, n_out);
    if (!rc && amx) matmul_amx_pack(amx, (const uint16_t *)tmp, n_in, n_out);
    *w->lin = (Packed){dst, half, amx, bf16, q8};
    if (!rc && w->file) {   /* tmp is the file's row-major layout, as halves or floats */
        void *rows = dst + file_offset(w);
        memcpy(rows, tmp, n * (half ? sizeof(uint16_t) : sizeof(float)));
        *w->file = (FileWeight){rows, half};
    }
    free(tmp);
    return rc;
}

/* Check names, dtypes and shapes against the config; then widen every weight into one arena. */
static int load_weights(Model *m, const SafeTensors *st, const char *path, int keep, Err *e) {
    m->layers = xcalloc((size_t)m->cfg.n_layers, sizeof *m->layers);
    Want *w = xcalloc(5 + (size_t)WEIGHTS_PER_LAYER * m->cfg.n_layers, sizeof *w);
    int n = list_weights(m, w, keep), rc = 0;
    size_t n_params = 0;
    for (int i = 0; i < n && !rc; i++) {
        const StTensor *t = w[i].t = st_find(st, w[i].name);
        char have[128], need[64];
        if (!t) rc = err_set(e, "%s: missing tensor '%s'", path, w[i].name);
        else if (t->dtype == ST_I32)
            rc = err_set(e, "%s: tensor '%s' has dtype %s, expected F32, F16 or BF16", path, w[i].name,
                         st_dtype_name(t->dtype));
        else if (t->ndim != w[i].ndim || t->shape[0] != w[i].shape[0] ||
                 (t->ndim == 2 && t->shape[1] != w[i].shape[1]))
            rc = err_set(e, "%s: tensor '%s' has shape %s, expected %s", path, w[i].name,
                         st_format_shape(t->shape, t->ndim, have, sizeof have),
                         st_format_shape(w[i].shape, w[i].ndim, need, sizeof need));
        else n_params += st_numel(t);
        if (!rc && w[i].lin) w[i].copies = plan_copies(&m->plan, t->dtype == ST_F16, !strcmp(w[i].name, "head.weight"));
    }
    /* Every wanted name was found and the file's names are unique: more tensors means extras. */
    for (int i = 0; i < st->n && !rc && st->n > n; i++) {
        int k = 0;
        while (k < n && strcmp(st->t[i].name, w[k].name) != 0) k++;
        if (k == n) rc = err_set(e, "%s: unexpected tensor '%s'", path, st->t[i].name);
    }
    size_t off = 0;   /* where each tensor goes: at the next cache line */
    for (int i = 0; i < n && !rc; i++) {
        w[i].at = align(off);
        off = w[i].at + held_floats(&w[i]);
    }
    void *arena = NULL;
    size_t start = off * sizeof(float) >= HUGE_PAGE ? HUGE_PAGE : ALIGN * sizeof(float);   /* on a 2 MB page */
    if (!rc && posix_memalign(&arena, start, off * sizeof(float)))
        rc = err_set(e, "%s: cannot allocate %.1f MB for the weights", path, off * 4 / 1e6);
    m->arena = arena;
    m->arena_floats = rc ? 0 : off;
    if (!rc) advise_huge_pages(m->arena, off * sizeof(float));
    if (!rc) memset(m->arena, 0, off * sizeof(float));   /* the gaps between tensors */
    for (int i = 0; i < n && !rc; i++) rc = widen(&w[i], m->arena + w[i].at, path, e);
    m->n_params = rc ? 0 : n_params;
    free(w);
    return rc;
}

/* A parsed file's config, then its weights on a plan, keeping what keep asks for (model_load_with);
 * the data read only once the config is checked: a wrong file costs no more than its header.
 * st closed. */
static int load_parsed(Model *m, SafeTensors *st, const char *path, const Plan *plan, int keep, Err *e) {
    m->plan = plan ? *plan : plan_default();
    int rc = parse_config(&m->cfg, st, path, e);
    if (!rc) rc = st_read_data(st, path, e);
    if (!rc) rc = load_weights(m, st, path, keep, e);
    if (!rc) {   /* keep the metadata (provenance for `lingen info`); the file buffer goes */
        m->n_meta = st->n_meta;
        m->meta_keys = st->meta_keys;
        m->meta_vals = st->meta_vals;
        st->n_meta = 0;
        st->meta_keys = st->meta_vals = NULL;
    }
    st_close(st);
    if (rc) model_free(m);
    return rc;
}

int model_load_with(Model *m, const char *path, const Plan *plan, int keep, Err *e) {
    memset(m, 0, sizeof *m);
    SafeTensors st;
    if (st_open_header(&st, path, e)) return -1;
    return load_parsed(m, &st, path, plan, keep, e);
}

int model_load(Model *m, const char *path, Err *e) { return model_load_with(m, path, NULL, 0, e); }

int model_load_buffer(Model *m, unsigned char *buf, size_t len, const char *path, Err *e) {
    memset(m, 0, sizeof *m);
    SafeTensors st;
    if (st_parse(&st, buf, len, path, e)) return -1;
    return load_parsed(m, &st, path, NULL, 0, e);
}

void model_free(Model *m) {
    st_free_meta(m->n_meta, m->meta_keys, m->meta_vals);
    free(m->layers);
    free(m->arena);
    memset(m, 0, sizeof *m);
}

const char *model_meta(const Model *m, const char *key) {
    for (int i = 0; i < m->n_meta; i++)
        if (strcmp(m->meta_keys[i], key) == 0) return m->meta_vals[i];
    return NULL;
}

size_t model_state_bytes(const Config *c, int n_positions) {
    if (c->attention == ATTN_LINEAR)   /* S (D x D) and z (D) per head and layer, whatever n */
        return (size_t)c->n_layers * c->n_heads * ((size_t)c->d_head * c->d_head + c->d_head) * sizeof(float);
    size_t n = n_positions > 0 ? (size_t)n_positions : 0;   /* a key and a value of width d per position */
    return (size_t)c->n_layers * n * 2 * (size_t)c->d * sizeof(float);
}
