# Sourced by run_tests.sh and memcheck.sh: arguments [ROOT [BIN]], the binaries and fixtures,
# $LINGEN_LAUNCH as the array launch, a scratch folder, ok/bad and the failure count.
root=${1:-.}
bin=${2:-build-cuda}
read -r -a launch <<< "${LINGEN_LAUNCH:-}"
lingen=$root/lingen
[ -x "$bin/lingen" ] && lingen=$bin/lingen
tiny=$root/tests/fixtures/tiny-linear-mnist.bin
soft=$root/tests/fixtures/tiny-softmax-mnist.bin
heads32=$root/tests/fixtures/tiny-heads32-mnist.bin
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fails=0
ok() { echo "ok   $1"; }
bad() { echo "FAIL $1"; fails=$((fails + 1)); }
