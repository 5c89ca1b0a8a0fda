/* Output files: atomic replacement, symlinks followed, devices written directly, stdout, checks
 * before the work, all-or-nothing groups (output.h). */
#define _XOPEN_SOURCE 700   /* realpath */
#include "output.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* The temporary file's name, in the destination's directory: .lingen-HOST-PID-XXXXXX, HOST the
 * hash of this machine's name (8 hex digits), PID this process's. Short, so that a destination
 * name of up to NAME_MAX bytes still works; the two numbers let a later run tell that a file
 * was left by a process that no longer runs (killed with SIGKILL) and remove it. */
#define TMP_PREFIX ".lingen-"
#define MAX_LINKS 40   /* as the kernel's ELOOP limit */

static char *xstrdup(const char *s) {
    size_t n = strlen(s) + 1;
    return memcpy(xmalloc(n), s, n);
}

/* The directory part of path: "." for a bare name, "/" for a file in the root. */
static char *dir_of(const char *path) {
    const char *slash = strrchr(path, '/');
    if (!slash) return xstrdup(".");
    size_t n = slash == path ? 1 : (size_t)(slash - path);
    char *d = xmalloc(n + 1);
    memcpy(d, path, n);
    d[n] = 0;
    return d;
}

/* The kernel's protected_symlinks rule, which following links here would otherwise bypass: a
 * symlink in a sticky world-writable directory (such as /tmp) is followed only when the runner or
 * the directory's owner owns it; else another user's link could aim lingen's output at any file
 * the runner may write. Returns nonzero, with a message naming path, for a link refused. */
static int sticky_link_refused(const char *link, const struct stat *ls, const char *path, Err *e) {
    char *dir = dir_of(link);
    struct stat ds;
    int refused = stat(dir, &ds) == 0 && (ds.st_mode & S_ISVTX) && (ds.st_mode & S_IWOTH) &&
                  ls->st_uid != geteuid() && ls->st_uid != ds.st_uid;
    if (refused)
        err_set(e, "%s: a symlink in the sticky world-writable directory %s, owned by another user: not followed",
                path, dir);
    free(dir);
    return refused;
}

/* path with every symlink in its last component followed (a dangling link gives the path it
 * points to, which does not exist yet). *exists says whether it does; st is its lstat. */
static char *follow_links(const char *path, struct stat *st, int *exists, Err *e) {
    char *cur = xstrdup(path);
    for (int hops = 0;; hops++) {
        if (lstat(cur, st) != 0) {
            int er = errno;
            if (er == ENOENT) { *exists = 0; return cur; }
            free(cur);
            err_set(e, "%s: %s", path, strerror(er));
            return NULL;
        }
        *exists = 1;
        if (!S_ISLNK(st->st_mode)) return cur;
        if (sticky_link_refused(cur, st, path, e)) {
            free(cur);
            return NULL;
        }
        char target[PATH_MAX];
        ssize_t k = hops < MAX_LINKS ? readlink(cur, target, sizeof target - 1) : -1;
        if (k < 0) {
            free(cur);
            err_set(e, "%s: %s", path, hops < MAX_LINKS ? strerror(errno) : "too many levels of symbolic links");
            return NULL;
        }
        target[k] = 0;
        char *next;
        if (target[0] == '/' || !strchr(cur, '/')) next = xstrdup(target);
        else {   /* relative to the link's own directory */
            char *d = dir_of(cur);
            next = xmalloc(strlen(d) + strlen(target) + 2);
            sprintf(next, "%s/%s", d, target);
            free(d);
        }
        free(cur);
        cur = next;
    }
}

/* FNV-1a of this machine's name: the HOST of the temporary files' names. */
static unsigned host_hash(void) {
    static unsigned h;
    if (h) return h;
    char name[256] = "";
    gethostname(name, sizeof name - 1);
    h = 2166136261u;
    for (const unsigned char *p = (const unsigned char *)name; *p; p++) h = (h ^ *p) * 16777619u;
    return h;
}

/* A new temporary file in dir; fd, with *tmp its name (malloc'd); -1 and errno on failure. */
static int make_temp(const char *dir, char **tmp) {
    *tmp = xmalloc(strlen(dir) + 64);
    sprintf(*tmp, "%s/" TMP_PREFIX "%08x-%ld-XXXXXX", strcmp(dir, "/") ? dir : "", host_hash(), (long)getpid());
    int fd = mkstemp(*tmp);
    if (fd < 0) {
        int er = errno;
        free(*tmp);
        *tmp = NULL;
        errno = er;
    }
    return fd;
}

static int cannot_write(const char *path, const char *dir, int er, Err *e) {
    if (er == ENOENT) return err_set(e, "%s: cannot write: directory %s does not exist", path, dir);
    if (er == ENOTDIR) return err_set(e, "%s: cannot write: %s is not a directory", path, dir);
    return err_set(e, "%s: cannot write in %s: %s", path, dir, strerror(er));
}

static int force;   /* output_set_force */

void output_set_force(int on) { force = on; }

/* What is at dest (st: its stat, when it exists) may take path's output: not a directory or a
 * socket (neither replaced nor written), nor a read-only file (its mode has no write bit, or the
 * runner may not write it: a shell's > would refuse it) unless --force. */
static int may_replace(const char *path, const char *dest, const struct stat *st, int exists, Err *e) {
    if (!exists) return 0;
    if (S_ISSOCK(st->st_mode)) return err_set(e, "%s: is a socket, not a file, device or FIFO", path);
    if (S_ISDIR(st->st_mode)) return err_set(e, "%s: is a directory", path);
    if (!S_ISREG(st->st_mode) || force) return 0;
    if (!(st->st_mode & 0222))
        return err_set(e, "%s: is read-only (mode %04o): not replaced; --force replaces it", path,
                       (unsigned)(st->st_mode & 07777));
    if (faccessat(AT_FDCWD, dest, W_OK, AT_EACCESS) != 0 && errno == EACCES)
        return err_set(e, "%s: is not writable by this user (mode %04o, owner %ld): not replaced; --force replaces it",
                       path, (unsigned)(st->st_mode & 07777), (long)st->st_uid);
    return 0;
}

/* The file open on fd given st's owner and group where the runner may: root both, another user
 * the group alone when it is one of theirs. */
static void keep_owner(int fd, const struct stat *st) {
    if (fchown(fd, st->st_uid, st->st_gid) != 0 && fchown(fd, (uid_t)-1, st->st_gid) != 0)
        return;   /* neither allowed: the runner's, as a new file would be */
}

static void free_names(AtomicFile *a) {
    free(a->path);
    free(a->dest);
    free(a->tmp);
    a->path = a->dest = a->tmp = NULL;
}

int atomic_open(AtomicFile *a, const char *path, Err *e) {
    memset(a, 0, sizeof *a);
    /* Over a file size limit, write() then fails with EFBIG (reported, temp file removed)
     * instead of the signal killing the process and leaving the temp file behind. */
    signal(SIGXFSZ, SIG_IGN);
    if (strcmp(path, "-") == 0) {
        a->f = stdout;
        a->path = xstrdup(path);
        return 0;
    }
    struct stat st;
    int exists;
    char *dest = follow_links(path, &st, &exists, e);
    if (!dest) return -1;
    if (may_replace(path, dest, &st, exists, e)) {
        free(dest);
        return -1;
    }
    a->path = xstrdup(path);
    a->dest = dest;
    int fd;
    if (exists && !S_ISREG(st.st_mode)) {   /* a device or FIFO: it cannot be replaced, only written */
        fd = open(dest, O_WRONLY);
        if (fd < 0) {
            int er = errno;
            free_names(a);
            return err_set(e, "%s: cannot write: %s", path, strerror(er));
        }
    } else {
        char *dir = dir_of(dest);
        fd = make_temp(dir, &a->tmp);
        if (fd < 0) {
            cannot_write(path, dir, errno, e);
            free(dir);
            free_names(a);
            return -1;
        }
        free(dir);
        /* the old file's owner and group, then its mode (a change of owner clears setuid bits);
         * a new file gets mkstemp's 0600 widened to the usual mode */
        if (exists && (st.st_uid != geteuid() || st.st_gid != getegid())) keep_owner(fd, &st);
        mode_t um = umask(0);
        umask(um);
        fchmod(fd, exists ? st.st_mode & 07777 : 0666 & ~um);
    }
    a->f = fdopen(fd, "wb");
    if (!a->f) {
        int er = errno;
        close(fd);
        if (a->tmp) unlink(a->tmp);
        free_names(a);
        return err_set(e, "%s: cannot write: %s", path, strerror(er));
    }
    return 0;
}

/* Flush and close (stdout is only flushed); a write error removes the temp file. */
static int finish(AtomicFile *a, Err *e) {
    int er = a->err;
    errno = 0;
    if ((fflush(a->f) != 0 || ferror(a->f)) && !er) er = errno ? errno : EIO;
    if (a->f != stdout && fclose(a->f) != 0 && !er) er = errno ? errno : EIO;
    a->f = NULL;
    if (!er) return 0;
    if (a->tmp) unlink(a->tmp);
    err_set(e, "%s: write failed: %s", a->path, strerror(er));
    free_names(a);
    return -1;
}

/* Rename the temp file over the destination. */
static int place(AtomicFile *a, Err *e) {
    int rc = 0;
    if (a->tmp && rename(a->tmp, a->dest) != 0) {
        int er = errno;
        unlink(a->tmp);
        rc = er == EISDIR ? err_set(e, "%s: is a directory", a->path)
                          : err_set(e, "%s: cannot rename into place: %s", a->path, strerror(er));
    }
    free_names(a);
    return rc;
}

int atomic_commit(AtomicFile *a, Err *e) {
    return finish(a, e) ? -1 : place(a, e);
}

void atomic_abort(AtomicFile *a) {
    if (a->f && a->f != stdout) fclose(a->f);
    a->f = NULL;
    if (a->tmp) unlink(a->tmp);
    free_names(a);
}

int output_write_file(const char *path, const void *data, size_t len, Err *e) {
    AtomicFile a;
    if (atomic_open(&a, path, e)) return -1;
    if (fwrite(data, 1, len, a.f) != len) a.err = errno;   /* finish() reports it */
    return atomic_commit(&a, e);
}

/* Is path (named name) a temporary file that a process of this machine left, and that no longer
 * runs: a regular file of the runner's own? (A process of another user counts as running: kill
 * says EPERM, not ESRCH.) */
static int stale_temp(const char *path, const char *name) {
    unsigned host;
    long pid;
    int end = 0;
    if (sscanf(name, TMP_PREFIX "%8x-%ld-%*6[A-Za-z0-9]%n", &host, &pid, &end) != 2 || end == 0 || name[end] ||
        host != host_hash() || pid <= 0 || pid > INT_MAX || pid == (long)getpid() || kill((pid_t)pid, 0) == 0 ||
        errno != ESRCH)
        return 0;
    struct stat st;
    return lstat(path, &st) == 0 && S_ISREG(st.st_mode) && st.st_uid == geteuid();
}

/* Remove from dir the temporary files of lingen runs of this machine that were killed before
 * they could (SIGKILL, a crash): they would stay hidden there for good. */
static void remove_stale_temps(const char *dir) {
    DIR *d = opendir(dir);
    if (!d) return;
    for (struct dirent *de; (de = readdir(d));) {
        if (strncmp(de->d_name, TMP_PREFIX, sizeof TMP_PREFIX - 1)) continue;
        char *path = xmalloc(strlen(dir) + strlen(de->d_name) + 2);
        sprintf(path, "%s/%s", dir, de->d_name);
        if (stale_temp(path, de->d_name)) unlink(path);
        free(path);
    }
    closedir(d);
}

/* Can a new file be made in dir? (made and removed again: this also catches a read-only
 * filesystem, which access() does not). Then dir is cleared of stale temporary files. */
static int probe_dir(const char *path, const char *dir, Err *e) {
    char *tmp;
    int fd = make_temp(dir, &tmp);
    if (fd < 0) return cannot_write(path, dir, errno, e);
    close(fd);
    unlink(tmp);
    free(tmp);
    remove_stale_temps(dir);
    return 0;
}

int output_check(const char *path, Err *e) {
    if (strcmp(path, "-") == 0) return 0;
    struct stat st;
    int exists, rc = 0;
    char *dest = follow_links(path, &st, &exists, e);
    if (!dest) return -1;
    if (may_replace(path, dest, &st, exists, e)) rc = -1;
    else if (exists && !S_ISREG(st.st_mode)) {
        if (access(dest, W_OK) != 0) rc = err_set(e, "%s: cannot write: %s", path, strerror(errno));
    } else {
        char *dir = dir_of(dest);
        rc = probe_dir(path, dir, e);
        free(dir);
    }
    free(dest);
    return rc;
}

int output_check_existing(const char *path, Err *e) {
    if (strcmp(path, "-") == 0) return 0;
    struct stat st;
    int exists;
    char *dest = follow_links(path, &st, &exists, e);
    if (!dest) return -1;
    int rc = may_replace(path, dest, &st, exists, e);
    free(dest);
    return rc;
}

/* Where path's bytes would go: its directory's real path (symlinks and ".." resolved), '/', and
 * its last name, symlinks followed; NULL when that directory cannot be resolved. */
static char *canonical(const char *path) {
    struct stat st;
    int exists;
    char *dest = follow_links(path, &st, &exists, NULL), *out = NULL;
    if (!dest) return NULL;
    char *dir = dir_of(dest), real[PATH_MAX];
    const char *slash = strrchr(dest, '/'), *base = slash ? slash + 1 : dest;
    if (realpath(dir, real)) {
        out = xmalloc(strlen(real) + strlen(base) + 2);
        sprintf(out, "%s/%s", real, base);
    }
    free(dir);
    free(dest);
    return out;
}

int output_same(const char *a, const char *b) {
    if (!strcmp(a, "-") || !strcmp(b, "-")) return !strcmp(a, b);
    char *x = canonical(a), *y = canonical(b);
    int same = x && y && !strcmp(x, y);
    free(x);
    free(y);
    return same;
}

int output_check_dir(const char *dir, Err *e) {
    struct stat st;
    if (stat(dir, &st) == 0) {
        if (!S_ISDIR(st.st_mode)) return err_set(e, "%s: not a directory", dir);
        return probe_dir(dir, dir, e);
    }
    if (errno != ENOENT) return err_set(e, "%s: %s", dir, strerror(errno));
    char *d = xstrdup(dir);   /* it will be made: its parent must take a new entry */
    for (size_t n = strlen(d); n > 1 && d[n - 1] == '/'; n--) d[n - 1] = 0;
    char *parent = dir_of(d);
    int rc = probe_dir(dir, parent, e);
    free(parent);
    free(d);
    return rc;
}

/* ---------------------------------------------------------------- groups */

int output_group_mkdir(OutputGroup *g, const char *dir, Err *e) {
    if (mkdir(dir, 0777) == 0) {
        g->made_dir = xstrdup(dir);
        return 0;
    }
    struct stat st;
    if (errno == EEXIST && stat(dir, &st) == 0 && S_ISDIR(st.st_mode)) return 0;
    if (errno == EEXIST) return err_set(e, "%s: not a directory", dir);
    return err_set(e, "%s: cannot create directory: %s", dir, strerror(errno));
}

int output_group_add(OutputGroup *g, const char *path, const void *data, size_t len, Err *e) {
    if (g->n == g->cap) {
        g->cap = g->cap ? 2 * g->cap : 16;
        AtomicFile *f = realloc(g->files, (size_t)g->cap * sizeof *f);
        if (!f) return err_set(e, "%s: out of memory", path);
        g->files = f;
    }
    AtomicFile *a = &g->files[g->n];
    if (atomic_open(a, path, e)) return -1;
    if (fwrite(data, 1, len, a->f) != len) a->err = errno;
    if (finish(a, e)) return -1;   /* closed now: a group of thousands holds no descriptors */
    g->n++;
    return 0;
}

static void group_free(OutputGroup *g) {
    free(g->files);
    free(g->made_dir);
    memset(g, 0, sizeof *g);
}

void output_group_abort(OutputGroup *g) {
    for (int i = 0; i < g->n; i++) atomic_abort(&g->files[i]);
    if (g->made_dir) rmdir(g->made_dir);
    group_free(g);
}

int output_group_commit(OutputGroup *g, Err *e) {
    for (int i = 0; i < g->n; i++) {
        if (place(&g->files[i], e)) {
            for (int k = i + 1; k < g->n; k++) atomic_abort(&g->files[k]);
            group_free(g);
            return -1;
        }
    }
    group_free(g);
    return 0;
}
