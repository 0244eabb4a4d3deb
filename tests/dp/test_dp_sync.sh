#!/usr/bin/env bash
# The parameter server (--dp-sync ps, --ps-shards K) against the ring all-reduce: each server rank
# sums its shard of the gradients (a reduce), updates that shard and sends the weights back (a
# broadcast). With 2 ranks every element's sum is one addition and the update is the same
# arithmetic, so the saved weights must be byte-identical to the ring's: the MLP in fp32 (one
# server with buckets reduced while backward runs, two servers without overlap), resnet-tiny under
# amp with accumulation and a rank without samples in the last step, bert-tiny under amp with fp16
# on the wire and a gradient census, and a planted inf on the second server. With 3 ranks the
# engines' orders may differ in the last bit: the test loss within 1e-5 relative (also with every
# rank a server and fp16 on the wire). Under clipping one server gives the ring's weights, two the
# ring's test loss within 1e-6 (the norm is summed shard by shard). The record holds
# the pattern, the pull's time and each rank's bytes, which must add up (every byte sent is
# received). Bad values exit 2 with one line.
# usage: test_dp_sync.sh MPIEXEC AMPBENCH
set -u
mpiexec=$1 ampbench=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
failures=0
fail() { echo "FAIL: $*" >&2; failures=$((failures + 1)); }
mpirun=("$mpiexec" --allow-run-as-root --oversubscribe)

# train NAME RANKS ARGS...: one run, its weights and record in $tmp/NAME.*
train() {
    local name=$1 np=$2
    shift 2
    "${mpirun[@]}" -np "$np" "$ampbench" train "$@" --threads 1 --quiet --save "$tmp/$name.safetensors" \
        --out "$tmp/$name.json" > "$tmp/$name.log" 2>&1 || { fail "$name failed: $(tail -n 3 "$tmp/$name.log")"; return 1; }
}
# same NAME: the ring's weights and the parameter server's
same() { cmp -s "$tmp/$1-ring.safetensors" "$tmp/$1-ps.safetensors" || fail "$1: the weights differ from the ring's"; }

mlp=(--model mlp --max-steps 40)
train mlp-ring 2 "${mlp[@]}" --dp-overlap off
train mlp-ps 2 "${mlp[@]}" --dp-sync ps --bucket-mb 0.05 && same mlp
train mlp2-ps 2 "${mlp[@]}" --dp-sync ps --ps-shards 2 --dp-overlap off &&
    { cmp -s "$tmp/mlp-ring.safetensors" "$tmp/mlp2-ps.safetensors" || fail "mlp, 2 shards: the weights differ"; }

rt=(--model resnet-tiny --precision amp --accum-steps 2 --batch-size 16 --train-subset 520 --test-subset 64)
train rt-ring 2 "${rt[@]}"
train rt-ps 2 "${rt[@]}" --dp-sync ps --ps-shards 2 --bucket-mb 0.05 && same rt

bt=(--model bert-tiny --precision amp --allreduce-dtype fp16 --batch-size 16 --max-seq-len 32 --train-subset 256
    --test-subset 64 --grad-census 5)
train bt-ring 2 "${bt[@]}"
train bt-ps 2 "${bt[@]}" --dp-sync ps --ps-shards 2 --bucket-mb 0.05 && same bt

# an inf planted in the second server's shard: every rank skips the step, as under the ring
inf=(--model mlp --precision amp --max-steps 12 --inject-inf-step 4 --inject-inf-rank 1)
train inf-ring 2 "${inf[@]}"
train inf-ps 2 "${inf[@]}" --dp-sync ps --ps-shards 2 && same inf
grep -q '"skipped_steps":[[:space:]]*1' "$tmp/inf-ps.json" || fail "inf: the parameter server's run did not skip the step"

# clipping: one server gives the ring's weights (the workers' squares are an exact 0); two add
# their shards' squares in double, so the clip factor may move in its last bit: the test loss
# within 1e-6 relative
clip=(--model mlp --max-steps 30 --clip-grad-norm 0.05 --dp-overlap off)
train clip-ring 2 "${clip[@]}"
train clip-ps 2 "${clip[@]}" --dp-sync ps && same clip
train clip2-ps 2 "${clip[@]}" --dp-sync ps --ps-shards 2

train m3-ring 3 --model mlp --max-steps 30
train m3-ps 3 --model mlp --max-steps 30 --dp-sync ps --ps-shards 2 --bucket-mb 0.05
# every rank a server, fp16 on the wire
train m3f-ring 3 --model mlp --precision amp --allreduce-dtype fp16 --max-steps 30
train m3f-ps 3 --model mlp --precision amp --allreduce-dtype fp16 --max-steps 30 --dp-sync ps --ps-shards 3
python3 - "$tmp" <<'PY' || fail "the records' figures"
import json, sys
t = sys.argv[1]
rec = lambda n: json.load(open(f"{t}/{n}.json"))
for ring, ps, tol in (("m3-ring", "m3-ps", 1e-5), ("m3f-ring", "m3f-ps", 1e-5), ("clip-ring", "clip2-ps", 1e-6)):
    a, b = rec(ring)["epochs"][-1]["test_loss"], rec(ps)["epochs"][-1]["test_loss"]
    assert a > 0 and abs(a - b) / a <= tol, f"{ps}: test loss {a} under the ring, {b} under the parameter server"
for name, sync, shards in (("mlp-ring", "ring", 0), ("mlp-ps", "ps", 1), ("mlp2-ps", "ps", 2), ("m3-ps", "ps", 2),
                           ("bt-ps", "ps", 2)):
    d = rec(name)["data_parallel"]
    assert d["sync"] == sync and d["ps_shards"] == shards, (name, d["sync"], d["ps_shards"])
    sent, got = d["bytes_sent_per_step_per_rank"], d["bytes_received_per_step_per_rank"]
    W = d["world_size"]
    assert len(sent) == len(got) == W and min(sent) > 0, (name, sent, got)
    assert abs(sum(sent) - sum(got)) <= 1e-6 * sum(sent), f"{name}: {sum(sent)} bytes sent, {sum(got)} received"
    assert (d["ps_pull_time_per_step_s"] > 0) == (sync == "ps"), (name, d["ps_pull_time_per_step_s"])
    print(f"{name}: {sync}, {W} ranks, {shards} shards, sent per rank {[round(x) for x in sent]}, pull "
          f"{1e3 * d['ps_pull_time_per_step_s']:.2f} ms a step")
# one server of 3 ranks carries (W - 1) times the payload each way, a worker once
d = rec("m3-ps")["data_parallel"]
P = d["bytes_per_step"]
s = d["bytes_sent_per_step_per_rank"]
assert abs(s[2] - P) <= 1e-6 * P and abs(s[0] - (P / 2 + 2 * P / 2)) <= 1e-3 * P, (s, P)
PY

# bad values: one line, exit 2 (under a launcher, rank 0 alone says it)
bad() {
    local what=$1 np=$2
    shift 2
    local launch=("$ampbench")
    [ "$np" -gt 1 ] && launch=("${mpirun[@]}" -np "$np" "$ampbench")
    "${launch[@]}" train --model mlp --max-steps 1 "$@" > /dev/null 2> "$tmp/err"
    local rc=$?
    [ "$rc" = 2 ] && [ "$(grep -c '^ampbench: ' "$tmp/err")" = 1 ] || fail "$what: exit $rc, $(cat "$tmp/err")"
}
bad "--ps-shards 0" 1 --dp-sync ps --ps-shards 0
bad "--dp-sync star" 1 --dp-sync star
bad "--ps-shards without ps" 1 --ps-shards 1
bad "--ps-shards 2 in a world of 1" 1 --dp-sync ps --ps-shards 2
bad "--ps-shards 3 in a world of 2" 2 --dp-sync ps --ps-shards 3
bad "an inf on a rank serving nothing" 2 --dp-sync ps --inject-inf-step 1 --inject-inf-rank 1

[ "$failures" -eq 0 ] || { echo "test_dp_sync: $failures failure(s)"; exit 1; }
echo "test_dp_sync: ok"
