#!/usr/bin/env bash
# Where a CPU step's time goes, workload by workload: `ampbench train --profile-ops` on short runs
# of the MLP, ResNet-50 (CIFAR stem), the MiniLM checkpoint (BERT family, sequence 64) and BERT-base
# (sequence 128), in each precision. Each run's table splits the op time by kind (GEMM, convolution,
# normalisation, softmax and attention, GELU, embedding, loss, optimizer, data, fp16/bf16
# conversion) with GFLOP/s and GB/s, then times the run's own GEMM shapes alone on the backend (the
# practical peak at those shapes: every shape's products at its rate alone) and the backend's fp32
# GEMM at 2048^3; the summary sets every run's rate against both. Each run's first step (set-up:
# oneDNN's kernels generated, buffers first touched, the optimizer's state zeroed) is left out with
# --timing-skip-steps 1, as from the run's clocks; the table then holds its other steps and a small
# evaluation.
# Each run is repeated R times (--repeats, 3 by default; two runs of one build on a shared machine
# can differ by ten points): the summary gives the run whose share of the 2048^3 rate is the
# median of the R, and the range of both shares over them.
# Each run's file also holds how the first two CPUs stood to each other just before and just after
# it (the build's cpu_link: cross-core latency, and both CPUs' compute rate at once against one
# alone; the summary's 'link before after'): on a virtual machine the two CPUs can drift apart on
# the host, or onto one core, for minutes, and a run that straddles such a change is not
# comparable with the others.
# Writes OUT/<workload>-<precision>.txt (the first repeat; each file starts with its command),
# OUT/<workload>-<precision>.rN.txt (repeat N from 2) and OUT/summary.txt.
# usage: bench/cpu_profile.sh [--build DIR] [--out DIR] [--threads T] [--minilm DIR] [--repeats R]
#                             [--runs mlp,resnet,minilm,bert-base] [--precisions fp32,amp,bf16]
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=$root/build out="" threads=$(nproc) minilm="" repeats=3 runs=mlp,resnet,minilm,bert-base precisions=fp32,amp,bf16
while [ $# -gt 0 ]; do
    case "$1" in
    --build) build=$2; shift 2 ;; --out) out=$2; shift 2 ;; --threads) threads=$2; shift 2 ;;
    --minilm) minilm=$2; shift 2 ;; --runs) runs=$2; shift 2 ;; --precisions) precisions=$2; shift 2 ;;
    --repeats) repeats=$2; shift 2 ;;
    -h | --help) sed -n '2,23p' "$0"; exit 0 ;;
    *) echo "cpu_profile.sh: unknown argument '$1'" >&2; exit 2 ;;
    esac
done
case "$repeats" in '' | *[!0-9]*) repeats=x ;; *) [ $((10#$repeats)) -ge 1 ] && repeats=$((10#$repeats)) || repeats=x ;; esac
[ "$repeats" != x ] || { echo "cpu_profile.sh: --repeats must be a positive integer" >&2; exit 2; }
out=${out:-$(mktemp -d /tmp/ab_cpu_profile.XXXXXX)}
mkdir -p "$out"
ampbench=$build/ampbench
[ -x "$ampbench" ] || { echo "cpu_profile.sh: $ampbench: build first" >&2; exit 2; }
data=$(sed -n 's/^AB_DATA_ROOT:PATH=//p' "$build/CMakeCache.txt" 2>/dev/null)
data=${data:-$root/../shared/data}
minilm=${minilm:-$data/all-MiniLM-L6-v2}
has() { case ",$2," in *",$1,"*) return 0 ;; esac; return 1; }
flags=$(grep -m1 '^flags' /proc/cpuinfo | tr ' ' '\n' | grep -E '^(avx2|avx512f|avx512_bf16|amx_bf16|amx_tile|avx512_fp16|f16c)$' | tr '\n' ' ')
cpu=$(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -1)
{
    echo "cpu_profile.sh: $cpu, $(nproc) CPUs, $threads threads; instructions: ${flags:-none of avx2/avx512/bf16/amx}"
    echo "ampbench $("$ampbench" --version | sed 's/^ampbench //')"
} | tee "$out/summary.txt"
common=(--threads "$threads" --quiet --profile-ops --timing-skip-steps 1)
. "$root/bench/cpu_link.sh"
declare -a names=() cmds=()
add() { names+=("$1"); cmds+=("$2"); }
for prec in ${precisions//,/ }; do
    has mlp "$runs" && add "mlp-$prec" "--model mlp --dataset mnist --batch-size 64 --max-steps 201 --epochs 1 --test-subset 512 --precision $prec"
    # AMP from a loss scale of 1024: from 65536 its first steps overflow and are skipped, no update
    # in them (bench/cpu_resnet.sh says more)
    scale=""
    [ "$prec" = amp ] && scale=" --init-scale 1024"
    has resnet "$runs" && add "resnet50-cifar-$prec" "--model resnet50-cifar --dataset cifar10 --batch-size 32 --max-steps 5 --epochs 1 --train-subset 160 --test-subset 32 --no-augment --precision $prec$scale"
    if has minilm "$runs"; then
        if [ -r "$minilm/model.safetensors" ]; then
            add "minilm-$prec" "--model bert --init-from $minilm --dataset sst2 --max-seq-len 64 --batch-size 32 --max-steps 7 --epochs 1 --train-subset 224 --test-subset 32 --precision $prec"
        else
            echo "cpu_profile.sh: $minilm: no MiniLM checkpoint, minilm-$prec left out" | tee -a "$out/summary.txt"
        fi
    fi
    has bert-base "$runs" && add "bert-base-$prec" "--model bert-base --dataset sst2 --max-seq-len 128 --batch-size 8 --max-steps 4 --epochs 1 --train-subset 32 --test-subset 8 --precision $prec"
done
echo >>"$out/summary.txt"
printf '%-22s %9s %10s %11s %14s %10s %10s %-19s %-17s %s\n' run "ops (s)" "GEMM share" "GEMM GF/s" "all ops GF/s" "of 2048^3" "of shapes" "range (runs)" "link before after" "largest other kind" | tee -a "$out/summary.txt"
for i in "${!names[@]}"; do
    lines=()
    for r in $(seq 1 "$repeats"); do
        f=$out/${names[$i]}.txt
        [ "$r" -gt 1 ] && f=$out/${names[$i]}.r$r.txt
        # shellcheck disable=SC2086 # the command line is a list of words
        { echo "\$ $ampbench train ${cmds[$i]} ${common[*]}"; echo "cross-core before (ns/paired compute): $(cpu_link_reading "$build")"
          "$ampbench" train ${cmds[$i]} "${common[@]}"; } >"$f" 2>&1 ||
            { echo "cpu_profile.sh: ${names[$i]} failed (see $f)" >&2; exit 1; }
        echo "cross-core after (ns/paired compute): $(cpu_link_reading "$build")" >>"$f"
        # one line: ops seconds, GEMM share, GEMM rate, all ops' rate, the two shares, the largest other kind
        lines+=("$(awk '
            /^  op kind/ { t = 1; next }
            t && /^  the GEMM shapes/ { t = 0 }
            t && NF > 5 {
                at = 0; for (k = 1; k <= NF; k++) if ($k ~ /%$/) at = k
                if (!at) next
                share = $at; sec = $(at - 1); gflop = $(at + 1); lab = $1
                for (m = 2; m < at - 2; m++) lab = lab " " $m
                if (lab ~ /^GEMM|^convolution/) { gshare += share + 0; gsec += sec; gfl += gflop }
                else if (share + 0 > oshare) { oshare = share + 0; other = lab " " share }
            }
            /^  all ops:/ { ops = $3; for (k = 1; k <= NF; k++) { if ($k == "GFLOP/s" && !all) all = $(k - 1); if ($k == "reached") pk = $(k + 1) } }
            /^  the run.s own GEMM shapes, each/ { for (k = 1; k <= NF; k++) if ($k == "reached") own = $(k + 1) }
            /^cross-core before/ { lb = $NF }
            /^cross-core after/ { la = $NF }
            END { printf "%.3f\t%.1f\t%.1f\t%.1f\t%s\t%s\t%s\t%s %s\n", ops, gshare, (gsec > 0 ? gfl / gsec : 0), all, pk, (own ? own : "-"), other, (lb ? lb : "-"), (la ? la : "-") }
        ' "$f")")
    done
    # the repeat whose share of the 2048^3 rate is the median (the lower middle one of an even
    # count), and the ranges of both shares
    printf '%s\n' "${lines[@]}" | awk -F'\t' -v name="${names[$i]}" -v n="$repeats" '
        { v[NR] = $5 + 0; l[NR] = $0; if (NR == 1 || $5 + 0 < lo) lo = $5 + 0; if (NR == 1 || $5 + 0 > hi) hi = $5 + 0
          if ($6 != "-") { if (!so || $6 + 0 < slo) slo = $6 + 0; if (!so || $6 + 0 > shi) shi = $6 + 0; so = 1 } }
        END {
            for (a = 1; a <= NR; a++) idx[a] = a
            for (a = 1; a <= NR; a++) for (b = a + 1; b <= NR; b++) if (v[idx[b]] < v[idx[a]]) { t = idx[a]; idx[a] = idx[b]; idx[b] = t }
            split(l[idx[int((NR + 1) / 2)]], f, "\t")
            range = n > 1 ? sprintf("%d-%d%%", lo, hi) (so ? sprintf(", %d-%d%%", slo, shi) : "") " (" n ")" : "-"
            printf "%-22s %9.3f %9.1f%% %11.1f %14.1f %10s %10s %-19s %-17s %s\n", name, f[1], f[2], f[3], f[4], f[5], f[6], range, f[8], f[7]
        }' | tee -a "$out/summary.txt"
done
echo "(GEMM share and rate: the GEMM and convolution kinds together; 'of 2048^3': all ops' GFLOP/s against the backend's fp32 GEMM at 2048^3, best of 3; 'of shapes': against the run's own GEMM shapes each at its rate alone, best of 3, where every FLOP is a GEMM's; each line the repeat with the median share of 2048^3, 'range' both shares' lowest and highest over the repeats; 'link before after': that repeat's cross-core latency in ns / both CPUs' compute rate at once against one alone, read just before and just after it (bench/cpu_link.c); each run's first step left out)" | tee -a "$out/summary.txt"
echo "cpu_profile.sh: tables in $out"
