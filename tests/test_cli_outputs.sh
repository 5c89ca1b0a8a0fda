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

# ---------------------------------------------------------------- outputs refused before the work
# empty names (a variable left unset in a script), a socket: refused at once, not after -n 100000
expect 2 "sample --outdir ''" timeout 20 $L sample --threads 1 --model $M -n 100000 -o "$T/e.png" --outdir ""
contains "--outdir '': says so" "lingen sample: --outdir needs a value, not an empty one"
expect 2 "sample --json ''" timeout 20 $L sample --threads 1 --model $M -n 100000 -o "$T/e.png" --json ""
contains "--json '': says so" "lingen sample: --json needs a value, not an empty one"
expect 2 "eval --json=''" timeout 20 $L eval bits-per-dim --threads 1 --model $M --limit 2 --json=
expect 2 "complete with an empty PNG argument" $L complete --model $M ""
contains "an empty argument: says so" "lingen complete: an argument is empty"
python3 -c 'import socket, sys; socket.socket(socket.AF_UNIX).bind(sys.argv[1])' "$T/sock.png"
expect 1 "-o a socket" timeout 20 $L sample --threads 1 --model $M -n 100000 -o "$T/sock.png"
contains "-o a socket: says so" "sock.png: is a socket, not a file, device or FIFO"
expect 1 "--json a socket" timeout 20 $L sample --threads 1 --model $M -n 100000 -o "$T/e.png" --json "$T/sock.png"
[ -S "$T/sock.png" ] && ok "-o a socket: still a socket" || bad "-o a socket: replaced"
[ -e "$T/e.png" ] && bad "refused runs wrote a grid" || ok "refused runs wrote nothing"

# two outputs of one run on one file: the second would replace the first
expect 2 "--json F -o F" $L sample --threads 1 --model $M -n 1 -o "$T/same.png" --json "$T/same.png"
contains "--json F -o F: says so" "lingen sample: -o $T/same.png and --json $T/same.png are one file"
ln -s same.png "$T/link.png"
mkdir "$T/sub" "$T/tiles"
expect 2 "--json through a symlink and .." $L sample --threads 1 --model $M -n 1 -o "$T/link.png" --json "$T/sub/../same.png"
expect 2 "-o one of --outdir's tiles" $L sample --threads 1 --model $M -n 4 -o "$T/tiles/sample_00003.png" --outdir "$T/tiles"
contains "-o a tile: says so" "-o $T/tiles/sample_00003.png is one of the images --outdir $T/tiles writes"
expect 2 "--json one of --outdir's tiles" $L sample --threads 1 --model $M -n 4 --json "$T/sub/../tiles/sample_00000.png" --outdir "$T/tiles"
[ -e "$T/same.png" ] || [ -n "$(ls -A "$T/tiles")" ] && bad "refused runs wrote files" || ok "two outputs on one file: nothing written"
expect 0 "-o a tile name that is not one of the run's" $L sample --threads 1 --model $M -n 3 -o "$T/tiles/sample_00003.png" --outdir "$T/tiles"
[ "$(ls "$T/tiles" | wc -l)" = 4 ] && ok "... the grid beside 3 tiles" || bad "... $(ls "$T/tiles")"

# ---------------------------------------------------------------- files already there
is_png() { [ "$(head -c 8 "$1" | od -An -tx1 | tr -d ' \n')" = 89504e470d0a1a0a ]; }
# a symlink in a sticky world-writable directory (/tmp) is followed only when the runner or the
# directory's owner owns it, as the kernel's protected_symlinks rule has it (other users: root)
if [ "$(id -u)" = 0 ]; then
  mkdir -m 1777 "$T/sticky"
  printf victim > "$T/victim.png"
  ln -s ../victim.png "$T/sticky/out.png"
  chown -h 65534:65534 "$T/sticky/out.png"
  expect 1 "-o another user's symlink in a sticky directory" timeout 20 $L sample --threads 1 --model $M -n 100000 -o "$T/sticky/out.png"
  contains "sticky symlink: says so" "out.png: a symlink in the sticky world-writable directory $T/sticky, owned by another user: not followed"
  expect 1 "--json another user's symlink in a sticky directory" $L sample --threads 1 --model $M -n 1 -o "$T/g.png" --json "$T/sticky/out.png"
  [ "$(cat "$T/victim.png")" = victim ] && ok "sticky symlink: its target untouched" || bad "sticky symlink: its target replaced"
  chown 65534:65534 "$T/sticky"   # the directory's owner owns the link: followed
  expect 0 "-o a symlink the sticky directory's owner owns" $L sample --threads 1 --model $M -n 1 -o "$T/sticky/out.png"
  is_png "$T/victim.png" && [ -L "$T/sticky/out.png" ] && ok "... its target replaced, the link kept" || bad "... not followed"
  chown 0:0 "$T/sticky"; chown -h 0:0 "$T/sticky/out.png"   # the runner owns the link: followed
  expect 0 "-o the runner's own symlink in a sticky directory" $L sample --threads 1 --model $M -n 1 -o "$T/sticky/out.png"
else
  echo "skip symlinks of other users (chown needs root)"
fi

# a read-only file (no write bit) is not replaced, before the work, unless --force; then its mode
# stays; the same for --json and for a tile --outdir would write
printf old > "$T/ro.png"; chmod 444 "$T/ro.png"
expect 1 "-o a read-only file" timeout 20 $L sample --threads 1 --model $M -n 100000 -o "$T/ro.png"
contains "-o read-only: says so" "ro.png: is read-only (mode 0444): not replaced; --force replaces it"
[ "$(cat "$T/ro.png")" = old ] && ok "-o read-only: untouched" || bad "-o read-only: replaced"
expect 0 "-o a read-only file, --force" $L sample --threads 1 --model $M -n 1 -o "$T/ro.png" --force
is_png "$T/ro.png" && [ "$(stat -c %a "$T/ro.png")" = 444 ] && ok "--force: replaced, still mode 0444" || bad "--force: $(stat -c %a "$T/ro.png")"
printf old > "$T/ro.json"; chmod 444 "$T/ro.json"
expect 1 "info --json a read-only file" $L info --model $M --json "$T/ro.json"
contains "--json read-only: says so" "ro.json: is read-only (mode 0444)"
expect 0 "info --json a read-only file, --force" $L info --model $M --json "$T/ro.json" --force
mkdir "$T/rotiles"; printf old > "$T/rotiles/sample_00002.png"; chmod 444 "$T/rotiles/sample_00002.png"
expect 1 "--outdir with a read-only tile" timeout 20 $L sample --threads 1 --model $M -n 100000 -o "$T/g.png" --outdir "$T/rotiles"
contains "read-only tile: says so" "sample_00002.png: is read-only (mode 0444)"
expect 0 "--outdir with a read-only tile, --force" $L sample --threads 1 --model $M -n 3 -o "$T/g.png" --outdir "$T/rotiles" --force
# the mode of a file replaced is kept
printf old > "$T/mode.png"; chmod 640 "$T/mode.png"
expect 0 "-o a file of mode 0640" $L sample --threads 1 --model $M -n 1 -o "$T/mode.png"
[ "$(stat -c %a "$T/mode.png")" = 640 ] && ok "mode 0640 kept" || bad "mode now $(stat -c %a "$T/mode.png")"
if [ "$(id -u)" = 0 ]; then
  # root replacing another user's file leaves it theirs
  printf old > "$T/theirs.png"; chown 65534:65534 "$T/theirs.png"
  expect 0 "root: -o another user's file" $L sample --threads 1 --model $M -n 1 -o "$T/theirs.png"
  [ "$(stat -c %u:%g "$T/theirs.png")" = 65534:65534 ] && ok "root: the owner kept" || bad "root: owner now $(stat -c %u:%g "$T/theirs.png")"
  # another user (65534) may replace root's file in its own directory only with --force, as a
  # shell's > could not write it; it cannot give the new file to root
  if command -v setpriv > /dev/null; then
    chmod 755 "$T"; mkdir "$T/nobody"; chown 65534:65534 "$T/nobody"
    printf old > "$T/nobody/root.png"
    as_nobody() { setpriv --reuid 65534 --regid 65534 --clear-groups "$@"; }
    expect 1 "another user's file, not writable by the runner" as_nobody $L sample --threads 1 --model $M -n 1 -o "$T/nobody/root.png"
    contains "not writable: says so" "root.png: is not writable by this user (mode 0644, owner 0): not replaced; --force replaces it"
    expect 0 "... with --force" as_nobody $L sample --threads 1 --model $M -n 1 -o "$T/nobody/root.png" --force
    [ "$(stat -c %u "$T/nobody/root.png")" = 65534 ] && ok "... now the runner's" || bad "... owner $(stat -c %u "$T/nobody/root.png")"
  fi
fi

# ---------------------------------------------------------------- temporary files of a killed run
# SIGKILL while the tiles are written leaves temporary files; the next run into that directory
# removes them (and the grid's, in its own directory)
mkdir "$T/kill"
python3 - $L "$T/kill" $M <<'PY' > "$T/left"
import os, signal, subprocess, sys, time
lingen, d, model = sys.argv[1:]
p = subprocess.Popen([lingen, "sample", "--threads", "1", "--model", model, "-n", "1000", "-o", d + "/grid.png",
                      "--outdir", d + "/tiles"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
t0 = time.time()
while p.poll() is None and time.time() - t0 < 600:   # a sanitizer build samples 60 times slower
    if os.path.isdir(d + "/tiles") and any(n.startswith(".lingen-") for n in os.listdir(d + "/tiles")):
        p.send_signal(signal.SIGKILL)
        break
    time.sleep(0.002)
p.wait()
print(sum(n.startswith(".lingen-") for n in os.listdir(d + "/tiles")))
PY
[ "$(cat "$T/left")" -gt 0 ] && ok "SIGKILL while writing tiles: $(cat "$T/left") temporary files left" || bad "SIGKILL: none left (the kill missed)"
expect 0 "the next run into that directory" $L sample --threads 1 --model $M -n 2 -o "$T/kill/grid2.png" --outdir "$T/kill/tiles"
[ -z "$(find "$T/kill" -name '.lingen-*')" ] && ok "... removed them" || bad "... left $(find "$T/kill" -name '.lingen-*' | wc -l)"
# only this machine's files of processes that no longer run, the runner's own, of lingen's naming
host=$(python3 -c 'import socket
h = 2166136261
for b in socket.gethostname().encode(): h = (h ^ b) * 16777619 & 0xffffffff
print("%08x" % h)')
sleep 0 & dead=$!; wait $dead
mkdir "$T/stale"
touch "$T/stale/.lingen-$host-$dead-aB3dE9" "$T/stale/.lingen-$host-$$-aB3dE9" "$T/stale/.lingen-0badf00d-$dead-aB3dE9" \
      "$T/stale/.lingen-aB3dE9" "$T/stale/.lingen-$host-$dead-aB3dE9.png"
[ "$(id -u)" = 0 ] && touch "$T/stale/.lingen-$host-$dead-theirs" && chown 65534 "$T/stale/.lingen-$host-$dead-theirs"
expect 0 "a run into a directory of temporary files" $L info --model $M --json "$T/stale/info.json"
[ ! -e "$T/stale/.lingen-$host-$dead-aB3dE9" ] && ok "a dead process's temporary file: removed" || bad "a dead process's: kept"
for f in ".lingen-$host-$$-aB3dE9" ".lingen-0badf00d-$dead-aB3dE9" ".lingen-aB3dE9" ".lingen-$host-$dead-aB3dE9.png"; do
  [ -e "$T/stale/$f" ] && ok "kept: $f" || bad "removed: $f"
done
[ "$(id -u)" != 0 ] || { [ -e "$T/stale/.lingen-$host-$dead-theirs" ] && ok "kept: another user's" || bad "removed: another user's"; }

finish
