#!/usr/bin/env bash
# liblingen and the Python module as a user gets them: `make install` into a staging folder
# (DESTDIR), then tests/lib/test_lib.c built there through pkg-config (shared, and static with
# --quick), and tests/lib/test_python.py run from another folder with PYTHONPATH into it; then
# `make uninstall` must leave none of them. The Makefile's test-lib passes MAKE, PYTHON and the
# install folders (BINDIR, LIBDIR, PYTHONDIR) in the environment.
#
# --tree BUILD: instead, the library of that build folder (make asan's: sanitized) from the source
# tree, with the small fixture model and that build's command as the reference: test_lib.c built
# with the build's CFLAGS (passed in CFLAGS), and Python with the sanitizer's runtime preloaded
# (it must come first; ASAN_RT names it) and leaks not counted (Python's own are many).
#   tests/lib/run.sh [--tree BUILD]          from the repository's root
set -u
repo=$(pwd)
. tests/cli_common.sh   # $T (removed on exit), ok, bad, finish
# unit NAME CMD...: one test program, "!! NAME exited N" when it fails (124: it hung)
unit() {
  local name=$1; shift; echo "== $name"
  timeout 600 "$@" || { local rc=$?; echo "!! $name exited $rc"; fails=$((fails + 1)); }
}
EXTRA="-lcjson -lpng -lz -lm -lpthread"   # the test's own: JSON, PNG, gzip
export TMPDIR=$T

if [ "${1:-}" = --tree ]; then
  B=$2
  export LINGEN=$B/lingen LINGEN_TEST_MODEL=tests/fixtures/tiny-linear-mnist.bin ASAN_OPTIONS=detect_leaks=0
  # shellcheck disable=SC2086
  if cc $CFLAGS -Iinclude -o "$T/test_lib" tests/lib/test_lib.c -L"$B" -l:liblingen.so.0 $EXTRA 2> "$T/cc.log"; then
    ok "test_lib.c builds against $B/liblingen.so.0"
    unit "tests/lib/test_lib ($B)" env LD_LIBRARY_PATH="$B" "$T/test_lib"
  else bad "test_lib.c builds against $B/liblingen.so.0"; cat "$T/cc.log"; fi
  preload=
  readelf -d "$B/liblingen.so.0" | grep -q 'NEEDED.*libasan' && preload=$ASAN_RT
  unit "tests/lib/test_python.py ($B)" env LINGEN_LIBRARY="$B/liblingen.so.0" PYTHONPATH=python \
    ${preload:+LD_PRELOAD="$preload"} "$PYTHON" tests/lib/test_python.py -v
  finish
  exit
fi

D=$T/stage
if $MAKE --no-print-directory install DESTDIR="$D" > "$T/install.log" 2>&1; then ok "make install DESTDIR=..."
else bad "make install DESTDIR=..."; tail -5 "$T/install.log"; finish; exit; fi
lib=$D$LIBDIR
export PKG_CONFIG_PATH=$lib/pkgconfig PKG_CONFIG_SYSROOT_DIR=$D PKG_CONFIG_LIBDIR=$lib/pkgconfig
export LINGEN=$D$BINDIR/lingen LINGEN_TEST_MODEL=${LINGEN_TEST_MODEL:-$repo/models/mnist.bin}

CFLAGS="-std=c11 -D_POSIX_C_SOURCE=200809L -Wall -Wextra -Werror -O1 -g"
# shellcheck disable=SC2046,SC2086
if cc $CFLAGS -o "$T/test_lib" tests/lib/test_lib.c $(pkg-config --cflags --libs lingen) $EXTRA 2> "$T/cc.log" &&
   readelf -d "$T/test_lib" | grep -q 'NEEDED.*liblingen\.so\.0'; then
  ok "test_lib.c builds with pkg-config --cflags --libs lingen, against liblingen.so.0"
else bad "test_lib.c builds with pkg-config --cflags --libs lingen"; cat "$T/cc.log"; fi
# the installed header alone, in C99 and C++ (its promise: small, stable, C99)
printf '#include <lingen.h>\nint main(void) { return (int)lingen_run_options_default().seed - 1; }\n' > "$T/h.c"
# shellcheck disable=SC2046
if cc -std=c99 -pedantic -Wall -Wextra -Werror -fsyntax-only $(pkg-config --cflags lingen) "$T/h.c" &&
   c++ -std=c++11 -pedantic -Wall -Wextra -Werror -fsyntax-only -x c++ $(pkg-config --cflags lingen) "$T/h.c"; then
  ok "lingen.h compiles alone as C99 (-pedantic) and as C++"
else bad "lingen.h compiles alone as C99 (-pedantic) and as C++"; fi
static_libs=$(pkg-config --static --libs lingen | sed 's/-llingen\b/-l:liblingen.a/')
# shellcheck disable=SC2046,SC2086
if cc $CFLAGS -o "$T/test_lib_static" tests/lib/test_lib.c $(pkg-config --cflags lingen) $static_libs $EXTRA 2> "$T/cc.log" &&
   ! readelf -d "$T/test_lib_static" | grep -q liblingen; then
  ok "test_lib.c builds with pkg-config --static, against liblingen.a"
else bad "test_lib.c builds with pkg-config --static"; cat "$T/cc.log"; fi

[ -x "$T/test_lib" ] && unit tests/lib/test_lib env LD_LIBRARY_PATH="$lib" "$T/test_lib"
[ -x "$T/test_lib_static" ] && unit "tests/lib/test_lib (static, --quick)" "$T/test_lib_static" --quick

# the module imported from another folder, with the library found through LD_LIBRARY_PATH
mkdir -p "$T/elsewhere"
unit tests/lib/test_python.py env -C "$T/elsewhere" PYTHONPATH="$D$PYTHONDIR" LD_LIBRARY_PATH="$lib" \
  LINGEN_TEST_INSTALLED="$D" "$PYTHON" "$repo/tests/lib/test_python.py" -v

# the README's C example, built as the README says (pkg-config), prints the bits/dim of the four
# images the README's Python line shows
sed -n '/^```c$/,/^```$/p' README.md | sed '1d;$d' > "$T/demo.c"
want="$(grep -o '^    (4, 28, 28, 1) \[[0-9. ]*\]' README.md | grep -o '[0-9.][0-9. ]*[0-9]' | tail -1) bits/dim"
# shellcheck disable=SC2046
if cc -std=c11 -Wall -Wextra -Werror -o "$T/demo" "$T/demo.c" $(pkg-config --cflags --libs lingen) 2> "$T/cc.log" &&
   got=$(env -C "$T/elsewhere" LD_LIBRARY_PATH="$lib" LINGEN_MODELS="$repo/models" "$T/demo") && [ "$got" = "$want" ]; then
  ok "the README's C example builds with pkg-config and prints '$want'"
else bad "the README's C example: printed '${got:-}', the README's Python line shows '$want'"; cat "$T/cc.log"; fi

$MAKE --no-print-directory uninstall DESTDIR="$D" > "$T/uninstall.log" 2>&1
left=$(find "$D" \( -name 'liblingen*' -o -name lingen.h -o -name lingen.pc -o -path '*/lingen/__init__.py' \
  -o -type f -path '*bin/lingen' \) | head -3)
if [ -z "$left" ]; then ok "make uninstall DESTDIR=... removes them all"; else bad "make uninstall left: $left"; fi
finish
