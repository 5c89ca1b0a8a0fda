#!/usr/bin/env bash
# CLI tests, output files: grids too large to encode, outputs that collide or cannot be written,
# and what happens to a file already there (read-only, owner, mode, links, symlinks in sticky
# directories, temporary files left by a killed run). Run from the repository root (make test-cli).
set -u
. tests/cli_common.sh
export OMP_WAIT_POLICY=passive   # one-thread runs below; no spinning on a busy machine
M=$F/tiny-linear-mnist.bin
# edit_meta IN OUT KEY=VALUE...: a copy of a model file with metadata values changed
edit_meta() {
  python3 - "$@" <<'PY'
import json, struct, sys
d = open(sys.argv[1], "rb").read(); n = struct.unpack("<Q", d[:8])[0]
h = json.loads(d[8:8 + n])
for kv in sys.argv[3:]:
    k, v = kv.split("=", 1); h["__metadata__"][k] = v
hb = json.dumps(h).encode(); hb += b" " * (-len(hb) % 8)
open(sys.argv[2], "wb").write(struct.pack("<Q", len(hb)) + hb + d[8 + n:])
PY
}

# ---------------------------------------------------------------- grids the PNG encoder cannot hold
# refused at once (the sampling would take hours), saying how many fit; nothing written
edit_meta $F/tiny-linear-cifar.bin "$T/c64.bin" height=64 width=64
expect 1 "sample: a 64x64x3 grid of 330,000 images" timeout 20 $L sample --threads 1 --model "$T/c64.bin" -n 330000 -o "$T/big.png" --outdir "$T/bigtiles"
contains "64x64x3 grid: says why and how many fit" "big.png: a grid of 330000 images of 64x64x3 is 4.31 GB of pixels, more than the PNG encoder takes (0.95 GB): at most 72630 images fit in one grid"
expect 1 "sample: a CIFAR-10 grid of a million images" timeout 20 $L sample --threads 1 --model $F/tiny-linear-cifar.bin -n 1000000 -o "$T/big.png"
contains "CIFAR-10 grid: at most 273529" "at most 273529 images fit in one grid"
if ls "${LINGEN_DATA:-data}"/cifar-10/test_batch* > /dev/null 2>&1; then
  expect 1 "complete: 10,000 inputs x 1,026 tiles" timeout 20 $L complete --threads 1 --model $F/tiny-linear-cifar.bin --index 0-9999 --samples 1024 -o "$T/big.png"
  contains "complete's grid: says how many fit" "big.png: a grid of 10260000 images of 32x32x3 .* at most"
fi
[ -e "$T/big.png" ] || [ -e "$T/bigtiles" ] && bad "a refused grid left files" || ok "a refused grid: nothing written"

finish
