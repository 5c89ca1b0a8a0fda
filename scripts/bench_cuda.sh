#!/usr/bin/env bash
# GPU sampling speed, lingen against the strongest PyTorch step, in one run (make bench-cuda):
# lingen's RNN step (one CUDA graph per step: layers, head, sampler; float32 accuracy)
# and scripts/bench_torch_cuda.py (the PyTorch model's step, state in place, one CUDA graph,
# fp32 and bf16 weights) at the same batches, a few hundred steps each; then the batch-1
# latency of a whole MNIST image, and a table of images/s with lingen's ratio to PyTorch's best
# and to the state-traffic limit (S and z read and written once a step at the measured copy bandwidth).
#   bash scripts/bench_cuda.sh [ROOT [BIN]]   ROOT: models/ (.), BIN: bench_cuda's folder
# $PYTHON: a python3 with PyTorch and CUDA (default python3). $STEPS: steps timed (default 200).
# $LINGEN_LAUNCH, if set, prefixes bench_cuda (a loader and its library path: a packed folder).
set -u
root=${1:-.}
bin=${2:-build-cuda}
py=${PYTHON:-python3}
steps=${STEPS:-200}
read -r -a launch <<< "${LINGEN_LAUNCH:-}"
log=$(mktemp)
trap 'rm -f "$log"' EXIT

run() { echo "\$ $*"; "$@" 2>&1 | tee -a "$log"; }
run "${launch[@]}" "$bin/bench_cuda" "$root/models/mnist.bin" 1 64 1024 4096 16384 --steps "$steps" --image
run "${launch[@]}" "$bin/bench_cuda" "$root/models/cifar.bin" 64 1024 4096 16384 65536 --steps "$steps"
run "$py" "$(dirname "$0")/bench_torch_cuda.py" "$root/models/mnist.bin" --batch 1 64 1024 4096 16384 --steps "$steps"
run "$py" "$(dirname "$0")/bench_torch_cuda.py" "$root/models/cifar.bin" --batch 64 1024 4096 16384 65536 --steps "$steps"

echo
echo "images/s (RNN sampling; lingen FP32 is exact to the CPU's 1e-4, bf16 is not)"
awk '
/^lingen-cuda .* batch [0-9]+ FP32: [0-9.]+ images\/s/ {
    m = $2; sub(/.*\//, "", m); b = $4; k = m " " b; if (!(k in seen)) { seen[k] = 1; order[n++] = k }
    lf[k] = $6; lim[k] = ""; if (match($0, /limit [0-9]+/)) lim[k] = substr($0, RSTART + 6, RLENGTH - 6)
}
/^torch-graph .* batch [0-9]+ (fp32|bf16): [0-9.]+ images\/s/ {
    m = $2; sub(/.*\//, "", m); b = $4; k = m " " b; if (!(k in seen)) { seen[k] = 1; order[n++] = k }
    if ($5 == "fp32:") tf[k] = $6; else tb[k] = $6
}
END {
    printf "%-10s %6s %12s %12s %12s %9s %12s %9s\n", "model", "batch", "lingen FP32", "torch fp32", "torch bf16", "ratio", "state limit", "of limit"
    for (i = 0; i < n; i++) {
        k = order[i]; split(k, p, " ")
        best = tf[k] + 0 > tb[k] + 0 ? tf[k] : tb[k]
        r = best > 0 && lf[k] > 0 ? sprintf("%.2fx", lf[k] / best) : "-"
        f = lim[k] > 0 && lf[k] > 0 ? sprintf("%.0f%%", 100 * lf[k] / lim[k]) : "-"
        printf "%-10s %6s %12s %12s %12s %9s %12s %9s\n", p[1], p[2], lf[k] ? lf[k] : "-", tf[k] ? tf[k] : "-", tb[k] ? tb[k] : "-", r, lim[k] ? lim[k] : "-", f
    }
    print "ratio: lingen FP32 / the better of torch fp32 and bf16 (whole-step CUDA graph), same batch"
    print "state limit: images/s if a step took only the time to read and write S and z at the copy bandwidth"
}' "$log"
grep -m1 "copy bandwidth" "$log"
grep "whole image" "$log"
