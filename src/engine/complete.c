#include "complete.h"

#include <ctype.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

/* A decimal index at *p (digits only: no sign, no spaces), advancing p. */
static int parse_index(const char **p, long *v) {
    if (!isdigit((unsigned char)**p)) return -1;
    char *end;
    errno = 0;
    *v = strtol(*p, &end, 10);
    *p = end;
    return errno ? -1 : 0;
}

int index_list_parse(const char *s, int n_avail, int **idx, int *n, Err *e) {
    *idx = NULL;
    *n = 0;
    int cap = 0;
    const char *p = s;
    for (;;) {
        long lo, hi;
        if (parse_index(&p, &lo)) goto syntax;
        hi = lo;
        if (*p == '-' && (p++, parse_index(&p, &hi))) goto syntax;
        if (*p != ',' && *p != 0) goto syntax;
        if (hi < lo) { err_set(e, "'%s': the range %ld-%ld runs backwards", s, lo, hi); goto fail; }
        if (hi >= n_avail) {
            err_set(e, "index %ld is out of range 0-%d", hi, n_avail - 1);
            goto fail;
        }
        if (hi - lo + 1 > COMPLETE_MAX_INPUTS - *n) {
            err_set(e, "'%s': more than %d images", s, COMPLETE_MAX_INPUTS);
            goto fail;
        }
        if (*n + (hi - lo + 1) > cap) {
            cap = *n + (int)(hi - lo + 1) + cap;
            if (cap > COMPLETE_MAX_INPUTS) cap = COMPLETE_MAX_INPUTS;
            int *grown = realloc(*idx, (size_t)cap * sizeof(int));
            if (!grown) { err_set(e, "out of memory for %d indices", cap); goto fail; }
            *idx = grown;
        }
        for (long i = lo; i <= hi; i++) (*idx)[(*n)++] = (int)i;
        if (*p == 0) return 0;
        p++;   /* the comma */
    }
syntax:
    err_set(e, "'%s' is not a list of indices or ranges, such as 0-9, 3 or 0-4,7", s);
fail:
    free(*idx);
    *idx = NULL;
    *n = 0;
    return -1;
}

int complete_images(const Model *m, const unsigned char *inputs, int n, int K, int prefix_len,
                    const GenOptions *o, unsigned char *out, Err *e) {
    int N = m->cfg.seq_len;
    /* generate() takes one prefix per image: each input, K times */
    unsigned char *prefix = try_calloc((size_t)n * K, N, "prefixes", e);
    if (!prefix) return -1;
    for (int i = 0; i < n; i++)
        for (int k = 0; k < K; k++) memcpy(prefix + ((size_t)i * K + k) * N, inputs + (size_t)i * N, N);
    GenOptions go = *o;
    go.prefix = prefix;
    go.prefix_len = prefix_len;
    int done = generate(m, out, n * K, &go, e);
    free(prefix);
    return done;
}

void complete_tiles(const unsigned char *inputs, const unsigned char *completions, int n, int K, int N,
                    int prefix_len, unsigned char *tiles) {
    for (int i = 0; i < n; i++) {
        const unsigned char *in = inputs + (size_t)i * N;
        unsigned char *row = tiles + (size_t)i * (K + 2) * N;
        memcpy(row, in, N);
        memcpy(row + N, in, prefix_len);
        memset(row + N + prefix_len, COMPLETE_GREY, N - prefix_len);
        memcpy(row + 2 * (size_t)N, completions + (size_t)i * K * N, (size_t)K * N);
    }
}
