#!/bin/bash
# A/B: 2492e28 (ab_final) against b94d488 (ab_b94), both clean builds, alternating, 4 rounds:
# ResNet-50 (7x7 stem) 20 timed steps and with the CIFAR stem 8 (AMP from scale 1024), MiniLM 12 timed
# steps, the MLP's epoch
# BIN: a folder holding the two builds as ab_final and ab_b94; OUT: where the records go
out=${OUT:-abf}; mkdir -p "$out"
minilm=${DATA:-../shared/data}/all-MiniLM-L6-v2
# samples/s, then the steps the loss scaler skipped (the epochs' skipped_steps)
get() { python3 -c 'import json,sys;d=json.load(open(sys.argv[1]));print(d["samples_per_s"], sum(e["skipped_steps"] for e in d["epochs"]))' "$1"; }
for r in 1 2 3 4; do for p in amp fp32; do for v in ab_final ab_b94; do
 b=${BIN:?a folder with the builds ab_final and ab_b94}/$v
 $b train --model resnet50 --dataset cifar10 --batch-size 32 --max-steps 21 --epochs 1 --train-subset 672 --test-subset 64 --lr 0.01 --momentum 0.9 --weight-decay 5e-4 --no-augment --threads 2 --timing-skip-steps 1 --quiet --init-scale 1024 --precision $p --out $out/r50_${p}_${v}_$r.json >/dev/null
 echo "resnet50-7x7-20steps $p $v $r $(get $out/r50_${p}_${v}_$r.json)"
 $b train --model bert --init-from $minilm --dataset sst2 --max-seq-len 64 --batch-size 32 --max-steps 13 --epochs 1 --train-subset 416 --test-subset 32 --timing-skip-steps 1 --lr 2e-5 --weight-decay 0.01 --lr-schedule linear --clip-grad-norm 1 --threads 2 --quiet --precision $p --out $out/minilm_${p}_${v}_$r.json >/dev/null
 echo "minilm-12steps $p $v $r $(get $out/minilm_${p}_${v}_$r.json)"
 $b train --model resnet50-cifar --dataset cifar10 --batch-size 32 --max-steps 9 --epochs 1 --train-subset 288 --test-subset 64 --lr 0.01 --momentum 0.9 --weight-decay 5e-4 --no-augment --threads 2 --timing-skip-steps 1 --quiet --init-scale 1024 --precision $p --out $out/r50c_${p}_${v}_$r.json >/dev/null
 echo "resnet50-cifar-8steps $p $v $r $(get $out/r50c_${p}_${v}_$r.json)"
 $b train --model mlp --dataset mnist --epochs 1 --threads 2 --quiet --precision $p --out $out/mlp_${p}_${v}_$r.json >/dev/null
 echo "mlp-epoch $p $v $r $(get $out/mlp_${p}_${v}_$r.json)"
done; done; done
