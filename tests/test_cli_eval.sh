#!/usr/bin/env bash
# lingen eval bits-per-dim: both bits/dim conventions, labelled, with the paper's figure beside them.
# Run from the repository root with $LINGEN_DATA set.
set -u
. tests/cli_common.sh

expect 0 "eval on the tiny linear model" $L eval bits-per-dim --model $F/tiny-linear-mnist.bin --limit 3
cp "$T/out" "$T/par"
contains "eval: the figure over all 784 sub-pixels" "^bits/dim  *[0-9.]* +- [0-9.]* (standard error over 3 test images, all 784 dims)$"
contains "eval: the paper's convention, 783 targets" "^paper conv\.  *[0-9.]* +- [0-9.]* (first sub-pixel given: the mean over the other 783"
contains "eval: the paper's figure" "^paper  *0.644 "
expect 0 "eval the same in step form" $L eval bits-per-dim --model $F/tiny-linear-mnist.bin --limit 3 --mode rnn
# Both forms agree in both conventions; the two conventions differ by the first sub-pixel's bits.
python3 - "$T/par" "$T/out" <<'PY' && ok "eval: both conventions, both forms agree" || bad "eval: conventions or forms disagree"
import re, sys
def figures(path):
    text = open(path).read()
    return [float(re.search("^" + re.escape(label) + r"\s+([0-9.]+) \+- ([0-9.]+)", text, re.M).group(1))
            for label in ("bits/dim", "paper conv.")]
(a, g), (a2, g2) = figures(sys.argv[1]), figures(sys.argv[2])
assert abs(a - a2) <= 1e-4 and abs(g - g2) <= 1e-4, (a, g, a2, g2)
assert a != g
PY
expect 0 "eval on the tiny softmax CIFAR-10 model" $L eval bits-per-dim --model $F/tiny-softmax-cifar.bin --limit 1
contains "eval on CIFAR-10: all 3072 sub-pixels" "^bits/dim .*all 3072 dims"
contains "eval on CIFAR-10: the paper's 3071" "^paper conv\. .*the other 3071"
contains "eval on CIFAR-10: the paper's softmax figure" "^paper  *3.47 "

finish
