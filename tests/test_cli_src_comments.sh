#!/usr/bin/env bash
# Comments in src/ say what the code does and why; measured figures live in docs/speed.md, the
# model card (models/README.md) or commit messages. This check fails, naming file:line, where a
# comment of src/*.c, src/*.h, src/cuda/* or src/lib/* names a machine (Xeon, EPYC, Zen 4, H100,
# ...) or puts a timing or throughput unit after a number (450 us, 0.1 s, 38 GB/s, 480 GFLOP/s, 8.3
# images/s), a measured ratio (1.16x, 2x faster, 6% slower). Only comments count: string
# literals (--help text, messages) and code are left out, and so is text in double quotes inside
# a comment (an output format such as "45s"). Run from the repository root.
set -u
. tests/cli_common.sh

# comments FILE...: "file:line<TAB>text" for each line with comment text, the text of the
# comments on that line only (C and CUDA: /* */ across lines, //; strings and chars skipped)
comments() {
  LC_ALL=C awk '
    FNR == 1 { block = 0; carry = "" }
    {
      line = $0; n = length(line); text = ""; str = ""
      for (i = 1; i <= n; i++) {
        c = substr(line, i, 1); two = substr(line, i, 2)
        if (block) {
          if (two == "*/") { block = 0; i++ } else text = text c
        } else if (str != "") {
          if (c == "\\") i++
          else if (c == str) str = ""
        } else if (two == "/*") { block = 1; i++; text = text " " }
        else if (two == "//") { text = text " " substr(line, i + 2); break }
        else if (c == "\"" || c == "\047") str = c
      }
      if (text !~ /[^ \t*]/) { carry = ""; next }
      if (carry != "") { sub(/^[ \t]*\*?[ \t]*/, "", text); text = carry text }
      printf "%s:%d\t%s\n", FILENAME, FNR, text
      # a number that ends the line goes with the next comment line too: "455\n * GFLOP/s"
      carry = match(text, /[0-9][0-9.,]*[ \t]*$/) ? substr(text, RSTART) " " : ""
    }' "$@"
}

# offending FILE...: the comment lines that name a machine (in any case) or a measured speed (units
# case-sensitive: MS, S are not units), as "file:line<TAB>text"
MACHINES='\b(xeon|epyc|opteron|ryzen|threadripper|zen ?[0-9]?|(sapphire|emerald|granite) rapids|(ice|cascade|cooper) lake|skylake|haswell|broadwell|genoa|milan|graviton|neoverse|apple m[0-9]|[abhlv]100|h200|b200|gh200|l40s?|rtx ?[0-9]+|geforce|quadro|titan)\b'
UNIT='(ms|us|µs|ns|s|secs?|seconds?|minutes?|hours?|[KMGT]i?B/s|[GT]FLOP/?s|GFLOPS|images?/s|tokens?/s|steps?/s|it/s)'
SPEED="(^|[^0-9A-Za-z_.])[0-9]+(\.[0-9]+)? ?$UNIT\b|\b[0-9]+\.[0-9]+x\b|\b[0-9]+(\.[0-9]+)?x (faster|slower|as fast|the speed)\b|\b[0-9]+(\.[0-9]+)? ?% (faster|slower|quicker)\b"
offending() {
  comments "$@" | LC_ALL=C awk -F '\t' -v OFS='\t' '{ gsub(/"[^"]*"/, "", $2); print }' > "$T/comments"
  cut -f2- "$T/comments" > "$T/texts"
  { LC_ALL=C grep -n -i -E -- "$MACHINES" "$T/texts"; LC_ALL=C grep -n -E -- "$SPEED" "$T/texts"; } |
    cut -d: -f1 | sort -un | LC_ALL=C awk 'NR == FNR { want[$1] = 1; next } FNR in want' - "$T/comments"
}

# ---- ALLOWLIST: an offending comment kept on purpose, as "file<TAB>a piece of that line's text"
# (none). An entry that matches no offending line fails the check, so the list cannot outlive its
# lines.
ALLOW=$(cat << 'EOF'
EOF
)

# check_tree FILE...: one ok/FAIL line per offending comment outside the allowlist, one per stale
# allowlist entry; returns the number of failures it added
check_tree() {
  local before=$fails where text file piece used=""
  while IFS=$'\t' read -r where text; do
    local allowed=0
    while IFS=$'\t' read -r file piece; do
      [ -n "$file" ] || continue
      if [ "${where%%:*}" = "$file" ] && [[ "$text" == *"$piece"* ]]; then allowed=1; used+="$file	$piece"$'\n'; fi
    done <<< "$ALLOW"
    [ $allowed = 1 ] || bad "$where: a machine or a measured speed in a comment:$text"
  done < <(offending "$@")
  while IFS=$'\t' read -r file piece; do
    [ -n "$file" ] || continue
    grep -qF -- "$file	$piece" <<< "$used" ||
      bad "allowlist entry no longer offends, remove it from $0: $file: $piece"
  done <<< "$ALLOW"
  return $((fails - before))
}

# ---- the matcher itself, on a file of known comments (independent of src/)
cat > "$T/sample.c" << 'EOF'
/* A: ran at 8.3 images/s on the box */
int a; /* B: 452 us a step */
/* C: a block comment
 * across lines, on 2 EPYC threads
 */
// D: 1.16x, 3 rounds
x = 1; // E: 38 GB/s from memory
/* F: 480 against 455 GFLOP/s */
/* G: 0.01-0.02 s of a run */
/* H: the Xeon VM */
/* I: twice the bytes, 4x longer, 16 threads, 10% of n positions, 2^31, "45s" as printed */
printf("Xeon at 38 GB/s, 0.1 s"); /* J: the string before is code */
c = '"'; /* K: a quote char, then this comment: still text */ y = "/* not a comment 5 ms */";
/* L: on the H100, a step */
/* M: holds the comment's end */ z = 2; /* N: 7% slower */
/* O: a figure split over two lines, 480 against 455
 * GFLOP/s for 14 */
EOF
got=$(offending "$T/sample.c" | cut -f1 | sed 's/.*://' | tr '\n' ' ')
want="1 2 4 6 7 8 9 10 14 15 17 "
[ "$got" = "$want" ] && ok "the matcher flags exactly the sample's machines and speeds (lines $want)" ||
  bad "the matcher on the sample: lines '$got', expected '$want'"
got=$(comments "$T/sample.c" | cut -f1 | sed 's/.*://' | tr '\n' ' ')
want="1 2 3 4 6 7 8 9 10 11 12 13 14 15 16 17 "
[ "$got" = "$want" ] && ok "the comment extractor finds the sample's comment lines ($want)" ||
  bad "the comment extractor: lines '$got', expected '$want'"
grep -qE 'Xeon at|5 ms' <(comments "$T/sample.c") && bad "the extractor took a string for a comment" ||
  ok "string literals are not comments"

# a tree with one new offending comment fails, naming it; the allowlist alone does not cover it
cp src/threads.h "$T/threads.h"
printf '/* a loop of 2.9 us on 16 cores */\n' >> "$T/threads.h"
saved=$fails
check_tree "$T/threads.h" > "$T/out"; rc=$?
fails=$saved
[ $rc -gt 0 ] && grep -q "threads.h:$(wc -l < "$T/threads.h"):" "$T/out" &&
  ok "an added timing comment fails the check, named by file:line" ||
  { bad "an added timing comment was not caught (rc $rc)"; sed 's/^/     /' "$T/out" | head -5; }

# ---- the tree
shopt -s nullglob
files=(src/*.c src/*.h src/cuda/* src/lib/*)
[ ${#files[@]} -gt 50 ] && ok "${#files[@]} source files to check" || bad "only ${#files[@]} files under src/"
if check_tree "${files[@]}"; then ok "no src/ comment names a machine or a measured speed"; fi
finish
