/* The progress line: nothing at all when stderr is not a terminal; on a terminal (a pty here)
 * one line redrawn with '\r', rate-limited, ended by a newline. */
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

static void test_line_on_a_terminal(void **state) {
    (void)state;
    int master = posix_openpt(O_RDWR | O_NOCTTY);
    assert_true(master >= 0);   /* a pseudo-terminal, as on every Linux this builds on */
    assert_int_equal(grantpt(master), 0);
    assert_int_equal(unlockpt(master), 0);
    int slave = open(ptsname(master), O_RDWR | O_NOCTTY);
    assert_true(slave >= 0);
    run_progress(slave, 100000, 100000);   /* fast: the rate limit keeps this to a few redraws */
    close(slave);

    char buf[8192];
    size_t n = 0;
    fcntl(master, F_SETFL, O_NONBLOCK);
    for (ssize_t r; n < sizeof buf - 1 && (r = read(master, buf + n, sizeof buf - 1 - n)) > 0;) n += (size_t)r;
    close(master);
    buf[n] = '\0';
    int redraws = 0;
    for (size_t i = 0; i < n; i++) redraws += buf[i] == '\r' && buf[i + 1] != '\n';   /* the pty maps \n to \r\n */
    assert_true(redraws >= 1 && redraws <= 20);
    assert_non_null(strstr(buf, "sampling 100000/100000 [==============================]"));
    assert_non_null(strstr(buf, " /s"));
    assert_true(n >= 2 && buf[n - 1] == '\n');
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_silent_when_not_a_tty),
        cmocka_unit_test(test_line_on_a_terminal),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
