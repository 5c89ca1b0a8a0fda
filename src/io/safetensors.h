/* The safetensors container: 8-byte little-endian header length, JSON header, raw tensor bytes.
 * Parsing checks the header and every tensor's dtype, shape and byte range. */
#ifndef LINGEN_SAFETENSORS_H
#define LINGEN_SAFETENSORS_H
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include "util.h"

#define ST_MAX_HEADER 100000000   /* bytes of JSON header at most, as the reference library */

typedef enum { ST_F32, ST_F16, ST_BF16, ST_I32 } StDtype;

typedef struct {
    char *name;
    StDtype dtype;
    int ndim;
    int64_t shape[8];
    size_t nbytes;
    size_t offset;               /* where its bytes begin in the data section */
    const unsigned char *data;   /* they, in the file buffer; NULL until the data is read */
} StTensor;

typedef struct {
    unsigned char *buf; size_t len;   /* the file's bytes read so far (buf), and its length */
    size_t data_at;                   /* where the data section begins: 8 + the header's length */
    FILE *f;                          /* the file, from st_open_header until st_read_data */
    int n; StTensor *t;               /* tensors in file order */
    const StTensor **by_name;         /* the same, sorted by name (st_find: a binary search) */
    int n_meta; char **meta_keys, **meta_vals;
} SafeTensors;

/* A file read in two steps: its header first (the 8-byte length, then the JSON), checked whole
 * against the file's size (names, dtypes, shapes, byte ranges), before any of the data is read;
 * then, if the caller wants it, the data section. So a file that is not one, or whose header
 * is wrong, costs no more than its header, whatever its size. */
int  st_open_header(SafeTensors *st, const char *path, Err *e);
/* The data section of a file opened by st_open_header: read, and every tensor's data set. A file
 * that changed size since its header was read is refused. Nothing to do after st_parse. */
int  st_read_data(SafeTensors *st, const char *path, Err *e);
int  st_open(SafeTensors *st, const char *path, Err *e);            /* both */
/* Parse a file already in memory; takes buf (freed by st_close, or here on error). */
int  st_parse(SafeTensors *st, unsigned char *buf, size_t len, const char *name, Err *e); /* takes buf */
void st_close(SafeTensors *st);
/* Free n metadata key/value strings and their two arrays (st_close's, or a Model's that took them). */
void st_free_meta(int n, char **keys, char **vals);
const StTensor *st_find(const SafeTensors *st, const char *name);   /* NULL if absent; O(log n) */
const char *st_meta(const SafeTensors *st, const char *key);
size_t st_numel(const StTensor *t);
/* Copy a tensor's values to float32 (widening F16/BF16). */
void st_to_f32(const StTensor *t, float *dst);
/* An F16 tensor's values as they are, in host order. */
void st_to_f16(const StTensor *t, uint16_t *dst);
float st_f16_to_f32(uint16_t h);    /* IEEE half, subnormals, inf and nan included */
float st_bf16_to_f32(uint16_t b);
const char *st_dtype_name(StDtype dt);   /* "F32", ... */
int st_dtype_size(StDtype dt);           /* bytes per element */
/* "[257,128]" into buf; returns buf. */
char *st_format_shape(const int64_t *shape, int ndim, char *buf, size_t n);
#endif
