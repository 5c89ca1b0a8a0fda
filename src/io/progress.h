/* A progress line on stderr (only when stderr is a terminal): done/total, items/s, ETA; or, for
 * a library's caller, its own function called with the figures. */
#ifndef LINGEN_PROGRESS_H
#define LINGEN_PROGRESS_H
typedef struct {
    const char *what;
    long total, per_image;
    double t0, last, share;
    int tty;
    void (*report)(void *user, double done, double total);   /* progress_report_to's */
    void *user;
} Progress;
void progress_start(Progress *p, const char *what, long total);
/* Counting the positions (sub-pixels) of `images` images of per_image positions each: the line
 * moves with every position, even inside one big batch, and shows the rate in images/s. */
void progress_start_positions(Progress *p, const char *what, long images, long per_image);
/* This process does a share (0 < share <= 1) of the job, at the pace of the others doing the rest
 * (a rank of an MPI job): the line shows done / share, the whole job. show = 0: no line here. */
void progress_share(Progress *p, double share, int show);
/* From now on, each update calls fn(user, done, total) instead of drawing a line (a library's
 * caller shows progress its own way). */
void progress_report_to(Progress *p, void (*fn)(void *user, double done, double total), void *user);
void progress_update(Progress *p, double done);   /* fractional items allowed */
void progress_end(Progress *p);
#endif
