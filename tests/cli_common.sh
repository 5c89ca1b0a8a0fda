# Shared by the tests/test_cli*.sh files (sourced): a temp directory $T removed on exit, the
# ok/bad lines and the count of failures that `finish` turns into the script's exit code.
# LINGEN=other/lingen tests another build; a script may set L and F (absolute) before sourcing.
L=${L:-${LINGEN:-./lingen}}
F=${F:-tests/fixtures}
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
# contains / lacks DESCRIPTION PATTERN: whether $T/out has a line matching PATTERN (grep)
contains() { if grep -q -- "$2" "$T/out"; then ok "$1"; else bad "$1: no '$2' in:"; sed 's/^/     /' "$T/out" | head -8; fi; }
lacks()    { if grep -q -- "$2" "$T/out"; then bad "$1: '$2' in:"; sed 's/^/     /' "$T/out" | head -8; else ok "$1"; fi; }
finish()   { echo "$fails failed"; [ "$fails" -eq 0 ]; }
