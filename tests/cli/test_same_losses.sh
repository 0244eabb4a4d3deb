#!/usr/bin/env bash
# bench/same_losses.sh, the check that a kernel change left training's numbers as they were: one
# build against itself says "same" for each run and exits 0; against the same build training from
# another seed (a wrapper adding --seed 2) it names the run and the step where they part and exits
# 1, and against one evaluating on fewer test samples it says the losses agree and the test losses
# do not; one build prints a line a run with the hash of its numbers, the same hash twice and
# another from another seed; a build that fails exits 2; an unknown run (a pattern too), an
# unknown option, a missing build and no build at all exit 2 with one line.
# Usage: test_same_losses.sh SOURCE_DIR AMPBENCH DATA_DIR
set -u
src=$1 ampbench=$2 data=$3
tool=$src/bench/same_losses.sh
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL test_same_losses: $*" >&2; exit 1; }
[ -r "$data/mnist/train-images-idx3-ubyte.gz" ] || [ -r "$data/mnist/train-images-idx3-ubyte" ] ||
    { echo "SKIP test_same_losses: no MNIST under $data"; exit 77; }

runs=mlp-fp32,mlp-amp
out=$("$tool" --data "$data" --runs $runs "$ampbench" "$ampbench" 2>&1)
rc=$?
[ $rc = 0 ] || fail "one build against itself exited $rc: $out"
[ "$(grep -c ': same (40 steps)$' <<<"$out")" = 2 ] || fail "expected two 'same (40 steps)' lines: $out"

printf '#!/bin/sh\nexec "%s" "$@" --seed 2\n' "$ampbench" >"$tmp/seed2"
chmod +x "$tmp/seed2"
out=$("$tool" --data "$data" --runs mlp-amp --keep "$tmp/keep" "$ampbench" "$tmp/seed2" 2>&1)
rc=$?
[ $rc = 1 ] || fail "another seed exited $rc, expected 1: $out"
grep -q '^mlp-amp: DIFFERENT from step 1: loss ' <<<"$out" || fail "another seed: no line naming run, step and loss: $out"
[ -s "$tmp/keep/mlp-amp-1.json" ] && [ -s "$tmp/keep/mlp-amp-2.json" ] || fail "--keep kept no records"

printf '#!/bin/sh\nexec "%s" "$@" --test-subset 128\n' "$ampbench" >"$tmp/fewer"
chmod +x "$tmp/fewer"
out=$("$tool" --data "$data" --runs mlp-fp32 "$ampbench" "$tmp/fewer" 2>&1)
rc=$?
[ $rc = 1 ] || fail "fewer test samples exited $rc, expected 1: $out"
[ "$out" = "mlp-fp32: DIFFERENT: the same losses at every step, not the same test losses" ] ||
    fail "fewer test samples: $out"

out=$("$tool" --data "$data" --runs mlp-fp32 "$ampbench" /bin/false 2>&1)
rc=$?
[ $rc = 2 ] || fail "a failing build exited $rc, expected 2: $out"

one=$("$tool" --data "$data" --runs mlp-fp32 "$ampbench" 2>&1) || fail "one build exited $?: $one"
grep -Eq '^mlp-fp32: 40 steps, last loss [0-9.]+, numbers [0-9a-f]{12}$' <<<"$one" || fail "one build's line: $one"
two=$("$tool" --data "$data" --runs mlp-fp32 "$ampbench" 2>&1)
[ "$one" = "$two" ] || fail "the same build's hash twice: '$one' then '$two'"
other=$("$tool" --data "$data" --runs mlp-fp32 "$tmp/seed2" 2>&1) || fail "another seed, one build, exited $?: $other"
[ "${other##* }" != "${one##* }" ] || fail "another seed gave the same hash: $one"

"$tool" --list | grep -qx resnet50-cifar-amp || fail "--list does not name resnet50-cifar-amp"
for bad in "--runs nosuch $ampbench" "--runs mlp.fp32 $ampbench" "--frobnicate $ampbench" "$tmp/absent" "" "--threads 0 $ampbench"; do
    # shellcheck disable=SC2086
    msg=$("$tool" --data "$data" $bad 2>&1)
    rc=$?
    [ $rc = 2 ] || fail "'$bad' exited $rc, expected 2: $msg"
    [ "$(wc -l <<<"$msg")" = 1 ] && grep -q '^same_losses.sh: ' <<<"$msg" || fail "'$bad': not one line: $msg"
done
echo "test_same_losses: same against itself, another seed found at step 1, fewer test samples found in the test losses, hashes stable and seed-dependent, bad usage refused"
