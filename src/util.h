/* Small helpers shared by every module: errors, allocation, files written atomically. */
#ifndef LINGEN_UTIL_H
#define LINGEN_UTIL_H
#include <stddef.h>
#include <stdio.h>

/* Exit codes (README, --help). */
enum { EXIT_OK = 0, EXIT_FAIL = 1, EXIT_USAGE = 2, EXIT_INTERRUPTED = 130 };

/* An error message: functions that can fail fill one and return nonzero. */
typedef struct { char msg[512]; } Err;
int err_set(Err *e, const char *fmt, ...) __attribute__((format(printf, 2, 3)));  /* returns -1 */

void *xmalloc(size_t n);            /* aborts with a message on out-of-memory */
void *xcalloc(size_t n, size_t size);
/* Allocation that may legitimately fail (user-sized): NULL and a message in e. */
void *try_calloc(size_t n, size_t size, const char *what, Err *e);

/* Read a whole file; NULL and a message naming the file on failure. */
unsigned char *read_file(const char *path, size_t *len, Err *e);

/* Atomic output: write to "<path>.XXXXXX" in the same directory, then rename into place. */
typedef struct { FILE *f; char tmp[4096]; char path[4096]; } AtomicFile;
int  atomic_open(AtomicFile *a, const char *path, Err *e);
int  atomic_commit(AtomicFile *a, Err *e);     /* fclose + rename; removes the temp file on error */
void atomic_abort(AtomicFile *a);              /* fclose + unlink */

double now_seconds(void);                      /* monotonic clock */
#endif
