#!/usr/bin/env bash
# BERT-base AMP on the GPU: GEMM stats, batch scaling, kernel time (ncu)
set -u
OUT=$1
B=$(mktemp -d); tar -xJf dist/ampbench-gpu.tar.xz -C "$B" || exit 1
R=$B/ampbench-gpu; AB=$R/bin/ampbench
glue=$R/data/glue vocab=$R/data/bert-base-uncased/vocab.txt
args() { echo --device cuda --model bert-base --dataset sst2 --data $glue/SST-2 --vocab $vocab --max-seq-len 128 --lr 2e-5 --weight-decay 0.01 --lr-schedule linear --clip-grad-norm 1 --epochs 1 --test-subset 64 --log-interval 1000 --timing-skip-steps 5; }
{
for p in fp32 amp; do for bs in 32 64; do
  echo "== $p batch $bs"
  AB_CUDA_STATS=1 timeout 60 $AB train $(args) --precision $p --batch-size $bs --max-steps 25 --train-subset $((bs*25)) --out $B/r_${p}_$bs.json 2>&1 | grep -E "cuda stats|done|rror"
  python3 -c "import json,sys; r=json.load(open(sys.argv[1])); print('samples/s', r['samples_per_s'])" $B/r_${p}_$bs.json
done; done
} > $OUT/stats.txt 2>&1
cp $OUT/stats.txt /dev/stderr
for p in amp fp32; do
timeout 90 /usr/local/cuda/bin/ncu --metrics gpu__time_duration.sum --csv --print-units base --launch-skip 0 --launch-count 3000 \
  $AB train $(args) --precision $p --batch-size 32 --max-steps 2 --train-subset 64 --test-subset 32 --timing-skip-steps 0 --out $B/n.json > $B/ncu_$p.csv 2> $OUT/ncu_${p}_err.txt
python3 - $B/ncu_$p.csv > $OUT/ncu_$p.txt <<'PY'
import csv, sys, collections
rows=[r for r in csv.reader(l for l in open(sys.argv[1]) if l.startswith('"'))]
h=rows[0]; rows=rows[1:]
ki=h.index('Kernel Name'); vi=h.index('Metric Value'); ii=h.index('ID')
t=collections.defaultdict(float); n=collections.Counter()
for r in rows:
    try: v=float(r[vi].replace(',',''))
    except: continue
    t[r[ki][:90]]+=v; n[r[ki][:90]]+=1
tot=sum(t.values())
print('kernels', sum(n.values()), 'total ns', tot)
for k,v in sorted(t.items(), key=lambda x:-x[1])[:40]:
    print('%12.0f %5.1f%% %6d %s'%(v, 100*v/tot, n[k], k))
PY
head -5 $OUT/ncu_$p.txt >&2
done
