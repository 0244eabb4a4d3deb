#!/usr/bin/env bash
# Data-parallel scaling of the MNIST MLP on this machine's CPUs: 1 rank, then 2 ranks under
# mpirun with gradient buckets all-reduced while backward runs (--dp-overlap on) and after it
# (off), one BLAS thread per rank, per-rank batch fixed; RUNS runs each (default 3), medians
# printed: epoch time, throughput, time in all-reduce (exposed and busy), bytes, and the PROJECTED epoch
# time on 4 and 8 GPUs / nodes (ring all-reduce model, see docs/data-parallel.md).
# usage: bench/dp_scaling.sh [extra ampbench options...]
#   AMPBENCH=path/to/ampbench (default build/ampbench), RUNS=3, EPOCHS=1, PRECISION=fp32
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
ampbench=${AMPBENCH:-$root/build/ampbench}
runs=${RUNS:-3}
epochs=${EPOCHS:-1}
precision=${PRECISION:-fp32}
[ -x "$ampbench" ] || { echo "dp_scaling.sh: no ampbench at $ampbench (build first, or set AMPBENCH)" >&2; exit 2; }
command -v mpirun >/dev/null || { echo "dp_scaling.sh: mpirun not found (install openmpi-bin)" >&2; exit 2; }
# One BLAS thread per rank, and no idle OpenBLAS pool threads; ranks left unbound, so that on a
# shared machine the scheduler can move a rank away from a busy core.
export OPENBLAS_NUM_THREADS=1
mpirun=(mpirun --oversubscribe --bind-to none -x OPENBLAS_NUM_THREADS)
[ "$(id -u)" -eq 0 ] && mpirun+=(--allow-run-as-root)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# first value of "key": in a result JSON (cJSON writes one key per line)
field() { awk -v k="\"$2\":" '$1 == k { v = $2; gsub(/,/, "", v); print v; exit }' "$1"; }
# a projection point's field: file kind n key
point() {
    awk -v kind="$2" -v n="$3" -v f="\"$4\":" '
        $1 == "\"kind\":" { k = $2; gsub(/[",]/, "", k) }
        $1 == "\"n\":" { nn = $2; gsub(/,/, "", nn) }
        $1 == f && k == kind && nn == n { v = $2; gsub(/,/, "", v); print v; exit }' "$1"
}
median() { sort -g | awk '{ v[NR] = $1 } END { if (NR == 0) print "nan"; else if (NR % 2) print v[(NR + 1) / 2]; else print (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
minimum() { sort -g | head -n 1; }

common=(train --threads 1 --epochs "$epochs" --precision "$precision" --quiet "$@")
echo "dp_scaling: MNIST MLP, $precision, batch 64 per rank, $epochs epoch(s), --threads 1 per rank, $runs runs each"
echo "host: $(nproc) CPU(s), $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ //'); load average before: $(cut -d' ' -f1-3 /proc/loadavg)"
# 2: buckets all-reduced while backward runs (--dp-overlap on, the default); 2off: after it
for np in 1 2 2off; do
    for r in $(seq 1 "$runs"); do
        out="$tmp/np${np}_r$r.json"
        if [ "$np" = 1 ]; then
            "$ampbench" "${common[@]}" --out "$out"
        elif [ "$np" = 2off ]; then
            "${mpirun[@]}" -np 2 "$ampbench" "${common[@]}" --dp-overlap off --out "$out"
        else
            "${mpirun[@]}" -np "$np" "$ampbench" "${common[@]}" --out "$out"
        fi
    done
done

med() { # np key
    for f in "$tmp"/np"$1"_r*.json; do field "$f" "$2"; done | median
}
best() { # np key: the smallest over the runs
    for f in "$tmp"/np"$1"_r*.json; do field "$f" "$2"; done | minimum
}
medp() { # np kind n key
    for f in "$tmp"/np"$1"_r*.json; do point "$f" "$2" "$3" "$4"; done | median
}
printf '\n%-16s %9s %9s %11s %12s %11s %13s %13s %9s\n' ranks "epoch s" "(best)" "samples/s" "allreduce s" "all comm s" "bytes/rank" "allreduce B/s" "test acc"
for np in 1 2 2off; do
    if [ "$np" = 1 ]; then ar=0 cm=0 by=0 bw=0
    else ar=$(med "$np" allreduce_time_s) cm=$(med "$np" comm_time_s) by=$(med "$np" bytes_allreduced) bw=$(med "$np" allreduce_bandwidth_Bps)
    fi
    label=$np
    [ "$np" = 2 ] && label="2, overlap on"
    [ "$np" = 2off ] && label="2, overlap off"
    printf '%-16s %9.3f %9.3f %11.0f %12.3f %11.3f %13.0f %13.3g %8.2f%%\n' "$label" "$(med "$np" time_s)" "$(best "$np" time_s)" \
        "$(med "$np" samples_per_s)" "$ar" "$cm" "$by" "$bw" "$(med "$np" final_test_accuracy)"
done
echo
echo "the all-reduce per step, 2 ranks (allreduce s above is the exposed part: what a step waited for)"
printf '  %-14s %8s %14s %14s %14s\n' overlap buckets "exposed ms" "busy ms" "bytes"
for np in 2 2off; do
    printf '  %-14s %8s %14.3f %14.3f %14.0f\n' "$([ "$np" = 2 ] && echo on || echo off)" "$(med "$np" buckets)" \
        "$(med "$np" allreduce_exposed_time_per_step_s | awk '{ print $1 * 1e3 }')" \
        "$(med "$np" allreduce_busy_time_per_step_s | awk '{ print $1 * 1e3 }')" "$(med "$np" bytes_per_step)"
done
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg) (other processes share these CPUs: figures are only as quiet as the machine)"
s1=$(med 1 samples_per_s) s2=$(med 2 samples_per_s)
awk -v a="$s1" -v b="$s2" 'BEGIN { printf "\nthroughput, 2 ranks / 1 rank: %.2fx (ideal 2x)\n", b / a }'

echo
echo "PROJECTED (not measured): ring all-reduce model from the 1-rank run's compute time per step"
echo "  compute per step $(med 1 compute_time_per_step_s) s, gradient $(med 1 grad_bytes) bytes"
printf '  %-6s %3s %14s %9s %11s %12s\n' kind n "epoch s" speedup efficiency "bandwidth"
for kind in gpus nodes; do
    for n in 1 2 4 8; do
        printf '  %-6s %3s %14.3f %9.2f %11.2f %12.3g\n' "$kind" "$n" "$(medp 1 "$kind" "$n" epoch_time_s)" \
            "$(medp 1 "$kind" "$n" speedup)" "$(medp 1 "$kind" "$n" efficiency)" "$(medp 1 "$kind" "$n" bandwidth_Bps)"
    done
done
