#!/usr/bin/env bash
# The ampbench command line on bad input and interruption: an unknown flag, a bad value, a
# missing or corrupt data file each give one clear line and a non-zero exit; an interrupted run
# exits 130 and keeps the epochs it finished in its JSON result.
set -u
AMPBENCH=${1:?usage: test_cli.sh path/to/ampbench}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
failures=0
fail() { echo "FAIL: $*" >&2; failures=$((failures + 1)); }

# expect_error CODE NEEDLE -- args: exit code CODE, stderr one line containing NEEDLE
expect_error() {
  local code=$1 needle=$2
  shift 3
  "$AMPBENCH" "$@" >"$tmp/out" 2>"$tmp/err"
  local rc=$?
  [ "$rc" -eq "$code" ] || fail "ampbench $* exited $rc, expected $code"
  grep -qF -- "$needle" "$tmp/err" || fail "ampbench $*: stderr lacks '$needle': $(cat "$tmp/err")"
  [ "$(wc -l <"$tmp/err")" -eq 1 ] || fail "ampbench $*: stderr is not one line: $(cat "$tmp/err")"
}

expect_error 2 "unknown option '--bogus'" -- train --bogus 1
expect_error 2 "unknown precision 'fp8'" -- train --precision fp8
expect_error 2 "--epochs: 'x' is not an integer" -- train --epochs x
expect_error 2 "--lr: 'nan' is not a finite number" -- train --lr nan
expect_error 2 "unknown command 'fly'" -- fly
expect_error 1 "unknown model 'vgg'" -- train --model vgg --max-steps 1 --quiet
expect_error 1 "$tmp/none/train-images-idx3-ubyte[.gz]: no such file" -- train --data "$tmp/none" --quiet

# a corrupt data file: a truncated copy of the real training images
mkdir -p "$tmp/bad"
src=$("$AMPBENCH" --help | sed -n 's/.*\[mnist: \([^,]*\), .*/\1/p')
[ -d "$src" ] || fail "cannot find the default MNIST folder in --help ($src)"
for f in train-labels-idx1-ubyte.gz t10k-images-idx3-ubyte.gz t10k-labels-idx1-ubyte.gz; do cp "$src/$f" "$tmp/bad/"; done
gzip -dc "$src/train-images-idx3-ubyte.gz" | head -c 100000 >"$tmp/bad/train-images-idx3-ubyte"
expect_error 1 "$tmp/bad/train-images-idx3-ubyte: truncated" -- train --data "$tmp/bad" --quiet

"$AMPBENCH" --help | grep -q -- "--precision" || fail "--help lists the options"

# interruption: SIGINT during epoch 2 of 3 keeps epoch 1 in the result, marked incomplete
"$AMPBENCH" train --epochs 3 --quiet --out "$tmp/r.json" &
pid=$!
for _ in $(seq 1 300); do [ -f "$tmp/r.json" ] && break; sleep 0.1; done
kill -INT "$pid"
wait "$pid"
rc=$?
[ "$rc" -eq 130 ] || fail "interrupted run exited $rc, expected 130"
grep -q '"complete":[[:space:]]*false' "$tmp/r.json" || fail "interrupted result not marked incomplete"
grep -q '"interrupted":[[:space:]]*true' "$tmp/r.json" || fail "interrupted result not marked interrupted"
grep -q '"test_accuracy"' "$tmp/r.json" || fail "interrupted result lost its finished epoch"
ls "$tmp" | grep -q '\.tmp\.' && fail "temporary result file left behind"

echo "test_cli: $failures failures"
[ "$failures" -eq 0 ]
