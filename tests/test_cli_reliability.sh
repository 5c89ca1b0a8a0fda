#!/usr/bin/env bash
# CLI tests, reliability: output paths (devices, FIFOs, symlinks, stdout, long names, checks before
# the work, --outdir all or nothing), hostile model and dataset files, --threads, SIGTERM.
# Run from the repository root with LINGEN_DATA set (make test-cli).
set -u
. tests/cli_common.sh
M=$F/tiny-linear-mnist.bin
D=${LINGEN_DATA:-data}
is_png() { [ "$(head -c 8 "$1" | od -An -tx1 | tr -d ' \n')" = 89504e470d0a1a0a ]; }
# edit_model IN OUT PYTHON: rewrite a model file; the code sees h (header dict), data (bytearray),
# and f32(name) (the tensor's offset in data, for struct.pack_into)
edit_model() {
  python3 - "$1" "$2" "$3" <<'PY'
import json, struct, sys
d = open(sys.argv[1], "rb").read(); n = struct.unpack("<Q", d[:8])[0]
h = json.loads(d[8:8 + n]); data = bytearray(d[8 + n:])
f32 = lambda name: h[name]["data_offsets"][0]
exec(sys.argv[3])
hb = json.dumps(h).encode(); hb += b" " * (-len(hb) % 8)
open(sys.argv[2], "wb").write(struct.pack("<Q", len(hb)) + hb + bytes(data))
PY
}

# ---------------------------------------------------------------- output paths
# a FIFO is written, not replaced by a regular file
mkfifo "$T/fifo"
timeout 60 cat "$T/fifo" > "$T/from-fifo" & reader=$!   # (a FIFO replaced by a file never ends it)
expect 0 "-o FIFO" timeout 60 $L sample --threads 1 --model $M -n 2 -o "$T/fifo"
[ -p "$T/fifo" ] || kill $reader
wait $reader
[ -p "$T/fifo" ] && ok "-o FIFO: still a FIFO" || bad "-o FIFO: replaced by a regular file"
is_png "$T/from-fifo" && ok "-o FIFO: the reader got the PNG" || bad "-o FIFO: the reader got no PNG"

# devices are written directly (our own nodes: as root the old behaviour would replace /dev/null)
if mknod "$T/null" c 1 3 2> /dev/null && mknod "$T/full" c 1 7 2> /dev/null; then
  expect 0 "-o a null device" $L sample --threads 1 --model $M -n 2 -o "$T/null"
  [ -c "$T/null" ] && ok "-o null device: still a device" || bad "-o null device: replaced by a file"
  expect 1 "-o a full device" $L sample --threads 1 --model $M -n 2 -o "$T/full"
  contains "-o full device: says why" "$T/full: write failed: No space left on device"
  [ -c "$T/full" ] && ok "-o full device: still a device" || bad "-o full device: replaced by a file"
else
  echo "skip device nodes (mknod needs root)"
fi

# a symlink is followed: the target replaced, the link kept
mkdir "$T/sl"
$L sample --threads 1 --model $M -n 1 --seed 3 -o "$T/sl/target.png" > /dev/null
ln -s target.png "$T/sl/link.png"
expect 0 "-o symlink" $L sample --threads 1 --model $M -n 4 --seed 3 -o "$T/sl/link.png"
[ -L "$T/sl/link.png" ] && ok "-o symlink: the link is kept" || bad "-o symlink: the link was replaced"
$L sample --threads 1 --model $M -n 4 --seed 3 -o "$T/sl/direct.png" > /dev/null
cmp -s "$T/sl/target.png" "$T/sl/direct.png" && ok "-o symlink: the target has the new image" || bad "-o symlink: target not replaced"
[ "$(ls "$T/sl" | wc -l)" = 3 ] && ok "-o symlink: no temp files" || bad "-o symlink: left $(ls "$T/sl")"

# -o - writes the PNG to stdout (the same bytes as a file), the summary to stderr
$L sample --threads 1 --model $M -n 3 --seed 5 -o - > "$T/stdout.png" 2> "$T/stderr"; rc=$?
$L sample --threads 1 --model $M -n 3 --seed 5 -o "$T/file.png" > /dev/null
[ $rc -eq 0 ] && cmp -s "$T/stdout.png" "$T/file.png" && ok "-o -: stdout is exactly the PNG" || bad "-o -: stdout is not the PNG (exit $rc)"
grep -q "sampled 3 images" "$T/stderr" && ok "-o -: the summary goes to stderr" || bad "-o -: no summary on stderr"
[ -e ./- ] && { bad "-o -: wrote a file named -"; rm -f ./-; } || ok "-o -: no file named -"
if ls "$D"/mnist/t10k-images-idx3-ubyte* > /dev/null 2>&1; then
  $L complete --threads 1 --model $M --index 0 --samples 1 -o - > "$T/cstdout.png" 2> /dev/null
  is_png "$T/cstdout.png" && ok "complete -o -: a PNG on stdout" || bad "complete -o -: no PNG on stdout"
fi

# file names of 249 to 255 bytes (the temporary file's name is short, not name + suffix)
for n in 249 252 255; do
  name=$(printf 'a%.0s' $(seq $((n - 4)))).png
  expect 0 "-o a $n-byte file name" $L sample --threads 1 --model $M -n 1 -o "$T/$name"
done

# a directory: said so
mkdir "$T/adir"
expect 1 "-o a directory" $L sample --threads 1 --model $M -n 1 -o "$T/adir"
contains "-o a directory: says so" "$T/adir: is a directory"

# every output checked before the work: -n 100000 would run for hours
for o in "-o /nonexistent-dir/x.png" "-o $T/adir" "-o $T/ok.png --outdir $T/file.png/sub" "-o $T/ok.png --outdir /nonexistent-dir/d"; do
  : > "$T/file.png"
  expect 1 "sample $o: refused before sampling" timeout 20 $L sample --threads 1 --model $M -n 100000 $o
done
expect 1 "complete to a missing directory: refused before the work" timeout 20 $L complete --threads 1 --model $M --image "$T/file.png" --samples 1000 -o /nonexistent-dir/x.png
contains "complete: names the path" "/nonexistent-dir/x.png"
[ -e "$T/ok.png" ] && bad "a refused run wrote its grid" || ok "refused runs wrote nothing"

# --outdir: all or nothing (tile 2 cannot be written: a directory is in its place)
mkdir -p "$T/tiles/sample_00002.png"
expect 1 "--outdir with a tile that cannot be written" $L sample --threads 1 --model $M -n 4 -o "$T/grid.png" --outdir "$T/tiles"
contains "--outdir failure names the tile" "sample_00002.png: is a directory"
[ -e "$T/grid.png" ] && bad "--outdir failure left the grid" || ok "--outdir failure: no grid"
[ "$(ls -A "$T/tiles")" = sample_00002.png ] && ok "--outdir failure: no tiles, no temp files" || bad "--outdir failure left: $(ls -A "$T/tiles")"
rmdir "$T/tiles/sample_00002.png"
expect 0 "--outdir, then all of it" $L sample --threads 1 --model $M -n 4 -o "$T/grid.png" --outdir "$T/tiles"
[ "$(ls "$T/tiles" | wc -l)" = 4 ] && [ -f "$T/grid.png" ] && ok "--outdir: the grid and 4 tiles" || bad "--outdir: $(ls "$T/tiles")"

# SIGTERM like Ctrl-C: the finished images kept, exit 143
mkdir "$T/term"
$L sample --threads 1 --model $M -n 100000 --batch 1 -o "$T/term/grid.png" > "$T/out" 2>&1 &
pid=$!
sleep 3; kill -TERM $pid; wait $pid; rc=$?
[ $rc -eq 143 ] && ok "SIGTERM exits 143" || bad "SIGTERM exit $rc"
contains "SIGTERM says what it wrote" "interrupted: wrote the"
is_png "$T/term/grid.png" && ok "SIGTERM wrote the finished images" || bad "SIGTERM: no grid"
[ "$(ls "$T/term" | wc -l)" = 1 ] && ok "SIGTERM left no temp files" || bad "SIGTERM left: $(ls "$T/term")"

# --threads: capped at the usable cores, with a note, unless LINGEN_FORCE_THREADS=1
expect 0 "--threads 4 on one core" taskset -c 0 $L sample --model $M -n 1 --threads 4 -o "$T/t.png"
contains "--threads capped: says so" "only 1 core is usable here, using 1"
LINGEN_FORCE_THREADS=1 taskset -c 0 $L sample --model $M -n 1 --threads 4 -o "$T/t.png" > "$T/out" 2>&1
grep -q "usable here" "$T/out" && bad "LINGEN_FORCE_THREADS=1 still capped" || ok "LINGEN_FORCE_THREADS=1 runs the threads asked for"

# ---------------------------------------------------------------- standard output
# a report that cannot be written is a failure: to a full device, or to a closed descriptor
to_full() { "$@" > /dev/full; }
closed() { "$@" >&-; }
for c in "version" "--help" "sample --help" "models" "info --model $M"; do
  expect 1 "lingen $c > /dev/full" to_full $L $c
  contains "lingen $c > /dev/full: says so" "^lingen: standard output: write failed: No space left on device"
done
expect 1 "lingen version >&-" closed $L version
contains "lingen version >&-: says so" "^lingen: standard output: write failed"
expect 1 "sample >&-" closed $L sample --threads 1 --model $M -n 2 -o "$T/closed.png"
python3 -c 'import sys; d = open(sys.argv[1], "rb").read(); sys.exit(not d.endswith(b"IEND\xaeB`\x82"))' "$T/closed.png" \
  && ok "sample >&-: the PNG holds nothing after its end" || bad "sample >&-: the PNG is not clean"
if ls "$D"/mnist/t10k-images-idx3-ubyte* > /dev/null 2>&1; then
  expect 1 "eval > /dev/full" to_full $L eval bits-per-dim --threads 1 --model $M --limit 2
  contains "eval > /dev/full: says so" "standard output: write failed"
  expect 1 "compare > /dev/full" to_full $L compare --threads 1 --model $M --softmax-model $F/tiny-softmax-mnist.bin -n 1 --limit 1
fi

# ---------------------------------------------------------------- model files
mkfifo "$T/mfifo"
for m in /dev/zero "$T/mfifo"; do
  expect 1 "--model $m: refused at once" timeout 20 $L info --model "$m"
  contains "--model $m: not a regular file" "$m: not a regular file"
done
expect 1 "--model a directory" $L info --model "$T/adir"
contains "--model a directory: says so" "$T/adir: is a directory"
expect 1 "--model README.md" $L info --model README.md
contains "--model README.md: not a model file" "README.md: not a lingen model file (safetensors)"
expect 1 "--image /dev/zero" timeout 20 $L complete --threads 1 --model $M --image /dev/zero -o "$T/x.png"
contains "--image /dev/zero: not a regular file" "/dev/zero: not a regular file"
expect 1 "--image a directory" $L complete --threads 1 --model $M "$T/adir" -o "$T/x.png"
contains "--image a directory: says so" "$T/adir: is a directory"

edit_model $M "$T/nan.bin" 'struct.pack_into("<f", data, f32("layers.1.norm1.bias") + 8, float("nan"))'
expect 1 "a NaN weight" $L sample --threads 1 --model "$T/nan.bin" -n 1 -o "$T/x.png"
contains "a NaN weight: names the tensor" "tensor 'layers.1.norm1.bias' holds a non-finite value (NaN at index 2)"
edit_model $M "$T/big.bin" 'h["__metadata__"].update(height="1024", width="1024")'
expect 1 "1024x1024 images" $L info --model "$T/big.bin"
contains "1024x1024: out of range" "height = '1024' is out of range (1..64)"
edit_model $M "$T/gap.bin" 'data += b"\0" * 8'
expect 1 "bytes after the last tensor" $L info --model "$T/gap.bin"
contains "trailing bytes: says so" "8 bytes after the last tensor"

# files of a gigabyte (sparse): only what is needed is read, the header first. A model whose
# header is wrong, the listing of lingen models, a PNG with a gigabyte after its end.
# peak_mb CMD...: run CMD (its output in $T/out); prints its exit code and peak resident MB
peak_mb() {
  python3 -c 'import resource, subprocess, sys
rc = subprocess.call(sys.argv[2:], stdout=open(sys.argv[1], "w"), stderr=subprocess.STDOUT)
print(rc, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss // 1024)' "$T/out" "$@"
}
mkdir "$T/gb"
edit_model $M "$T/gb/big.bin" '
h["pad"] = {"dtype": "F32", "shape": [1 << 28], "data_offsets": [len(data), len(data) + (1 << 30)]}'
python3 -c 'import os, sys; f = open(sys.argv[1], "r+b"); f.truncate(os.path.getsize(sys.argv[1]) + (1 << 30))' "$T/gb/big.bin"
edit_model $M "$T/gbbad.bin" '
h["pad"] = {"dtype": "F32", "shape": [1 << 28], "data_offsets": [len(data), len(data) + (1 << 30)]}
h["__metadata__"].update(height="1024", width="1024")'
python3 -c 'import os, sys; f = open(sys.argv[1], "r+b"); f.truncate(os.path.getsize(sys.argv[1]) + (1 << 30))' "$T/gbbad.bin"
read rc mb <<< "$(peak_mb $L info --model "$T/gbbad.bin")"
[ "$rc" = 1 ] && [ "$mb" -lt 200 ] && ok "a 1 GB model with a wrong header: refused in $mb MB" || bad "a 1 GB model, wrong header: exit $rc, $mb MB"
contains "a 1 GB model with a wrong header: says why" "gbbad.bin: metadata: height = '1024' is out of range"
read rc mb <<< "$(peak_mb env LINGEN_MODELS="$T/gb" $L models)"
[ "$rc" = 0 ] && [ "$mb" -lt 200 ] && ok "models with a 1 GB file: $mb MB" || bad "models with a 1 GB file: exit $rc, $mb MB"
contains "models with a 1 GB file: listed, its size" "^big  *mnist  *linear .* 1073\.8 MB"
$L sample --threads 1 --model $M -n 1 -o "$T/gb/grid.png" --outdir "$T/gb" > /dev/null
python3 -c 'import os, sys; f = open(sys.argv[1], "r+b"); f.truncate(os.path.getsize(sys.argv[1]) + (1 << 30))' "$T/gb/sample_00000.png"
read rc mb <<< "$(peak_mb $L complete --threads 1 --model $M --samples 1 -o "$T/gb/c.png" "$T/gb/sample_00000.png")"
[ "$rc" = 0 ] && [ "$mb" -lt 200 ] && ok "complete with a PNG and 1 GB after it: $mb MB" || bad "complete, a PNG and 1 GB: exit $rc, $mb MB"
rm -rf "$T/gb" "$T/gbbad.bin"

# a header of 1,024 layers and 400,000 empty tensors listed first: refused in time linear in its
# size (a lookup of every weight through all the names took half a minute)
python3 - "$T/many.bin" <<'PY'
import json, struct, sys
d = 2
meta = {"format": "lingen", "format_version": "1", "n_layers": "1024", "n_heads": "1", "d_head": "2", "d_ff": "1",
        "n_mix": "1", "height": "2", "width": "2", "channels": "1", "attention": "linear", "norm": "post",
        "activation": "relu", "dataset": "mnist", "bos": "1"}
want = [("emb.weight", [257, 1])] + [("layers.%d.%s" % (l, k), s) for l in range(1024) for k, s in [
    ("attn.qkv.weight", [6, 2]), ("attn.qkv.bias", [6]), ("attn.out.weight", [2, 2]), ("attn.out.bias", [2]),
    ("norm1.weight", [2]), ("norm1.bias", [2]), ("norm2.weight", [2]), ("norm2.bias", [2]), ("ff1.weight", [1, 2]),
    ("ff1.bias", [1]), ("ff2.weight", [2, 1]), ("ff2.bias", [2])]] + [
    ("norm.weight", [2]), ("norm.bias", [2]), ("head.weight", [3, 2]), ("head.bias", [3])]
parts, off = ['"__metadata__":' + json.dumps(meta)], 0
parts += ['"x%d":{"dtype":"F32","shape":[0],"data_offsets":[0,0]}' % i for i in range(400000)]
for name, shape in want:
    n = shape[0] * (shape[1] if len(shape) > 1 else 1)
    parts.append('"%s":{"dtype":"F32","shape":%s,"data_offsets":[%d,%d]}' % (name, json.dumps(shape), off, off + 4 * n))
    off += 4 * n
hb = ("{" + ",".join(parts) + "}").encode(); hb += b" " * (-len(hb) % 8)
open(sys.argv[1], "wb").write(struct.pack("<Q", len(hb)) + hb + bytes(off))
PY
expect 1 "400,000 extra tensors listed first" timeout 20 $L info --model "$T/many.bin"
contains "400,000 extra tensors: the first named" "many.bin: unexpected tensor 'x0'"
rm -f "$T/many.bin"

# info prints metadata values escaped: no terminal escape, no forged line
edit_model $M "$T/esc.bin" 'h["__metadata__"]["date"] = "\x1b[2J\x1b[Hcleared\nparameters   1 (forged)"'
expect 0 "info with control characters in a value" $L info --model "$T/esc.bin"
grep -q $'\x1b' "$T/out" && bad "info printed an ESC byte" || ok "info: no ESC byte printed"
grep -q "^parameters   1 (forged)" "$T/out" && bad "info printed a forged line" || ok "info: no forged line"
contains "info: the value shown escaped" 'date         \\x1b\[2J\\x1b\[Hcleared\\nparameters'

# models and eval print names and values escaped too: a forged "paper" line, ESC, CR
mkdir "$T/evil"
edit_model $M "$T/evil/bad"$'\e[2J'".bin" 'h["__metadata__"].update(test_bits_per_dim="0.9\x1b[2K\rpaper        9.99", attention="\x1b[31mlinear")'
LINGEN_MODELS="$T/evil" $L models > "$T/out" 2>&1
grep -q $'[\e\r]' "$T/out" && bad "models printed an ESC or CR byte" || ok "models: no ESC or CR byte"
contains "models: the name shown escaped" 'bad\\x1b\[2J '
if ls "$D"/mnist/t10k-images-idx3-ubyte* > /dev/null 2>&1; then
  edit_model $M "$T/card.bin" 'h["__metadata__"].update(test_bits_per_dim="0.9\x1b[2K\rpaper        9.99")'
  expect 0 "eval with control characters in the card's value" $L eval bits-per-dim --threads 1 --model "$T/card.bin" --limit 1
  grep -q $'[\e\r]' "$T/out" && bad "eval printed an ESC or CR byte" || ok "eval: no ESC or CR byte"
  contains "eval: the card's value escaped" 'model card   0.9\\x1b\[2K\\x0dpaper'
fi

# eval: finite weights whose activations overflow: said so, exit 1 (not "inf +- nan")
if ls "$D"/mnist/t10k-images-idx3-ubyte* > /dev/null 2>&1; then
  edit_model $M "$T/overflow.bin" '
for k in ("norm.weight", "norm.bias"):
    a, b = h[k]["data_offsets"]
    for o in range(a, b, 4): struct.pack_into("<f", data, o, 3e38)'
  expect 1 "eval with overflowing activations" $L eval bits-per-dim --threads 1 --model "$T/overflow.bin" --limit 2
  contains "eval overflow: says so" "the log-probability is not finite"
fi

# ---------------------------------------------------------------- datasets
mkdir -p "$T/bomb/cifar-10" "$T/cut/mnist" "$T/fifodata/mnist" "$T/three/mnist"
python3 - "$T/three/mnist" <<'PY'
import struct, sys
open(sys.argv[1] + "/t10k-images-idx3-ubyte", "wb").write(struct.pack(">IIII", 0x803, 3, 28, 28) + bytes(3 * 784))
open(sys.argv[1] + "/t10k-labels-idx1-ubyte", "wb").write(struct.pack(">II", 0x801, 3) + bytes([1, 2, 3]))
PY
expect 0 "--limit past the split's images" $L eval bits-per-dim --threads 1 --model $M --data "$T/three" --limit 20000
contains "--limit past the end: says so" "lingen: --limit 20000: the test split has 3 images; all of them are used"
contains "--limit past the end: the 3 evaluated" "over 3 test images"
python3 - "$T" <<'PY'
import gzip, struct, sys, zlib
t = sys.argv[1]
# 10,001 zero records: 30 KB of gzip, 30 MB decompressed; a batch holds exactly 10,000
z = zlib.compressobj(9, zlib.DEFLATED, 31)
gz = z.compress(bytes(3073) * 10001) + z.flush()
open(t + "/bomb/cifar-10/test_batch.bin.gz", "wb").write(gz)
# 2000 MNIST images whose gzip file lacks its 8-byte trailer
n = 2000
img = struct.pack(">IIII", 0x803, n, 28, 28) + bytes(i * 7 % 256 for i in range(n * 784))
open(t + "/cut/mnist/t10k-images-idx3-ubyte.gz", "wb").write(gzip.compress(img, mtime=0)[:-8])
open(t + "/cut/mnist/t10k-labels-idx1-ubyte", "wb").write(struct.pack(">II", 0x801, n) + bytes(i % 10 for i in range(n)))
PY
expect 1 "a CIFAR-10 batch of 10,001 records" $L eval bits-per-dim --threads 1 --model $F/tiny-linear-cifar.bin --data "$T/bomb" --limit 1
contains "CIFAR-10 bomb: says why" "more than 10000 records"
expect 1 "a gzip file without its trailer" $L eval bits-per-dim --threads 1 --model $M --data "$T/cut" --limit 1
contains "no trailer: truncated" "t10k-images-idx3-ubyte.gz: truncated gzip stream"
mkfifo "$T/fifodata/mnist/t10k-images-idx3-ubyte"
expect 1 "a dataset file that is a FIFO" timeout 20 $L eval bits-per-dim --threads 1 --model $M --data "$T/fifodata" --limit 1
contains "dataset FIFO: not a regular file" "t10k-images-idx3-ubyte: not a regular file"

# ---------------------------------------------------------------- compare
# started_child PID [NOT]: wait (up to 2 minutes: a sanitizer build's sgemm is slow) until PID has
# forked a child (other than NOT); its pid in $child
started_child() {
  child=
  for _ in $(seq 12000); do
    child=$(pgrep -P "$1" | grep -vx "${2:-0}" | head -1)
    [ -n "$child" ] && return 0
    sleep 0.01
  done
  return 1
}
if ls "$D"/mnist/t10k-images-idx3-ubyte* > /dev/null 2>&1; then
  # the linear model replaced by a CIFAR-10 one (longer images) once the measuring starts: the
  # measuring processes must not load it into buffers sized for MNIST
  mkdir "$T/cmp"
  cp $M "$T/cmp/lin.bin"
  cp $F/tiny-softmax-mnist.bin "$T/cmp/soft.bin"
  $L compare --threads 1 --model "$T/cmp/lin.bin" --softmax-model "$T/cmp/soft.bin" -n 2 --limit 2 > "$T/out" 2>&1 &
  pid=$!
  started_child $pid && { cp $F/tiny-linear-cifar.bin "$T/cmp/new.bin"; mv "$T/cmp/new.bin" "$T/cmp/lin.bin"; }
  wait $pid; rc=$?
  [ $rc -eq 1 ] && ok "compare, model replaced while it runs: exit 1" || bad "compare, model replaced: exit $rc"
  contains "compare, model replaced: says so" "lin.bin: the file changed while compare ran"
  lacks "compare, model replaced: no measuring process died" "died"
  # SIGTERM to compare ends its measuring process too (the second: the first, sgemm's, is short)
  $L compare --threads 1 --model $M --softmax-model $F/tiny-softmax-mnist.bin -n 20000 --batch 1 --limit 2 > /dev/null 2>&1 &
  pid=$!
  if started_child $pid && started_child $pid "$child"; then
    kill -TERM $pid; wait $pid
    for _ in $(seq 100); do kill -0 "$child" 2> /dev/null || break; sleep 0.05; done
    kill -0 "$child" 2> /dev/null && { bad "compare, SIGTERM: its measuring process still runs"; kill -KILL "$child"; } \
      || ok "compare, SIGTERM: its measuring process ended too"
  else
    bad "compare, SIGTERM: no measuring process started"
  fi
fi

echo "$fails failed"
[ $fails -eq 0 ]
