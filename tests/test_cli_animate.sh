#!/usr/bin/env bash
# lingen sample --animate from the command line: --help, usage errors (exit 2, nothing written),
# the size limit refused before any sampling with the limit named, an unwritable path refused
# before the work, the report and --json, --animate - on standard output, no temporary files
# left. The frames themselves are decoded in tests/test_anim.c. Run from the repository root.
set -u
. tests/cli_common.sh
LM=$F/tiny-linear-mnist.bin
S="sample --model $LM --threads 1"

expect 0 "sample --help" $L sample --help
for o in "--animate FILE" "--frame-every K" "--frame-delay MS"; do contains "--help lists $o" "$o"; done

# usage errors: exit 2, a message naming the option, no PNG and no GIF
usage() {   # usage DESCRIPTION PATTERN ARGS...
  local what=$1 pattern=$2; shift 2
  rm -f "$T/u.png" "$T/u.gif"
  expect 2 "$what" $L $S -n 2 -o "$T/u.png" "$@"
  contains "$what: says why" "$pattern"
  [ -e "$T/u.png" ] || [ -e "$T/u.gif" ] && bad "$what: wrote a file" || ok "$what: wrote nothing"
}
usage "--animate x.png" "--animate $T/u.png: only GIF images are written; give a name ending in .gif" --animate "$T/u.png"
usage "--animate x (no extension)" "give a name ending in .gif" --animate "$T/u"
usage "--frame-every 0" "--frame-every must be between 1 and 1000000" --animate "$T/u.gif" --frame-every 0
usage "--frame-every abc" "--frame-every" --animate "$T/u.gif" --frame-every abc
usage "--frame-delay 10 (browsers show 100 ms)" "--frame-delay must be between 20 and 10000" --animate "$T/u.gif" --frame-delay 10
usage "--frame-delay 20000" "--frame-delay must be between 20 and 10000" --animate "$T/u.gif" --frame-delay 20000
usage "--frame-delay 25" "--frame-delay 25: a GIF's delays are in hundredths of a second; give a multiple of 10" --animate "$T/u.gif" --frame-delay 25
usage "--frame-every without --animate" "--frame-every needs --animate FILE" --frame-every 5
usage "--frame-delay without --animate" "--frame-delay needs --animate FILE" --frame-delay 50
expect 2 "--animate - with -o -" $L $S -n 1 -o - --animate -
contains "--animate - with -o -: says why" "--animate - and -o - cannot both write to standard output"
usage "--animate F --json F" "--json $T/u.gif and --animate $T/u.gif are one file" --animate "$T/u.gif" --json "$T/u.gif"
expect 2 "--animate - with --json -" $L $S -n 1 -o "$T/u.png" --animate - --json -
contains "--animate - with --json -: says why" "--animate - and --json - cannot both write to standard output"

# the size limit: 785 frames of a grid of 100 MNIST images (302 x 302 pixels), 12-bit codes, could
# take 108 MB: refused before sampling
usage "a GIF that could exceed 64 MB" "over the limit of 64 MB; give a larger --frame-every or a smaller -n" \
  -n 100 --animate "$T/u.gif" --frame-every 1
contains "the refusal says the frames, the images and the bound" "--animate $T/u.gif: 785 frames of 100 images could take 108 MB"
lacks "the refusal comes before sampling" "^sampled"
# ... and the same frames of 16 images (a bound of 18 MB) are written, within the limit
expect 0 "785 frames of 16 images" $L $S -n 16 -o "$T/big.png" --animate "$T/big.gif" --frame-every 1
contains "the report names the frames and the GIF" "^sampled 16 images .* -> $T/big.png; 785 frames -> $T/big.gif$"
size=$(stat -c %s "$T/big.gif")
[ "$size" -gt 0 ] && [ "$size" -le 18000000 ] && ok "its GIF is $size bytes, within the bound" || bad "its GIF is $size bytes"

# an unwritable path: exit 1 before the work, no PNG
rm -f "$T/u.png"
expect 1 "--animate into a missing directory" $L $S -n 2 -o "$T/u.png" --animate "$T/none/u.gif"
contains "the missing directory is named" "$T/none/u.gif"
lacks "refused before sampling" "^sampled"
[ -e "$T/u.png" ] && bad "the PNG was written" || ok "no PNG either"

# --json: the animation's figures; --animate -: the GIF on stdout, the report on stderr
expect 0 "--animate with --json" $L $S -n 4 -o "$T/j.png" --animate "$T/j.gif" --frame-every 100 --frame-delay 30 --json "$T/j.json"
python3 - "$T/j.json" "$T/j.gif" <<'PY' && ok "--json: animation, frames, frame_every, frame_delay_ms" || bad "--json: the animation's figures"
import json, sys
j = json.load(open(sys.argv[1]))
assert (j["animation"], j["frames"], j["frame_every"], j["frame_delay_ms"]) == (sys.argv[2], 9, 100, 30), j
PY
$L $S -n 4 -o "$T/j2.png" --animate - --frame-every 100 --frame-delay 30 > "$T/stdout.gif" 2> "$T/err"
cmp -s "$T/j.gif" "$T/stdout.gif" && ok "--animate -: standard output is the same GIF" || bad "--animate -: another GIF on stdout"
grep -q "^sampled 4 images .*; 9 frames -> -$" "$T/err" && ok "--animate -: the report on stderr" || bad "--animate -: no report on stderr"
cmp -s "$T/j.png" "$T/j2.png" && ok "the PNG grid does not depend on --animate" || bad "--animate changed the PNG"
$L $S -n 4 -o "$T/plain.png" > /dev/null
cmp -s "$T/j.png" "$T/plain.png" && ok "the same grid as without --animate" || bad "--animate changed the images"

# nothing but the outputs in the directory (no temporary files)
left=$(ls -A "$T" | grep -v -x -e out -e err -e stdout.gif -e big.png -e big.gif -e j.png -e j.gif -e j.json -e j2.png -e plain.png)
[ -z "$left" ] && ok "no temporary files left" || bad "left behind: $left"
finish
