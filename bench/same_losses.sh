#!/usr/bin/env bash
# Whether a change to the kernels left training's numbers as they were: short runs of every
# workload in every precision (the MLP with and without gradient accumulation, ResNet-50 with both
# stems, MiniLM; fp32, AMP, bf16 on the CPU's own bf16 instructions where it has them and bf16
# emulated), each run's loss at every step, test losses and test predictions kept to the last bit.
#
#   bench/same_losses.sh [options] AMPBENCH            one line a run: its steps, last loss, and a
#                                                       hash of all its numbers' bits
#   bench/same_losses.sh [options] AMPBENCH AMPBENCH2  the same runs with both builds: "same" or
#                                                       where they part, a line a run; exit 1 when
#                                                       any run differs
# options:
#   --runs A,B,...   the runs to make (default: all; --list names them)
#   --data DIR       the data folder                              [../shared/data beside the source]
#   --keep DIR       keep each run's record (DIR/NAME-1.json, DIR/NAME-2.json)
#   --threads N      threads of each run                          [2]
#   --list           name the runs and exit
# Exit: 0 the same (or one build: all ran), 1 a run differs, 2 bad usage, a run failed or a
# record lacks what is compared. MiniLM's runs are left out, with a line, when the data folder has
# no all-MiniLM-L6-v2 checkpoint. A record writes NaN and the infinities alike (null): two builds
# giving NaN and inf at the same step read as the same there.
set -u
here=$(cd "$(dirname "$0")" && pwd)
data=$here/../../shared/data
runs="" keep="" threads=2 bins=()
die() { echo "same_losses.sh: $*" >&2; exit 2; }

# name|options (every run --log-interval 1, --quiet, the seed's default). MINILM stands for the
# checkpoint's folder; the data set's folder is added from --dataset.
mnist="--model mlp --dataset mnist --train-subset 4096 --test-subset 256 --max-steps 40 --epochs 1"
cifar="--dataset cifar10 --batch-size 8 --train-subset 64 --test-subset 16 --max-steps 2 --epochs 1 --no-augment"
bert="--model bert --dataset sst2 --max-seq-len 32 --batch-size 8 --train-subset 64 --test-subset 16 --max-steps 4 --epochs 1"
table=(
    "mlp-fp32|$mnist"
    "mlp-amp|$mnist --precision amp"
    "mlp-bf16|$mnist --precision bf16"
    "mlp-bf16-emulated|$mnist --precision bf16"
    "mlp-amp-accum4|$mnist --precision amp --batch-size 16 --accum-steps 4"
    "resnet50-cifar-fp32|--model resnet50-cifar $cifar"
    "resnet50-cifar-amp|--model resnet50-cifar $cifar --precision amp --init-scale 1024"
    "resnet50-cifar-bf16|--model resnet50-cifar $cifar --precision bf16"
    "resnet50-amp|--model resnet50 $cifar --precision amp --init-scale 1024"
    "minilm-fp32|$bert --init-from MINILM"
    "minilm-amp|$bert --init-from MINILM --precision amp"
    "minilm-bf16|$bert --init-from MINILM --precision bf16"
    "minilm-bf16-emulated|$bert --init-from MINILM --precision bf16"
)
names() { for e in "${table[@]}"; do echo "${e%%|*}"; done; }

while [ $# -gt 0 ]; do
    case $1 in
    --runs) [ $# -ge 2 ] || die "--runs needs a list"; runs=$2; shift 2 ;;
    --data) [ $# -ge 2 ] || die "--data needs a folder"; data=$2; shift 2 ;;
    --keep) [ $# -ge 2 ] || die "--keep needs a folder"; keep=$2; shift 2 ;;
    --threads) [[ ${2:-} =~ ^[1-9][0-9]*$ ]] || die "--threads needs a positive whole number"; threads=$2; shift 2 ;;
    --list) names; exit 0 ;;
    --help | -h) sed -n '2,/^set -u/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    -*) die "unknown option $1 (--help lists them)" ;;
    *) bins+=("$1"); shift ;;
    esac
done
[ ${#bins[@]} -ge 1 ] && [ ${#bins[@]} -le 2 ] || die "give one ampbench, or two to compare (--help)"
for b in "${bins[@]}"; do [ -f "$b" ] && [ -x "$b" ] || die "$b: not an executable file"; done
[ -d "$data" ] || die "$data: no data folder (--data)"
want=$(names)
if [ -n "$runs" ]; then
    IFS=, read -ra asked <<<"$runs"
    for r in "${asked[@]}"; do grep -qxF -- "$r" <<<"$want" || die "unknown run '$r' (--list names them)"; done
    want=$(printf '%s\n' "${asked[@]}")
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
[ -z "$keep" ] || mkdir -p "$keep" || die "$keep: cannot make the folder"

# every number of the run, exactly: the loss at each step (with its loss scale), the test losses,
# accuracies and skipped steps of each epoch, the test predictions; a record without them fails
numbers() {
    python3 - "$1" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
def exact(x):
    return float(x).hex() if isinstance(x, float) else x
curve = [{k: exact(v) for k, v in sorted(e.items())} for e in d["loss_curve"]]
if not curve or any("loss" not in e or "step" not in e for e in curve):
    sys.exit("no loss at every step")
epochs = [[exact(e[k]) for k in ("train_loss", "test_loss", "test_accuracy", "test_metric", "skipped_steps")]
          for e in d["epochs"]]
print(json.dumps({"curve": curve, "epochs": epochs, "predictions": d["test_predictions"]}))
PY
}

failed=0 differ=0
while read -r name; do
    [ -n "$name" ] || continue
    opts=""
    for e in "${table[@]}"; do [ "${e%%|*}" = "$name" ] && opts=${e#*|}; done
    [ -n "$opts" ] || die "no options for the run $name"
    read -ra args <<<"$opts"
    # the checkpoint and the data set's folder as whole arguments (a path may hold spaces)
    dataset=""
    for i in "${!args[@]}"; do
        [ "${args[$i]}" = MINILM ] && args[i]=$data/all-MiniLM-L6-v2
        [ "${args[$i]}" = --dataset ] && dataset=${args[$((i + 1))]}
    done
    case $dataset in
    mnist) args+=(--data "$data/mnist") ;;
    cifar10) args+=(--data "$data/cifar10") ;;
    sst2) args+=(--data "$data/glue/SST-2") ;;
    esac
    if [[ $opts == *MINILM* ]] && [ ! -r "$data/all-MiniLM-L6-v2/model.safetensors" ]; then
        echo "$name: left out (no $data/all-MiniLM-L6-v2/model.safetensors)"
        continue
    fi
    # the emulated runs ask for emulation; the others take the CPU's own bf16 whatever the caller set
    envs=(-u AB_CPU_BF16)
    case $name in *-emulated) envs=(AB_CPU_BF16=emulated) ;; esac
    ok=1
    for i in "${!bins[@]}"; do
        n=$((i + 1))
        rec=$tmp/$name-$n.json
        if ! env "${envs[@]}" "${bins[$i]}" train "${args[@]}" --threads "$threads" --log-interval 1 --quiet \
            --out "$rec" </dev/null >"$tmp/$name-$n.out" 2>&1; then
            echo "$name: ${bins[$i]} failed: $(tail -1 "$tmp/$name-$n.out")" >&2
            failed=1 ok=0
            break
        fi
        if ! numbers "$rec" >"$tmp/$name-$n.num" 2>"$tmp/$name-$n.err"; then
            echo "$name: ${bins[$i]}'s record: $(tail -1 "$tmp/$name-$n.err")" >&2
            failed=1 ok=0
            break
        fi
        [ -z "$keep" ] || cp "$rec" "$keep/"
    done
    [ $ok = 1 ] || continue
    if [ ${#bins[@]} = 1 ]; then
        python3 - "$name" "$tmp/$name-1.num" <<'PY' || { echo "$name: no summary" >&2; failed=1; }
import hashlib, json, sys
d = json.load(open(sys.argv[2]))
c = d["curve"]
last = c[-1]["loss"]
last = float.fromhex(last) if isinstance(last, str) else float("nan") if last is None else float(last)
print("%s: %d steps, last loss %.9g, numbers %s" % (sys.argv[1], len(c), last,
      hashlib.sha1(open(sys.argv[2], "rb").read()).hexdigest()[:12]))
PY
        continue
    fi
    python3 - "$name" "$tmp/$name-1.num" "$tmp/$name-2.num" <<'PY'
import json, sys
name, a, b = sys.argv[1], json.load(open(sys.argv[2])), json.load(open(sys.argv[3]))
if a == b:
    print("%s: same (%d steps)" % (name, len(a["curve"])))
    sys.exit(0)
def value(s):
    return float.fromhex(s) if isinstance(s, str) and s.lstrip("-").startswith("0x") else s
for i, (x, y) in enumerate(zip(a["curve"], b["curve"])):
    if x != y:
        k = next(k for k in sorted(set(x) | set(y)) if x.get(k) != y.get(k))
        print("%s: DIFFERENT from step %s: %s %r against %r" % (name, x.get("step", i + 1), k, value(x.get(k)),
                                                               value(y.get(k))))
        sys.exit(10)
part = ("steps" if len(a["curve"]) != len(b["curve"]) else
        "test losses" if a["epochs"] != b["epochs"] else "test predictions")
print("%s: DIFFERENT: the same losses at every step, not the same %s" % (name, part))
sys.exit(10)
PY
    rc=$?
    if [ $rc = 10 ]; then
        differ=1
    elif [ $rc != 0 ]; then
        echo "$name: the comparison failed" >&2
        failed=1
    fi
done <<<"$want"
[ $failed = 0 ] || exit 2
[ $differ = 0 ] || exit 1
exit 0
