#!/bin/bash
# The MLP's AMP ops against their fp32 twins (../amp-passes/mlp_ops.c), its batch assembly
# (gather_bench.c) and the transposition of W2 (transpose_bench.c), each linked against two builds'
# libraries (BEFORE and AFTER: build folders holding libabcpu.a, libabcore.a, libabplatform.a), the
# builds' runs alternating, R rounds (default 6). Output: ops_rounds.txt, gather_rounds.txt,
# transpose_rounds.txt; summ.py reads them into summary.txt.
# usage: BEFORE=<build> AFTER=<build> bash run.sh   (from the repository root; ~4 minutes)
set -e
here=$(cd "$(dirname "$0")" && pwd); t=$(mktemp -d)
B() { gcc -O2 -Icore -Ikernels/cpu -Iplatform "$1" "$2/libabcpu.a" "$2/libabcore.a" "$2/libabplatform.a" \
      -ldnnl -lopenblas -lgomp -lm -lpthread -o "$3"; }
for b in before after; do
  if [ $b = before ]; then L=${BEFORE:?}; else L=${AFTER:?}; fi
  B "$here/../amp-passes/mlp_ops.c" "$L" $t/ops_$b
  B "$here/gather_bench.c" "$L" $t/gather_$b
  B "$here/transpose_bench.c" "$L" $t/transpose_$b
done
alt() { # bench args...
  local x=$1; shift
  for r in $(seq 1 ${R:-6}); do if [ $((r % 2)) = 1 ]; then o="before after"; else o="after before"; fi
    for b in $o; do $t/${x}_$b "$@" | sed "s/^/$b $r /"; done; done; }
alt ops 41 > "$here/ops_rounds.txt"
alt gather > "$here/gather_rounds.txt"
alt transpose > "$here/transpose_rounds.txt"
python3 "$here/summ.py" > "$here/summary.txt"
rm -rf $t
