/* Resource limits: the parsers, the batch arithmetic and its messages, and the memory this
 * process can get, under an address-space limit too. */
#include "testutil.h"

#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>
#include "io/reslimits.h"

/* ASan reserves terabytes of address space: RLIMIT_AS cannot be tested under it. */
#if defined(__SANITIZE_ADDRESS__)
#define UNDER_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define UNDER_ASAN 1
#endif
#endif

static void assert_contains(const char *s, const char *part) {
    if (!strstr(s, part)) fail_msg("'%s' not in '%s'", part, s);
}

static void test_parse_meminfo(void **state) {
    (void)state;
    const char *text = "MemTotal:       24683656 kB\nMemFree:        20000000 kB\n"
                       "MemAvailable:   22619888 kB\nBuffers:          100000 kB\n";
    assert_int_equal(reslimits_parse_meminfo(text), (size_t)22619888 * 1024);
    assert_int_equal(reslimits_parse_meminfo("MemTotal: 1 kB\n"), 0);           /* old kernels */
    assert_int_equal(reslimits_parse_meminfo("MemAvailable: lots\n"), 0);
    assert_int_equal(reslimits_parse_meminfo("MemAvailable: 4096\n"), 4096);    /* no unit: bytes */
    assert_int_equal(reslimits_parse_meminfo(""), 0);
}

static void test_parse_cgroup_value(void **state) {
    (void)state;
    assert_int_equal(reslimits_parse_cgroup_value("1073741824\n"), (size_t)1 << 30);
    assert_int_equal(reslimits_parse_cgroup_value("max\n"), SIZE_MAX);
    assert_int_equal(reslimits_parse_cgroup_value(""), SIZE_MAX);
    assert_int_equal(reslimits_parse_cgroup_value("12 34\n"), SIZE_MAX);
}

static void test_max_batch(void **state) {
    (void)state;
    assert_int_equal(reslimits_max_batch(100, 10, 1000, 4096), 90);    /* 100 + 90 * 10 = 1000 exactly */
    assert_int_equal(reslimits_max_batch(100, 10, 999, 4096), 89);
    assert_int_equal(reslimits_max_batch(100, 10, 1000, 50), 50);      /* capped at what was asked */
    assert_int_equal(reslimits_max_batch(2000, 10, 1000, 50), 0);      /* the fixed part alone is too much */
    assert_int_equal(reslimits_max_batch(0, 0, 1000, 7), 7);
    assert_int_equal(reslimits_max_batch(0, SIZE_MAX, SIZE_MAX - 1, 7), 0);
}

static void test_check_batch(void **state) {
    (void)state;
    Err e = {{0}};
    const size_t MB = 1000 * 1000, GB = 1000 * MB;
    assert_int_equal(reslimits_check_batch(GB, 10 * MB, 64, 4 * GB, "sample", &e), 0);
    assert_int_equal(reslimits_check_batch(GB, 10 * MB, 64, SIZE_MAX, "sample", &e), 0);   /* unknown */
    /* the softmax MNIST model's KV cache, 12.8 MB an image, at --batch 4096 in 22.6 GB */
    assert_int_equal(reslimits_check_batch(50 * MB, 12845056, 4096, 22600 * MB, "sample", &e), -1);
    assert_contains(e.msg, "sample: batch 4096 needs 52.7 GB of memory, but only 22.6 GB is available");
    assert_contains(e.msg, "use --batch 1755 or less");
    assert_null(strchr(e.msg, '\n'));
    /* not even one */
    assert_int_equal(reslimits_check_batch(3 * GB, 12845056, 16, 2 * GB, "sample", &e), -1);
    assert_contains(e.msg, "needs 3.0 GB of memory even with --batch 1, but only 2.0 GB is available");
    /* needs beyond size_t: reported, not wrapped around */
    assert_int_equal(reslimits_check_batch(0, SIZE_MAX / 2, 4096, 8 * GB, "eval", &e), -1);
    assert_contains(e.msg, "eval: needs 9223372036.9 GB");
    assert_int_equal(reslimits_check_batch(0, SIZE_MAX / 1000, 4096, SIZE_MAX - 1, "eval", &e), -1);
    assert_contains(e.msg, "eval: batch 4096 needs 75557863725.9 GB");
    assert_contains(e.msg, "use --batch 1000 or less");
    assert_int_equal(reslimits_check_batch(GB, MB, 0, 1, "sample", &e), 0);   /* nothing to check */
}

static void test_available_memory(void **state) {
    (void)state;
    size_t a = reslimits_available_memory();
    long pages = sysconf(_SC_PHYS_PAGES), size = sysconf(_SC_PAGESIZE);
    assert_true(a > 0);
    if (pages > 0 && size > 0 && a != SIZE_MAX) assert_true(a <= (size_t)pages * (size_t)size);
}

/* Under ulimit -v the room left under the limit counts, whatever the machine has. */
#ifndef UNDER_ASAN   /* ASan reserves terabytes of address space: RLIMIT_AS cannot be tested under it */
static void test_rlimit_as(void **state) {
    (void)state;
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        long vm_pages = 0;
        FILE *f = fopen("/proc/self/statm", "r");
        if (!f || fscanf(f, "%ld", &vm_pages) != 1) _exit(2);
        fclose(f);
        size_t used = (size_t)vm_pages * (size_t)sysconf(_SC_PAGESIZE), room = (size_t)64 << 20;
        struct rlimit rl = {used + room, used + room};
        if (setrlimit(RLIMIT_AS, &rl)) _exit(3);
        size_t a = reslimits_available_memory();
        _exit(a > 0 && a <= room ? 0 : 1);
    }
    int st;
    assert_int_equal(waitpid(pid, &st, 0), pid);
    assert_true(WIFEXITED(st));
    assert_int_equal(WEXITSTATUS(st), 0);
}
#endif

/* Touching 64 MB raises the resident set by about that much; the peak is never below it. */
static void test_resident_bytes(void **state) {
    (void)state;
    double before = reslimits_resident_bytes();
    assert_true(before > 0);
    size_t n = 64u << 20;
    volatile char *p = malloc(n);
    assert_non_null((void *)p);
    for (size_t i = 0; i < n; i += 4096) p[i] = 1;
    double after = reslimits_resident_bytes();
    assert_true(after - before > 0.9 * n);
    assert_true(reslimits_peak_resident_bytes() >= after);
    free((void *)p);
}

/* --threads: capped at the usable cores, with a note, unless forced; 0 means all of them. */
static void test_pick_threads(void **state) {
    (void)state;
    char note[200];
    assert_int_equal(reslimits_pick_threads(0, 6, 0, note, sizeof note), 6);
    assert_string_equal(note, "");
    assert_int_equal(reslimits_pick_threads(4, 6, 0, note, sizeof note), 4);
    assert_string_equal(note, "");
    assert_int_equal(reslimits_pick_threads(1024, 2, 0, note, sizeof note), 2);
    assert_string_equal(note, "--threads 1024: only 2 cores are usable here, using 2 (set LINGEN_FORCE_THREADS=1 to run 1024)");
    assert_int_equal(reslimits_pick_threads(1024, 2, 1, note, sizeof note), 1024);
    assert_string_equal(note, "");
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_parse_meminfo),
        cmocka_unit_test(test_parse_cgroup_value),
        cmocka_unit_test(test_max_batch),
        cmocka_unit_test(test_check_batch),
        cmocka_unit_test(test_available_memory),
        cmocka_unit_test(test_resident_bytes),
        cmocka_unit_test(test_pick_threads),
#ifndef UNDER_ASAN
        cmocka_unit_test(test_rlimit_as),
#endif
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
