#!/usr/bin/env bash
# Data-parallel patterns on this machine's CPUs, one model (default the MNIST MLP): 1 rank, then
# 2 ranks under mpirun in each pattern: the ring with its gradient buckets reduced while backward
# runs (--dp-overlap on, DDP's way) and after it (off), a parameter server on rank 0 (--dp-sync ps)
# with and without overlap, two servers (--ps-shards 2), and the ring with 4 micro-batches per
# synchronisation (--accum-steps 4). One BLAS thread per rank, per-rank batch fixed; RUNS runs
# each (default 3), medians printed: epoch time, throughput against one rank, per step the exposed
# and busy reduction, the parameter server's pull and the most bytes a rank sends; then the
# PROJECTED speed-up of each pattern on 4 and 8 GPUs and nodes (core/dpmodel.h, not measured),
# from the 1-rank runs' modelled GPU step.
# usage: bench/dp_scaling.sh [extra ampbench options...]
#   AMPBENCH=path/to/ampbench (default build/ampbench), RUNS=3, EPOCHS=1, PRECISION=fp32,
#   MODEL=mlp, KEEP=DIR (keep the records there), BUCKET_MB=0.05 (small buckets, so that the MLP's
#   814 kB of gradients make two and overlap has something to hide)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
ampbench=${AMPBENCH:-$root/build/ampbench}
runs=${RUNS:-3}
epochs=${EPOCHS:-1}
precision=${PRECISION:-fp32}
model=${MODEL:-mlp}
bucket=${BUCKET_MB:-0.05}
[ -x "$ampbench" ] || { echo "dp_scaling.sh: no ampbench at $ampbench (build first, or set AMPBENCH)" >&2; exit 2; }
command -v mpirun >/dev/null || { echo "dp_scaling.sh: mpirun not found (install openmpi-bin)" >&2; exit 2; }
# One BLAS thread per rank, and no idle OpenBLAS pool threads; ranks left unbound, so that on a
# shared machine the scheduler can move a rank away from a busy core.
export OPENBLAS_NUM_THREADS=1
mpirun=(mpirun --oversubscribe --bind-to none -x OPENBLAS_NUM_THREADS)
[ "$(id -u)" -eq 0 ] && mpirun+=(--allow-run-as-root)
if [ -n "${KEEP:-}" ]; then out_dir=$KEEP; mkdir -p "$out_dir"
else out_dir=$(mktemp -d); trap 'rm -rf "$out_dir"' EXIT; fi

common=(train --model "$model" --threads 1 --epochs "$epochs" --precision "$precision" --quiet --bucket-mb "$bucket" "$@")
# name|ranks|options: the patterns
configs=(
    "1|1|"
    "ring|2|"
    "ring-off|2|--dp-overlap off"
    "ps1|2|--dp-sync ps"
    "ps1-off|2|--dp-sync ps --dp-overlap off"
    "ps2|2|--dp-sync ps --ps-shards 2"
    "ring-acc4|2|--accum-steps 4"
)
echo "dp_scaling: $model, $precision, $epochs epoch(s), buckets of $bucket MB, --threads 1 per rank, $runs runs each"
echo "host: $(nproc) CPU(s), $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ //'); load average before: $(cut -d' ' -f1-3 /proc/loadavg)"
for c in "${configs[@]}"; do
    IFS='|' read -r name np opts <<< "$c"
    for r in $(seq 1 "$runs"); do
        out="$out_dir/$name-r$r.json"
        # shellcheck disable=SC2086  # the pattern's options split on blanks
        if [ "$np" = 1 ]; then "$ampbench" "${common[@]}" $opts --out "$out"
        else "${mpirun[@]}" -np "$np" "$ampbench" "${common[@]}" $opts --out "$out"; fi
    done
done
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg) (other processes share these CPUs: figures are only as quiet as the machine)"
python3 - "$out_dir" "$runs" "${configs[@]}" <<'PY'
import json, statistics, sys
d, runs, configs = sys.argv[1], int(sys.argv[2]), [c.split("|") for c in sys.argv[3:]]
def recs(name): return [json.load(open(f"{d}/{name}-r{r}.json")) for r in range(1, runs + 1)]
def med(name, f):
    v = [f(j) for j in recs(name)]
    v = [x for x in v if x is not None]
    return statistics.median(v) if v else float("nan")
dp = lambda k: (lambda j: j.get("data_parallel", {}).get(k))
one = med("1", lambda j: j["samples_per_s"])
print(f"\n{'pattern':<12} {'ranks':>5} {'accum':>5} {'epoch s':>9} {'samples/s':>10} {'vs 1 rank':>9} "
      f"{'exposed ms':>10} {'busy ms':>9} {'pull ms':>8} {'bytes sent':>11} {'test acc':>8}")
for name, np, opts in configs:
    sent = med(name, lambda j: max(j.get("data_parallel", {}).get("bytes_sent_per_step_per_rank") or [0]) or None)
    ms = lambda k: med(name, dp(k)) * 1e3
    print(f"{name:<12} {np:>5} {int(med(name, lambda j: j['workload'].get('accum_steps', 1))):>5} "
          f"{med(name, lambda j: j['total_time_s']):9.3f} {med(name, lambda j: j['samples_per_s']):10.0f} "
          f"{med(name, lambda j: j['samples_per_s']) / one:8.2f}x "
          f"{ms('allreduce_exposed_time_per_step_s'):10.3f} {ms('allreduce_busy_time_per_step_s'):9.3f} "
          f"{ms('ps_pull_time_per_step_s'):8.3f} {sent:11.0f} {med(name, lambda j: j['final_test_accuracy']):7.2f}%")
p = recs("1")[0]["projection"]
m = p.get("dp_models")
if m and m.get("micro_batch_time_s") is not None:
    print(f"\nPROJECTED, not measured (core/dpmodel.h): from the 1-rank run's step ({p['step_source']}, "
          f"{m['micro_batch_time_s'] * 1e3:.3f} ms a micro-batch), {m['buckets']} bucket(s) of --bucket-mb, "
          f"{p['grad_bytes']:.0f} gradient bytes")
    rows = m["rows"]
    pats = [("ring", 0, "ring"), ("ps", 1, "ps, 1 server"), ("ps", -1, "ps, k = n")]
    print(f"  {'pattern':<14} {'overlap':>7} {'accum':>5}" + "".join(f" {k[:4]} {n:>2}" for k in ("gpus", "nodes") for n in (4, 8)))
    for sync, k, label in pats:
        for ov in (False, True):
            for a in (1, 4):
                cells = []
                for kind in ("gpus", "nodes"):
                    for n in (4, 8):
                        kk = n if k < 0 else k
                        s = [r["speedup"] for r in rows if r["kind"] == kind and r["n"] == n and r["sync"] == sync
                             and r["shards"] == kk and r["overlap"] == ov and r["accum"] == a]
                        cells.append(f"{s[0]:6.2f}x" if s and s[0] is not None else "      -")
                print(f"  {label:<14} {('on' if ov else 'off'):>7} {a:>5} " + " ".join(cells))
PY
