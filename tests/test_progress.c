/* The progress line: nothing at all when stderr is not a terminal; on a terminal (a pty here)
 * one line redrawn with '\r', rate-limited, ended by a newline; counting positions, it moves
 * before the first image is finished and gives the rate in images/s. */
#define _XOPEN_SOURCE 700    /* posix_openpt */
#include "testutil.h"

#include <fcntl.h>
#include <string.h>
#include <unistd.h>
#include "progress.h"

/* Run a progress sequence with fd 2 pointed at fd `to`; returns nothing, restores fd 2. */
static void run_progress(int to, long total, long steps) {
    fflush(stderr);
    int saved = dup(2);
    assert_true(saved >= 0);
    assert_true(dup2(to, 2) >= 0);
    Progress p;
    progress_start(&p, "sampling", total);
    for (long i = 1; i <= steps; i++) progress_update(&p, i);
    progress_end(&p);
    fflush(stderr);
    assert_true(dup2(saved, 2) >= 0);
    close(saved);
}

static void test_silent_when_not_a_tty(void **state) {
    (void)state;
    char path[] = "/tmp/lingen-test-progress-XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    run_progress(fd, 1000, 1000);
    assert_int_equal(lseek(fd, 0, SEEK_END), 0);
    close(fd);
    unlink(path);
}

/* A pseudo-terminal, as on every Linux this builds on: *slave for writing, returns the master. */
static int open_pty(int *slave) {
    int master = posix_openpt(O_RDWR | O_NOCTTY);
    assert_true(master >= 0);
    assert_int_equal(grantpt(master), 0);
    assert_int_equal(unlockpt(master), 0);
    *slave = open(ptsname(master), O_RDWR | O_NOCTTY);
    assert_true(*slave >= 0);
    return master;
}

/* Everything written to the pty so far, as a string in buf; closes the master. */
static size_t read_pty(int master, char *buf, size_t cap) {
    size_t n = 0;
    fcntl(master, F_SETFL, O_NONBLOCK);
    for (ssize_t r; n < cap - 1 && (r = read(master, buf + n, cap - 1 - n)) > 0;) n += (size_t)r;
    close(master);
    buf[n] = '\0';
    return n;
}

static void test_line_on_a_terminal(void **state) {
    (void)state;
    int slave, master = open_pty(&slave);
    run_progress(slave, 100000, 100000);   /* fast: the rate limit keeps this to a few redraws */
    close(slave);
    char buf[8192];
    size_t n = read_pty(master, buf, sizeof buf);
    int redraws = 0;
    for (size_t i = 0; i < n; i++) redraws += buf[i] == '\r' && buf[i + 1] != '\n';   /* the pty maps \n to \r\n */
    assert_true(redraws >= 1 && redraws <= 20);
    assert_non_null(strstr(buf, "sampling 100000/100000 [==============================]"));
    assert_non_null(strstr(buf, " /s"));
    assert_true(n >= 2 && buf[n - 1] == '\n');
}

/* 4 images of 784 positions in one batch: half way through every image, none finished, the line
 * says 1568 of 3136 positions; 10 s in, that is 156.8 positions/s = 0.2 images/s, 10 s to go. */
static void test_positions(void **state) {
    (void)state;
    int slave, master = open_pty(&slave);
    fflush(stderr);
    int saved = dup(2);
    assert_true(saved >= 0 && dup2(slave, 2) >= 0);
    Progress p;
    progress_start_positions(&p, "sampling", 4, 784);
    assert_int_equal(p.total, 3136);
    p.t0 -= 10;   /* as if started 10 s ago */
    progress_update(&p, 1568);
    progress_end(&p);
    fflush(stderr);
    assert_true(dup2(saved, 2) >= 0);
    close(saved);
    close(slave);
    char buf[1024];
    read_pty(master, buf, sizeof buf);
    if (!strstr(buf, "sampling 1568/3136 positions [===============>              ] 0.20 images/s ETA 10s"))
        fail_msg("progress line: '%s'", buf);
}

/* One rank's half of an MPI job: the line counts the whole job from this rank's part; a rank
 * told not to show draws nothing, terminal or not. */
static void test_share(void **state) {
    (void)state;
    int slave, master = open_pty(&slave);
    fflush(stderr);
    int saved = dup(2);
    assert_true(saved >= 0 && dup2(slave, 2) >= 0);
    Progress p, quiet;
    progress_start_positions(&p, "sampling", 4, 784);
    progress_share(&p, 0.5, 1);
    p.t0 -= 10;
    progress_update(&p, 784);   /* half of this rank's 1568 positions */
    progress_end(&p);
    progress_start(&quiet, "hidden", 10);
    progress_share(&quiet, 0.5, 0);
    progress_update(&quiet, 5);
    progress_end(&quiet);
    fflush(stderr);
    assert_true(dup2(saved, 2) >= 0);
    close(saved);
    close(slave);
    char buf[1024];
    read_pty(master, buf, sizeof buf);
    if (!strstr(buf, "sampling 1568/3136 positions [===============>              ] 0.20 images/s ETA 10s"))
        fail_msg("progress line: '%s'", buf);
    if (strstr(buf, "hidden")) fail_msg("a rank not shown drew: '%s'", buf);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_silent_when_not_a_tty),
        cmocka_unit_test(test_line_on_a_terminal),
        cmocka_unit_test(test_positions),
        cmocka_unit_test(test_share),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
