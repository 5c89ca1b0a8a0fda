#!/usr/bin/env bash
# CLI tests of everyday use: sampling temperature, the progress line, messages (plurals, one
# image's standard error), the test runner's summary line, missing datasets, the compare plot's
# legend, ignored outputs. Run from the repository root.
set -u
PY=${PYTHON:-/usr/bin/python3}
. tests/cli_common.sh
CM=$F/tiny-linear-mnist.bin
# entropy DIR: entropy in bits of the sub-pixel values of every PNG in DIR (8-bit, non-interlaced,
# as lingen writes them: zlib data, one filter byte per row)
entropy() {
  python3 - "$1" <<'PY'
import math, os, struct, sys, zlib
def pixels(path):
    d = open(path, "rb").read(); pos, idat = 8, b""
    while pos < len(d):
        n, kind = struct.unpack(">I4s", d[pos:pos + 8]); body = d[pos + 8:pos + 8 + n]; pos += 12 + n
        if kind == b"IHDR": w, h, depth, color = struct.unpack(">IIBB", body[:10])
        if kind == b"IDAT": idat += body
    bpp = {0: 1, 2: 3}[color]; raw = zlib.decompress(idat); stride = w * bpp; prev = bytearray(stride); out = []
    for y in range(h):
        f, row = raw[y * (stride + 1)], bytearray(raw[y * (stride + 1) + 1:(y + 1) * (stride + 1)])
        for i in range(stride):
            a = row[i - bpp] if i >= bpp else 0; b = prev[i]; c = prev[i - bpp] if i >= bpp else 0
            if f == 1: row[i] = (row[i] + a) & 255
            elif f == 2: row[i] = (row[i] + b) & 255
            elif f == 3: row[i] = (row[i] + (a + b) // 2) & 255
            elif f == 4:
                p = a + b - c; pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                row[i] = (row[i] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 255
        out += row; prev = row
    return out
counts = [0] * 256
for name in sorted(os.listdir(sys.argv[1])):
    for v in pixels(os.path.join(sys.argv[1], name)): counts[v] += 1
n = sum(counts)
print("%.3f" % -sum(c / n * math.log2(c / n) for c in counts if c))
PY
}

# --temperature: in --help, T = 1 is the model's distribution (the same images as without it),
# lower T, lower entropy of the values drawn
for c in sample complete; do
  expect 0 "$c --help" $L $c --help
  contains "$c --help lists --temperature" "--temperature T"
done
$L sample --model $CM -n 6 --seed 4 -o "$T/t.png" --outdir "$T/t_default" > /dev/null
expect 0 "sample --temperature 1" $L sample --model $CM -n 6 --seed 4 --temperature 1 -o "$T/t1.png" --outdir "$T/t1"
cmp -s "$T/t.png" "$T/t1.png" && ok "T = 1: the same images as without --temperature" || bad "T = 1 changed the images"
lacks "T = 1 is not mentioned in the summary" "temperature"
expect 0 "sample --temperature 0.3" $L sample --model $CM -n 6 --seed 4 --temperature 0.3 -o "$T/t03.png" --outdir "$T/t03"
contains "the summary says the temperature" "temperature 0.3"
h1=$(entropy "$T/t1") h03=$(entropy "$T/t03")
awk -v a="$h03" -v b="$h1" 'BEGIN { exit !(a < b - 0.5) }' &&
  ok "lower T, lower entropy of the values: $h1 bits at T=1, $h03 at 0.3" ||
  bad "entropy did not fall: $h1 bits at T=1, $h03 at 0.3"
for v in abc 0 -1 nan inf 0.001 0.0099 100.01 1000; do
  expect 2 "sample --temperature $v is a usage error" $L sample --model $CM -n 1 --temperature "$v" -o "$T/x.png"
done
contains "--temperature out of range: says the range" "must be in 0.01..100"
[ -e "$T/x.png" ] && bad "a bad --temperature wrote a file" || ok "a bad --temperature wrote nothing"
for v in 0.01 100; do   # the ends of the range are in it
  expect 0 "sample --temperature $v" $L sample --model $CM -n 1 --temperature $v -o "$T/end.png"
  expect 0 "complete --temperature $v" $L complete --model $CM "$T/t1/sample_00000.png" --samples 1 --temperature $v -o "$T/end.png"
done
expect 2 "complete --temperature 0" $L complete --model $CM "$T/t1/sample_00000.png" --temperature 0 -o "$T/x.png"
contains "complete --temperature 0: names the option" "lingen complete: --temperature"
$L complete --model $CM "$T/t1/sample_00000.png" --seed 2 -o "$T/c.png" > /dev/null
expect 0 "complete --temperature 1" $L complete --model $CM "$T/t1/sample_00000.png" --seed 2 --temperature 1 -o "$T/c1.png"
cmp -s "$T/c.png" "$T/c1.png" && ok "complete T = 1: the same grid" || bad "complete T = 1 changed the grid"
expect 0 "complete --temperature 0.5" $L complete --model $CM "$T/t1/sample_00000.png" --seed 2 --temperature 0.5 -o "$T/c05.png"
cmp -s "$T/c.png" "$T/c05.png" && bad "complete T = 0.5 gave the T = 1 grid" || ok "complete T = 0.5: another grid"

# plurals
expect 0 "sample -n 1" $L sample --model $CM -n 1 -o "$T/one.png"
contains "one image: 'sampled 1 image ('" "sampled 1 image ("
expect 0 "sample -n 2" $L sample --model $CM -n 2 -o "$T/two.png"
contains "two images: 'sampled 2 images ('" "sampled 2 images ("
expect 0 "complete one input, one sample" $L complete --model $CM "$T/t1/sample_00000.png" --samples 1 -o "$T/c.png"
contains "complete: '1 input x 1 sample ('" "completed 1 input x 1 sample ("

# eval of one image: no standard error of zero
D=${LINGEN_DATA:-data}
if ls "$D"/mnist/t10k-images-idx3-ubyte* > /dev/null 2>&1; then
  expect 0 "eval --limit 1" $L eval bits-per-dim --model $CM --limit 1
  contains "one image: the standard error needs two" "the standard error needs two or more"
  lacks "one image: no '+-'" "+-"
  expect 0 "eval --limit 2" $L eval bits-per-dim --model $CM --limit 2
  contains "two images: a standard error" "+- .* (standard error over 2 test images"
else
  bad "eval tests need the MNIST test set in $D (set LINGEN_DATA)"
fi

# the progress line on a terminal: positions done of all, images/s, ETA, moving inside one batch
script -qec "$L sample --model models/mnist.bin -n 2 --batch 2 --threads 1 -o $T/p.png" /dev/null > "$T/tty" 2>&1
tr '\r' '\n' < "$T/tty" > "$T/out"
contains "progress counts positions" "sampling [0-9]*/1568 positions \["
contains "progress gives images/s and ETA" "images/s ETA"
[ "$(grep -c "sampling [1-9][0-9]*/1568 positions" "$T/out")" -ge 2 ] &&
  ok "progress moves before the batch of 2 is done" || bad "progress did not move within the batch"
contains "progress ends at every position" "sampling 1568/1568 positions"
lacks "progress counts no images before one exists" "images [0-9]*/2"
$L sample --model $CM -n 2 -o "$T/p.png" > "$T/out" 2>&1
[ "$(grep -c . "$T/out")" = 1 ] && ok "no progress line when stderr is not a terminal" || bad "progress written to a pipe"

# outputs that the commands write by default are ignored by git
if git rev-parse --git-dir > /dev/null 2>&1; then
  git check-ignore -q samples.png && git check-ignore -q completions.png && ok "samples.png and completions.png are git-ignored" ||
    bad "default outputs not in .gitignore"
fi

# make test's summary: "N passed, N failed" over cmocka, unittest and CLI output, build errors
# and crashes counted, non-zero exit on any failure
cat > "$T/Makefile" <<'MK'
.PHONY: c py pyok cli build
c:
	@echo "== a"; printf '[  PASSED  ] 7 test(s).\n'
	@echo "== b"; printf '[  PASSED  ] 2 test(s).\n[  FAILED  ] 1 test(s), listed below:\n[  FAILED  ] x\n!! b exited 1\n'
	@echo "== crash"; printf '[ RUN      ] y\n!! crash exited 134\n'; exit 1
py:
	@printf 'test_a ... ok\n\nRan 12 tests in 3.1s\n\nFAILED (failures=1, errors=2, skipped=1)\n'; exit 1
pyok:
	@printf 'Ran 5 tests in 3.1s\n\nOK (skipped=1)\n'
cli:
	@echo "== t1"; printf 'ok   one\nok   two\nFAIL three\n!! t1 exited 1\n'; echo "== t2"; echo '!! t2 exited 2'; exit 1
build:
	@echo "cc: error"; exit 2
MK
expect 1 "run_parts: failures give a non-zero exit" env MAKE="make -f $T/Makefile" bash tests/run_parts.sh c py pyok cli build
[ "$(tail -1 "$T/out")" = "23 passed, 8 failed" ] && ok "run_parts counts every case: 23 passed, 8 failed" ||
  bad "run_parts summary: '$(tail -1 "$T/out")', expected '23 passed, 8 failed'"
expect 0 "run_parts: all passed, exit 0" env MAKE="make -f $T/Makefile" bash tests/run_parts.sh pyok
[ "$(tail -1 "$T/out")" = "4 passed, 0 failed" ] && ok "run_parts: '4 passed, 0 failed'" || bad "run_parts: '$(tail -1 "$T/out")'"

# without the datasets: one line that says what is missing and both ways to get it; nothing created
expect 2 "make check-data without the datasets fails" make -s --no-print-directory check-data LINGEN_DATA="$T/nodata"
[ "$(grep -vc '^make[][0-9]*: \*\*\*' "$T/out")" = 1 ] && ok "missing data: one line" || bad "missing data: $(grep -vc '^make[][0-9]*: \*\*\*' "$T/out") lines"
contains "missing data: names what is missing" "$T/nodata: mnist/ cifar-10/"
contains "missing data: LINGEN_DATA=DIR" "LINGEN_DATA=DIR"
contains "missing data: fetch.sh --from DIR" "data/fetch.sh --from DIR"
[ -e "$T/nodata" ] && bad "check-data created $T/nodata" || ok "check-data created nothing"
# a download that fails (no network: a curl that cannot resolve): no retry lines, nothing left
mkdir "$T/bin"
printf '#!/bin/sh\necho "curl: (6) Could not resolve host" >&2\nexit 6\n' > "$T/bin/curl"
chmod +x "$T/bin/curl"
expect 1 "fetch.sh with the network down fails" env PATH="$T/bin:$PATH" bash data/fetch.sh all "$T/dest"
[ "$(wc -l < "$T/out")" -le 5 ] && ok "failed download: at most 5 lines" || bad "failed download: $(wc -l < "$T/out") lines"
contains "failed download: suggests --from DIR" "fetch.sh --from DIR"
contains "failed download: suggests LINGEN_DATA" "LINGEN_DATA=DIR"
[ -e "$T/dest" ] && bad "failed download left $(find "$T/dest" | tr '\n' ' ')" || ok "failed download left no directories"

# the compare plot: no legend over any plotted point (rows 3-4 span the whole time axis)
if "$PY" -c "import matplotlib" 2> /dev/null; then
  "$PY" - scripts "$T/legend.png" <<'PY' > "$T/out" 2>&1 && ok "compare plot: legends cover no data" || { bad "compare plot: a legend covers data"; sed 's/^/     /' "$T/out" | head -5; }
import math, sys
sys.path.insert(0, sys.argv[1])
import matplotlib
matplotlib.use("Agg")
import matplotlib.figure
import plot_compare
N = 784
pos = list(range(N)); sampled = [round(i * (N - 1) / 11) for i in range(12)]
def row(n, key, x, secs, rss=None):
    lat = {"positions": x, "seconds": secs}
    if rss: lat["rss_bytes"] = rss
    return {"row": n, "key": key, "name": key, "extrapolated": len(x) < N, "latency": lat}
cmp = {"dataset": "mnist", "seq_len": N, "threads": 2, "batch": 2, "rows": [
    row(1, "linear_rnn", pos, [2e-5] * N, [3.4e6] * N),
    row(2, "softmax_kv_cache", pos, [3e-5 + 6e-8 * t for t in pos], [4.4e6 + 1000 * t for t in pos]),
    row(3, "softmax_recompute", sampled, [10 ** (-3.5 + 2 * math.sin(t)) for t in sampled]),
    row(4, "linear_recompute", sampled, [10 ** (-3 + 2 * math.cos(t)) for t in sampled])]}
figs = []
save = matplotlib.figure.Figure.savefig
def keep(self, *a, **k):
    figs.append(self)
    return save(self, *a, **k)
matplotlib.figure.Figure.savefig = keep
plot_compare.plot(cmp, sys.argv[2])
fig = figs[0]
fig.canvas.draw()
for ax in fig.axes:
    leg = ax.get_legend()
    box = leg.get_window_extent()
    for line in ax.get_lines():
        for x, y in line.get_xydata():
            px, py = ax.transData.transform((x, y))
            assert not box.contains(px, py), f"{line.get_label()} at ({x}, {y}) under the legend"
PY
else
  ok "compare plot legend: skipped ($PY has no matplotlib)"
fi

finish
