#!/usr/bin/env bash
# BERT-base's fit in a GPU's memory, mapped: the largest batch whose fine-tuning run (weights,
# gradients, AdamW's two moments, the fp32 master copy under AMP, activations and workspaces: the
# comparable total of docs/bert.md) fits in SIZE, for FP32 and AMP at each sequence length, from
# `ampbench train --find-max-batch` (each answer a pair of real probes: the largest batch fits, the
# next one does not). The articles say FP32 BERT-base does not fit an 8 GB GPU "even at a small
# batch" and give no sequence length; this says at which lengths that holds.
# Writes OUT/fit-<seq>-<precision>.json (the search records), OUT/fit_map.txt (the table) and
# OUT/fit_map.png (batch against sequence length, both precisions; harness/plots/fit_map.gp).
# usage: bench/bert_fit_map.sh [--build DIR] [--out DIR] [--limit SIZE] [--seq-lens 128,256,512]
#                              [--device cpu|cuda] [--model bert-base]
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=$root/build out="" limit=8G seqs=128,256,512 device=cpu model=bert-base
while [ $# -gt 0 ]; do
    case "$1" in
    --build | --out | --limit | --seq-lens | --device | --model)
        [ $# -ge 2 ] || { echo "bert_fit_map.sh: $1 needs a value" >&2; exit 2; }
        case "$1" in
        --build) build=$2 ;; --out) out=$2 ;; --limit) limit=$2 ;; --seq-lens) seqs=$2 ;;
        --device) device=$2 ;; --model) model=$2 ;;
        esac
        shift 2 ;;
    -h | --help) sed -n '2,11p' "$0"; exit 0 ;;
    *) echo "bert_fit_map.sh: unknown argument '$1' (see --help)" >&2; exit 2 ;;
    esac
done
out=${out:-$(mktemp -d /tmp/ab_fit_map.XXXXXX)}
mkdir -p "$out"
out=$(cd "$out" && pwd)
ampbench=$build/ampbench
[ -x "$ampbench" ] || { echo "bert_fit_map.sh: $ampbench: build first" >&2; exit 2; }
cpu=$(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -1)
field() { python3 -c 'import json, sys; v = json.load(open(sys.argv[1]))[sys.argv[2]]; print("null" if v is None else v)' "$1" "$2"; }

{
    echo "\$ bench/bert_fit_map.sh --limit $limit --seq-lens $seqs --device $device --model $model   ($(date -u +%Y-%m-%dT%H:%M:%SZ), $("$ampbench" --version))"
    echo "$model fine-tuning (AdamW state included) under --memory-limit $limit on $device ($cpu): the largest batch that fits"
    printf '%5s  %-5s %10s %14s %13s %16s %8s %7s\n' seq prec "max batch" "peak (GB)" "refused at" "would need (GB)" probes seconds
} > "$out/fit_map.txt"
cat "$out/fit_map.txt"
: > "$out/fit_map.dat"
for L in ${seqs//,/ }; do
    row="$L"
    for p in fp32 amp; do
        t0=$(date +%s.%N)
        "$ampbench" train --model "$model" --dataset sst2 --device "$device" --precision "$p" --max-seq-len "$L" \
            --memory-limit "$limit" --find-max-batch --out "$out/fit-$L-$p.json" > "$out/fit-$L-$p.log" 2>&1 ||
            { tail -n 3 "$out/fit-$L-$p.log" >&2; echo "bert_fit_map.sh: the search at sequence $L, $p failed (log: $out/fit-$L-$p.log)" >&2; exit 1; }
        secs=$(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }')
        f=$out/fit-$L-$p.json
        b=$(field "$f" max_batch) peak=$(field "$f" peak_memory_at_max_batch_bytes)
        bad=$(field "$f" first_batch_refused) need=$(field "$f" refused_would_need_bytes)
        n=$(grep -c '^  batch ' "$out/fit-$L-$p.log")
        line=$(awk -v L="$L" -v p="$p" -v b="$b" -v peak="$peak" -v bad="$bad" -v need="$need" -v n="$n" -v s="$secs" 'BEGIN {
            printf "%5d  %-5s %10d %14.3f %13s %16s %8d %7.1f", L, p, b, peak / 1e9, bad, (need == "null" ? "-" : sprintf("%.3f", need / 1e9)), n, s }')
        echo "$line" | tee -a "$out/fit_map.txt"
        row="$row $b"
    done
    echo "$row" >> "$out/fit_map.dat"
done
# where the articles' "FP32 does not fit even at a small batch" holds: FP32's largest batch below 8
awk -v lim="$limit" '{ v = ($2 < 8) ? "holds (FP32 fits at most batch " $2 ")" : "does not hold (FP32 fits batch " $2 ")";
    printf "sequence %d: AMP fits %.2fx FP32'"'"'s batch (%d against %d); the claim %s\n", $1, ($2 > 0 ? $3 / $2 : 0), $3, $2, v }' \
    "$out/fit_map.dat" | tee -a "$out/fit_map.txt"
if command -v gnuplot > /dev/null 2>&1; then
    xr=$(awk 'NR == 1 { lo = $1 } { hi = $1 } END { printf "xmin=%g; xmax=%g", lo / 1.4, hi * 1.4 }' "$out/fit_map.dat")
    (cd "$out" && gnuplot -e "gpdir='$root/harness/plots'; out='fit_map.png'; w=960; h=600; limit='$limit'; model='$model'; $xr" \
        "$root/harness/plots/fit_map.gp") || echo "bert_fit_map.sh: gnuplot failed; the table stands" >&2
else
    echo "bert_fit_map.sh: no gnuplot: no plot (the table stands)" >&2
fi
echo "results: $out"
