#include "stop.h"

#include <stddef.h>

volatile sig_atomic_t stop_signal;

static void on_signal(int sig) { stop_signal = sig; }

void stop_on_signals(void) {
    struct sigaction sa = {0};
    sa.sa_handler = on_signal;
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
}
