#!/usr/bin/env bash
# Training throughput of MNIST settings, one short run each on one GPU, from the repository
# root there: images/s (steps after the first, compiled ones), so that the long runs take the
# fastest setting that keeps the per-epoch curve.
#   bash tools/train_sweep.sh DATA SECONDS [SETTING...]
# DATA holds mnist/ (train and test files). A SETTING is "NAME|train.py arguments"; without any,
# the list below. Each run trains SECONDS (compilation not counted) and prints one line:
#   sweep NAME: X images/s (batch B), train bits/dim Y after Z epochs
# Logs go to $OUT (or /tmp) as sweep-NAME.jsonl.
set -u
data=$1 secs=$2; shift 2
out=${OUT:-/tmp}
settings=("$@")
[ ${#settings[@]} -gt 0 ] || settings=(
    "lin-b64|--attention linear --batch 64 --lr 5e-4 --compile"
    "lin-b64-mixed|--attention linear --batch 64 --lr 5e-4 --compile --mixed-attention"
    "lin-b256-mixed|--attention linear --batch 256 --lr 1e-3 --compile --mixed-attention"
    "lin-b64-mixed-c128|--attention linear --batch 64 --lr 5e-4 --compile --mixed-attention --chunk 128"
    "lin-b128|--attention linear --batch 128 --lr 7e-4 --compile"
    "lin-b256|--attention linear --batch 256 --lr 1e-3 --compile"
    "lin-b64-ro|--attention linear --batch 64 --lr 5e-4 --compile --compile-mode reduce-overhead"
    "lin-b64-graph|--attention linear --batch 64 --lr 5e-4 --whole-graph"
    "soft-b64|--attention softmax --batch 64 --lr 5e-4 --attn-dropout 0.1 --compile"
    "soft-b256|--attention softmax --batch 256 --lr 1e-3 --attn-dropout 0.1 --compile"
)
for s in "${settings[@]}"; do
    name=${s%%|*} args=${s#*|}
    log=$out/sweep-$name.jsonl
    rm -f "$log"
    # shellcheck disable=SC2086
    PYTHONUNBUFFERED=1 timeout $((secs + 240)) python3 scripts/train.py --dataset mnist --data "$data" \
        --minutes "$(awk -v s="$secs" 'BEGIN { print s / 60 }')" --dropout 0.1 --eval-every 1000 \
        --final-eval 500 --no-f32-check --log-file "$log" $args > "$out/sweep-$name.txt" 2>&1
    rc=$?
    python3 - "$log" "$name" "$rc" <<'PY'
import json, sys
log, name, rc = sys.argv[1], sys.argv[2], int(sys.argv[3])
try:
    recs = [json.loads(l) for l in open(log)]
except OSError:
    recs = []
fin = [r for r in recs if r.get("final")]
steps = [r for r in recs if "train_bpd" in r]
if not fin or not steps:
    print(f"sweep {name}: failed (exit {rc}); see sweep-{name}.txt")
else:
    f, last = fin[-1], steps[-1]
    print(f"sweep {name}: {f['img_s']:.0f} images/s, train bits/dim {last['train_bpd']:.4f} after "
          f"{last['epoch']:.2f} epochs, test (500) " + " ".join(f"{k[9:]} {v}" for k, v in f.items() if k.startswith("test_bpd_")))
PY
done
