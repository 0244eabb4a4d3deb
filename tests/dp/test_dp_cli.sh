#!/usr/bin/env bash
# ampbench under mpirun -np 2 (label mpi), end to end through the epoch loop: rank 0 alone prints
# and writes the JSON, which holds world_size 2, the data_parallel block (engine mpi, one
# all-reduce of the whole gradient per step, every rank's peak memory and GPU) and a projection marked
# projected; 2 ranks x 32 reach the test loss of 1 process x 64 over the same steps to fp32
# round-off (relative 1e-4: the runs differ in the order of fp32 sums, ~1e-6 relative, and a wrong
# shard or step size moves the loss by 1e-2 or more); bad data-parallel options are refused.
# usage: test_dp_cli.sh MPIEXEC AMPBENCH
set -u
mpiexec=$1 ampbench=$2
mpirun=("$mpiexec" --allow-run-as-root --oversubscribe)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
failures=0
fail() { echo "FAIL: $*" >&2; failures=$((failures + 1)); }
field() { awk -v k="\"$2\":" '$1 == k { v = $2; gsub(/,/, "", v); print v; exit }' "$1"; }
steps=40

"${mpirun[@]}" -np 2 "$ampbench" train --threads 1 --batch-size 32 --max-steps $steps --log-interval 10 \
    --out "$tmp/dp.json" >"$tmp/dp.out" 2>&1 || fail "2-rank run failed: $(tail -5 "$tmp/dp.out")"
"$ampbench" train --threads 1 --batch-size 64 --max-steps $steps --log-interval 10 --out "$tmp/one.json" \
    >"$tmp/one.out" 2>&1 || fail "1-rank run failed: $(tail -5 "$tmp/one.out")"

[ "$(grep -c '^Epoch 1 done' "$tmp/dp.out")" -eq 1 ] || fail "expected one 'Epoch 1 done' line (rank 0 only): $(cat "$tmp/dp.out")"
[ "$(field "$tmp/dp.json" world_size)" = 2 ] || fail "world_size is not 2"
grep -q '"engine":[[:space:]]*"mpi"' "$tmp/dp.json" || fail "engine is not mpi"
grep -q '"projected":[[:space:]]*true' "$tmp/dp.json" || fail "no projection marked projected"
[ "$(field "$tmp/dp.json" bytes_allreduced)" = "$((steps * 203530 * 4))" ] ||
    fail "bytes_allreduced $(field "$tmp/dp.json" bytes_allreduced), expected $((steps * 203530 * 4))"
n_peaks=$(grep '"peak_memory_bytes_per_rank"' "$tmp/dp.json" | grep -o '[0-9][0-9]*' | grep -vc '^0$')
[ "$n_peaks" = 2 ] || fail "peak_memory_bytes_per_rank has $n_peaks entries, expected 2"
tr -d ' \t\n' <"$tmp/dp.json" | grep -q '"gpu_per_rank":\[-1,-1\]' ||
    fail "gpu_per_rank is not [-1, -1] for two CPU ranks: $(grep -A3 gpu_per_rank "$tmp/dp.json")"
[ "$(field "$tmp/dp.json" steps)" = "$steps" ] || fail "2-rank run took $(field "$tmp/dp.json" steps) steps"
a=$(field "$tmp/dp.json" test_loss) b=$(field "$tmp/one.json" test_loss)
awk -v a="$a" -v b="$b" 'BEGIN { d = a - b; if (d < 0) d = -d; exit !(b > 0 && d / b <= 1e-4) }' ||
    fail "test loss 2 x 32: $a, 1 x 64: $b (relative tolerance 1e-4)"
echo "test loss after $steps steps: 2 ranks x 32 $a, 1 rank x 64 $b"

# bad options: one line, non-zero exit
"$ampbench" train --comm tcp >/dev/null 2>"$tmp/err"; rc=$?
[ $rc -eq 2 ] && grep -q "unknown communicator 'tcp'" "$tmp/err" || fail "--comm tcp: exit $rc, $(cat "$tmp/err")"
"$ampbench" train --allreduce-dtype fp16 --max-steps 1 --quiet >/dev/null 2>"$tmp/err"; rc=$?
[ $rc -eq 1 ] && grep -q "needs --precision amp" "$tmp/err" || fail "fp16 all-reduce in fp32: exit $rc, $(cat "$tmp/err")"
"$ampbench" train --comm nccl --device cpu --max-steps 1 --quiet >/dev/null 2>"$tmp/err"; rc=$?
[ $rc -ne 0 ] && [ "$(wc -l <"$tmp/err")" -eq 1 ] && grep -q "comm nccl needs --device cuda" "$tmp/err" ||
    fail "--comm nccl --device cpu: exit $rc, $(cat "$tmp/err")"

[ "$failures" -eq 0 ] || { echo "test_dp_cli: $failures failure(s)"; exit 1; }
echo "test_dp_cli: ok"
