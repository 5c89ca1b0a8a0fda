/* The model file loader (src/engine/model.c) and the safetensors container under it (src/io/safetensors.c):
 * files written by scripts/modelfile.py and files built here from scratch load with the right
 * config and exactly the stored values; F16 and BF16 widen exactly; and every corruption of a
 * valid file is refused with a one-line message that names the file and the problem. */
#include "testutil.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <string.h>
#include <unistd.h>
#include "io/half.h"
#include "kernels/matmul.h"
#include "engine/model.h"
#include "io/safetensors.h"

/* Where element `idx` of a file tensor [rows, cols] is held in memory: Linear weights
 * (cols > 0) W[o][i] are packed in panels of NR = MATMUL_NR rows o, [rows/NR][cols][NR]
 * (model.h); everything else as in the file. */
static size_t held_at(size_t idx, size_t rows, size_t cols) {
    (void)rows;
    const size_t NR = MATMUL_NR;
    size_t o = cols ? idx / cols : 0, i = cols ? idx % cols : 0;
    return cols ? ((o / NR) * cols + i) * NR + o % NR : idx;
}

/* Element idx of a file tensor as held: plain, or in the packed Linear weight lin (cols > 0). */
static float held(const float *plain, Packed lin, size_t idx, size_t rows, size_t cols) {
    if (!cols) return plain[idx];
    size_t k = held_at(idx, rows, cols);
    return lin.half ? half_to_float(((const uint16_t *)lin.p)[k]) : ((const float *)lin.p)[k];
}

static char tmpdir[64];   /* made by the group setup, removed by its teardown */

static int group_setup(void **state) {
    (void)state;
    snprintf(tmpdir, sizeof tmpdir, "/tmp/lingen-test-model-XXXXXX");
    return mkdtemp(tmpdir) ? 0 : -1;
}

static int group_teardown(void **state) {
    (void)state;
    return rmdir(tmpdir);
}

static const char *tmp_path(const char *name) {
    static char p[128];
    snprintf(p, sizeof p, "%s/%s", tmpdir, name);
    return p;
}

static unsigned char *slurp(const char *path, size_t *len) {
    Err e;
    unsigned char *b = read_file(path, len, &e);
    if (!b) fail_msg("%s", e.msg);
    return b;
}

static void spit(const char *path, const void *buf, size_t len) {
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(buf, 1, len, f), len);
    assert_int_equal(fclose(f), 0);
}

/* ------------------------------------------------------------------ a model file in pieces */

/* A model file taken apart: the parsed header and the data section, plus ways to break it
 * that editing the header alone cannot express. */
typedef struct {
    cJSON *hdr;
    unsigned char *data;
    size_t dlen;
    int pad;                    /* pad the header with spaces to a multiple of 8, as the exporter does */
    const char *header_text;       /* if set: this text is the header instead of hdr ... */
    size_t header_len;             /* ... of this many bytes (0: strlen) */
    int set_hlen; uint64_t hlen;   /* if set_hlen: write this header length instead of the true one */
    int cut; size_t cut_len;       /* if cut: keep only the first cut_len bytes of the file */
    size_t drop;                   /* leave out the last drop bytes of the file */
} Parts;

static Parts parts_of(const char *path) {
    size_t len;
    unsigned char *buf = slurp(path, &len);
    assert_true(len >= 8);
    uint64_t hlen = 0;
    for (int i = 7; i >= 0; i--) hlen = hlen << 8 | buf[i];
    assert_true(hlen <= len - 8);
    Parts p = {0};
    p.hdr = cJSON_ParseWithLength((const char *)buf + 8, hlen);
    assert_non_null(p.hdr);
    p.dlen = len - 8 - hlen;
    p.data = malloc(p.dlen ? p.dlen : 1);
    memcpy(p.data, buf + 8 + hlen, p.dlen);
    p.pad = 1;
    free(buf);
    return p;
}

static void parts_free(Parts *p) {
    cJSON_Delete(p->hdr);
    free(p->data);
}

static void write_parts(const char *path, const Parts *p) {
    char *json = p->header_text ? NULL : cJSON_PrintUnformatted(p->hdr);
    const char *h = p->header_text ? p->header_text : json;
    size_t hl = p->header_len ? p->header_len : strlen(h), padded = p->pad ? (hl + 7) / 8 * 8 : hl;
    size_t len = 8 + padded + p->dlen;
    unsigned char *buf = malloc(len);
    uint64_t n = p->set_hlen ? p->hlen : padded;
    for (int i = 0; i < 8; i++) buf[i] = (unsigned char)(n >> (8 * i));
    memcpy(buf + 8, h, hl);
    memset(buf + 8 + hl, ' ', padded - hl);
    memcpy(buf + 8 + padded, p->data, p->dlen);
    assert_true(p->drop <= len);
    spit(path, buf, p->cut && p->cut_len < len ? p->cut_len : len - p->drop);
    free(buf);
    free(json);
}

static cJSON *meta(Parts *p) { return cJSON_GetObjectItemCaseSensitive(p->hdr, "__metadata__"); }
static cJSON *tensor(Parts *p, const char *name) {
    cJSON *t = cJSON_GetObjectItemCaseSensitive(p->hdr, name);
    assert_non_null(t);
    return t;
}
static void set_meta(Parts *p, const char *key, const char *val) {
    cJSON_ReplaceItemInObjectCaseSensitive(meta(p), key, cJSON_CreateString(val));
}
static void set_ints(cJSON *obj, const char *key, int n, const double *v) {
    cJSON *a = cJSON_CreateArray();
    for (int i = 0; i < n; i++) cJSON_AddItemToArray(a, cJSON_CreateNumber(v[i]));
    if (cJSON_GetObjectItemCaseSensitive(obj, key)) cJSON_ReplaceItemInObjectCaseSensitive(obj, key, a);
    else cJSON_AddItemToObject(obj, key, a);
}
static void set_dtype(Parts *p, const char *name, const char *dt) {
    cJSON_ReplaceItemInObjectCaseSensitive(tensor(p, name), "dtype", cJSON_CreateString(dt));
}

/* model_load must fail, and say so in one line that starts with the path and has the phrase. */
static void expect_load_error(const char *path, const char *phrase) {
    Model m;
    Err e = {{0}};
    int rc = model_load(&m, path, &e);
    if (rc == 0) {
        model_free(&m);
        fail_msg("%s loaded, expected an error with '%s'", path, phrase);
    }
    if (strncmp(e.msg, path, strlen(path)) != 0 || e.msg[strlen(path)] != ':' || !strstr(e.msg, phrase) ||
        strchr(e.msg, '\n'))
        fail_msg("message '%s' should start with '%s:' and contain '%s'", e.msg, path, phrase);
    assert_null(m.arena);   /* nothing left behind (LeakSanitizer checks the rest) */
    assert_null(m.layers);
    assert_null(m.meta_keys);
}

/* ------------------------------------------------------------------ corruptions of a valid file */

/* Each case edits the tiny linear MNIST fixture (2 layers, d = 32, d_ff = 64, n_mix = 3, F32). */
typedef struct { const char *name; void (*edit)(Parts *); const char *phrase; } Case;

static void empty_file(Parts *p) { p->cut = 1; p->cut_len = 0; }
static void five_bytes(Parts *p) { p->cut = 1; p->cut_len = 5; }
static void hlen_past_end(Parts *p) { p->set_hlen = 1; p->hlen = 1000000; }
static void hlen_huge(Parts *p) { p->set_hlen = 1; p->hlen = UINT64_MAX; }
static void not_json(Parts *p) { p->header_text = "{\"__metadata__\": {\"format\": \"lingen\""; }
static void not_object(Parts *p) { p->header_text = "[1, 2, 3]"; }
static void junk_after(Parts *p) { p->header_text = "{} x"; }
static void nul_in_padding(Parts *p) { p->header_text = "{}\0 "; p->header_len = 4; }
static void no_metadata(Parts *p) { cJSON_DeleteItemFromObjectCaseSensitive(p->hdr, "__metadata__"); }
static void metadata_array(Parts *p) {
    cJSON_ReplaceItemInObjectCaseSensitive(p->hdr, "__metadata__", cJSON_CreateArray());
}
static void metadata_number(Parts *p) {
    cJSON_ReplaceItemInObjectCaseSensitive(meta(p), "n_layers", cJSON_CreateNumber(2));
}
static void metadata_twice(Parts *p) { cJSON_AddItemToObject(meta(p), "n_layers", cJSON_CreateString("2")); }
static void metadata_newline_key(Parts *p) { cJSON_AddItemToObject(meta(p), "a\nb", cJSON_CreateString("x")); }
static void wrong_format(Parts *p) { set_meta(p, "format", "gguf"); }
static void wrong_version(Parts *p) { set_meta(p, "format_version", "2"); }
static void no_format(Parts *p) { cJSON_DeleteItemFromObjectCaseSensitive(meta(p), "format"); }
static void no_n_heads(Parts *p) { cJSON_DeleteItemFromObjectCaseSensitive(meta(p), "n_heads"); }
static void no_dataset(Parts *p) { cJSON_DeleteItemFromObjectCaseSensitive(meta(p), "dataset"); }
static void heads_x(Parts *p) { set_meta(p, "n_heads", "x"); }
static void heads_zero(Parts *p) { set_meta(p, "n_heads", "0"); }
static void heads_negative(Parts *p) { set_meta(p, "n_heads", "-4"); }
static void heads_plus(Parts *p) { set_meta(p, "n_heads", "+4"); }
static void heads_space(Parts *p) { set_meta(p, "n_heads", "4 "); }
static void heads_empty(Parts *p) { set_meta(p, "n_heads", ""); }
static void heads_fraction(Parts *p) { set_meta(p, "n_heads", "4.0"); }
static void layers_huge(Parts *p) { set_meta(p, "n_layers", "100000"); }
static void layers_overflow(Parts *p) { set_meta(p, "n_layers", "99999999999999999999999"); }
static void channels_5(Parts *p) { set_meta(p, "channels", "5"); }
static void d_too_big(Parts *p) { set_meta(p, "n_heads", "1024"); set_meta(p, "d_head", "4096"); }
static void d_odd(Parts *p) { set_meta(p, "n_heads", "1"); set_meta(p, "d_head", "7"); }
static void bad_attention(Parts *p) { set_meta(p, "attention", "quadratic"); }
static void bad_norm(Parts *p) { set_meta(p, "norm", "mid"); }
static void bad_activation(Parts *p) { set_meta(p, "activation", "tanh"); }
static void bad_dataset(Parts *p) { set_meta(p, "dataset", "imagenet"); }
static void bad_bos(Parts *p) { set_meta(p, "bos", "0"); }
static void control_in_value(Parts *p) { set_meta(p, "norm", "po\nst"); }
static void missing_tensor(Parts *p) {   /* renamed: its bytes still accounted for */
    cJSON *t = cJSON_DetachItemFromObjectCaseSensitive(p->hdr, "layers.1.ff1.weight");
    cJSON_AddItemToObject(p->hdr, "layers.1.ff1.weights", t);
}
static void unlisted_bytes(Parts *p) { cJSON_DeleteItemFromObjectCaseSensitive(p->hdr, "layers.1.ff1.weight"); }
static void trailing_bytes(Parts *p) {
    p->data = realloc(p->data, p->dlen + 4);
    memset(p->data + p->dlen, 0, 4);
    p->dlen += 4;
}
static void header_over_cap(Parts *p) { p->set_hlen = 1; p->hlen = 100000001; }
static void text_file(Parts *p) { p->header_text = "lingen\n\nSamples images pixel by pixel\n"; p->pad = 0; p->set_hlen = 1;
                                  p->hlen = 0x6e65676e696c2023ull; }
static void invalid_utf8(Parts *p) { cJSON_AddItemToObject(meta(p), "note", cJSON_CreateString("caf\xe9")); }
static void overlong_utf8(Parts *p) { cJSON_AddItemToObject(meta(p), "note", cJSON_CreateString("\xc0\xae")); }
static void escaped_nul(Parts *p) { p->header_text = "{\"__metadata__\": {\"format\": \"lin\\u0000gen\"}}"; }
/* a value in a tensor's bytes: F32 little-endian at element k */
static void poke(Parts *p, const char *name, size_t k, float v) {
    size_t off = (size_t)cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(tensor(p, name), "data_offsets"), 0)->valuedouble;
    memcpy(p->data + off + 4 * k, &v, 4);
}
static void nan_head_bias(Parts *p) { poke(p, "head.bias", 2, NAN); }
static void inf_emb(Parts *p) { poke(p, "emb.weight", 5, INFINITY); }
static void ninf_norm_bias(Parts *p) { poke(p, "layers.1.norm1.bias", 0, -INFINITY); }
static void nan_linear(Parts *p) { poke(p, "layers.0.attn.qkv.weight", 33, NAN); }
static void side_too_large(Parts *p) { set_meta(p, "height", "1024"); set_meta(p, "width", "1024"); }
static void channels_2(Parts *p) { set_meta(p, "channels", "2"); }
static void channels_4(Parts *p) { set_meta(p, "channels", "4"); }
static void transposed(Parts *p) { set_ints(tensor(p, "layers.0.ff1.weight"), "shape", 2, (double[]){32, 64}); }
static void wrong_ndim(Parts *p) { set_ints(tensor(p, "head.bias"), "shape", 2, (double[]){3, 3}); }
static void config_mismatch(Parts *p) { set_meta(p, "d_ff", "63"); }
static void dtype_i64(Parts *p) { set_dtype(p, "layers.0.ff1.weight", "I64"); }
static void dtype_i32(Parts *p) { set_dtype(p, "emb.weight", "I32"); }
static void dtype_f16_size(Parts *p) { set_dtype(p, "emb.weight", "F16"); }
static void dtype_missing(Parts *p) { cJSON_DeleteItemFromObjectCaseSensitive(tensor(p, "emb.weight"), "dtype"); }
static void dtype_number(Parts *p) {
    cJSON_ReplaceItemInObjectCaseSensitive(tensor(p, "emb.weight"), "dtype", cJSON_CreateNumber(4));
}
static void shape_missing(Parts *p) { cJSON_DeleteItemFromObjectCaseSensitive(tensor(p, "head.bias"), "shape"); }
static void shape_negative(Parts *p) { set_ints(tensor(p, "head.bias"), "shape", 2, (double[]){-1, -9}); }
static void shape_fraction(Parts *p) { set_ints(tensor(p, "head.bias"), "shape", 1, (double[]){9.5}); }
static void shape_9d(Parts *p) {
    set_ints(tensor(p, "head.bias"), "shape", 9, (double[]){9, 1, 1, 1, 1, 1, 1, 1, 1});
}
static void shape_overflow(Parts *p) {
    set_ints(tensor(p, "head.bias"), "shape", 3, (double[]){1ull << 50, 1ull << 50, 0x1p53});
}
static void offsets_past_end(Parts *p) {
    set_ints(tensor(p, "head.bias"), "data_offsets", 2, (double[]){(double)p->dlen - 32, (double)p->dlen + 4});
}
static void offsets_size_mismatch(Parts *p) {
    set_ints(tensor(p, "emb.weight"), "data_offsets", 2, (double[]){0, 257 * 16 * 4 - 4});
}
static void offsets_backwards(Parts *p) { set_ints(tensor(p, "emb.weight"), "data_offsets", 2, (double[]){16448, 0}); }
static void offsets_one(Parts *p) { set_ints(tensor(p, "emb.weight"), "data_offsets", 1, (double[]){0}); }
static void offsets_three(Parts *p) { set_ints(tensor(p, "emb.weight"), "data_offsets", 3, (double[]){0, 16448, 0}); }
static void offsets_negative(Parts *p) { set_ints(tensor(p, "emb.weight"), "data_offsets", 2, (double[]){-4, 16444}); }
static void offsets_huge(Parts *p) { set_ints(tensor(p, "emb.weight"), "data_offsets", 2, (double[]){0, 1e300}); }
static void offsets_missing(Parts *p) {
    cJSON_DeleteItemFromObjectCaseSensitive(tensor(p, "emb.weight"), "data_offsets");
}
static void truncated(Parts *p) { p->drop = p->dlen / 2; }
static void truncated_by_one(Parts *p) { p->drop = 1; }
static void extra_tensor(Parts *p) {   /* an empty one: it takes no bytes */
    cJSON *t = cJSON_AddObjectToObject(p->hdr, "foo");
    cJSON_AddStringToObject(t, "dtype", "F32");
    set_ints(t, "shape", 1, (double[]){0});
    set_ints(t, "data_offsets", 2, (double[]){(double)p->dlen, (double)p->dlen});
}
static void overlapping_tensor(Parts *p) {
    cJSON *t = cJSON_AddObjectToObject(p->hdr, "foo");
    cJSON_AddStringToObject(t, "dtype", "F32");
    set_ints(t, "shape", 1, (double[]){1});
    set_ints(t, "data_offsets", 2, (double[]){4, 8});
}
/* the last tensor moved 4 bytes back into the one before it, the file 4 bytes shorter: the
 * ranges still add up to the data section, but the two share 4 bytes */
static void partly_overlapping_tensor(Parts *p) {
    set_ints(tensor(p, "head.bias"), "data_offsets", 2, (double[]){(double)p->dlen - 40, (double)p->dlen - 4});
    p->drop = 4;
}
static void duplicate_tensor(Parts *p) {
    cJSON_AddItemToObject(p->hdr, "emb.weight", cJSON_Duplicate(tensor(p, "emb.weight"), 1));
}
static void shape_twice(Parts *p) {   /* the valid shape first: a reader taking the first would accept it */
    cJSON *s = cJSON_CreateArray();
    cJSON_AddItemToArray(s, cJSON_CreateNumber(1));
    cJSON_AddItemToArray(s, cJSON_CreateNumber(9));
    cJSON_AddItemToObject(tensor(p, "head.bias"), "shape", s);
}
static void tensor_not_object(Parts *p) {
    cJSON_ReplaceItemInObjectCaseSensitive(p->hdr, "head.bias", cJSON_CreateString("F32"));
}
static void name_with_newline(Parts *p) {
    cJSON_AddItemToObject(p->hdr, "foo\nbar", cJSON_Duplicate(tensor(p, "head.bias"), 1));
}

static const Case CASES[] = {
    {"empty file", empty_file, "empty file"},
    {"shorter than 8 bytes", five_bytes, "only 5 bytes"},
    {"header length past end", hlen_past_end, "header length 1000000 past end of file ("},
    {"header length 2^64-1", hlen_huge, "not a lingen model file (safetensors)"},
    {"header length over 100 MB", header_over_cap, "not a lingen model file (safetensors)"},
    {"a text file", text_file, "not a lingen model file (safetensors)"},
    {"header not UTF-8", invalid_utf8, "not valid UTF-8"},
    {"header with an overlong UTF-8 form", overlong_utf8, "not valid UTF-8"},
    {"header with an escaped NUL", escaped_nul, "a NUL character"},
    {"header not JSON", not_json, "header is not valid JSON"},
    {"header JSON not an object", not_object, "not a lingen model file (safetensors)"},
    {"junk after the header JSON", junk_after, "junk after the JSON at byte 3"},
    {"NUL after the header JSON", nul_in_padding, "header byte 2: a NUL character"},
    {"no __metadata__", no_metadata, "no __metadata__"},
    {"__metadata__ not an object", metadata_array, "__metadata__ is not a JSON object"},
    {"metadata value not a string", metadata_number, "__metadata__ value 'n_layers' is not a string"},
    {"metadata key twice", metadata_twice, "__metadata__ key 'n_layers' appears twice"},
    {"metadata key with a newline", metadata_newline_key, "__metadata__ key contains control characters"},
    {"wrong format", wrong_format, "metadata: format = 'gguf', expected lingen"},
    {"wrong format_version", wrong_version, "metadata: format_version = '2', expected 1"},
    {"missing format", no_format, "metadata: missing key 'format'"},
    {"missing n_heads", no_n_heads, "metadata: missing key 'n_heads'"},
    {"missing dataset", no_dataset, "metadata: missing key 'dataset'"},
    {"n_heads = x", heads_x, "metadata: n_heads = 'x' is not a positive integer"},
    {"n_heads = 0", heads_zero, "metadata: n_heads = '0' is not a positive integer"},
    {"n_heads = -4", heads_negative, "metadata: n_heads = '-4' is not a positive integer"},
    {"n_heads = +4", heads_plus, "metadata: n_heads = '+4' is not a positive integer"},
    {"n_heads with a space", heads_space, "metadata: n_heads = '4 ' is not a positive integer"},
    {"n_heads empty", heads_empty, "metadata: n_heads = '' is not a positive integer"},
    {"n_heads = 4.0", heads_fraction, "metadata: n_heads = '4.0' is not a positive integer"},
    {"n_layers too large", layers_huge, "metadata: n_layers = '100000' is out of range (1..1024)"},
    {"n_layers overflows", layers_overflow, "n_layers = '99999999999999999999999' is out of range"},
    {"channels 4", channels_4, "metadata: channels = '4' is out of range (1..3)"},
    {"channels too large", channels_5, "metadata: channels = '5' is out of range (1..3)"},
    {"channels 2", channels_2, "channels = '2': must be 1 (gray) or 3 (RGB)"},
    {"images of 1024x1024", side_too_large, "metadata: height = '1024' is out of range (1..64)"},
    {"NaN in head.bias", nan_head_bias, "tensor 'head.bias' holds a non-finite value (NaN at index 2)"},
    {"+Inf in emb.weight", inf_emb, "tensor 'emb.weight' holds a non-finite value (+Inf at index 5)"},
    {"-Inf in a LayerNorm bias", ninf_norm_bias, "tensor 'layers.1.norm1.bias' holds a non-finite value (-Inf at index 0)"},
    {"NaN in a Linear weight", nan_linear, "tensor 'layers.0.attn.qkv.weight' holds a non-finite value (NaN at index 33)"},
    {"d too large", d_too_big, "d = n_heads * d_head = 4194304 is too large"},
    {"d odd", d_odd, "d = n_heads * d_head = 7 must be even"},
    {"bad attention", bad_attention, "metadata: attention = 'quadratic', expected linear or softmax"},
    {"bad norm", bad_norm, "metadata: norm = 'mid', expected post or pre"},
    {"bad activation", bad_activation, "metadata: activation = 'tanh', expected relu or gelu"},
    {"bad dataset", bad_dataset, "metadata: dataset = 'imagenet', expected mnist or cifar10"},
    {"bad bos", bad_bos, "metadata: bos = '0', expected 1"},
    {"newline in a value", control_in_value, "norm = 'po?st', expected post or pre"},
    {"missing tensor", missing_tensor, "missing tensor 'layers.1.ff1.weight'"},
    {"wrong shape", transposed, "tensor 'layers.0.ff1.weight' has shape [32,64], expected [64,32]"},
    {"wrong number of dims", wrong_ndim, "tensor 'head.bias' has shape [3,3], expected [9]"},
    {"shape disagrees with config", config_mismatch, "tensor 'layers.0.ff1.weight' has shape [64,32], expected [63,32]"},
    {"dtype I64", dtype_i64, "tensor 'layers.0.ff1.weight' has unsupported dtype 'I64'"},
    {"dtype I32 for a weight", dtype_i32, "tensor 'emb.weight' has dtype I32, expected F32, F16 or BF16"},
    {"dtype F16 on F32 bytes", dtype_f16_size,
     "tensor 'emb.weight': data_offsets [0, 16448] hold 16448 bytes, but shape [257,16] of F16 needs 8224"},
    {"dtype missing", dtype_missing, "tensor 'emb.weight' has no dtype"},
    {"dtype a number", dtype_number, "tensor 'emb.weight' has no dtype"},
    {"shape missing", shape_missing, "tensor 'head.bias' has no shape"},
    {"shape negative", shape_negative, "tensor 'head.bias': shape is not a list of non-negative integers"},
    {"shape fractional", shape_fraction, "tensor 'head.bias': shape is not a list of non-negative integers"},
    {"shape 9-D", shape_9d, "tensor 'head.bias' has 9 dimensions (at most 8)"},
    {"shape overflows", shape_overflow, "needs more than"},
    {"data_offsets past end", offsets_past_end, "tensor 'head.bias': data_offsets [86212, 86248] past end of data (86244 bytes"},
    {"data_offsets length mismatch", offsets_size_mismatch,
     "tensor 'emb.weight': data_offsets [0, 16444] hold 16444 bytes, but shape [257,16] of F32 needs 16448"},
    {"data_offsets backwards", offsets_backwards, "tensor 'emb.weight': data_offsets [16448, 0] run backwards"},
    {"data_offsets one number", offsets_one, "tensor 'emb.weight': data_offsets is not [begin, end]"},
    {"data_offsets three numbers", offsets_three, "tensor 'emb.weight': data_offsets is not [begin, end]"},
    {"data_offsets negative", offsets_negative, "tensor 'emb.weight': data_offsets is not [begin, end]"},
    {"data_offsets 1e300", offsets_huge, "tensor 'emb.weight': data_offsets is not [begin, end]"},
    {"data_offsets missing", offsets_missing, "tensor 'emb.weight': data_offsets is not [begin, end]"},
    {"truncated in the middle", truncated, "past end of data (43122 bytes; file truncated?)"},
    {"truncated by one byte", truncated_by_one, "tensor 'head.bias': data_offsets [86208, 86244] past end of data"},
    {"unexpected tensor", extra_tensor, "unexpected tensor 'foo'"},
    {"overlapping tensors", overlapping_tensor, "tensors 'emb.weight' and 'foo' overlap"},
    {"tensors partly overlapping", partly_overlapping_tensor,
     "tensors 'head.weight' and 'head.bias' overlap (bytes 86204..86208 of the data)"},
    {"bytes no tensor owns", unlisted_bytes, "8192 unused bytes before tensor 'layers.1.ff1.bias'"},
    {"bytes after the last tensor", trailing_bytes, "4 bytes after the last tensor 'head.bias'"},
    {"duplicate tensor", duplicate_tensor, "tensor 'emb.weight' appears twice"},
    {"a key twice in a tensor entry", shape_twice, "tensor 'head.bias': key 'shape' appears twice"},
    {"tensor entry not an object", tensor_not_object, "tensor 'head.bias' is not a JSON object"},
    {"tensor name with a newline", name_with_newline, "a tensor name contains control characters"},
};

static void run_case(void **state) {
    const Case *c = *state;
    Parts p = parts_of(FIXTURE("tiny-linear-mnist.bin"));
    c->edit(&p);
    const char *path = tmp_path("corrupt.bin");
    write_parts(path, &p);
    parts_free(&p);
    expect_load_error(path, c->phrase);
    unlink(path);
}

/* Write p (and free it), then load the file into m, which must work. */
static void load_parts(Parts *p, Model *m) {
    const char *path = tmp_path("edited.bin");
    write_parts(path, p);
    parts_free(p);
    Err e;
    if (model_load(m, path, &e)) fail_msg("%s", e.msg);
    unlink(path);
}

/* The untouched fixture, written back by the same code, loads: the cases above fail for their edit alone. */
static void test_unedited_copy_loads(void **state) {
    (void)state;
    Parts p = parts_of(FIXTURE("tiny-linear-mnist.bin"));
    Model m;
    load_parts(&p, &m);
    model_free(&m);
}

/* UTF-8 beyond ASCII, and a backslash followed by the text u0000 (not a NUL), are fine. */
static void test_utf8_metadata_loads(void **state) {
    (void)state;
    Parts p = parts_of(FIXTURE("tiny-linear-mnist.bin"));
    cJSON_AddItemToObject(meta(&p), "note", cJSON_CreateString("caf\xc3\xa9 \xe6\x9d\xb1 \xf0\x9f\x8e\x89 x\\u0000"));
    Model m;
    load_parts(&p, &m);
    assert_string_equal(model_meta(&m, "note"), "caf\xc3\xa9 \xe6\x9d\xb1 \xf0\x9f\x8e\x89 x\\u0000");
    model_free(&m);
}

/* The in-memory loader (fuzz_model's entry point) gives the same model, and names the input
 * as it is told in its errors. */
static void test_load_buffer(void **state) {
    (void)state;
    Model a, b;
    Err e;
    size_t len;
    if (model_load(&a, FIXTURE("tiny-linear-mnist.bin"), &e)) fail_msg("%s", e.msg);
    unsigned char *buf = read_file(FIXTURE("tiny-linear-mnist.bin"), &len, &e);
    assert_non_null(buf);
    if (model_load_buffer(&b, buf, len, "in memory", &e)) fail_msg("%s", e.msg);
    assert_int_equal(a.n_params, b.n_params);
    assert_int_equal(a.arena_floats, b.arena_floats);
    assert_memory_equal(a.arena, b.arena, a.arena_floats * sizeof(float));
    assert_string_equal(model_meta(&a, "dataset"), model_meta(&b, "dataset"));
    model_free(&a);
    model_free(&b);
    buf = read_file(FIXTURE("tiny-linear-mnist.bin"), &len, &e);
    assert_non_null(buf);
    assert_int_not_equal(model_load_buffer(&b, buf, len / 2, "half", &e), 0);   /* buf is freed */
    assert_int_equal(strncmp(e.msg, "half: tensor '", 14), 0);
    assert_non_null(strstr(e.msg, "past end of data"));
}

static void test_missing_file(void **state) {
    (void)state;
    expect_load_error(tmp_path("no-such-file.bin"), "No such file");
}

/* ------------------------------------------------------------------ files from scripts/modelfile.py */

/* Element i of tensor name read straight from the file's bytes, by this test's own parsing. */
static float raw_f32(const char *path, const char *name, size_t i) {
    Parts p = parts_of(path);
    cJSON *t = tensor(&p, name);
    assert_string_equal(cJSON_GetObjectItemCaseSensitive(t, "dtype")->valuestring, "F32");
    size_t off = (size_t)cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(t, "data_offsets"), 0)->valuedouble;
    float v;
    memcpy(&v, p.data + off + 4 * i, 4);   /* the host is little-endian, like the file */
    parts_free(&p);
    return v;
}

static size_t expected_params(const Config *c) {
    size_t d = (size_t)c->d, f = (size_t)c->d_ff;
    size_t layer = 3 * d * d + 3 * d + d * d + d + 4 * d + f * d + f + d * f + d;
    return 257 * d / 2 + c->n_layers * layer + 2 * d + 3 * (size_t)c->n_mix * (d + 1);
}

static void test_fixture_values(void **state) {
    (void)state;
    const char *path = FIXTURE("tiny-linear-mnist.bin");
    Model m;
    Err e;
    if (model_load(&m, path, &e)) fail_msg("%s", e.msg);
    const Config *c = &m.cfg;
    assert_int_equal(c->attention, ATTN_LINEAR);
    assert_int_equal(c->n_layers, 2);
    assert_int_equal(c->n_heads, 4);
    assert_int_equal(c->d_head, 8);
    assert_int_equal(c->d, 32);
    assert_int_equal(c->d_ff, 64);
    assert_int_equal(c->n_mix, 3);
    assert_int_equal(c->height, 28);
    assert_int_equal(c->width, 28);
    assert_int_equal(c->channels, 1);
    assert_int_equal(c->seq_len, 784);
    assert_int_equal(c->pre_norm, 0);
    assert_int_equal(c->gelu, 0);
    assert_string_equal(c->dataset, "mnist");
    assert_int_equal(m.n_params, 21561);
    assert_int_equal(m.n_params, expected_params(c));
    assert_string_equal(model_meta(&m, "format"), "lingen");
    assert_non_null(model_meta(&m, "fixture"));   /* provenance is kept */
    assert_null(model_meta(&m, "no-such-key"));

    /* first, last and a middle element of several tensors, bit for bit; Linear weights
     * (cols > 0) are held transposed in memory */
    struct { const char *name; const float *w; Packed lin; size_t rows, cols; } ts[] = {
        {"emb.weight", m.emb, {0}, 257 * 16, 0},
        {"layers.0.attn.qkv.weight", NULL, m.layers[0].qkv_w, 96, 32},
        {"layers.0.attn.qkv.bias", m.layers[0].qkv_b, {0}, 96, 0},
        {"layers.1.attn.out.weight", NULL, m.layers[1].out_w, 32, 32},
        {"layers.1.norm2.weight", m.layers[1].norm2_w, {0}, 32, 0},
        {"layers.1.ff2.weight", NULL, m.layers[1].ff2_w, 32, 64},
        {"layers.1.ff2.bias", m.layers[1].ff2_b, {0}, 32, 0},
        {"norm.bias", m.norm_b, {0}, 32, 0},
        {"head.weight", NULL, m.head_w, 9, 32},
        {"head.bias", m.head_b, {0}, 9, 0},
    };
    for (size_t k = 0; k < sizeof ts / sizeof ts[0]; k++) {
        size_t n = ts[k].rows * (ts[k].cols ? ts[k].cols : 1);
        size_t idx[3] = {0, n / 2 + 1, n - 1};
        for (int j = 0; j < 3; j++) {
            float want = raw_f32(path, ts[k].name, idx[j]);
            float got = held(ts[k].w, ts[k].lin, idx[j], ts[k].rows, ts[k].cols);
            assert_memory_equal(&got, &want, sizeof want);
        }
    }
    /* the arena is one block in the order of the file format's list */
    assert_ptr_equal(m.emb, m.arena);
    assert_ptr_equal(m.head_b + 9, m.arena + m.arena_floats);
    model_free(&m);
    model_free(&m);   /* freeing twice is harmless */
}

static void test_all_fixtures_config(void **state) {
    (void)state;
    struct { const char *file; AttnKind attn; int pre, gelu, h, w, ch; const char *ds; } fx[] = {
        {FIXTURE("tiny-linear-mnist.bin"), ATTN_LINEAR, 0, 0, 28, 28, 1, "mnist"},
        {FIXTURE("tiny-softmax-mnist.bin"), ATTN_SOFTMAX, 0, 0, 28, 28, 1, "mnist"},
        {FIXTURE("tiny-linear-cifar.bin"), ATTN_LINEAR, 1, 1, 32, 32, 3, "cifar10"},
        {FIXTURE("tiny-softmax-cifar.bin"), ATTN_SOFTMAX, 1, 1, 32, 32, 3, "cifar10"},
    };
    for (size_t i = 0; i < sizeof fx / sizeof fx[0]; i++) {
        Model m;
        Err e;
        if (model_load(&m, fx[i].file, &e)) fail_msg("%s", e.msg);
        assert_int_equal(m.cfg.attention, fx[i].attn);
        assert_int_equal(m.cfg.pre_norm, fx[i].pre);
        assert_int_equal(m.cfg.gelu, fx[i].gelu);
        assert_int_equal(m.cfg.height, fx[i].h);
        assert_int_equal(m.cfg.width, fx[i].w);
        assert_int_equal(m.cfg.channels, fx[i].ch);
        assert_int_equal(m.cfg.seq_len, fx[i].h * fx[i].w * fx[i].ch);
        assert_string_equal(m.cfg.dataset, fx[i].ds);
        assert_int_equal(m.n_params, expected_params(&m.cfg));
        model_free(&m);
    }
}

/* The shipped MNIST model: the paper's configuration, stored as F16. Loaded without an 8-bit
 * copy (LINGEN_INT8=0), whose bytes read as floats are not numbers: every other value the arena
 * holds (floats, halves and bfloat16 in pairs) reads as a finite float. */
static void test_shipped_model(void **state) {
    (void)state;
    Model m;
    Err e;
    setenv("LINGEN_INT8", "0", 1);   /* read as the model loads */
    int rc = model_load(&m, "models/mnist.bin", &e);
    unsetenv("LINGEN_INT8");
    if (rc) fail_msg("%s", e.msg);
    assert_int_equal(m.cfg.attention, ATTN_LINEAR);
    assert_int_equal(m.cfg.n_layers, 8);
    assert_int_equal(m.cfg.n_heads, 8);
    assert_int_equal(m.cfg.d_head, 32);
    assert_int_equal(m.cfg.d_ff, 1024);
    assert_int_equal(m.cfg.n_mix, 10);
    assert_int_equal(m.cfg.seq_len, 784);
    assert_int_equal(m.n_params, 6359198);
    assert_int_equal(m.n_params, expected_params(&m.cfg));
    for (size_t i = 0; i < m.arena_floats; i++) assert_true(isfinite(m.arena[i]));
    assert_int_equal(model_state_bytes(&m.cfg, 784), 270336);
    model_free(&m);
}

/* ------------------------------------------------------------------ a file built from scratch */

/* A tiny model file written by this test alone, in its own tensor order (reversed) with an
 * unpadded header (so the data is unaligned): every element's raw bits follow a formula, so the
 * expected float is known without any decoder. Value j of tensor k: */
static uint32_t raw_bits(const char *dt, int k, size_t j) {
    uint32_t sign = k % 2 ? 0x8000u : 0, m = (uint32_t)(k * 37 + j);
    if (!strcmp(dt, "F16")) return sign | (0x3c00u + (m & 0x3ff));     /* +-(1 + (m mod 1024)/1024) */
    if (!strcmp(dt, "BF16")) return sign | (0x3f80u + (m & 0x7f));     /* +-(1 + (m mod 128)/128) */
    float f = (float)k + (float)j * 0.001f;
    uint32_t u;
    memcpy(&u, &f, 4);
    return u;
}
static float tiny_value(const char *dt, int k, size_t j) {
    float s = k % 2 ? -1.0f : 1.0f;
    if (!strcmp(dt, "F16")) return s * (1.0f + (float)((k * 37 + j) & 0x3ff) / 1024.0f);
    if (!strcmp(dt, "BF16")) return s * (1.0f + (float)((k * 37 + j) & 0x7f) / 128.0f);
    return (float)k + (float)j * 0.001f;
}

/* Tiny config: 2 layers, 2 heads x 3 (d = 6), d_ff 5, n_mix 2, 3x2x1 images. */
enum { T_L = 2, T_D = 6, T_F = 5, T_M = 2, T_N = 5 + 12 * T_L };
static int tiny_tensors(char names[][40], int64_t shapes[][2]) {
    int n = 0;
#define ADD(r, c, ...) (snprintf(names[n], 40, __VA_ARGS__), shapes[n][0] = (r), shapes[n][1] = (c), n++)
    ADD(257, T_D / 2, "emb.weight");
    for (int l = 0; l < T_L; l++) {
        ADD(3 * T_D, T_D, "layers.%d.attn.qkv.weight", l);
        ADD(3 * T_D, 0, "layers.%d.attn.qkv.bias", l);
        ADD(T_D, T_D, "layers.%d.attn.out.weight", l);
        ADD(T_D, 0, "layers.%d.attn.out.bias", l);
        ADD(T_D, 0, "layers.%d.norm1.weight", l);
        ADD(T_D, 0, "layers.%d.norm1.bias", l);
        ADD(T_D, 0, "layers.%d.norm2.weight", l);
        ADD(T_D, 0, "layers.%d.norm2.bias", l);
        ADD(T_F, T_D, "layers.%d.ff1.weight", l);
        ADD(T_F, 0, "layers.%d.ff1.bias", l);
        ADD(T_D, T_F, "layers.%d.ff2.weight", l);
        ADD(T_D, 0, "layers.%d.ff2.bias", l);
    }
    ADD(T_D, 0, "norm.weight");
    ADD(T_D, 0, "norm.bias");
    ADD(3 * T_M, T_D, "head.weight");
    ADD(3 * T_M, 0, "head.bias");
#undef ADD
    return n;
}

static Parts build_tiny(const char *dt) {
    char names[T_N][40];
    int64_t shapes[T_N][2];
    int n = tiny_tensors(names, shapes);
    assert_int_equal(n, T_N);
    int es = strcmp(dt, "F32") ? 2 : 4;
    Parts p = {0};
    p.hdr = cJSON_CreateObject();
    cJSON *md = cJSON_AddObjectToObject(p.hdr, "__metadata__");
    const char *kv[][2] = {{"format", "lingen"}, {"format_version", "1"}, {"bos", "1"}, {"attention", "softmax"},
                           {"n_layers", "2"}, {"n_heads", "2"}, {"d_head", "3"}, {"d_ff", "5"}, {"n_mix", "2"},
                           {"height", "3"}, {"width", "2"}, {"channels", "1"}, {"norm", "pre"},
                           {"activation", "gelu"}, {"dataset", "mnist"}, {"note", "built by test_model.c"}};
    for (size_t i = 0; i < sizeof kv / sizeof kv[0]; i++) cJSON_AddStringToObject(md, kv[i][0], kv[i][1]);
    size_t total = 0;
    for (int k = 0; k < n; k++) total += (size_t)(shapes[k][0] * (shapes[k][1] ? shapes[k][1] : 1)) * es;
    p.data = malloc(total);
    size_t off = 0;
    for (int k = n - 1; k >= 0; k--) {   /* reverse order: the loader must go by name */
        size_t numel = (size_t)(shapes[k][0] * (shapes[k][1] ? shapes[k][1] : 1));
        cJSON *t = cJSON_AddObjectToObject(p.hdr, names[k]);
        cJSON_AddStringToObject(t, "dtype", dt);
        set_ints(t, "shape", shapes[k][1] ? 2 : 1, (double[]){(double)shapes[k][0], (double)shapes[k][1]});
        set_ints(t, "data_offsets", 2, (double[]){(double)off, (double)(off + numel * es)});
        for (size_t j = 0; j < numel; j++, off += es) {
            uint32_t b = raw_bits(dt, k, j);
            for (int i = 0; i < es; i++) p.data[off + i] = (unsigned char)(b >> (8 * i));
        }
    }
    p.dlen = total;
    return p;
}

static void check_tiny(const char *dt) {
    Parts p = build_tiny(dt);
    const char *path = tmp_path("tiny.bin");
    write_parts(path, &p);
    parts_free(&p);
    Model m;
    Err e;
    if (model_load(&m, path, &e)) fail_msg("%s", e.msg);
    unlink(path);
    assert_int_equal(m.cfg.attention, ATTN_SOFTMAX);
    assert_int_equal(m.cfg.d, T_D);
    assert_int_equal(m.cfg.seq_len, 6);
    assert_int_equal(m.cfg.pre_norm, 1);
    assert_int_equal(m.cfg.gelu, 1);
    assert_string_equal(model_meta(&m, "note"), "built by test_model.c");
    assert_int_equal(m.n_params, expected_params(&m.cfg));
    /* every element of every tensor, by the index k of its name in tiny_tensors; the Linear
     * weights are held as halves exactly when the file has F16 */
    const float *w[T_N] = {0};
    Packed lin[T_N] = {{0}};
    int k = 0, half = !strcmp(dt, "F16");
    w[k++] = m.emb;
    for (int l = 0; l < T_L; l++) {
        LayerWeights *L = &m.layers[l];
        lin[k++] = L->qkv_w, w[k++] = L->qkv_b, lin[k++] = L->out_w, w[k++] = L->out_b;
        w[k++] = L->norm1_w, w[k++] = L->norm1_b, w[k++] = L->norm2_w, w[k++] = L->norm2_b;
        lin[k++] = L->ff1_w, w[k++] = L->ff1_b, lin[k++] = L->ff2_w, w[k++] = L->ff2_b;
    }
    w[k++] = m.norm_w;
    w[k++] = m.norm_b;
    lin[k++] = m.head_w;
    w[k++] = m.head_b;
    for (k = 0; k < T_N; k++)
        if (lin[k].p) assert_int_equal(lin[k].half, half);
    char names[T_N][40];
    int64_t shapes[T_N][2];
    tiny_tensors(names, shapes);
    for (k = 0; k < T_N; k++) {
        size_t numel = (size_t)(shapes[k][0] * (shapes[k][1] ? shapes[k][1] : 1));
        size_t cols = k == 0 ? 0 : (size_t)shapes[k][1];   /* every 2-D tensor but emb is a Linear weight */
        for (size_t j = 0; j < numel; j++) {
            float got = held(w[k], lin[k], j, (size_t)shapes[k][0], cols);
            if (got != tiny_value(dt, k, j))
                fail_msg("%s %s[%zu] = %.9g, expected %.9g", dt, names[k], j, got, tiny_value(dt, k, j));
        }
    }
    model_free(&m);
}

static void test_built_f32(void **state) { (void)state; check_tiny("F32"); }
static void test_built_f16(void **state) { (void)state; check_tiny("F16"); }
static void test_built_bf16(void **state) { (void)state; check_tiny("BF16"); }

/* ------------------------------------------------------------------ widening, the container */

static void test_f16_values(void **state) {
    (void)state;
    struct { uint16_t h; float f; } v[] = {
        {0x0000, 0.0f},          {0x3c00, 1.0f},          {0xc000, -2.0f},        {0x3555, 0.333251953125f},
        {0x7bff, 65504.0f},      {0xfbff, -65504.0f},     {0x0400, 0x1p-14f},     {0x0001, 0x1p-24f},
        {0x8001, -0x1p-24f},     {0x03ff, 1023 * 0x1p-24f}, {0x0200, 0x1p-15f},   {0x3bff, 1.0f - 0x1p-11f},
    };
    for (size_t i = 0; i < sizeof v / sizeof v[0]; i++)
        if (st_f16_to_f32(v[i].h) != v[i].f) fail_msg("half 0x%04x -> %.9g, expected %.9g", v[i].h,
                                                      st_f16_to_f32(v[i].h), v[i].f);
    assert_true(signbit(st_f16_to_f32(0x8000)) && st_f16_to_f32(0x8000) == 0.0f);   /* -0 */
    assert_false(signbit(st_f16_to_f32(0x0000)));
    assert_true(isinf(st_f16_to_f32(0x7c00)) && st_f16_to_f32(0x7c00) > 0);
    assert_true(isinf(st_f16_to_f32(0xfc00)) && st_f16_to_f32(0xfc00) < 0);
    assert_true(isnan(st_f16_to_f32(0x7e00)));
    assert_true(isnan(st_f16_to_f32(0x7c01)));   /* signalling nan stays a nan, not inf */
    /* every finite half: exactly (-1)^s * m * 2^(e-25) for its integer significand m */
    for (uint32_t h = 0; h < 0x10000; h++) {
        uint32_t e = (h >> 10) & 0x1f, man = h & 0x3ff;
        if (e == 0x1f) continue;
        double m = e ? 1024 + man : man, want = ldexp(m, (e ? (int)e : 1) - 25) * (h & 0x8000 ? -1 : 1);
        if ((double)st_f16_to_f32((uint16_t)h) != want) fail_msg("half 0x%04x", h);
    }
}

static void test_bf16_values(void **state) {
    (void)state;
    struct { uint16_t b; float f; } v[] = {
        {0x3f80, 1.0f}, {0xc049, -3.140625f}, {0x0001, 0x1p-133f}, {0x0080, 0x1p-126f}, {0x7f7f, 0x1.fep127f},
    };
    for (size_t i = 0; i < sizeof v / sizeof v[0]; i++) assert_true(st_bf16_to_f32(v[i].b) == v[i].f);
    assert_true(signbit(st_bf16_to_f32(0x8000)) && st_bf16_to_f32(0x8000) == 0.0f);
    assert_true(isinf(st_bf16_to_f32(0x7f80)) && isinf(st_bf16_to_f32(0xff80)) && st_bf16_to_f32(0xff80) < 0);
    assert_true(isnan(st_bf16_to_f32(0x7fc0)));
}

/* st_to_f32 for each dtype, from an odd (unaligned) address, little-endian bytes. */
static void test_to_f32_dtypes(void **state) {
    (void)state;
    unsigned char buf[1 + 12];
    float out[3];
    StTensor t = {.name = "t", .ndim = 1, .shape = {3}, .data = buf + 1};
    const unsigned char f16[] = {0x00, 0x3c, 0x00, 0x80, 0x01, 0x00};   /* 1, -0, 2^-24 */
    memcpy(buf + 1, f16, sizeof f16);
    t.dtype = ST_F16;
    st_to_f32(&t, out);
    assert_true(out[0] == 1.0f && out[1] == 0.0f && signbit(out[1]) && out[2] == 0x1p-24f);
    const unsigned char bf16[] = {0x80, 0x3f, 0x49, 0xc0, 0x80, 0x7f};   /* 1, -3.140625, inf */
    memcpy(buf + 1, bf16, sizeof bf16);
    t.dtype = ST_BF16;
    st_to_f32(&t, out);
    assert_true(out[0] == 1.0f && out[1] == -3.140625f && isinf(out[2]));
    const unsigned char f32[] = {0, 0, 0xc0, 0x3f, 0, 0, 0x80, 0xff, 1, 0, 0, 0};   /* 1.5, -inf, 2^-149 */
    memcpy(buf + 1, f32, sizeof f32);
    t.dtype = ST_F32;
    st_to_f32(&t, out);
    assert_true(out[0] == 1.5f && isinf(out[1]) && out[1] < 0 && out[2] == 0x1p-149f);
    const unsigned char i32[] = {0xfb, 0xff, 0xff, 0xff, 0x01, 0x00, 0x00, 0x01, 0, 0, 0, 0x80};
    memcpy(buf + 1, i32, sizeof i32);   /* -5, 16777217 (rounds to 2^24), INT32_MIN */
    t.dtype = ST_I32;
    st_to_f32(&t, out);
    assert_true(out[0] == -5.0f && out[1] == 16777216.0f && out[2] == -2147483648.0f);
}

/* The container alone: scalars, empty tensors, I32, no metadata, lookups, padding. */
static void test_container(void **state) {
    (void)state;
    const char *h = "{\"s\":{\"dtype\":\"F32\",\"shape\":[],\"data_offsets\":[0,4]},"
                    "\"empty\":{\"dtype\":\"F16\",\"shape\":[0,3],\"data_offsets\":[4,4]},"
                    "\"ids\":{\"dtype\":\"I32\",\"shape\":[2],\"data_offsets\":[4,12],\"extra\":true}}   ";
    size_t hl = strlen(h), len = 8 + hl + 12;
    unsigned char *buf = malloc(len);
    for (int i = 0; i < 8; i++) buf[i] = (unsigned char)((uint64_t)hl >> (8 * i));
    memcpy(buf + 8, h, hl);
    const unsigned char data[12] = {0, 0, 0x20, 0x40, 7, 0, 0, 0, 0xff, 0xff, 0xff, 0xff};   /* 2.5; 7, -1 */
    memcpy(buf + 8 + hl, data, 12);
    SafeTensors st;
    Err e;
    if (st_parse(&st, buf, len, "mem", &e)) fail_msg("%s", e.msg);
    assert_int_equal(st.n, 3);
    assert_int_equal(st.n_meta, 0);
    assert_null(st_meta(&st, "format"));
    assert_string_equal(st.t[0].name, "s");   /* file order */
    const StTensor *s = st_find(&st, "s"), *em = st_find(&st, "empty"), *ids = st_find(&st, "ids");
    assert_non_null(s);
    assert_null(st_find(&st, "S"));
    assert_int_equal(s->ndim, 0);
    assert_int_equal(st_numel(s), 1);
    assert_int_equal(st_numel(em), 0);
    assert_int_equal(em->nbytes, 0);
    assert_int_equal(ids->nbytes, 8);
    float f[2];
    st_to_f32(s, f);
    assert_true(f[0] == 2.5f);
    st_to_f32(ids, f);
    assert_true(f[0] == 7.0f && f[1] == -1.0f);
    char sh[32];
    assert_string_equal(st_format_shape(em->shape, em->ndim, sh, sizeof sh), "[0,3]");
    assert_string_equal(st_format_shape(s->shape, s->ndim, sh, sizeof sh), "[]");
    assert_string_equal(st_dtype_name(ids->dtype), "I32");
    assert_int_equal(st_dtype_size(ST_BF16), 2);
    st_close(&st);
    st_close(&st);   /* closing twice is harmless */

    /* st_parse takes the buffer on failure too (LeakSanitizer would see it otherwise) */
    unsigned char *junk = malloc(4);
    memset(junk, 0, 4);
    assert_int_not_equal(st_parse(&st, junk, 4, "junk", &e), 0);
    assert_string_equal(e.msg, "junk: only 4 bytes, too short for a safetensors file");
    assert_null(st.buf);
}

/* A file read header first: the header alone holds every tensor's place and none of its data;
 * the data read after it is the file's; a file that changed size in between is refused. */
static void test_header_first(void **state) {
    (void)state;
    size_t len;
    unsigned char *file = slurp(FIXTURE("tiny-linear-mnist.bin"), &len);
    const char *path = tmp_path("two-steps.bin");
    spit(path, file, len);
    SafeTensors st, all;
    Err e;
    if (st_open_header(&st, path, &e)) fail_msg("%s", e.msg);
    assert_int_equal(st.len, len);
    assert_true(st.n > 20);
    for (int i = 0; i < st.n; i++) assert_null(st.t[i].data);
    assert_string_equal(st_meta(&st, "format"), "lingen");
    if (st_read_data(&st, path, &e)) fail_msg("%s", e.msg);
    if (st_parse(&all, file, len, "mem", &e)) fail_msg("%s", e.msg);   /* takes file */
    assert_int_equal(st.n, all.n);
    for (int i = 0; i < st.n; i++) {
        assert_string_equal(st.t[i].name, all.t[i].name);
        assert_int_equal(st.t[i].nbytes, all.t[i].nbytes);
        assert_memory_equal(st.t[i].data, all.t[i].data, st.t[i].nbytes);
    }
    st_close(&st);
    st_close(&all);
    /* shorter, then longer, between the two reads */
    file = slurp(FIXTURE("tiny-linear-mnist.bin"), &len);
    for (int grow = 0; grow < 2; grow++) {
        spit(path, file, len);
        if (st_open_header(&st, path, &e)) fail_msg("%s", e.msg);
        if (grow) {
            FILE *f = fopen(path, "ab");
            fputs("more", f);
            fclose(f);
        } else {
            assert_int_equal(truncate(path, (off_t)len - 4), 0);
        }
        assert_int_not_equal(st_read_data(&st, path, &e), 0);
        assert_non_null(strstr(e.msg, grow ? "longer than when it was opened" : "shorter than when it was opened"));
        st_close(&st);
    }
    free(file);
    unlink(path);
}

static void test_state_bytes(void **state) {
    (void)state;
    Config c = {.attention = ATTN_LINEAR, .n_layers = 8, .n_heads = 8, .d_head = 32, .d = 256};
    assert_int_equal(model_state_bytes(&c, 784), 8 * 8 * (32 * 32 + 32) * 4);   /* 270 KB, any n */
    assert_int_equal(model_state_bytes(&c, 1), 270336);
    c.attention = ATTN_SOFTMAX;
    assert_int_equal(model_state_bytes(&c, 784), 8 * 784 * 2 * 256 * 4);        /* 12.8 MB */
    assert_int_equal(model_state_bytes(&c, 0), 0);
    c.n_layers = 16;
    assert_int_equal(model_state_bytes(&c, 3072), (size_t)16 * 3072 * 512 * 4); /* CIFAR: 101 MB */
}

int main(void) {
    static const struct CMUnitTest fixed[] = {
        cmocka_unit_test(test_fixture_values),
        cmocka_unit_test(test_all_fixtures_config),
        cmocka_unit_test(test_shipped_model),
        cmocka_unit_test(test_built_f32),
        cmocka_unit_test(test_built_f16),
        cmocka_unit_test(test_built_bf16),
        cmocka_unit_test(test_f16_values),
        cmocka_unit_test(test_bf16_values),
        cmocka_unit_test(test_to_f32_dtypes),
        cmocka_unit_test(test_container),
        cmocka_unit_test(test_header_first),
        cmocka_unit_test(test_state_bytes),
        cmocka_unit_test(test_unedited_copy_loads),
        cmocka_unit_test(test_utf8_metadata_loads),
        cmocka_unit_test(test_missing_file),
        cmocka_unit_test(test_load_buffer),
    };
    /* one named test per corruption case */
    enum { N_FIXED = sizeof fixed / sizeof fixed[0], N_CASES = sizeof CASES / sizeof CASES[0] };
    struct CMUnitTest tests[N_FIXED + N_CASES];
    memcpy(tests, fixed, sizeof fixed);
    for (int i = 0; i < N_CASES; i++)
        tests[N_FIXED + i] = (struct CMUnitTest){CASES[i].name, run_case, NULL, NULL, (void *)&CASES[i]};
    return _cmocka_run_group_tests("model", tests, N_FIXED + N_CASES, group_setup, group_teardown);
}
