/* Finding a model by name. `--model NAME` is a path when it holds a '/' or names an existing file
 * (a directory never: the data root holds mnist/);
 * otherwise NAME, then NAME.bin, is looked for in the model directories, in this order:
 *   1. $LINGEN_MODELS, when set (one directory, or several separated by ':')
 *   2. ./models
 *   3. models/ next to the executable (a build tree run from another directory)
 *   4. ../share/lingen/models from the executable (an installed tree, wherever it was copied)
 *   5. the directory `make install` puts the models in: $(PREFIX)/share/lingen/models
 * (and the same places, less $LINGEN_MODELS, for the other files lingen ships)
 * The first match wins, so a directory earlier in the list shadows the same name later on. */
#ifndef LINGEN_MODELPATH_H
#define LINGEN_MODELPATH_H
#include <stddef.h>

#include "util.h"

/* Where `make install` puts the models and scripts (from PREFIX, by the Makefile). */
#ifndef LINGEN_SHAREDIR
#define LINGEN_SHAREDIR "/usr/local/share/lingen"
#endif

#define MODELPATH_LEN 4096

typedef struct {
    int n, cap;
    char **dir;         /* every one of $LINGEN_MODELS's, however many and however long */
    const char **why;   /* "$LINGEN_MODELS", "next to the executable", ... */
} ModelDirs;

/* A model found in the directories: its name (the file name without .bin) and its path. */
typedef struct { char name[256]; char path[MODELPATH_LEN]; } ModelEntry;

/* The directories in search order, each once (the same directory reached twice is kept first);
 * modelpath_dirs_free frees them. */
void modelpath_dirs(ModelDirs *d);
void modelpath_dirs_free(ModelDirs *d);
/* Every *.bin in the directories, the first of each name only, sorted by name; returns the count
 * and a malloc'd array in *out (free it). */
int modelpath_list(ModelEntry **out);
/* Resolve NAME (a path, or a name searched as above) into out: 0, or -1 and e saying, in one
 * line, that there is no such file or model, the directories searched, and the nearest name. */
int modelpath_lookup(const char *name, char *out, size_t n, Err *e);
/* Resolve --model NAME into out. On failure prints where it looked and the names it found, and
 * returns -1. */
int modelpath_find(const char *name, char *out, size_t n);
/* A file shipped with lingen, e.g. "scripts/plot_compare.py": rel in the current directory, next
 * to the executable, in ../share/lingen from it, or in LINGEN_SHAREDIR; else rel itself. */
const char *modelpath_shared_file(const char *rel);
#endif
