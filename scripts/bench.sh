#!/usr/bin/env bash
# make bench: the speed figures of README.md, measured in one run, as ratios (this machine is
# shared and noisy: each ratio's two sides are measured back to back with the same threads).
#   RNN-mode sampling at batch 64 against the sgemm ceiling (FLOP per image / sgemm GFLOP/s);
#   parallel-form evaluation against the same ceiling;
#   lingen against the PyTorch reference's step form (CPU, same weights) at batch 64 and 1;
#   lingen compare --softmax: the four-row table, its JSON and plot.
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=${BENCH_OUT:-bench}
MODEL=${MODEL:-models/mnist.bin}
THREADS=${THREADS:-2}
PY=${PYTHON:-/usr/bin/python3}
mkdir -p "$OUT"
echo "== RNN-mode sampling, batch 64, $THREADS threads"
./lingen sample --model "$MODEL" -n 64 --batch 64 --threads "$THREADS" --ceiling -o "$OUT/sample64.png" | tee "$OUT/sample64.txt"
echo "== parallel-form evaluation, $THREADS threads"
./lingen eval bits-per-dim --model "$MODEL" --limit 64 --threads "$THREADS" --ceiling | tee "$OUT/eval.txt"
echo "== lingen vs the PyTorch step form (same weights, $THREADS threads)"
for B in 64 1; do
  n=$B; [ "$B" = 1 ] && n=2
  ips=$(./lingen sample --model "$MODEL" -n $n --batch $B --threads "$THREADS" -o "$OUT/vs$B.png" | sed -n 's/.*: \([0-9.]*\) images\/s.*/\1/p')
  steps=50; [ "$B" = 1 ] && steps=200
  tj=$(cd scripts && $PY bench_torch.py "../$MODEL" --batch $B --steps $steps --threads "$THREADS")
  tips=$(echo "$tj" | $PY -c 'import json,sys; print(json.load(sys.stdin)["images_per_s"])')
  $PY -c "print(f'batch $B: lingen {float(\"$ips\"):.3f} images/s, PyTorch {float(\"$tips\"):.3f} images/s: lingen {float(\"$ips\")/float(\"$tips\"):.1f}x')" | tee "$OUT/vs-torch-$B.txt"
done
echo "== lingen compare --softmax"
./lingen compare --softmax --threads "$THREADS" --json "$OUT/compare.json" --plot "$OUT/compare.png" | tee "$OUT/compare.txt"
