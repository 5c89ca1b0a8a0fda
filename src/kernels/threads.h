/* lingen's worker threads: a parallel loop that never waits long for a thread that is not running.
 *
 * A step of RNN sampling is some forty short parallel loops. With a fixed split and a barrier
 * at the end of each (OpenMP's parallel for), every loop waits for the slowest thread; when a
 * core is busy with another program, that thread is often not running at all, and each loop
 * waits a scheduler time slice for it. Here each thread starts on its own range of a loop's
 * items (the same ones at every step, so their weights stay in its cache), the calling thread
 * included, and then takes what is left of the others' ranges: a thread that does not get a
 * core in time holds the loop up by at most the item it has in hand. Where even that costs more
 * than the other threads give (a busy machine), the loops run on the calling thread alone.
 * Idle threads spin a moment (the next loop usually follows at once), then sleep in the kernel.
 * The other way, each thread taking a group of whole images through all of a step's layers as
 * MPI ranks do (no loop shared), is slower: each thread then reads every weight, not its share
 * of them (docs/speed.md, Threads). */
#ifndef LINGEN_THREADS_H
#define LINGEN_THREADS_H
#include <stdio.h>

/* Use n threads, the caller included (n <= 0: every core this process may run on). Call it
 * before the first loop, or between loops; returns the number in use. */
int threads_set(int n);
/* Threads in use (starting the default set on the first call). */
int threads_count(void);
/* n units (rows, row tiles) split into one contiguous share a thread, in thread order, as a
 * loop's items are dealt out: the units a thread gets where there are several threads, they
 * divide n evenly and each gets at least `min`; else 0. A loop whose items follow these shares
 * gives every thread the same units as every other such loop. */
int threads_even_share(int n, int min);
/* Cores this process may run on: sched_getaffinity (taskset, cgroup cpusets), and no more than
 * a cgroup v2 CPU quota allows (a container's --cpus). */
int threads_usable_cores(void);

/* on = 0: every loop uses all the threads, whether or not they help (tests); 1: the default. */
void threads_adapt(int on);

/* fn(ctx, item, thread) for item = 0 .. n_items-1, each exactly once, spread over the threads;
 * returns when all are done. thread is in 0 .. threads_count()-1 and no two items run on the
 * same thread at once (per-thread scratch). size tells loops of one fn and n_items apart that
 * do different work (say, their multiply-adds): the loops of one kind are timed together, to
 * judge whether the other threads help it (threads.c). Called from one thread, not from fn. */
typedef void (*ParallelFn)(void *ctx, int item, int thread);
void parallel_for_named(int n_items, ParallelFn fn, void *ctx, double size, const char *name);
#define parallel_for(n_items, fn, ctx, size) parallel_for_named(n_items, fn, ctx, size, __FILE__ ":" #fn)
/* The same where `worth` says the loop has work enough to hand out; else every item on the
 * calling thread, in order (a loop of little work costs more to hand out than it saves). */
void parallel_for_if_named(int worth, int n_items, ParallelFn fn, void *ctx, double size, const char *name);
#define parallel_for_if(worth, n_items, fn, ctx, size) \
    parallel_for_if_named(worth, n_items, fn, ctx, size, __FILE__ ":" #fn)

/* A loop over n things (rows, images, pairs) cut into items of `per` each: how many items, and
 * the range [lo, hi) item `item` takes (the last one short). Every loop slices this way. */
typedef struct { int lo, hi; } Slice;
static inline int items_of(int n, int per) { return (n + per - 1) / per; }
static inline Slice item_slice(int item, int per, int n) {
    long lo = (long)item * per, hi = lo + per;
    return (Slice){lo < n ? (int)lo : n, hi < n ? (int)hi : n};
}

/* Where the time goes, without a profiler: with LINGEN_PROFILE=1 in the environment (read at
 * the first loop), each kind of loop (file:function) counts its calls, items and wall time, and
 * the profile is printed to stderr at exit, with the time outside the loops (the caller's
 * serial work) as "other". threads_profile_print writes it now, to f. */
void threads_profile_print(FILE *f);
/* Count from now (on = 1: a fresh profile, printed only when asked), or not (0); tests. */
void threads_profile(int on);
#endif
