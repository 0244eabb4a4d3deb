#!/usr/bin/env bash
# Failure behaviour of data-parallel runs (label mpi): each job must end with a non-zero status,
# within a bounded time, saying why.
#   1. a rank exits (code 3) without MPI_Finalize while the other trains;
#   2. a rank exits with code 0 without MPI_Finalize;
#   3. a rank stops calling collectives: the other's collective times out (3 s) and aborts the job;
#   4. two ranks launched with different models: the world-configuration check at start-up.
# usage: test_dp_fail.sh MPIEXEC TEST_DP_EXIT AMPBENCH
set -u
mpiexec=$1 prog=$2 ampbench=$3
mpirun=("$mpiexec" --allow-run-as-root --oversubscribe)
bound=60
failures=0
out=$(mktemp)
trap 'rm -f "$out"' EXIT

expect_fail() { # name, expected text, command...
    local name=$1 text=$2
    shift 2
    local t0 t1 rc
    t0=$(date +%s.%N)
    timeout $((bound + 30)) "$@" >"$out" 2>&1
    rc=$?
    t1=$(date +%s.%N)
    local dt
    dt=$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.1f", b - a }')
    if [ "$rc" -eq 0 ]; then
        echo "FAIL $name: the job exited 0"; failures=$((failures + 1))
    elif [ "$rc" -eq 124 ] || [ "$rc" -eq 137 ]; then
        echo "FAIL $name: the job hung (killed by timeout after ${dt} s)"; failures=$((failures + 1))
    elif awk -v d="$dt" -v b="$bound" 'BEGIN { exit !(d > b) }'; then
        echo "FAIL $name: took ${dt} s (bound ${bound} s)"; failures=$((failures + 1))
    elif ! grep -q -- "$text" "$out"; then
        echo "FAIL $name: exit $rc in ${dt} s but no '$text' in its output:"; failures=$((failures + 1))
        sed 's/^/    /' "$out" | head -30
    else
        echo "ok   $name: exit $rc in ${dt} s"
    fi
}

expect_fail "rank 1 exits with code 3" "exit code" "${mpirun[@]}" -np 2 "$prog" exit 3
expect_fail "rank 1 exits with code 0, no MPI_Finalize" "MPI_Finalize\|improperly\|finalize" \
    "${mpirun[@]}" -np 2 "$prog" exit 0
expect_fail "rank 1 stops calling collectives" "did not complete within" "${mpirun[@]}" -np 2 "$prog" hang
expect_fail "ranks with different models" "disagree on the world configuration" \
    "${mpirun[@]}" -np 1 "$ampbench" train --quiet --threads 1 --max-steps 2 --hidden 32 : \
    -np 1 "$ampbench" train --quiet --threads 1 --max-steps 2 --hidden 64

[ "$failures" -eq 0 ] || { echo "test_dp_fail: $failures failure(s)"; exit 1; }
