#!/usr/bin/env bash
# The GPU checks of a change, on a GPU machine, from the repository root, built there as a user
# builds it (make CUDA=1, default flags). The models and data come in parts (a call carries at
# most 64 MiB): tools/gpu_env.sh gathers them in /root/lingen-dev, which the machine keeps while
# it is held.
#   Here:  bash tools/pack_sysroot.sh; bash tools/gpu_check.sh --pack   (fills .dev/carry-a, -b, -m)
#          move models/*.bin out of the working tree for the calls (git checkout -- models after)
#   There: bash tools/gpu_check.sh PART     (carry .dev/sysroot and .dev/carry-a or -b, and tools)
# PART:
#   load  (carry .dev/carry-a) only gathers the models and data: then b within the idle release
#   a  (carry .dev/carry-a: mnist.bin, mnist-softmax.bin, cifar.bin, MNIST's test set, CIFAR-10's
#      first 20 test images) the build, the GPU against the CPU on MNIST (bits/dim, grids byte
#      for byte), the CPU images of 17cb386's engine against this one (AMX, bf16, int8)
#   m  (carry .dev/carry-m: mnist.bin, mnist-softmax.bin and MNIST's test set; small enough to
#      travel with a training run's .data) the build and the MNIST half of a: bits/dim and grids
#      byte for byte against the CPU, at batch 16 and at the fused step's batches 8 and 1
#   b  (carry .dev/carry-b: cifar-softmax.bin, CIFAR-10's full test set, after load or a) make
#      test-cuda with all four models
#   c  (after b, nothing to carry) the four full test sets on the GPU, liblingen's tests on the
#      GPU, make bench-cuda
#   i  (after load, nothing more to carry) a batch-1 image timed each way a step launches (plain,
#      LINGEN_CUDA_PDL, LINGEN_CUDA_FUSED), and lingen compare on CIFAR-10 with its defaults
#   k  (after load, nothing more to carry) the kernels of a sampling run and their GPU time
#      (tools/profile_cuda.py): MNIST at batch 16,384 and 1, CIFAR-10 at 16,384
#   x  (after load, nothing more to carry) the CPU's make bench on the host's cores (its parts
#      1-4, BENCH_PARTS to change), RUNS times (default 1; one run may take several minutes), each
#      run's summary printed as it ends
# Everything goes to $OUT (logs, grids, test_cuda's report).
set -u
part=${1:-a}
if [ "$part" = --pack ]; then
    data=${LINGEN_DATA:-../shared/data}
    rm -rf .dev/carry-a .dev/carry-b .dev/carry-m
    mkdir -p .dev/carry-m/models .dev/carry-m/data/mnist
    cp models/mnist.bin models/mnist-softmax.bin .dev/carry-m/models/
    cp "$data"/mnist/t10k-* .dev/carry-m/data/mnist/
    mkdir -p .dev/carry-a/models .dev/carry-a/data/mnist .dev/carry-a/data/cifar-10 .dev/carry-b/models .dev/carry-b/data/cifar-10
    cp models/mnist.bin models/mnist-softmax.bin models/cifar.bin .dev/carry-a/models/
    cp "$data"/mnist/t10k-* .dev/carry-a/data/mnist/
    python3 - "$data" <<'PY'
import gzip, sys
with gzip.open(f"{sys.argv[1]}/cifar-10/test_batch.bin.gz") as f: rec = f.read(20 * 3073)
with gzip.open(".dev/carry-a/data/cifar-10/test_batch.bin.gz", "wb") as f: f.write(rec + bytes(9980 * 3073))
PY
    cp models/cifar-softmax.bin .dev/carry-b/models/
    cp "$data"/cifar-10/test_batch.bin.gz .dev/carry-b/data/cifar-10/
    git archive 17cb386 src Makefile > .dev/carry-a/old.tar
    du -sh .dev/carry-a .dev/carry-b .dev/carry-m .dev/sysroot
    exit 0
fi
case $part in load | a | m | b | c | i | k | x) ;; *) echo "gpu_check.sh: no part $part (load, a, m, b, c, i, k, x)" >&2; exit 2 ;; esac
exec > >(tee "$OUT/gpu_check_$part.log") 2>&1
. "$(dirname "$0")/gpu_env.sh"
[ "$part" = load ] && exit 0
t0=$(date +%s)
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
grep -m1 "model name" /proc/cpuinfo; grep -o -w 'avx512f\|avx512_bf16\|avx512_vnni\|amx_tile' /proc/cpuinfo | sort | uniq -c
if [ "$part" = x ]; then make -j16 lingen > "$OUT/build.log" 2>&1   # the CPU build alone
else make -j16 CUDA=1 lingen build-cuda/lingen build-cuda/test_cuda build-cuda/bench_cuda > "$OUT/build.log" 2>&1; fi
rc=$?
echo "make$([ "$part" = x ] || echo " CUDA=1"): exit $rc in $(( $(date +%s) - t0 )) s, $(grep -c warning "$OUT/build.log") warnings, $(grep -m1 -o -- '-march=[a-z0-9-]*' "$OUT/build.log")"
./lingen version
if [ "$part" = a ] || [ "$part" = m ]; then
    for m in mnist mnist-softmax; do
        echo "== $m, 100 test images: GPU, then CPU"
        ./lingen eval bits-per-dim --device cuda --model $m --limit 100 2>&1 | grep -E "bits/dim|rror"
        ./lingen eval bits-per-dim --model $m --limit 100 2>&1 | grep -E "^bits/dim"
        # 16 images at batch 16 (a kernel a product), 8 at 8 and 2 at 1 (the fused step)
        for nb in "16 16" "8 8" "2 1"; do
            set -- $nb
            ./lingen sample --device cuda --model $m -n $1 --batch $2 --seed 5 -o "$OUT/gpu-$m-$2.png" > /tmp/g.log 2>&1
            ./lingen sample --precision f32 --model $m -n $1 --batch $2 --seed 5 -o /tmp/cpu.png > /dev/null 2>&1
            cmp -s "$OUT/gpu-$m-$2.png" /tmp/cpu.png && same="=" || same="DIFFERS FROM"
            echo "grid $m, $1 images at batch $2: the GPU's PNG $same the CPU's float32 PNG ($(tail -1 /tmp/g.log | cut -c1-60))"
        done
    done
fi
if [ "$part" = a ]; then
    echo "== the CPU engine of 17cb386 against this one, the same seeds"
    rm -rf /root/old && mkdir -p /root/old/models && tar -xf .dev/carry-a/old.tar -C /root/old &&
        ln -sf /root/lingen-dev/models/*.bin /root/old/models/ && make -C /root/old -j16 lingen > /root/old/build.log 2>&1
    for env in "" "LINGEN_BF16=0" "LINGEN_INT8=1"; do
        for args in "-n 8 --batch 8" "-n 2 --batch 1" "-n 4 --batch 4" "--model mnist-softmax -n 4 --batch 4"; do
            (cd /root/old && env $env ./lingen sample $args --seed 3 -o /tmp/o.png > /dev/null 2>&1)
            env $env ./lingen sample $args --seed 3 -o /tmp/n.png > /tmp/n.log 2>&1
            cmp -s /tmp/o.png /tmp/n.png && echo "same: $env $args ($(grep -o 'batch [0-9]*[^)]*' /tmp/n.log))" || echo "DIFFERENT: $env $args"
        done
    done
    (cd /root/old && ./lingen eval bits-per-dim --limit 50 | grep "^bits"); ./lingen eval bits-per-dim --limit 50 | grep "^bits"
elif [ "$part" = x ]; then
    for i in $(seq "${RUNS:-1}"); do
        PYTHON=python3 CORES=0-$(( $(nproc) - 1 )) BENCH_PARTS=${BENCH_PARTS:-1,2,3,4} BENCH_OUT="$OUT/bench$i" \
            timeout 540 make bench > "$OUT/bench$i.txt" 2>&1
        echo "make bench run $i: exit $?"; sed -n '/== summary/,$p' "$OUT/bench$i.txt"
    done
elif [ "$part" = i ]; then
    echo "== a batch-1 image, each way of launching a step"
    timeout 120 build-cuda/bench_cuda models/mnist.bin 1 --steps 50 --image 2>&1 | tail -4
    echo "== lingen compare --device cuda --dataset cifar10 (its defaults)"
    /usr/bin/time -f "%e s" timeout 300 ./lingen compare --device cuda --dataset cifar10 > "$OUT/compare_cifar.txt" 2>&1
    echo "exit $?"; tail -15 "$OUT/compare_cifar.txt"
elif [ "$part" = k ]; then
    echo "== where the GPU time of sampling goes, kernel by kernel (tools/profile_cuda.py)"
    make -j16 CUDA=1 lib > "$OUT/lib_build.log" 2>&1; echo "make CUDA=1 lib: exit $?"
    for run in mnist.bin:16384 mnist.bin:1 cifar.bin:16384; do
        LINGEN_LIBRARY=build-cuda/liblingen.so.0 PYTHONPATH=python timeout 200 \
            python3 tools/profile_cuda.py "models/${run%%:*}" --batch "${run#*:}" --top 15 2>&1 | tail -20
    done
elif [ "$part" = b ]; then
    echo "== make test-cuda"
    timeout 560 make test-cuda > "$OUT/test_cuda_b.txt" 2>&1; echo "make test-cuda: exit $?"; grep -v "^ok" "$OUT/test_cuda_b.txt" | tail -30
elif [ "$part" = c ]; then
    echo "== the full test sets on the GPU"
    for m in mnist mnist-softmax cifar cifar-softmax; do
        /usr/bin/time -f "%e s" timeout 200 ./lingen eval bits-per-dim --device cuda --model $m 2>&1 | grep -E "^(bits/dim|paper|speed)|rror"
    done
    echo "== liblingen on the GPU (tests/lib/test_lib.c --quick against this build's lingen)"
    make -j16 CUDA=1 lib > "$OUT/lib_build.log" 2>&1; echo "make CUDA=1 lib: exit $?"
    cc -std=c11 -D_POSIX_C_SOURCE=200809L -O1 -Iinclude -o /tmp/test_lib tests/lib/test_lib.c \
        build-cuda/liblingen.so.0 -Wl,-rpath,"$PWD/build-cuda" -lcjson -lpng -lz -lm -lpthread > "$OUT/lib_cc.log" 2>&1 &&
        LINGEN=./lingen LINGEN_TEST_MODEL=models/mnist.bin LINGEN_TEST_DEVICE=cuda timeout 300 /tmp/test_lib --quick \
        > "$OUT/test_lib_cuda.txt" 2>&1; echo "test_lib --quick on cuda: exit $?"; grep -v "^ok" "$OUT/test_lib_cuda.txt" | tail -10
    echo "== make bench-cuda"
    STEPS=100 timeout 300 make bench-cuda > "$OUT/bench_cuda.txt" 2>&1; echo "make bench-cuda: exit $?"; tail -20 "$OUT/bench_cuda.txt"
fi
echo "part $part done in $(( $(date +%s) - t0 )) s"
