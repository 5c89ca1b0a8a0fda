/* A progress line on stderr (only when stderr is a terminal): done/total, items/s, ETA. */
#ifndef LINGEN_PROGRESS_H
#define LINGEN_PROGRESS_H
typedef struct { const char *what; long total; double t0, last; int tty; } Progress;
void progress_start(Progress *p, const char *what, long total);
void progress_update(Progress *p, double done);   /* fractional items allowed */
void progress_end(Progress *p);
#endif
