/* Output files. A regular file is replaced atomically: written in full to a temporary file in
 * the same directory, then renamed over the old one. So nothing half-written ever appears under
 * the final name (crash, full disk, file size limit), and a reader holding the old file (a hard
 * link, an open descriptor) keeps the complete old contents. The new file keeps the old one's mode,
 * and its owner and group where the runner may give them; a read-only file is not replaced
 * unless output_set_force. A symlink is followed: its target is
 * replaced and the link kept (not one in a sticky world-writable directory that neither the runner
 * nor the directory's owner owns: the kernel's protected_symlinks rule). A device or FIFO is written directly; a directory or a socket is
 * refused. "-" is standard output. */
#ifndef LINGEN_OUTPUT_H
#define LINGEN_OUTPUT_H
#include <stddef.h>
#include <stdio.h>
#include "util.h"

/* One output being written: f takes the bytes; atomic_commit puts them in place. */
typedef struct {
    FILE *f;
    char *path;   /* as given, for messages */
    char *dest;   /* where the bytes go: path with its symlinks followed */
    char *tmp;    /* the temporary file, or NULL when written directly (device, FIFO, stdout) */
    int err;      /* errno of a failed write, when the writer knows it */
} AtomicFile;
int  atomic_open(AtomicFile *a, const char *path, Err *e);
int  atomic_commit(AtomicFile *a, Err *e);     /* close + rename; removes the temp file on error */
void atomic_abort(AtomicFile *a);              /* close + remove the temp file */

/* Write len bytes to path as above. */
int output_write_file(const char *path, const void *data, size_t len, Err *e);

/* --force: replace read-only files too (the runner's right to the directory decides). */
void output_set_force(int on);

/* Before any long work: can path be written? (its directory exists and takes new files, or it is
 * a device or FIFO open for writing; not a directory). Nothing is left behind. */
int output_check(const char *path, Err *e);
/* Only what is already at path: not a directory, a socket or (without force) a read-only file.
 * For the many outputs of one directory, whose writability output_check_dir checks once. */
int output_check_existing(const char *path, Err *e);
/* The same for a directory of outputs: an existing writable directory, or one that can be made. */
int output_check_dir(const char *dir, Err *e);
/* Would writing a and b put their bytes under one name? (symlinks followed, directories
 * resolved; "-" is standard output) */
int output_same(const char *a, const char *b);

/* All-or-nothing groups of files: each is written in full to its temporary file first; only
 * when every one succeeded are they renamed into place. On failure nothing new is left (and
 * a directory the group created is removed again). */
typedef struct {
    AtomicFile *files;
    int n, cap;
    char *made_dir;   /* a directory output_group_mkdir created, or NULL */
} OutputGroup;
int  output_group_mkdir(OutputGroup *g, const char *dir, Err *e);
int  output_group_add(OutputGroup *g, const char *path, const void *data, size_t len, Err *e);
int  output_group_commit(OutputGroup *g, Err *e);   /* frees g; on error as output_group_abort */
void output_group_abort(OutputGroup *g);            /* removes every temp file, frees g */
#endif
