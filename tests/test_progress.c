/* The progress line: nothing at all when stderr is not a terminal; on a terminal (a pty here)
 * one line redrawn with '\r', rate-limited, ended by a newline; counting positions, it moves
 * before the first image is finished and gives the rate in images/s; or it goes to a function. */
#define _XOPEN_SOURCE 700    /* posix_openpt */
#include "testutil.h"

#include <fcntl.h>
#include <string.h>
#include <unistd.h>
#include "io/progress.h"

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

/* What the line shows on a terminal for 4 images of 784 positions, 10 s in, after one update at
 * `done` positions, the process doing `share` of the job (an MPI rank's), shown or not. */
static void draw_positions(double share, int show, double done, char *buf, size_t cap) {
    int slave, master = open_pty(&slave);
    fflush(stderr);
    int saved = dup(2);
    assert_true(saved >= 0 && dup2(slave, 2) >= 0);
    Progress p;
    progress_start_positions(&p, "sampling", 4, 784);
    assert_int_equal(p.total, 3136);
    progress_share(&p, share, show);
    p.t0 -= 10;   /* as if started 10 s ago */
    progress_update(&p, done);
    progress_end(&p);
    fflush(stderr);
    assert_true(dup2(saved, 2) >= 0);
    close(saved);
    close(slave);
    read_pty(master, buf, cap);
}

/* Half way through every image, none finished, the line says 1568 of 3136 positions; 10 s in,
 * that is 156.8 positions/s = 0.2 images/s, 10 s to go. */
static void assert_half_way(double share, double done) {
    char buf[1024];
    draw_positions(share, 1, done, buf, sizeof buf);
    if (!strstr(buf, "sampling 1568/3136 positions [===============>              ] 0.20 images/s ETA 10s"))
        fail_msg("progress line: '%s'", buf);
}

/* All 4 images in one batch, 1568 positions done. */
static void test_positions(void **state) {
    (void)state;
    assert_half_way(1, 1568);
}

/* One rank's half of the job, its 784 positions half done: the same line, for the whole job;
 * another rank, told not to show, draws nothing on its terminal. */
static void test_share(void **state) {
    (void)state;
    assert_half_way(0.5, 784);
    char buf[1024];
    draw_positions(0.5, 0, 784, buf, sizeof buf);
    if (buf[0]) fail_msg("a rank not shown drew: '%s'", buf);
}

/* Reported to a function (a library's caller): every update, with done (of the whole job, for a
 * share) and the total, and nothing drawn even on a terminal. */
typedef struct { int calls; double done, total; } Seen;
static void seen(void *user, double done, double total) {
    Seen *s = user;
    s->calls++;
    s->done = done;
    s->total = total;
}

static void test_report_to(void **state) {
    (void)state;
    int slave, master = open_pty(&slave);
    fflush(stderr);
    int saved = dup(2);
    assert_true(dup2(slave, 2) >= 0);
    Seen s = {0, 0, 0};
    Progress p;
    progress_start_positions(&p, "sampling", 4, 784);
    progress_share(&p, 0.5, 1);
    progress_report_to(&p, seen, &s);
    for (int i = 1; i <= 10; i++) progress_update(&p, i * 100.0);
    progress_end(&p);
    fflush(stderr);
    assert_true(dup2(saved, 2) >= 0);
    close(saved);
    close(slave);
    char buf[256];
    assert_int_equal(read_pty(master, buf, sizeof buf), 0);
    assert_int_equal(s.calls, 10);
    assert_true(s.done == 2000.0 && s.total == 4.0 * 784);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_silent_when_not_a_tty),
        cmocka_unit_test(test_line_on_a_terminal),
        cmocka_unit_test(test_positions),
        cmocka_unit_test(test_share),
        cmocka_unit_test(test_report_to),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
