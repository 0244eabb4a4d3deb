#!/usr/bin/env bash
# Runs killed and resumed end bit-identical to runs never stopped. Each case trains once without
# interruption, then again with --checkpoint-dir and --resume, killed with SIGKILL at a random
# moment after a new checkpoint appeared (so at a random step between checkpoints), at least twice,
# and resumed until it finishes. The saved weights must be byte-identical, the records identical
# but their wall-clock times (tests/checkpoint/resume_check.py), and every loss line any attempt printed one
# that the uninterrupted run printed. Cases: the MLP in fp32 (its first stop a SIGTERM, which
# writes a checkpoint and exits 130) and amp; resnet-tiny under amp with gradient accumulation and
# augmentation; bert-tiny under amp with dropout and a gradient census; and 2 MPI ranks of
# resnet-tiny (each rank's own batch-norm statistics), killed as a whole job, and 2 ranks of the MLP
# under a parameter server of 2 shards (each rank's half of the AdamW state).
# On a GPU (the GPU check): AB_RESUME_DEVICE=cuda runs every case there, after checking that two
# runs never stopped agree bit for bit (else no resume can); AB_RESUME_MNIST, AB_RESUME_CIFAR,
# AB_RESUME_SST2 and AB_RESUME_VOCAB name the data where it is not the build's data root; MPIEXEC
# "-" leaves out the MPI case.
# usage: test_resume.sh AMPBENCH MPIEXEC|- [SEED]
set -u
ampbench=$1 mpiexec=$2
seed=${3:-${AB_RESUME_SEED:-$(date +%s)}}
device=${AB_RESUME_DEVICE:-cpu}
mnist=() cifar=() sst2=()
[ -n "${AB_RESUME_MNIST:-}" ] && mnist=(--data "$AB_RESUME_MNIST")
[ -n "${AB_RESUME_CIFAR:-}" ] && cifar=(--data "$AB_RESUME_CIFAR")
[ -n "${AB_RESUME_SST2:-}" ] && sst2=(--data "$AB_RESUME_SST2")
[ -n "${AB_RESUME_VOCAB:-}" ] && sst2+=(--vocab "$AB_RESUME_VOCAB")
RANDOM=$seed
echo "test_resume: kill times drawn with seed $seed (rerun: $0 $1 $2 $seed)"
here=$(cd "$(dirname "$0")" && pwd)
mpirun=("$mpiexec" --allow-run-as-root --oversubscribe)
tmp=$(mktemp -d)
trap 'pkill -9 -f -- "$tmp/" 2> /dev/null; rm -rf "$tmp"' EXIT
failures=0
fail() { echo "FAIL: $*" >&2; failures=$((failures + 1)); }

# the step of the newest checkpoint in $1, or -1
newest() { local n; n=$(ls "$1" 2> /dev/null | grep '^ckpt-' | sort | tail -n 1); echo "${n#ckpt-}" | sed 's/^0*\([0-9]\)/\1/;s/^$/-1/'; }

# case NAME RANKS FIRST_SIGNAL ARGS...: the run killed at least twice (the first time with
# FIRST_SIGNAL), then resumed to its end, against the run never stopped
run_case() {
    local name=$1 np=$2 first=$3
    shift 3
    local d=$tmp/$name
    mkdir -p "$d"
    local launch=("$ampbench")
    [ "$np" -gt 1 ] && launch=("${mpirun[@]}" -np "$np" "$ampbench")
    if ! "${launch[@]}" train "$@" --out "$d/ref.json" --save "$d/ref.safetensors" > "$d/ref.log" 2>&1; then
        fail "$name: the uninterrupted run failed: $(tail -n 3 "$d/ref.log")"
        return
    fi
    if [ "$device" != cpu ]; then # the device's own determinism first: two runs never stopped
        "${launch[@]}" train "$@" --out "$d/ref2.json" --save "$d/ref2.safetensors" > "$d/ref2.log" 2>&1 &&
            cmp -s "$d/ref.safetensors" "$d/ref2.safetensors" ||
            { fail "$name: two uninterrupted runs on $device differ (non-deterministic kernels): no resume can be bit-exact"; return; }
    fi
    local kills=0 attempt=0 sig pid before rc
    while [ "$kills" -lt 2 ] && [ "$attempt" -lt 8 ]; do
        attempt=$((attempt + 1))
        sig=KILL
        [ "$kills" = 0 ] && sig=$first
        before=$(newest "$d/ck")
        "${launch[@]}" train "$@" --checkpoint-dir "$d/ck" --checkpoint-every 3 --resume --out "$d/run.json" \
            --save "$d/run.safetensors" > "$d/attempt$attempt.log" 2>&1 &
        pid=$!
        while kill -0 "$pid" 2> /dev/null && [ "$(newest "$d/ck")" = "$before" ]; do sleep 0.01; done
        sleep "$(printf '0.%03d' $((RANDOM % 150)))"
        if kill -0 "$pid" 2> /dev/null; then
            if [ "$sig" = TERM ]; then
                kill -TERM "$pid"
            elif [ "$np" -gt 1 ]; then
                pkill -9 -f -- "$d/ck" # the launcher and every rank: a lost node
            else
                kill -9 "$pid"
            fi
            wait "$pid" 2> /dev/null
            rc=$?
            kills=$((kills + 1))
            echo "$name: attempt $attempt stopped by SIG$sig (exit $rc) after checkpoint step $(newest "$d/ck")"
            if [ "$sig" = TERM ]; then
                [ "$rc" = 130 ] || fail "$name: SIGTERM: exit $rc, expected 130 (interrupted, result kept)"
                grep -q '"interrupted":[[:space:]]*true' "$d/run.json" || fail "$name: SIGTERM: the record is not marked interrupted"
                grep -q "^Checkpoint .*ckpt-0*$(newest "$d/ck") " "$d/attempt$attempt.log" ||
                    fail "$name: SIGTERM wrote no checkpoint: $(tail -n 3 "$d/attempt$attempt.log")"
            fi
        else
            wait "$pid" 2> /dev/null
        fi
    done
    [ "$kills" -ge 2 ] || fail "$name: only $kills of the attempts were stopped midway (the runs ended first)"
    if ! "${launch[@]}" train "$@" --checkpoint-dir "$d/ck" --checkpoint-every 3 --resume --out "$d/run.json" \
        --save "$d/run.safetensors" > "$d/final.log" 2>&1; then
        fail "$name: the resumed run failed: $(tail -n 3 "$d/final.log")"
        return
    fi
    grep -q '^Resumed from ' "$d/final.log" || fail "$name: the last run did not resume: $(head -n 4 "$d/final.log")"
    cmp -s "$d/ref.safetensors" "$d/run.safetensors" || fail "$name: the saved weights differ from the uninterrupted run's"
    python3 "$here/resume_check.py" "$d/ref.json" "$d/run.json" --min-resumes "$kills" | sed "s/^/$name: /"
    [ "${PIPESTATUS[0]}" = 0 ] || fail "$name: the records differ"
    # every loss line printed by any attempt is one the uninterrupted run printed
    local stray
    # (a killed attempt's last line may be cut short: only whole lines count)
    stray=$(python3 -c 'import sys
for f in sys.argv[1:]:
    for l in open(f, errors="replace").read().splitlines(keepends=True):
        if l.endswith("\n") and l.startswith("Epoch: "): print(l, end="")' "$d"/attempt*.log "$d/final.log" |
        grep -vxF -f <(grep '^Epoch: ' "$d/ref.log") | head -n 3)
    [ -z "$stray" ] || fail "$name: loss lines the uninterrupted run did not print: $stray"
    [ "$(grep -c '^Epoch: ' "$d/ref.log")" -gt 0 ] || fail "$name: no loss lines to compare"
}

# The step limit's last step: a run killed while it evaluates its last, partial epoch (after the
# mid-epoch checkpoint at the limit, before the epoch's own) resumes into that evaluation and
# records the epoch as the run never stopped does.
limit_case() {
    local d=$tmp/limit
    mkdir -p "$d"
    local args=(--model resnet-tiny --precision amp --batch-size 16 --epochs 2 --train-subset 1024 --max-steps 9
                --threads 1 --log-interval 3)
    "$ampbench" train "${args[@]}" --out "$d/ref.json" > "$d/ref.log" 2>&1 || { fail "limit: reference run failed"; return; }
    "$ampbench" train "${args[@]}" --checkpoint-dir "$d/ck" --checkpoint-every 3 --out "$d/run.json" > "$d/a.log" 2>&1 &
    local pid=$!
    while kill -0 "$pid" 2> /dev/null && [ "$(newest "$d/ck")" != 9 ]; do sleep 0.005; done
    kill -9 "$pid" 2> /dev/null && echo "limit: killed in the evaluation after the mid-epoch checkpoint at step 9"
    wait "$pid" 2> /dev/null
    "$ampbench" train "${args[@]}" --checkpoint-dir "$d/ck" --checkpoint-every 3 --resume --out "$d/run.json"         > "$d/final.log" 2>&1 || { fail "limit: the resumed run failed: $(tail -n 3 "$d/final.log")"; return; }
    python3 "$here/resume_check.py" "$d/ref.json" "$d/run.json" | sed "s/^/limit: /"
    [ "${PIPESTATUS[0]}" = 0 ] || fail "limit: the records differ"
}

common=(--threads 1 --log-interval 5 --device "$device")
[ "$device" = cpu ] && limit_case
run_case mlp-fp32 1 TERM --model mlp --precision fp32 --epochs 2 --train-subset 12000 --test-subset 2000 "${mnist[@]}" \
    "${common[@]}"
run_case mlp-amp 1 KILL --model mlp --precision amp --epochs 2 --train-subset 12000 --test-subset 2000 "${mnist[@]}" \
    "${common[@]}"
run_case resnet-tiny-amp 1 KILL --model resnet-tiny --precision amp --accum-steps 2 --batch-size 16 --epochs 2 \
    --train-subset 1024 --test-subset 256 "${cifar[@]}" "${common[@]}"
run_case bert-tiny-amp 1 KILL --model bert-tiny --precision amp --batch-size 16 --max-seq-len 32 --epochs 2 \
    --train-subset 640 --test-subset 128 --grad-census 10 "${sst2[@]}" "${common[@]}"
[ "$mpiexec" != - ] && run_case resnet-tiny-2ranks 2 KILL --model resnet-tiny --precision amp --batch-size 16 \
    --epochs 2 --train-subset 1024 --test-subset 256 "${cifar[@]}" "${common[@]}"
# a parameter server of 2 shards: each rank updates half the weights and holds half the AdamW
# state current, which the checkpoint must gather
[ "$mpiexec" != - ] && run_case mlp-ps-2ranks 2 KILL --model mlp --precision amp --optimizer adamw --lr 1e-3 \
    --dp-sync ps --ps-shards 2 --bucket-mb 0.3 --epochs 2 --train-subset 6000 --test-subset 1000 "${mnist[@]}" \
    "${common[@]}"

[ "$failures" -eq 0 ] || { echo "test_resume: $failures failure(s) (seed $seed)"; exit 1; }
echo "test_resume: ok"
