#!/usr/bin/env bash
# Pack lingen for a machine that has no OpenBLAS, cJSON or libpng: the binaries of `make ship`
# (x86-64-v4, AVX-512 kernels: lingen and bench_products), every shared library they load (from
# ldd) and the dynamic loader, the MNIST model and the benchmark scripts, into .dev/remote/. Libraries over 30 MB (OpenBLAS)
# are xz-compressed; tools/bench_remote.sh unpacks them. There, lingen runs as
#     lib/ld-linux-x86-64.so.2 --library-path lib ./lingen
#   pack_remote.sh [DEST]   (default .dev/remote)
set -euo pipefail
cd "$(dirname "$0")/.."
DEST=${1:-.dev/remote}
make -s ship
rm -rf "$DEST"
mkdir -p "$DEST/lib" "$DEST/models" "$DEST/scripts" "$DEST/tools"
cp build-ship/lingen "$DEST/lingen"
cp build-ship/bench_products "$DEST/bench_products"
ldd build-ship/lingen | awk '/=> \// { print $3 } /^\t\/.*ld-linux/ { print $1 }' | while read -r so; do
  name=$(basename "$so")
  [[ $name == ld-linux* ]] && name=ld-linux-x86-64.so.2
  cp -L "$so" "$DEST/lib/$name"
  if [ "$(stat -c %s "$DEST/lib/$name")" -gt 30000000 ]; then xz -T0 -6 "$DEST/lib/$name"; fi
done
cp models/mnist.bin "$DEST/models/"
cp scripts/bench.sh scripts/bench_torch.py scripts/model.py scripts/modelfile.py "$DEST/scripts/"
cp tools/bench_remote.sh "$DEST/tools/"
du -sh "$DEST"; ls -la "$DEST/lib"
