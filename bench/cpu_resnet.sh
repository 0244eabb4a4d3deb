#!/usr/bin/env bash
# ResNet-50 on this CPU, ampbench beside PyTorch (peers/cifar_resnet50.py) on the same
# cores and settings: training images/s at batch B (median of R runs of S steps each, both stems,
# fp32 and each reduced precision PyTorch can autocast to here: PyTorch 1.13 has only bf16 on a
# CPU, so amp (fp16) is ampbench alone), then ampbench's comparable peak memory at batch 128 by
# category, fp32 against amp, and the saving. Prints a table and each model's AMP / FP32 and bf16 /
# FP32 time from the same rounds (the precisions take turns within each repeat; the medians' ratio,
# then each round's and their median); the raw JSON stays
# in OUT, and how the first two CPUs stood to each other before each round and after the last
# (bench/cpu_link.sh). AMP's runs start from a loss scale of 1024, and a timed step the scaler
# skipped is said (below).
# usage: bench/cpu_resnet.sh [--build DIR] [--out DIR] [--repeats R] [--steps S] [--batch B]
#                            [--threads T] [--models "resnet50 resnet50-cifar"]
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=$root/build out="" repeats=5 steps=6 batch=32 threads=$(nproc) models="resnet50 resnet50-cifar"
while [ $# -gt 0 ]; do
    case "$1" in
    --build) build=$2; shift 2 ;; --out) out=$2; shift 2 ;; --repeats) repeats=$2; shift 2 ;;
    --steps) steps=$2; shift 2 ;; --batch) batch=$2; shift 2 ;; --threads) threads=$2; shift 2 ;;
    --models) models=$2; shift 2 ;;
    -h | --help) sed -n '2,13p' "$0"; exit 0 ;;
    *) echo "cpu_resnet.sh: unknown argument '$1'" >&2; exit 2 ;;
    esac
done
out=${out:-$(mktemp -d /tmp/ab_cpu_resnet.XXXXXX)}
mkdir -p "$out"
ampbench=$build/ampbench
[ -x "$ampbench" ] || { echo "cpu_resnet.sh: $ampbench: build first" >&2; exit 2; }
py=""
for p in "${AB_PYTHON:-}" python3 /usr/bin/python3; do
    [ -n "$p" ] && "$p" -c 'import torch, torchvision' 2>/dev/null && { py=$p; break; }
done
# the same data, recipe and length for both: a CIFAR-10 subset, SGD + momentum, no augmentation
# (batch assembly is measured apart), evaluation on a few images only; the first step (scratch
# growth, oneDNN primitive creation) left out of both tools' timings
common=(--batch-size "$batch" --max-steps "$steps" --epochs 1 --train-subset $((batch * steps)) --test-subset 64
        --lr 0.01 --momentum 0.9 --weight-decay 5e-4 --no-augment --threads "$threads" --timing-skip-steps 1 --quiet)
# AMP starts from a loss scale of 1024: from GradScaler's 65536 both stems overflow in their first
# steps (the 7x7 stem in all of its first six at batch 32, down to 1024; the CIFAR stem in four, to
# 4096), and a skipped step has no update and no refresh of the fp16 weights, so a timed part of
# skipped steps flatters AMP. Each AMP run's timed steps are checked: any skipped one is said under
# its row.
amp_scale=(--init-scale 1024)
sps() { "${py:-python3}" -c 'import json, sys; print(json.load(open(sys.argv[1]))["samples_per_s"])' "$1"; }
# the steps of the timed part (after the first) that the loss scaler skipped, from the record
skipped_timed() {
    "${py:-python3}" -c 'import json, sys
r = json.load(open(sys.argv[1]))
print(sum(1 for e in r["mixed_precision"]["overflow_events"] if e["step"] >= 1))' "$1"
}
. "$root/bench/cpu_link.sh"

echo "cpu_resnet.sh: $(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -1), $threads threads, batch $batch," \
     "median of $repeats runs of $steps steps (the first untimed); PyTorch: $([ -n "$py" ] && "$py" -c 'import torch; print(torch.__version__)' || echo not importable)"
printf '%-15s %-5s %14s %14s %10s\n' model prec "ampbench img/s" "PyTorch img/s" "ratio"
# The precisions take turns within each repeat (fp32, amp, bf16, then the next repeat), so that a
# machine whose speed drifts over the minutes moves all three alike: the AMP / FP32 and bf16 / FP32
# times below are medians over the same rounds.
for m in $models; do
    declare -A RUNS_AB=() RUNS_PT=() NOTES=()
    LINKS=""
    for r in $(seq 1 "$repeats"); do
        LINKS+="$(cpu_link_reading "$build") "
        for prec in fp32 amp bf16; do
            extra=()
            [ "$prec" = amp ] && extra=("${amp_scale[@]}")
            "$ampbench" train --model "$m" --dataset cifar10 --precision "$prec" "${common[@]}" "${extra[@]}" \
                --out "$out/ab_${m}_${prec}_$r.json" >/dev/null
            RUNS_AB[$prec]+="$(sps "$out/ab_${m}_${prec}_$r.json") "
            k=$(skipped_timed "$out/ab_${m}_${prec}_$r.json")
            [ "$k" -eq 0 ] || NOTES[$prec]+="  (run $r of $m $prec: the loss scaler skipped $k of its $((steps - 1)) timed steps; its speed counts steps without an update)"$'\n'
            if [ -n "$py" ] && [ "$prec" != amp ]; then
                "$py" "$root/peers/cifar_resnet50.py" --model "$m" --device cpu --precision "$prec" \
                    "${common[@]}" --out "$out/pt_${m}_${prec}_$r.json" >/dev/null 2>"$out/pt_${m}_${prec}.err" &&
                    RUNS_PT[$prec]+="$(sps "$out/pt_${m}_${prec}_$r.json") "
            fi
        done
    done
    declare -A MA=()
    for prec in fp32 amp bf16; do
        read -r -a a <<<"${RUNS_AB[$prec]}"
        read -r -a b <<<"${RUNS_PT[$prec]:-}"
        ma=$(printf '%s\n' "${a[@]}" | median)
        MA[$prec]=$ma
        mb=$([ ${#b[@]} -gt 0 ] && printf '%s\n' "${b[@]}" | median || echo -)
        ratio=$([ "$mb" != - ] && awk -v x="$ma" -v y="$mb" 'BEGIN { printf "%.2fx", x / y }' || echo -)
        printf '%-15s %-5s %14.1f %14s %10s\n' "$m" "$prec" "$ma" "$([ "$mb" = - ] && echo - || printf '%.1f' "$mb")" "$ratio"
        [ -z "${NOTES[$prec]:-}" ] || printf '%s' "${NOTES[$prec]}"
        echo "  runs: ampbench ${a[*]}${b[*]:+; PyTorch ${b[*]}}" >>"$out/runs.txt"
    done
    awk -v m="$m" -v f="${MA[fp32]}" -v a="${MA[amp]}" -v b="${MA[bf16]}" \
        'BEGIN { printf "%-15s AMP / FP32 time %.2fx, bf16 / FP32 %.2fx (medians of the same rounds)\n", m, f / a, f / b }'
    round_ratios "$(printf '%-15s ' "$m")" AMP "${RUNS_AB[fp32]}" "${RUNS_AB[amp]}"
    round_ratios "$(printf '%-15s ' "$m")" bf16 "${RUNS_AB[fp32]}" "${RUNS_AB[bf16]}"
    LINKS+=$(cpu_link_reading "$build")
    cpu_link_report "$(printf '%-15s ' "$m")" "$m" "$LINKS" "$out/runs.txt"
    unset RUNS_AB RUNS_PT NOTES MA
done

echo
echo "ampbench comparable peak memory at batch 128, one step (MB; cpu_scratch counted apart, not in the total):"
printf '%-15s %-5s %9s %9s %9s %9s %9s %9s %9s %11s\n' model prec weights master grads optimizer activ workspace total cpu_scratch
for m in $models; do
    for prec in fp32 amp; do
        "$ampbench" train --model "$m" --dataset cifar10 --precision "$prec" --batch-size 128 --max-steps 1 \
            --train-subset 128 --test-subset 128 --no-augment --threads "$threads" --quiet --out "$out/mem_${m}_$prec.json" \
            >/dev/null
        "${py:-python3}" - "$out/mem_${m}_$prec.json" "$m" "$prec" <<'EOF'
import json, sys
r = json.load(open(sys.argv[1]))["peak_memory_bytes"]
keys = ["parameters", "master_weights", "gradients", "optimizer_state", "activations", "workspace", "total", "cpu_scratch"]
print("%-15s %-5s " % (sys.argv[2], sys.argv[3]) + " ".join("%9.1f" % (r.get(k, 0) / 1e6) for k in keys[:-1]) +
      " %11.1f" % (r.get("cpu_scratch", 0) / 1e6))
EOF
    done
    "${py:-python3}" -c 'import json, sys
a, b = (json.load(open(p))["peak_memory_bytes"]["total"] for p in sys.argv[1:3])
print("%-15s amp saves %.1f%% of the fp32 peak (the articles: 37.5%%)" % (sys.argv[3], 100 * (1 - b / a)))' \
        "$out/mem_${m}_fp32.json" "$out/mem_${m}_amp.json" "$m"
done
echo "(raw results in $out)"
