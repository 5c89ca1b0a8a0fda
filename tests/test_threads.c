/* parallel_for: every item runs exactly once, on a thread index in range, never two at once on
 * one index, over many short loops in a row (a thread that wakes late must not take an item
 * of a finished loop), with 1 to 4 threads and with loops of 0, 1 and many items (past 2^20 - 1:
 * run in chunks); after pauses and items long enough that waiting threads sleep; also in a
 * fork()ed child. The adaptive
 * choice: loops run alone when the other threads only slow them down (as when another program
 * has their cores), and with them when they help. */
#define _GNU_SOURCE   /* sched_setaffinity, sched_getcpu */
#include "testutil.h"

#include <sched.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include "kernels/adapt.h"
#include "kernels/threads.h"

#define MAXN 5000
typedef struct {
    _Atomic int runs[MAXN];
    _Atomic int busy[64];     /* per thread index: items running now */
    _Atomic int bad_thread, overlap, by_others;
    int n;
} Count;

static void count_item(void *ctx, int item, int thread) {
    Count *c = ctx;
    if (thread < 0 || thread >= threads_count() || item < 0 || item >= c->n) { atomic_fetch_add(&c->bad_thread, 1); return; }
    if (atomic_fetch_add(&c->busy[thread], 1) != 0) atomic_fetch_add(&c->overlap, 1);
    for (volatile int spin = 0; spin < (item * 37) % 2000; spin++) {}   /* items of uneven length */
    atomic_fetch_add(&c->runs[item], 1);   /* at the end: an item still running counts 0 */
    if (thread) atomic_fetch_add(&c->by_others, 1);
    atomic_fetch_sub(&c->busy[thread], 1);
}

static void test_each_item_once(void **state) {
    (void)state;
    Count *c = malloc(sizeof *c);
    const int sizes[] = {0, 1, 2, 3, 7, 64, 100, MAXN};
    threads_adapt(0);   /* every loop on all the threads */
    int by_others = 0;
    for (int t = 1; t <= 4; t++) {
        assert_int_equal(threads_set(t), t);
        assert_int_equal(threads_count(), t);
        for (int rep = 0; rep < 300; rep++)
            for (size_t k = 0; k < sizeof sizes / sizeof *sizes; k++) {
                int n = sizes[k];
                if (n == MAXN && rep % 50) continue;
                memset(c, 0, sizeof *c);
                c->n = n;
                parallel_for(n, count_item, c, n);
                for (int i = 0; i < n; i++)
                    if (atomic_load(&c->runs[i]) != 1)
                        fail_msg("%d threads, loop of %d items: item %d ran %d times", t, n, i, atomic_load(&c->runs[i]));
                assert_int_equal(atomic_load(&c->bad_thread), 0);
                assert_int_equal(atomic_load(&c->overlap), 0);
                by_others += atomic_load(&c->by_others);
            }
    }
    assert_true(by_others > 0);   /* the other threads did take items: the test saw them at work */
    threads_adapt(1);
    free(c);
}

/* A loop of more items than one loop takes at a time (2^20 - 1, threads.c) runs as several:
 * every item still runs exactly once. Lengths: 2^20 - 1 exactly, one more, two chunks and 3. */
typedef struct { atomic_uchar *runs; int n; _Atomic int bad; } Long;
static void long_item(void *ctx, int item, int thread) {
    Long *l = ctx;
    if (item < 0 || item >= l->n || thread < 0 || thread >= threads_count()) atomic_fetch_add(&l->bad, 1);
    else atomic_fetch_add(&l->runs[item], 1);
}

static void test_long_loop(void **state) {
    (void)state;
    const int most = (1 << 20) - 1, sizes[] = {most, most + 1, 2 * most + 3};
    threads_adapt(0);
    for (int t = 1; t <= 3; t++) {
        assert_int_equal(threads_set(t), t);
        for (size_t k = 0; k < sizeof sizes / sizeof *sizes; k++) {
            Long l = {calloc((size_t)sizes[k], 1), sizes[k], 0};
            assert_non_null(l.runs);
            parallel_for(l.n, long_item, &l, l.n);
            assert_int_equal(atomic_load(&l.bad), 0);
            for (int i = 0; i < l.n; i++)
                if (atomic_load(&l.runs[i]) != 1)
                    fail_msg("%d threads, loop of %d items: item %d ran %d times", t, l.n, i, atomic_load(&l.runs[i]));
            free(l.runs);
        }
    }
    threads_adapt(1);
    threads_set(0);
}

/* Loops of n items for `secs` seconds: how many loops ran, and the share of the items that the
 * other threads took. */
typedef struct { _Atomic long mine, others; int slow_others; long work; double slow_secs, share; } Share;
static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}
static void spin(double secs) {
    double t = now();
    while (now() - t < secs) {}
}
static void share_item(void *ctx, int item, int thread) {
    (void)item;
    Share *s = ctx;
    if (thread && s->slow_others) {   /* a worker that loses its core for 2 ms with an item in hand */
        nanosleep(&(struct timespec){0, 2000000}, NULL);
    } else if (thread && s->slow_secs > 0) {   /* a worker far slower than the caller, awake throughout */
        spin(s->slow_secs);
    } else if (s->work) {   /* a fixed amount of arithmetic: takes longer when the core is shared */
        volatile long k = 0;
        while (k < s->work) k++;
    } else {
        spin(5e-6);
    }
    atomic_fetch_add(thread ? &s->others : &s->mine, 1);
}
static long loops_for(Share *s, int n, double secs) {
    long loops = 0;
    atomic_store(&s->mine, 0);
    atomic_store(&s->others, 0);
    for (double t0 = now(); now() - t0 < secs; loops++) parallel_for(n, share_item, s, n);
    s->share = (double)atomic_load(&s->others) / (atomic_load(&s->mine) + atomic_load(&s->others));
    return loops;
}

static void test_alone_when_others_slow(void **state) {
    (void)state;
    threads_set(2);
    Share s = {.slow_others = 1};
    /* at least 1.5x in one of three tries: a policy that never goes alone gives about 1x in
     * each; a machine busy with other work slows the caller's own loops too, now and then
     * (test_policy_simulated holds the policy exactly) */
    long together, adaptive;
    int tries = 0;
    do {
        threads_adapt(0);   /* every loop waits for the slow thread's item, if it took one */
        together = loops_for(&s, 8, 0.6);
        threads_adapt(1);
        loops_for(&s, 8, 1.0);   /* the first trial runs the loops alone, and wins */
        adaptive = loops_for(&s, 8, 0.6);
    } while (2 * adaptive < 3 * together && ++tries < 3);
    if (2 * adaptive < 3 * together) fail_msg("%ld loops adaptive, %ld with the slow thread", adaptive, together);
}

/* A job of a fraction of a second decides early: the first period is short, so the loops run
 * alone long before the job ends. The others take 200 us an item, the caller 5: a loop waits
 * for them, but less than a stall (threads.c), which would end the period early by itself.
 * Set against the caller alone in the same 0.2 s (a busy machine slows both alike): with a
 * first period as long as the later ones (0.25 s) the job waits throughout, at 0.2 of that. */
static void test_short_job_decides_early(void **state) {
    (void)state;
    Share s = {.slow_secs = 200e-6};
    long alone, adaptive;
    int tries = 0;
    do {   /* best of three: another process's burst can take a core from either 0.2 s */
        threads_set(1);
        alone = loops_for(&s, 8, 0.2);
        threads_set(2);   /* a fresh plan, as a new job starts with */
        threads_adapt(1);
        adaptive = loops_for(&s, 8, 0.2);
        printf("a fresh job's first 0.2 s: %ld loops adaptive, %ld alone\n", adaptive, alone);
    } while (adaptive < alone / 2 && ++tries < 3);
    if (adaptive < alone / 2) fail_msg("%ld loops in a fresh job's first 0.2 s, %ld alone", adaptive, alone);
}

/* Whether two threads do run at once now, for loops of s's items (a shared host may give this
 * process less): two threads, adaptive from here, or 0 (the caller skips its test). */
static int two_cores_now(Share *s) {
    if (threads_usable_cores() < 2) return 0;
    threads_set(1);
    long one = loops_for(s, 16, 0.3);
    threads_set(2);
    threads_adapt(0);
    long two = loops_for(s, 16, 0.3);
    threads_adapt(1);
    if (two < 1.3 * one) printf("skipped: two threads ran %.2fx as many loops as one (a busy or shared machine)\n", (double)two / one);
    return two >= 1.3 * one;
}

static void test_together_when_others_help(void **state) {
    (void)state;
    Share s = {.work = 1 << 16};   /* tens of microseconds an item */
    if (!two_cores_now(&s)) skip();
    loops_for(&s, 16, 1.0);
    loops_for(&s, 16, 1.0);
    if (s.share < 0.15) fail_msg("the second thread took only %.1f%% of the items", 100 * s.share);
}

/* Two threads, every loop on both; a fresh count of n items for count_item. */
static Count *two_threads_counting(int n) {
    threads_adapt(0);
    threads_set(2);
    Count *c = calloc(1, sizeof *c);
    c->n = n;
    return c;
}

/* Waiting by sleeping: loops posted after a pause longer than the workers spin (they sleep on a
 * futex and must be woken), and items that keep the caller waiting past its own spin (it sleeps
 * until a worker's report wakes it). Every item once, all finished when the loop returns, no
 * hang (SIGALRM ends a test that waits for ever). */
static void nap_item(void *ctx, int item, int thread) {
    if (item % 3 == 0) nanosleep(&(struct timespec){0, 200000}, NULL);   /* 0.2 ms: past any spin */
    count_item(ctx, item, thread);
}

static void test_sleep_and_wake(void **state) {
    (void)state;
    Count *c = calloc(1, sizeof *c);
    threads_adapt(0);
    threads_set(3);
    alarm(60);
    int by_others = 0;
    for (int rep = 0; rep < 200; rep++) {
        nanosleep(&(struct timespec){0, 300000}, NULL);   /* 0.3 ms: the workers go to sleep */
        memset(c, 0, sizeof *c);
        c->n = 7;
        parallel_for(c->n, nap_item, c, c->n);
        for (int i = 0; i < c->n; i++)
            if (atomic_load(&c->runs[i]) != 1) fail_msg("loop %d: item %d ran %d times", rep, i, atomic_load(&c->runs[i]));
        assert_int_equal(atomic_load(&c->overlap), 0);
        by_others += atomic_load(&c->by_others);
    }
    alarm(0);
    assert_true(by_others > 0);
    threads_adapt(1);
    free(c);
}

/* A fork()ed child (compare measures in children) has its own workers. */
static void test_fork(void **state) {
    (void)state;
    Count *c = two_threads_counting(64);
    parallel_for(c->n, count_item, c, c->n);   /* the parent's workers are running */
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        int ok = 1, by_others = 0;
        struct timespec t0, t;
        clock_gettime(CLOCK_MONOTONIC, &t0);
        /* 200 loops, and on until a worker has taken an item: on a loaded machine the caller
         * can take all 64 before a worker gets a core, for many loops in a row */
        for (int rep = 0; ok && (rep < 200 || !by_others); rep++) {
            clock_gettime(CLOCK_MONOTONIC, &t);
            if (t.tv_sec - t0.tv_sec > 20) break;
            memset(c, 0, sizeof *c);
            c->n = 64;
            parallel_for(c->n, count_item, c, c->n);
            for (int i = 0; i < c->n; i++) ok &= atomic_load(&c->runs[i]) == 1;
            by_others += atomic_load(&c->by_others);
        }
        _exit(ok && by_others > 0 ? 0 : 1);
    }
    int st = 0;
    assert_int_equal(waitpid(pid, &st, 0), pid);
    assert_true(WIFEXITED(st));
    assert_int_equal(WEXITSTATUS(st), 0);
    threads_adapt(1);
    free(c);
}

/* The usable cores are the affinity mask's (taskset, cpusets), not every core online; the
 * default thread count is theirs. */
static void test_usable_cores(void **state) {
    (void)state;
    int n = threads_usable_cores();
    assert_true(n >= 1);
    assert_int_equal(threads_set(0), n);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        cpu_set_t one;
        CPU_ZERO(&one);
        CPU_SET(sched_getcpu(), &one);
        _exit(sched_setaffinity(0, sizeof one, &one) == 0 && threads_usable_cores() == 1 ? 0 : 1);
    }
    int status;
    waitpid(pid, &status, 0);
    assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
}

/* LINGEN_PROFILE's table: each kind of loop by file and function, its calls, items and time,
 * the longest first, and the time outside the loops; every loop counted once, whether it ran
 * with the other threads or alone. */
static void sleepy_item(void *ctx, int item, int thread) {
    (void)ctx, (void)item, (void)thread;
    struct timespec t = {0, 5 * 1000 * 1000};
    nanosleep(&t, NULL);   /* 5 ms */
}

static void test_profile(void **state) {
    (void)state;
    Count *c = two_threads_counting(10);
    threads_profile(1);
    for (int k = 0; k < 3; k++) parallel_for(c->n, count_item, c, c->n);
    for (int k = 0; k < 2; k++) parallel_for(1, sleepy_item, c, 1);   /* one item: the caller alone */
    struct timespec pause = {0, 20 * 1000 * 1000};
    nanosleep(&pause, NULL);   /* 20 ms outside the loops */
    char text[4096] = "";
    FILE *f = tmpfile();
    threads_profile_print(f);
    rewind(f);
    size_t got = fread(text, 1, sizeof text - 1, f);
    fclose(f);
    text[got] = 0;
    threads_profile(0);
    printf("%s", text);
    long calls = 0, items = 0;
    double secs = 0, other = 0;
    const char *line = strstr(text, "tests/test_threads.c:count_item ");
    assert_non_null(line);
    assert_int_equal(sscanf(line + strlen("tests/test_threads.c:count_item"), "%ld %ld %lf", &calls, &items, &secs), 3);
    assert_int_equal(calls, 3);
    assert_int_equal(items, 30);
    line = strstr(text, "tests/test_threads.c:sleepy_item ");
    assert_non_null(line);
    assert_int_equal(sscanf(line + strlen("tests/test_threads.c:sleepy_item"), "%ld %ld %lf", &calls, &items, &secs), 3);
    assert_int_equal(calls, 2);
    assert_int_equal(items, 2);
    assert_true(secs >= 0.0095 && secs < 1);   /* its 10 ms of sleep */
    assert_true(strstr(text, "sleepy_item") < strstr(text, "count_item"));   /* the longest first */
    line = strstr(text, "other (outside the loops)");
    assert_non_null(line);
    assert_int_equal(sscanf(line + strlen("other (outside the loops)"), "%lf", &other), 1);
    assert_true(other >= 0.019);
    for (int i = 0; i < c->n; i++) assert_int_equal(c->runs[i], 3);
    free(c);
}

/* threads_even_share: a share only where it covers n exactly, one a thread, at least min each,
 * and only with several threads; 0 in every other case. */
static void test_even_share(void **state) {
    (void)state;
    for (int t = 1; t <= 4; t++) {
        threads_set(t);
        for (int n = 0; n <= 40; n++)
            for (int min = 1; min <= 3; min++) {
                int s = threads_even_share(n, min);
                if (s) assert_true(t > 1 && s * t == n && s >= min);
                else assert_true(t == 1 || n == 0 || n % t != 0 || n / t < min);
            }
    }
    threads_set(0);
}

/* item_slice: the items of a loop cover 0 .. n-1 once each, in order, every one but the last
 * `per` long; items_of counts them. */
static void test_slices(void **state) {
    (void)state;
    const int ns[] = {0, 1, 5, 16, 17, 100}, pers[] = {1, 3, 16, 64};
    for (size_t a = 0; a < sizeof ns / sizeof *ns; a++)
        for (size_t b = 0; b < sizeof pers / sizeof *pers; b++) {
            int n = ns[a], per = pers[b], items = items_of(n, per), next = 0;
            assert_int_equal(items, n == 0 ? 0 : (n - 1) / per + 1);
            for (int item = 0; item < items; item++) {
                Slice s = item_slice(item, per, n);
                assert_int_equal(s.lo, next);
                assert_true(s.hi > s.lo);
                assert_true(s.hi - s.lo == per || (item == items - 1 && s.hi == n));
                next = s.hi;
            }
            assert_int_equal(next, n);
            Slice past = item_slice(items, per, n);   /* an item past the end is empty */
            assert_int_equal(past.lo, past.hi);
        }
}

/* The adaptive policy (adapt.h) on a clock of the test's own: loops of two kinds, each taking a
 * set time alone and another with the others; `secs` of simulated time. Returns the loops run
 * with the others in the last second, of the loops in it. */
static double simulate(Policy *p, double alone, double together, double secs, long *n_last) {
    static const char kinds[2] = {0};
    double now = 0, last_with = 0;
    long last = 0;
    while (now < secs) {
        int k = (int)(now * 1e4) & 1;   /* two kinds of loop, alternating */
        LoopKind *e = policy_kind(p, &kinds[k], 64, 1e5 * (k + 1));
        int with = policy_choose(p, now);
        double t = with ? together : alone;
        policy_record(p, e, with, t);
        now += t;
        if (now > secs - 1) last++, last_with += with;
    }
    *n_last = last;
    return last_with;
}

static void test_policy_simulated(void **state) {
    (void)state;
    long n;
    Policy p = POLICY_INIT;
    /* the others slow the loops down (no core for them): alone within the first period and trial */
    double with = simulate(&p, 100e-6, 400e-6, 2, &n);
    assert_int_equal(p.best, 0);
    assert_true(with < 0.05 * n);   /* in the last second: trials only, and they come ever less often */
    /* the others help: with them throughout, the trials (alone) lose */
    p = (Policy)POLICY_INIT;
    with = simulate(&p, 400e-6, 100e-6, 30, &n);
    assert_int_equal(p.best, 1);
    assert_true(with > 0.95 * n);
    assert_true(p.gap > 4.0);   /* a choice that holds: the gap between trials has doubled up */
    /* the machine changes (another program leaves): the next trial with the others wins */
    p = (Policy)POLICY_INIT;
    simulate(&p, 100e-6, 400e-6, 3, &n);
    assert_int_equal(p.best, 0);
    double t0 = p.end + 1;   /* from the next period on, together is 4x faster */
    Policy q = p;
    for (double now = t0; now < t0 + 20; ) {
        static const char kind;
        LoopKind *e = policy_kind(&q, &kind, 64, 1e5);
        int w = policy_choose(&q, now);
        double t = w ? 100e-6 : 400e-6;
        policy_record(&q, e, w, t);
        now += t;
    }
    assert_int_equal(q.best, 1);
    /* off: always with the others */
    p = (Policy)POLICY_INIT;
    p.off = 1;
    with = simulate(&p, 100e-6, 400e-6, 2, &n);
    assert_true(with == n);
}

/* A stall (a long wait for the others, longer than the caller's own share) ends the period at
 * once: the trial alone starts at the next loop, not a period later. */
static void test_policy_stall(void **state) {
    (void)state;
    Policy p = POLICY_INIT;
    static const char kind;
    double now = 0;
    for (int i = 0; i < 300; i++) {   /* past the first period and trial, into the second period */
        LoopKind *e = policy_kind(&p, &kind, 8, 1);
        int w = policy_choose(&p, now);
        policy_record(&p, e, w, 100e-6);
        now += 100e-6;
    }
    assert_int_equal(p.now, 1);
    assert_true(p.end > now + 0.1);   /* the period runs on */
    policy_wait(&p, 50e-6, 5e-3, now);  /* 5 ms waited after 50 us of its own */
    assert_true(p.end <= now);
    assert_int_equal(policy_choose(&p, now + 1e-6), 0);   /* the trial: alone */
    policy_wait(&p, 50e-6, 1e-3, now);  /* waits in a trial change nothing */
    assert_int_equal(p.in_trial, 1);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_profile),
        cmocka_unit_test(test_each_item_once),
        cmocka_unit_test(test_sleep_and_wake),
        cmocka_unit_test(test_fork),
        cmocka_unit_test(test_alone_when_others_slow),
        cmocka_unit_test(test_short_job_decides_early),
        cmocka_unit_test(test_together_when_others_help),
        cmocka_unit_test(test_usable_cores),
        cmocka_unit_test(test_even_share),
        cmocka_unit_test(test_slices),
        cmocka_unit_test(test_policy_simulated),
        cmocka_unit_test(test_policy_stall),
        cmocka_unit_test(test_long_loop),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
