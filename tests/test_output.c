/* Output files: an existing file is replaced atomically (a hard link to the old file keeps the
 * complete old bytes, whether the new write fails part-way or succeeds), a failed rename leaves
 * no temporary file, symlinks are followed, FIFOs written directly, 255-byte names work, checks
 * before the work, all-or-nothing groups. */
#include "testutil.h"

#include <dirent.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <fcntl.h>
#include <unistd.h>
#include "io/image.h"
#include "io/output.h"


static int n_entries(const char *path) {
    DIR *d = opendir(path);
    if (!d) return -1;
    int n = 0;
    struct dirent *de;
    while ((de = readdir(d)))
        if (strcmp(de->d_name, ".") && strcmp(de->d_name, "..")) n++;
    closedir(d);
    return n;
}

/* The file's bytes equal data[0..len). */
static void assert_file(const char *path, const unsigned char *data, size_t len) {
    Err e;
    size_t n;
    unsigned char *got = read_file(path, &n, &e);
    if (!got) fail_msg("%s", e.msg);
    assert_int_equal(n, len);
    assert_memory_equal(got, data, len);
    free(got);
}

static void fill(unsigned char *b, size_t n, unsigned seed) {
    for (size_t i = 0; i < n; i++) b[i] = (unsigned char)(i * 131 + seed * 7 + (i >> 8));
}

/* Write path in a child process whose file size limit is `limit` bytes; returns the child's
 * exit status: 0 if output_write_file failed cleanly, 1 if it succeeded. */
static int write_limited(const char *path, const unsigned char *data, size_t len, rlim_t limit) {
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        struct rlimit rl = {limit, limit};
        setrlimit(RLIMIT_FSIZE, &rl);
        Err e;
        _exit(output_write_file(path, data, len, &e) == 0);
    }
    int status;
    waitpid(pid, &status, 0);
    return WIFEXITED(status) ? WEXITSTATUS(status) : 100 + WTERMSIG(status);
}

static void test_replace_is_atomic(void **state) {
    (void)state;
    enum { OLD = 20000, NEW = 30000 };
    static unsigned char old[OLD], new[NEW];
    fill(old, OLD, 1);
    fill(new, NEW, 2);
    const char *p = test_in_dir("out.png"), *link_path = test_in_dir("reader.png");
    Err e;
    if (output_write_file(p, old, OLD, &e)) fail_msg("%s", e.msg);
    assert_int_equal(link(p, link_path), 0);   /* a reader holding the old file */

    /* a write that fails part-way (file size limit below the new size) changes nothing */
    assert_int_equal(write_limited(p, new, NEW, 4096), 0);
    assert_file(p, old, OLD);
    assert_file(link_path, old, OLD);
    assert_int_equal(n_entries(test_dir), 2);        /* no temp file left */

    /* a write that succeeds: the path has the new bytes, the reader still the old ones */
    if (output_write_file(p, new, NEW, &e)) fail_msg("%s", e.msg);
    assert_file(p, new, NEW);
    assert_file(link_path, old, OLD);
    struct stat a, b;
    assert_int_equal(stat(p, &a), 0);
    assert_int_equal(stat(link_path, &b), 0);
    assert_int_not_equal(a.st_ino, b.st_ino);
    assert_int_equal(n_entries(test_dir), 2);
}

/* The rename into place fails (a directory took the file's place after it was opened): the
 * error says so, and the temporary file is removed. */
static void test_rename_fails(void **state) {
    (void)state;
    const char *p = test_in_dir("out.png");
    Err e;
    AtomicFile a;
    if (atomic_open(&a, p, &e)) fail_msg("%s", e.msg);
    assert_int_equal(fwrite("data", 1, 4, a.f), 4);
    assert_int_equal(mkdir(p, 0700), 0);
    assert_int_not_equal(atomic_commit(&a, &e), 0);
    assert_non_null(strstr(e.msg, "is a directory"));
    assert_int_equal(n_entries(test_dir), 1);   /* the directory alone: no temp file */
    assert_int_equal(n_entries(p), 0);
}

static void test_write_error_message(void **state) {
    (void)state;
    static unsigned char data[50000];
    const char *p = test_in_dir("big.png");
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {   /* the message says why, names the file, and nothing is left */
        struct rlimit rl = {1000, 1000};
        setrlimit(RLIMIT_FSIZE, &rl);
        Err e = {{0}};
        int rc = output_write_file(p, data, sizeof data, &e);
        _exit(rc != 0 && strstr(e.msg, p) == e.msg && strstr(e.msg, "File too large") ? 0 : 1);
    }
    int status;
    waitpid(pid, &status, 0);
    assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    assert_int_equal(n_entries(test_dir), 0);
}

static void test_symlink_followed(void **state) {
    (void)state;
    unsigned char a[100], b[200];
    fill(a, sizeof a, 3);
    fill(b, sizeof b, 4);
    Err e;
    const char *target = test_in_dir("target.png"), *lnk = test_in_dir("link.png");
    if (output_write_file(target, a, sizeof a, &e)) fail_msg("%s", e.msg);
    assert_int_equal(symlink("target.png", lnk), 0);   /* relative to the link's directory */
    if (output_write_file(lnk, b, sizeof b, &e)) fail_msg("%s", e.msg);
    struct stat st;
    assert_int_equal(lstat(lnk, &st), 0);
    assert_true(S_ISLNK(st.st_mode));                  /* the link is kept */
    assert_file(target, b, sizeof b);                  /* its target replaced */
    /* a dangling link: its target is created */
    const char *dangling = test_in_dir("dangling.png");
    assert_int_equal(symlink("made.png", dangling), 0);
    if (output_write_file(dangling, a, sizeof a, &e)) fail_msg("%s", e.msg);
    assert_int_equal(lstat(dangling, &st), 0);
    assert_true(S_ISLNK(st.st_mode));
    assert_file(test_in_dir("made.png"), a, sizeof a);
    assert_int_equal(n_entries(test_dir), 4);
    /* a loop of links: an error, not a hang */
    assert_int_equal(symlink("loop2", test_in_dir("loop1")), 0);
    assert_int_equal(symlink("loop1", test_in_dir("loop2")), 0);
    assert_int_not_equal(output_write_file(test_in_dir("loop1"), a, sizeof a, &e), 0);
    assert_non_null(strstr(e.msg, "symbolic links"));
}

static void test_fifo_written_directly(void **state) {
    (void)state;
    const char *p = test_in_dir("fifo");
    assert_int_equal(mkfifo(p, 0600), 0);
    int rd = open(p, O_RDONLY | O_NONBLOCK);   /* a reader, so the writer's open does not wait */
    assert_true(rd >= 0);
    unsigned char data[1000], got[1100];
    fill(data, sizeof data, 5);
    Err e;
    if (output_check(p, &e)) fail_msg("%s", e.msg);
    if (output_write_file(p, data, sizeof data, &e)) fail_msg("%s", e.msg);
    ssize_t n = read(rd, got, sizeof got);
    close(rd);
    assert_int_equal(n, sizeof data);
    assert_memory_equal(got, data, sizeof data);
    struct stat st;
    assert_int_equal(lstat(p, &st), 0);
    assert_true(S_ISFIFO(st.st_mode));   /* still the FIFO, not a regular file */
    assert_int_equal(n_entries(test_dir), 1);
}

static void test_long_names(void **state) {
    (void)state;
    char name[256];
    unsigned char data[10] = {1, 2, 3};
    Err e;
    for (int len = 249; len <= 255; len++) {
        memset(name, 'a' + len - 249, (size_t)len);
        name[len] = 0;
        if (output_check(test_in_dir(name), &e)) fail_msg("%d bytes: %s", len, e.msg);
        if (output_write_file(test_in_dir(name), data, sizeof data, &e)) fail_msg("%d bytes: %s", len, e.msg);
        if (output_write_file(test_in_dir(name), data, sizeof data, &e)) fail_msg("%d bytes, again: %s", len, e.msg);
        assert_file(test_in_dir(name), data, sizeof data);
    }
    assert_int_equal(n_entries(test_dir), 7);
}

static void test_checks(void **state) {
    (void)state;
    Err e;
    unsigned char data[4] = {0};
    /* a directory: said so, by check and by write */
    char d[600];   /* in_dir's buffers are reused */
    snprintf(d, sizeof d, "%s", test_in_dir("adir"));
    assert_int_equal(mkdir(d, 0700), 0);
    assert_int_not_equal(output_check(d, &e), 0);
    assert_non_null(strstr(e.msg, "is a directory"));
    assert_int_not_equal(output_write_file(d, data, sizeof data, &e), 0);
    assert_non_null(strstr(e.msg, "is a directory"));
    /* a missing directory */
    const char *p = test_in_dir("missing/x.png");
    assert_int_not_equal(output_check(p, &e), 0);
    assert_non_null(strstr(e.msg, "does not exist"));
    assert_true(strncmp(e.msg, p, strlen(p)) == 0);
    /* --outdir: a file is not a directory; a missing one whose parent is missing cannot be made */
    char f[600];
    snprintf(f, sizeof f, "%s", test_in_dir("file"));
    if (output_write_file(f, data, sizeof data, &e)) fail_msg("%s", e.msg);
    assert_int_not_equal(output_check_dir(f, &e), 0);
    assert_int_not_equal(output_check_dir(test_in_dir("missing/sub"), &e), 0);
    if (output_check_dir(test_in_dir("new"), &e)) fail_msg("%s", e.msg);   /* can be made */
    if (output_check_dir(d, &e)) fail_msg("%s", e.msg);
    if (output_check(test_in_dir("new.png"), &e)) fail_msg("%s", e.msg);
    assert_int_equal(n_entries(test_dir), 2);   /* the checks made nothing */
    assert_int_equal(n_entries(d), 0);
    /* channels the PNG writer cannot take are refused before the work */
    assert_int_not_equal(image_check_outputs(test_in_dir("g.png"), NULL, 0, 0, 2, &e), 0);
    assert_int_not_equal(image_check_outputs(test_in_dir("g.png"), NULL, 0, 0, 4, &e), 0);
    if (image_check_outputs(test_in_dir("g.png"), test_in_dir("tiles"), 0, 4, 3, &e)) fail_msg("%s", e.msg);
}

/* Two outputs on one file: the same name spelled otherwise, through a symlink, or "-" twice. */
static void test_same_output(void **state) {
    (void)state;
    char a[600], dotted[700], link_path[600], other[600];
    snprintf(a, sizeof a, "%s", test_in_dir("a.png"));
    snprintf(dotted, sizeof dotted, "%s/./sub/../a.png", test_dir);
    snprintf(link_path, sizeof link_path, "%s", test_in_dir("link.png"));
    snprintf(other, sizeof other, "%s", test_in_dir("b.png"));
    assert_int_equal(mkdir(test_in_dir("sub"), 0777), 0);
    assert_int_equal(symlink("a.png", link_path), 0);
    assert_true(output_same(a, dotted));       /* a.png need not exist yet */
    assert_true(output_same(link_path, a));
    assert_false(output_same(a, other));
    assert_true(output_same("-", "-"));
    assert_false(output_same("-", a));
    assert_false(output_same(a, "/nonexistent-dir/a.png"));
}

static void test_outdir_all_or_nothing(void **state) {
    (void)state;
    enum { N = 6 };
    static unsigned char imgs[N * 784];
    for (int k = 0; k < N; k++) fill(imgs + k * 784, 784, (unsigned)k);
    const char *grid = test_in_dir("grid.png"), *tiles = test_in_dir("tiles");
    Err e;
    unsigned char old[50];
    fill(old, sizeof old, 9);
    if (output_write_file(grid, old, sizeof old, &e)) fail_msg("%s", e.msg);
    /* tile 3 cannot be written (a directory is in its place): the grid and tiles 0-2 were
     * written already, and none of them may appear */
    assert_int_equal(mkdir(tiles, 0700), 0);
    assert_int_equal(mkdir(test_in_dir("tiles/sample_00003.png"), 0700), 0);
    assert_int_not_equal(image_write_set(grid, tiles, imgs, N, 28, 28, 1, &e), 0);
    assert_non_null(strstr(e.msg, "sample_00003.png: is a directory"));
    assert_file(grid, old, sizeof old);                 /* the old grid kept */
    assert_int_equal(n_entries(tiles), 1);              /* no tiles, no temp files */
    assert_int_equal(n_entries(test_dir), 2);
    assert_int_equal(rmdir(test_in_dir("tiles/sample_00003.png")), 0);
    /* then all of it */
    if (image_write_set(grid, tiles, imgs, N, 28, 28, 1, &e)) fail_msg("%s", e.msg);
    assert_int_equal(n_entries(tiles), N);
    unsigned char back[784];
    if (image_read_png(test_in_dir("tiles/sample_00003.png"), back, 28, 28, 1, &e)) fail_msg("%s", e.msg);
    assert_memory_equal(back, imgs + 3 * 784, 784);
    /* a group that made its directory removes it again on failure */
    OutputGroup g = {0};
    const char *made = test_in_dir("made");
    if (output_group_mkdir(&g, made, &e)) fail_msg("%s", e.msg);
    if (output_group_add(&g, test_in_dir("made/a.png"), old, sizeof old, &e)) fail_msg("%s", e.msg);
    assert_int_not_equal(output_group_add(&g, tiles, old, sizeof old, &e), 0);
    output_group_abort(&g);
    struct stat st;
    assert_int_not_equal(stat(made, &st), 0);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        TEST_IN_DIR(test_same_output),
        TEST_IN_DIR(test_replace_is_atomic),
        TEST_IN_DIR(test_rename_fails),
        TEST_IN_DIR(test_write_error_message),
        TEST_IN_DIR(test_symlink_followed),
        TEST_IN_DIR(test_fifo_written_directly),
        TEST_IN_DIR(test_long_names),
        TEST_IN_DIR(test_checks),
        TEST_IN_DIR(test_outdir_all_or_nothing),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
