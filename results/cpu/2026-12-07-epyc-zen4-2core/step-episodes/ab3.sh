#!/bin/bash
# alternate builds (args: R build1 build2 ...), precisions PRECS; CIFAR stem by default
R=$1; shift
for r in $(seq 1 $R); do
  link=$(/work/main/build-dev/cpu_link | grep -o "one way [0-9]* ns")
  for p in ${PRECS:-fp32 amp}; do
   for B in "$@"; do
    if [ "${MODEL:-resnet50-cifar}" = mlp ]; then args="--model mlp --dataset mnist --epochs 1 --batch-size 64"; else
    args="--model ${MODEL:-resnet50-cifar} --dataset cifar10 --batch-size 32 --max-steps ${STEPS:-6} --epochs 1 --train-subset $((32*${STEPS:-6})) --test-subset 64 --lr 0.01 --momentum 0.9 --weight-decay 5e-4 --no-augment --timing-skip-steps 1"
    [ $p = amp ] && args="$args --init-scale 1024"; fi
    $B/ampbench train $args --threads 2 --quiet --precision $p --out /tmp/ab3.json >/dev/null
    s=$(python3 -c "import json,sys;print(round(json.load(open(sys.argv[1]))['samples_per_s'],2))" /tmp/ab3.json)
    echo "r$r $link $p $B $s"
   done
  done
done
