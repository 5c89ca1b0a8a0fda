/* lingen's worker threads (threads.h).
 *
 * A loop's items are dealt out in contiguous ranges, one per thread, so that a thread works on
 * the same items at every step (the same weight panels, still in its own cache) and takes them
 * without touching another core's cache line; a thread whose range is done takes items from
 * the back of the others' ranges, so a thread that is not running holds up at most the item it
 * has in hand. One word per range says what is left in it: the loop's generation, the range's
 * end and its next item. A thread takes an item by a compare-and-swap of that word, (gen, end,
 * i) to (gen, end, i+1) from the front or to (gen, end-1, i) from the back; the swap fails if the
 * word moved on, so a thread that read a finished loop's word takes nothing from it, and a
 * loop's function and context, written before its words, are the ones its items run with.
 * In the ordinary course of a loop no thread writes a cache line another thread writes: a worker
 * learns of a new loop from its own range's word, and counts the items it ran in its own word
 * (a running total); the loop is over when the caller's items and the workers' totals' growth
 * since the last loop add up to n. (A count shared by all threads would travel from core to
 * core at the end of every loop, and every loop's end would wait for it: docs/speed.md,
 * Threads.) A worker reports its own range's items before it looks at the others'.
 * Waiting (for a loop to start, for the last items to finish) spins for SPIN_SECONDS, then
 * sleeps on a futex: while threads sleep, another program or another of lingen's threads has
 * the core. */
#define _GNU_SOURCE
#include "io/settings.h"
#include "threads.h"

#include "adapt.h"

#include <limits.h>
#include <linux/futex.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#define MAX_THREADS 1024
#define SPIN_SECONDS 50e-6   /* longer than the gap between two loops of a step, far shorter than a time slice */
#define ITEM_BITS 20         /* items per loop: up to 2^20 - 1 at a time */
#define ITEM_MASK ((1u << ITEM_BITS) - 1)

static int n_threads;                    /* 0: not started */
static pthread_t workers[MAX_THREADS];
#define GEN(w) ((uint32_t)((w) >> (2 * ITEM_BITS)))
/* Thread t's words, 128 bytes apart: a core that fetches one cache line fetches the one beside it. */
static struct {
    _Alignas(128) _Atomic uint64_t w;    /* its range of the current loop: generation << 40 | end << 20 | next item */
    _Alignas(128) _Atomic uint64_t ran;  /* items it has run, all loops together (the caller's: unused) */
} slot[MAX_THREADS];
static uint64_t ran_before[MAX_THREADS]; /* the caller's: slot[t].ran when the last loop ended */
static uint32_t generation;              /* the current loop's */
static _Atomic(ParallelFn) job_fn;
static _Atomic(void *) job_ctx;
static _Atomic uint32_t posted;          /* loops posted: the sleeping workers' futex */
static _Atomic uint32_t reported;        /* items reported while the caller sleeps: its futex */
static _Atomic int sleepers, caller_asleep, stopping;

static void futex_wait(_Atomic uint32_t *p, uint32_t val) {
    syscall(SYS_futex, (uint32_t *)p, FUTEX_WAIT_PRIVATE, val, NULL, NULL, 0);
}
static void futex_wake(_Atomic uint32_t *p, int n) { syscall(SYS_futex, (uint32_t *)p, FUTEX_WAKE_PRIVATE, n, NULL, NULL, 0); }

static inline void relax(void) {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#endif
}

static double seconds(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* Whether the other threads help: adapt.h decides, from the loops' times. */
static Policy policy = POLICY_INIT;

/* LINGEN_PROFILE's counts (threads.h), per kind of loop: file:function */
#define PROFILE_KINDS 64
typedef struct { const char *name; long calls, items; double secs; } ProfileKind;
static ProfileKind profile[PROFILE_KINDS];
static int profiling = -1;   /* -1: not asked yet */
static double profile_start;

/* Take one item of range r, from the front (its own thread) or from the back; -1 if none is left.
 * The loop's function and context are read before the swap that takes the item (see above). */
static int take_one(int r, int front, ParallelFn *fn, void **ctx) {
    uint64_t w = atomic_load(&slot[r].w);
    for (;;) {
        uint32_t end = (uint32_t)(w >> ITEM_BITS) & ITEM_MASK, i = (uint32_t)w & ITEM_MASK;
        if (i >= end) return -1;
        *fn = atomic_load_explicit(&job_fn, memory_order_relaxed);
        *ctx = atomic_load_explicit(&job_ctx, memory_order_relaxed);
        uint64_t taken = front ? w + 1 : w - ((uint64_t)1 << ITEM_BITS);
        if (atomic_compare_exchange_weak(&slot[r].w, &w, taken)) return (int)(front ? i : end - 1);
    }
}

/* Run items of whatever loop is current until none is left in ranges k0 .. k1 - 1, counted from
 * this thread's own (k = 0: from its front) on to the others' (from their back); returns how
 * many it ran. */
static uint32_t take_items(int thread, int k0, int k1) {
    uint32_t ran = 0;
    for (int k = k0; k < k1; k++) {
        int r = (thread + k) % n_threads, item;
        ParallelFn fn;
        void *ctx;
        while ((item = take_one(r, k == 0, &fn, &ctx)) >= 0) fn(ctx, item, thread), ran++;
    }
    return ran;
}

/* Spin for SPIN_SECONDS or until done(arg); returns done(arg). */
static int spin_until(int (*done)(const void *), const void *arg) {
    double t0 = 0;
    for (int k = 1;; k++) {
        if (done(arg)) return 1;
        relax();
        if (k % 64) continue;
        double t = seconds();
        if (!t0) t0 = t;
        else if (t - t0 > SPIN_SECONDS) return done(arg);
    }
}

typedef struct { int thread; uint32_t gen; } Waiting;
static int loop_posted(const void *p) {   /* thread's word shows a loop other than gen, or lingen stops */
    const Waiting *w = p;
    return GEN(atomic_load(&slot[w->thread].w)) != w->gen || atomic_load_explicit(&stopping, memory_order_relaxed);
}

/* Until a loop other than gen is posted to thread. The caller posts a loop by its words, then
 * posted, then reads sleepers; a worker counts itself a sleeper, then reads posted, then its
 * word: one of the two sees the other's write. */
static void wait_for_loop(int thread, uint32_t gen) {
    Waiting w = {thread, gen};
    if (spin_until(loop_posted, &w)) return;
    atomic_fetch_add(&sleepers, 1);
    for (uint32_t p = atomic_load(&posted); !loop_posted(&w); p = atomic_load(&posted)) futex_wait(&posted, p);
    atomic_fetch_sub(&sleepers, 1);
}

static uint32_t gen_at_start;   /* the generation when the workers were started */

/* A worker has run `ran` more items: its total, then, as the caller may sleep, a wake. */
static void report(int thread, uint64_t *total, uint32_t ran) {
    if (!ran) return;
    atomic_store(&slot[thread].ran, *total += ran);
    if (atomic_load(&caller_asleep)) atomic_fetch_add(&reported, ran), futex_wake(&reported, 1);
}

static void *worker(void *arg) {
    int thread = (int)(intptr_t)arg;
    uint32_t seen = gen_at_start;   /* not the word now: a worker that first runs late must not miss a loop */
    uint64_t total = 0;
    for (;;) {
        wait_for_loop(thread, seen);
        if (atomic_load(&stopping)) return NULL;
        seen = GEN(atomic_load(&slot[thread].w));
        /* its own range, reported before it looks at the others': the loop may be over by then */
        report(thread, &total, take_items(thread, 0, 1));
        report(thread, &total, take_items(thread, 1, n_threads));
    }
}

/* The workers' items of the current loop, so far. */
static uint32_t reported_items(void) {
    uint64_t sum = 0;
    for (int t = 1; t < n_threads; t++) sum += atomic_load_explicit(&slot[t].ran, memory_order_acquire) - ran_before[t];
    return (uint32_t)sum;
}

typedef struct { uint32_t own, n; } Finish;
static int loop_done(const void *p) {
    const Finish *f = p;
    return f->own + reported_items() == f->n;
}

/* Until the workers have run the loop's items the caller did not (own of n); then the totals
 * are where the next loop counts from. */
static void wait_for_items(uint32_t own, uint32_t n) {
    Finish f = {own, n};
    while (!spin_until(loop_done, &f)) {
        atomic_store(&caller_asleep, 1);   /* a worker that reports from now on wakes us */
        atomic_thread_fence(memory_order_seq_cst);   /* before the reports are read again */
        uint32_t r = atomic_load(&reported);
        if (!loop_done(&f)) futex_wait(&reported, r);
        atomic_store(&caller_asleep, 0);
    }
    for (int t = 1; t < n_threads; t++) ran_before[t] = atomic_load_explicit(&slot[t].ran, memory_order_relaxed);
}

static void stop_workers(void) {
    if (n_threads <= 1) return;
    atomic_store(&stopping, 1);
    atomic_fetch_add(&posted, 1);
    futex_wake(&posted, INT_MAX);
    for (int t = 1; t < n_threads; t++) pthread_join(workers[t], NULL);
    atomic_store(&stopping, 0);
}

/* A cgroup v2 CPU quota (a container given 2 CPUs of a larger machine): cores' worth, or 0. */
static int quota_cores(void) {
    FILE *f = fopen("/sys/fs/cgroup/cpu.max", "r");
    long quota = 0, period = 0;
    int got = f && fscanf(f, "%ld %ld", &quota, &period) == 2;   /* "max 100000": no quota */
    if (f) fclose(f);
    return got && quota > 0 && period > 0 ? (int)((quota + period - 1) / period) : 0;
}

int threads_usable_cores(void) {
    cpu_set_t set;
    long n = sched_getaffinity(0, sizeof set, &set) == 0 ? CPU_COUNT(&set) : 0;
    if (n <= 0) n = sysconf(_SC_NPROCESSORS_ONLN);
    int q = quota_cores();
    if (q > 0 && q < n) n = q;
    return n > 0 ? (int)n : 1;
}

/* A fork()ed child (compare measures each row in one) has only the thread that forked: forget
 * the parent's workers, and the first loop in the child starts as many again. */
static int n_wanted;                     /* what threads_set was last asked for (0: every core) */
static void forked_child(void) {
    n_threads = 0;
    atomic_store(&sleepers, 0);
    atomic_store(&caller_asleep, 0);
    atomic_store(&stopping, 0);
    memset(profile, 0, sizeof profile);   /* the child's profile is its own work */
    profile_start = seconds();
}


int threads_set(int n) {
    static int atfork;
    if (!atfork) atfork = !pthread_atfork(NULL, NULL, forked_child);
    n_wanted = n;
    if (n <= 0) n = threads_usable_cores();
    if (n > MAX_THREADS) n = MAX_THREADS;
    if (n == n_threads) return n;
    policy_reset(&policy);   /* what was measured with other threads says nothing about these */
    stop_workers();
    n_threads = 1;
    gen_at_start = generation;
    for (int t = 0; t < n; t++) {   /* no loop posted yet to the new workers */
        atomic_store(&slot[t].w, (uint64_t)generation << (2 * ITEM_BITS));
        atomic_store(&slot[t].ran, 0), ran_before[t] = 0;
    }
    for (int t = 1; t < n; t++) {
        if (pthread_create(&workers[t], NULL, worker, (void *)(intptr_t)t)) {
            fprintf(stderr, "lingen: cannot start thread %d; going on with %d\n", t + 1, t);
            break;
        }
        n_threads = t + 1;
    }
    return n_threads;
}

int threads_count(void) { return n_threads ? n_threads : threads_set(n_wanted); }

int threads_even_share(int n, int min) {
    int t = threads_count();
    return t > 1 && n % t == 0 && n / t >= min && n > 0 ? n / t : 0;
}

void threads_adapt(int on) { policy.off = !on; }

/* A loop of more than ITEM_MASK items runs as several loops: items first + 0 .. */
typedef struct { ParallelFn fn; void *ctx; int first; } Offset;
static void offset_item(void *p, int item, int thread) {
    Offset *o = p;
    o->fn(o->ctx, o->first + item, thread);
}

static void run_alone(int n_items, ParallelFn fn, void *ctx) {
    for (int i = 0; i < n_items; i++) fn(ctx, i, 0);
}

static void run_loop(int n_items, ParallelFn fn, void *ctx, double size) {
    if (n_items <= 0) return;
    if (n_items == 1 || threads_count() == 1) {
        run_alone(n_items, fn, ctx);
        return;
    }
    if ((uint32_t)n_items > ITEM_MASK) {
        for (int first = 0; first < n_items; first += ITEM_MASK) {
            Offset o = {fn, ctx, first};
            run_loop(n_items - first < (int)ITEM_MASK ? n_items - first : (int)ITEM_MASK, offset_item, &o, size);
        }
        return;
    }
    LoopKind *e = policy_kind(&policy, (const void *)fn, n_items, size);
    double t0 = seconds();
    int with_others = policy_choose(&policy, t0);
    if (!with_others) {
        run_alone(n_items, fn, ctx);
        policy_record(&policy, e, 0, seconds() - t0);
        return;
    }
    generation = (generation + 1) & ((1u << 24) - 1);
    /* Release stores: each store of a word that another core holds then waits for that core's
     * line alongside the others, not one after another. */
    atomic_store_explicit(&job_fn, fn, memory_order_relaxed);
    atomic_store_explicit(&job_ctx, ctx, memory_order_relaxed);
    for (int t = 0; t < n_threads; t++) {   /* thread t's share: items n t / T .. n (t+1) / T */
        uint64_t first = (uint64_t)n_items * t / n_threads, end = (uint64_t)n_items * (t + 1) / n_threads;
        atomic_store_explicit(&slot[t].w, (uint64_t)generation << (2 * ITEM_BITS) | end << ITEM_BITS | first,
                              memory_order_release);
    }
    atomic_fetch_add(&posted, 1);
    if (atomic_load(&sleepers)) futex_wake(&posted, n_items - 1);
    uint32_t own = take_items(0, 0, n_threads);
    double t1 = seconds();
    wait_for_items(own, (uint32_t)n_items);   /* items still running elsewhere */
    double t2 = seconds();
    policy_record(&policy, e, 1, t2 - t0);
    policy_wait(&policy, t1 - t0, t2 - t1, t2);
}

/* LINGEN_PROFILE: wall time per kind of loop (threads.h). */

void threads_profile_print(FILE *f) {
    double total = seconds() - profile_start, in_loops = 0;
    int order[PROFILE_KINDS], n = 0;
    for (int k = 0; k < PROFILE_KINDS && profile[k].name; k++) order[n++] = k, in_loops += profile[k].secs;
    for (int i = 1; i < n; i++)   /* the longest first */
        for (int j = i; j > 0 && profile[order[j]].secs > profile[order[j - 1]].secs; j--) {
            int t = order[j];
            order[j] = order[j - 1], order[j - 1] = t;
        }
    fprintf(f, "lingen profile: %.3f s from the first parallel loop, %d thread%s\n", total, n_threads,
            n_threads == 1 ? "" : "s");
    fprintf(f, "  %-40s %10s %12s %10s %7s\n", "loop", "calls", "items", "seconds", "share");
    for (int i = 0; i < n; i++) {
        const ProfileKind *e = &profile[order[i]];
        fprintf(f, "  %-40s %10ld %12ld %10.3f %6.1f%%\n", e->name, e->calls, e->items, e->secs,
                total > 0 ? 100 * e->secs / total : 0);
    }
    fprintf(f, "  %-40s %10s %12s %10.3f %6.1f%%\n", "other (outside the loops)", "", "", total - in_loops,
            total > 0 ? 100 * (total - in_loops) / total : 0);
}

static void profile_at_exit(void) { threads_profile_print(stderr); }

void threads_profile(int on) {
    if (on && profiling <= 0) profile_start = seconds(), memset(profile, 0, sizeof profile);
    profiling = on;
}

static void profile_add(const char *name, int n_items, double secs) {
    for (int k = 0; k < PROFILE_KINDS; k++) {
        if (!profile[k].name) profile[k].name = name;
        if (profile[k].name == name || !strcmp(profile[k].name, name)) {
            profile[k].calls++, profile[k].items += n_items, profile[k].secs += secs;
            return;
        }
    }
}

void parallel_for_if_named(int worth, int n_items, ParallelFn fn, void *ctx, double size, const char *name) {
    if (worth) parallel_for_named(n_items, fn, ctx, size, name);
    else run_alone(n_items, fn, ctx);
}

void parallel_for_named(int n_items, ParallelFn fn, void *ctx, double size, const char *name) {
    if (profiling < 0) {
        profiling = settings_read().profile;
        if (profiling) profile_start = seconds(), atexit(profile_at_exit);
    }
    if (!profiling) {
        run_loop(n_items, fn, ctx, size);
        return;
    }
    double t0 = seconds();
    run_loop(n_items, fn, ctx, size);
    profile_add(name, n_items, seconds() - t0);
}
