#define _POSIX_C_SOURCE 200809L
#include "util.h"

#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
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

unsigned char *read_file(const char *path, size_t *len, Err *e) {
    FILE *f = fopen(path, "rb");
    if (!f) { err_set(e, "%s: %s", path, strerror(errno)); return NULL; }
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

int atomic_open(AtomicFile *a, const char *path, Err *e) {
    if (strlen(path) + 8 >= sizeof a->tmp) return err_set(e, "%s: path too long", path);
    snprintf(a->path, sizeof a->path, "%s", path);
    snprintf(a->tmp, sizeof a->tmp, "%s.XXXXXX", path);
    int fd = mkstemp(a->tmp);
    if (fd < 0) return err_set(e, "%s: cannot write: %s", path, strerror(errno));
    mode_t um = umask(0);   /* mkstemp makes 0600: give the file the usual permissions */
    umask(um);
    fchmod(fd, 0666 & ~um);
    a->f = fdopen(fd, "wb");
    if (!a->f) { close(fd); unlink(a->tmp); return err_set(e, "%s: cannot write: %s", path, strerror(errno)); }
    return 0;
}

int atomic_commit(AtomicFile *a, Err *e) {
    int bad = ferror(a->f);
    if (fclose(a->f) != 0) bad = 1;
    a->f = NULL;
    if (bad) { unlink(a->tmp); return err_set(e, "%s: write failed (disk full?)", a->path); }
    if (rename(a->tmp, a->path) != 0) {
        int er = errno;
        unlink(a->tmp);
        return err_set(e, "%s: cannot rename into place: %s", a->path, strerror(er));
    }
    return 0;
}

void atomic_abort(AtomicFile *a) {
    if (a->f) fclose(a->f);
    a->f = NULL;
    unlink(a->tmp);
}

double now_seconds(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}
