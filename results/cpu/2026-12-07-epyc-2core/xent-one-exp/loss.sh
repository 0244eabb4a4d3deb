#!/bin/bash
# The MLP's softmax cross-entropy in the run, two builds alternating: --profile-ops over 800 steps
# (batch 64), R rounds of fp32 and AMP, the builds' order alternating between rounds. Prints the
# 'loss (softmax cross-entropy)' line (calls, seconds, share of op time) and the run's wall time a step.
# usage: BIN=dir-with-ab_before-and-ab_after R=6 bash loss.sh
out=$(mktemp -d)
for r in $(seq 1 ${R:-6}); do for p in fp32 amp; do
 if [ $((r % 2)) = 1 ]; then order="ab_before ab_after"; else order="ab_after ab_before"; fi
 for b in $order; do
  "${BIN:?}/$b" train --model mlp --dataset mnist --batch-size 64 --max-steps 801 --epochs 1 --test-subset 512 \
   --precision $p --threads 2 --quiet --profile-ops --timing-skip-steps 1 --out "$out/p.json" > "$out/t.txt" 2>&1
  echo "$b $p round $r: $(grep -E 'loss \(' "$out/t.txt" | sed 's/  */ /g') | wall $(python3 -c "import json;d=json.load(open('$out/p.json'));e=d['epochs'][0];print('%.1f us a step'%(e['time_s']/e['steps']*1e6))")"
 done
done; done
rm -rf "$out"
