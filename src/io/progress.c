/* A one-line progress display on stderr, redrawn in place with '\r'. Silent unless stderr is a
 * terminal, so logs, pipes and tests see no control characters. Not thread-safe: call it from
 * the thread that owns the loop. */
#include "progress.h"

#include <stdarg.h>
#include <stdio.h>
#include <unistd.h>
#include "util.h"

#define BAR_WIDTH 30
#define MIN_INTERVAL 0.1     /* seconds between redraws: at most ~10 per second */

void progress_start(Progress *p, const char *what, long total) {
    p->what = what;
    p->total = total;
    p->t0 = now_seconds();
    p->last = 0;             /* 0: nothing drawn yet */
    p->tty = isatty(2);
    p->per_image = 0;
    p->share = 1;
    p->report = NULL;
    p->user = NULL;
}

void progress_report_to(Progress *p, void (*fn)(void *user, double done, double total), void *user) {
    p->report = fn;
    p->user = user;
    p->tty = 0;
}

void progress_start_positions(Progress *p, const char *what, long images, long per_image) {
    progress_start(p, what, images * per_image);
    p->per_image = per_image;
}

void progress_share(Progress *p, double share, int show) {
    if (!show) p->tty = 0;
    else if (share > 0) p->share = share;
}

/* "45s", "1m12s", "2h05m" */
static void format_duration(char *buf, size_t n, double s) {
    long t = (long)(s + 0.5);
    if (t < 60) snprintf(buf, n, "%lds", t);
    else if (t < 3600) snprintf(buf, n, "%ldm%02lds", t / 60, t % 60);
    else snprintf(buf, n, "%ldh%02ldm", t / 3600, (t % 3600) / 60);
}

/* Append to a fixed line buffer; silently truncates. */
static void append(char *line, size_t cap, size_t *n, const char *fmt, ...) __attribute__((format(printf, 4, 5)));
static void append(char *line, size_t cap, size_t *n, const char *fmt, ...) {
    if (*n >= cap - 1) return;
    va_list ap;
    va_start(ap, fmt);
    int k = vsnprintf(line + *n, cap - *n, fmt, ap);
    va_end(ap);
    if (k > 0) *n = *n + (size_t)k < cap - 1 ? *n + (size_t)k : cap - 1;
}

void progress_update(Progress *p, double done) {
    if (p->report) p->report(p->user, done / p->share, (double)p->total);
    if (!p->tty) return;
    done /= p->share;
    double t = now_seconds();
    int finished = p->total > 0 && done >= p->total;
    if (p->last > 0 && t - p->last < MIN_INTERVAL && !finished) return;
    p->last = t;
    double elapsed = t - p->t0, rate = elapsed > 0 ? done / elapsed : 0;

    char line[256];
    size_t n = 0;
    append(line, sizeof line, &n, "%s %ld", p->what, (long)done);   /* whole items done */
    if (p->total > 0) {
        int fill = (int)(BAR_WIDTH * (done < p->total ? done : (double)p->total) / p->total);
        char bar[BAR_WIDTH + 1];
        for (int i = 0; i < BAR_WIDTH; i++) bar[i] = i < fill ? '=' : i == fill ? '>' : ' ';
        bar[BAR_WIDTH] = '\0';
        append(line, sizeof line, &n, "/%ld%s [%s]", p->total, p->per_image ? " positions" : "", bar);
    }
    if (rate > 0) {
        if (p->per_image) append(line, sizeof line, &n, " %.2f images/s", rate / p->per_image);
        else append(line, sizeof line, &n, " %.1f /s", rate);
        if (p->total > 0 && done < p->total) {
            char eta[32];
            format_duration(eta, sizeof eta, (p->total - done) / rate);
            append(line, sizeof line, &n, " ETA %s", eta);
        }
    }
    fprintf(stderr, "\r%s\033[K", line);   /* \033[K: erase what a longer previous line left */
    fflush(stderr);
}

/* Leave the last drawn line in place and end it; nothing if nothing was drawn. */
void progress_end(Progress *p) {
    if (p->tty && p->last > 0) {
        fputc('\n', stderr);
        fflush(stderr);
    }
    p->last = 0;
}
