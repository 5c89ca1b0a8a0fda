#!/usr/bin/env bash
# lingen eval bits-per-dim: both bits/dim conventions, labelled, with the paper's figure beside them.
# Run from the repository root with $LINGEN_DATA set.
set -u
L=./lingen
F=tests/fixtures
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
fails=0
ok()   { echo "ok   $1"; }
bad()  { echo "FAIL $1"; fails=$((fails + 1)); }
expect() {
  local code=$1 what=$2; shift 2
  "$@" > "$T/out" 2>&1; local rc=$?
  if [ $rc -eq "$code" ]; then ok "$what"; else bad "$what (exit $rc, expected $code)"; sed 's/^/     /' "$T/out" | head -5; fi
}
contains() { if grep -q -- "$2" "$T/out"; then ok "$1"; else bad "$1: no '$2' in:"; sed 's/^/     /' "$T/out" | head -5; fi; }

expect 0 "eval on the tiny linear model" $L eval bits-per-dim --model $F/tiny-linear-mnist.bin --limit 3
cp "$T/out" "$T/par"
contains "eval labels the figure over all 784 sub-pixels" "^bits/dim (all 784 sub-pixels)  *[0-9.]* +- [0-9.]*$"
contains "eval labels the paper's convention, 783 targets" "^bits/dim (paper: first sub-pixel given, 783)  *[0-9.]* +- [0-9.]*"
contains "eval puts the paper's figure beside it" "783) .*paper 0.644 "
expect 0 "eval the same in step form" $L eval bits-per-dim --model $F/tiny-linear-mnist.bin --limit 3 --mode rnn
# Both forms agree in both conventions; the two conventions differ by the first sub-pixel's bits.
python3 - "$T/par" "$T/out" <<'PY' && ok "eval: both conventions, both forms agree" || bad "eval: conventions or forms disagree"
import re, sys
def figures(path):
    text = open(path).read()
    return [float(re.search(re.escape(label) + r"\s+([0-9.]+) \+- ([0-9.]+)", text).group(1))
            for label in ("bits/dim (all 784 sub-pixels)", "bits/dim (paper: first sub-pixel given, 783)")]
(a, g), (a2, g2) = figures(sys.argv[1]), figures(sys.argv[2])
assert abs(a - a2) <= 1e-4 and abs(g - g2) <= 1e-4, (a, g, a2, g2)
assert a != g
PY
expect 0 "eval on the tiny softmax CIFAR-10 model" $L eval bits-per-dim --model $F/tiny-softmax-cifar.bin --limit 1
contains "eval on CIFAR-10: all 3072 sub-pixels" "^bits/dim (all 3072 sub-pixels) "
contains "eval on CIFAR-10: the paper's 3071 and its softmax figure" "^bits/dim (paper: first sub-pixel given, 3071) .*paper 3.47 "

[ $fails -eq 0 ] || { echo "$fails failed"; exit 1; }
