/* lingen's version: `lingen --version`, the man page. */
#ifndef LINGEN_VERSION_H
#define LINGEN_VERSION_H
#define LINGEN_VERSION "1.0.0"
#endif
