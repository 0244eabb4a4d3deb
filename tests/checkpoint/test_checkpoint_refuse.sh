#!/usr/bin/env bash
# A checkpoint that lies is refused: one line naming what is wrong, a non-zero exit, and nothing
# overwritten (the checkpoint folder byte for byte, the result record and weights file the run
# would write). From one true checkpoint of resnet-tiny under amp (batch-norm buffers, the fp16
# copy, SGD momentum), each case edits a copy (tests/checkpoint/ckpt_edit.py) and resumes from it: truncated,
# an edited header, a tensor of the wrong shape, a tensor missing, a changed value, state.json
# contradicting itself or the tensors, not JSON; then true checkpoints of another run: another
# precision, model, batch or world size, and a fresh run into a folder that holds checkpoints.
# usage: test_checkpoint_refuse.sh AMPBENCH MPIEXEC
set -u
ampbench=$1 mpiexec=$2
here=$(cd "$(dirname "$0")" && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
failures=0
fail() { echo "FAIL: $*" >&2; failures=$((failures + 1)); }
run=(--model resnet-tiny --precision amp --train-subset 256 --test-subset 64 --batch-size 32 --epochs 2 --threads 1
     --quiet)
"$ampbench" train "${run[@]}" --checkpoint-dir "$tmp/good" --checkpoint-every 3 --max-steps 0 > "$tmp/good.log" 2>&1 ||
    { echo "FAIL: the run that writes the checkpoints failed: $(cat "$tmp/good.log")"; exit 1; }
newest=$(ls "$tmp/good" | grep '^ckpt-' | sort | tail -n 1)
[ -n "$newest" ] || { echo "FAIL: no checkpoint written"; exit 1; }

digest() { (cd "$1" && find . -type f | sort | xargs sha256sum); }

# refused NAME EXPECTED [EXTRA ARGS]: resuming from $tmp/$NAME fails with one line holding EXPECTED
# and leaves the folder, the record and the weights file as they were
refused() {
    local name=$1 want=$2
    shift 2
    local d=$tmp/$name
    local before
    before=$(digest "$d")
    echo sentinel > "$tmp/$name.json"
    "$ampbench" train "${run[@]}" "$@" --checkpoint-dir "$d" --resume --out "$tmp/$name.json" \
        --save "$tmp/$name.safetensors" > "$tmp/$name.out" 2> "$tmp/$name.err"
    local rc=$?
    local lines
    lines=$(wc -l < "$tmp/$name.err")
    if [ "$rc" = 0 ] || [ "$lines" != 1 ] || ! grep -qF -- "$want" "$tmp/$name.err"; then
        fail "$name: exit $rc, $lines line(s) on stderr, expected one holding '$want': $(cat "$tmp/$name.err")"
    else
        echo "$name: exit $rc: $(cat "$tmp/$name.err")"
    fi
    [ "$(digest "$d")" = "$before" ] || fail "$name: the checkpoint folder was changed"
    [ "$(cat "$tmp/$name.json")" = sentinel ] || fail "$name: the result record was overwritten"
    [ ! -e "$tmp/$name.safetensors" ] || fail "$name: a weights file was written"
}

# copy NAME: a copy of the true checkpoints; prints the newest one's path
copy() { cp -r "$tmp/good" "$tmp/$1" && echo "$tmp/$1/$newest"; }
edit() { python3 "$here/ckpt_edit.py" "$@" || fail "ckpt_edit.py $*"; }

c=$(copy truncated) && edit "$c" truncate weights.safetensors 1000
refused truncated "weights.safetensors: 1000 bytes, state.json says"
c=$(copy header) && edit "$c" hexedit state.safetensors 20
refused header "state.safetensors: CRC-32"
c=$(copy shape) && edit "$c" reshape weights.safetensors conv1.weight 8,3,9,1
refused shape "tensor 'conv1.weight' has shape (8, 3, 9, 1), the model needs (8, 3, 3, 3)"
c=$(copy missing) && edit "$c" drop state.safetensors optimizer.momentum_buffer.fc.bias
refused missing "no tensor 'optimizer.momentum_buffer.fc.bias'"
c=$(copy weights-missing) && edit "$c" drop weights.safetensors fc.bias
refused weights-missing "no tensor 'fc.bias'"
c=$(copy compute) && edit "$c" flip state.safetensors compute.fc.weight
refused compute "its fp16 copy of the weights differs from its fp32 master weights"
c=$(copy optsteps) && edit "$c" setjson optimizer/steps 3
refused optsteps "contradicts itself"
c=$(copy position) && edit "$c" setjson position/step 15
refused position "is not what step 15 means"
c=$(copy seed) && edit "$c" setjson position/shuffle_seed '"0000000000000001"'
refused seed "contradicts itself: its data position"
c=$(copy bncount) && edit "$c" setjson ranks/0/batches_tracked 7
refused bncount "contradicts state.json: num_batches_tracked"
c=$(copy notjson) && edit "$c" truncate state.json 300
refused notjson "state.json: not JSON"
c=$(copy predictions) && edit "$c" setjson record/n_test_pred 1
refused predictions "predictions"
c=$(copy crc-line) && edit "$c" setjson files/state.safetensors/crc32 '"dead\nbeef"'
refused crc-line "state.json says dead?beef"
c=$(copy key) && edit "$c" setjson keys/lr '"0.5"'
refused key "a checkpoint of lr 0.5; this run has lr 0.100000001"

# true checkpoints of another run
cp -r "$tmp/good" "$tmp/other"
refused other "a checkpoint of precision amp; this run has precision fp32" --precision fp32
refused other "a checkpoint of model resnet-tiny; this run has model mlp" --model mlp
refused other "a checkpoint of batch_size 32; this run has batch_size 16" --batch-size 16

# another world size: rank 0 names the mismatch (the job then ends on every rank)
"$mpiexec" --allow-run-as-root --oversubscribe -np 2 "$ampbench" train "${run[@]}" --checkpoint-dir "$tmp/other" \
    --resume > "$tmp/world.out" 2> "$tmp/world.err"
rc=$?
[ "$rc" != 0 ] && grep -q "rank 0: .*a checkpoint of world_size 1; this run has world_size 2" "$tmp/world.err" ||
    fail "2 ranks from a 1-rank checkpoint: exit $rc, $(cat "$tmp/world.err")"

# a fresh run into a folder of checkpoints would rotate them away
before=$(digest "$tmp/other")
"$ampbench" train "${run[@]}" --checkpoint-dir "$tmp/other" > /dev/null 2> "$tmp/fresh.err"
rc=$?
[ "$rc" != 0 ] && [ "$(wc -l < "$tmp/fresh.err")" = 1 ] && grep -q "holds checkpoints (newest .*$newest): --resume" "$tmp/fresh.err" ||
    fail "a fresh run into a folder of checkpoints: exit $rc, $(cat "$tmp/fresh.err")"
[ "$(digest "$tmp/other")" = "$before" ] || fail "a fresh run changed the folder of checkpoints"

# options: the checkpoint options need the folder (exit 2)
"$ampbench" train --checkpoint-every 5 > /dev/null 2> "$tmp/opt.err"
rc=$?
[ "$rc" = 2 ] && grep -q "checkpoint-every needs --checkpoint-dir" "$tmp/opt.err" || fail "--checkpoint-every alone: exit $rc, $(cat "$tmp/opt.err")"

# a run that fails while a checkpoint is being written (fp32 has no scaler: an inf is a divergence)
# waits for that write before it frees what the writer reads (under AddressSanitizer a use after
# free would abort), and leaves that checkpoint whole
"$ampbench" train --model resnet-tiny --precision fp32 --train-subset 256 --test-subset 64 --batch-size 32 --threads 1 \
    --quiet --inject-inf-step 2 --checkpoint-dir "$tmp/failing" --checkpoint-every 1 > /dev/null 2> "$tmp/failing.err"
rc=$?
[ "$rc" = 1 ] && grep -q "diverged" "$tmp/failing.err" && [ "$(wc -l < "$tmp/failing.err")" = 1 ] ||
    fail "a run failing after a checkpoint: exit $rc, $(cat "$tmp/failing.err")"
ls "$tmp/failing" | grep -q '^ckpt-0*2$' || fail "the failing run's checkpoint at step 2 is not there: $(ls "$tmp/failing")"

# and the true checkpoint resumes
"$ampbench" train "${run[@]}" --checkpoint-dir "$tmp/good" --resume > "$tmp/ok.out" 2>&1 ||
    fail "the true checkpoint did not resume: $(cat "$tmp/ok.out")"

[ "$failures" -eq 0 ] || { echo "test_checkpoint_refuse: $failures failure(s)"; exit 1; }
echo "test_checkpoint_refuse: ok"
