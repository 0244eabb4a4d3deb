#!/usr/bin/env bash
# What a gradient census costs (docs/gradient-range.md): for each workload, the median time of a
# training step over R runs of S steps without a census and with one at every step
# (--grad-census 1), in FP32 and AMP; the difference is one census, and a hundredth of it over a
# step is what --grad-census 100 adds. Prints a table; the raw JSON stays in OUT.
# usage: bench/census_cost.sh [--build DIR] [--out DIR] [--repeats R] [--steps S] [--threads T]
#                             [--workloads "mlp resnet50 bert"]
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=$root/build out="" repeats=3 steps=8 threads=$(nproc) workloads="mlp resnet50 bert"
while [ $# -gt 0 ]; do
    case "$1" in
    --build) build=$2; shift 2 ;; --out) out=$2; shift 2 ;; --repeats) repeats=$2; shift 2 ;;
    --steps) steps=$2; shift 2 ;; --threads) threads=$2; shift 2 ;; --workloads) workloads=$2; shift 2 ;;
    -h | --help) sed -n '2,7p' "$0"; exit 0 ;;
    *) echo "census_cost.sh: unknown argument '$1'" >&2; exit 2 ;;
    esac
done
out=${out:-$(mktemp -d /tmp/ab_census_cost.XXXXXX)}
mkdir -p "$out"
ampbench=$build/ampbench
[ -x "$ampbench" ] || { echo "census_cost.sh: $ampbench: build first" >&2; exit 2; }
data=$(sed -n 's/^AB_DATA_ROOT:PATH=//p' "$build/CMakeCache.txt" 2>/dev/null)
data=${AB_DATA_ROOT:-${data:-$root/../shared/data}}
# the step time of a result: its timed epoch time over its timed steps (the first left out)
step_s() { python3 -c 'import json, sys; j = json.load(open(sys.argv[1])); e = j["epochs"][0]
print(e["time_s"] / (e["steps"] - int(sys.argv[2])))' "$1" 1; }
median() { sort -g | awk '{ v[NR] = $1 } END { if (NR % 2) print v[(NR + 1) / 2]; else print (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }

echo "census_cost.sh: $(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -1), $threads threads," \
     "median of $repeats runs of $steps steps (the first untimed)"
printf '%-9s %-5s %12s %14s %12s %16s\n' workload prec "step (ms)" "+census (ms)" "census (ms)" "K=100 adds (%)"
for wl in $workloads; do
    case "$wl" in
    mlp) args=(--model mlp --batch-size 64) ;;
    resnet50) args=(--model resnet50 --batch-size 32 --no-augment) ;;
    bert) args=(--model bert --init-from "$data/all-MiniLM-L6-v2" --max-seq-len 64 --batch-size 32) ;;
    *) echo "census_cost.sh: unknown workload '$wl' (mlp, resnet50, bert)" >&2; exit 2 ;;
    esac
    for prec in fp32 amp; do
        for k in 0 1; do
            for r in $(seq 1 "$repeats"); do
                f=$out/$wl-$prec-k$k-r$r.json
                census=()
                [ "$k" = 1 ] && census=(--grad-census 1)
                "$ampbench" train "${args[@]}" --precision "$prec" --max-steps "$steps" --epochs 1 \
                    --train-subset 4096 --test-subset 32 --timing-skip-steps 1 --threads "$threads" --quiet \
                    "${census[@]}" --out "$f" > /dev/null
                step_s "$f"
            done | median > "$out/$wl-$prec-k$k.median"
        done
        read -r t0 < "$out/$wl-$prec-k0.median"
        read -r t1 < "$out/$wl-$prec-k1.median"
        awk -v w="$wl" -v p="$prec" -v a="$t0" -v b="$t1" \
            'BEGIN { printf "%-9s %-5s %12.2f %14.2f %12.2f %16.3f\n", w, p, 1e3 * a, 1e3 * b, 1e3 * (b - a), 100 * (b - a) / 100 / a }'
    done
done
echo "raw results: $out"
