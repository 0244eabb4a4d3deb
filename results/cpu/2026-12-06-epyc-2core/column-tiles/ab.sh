#!/bin/bash
# A/B: dc5ccb0 (BIN/ab_before) against f7e5028 (BIN/ab_after: B converted a column tile at a time in the parts),
# both clean builds, alternating, R rounds (4 here); MiniLM 12 timed steps (clipping, as in
# bench/cpu_bert.sh), BERT-base 4 timed steps, the MLP's epoch, ResNet-50 (7x7 stem) 20 steps and
# with the CIFAR stem 8 steps (AMP from a loss scale of 1024, as bench/cpu_resnet.sh); fp32 and AMP.
# Prints: workload precision build round samples/s skipped-steps last-loss sha1-of-the-loss-curve
out=${OUT:-abe}; mkdir -p "$out"
minilm=${DATA:-../shared/data}/all-MiniLM-L6-v2
get() { python3 -c 'import json,sys,hashlib;d=json.load(open(sys.argv[1]));c=[(e["step"],e["loss"]) for e in d["loss_curve"]];print(d["samples_per_s"], sum(e["skipped_steps"] for e in d["epochs"]), d["loss_curve"][-1]["loss"], hashlib.sha1(repr(c).encode()).hexdigest()[:12])' "$1"; }
for r in $(seq 1 ${R:-3}); do for p in amp fp32; do for v in ab_before ab_after; do
 b=${BIN:?a folder with the builds ab_before and ab_after}/$v
 s=""; [ $p = amp ] && s="--init-scale 1024"
 $b train --model bert --init-from $minilm --dataset sst2 --max-seq-len 64 --batch-size 32 --max-steps 13 --epochs 1 --train-subset 416 --test-subset 32 --timing-skip-steps 1 --lr 2e-5 --weight-decay 0.01 --lr-schedule linear --clip-grad-norm 1 --threads 2 --quiet --precision $p --out $out/minilm_${p}_${v}_$r.json >/dev/null
 echo "minilm-12steps $p $v $r $(get $out/minilm_${p}_${v}_$r.json)"
 $b train --model bert-base --dataset sst2 --max-seq-len 128 --batch-size 8 --max-steps 5 --epochs 1 --train-subset 40 --test-subset 8 --timing-skip-steps 1 --lr 2e-5 --weight-decay 0.01 --clip-grad-norm 1 --threads 2 --quiet --precision $p --out $out/bertbase_${p}_${v}_$r.json >/dev/null
 echo "bert-base-4steps $p $v $r $(get $out/bertbase_${p}_${v}_$r.json)"
 $b train --model mlp --dataset mnist --epochs 1 --threads 2 --quiet --precision $p --out $out/mlp_${p}_${v}_$r.json >/dev/null
 echo "mlp-epoch $p $v $r $(get $out/mlp_${p}_${v}_$r.json)"
 $b train --model resnet50 --dataset cifar10 --batch-size 32 --max-steps 21 --epochs 1 --train-subset 672 --test-subset 32 --no-augment --timing-skip-steps 1 --threads 2 --quiet --precision $p $s --out $out/r50_${p}_${v}_$r.json >/dev/null
 echo "resnet50-20steps $p $v $r $(get $out/r50_${p}_${v}_$r.json)"
 $b train --model resnet50-cifar --dataset cifar10 --batch-size 32 --max-steps 9 --epochs 1 --train-subset 288 --test-subset 32 --no-augment --timing-skip-steps 1 --threads 2 --quiet --precision $p $s --out $out/r50c_${p}_${v}_$r.json >/dev/null
 echo "resnet50-cifar-8steps $p $v $r $(get $out/r50c_${p}_${v}_$r.json)"
done; done; done
