#include "args.h"
#include "io/util.h"

#include <errno.h>
#include <limits.h>
#include <math.h>
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
    printf("\nvalues: --name VALUE, --name=VALUE, -x VALUE or -xVALUE\nexit codes: 0 ok, 1 failure, 2 usage error, 130 or 143 interrupted (SIGINT, SIGTERM)\n");
}

/* "-n must be between 1 and 1000000, not '0'": opt is the option as typed (-n, --n or --batch). */
static int set_value(const Opt *o, const char *opt, const char *v, const char *cmd) {
    if (o->kind == OPT_STR) {   /* no name or word is empty: a variable left unset in a script */
        if (!*v) { fprintf(stderr, "lingen %s: %s needs a value, not an empty one\n", cmd, opt); return EXIT_USAGE; }
        *(const char **)o->dst = v;
        return 0;
    }
    char *end;
    errno = 0;
    /* digits as written: strtol and strtod would also take leading spaces and a '+' */
    int plain = v[0] == '-' || v[0] == '.' || (v[0] >= '0' && v[0] <= '9');
    if (o->kind == OPT_INT) {
        long x = strtol(v, &end, 10);
        if (!plain || errno || *end || end == v || x < o->min || x > o->max) {
            if (o->max == LONG_MAX)
                fprintf(stderr, "lingen %s: %s must be an integer of at least %ld, not '%s'\n", cmd, opt, o->min, v);
            else
                fprintf(stderr, "lingen %s: %s must be between %ld and %ld, not '%s'\n", cmd, opt, o->min, o->max, v);
            return EXIT_USAGE;
        }
        *(long *)o->dst = x;
    } else {
        double x = strtod(v, &end);
        if (!plain || errno || *end || end == v || !isfinite(x)) {
            fprintf(stderr, "lingen %s: %s must be a finite number, not '%s'\n", cmd, opt, v);
            return EXIT_USAGE;
        }
        *(double *)o->dst = x;
    }
    return 0;
}

/* "unknown option '--modle'; did you mean '--model'?" */
static void unknown_option(const char *a, const Opt *opts, int n_opts, const char *cmd) {
    const char *names[64];
    int k = 0;
    for (int j = 0; j < n_opts && k < 63; j++) names[k++] = opts[j].name;
    names[k++] = "help";
    size_t len = strcspn(a, "=");
    char word[64];
    snprintf(word, sizeof word, "%.*s", (int)(len < sizeof word ? len : sizeof word - 1), a);
    const char *near = a[1] == '-' ? nearest_word(word + 2, names, k) : NULL;
    if (near) fprintf(stderr, "lingen %s: unknown option '%s': did you mean '--%s'? (see lingen %s --help)\n", cmd, a, near, cmd);
    else fprintf(stderr, "lingen %s: unknown option '%s' (see lingen %s --help)\n", cmd, a, cmd);
}

static int add_pos(const char *a, const char *cmd, const char **pos, int max_pos, int *n_pos) {
    if (!*a) {   /* no file or word is empty: a variable left unset in a script */
        fprintf(stderr, "lingen %s: an argument is empty (see lingen %s --help)\n", cmd, cmd);
        return EXIT_USAGE;
    }
    if (!n_pos || *n_pos >= max_pos) {
        fprintf(stderr, "lingen %s: unexpected argument '%s' (see lingen %s --help)\n", cmd, a, cmd);
        return EXIT_USAGE;
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
            if (add_pos(a, cmd, pos, max_pos, n_pos)) return EXIT_USAGE;
            continue;
        }
        const Opt *o = NULL;
        const char *val = NULL;
        char opt[64];   /* the option as typed, for messages: "-n", "--batch" */
        if (a[1] == '-') {
            const char *eq = strchr(a + 2, '=');
            size_t len = eq ? (size_t)(eq - a - 2) : strlen(a + 2);
            for (int j = 0; j < n_opts; j++)
                if (strlen(opts[j].name) == len && !strncmp(opts[j].name, a + 2, len)) o = &opts[j];
            if (eq) val = eq + 1;
            snprintf(opt, sizeof opt, "--%.*s", (int)(len < 60 ? len : 60), a + 2);
        } else {   /* -n 2, or attached as getopt allows: -n2, -o/tmp/x.png */
            for (int j = 0; j < n_opts; j++)
                if (opts[j].short_name == a[1]) o = &opts[j];
            if (a[2]) val = a + 2;
            snprintf(opt, sizeof opt, "-%c", a[1]);
        }
        if (!o) {
            unknown_option(a, opts, n_opts, cmd);
            return EXIT_USAGE;
        }
        if (o->kind == OPT_FLAG) {
            if (val) { fprintf(stderr, "lingen %s: %s takes no value\n", cmd, opt); return EXIT_USAGE; }
            *(int *)o->dst = 1;
            continue;
        }
        if (!val) {
            if (i + 1 >= argc) { fprintf(stderr, "lingen %s: %s needs a value\n", cmd, a); return EXIT_USAGE; }
            val = argv[++i];
        }
        if (o->kind == OPT_POS ? add_pos(val, cmd, pos, max_pos, n_pos) : set_value(o, opt, val, cmd)) return EXIT_USAGE;
    }
    return 0;
}
