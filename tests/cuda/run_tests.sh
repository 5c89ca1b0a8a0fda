#!/usr/bin/env bash
# The GPU tests (make test-cuda), from a source tree or a packed folder (no build here):
#   bash tests/cuda/run_tests.sh [ROOT [BIN]]
# ROOT holds models/ and tests/fixtures/ (default .), BIN test_cuda (default build-cuda); lingen
# is ROOT/lingen or BIN/lingen. $LINGEN_LAUNCH, if set, prefixes every binary (a dynamic loader
# and its --library-path, for a packed folder). $LINGEN_DATA: the test images.
# Prints ok/FAIL lines; exits 1 if any check failed. compute-sanitizer: tests/cuda/memcheck.sh.
set -u
. "$(dirname "$0")/common.sh"

echo "== test_cuda (head outputs, bits/dim, sampler, generation)"
if timeout "${TEST_TIMEOUT:-450}" "${launch[@]}" "$bin/test_cuda" "$root"; then ok "test_cuda"; else bad "test_cuda (exit $?)"; fi

echo "== lingen --device cuda"
if timeout 60 "${launch[@]}" "$lingen" sample --device cuda --model "$tiny" -n 6 --batch 4 -o "$tmp/s.png" && [ -s "$tmp/s.png" ]; then
    ok "sample --device cuda writes its PNG"
else bad "sample --device cuda"; fi
out=$(timeout 60 "${launch[@]}" "$lingen" eval bits-per-dim --device cuda --model "$tiny" --limit 8 2>&1)
cpu=$(timeout 60 "${launch[@]}" "$lingen" eval bits-per-dim --model "$tiny" --limit 8 2>&1)
g=$(echo "$out" | awk '/^bits\/dim/ {print $2}'); c=$(echo "$cpu" | awk '/^bits\/dim/ {print $2}')
if [ -n "$g" ] && [ -n "$c" ] && awk -v g="$g" -v c="$c" 'BEGIN { exit !(g - c < 2e-5 && c - g < 2e-5) }'; then ok "eval --device cuda: $g bits/dim, the CPU's $c"; else bad "eval --device cuda: '$g' against the CPU's '$c': $out"; fi
if timeout 60 "${launch[@]}" "$lingen" complete --device cuda --model "$tiny" --index 0-1 --samples 2 -o "$tmp/c.png" > /dev/null && [ -s "$tmp/c.png" ]; then
    ok "complete --device cuda writes its PNG"
else bad "complete --device cuda"; fi
timeout 30 "${launch[@]}" "$lingen" sample --device tpu -n 1 -o "$tmp/x.png" 2> /dev/null
rc=$?; [ $rc -eq 2 ] && ok "--device tpu: usage error (exit 2)" || bad "--device tpu: exit $rc, expected 2"
if out=$(timeout 120 "${launch[@]}" "$lingen" compare --softmax --device cuda --model "$tiny" --softmax-model "$soft" -n 4 --batch 4 --limit 4 2>&1) &&
   echo "$out" | grep -qi "softmax"; then
    ok "compare --softmax --device cuda (tiny models)"
else bad "compare --softmax --device cuda: $out"; fi

echo "== sample grids: the GPU's against the CPU's float32 products, the same seed"
# MODEL N: the PNG grids of N images byte for byte (the CPU's products in float32: LINGEN_BF16=0,
# LINGEN_INT8=0; the GPU's are float32-exact). An image may part where a draw lands within
# float32 rounding of a bin edge, which a few CIFAR-10 images of 3,072 draws do: there a
# difference is reported, not failed, and test_cuda's sample checks (above) tell each such
# parting from any other.
for spec in "mnist.bin 16" "mnist-softmax.bin 16" "cifar.bin 4" "cifar-softmax.bin 2"; do
    read -r model n <<< "$spec"
    m=$root/models/$model
    [ -f "$m" ] || { bad "grid $model: $m is missing"; continue; }
    rm -f "$tmp/g.png" "$tmp/c.png"
    timeout 120 "${launch[@]}" "$lingen" sample --device cuda --model "$m" -n "$n" --seed 5 -o "$tmp/g.png" > "$tmp/g.log" 2>&1
    timeout 600 env LINGEN_BF16=0 LINGEN_INT8=0 "${launch[@]}" "$lingen" sample --model "$m" -n "$n" --seed 5 -o "$tmp/c.png" > "$tmp/c.log" 2>&1
    if [ -s "$tmp/g.png" ] && cmp -s "$tmp/g.png" "$tmp/c.png"; then ok "grid $model, $n images: the GPU's PNG = the CPU's, byte for byte"
    elif [ -s "$tmp/g.png" ] && [ -s "$tmp/c.png" ] && [ "${model#cifar}" != "$model" ]; then
        echo "info grid $model, $n images: the PNGs differ (a rounding flip; see test_cuda's sample check)"
    else bad "grid $model, $n images: the GPU's PNG differs from the CPU's ($(tail -1 "$tmp/g.log") / $(tail -1 "$tmp/c.log"))"; fi
done

echo "$([ $fails -eq 0 ] && echo ok || echo FAIL): run_tests.sh: $fails failed"
[ $fails -eq 0 ]
