# Shared by the tests/test_cli*.sh files (sourced): a temp directory $T, the ok/bad counters and
# the checks. LINGEN=other/lingen tests another build.
L=${LINGEN:-./lingen}
F=tests/fixtures
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
fails=0
ok()   { echo "ok   $1"; }
bad()  { echo "FAIL $1"; fails=$((fails + 1)); }
# expect CODE DESCRIPTION CMD...: run, check the exit code; stdout+stderr in $T/out
expect() {
  local code=$1 what=$2; shift 2
  "$@" > "$T/out" 2>&1; local rc=$?
  if [ $rc -eq "$code" ]; then ok "$what"; else bad "$what (exit $rc, expected $code)"; sed 's/^/     /' "$T/out" | head -5; fi
}
contains() { if grep -q -- "$2" "$T/out"; then ok "$1"; else bad "$1: no '$2' in:"; sed 's/^/     /' "$T/out" | head -5; fi; }
