#!/usr/bin/env bash
# Data-parallel scaling of scripts/train.py: training images/s of the MNIST linear model at
# 16 images per GPU and step (torch.compile, mixed linear attention), on 1 GPU and then on N
# GPUs through torchrun; about 15 s of timed training each, after compiling.
#   bash tools/ddp_scaling.sh [N ...]     (from the repository root; default: 1 2)
# DATA (default /root/lingen-data) must hold mnist/, else .data/mnist is copied there first.
# MODE=reduce-overhead measures that torch.compile mode instead of the default one, MODE=eager
# none. If a compiled run fails, the whole comparison is made again without torch.compile.
# Prints one line per N, e.g.
#   1 GPU: 3200.0 images/s (global batch 16, compile default)
#   2 GPUs: 6100.0 images/s (global batch 32, compile default), 95% of 2 x 1 GPU
set -u
DATA=${DATA:-/root/lingen-data}
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
if [ ! -d "$DATA/mnist" ]; then
  [ -d .data/mnist ] || { echo "no $DATA/mnist and no .data/mnist to copy there" >&2; exit 1; }
  mkdir -p "$DATA" && cp -r .data/mnist "$DATA/mnist.tmp" && mv "$DATA/mnist.tmp" "$DATA/mnist" || exit 1
fi
logs=$(mktemp -d)

# measure N MODE: print N's line; fail if the run failed
measure() {
  local n=$1 mode=$2 compile="--compile --compile-mode $2" label="compile $2" img eff=
  [ $mode = eager ] && compile= label=eager
  python3 -m torch.distributed.run --standalone --nproc_per_node=$n scripts/train.py --dataset mnist \
    --attention linear --data "$DATA" --batch 16 --lr 1e-4 --mixed-attention $compile \
    --minutes 0.25 --eval-every 1000 --final-eval 100 --no-f32-check > $logs/$n.$mode.txt 2>&1
  img=$(grep '"final"' $logs/$n.$mode.txt | python3 -c 'import json, sys; print(json.load(sys.stdin)["img_s"])' 2>/dev/null)
  if [ -z "$img" ]; then
    echo "$n GPU(s), $mode: failed; the end of its output:"; tail -n 25 $logs/$n.$mode.txt; return 1
  fi
  [ $n = 1 ] && one=$img
  [ -n "$one" ] && [ $n != 1 ] && eff=$(python3 -c "print(f', {100 * $img / ($n * $one):.0f}% of $n x 1 GPU')")
  echo "$n GPU$([ $n = 1 ] || echo s): $img images/s (global batch $((16 * n)), $label)$eff"
  grep -h 'torch.compile failed' $logs/$n.$mode.txt | cut -c1-300 | head -n 2
}

for mode in ${MODE:-default} eager; do
  one= ok=1
  for n in ${@:-1 2}; do measure $n $mode || { ok=0; break; }; done
  [ $ok = 1 ] || [ $mode = eager ] && break
  echo "(again without torch.compile)"
done
