/* Resource limits, checked before the big allocations of a run. Large callocs succeed lazily on
 * Linux, so without a check an absurd --batch starts, fills memory page by page, and gets
 * OOM-killed hours later with nothing written; with it, the run stops at once with a clear error.
 * (Named reslimits, not limits: with -Isrc, a limits.h would shadow the system <limits.h>.) */
#ifndef LINGEN_RESLIMITS_H
#define LINGEN_RESLIMITS_H
#include <stddef.h>
#include "util.h"

/* Bytes of memory this process can still get: the least of MemAvailable in /proc/meminfo
 * (else all physical memory), the room left under its memory cgroup's limit (v1 or v2, and
 * every ancestor's), and the room left under RLIMIT_AS. SIZE_MAX when none can be read. */
size_t reslimits_available_memory(void);

/* This process's resident set size now (VmRSS) and at its peak (VmHWM), in bytes; NAN when
 * /proc/self/status cannot be read. */
double reslimits_resident_bytes(void);
double reslimits_peak_resident_bytes(void);

/* Can a batch of `batch` items run in `available` bytes, needing fixed + batch * per_item?
 * 0 if so; else -1 and e says, after `what`, how much is needed, how much there is, and the
 * largest --batch that fits (or that not even one item does). */
int reslimits_check_batch(size_t fixed, size_t per_item, long batch, size_t available, const char *what,
                          Err *e);


/* The largest b in 0..max_b with fixed + b * per_item <= available. */
long reslimits_max_batch(size_t fixed, size_t per_item, size_t available, long max_b);

/* Threads for a run that asked for `asked` (0: all cores): at most `cores` unless force.
 * When it caps, note (n bytes) says so in one line; else note is "". */
long reslimits_pick_threads(long asked, long cores, int force, char *note, size_t n);

/* The parsers behind reslimits_available_memory, for the tests: MemAvailable in the text of
 * /proc/meminfo, in bytes (0 if absent); a cgroup limit or usage file (SIZE_MAX for "max"
 * and for anything unreadable). */
size_t reslimits_parse_meminfo(const char *text);
size_t reslimits_parse_cgroup_value(const char *text);
#endif
