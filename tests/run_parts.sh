#!/usr/bin/env bash
# Run make targets one after another (all of them, even after a failure), show their output, and
# end with one line for the whole run: "N passed, N failed", counting test cases:
#   cmocka binaries   "[  PASSED  ] N test(s)." and "[  FAILED  ] N test(s), listed below:"
#   Python unittest   "Ran N tests", then "FAILED (failures=F, errors=E, skipped=S)" or "OK (skipped=S)"
#   CLI test files    lines starting "ok " or "FAIL "
# A binary or script that exits non-zero without reporting a failed case ("!! NAME exited N" from
# the Makefile loops), or a target that fails before running any test (a build error), counts as
# one failed case. Exit status: 0 only when nothing failed.
#
#   MAKE=make tests/run_parts.sh TARGET...
set -u
MAKE=${MAKE:-make}
passed=0 failed=0
log=$(mktemp)
trap 'rm -f "$log"' EXIT

# count LOG RC: adds this target's cases to passed and failed
count() {
  local p f
  read -r p f < <(awk -v rc="$2" '
    function close_unit() { if (exited && !unit_failed) f++; exited = unit_failed = 0 }
    /^== /                                  { close_unit() }
    /^\[  PASSED  \] [0-9]+ test/           { p += $4 }
    /^\[  FAILED  \] [0-9]+ test\(s\), listed below/ { f += $4; unit_failed = 1 }
    /^Ran [0-9]+ tests? in /                { ran = $2 }
    /^FAILED \(/ || /^OK \(/                {
      n = split(substr($0, index($0, "(") + 1), kv, /[,)] ?/)
      for (i = 1; i <= n; i++) { split(kv[i], a, "="); if (a[1] ~ /failures|errors/) py_f += a[2]; if (a[1] ~ /skipped/) py_s += a[2] }
    }
    /^ok /                                  { p++ }
    /^FAIL /                                { f++; unit_failed = 1 }
    /^!! .* exited [0-9]+$/                 { exited = 1 }
    END {
      close_unit()
      if (ran) { p += ran - py_f - py_s; f += py_f }
      if (rc != 0 && f == 0) f = 1   # failed before any test reported: a build error, a crash
      print p + 0, f + 0
    }' "$1")
  passed=$((passed + p)) failed=$((failed + f))
}

for target in "$@"; do
  $MAKE --no-print-directory "$target" 2>&1 | tee "$log"
  count "$log" "${PIPESTATUS[0]}"
done
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
