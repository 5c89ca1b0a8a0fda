/* Shared by the cmocka tests: cmocka's includes, and where fixtures and data live. */
#ifndef LINGEN_TESTUTIL_H
#define LINGEN_TESTUTIL_H
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <cmocka.h>

/* Tests run from the repository root (make test-c). */
#define FIXTURE(name) "tests/fixtures/" name

/* The dataset root: $LINGEN_DATA (the Makefile points it at ../shared/data). */
static inline const char *test_data_dir(void) {
    const char *d = getenv("LINGEN_DATA");
    return d && *d ? d : "data";
}
#endif
