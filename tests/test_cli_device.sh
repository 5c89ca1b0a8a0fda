#!/usr/bin/env bash
# CLI tests of --device: cpu is the default and explicit, a bad name is a usage error, and cuda
# in a build without CUDA fails with a clear message (a CUDA build without a GPU: "no CUDA
# device"). The GPU itself is tested by make test-cuda. Run from the repository root.
set -u
M=tests/fixtures/tiny-linear-mnist.bin
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
failed=0
# check DESCRIPTION TEST...: one ok/FAIL line for the test command's status
check() {
  local what=$1; shift
  if "$@"; then echo "ok   $what"; else echo "FAIL $what"; failed=$((failed + 1)); fi
}
# lingen ARGS...: run ./lingen, keeping its status in $rc and its output in $dir/log
lingen() { ./lingen "$@" > "$dir/log" 2>&1; rc=$?; }
said() { grep -q -- "$1" "$dir/log" || { sed 's/^/     /' "$dir/log" | head -5; false; }; }

for c in sample eval complete compare; do
  lingen $c --help
  check "$c --help" [ $rc -eq 0 ]
  check "$c --help lists --device" said "--device"
done
lingen sample --device cpu --model $M -n 2 -o "$dir/a.png"
check "sample --device cpu" [ $rc -eq 0 ]
lingen sample --model $M -n 2 -o "$dir/b.png"
check "sample without --device" [ $rc -eq 0 ]
check "--device cpu is the default (the same images)" cmp -s "$dir/a.png" "$dir/b.png"
lingen sample --device tpu --model $M -n 2 -o "$dir/c.png"
check "sample --device tpu: usage error (exit 2)" [ $rc -eq 2 ]
check "it names the choices" said "must be cpu or cuda"
lingen sample --device cuda --model $M -n 1 -o "$dir/d.png"
if [ $rc -eq 0 ]; then
  check "sample --device cuda (a CUDA build on a GPU) wrote its grid" [ -s "$dir/d.png" ]
else
  check "sample --device cuda without CUDA or a GPU: exit 1" [ $rc -eq 1 ]
  check "it says why" said "CUDA"
  check "nothing written" [ ! -e "$dir/d.png" ]
fi
for c in sample complete; do   # the GPU sampler draws at temperature 1 only
  lingen $c --device cuda --temperature 0.5 --model $M -o "$dir/t.png"
  check "$c --device cuda --temperature 0.5: usage error (exit 2)" [ $rc -eq 2 ]
  check "it says --device cpu is needed" said "needs --device cpu"
  check "nothing written" [ ! -e "$dir/t.png" ]
done
for c in "eval bits-per-dim --limit 1" "complete --index 0" "compare --softmax"; do
  # shellcheck disable=SC2086
  lingen $c --device tpu --model $M
  check "${c%% *} --device tpu: usage error (exit 2)" [ $rc -eq 2 ]
done
echo "$([ $failed -eq 0 ] && echo ok || echo FAIL): test_cli_device.sh: $failed failed"
[ $failed -eq 0 ]
