#!/usr/bin/env bash
# The PyTorch peers at the versions the GPU machines have (torch 2.11, transformers 5.17), two
# steps each on the CPU, so that an API change in torch or transformers shows here and not in the
# one GPU run (CTest test_peer_smoke, label cpu). Runs in the virtual environment that
# scripts/peer_venv.sh makes ($AB_PEER_VENV, else ~/.cache/ampbench/peers-venv); without it, or
# when it holds other versions, it says so and skips (exit 77).
# Each run must exit 0 and write a record that names the venv's torch and passes the result schema:
# the MLP in fp32, amp and bf16; ResNet-50 with the CIFAR stem in fp32 and with torchvision's
# stem in fp32 and amp; bert-tiny from its initialisation in fp32 and amp; the MiniLM
# checkpoint (a real Hugging Face folder) in fp32.
# Usage: test_peer_smoke.sh SOURCE_DIR DATA_ROOT WORK_DIR
set -uo pipefail
src=$(cd "$1" && pwd)
data=$2
work=$3
venv=${AB_PEER_VENV:-$HOME/.cache/ampbench/peers-venv}
py=$venv/bin/python
want_torch=2.11.0 want_tf=5.17.0

[ -x "$py" ] || { echo "SKIPPED: no peer environment at $venv (scripts/peer_venv.sh makes it)"; exit 77; }
have=$("$py" -c 'import torch, transformers; print(torch.__version__.split("+")[0], transformers.__version__)' 2>&1 | tail -1)
[ "$have" = "$want_torch $want_tf" ] ||
    { echo "SKIPPED: $venv has '$have', not torch $want_torch and transformers $want_tf (scripts/peer_venv.sh)"; exit 77; }
for d in mnist cifar10 glue/SST-2 bert-base-uncased all-MiniLM-L6-v2; do
    [ -e "$data/$d" ] || { echo "SKIPPED: $data/$d missing"; exit 77; }
done
rm -rf "$work"
mkdir -p "$work" || exit 1
fails=0
pb=$src/peers
# the peers run with the machine's own library path, as on the GPU machine
unset LD_LIBRARY_PATH

run() { # NAME ARGS...: one peer run of two steps on the CPU
    local name=$1
    shift
    local t0=$SECONDS
    if ! "$py" "$@" --device cpu --max-steps 2 --out "$work/$name.json" >"$work/$name.log" 2>&1; then
        echo "FAIL $name: exit $?: $(grep -m1 -E 'Error|error' "$work/$name.log" || tail -1 "$work/$name.log")" >&2
        fails=$((fails + 1))
        return
    fi
    if ! grep -q "$want_torch" "$work/$name.json"; then
        echo "FAIL $name: the record does not name torch $want_torch" >&2
        fails=$((fails + 1))
        return
    fi
    echo "ok   $name ($((SECONDS - t0)) s)"
}

for prec in fp32 amp bf16; do
    run "mlp_$prec" "$pb/mnist_mlp.py" --precision "$prec" --epochs 1 --data "$data/mnist"
done
res=(--batch-size 4 --epochs 1 --train-subset 16 --test-subset 8 --data "$data/cifar10")
run resnet50-cifar_fp32 "$pb/cifar_resnet50.py" --model resnet50-cifar --precision fp32 "${res[@]}"
run resnet50_fp32 "$pb/cifar_resnet50.py" --model resnet50 --precision fp32 "${res[@]}"
# amp with torchvision's stem: fp16 convolutions are slow on a CPU (the CIFAR stem's 32x32 maps: 47 s)
run resnet50_amp "$pb/cifar_resnet50.py" --model resnet50 --precision amp "${res[@]}"
bert=(--batch-size 4 --max-seq-len 32 --train-subset 16 --test-subset 8 --data "$data/glue/SST-2")
run bert-tiny_fp32 "$pb/bert_glue.py" --model bert-tiny --precision fp32 --vocab "$data/bert-base-uncased/vocab.txt" "${bert[@]}"
run bert-tiny_amp "$pb/bert_glue.py" --model bert-tiny --precision amp --vocab "$data/bert-base-uncased/vocab.txt" "${bert[@]}"
run minilm_fp32 "$pb/bert_glue.py" --init-from "$data/all-MiniLM-L6-v2" --precision fp32 "${bert[@]}"

# the BERT peer's fit search: the boundary is a batch that fits and the next that does not, and
# every probe on the side the verdict says (a cap a few samples above bert-tiny's 34 MB at batch 1)
if "$py" "$pb/bert_glue.py" --model bert-tiny --precision fp32 --vocab "$data/bert-base-uncased/vocab.txt" \
        --max-seq-len 32 --train-subset 16 --test-subset 8 --data "$data/glue/SST-2" --device cpu \
        --memory-limit 36M --find-max-batch --out "$work/fit.result" >"$work/fit.log" 2>&1 &&
    python3 - "$work/fit.result" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
b, lim, pr = r["max_batch"], r["memory_limit_bytes"], {p["batch"]: p for p in r["probes"]}
assert r["tool"] == "pytorch-fit" and b >= 1, r
assert pr[b]["fits"] and pr[b]["peak_memory_bytes"] <= lim, pr[b]
assert not pr[b + 1]["fits"] and pr[b + 1]["would_need_bytes"] > lim, pr.get(b + 1)
for k, p in pr.items():
    assert p["fits"] == (k <= b), p
PY
then
    echo "ok   bert-tiny --find-max-batch under 36M: batch $(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["max_batch"])' "$work/fit.result")"
else
    echo "FAIL bert-tiny --find-max-batch: $(tail -3 "$work/fit.log")" >&2
    fails=$((fails + 1))
fi

# the records against the schema (with whichever python3 has jsonschema)
for p in python3 /usr/bin/python3; do
    if "$p" -c 'import jsonschema' 2>/dev/null; then
        if "$p" "$src/scripts/validate_records.py" "$work" >"$work/validate.log" 2>&1; then
            echo "ok   $(tail -1 "$work/validate.log")"
        else
            cat "$work/validate.log" >&2
            fails=$((fails + 1))
        fi
        break
    fi
done

# every record keeps its last evaluation example by example, as ampbench's do
missing=$(python3 - "$work" <<'PY'
import glob, json, os, sys
for p in sorted(glob.glob(os.path.join(sys.argv[1], "*.json"))):
    r = json.load(open(p))
    if r.get("tool") == "pytorch" and "test_predictions" not in r:
        print(os.path.basename(p))
    m = r.get("peak_memory_bytes", {})
    if r.get("tool") == "pytorch" and r.get("host", {}).get("backend") == "cpu" and p.find("mlp") < 0:
        # the CPU's comparable figure: the categories add up, and autograd saved something
        parts = m.get("parameters", 0) + m.get("gradients", 0) + m.get("optimizer_state", 0) + m.get("activations", 0)
        if not m.get("method", "").startswith("cpu: parameters + gradients") or m.get("total") != parts \
                or not m.get("activations", 0) > 0 or "resident_set_growth" not in m:
            print(os.path.basename(p) + " (its CPU memory is not the comparable total)")
PY
)
if [ -n "$missing" ]; then
    echo "FAIL records without test_predictions or a comparable CPU memory figure: $missing" >&2
    fails=$((fails + 1))
else
    echo "ok   every record keeps test_predictions"
fi

if [ $fails -gt 0 ]; then
    echo "test_peer_smoke: $fails failure(s) under torch $want_torch, transformers $want_tf" >&2
    exit 1
fi
echo "test_peer_smoke: every peer ran under torch $want_torch and transformers $want_tf"
