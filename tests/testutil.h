/* Shared by the cmocka tests: cmocka's includes, and where fixtures and data live. */
#ifndef LINGEN_TESTUTIL_H
#define LINGEN_TESTUTIL_H
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <cmocka.h>
#include <dirent.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* Tests run from the repository root (make test-c). */
#define FIXTURE(name) "tests/fixtures/" name

/* A fresh temporary directory /tmp/lingen-test-<what>-XXXXXX into dir (for a test's setup). */
static inline int test_mkdtemp(char *dir, size_t n, const char *what) {
    snprintf(dir, n, "/tmp/lingen-test-%s-XXXXXX", what);
    return mkdtemp(dir) ? 0 : -1;
}

/* dir/name, in one of 4 buffers used in turn (so a few can be alive at once). */
static inline const char *test_path_in(const char *dir, const char *name) {
    static char p[4][1024];
    static int i;
    i = (i + 1) % 4;
    snprintf(p[i], sizeof p[i], "%s/%s", dir, name);
    return p[i];
}

/* Remove path and everything under it (symlinks are removed, not followed). */
static inline void test_remove_tree(const char *path) {
    DIR *d = opendir(path);
    struct dirent *de;
    char p[1024];
    while (d && (de = readdir(d))) {
        if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, "..")) continue;
        if (snprintf(p, sizeof p, "%s/%s", path, de->d_name) >= (int)sizeof p) continue;
        struct stat st;
        if (lstat(p, &st) == 0 && S_ISDIR(st.st_mode)) test_remove_tree(p);
        else unlink(p);
    }
    if (d) closedir(d);
    rmdir(path);
}

/* A fresh temporary directory per test: test_dir_setup and test_dir_teardown as a cmocka test's
 * setup and teardown; test_dir is its name, test_in_dir(name) a path in it. */
static char test_dir[256];
static inline int test_dir_setup(void **state) {
    (void)state;
    return test_mkdtemp(test_dir, sizeof test_dir, "dir");
}
static inline int test_dir_teardown(void **state) {
    (void)state;
    test_remove_tree(test_dir);
    return 0;
}
static inline const char *test_in_dir(const char *name) { return test_path_in(test_dir, name); }
#define TEST_IN_DIR(f) cmocka_unit_test_setup_teardown(f, test_dir_setup, test_dir_teardown)

/* The dataset root: $LINGEN_DATA (the Makefile points it at ../shared/data). */
static inline const char *test_data_dir(void) {
    const char *d = getenv("LINGEN_DATA");
    return d && *d ? d : "data";
}
#endif
