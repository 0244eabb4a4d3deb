#!/bin/bash
# A/B: 8cf8870 (ab_8cf, before) against ef82370 (ab_ef8: ab_exp_nonpos in GELU and the softmax, the
# image gather's prefetch), both clean builds, alternating, 4 rounds: MiniLM 12 timed steps (clipping,
# as in bench/cpu_bert.sh), BERT-base 4 timed steps, the MLP's epoch; fp32 and AMP
# BIN: a folder holding the two builds as ab_8cf and ab_ef8; OUT: where the records go
out=${OUT:-abe}; mkdir -p "$out"
minilm=${DATA:-../shared/data}/all-MiniLM-L6-v2
# samples/s, then the steps the loss scaler skipped (the epochs' skipped_steps), then the last loss
get() { python3 -c 'import json,sys;d=json.load(open(sys.argv[1]));print(d["samples_per_s"], sum(e["skipped_steps"] for e in d["epochs"]), d["loss_curve"][-1]["loss"])' "$1"; }
for r in 1 2 3 4; do for p in amp fp32; do for v in ab_8cf ab_ef8; do
 b=${BIN:?a folder with the builds ab_8cf and ab_ef8}/$v
 $b train --model bert --init-from $minilm --dataset sst2 --max-seq-len 64 --batch-size 32 --max-steps 13 --epochs 1 --train-subset 416 --test-subset 32 --timing-skip-steps 1 --lr 2e-5 --weight-decay 0.01 --lr-schedule linear --clip-grad-norm 1 --threads 2 --quiet --precision $p --out $out/minilm_${p}_${v}_$r.json >/dev/null
 echo "minilm-12steps $p $v $r $(get $out/minilm_${p}_${v}_$r.json)"
 $b train --model bert-base --dataset sst2 --max-seq-len 128 --batch-size 8 --max-steps 5 --epochs 1 --train-subset 40 --test-subset 8 --timing-skip-steps 1 --lr 2e-5 --weight-decay 0.01 --clip-grad-norm 1 --threads 2 --quiet --precision $p --out $out/bertbase_${p}_${v}_$r.json >/dev/null
 echo "bert-base-4steps $p $v $r $(get $out/bertbase_${p}_${v}_$r.json)"
 $b train --model mlp --dataset mnist --epochs 1 --threads 2 --quiet --precision $p --out $out/mlp_${p}_${v}_$r.json >/dev/null
 echo "mlp-epoch $p $v $r $(get $out/mlp_${p}_${v}_$r.json)"
done; done; done
