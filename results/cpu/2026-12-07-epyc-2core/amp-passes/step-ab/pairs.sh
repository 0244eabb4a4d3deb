#!/bin/bash
# AMP / FP32 of one build: an AMP run and the same run in fp32 back to back, N pairs (the
# order alternating), each pair's ratio printed. The runs are ab.sh's.
# usage: BIN=<ampbench> OUT=<dir> DATA=../shared/data N=8 bash pairs.sh workload... > pairs_raw.txt
out=${OUT:?}; mkdir -p "$out"; minilm=${DATA:-../shared/data}/all-MiniLM-L6-v2
run() { # workload precision pair -> samples/s
 local s=""; [ $2 = amp ] && s="--init-scale 1024"; local o=$out/$1_$2_$3.json
 case $1 in
 minilm-12steps) $BIN train --model bert --init-from $minilm --dataset sst2 --max-seq-len 64 --batch-size 32 --max-steps 13 --epochs 1 --train-subset 416 --test-subset 32 --timing-skip-steps 1 --lr 2e-5 --weight-decay 0.01 --lr-schedule linear --clip-grad-norm 1 --threads 2 --quiet --precision $2 --out $o >/dev/null ;;
 mlp-epoch) $BIN train --model mlp --dataset mnist --epochs 1 --threads 2 --quiet --precision $2 --out $o >/dev/null ;;
 resnet50-20steps) $BIN train --model resnet50 --dataset cifar10 --batch-size 32 --max-steps 21 --epochs 1 --train-subset 672 --test-subset 32 --no-augment --timing-skip-steps 1 --threads 2 --quiet --precision $2 $s --out $o >/dev/null ;;
 resnet50-cifar-8steps) $BIN train --model resnet50-cifar --dataset cifar10 --batch-size 32 --max-steps 9 --epochs 1 --train-subset 288 --test-subset 32 --no-augment --timing-skip-steps 1 --threads 2 --quiet --precision $2 $s --out $o >/dev/null ;;
 esac
 python3 -c 'import json,sys;print(json.load(open(sys.argv[1]))["samples_per_s"])' $o
}
for w in "$@"; do for i in $(seq 1 ${N:-8}); do
 if [ $((i % 2)) = 1 ]; then a=$(run $w amp $i); f=$(run $w fp32 $i); else f=$(run $w fp32 $i); a=$(run $w amp $i); fi
 python3 -c "import sys;a,f=float(sys.argv[2]),float(sys.argv[3]);print(sys.argv[1],sys.argv[4],'amp',round(a,2),'fp32',round(f,2),'amp/fp32_time',round(f/a,3))" $w $a $f $i
done; done
