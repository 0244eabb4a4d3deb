#!/bin/bash
# A/B of two builds (BASE: without the huge pages, NEW: with), builds alternating inside every
# workload x precision x round, which goes first alternating by round; prints samples/s of each run
BASE=${BASE:-/work/base/build} NEW=${NEW:-/work/main/build-dev}
minilm=/work/shared/data/all-MiniLM-L6-v2
bert_recipe="--lr 2e-5 --weight-decay 0.01 --lr-schedule linear --clip-grad-norm 1"
for r in $(seq 1 ${1:-6}); do
  link=$(/work/main/build-dev/cpu_link | grep -o "one way [0-9]* ns")
  for w in ${WORKLOADS:-mlp resnet50 resnet50-cifar minilm bert-base}; do
    for p in fp32 amp; do
      case $w in
        mlp) args="--model mlp --dataset mnist --epochs 1 --batch-size 64" ;;
        resnet50|resnet50-cifar) args="--model $w --dataset cifar10 --batch-size 32 --max-steps 6 --epochs 1 --train-subset 192 --test-subset 64 --lr 0.01 --momentum 0.9 --weight-decay 5e-4 --no-augment --timing-skip-steps 1"
           [ $p = amp ] && args="$args --init-scale 1024" ;;
        minilm) args="--model bert --init-from $minilm --dataset sst2 --max-seq-len 64 --batch-size 32 --max-steps 6 --epochs 1 --train-subset 192 --test-subset 32 --timing-skip-steps 1 $bert_recipe" ;;
        bert-base) args="--model bert-base --dataset sst2 --max-seq-len 128 --batch-size 8 --max-steps 6 --epochs 1 --train-subset 48 --test-subset 32 --timing-skip-steps 1 $bert_recipe" ;;
      esac
      order="base new"; [ $((r % 2)) = 0 ] && order="new base"
      for tag in $order; do
        B=$BASE; [ $tag = new ] && B=$NEW
        rm -f /tmp/hp.json
        $B/ampbench train $args --threads 2 --quiet --precision $p --out /tmp/hp.json >/dev/null || { echo "r$r $w $p $tag FAIL"; continue; }
        s=$(python3 -c "import json,sys;print(round(json.load(open(sys.argv[1]))['samples_per_s'],2))" /tmp/hp.json)
        echo "r$r [$link] $w $p $tag $s"
      done
    done
  done
done
