#define _XOPEN_SOURCE 700   /* realpath */
#include "settings.h"
#include "modelpath.h"

#include <dirent.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "util.h"

static void add_dir(ModelDirs *d, const char *dir, const char *why) {
    if (!*dir) return;
    char real[PATH_MAX], other[PATH_MAX];
    int exists = realpath(dir, real) != NULL;
    for (int i = 0; i < d->n; i++) {   /* the same directory under another name counts once */
        if (!strcmp(d->dir[i], dir)) return;
        if (exists && realpath(d->dir[i], other) && !strcmp(real, other)) return;
    }
    if (d->n == d->cap) {
        d->cap = d->cap ? 2 * d->cap : 8;
        d->dir = realloc(d->dir, (size_t)d->cap * sizeof *d->dir);
        d->why = realloc(d->why, (size_t)d->cap * sizeof *d->why);
        if (!d->dir || !d->why) { fprintf(stderr, "lingen: out of memory\n"); exit(EXIT_FAIL); }
    }
    size_t len = strlen(dir) + 1;
    d->dir[d->n] = memcpy(xmalloc(len), dir, len);
    d->why[d->n++] = why;
}

void modelpath_dirs_free(ModelDirs *d) {
    for (int i = 0; i < d->n; i++) free(d->dir[i]);
    free(d->dir);
    free(d->why);
    memset(d, 0, sizeof *d);
}

/* rel in the executable's directory (up = 0) or in its parent (up = 1: bin/lingen -> share/...).
 * Returns 0 when there is no such path. */
static int from_exe(char *out, size_t n, int up, const char *rel) {
    char exe[MODELPATH_LEN];
    ssize_t len = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (len <= 0) return 0;
    exe[len] = 0;
    for (int strip = 1 + up; strip > 0; strip--) {
        char *slash = strrchr(exe, '/');
        if (!slash) return 0;
        *slash = 0;
    }
    int wrote = snprintf(out, n, "%s/%s", exe, rel);
    return wrote > 0 && (size_t)wrote < n;
}

const char *modelpath_shared_file(const char *rel) {
    static char path[MODELPATH_LEN];
    if (access(rel, R_OK) == 0) return rel;
    if (from_exe(path, sizeof path, 0, rel) && access(path, R_OK) == 0) return path;
    char shared[MODELPATH_LEN];
    snprintf(shared, sizeof shared, "share/lingen/%s", rel);
    if (from_exe(path, sizeof path, 1, shared) && access(path, R_OK) == 0) return path;
    snprintf(path, sizeof path, "%s/%s", LINGEN_SHAREDIR, rel);
    return access(path, R_OK) == 0 ? path : rel;
}

void modelpath_dirs(ModelDirs *d) {
    memset(d, 0, sizeof *d);
    const char *env = settings_read().models;
    if (env) {
        size_t len = strlen(env) + 1;
        char *buf = memcpy(xmalloc(len), env, len);
        for (char *save = NULL, *p = strtok_r(buf, ":", &save); p; p = strtok_r(NULL, ":", &save))
            add_dir(d, p, "$LINGEN_MODELS");
        free(buf);
    }
    add_dir(d, "./models", "in the current directory");
    char dir[MODELPATH_LEN];
    if (from_exe(dir, sizeof dir, 0, "models")) add_dir(d, dir, "next to the executable");
    if (from_exe(dir, sizeof dir, 1, "share/lingen/models")) add_dir(d, dir, "installed with the executable");
    add_dir(d, LINGEN_SHAREDIR "/models", "make install");
}

static int is_file(const char *path) {
    struct stat st;
    return stat(path, &st) == 0 && S_ISREG(st.st_mode);
}

static int has_bin_suffix(const char *s) {
    size_t n = strlen(s);
    return n > 4 && !strcmp(s + n - 4, ".bin");
}

static int by_name(const void *a, const void *b) {
    return strcmp(((const ModelEntry *)a)->name, ((const ModelEntry *)b)->name);
}

int modelpath_list(ModelEntry **out) {
    ModelDirs d;
    modelpath_dirs(&d);
    int n = 0, cap = 16;
    ModelEntry *v = xmalloc(cap * sizeof *v);
    for (int i = 0; i < d.n; i++) {
        DIR *dir = opendir(d.dir[i]);
        if (!dir) continue;
        int first = n;   /* names of earlier directories shadow this one's */
        for (struct dirent *de; (de = readdir(dir));) {
            size_t len = strlen(de->d_name);
            if (!has_bin_suffix(de->d_name) || len - 4 >= sizeof v->name) continue;
            ModelEntry m;
            snprintf(m.name, sizeof m.name, "%.*s", (int)(len - 4), de->d_name);
            int wrote = snprintf(m.path, sizeof m.path, "%s/%s", d.dir[i], de->d_name);
            if (wrote < 0 || (size_t)wrote >= sizeof m.path || !is_file(m.path)) continue;
            int seen = 0;
            for (int j = 0; j < first && !seen; j++) seen = !strcmp(v[j].name, m.name);
            if (seen) continue;
            if (n == cap) v = realloc(v, (cap *= 2) * sizeof *v);
            if (!v) { fprintf(stderr, "lingen: out of memory\n"); exit(EXIT_FAIL); }
            v[n++] = m;
        }
        closedir(dir);
    }
    modelpath_dirs_free(&d);
    qsort(v, n, sizeof *v, by_name);
    *out = v;
    return n;
}

/* The name nearest to name among the models found, NAME or NAME.bin as it was typed (into near,
 * n bytes); 0 when there is none near. found/k: modelpath_list's. */
static int nearest_model(const char *name, const ModelEntry *found, int k, char *near, size_t n) {
    if (k == 0) return 0;
    const char **names = xmalloc(2 * k * sizeof *names);   /* NAME and NAME.bin */
    char (*files)[264] = xmalloc(k * sizeof *files);
    for (int i = 0; i < k; i++) {
        names[i] = found[i].name;
        snprintf(files[i], sizeof files[i], "%s.bin", found[i].name);
        names[k + i] = files[i];
    }
    const char *best = nearest_word(name, names, 2 * k);
    if (best) snprintf(near, n, "%s", best);
    free(files);
    free(names);
    return best != NULL;
}

int modelpath_lookup(const char *name, char *out, size_t n, Err *e) {
    struct stat st;
    int exists = stat(name, &st) == 0, dir = exists && S_ISDIR(st.st_mode);
    /* a path: the loader reports its problems. A directory without a '/' is never a model: the
     * data root holds mnist/, and `--model mnist` run there means the model of that name. */
    if ((exists && !dir) || strchr(name, '/')) {
        snprintf(out, n, "%s", name);
        return 0;
    }
    ModelDirs d;
    modelpath_dirs(&d);
    for (int i = 0; i < d.n; i++)
        for (int bin = 0; bin < 2; bin++) {
            if (bin && has_bin_suffix(name)) break;
            int wrote = snprintf(out, n, "%s/%s%s", d.dir[i], name, bin ? ".bin" : "");
            if (wrote > 0 && (size_t)wrote < n && is_file(out)) {
                modelpath_dirs_free(&d);
                return 0;
            }
        }
    /* one line: the name, the directories searched, the nearest name found */
    char dirs[400] = "", near[300];
    size_t used = 0;
    for (int i = 0; i < d.n && used < sizeof dirs; i++)
        used += snprintf(dirs + used, sizeof dirs - used, "%s%s", i ? ", " : "", d.dir[i]);
    modelpath_dirs_free(&d);
    ModelEntry *found;
    int k = modelpath_list(&found), has_near = nearest_model(name, found, k, near, sizeof near);
    free(found);
    err_set(e, "%s: %s, and no model of that name in %s%s%s%s", name,
            dir ? "a directory, not a model file" : "no such model file", dirs, has_near ? " (did you mean \"" : "",
            has_near ? near : "", has_near ? "\"?)" : "");
    return -1;
}

int modelpath_find(const char *name, char *out, size_t n) {
    Err e;
    if (modelpath_lookup(name, out, n, &e) == 0) return 0;
    struct stat st;
    int dir = stat(name, &st) == 0 && S_ISDIR(st.st_mode);
    fprintf(stderr, "lingen: %s: %s, and no model of that name in:\n", name, dir ? "a directory, not a model file" : "no such model file");
    ModelDirs d;
    modelpath_dirs(&d);
    for (int i = 0; i < d.n; i++) {
        char *safe = text_escape(d.dir[i]);
        fprintf(stderr, "  %s (%s)\n", safe, d.why[i]);
        free(safe);
    }
    modelpath_dirs_free(&d);
    ModelEntry *found;
    int k = modelpath_list(&found);
    char near[300];
    if (k == 0) {
        fprintf(stderr, "no models there: set LINGEN_MODELS to a directory of model files, or give a path\n");
    } else {
        fprintf(stderr, "models found:");
        for (int i = 0; i < k; i++) {
            char *safe = text_escape(found[i].name);   /* a file's name: no terminal escapes */
            fprintf(stderr, " %s", safe);
            free(safe);
        }
        if (nearest_model(name, found, k, near, sizeof near)) {
            char *safe = text_escape(near);
            fprintf(stderr, "\ndid you mean \"%s\"?", safe);
            free(safe);
        }
        fprintf(stderr, "\n");
    }
    free(found);
    return -1;
}
