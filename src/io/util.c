#define _DEFAULT_SOURCE   /* madvise's MADV_HUGEPAGE */
#include "util.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

int err_set(Err *e, const char *fmt, ...) {
    if (e) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(e->msg, sizeof e->msg, fmt, ap);
        va_end(ap);
    }
    return -1;
}

void *xmalloc(size_t n) {
    void *p = malloc(n ? n : 1);
    if (!p) { fprintf(stderr, "lingen: out of memory (%zu bytes)\n", n); exit(EXIT_FAIL); }
    return p;
}

void *xcalloc(size_t n, size_t size) {
    void *p = calloc(n ? n : 1, size ? size : 1);
    if (!p) { fprintf(stderr, "lingen: out of memory (%zu x %zu bytes)\n", n, size); exit(EXIT_FAIL); }
    return p;
}

void *try_calloc(size_t n, size_t size, const char *what, Err *e) {
    if (size && n > (size_t)-1 / size) { err_set(e, "%s: size overflows", what); return NULL; }
    void *p = calloc(n ? n : 1, size ? size : 1);
    if (!p) err_set(e, "%s: cannot allocate %.1f MB", what, (double)n * size / 1e6);
    return p;
}

void bytebuf_append(ByteBuf *b, const void *data, size_t n) {
    if (b->oom || n == 0) return;
    if (n > b->cap - b->len) {
        size_t cap = b->cap ? b->cap : 1 << 16;
        while (cap - b->len < n) cap *= 2;
        unsigned char *p = realloc(b->data, cap);
        if (!p) { b->oom = 1; return; }
        b->data = p;
        b->cap = cap;
    }
    memcpy(b->data + b->len, data, n);
    b->len += n;
}

/* calloc's block and 64 bytes more (its pages stay untouched until used: a KV cache fills as
 * the positions go), the first line boundary past its start returned, the block's address kept
 * in the 8 bytes before it (at least 16 are there: calloc's blocks start at multiples of 16). */
void *try_calloc_lines(size_t n, size_t size, const char *what, Err *e) {
    if (size && n > ((size_t)-1 - 64) / size) { err_set(e, "%s: size overflows", what); return NULL; }
    size_t bytes = (n ? n : 1) * (size ? size : 1) + 64;
    char *block = try_calloc(1, bytes, what, e);
    if (!block) return NULL;
    advise_huge_pages(block, bytes);   /* a large calloc's pages are not touched yet */
    char *p = (char *)(((uintptr_t)block + 64) & ~(uintptr_t)63);
    memcpy(p - sizeof block, &block, sizeof block);
    return p;
}

void advise_huge_pages(void *p, size_t bytes) {
#ifdef MADV_HUGEPAGE
    const uintptr_t huge = (uintptr_t)2 << 20;
    uintptr_t a = ((uintptr_t)p + huge - 1) & ~(huge - 1), b = ((uintptr_t)p + bytes) & ~(huge - 1);
    if (b > a) madvise((void *)a, b - a, MADV_HUGEPAGE);   /* refused (no THP): 4 KB pages, as before */
#else
    (void)p, (void)bytes;
#endif
}

void free_lines(void *p) {
    if (!p) return;
    char *block;
    memcpy(&block, (char *)p - sizeof block, sizeof block);
    free(block);
}

int open_regular(const char *path, Err *e) {
    /* O_NONBLOCK: opening a FIFO must not wait for a writer before the check below */
    int fd = open(path, O_RDONLY | O_NONBLOCK);
    if (fd < 0) return err_set(e, "%s: %s", path, strerror(errno));
    struct stat st;
    int rc = fstat(fd, &st) != 0 ? err_set(e, "%s: %s", path, strerror(errno))
             : S_ISDIR(st.st_mode) ? err_set(e, "%s: is a directory", path)
             : !S_ISREG(st.st_mode) ? err_set(e, "%s: not a regular file", path)
             : 0;
    if (!rc) rc = fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK);
    if (rc) { close(fd); return -1; }
    return fd;
}

unsigned char *read_file(const char *path, size_t *len, Err *e) {
    int fd = open_regular(path, e);
    if (fd < 0) return NULL;
    FILE *f = fdopen(fd, "rb");
    if (!f) { close(fd); err_set(e, "%s: %s", path, strerror(errno)); return NULL; }
    size_t cap = 1 << 16, n = 0;
    unsigned char *buf = xmalloc(cap);
    for (;;) {
        if (n == cap) {
            cap *= 2;
            unsigned char *nb = realloc(buf, cap);
            if (!nb) { free(buf); fclose(f); err_set(e, "%s: file too large to read", path); return NULL; }
            buf = nb;
        }
        size_t r = fread(buf + n, 1, cap - n, f);
        n += r;
        if (r == 0) break;
    }
    int bad = ferror(f);
    fclose(f);
    if (bad) { free(buf); err_set(e, "%s: read error", path); return NULL; }
    *len = n;
    return buf;
}

char *text_escape(const char *s) {
    size_t n = strlen(s);
    char *out = xmalloc(6 * n + 1), *o = out;   /* \u00NN is 6 bytes per input byte (2 of them) at most */
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        if (*p == '\\') o += sprintf(o, "\\\\");
        else if (*p == '\n') o += sprintf(o, "\\n");
        else if (*p == '\t') o += sprintf(o, "\\t");
        else if (*p < 0x20 || *p == 0x7f) o += sprintf(o, "\\x%02x", *p);
        else if (*p == 0xc2 && p[1] >= 0x80 && p[1] <= 0x9f) o += sprintf(o, "\\u%04x", *++p);
        else *o++ = (char)*p;
    }
    *o = 0;
    return out;
}

double now_seconds(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* Optimal string alignment distance: insertions, deletions, substitutions and swaps of two
 * neighbours each cost 1 ("sampel" is 1 from "sample"). Words longer than 63 are far from all. */
static int edit_distance(const char *a, const char *b) {
    int n = (int)strlen(a), m = (int)strlen(b);
    if (n > 63 || m > 63) return 64;
    int d[64][64];
    for (int i = 0; i <= n; i++) d[i][0] = i;
    for (int j = 0; j <= m; j++) d[0][j] = j;
    for (int i = 1; i <= n; i++)
        for (int j = 1; j <= m; j++) {
            int best = d[i - 1][j - 1] + (a[i - 1] != b[j - 1]);
            if (d[i - 1][j] + 1 < best) best = d[i - 1][j] + 1;
            if (d[i][j - 1] + 1 < best) best = d[i][j - 1] + 1;
            if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] && d[i - 2][j - 2] + 1 < best)
                best = d[i - 2][j - 2] + 1;
            d[i][j] = best;
        }
    return d[n][m];
}

const char *nearest_word(const char *word, const char *const *cands, int n) {
    const char *best = NULL;
    int best_d = 3;   /* at most 2 edits, and fewer than the word's length: "x" suggests nothing */
    for (int i = 0; i < n; i++) {
        int d = edit_distance(word, cands[i]);
        if (d < best_d && d < (int)strlen(cands[i])) best = cands[i], best_d = d;
    }
    return best;
}
