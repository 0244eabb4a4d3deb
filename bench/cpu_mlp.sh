#!/usr/bin/env bash
# The article's MNIST MLP (784-256-10, batch 64, SGD) on this CPU, ampbench beside the peer
# (peers/mnist_mlp.py: the same model, data and recipe in PyTorch) on the same threads: training
# samples/s of one epoch (60,000 samples, every step timed), median of R runs, in fp32, amp
# (fp16; on a CPU ampbench emulates it, PyTorch autocasts to fp16) and bf16. Runs alternate between
# the tools, and the precisions take turns within each repeat, so that a drift of the machine
# touches every column alike. Prints a table, each precision's time against FP32 (the medians' ratio,
# then each round's and their median), and how the first
# two CPUs stood to each other before each round and after the last (bench/cpu_link.sh: a run on
# either side of a change of the virtual machine's CPUs is not comparable); the raw JSON stays in OUT.
# usage: bench/cpu_mlp.sh [--build DIR] [--out DIR] [--repeats R] [--threads T] [--precisions LIST]
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=$root/build out="" repeats=5 threads=$(nproc) precisions=fp32,amp,bf16
while [ $# -gt 0 ]; do
    case "$1" in
    --build) build=$2; shift 2 ;; --out) out=$2; shift 2 ;; --repeats) repeats=$2; shift 2 ;;
    --threads) threads=$2; shift 2 ;; --precisions) precisions=$2; shift 2 ;;
    -h | --help) sed -n '2,11p' "$0"; exit 0 ;;
    *) echo "cpu_mlp.sh: unknown argument '$1'" >&2; exit 2 ;;
    esac
done
out=${out:-$(mktemp -d /tmp/ab_cpu_mlp.XXXXXX)}
mkdir -p "$out"
ampbench=$build/ampbench
[ -x "$ampbench" ] || { echo "cpu_mlp.sh: $ampbench: build first" >&2; exit 2; }
py=""
for p in "${AB_PYTHON:-}" python3 /usr/bin/python3; do
    [ -n "$p" ] && "$p" -c 'import torch' 2>/dev/null && { py=$p; break; }
done
. "$root/bench/cpu_link.sh"
field() { python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))[sys.argv[2]])' "$1" "$2"; }
# the steps the loss scaler skipped, from the record: a skipped step has no update, so a run that
# skipped some is said under its row
skipped_steps() {
    python3 -c 'import json, sys
r = json.load(open(sys.argv[1]))
print(r["mixed_precision"]["skipped_steps"])' "$1"
}
cpu=$(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -1)
echo "cpu_mlp.sh: $cpu, $threads threads; PyTorch: $([ -n "$py" ] && "$py" -c 'import torch; print(torch.__version__)' || echo "not importable (no peer column)")"
common=(--epochs 1 --batch-size 64 --threads "$threads")
echo
echo "Training samples/s over one epoch, median of $repeats runs:"
printf '%-5s %16s %16s %8s\n' prec "ampbench" "PyTorch" ratio
# the precisions take turns within each repeat, so that the machine's drift over the minutes moves
# them alike: the times against FP32 below are medians of the same rounds
declare -A RUNS_AB=() RUNS_PT=() NOTES=() MA=()
LINKS=""
for r in $(seq 1 "$repeats"); do
    LINKS+="$(cpu_link_reading "$build") "
    for prec in ${precisions//,/ }; do
        "$ampbench" train --model mlp --dataset mnist "${common[@]}" --quiet --precision "$prec" \
            --out "$out/ab_mlp_${prec}_$r.json" >/dev/null
        RUNS_AB[$prec]+="$(field "$out/ab_mlp_${prec}_$r.json" samples_per_s) "
        k=$(skipped_steps "$out/ab_mlp_${prec}_$r.json")
        [ "$k" -eq 0 ] || NOTES[$prec]+="  (run $r of mlp $prec: the loss scaler skipped $k of its steps; its speed counts steps without an update)"$'\n'
        if [ -n "$py" ]; then
            "$py" "$root/peers/mnist_mlp.py" --device cpu "${common[@]}" --precision "$prec" \
                --out "$out/pt_mlp_${prec}_$r.json" >/dev/null 2>"$out/pt_mlp_${prec}.err" &&
                RUNS_PT[$prec]+="$(field "$out/pt_mlp_${prec}_$r.json" samples_per_s) "
        fi
    done
done
for prec in ${precisions//,/ }; do
    read -r -a a <<<"${RUNS_AB[$prec]}"
    read -r -a b <<<"${RUNS_PT[$prec]:-}"
    ma=$(printf '%s\n' "${a[@]}" | median)
    MA[$prec]=$ma
    mb=$([ ${#b[@]} -gt 0 ] && printf '%s\n' "${b[@]}" | median || echo -)
    ratio=$([ "$mb" != - ] && awk -v x="$ma" -v y="$mb" 'BEGIN { printf "%.2fx", x / y }' || echo -)
    printf '%-5s %16.0f %16s %8s\n' "$prec" "$ma" "$([ "$mb" = - ] && echo - || printf '%.0f' "$mb")" "$ratio"
    [ -z "${NOTES[$prec]:-}" ] || printf '%s' "${NOTES[$prec]}"
    echo "  mlp $prec runs: ampbench ${a[*]}${b[*]:+; PyTorch ${b[*]}}" >>"$out/runs.txt"
done
if [ -n "${MA[fp32]:-}" ]; then
    for prec in ${precisions//,/ }; do
        [ "$prec" = fp32 ] || awk -v p="$prec" -v f="${MA[fp32]}" -v x="${MA[$prec]}" \
            'BEGIN { printf "%s / FP32 time %.2fx (medians of the same rounds)\n", p, f / x }'
    done
    for prec in ${precisions//,/ }; do
        [ "$prec" = fp32 ] || round_ratios "" "$prec" "${RUNS_AB[fp32]}" "${RUNS_AB[$prec]}"
    done
fi
LINKS+=$(cpu_link_reading "$build")
cpu_link_report "" mlp "$LINKS" "$out/runs.txt"
echo "(every run: $out/runs.txt)"
