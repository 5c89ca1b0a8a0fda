#!/usr/bin/env bash
# The options that commands share read the same in every command: one help line each (letter,
# metavar and text) where the text is shared, the same letter and metavar where a command says
# something of its own, and the same refusal of a value out of range. Run from the repository
# root.
set -u
. tests/cli_common.sh
COMMANDS="sample eval complete compare info"

# row CMD OPT: CMD's help line of --OPT ("" if it has none)
row() { $L $1 --help | grep -E -- "^  (-., )?    --$2( |$)|^  -., --$2( |$)" | head -1; }

# same OPT TEXT_TOO: every command's line of --OPT alike: whole (TEXT_TOO=1) or its left column
same() {
  local opt=$1 whole=$2 first="" who="" n=0 c line
  for c in $COMMANDS; do
    line=$(row $c $opt)
    [ -n "$line" ] || continue
    [ "$whole" = 1 ] || line=$(cut -c1-29 <<< "$line")
    n=$((n + 1))
    if [ -z "$first" ]; then first=$line who=$c
    elif [ "$line" != "$first" ]; then bad "--$opt: $c's help line differs from $who's:"; echo "     $first"; echo "     $line"; return; fi
  done
  [ $n -ge 2 ] && ok "--$opt reads the same in the $n commands that take it" || bad "--$opt: in $n commands only"
}
for o in threads device precision data force ceiling temperature; do same $o 1; done
# --model and --json: one text everywhere but compare's, which names its linear model and its
# latencies
COMMANDS="sample eval complete info" same model 1
COMMANDS="sample eval info" same json 1
# the rest: each command's own text (its defaults), the same letter and metavar
for o in model json batch seed output n limit; do same $o 0; done

# a value out of range: the same refusal, naming the command
for c in sample eval complete compare; do
  expect 2 "$c --threads 1025: a usage error" $L $c --threads 1025
  contains "$c --threads 1025: the range" "^lingen $c[a-z -]*: --threads must be between 0 and 1024, not '1025'$"
done
finish
