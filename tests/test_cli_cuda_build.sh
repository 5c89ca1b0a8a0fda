#!/usr/bin/env bash
# The CUDA build's two halves agree by construction, checked without a GPU:
#   1. every project header the CUDA engine includes (from every src/cuda/*.cu and its private
#      .cuh headers, transitively) preprocesses to
#      the same text and defines the same macros under a baseline x86-64 and under AVX-512/AMX
#      (nvcc compiles the .cu without the host's -march; the C files get -march=native), and the
#      check tells an instruction-set-dependent header (matmul.h) from those;
#   2. where nvcc exists, the CUDA build compiles as a user builds it (make CUDA=1, default
#      flags), an object for every src/cuda/*.cu, and its lingen refuses --device cuda cleanly on
#      a machine without a GPU.
# Run from the repository root.
set -u
. tests/cli_common.sh
CC=${CC:-cc}
BASE="-march=x86-64"
WIDE="-march=x86-64-v4 -mavx512bf16 -mavx512vnni -mavx512fp16 -mamx-tile -mamx-bf16 -mamx-int8 -mf16c -mfma"

# the project headers reachable from src/cuda's files, by their #include "..." lines
reach() {
  local f=$1 dir inc
  dir=$(dirname "$f")
  grep -o '^[[:space:]]*#[[:space:]]*include[[:space:]]*"[^"]*"' "$f" | sed 's/.*"\(.*\)"/\1/' | while read -r inc; do
    local p
    p=$(realpath -m --relative-to=. "$dir/$inc")
    [ -f "$p" ] || continue
    if ! grep -qxF "$p" "$T/seen" 2> /dev/null; then echo "$p" >> "$T/seen"; reach "$p"; fi
  done
}
: > "$T/seen"
cus=(src/cuda/*.cu)
for f in "${cus[@]}" src/cuda/*.cuh src/cuda/*.h; do reach "$f"; done
headers=$(sort -u "$T/seen" | grep '\.h$')
[ -n "$headers" ] && ok "the headers of ${#cus[@]} .cu files (${cus[*]##*/}): $(echo $headers | tr '\n' ' ')" ||
  bad "no header found under src/cuda"

# the macros the project's headers define (the system's, such as math.h's FP_FAST_FMA, are the
# host compiler's own business: the text below shows whether any project code uses them)
own_macros() {
  grep -ho '^[[:space:]]*#[[:space:]]*define[[:space:]]\+[A-Za-z_][A-Za-z0-9_]*' src/*/*.h src/cuda/*.cuh |
    awk '{print $NF}' | sort -u
}
own_macros > "$T/own"

# differs HEADER: whether the header's text, or the value of a macro of the project's, changes
# with the instruction set
differs() {
  local h=$1 flags
  for flags in "$BASE" "$WIDE"; do
    local tag=${flags%% *}; tag=${tag#-march=}
    # shellcheck disable=SC2086
    $CC -std=c11 -D_POSIX_C_SOURCE=200809L -Isrc $flags -E -P -x c "$h" > "$T/text.$tag" 2> "$T/err" || { cat "$T/err"; return 2; }
    # shellcheck disable=SC2086
    $CC -std=c11 -D_POSIX_C_SOURCE=200809L -Isrc $flags -dM -E -x c "$h" |
      awk 'NR == FNR { own[$1] = 1; next } { n = $2; sub(/\(.*/, "", n); if (n in own) print }' "$T/own" - | sort > "$T/macros.$tag"
  done
  ! { cmp -s "$T/text.x86-64" "$T/text.x86-64-v4" && cmp -s "$T/macros.x86-64" "$T/macros.x86-64-v4"; }
}
for h in $headers; do
  if differs "$h"; then
    bad "$h depends on the instruction set:"
    diff "$T/text.x86-64" "$T/text.x86-64-v4" | head -5; diff "$T/macros.x86-64" "$T/macros.x86-64-v4" | head -5
  else ok "$h: the same under $BASE and AVX-512/AMX"; fi
done
# the control: the CPU kernels' header does depend on it (so the check can see a difference)
if differs src/kernels/matmul.h; then ok "control: src/kernels/matmul.h (MATMUL_NR) is seen to depend on it"
else bad "control: src/kernels/matmul.h not seen to differ: the check is blind"; fi
echo "$headers" | grep -qx 'src/kernels/matmul.h' && bad "the CUDA engine reaches src/kernels/matmul.h" || ok "the CUDA engine does not reach src/kernels/matmul.h"

# 2. the build as a user makes it, where nvcc is
NVCC=${NVCC:-${CUDA_HOME:-/usr/local/cuda}/bin/nvcc}
if [ ! -x "$NVCC" ] && ! command -v nvcc > /dev/null; then
  echo "skip the CUDA build: no nvcc here"
else
  B=build-cuda-check
  if nice make -s -j2 CUDA=1 BUILD=$B $B/lingen $B/test_cuda $B/bench_cuda > "$T/build" 2>&1; then
    ok "make CUDA=1 (default flags) builds lingen, test_cuda and bench_cuda"
    # each .cu is compiled and linked: were it changed, make would rebuild its object and lingen
    missing=""
    for f in "${cus[@]}"; do
      o=${f##*/}; o=$B/${o%.cu}.o
      make -n -W "$f" CUDA=1 BUILD=$B $B/lingen > "$T/dry" 2>&1
      grep -q -- "-o $o " "$T/dry" && grep -q -- "-o $B/lingen .*$o" "$T/dry" || missing+=" $f"
    done
    [ -z "$missing" ] && ok "each of the ${#cus[@]} .cu files is compiled and linked into lingen" ||
      bad "not compiled or not linked:$missing"
    # the objects of one build: the CUDA engine's and the C side's, and no warning
    grep -q "warning" "$T/build" && bad "the CUDA build warns: $(grep -m1 warning "$T/build")" || ok "the CUDA build has no warning"
    expect 0 "the CUDA build's lingen --version" $B/lingen --version
    contains "its --version says CUDA" "CUDA"
    if ! command -v nvidia-smi > /dev/null || ! nvidia-smi > /dev/null 2>&1; then
      expect 1 "its sample --device cuda without a GPU fails (exit 1)" $B/lingen sample --device cuda --model $F/tiny-linear-mnist.bin -n 1 -o "$T/x.png"
      contains "and says why" "CUDA"
      [ -e "$T/x.png" ] && bad "it left an image" || ok "and writes no image"
    fi
  else
    bad "make CUDA=1 failed:"; tail -20 "$T/build"
  fi
fi
finish
