#!/usr/bin/env bash
# The GPU check: what a GPU machine is asked, most important answers first, each written to
# summary.txt the moment its step ends, so that a run cut at any point has already returned them:
#   1. canary          the bundle's ampbench runs at all: 20 CPU steps of the MLP (every machine)
#   2. ops_backend     test_backend_ops: every op of the table (core/backend_ops.def) on the CPU
#                      against its double-precision reference, then on the GPU against the CPU
#   3. nccl_single     the NCCL engine in one process (a world of one, no mpirun): init, all-reduce
#                      fp32/fp16/bf16 SUM and AVG, broadcast, a split into a group of one
#                      (ncclCommSplit, the model parallelism's groups), teardown
#   4. step_*          one training step of the MLP, ResNet-50 (both stems) and BERT-base in fp32,
#                      amp and bf16 on the GPU and the CPU from the same weights and batch: first
#                      loss and first update (tests/gpu/test_cuda_step)
#   5. train_parity    several steps of the MLP, resnet-tiny and bert-tiny against the CPU, and the
#                      loss scaler's skip-and-halve on the GPU (test_cuda_train)
#   6. memcheck_ops    test_backend_ops's transformer group under compute-sanitizer --tool memcheck
#   7. ampbench_*      throughput and peak memory (ampbench's tracked allocator beside the driver's
#                      cudaMemGetInfo growth): the MLP one epoch (with a gradient census every 100
#                      steps), ResNet-50 both stems AB_RESNET_STEPS (40) steps, BERT-base
#                      AB_BERT_STEPS (30) steps at batch 32 under an 8 GiB cap, fp32 and amp
#   8. pytorch_*       the PyTorch peers on the same runs (max_memory_allocated)
#   9. *_fit           --find-max-batch for BERT-base under 8 GiB, fp32 and amp
# then a comparison table. Works from a bundle (scripts/bundle.sh; the programs run through its
# bin/ wrappers, which alone see the bundle's libraries: the peers keep the machine's own) or from
# a source checkout with a CUDA build.
# Usage: scripts/gpu_check.sh [--out DIR] [--deadline SECONDS] [--build DIR] [--data DIR]
#                             [--cifar DIR] [--glue DIR] [--no-peer]
#   --out       where logs, JSON records and summary.txt go [results/gpu/<UTC date>-<device>/]
#   --deadline  the whole check ends within this many seconds: each step gets at most what is left
#               (less a margin), steps past it are listed as not run [$AB_GPU_DEADLINE, else none]
#   --build     the build folder of a source checkout [build]
#   --data      MNIST IDX folder [the bundle's data/mnist, else $AB_MNIST_DIR, else ../shared/data/mnist]
#   --cifar     CIFAR-10 folder [the bundle's data/cifar10, else $AB_CIFAR10_DIR, else ../shared's]
#   --glue      folder holding SST-2/ [the bundle's data/glue, else ../shared/data/glue]; BERT's
#               vocabulary is the bundle's data/bert-base-uncased/vocab.txt, else ../shared/data's
#   --no-peer   leave the PyTorch peers out
# summary.txt: a header (device, date, source), then one line per step: name, status (passed,
# FAILED, SKIPPED, TIMED-OUT, NOT-RUN), seconds, and the step's one figure. On a machine without
# a usable GPU every GPU step is listed as SKIPPED with the reason. AB_CHECK_PLANT_HANG=STEP makes
# that step hang (the delivery test's way of checking the deadline). AB_CHECK_ONLY=REGEX runs only
# the steps whose names match it (grep -E), e.g. 'pytorch_bert|_fit' for the steps a deadline cut;
# the header names it and the others are left out of the summary.
# Exit status: 0 when every step passed, 1 otherwise, 2 on bad arguments.
set -uo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
out="" build="" data="" cifar="" glue="" peer=1 deadline=${AB_GPU_DEADLINE:-0}
steps_resnet=${AB_RESNET_STEPS:-40} steps_bert=${AB_BERT_STEPS:-30}
while [ $# -gt 0 ]; do
    case "$1" in
    --out) out=$2; shift 2 ;;
    --deadline) deadline=$2; shift 2 ;;
    --build) build=$2; shift 2 ;;
    --data) data=$2; shift 2 ;;
    --cifar) cifar=$2; shift 2 ;;
    --glue) glue=$2; shift 2 ;;
    --no-peer) peer=0; shift ;;
    -h | --help) sed -n '2,40p' "$0"; exit 0 ;;
    *) echo "gpu_check.sh: unknown argument '$1' (see --help)" >&2; exit 2 ;;
    esac
done
case "$deadline" in '' | *[!0-9]*) echo "gpu_check.sh: --deadline '$deadline' is not a whole number of seconds" >&2; exit 2 ;; esac

if [ -f "$root/env.sh" ]; then # a bundle: its programs through the wrappers, which set the library path
    mode=bundle
    bin=$root/bin
    data=${data:-$root/data/mnist}
    cifar=${cifar:-$root/data/cifar10}
    glue=${glue:-$root/data/glue} vocab=$root/data/bert-base-uncased/vocab.txt
else
    mode=source
    build=${build:-$root/build}
    data=${data:-${AB_MNIST_DIR:-$root/../shared/data/mnist}}
    cifar=${cifar:-${AB_CIFAR10_DIR:-$root/../shared/data/cifar10}}
    glue=${glue:-$root/../shared/data/glue} vocab=$root/../shared/data/bert-base-uncased/vocab.txt
fi
prog() { # the path of a program of the check
    if [ "$mode" = bundle ]; then echo "$bin/$1"
    elif [ "$1" = ampbench ]; then echo "$build/ampbench"
    elif [ "$1" = test_comm ]; then echo "$build/tests/dp/test_comm"
    elif [ "$1" = test_backend_ops ]; then echo "$build/tests/ops/test_backend_ops"
    else echo "$build/tests/gpu/$1"
    fi
}
export AB_MNIST_DIR=$data AB_CIFAR10_DIR=$cifar AB_GLUE_DIR=$glue AB_VOCAB=$vocab
ampbench=$(prog ampbench)
[ -x "$ampbench" ] || { echo "gpu_check.sh: $ampbench not found (build first, or run scripts/bundle.sh)" >&2; exit 2; }

device=$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1)
device=${device:-no-gpu}
slug=$(echo "$device" | tr 'A-Z' 'a-z' | sed 's/^nvidia //' | tr -cs 'a-z0-9' '-' | sed 's/^-//; s/-$//')
out=${out:-$root/results/gpu/$(date -u +%Y-%m-%d)-$slug}
mkdir -p "$out" || exit 2
summary=$out/summary.txt
t_start=$(date +%s)
deadline_at=0
[ "$deadline" -gt 0 ] && deadline_at=$((t_start + deadline))
margin=8 # seconds kept back from the deadline for the table and the packing

source_line() {
    if [ "$mode" = bundle ]; then sed -n 's/^source: //p' "$root/MANIFEST"
    else
        local c d
        c=$(git -c 'safe.directory=*' -C "$root" rev-parse HEAD 2>/dev/null || echo unknown)
        d=$(git -c 'safe.directory=*' -C "$root" status --porcelain --untracked-files=no 2>/dev/null | head -c1)
        echo "$c${d:+ (with uncommitted changes)}"
    fi
}
{
    echo "GPU check"
    echo "device: $device"
    echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
    echo "mode: $mode"
    echo "source: $(source_line)"
    echo "deadline: $([ "$deadline" -gt 0 ] && echo "${deadline} s" || echo none)"
    [ -n "${AB_CHECK_ONLY:-}" ] && echo "only: the steps matching '$AB_CHECK_ONLY' (AB_CHECK_ONLY)"
    echo
    printf '%-30s %-9s %6s  %s\n' step status seconds figure
} >"$summary"
echo "gpu_check.sh: $mode mode, device '$device', results in $out"

{
    echo "device: $device"
    nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv 2>&1
    echo "mode: $mode"
    [ "$mode" = bundle ] && cat "$root/MANIFEST"
    echo
    if [ "$mode" = bundle ]; then
        echo "LD_LIBRARY_PATH of the bundle's programs (env.sh): $(bash -c '. "$1/env.sh"; echo "$LD_LIBRARY_PATH"' _ "$root")"
        echo "bin/ldd-check:"
        "$bin/ldd-check" 2>&1 && echo "  every library found"
        for p in "$root"/libexec/*; do
            echo "ldd $(basename "$p"):"
            bash -c '. "$1/env.sh"; ldd "$2"' _ "$root" "$p" 2>&1 | sed 's/^/  /'
        done
    fi
    echo "LD_LIBRARY_PATH of the check and the PyTorch peers: ${LD_LIBRARY_PATH:-(unset)}"
    echo "python3: $(command -v python3) $(python3 -c 'import torch, sys; print("torch", torch.__version__)' 2>&1 | tail -1)"
    "$ampbench" --version
} >"$out/environment.txt" 2>&1

status=0 gpu_ok=1 current="" child="" step_t0=0
line() { # name status seconds figure
    printf '%-30s %-9s %6s  %s\n' "$1" "$2" "$3" "$4" >>"$summary"
    echo "  $1: $2${4:+ ($4)}"
}
on_term() { # a signal (the outer deadline, Ctrl-C): end the step, say so, keep what was written
    if [ -n "$child" ]; then
        kill -TERM "$child" 2>/dev/null # timeout passes it on to the step's command
        wait "$child" 2>/dev/null
    fi
    [ -n "$current" ] && line "$current" TIMED-OUT "$((SECONDS - step_t0))" "the check was stopped by a signal during this step"
    echo "stopped: the check was ended by a signal after $(($(date +%s) - t_start)) s" >>"$summary"
    exit 1
}
trap on_term TERM INT

cap_log() { # keeps a log under 2 MiB: its first and last MiB
    local f=$1
    if [ -f "$f" ] && [ "$(stat -c %s "$f")" -gt 2097152 ]; then
        { head -c 1048576 "$f"; printf '\n[... cut: %s bytes in all ...]\n' "$(stat -c %s "$f")"; tail -c 1048576 "$f"; } >"$f.cut"
        mv "$f.cut" "$f"
    fi
}

# run_step NAME CAP FIGURE-FUNCTION COMMAND...: runs the command under min(CAP, what is left of the
# deadline), logs to NAME.log, writes the summary line with the figure the function extracts
run_step() {
    local name=$1 cap=$2 fig=$3
    shift 3
    if [ -n "${AB_CHECK_ONLY:-}" ] && ! grep -qE -- "$AB_CHECK_ONLY" <<<"$name"; then return 0; fi
    local limit=$cap now
    now=$(date +%s)
    if [ "$deadline_at" -gt 0 ]; then
        local left=$((deadline_at - now - margin))
        if [ "$left" -lt 5 ]; then
            line "$name" NOT-RUN 0 "the deadline (${deadline} s) was reached first"
            status=1
            return
        fi
        [ "$left" -lt "$limit" ] && limit=$left
    fi
    current=$name step_t0=$SECONDS
    local rc
    # in the background and waited for, so that a signal reaches on_term at once
    if [ "${AB_CHECK_PLANT_HANG:-}" = "$name" ]; then
        timeout -k 5 "$limit" sleep 100000 >"$out/$name.log" 2>&1 &
    else
        timeout -k 5 "$limit" "$@" >"$out/$name.log" 2>&1 &
    fi
    child=$!
    wait "$child"
    rc=$?
    current="" child=""
    local dt=$((SECONDS - step_t0)) verdict=passed figure
    cap_log "$out/$name.log"
    figure=$("$fig" "$name" 2>/dev/null | head -1 | cut -c1-200)
    if [ $rc -eq 77 ]; then
        verdict=SKIPPED
        figure=$(grep -m1 '^SKIPPED' "$out/$name.log" | cut -c10-200)
        status=1
    elif [ $rc -eq 124 ] || [ $rc -eq 137 ]; then
        verdict=TIMED-OUT
        figure="cut after ${limit} s$([ "$limit" -lt "$cap" ] && echo " (the deadline)")"
        status=1
    elif [ $rc -ne 0 ]; then
        verdict=FAILED
        figure="exit $rc: $(grep -m1 -E '^FAIL|error|Error|ampbench:' "$out/$name.log" | cut -c1-160)"
        [ "$figure" = "exit $rc: " ] && figure="exit $rc: $(tail -1 "$out/$name.log" | cut -c1-160)"
        status=1
    fi
    line "$name" "$verdict" "$dt" "$figure"
    return $rc
}

# a GPU step on a machine without a usable GPU: listed, with the reason
gpu_step() {
    if [ $gpu_ok -eq 0 ]; then
        line "$1" SKIPPED 0 "no usable GPU (ops_backend says why)"
        status=1
        return 77
    fi
    run_step "$@"
}
peer_step() {
    local name=$1
    if [ $peer -eq 0 ]; then return 0; fi
    if [ $gpu_ok -eq 1 ] && ! python3 -c 'import torch' >/dev/null 2>&1; then
        line "$name" SKIPPED 0 "python3 has no torch"
        status=1
        return 77
    fi
    gpu_step "$@"
}

# ---- figures: one number or phrase per step, read from its log or record ----
fig_none() { :; }
fig_ops() { # "412 checks ok" (one ok line per case) or the first failure
    local f=$out/$1.log n
    n=$(grep -c '^ok' "$f")
    if grep -q '^FAIL' "$f"; then echo "$(grep -c '^FAIL' "$f") failing, first: $(grep -m1 '^FAIL' "$f" | cut -c6-150)"
    else echo "$n checks ok"; fi
}
fig_step() { grep -m1 -E '^(ok|FAIL) +step' "$out/$1.log" | sed -E 's/^(ok|FAIL) +step //' | cut -c1-300; }
fig_record() { # samples/s and peak memory from NAME.json
    python3 - "$out/$1.json" <<'EOF'
import json, sys
r = json.load(open(sys.argv[1]))
mem = (r.get("peak_memory_bytes") or {}).get("total") or 0
drv = (r.get("gpu") or {}).get("driver_used_bytes_by_run")
acc = r.get("final_test_accuracy")
fit = r.get("fits_in_memory")
print("%.1f samples/s, peak %.0f MiB%s%s%s" % (r.get("samples_per_s") or 0, mem / 2**20,
      ", driver %.0f MiB" % (drv / 2**20) if drv is not None else "",
      ", accuracy %.2f%%" % acc if isinstance(acc, (int, float)) else "",
      "" if fit is None or not r.get("memory_limit_bytes") else
      ", fits %.0f GiB" % (r["memory_limit_bytes"] / 2**30) if fit else
      ", does NOT fit %.0f GiB" % (r["memory_limit_bytes"] / 2**30)))
EOF
}
fig_fit() {
    python3 -c 'import json, sys; r = json.load(open(sys.argv[1])); print("largest batch %d (%.0f MiB)" % (r["max_batch"], r["peak_memory_at_max_batch_bytes"] / 2**20))' \
        "$out/$1.json"
}
fig_resume() { grep -m1 -E '^FAIL|^test_resume:' "$out/$1.log" | cut -c1-200; }
fig_memcheck() { grep -m1 'ERROR SUMMARY' "$out/$1.log"; }

# ---- 1. the bundle's program runs at all (on any machine: the CPU) ----
echo "gpu_check.sh: canary, then the GPU tests"
run_step canary_mlp_cpu 60 fig_record "$ampbench" train --device cpu --precision amp --max-steps 20 --epochs 1 \
    --train-subset 1280 --test-subset 256 --data "$data" --quiet --out "$out/canary_mlp_cpu.json"

# ---- 2. every op against the CPU ----
run_step ops_backend 300 fig_ops "$(prog test_backend_ops)" --require-device
[ $? -eq 77 ] && gpu_ok=0

# ---- 3. NCCL in one process ----
gpu_step nccl_single 60 fig_ops "$(prog test_comm)" nccl

# ---- 4. one step of each workload x precision against the CPU ----
for m in mlp resnet50-cifar resnet50 bert-base; do
    for prec in fp32 amp bf16; do
        gpu_step "step_${m}_$prec" 90 fig_step "$(prog test_cuda_step)" --precision "$prec" "$m"
    done
done

# ---- 5. several steps, and the scaler ----
gpu_step train_parity 180 fig_ops "$(prog test_cuda_train)"

# ---- 6. one op test under compute-sanitizer ----
sanitizer=$(command -v compute-sanitizer || ls /usr/local/cuda/bin/compute-sanitizer 2>/dev/null || true)
if [ $gpu_ok -eq 1 ] && [ -z "$sanitizer" ]; then
    line memcheck_ops SKIPPED 0 "no compute-sanitizer on this machine"
elif [ "$mode" = bundle ]; then # the real program, with the bundle's library path, under the sanitizer
    gpu_step memcheck_ops 150 fig_memcheck bash -c '. "$1/env.sh"; exec "$2" --tool memcheck --error-exitcode 9 "$1/libexec/test_backend_ops" --require-device --group transformer -q' \
        _ "$root" "$sanitizer"
else
    gpu_step memcheck_ops 150 fig_memcheck "$sanitizer" --tool memcheck --error-exitcode 9 "$(prog test_backend_ops)" \
        --require-device --group transformer -q
fi

# ---- 7, 8. throughput and memory, ampbench then the peers ----
# (the first 5 steps untimed on both tools: cuDNN's plans, PyTorch's autotuning and allocator warm-up)
resnet_args=(--batch-size 128 --lr 0.1 --momentum 0.9 --weight-decay 5e-4 --lr-schedule cosine --warmup-steps 10
             --max-steps "$steps_resnet" --epochs 1 --test-subset 1024 --log-interval 10 --timing-skip-steps 5)
bert_args=(--model bert-base --dataset sst2 --data "$glue/SST-2" --vocab "$vocab" --max-seq-len 128 --batch-size 32
           --lr 2e-5 --weight-decay 0.01 --lr-schedule linear --clip-grad-norm 1 --max-steps "$steps_bert" --epochs 1
           --train-subset $((32 * steps_bert)) --test-subset 256 --log-interval 10 --memory-limit 8G --timing-skip-steps 5)
# exit 3 is a measured "did not fit", recorded in the JSON: not a failure of the check
fits_ok() { "$@"; local rc=$?; [ $rc -eq 3 ] && echo "did not fit" && rc=0; return $rc; }
export -f fits_ok
echo "gpu_check.sh: throughput and memory"
for prec in fp32 amp; do
    gpu_step "ampbench_mlp_$prec" 120 fig_record "$ampbench" train --device cuda --precision "$prec" --epochs 1 \
        --data "$data" --grad-census 100 --out "$out/ampbench_mlp_$prec.json"
done
for m in resnet50-cifar resnet50; do
    for prec in fp32 amp; do
        gpu_step "ampbench_${m}_$prec" 180 fig_record "$ampbench" train --device cuda --model "$m" --dataset cifar10 \
            --data "$cifar" --precision "$prec" "${resnet_args[@]}" --out "$out/ampbench_${m}_$prec.json"
    done
done
for prec in fp32 amp; do
    gpu_step "ampbench_bert-base_$prec" 240 fig_record bash -c 'fits_ok "$@"' _ "$ampbench" train --device cuda \
        "${bert_args[@]}" --precision "$prec" --out "$out/ampbench_bert-base_$prec.json"
done
for prec in fp32 amp; do
    peer_step "pytorch_mlp_$prec" 150 fig_record python3 "$root/peers/mnist_mlp.py" --device cuda \
        --precision "$prec" --epochs 1 --data "$data" --out "$out/pytorch_mlp_$prec.json"
done
for m in resnet50-cifar resnet50; do
    for prec in fp32 amp; do
        peer_step "pytorch_${m}_$prec" 240 fig_record python3 "$root/peers/cifar_resnet50.py" --device cuda \
            --model "$m" --data "$cifar" --precision "$prec" "${resnet_args[@]}" --out "$out/pytorch_${m}_$prec.json"
    done
done
for prec in fp32 amp; do
    if [ $peer -eq 1 ] && [ $gpu_ok -eq 1 ] && ! python3 -c 'import transformers' >/dev/null 2>&1; then
        line "pytorch_bert-base_$prec" SKIPPED 0 "python3 has no Hugging Face transformers"
        continue
    fi
    peer_step "pytorch_bert-base_$prec" 240 fig_record bash -c 'fits_ok "$@"' _ python3 "$root/peers/bert_glue.py" \
        --device cuda "${bert_args[@]}" --precision "$prec" --out "$out/pytorch_bert-base_$prec.json"
done

# ---- 9. the largest BERT-base batch under 8 GiB ----
for prec in fp32 amp; do
    gpu_step "ampbench_bert-base_${prec}_fit" 240 fig_fit "$ampbench" train --device cuda "${bert_args[@]}" \
        --precision "$prec" --find-max-batch --out "$out/ampbench_bert-base_${prec}_fit.json"
done

# ---- 10. checkpoints on the GPU: runs killed with SIGKILL and resumed, against runs never stopped
# (tests/checkpoint/test_resume.sh, which first asks whether two runs never stopped agree at all) ----
gpu_step resume_cuda 150 fig_resume env AB_RESUME_DEVICE=cuda AB_RESUME_MNIST="$data" AB_RESUME_CIFAR="$cifar" \
    AB_RESUME_SST2="$glue/SST-2" AB_RESUME_VOCAB="$vocab" bash "$root/tests/checkpoint/test_resume.sh" "$ampbench" - 1

table() {
    python3 - "$out" "$steps_resnet" "$steps_bert" <<'EOF'
import json, os, sys
out = sys.argv[1]
MODELS = ("mlp", "resnet50-cifar", "resnet50", "bert-base")
def rec(tool, model, prec):
    try:
        return json.load(open(os.path.join(out, "%s_%s_%s.json" % (tool, model, prec))))
    except Exception:
        return None
print("%-15s %-9s %-5s %10s %9s %11s %11s %8s %9s %10s" % ("model", "tool", "prec", "samples/s", "epoch s", "peak MiB",
                                                          "driver MiB", "acc %", "overflows", "modelled"))
for model in MODELS:
    for tool in ("ampbench", "pytorch"):
        for prec in ("fp32", "amp"):
            r = rec(tool, model, prec)
            if not r:
                continue
            ep = r["epochs"][0] if r.get("epochs") else {}
            mem = (r.get("peak_memory_bytes") or {}).get("total") or 0
            drv = (r.get("gpu") or {}).get("driver_used_bytes_by_run")
            mp = r.get("mixed_precision", r.get("amp")) or {}
            sm = r.get("step_model") or {}
            wl = r.get("workload") or {}
            bs = (wl.get("batch_size") or 0) * (wl.get("accum_steps") or 1) * (r.get("world_size") or 1)
            modelled = "%.0f" % (bs / sm["step_time_s"]) if sm.get("step_time_s") and bs else "-"
            print("%-15s %-9s %-5s %10.0f %9.3f %11.1f %11s %8.2f %9d %10s" % (
                model, tool, prec, r.get("samples_per_s") or 0, ep.get("time_s") or 0, mem / 2**20,
                "%.1f" % (drv / 2**20) if drv is not None else "-", r.get("final_test_accuracy") or 0,
                len(mp.get("overflow_events", [])), modelled))
for model in MODELS:
    for prec in ("fp32", "amp"):
        a, b = rec("ampbench", model, prec), rec("pytorch", model, prec)
        if a and b and a.get("samples_per_s") and b.get("samples_per_s"):
            print("%s %s: ampbench / pytorch %.2fx samples/s" % (model, prec, a["samples_per_s"] / b["samples_per_s"]))
    for tool in ("ampbench", "pytorch"):
        a, b = rec(tool, model, "amp"), rec(tool, model, "fp32")
        if a and b and a.get("samples_per_s") and b.get("samples_per_s"):
            ma, mb = (a.get("peak_memory_bytes") or {}).get("total"), (b.get("peak_memory_bytes") or {}).get("total")
            print("%s %s: amp / fp32 %.2fx samples/s%s" % (model, tool, a["samples_per_s"] / b["samples_per_s"],
                  ", peak memory %.1f%% less" % (100 * (1 - ma / mb)) if ma and mb else ""))
# the data-parallel patterns projected from this GPU's own step (core/dpmodel.h; one GPU cannot
# measure them: NCCL puts no two ranks on one device)
for model, kind in (("resnet50", "gpus"), ("bert-base", "nodes")):
    r = rec("ampbench", model, "amp")
    m = ((r or {}).get("projection") or {}).get("dp_models") or {}
    if not m.get("rows"):
        continue
    def sp(sync, shards, ov, a):
        s = [x["speedup"] for x in m["rows"] if x["kind"] == kind and x["n"] == 4 and x["sync"] == sync
             and x["shards"] == shards and x["overlap"] == ov and x["accum"] == a]
        return "%.2fx" % s[0] if s and s[0] is not None else "-"
    print("%s amp, PROJECTED at 4 %s from %s (%s buckets): ring %s (no overlap %s, 4 micro-batches %s), "
          "1 server %s, 4 servers %s" % (model, kind, r["projection"].get("step_source"), m.get("buckets"),
          sp("ring", 0, True, 1), sp("ring", 0, False, 1), sp("ring", 0, True, 4), sp("ps", 1, True, 1),
          sp("ps", 4, True, 1)))
print("peak MiB: ampbench's tracked allocator (data set excluded) / PyTorch's max_memory_allocated less the resident "
      "data set; driver MiB: cudaMemGetInfo growth over the run, context excluded")
print("modelled: samples/s of the GPU step model for the same configuration on this GPU (ampbench's records' "
      "step_model, docs/step-model.md): modelled, not measured; it leaves out the host and errs fast")
print("samples/s: the check's short runs (ResNet %s steps, BERT %s, the first 5 untimed; the MLP one epoch): they say "
      "that each path runs and what it holds, not how fast it is; bench/run_all.sh measures speed"
      % (sys.argv[2], sys.argv[3]))
EOF
}

{
    echo
    echo "done: $(($(date +%s) - t_start)) s, $(grep -cE ' (FAILED|TIMED-OUT) ' "$summary") failed or timed out"
    echo
    table 2>&1 || echo "(no python3 to draw the table: see the JSON records)"
} >>"$summary"
echo "gpu_check.sh: $summary"
exit $status
