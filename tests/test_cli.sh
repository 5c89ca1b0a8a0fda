#!/usr/bin/env bash
# CLI tests: exit codes, help, outputs, error messages, Ctrl-C. Run from the repository root.
set -u
L=./lingen
F=tests/fixtures
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
fails=0
ok()   { echo "ok   $1"; }
bad()  { echo "FAIL $1"; fails=$((fails + 1)); }
# expect CODE DESCRIPTION CMD...: run, check the exit code; stdout+stderr in $T/out
expect() {
  local code=$1 what=$2; shift 2
  "$@" > "$T/out" 2>&1; local rc=$?
  if [ $rc -eq "$code" ]; then ok "$what"; else bad "$what (exit $rc, expected $code)"; sed 's/^/     /' "$T/out" | head -5; fi
}
contains() { if grep -q -- "$2" "$T/out"; then ok "$1"; else bad "$1: no '$2' in:"; sed 's/^/     /' "$T/out" | head -5; fi; }
png_size() { python3 -c 'import struct,sys; d=open(sys.argv[1],"rb").read(24); assert d[:8]==b"\x89PNG\r\n\x1a\n"; print(*struct.unpack(">II", d[16:24]))' "$1"; }

# usage and help
expect 2 "no command is a usage error" $L
expect 0 "--help" $L --help
contains "--help lists commands" "sample"
expect 2 "unknown command" $L frobnicate
for c in sample info; do
  expect 0 "$c --help" $L $c --help
  contains "$c --help shows usage" "usage: lingen $c"
  expect 2 "$c with an unknown option" $L $c --bogus
done
expect 2 "sample -n not a number" $L sample -n abc --model $F/tiny-linear-mnist.bin
expect 2 "sample -n 0" $L sample -n 0 --model $F/tiny-linear-mnist.bin
expect 2 "sample --batch missing value" $L sample --model $F/tiny-linear-mnist.bin --batch

# sample: a 4x4 grid of 28x28 (2-pixel borders), linear and softmax, MNIST and CIFAR shapes
for m in tiny-linear-mnist tiny-softmax-mnist; do
  expect 0 "sample $m" $L sample --model $F/$m.bin -n 16 -o "$T/$m.png"
  contains "sample $m reports images/s" "images/s"
  [ "$(png_size "$T/$m.png")" = "122 122" ] && ok "$m grid is 122x122" || bad "$m grid size $(png_size "$T/$m.png")"
done
expect 0 "sample CIFAR-shaped, 3 images, per-image PNGs" $L sample --model $F/tiny-softmax-cifar.bin -n 3 -o "$T/c.png" --outdir "$T/each"
[ "$(png_size "$T/c.png")" = "70 70" ] && ok "CIFAR grid of 3 is 2x2 tiles" || bad "CIFAR grid size $(png_size "$T/c.png")"
[ "$(ls "$T/each" | wc -l)" = 3 ] && [ "$(png_size "$T/each/sample_00002.png")" = "32 32" ] && ok "one 32x32 PNG per image" || bad "per-image PNGs"

# the same seed gives the same images; image k does not depend on the batch it was in
$L sample --model $F/tiny-linear-mnist.bin -n 6 --batch 6 --seed 7 -o "$T/a.png" --outdir "$T/a" > /dev/null
$L sample --model $F/tiny-linear-mnist.bin -n 6 --batch 6 --seed 7 -o "$T/b.png" > /dev/null
cmp -s "$T/a.png" "$T/b.png" && ok "same seed, same images" || bad "same seed gave different images"
$L sample --model $F/tiny-linear-mnist.bin -n 6 --batch 4 --seed 7 -o "$T/c.png" --outdir "$T/c" > /dev/null
same=0; for k in 0 1 2 3 4 5; do cmp -s "$T/a/sample_0000$k.png" "$T/c/sample_0000$k.png" && same=$((same + 1)); done
[ $same -ge 5 ] && ok "image k independent of the batch ($same/6 identical)" || bad "batch changed $((6 - same))/6 images"
$L sample --model $F/tiny-linear-mnist.bin -n 6 --batch 6 --seed 8 -o "$T/d.png" > /dev/null
cmp -s "$T/a.png" "$T/d.png" && bad "another seed gave the same images" || ok "another seed, other images"

# info: the RNN state and the KV cache as in DESIGN.md (L*H*(D*D+D)*4 and L*N*2*d*4)
expect 0 "info linear" $L info --model $F/tiny-linear-mnist.bin
contains "linear state bytes" "RNN state 2304 B"
expect 0 "info softmax" $L info --model $F/tiny-softmax-cifar.bin
contains "softmax KV-cache bytes" "KV cache 1572864 B"
expect 0 "info on the shipped model" $L info
contains "shipped model: 270336-byte state" "RNN state 270336 B"

# bad model files: exit 1 and one line naming the file and the problem
head -c 5000 $F/tiny-linear-mnist.bin > "$T/trunc.bin"
expect 1 "truncated model file" $L info --model "$T/trunc.bin"
contains "truncated: names the file" "$T/trunc.bin"
[ "$(wc -l < "$T/out")" = 1 ] && ok "truncated: one line" || bad "truncated: $(wc -l < "$T/out") lines"
echo "this is not a model" > "$T/text.bin"
expect 1 "non-safetensors file" $L sample --model "$T/text.bin" -n 1 -o "$T/x.png"
contains "non-safetensors: names the file" "$T/text.bin"
python3 - "$F/tiny-linear-mnist.bin" "$T/shape.bin" <<'PY'
import json, struct, sys
d = open(sys.argv[1], "rb").read(); n = struct.unpack("<Q", d[:8])[0]; h = json.loads(d[8:8 + n])
h["layers.1.ff1.weight"]["shape"] = [64, 31]          # same byte count would not match: keep bytes, break shape
h["layers.1.ff1.weight"]["data_offsets"][1] -= 64 * 4
hb = json.dumps(h).encode(); hb += b" " * (-len(hb) % 8)
open(sys.argv[2], "wb").write(struct.pack("<Q", len(hb)) + hb + d[8 + n:])
PY
expect 1 "wrong tensor shape" $L info --model "$T/shape.bin"
contains "wrong shape: names the tensor" "layers.1.ff1.weight"
expect 1 "missing model file" $L info --model "$T/nope.bin"
contains "missing file: names it" "$T/nope.bin"

# unwritable output: exit 1, nothing half-written
expect 1 "unwritable output" $L sample --model $F/tiny-linear-mnist.bin -n 1 -o /nonexistent-dir/x.png
contains "unwritable output: names the path" "/nonexistent-dir/x.png"

# Ctrl-C during sample: the finished images are written, exit 130, no temp files
mkdir "$T/int"
$L sample --model $F/tiny-linear-cifar.bin -n 100000 --batch 1 -o "$T/int/grid.png" > "$T/out" 2>&1 &
pid=$!
sleep 2; kill -INT $pid; wait $pid; rc=$?
[ $rc -eq 130 ] && ok "SIGINT exits 130" || bad "SIGINT exit $rc"
contains "SIGINT says what it wrote" "interrupted: wrote the"
[ -f "$T/int/grid.png" ] && ok "SIGINT wrote the finished images" || bad "SIGINT: no grid"
[ "$(ls "$T/int" | wc -l)" = 1 ] && ok "SIGINT left no temp files" || bad "SIGINT left: $(ls "$T/int")"

echo "$fails failed"
[ $fails -eq 0 ]
