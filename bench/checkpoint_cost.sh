#!/usr/bin/env bash
# What checkpoints cost (docs/checkpoints.md): per workload and precision, the size of one
# checkpoint, the time to write one (in the background), the time training was held for it, and
# the time to read one back (--resume); then ResNet-50 on the converged accuracy recipe
# (bench/accuracy-converged-cpu.conf) for one epoch with a checkpoint at its end, the checkpoint's
# time as a share of the epoch's training and evaluation.
#   bench/checkpoint_cost.sh [--build-dir DIR] [--threads N] [--data DIR]
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build="$root/build" threads=$(nproc) data=""
while [ $# -gt 0 ]; do
    case "$1" in
        --build-dir) build=$(realpath "$2"); shift 2 ;;
        --threads) threads=$2; shift 2 ;;
        --data) data=$2; shift 2 ;;
        -h|--help) sed -n '2,7s/^# \{0,1\}//p' "$0"; exit 0 ;;
        *) echo "checkpoint_cost.sh: unknown argument '$1'" >&2; exit 2 ;;
    esac
done
ampbench="$build/ampbench"
[ -x "$ampbench" ] || { echo "checkpoint_cost.sh: no $ampbench (build first, or --build-dir)" >&2; exit 2; }
root_data=${data:-$("$ampbench" train --help | sed -n 's/.*mnist: \([^,]*\)\/mnist,.*/\1/p' | head -n 1)}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

echo "checkpoint_cost.sh: $("$ampbench" --version), $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), $threads threads"
echo "disk: $(df -h "$tmp" | awk 'NR == 2 { print $1 " (" $2 ")" }'), checkpoints in $tmp"
printf '\n| workload | precision | parameters | checkpoint size | write, in the background (mean of 6) | training held, a step after the last one (mean of 6) | resume (read + restore) |\n|---|---|---|---|---|---|---|\n'

# case NAME PRECISION ARGS...: a checkpoint after each of 5 steps (each waits for the one before to
# be written); the record's checkpoints block gives the time training was held and the writes' own
# time, the folder its size
measure() {
    local name=$1 prec=$2
    shift 2
    local d="$tmp/$name-$prec"
    "$ampbench" train "$@" --precision "$prec" --threads "$threads" --epochs 1 --max-steps 5 --log-interval 1000 \
        --checkpoint-dir "$d" --checkpoint-every 1 --keep-checkpoints 1 --out "$d.json" > "$d.log" 2>&1 ||
        { echo "checkpoint_cost.sh: $name $prec failed: $(tail -n 3 "$d.log")" >&2; return 1; }
    local size r
    size=$(du -sb "$d"/ckpt-* | awk '{ printf "%.1f", $1 / 1e6 }')
    # the run is complete: resuming reads the checkpoint, restores it and finds nothing left to do
    "$ampbench" train "$@" --precision "$prec" --threads "$threads" --epochs 1 --max-steps 5 --log-interval 1000 \
        --checkpoint-dir "$d" --checkpoint-every 1 --keep-checkpoints 1 --resume > "$d.resume.log" 2>&1 ||
        { echo "checkpoint_cost.sh: $name $prec resume failed: $(tail -n 3 "$d.resume.log")" >&2; return 1; }
    r=$(sed -n 's/^Resumed from .*(\([0-9.]*\) s)$/\1/p' "$d.resume.log")
    python3 - "$d.json" "$name" "$prec" "$size" "$r" <<'EOF2'
import json, sys
r = json.load(open(sys.argv[1]))
c = r["checkpoints"]
n = c["written"]
print(f"| {sys.argv[2]} | {sys.argv[3]} | {r['workload']['parameters']:,} | {sys.argv[4]} MB | "
      f"{c['write_time_s'] / n:.3f} s | {c['time_s'] / n:.3f} s | {sys.argv[5]} s |")
EOF2
    rm -rf "$d"
}

small=(--train-subset 2048 --test-subset 256)
measure mlp fp32 --model mlp "${small[@]}"
measure mlp amp --model mlp "${small[@]}"
measure resnet50 fp32 --model resnet50 "${small[@]}" --batch-size 64
measure resnet50 amp --model resnet50 "${small[@]}" --batch-size 64
measure bert-minilm amp --model bert --init-from "$root_data/all-MiniLM-L6-v2" --max-seq-len 64 "${small[@]}"
measure bert-base fp32 --model bert-base --max-seq-len 128 --batch-size 8 "${small[@]}"
measure bert-base amp --model bert-base --max-seq-len 128 --batch-size 8 "${small[@]}"

# ResNet-50 on the converged accuracy recipe (its extra arguments, read from the config): one
# epoch, its checkpoint at the end, against the epoch
conf="$root/bench/accuracy-converged-cpu.conf"
read -r -a extra <<< "$(awk '$1 == "resnet50" { for (i = 9; i <= NF; i++) printf "%s ", $i }' "$conf")"
[ "${#extra[@]}" -gt 0 ] || { echo "checkpoint_cost.sh: no resnet50 line in $conf" >&2; exit 1; }
recipe=(--model resnet50 "${extra[@]}" --epochs 1 --threads "$threads" --quiet)
echo
echo "ResNet-50 recipe (bench/accuracy-converged-cpu.conf): ${extra[*]}"
printf '\n| ResNet-50, accuracy recipe | epoch: training | evaluation | checkpoint at its end | share of the epoch |\n|---|---|---|---|---|\n'
for prec in fp32 amp; do
    d="$tmp/epoch-$prec"
    "$ampbench" train "${recipe[@]}" --precision "$prec" --checkpoint-dir "$d" --out "$d.json" > "$d.log" 2>&1 ||
        { echo "checkpoint_cost.sh: the ResNet-50 epoch failed: $(tail -n 3 "$d.log")" >&2; exit 1; }
    python3 - "$d.json" "$prec" <<'EOF'
import json, sys
r = json.load(open(sys.argv[1]))
e = r["epochs"][0]
ck = r["checkpoints"]["time_s"]
whole = e["time_s"] + e["eval_time_s"]
print(f"| {sys.argv[2]} | {e['time_s']:.1f} s | {e['eval_time_s']:.1f} s | held {ck:.3f} s, written in "
      f"{r['checkpoints']['write_time_s']:.3f} s ({r['checkpoints']['bytes'] / 1e6:.1f} MB) | {100 * ck / whole:.2f}% |")
EOF
    rm -rf "$d"
done
