#!/usr/bin/env bash
# Mutation testing: apply one-line semantic changes to src/, one at a time, in a copy of the tree
# (this checkout is never modified), rebuild, and run the C tests and the CLI tests, stopping at
# the first failure. A change that every test passes "survives": a behaviour no test holds.
#
#   tests/mutate.sh [WORD...]     only the mutations whose description contains a WORD
#
# Exit status: 0 if every mutation was caught, 1 if any survived, 2 if the unchanged tree fails.
set -u
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
[[ -n ${LINGEN_DATA:-} ]] || { echo "mutate.sh: set LINGEN_DATA to the datasets (make mutate does)" >&2; exit 2; }
export OMP_WAIT_POLICY=${OMP_WAIT_POLICY:-passive}

# FILE | sed expression (one line changed) | what the change breaks
MUTATIONS=$(cat <<'EOF'
attention_linear.c|s|float inv = 1.0f / (den + LINEAR_EPS);|float inv = 1.0f / den;|linear attention step form without the normaliser epsilon
attention_linear.c|s|float inv = 1.0f / (den\[i\] + LINEAR_EPS);|float inv = 1.0f / den[i];|linear attention parallel form without the normaliser epsilon
generate.c|s|tok\[b\] = t == 0 ? BOS_TOKEN :|tok[b] = t == 0 ? 0 :|sampling from scratch feeds token 0 instead of BOS first
util.c|s|int fd = mkstemp(a->tmp);|FILE *g = fopen(strcpy(a->tmp, path), "w"); int fd = g ? dup(fileno(g)) : -1; if (g) fclose(g);|output written in place (O_TRUNC) instead of temp file + rename
generate.c|s|o->first_index + start + b|start + b|generate ignores first_index (random stream of image k)
rng.c|s|uint64_t hs = mix64(stream ^|uint64_t hs = mix64(0 ^|every random stream the same
dmol.c|s|double y = (double)mu\[k\] + exp(clamp_log_scale(log_s\[k\]) + log(T))|double y = (double)mu[k] + exp(-clamp_log_scale(log_s[k]) + log(T))|sampler uses exp(-log_scale) (the paper's sampling bug)
dmol.c|s|return (int)round(t);|return (int)floor(t);|sampler bins shifted by half a value (floor for round)
dmol.c|s|exp(clamp_log_scale(log_s\[k\]) + log(T)) \*|exp(clamp_log_scale(log_s[k])) *|temperature not applied to the logistic scales when sampling
dmol.c|s|v = log_bin(mu\[k\], clamp_log_scale(log_s\[k\]) + log_T, x)|v = log_bin(mu[k], clamp_log_scale(log_s[k]), x)|temperature not applied to the scales of the tempered PMF
generate.c|s|double temp = o->temperature > 0 ? o->temperature : 1.0;|double temp = 1.0;|generate ignores the temperature
cli_temperature.c|s|if (T >= TEMPERATURE_MIN \&\& T <= TEMPERATURE_MAX) return 0;|if (T > 0) return 0;|--temperature accepts values outside its range
progress.c|s|rate / p->per_image|rate|progress line shows positions/s as images/s
attention_softmax.c|s|float scale = 1.0f / sqrtf((float)D);|float scale = 1.0f / (float)D;|softmax attention scaled by 1/D, not 1/sqrt(D)
evaluate.c|s|sqrt(ss / (n - 1) / n)|sqrt(ss / n / n)|standard error with n instead of n - 1
cmd_sample.c|s|done == 1 ? "" : "s"|"s"|"sampled 1 images"
EOF
)

W=$(mktemp -d "${TMPDIR:-/tmp}/lingen-mutate.XXXXXX")
trap 'rm -rf "$W"' EXIT
# the working tree as it is (tracked and untracked files, not the ignored build outputs)
(cd "$ROOT" && git ls-files -co --exclude-standard -z | xargs -0 cp --parents -t "$W") || { echo "mutate.sh: cannot copy the tree" >&2; exit 2; }
cd "$W" || exit 2
BINS="$(ls tests/test_*.c | sed 's|tests/\(.*\)\.c|build/\1|') build/test_matmul_portable build/test_matmul_avx2"

# run_tests: build, then each test binary and CLI test file until one fails; prints the first failure
run_tests() {
  make -s -j2 lingen $BINS > build.log 2>&1 || { echo "build failed"; return 1; }
  local t
  for t in $BINS; do ./"$t" > run.log 2>&1 || { echo "$t"; return 1; }; done
  for t in tests/test_cli*.sh; do bash "$t" > run.log 2>&1 || { echo "$t: $(grep -m1 '^FAIL' run.log)"; return 1; }; done
  return 0
}

echo "unchanged tree: building and testing"
if ! first=$(run_tests); then
  echo "mutate.sh: the unchanged tree fails ($first); fix that first" >&2
  tail -20 build.log run.log >&2
  exit 2
fi

n=0 caught=0 survived=()
while IFS='|' read -r file _ from to what; do
  [[ -z $file ]] && continue
  if [[ $# -gt 0 ]]; then
    match=0
    for w in "$@"; do [[ $what == *"$w"* ]] && match=1; done
    [[ $match == 1 ]] || continue
  fi
  n=$((n + 1))
  cp "src/$file" "$W/orig"
  sed -i "s|$from|$to|" "src/$file"
  if cmp -s "src/$file" "$W/orig"; then
    echo "NOT APPLIED  $what ($file: the line is not there)"
    survived+=("$what (not applied)")
    continue
  fi
  if first=$(run_tests); then
    echo "SURVIVED     $what"
    survived+=("$what")
  else
    echo "caught       $what: $first"
    caught=$((caught + 1))
  fi
  cp "$W/orig" "src/$file"
done <<< "$MUTATIONS"

echo "$n mutations: $caught caught, ${#survived[@]} survived"
for s in "${survived[@]}"; do echo "  survived: $s"; done
[[ ${#survived[@]} -eq 0 ]]
