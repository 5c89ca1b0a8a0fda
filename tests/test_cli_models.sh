#!/usr/bin/env bash
# CLI tests: --model NAME through the model directories, `lingen models`, and the three headline
# command lines run from a directory outside the repository, with the repository's ./lingen and
# after `make install DESTDIR=... PREFIX=/usr`. The tiny fixtures stand in for the shipped models
# (LINGEN_MODELS) where a real one would take minutes. Run from the repository root.
set -u
REPO=$PWD
L=$REPO/lingen
F=$REPO/tests/fixtures
. tests/cli_common.sh
STAMP=$(cat build/datadir.stamp 2>/dev/null || echo /usr/local/share/lingen)
# make install rebuilds ./lingen for its PREFIX: rebuild it for the one it had
trap 'cd "$REPO"; rm -rf "$T"; make -s lingen DATADIR="$STAMP" > /dev/null' EXIT
D=${LINGEN_DATA:-data}
export LINGEN_DATA=$(cd "$D" && pwd)

# the tiny fixtures under the shipped models' names
M=$T/tiny
mkdir -p "$M" "$T/away" "$T/other/models" "$T/empty"
cp $F/tiny-linear-cifar.bin "$M/cifar.bin"
cp $F/tiny-softmax-cifar.bin "$M/cifar-softmax.bin"
cp $F/tiny-linear-mnist.bin "$M/mnist.bin"
cp $F/tiny-softmax-mnist.bin "$M/mnist-softmax.bin"
cd "$T/away"

# ---------------------------------------------------------------- resolving --model NAME
for name in cifar.bin cifar; do
  expect 0 "--model $name from \$LINGEN_MODELS" env LINGEN_MODELS="$M" $L info --model $name
  contains "--model $name: the fixture's path" "model        $M/cifar.bin"
  contains "--model $name: a CIFAR model" "dataset      cifar10"
done
expect 0 "--model mnist-softmax" env LINGEN_MODELS="$M" $L info --model mnist-softmax
contains "--model mnist-softmax: a softmax model" "attention    softmax"
expect 0 "no --model: the default mnist, searched too" env LINGEN_MODELS="$M" $L info
contains "default model from \$LINGEN_MODELS" "model        $M/mnist.bin"
expect 0 "\$LINGEN_MODELS with two directories" env LINGEN_MODELS="$T/empty:$M" $L info --model cifar-softmax
contains "the second directory's model" "model        $M/cifar-softmax.bin"

# $LINGEN_MODELS of any length: 20 directories before the fixtures', a value over 4,096 bytes;
# ./models and the rest are searched after them all the same
many=$(for i in $(seq 20); do printf '%s:' "$T/empty/$i"; done)
long=$(for i in $(seq 40); do printf '%s:' "$T/empty/$(printf 'd%.0s' $(seq 100))$i"; done)
expect 0 "\$LINGEN_MODELS with 21 directories" env LINGEN_MODELS="$many$M" $L info --model cifar-softmax
contains "the 21st directory's model" "model        $M/cifar-softmax.bin"
expect 0 "\$LINGEN_MODELS over 4,096 bytes" env LINGEN_MODELS="$long$M" $L info --model cifar-softmax
contains "a directory past byte 4,096" "model        $M/cifar-softmax.bin"
expect 0 "models with a long \$LINGEN_MODELS" env LINGEN_MODELS="$long$many$M" $L models
contains "models: every directory listed" "$T/empty/20 (\$LINGEN_MODELS): not there"
contains "models: ./models still searched" "./models (in the current directory)"
contains "models: the fixtures past them" "^cifar-softmax .*$M/cifar-softmax.bin"

# an existing path always wins, then $LINGEN_MODELS, then ./models, then the repository's models/
cp $F/tiny-softmax-mnist.bin "$T/other/cifar.bin"
cp $F/tiny-softmax-mnist.bin "$T/other/models/mnist.bin"
(cd "$T/other" && env LINGEN_MODELS="$M" $L info --model cifar.bin) > "$T/out" 2>&1
contains "a file in the current directory wins over \$LINGEN_MODELS" "model        cifar.bin"
contains "... and it is that file" "dataset      mnist"
(cd "$T/other" && env LINGEN_MODELS="$M" $L info --model mnist) > "$T/out" 2>&1
contains "\$LINGEN_MODELS comes before ./models" "model        $M/mnist.bin"
(cd "$T/other" && env -u LINGEN_MODELS $L info --model mnist) > "$T/out" 2>&1
contains "./models comes before the executable's models/" "model        ./models/mnist.bin"
contains "... and it is that file" "attention    softmax"
expect 0 "without \$LINGEN_MODELS: models/ next to the executable" env -u LINGEN_MODELS $L info --model cifar.bin
contains "the repository's cifar.bin" "model        $REPO/models/cifar.bin"
contains "... a 16-layer model" "layers       16"

# a directory of the model's name (the data root holds mnist/) is not a model: the name is searched
mkdir -p "$T/dataroot/mnist"
(cd "$T/dataroot" && env LINGEN_MODELS="$M" $L info) > "$T/out" 2>&1
contains "the default model run in the data root" "model        $M/mnist.bin"
(cd "$T/dataroot" && env LINGEN_MODELS="$M" $L info --model mnist) > "$T/out" 2>&1
contains "--model mnist run in the data root" "model        $M/mnist.bin"
(cd "$T/dataroot" && env LINGEN_MODELS="$M" $L eval bits-per-dim --limit 1 --threads 1) > "$T/out" 2>&1
contains "eval run in the data root" "model        $M/mnist.bin"
mkdir "$T/dataroot/nomodel"
(cd "$T/dataroot" && env LINGEN_MODELS="$M" $L info --model nomodel) > "$T/out" 2>&1
contains "a directory and no model of its name: says both" "^lingen: nomodel: a directory, not a model file, and no model of that name in:"

# nothing matches: exit 1, where it looked, what it found, the nearest name
expect 1 "an unknown model name" env LINGEN_MODELS="$M" $L sample --model cifr -n 1
contains "unknown model: names it" "cifr: no such model file"
contains "unknown model: lists \$LINGEN_MODELS" "$M (\$LINGEN_MODELS)"
contains "unknown model: lists ./models" "./models (in the current directory)"
contains "unknown model: lists the executable's models/" "$REPO/models (next to the executable)"
contains "unknown model: lists the install location" "share/lingen/models (make install)"
contains "unknown model: the names found" "models found: cifar cifar-softmax mnist mnist-softmax"
contains "unknown model: the nearest name" 'did you mean "cifar"?'
[ -e samples.png ] && bad "unknown model: wrote samples.png" || ok "unknown model: wrote nothing"
expect 1 "a path that does not exist is not searched" env LINGEN_MODELS="$M" $L info --model sub/cifar.bin
contains "a missing path: the loader's message" "sub/cifar.bin"
lacks "a missing path: no search" "models found"

# ---------------------------------------------------------------- lingen models
expect 0 "lingen models" env LINGEN_MODELS="$M" $L models
contains "models: lists the directories" "$M (\$LINGEN_MODELS)"
contains "models: a linear CIFAR fixture" "^cifar  *cifar10  *linear  *-  *0\.[0-9] MB  *$M/cifar.bin"
contains "models: a softmax MNIST fixture" "^mnist-softmax  *mnist  *softmax"
# the shipped models: bits/dim as written in each file's header (read here with Python)
env -u LINGEN_MODELS $L models > "$T/out" 2>&1
for m in mnist mnist-softmax cifar cifar-softmax; do
  want=$(python3 - "$REPO/models/$m.bin" <<'PY'
import json, os, struct, sys
d = open(sys.argv[1], "rb").read(8); n = struct.unpack("<Q", d)[0]
h = json.loads(open(sys.argv[1], "rb").read(8 + n)[8:])["__metadata__"]
print("%s %s %s %.1f MB" % (h["dataset"], h["attention"], h["test_bits_per_dim"], os.path.getsize(sys.argv[1]) / 1e6))
PY
)
  got=$(awk -v m=$m '$1 == m { print $2, $3, $4, $5, $6 }' "$T/out")
  [ "$got" = "$want" ] && ok "models: $m is '$want'" || bad "models: $m is '$got', its header says '$want'"
done
echo "junk" > "$T/empty/broken.bin"
expect 0 "models with an unreadable file" env LINGEN_MODELS="$T/empty" $L models
contains "an unreadable file is listed with its problem" "^broken  *(unreadable:"
expect 0 "models --help" $L models --help
contains "models --help gives the search order" "LINGEN_MODELS"

# ---------------------------------------------------------------- the headline commands, no install
# The three command lines as written, with a small -n / --limit, from outside the repository.
# --threads 1: a tiny model's steps are too short for two threads to meet at every barrier on a
# busy machine (seconds instead of a fraction of one).
headline() {   # headline LABEL BINARY
  local label=$1 bin=$2
  rm -f samples.png
  expect 0 "$label: lingen sample --model cifar.bin -n 1" env LINGEN_MODELS="$M" $bin sample --model cifar.bin -n 1 --threads 1
  contains "$label: sample used the CIFAR model" "32x32x3"
  [ -s samples.png ] && ok "$label: sample wrote ./samples.png" || bad "$label: no samples.png"
  expect 0 "$label: lingen eval bits-per-dim --limit 2" env LINGEN_MODELS="$M" $bin eval bits-per-dim --limit 2 --threads 1
  contains "$label: eval on 2 test images" "standard error over 2 test images"
  contains "$label: eval used the default model" "model        $M/mnist.bin"
  expect 0 "$label: lingen compare --softmax --limit 2 -n 2" env LINGEN_MODELS="$M" $bin compare --softmax --limit 2 -n 2 --threads 1
  contains "$label: compare's table" "^1 linear, RNN mode"
  contains "$label: compare used the default softmax model" "$M/mnist-softmax.bin"
  expect 1 "$label: eval without the dataset" env LINGEN_MODELS="$M" $bin eval bits-per-dim --limit 2 --data "$T/nodata"
  contains "$label: no dataset: says where and how" "$T/nodata/mnist/.*set --data / LINGEN_DATA"
}
headline "repository binary" "$L"

# ---------------------------------------------------------------- make install
S=$T/stage
( cd "$REPO" && make -s install DESTDIR="$S" PREFIX=/usr ) > "$T/out" 2>&1 && ok "make install DESTDIR PREFIX=/usr" || { bad "make install"; cat "$T/out"; }
for f in usr/bin/lingen usr/share/man/man1/lingen.1 usr/share/lingen/scripts/plot_compare.py \
         usr/share/lingen/models/mnist.bin usr/share/lingen/models/cifar-softmax.bin; do
  [ -f "$S/$f" ] && ok "installed $f" || bad "not installed: $f"
done
I=$S/usr/bin/lingen
headline "installed binary" "$I"
# the installed models, without $LINGEN_MODELS: ../share/lingen/models from the binary
expect 0 "installed: lingen models" env -u LINGEN_MODELS $I models
contains "installed: the staged models" "^cifar  *cifar10  *linear .* $S/usr/share/lingen/models/cifar.bin"
contains "installed: looks in PREFIX/share/lingen/models" "/usr/share/lingen/models (make install)"
expect 0 "installed: --model cifar.bin finds the installed model" env -u LINGEN_MODELS $I info --model cifar.bin
contains "installed: the installed cifar.bin" "$S/usr/share/lingen/models/cifar.bin"
expect 0 "installed: eval bits-per-dim --limit 1 with the installed mnist" env -u LINGEN_MODELS $I eval bits-per-dim --limit 1
contains "installed: eval used the installed mnist" "$S/usr/share/lingen/models/mnist.bin"
[ "$(man -l "$S/usr/share/man/man1/lingen.1" 2>/dev/null | grep -c LINGEN_MODELS)" -ge 1 ] && ok "the man page renders and documents LINGEN_MODELS" || bad "man page"
( cd "$REPO" && make -s uninstall DESTDIR="$S" PREFIX=/usr ) > /dev/null 2>&1
left=$(find "$S" -type f)
[ -z "$left" ] && ok "make uninstall removes every installed file" || bad "left after uninstall: $left"

# the compiled-in location: a binary installed to PREFIX and run from elsewhere finds PREFIX's models
P=$T/prefix
( cd "$REPO" && make -s install PREFIX="$P" ) > "$T/out" 2>&1 || bad "make install PREFIX=$P"
mkdir "$T/bin2"
cp "$P/bin/lingen" "$T/bin2/lingen"
expect 0 "moved binary: --model mnist-softmax from PREFIX" env -u LINGEN_MODELS "$T/bin2/lingen" info --model mnist-softmax
contains "moved binary: PREFIX/share/lingen/models" "model        $P/share/lingen/models/mnist-softmax.bin"

finish
