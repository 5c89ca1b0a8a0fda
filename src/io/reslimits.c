/* Resource limits: how much memory a run can still get, and whether a batch fits in it; how
 * many threads to run on the cores it may use (threads_usable_cores counts those). */
#include "reslimits.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>


/* A small text file (/proc, /sys) into buf, NUL-terminated; 0 on success. */
static int read_small(const char *path, char *buf, size_t n) {
    FILE *f = fopen(path, "r");
    if (!f) return -1;
    size_t k = fread(buf, 1, n - 1, f);
    fclose(f);
    buf[k] = 0;
    return 0;
}

size_t reslimits_parse_meminfo(const char *text) {
    for (const char *p = text; p && *p; p = strchr(p, '\n'), p = p ? p + 1 : NULL) {
        if (strncmp(p, "MemAvailable:", 13) != 0) continue;
        char *end;
        unsigned long long v = strtoull(p + 13, &end, 10);
        if (end == p + 13) return 0;
        while (*end == ' ') end++;
        if (strncmp(end, "kB", 2) != 0) return (size_t)v;
        return v > SIZE_MAX / 1024 ? SIZE_MAX : (size_t)v * 1024;
    }
    return 0;
}

size_t reslimits_parse_cgroup_value(const char *text) {
    char *end;
    unsigned long long v = strtoull(text, &end, 10);
    if (end == text || (*end && *end != '\n') || v > SIZE_MAX) return SIZE_MAX;   /* "max", junk */
    return (size_t)v;
}

/* The value of "key N" in a memory.stat file, or 0. */
static size_t stat_value(const char *text, const char *key) {
    size_t k = strlen(key);
    for (const char *p = text; p && *p; p = strchr(p, '\n'), p = p ? p + 1 : NULL)
        if (strncmp(p, key, k) == 0 && p[k] == ' ') return (size_t)strtoull(p + k + 1, NULL, 10);
    return 0;
}

/* Room left in the memory cgroup at path under base, and in each of its ancestors. The usage
 * counts the page cache, of which the inactive part is reclaimed before anything runs out. */
static size_t cgroup_room(const char *base, const char *path, const char *limit_file, const char *usage_file,
                          const char *inactive_key) {
    char dir[1024], file[1200], buf[64], stat[8192];
    size_t room = SIZE_MAX;
    if (snprintf(dir, sizeof dir, "%s%s", base, path) >= (int)sizeof dir) return room;
    size_t n = strlen(dir);
    if (n > strlen(base) && dir[n - 1] == '/') dir[n - 1] = 0;   /* the root cgroup, "/" */
    for (;;) {
        size_t limit = SIZE_MAX, usage = SIZE_MAX;
        snprintf(file, sizeof file, "%s/%s", dir, limit_file);
        if (read_small(file, buf, sizeof buf) == 0) limit = reslimits_parse_cgroup_value(buf);
        snprintf(file, sizeof file, "%s/%s", dir, usage_file);
        if (read_small(file, buf, sizeof buf) == 0) usage = reslimits_parse_cgroup_value(buf);
        /* v1 says "no limit" with a number near 2^63: only limits below 2^60 count */
        if (limit < (size_t)1 << 60 && usage != SIZE_MAX) {
            snprintf(file, sizeof file, "%s/memory.stat", dir);
            size_t inactive = read_small(file, stat, sizeof stat) ? 0 : stat_value(stat, inactive_key);
            usage = usage > inactive ? usage - inactive : 0;
            size_t r = limit > usage ? limit - usage : 0;
            if (r < room) room = r;
        }
        char *slash = strrchr(dir, '/');
        if (!slash || (size_t)(slash - dir) < strlen(base)) break;   /* did the mount point itself */
        *slash = 0;
    }
    return room;
}

/* The least room in the memory cgroups this process is in (a container's limit, say). */
static size_t cgroups_room(void) {
    char text[4096];
    size_t room = SIZE_MAX;
    if (read_small("/proc/self/cgroup", text, sizeof text)) return room;
    /* lines "id:controllers:path": v1 names "memory" among the controllers, v2 has id 0 and none */
    char *save;
    for (char *line = strtok_r(text, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
        char *c1 = strchr(line, ':'), *c2 = c1 ? strchr(c1 + 1, ':') : NULL;
        if (!c2) continue;
        *c1 = *c2 = 0;
        const char *ctl = c1 + 1, *path = c2 + 1;
        size_t r = SIZE_MAX;
        if (strcmp(line, "0") == 0 && !*ctl)
            r = cgroup_room("/sys/fs/cgroup", path, "memory.max", "memory.current", "inactive_file");
        else if (strstr(ctl, "memory"))
            r = cgroup_room("/sys/fs/cgroup/memory", path, "memory.limit_in_bytes", "memory.usage_in_bytes",
                            "total_inactive_file");
        if (r < room) room = r;
    }
    return room;
}

/* Room left under RLIMIT_AS, which counts the address space already mapped. */
static size_t rlimit_room(void) {
    struct rlimit rl;
    if (getrlimit(RLIMIT_AS, &rl) || rl.rlim_cur == RLIM_INFINITY) return SIZE_MAX;
    char buf[256];
    unsigned long long pages;
    if (read_small("/proc/self/statm", buf, sizeof buf) || sscanf(buf, "%llu", &pages) != 1) return SIZE_MAX;
    size_t used = (size_t)pages * (size_t)sysconf(_SC_PAGESIZE);
    return rl.rlim_cur > used ? (size_t)(rl.rlim_cur - used) : 0;
}

static double status_kb(const char *key) {
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    double kb = NAN;
    size_t n = strlen(key);
    while (f && fgets(line, sizeof line, f))
        if (strncmp(line, key, n) == 0 && line[n] == ':') { kb = strtod(line + n + 1, NULL); break; }
    if (f) fclose(f);
    return kb;
}

double reslimits_resident_bytes(void) { return status_kb("VmRSS") * 1024; }
double reslimits_peak_resident_bytes(void) { return status_kb("VmHWM") * 1024; }

size_t reslimits_available_memory(void) {
    char text[8192];
    size_t avail = SIZE_MAX;
    if (read_small("/proc/meminfo", text, sizeof text) == 0) {
        size_t m = reslimits_parse_meminfo(text);
        if (m) avail = m;
    }
    if (avail == SIZE_MAX) {   /* no /proc: all physical memory, the best guess left */
        long pages = sysconf(_SC_PHYS_PAGES), size = sysconf(_SC_PAGESIZE);
        if (pages > 0 && size > 0) avail = (size_t)pages * (size_t)size;
    }
    size_t cg = cgroups_room(), rl = rlimit_room();
    if (cg < avail) avail = cg;
    if (rl < avail) avail = rl;
    return avail;
}

long reslimits_max_batch(size_t fixed, size_t per_item, size_t available, long max_b) {
    if (max_b < 0 || fixed > available) return 0;
    if (per_item == 0) return max_b;
    size_t b = (available - fixed) / per_item;
    return b < (size_t)max_b ? (long)b : max_b;
}

/* Bytes for a message: "26.3 GB", "512.0 MB", "900 kB". */
static const char *human(double bytes, char buf[32]) {
    if (bytes >= 1e9) snprintf(buf, 32, "%.1f GB", bytes / 1e9);
    else if (bytes >= 1e6) snprintf(buf, 32, "%.1f MB", bytes / 1e6);
    else snprintf(buf, 32, "%.0f kB", bytes / 1e3);
    return buf;
}

int reslimits_check_batch(size_t fixed, size_t per_item, long batch, size_t available, const char *what,
                          Err *e) {
    if (batch < 1) return 0;
    long fit = reslimits_max_batch(fixed, per_item, available, batch);
    if (fit >= batch) return 0;
    char need[32], have[32];
    /* in double: the true need may not fit in size_t */
    human((double)fixed + (double)per_item * (double)batch, need);
    human((double)available, have);
    if (fit > 0)
        return err_set(e, "%s: batch %ld needs %s of memory, but only %s is available; use --batch %ld or less",
                       what, batch, need, have, fit);
    char one[32];
    human((double)fixed + (double)per_item, one);
    return err_set(e, "%s: needs %s of memory even with --batch 1, but only %s is available", what, one, have);
}

long reslimits_pick_threads(long asked, long cores, int force, char *note, size_t n) {
    if (n) note[0] = 0;
    if (asked <= 0) return cores;
    if (asked <= cores || force) return asked;
    /* more threads than cores only take turns on them, and spin while they wait */
    snprintf(note, n, "--threads %ld: only %ld core%s usable here, using %ld (set LINGEN_FORCE_THREADS=1 to run %ld)",
             asked, cores, cores == 1 ? " is" : "s are", cores, asked);
    return cores;
}
