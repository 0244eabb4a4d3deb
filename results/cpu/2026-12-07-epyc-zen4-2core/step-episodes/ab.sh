#!/bin/bash
# A/B: glibc.malloc.hugetlb=1 vs none, MLP epochs
B=/work/main/build-dev
model=${1:-mlp}; R=${2:-5}
for r in $(seq 1 $R); do
  link=$($B/cpu_link | grep -o "one way [0-9]* ns")
  for v in 0 1; do
    for p in ${PRECS:-fp32 amp}; do
      if [ $model = mlp ]; then args="--model mlp --dataset mnist --epochs 1 --batch-size 64"; else args="--model $model --dataset cifar10 --batch-size 32 --max-steps 6 --epochs 1 --train-subset 192 --test-subset 64 --lr 0.01 --momentum 0.9 --weight-decay 5e-4 --no-augment --timing-skip-steps 1"; [ $p = amp ] && args="$args --init-scale 1024"; fi
      if [ $v = 1 ]; then export GLIBC_TUNABLES=glibc.malloc.hugetlb=1; else unset GLIBC_TUNABLES; fi
      $B/ampbench train $args --threads 2 --quiet --precision $p --out /tmp/thp_${v}_$p.json >/dev/null
      s=$(python3 -c "import json,sys;print(round(json.load(open(sys.argv[1]))[\"samples_per_s\"],2))" /tmp/thp_${v}_$p.json)
      echo "r$r link=$link thp=$v $p $s"
    done
  done
done
