#!/usr/bin/env bash
# The speed figures on another machine, from the folder tools/pack_remote.sh made (copied
# there whole): unpack the compressed libraries, then scripts/bench.sh with that lingen, within
# a time limit. Output: $OUT/bench.txt (and bench.sh's files under $OUT/bench/).
#   OUT=/some/dir CORES=0-15 PYTHON=python3 bash tools/bench_remote.sh
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-.}
mkdir -p "$OUT/bench"
for f in lib/*.xz; do [ -e "$f" ] && xz -d -f "$f"; done
export LINGEN="$PWD/lib/ld-linux-x86-64.so.2 --library-path $PWD/lib $PWD/lingen"
export PYTHON=${PYTHON:-python3} CORES=${CORES:-0-15} BENCH_OUT="$OUT/bench" BENCH_PARTS=${BENCH_PARTS:-1,2,3,4}
{
  echo "== $(date -u), $(nproc) cores usable, CORES=$CORES"
  $LINGEN --help > /dev/null && echo "lingen runs: $LINGEN"
  timeout 540 bash scripts/bench.sh
  echo "bench.sh exit code $?"
} > "$OUT/bench.txt" 2>&1
cat "$OUT/bench.txt"
