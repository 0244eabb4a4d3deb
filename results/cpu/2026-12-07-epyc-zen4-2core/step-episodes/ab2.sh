#!/bin/bash
# alternate fp32 / amp CIFAR-stem runs; print samples/s; optional env per variant via VARS="A B" where each is env assignment or "-"
B=${B:-/work/main/build-dev}
R=${1:-6}
for r in $(seq 1 $R); do
  link=$($B/cpu_link | grep -o "one way [0-9]* ns")
  for p in ${PRECS:-fp32 amp}; do
   for v in ${VARS:--}; do
    args="--model ${MODEL:-resnet50-cifar} --dataset cifar10 --batch-size 32 --max-steps 6 --epochs 1 --train-subset 192 --test-subset 64 --lr 0.01 --momentum 0.9 --weight-decay 5e-4 --no-augment --timing-skip-steps 1"
    [ $p = amp ] && args="$args --init-scale 1024"
    if [ "$v" = - ]; then envs=(); else envs=($v); fi
    env "${envs[@]}" $B/ampbench train $args --threads 2 --quiet --precision $p --out /tmp/ab2.json >/dev/null
    s=$(python3 -c "import json,sys;print(round(json.load(open(sys.argv[1]))['samples_per_s'],2))" /tmp/ab2.json)
    echo "r$r $link $p $v $s"
   done
  done
done
