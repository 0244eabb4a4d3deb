#!/usr/bin/env bash
# The GPU check as one remote job: run from an unpacked bundle on a machine reached through a job
# runner that returns only the few files left in one folder. It checks that every library of the
# bundle's programs resolves (stopping with one line naming the first that does not), runs
# scripts/gpu_check.sh under one overall deadline, and whatever happens (a pass, a failure, a
# crash, a hang cut by the deadline, a signal) leaves exactly three files in OUT:
#   summary.txt      the check's summary, line by line as the steps ended (or why it did not start)
#   log.txt          this job's own log: what ran, the check's output, the time each part took
#   results.tar.gz   everything the check wrote: JSON records, per-step logs, environment.txt
# Usage: scripts/gpu_remote.sh OUT     (docs/gpu.md gives the whole remote command)
# Environment: AB_GPU_DEADLINE (seconds for the check, default 300; the job itself ends within
#              about 30 s more), AB_GPU_WORK (scratch folder, default a new one under /tmp); the
#              check's own variables (AB_RESNET_STEPS, AB_BERT_STEPS, AB_CHECK_ONLY, AB_CHECK_PLANT_HANG) pass through.
# Exit status: the check's (0: every step passed), 3 when a library does not resolve, 2 on bad use.
set -uo pipefail

[ $# -eq 1 ] && [ -n "$1" ] || { echo "usage: gpu_remote.sh OUT" >&2; exit 2; }
out_dir=$1
bundle=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
deadline=${AB_GPU_DEADLINE:-300}
case "$deadline" in '' | *[!0-9]*) echo "gpu_remote.sh: AB_GPU_DEADLINE='$deadline' is not a whole number of seconds" >&2; exit 2 ;; esac
mkdir -p "$out_dir" || exit 2
work=${AB_GPU_WORK:-$(mktemp -d /tmp/ab-gpu-check.XXXXXX)}
res=$work/results
mkdir -p "$res" || exit 2
log=$out_dir/log.txt
t0=$(date +%s)
rc=1

say() { echo "[$(($(date +%s) - t0)) s] $*" >>"$log"; }

# the three files, whatever happened; at most 16 MiB each (a runaway log is cut to its head and tail)
pack() {
    trap - EXIT TERM INT
    [ -f "$res/summary.txt" ] || printf 'GPU check\nnot started: %s\n' "${why:-see log.txt}" >"$res/summary.txt"
    cp "$res/summary.txt" "$out_dir/summary.txt"
    say "packing $res into results.tar.gz (exit status $rc)"
    tar -C "$work" -czf "$out_dir/results.tar.gz" results 2>>"$log" || say "packing the results failed"
    local f
    for f in "$out_dir/log.txt" "$out_dir/results.tar.gz"; do
        if [ -f "$f" ] && [ "$(stat -c %s "$f")" -gt 16000000 ]; then
            if [ "$f" = "$out_dir/log.txt" ]; then
                { head -c 4000000 "$f"; echo "[... cut ...]"; tail -c 4000000 "$f"; } >"$f.cut" && mv "$f.cut" "$f"
            else
                say "results.tar.gz is over 16 MB: the per-step logs are dropped from it"
                tar -C "$work" -czf "$f" --exclude='*.log' results
            fi
        fi
    done
    exit $rc
}
trap pack EXIT
trap 'say "gpu_remote.sh: stopped by a signal"; rc=1; exit' TERM INT

why=""
{
    echo "gpu_remote.sh: bundle $bundle, results in $res, deadline $deadline s"
    echo "host: $(uname -srm), $(nproc) CPUs; $(date -u +%Y-%m-%dT%H:%M:%SZ)"
    sed -n '1,6p' "$bundle/MANIFEST" 2>/dev/null
    nvidia-smi -L 2>&1 | head -8
} >>"$log"

# every library of every program, resolved with the bundle's environment, into the results
# (in a subshell: the check and the PyTorch peers keep the machine's own library path)
(
    . "$bundle/env.sh"
    echo "LD_LIBRARY_PATH=$LD_LIBRARY_PATH"
    for p in "$bundle"/libexec/*; do
        echo "ldd $(basename "$p"):"
        ldd "$p" 2>&1 | sed 's/^/  /'
    done
) >"$res/ldd.txt" 2>&1
missing=$(grep -m1 'not found' "$res/ldd.txt" | sed 's/^ *//')
if [ -n "$missing" ]; then
    owner=$(awk '/^ldd /{p=$2} /not found/{print p; exit}' "$res/ldd.txt")
    why="a library does not resolve: ${owner%:} needs ${missing%% *} (see ldd.txt; AB_CUDA_LIB_DIRS names the CUDA libraries' folders)"
    echo "gpu_remote.sh: $why" | tee -a "$log" >&2
    printf 'GPU check\ndevice: %s\ndate: %s\nsource: %s\n\nnot started: %s\n' \
        "$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1)" "$(date -u +%Y-%m-%dT%H:%M:%SZ)" \
        "$(sed -n 's/^source: //p' "$bundle/MANIFEST")" "$why" >"$res/summary.txt"
    rc=3
    exit 3
fi
say "every library resolves (ldd.txt)"

# the check, under the deadline; the outer timeout is only a backstop: the check cuts its own steps
say "gpu_check.sh --deadline $deadline"
timeout -k 10 $((deadline + 20)) bash "$bundle/scripts/gpu_check.sh" --out "$res" --deadline "$deadline" >>"$log" 2>&1
rc=$?
[ $rc -eq 124 ] || [ $rc -eq 137 ] && say "the check outran its deadline and was stopped (exit $rc)"
say "gpu_check.sh ended with exit status $rc"
exit $rc
