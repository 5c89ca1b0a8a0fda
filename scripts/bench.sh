#!/usr/bin/env bash
# make bench: lingen's speed figures, each a ratio of two runs made back to back in this one run
# (on a shared machine the two sides of a ratio see the same conditions):
#   1. under load: 2 cores, a busy loop on the second, the default thread count against
#      --threads 1 (and the same on the quiet 2 cores);
#   2. scaling: batch 256 on 2 cores against all of CORES (when CORES has 16 or more);
#   3. RNN sampling at batch 64 on 2 threads against the sgemm ceiling, and against the bound
#      that the ceiling and the state's memory set together (src/engine/ceiling.h);
#   4. lingen against PyTorch's step form (scripts/bench_torch.py; the fastest of its float32,
#      bfloat16 and dynamically quantized 8-bit products) at batch 64 and 1, 2 cores, two
#      alternating rounds; at batch 1 also lingen without 8-bit weights (LINGEN_INT8=0; the
#      default takes them there where the processor has AVX512-VNNI) in the same rounds;
#   5. with the datasets at hand: parallel-form evaluation against the ceiling, and
#      lingen compare --softmax.
# Environment (nothing is built here):
#   LINGEN  the command that runs lingen (default ./lingen), e.g.
#           "lib/ld-linux-x86-64.so.2 --library-path lib ./lingen"
#   PYTHON  the Python with PyTorch (default /usr/bin/python3)
#   CORES   the cores to use, a taskset list such as 0-15 (default: every core this shell may use)
#   MODEL   the model (default models/mnist.bin); BENCH_OUT the output folder (default bench/)
#   BENCH_PARTS  which of the parts above to run, e.g. 2,4 (default: all)
set -euo pipefail
cd "$(dirname "$0")/.."
read -r -a LG <<< "${LINGEN:-./lingen}"
PY=${PYTHON:-/usr/bin/python3}
MODEL=${MODEL:-models/mnist.bin}
case $MODEL in /*) ;; *) MODEL=$PWD/$MODEL ;; esac   # the PyTorch side runs from scripts/
OUT=${BENCH_OUT:-bench}
mkdir -p "$OUT"
SUMMARY="$OUT/summary.txt"
: > "$SUMMARY"

# CORES as a list of core numbers: "0-3,8" -> 0 1 2 3 8
expand() {
  local part out=()
  IFS=, read -r -a parts <<< "$1"
  for part in "${parts[@]}"; do
    if [[ $part == *-* ]]; then out+=($(seq "${part%-*}" "${part#*-}")); else out+=("$part"); fi
  done
  echo "${out[@]}"
}
CORES=${CORES:-$(taskset -pc $$ | sed 's/.*: //')}
read -r -a CPU <<< "$(expand "$CORES")"
[ ${#CPU[@]} -ge 2 ] || { echo "bench.sh: needs 2 cores or more, CORES=$CORES has ${#CPU[@]}" >&2; exit 1; }
# "2 cores" are two physical cores: where the machine has SMT, not two hyperthreads of one core
siblings() { expand "$(cat /sys/devices/system/cpu/cpu$1/topology/thread_siblings_list 2> /dev/null || echo $1)"; }
SECOND=${CPU[1]}
for c in "${CPU[@]:1}"; do
  [[ " $(siblings "${CPU[0]}") " == *" $c "* ]] || { SECOND=$c; break; }
done
TWO="${CPU[0]},$SECOND"
PHYSICAL=$(for c in "${CPU[@]}"; do siblings "$c" | tr ' ' ','; done | sort -u | wc -l)   # physical cores in CORES

say() { echo "$*" | tee -a "$SUMMARY"; }
# images/s from a `lingen sample` run pinned to cores $1; the rest are lingen's arguments
ips() {
  local cores=$1; shift
  taskset -c "$cores" "${LG[@]}" sample --model "$MODEL" -o "$OUT/bench.png" "$@" | tee -a "$OUT/runs.txt" |
    sed -n 's/.*: \([0-9.]*\) images\/s.*/\1/p'
}
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.2f", a / b }'; }
sum() { awk '{ for (i = 1; i <= NF; i++) s += $i } END { printf "%.4f", s }' <<< "$*"; }

# the parts of this run: BENCH_PARTS, a list such as 2,4 (default: all five)
part() { [[ ",${BENCH_PARTS:-1,2,3,4,5}," == *",$1,"* ]]; }

BUSY=
stop_busy() { if [ -n "$BUSY" ]; then kill "$BUSY" 2> /dev/null || true; wait "$BUSY" 2> /dev/null || true; BUSY=; fi; }
trap stop_busy EXIT
trap 'stop_busy; exit 143' TERM INT

echo "== lingen speed, $(grep -m1 'model name' /proc/cpuinfo | sed 's/.*: //'), cores $CORES (${#CPU[@]} logical, $PHYSICAL physical)" | tee "$OUT/runs.txt"

if part 1; then
  echo "== 1. threads on 2 cores ($TWO): default count against --threads 1, quiet, then with core $SECOND busy"
  # -n 8 at batch 8, as a small job on a laptop; alternating pairs (two quiet, six busy: the busy figure
  # moves most), their images/s added
  quiet_d=() quiet_1=() busy_d=() busy_1=()
  for r in 1 2; do quiet_d+=("$(ips "$TWO" -n 8)"); quiet_1+=("$(ips "$TWO" -n 8 --threads 1)"); done
  taskset -c "$SECOND" sh -c 'while :; do :; done' &
  BUSY=$!
  for r in 1 2 3 4 5 6; do busy_d+=("$(ips "$TWO" -n 8)"); busy_1+=("$(ips "$TWO" -n 8 --threads 1)"); done
  stop_busy
  echo "quiet: default ${quiet_d[*]}, --threads 1 ${quiet_1[*]} images/s; busy: default ${busy_d[*]}, --threads 1 ${busy_1[*]}"
  say "under load (2 cores, one busy): default threads at $(ratio "$(sum "${busy_d[@]}")" "$(sum "${busy_1[@]}")")x the speed of --threads 1 (goal >= 0.9)"
  say "quiet (2 cores): default threads at $(ratio "$(sum "${quiet_d[@]}")" "$(sum "${quiet_1[@]}")")x the speed of --threads 1"
fi

if part 2; then
  echo "== 2. scaling at batch 256: 2 cores against ${#CPU[@]}"
  # GFLOP/s of the ceiling's 1024^3 product (src/engine/ceiling.h) on cores $1 with $2 threads
  gflops() {
    taskset -c "$1" "${LG[@]}" sample --model "$MODEL" -n 1 --threads "$2" --ceiling -o "$OUT/bench.png" | tee -a "$OUT/runs.txt" |
      sed -n "s/.* of sgemm's \([0-9.]*\) GFLOP.*/\1/p"
  }
  if [ ${#CPU[@]} -ge 16 ]; then
    two=() all=()   # alternating pairs, their images/s added
    for r in 1 2; do two+=("$(ips "$TWO" -n 256 --batch 256)"); all+=("$(ips "$CORES" -n 256 --batch 256)"); done
    g2=$(gflops "$TWO" 2) gall=$(gflops "$CORES" "${#CPU[@]}")
    say "scaling (batch 256): ${#CPU[@]} cores at $(ratio "$(sum "${all[@]}")" "$(sum "${two[@]}")")x 2 cores (${all[*]} vs ${two[*]} images/s; goal >= 6 on 16); the 1024^3 product alone at $(ratio "$gall" "$g2")x ($gall vs $g2 GFLOP/s)"
    if [ "$PHYSICAL" -lt ${#CPU[@]} ]; then   # SMT: one thread per physical core, for comparison
      phys=$(ips "$CORES" -n 256 --batch 256 --threads "$PHYSICAL")
      say "scaling (batch 256): ${#CPU[@]} cores, $PHYSICAL threads (one per physical core) at $(ratio "$phys" "$(ratio "$(sum "${two[@]}")" 2)")x 2 cores ($phys images/s)"
    fi
  else
    say "scaling (batch 256): skipped, CORES has ${#CPU[@]} cores (needs 16 or more)"
  fi
fi

if part 3; then
  echo "== 3. RNN sampling at batch 64, 2 threads, against the sgemm ceiling"
  taskset -c "$TWO" "${LG[@]}" sample --model "$MODEL" -n 64 --batch 64 --threads 2 --ceiling -o "$OUT/bench.png" |
    tee "$OUT/sample64.txt" | tee -a "$OUT/runs.txt"
  ips64=$(sed -n 's/.*: \([0-9.]*\) images\/s.*/\1/p' "$OUT/sample64.txt")
  say "ceiling (batch 64, 2 threads): $(sed -n 's/.* = \([0-9]*%\) of sgemm.s \([0-9.]*\) GFLOP.*/\1 of \2 GFLOP\/s/p' "$OUT/sample64.txt") (goal >= 75%); its state ($(sed -n 's/.*the state, \([0-9.]* MB\) .*: \([0-9.]*\) GB\/s in place.*/\1 at \2 GB\/s/p' "$OUT/sample64.txt")) bounds a step at $(sed -n 's/.*= \([0-9]*%\) of the ceiling; the run reached \([0-9]*%\) of that bound/\1 of the ceiling, the run at \2 of that/p' "$OUT/sample64.txt")"
fi

if part 4; then
  echo "== 4. lingen against PyTorch's step form, same weights, 2 cores"
  # Two alternating rounds at each batch, their images/s added: lingen, then PyTorch's products in
  # float32, in bfloat16 (as lingen's steps where the processor has AVX512-BF16) and on 8-bit
  # weights (as lingen's at small batches where it has AVX512-VNNI); the fastest is the round's peer
  batches="64 1"
  if ! "$PY" -c 'import torch' 2> /dev/null; then
    say "vs PyTorch: skipped, $PY cannot import torch (PYTHON= names one that can)"
    batches=
  fi
  for B in $batches; do
    lgs=() tps=() no8=()
    for r in 1 2; do
      if [ "$B" = 64 ]; then
        steps=50; if [ "$r" = 1 ] && [ -n "${ips64:-}" ]; then lg=$ips64; else lg=$(ips "$TWO" -n 64 --batch 64 --threads 2); fi
      else
        steps=200; lg=$(ips "$TWO" -n 4 --batch 1 --threads 2)
        # the same, never on 8-bit weights, where the default takes them (elsewhere both are one kernel)
        if tail -n 1 "$OUT/runs.txt" | grep -q '8-bit weights'; then
          no8+=("$(LINGEN_INT8=0 ips "$TWO" -n 4 --batch 1 --threads 2)")
        fi
      fi
      tj=$(cd scripts && for dt in "" --bf16 --int8; do taskset -c "$TWO" "$PY" bench_torch.py "$MODEL" --batch $B --steps $steps --threads 2 $dt || true; done)
      echo "$tj" >> "$OUT/runs.txt"
      read -r tips tdt tname <<< "$(echo "$tj" | "$PY" -c 'import json,sys; j=max((json.loads(l) for l in sys.stdin if l.startswith("{")), key=lambda r: r["images_per_s"]); print("%.4g" % j["images_per_s"], j["dtype"], "PyTorch %s (BLAS %s, MKL %s, oneDNN %s%s)" % (j["torch"], j["blas"], "yes" if j["mkl"] else "no", "yes" if j["onednn"] else "no", ", " + j["cpu_capability"] if j["cpu_capability"] else ""))')"
      lgs+=("$lg") tps+=("$tips $tdt")
    done
    goal=4; [ "$B" = 1 ] && goal=7
    say "vs $tname, batch $B: lingen at $(ratio "$(sum "${lgs[@]}")" "$(sum "${tps[@]%% *}")")x (${lgs[*]} vs ${tps[0]}, ${tps[1]} images/s, two rounds; goal >= $goal)"
    [ ${#no8[@]} -gt 0 ] &&
      say "vs $tname, batch $B, LINGEN_INT8=0: lingen at $(ratio "$(sum "${no8[@]}")" "$(sum "${tps[@]%% *}")")x (${no8[*]} images/s, in the same rounds; the default at $(ratio "$(sum "${lgs[@]}")" "$(sum "${no8[@]}")")x this)"
  done
fi

if part 5; then
  data=${LINGEN_DATA:-data}
  if [ -d "$data/mnist" ]; then
    echo "== 5. parallel-form evaluation against the ceiling, 2 threads"
    taskset -c "$TWO" "${LG[@]}" eval bits-per-dim --model "$MODEL" --limit 32 --threads 2 --ceiling | tee "$OUT/eval.txt"
    say "ceiling (evaluation, parallel form, 2 threads): $(sed -n 's/.* = \([0-9]*%\) of sgemm.*/\1/p' "$OUT/eval.txt")"
    echo "== lingen compare --softmax, 2 threads"
    taskset -c "$TWO" "${LG[@]}" compare --softmax --threads 2 --json "$OUT/compare.json" | tee "$OUT/compare.txt"
    "$PY" scripts/plot_compare.py "$OUT/compare.json" "$OUT/compare.png" || echo "(no plot: $PY lacks matplotlib)"
  fi
fi

echo "== summary"
cat "$SUMMARY"
