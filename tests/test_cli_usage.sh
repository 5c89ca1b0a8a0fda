#!/usr/bin/env bash
# CLI tests of everyday use: --version, attached short options, range messages, the nearest name
# for a typo, -o other than .png, --json on sample, eval, info and compare. Run from the
# repository root.
set -u
L=./lingen
F=tests/fixtures
LM=$F/tiny-linear-mnist.bin
. tests/cli_common.sh
export LINGEN_DATA=${LINGEN_DATA:-data}

# ---------------------------------------------------------------- --version
# what to expect, found independently: the compiler's target macros, OpenBLAS asked through ctypes
want_kernel=portable
macros=$(${CC:-cc} -march=native -dM -E - < /dev/null)
grep -q "__AVX2__" <<< "$macros" && grep -q "__FMA__" <<< "$macros" && want_kernel=AVX2
grep -q "__AVX512F__" <<< "$macros" && want_kernel=AVX-512
want_core=$(python3 -c 'import ctypes, ctypes.util
b = ctypes.CDLL(ctypes.util.find_library("openblas") or "libopenblas.so.0"); b.openblas_get_corename.restype = ctypes.c_char_p
print(b.openblas_get_corename().decode())')
for v in --version version; do
  expect 0 "lingen $v" $L $v
  contains "$v: the version" "^lingen [0-9][0-9]*\.[0-9][0-9]*\.[0-9][0-9]*$"
  contains "$v: the micro-kernel ($want_kernel)" "^micro-kernel $want_kernel$"
  contains "$v: OpenBLAS's version and core ($want_core)" "^OpenBLAS     [0-9][0-9.]*, core $want_core "
  contains "$v: the threads ($(nproc))" "^threads      $(nproc) "
  contains "$v: CUDA" "^CUDA         no$"
done
# the version is CHANGELOG.md's newest release, and the man page's; the changelog's releases
# (Keep a Changelog: "## [X.Y.Z] - YYYY-MM-DD") newest first, under "## [Unreleased]"
top=$(python3 - CHANGELOG.md <<'PY'
import re, sys
heads = [l.rstrip("\n") for l in open(sys.argv[1]) if l.startswith("## ")]
assert heads and heads[0] == "## [Unreleased]", heads[:1]
rel = [re.fullmatch(r"## \[(\d+)\.(\d+)\.(\d+)\] - (\d{4}-\d{2}-\d{2})", h) for h in heads[1:]]
assert rel and all(rel), [h for h, m in zip(heads[1:], rel) if not m]
vers = [tuple(map(int, m.groups()[:3])) for m in rel]
dates = [m.group(4) for m in rel]
assert vers == sorted(vers, reverse=True) and len(set(vers)) == len(vers), vers
assert dates == sorted(dates, reverse=True), dates
print("%d.%d.%d" % vers[0])
PY
)
[ -n "$top" ] && ok "CHANGELOG.md: Unreleased, then releases newest first, dated ($top)" || bad "CHANGELOG.md's headings"
[ "$($L --version | head -1)" = "lingen $top" ] && ok "--version is CHANGELOG.md's newest release ($top)" ||
  bad "--version says '$($L --version | head -1)', CHANGELOG.md's newest release is '$top'"
grep -q "^\.TH LINGEN 1 \"\" \"lingen $top\"" docs/lingen.1 && ok "the man page's version is $top" || bad "the man page's version is not $top"
expect 0 "version --help" $L version --help
contains "version --help says what it shows" "micro-kernel"
expect 0 "lingen --help mentions --version" $L --help
contains "--help: --version" "lingen --version"

# ---------------------------------------------------------------- attached short options
$L sample --model $LM -n 2 -s 7 -o "$T/apart.png" --threads 1 > /dev/null 2>&1
expect 0 "sample -n2 -s7 -o$T/attached.png" $L sample -m$LM -n2 -s7 -o"$T/attached.png" -t1
contains "attached -n2: 2 images" "sampled 2 images"
cmp -s "$T/apart.png" "$T/attached.png" && ok "attached options give the same images as apart" || bad "attached and apart differ"
expect 0 "eval -l2 -b1" $L eval bits-per-dim -m$LM -l2 -b1 -t1
contains "eval -l2: 2 images" "over 2 test images"
contains "eval -b1: batch 1" "batch 1$"
expect 2 "a flag with an attached value" $L sample --ceiling=1 -m$LM
contains "flag value: says so" "--ceiling takes no value"

# ---------------------------------------------------------------- range messages
expect 2 "sample -n 0" $L sample -n 0 -m $LM
contains "-n 0: the range" "lingen sample: -n must be between 1 and 1000000, not '0'"
expect 2 "sample -n0 (attached)" $L sample -n0 -m $LM
contains "-n0: the range" "-n must be between 1 and 1000000"
expect 2 "sample --n=2000000" $L sample --n=2000000 -m $LM
contains "--n=2000000: as typed" "--n must be between 1 and 1000000, not '2000000'"
expect 2 "sample -n abc" $L sample -n abc -m $LM
contains "-n abc: the range" "-n must be between 1 and 1000000, not 'abc'"
expect 2 "sample --batch 0" $L sample --batch 0 -m $LM
contains "--batch 0: the range" "--batch must be between 1 and 65536"
expect 2 "sample --seed -1" $L sample --seed -1 -m $LM
contains "--seed -1: the bound" "--seed must be an integer of at least 0, not '-1'"
expect 2 "sample --threads 5000" $L sample --threads 5000 -m $LM
contains "--threads: the range" "--threads must be between 0 and 1024"
expect 2 "eval --limit 0" $L eval bits-per-dim --limit 0 -m $LM
contains "eval --limit 0: the range" "lingen eval bits-per-dim: --limit must be between 1 and 1000000"
expect 2 "compare -n 0" $L compare --softmax -n 0
contains "compare -n 0: the range" "lingen compare: -n must be between 1 and 1000000"
expect 2 "complete --samples 0" $L complete --samples 0 -m $LM
contains "complete --samples 0: the range" "--samples must be between 1 and 1024"
# numbers as written: no leading space or '+' (strtol would take them)
for v in " 5" "+5" "5 "; do
  expect 2 "sample -n '$v'" $L sample -n "$v" -m $LM -o "$T/n.png"
  contains "-n '$v': the range" "-n must be between 1 and 1000000, not '$v'"
done
expect 2 "sample --temperature ' 1'" $L sample --temperature " 1" -m $LM -o "$T/n.png"
expect 2 "sample --temperature +1" $L sample --temperature +1 -m $LM -o "$T/n.png"
[ -e "$T/n.png" ] && bad "a refused number: wrote a file" || ok "refused numbers: wrote nothing"
expect 0 "sample --temperature .5 (a number all the same)" $L sample --temperature .5 -m $LM -n 1 -t 1 -o "$T/n.png"
# an empty name: a usage error naming the option
expect 2 "sample --model ''" $L sample --model "" -n 1 -o "$T/e.png"
contains "--model '': says which option" "lingen sample: --model needs a value, not an empty one"

# ---------------------------------------------------------------- the nearest name
expect 2 "unknown command sampel" $L sampel
contains "sampel: did you mean sample" 'unknown command "sampel": did you mean "sample"?'
expect 2 "unknown command modles" $L modles
contains "modles: did you mean models" 'did you mean "models"?'
expect 2 "unknown command evl" $L evl
contains "evl: did you mean eval" 'did you mean "eval"?'
expect 2 "unknown command far from all" $L frobnicate
lacks "frobnicate: no suggestion" "did you mean"
contains "frobnicate: the command list" "commands:"
expect 2 "unknown option --modle" $L sample --modle $LM
contains "--modle: did you mean --model" "unknown option '--modle': did you mean '--model'?"
expect 2 "unknown option --limt=2" $L eval bits-per-dim --limt=2
contains "--limt=2: did you mean --limit" "did you mean '--limit'?"
expect 2 "unknown option --bogus" $L info --bogus
lacks "--bogus: no suggestion" "did you mean"

# ---------------------------------------------------------------- -o: PNG only
for o in x.jpg x.png.tmp x; do
  expect 2 "sample -o $o" $L sample -m $LM -n 1 -o "$T/$o"
  contains "-o $o: says PNG only" "only PNG images are written; give a name ending in .png"
  [ -e "$T/$o" ] && bad "-o $o: wrote a file" || ok "-o $o: wrote nothing"
done
expect 2 "sample -o x.png/" $L sample -m $LM -n 1 -o "$T/x.png/"
contains "-o x.png/: a directory's name" "-o $T/x.png/: a name ending in '/' is a directory's; give a file name ending in .png"
expect 2 "complete -o x.jpg" $L complete -m $LM -o "$T/x.jpg"
contains "complete -o x.jpg: says PNG only" "only PNG images"
expect 0 "sample -o X.PNG" $L sample -m $LM -n 1 -t 1 -o "$T/X.PNG"
[ -s "$T/X.PNG" ] && ok "-o X.PNG written" || bad "-o X.PNG: no file"

# ---------------------------------------------------------------- --json
# every figure the text prints, read back from the JSON and checked against the text
expect 0 "sample --json" $L sample -m $LM -n 3 --seed 4 -t 1 -o "$T/j.png" --outdir "$T/jd" --json "$T/s.json"
python3 - "$T/s.json" "$T/out" "$T/j.png" "$T/jd" <<'PY' && ok "sample --json: every figure of the text" || bad "sample --json"
import json, re, sys
j = json.load(open(sys.argv[1])); text = open(sys.argv[2]).read()
m = re.search(r"sampled (\d+) images? \((\d+)x(\d+)x(\d+), (\S+) attention, batch (\d+)(, bfloat16 products(?: on AMX tiles)?)?\) in ([\d.]+) s: ([\d.]+) images/s -> (\S+)", text)
n, h, w, c, attn, b, bf16, secs, ips, out = m.groups()
assert j["products"] == ("bfloat16" if bf16 else "float32") == "float32"   # the fixture's weights are F32
assert (j["images"], j["height"], j["width"], j["channels"], j["batch"]) == (int(n), int(h), int(w), int(c), int(b)) == (3, 28, 28, 1, 3)
assert attn == "linear/RNN" and j["attention"] == "linear" and j["mode"] == "RNN"
assert "%.2f" % j["seconds"] == secs and "%.3f" % j["images_per_s"] == ips
assert j["output"] == out == sys.argv[3] and j["outdir"] == sys.argv[4] and j["seed"] == 4
assert j["model"] == "tests/fixtures/tiny-linear-mnist.bin" and j["dataset"] == "mnist"
PY
expect 0 "sample --json - " $L sample -m $LM -n 1 -t 1 -o "$T/k.png" --json -
$L sample -m $LM -n 1 -t 1 -o "$T/k.png" --json - 2> "$T/err" > "$T/stdout"
python3 -c 'import json, sys; assert json.load(open(sys.argv[1]))["images"] == 1' "$T/stdout" && ok "--json -: stdout is the JSON alone" || bad "--json -: stdout is not JSON"
grep -q "sampled 1 image" "$T/err" && ok "--json -: the text went to stderr" || bad "--json -: no text on stderr"
# the shipped model's products: bfloat16 where the processor has AVX512-BF16 (and where it has
# AVX512-VNNI too, 8-bit weights at its small batches), float32 with LINGEN_BF16=0, 8-bit weights with
# LINGEN_INT8=1 at every batch and never with LINGEN_INT8=0
cpu=float32; grep -qw avx512_bf16 /proc/cpuinfo && cpu=bfloat16
one=$cpu; [ $cpu = bfloat16 ] && grep -qw avx512_vnni /proc/cpuinfo && one=int8
for run in "default 8 $cpu" "default 1 $one" "LINGEN_INT8=0 1 $cpu" "LINGEN_BF16=0 1 float32" "LINGEN_INT8=1 2 int8"; do
  set -- $run
  expect 0 "sample models/mnist.bin -n $2, $1" env ${1#default} $L sample -n $2 -t 1 -o "$T/p.png" --json "$T/p.json"
  python3 - "$T/p.json" "$T/out" "$3" <<'PY' && ok "sample -n $2, $1: $3 products, in the JSON and the text" || bad "sample -n $2, $1: not $3 products"
import json, sys
j, text, want = json.load(open(sys.argv[1])), open(sys.argv[2]).read(), sys.argv[3]
assert j["products"] == want, j["products"]
assert ("bfloat16 products" in text) == (want == "bfloat16"), text
assert ("8-bit weights" in text) == (want == "int8"), text
PY
done
# 8-bit weights: image k still does not depend on the batch it was drawn in
LINGEN_INT8=1 $L sample -n 3 --batch 1 --seed 9 -t 1 -o "$T/q1.png" --outdir "$T/q1" > /dev/null
LINGEN_INT8=1 $L sample -n 3 --batch 3 --seed 9 -t 2 -o "$T/q3.png" --outdir "$T/q3" > /dev/null
same=0; for f in "$T"/q1/*.png; do cmp -s "$f" "$T/q3/$(basename "$f")" && same=$((same + 1)); done
[ $same -eq 3 ] && ok "LINGEN_INT8=1: image k independent of the batch and threads" || bad "LINGEN_INT8=1: $((3 - same))/3 images changed with the batch" 
expect 1 "sample --json to an unwritable path" $L sample -m $LM -n 1 -o "$T/u.png" --json /nonexistent-dir/s.json
contains "unwritable --json: names it" "/nonexistent-dir/s.json"
[ -e "$T/u.png" ] && bad "unwritable --json: sampled anyway" || ok "unwritable --json: checked before sampling"

if ls "$LINGEN_DATA"/mnist/t10k-images-idx3-ubyte* > /dev/null 2>&1; then
  expect 0 "eval --json" $L eval bits-per-dim -m models/mnist.bin --limit 2 -t 1 --json "$T/e.json"
  python3 - "$T/e.json" "$T/out" <<'PY' && ok "eval --json: every figure of the text" || bad "eval --json"
import json, re, sys
j = json.load(open(sys.argv[1])); text = open(sys.argv[2]).read()
bpd, se, n, split, dims = re.search(r"bits/dim +([\d.]+) \+- ([\d.]+) \(standard error over (\d+) (\w+) images, all (\d+) dims\)", text).groups()
assert "%.5f" % j["bits_per_dim"] == bpd and "%.5f" % j["bits_per_dim_stderr"] == se
assert (j["images"], j["split"], j["dims"]) == (int(n), split, int(dims)) == (2, "test", 784)
assert re.search(r"model +%s \(%s attention, %s\)" % (re.escape(j["model"]), j["attention"], j["dataset"]), text)
assert "model card   %s " % j["model_card_bits_per_dim"] in text
assert "paper        %.3g " % j["paper_bits_per_dim"] in text
ips, secs, b = re.search(r"speed +([\d.]+) images/s, ([\d.]+) s, parallel form, batch (\d+)", text).groups()
assert "%.2f" % j["images_per_s"] == ips and "%.1f" % j["seconds"] == secs and j["batch"] == int(b) and j["form"] == "parallel"
PY
else
  bad "eval --json needs the MNIST test set in $LINGEN_DATA (set LINGEN_DATA)"
fi

expect 0 "info --json -" $L info -m $F/tiny-softmax-cifar.bin --json -
$L info -m $F/tiny-softmax-cifar.bin --json - > "$T/i.json" 2> "$T/itext"
python3 - "$T/i.json" "$T/itext" "$F/tiny-softmax-cifar.bin" <<'PY' && ok "info --json: the file's header and the text's figures" || bad "info --json"
import json, re, struct, sys
j = json.load(open(sys.argv[1])); text = open(sys.argv[2]).read()
d = open(sys.argv[3], "rb").read(); n = struct.unpack("<Q", d[:8])[0]; h = json.loads(d[8:8 + n])
meta = h.pop("__metadata__")
assert j["metadata"] == meta
for k in ["n_layers", "n_heads", "d_head", "d_ff", "n_mix", "height", "width", "channels"]:
    assert j[k if k != "n_layers" else "layers"] == int(meta[k]), k
assert j["attention"] == meta["attention"] and j["dataset"] == meta["dataset"] and j["norm"] == meta["norm"]
params = 0
for t in h.values():
    p = 1
    for s in t["shape"]: p *= s
    params += p
assert j["parameters"] == params and "parameters   %d " % params in text
L, H, D, N, d = j["layers"], j["n_heads"], j["d_head"], j["seq_len"], j["d"]
assert j["rnn_state_bytes_per_image"] == L * H * (D * D + D) * 4 and j["kv_cache_bytes_per_image"] == L * N * 2 * d * 4
assert j["memory_bytes_per_image"] == j["kv_cache_bytes_per_image"]
assert "KV cache %d B" % j["kv_cache_bytes_per_image"] in text
assert "FLOP/image   %.2f G" % (j["flops_per_image"] / 1e9) in text
PY

if ls "$LINGEN_DATA"/mnist/t10k-images-idx3-ubyte* > /dev/null 2>&1; then
  CMP="--softmax --model $LM --softmax-model $F/tiny-softmax-mnist.bin --limit 2 -n 2 -t 1"
  expect 0 "compare --json FILE" $L compare $CMP --json "$T/c.json"
  contains "compare prints the JSON's path" "^json: $T/c.json$"
  $L compare $CMP --json - > "$T/c2.json" 2> "$T/ctext"
  python3 -c 'import json, sys; assert len(json.load(open(sys.argv[1]))["rows"]) == 4' "$T/c2.json" && ok "compare --json -: stdout is the JSON alone" || bad "compare --json -"
  grep -q "^1 linear, RNN mode" "$T/ctext" && ok "compare --json -: the table went to stderr" || bad "compare --json -: no table on stderr"
else
  bad "compare --json needs the MNIST test set in $LINGEN_DATA (set LINGEN_DATA)"
fi
for c in sample eval info compare; do
  $L $c --help > "$T/out" 2>&1
  contains "$c --help shows --json" "--json FILE"
done

finish
