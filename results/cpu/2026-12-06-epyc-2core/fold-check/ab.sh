#!/bin/bash
# A/B, each run of one build followed at once by the same run of the other (tighter than
# ../column-tiles/ab.sh, which ran all five workloads of one build in a row: this machine's speed
# drifts over minutes). BIN/ab_before and BIN/ab_after, clean builds; R rounds; MiniLM 12 timed
# steps (clipping, as bench/cpu_bert.sh), BERT-base 4, the MLP's epoch, ResNet-50 (7x7 stem) 20 and
# with the CIFAR stem 8 (AMP from a loss scale of 1024, as bench/cpu_resnet.sh); AMP and fp32.
# Prints: workload precision build round samples/s skipped-steps last-loss sha1-of-the-loss-curve
out=${OUT:-abe}; mkdir -p "$out"
minilm=${DATA:-../shared/data}/all-MiniLM-L6-v2
get() { python3 -c 'import json,sys,hashlib;d=json.load(open(sys.argv[1]));c=[(e["step"],e["loss"]) for e in d["loss_curve"]];print(d["samples_per_s"], sum(e["skipped_steps"] for e in d["epochs"]), d["loss_curve"][-1]["loss"], hashlib.sha1(repr(c).encode()).hexdigest()[:12])' "$1"; }
run() { # workload precision build round
 local b=${BIN:?a folder with the builds ab_before and ab_after}/$3 s=""; [ $2 = amp ] && s="--init-scale 1024"
 local o=$out/$1_$2_$3_$4.json
 case $1 in
 minilm-12steps) $b train --model bert --init-from $minilm --dataset sst2 --max-seq-len 64 --batch-size 32 --max-steps 13 --epochs 1 --train-subset 416 --test-subset 32 --timing-skip-steps 1 --lr 2e-5 --weight-decay 0.01 --lr-schedule linear --clip-grad-norm 1 --threads 2 --quiet --precision $2 --out $o >/dev/null ;;
 bert-base-4steps) $b train --model bert-base --dataset sst2 --max-seq-len 128 --batch-size 8 --max-steps 5 --epochs 1 --train-subset 40 --test-subset 8 --timing-skip-steps 1 --lr 2e-5 --weight-decay 0.01 --clip-grad-norm 1 --threads 2 --quiet --precision $2 --out $o >/dev/null ;;
 mlp-epoch) $b train --model mlp --dataset mnist --epochs 1 --threads 2 --quiet --precision $2 --out $o >/dev/null ;;
 resnet50-20steps) $b train --model resnet50 --dataset cifar10 --batch-size 32 --max-steps 21 --epochs 1 --train-subset 672 --test-subset 32 --no-augment --timing-skip-steps 1 --threads 2 --quiet --precision $2 $s --out $o >/dev/null ;;
 resnet50-cifar-8steps) $b train --model resnet50-cifar --dataset cifar10 --batch-size 32 --max-steps 9 --epochs 1 --train-subset 288 --test-subset 32 --no-augment --timing-skip-steps 1 --threads 2 --quiet --precision $2 $s --out $o >/dev/null ;;
 esac
 echo "$1 $2 $3 $4 $(get $o)"
}
for r in $(seq 1 ${R:-3}); do for w in ${WORKLOADS:-mlp-epoch resnet50-20steps resnet50-cifar-8steps minilm-12steps bert-base-4steps}; do for p in amp fp32; do
 # the builds' order alternates between rounds
 if [ $((r % 2)) = 1 ]; then run $w $p ab_before $r; run $w $p ab_after $r; else run $w $p ab_after $r; run $w $p ab_before $r; fi
done; done; done
