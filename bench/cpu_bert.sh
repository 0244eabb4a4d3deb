#!/usr/bin/env bash
# BERT on this CPU, ampbench beside the peer (peers/bert_glue.py: Hugging Face's
# BertForSequenceClassification) on the same cores, data and recipe (AdamW, linear decay, clipping
# at 1, dropout 0.1, SST-2):
#   speed     training sequences/s, median of R runs of S steps (the first untimed): the MiniLM
#             checkpoint at sequence 64, batch 32, and BERT-base at sequence 128, batch 8; fp32 and
#             each reduced precision (PyTorch 1.13 autocasts only to bf16 on a CPU, so fp16 amp is
#             ampbench alone), the precisions taking turns within each repeat; each model's AMP /
#             FP32 and bf16 / FP32 time from the medians of the same rounds, then each round's and
#             their median; how the first two CPUs
#             stood to each other before each round and after the last (bench/cpu_link.sh)
#   memory    ampbench's comparable peak for BERT-base at sequence 128, batches 8 and 32, fp32 and
#             amp, by category; and the largest batch that fits in 8 GB (--find-max-batch) in each
#   accuracy  the MiniLM checkpoint fine-tuned on the first 2,000 SST-2 rows for one epoch (63
#             steps) at lr 1e-4 with 6 warm-up steps, dev accuracy (872 rows) for seeds 1-3, each
#             tool's mean and the difference. (At BERT-base's 2e-5 both tools stay at the majority
#             class in 63 steps, 51.0% and 51.2%, loss 0.682 in both: agreement that shows nothing.)
# Prints tables; the raw JSON stays in OUT.
# usage: bench/cpu_bert.sh [--build DIR] [--out DIR] [--repeats R] [--steps S] [--threads T]
#                          [--parts speed,memory,accuracy] [--minilm DIR]
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=$root/build out="" repeats=5 steps=6 threads=$(nproc) parts=speed,memory,accuracy minilm=""
while [ $# -gt 0 ]; do
    case "$1" in
    --build) build=$2; shift 2 ;; --out) out=$2; shift 2 ;; --repeats) repeats=$2; shift 2 ;;
    --steps) steps=$2; shift 2 ;; --threads) threads=$2; shift 2 ;; --parts) parts=$2; shift 2 ;;
    --minilm) minilm=$2; shift 2 ;;
    -h | --help) sed -n '2,20p' "$0"; exit 0 ;;
    *) echo "cpu_bert.sh: unknown argument '$1'" >&2; exit 2 ;;
    esac
done
out=${out:-$(mktemp -d /tmp/ab_cpu_bert.XXXXXX)}
mkdir -p "$out"
ampbench=$build/ampbench
[ -x "$ampbench" ] || { echo "cpu_bert.sh: $ampbench: build first" >&2; exit 2; }
if [ -z "$minilm" ]; then
    data=$(sed -n 's/^AB_DATA_ROOT:PATH=//p' "$build/CMakeCache.txt" 2>/dev/null)
    minilm=${data:-$root/../shared/data}/all-MiniLM-L6-v2
fi
[ -r "$minilm/model.safetensors" ] || { echo "cpu_bert.sh: $minilm: no MiniLM checkpoint (scripts/fetch_data.sh minilm)" >&2; exit 2; }
py=""
for p in "${AB_PYTHON:-}" python3 /usr/bin/python3; do
    [ -n "$p" ] && "$p" -c 'import torch, transformers' 2>/dev/null && { py=$p; break; }
done
peer=$root/peers/bert_glue.py
field() { "${py:-python3}" -c 'import json, sys; print(json.load(open(sys.argv[1]))[sys.argv[2]])' "$1" "$2"; }
# the steps after the first (the timed part) that the loss scaler skipped, from the record: a
# skipped step has no update, so a run that skipped some is said under its row
skipped_timed() {
    "${py:-python3}" -c 'import json, sys
r = json.load(open(sys.argv[1]))
print(sum(1 for e in r["mixed_precision"]["overflow_events"] if e["step"] >= 1))' "$1"
}
mean() { awk '{ s += $1 } END { printf "%.2f", s / NR }'; }
has() { case ",$parts," in *",$1,"*) return 0 ;; esac; return 1; }
cpu=$(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -1)
echo "cpu_bert.sh: $cpu, $threads threads; PyTorch: $([ -n "$py" ] && "$py" -c 'import torch, transformers; print(torch.__version__, "+ transformers", transformers.__version__)' || echo "not importable (no peer columns)")"

. "$root/bench/cpu_link.sh"
# the recipe both tools run (models/registry.c's bert recipe written out)
recipe=(--lr 2e-5 --weight-decay 0.01 --lr-schedule linear --clip-grad-norm 1 --threads "$threads" --quiet)

if has speed; then
    echo
    echo "Training sequences/s, median of $repeats runs of $steps steps (the first untimed):"
    printf '%-10s %4s %5s %-5s %16s %16s %8s\n' model seq batch prec "ampbench seq/s" "PyTorch seq/s" ratio
    for cfg in "minilm 64 32" "bert-base 128 8"; do
        read -r name L B <<<"$cfg"
        if [ "$name" = minilm ]; then model=(--model bert --init-from "$minilm"); else model=(--model bert-base); fi
        common=("${model[@]}" --dataset sst2 --max-seq-len "$L" --batch-size "$B" --max-steps "$steps" --epochs 1
                --train-subset $((B * steps)) --test-subset 32 --timing-skip-steps 1 "${recipe[@]}")
        # the precisions take turns within each repeat, so that the machine's drift over the minutes
        # moves all three alike: the AMP / FP32 and bf16 / FP32 times are medians of the same rounds
        declare -A RUNS_AB=() RUNS_PT=() NOTES=() MA=()
        LINKS=""
        for r in $(seq 1 "$repeats"); do
            LINKS+="$(cpu_link_reading "$build") "
            for prec in fp32 amp bf16; do
                "$ampbench" train "${common[@]}" --precision "$prec" --out "$out/ab_${name}_${prec}_$r.json" >/dev/null
                RUNS_AB[$prec]+="$(field "$out/ab_${name}_${prec}_$r.json" samples_per_s) "
                k=$(skipped_timed "$out/ab_${name}_${prec}_$r.json")
                [ "$k" -eq 0 ] || NOTES[$prec]+="  (run $r of $name $prec: the loss scaler skipped $k of its $((steps - 1)) timed steps; its speed counts steps without an update)"$'\n'
                if [ -n "$py" ] && [ "$prec" != amp ]; then
                    "$py" "$peer" "${common[@]}" --device cpu --precision "$prec" --out "$out/pt_${name}_${prec}_$r.json" \
                        >/dev/null 2>"$out/pt_${name}_${prec}.err" && RUNS_PT[$prec]+="$(field "$out/pt_${name}_${prec}_$r.json" samples_per_s) "
                fi
            done
        done
        for prec in fp32 amp bf16; do
            read -r -a a <<<"${RUNS_AB[$prec]}"
            read -r -a b <<<"${RUNS_PT[$prec]:-}"
            ma=$(printf '%s\n' "${a[@]}" | median)
            MA[$prec]=$ma
            mb=$([ ${#b[@]} -gt 0 ] && printf '%s\n' "${b[@]}" | median || echo -)
            ratio=$([ "$mb" != - ] && awk -v x="$ma" -v y="$mb" 'BEGIN { printf "%.2fx", x / y }' || echo -)
            printf '%-10s %4d %5d %-5s %16.2f %16s %8s\n' "$name" "$L" "$B" "$prec" "$ma" \
                "$([ "$mb" = - ] && echo - || printf '%.2f' "$mb")" "$ratio"
            [ -z "${NOTES[$prec]:-}" ] || printf '%s' "${NOTES[$prec]}"
            echo "  $name $prec runs: ampbench ${a[*]}${b[*]:+; PyTorch ${b[*]}}" >>"$out/runs.txt"
        done
        awk -v m="$name" -v f="${MA[fp32]}" -v a="${MA[amp]}" -v b="${MA[bf16]}" \
            'BEGIN { printf "%-10s AMP / FP32 time %.2fx, bf16 / FP32 %.2fx (medians of the same rounds)\n", m, f / a, f / b }'
        round_ratios "$(printf '%-10s ' "$name")" AMP "${RUNS_AB[fp32]}" "${RUNS_AB[amp]}"
        round_ratios "$(printf '%-10s ' "$name")" bf16 "${RUNS_AB[fp32]}" "${RUNS_AB[bf16]}"
        LINKS+=$(cpu_link_reading "$build")
        cpu_link_report "$(printf '%-10s ' "$name")" "$name" "$LINKS" "$out/runs.txt"
        unset RUNS_AB RUNS_PT NOTES MA
    done
fi

if has memory; then
    echo
    echo "ampbench comparable peak memory, BERT-base at sequence 128 (MB; the set-up and one step; cpu_scratch counted apart, not in the total):"
    printf '%-5s %5s %9s %9s %9s %9s %9s %9s %9s %11s\n' prec batch weights master grads optimizer activ workspace total cpu_scratch
    for B in 8 32; do
        for prec in fp32 amp; do
            "$ampbench" train --model bert-base --dataset sst2 --max-seq-len 128 --precision "$prec" --batch-size "$B" \
                --max-steps 1 --train-subset "$B" --test-subset 8 "${recipe[@]}" --out "$out/mem_${B}_$prec.json" >/dev/null
            "${py:-python3}" - "$out/mem_${B}_$prec.json" "$prec" "$B" <<'EOF'
import json, sys
r = json.load(open(sys.argv[1]))["peak_memory_bytes"]
keys = ["parameters", "master_weights", "gradients", "optimizer_state", "activations", "workspace", "total"]
print("%-5s %5s " % (sys.argv[2], sys.argv[3]) + " ".join("%9.1f" % (r.get(k, 0) / 1e6) for k in keys) +
      " %11.1f" % (r.get("cpu_scratch", 0) / 1e6))
EOF
        done
        "${py:-python3}" -c 'import json, sys
a, b = (json.load(open(p))["peak_memory_bytes"]["total"] for p in sys.argv[1:3])
print("batch %s: amp saves %.1f%% of the fp32 peak (the ResNet-50 article: 37.5%%)" % (sys.argv[3], 100 * (1 - b / a)))' \
            "$out/mem_${B}_fp32.json" "$out/mem_${B}_amp.json" "$B"
    done
    echo "The largest batch that fits in 8 GB (8 GiB, --memory-limit 8G), BERT-base at sequence 128:"
    for prec in fp32 amp; do
        "$ampbench" train --model bert-base --dataset sst2 --max-seq-len 128 --precision "$prec" --train-subset 64 \
            --test-subset 8 "${recipe[@]}" --memory-limit 8G --find-max-batch --out "$out/fit_$prec.json" | grep '^largest'
    done
fi

if has accuracy; then
    echo
    echo "MiniLM fine-tuned on the first 2,000 SST-2 rows, one epoch (batch 32, sequence 64, lr 1e-4, 6 warm-up steps), dev accuracy (872 rows):"
    acc=(--model bert --init-from "$minilm" --dataset sst2 --max-seq-len 64 --batch-size 32 --epochs 1
         --train-subset 2000 --log-interval 1000 "${recipe[@]}" --lr 1e-4 --warmup-steps 6)
    a=() b=()
    for seed in 1 2 3; do
        "$ampbench" train "${acc[@]}" --seed "$seed" --out "$out/acc_ab_$seed.json" >/dev/null
        a+=("$(field "$out/acc_ab_$seed.json" final_test_accuracy)")
        if [ -n "$py" ]; then
            "$py" "$peer" "${acc[@]}" --device cpu --seed "$seed" --out "$out/acc_pt_$seed.json" >/dev/null 2>"$out/acc_pt.err" &&
                b+=("$(field "$out/acc_pt_$seed.json" final_test_accuracy)")
        fi
    done
    ma=$(printf '%s\n' "${a[@]}" | mean)
    printf 'ampbench  seeds 1-3: %s  mean %s%%\n' "${a[*]}" "$ma"
    if [ ${#b[@]} -gt 0 ]; then
        mb=$(printf '%s\n' "${b[@]}" | mean)
        printf 'PyTorch   seeds 1-3: %s  mean %s%%\n' "${b[*]}" "$mb"
        awk -v x="$ma" -v y="$mb" 'BEGIN { d = x - y; printf "difference of the means: %+.2f points (within 1.5: %s)\n", d, (d <= 1.5 && d >= -1.5) ? "yes" : "no" }'
    fi
fi
echo "raw results: $out"
