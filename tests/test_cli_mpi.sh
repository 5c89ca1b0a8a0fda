#!/usr/bin/env bash
# lingen over the ranks of an MPI job (make MPI=1): sample and eval under mpirun -np 2 and 3 give
# what one process of the plain build gives (the grid, tiles and animation byte for byte, the bits/dim to
# 1e-6); a rank that fails, before or after the work, ends the whole job with exit 1, its message,
# and nothing written. Builds build-mpi/lingen itself (./lingen stays the plain build). Run from
# the repository root with $LINGEN_DATA set.
set -u
. tests/cli_common.sh
if ! command -v mpicc > /dev/null || ! command -v mpirun > /dev/null; then
  ok "MPI: skipped (no mpicc or mpirun; on Debian: apt-get install libopenmpi-dev openmpi-bin)"
  finish
  exit
fi
# Open MPI: allowed as root (CI), on this machine alone (no ssh, no network), through shared
# memory without the cross-process copy that containers often forbid.
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_plm=isolated OMPI_MCA_pml=ob1 \
  OMPI_MCA_btl=self,vader OMPI_MCA_btl_vader_single_copy_mechanism=none
M=build-mpi/lingen
# 3 ranks on 2 cores; a job that hangs (ranks that disagree on where they are) fails
RUN="timeout ${MPI_TIMEOUT:-60} mpirun --oversubscribe"

before=$(cksum < "$L")
if ${MAKE:-make} -s MPI=1 $M > "$T/build.log" 2>&1; then ok "make MPI=1 builds $M"; else bad "make MPI=1 $M:"; tail -5 "$T/build.log"; fi
[ "$(cksum < "$L")" = "$before" ] && ok "$L is not rebuilt by it" || bad "make MPI=1 $M changed $L"
ldd "$L" | grep -q libmpi && bad "$L (the default build) links MPI" || ok "the default build does not link MPI"
ldd $M | grep -q libmpi && ok "$M links MPI" || bad "$M does not link MPI"

# one process of the plain build: the reference
S="sample --model $F/tiny-linear-mnist.bin -n 7 --batch 3 --seed 11"
$L $S -o "$T/ref.png" --outdir "$T/ref" --animate "$T/ref.gif" > /dev/null
$L sample --model $F/tiny-softmax-cifar.bin -n 5 --seed 3 -o "$T/cref.png" --outdir "$T/cref" > /dev/null
E="eval bits-per-dim --model $F/tiny-linear-mnist.bin --limit 7 --batch 3"
$L $E --json "$T/ref.json" > /dev/null
# figures A B: bits/dim, both conventions, and their standard errors agree to 1e-6
figures() {
  python3 - "$1" "$2" <<'PY'
import json, sys
a, b = (json.load(open(p)) for p in sys.argv[1:3])
for k in ("bits_per_dim", "bits_per_dim_stderr", "bits_per_dim_first_given", "bits_per_dim_first_given_stderr"):
    assert abs(a[k] - b[k]) <= 1e-6, (k, a[k], b[k])
assert a["images"] == b["images"]
PY
}

for np in 2 3; do
  expect 0 "sample over $np ranks" $RUN -np $np $M $S -o "$T/g$np.png" --outdir "$T/t$np" --animate "$T/g$np.gif"
  cmp -s "$T/ref.png" "$T/g$np.png" && ok "$np ranks: the same grid as one process" || bad "$np ranks: another grid"
  cmp -s "$T/ref.gif" "$T/g$np.gif" && ok "$np ranks: the same animation as one process" || bad "$np ranks: another animation"
  diff -r "$T/ref" "$T/t$np" > /dev/null && ok "$np ranks: the same 7 tiles" || bad "$np ranks: other tiles: $(ls "$T/t$np" | tr '\n' ' ')"
  [ "$(grep -c '^sampled 7 images' "$T/out")" = 1 ] && ok "$np ranks: one report, rank 0's" || bad "$np ranks: $(grep -c '^sampled' "$T/out") reports"
  contains "$np ranks: the report counts the whole job" "^sampled 7 images (.*, $np ranks) in"
  expect 0 "softmax CIFAR-10 sample over $np ranks" $RUN -np $np $M sample --model $F/tiny-softmax-cifar.bin -n 5 --seed 3 -o "$T/c$np.png" --outdir "$T/ct$np"
  cmp -s "$T/cref.png" "$T/c$np.png" && diff -r "$T/cref" "$T/ct$np" > /dev/null && ok "$np ranks: the same CIFAR-10 grid and tiles" || bad "$np ranks: other CIFAR-10 images"
  expect 0 "eval over $np ranks" $RUN -np $np $M $E --json "$T/e$np.json"
  figures "$T/ref.json" "$T/e$np.json" && ok "$np ranks: the same bits/dim and standard errors (1e-6)" || bad "$np ranks: other bits/dim"
  [ "$(grep -c '^bits/dim' "$T/out")" = 1 ] && ok "$np ranks: eval reports once" || bad "$np ranks: eval reported $(grep -c '^bits/dim' "$T/out") times"
done
expect 0 "more ranks than images" $RUN -np 3 $M sample --model $F/tiny-linear-mnist.bin -n 2 --seed 11 -o "$T/two.png"
$L sample --model $F/tiny-linear-mnist.bin -n 2 --seed 11 -o "$T/tworef.png" > /dev/null
cmp -s "$T/two.png" "$T/tworef.png" && ok "2 images over 3 ranks: the same grid" || bad "2 images over 3 ranks: another grid"

# threads: ranks free to run on every core split them; --threads is taken as given
cores=$($L --version | awk '/^threads/ { print $2 }')
half=$((cores / 2 > 0 ? cores / 2 : 1))
threads() { python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))["threads_per_rank"])' "$1"; }
$RUN --bind-to none -np 2 $M $S -o "$T/x.png" --json "$T/th.json" > /dev/null 2>&1
[ "$(threads "$T/th.json")" = $half ] && ok "2 unbound ranks on $cores cores: $half thread(s) each" || bad "2 unbound ranks: $(threads "$T/th.json") threads each, not $half"
$RUN --bind-to none -np 2 $M $S --threads "$cores" -o "$T/x.png" --json "$T/th.json" > /dev/null 2>&1
[ "$(threads "$T/th.json")" = "$cores" ] && ok "--threads $cores: as given" || bad "--threads $cores gave $(threads "$T/th.json")"
rm -f "$T/x.png"

# A failing rank. on_rank1 FROM TO CMD...: CMD, but rank 1's argument FROM is TO.
cat > "$T/on_rank1" <<'SH'
#!/bin/sh
from=$1 to=$2
shift 2
[ "${OMPI_COMM_WORLD_RANK:-${PMI_RANK:-0}}" = 1 ] || exec "$@"
for a; do shift; [ "$a" = "$from" ] && a=$to; set -- "$@" "$a"; done
exec "$@"
SH
chmod +x "$T/on_rank1"
# nothing NAME...: none of these paths exists, and no temporary file is left in $T
nothing() {
  local p left=""
  for p; do [ -e "$p" ] && left="$left $p"; done
  left="$left $(find "$T" -name '.lingen-*')"
  [ -z "${left// /}" ] && ok "$what: nothing written" || bad "$what: left$left"
}
what="rank 1's model is missing"
expect 1 "$what: exit 1" $RUN -np 2 "$T/on_rank1" $F/tiny-linear-mnist.bin "$T/gone.bin" $M sample --model $F/tiny-linear-mnist.bin -n 4 -o "$T/f1.png" --outdir "$T/f1"
contains "$what: its message names the file" "$T/gone.bin"
contains "$what: rank 0 says which rank stopped the job" "rank 1 of 2 (on .*) failed: the job stops"
nothing "$T/f1.png" "$T/f1"
touch "$T/file"
what="--outdir under a file"
expect 1 "$what: exit 1" $RUN -np 2 $M $S -o "$T/f2.png" --outdir "$T/file/tiles"
contains "$what: the message names it" "$T/file/tiles: Not a directory"
nothing "$T/f2.png"
what="rank 1's --outdir unwritable"
expect 1 "$what: exit 1" $RUN -np 2 "$T/on_rank1" "$T/f3" "$T/file/tiles" $M $S -o "$T/f3.png" --outdir "$T/f3"
contains "$what: the message names it" "$T/file/tiles"
nothing "$T/f3.png" "$T/f3"
# after the work: rank 1's tile sample_00005.png cannot be written (a directory is in its way);
# rank 0 had staged the grid and its tiles, and renames none of them
mkdir -p "$T/f4/sample_00005.png"
what="a tile of rank 1 fails after the work"
expect 1 "$what: exit 1" $RUN -np 2 $M $S -o "$T/f4.png" --outdir "$T/f4"
contains "$what: the message names it" "$T/f4/sample_00005.png: is a directory"
nothing "$T/f4.png" "$T/f4/sample_00000.png" "$T/f4/sample_00004.png"
what="eval: rank 1's model is missing"
expect 1 "$what: exit 1" $RUN -np 2 "$T/on_rank1" $F/tiny-linear-mnist.bin "$T/gone.bin" $M $E --json "$T/f5.json"
contains "$what: its message names the file" "$T/gone.bin"
lacks "$what: no figures" "^bits/dim"
nothing "$T/f5.json"
expect 2 "--ceiling over 2 ranks: a usage error" $RUN -np 2 $M $S --ceiling -o "$T/f6.png"
contains "--ceiling: says why" "measures one process"

finish
