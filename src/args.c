#include "args.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void args_usage(const Opt *opts, int n_opts, const char *cmd, const char *summary) {
    printf("usage: lingen %s [options]\n\n%s\n\noptions:\n", cmd, summary);
    for (int i = 0; i < n_opts; i++) {
        char left[64];
        const Opt *o = &opts[i];
        if (o->short_name)
            snprintf(left, sizeof left, "-%c, --%s%s%s", o->short_name, o->name, o->metavar ? " " : "", o->metavar ? o->metavar : "");
        else
            snprintf(left, sizeof left, "    --%s%s%s", o->name, o->metavar ? " " : "", o->metavar ? o->metavar : "");
        printf("  %-26s %s\n", left, o->help);
    }
    printf("  %-26s %s\n", "-h, --help", "show this help");
    printf("\nexit codes: 0 ok, 1 failure, 2 usage error, 130 interrupted\n");
}

static int set_value(const Opt *o, const char *v, const char *cmd) {
    if (o->kind == OPT_STR) { *(const char **)o->dst = v; return 0; }
    char *end;
    errno = 0;
    if (o->kind == OPT_INT) {
        long x = strtol(v, &end, 10);
        if (errno || *end || end == v || x < o->min || x > o->max) {
            fprintf(stderr, "lingen %s: --%s: '%s' is not an integer in %ld..%ld\n", cmd, o->name, v, o->min, o->max);
            return 2;
        }
        *(long *)o->dst = x;
    } else {
        double x = strtod(v, &end);
        if (errno || *end || end == v) {
            fprintf(stderr, "lingen %s: --%s: '%s' is not a number\n", cmd, o->name, v);
            return 2;
        }
        *(double *)o->dst = x;
    }
    return 0;
}

static int add_pos(const char *a, const char *cmd, const char **pos, int max_pos, int *n_pos) {
    if (!n_pos || *n_pos >= max_pos) {
        fprintf(stderr, "lingen %s: unexpected argument '%s' (see lingen %s --help)\n", cmd, a, cmd);
        return 2;
    }
    pos[(*n_pos)++] = a;
    return 0;
}

int args_parse(int argc, char **argv, int first, const Opt *opts, int n_opts, const char *cmd,
               const char *summary, const char **pos, int max_pos, int *n_pos) {
    if (n_pos) *n_pos = 0;
    for (int i = first; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) { args_usage(opts, n_opts, cmd, summary); return -1; }
        if (a[0] != '-' || a[1] == 0) {
            if (add_pos(a, cmd, pos, max_pos, n_pos)) return 2;
            continue;
        }
        const Opt *o = NULL;
        const char *val = NULL;
        if (a[1] == '-') {
            const char *eq = strchr(a + 2, '=');
            size_t len = eq ? (size_t)(eq - a - 2) : strlen(a + 2);
            for (int j = 0; j < n_opts; j++)
                if (strlen(opts[j].name) == len && !strncmp(opts[j].name, a + 2, len)) o = &opts[j];
            if (eq) val = eq + 1;
        } else if (a[2] == 0) {
            for (int j = 0; j < n_opts; j++)
                if (opts[j].short_name == a[1]) o = &opts[j];
        }
        if (!o) {
            fprintf(stderr, "lingen %s: unknown option '%s' (see lingen %s --help)\n", cmd, a, cmd);
            return 2;
        }
        if (o->kind == OPT_FLAG) {
            if (val) { fprintf(stderr, "lingen %s: --%s takes no value\n", cmd, o->name); return 2; }
            *(int *)o->dst = 1;
            continue;
        }
        if (!val) {
            if (i + 1 >= argc) { fprintf(stderr, "lingen %s: %s needs a value\n", cmd, a); return 2; }
            val = argv[++i];
        }
        if (o->kind == OPT_POS ? add_pos(val, cmd, pos, max_pos, n_pos) : set_value(o, val, cmd)) return 2;
    }
    return 0;
}
