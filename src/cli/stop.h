/* Stopping a long run cleanly: SIGINT (Ctrl-C) and SIGTERM (kill, a job scheduler's time limit)
 * both set a flag that generation polls between positions; the images finished by then are
 * written, and the exit code is 128 + the signal's number (130, 143), as a shell reports a
 * process that signal killed. */
#ifndef LINGEN_STOP_H
#define LINGEN_STOP_H
#include <signal.h>

extern volatile sig_atomic_t stop_signal;   /* 0, or the signal that asked to stop */
void stop_on_signals(void);                 /* install the handlers */
#endif
