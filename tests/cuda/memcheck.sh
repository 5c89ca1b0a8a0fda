#!/usr/bin/env bash
# compute-sanitizer memcheck on short GPU runs of lingen (every command, both attentions; the
# heads-of-32 fixture for the one-kernel step and the tensor-core products):
#   bash tests/cuda/memcheck.sh [ROOT [BIN]]   (arguments and $LINGEN_LAUNCH as run_tests.sh)
# Any error reported makes the run fail; without compute-sanitizer it says so and passes.
set -u
. "$(dirname "$0")/common.sh"
cs=$(command -v compute-sanitizer || ls /usr/local/cuda/bin/compute-sanitizer 2> /dev/null)
if [ -z "$cs" ]; then
    echo "skip compute-sanitizer: not installed"
else
    for cmd in "sample --device cuda --model $tiny -n 3 --batch 2 -o $tmp/m.png" \
               "eval bits-per-dim --device cuda --model $soft --limit 2 --batch 2" \
               "eval bits-per-dim --device cuda --model $tiny --limit 2 --batch 2" \
               "complete --device cuda --model $soft --index 0 --samples 2 -o $tmp/m3.png" \
               "sample --device cuda --model $heads32 -n 2 --batch 2 -o $tmp/h.png" \
               "sample --device cuda --model $heads32 -n 12 --batch 12 -o $tmp/h.png"; do
        # shellcheck disable=SC2086
        if timeout "${MEMCHECK_TIMEOUT:-120}" "$cs" --tool memcheck --error-exitcode 99 --print-limit 10 "${launch[@]}" "$lingen" $cmd > "$tmp/cs.log" 2>&1; then
            ok "memcheck: lingen $cmd"
        else
            bad "memcheck (exit $?): lingen $cmd"; tail -25 "$tmp/cs.log"
        fi
    done
fi
echo "$([ $fails -eq 0 ] && echo ok || echo FAIL): memcheck.sh: $fails failed"
[ $fails -eq 0 ]
