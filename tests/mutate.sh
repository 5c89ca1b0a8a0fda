#!/usr/bin/env bash
# Mutation testing: apply one-line semantic changes to src/, one at a time, in a copy of the tree
# (this checkout is never modified), rebuild what the tests of the changed file need, and run
# those tests, stopping at the first that fails. A change that they all pass "survives": a
# behaviour no test holds.
#
#   tests/mutate.sh [WORD...]     only the mutations whose description contains a WORD
#
# Every mutation must change exactly one line of the code as it is now, and its file must have
# tests in TESTS: one whose pattern matches no line (the code moved or was rewritten) or several
# is named and nothing runs, so the list cannot go stale unnoticed. A test counts as failed when
# it fails twice in a row (test_threads' timing tests can fail once on a busy machine).
# The last line is "N killed, N survived". Exit status: 0 if every mutation was killed, 1 if any
# survived, 2 if the list is wrong (a mutation that does not apply or does not build) or the
# unchanged tree fails its tests.
set -u
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
[[ -n ${LINGEN_DATA:-} ]] || { echo "mutate.sh: set LINGEN_DATA to the datasets (make mutate does)" >&2; exit 2; }

# FILE (in src/) | sed pattern of the one line | its replacement | what the change breaks
MUTATIONS=$(cat <<'EOF'
engine/attention_linear.c|float inv = 1.0f / (den + LINEAR_EPS);|float inv = 1.0f / den;|linear attention step form without the normaliser epsilon
engine/attention_linear.c|float inv = 1.0f / (den\[i\] + LINEAR_EPS);|float inv = 1.0f / den[i];|linear attention parallel form without the normaliser epsilon
engine/attention_linear.c|for (int j = i + 1; j < n; j++) A\[i \* n + j\] = 0;|for (int j = i + 2; j < n; j++) A[i * n + j] = 0;|chunked linear attention's causal mask lets position i see i + 1
engine/attention_softmax.c|float scale = 1.0f / sqrtf((float)D);|float scale = 1.0f / (float)D;|softmax attention scaled by 1/D, not 1/sqrt(D)
engine/attention_softmax.c|softmax_row(Sc + (size_t)i \* P, t0 + i0 + i + 1, P);|softmax_row(Sc + (size_t)i * P, t0 + i0 + i, P);|softmax attention over t positions, not t + 1 (the newest left out)
engine/transformer.c|t0 + t == 0 ? BOS_TOKEN :|t0 + t == 0 ? 0 :|the first input is token 0 instead of BOS
engine/transformer.c|s->pe + (size_t)(s->n_pos + t) \* h|s->pe + (size_t)t * h|positional encoding indexed by the position within a call, not in the image
io/half.h|return (uint16_t)((b + 0x7fffu + ((b >> 16) & 1)) >> 16);|return (uint16_t)(b >> 16);|float to bfloat16 truncated, not rounded to nearest even
kernels/matmul_q8.c|return (uint16_t)((b >> 16) + ((b & 0xffff) != 0));|return (uint16_t)(b >> 16);|8-bit weights' block scale rounded down (a weight then needs more than 127 steps)
engine/dmol_draw.h|exp((log_s\[k\] < LOG_SCALE_MIN|exp(-(log_s[k] < LOG_SCALE_MIN|sampler uses exp(-log_scale) (the paper's sampling bug)
engine/dmol_draw.h|(log_s\[k\] < LOG_SCALE_MIN ? (double)LOG_SCALE_MIN : (double)log_s\[k\])|((double)log_s[k])|sampler without the log-scale clamp
engine/dmol_draw.h|: (double)log_s\[k\]) + log(T))|: (double)log_s[k]))|temperature not applied to the logistic scales when sampling
engine/dmol_draw.h|return (int)round(t);|return (int)floor(t);|sampler bins shifted by half a value (floor for round)
engine/dmol.c|v = log_bin(mu\[k\], clamp_log_scale(log_s\[k\]) + log_T, x)|v = log_bin(mu[k], clamp_log_scale(log_s[k]), x)|temperature not applied to the scales of the tempered PMF
engine/rng.c|uint64_t hs = mix64(stream ^|uint64_t hs = mix64(0 ^|every random stream the same
engine/generate.c|(uint64_t)(o->first + start + b)|(uint64_t)(start + b)|generate ignores first (image k's random stream)
engine/generate.c|double temp = o->temperature > 0 ? o->temperature : 1.0;|double temp = 1.0;|generate ignores the temperature
cli/cli_temperature.c|if (!(T >= TEMPERATURE_MIN && T <= TEMPERATURE_MAX))|if (!(T > 0))|--temperature accepts values outside its range
cli/cli_temperature.c|T >= TEMPERATURE_MIN && T <= TEMPERATURE_MAX|T > TEMPERATURE_MIN \&\& T < TEMPERATURE_MAX|--temperature refuses the ends of its range (0.01 and 100)
cli/cmd_sample.c|total == 1 ? "" : "s", c->height|"s", c->height|"sampled 1 images"
io/progress.c|rate / p->per_image|rate|progress line shows positions/s as images/s
engine/evaluate.c|sqrt(ss / (n - 1) / n)|sqrt(ss / n / n)|standard error with n instead of n - 1
engine/evaluate.c|((N - 1) \* log(2.0))|(N * log(2.0))|bits/dim after the first sub-pixel divided by N, not N - 1
io/output.c|fd = make_temp(dir, &a->tmp);|fd = creat(dest, 0666);|output written in place (O_TRUNC) instead of temp file + rename
io/output.c|^        unlink(a->tmp);$||temp file left behind when the rename into place fails
io/safetensors.c|if (begin < pos)|if (begin + t->nbytes < pos)|tensor overlap refused only when one lies wholly inside the one before
engine/model.c|{"channels", &c->channels, 3}|{"channels", \&c->channels, 4}|a model of 4 channels accepted
io/dataset.c|if (!have) return 0;|return 0;|bytes after the end of a gzip stream ignored
kernels/threads.c|first += ITEM_MASK)|first += ITEM_MASK + 1)|a loop of over 2^20 - 1 items skips one item a chunk
kernels/adapt.c|return usual > 0 ? trial < MARGIN \* usual : -1;|return usual > 0 ? trial > MARGIN * usual : -1;|the adaptive threads keep the slower way (a trial wins when it is slower)
kernels/adapt.c|if (waited > STALL_SECONDS \&\& waited > own|if (waited > STALL_SECONDS \&\& waited < own|a stalled loop no longer ends the period
kernels/plan.c|if (step \&\& c.q8 \&\& B <= p->q8_batch) return KERNEL_INT8;|if (step \&\& c.q8 \&\& B < p->q8_batch) return KERNEL_INT8;|8-bit weights stop one batch short of the plan's
io/image.c|c\[0\] \* 19595 + c\[1\] \* 38470 + c\[2\] \* 7471|c[0] * 7471 + c[1] * 38470 + c[2] * 19595|PNG read as gray: red and blue luminance weights swapped
io/modelpath.c|^    for (int i = 0; i < d.n; i++)$|    for (int i = d.n - 1; i >= 0; i--)|--model NAME searched in reverse order (the last directory first)
engine/shard.c|\*count = base + (rank < extra);|*count = base + (rank <= extra);|MPI shares: one rank too many takes an extra image
EOF
)

# FILE -> the tests that cover it, in the order they run: C test binaries (build/NAME) and CLI
# test files (tests/NAME, against ./lingen). A file gets a line here when a mutation first needs it.
declare -A TESTS=(
  [engine/attention_linear.c]="test_attention test_transformer"
  [engine/attention_softmax.c]="test_attention test_transformer"
  [engine/transformer.c]="test_transformer test_complete"
  [io/half.h]="test_matmul test_model"
  [kernels/matmul_q8.c]="test_matmul"
  [engine/dmol_draw.h]="test_dmol"
  [engine/dmol.c]="test_dmol"
  [engine/rng.c]="test_rng"
  [engine/generate.c]="test_complete test_cli_ux.sh"
  [cli/cli_temperature.c]="test_cli_ux.sh"
  [cli/cmd_sample.c]="test_cli_ux.sh"
  [io/progress.c]="test_progress"
  [engine/evaluate.c]="test_evaluate"
  [io/output.c]="test_output"
  [io/safetensors.c]="test_model"
  [engine/model.c]="test_model"
  [io/dataset.c]="test_dataset"
  [kernels/threads.c]="test_threads"
  [kernels/adapt.c]="test_threads"
  [kernels/plan.c]="test_plan test_transformer"
  [io/image.c]="test_image"
  [io/modelpath.c]="test_cli_models.sh"
  [engine/shard.c]="test_shard"
)

W=$(mktemp -d "${TMPDIR:-/tmp}/lingen-mutate.XXXXXX")
trap 'rm -rf "$W"' EXIT
# the working tree as it is (tracked and untracked files, not the ignored build outputs)
(cd "$ROOT" && git ls-files -co --exclude-standard -z | xargs -0 cp --parents -t "$W") || { echo "mutate.sh: cannot copy the tree" >&2; exit 2; }
cd "$W" || exit 2

# the mutations asked for, each checked: its file has tests, its pattern changes exactly one line
selected=() stale=0 all_tests=""
while IFS='|' read -r file from to what; do
  [[ -z $file ]] && continue
  if [[ $# -gt 0 ]]; then
    match=0
    for w in "$@"; do [[ $what == *"$w"* ]] && match=1; done
    [[ $match == 1 ]] || continue
  fi
  if [[ ! -f src/$file ]]; then
    echo "mutate.sh: '$what': src/$file does not exist" >&2; stale=1; continue
  fi
  if [[ -z ${TESTS[$file]:-} ]]; then
    echo "mutate.sh: '$what': no tests listed for $file in TESTS" >&2; stale=1; continue
  fi
  changed=$(sed "s|$from|$to|" "src/$file" | diff "src/$file" - | grep -c '^<')
  if [[ $changed == 0 ]]; then
    echo "mutate.sh: '$what': no line of src/$file matches its pattern (the code moved or was rewritten): re-target it" >&2
    stale=1; continue
  elif [[ $changed != 1 ]]; then
    echo "mutate.sh: '$what': its pattern changes $changed lines of src/$file, not 1: make it match one" >&2
    stale=1; continue
  fi
  selected+=("$file|$from|$to|$what")
  all_tests="$all_tests ${TESTS[$file]}"
done <<< "$MUTATIONS"
[[ $stale == 0 ]] || exit 2
[[ ${#selected[@]} -gt 0 ]] || { echo "mutate.sh: no mutation matches: $*" >&2; exit 2; }

# targets NAMES...: what make must build for these tests
targets() {
  local t out=""
  for t in "$@"; do
    if [[ $t == *.sh ]]; then out="$out lingen"; else out="$out build/$t"; fi
  done
  echo "$out" | tr ' ' '\n' | sort -u | tr '\n' ' '
}

# run_one NAME: the test once, with its output in run.log
run_one() {
  if [[ $1 == *.sh ]]; then timeout 600 bash "tests/$1" > run.log 2>&1
  else timeout 600 "./build/$1" > run.log 2>&1; fi
}

# run_tests NAMES...: build them, then run each until one fails twice in a row; prints that one
# (with its first failure line), or "build failed" (status 2)
run_tests() {
  # shellcheck disable=SC2046
  make -s -j2 $(targets "$@") > build.log 2>&1 || { echo "build failed"; return 2; }
  local t
  for t in "$@"; do
    run_one "$t" || run_one "$t" || {
      echo "$t: $(grep -m1 -E '^FAIL|\[  (ERROR|FAILED)  \]|^ERROR' run.log || tail -1 run.log)"
      return 1
    }
  done
  return 0
}

start=$SECONDS
# shellcheck disable=SC2086
uniq_tests=$(echo $all_tests | tr ' ' '\n' | awk '!seen[$0]++' | tr '\n' ' ')
echo "unchanged tree: building and running $uniq_tests"
# shellcheck disable=SC2086
if ! first=$(run_tests $uniq_tests); then
  echo "mutate.sh: the unchanged tree fails ($first); fix that first" >&2
  tail -20 build.log run.log >&2
  exit 2
fi

killed=0 survived=() broken=()
for m in "${selected[@]}"; do
  IFS='|' read -r file from to what <<< "$m"
  cp "src/$file" "$W/orig"
  sed -i "s|$from|$to|" "src/$file"
  # shellcheck disable=SC2086
  first=$(run_tests ${TESTS[$file]})
  case $? in
    0) echo "SURVIVED      $what"; survived+=("$what") ;;
    1) echo "killed        $what: $first"; killed=$((killed + 1)) ;;
    *) echo "DID NOT BUILD $what ($file)"; broken+=("$what"); tail -5 build.log ;;
  esac
  cp "$W/orig" "src/$file"
done

for s in "${survived[@]}"; do echo "  survived: $s"; done
for b in "${broken[@]}"; do echo "mutate.sh: '$b' does not build: fix its replacement" >&2; done
echo "${#selected[@]} mutations in $((SECONDS - start)) s"
echo "$killed killed, ${#survived[@]} survived"
[[ ${#broken[@]} -eq 0 ]] || exit 2
[[ ${#survived[@]} -eq 0 ]]
