#!/usr/bin/env bash
# run_all.sh: the front door. Builds ampbench if needed, finds what this machine can run (CPU,
# NVIDIA GPUs, MPI), runs every workload of bench/workloads.conf in FP32, AMP and data-parallel
# AMP, writes each result to results/runs/<date>-<host>/, and ends with REPORT.md and the plots
# (scripts/report). An interrupted run keeps what finished and still gets its report.
# See docs/harness.md.
set -u -o pipefail

# Signals: bash 5.2 can mis-parse a trap's action when the signal lands while it is expanding a
# $( ) ("unexpected EOF while looking for matching `)'"), which kills the script without its
# report. So this script runs as two processes: an outer one that only waits (its trap is safe
# there) and the worker below, which ignores INT/TERM and polls a stop file that the outer one
# writes; the outer one also passes the signal on to the training run in progress.
if [ -z "${AB_RUN_ALL_CTL:-}" ]; then
    AB_RUN_ALL_CTL=$(mktemp -d /tmp/ab_run_all_ctl.XXXXXX)
    export AB_RUN_ALL_CTL
    worker_stop() {
        : > "$AB_RUN_ALL_CTL/stop"
        local pid=""
        [ -s "$AB_RUN_ALL_CTL/child" ] && read -r pid < "$AB_RUN_ALL_CTL/child"
        [ -n "$pid" ] && kill -INT "$pid" 2> /dev/null
    }
    trap worker_stop INT TERM
    "$BASH" "${BASH_SOURCE[0]}" "$@" &
    worker=$!
    wait "$worker"; rc=$?
    while kill -0 "$worker" 2> /dev/null; do wait "$worker"; rc=$?; done
    rm -rf "$AB_RUN_ALL_CTL"
    exit "$rc"
fi
trap '' INT TERM

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)

usage() {
    cat <<EOF
usage: bench/run_all.sh [--quick | --full] [options]
  --quick             a fixed number of optimizer steps per run (default): the config's
                      quick_steps on a GPU (minutes); on a CPU the CPU profile, its cpu_steps
                      and cpu_test columns (all workloads in about 25 minutes on 2 cores)
  --full              the articles' epochs (MLP 10, ResNet-50 50, ...): hours for the large models
  --max-steps N       optimizer steps per run (overrides the profile's steps; 0 = whole epochs)
  --epochs N          epochs per run (overrides the config's full_epochs)
  --seeds N           repeat every training run with seeds 1..N (results <run>-s<seed>.json);
                      REPORT.md gives mean +- sd and the AMP - FP32 delta's 95% interval [1]
  --modes LIST        modes to run, of fp32,amp,amp-ls1,bf16,dp-amp,dp-amp-ps,dp-amp-off,
                      dp-amp-acc4,tp-amp,pp-amp [fp32,amp,dp-amp,tp-amp,pp-amp; on GPUs also
                      dp-amp-ps,dp-amp-off,dp-amp-acc4]
                      (amp-ls1: AMP at a static loss scale of 1, i.e. without loss scaling;
                      dp-amp: the ring, buckets overlapped with backward, as DDP; dp-amp-ps: a
                      parameter server on rank 0; dp-amp-off: the ring after backward;
                      dp-amp-acc4: the ring with 4x the config's micro-batches per sync;
                      tp-amp: the model's matrices split among the --np ranks (tensor
                      parallelism; a model without a split is refused and recorded so);
                      pp-amp: its layers cut into --np pipeline stages, 4x the config's
                      micro-batches a step under 1f1b; docs/parallelism.md)
  --peer-modes LIST   the peers' modes                             [the same as --modes]
  --loss-scale-ablation
                      also run each workload in amp-ls1, and take a gradient census (every
                      --grad-census steps) in its FP32, AMP and amp-ls1 runs: REPORT.md's
                      "gradient range" part and plots (docs/gradient-range.md)
  --grad-census K     a gradient census every K steps in ampbench's fp32, amp and amp-ls1 runs
                      [with --loss-scale-ablation: a tenth of the run's steps, else none]
  --workloads A,B     only these workloads of the config
  --config FILE       workloads                               [bench/workloads.conf]
  --device D          cpu | cuda                              [cuda when a GPU works, else cpu]
  --np N              data-parallel ranks                     [min(GPUs, 4); 2 CPU ranks without GPUs]
  --no-mpi            no data-parallel runs
  --no-peers          do not run the PyTorch peers (peers/) beside ampbench
  --build-dir DIR     where ampbench is built                 [build]
  --no-build          use the binaries in --build-dir as they are
  --out-root DIR      the run folder goes under DIR           [results/runs]
  --run-dir DIR       exactly this run folder
  --resume            with --run-dir: keep the complete results already there (an interrupted
                      or partly failed run goes on where it stopped) and run only the rest;
                      under --full an ampbench run killed midway continues from its last
                      checkpoint (RUN_DIR/checkpoints/RUN: every epoch's end), bit-identical
  --copy-plots DIR    copy the PNGs there too                 [plots]
  --no-copy-plots     leave plots/ alone
EOF
}

MODE=quick BUILD_DIR="$ROOT/build" OUT_ROOT="$ROOT/results/runs" RUN_DIR="" COPY_PLOTS="$ROOT/plots"
DO_BUILD=1 DEVICE="" STEPS="" EPOCHS="" NP="" ONLY="" NO_MPI=0 NO_PEERS=0 CONF="$ROOT/bench/workloads.conf"
SEEDS=1 MODES="" PEER_MODES="" RESUME=0 ABLATION=0 CENSUS=""
while [ $# -gt 0 ]; do
    case "$1" in
        --quick) MODE=quick ;;
        --full) MODE=full ;;
        --max-steps|--epochs|--workloads|--config|--device|--np|--build-dir|--out-root|--run-dir|--copy-plots|--seeds|--modes|--peer-modes|--grad-census)
            [ $# -ge 2 ] || { echo "run_all.sh: $1 needs a value" >&2; exit 2; }
            case "$1" in
                --max-steps) STEPS=$2 ;; --epochs) EPOCHS=$2 ;; --workloads) ONLY=$2 ;; --config) CONF=$2 ;;
                --seeds) SEEDS=$2 ;; --modes) MODES=$2 ;; --peer-modes) PEER_MODES=$2 ;; --grad-census) CENSUS=$2 ;;
                --device) DEVICE=$2 ;; --np) NP=$2 ;; --build-dir) BUILD_DIR=$2 ;; --out-root) OUT_ROOT=$2 ;;
                --run-dir) RUN_DIR=$2 ;; --copy-plots) COPY_PLOTS=$2 ;;
            esac
            shift ;;
        --no-copy-plots) COPY_PLOTS="" ;;
        --no-build) DO_BUILD=0 ;;
        --no-mpi) NO_MPI=1 ;;
        --no-peers) NO_PEERS=1 ;;
        --resume) RESUME=1 ;;
        --loss-scale-ablation) ABLATION=1 ;;
        -h|--help) usage; exit 0 ;;
        *) echo "run_all.sh: unknown option '$1' (see --help)" >&2; exit 2 ;;
    esac
    shift
done
for v in "$STEPS" "$EPOCHS" "$NP" "$SEEDS" "$CENSUS"; do
    case "$v" in ''|*[!0-9]*) [ -z "$v" ] || { echo "run_all.sh: '$v' is not a whole number" >&2; exit 2; } ;; esac
done
[ "$SEEDS" -ge 1 ] || { echo "run_all.sh: --seeds needs at least 1" >&2; exit 2; }
MODES_GIVEN=0; [ -n "$MODES" ] && MODES_GIVEN=1
[ -n "$MODES" ] || MODES="fp32,amp,dp-amp,tp-amp,pp-amp"
# the loss-scale ablation: amp-ls1 beside the modes asked for (the peers' too)
if [ "$ABLATION" = 1 ]; then
    grep -qx amp-ls1 <<< "${MODES//,/$'\n'}" || MODES="$MODES,amp-ls1"
    [ -z "$PEER_MODES" ] || grep -qx amp-ls1 <<< "${PEER_MODES//,/$'\n'}" || PEER_MODES="$PEER_MODES,amp-ls1"
fi
PEER_MODES_GIVEN=0; [ -n "$PEER_MODES" ] && PEER_MODES_GIVEN=1
for m in ${MODES//,/ } ${PEER_MODES//,/ }; do
    case "$m" in fp32|amp|amp-ls1|bf16|dp-amp|dp-amp-ps|dp-amp-off|dp-amp-acc4|tp-amp|pp-amp) ;;
        *) echo "run_all.sh: unknown mode '$m' (fp32, amp, amp-ls1, bf16, dp-amp, dp-amp-ps, dp-amp-off, dp-amp-acc4, tp-amp, pp-amp)" >&2; exit 2 ;; esac
done
for m in ${PEER_MODES//,/ }; do
    case "$m" in dp-amp-*|tp-amp|pp-amp) echo "run_all.sh: --peer-modes $m: the PyTorch peers run DDP (the ring, overlapped); the other patterns and the model's splits are ampbench's" >&2; exit 2 ;; esac
done
# the peers run every mode asked for but ampbench's other data-parallel patterns
[ -n "$PEER_MODES" ] || PEER_MODES=$(tr ',' '\n' <<< "$MODES" | grep -v -e '^dp-amp-' -e '^tp-amp$' -e '^pp-amp$' | paste -sd, -)
[ -z "$CENSUS" ] || [ "$CENSUS" -ge 1 ] || { echo "run_all.sh: --grad-census needs an interval of at least 1" >&2; exit 2; }
[ -r "$CONF" ] || { echo "run_all.sh: $CONF: cannot read the workload config" >&2; exit 2; }
[ "$RESUME" = 0 ] || [ -n "$RUN_DIR" ] || { echo "run_all.sh: --resume needs --run-dir DIR (the folder to go on in)" >&2; exit 2; }

utc() { date -u +%Y-%m-%dT%H:%M:%SZ; }
HOST=$(hostname -s 2>/dev/null || hostname)
STARTED=$(utc)
[ -n "$RUN_DIR" ] || RUN_DIR="$OUT_ROOT/$(date -u +%Y%m%d-%H%M%S)-$HOST"
mkdir -p "$RUN_DIR/logs" || { echo "run_all.sh: $RUN_DIR: cannot create the run folder" >&2; exit 2; }
RUN_DIR=$(cd "$RUN_DIR" && pwd)

# ---- build --------------------------------------------------------------------------------------
AMPBENCH="$BUILD_DIR/ampbench" REPORT="$BUILD_DIR/ampbench-report"
CORES=$(nproc 2>/dev/null || echo 1)
if [ "$DO_BUILD" = 1 ]; then
    echo "build: $BUILD_DIR (log: $RUN_DIR/logs/build.log)"
    { [ -f "$BUILD_DIR/CMakeCache.txt" ] || cmake -S "$ROOT" -B "$BUILD_DIR" -DCMAKE_BUILD_TYPE=Release; } \
        > "$RUN_DIR/logs/build.log" 2>&1 &&
    cmake --build "$BUILD_DIR" -j "$CORES" --target ampbench ampbench-report ampbench-regress \
        >> "$RUN_DIR/logs/build.log" 2>&1 ||
        { tail -n 20 "$RUN_DIR/logs/build.log" >&2; echo "run_all.sh: build failed (log: $RUN_DIR/logs/build.log)" >&2; exit 2; }
fi
for b in "$AMPBENCH" "$REPORT"; do
    [ -x "$b" ] || { echo "run_all.sh: $b: not built (run without --no-build)" >&2; exit 2; }
done
HELP=$("$AMPBENCH" --help 2>&1)
# the data root for {data} in the workload config: $AB_DATA_ROOT, else the build's default
DATA_ROOT=${AB_DATA_ROOT:-$(sed -n 's/^AB_DATA_ROOT:PATH=//p' "$BUILD_DIR/CMakeCache.txt" 2>/dev/null)}
[ -n "$DATA_ROOT" ] || DATA_ROOT="$ROOT/../shared/data"
# the peers read the same data as ampbench (their own defaults are relative to this checkout)
export AB_GLUE_DIR=${AB_GLUE_DIR:-$DATA_ROOT/glue} AB_CIFAR10_DIR=${AB_CIFAR10_DIR:-$DATA_ROOT/cifar10} AB_MNIST_DIR=${AB_MNIST_DIR:-$DATA_ROOT/mnist}

# ---- what this machine has ----------------------------------------------------------------------
CPU=$(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo 2>/dev/null | head -n 1)
[ -n "$CPU" ] || CPU=$(uname -m)
NGPU=0 GPU_NAMES="none"
if command -v nvidia-smi > /dev/null 2>&1 && nvidia-smi -L > /dev/null 2>&1; then
    NGPU=$(nvidia-smi -L | grep -c '^GPU')
    GPU_NAMES=$(nvidia-smi --query-gpu=name --format=csv,noheader | sort | uniq -c | awk '{c=$1; $1=""; printf "%s%dx%s", (NR>1?", ":""), c, $0}')
fi
MPI_IMPL="none" MPI_OK=0 MPI_WHY=""
if [ "$NO_MPI" = 1 ]; then MPI_WHY="data-parallel runs turned off (--no-mpi)"
elif ! command -v mpirun > /dev/null 2>&1; then MPI_WHY="no mpirun on this machine (install OpenMPI)"
else
    MPI_IMPL=$(mpirun --version 2>&1 | head -n 1)
    if grep -q -- '--comm' <<< "$HELP"; then MPI_OK=1
    else MPI_WHY="this ampbench has no data-parallel support (--comm missing from ampbench --help)"; fi
fi

# the PyTorch peers run where PyTorch is importable ($AB_PYTHON, else python3, else /usr/bin/python3)
PY="" PEERS_NOTE="" TORCH_VERSION=""
if [ "$NO_PEERS" = 1 ]; then PEERS_NOTE="turned off (--no-peers)"
else
    for p in "${AB_PYTHON:-}" python3 /usr/bin/python3; do
        [ -n "$p" ] || continue
        if v=$("$p" -c 'import torch; print(torch.__version__)' 2> /dev/null); then PY=$p TORCH_VERSION=$v; break; fi
    done
    [ -n "$PY" ] || PEERS_NOTE="PyTorch is not importable here (set AB_PYTHON to a python3 that has it, or install python3-torch)"
fi

# one data-loading probe decides between the GPU and the CPU
PROBE_WHY=""
if [ -z "$DEVICE" ]; then
    DEVICE=cpu
    if [ "$NGPU" -gt 0 ]; then
        if "$AMPBENCH" train --device cuda --max-steps 1 --quiet --out "$RUN_DIR/logs/probe.json" \
            > "$RUN_DIR/logs/probe.log" 2>&1; then DEVICE=cuda
        else PROBE_WHY="GPUs found, but a 1-step 'ampbench train --device cuda' failed, so the CPU runs: $(tail -n 1 "$RUN_DIR/logs/probe.log")"; fi
        rm -f "$RUN_DIR/logs/probe.json"
    fi
fi
# on GPUs the other data-parallel patterns too, unless --modes says otherwise (on a CPU they are
# the CPU quick profile's longest runs: --modes asks for them)
[ "$MODES_GIVEN" = 0 ] && [ "$DEVICE" = cuda ] && MODES="$MODES,dp-amp-ps,dp-amp-off,dp-amp-acc4"
# on a CPU with bf16 instructions bf16 too: ampbench multiplies bf16 on them, so a reduced-precision
# time saving is measurable there (the report says so)
[ "$MODES_GIVEN" = 0 ] && [ "$DEVICE" = cpu ] && grep -qwE 'avx512_bf16|amx_bf16' /proc/cpuinfo && MODES="$MODES,bf16"
[ -z "$NP" ] && { if [ "$DEVICE" = cuda ] && [ "$NGPU" -ge 2 ]; then NP=$(( NGPU < 4 ? NGPU : 4 )); else NP=2; fi; }
if [ "$MPI_OK" = 1 ] && [ "$DEVICE" = cuda ] && [ "$NGPU" -lt "$NP" ]; then
    MPI_OK=0 MPI_WHY="$NP ranks need $NP GPUs, found $NGPU (the 4-GPU figure comes from the projection)"
fi
MPI_ARGS=()
if [ "$MPI_OK" = 1 ]; then
    MPI_ARGS=(-np "$NP")
    if grep -qi 'open mpi' <<< "$MPI_IMPL"; then
        MPI_ARGS+=(--bind-to none)
        [ "$NP" -gt "$CORES" ] && MPI_ARGS+=(--oversubscribe)
        [ "$(id -u)" = 0 ] && MPI_ARGS+=(--allow-run-as-root)
    fi
fi
RANK_THREADS=$(( CORES / NP )); [ "$RANK_THREADS" -ge 1 ] || RANK_THREADS=1

# the source: this checkout's commit, else (an exported tree, a bundle) the one ampbench was built from
GIT=$(git -c 'safe.directory=*' -C "$ROOT" rev-parse --short HEAD 2>/dev/null || "$AMPBENCH" --version 2>/dev/null | sed -n 's/^ampbench //p')
[ -n "$GIT" ] || GIT=unknown
[ -n "$(git -c 'safe.directory=*' -C "$ROOT" status --porcelain --untracked-files=no 2>/dev/null)" ] && GIT="$GIT (uncommitted changes)"
echo "machine: $HOST, $CPU, $CORES cores; GPUs: $GPU_NAMES; MPI: $MPI_IMPL; device: $DEVICE"
[ -n "$PROBE_WHY" ] && echo "note: $PROBE_WHY"
[ "$MPI_OK" = 1 ] || echo "note: no data-parallel runs: $MPI_WHY"
# PyTorch's fp16 autocast on a CPU runs its convolutions and products without optimized kernels
# (ResNet-50's 30 quick steps: hours): the CPU quick profile leaves the peers' AMP out unless
# --peer-modes asks for it, and says so
if [ -n "$PY" ] && [ "$DEVICE" = cpu ] && [ "$MODE" = quick ] && [ "$PEER_MODES_GIVEN" = 0 ]; then
    PEER_MODES=$(tr ',' '\n' <<< "$PEER_MODES" | grep -vx -e amp -e dp-amp | paste -sd, -)
    PEERS_NOTE="the CPU quick profile runs the peers in ${PEER_MODES:-no mode}: PyTorch's fp16 autocast on a CPU has no optimized kernels (--peer-modes to ask for it)"
fi
if [ -n "$PY" ]; then echo "peers: PyTorch $TORCH_VERSION ($PY)${PEERS_NOTE:+; $PEERS_NOTE}"; else echo "note: no PyTorch peers: $PEERS_NOTE"; fi

# ---- the manifest (run.json), rewritten atomically after every run --------------------------------
jstr() { printf '"%s"' "$(printf '%s' "$1" | tr -d '\000-\037' | sed -e 's/\\/\\\\/g' -e 's/"/\\"/g')"; }
RUNS_JSON=()
FINISHED=""
write_manifest() {
    local runs="" sep="" r
    for r in ${RUNS_JSON[@]+"${RUNS_JSON[@]}"}; do runs+="$sep
    $r"; sep=","; done
    cat > "$RUN_DIR/run.json.tmp.$$" <<EOF
{
  "tool": "run_all.sh",
  "mode": $(jstr "$MODE"),
  "mode_detail": $(jstr "$MODE_DETAIL"),
  "profile": $(jstr "$PROFILE"),
  "profile_reason": $(jstr "$PROFILE_WHY"),
  "seeds": $SEEDS,
  "loss_scale_ablation": $([ "$ABLATION" = 1 ] && echo true || echo false),
  "started_at": $(jstr "$STARTED"),
  "finished_at": $(jstr "${FINISHED:-not finished}"),
  "hostname": $(jstr "$HOST"),
  "cpu": $(jstr "$CPU"),
  "cores": $CORES,
  "gpus": $(jstr "$GPU_NAMES"),
  "gpu_count": $NGPU,
  "device": $(jstr "$DEVICE"),
  "mpi": $(jstr "$MPI_IMPL"),
  "data_parallel_ranks": $([ "$MPI_OK" = 1 ] && echo "$NP" || echo 0),
  "git_commit": $(jstr "$GIT"),
  "peers": $(jstr "$PEERS_NOTE"),
  "runs": [$runs
  ]
}
EOF
    mv -f "$RUN_DIR/run.json.tmp.$$" "$RUN_DIR/run.json"
}
record() { # name workload mode status seconds reason [tool]; the run's seed is $seed
    RUNS_JSON+=("{\"name\": $(jstr "$1"), \"workload\": $(jstr "$2"), \"mode\": $(jstr "$3"), \"tool\": $(jstr "${7:-ampbench}"), \"seed\": ${seed:-1}, \"status\": $(jstr "$4"), \"seconds\": ${5:-0}, \"reason\": $(jstr "$6")}")
    write_manifest
}

# ---- the plan -----------------------------------------------------------------------------------
# The profile: --full is the articles' epochs; --quick is a fixed number of optimizer steps per
# workload, so that two quick runs on the same kind of machine stay comparable for scripts/regress.
# On a GPU that is the config's quick_steps; on a CPU, where one step of the large models takes
# seconds to minutes, the CPU profile: cpu_steps, and cpu_test test samples (- for the line's own).
# --full runs the config's full_epochs column: the articles' epochs in bench/workloads.conf, a
# reduced recipe in another config (accuracy-cpu.conf: 3 epochs); the profile says which
if [ "$MODE" = full ]; then PROFILE=full PROFILE_WHY="--full"  # completed below, once the epochs are known
elif [ "$DEVICE" = cuda ]; then PROFILE=quick PROFILE_WHY="--quick on a GPU: the quick_steps of $(basename "$CONF")"
else PROFILE=quick-cpu PROFILE_WHY="--quick without a usable GPU: the CPU profile (the cpu_steps and cpu_test columns of $(basename "$CONF")), sized to finish every workload in about 25 minutes on 2 cores; throughput and memory are measured, accuracy after so few steps says nothing"
fi
[ -n "$STEPS" ] && PROFILE_WHY="$PROFILE_WHY; --max-steps $STEPS for every run"
[ -n "$EPOCHS" ] && PROFILE_WHY="$PROFILE_WHY; --epochs $EPOCHS for every run"
PLAN=()  # "tool|workload|model|dataset|mode|epochs|steps|peer|seed|extra"
EPOCHS_OF=()  # "workload N epoch(s)" under --full
has_mode() { grep -qx "$2" <<< "${1//,/$'\n'}"; }
while read -r name model dataset full_epochs quick_steps cpu_steps cpu_test peer extra; do
    case "$name" in ''|'#'*) continue ;; esac
    if [ -n "$ONLY" ] && ! grep -qx "$name" <<< "${ONLY//,/$'\n'}"; then continue; fi
    for v in "$full_epochs" "$quick_steps" "$cpu_steps"; do
        case "$v" in ''|*[!0-9]*) echo "run_all.sh: $CONF: workload '$name': '$v' is not a whole number where full_epochs, quick_steps and cpu_steps go (columns: name model dataset full_epochs quick_steps cpu_steps cpu_test peer extra)" >&2; exit 2 ;; esac
    done
    case "$cpu_test" in -|[0-9]*) ;; *) echo "run_all.sh: $CONF: workload '$name': cpu_test '$cpu_test' is neither a number nor -" >&2; exit 2 ;; esac
    # the model's recipe (the registry's, ampbench recipe), then the config's own options, which win;
    # both tools get the same, so an ampbench that cannot say it (built before the command) stops here
    if ! recipe=$("$AMPBENCH" recipe --model "$model" < /dev/null 2> "$RUN_DIR/logs/recipe.log"); then
        if grep -q "unknown command" "$RUN_DIR/logs/recipe.log"; then
            echo "run_all.sh: $AMPBENCH has no 'recipe' command (built before it): rebuild it, or run without --no-build" >&2
        else
            echo "run_all.sh: $CONF: workload '$name': ampbench recipe --model $model: $(tail -n 1 "$RUN_DIR/logs/recipe.log")" >&2
        fi
        exit 2
    fi
    recipe=$(sed 's/--dataset [^ ]*//' <<< "$recipe") # the config's dataset column names the data set
    [ "$extra" = - ] && extra=""
    extra="$recipe $extra"
    case "$PROFILE" in
        full) ep=$full_epochs st=0 ;;
        quick) ep=1 st=$quick_steps ;;
        quick-cpu) ep=1 st=$cpu_steps; [ "$cpu_test" != - ] && extra="$extra --test-subset $cpu_test" ;;
    esac
    [ -n "$EPOCHS" ] && ep=$EPOCHS
    [ -n "$STEPS" ] && st=$STEPS
    [ "$PROFILE" = full ] && EPOCHS_OF+=("$name $ep epoch$([ "$ep" = 1 ] || echo s)")
    for mode in fp32 amp amp-ls1 bf16 dp-amp dp-amp-ps dp-amp-off dp-amp-acc4 tp-amp pp-amp; do
        for seed in $(seq 1 "$SEEDS"); do
            has_mode "$MODES" "$mode" && PLAN+=("ampbench|$name|$model|$dataset|$mode|$ep|$st|$peer|$seed|$extra")
            # the peer right after ampbench's run of the same mode and seed: same device, settings and machine state
            [ "$peer" != - ] && [ -n "$PY" ] && has_mode "$PEER_MODES" "$mode" &&
                PLAN+=("pytorch|$name|$model|$dataset|$mode|$ep|$st|$peer|$seed|$extra")
        done
        # under a --memory-limit: the largest batch that fits, beside the run at the config's batch
        case " $extra " in *" --memory-limit "*)
            case "$mode" in fp32|amp) has_mode "$MODES" "$mode" && PLAN+=("fit|$name|$model|$dataset|$mode|$ep|$st|$peer|1|$extra") ;; esac ;;
        esac
    done
done < "$CONF"
if [ "$PROFILE" = full ]; then
    epochs_list=$(IFS=,; echo "${EPOCHS_OF[*]}" | sed 's/,/, /g')
    if [ "$(cd "$(dirname "$CONF")" && pwd)/$(basename "$CONF")" = "$ROOT/bench/workloads.conf" ] && [ -z "$EPOCHS" ] && [ -z "$STEPS" ]; then
        PROFILE_WHY="--full: the articles' epochs ($epochs_list)"
    else
        PROFILE=full-reduced
        PROFILE_WHY="--full with the full_epochs of $(basename "$CONF") ($epochs_list), not the articles' epochs${EPOCHS:+; --epochs $EPOCHS for every run}${STEPS:+; --max-steps $STEPS for every run}"
    fi
fi
if [ "$MODE" = full ]; then MODE_DETAIL="$epochs_list"
elif [ -n "$STEPS" ]; then MODE_DETAIL="$STEPS optimizer steps per run"
elif [ "$PROFILE" = quick-cpu ]; then MODE_DETAIL="the cpu_steps of the workload config per run"
else MODE_DETAIL="the quick_steps of the workload config per run"; fi
[ "$SEEDS" -gt 1 ] && MODE_DETAIL="$MODE_DETAIL, seeds 1-$SEEDS"
echo "profile: $PROFILE ($PROFILE_WHY)"
[ "${#PLAN[@]}" -gt 0 ] || { echo "run_all.sh: no workload selected from $CONF" >&2; exit 2; }
write_manifest

# ---- running ------------------------------------------------------------------------------------
CHILD="" INTERRUPTED=0
stop_requested() { [ -e "$AB_RUN_ALL_CTL/stop" ] && INTERRUPTED=1; }

TOTAL=${#PLAN[@]} I=0 N_OK=0 N_FAIL=0 N_SKIP=0
SUMMARY=()
for item in "${PLAN[@]}"; do
    IFS='|' read -r tool wl model dataset mode ep st peer seed extra <<< "$item"
    I=$((I + 1))
    run="$wl-$mode"
    [ "$tool" = ampbench ] || run="$wl-$mode-$tool"
    [ "$SEEDS" -gt 1 ] && [ "$tool" != fit ] && run="$run-s$seed"
    label=$wl
    [ "$tool" = ampbench ] || label="$wl ($tool)"
    [ "$tool" = fit ] && label="$wl (max batch)"
    tag=$(printf '[%d/%d] %-14s %-7s' "$I" "$TOTAL" "$label" "$mode")
    [ "$SEEDS" -gt 1 ] && [ "$tool" != fit ] && tag="$tag seed $seed"
    stop_requested
    if [ "$INTERRUPTED" = 1 ]; then
        record "$run" "$wl" "$mode" interrupted 0 "not started: the run was interrupted" "$tool"
        continue
    fi
    if ! grep -qw -- "$model" <<< "$HELP"; then
        echo "$tag skipped: model '$model' is not in this ampbench (see ampbench --help)"
        record "$run" "$wl" "$mode" skipped 0 "model '$model' is not in this ampbench build yet" "$tool"
        N_SKIP=$((N_SKIP + 1)); continue
    fi
    # --resume: a complete result (or search record) of an earlier run in this folder is kept
    if [ "$RESUME" = 1 ] && [ -s "$RUN_DIR/$run.json" ] &&
        grep -Eq '"(complete|max_batch)":[[:space:]]*(true|[0-9])' "$RUN_DIR/$run.json"; then
        echo "$tag kept    (a complete result of an earlier run: $run.json)"
        record "$run" "$wl" "$mode" ok 0 "kept from an earlier run in this folder (--resume)" "$tool"
        N_OK=$((N_OK + 1)); continue
    fi
    precision=${mode#dp-}
    precision=${precision%-ls1} # amp-ls1: amp at --loss-scale 1
    case "$mode" in dp-amp-*|tp-amp|pp-amp) precision=amp ;; esac # the other patterns and the splits, in AMP
    # log about 20 points per run for the loss curve, and every 100 steps (as the articles) when long
    if [ "$st" -gt 0 ]; then li=$(( st / 20 )); [ "$li" -ge 1 ] || li=1; else li=100; fi
    if [ "$tool" = fit ]; then # the set-up of each batch tried (and one step on a GPU), no training
        cmd=("$AMPBENCH" train --model "$model" --dataset "$dataset" --precision "$precision" --device "$DEVICE"
             --seed 1 --find-max-batch --out "$RUN_DIR/$run.json")
    elif [ "$tool" = ampbench ]; then
        cmd=("$AMPBENCH" train --model "$model" --dataset "$dataset" --precision "$precision" --device "$DEVICE"
             --epochs "$ep" --max-steps "$st" --seed "$seed" --log-interval "$li" --quiet --out "$RUN_DIR/$run.json")
    else # the peer takes the same option names for what the config sets (peers/*.py)
        cmd=("$PY" "$ROOT/$peer" --model "$model" --dataset "$dataset" --precision "$precision" --device "$DEVICE"
             --epochs "$ep" --max-steps "$st" --seed "$seed" --log-interval "$li" --quiet --out "$RUN_DIR/$run.json")
    fi
    [ "$mode" = amp-ls1 ] && cmd+=(--loss-scale 1)
    # --full: ampbench's runs write a checkpoint at every epoch's end (and when stopped) into a
    # folder of their own, which --resume continues from; a finished run's folder is removed
    ckpt=""
    if [ "$MODE" = full ] && [ "$tool" = ampbench ] && [ "$mode" != tp-amp ] && [ "$mode" != pp-amp ]; then
        ckpt="$RUN_DIR/checkpoints/$run"
        [ "$RESUME" = 1 ] || rm -rf "$ckpt"
        [ -d "$ckpt" ] && echo "$tag resuming from $(ls "$ckpt" | grep '^ckpt-' | tail -n 1) in ${ckpt#"$RUN_DIR"/}"
        cmd+=(--checkpoint-dir "$ckpt" --resume)
    fi
    # the gradient census of ampbench's single-process runs: --grad-census K, or under the ablation
    # a tenth of the run's steps (100 over whole epochs); the config's own --grad-census comes later
    # on the command line and wins
    k=$CENSUS
    [ -z "$k" ] && [ "$ABLATION" = 1 ] && { if [ "$st" -gt 0 ]; then k=$(( st / 10 )); [ "$k" -ge 1 ] || k=1; else k=100; fi; }
    [ -n "$k" ] && [ "$tool" = ampbench ] && case "$mode" in fp32|amp|amp-ls1) cmd+=(--grad-census "$k") ;; esac
    extra=${extra//\{data\}/$DATA_ROOT} # {data}: the data root ampbench was built with
    # shellcheck disable=SC2206  # the config's extra arguments split on blanks
    cmd+=($extra)
    # the other data-parallel patterns, after the config's options so that theirs win
    acc=$(sed -n 's/.*--accum-steps[ =]\([0-9][0-9]*\).*/\1/p' <<< "$extra") # the config's micro-batches
    case "$mode" in
        dp-amp-ps) cmd+=(--dp-sync ps --ps-shards 1) ;;
        dp-amp-off) cmd+=(--dp-overlap off) ;;
        dp-amp-acc4) cmd+=(--accum-steps $(( ${acc:-1} * 4 ))) ;;
        tp-amp) cmd+=(--tensor-parallel "$NP") ;;
        pp-amp) cmd+=(--pipeline-parallel "$NP" --micro-batches $(( ${acc:-1} * 4 )) --pp-schedule 1f1b) ;;
    esac
    if [[ "$mode" == dp-amp* || "$mode" == tp-amp || "$mode" == pp-amp ]]; then
        if [ "$MPI_OK" != 1 ]; then
            echo "$tag skipped: $MPI_WHY"
            record "$run" "$wl" "$mode" skipped 0 "$MPI_WHY" "$tool"
            N_SKIP=$((N_SKIP + 1)); continue
        fi
        [ "$DEVICE" = cpu ] && cmd+=(--threads "$RANK_THREADS")
        cmd=(mpirun ${MPI_ARGS[@]+"${MPI_ARGS[@]}"} "${cmd[@]}")
    elif [ "$DEVICE" = cpu ]; then
        cmd+=(--threads "$CORES") # both tools on every core, so neither is measured on fewer
    fi
    [ -t 1 ] && printf '%s running ...\r' "$tag"
    echo "${cmd[*]}" > "$RUN_DIR/logs/$run.log"
    t0=$(date +%s.%N)
    "${cmd[@]}" >> "$RUN_DIR/logs/$run.log" 2>&1 < /dev/null &
    CHILD=$!
    echo "$CHILD" > "$AB_RUN_ALL_CTL/child"
    # a stop that came between the stop file check above and now reaches this run too
    [ -e "$AB_RUN_ALL_CTL/stop" ] && kill -INT "$CHILD" 2> /dev/null
    wait "$CHILD"; rc=$?
    while kill -0 "$CHILD" 2> /dev/null; do wait "$CHILD"; rc=$?; done
    : > "$AB_RUN_ALL_CTL/child"
    CHILD=""
    stop_requested
    secs=$(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }')
    if [ "$tool" = fit ] && [ "$rc" = 0 ] && [ -s "$RUN_DIR/$run.json" ]; then
        line=$(grep '^largest batch' "$RUN_DIR/logs/$run.log" | tail -n 1)
        printf '%s ok      %6.1f s  %s\n' "$tag" "$secs" "$line"
        record "$run" "$wl" "$mode" ok "$secs" "" "$tool"
        N_OK=$((N_OK + 1)); SUMMARY+=("$run: $line")
    elif [ "$tool" = ampbench ] && [ "$rc" = 3 ] && [ -s "$RUN_DIR/$run.json" ] && [ "$INTERRUPTED" = 0 ]; then
        # exit 3: out of memory (under --memory-limit, or the GPU's own): a measured "does not fit"
        why=$(tail -n +2 "$RUN_DIR/logs/$run.log" | grep -m 1 'out of memory' | cut -c1-200)
        printf '%s %-7s %6.1f s  %s\n' "$tag" "no fit" "$secs" "${why:-out of memory}"
        record "$run" "$wl" "$mode" did-not-fit "$secs" "${why:-out of memory}" "$tool"
        N_OK=$((N_OK + 1)); SUMMARY+=("$run: did not fit in memory")
    elif [ "$rc" = 0 ] && [ -s "$RUN_DIR/$run.json" ]; then
        [ -n "$ckpt" ] && rm -rf "$ckpt" && rmdir "$RUN_DIR/checkpoints" 2> /dev/null
        line=$("$REPORT" --line "$RUN_DIR/$run.json" 2>&1)
        printf '%s ok      %6.1f s  %s\n' "$tag" "$secs" "$line"
        record "$run" "$wl" "$mode" ok "$secs" "" "$tool"
        N_OK=$((N_OK + 1)); SUMMARY+=("$run: $line")
    elif [ "$tool" = ampbench ] && [ "$rc" = 2 ] && [ "$INTERRUPTED" = 0 ] && { [ "$mode" = tp-amp ] || [ "$mode" = pp-amp ]; }; then
        # the model refuses the split (ResNet's convolutions under tensor parallelism, fewer layers
        # than stages): its one line says why, and the report sets it in the split's place
        why=$(tail -n +2 "$RUN_DIR/logs/$run.log" | grep -m 1 '^ampbench:' | sed 's/^ampbench: //' | cut -c1-400)
        echo "$tag refused: ${why:-the model cannot be split so}"
        record "$run" "$wl" "$mode" refused "$secs" "${why:-the model cannot be split so}" "$tool"
        N_SKIP=$((N_SKIP + 1))
    elif [ "$tool" != ampbench ] && [ "$rc" = 2 ] && [ "$INTERRUPTED" = 0 ]; then
        # a peer's exit 2: it cannot run this mode here (an autocast dtype this PyTorch lacks on
        # this device, no data parallelism in the script); its last line says why
        # (its own line, "script.py: ...", not what mpirun adds after it)
        why=$(tail -n +2 "$RUN_DIR/logs/$run.log" | grep "^$(basename "$peer"):" | tail -n 1 | cut -c1-200)
        [ -n "$why" ] || why=$(tail -n +2 "$RUN_DIR/logs/$run.log" | grep '[[:alpha:]]' | tail -n 1 | cut -c1-200)
        echo "$tag skipped: ${why:-the peer cannot run this mode here}"
        record "$run" "$wl" "$mode" skipped "$secs" "${why:-the peer cannot run this mode here}" "$tool"
        N_SKIP=$((N_SKIP + 1))
    else
        # the log's first line is the command; its last other line usually says what went wrong
        why=$(tail -n +2 "$RUN_DIR/logs/$run.log" | grep '[[:alpha:]]' | tail -n 1 | cut -c1-200)
        [ -n "$why" ] || why="no message"
        status=failed
        [ "$INTERRUPTED" = 1 ] && status=interrupted
        printf '%s %-7s %6.1f s  %s (log: %s)\n' "$tag" "$status" "$secs" "$why" "$RUN_DIR/logs/$run.log"
        record "$run" "$wl" "$mode" "$status" "$secs" "exit $rc: $why" "$tool"
        N_FAIL=$((N_FAIL + 1))
        # an interrupted run may still have left its finished epochs (complete: false)
        [ -s "$RUN_DIR/$run.json" ] && SUMMARY+=("$run: partial result kept")
    fi
done
stop_requested
FINISHED=$(utc)
[ "$INTERRUPTED" = 1 ] && FINISHED="interrupted at $FINISHED"
write_manifest

# ---- the report ---------------------------------------------------------------------------------
echo
echo "summary: $N_OK ok, $N_FAIL failed or interrupted, $N_SKIP skipped, in $RUN_DIR"
for s in ${SUMMARY[@]+"${SUMMARY[@]}"}; do echo "  $s"; done
report_args=("$RUN_DIR" --reported "$ROOT/harness/reported.json" --gnuplot-dir "$ROOT/harness/plots")
[ -n "$COPY_PLOTS" ] && report_args+=(--copy-plots "$COPY_PLOTS")
"$REPORT" "${report_args[@]}"
report_rc=$?
[ "$report_rc" = 0 ] || echo "run_all.sh: the report had problems (exit $report_rc); see above" >&2
echo "open: $RUN_DIR/REPORT.md"
if [ "$INTERRUPTED" = 1 ]; then exit 130; fi
[ "$N_FAIL" = 0 ] && [ "$report_rc" = 0 ]
