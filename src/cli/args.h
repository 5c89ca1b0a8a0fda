/* Command-line options, shared by every subcommand: --name VALUE, --name=VALUE, -x VALUE, -xVALUE,
 * --help. Errors are usage errors (exit code 2): "-n must be between 1 and 1000000, not '0'",
 * "unknown option '--modle': did you mean '--model'?", an empty value or argument. */
#ifndef LINGEN_ARGS_H
#define LINGEN_ARGS_H

/* OPT_POS: a repeatable option whose values join the positional arguments (--image F is F). */
typedef enum { OPT_STR, OPT_INT, OPT_FLAG, OPT_DOUBLE, OPT_POS } OptKind;

typedef struct {
    const char *name;      /* long name without dashes, e.g. "model" */
    char short_name;       /* e.g. 'n', or 0 */
    OptKind kind;
    void *dst;             /* const char **, long *, int *, double * (OPT_POS: unused) */
    const char *metavar;   /* e.g. "FILE" */
    const char *help;
    long min, max;         /* OPT_INT range */
} Opt;

/* Parses argv[first..]; positional arguments are collected into pos (up to max_pos).
 * Returns 0 to go on, -1 when --help was printed (exit 0), EXIT_USAGE (2) on a usage error (message printed). */
int args_parse(int argc, char **argv, int first, const Opt *opts, int n_opts, const char *cmd,
               const char *summary, const char **pos, int max_pos, int *n_pos);
#endif
