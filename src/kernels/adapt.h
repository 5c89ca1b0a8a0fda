/* Whether a parallel loop runs with the other threads or on the caller alone: a policy that
 * judges by the loops' own times, in periods. A pure state machine on the times it is given, so
 * that tests can drive it with a clock of their own (threads.c gives it the real one).
 *
 * When the other threads do not get a core (another program has it), an item that one of them
 * took before it was descheduled holds its loop up for a time slice, and the caller alone would
 * have been faster. Loop times are noisy (a rare slow loop costs as much as a thousand fast
 * ones), so the choice is made for all loops at once and from long periods: run the better way
 * for a while, then try the other way for a short trial, and compare, kind of loop by kind of
 * loop (its function, number of items and size: the same few kinds repeat at every step), the
 * trial's time with what the same loops took the better way. The first period is as short as a
 * trial, so that a job of a second (a few images) is not spent the worse way; while the choice
 * holds, the trials come ever less often (a losing trial costs its time). */
#ifndef LINGEN_ADAPT_H
#define LINGEN_ADAPT_H

#define POLICY_KINDS 64
#define GAP_MIN 0.25   /* seconds the better way runs between trials, at first */

typedef struct {
    const void *fn;   /* the loop's function, its number of items and size: its kind */
    double size;
    int n;
    double secs[2];   /* this period's and the trial's loops of this kind: [0] alone, [1] with the others */
    long loops[2];
} LoopKind;

typedef struct {
    LoopKind kinds[POLICY_KINDS];
    int best, now, in_trial;   /* the better way (1: with the others), the way loops run now */
    long loops;                /* loops in this period or trial */
    double end, gap;           /* when it ends; the current gap between trials */
    int off;                   /* 1: every loop with the others (threads_adapt(0)) */
} Policy;
#define POLICY_INIT {.best = 1, .now = 1, .gap = GAP_MIN}

/* Back to the start (a new set of threads): with the others, the first period next. */
void policy_reset(Policy *p);
/* The kind of a loop, or NULL when the table is full (then it is not counted). */
LoopKind *policy_kind(Policy *p, const void *fn, int n, double size);
/* The way the loop starting at time `now` runs: 1 with the others, 0 alone. */
int policy_choose(Policy *p, double now);
/* A loop of kind e ran that way for secs. */
void policy_record(Policy *p, LoopKind *e, int with_others, double secs);
/* A loop with the others: the caller's own items took `own` seconds, then it waited `waited`
 * for the others', until `now`. A long wait (a thread without a core) ends the period now. */
void policy_wait(Policy *p, double own, double waited, double now);
#endif
