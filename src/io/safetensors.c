/* The safetensors container (the format of Hugging Face's safetensors library):
 *
 *   u64 little-endian N | N bytes of JSON header | data section
 *
 * The header maps each tensor name to {"dtype", "shape", "data_offsets": [begin, end]}, the
 * offsets counted from the start of the data section, plus an optional "__metadata__" object
 * of string values. Every number read from the file is checked before it is used, so a
 * corrupt or truncated file gives a one-line message naming the file, never a crash. The rules
 * are the reference library's: a header of at most 100 MB, valid UTF-8 with no NUL, and tensor
 * byte ranges that tile the data section exactly (no overlap, no gap, nothing after the last). */
#include "safetensors.h"
#include "half.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static const struct { const char *name; int size; } DTYPES[] = {
    [ST_F32] = {"F32", 4}, [ST_F16] = {"F16", 2}, [ST_BF16] = {"BF16", 2}, [ST_I32] = {"I32", 4},
};
#define N_DTYPES ((int)(sizeof DTYPES / sizeof DTYPES[0]))

const char *st_dtype_name(StDtype dt) { return DTYPES[dt].name; }
int st_dtype_size(StDtype dt) { return DTYPES[dt].size; }

char *st_format_shape(const int64_t *shape, int ndim, char *buf, size_t n) {
    size_t k = (size_t)snprintf(buf, n, "[");
    for (int i = 0; i < ndim && k < n; i++)
        k += (size_t)snprintf(buf + k, n - k, "%s%" PRId64, i ? "," : "", shape[i]);
    if (k < n) snprintf(buf + k, n - k, "]");
    return buf;
}

static char *xstrdup(const char *s) {
    size_t n = strlen(s) + 1;
    return memcpy(xmalloc(n), s, n);
}

/* Names go into one-line error messages: refuse control characters (newlines) in them. */
static int printable(const char *s) {
    for (; *s; s++)
        if ((unsigned char)*s < 0x20 || *s == 0x7f) return 0;
    return 1;
}

/* A JSON number that is a whole number in [0, 2^53], where a double is still exact. */
static int json_uint(const cJSON *j, uint64_t *out) {
    if (!cJSON_IsNumber(j)) return 0;
    double v = j->valuedouble;
    if (!(v >= 0 && v <= 9007199254740992.0) || v != (double)(uint64_t)v) return 0;
    *out = (uint64_t)v;
    return 1;
}

static int cmp_str(const void *a, const void *b) {
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* The first name that occurs twice, or NULL; sorting keeps a huge header from taking n^2. (The
 * metadata's keys; the tensors' names are checked as they are indexed.) */
static const char *find_duplicate(char **names, int n) {
    if (n < 2) return NULL;
    char **s = xmalloc((size_t)n * sizeof *s);
    memcpy(s, names, (size_t)n * sizeof *s);
    qsort(s, (size_t)n, sizeof *s, cmp_str);
    const char *dup = NULL;
    for (int i = 1; i < n && !dup; i++)
        if (strcmp(s[i - 1], s[i]) == 0) dup = s[i];
    free(s);
    return dup;
}

static int parse_tensor(StTensor *t, const cJSON *j, size_t data_len, const char *path, Err *e) {
    const char *name = t->name;
    if (!cJSON_IsObject(j)) return err_set(e, "%s: tensor '%s' is not a JSON object", path, name);
    /* each key once: readers differ on which of two they take (cJSON the first, Python the last) */
    static const char *const keys[] = {"dtype", "shape", "data_offsets"};
    for (size_t k = 0; k < sizeof keys / sizeof keys[0]; k++) {
        int seen = 0;
        for (const cJSON *c = j->child; c; c = c->next) seen += strcmp(c->string, keys[k]) == 0;
        if (seen > 1) return err_set(e, "%s: tensor '%s': key '%s' appears twice", path, name, keys[k]);
    }

    const cJSON *dt = cJSON_GetObjectItemCaseSensitive(j, "dtype");
    if (!cJSON_IsString(dt)) return err_set(e, "%s: tensor '%s' has no dtype string", path, name);
    int k = 0;
    while (k < N_DTYPES && strcmp(dt->valuestring, DTYPES[k].name) != 0) k++;
    if (k == N_DTYPES)
        return err_set(e, "%s: tensor '%s' has unsupported dtype '%.16s' (lingen reads F32, F16, BF16, I32)",
                       path, name, printable(dt->valuestring) ? dt->valuestring : "?");
    t->dtype = (StDtype)k;

    const cJSON *sh = cJSON_GetObjectItemCaseSensitive(j, "shape");
    if (!cJSON_IsArray(sh)) return err_set(e, "%s: tensor '%s' has no shape array", path, name);
    int ndim = cJSON_GetArraySize(sh);
    if (ndim > 8) return err_set(e, "%s: tensor '%s' has %d dimensions (at most 8)", path, name, ndim);
    t->ndim = ndim;
    /* bytes the shape needs; 'huge' when that overflows (then it cannot match any real range) */
    uint64_t need = (uint64_t)DTYPES[k].size;
    int huge = 0, i = 0;
    for (const cJSON *d = sh->child; d; d = d->next, i++) {
        uint64_t v;
        if (!json_uint(d, &v))
            return err_set(e, "%s: tensor '%s': shape is not a list of non-negative integers", path, name);
        t->shape[i] = (int64_t)v;
        if (v && need > UINT64_MAX / v) huge = 1;
        else need *= v;
    }
    if (need == 0) huge = 0;   /* a zero dimension makes the product zero, whatever came before */

    const cJSON *off = cJSON_GetObjectItemCaseSensitive(j, "data_offsets");
    uint64_t begin, end;
    if (!cJSON_IsArray(off) || cJSON_GetArraySize(off) != 2 || !json_uint(off->child, &begin) ||
        !json_uint(off->child->next, &end))
        return err_set(e, "%s: tensor '%s': data_offsets is not [begin, end]", path, name);
    if (begin > end)
        return err_set(e, "%s: tensor '%s': data_offsets [%" PRIu64 ", %" PRIu64 "] run backwards",
                       path, name, begin, end);
    if (end > data_len)
        return err_set(e, "%s: tensor '%s': data_offsets [%" PRIu64 ", %" PRIu64 "] past end of data "
                       "(%zu bytes; file truncated?)", path, name, begin, end, data_len);
    if (huge || end - begin != need) {
        char s[128];
        return err_set(e, "%s: tensor '%s': data_offsets [%" PRIu64 ", %" PRIu64 "] hold %" PRIu64
                       " bytes, but shape %s of %s needs %s%" PRIu64, path, name, begin, end, end - begin,
                       st_format_shape(t->shape, ndim, s, sizeof s), DTYPES[k].name,
                       huge ? "more than " : "", huge ? UINT64_MAX : need);
    }
    t->nbytes = (size_t)need;
    t->offset = (size_t)begin;
    return 0;
}

static int parse_metadata(SafeTensors *st, const cJSON *j, const char *path, Err *e) {
    if (!cJSON_IsObject(j)) return err_set(e, "%s: __metadata__ is not a JSON object", path);
    int n = cJSON_GetArraySize(j);
    st->meta_keys = xcalloc((size_t)n, sizeof(char *));
    st->meta_vals = xcalloc((size_t)n, sizeof(char *));
    for (const cJSON *v = j->child; v; v = v->next) {
        if (!printable(v->string)) return err_set(e, "%s: a __metadata__ key contains control characters", path);
        if (!cJSON_IsString(v))
            return err_set(e, "%s: __metadata__ value '%s' is not a string", path, v->string);
        st->meta_keys[st->n_meta] = xstrdup(v->string);
        st->meta_vals[st->n_meta] = xstrdup(v->valuestring);
        st->n_meta++;
    }
    const char *dup = find_duplicate(st->meta_keys, st->n_meta);
    if (dup) return err_set(e, "%s: __metadata__ key '%s' appears twice", path, dup);
    return 0;
}

static int cmp_tensor_name(const void *a, const void *b) {
    return strcmp((*(const StTensor *const *)a)->name, (*(const StTensor *const *)b)->name);
}

/* st->by_name: the tensors sorted by name, which must be unique (neighbours differ). Sorting
 * keeps a header of many names from taking n^2, here and in every st_find. */
static int index_names(SafeTensors *st, const char *path, Err *e) {
    st->by_name = xmalloc((size_t)(st->n ? st->n : 1) * sizeof *st->by_name);
    for (int i = 0; i < st->n; i++) st->by_name[i] = &st->t[i];
    qsort(st->by_name, (size_t)st->n, sizeof *st->by_name, cmp_tensor_name);
    for (int i = 1; i < st->n; i++)
        if (strcmp(st->by_name[i - 1]->name, st->by_name[i]->name) == 0)
            return err_set(e, "%s: tensor '%s' appears twice", path, st->by_name[i]->name);
    return 0;
}

/* Order of tensors by where their bytes begin (then end: empty tensors first). */
static const SafeTensors *sort_st;
static int cmp_range(const void *a, const void *b) {
    const StTensor *x = &sort_st->t[*(const int *)a], *y = &sort_st->t[*(const int *)b];
    if (x->offset != y->offset) return x->offset < y->offset ? -1 : 1;
    return x->nbytes < y->nbytes ? -1 : x->nbytes > y->nbytes;
}

/* The tensors' byte ranges must tile the data section, [0, data_len), exactly. */
static int check_coverage(const SafeTensors *st, size_t data_len, const char *path, Err *e) {
    int *order = xmalloc((size_t)(st->n ? st->n : 1) * sizeof *order);
    for (int i = 0; i < st->n; i++) order[i] = i;
    sort_st = st;
    qsort(order, (size_t)st->n, sizeof *order, cmp_range);
    size_t pos = 0;
    const char *prev = NULL;
    int rc = 0;
    for (int i = 0; i < st->n && !rc; i++) {
        const StTensor *t = &st->t[order[i]];
        size_t begin = t->offset;
        if (begin < pos)
            rc = err_set(e, "%s: tensors '%s' and '%s' overlap (bytes %zu..%zu of the data)", path, prev, t->name,
                         begin, pos);
        else if (begin > pos)
            rc = err_set(e, "%s: %zu unused bytes before tensor '%s'%s%s%s (the data must be tensors only)", path,
                         begin - pos, t->name, prev ? " (after '" : "", prev ? prev : "", prev ? "')" : "");
        pos = begin + t->nbytes;
        prev = t->name;
    }
    if (!rc && pos != data_len)
        rc = err_set(e, "%s: %zu bytes after the last tensor%s%s%s (file longer than its header says)", path,
                     data_len - pos, prev ? " '" : "", prev ? prev : "", prev ? "'" : "");
    free(order);
    return rc;
}

/* The header must be UTF-8 with no NUL byte, and no string in it may hold \u0000 (cJSON would
 * cut the string there). Returns the offset of the first bad byte, or -1. */
static long bad_header_byte(const unsigned char *h, size_t n) {
    for (size_t i = 0; i < n;) {
        unsigned c = h[i];
        if (c == 0) return (long)i;
        if (c == '\\' && i + 1 < n) {   /* an escape: \u0000 is a NUL too */
            if (h[i + 1] == 'u' && i + 6 <= n && memcmp(h + i + 2, "0000", 4) == 0) return (long)i;
            i += 2;
            continue;
        }
        if (c < 0x80) { i++; continue; }
        /* a multi-byte sequence: its length, the least code point it may encode (no overlong forms) */
        int len = c >= 0xc2 && c <= 0xdf ? 2 : c >= 0xe0 && c <= 0xef ? 3 : c >= 0xf0 && c <= 0xf4 ? 4 : 0;
        if (!len || i + (size_t)len > n) return (long)i;
        uint32_t cp = c & (0x7f >> len);
        for (int k = 1; k < len; k++) {
            if ((h[i + k] & 0xc0) != 0x80) return (long)i;
            cp = cp << 6 | (h[i + k] & 0x3f);
        }
        if ((len == 3 && (cp < 0x800 || (cp >= 0xd800 && cp <= 0xdfff))) || (len == 4 && (cp < 0x10000 || cp > 0x10ffff)))
            return (long)i;
        i += (size_t)len;
    }
    return -1;
}

/* The header's length from a file of len bytes whose first min(len, 9) bytes are buf: below the
 * cap, then a '{', and inside the file. */
static int header_length(const unsigned char *buf, size_t len, uint64_t *hlen, const char *path, Err *e) {
    if (len == 0) return err_set(e, "%s: empty file", path);
    if (len < 8) return err_set(e, "%s: only %zu bytes, too short for a safetensors file", path, len);
    *hlen = 0;
    for (int i = 7; i >= 0; i--) *hlen = *hlen << 8 | buf[i];
    /* A safetensors file starts with a length below the cap and then '{' (README.md: neither) */
    if (*hlen > ST_MAX_HEADER || (len > 8 && buf[8] != '{'))
        return err_set(e, "%s: not a lingen model file (safetensors): %s", path,
                       *hlen > ST_MAX_HEADER ? "its first 8 bytes are no header length (at most 100 MB)"
                                             : "no JSON header after the length");
    if (*hlen > len - 8)
        return err_set(e, "%s: header length %" PRIu64 " past end of file (%zu bytes; truncated?)", path, *hlen, len);
    return 0;
}

/* The JSON header, st->buf[8 .. st->data_at), of a file of st->len bytes: every tensor's entry
 * and the metadata, checked against a data section of the rest of the file. */
static int parse_header(SafeTensors *st, cJSON **root, const char *path, Err *e) {
    size_t hlen = st->data_at - 8, data_len = st->len - st->data_at;
    long bad = bad_header_byte(st->buf + 8, hlen);
    if (bad >= 0)
        return err_set(e, "%s: header byte %ld: %s", path, bad,
                       st->buf[8 + bad] == 0 || st->buf[8 + bad] == '\\' ? "a NUL character (not allowed in the header)"
                                                                       : "not valid UTF-8");

    const char *h = (const char *)st->buf + 8, *end = NULL;
    *root = cJSON_ParseWithLengthOpts(h, hlen, &end, 0);
    if (!*root)
        return err_set(e, "%s: header is not valid JSON (error at byte %td of %zu)", path, end ? end - h : 0, hlen);
    for (; end < h + hlen; end++)   /* writers pad the header with spaces; anything else is junk */
        if (!*end || !strchr(" \t\r\n", *end))
            return err_set(e, "%s: header has junk after the JSON at byte %td", path, end - h);
    if (!cJSON_IsObject(*root)) return err_set(e, "%s: header is not a JSON object", path);

    int n = 0, n_meta_objs = 0;
    for (const cJSON *j = (*root)->child; j; j = j->next) {
        if (strcmp(j->string, "__metadata__") == 0) n_meta_objs++;
        else n++;
    }
    if (n_meta_objs > 1) return err_set(e, "%s: __metadata__ appears twice", path);
    st->t = xcalloc((size_t)n, sizeof *st->t);
    int rc = 0;
    for (const cJSON *j = (*root)->child; j && !rc; j = j->next) {
        if (strcmp(j->string, "__metadata__") == 0) {
            rc = parse_metadata(st, j, path, e);
            continue;
        }
        if (!printable(j->string)) {
            rc = err_set(e, "%s: a tensor name contains control characters", path);
            break;
        }
        StTensor *t = &st->t[st->n++];
        t->name = xstrdup(j->string);
        rc = parse_tensor(t, j, data_len, path, e);
    }
    if (!rc) rc = index_names(st, path, e);
    if (!rc) rc = check_coverage(st, data_len, path, e);
    return rc;
}

/* Every tensor's data, once the data section is in st->buf. */
static void set_data(SafeTensors *st) {
    for (int i = 0; i < st->n; i++) st->t[i].data = st->buf + st->data_at + st->t[i].offset;
}

/* parse_header with its tree freed; st closed on failure. */
static int parse_checked(SafeTensors *st, const char *path, Err *e) {
    cJSON *root = NULL;
    int rc = parse_header(st, &root, path, e);
    cJSON_Delete(root);   /* everything kept was copied out */
    if (rc) st_close(st);
    return rc;
}

int st_parse(SafeTensors *st, unsigned char *buf, size_t len, const char *name, Err *e) {
    memset(st, 0, sizeof *st);
    st->buf = buf;
    st->len = len;
    uint64_t hlen;
    if (header_length(buf, len, &hlen, name, e)) {
        st_close(st);
        return -1;
    }
    st->data_at = 8 + (size_t)hlen;
    if (parse_checked(st, name, e)) return -1;
    set_data(st);
    return 0;
}

/* Read n bytes of f into buf; -1 and a message when the file ends first or cannot be read. */
static int read_exactly(FILE *f, unsigned char *buf, size_t n, const char *path, Err *e) {
    size_t got = fread(buf, 1, n, f);
    if (got == n) return 0;
    if (ferror(f)) return err_set(e, "%s: read error: %s", path, strerror(errno));
    return err_set(e, "%s: shorter than when it was opened (changed while it was read?)", path);
}

int st_open_header(SafeTensors *st, const char *path, Err *e) {
    memset(st, 0, sizeof *st);
    int fd = open_regular(path, e);
    if (fd < 0) return -1;
    struct stat fs;
    if (fstat(fd, &fs) != 0 || !(st->f = fdopen(fd, "rb"))) {
        err_set(e, "%s: %s", path, strerror(errno));
        close(fd);
        return -1;
    }
    st->len = (size_t)fs.st_size;
    unsigned char start[9];   /* the length, and the '{' that must follow it */
    size_t have = st->len < sizeof start ? st->len : sizeof start;
    uint64_t hlen;
    if (read_exactly(st->f, start, have, path, e) || header_length(start, st->len, &hlen, path, e)) {
        st_close(st);
        return -1;
    }
    st->data_at = 8 + (size_t)hlen;
    st->buf = xmalloc(st->data_at);
    memcpy(st->buf, start, have < st->data_at ? have : st->data_at);
    if (st->data_at > have && read_exactly(st->f, st->buf + have, st->data_at - have, path, e)) {
        st_close(st);
        return -1;
    }
    return parse_checked(st, path, e);
}

int st_read_data(SafeTensors *st, const char *path, Err *e) {
    if (!st->f) return 0;   /* all of it is in memory (st_parse), or was read already */
    unsigned char *buf = realloc(st->buf, st->len ? st->len : 1);
    if (!buf) return err_set(e, "%s: cannot allocate %.1f MB to read it", path, st->len / 1e6);
    st->buf = buf;
    if (fseeko(st->f, (off_t)st->data_at, SEEK_SET) != 0) return err_set(e, "%s: %s", path, strerror(errno));
    if (read_exactly(st->f, st->buf + st->data_at, st->len - st->data_at, path, e)) return -1;
    if (fgetc(st->f) != EOF)
        return err_set(e, "%s: longer than when it was opened (changed while it was read?)", path);
    fclose(st->f);
    st->f = NULL;
    set_data(st);
    return 0;
}

int st_open(SafeTensors *st, const char *path, Err *e) {
    if (st_open_header(st, path, e)) return -1;
    if (st_read_data(st, path, e) == 0) return 0;
    st_close(st);
    return -1;
}

void st_free_meta(int n, char **keys, char **vals) {
    for (int i = 0; i < n; i++) {
        free(keys[i]);
        free(vals[i]);
    }
    free(keys);
    free(vals);
}

void st_close(SafeTensors *st) {
    if (st->f) fclose(st->f);
    for (int i = 0; i < st->n; i++) free(st->t[i].name);
    st_free_meta(st->n_meta, st->meta_keys, st->meta_vals);
    free(st->t);
    free(st->by_name);
    free(st->buf);
    memset(st, 0, sizeof *st);
}

const StTensor *st_find(const SafeTensors *st, const char *name) {
    int lo = 0, hi = st->n;   /* by_name[lo..hi) may hold it */
    while (lo < hi) {
        int mid = lo + (hi - lo) / 2, c = strcmp(st->by_name[mid]->name, name);
        if (c == 0) return st->by_name[mid];
        if (c < 0) lo = mid + 1;
        else hi = mid;
    }
    return NULL;
}

const char *st_meta(const SafeTensors *st, const char *key) {
    for (int i = 0; i < st->n_meta; i++)
        if (strcmp(st->meta_keys[i], key) == 0) return st->meta_vals[i];
    return NULL;
}

size_t st_numel(const StTensor *t) {
    size_t n = 1;   /* a 0-dim tensor is a scalar */
    for (int i = 0; i < t->ndim; i++) n *= (size_t)t->shape[i];
    return n;
}

float st_f16_to_f32(uint16_t h) { return half_to_float(h); }

float st_bf16_to_f32(uint16_t b) {   /* bfloat16 is the top half of a float32 */
    uint32_t bits = (uint32_t)b << 16;
    float f;
    memcpy(&f, &bits, 4);
    return f;
}

/* The data is little-endian and need not be aligned: assemble each value from bytes. */
static uint16_t le16(const unsigned char *p) { return (uint16_t)(p[0] | p[1] << 8); }
static uint32_t le32(const unsigned char *p) {
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

void st_to_f16(const StTensor *t, uint16_t *dst) {
    for (size_t i = 0, n = st_numel(t); i < n; i++) dst[i] = le16(t->data + 2 * i);
}

void st_to_f32(const StTensor *t, float *dst) {
    size_t n = st_numel(t);
    const unsigned char *p = t->data;
    for (size_t i = 0; i < n; i++) {
        switch (t->dtype) {
        case ST_F32: { uint32_t u = le32(p + 4 * i); memcpy(&dst[i], &u, 4); break; }
        case ST_F16: dst[i] = st_f16_to_f32(le16(p + 2 * i)); break;
        case ST_BF16: dst[i] = st_bf16_to_f32(le16(p + 2 * i)); break;
        case ST_I32: { uint32_t u = le32(p + 4 * i); int32_t v; memcpy(&v, &u, 4); dst[i] = (float)v; break; }
        }
    }
}
