#!/bin/bash
# The three benches of this folder, each linked against two builds' libraries (BEFORE and AFTER:
# build folders holding libabcpu.a, libabcore.a, libabplatform.a), their runs alternating.
# usage: BEFORE=<build> AFTER=<build> bash run.sh   (from the repository root; ~3 minutes)
set -e
here=$(cd "$(dirname "$0")" && pwd); t=$(mktemp -d)
B() { gcc -O2 -Icore -Ikernels/cpu -Iplatform "$here/$1" "$2/libabcpu.a" "$2/libabcore.a" "$2/libabplatform.a" \
      -ldnnl -lopenblas -lgomp -lm -lpthread -o "$3"; }
for x in opt_half add_bench bn_bench; do B $x.c "${BEFORE:?}" $t/${x}_before; B $x.c "${AFTER:?}" $t/${x}_after; done
alt() { # bench rounds reps
  for r in $(seq 1 $2); do if [ $((r % 2)) = 1 ]; then o="before after"; else o="after before"; fi
    for b in $o; do $t/$1_$b $3 | sed "s/^/${1%%_*}_$b $r /"; done; done; }
alt opt_half 8 11 > "$here/opt_rounds.txt"
alt add_bench 6 21 > "$here/add_rounds.txt"
alt bn_bench 6 21 > "$here/bn_rounds.txt"
python3 "$here/summ.py" > "$here/summary.txt"
rm -rf $t
