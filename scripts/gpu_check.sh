#!/usr/bin/env bash
# The GPU check, one command on a GPU machine: runs the GPU tests (every CUDA op, cuDNN layer and
# transformer op against the CPU backend, GPU/CPU training parity), trains the MNIST MLP one epoch
# and ResNet-50 (both stems) for AB_RESNET_STEPS steps on a CIFAR-10 subset, BERT-base for
# AB_BERT_STEPS steps on SST-2 (batch 32, sequence 128), each in fp32 and in amp, with ampbench and
# with the PyTorch peers; under an 8 GiB cap, whether BERT-base fits at batch 32 in each precision
# (both tools: the peer caps PyTorch's allocator) and ampbench's largest batch that fits; then a
# comparison table (samples/s, epoch time, peak memory, accuracy, overflow events, fit). Well
# within 5 minutes on an A100/H100-class GPU.
# Works from a bundle (scripts/bundle.sh) or from a source checkout with a CUDA build.
# Usage: scripts/gpu_check.sh [--out DIR] [--build DIR] [--data DIR] [--no-peer]
#   --out    where logs, JSON results and the table go [results/gpu/<UTC date>-<device>/]
#   --build  the build folder of a source checkout [build]
#   --data   MNIST IDX folder [the bundle's data/mnist, else $AB_MNIST_DIR, else ../shared/data/mnist]
#   --cifar  CIFAR-10 folder [the bundle's data/cifar10, else $AB_CIFAR10_DIR, else ../shared/data/cifar10]
#   --glue   folder holding SST-2/ [the bundle's data/glue, else ../shared/data/glue]; BERT's vocabulary
#            is the bundle's data/bert-base-uncased/vocab.txt, else ../shared/data's
# Exit status: 0 when every step passed, 1 otherwise (the table is printed either way).
set -uo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
out="" build="" data="" cifar="" glue="" peer=1
steps_resnet=${AB_RESNET_STEPS:-40} steps_bert=${AB_BERT_STEPS:-30}
while [ $# -gt 0 ]; do
    case "$1" in
    --out) out=$2; shift 2 ;;
    --build) build=$2; shift 2 ;;
    --data) data=$2; shift 2 ;;
    --cifar) cifar=$2; shift 2 ;;
    --glue) glue=$2; shift 2 ;;
    --no-peer) peer=0; shift ;;
    -h | --help) sed -n '2,19p' "$0"; exit 0 ;;
    *) echo "gpu_check.sh: unknown argument '$1' (see --help)" >&2; exit 2 ;;
    esac
done

if [ -f "$root/env.sh" ]; then # a bundle
    mode=bundle
    ampbench=$root/bin/ampbench
    tests=("$root/bin/test_cuda_ops" "$root/bin/test_cuda_layers" "$root/bin/test_cuda_transformer" "$root/bin/test_cuda_train")
    data=${data:-$root/data/mnist}
    cifar=${cifar:-$root/data/cifar10}
    glue=${glue:-$root/data/glue} vocab=$root/data/bert-base-uncased/vocab.txt
    # shellcheck disable=SC1091
    . "$root/env.sh"
else
    mode=source
    build=${build:-$root/build}
    ampbench=$build/ampbench
    tests=("$build/tests/gpu/test_cuda_ops" "$build/tests/gpu/test_cuda_layers" "$build/tests/gpu/test_cuda_transformer"
           "$build/tests/gpu/test_cuda_train")
    data=${data:-${AB_MNIST_DIR:-$root/../shared/data/mnist}}
    cifar=${cifar:-${AB_CIFAR10_DIR:-$root/../shared/data/cifar10}}
    glue=${glue:-$root/../shared/data/glue} vocab=$root/../shared/data/bert-base-uncased/vocab.txt
fi
export AB_MNIST_DIR=$data AB_CIFAR10_DIR=$cifar AB_GLUE_DIR=$glue AB_VOCAB=$vocab
peer_py=$root/bench/pytorch/mnist_mlp.py peer_resnet=$root/bench/pytorch/cifar_resnet50.py
peer_bert=$root/bench/pytorch/bert_glue.py
[ -x "$ampbench" ] || { echo "gpu_check.sh: $ampbench not found (build first, or run scripts/bundle.sh)" >&2; exit 2; }

device=$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1)
device=${device:-unknown-gpu}
slug=$(echo "$device" | tr 'A-Z' 'a-z' | tr -cs 'a-z0-9' '-' | sed 's/^-//; s/-$//')
out=${out:-$root/results/gpu/$(date -u +%Y%m%d-%H%M)-$slug}
mkdir -p "$out" || exit 2
echo "gpu_check.sh: $mode mode, device '$device', results in $out"
t_start=$(date +%s)

status=0
steps=()
run_step() { # name timeout command... ; log to $out/name.log
    local name=$1 limit=$2
    shift 2
    local t0=$SECONDS rc
    timeout "$limit" "$@" >"$out/$name.log" 2>&1
    rc=$?
    local dt=$((SECONDS - t0))
    local verdict=passed
    if [ $rc -eq 77 ]; then verdict="SKIPPED ($(grep -m1 SKIPPED "$out/$name.log" | cut -c10-220))"; status=1
    elif [ $rc -eq 124 ]; then verdict="TIMED OUT after ${limit}s"; status=1
    elif [ $rc -ne 0 ]; then verdict="FAILED (exit $rc): $(tail -3 "$out/$name.log" | tr '\n' ' ' | cut -c1-300)"; status=1
    fi
    steps+=("$(printf '%-22s %-8s %s' "$name" "${dt}s" "$verdict")")
    echo "  $name: $verdict"
}

{
    echo "device: $device"
    nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv 2>/dev/null
    echo "mode: $mode"
    [ "$mode" = bundle ] && cat "$root/MANIFEST"
    echo "LD_LIBRARY_PATH=${LD_LIBRARY_PATH:-}"
    "$ampbench" --version
} >"$out/environment.txt" 2>&1

echo "gpu_check.sh: GPU tests"
for t in "${tests[@]}"; do run_step "$(basename "$t")" 240 "$t"; done
nogpu=0
grep -q '^SKIPPED: ' "$out/test_cuda_ops.log" 2>/dev/null && ! grep -q 'MNIST' "$out/test_cuda_ops.log" && nogpu=1
if [ $nogpu -eq 1 ]; then
    echo "gpu_check.sh: no usable GPU here ($(grep -m1 '^SKIPPED' "$out/test_cuda_ops.log" | cut -c10-)): no training runs"
    steps+=("training runs           -        not run: no usable GPU")
    peer=0
fi

# ResNet-50: the same settings for both tools (workloads.conf's recipe, a fixed number of steps)
resnet_args=(--batch-size 128 --lr 0.1 --momentum 0.9 --weight-decay 5e-4 --lr-schedule cosine --warmup-steps 10
             --max-steps "$steps_resnet" --epochs 1 --test-subset 1024 --log-interval 10)
[ $nogpu -eq 0 ] && echo "gpu_check.sh: the MLP (one epoch) and ResNet-50 ($steps_resnet steps), ampbench and the PyTorch peer"
for prec in fp32 amp; do
    [ $nogpu -eq 1 ] && break
    # with a gradient census every 100 steps: the CUDA census kernel inside a real training run
    run_step "ampbench_mlp_$prec" 120 "$ampbench" train --device cuda --precision "$prec" --epochs 1 --data "$data" \
        --grad-census 100 --out "$out/ampbench_mlp_$prec.json"
    for m in resnet50-cifar resnet50; do
        run_step "ampbench_${m}_$prec" 240 "$ampbench" train --device cuda --model "$m" --dataset cifar10 \
            --data "$cifar" --precision "$prec" "${resnet_args[@]}" --out "$out/ampbench_${m}_$prec.json"
    done
done
# BERT-base on SST-2 (BERT's initialisation: the checkpoint is too big to carry), workloads.conf's
# recipe, and the articles' question: does it fit in 8 GB at batch 32, and what batch does
bert_args=(--model bert-base --dataset sst2 --data "$glue/SST-2" --vocab "$vocab" --max-seq-len 128 --batch-size 32
           --lr 2e-5 --weight-decay 0.01 --lr-schedule linear --clip-grad-norm 1 --max-steps "$steps_bert" --epochs 1
           --train-subset $((32 * steps_bert)) --test-subset 256 --log-interval 10 --memory-limit 8G)
[ $nogpu -eq 0 ] && echo "gpu_check.sh: BERT-base ($steps_bert steps, batch 32, sequence 128, under 8 GiB)"
for prec in fp32 amp; do
    [ $nogpu -eq 1 ] && break
    # exit 3: it did not fit (a measured answer, recorded in the JSON), not a failure of the check
    run_step "ampbench_bert-base_$prec" 300 bash -c '"$@"; rc=$?; [ $rc -eq 3 ] && echo "did not fit" && rc=0; exit $rc' _ \
        "$ampbench" train --device cuda "${bert_args[@]}" --precision "$prec" --out "$out/ampbench_bert-base_$prec.json"
    run_step "ampbench_bert-base_${prec}_fit" 300 "$ampbench" train --device cuda "${bert_args[@]}" --precision "$prec" \
        --find-max-batch --out "$out/ampbench_bert-base_${prec}_fit.json"
done
if [ $peer -eq 1 ]; then
    if python3 -c 'import torch, transformers' 2>/dev/null; then
        for prec in fp32 amp; do
            run_step "pytorch_bert-base_$prec" 300 bash -c '"$@"; rc=$?; [ $rc -eq 3 ] && echo "did not fit" && rc=0; exit $rc' _ \
                python3 "$peer_bert" --device cuda "${bert_args[@]}" --precision "$prec" \
                --out "$out/pytorch_bert-base_$prec.json"
        done
    else
        steps+=("pytorch_bert-base       -        SKIPPED (python3 has no Hugging Face transformers: the BERT peer cannot run)")
    fi
fi
if [ $peer -eq 1 ]; then
    if python3 -c 'import torch' 2>/dev/null; then
        for prec in fp32 amp; do
            run_step "pytorch_mlp_$prec" 150 python3 "$peer_py" --device cuda --precision "$prec" --epochs 1 \
                --data "$data" --out "$out/pytorch_mlp_$prec.json"
            for m in resnet50-cifar resnet50; do
                run_step "pytorch_${m}_$prec" 300 python3 "$peer_resnet" --device cuda --model "$m" --data "$cifar" \
                    --precision "$prec" "${resnet_args[@]}" --out "$out/pytorch_${m}_$prec.json"
            done
        done
    else
        steps+=("pytorch                 -        SKIPPED (python3 has no torch)")
        status=1
    fi
fi

table() {
    python3 - "$out" <<'EOF'
import json, os, sys
out = sys.argv[1]
rows = []
MODELS = ("mlp", "resnet50-cifar", "resnet50", "bert-base")
for model in MODELS:
    for tool in ("ampbench", "pytorch"):
        for prec in ("fp32", "amp"):
            p = os.path.join(out, "%s_%s_%s.json" % (tool, model, prec))
            if not os.path.exists(p):
                continue
            try:
                r = json.load(open(p))
            except Exception as e:
                rows.append((model, tool, prec, "unreadable: %s" % e))
                continue
            ep = r["epochs"][0] if r.get("epochs") else {}
            mem = r.get("peak_memory_bytes", {}).get("total") or 0
            drv = r.get("gpu", {}).get("driver_used_bytes_by_run")
            rows.append((model, tool, prec, "%10.0f %9.3f %8.3f %11.1f %11s %8.2f %9d" % (
                r.get("samples_per_s") or 0, ep.get("time_s") or 0, ep.get("data_time_s") or 0, mem / 2**20,
                "%.1f" % (drv / 2**20) if drv is not None else "-", r.get("final_test_accuracy") or 0,
                len(r.get("mixed_precision", r.get("amp", {})).get("overflow_events", [])))))
print("%-15s %-9s %-5s %10s %9s %8s %11s %11s %8s %9s" % ("model", "tool", "prec", "samples/s", "epoch s", "data s",
                                                          "peak MiB", "driver MiB", "acc %", "overflows"))
for m, t, p, s in rows:
    print("%-15s %-9s %-5s %s" % (m, t, p, s))
def sps(tool, model, prec):
    try:
        return json.load(open(os.path.join(out, "%s_%s_%s.json" % (tool, model, prec))))["samples_per_s"]
    except Exception:
        return None
def peak(tool, model, prec):
    try:
        return json.load(open(os.path.join(out, "%s_%s_%s.json" % (tool, model, prec))))["peak_memory_bytes"]["total"]
    except Exception:
        return None
for model in MODELS:
    goal = ">= 3x" if model == "mlp" else ">= 1x"
    for prec in ("fp32", "amp"):
        a, b = sps("ampbench", model, prec), sps("pytorch", model, prec)
        if a and b:
            print("%s: ampbench / pytorch, %s: %.2fx samples/s (goal: %s)" % (model, prec, a / b, goal))
    for tool in ("ampbench", "pytorch"):
        a, b = sps(tool, model, "amp"), sps(tool, model, "fp32")
        ma, mb = peak(tool, model, "amp"), peak(tool, model, "fp32")
        if a and b:
            print("%s: %s amp / fp32: %.2fx samples/s%s" % (model, tool, a / b,
                  ", peak memory saving %.1f%%" % (100 * (1 - ma / mb)) if ma and mb else ""))
for prec in ("fp32", "amp"):  # BERT-base under 8 GiB: the articles' "FP32 does not fit, AMP does"
    for tool in ("ampbench", "pytorch"):
        try:
            r = json.load(open(os.path.join(out, "%s_bert-base_%s.json" % (tool, prec))))
        except Exception:
            continue
        fit = r.get("fits_in_memory")
        print("bert-base %s %s at batch 32 under 8 GiB: %s" % (prec, tool, "fits" if fit else "does NOT fit"
              if fit is False else "not recorded"))
    try:
        f = json.load(open(os.path.join(out, "ampbench_bert-base_%s_fit.json" % prec)))
        print("bert-base %s ampbench: largest batch that fits 8 GiB: %d (%.0f MiB)" % (
            prec, f["max_batch"], f["peak_memory_at_max_batch_bytes"] / 2**20))
    except Exception:
        pass
print("peak MiB: tracked allocator (ampbench; data set excluded) / max_memory_allocated less the resident data set "
      "(pytorch); driver MiB: cudaMemGetInfo growth over the run, context excluded")
EOF
}

{
    echo "GPU check: $device, $(date -u +%Y-%m-%dT%H:%M:%SZ), $mode mode, $(($(date +%s) - t_start)) s"
    echo
    printf '%s\n' "${steps[@]}"
    echo
    table 2>&1 || echo "(no python3 to draw the table: see the JSON files)"
} | tee "$out/summary.txt"
exit $status
