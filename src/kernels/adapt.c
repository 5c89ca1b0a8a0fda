/* The threads' adaptive policy (adapt.h). */
#include "adapt.h"

#include <stddef.h>
#include <stdint.h>

#define TRIAL_SECONDS 0.01   /* a few to a few dozen sampling steps: long trials lose to the wrong way */
#define GAP_MAX 8.0          /* seconds between trials while the better way keeps winning, at most */
#define MIN_LOOPS 64         /* loops in a period, at least */
#define MARGIN 0.9           /* a trial must beat the better way by this much: a short trial is noisy */
#define STALL_SECONDS 2e-3   /* a wait for the others this long, and longer than the caller's own share
                              * took: one of them holds an item without a core (a time slice is ms) */

void policy_reset(Policy *p) {
    int off = p->off;
    *p = (Policy)POLICY_INIT;
    p->off = off;
}

LoopKind *policy_kind(Policy *p, const void *fn, int n, double size) {
    unsigned h = (unsigned)(((uintptr_t)fn >> 4) * 31 + (unsigned)n + (unsigned)size * 7u) % POLICY_KINDS;
    for (int k = 0; k < POLICY_KINDS; k++) {
        LoopKind *e = &p->kinds[(h + k) % POLICY_KINDS];
        if (e->fn == fn && e->n == n && e->size == size) return e;
        if (!e->fn) { *e = (LoopKind){.fn = fn, .size = size, .n = n}; return e; }
    }
    return NULL;   /* table full: not counted */
}

/* At the end of a trial: did its loops take clearly less time than the same loops the better way?
 * 1 yes, 0 no, -1 no kind of loop ran both ways (the work changed): no verdict. */
static int trial_won(Policy *p) {
    double trial = 0, usual = 0;
    int b = p->best;
    for (int k = 0; k < POLICY_KINDS; k++) {
        LoopKind *e = &p->kinds[k];
        if (e->fn && e->loops[b] && e->loops[!b]) {
            trial += e->secs[!b];
            usual += e->loops[!b] * e->secs[b] / e->loops[b];
        }
        e->secs[0] = e->secs[1] = 0;
        e->loops[0] = e->loops[1] = 0;
    }
    return usual > 0 ? trial < MARGIN * usual : -1;
}

int policy_choose(Policy *p, double now) {
    if (p->off) return 1;
    if (!p->end) p->end = now + TRIAL_SECONDS;   /* the first period: as short as a trial */
    if (now < p->end || p->loops < MIN_LOOPS) return p->now;
    if (!p->in_trial) {   /* the period is over: try the other way */
        p->in_trial = 1, p->now = !p->best, p->end = now + TRIAL_SECONDS;
    } else {
        int won = trial_won(p);
        if (won == 1) p->best = !p->best, p->gap = GAP_MIN;
        else if (won == 0) p->gap = p->gap * 2 < GAP_MAX ? p->gap * 2 : GAP_MAX;
        p->in_trial = 0, p->now = p->best, p->end = now + p->gap;
    }
    p->loops = 0;
    return p->now;
}

void policy_record(Policy *p, LoopKind *e, int with_others, double secs) {
    p->loops++;
    if (!e || p->off) return;
    e->secs[with_others] += secs;
    e->loops[with_others]++;
}

void policy_wait(Policy *p, double own, double waited, double now) {
    /* a stall: try the caller alone now rather than at the end of the period (a short job on a
     * busy machine would spend its whole run in the first period) */
    if (waited > STALL_SECONDS && waited > own && !p->in_trial && p->end > now) p->end = now;
}

