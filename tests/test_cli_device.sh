#!/usr/bin/env bash
# CLI tests of --device: cpu is the default and explicit, a bad name is a usage error, and cuda
# in a build without CUDA fails with a clear message (a CUDA build without a GPU: "no CUDA
# device"). The GPU itself is tested by make test-cuda. Run from the repository root.
set -u
L=./lingen
F=tests/fixtures
M=$F/tiny-linear-mnist.bin
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

for c in sample eval complete compare; do
  expect 0 "$c --help" $L $c --help
  contains "$c --help lists --device" "--device"
done
expect 0 "sample --device cpu" $L sample --device cpu --model $M -n 2 -o "$T/a.png"
expect 0 "sample without --device (the CPU)" $L sample --model $M -n 2 -o "$T/b.png"
cmp -s "$T/a.png" "$T/b.png" && ok "--device cpu is the default (same images)" || bad "--device cpu differs from the default"
expect 2 "sample --device tpu is a usage error" $L sample --device tpu --model $M -n 2 -o "$T/c.png"
contains "it names the choices" "must be cpu or cuda"
if $L sample --device cuda --model $M -n 1 -o "$T/d.png" > "$T/out" 2>&1; then
  ok "sample --device cuda ran (a CUDA build on a GPU)"
else
  rc=$?
  [ $rc -eq 1 ] && ok "sample --device cuda without a GPU: exit 1" || bad "sample --device cuda: exit $rc, expected 1"
  if grep -q "built without CUDA" "$T/out"; then ok "it says: built without CUDA"
  else contains "it says why (no CUDA device)" "CUDA"; fi
  [ ! -e "$T/d.png" ] && ok "nothing written" || bad "an image was written"
fi
for c in "eval bits-per-dim --limit 1" "complete --index 0" "compare --softmax"; do
  # shellcheck disable=SC2086
  expect 2 "${c%% *} --device tpu is a usage error" $L $c --device tpu --model $M
done
echo "$([ $fails -eq 0 ] && echo ok || echo FAIL): test_cli_device.sh: $fails failed"
[ $fails -eq 0 ]
