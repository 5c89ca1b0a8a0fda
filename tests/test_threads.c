/* parallel_for: every item runs exactly once, on a thread index in range, never two at once on
 * one index, over many short loops in a row (a thread that wakes late must not take an item
 * of a finished loop), with 1 to 4 threads and with loops of 0, 1 and many items. */
#include "testutil.h"

#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include "threads.h"

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

static void test_usable_cores(void **state) {
    (void)state;
    int n = threads_usable_cores();
    assert_true(n >= 1);
    assert_int_equal(threads_set(0), n);   /* the default: the cores this process may use */
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_each_item_once),
        cmocka_unit_test(test_usable_cores),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
