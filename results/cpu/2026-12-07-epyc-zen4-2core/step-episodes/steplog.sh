#!/bin/bash
# interleaved fp32/amp runs of the CIFAR stem with per-step times (throwaway build /work/exp with AB_STEPLOG)
for r in $(seq 1 ${1:-4}); do
  for p in fp32 amp; do
    extra=""; [ $p = amp ] && extra="--init-scale 1024"
    l=$(/work/main/build-dev/cpu_link | grep -o "one way [0-9]* ns")
    t=$(AB_STEPLOG=1 /work/exp/build/ampbench train --model ${MODEL:-resnet50-cifar} --dataset cifar10 --batch-size 32 --max-steps 24 --epochs 1 --train-subset 768 --test-subset 64 --no-augment --threads 2 --precision $p $extra --quiet --out /tmp/sl.json 2>&1 >/dev/null | awk '/steplog/{if(p)printf "%.0f ", ($3-p)*1000; p=$3} END{print ""}')
    echo "$(date +%T) r$r $p [$l] $t"
  done
done
