#!/bin/bash
# MiniLM's attention products in the run, two builds alternating: `--profile-ops` on 6 timed steps
# (sequence 64, batch 32, as bench/cpu_profile.sh), R rounds of AMP and fp32, each build's run
# followed at once by the other's. Prints: build precision round, then the run's GEMM line and its
# three batched shapes (GFLOP/s in the run and alone).
# usage: BIN=dir-with-ab_before-and-ab_after DATA=../shared/data R=4 bash profile.sh
minilm=${DATA:-../shared/data}/all-MiniLM-L6-v2
out=$(mktemp -d)
for r in $(seq 1 ${R:-4}); do for p in amp fp32; do
 if [ $((r % 2)) = 1 ]; then order="ab_before ab_after"; else order="ab_after ab_before"; fi
 for b in $order; do
  echo "== $b $p round $r"
  "${BIN:?}/$b" train --model bert --init-from "$minilm" --dataset sst2 --max-seq-len 64 --batch-size 32 --max-steps 7 \
   --epochs 1 --train-subset 224 --test-subset 32 --precision $p --threads 2 --quiet --profile-ops --timing-skip-steps 1 \
   --out "$out/p.json" 2>&1 | grep -E "batched|GEMM \(" | sed 's/  */ /g'
 done
done; done
rm -rf "$out"
