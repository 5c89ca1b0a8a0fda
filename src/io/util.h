/* Small helpers shared by every module: errors, allocation, reading files. */
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
/* The same, starting at a cache line (64 bytes): buffers that threads write side by side (a
 * product's output columns, the attention's heads) then share no line at their edges, as they
 * would at malloc's 16 bytes past one. Freed with free_lines. */
void *try_calloc_lines(size_t n, size_t size, const char *what, Err *e);
void free_lines(void *p);
/* A byte buffer that grows as an encoder appends to it (PNG, GIF written in memory first): on
 * out of memory the bytes are dropped and oom set, for the encoder's caller to report. */
typedef struct { unsigned char *data; size_t len, cap; int oom; } ByteBuf;
void bytebuf_append(ByteBuf *b, const void *data, size_t n);
/* Ask for 2 MB pages (transparent huge pages, where the kernel has them) over the whole 2 MB
 * ranges of [p, p + bytes), before they are first touched: a sampling step streams tens of MB
 * (the weights, the RNN state), and with 4 KB pages that is a TLB miss every 4 KB. */
void advise_huge_pages(void *p, size_t bytes);

/* Open a regular file for reading: a descriptor, or -1 and a message naming the file ("is a
 * directory", "not a regular file": a device or FIFO would never end or never start). */
int open_regular(const char *path, Err *e);
/* Read a whole regular file; NULL and a message naming the file on failure. */
unsigned char *read_file(const char *path, size_t *len, Err *e);

/* s made safe to print on a terminal (malloc'd): control characters, C0 and C1 (U+0080..U+009F),
 * and DEL as \n, \t, \xNN or \u00NN, backslash as \\; so no value can move the cursor, clear
 * the screen or start a line of its own. */
char *text_escape(const char *s);

double now_seconds(void);                      /* monotonic clock */
/* The candidate nearest to word, if it is within 2 edits (a swap of neighbours is one); else NULL. */
const char *nearest_word(const char *word, const char *const *cands, int n);
#endif
