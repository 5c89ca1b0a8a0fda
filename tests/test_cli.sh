#!/usr/bin/env bash
# CLI tests: exit codes, help, outputs, error messages, Ctrl-C. Run from the repository root.
set -u
. tests/cli_common.sh
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
# nor on the threads: one and two give the same images, at a batch whose draws from the
# mixtures run in a parallel loop (src/engine/generate.c)
$L sample --model $F/tiny-linear-mnist.bin -n 70 --batch 70 --seed 7 --threads 1 -o "$T/t1.png" > /dev/null
$L sample --model $F/tiny-linear-mnist.bin -n 70 --batch 70 --seed 7 --threads 2 -o "$T/t2.png" > /dev/null
cmp -s "$T/t1.png" "$T/t2.png" && ok "1 and 2 threads, the same images" || bad "1 and 2 threads gave different images"
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

# sample --ceiling: the share of sgemm, and for a linear model the bound its state sets, printed
# and in the JSON the same
expect 0 "sample --ceiling --json, linear" $L sample --model $F/tiny-linear-mnist.bin -n 3 --ceiling -o "$T/ce.png" --json "$T/ce.json"
contains "--ceiling: the share of sgemm" "% of sgemm's .* GFLOP/s (1024^3 on the same"
contains "--ceiling: the state's pass" "^ceiling: the state, .* MB for the run's images, read and written once a step: .* GB/s"
contains "--ceiling: the bound it sets" "at most .* images/s = .*% of the ceiling; the run reached .*% of that bound"
${PYTHON:-/usr/bin/python3} - "$T/ce.json" "$T/out" <<'PY' && ok "--ceiling's JSON: the printed bound, and its fractions of the run and of sgemm" || bad "--ceiling's JSON"
import json, re, sys
j = json.load(open(sys.argv[1])); c = j["ceiling"]; out = open(sys.argv[2]).read()
bound = float(re.search(r"at most (\S+) images/s = (\d+)%", out).group(1))
assert float("%.3g" % c["bound_images_per_s"]) == bound   # printed with %.3g
assert abs(c["fraction_of_bound"] - j["images_per_s"] / c["bound_images_per_s"]) < 1e-9
assert abs(c["bound_fraction_of_sgemm"] - c["flops_per_image"] * c["bound_images_per_s"] / 1e9 / c["sgemm_gflops"]) < 1e-9
assert 0 < c["bound_fraction_of_sgemm"] <= 1 and c["state_gbs"] > 0
PY
expect 0 "sample --ceiling, softmax" $L sample --model $F/tiny-softmax-mnist.bin -n 2 --ceiling -o "$T/ce.png"
contains "--ceiling, softmax: the share of sgemm" "% of sgemm's"
lacks "--ceiling, softmax: no state bound (its KV cache grows)" "at most"

# compare: the table, --json and its plot on the tiny fixtures ($LINGEN_DATA for the test images)
CMP="--softmax --model $F/tiny-linear-mnist.bin --softmax-model $F/tiny-softmax-mnist.bin --limit 2 -n 2"
expect 0 "compare --help" $L compare --help
contains "compare --help shows usage" "usage: lingen compare"
expect 0 "compare on tiny models, --json" $L compare $CMP --json "$T/cmp.json"
contains "compare prints the command that plots its JSON" "^plot: python3 scripts/plot_compare.py $T/cmp.json "
for r in "1 linear, RNN mode" "2 softmax, KV cache" "3 softmax, recomputing the prefix" "4 linear, recomputing the prefix"; do
  contains "compare table has row '$r'" "^$r"
done
contains "compare prints the paper's figures" "0.621 bits/dim, 0.45 images/s"
contains "compare prints the sgemm ceiling" "sgemm ceiling"
contains "compare says how rows 3-4 were extrapolated" "trapezoid rule"
python3 - "$T/cmp.json" <<'PY' && ok "compare --json: 4 rows with latencies" || bad "compare --json shape"
import json, sys
c = json.load(open(sys.argv[1]))
assert [r["key"] for r in c["rows"]] == ["linear_rnn", "softmax_kv_cache", "softmax_recompute", "linear_recompute"]
for r in c["rows"]:
    assert r["images_per_s"] > 0 and r["peak_rss_bytes"] > 0 and r["bits_per_dim"] > 0
    assert len(r["latency"]["positions"]) == len(r["latency"]["seconds"]) == (12 if r["extrapolated"] else 784)
assert c["sgemm"]["gflops"] > 0 and c["paper"]["linear"]["images_per_s"] == 142.8
PY
expect 0 "plot_compare.py draws compare's JSON" ${PYTHON:-/usr/bin/python3} scripts/plot_compare.py "$T/cmp.json" "$T/cmp.png"
[ "$(head -c 8 "$T/cmp.png" | od -An -tx1 | tr -d ' ')" = 89504e470d0a1a0a ] && ok "plot_compare.py writes a PNG" || bad "plot_compare.py: no PNG"
expect 2 "compare --plot is not an option (plotting is scripts/plot_compare.py's)" $L compare $CMP --plot "$T/cmp2.png"
# the softmax comparison is the default: without --softmax, the same table
expect 0 "compare without --softmax" $L compare ${CMP#--softmax } --json "$T/cmpd.json"
python3 - "$T/cmp.json" "$T/cmpd.json" <<'PY' && ok "compare without --softmax: the same rows and bits/dim" || bad "compare without --softmax differs"
import json, sys
a, b = (json.load(open(f)) for f in sys.argv[1:])
assert [(r["key"], r["model"], r["bits_per_dim"]) for r in a["rows"]] == [(r["key"], r["model"], r["bits_per_dim"]) for r in b["rows"]]
PY
expect 2 "compare with an unknown option" $L compare --softmax --bogus
expect 2 "compare -n 0" $L compare $CMP -n 0
expect 2 "compare --dataset unknown" $L compare --softmax --dataset svhn
expect 1 "compare with a missing model" $L compare --softmax --model "$T/nope.bin" --softmax-model $F/tiny-softmax-mnist.bin
contains "compare missing model: names it" "$T/nope.bin"
expect 1 "compare with the models swapped" $L compare --softmax --model $F/tiny-softmax-mnist.bin --softmax-model $F/tiny-linear-mnist.bin
contains "compare swapped models: says why" "needs a linear-attention model"
expect 1 "compare with models of other images" $L compare --softmax --model $F/tiny-linear-mnist.bin --softmax-model $F/tiny-softmax-cifar.bin
expect 1 "compare --json unwritable" $L compare $CMP --json /nonexistent-dir/c.json
contains "compare --json unwritable: names the path" "/nonexistent-dir/c.json"

# complete: test images by index and PNG files; the grid has a row per input of K + 2 tiles
# (original, occluded, K completions), 30 pixels a tile (28 + the 2-pixel border), 34 for CIFAR
CM=$F/tiny-linear-mnist.bin
expect 0 "complete --help" $L complete --help
contains "complete --help shows usage" "usage: lingen complete"
expect 2 "complete with an unknown option" $L complete --bogus
D=${LINGEN_DATA:-data}
if ls "$D"/mnist/t10k-images-idx3-ubyte* > /dev/null 2>&1; then
  mkdir "$T/cdir"
  expect 0 "complete test digits 0-1,7, 2 samples each" $L complete --model $CM --index 0-1,7 --samples 2 -o "$T/cdir/g.png"
  contains "complete reports images/s" "images/s"
  [ "$(png_size "$T/cdir/g.png")" = "122 92" ] && ok "complete grid: 3 rows of 4 tiles" || bad "complete grid size $(png_size "$T/cdir/g.png")"
  [ "$(ls "$T/cdir")" = g.png ] && ok "complete left no temp files" || bad "complete left: $(ls "$T/cdir")"
  expect 0 "complete defaults: test digits 0-9, 4 samples" $L complete --model $CM -o "$T/def.png"
  [ "$(png_size "$T/def.png")" = "182 302" ] && ok "complete default grid: 10 rows of 6 tiles" || bad "default grid size $(png_size "$T/def.png")"
  $L complete --model $CM --index 3 --seed 5 -o "$T/s1.png" > /dev/null
  $L complete --model $CM --index 3 --seed 5 -o "$T/s2.png" > /dev/null
  $L complete --model $CM --index 3 --seed 6 -o "$T/s3.png" > /dev/null
  cmp -s "$T/s1.png" "$T/s2.png" && ok "complete: same seed, same grid" || bad "complete: same seed, other grid"
  cmp -s "$T/s1.png" "$T/s3.png" && bad "complete: another seed, same grid" || ok "complete: another seed, another grid"
  expect 0 "complete with a softmax model" $L complete --model $F/tiny-softmax-mnist.bin --index 4 --rows 20 -o "$T/sm.png"
  expect 2 "complete --index past the test set" $L complete --model $CM --index 9998-10000 -o "$T/x.png"
  contains "out of range: says the range" "index 10000 is out of range 0-9999"
  expect 2 "complete --index not a list" $L complete --model $CM --index 1-x -o "$T/x.png"
  contains "bad list: shows the syntax" "such as 0-9, 3 or 0-4,7"
  expect 2 "complete --index backwards" $L complete --model $CM --index 7-3 -o "$T/x.png"
  expect 1 "complete --index without the dataset" $L complete --model $CM --index 0 --data "$T/nodata" -o "$T/x.png"
  contains "no dataset: names the path" "$T/nodata"
else
  bad "complete --index tests need the MNIST test set in $D (set LINGEN_DATA)"
fi
expect 2 "complete --rows 28 of 28" $L complete --model $CM --rows 28 -o "$T/x.png"
contains "--rows: says the range" "must be in 1..27"
expect 2 "complete --rows 0" $L complete --model $CM --rows 0 -o "$T/x.png"
expect 2 "complete --samples 0" $L complete --model $CM --samples 0 -o "$T/x.png"

# complete PNG files: 28x28 gray and 32x32 RGB ones written by sample, a truncated one, a text one
$L sample --model $CM -n 2 -o "$T/pm.png" --outdir "$T/pm" > /dev/null
$L sample --model $F/tiny-linear-cifar.bin -n 1 -o "$T/pc.png" --outdir "$T/pc" > /dev/null
expect 0 "complete 2 PNGs (argument and --image)" $L complete --model $CM "$T/pm/sample_00000.png" --image "$T/pm/sample_00001.png" --samples 1 -o "$T/p.png"
[ "$(png_size "$T/p.png")" = "92 62" ] && ok "complete PNGs: 2 rows of 3 tiles" || bad "PNG grid size $(png_size "$T/p.png")"
expect 0 "complete a CIFAR-shaped RGB PNG" $L complete --model $F/tiny-linear-cifar.bin "$T/pc/sample_00000.png" --samples 2 -o "$T/pc2.png"
[ "$(png_size "$T/pc2.png")" = "138 36" ] && ok "complete CIFAR grid: 1 row of 4 32x32 tiles" || bad "CIFAR grid size $(png_size "$T/pc2.png")"
expect 1 "complete a PNG of the wrong size" $L complete --model $CM "$T/pm/sample_00000.png" "$T/pc/sample_00000.png" -o "$T/x.png"
contains "wrong size: names the file and both sizes" "$T/pc/sample_00000.png: image is 32x32, the model needs 28x28"
head -c 100 "$T/pm/sample_00000.png" > "$T/cut.png"
expect 1 "complete a truncated PNG" $L complete --model $CM "$T/cut.png" -o "$T/x.png"
contains "truncated PNG: names the file" "$T/cut.png: corrupt PNG"
echo "not an image" > "$T/text.png"
expect 1 "complete a text file" $L complete --model $CM --image "$T/text.png" -o "$T/x.png"
contains "text file: not a PNG" "$T/text.png: not a PNG"
expect 1 "complete a missing PNG" $L complete --model $CM "$T/none.png" -o "$T/x.png"
contains "missing PNG: names it" "$T/none.png"
[ -e "$T/x.png" ] && bad "a failed complete wrote its grid" || ok "failed completes wrote nothing"
expect 1 "complete to an unwritable path" $L complete --model $CM "$T/pm/sample_00000.png" -o /nonexistent-dir/x.png
contains "unwritable: names the path" "/nonexistent-dir/x.png"

# a batch that cannot fit in memory: a clear error before allocating (ulimit -v caps this shell's children)
expect 1 "sample: batch too big for memory" bash -c 'ulimit -v 2000000; exec ./lingen sample -n 200 --batch 200 --model models/mnist-softmax.bin -o "$0/big.png"' "$T"
contains "too big: names the largest batch that fits" "use --batch"
[ -f "$T/big.png" ] && bad "too big: wrote a file" || ok "too big: wrote nothing"
expect 1 "eval: batch too big for memory" bash -c 'ulimit -v 1000000; exec ./lingen eval bits-per-dim --limit 64 --batch 64 --model models/mnist-softmax.bin'
contains "eval too big: names the largest batch" "use --batch"

finish
