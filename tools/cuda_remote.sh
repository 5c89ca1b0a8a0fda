#!/usr/bin/env bash
# On a GPU machine, from the repository root (models/ there), with .dev/cuda/ from
# tools/pack_cuda.sh beside it: the GPU tests, the benchmark against PyTorch, the compare
# tables and a memcheck, each under a timeout, the whole within about 6 minutes. Everything goes
# to $OUT/cuda.txt (and stdout); 16-image sample grids and the compare JSON to $OUT/. Needs no
# build: only the CUDA libraries (/usr/local/cuda/lib64 or $CUDA_LIB) and, for the PyTorch
# rows, a python3 with torch ($PYTHON).
#   bash tools/cuda_remote.sh   (or bash .dev/cuda/scripts/cuda_remote.sh)
set -u
start=$(date +%s)
budget=${BUDGET:-360}                      # seconds for everything
pack=.dev/cuda
[ -x "$pack/lingen" ] || pack=$(cd "$(dirname "$0")/.." && pwd)
out=${OUT:-/tmp/lingen-cuda-out}
mkdir -p "$out"
report=$out/cuda.txt
cudalib=${CUDA_LIB:-/usr/local/cuda/lib64}
export PYTHON=${PYTHON:-python3}
export LINGEN_DATA=${LINGEN_DATA:-$pack/data}
exec > >(tee "$report") 2>&1

left() { echo $((budget - ($(date +%s) - start))); }
# step NAME CAP CMD...: run under min(CAP, what is left of the budget)
step() {
    local name=$1 cap=$2; shift 2
    local t; t=$(left); [ "$t" -gt "$cap" ] && t=$cap
    echo; echo "==== $name (timeout ${t}s, $(left)s left)"
    if [ "$t" -le 5 ]; then echo "SKIPPED $name: out of time"; return; fi
    local s; s=$(date +%s)
    timeout "$t" "$@"
    local rc=$?
    echo "==== $name: exit $rc$([ $rc -eq 124 ] && echo ' (TIMEOUT)') after $(( $(date +%s) - s ))s"
}

echo "lingen CUDA run: $(date -u), pack of commit $(cat "$pack/COMMIT" 2> /dev/null), tree $(git rev-parse --short HEAD 2> /dev/null)"
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv 2>&1 | head -3
"$PYTHON" -c "import torch; print('torch', torch.__version__, 'cuda', torch.version.cuda, torch.cuda.is_available())" 2>&1 | tail -1

# unpack: OpenBLAS is xz-compressed (python's lzma where xz is missing)
for f in "$pack"/lib/*.xz; do
    [ -e "$f" ] || continue
    xz -d -f "$f" 2> /dev/null || "$PYTHON" -c "import lzma,sys; open(sys.argv[1][:-3],'wb').write(lzma.open(sys.argv[1]).read())" "$f"
done
# the machine's own C library if it runs the binaries, else the packed one through its loader
direct="env LD_LIBRARY_PATH=$pack/lib:$cudalib"
if $direct "$pack/lingen" --help > /dev/null 2>&1; then
    export LINGEN_LAUNCH=$direct
else
    export LINGEN_LAUNCH="$pack/glibc/ld-linux-x86-64.so.2 --library-path $pack/lib:$pack/glibc:$cudalib"
fi
echo "launch: $LINGEN_LAUNCH"
read -r -a launch <<< "$LINGEN_LAUNCH"
"${launch[@]}" "$pack/lingen" --help 2>&1 | head -2

step "GPU tests (tests/cuda/run_tests.sh)" 480 env TEST_TIMEOUT=450 bash "$pack/tests/cuda/run_tests.sh" . "$pack"
step "benchmark (scripts/bench_cuda.sh)" 150 bash "$pack/scripts/bench_cuda.sh" . "$pack"
step "sample --device cuda, MNIST, 4096 at once" 20 "${launch[@]}" "$pack/lingen" sample --device cuda -n 4096 --batch 4096 -o /tmp/lingen_mnist_4096.png
step "sample --device cuda, MNIST, 16" 10 "${launch[@]}" "$pack/lingen" sample --device cuda -n 16 -o "$out/mnist_16.png"
step "sample --device cuda, CIFAR-10, 16" 15 "${launch[@]}" "$pack/lingen" sample --device cuda --model models/cifar.bin -n 16 -o "$out/cifar_16.png"
step "sample --device cuda, CIFAR-10, 1024 at once" 20 "${launch[@]}" "$pack/lingen" sample --device cuda --model models/cifar.bin -n 1024 --batch 1024 -o /tmp/lingen_cifar_1024.png
step "compare --softmax --device cuda, MNIST" 40 "${launch[@]}" "$pack/lingen" compare --softmax --device cuda -n 256 --batch 256 --json "$out/compare_mnist.json"
step "compare --softmax --device cuda, CIFAR-10" 90 "${launch[@]}" "$pack/lingen" compare --softmax --device cuda --dataset cifar10 -n 16 --batch 16 --limit 10 --json "$out/compare_cifar.json"
step "compute-sanitizer memcheck (tests/cuda/memcheck.sh)" 60 env MEMCHECK_TIMEOUT=30 bash "$pack/tests/cuda/memcheck.sh" . "$pack"
echo
echo "done in $(( $(date +%s) - start ))s; report: $report"
grep -E "^(FAIL|ok:|FAIL:)|: [0-9]+ of [0-9]+ checks failed|TIMEOUT|SKIPPED" "$report" | sort | uniq -c | sort -rn | head -30
