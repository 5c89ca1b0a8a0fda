/* libFuzzer target: command-line parsing. The input is an argv, its arguments separated by
 * NUL bytes; the option table has every kind of option, with and without a short name. */
#include <stdint.h>

#include "cli/args.h"
#include "fuzz_common.h"

#define MAX_ARGS 64
#define MAX_POS 2

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    /* one copy, NUL-terminated, cut into arguments at its NULs */
    char *buf = malloc(size + 1);
    FUZZ_CHECK(buf);
    if (size) memcpy(buf, data, size);
    buf[size] = 0;
    char *argv[MAX_ARGS + 1];
    int argc = 0;
    argv[argc++] = "lingen";
    for (char *p = buf; p <= buf + size && argc < MAX_ARGS; p += strlen(p) + 1) argv[argc++] = p;
    argv[argc] = NULL;

    const char *model = NULL, *out = NULL;
    long n = -1, seed = -1;
    int flag = 0;
    double temp = 0;
    Opt opts[] = {
        {"model", 'm', OPT_STR, &model, "FILE", "a string", 0, 0},
        {"n", 'n', OPT_INT, &n, "N", "an integer in 1..1000000", 1, 1000000},
        {"seed", 0, OPT_INT, &seed, "S", "an integer, long name only", 0, 0x7fffffffffffffffL},
        {"verbose", 'v', OPT_FLAG, &flag, NULL, "a flag", 0, 0},
        {"temperature", 'T', OPT_DOUBLE, &temp, "X", "a number", 0, 0},
        {"output", 0, OPT_STR, &out, "FILE", "a string, long name only", 0, 0},
    };
    const char *pos[MAX_POS];
    int n_pos = -1;
    int rc = args_parse(argc, argv, 1, opts, (int)(sizeof opts / sizeof opts[0]), "fuzz", "Fuzzing.", pos,
                        MAX_POS, &n_pos);
    FUZZ_CHECK(rc == 0 || rc == -1 || rc == 2);
    FUZZ_CHECK(n_pos >= 0 && n_pos <= MAX_POS);
    if (rc == 0) {
        /* values in range, strings pointing into argv */
        FUZZ_CHECK(n == -1 || (n >= 1 && n <= 1000000));
        FUZZ_CHECK(seed >= -1);
        FUZZ_CHECK(flag == 0 || flag == 1);
        FUZZ_CHECK(!model || (model >= buf && model <= buf + size));
        FUZZ_CHECK(!out || (out >= buf && out <= buf + size));
        for (int i = 0; i < n_pos; i++) FUZZ_CHECK(pos[i] >= buf && pos[i] <= buf + size);
    }
    free(buf);
    return 0;
}
