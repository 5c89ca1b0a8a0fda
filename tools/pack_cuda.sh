#!/usr/bin/env bash
# Build lingen with CUDA on this machine (nvcc, no GPU needed) and pack, into .dev/cuda/, what a
# GPU machine with the CUDA libraries (cuBLAS in /usr/local/cuda/lib64) needs to run the GPU tests
# and the benchmark without building: the binaries, every shared library they use but CUDA's
# (OpenBLAS compressed with xz; glibc apart, in glibc/, for machines whose own is older), the
# fixtures, the scripts, and the first test images (100 MNIST, 20 CIFAR-10) as small files in
# the datasets' own formats (CIFAR-10's batch padded to its 10,000 records with zeros). The models come from the tree it runs in (models/).
# Then, on the GPU machine, from the repository root: bash tools/cuda_remote.sh
set -euo pipefail
cd "$(dirname "$0")/.."
out=.dev/cuda
build=build-cuda-pack
data=${LINGEN_DATA:-/work/shared/data}
rm -rf "$out" && mkdir -p "$out/lib" "$out/glibc" "$out/data/mnist" "$out/data/cifar-10" "$out/tests" "$out/scripts"

# AVX2 at most: the GPU machine's processor is not this one
saved=$(mktemp -d)
[ -e lingen ] && mv lingen "$saved/"
nice make -j2 CUDA=1 BUILD=$build OPT="-O3 -march=x86-64-v3 -fno-trapping-math" lingen $build/test_cuda $build/bench_cuda
mv lingen "$out/"
[ -e "$saved/lingen" ] && mv "$saved/lingen" .
rmdir "$saved" 2> /dev/null || true
cp $build/test_cuda $build/bench_cuda "$out/"

# shared libraries: CUDA's stay out (the GPU machine has its own, matching its driver)
for lib in $(ldd "$out/lingen" "$out/test_cuda" "$out/bench_cuda" | awk '/=>/ {print $3} /ld-linux/ && !/=>/ {print $1}' | sort -u); do
    name=$(basename "$lib")
    case "$name" in
        libcublas*|libcudart*|libcuda.so*) continue ;;
        libc.so.*|libm.so.*|ld-linux*|libpthread.so.*|libdl.so.*|librt.so.*) cp -L "$lib" "$out/glibc/$name" ;;
        libopenblas*) cp -L "$lib" "$out/lib/$name" && xz -T2 -6 -f "$out/lib/$name" ;;
        *) cp -L "$lib" "$out/lib/$name" ;;
    esac
done

cp -r tests/fixtures "$out/tests/"
mkdir -p "$out/tests/cuda"
cp tests/cuda/*.sh "$out/tests/cuda/"
cp scripts/bench_cuda.sh scripts/bench_torch_cuda.py scripts/model.py scripts/modelfile.py tools/cuda_remote.sh "$out/scripts/"

# the first test images, in the formats dataset.c reads
python3 - "$data" "$out/data" <<'PY'
import gzip, struct, sys
src, dst = sys.argv[1], sys.argv[2]
with gzip.open(f"{src}/mnist/t10k-images-idx3-ubyte.gz") as f:
    f.read(16); img = f.read(100 * 784)
with gzip.open(f"{src}/mnist/t10k-labels-idx1-ubyte.gz") as f:
    f.read(8); lab = f.read(100)
with gzip.open(f"{dst}/mnist/t10k-images-idx3-ubyte.gz", "wb") as f:
    f.write(struct.pack(">IIII", 0x803, 100, 28, 28) + img)
with gzip.open(f"{dst}/mnist/t10k-labels-idx1-ubyte.gz", "wb") as f:
    f.write(struct.pack(">II", 0x801, 100) + lab)
with gzip.open(f"{src}/cifar-10/test_batch.bin.gz") as f:
    rec = f.read(20 * 3073)
with gzip.open(f"{dst}/cifar-10/test_batch.bin.gz", "wb") as f:   # a batch holds 10,000: zeros after the 20
    f.write(rec + bytes(9980 * 3073))
PY
git rev-parse HEAD > "$out/COMMIT"
du -sh "$out"
