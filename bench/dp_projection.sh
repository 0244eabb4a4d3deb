#!/usr/bin/env bash
# The data-parallel patterns PROJECTED (core/dpmodel.h, not measured) for the articles' two
# distributed workloads: ResNet-50 on CIFAR-10 (their 3x on 4 GPUs) and BERT-base on SST-2 (their
# 70% less time, 3.33x, on 4 nodes), each at bench/workloads.conf's batch. One training step per
# workload is enough: the projection's step is the modelled GPU step of the configuration
# (--proj-gpu, default the articles' RTX 3090), or on a GPU (--device cuda) the run's own. Prints,
# for 2, 4 and 8 GPUs and nodes, the speed-up of the ring, one parameter server and a server per
# device, overlap off and on, 1 and 4 micro-batches per synchronisation, and the share of the
# lost speed-up that the 4 micro-batches recover.
# usage: bench/dp_projection.sh [extra ampbench options, e.g. --device cuda or --proj-gpu a100]
#   AMPBENCH=path/to/ampbench (default build/ampbench), KEEP=DIR (keep the records there)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
ampbench=${AMPBENCH:-$root/build/ampbench}
[ -x "$ampbench" ] || { echo "dp_projection.sh: no ampbench at $ampbench (build first, or set AMPBENCH)" >&2; exit 2; }
if [ -n "${KEEP:-}" ]; then out_dir=$KEEP; mkdir -p "$out_dir"
else out_dir=$(mktemp -d); trap 'rm -rf "$out_dir"' EXIT; fi
for wl in resnet50 bert-base; do
    # the model's recipe and the config line's options, as run_all.sh composes them, without
    # --memory-limit (a projection, not a fit test)
    line=$("$ampbench" recipe --model "$wl")
    line="$line $(awk -v w="$wl" '$1 == w { for (i = 9; i <= NF; i++) if ($i != "-") printf "%s ", $i; exit }' "$root/bench/workloads.conf")"
    line=$(sed 's/--memory-limit [^ ]*//' <<< "$line")
    batch=$(sed -n 's/.*--batch-size \([0-9]*\).*/\1/p' <<< "$line")
    # shellcheck disable=SC2086  # the config's options split on blanks
    "$ampbench" train --model "$wl" --precision amp --max-steps 1 --train-subset "$batch" --test-subset 32 --quiet \
        $line "$@" --out "$out_dir/$wl-amp.json"
done
python3 - "$out_dir" <<'PY'
import json, sys
claims = {"resnet50": (3.0, "gpus", "3x on 4 GPUs (6 h -> 2 h)"), "bert-base": (1 / 0.3, "nodes", "70% less time on 4 nodes")}
for wl in ("resnet50", "bert-base"):
    j = json.load(open(f"{sys.argv[1]}/{wl}-amp.json"))
    p, m = j["projection"], j["projection"]["dp_models"]
    print(f"\n{wl}: batch {j['workload']['batch_size']} per device, {j['workload'].get('max_seq_len', '')} "
          f"{p['grad_bytes'] / 1e6:.1f} MB of gradients, {m['buckets']} buckets of 25 MB, step from {p['step_source']} "
          f"({m['micro_batch_time_s'] * 1e3:.2f} ms a micro-batch), links: GPUs {p['bandwidth_Bps'] / 1e9:.1f} GB/s; "
          f"the articles: {claims[wl][2]}")
    print(f"  {'pattern':<16} {'overlap':>7} {'accum':>5}" + "".join(f" {k:>5} {n}" for k in ("gpus", "nodes") for n in (2, 4, 8))
          + "  recovered at 4")
    for sync, k, label in (("ring", 0, "ring"), ("ps", 1, "ps, 1 server"), ("ps", -1, "ps, k = n")):
        for ov in (False, True):
            sp = {}
            for a in (1, 4):
                cells = []
                for kind in ("gpus", "nodes"):
                    for n in (2, 4, 8):
                        s = [r["speedup"] for r in m["rows"] if r["kind"] == kind and r["n"] == n and r["sync"] == sync
                             and r["shards"] == (n if k < 0 else k) and r["overlap"] == ov and r["accum"] == a]
                        sp[(a, kind, n)] = s[0] if s else float("nan")
                        cells.append(f"{sp[(a, kind, n)]:6.2f}x")
                kind4 = claims[wl][1]
                rec = ""
                if a == 4:
                    s1, s4 = sp[(1, kind4, 4)], sp[(4, kind4, 4)]
                    rec = f"  {100 * (s4 - s1) / (4 - s1):4.0f}% ({kind4})" if 4 - s1 > 1e-9 else ""
                print(f"  {label:<16} {('on' if ov else 'off'):>7} {a:>5} " + " ".join(cells) + rec)
PY
