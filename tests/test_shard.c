/* Splitting a job over MPI ranks (shard.h): every item in exactly one share, in rank order, the
 * shares even; and, built without MPI, one process that is the whole job. */
#include "testutil.h"

#include "engine/shard.h"

static void test_range_covers_in_order(void **state) {
    (void)state;
    const long ns[] = {0, 1, 2, 7, 16, 10000, 50001};
    for (size_t i = 0; i < sizeof ns / sizeof ns[0]; i++)
        for (int size = 1; size <= 9; size++) {
            long next = 0, least = ns[i], most = 0;
            for (int rank = 0; rank < size; rank++) {
                long first, count;
                shard_range(ns[i], rank, size, &first, &count);
                assert_int_equal(first, next);   /* contiguous, in rank order */
                next += count;
                if (count < least) least = count;
                if (count > most) most = count;
            }
            assert_int_equal(next, ns[i]);       /* every item once */
            assert_true(most - least <= 1);      /* even */
        }
}

/* 7 over 3 ranks: 3, 2, 2 (the first ranks take the remainder: rank 0 does the most) */
static void test_range_example(void **state) {
    (void)state;
    long first, count;
    shard_range(7, 0, 3, &first, &count);
    assert_int_equal(first, 0);
    assert_int_equal(count, 3);
    shard_range(7, 2, 3, &first, &count);
    assert_int_equal(first, 5);
    assert_int_equal(count, 2);
    shard_range(2, 2, 3, &first, &count);   /* fewer items than ranks: an empty share */
    assert_int_equal(count, 0);
}

static void test_one_process(void **state) {
    (void)state;
    int argc = 1;
    char *args[] = {"test", NULL}, **argv = args;
    shard_init(&argc, &argv);
    assert_int_equal(shard_rank(), 0);
    assert_int_equal(shard_size(), 1);
    assert_int_equal(shard_local_rank(), 0);
    assert_int_equal(shard_cores_shared(), 1);
    assert_int_equal(shard_agree(0), 0);
    assert_int_equal(shard_agree(1), 1);
    assert_int_equal(shard_max(143), 143);
    unsigned char buf[6] = {1, 2, 3, 4, 5, 6};
    assert_int_equal(shard_gather(buf, 3, 2), 3);
    assert_int_equal(buf[5], 6);   /* untouched */
    shard_barrier();
    assert_int_equal(shard_finish(7), 7);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_range_covers_in_order),
        cmocka_unit_test(test_range_example),
        cmocka_unit_test(test_one_process),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
