/* lingen's version: `lingen --version`, the man page, the library. One place holds it: the
 * library's public header (LINGEN_VERSION). */
#ifndef LINGEN_VERSION_H
#define LINGEN_VERSION_H
#include "lingen.h"
#endif
