#!/usr/bin/env bash
# bench/cpu_link.c and bench/cpu_link.sh, the readings the CPU benches print beside their timings:
# a reading on two CPUs (latency in ns and the paired compute ratio, both in range), the message
# on one CPU, exit 2 on a bad flag, the benches' helper printing NS/R, or '-' without cpu_link,
# their report of a set of rounds' readings, and the round-by-round time ratios (round_ratios).
# Usage: test_cpu_link.sh SOURCE_DIR CPU_LINK
set -euo pipefail
src=$1 link=$2
fail() { echo "FAIL test_cpu_link: $*" >&2; exit 1; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# the CPUs this process may run on (nproc would follow OMP_NUM_THREADS)
ncpu=$(python3 -c 'import os; print(len(os.sched_getaffinity(0)))')
first=$(python3 -c 'import os; print(min(os.sched_getaffinity(0)))')
out=$("$link" --trials 3) || fail "cpu_link --trials 3 exited $?"
if [ "$ncpu" -ge 2 ]; then
    ns=$(sed -n 's/.* one way \([0-9]*\) ns .*/\1/p' <<<"$out")
    r=$(sed -n 's/.* both computing at once \([0-9.]*\) of one alone .*/\1/p' <<<"$out")
    [ -n "$ns" ] && [ -n "$r" ] || fail "no reading in: $out"
    [ "$ns" -ge 1 ] && [ "$ns" -lt 1000000 ] || fail "latency $ns ns out of range: $out"
    awk -v r="$r" 'BEGIN { exit !(r > 0 && r < 4) }' || fail "paired compute $r out of range: $out"
    echo "ok   two CPUs: $out"
else
    grep -q "one CPU to run on, no cross-core reading" <<<"$out" || fail "on this one CPU: $out"
    echo "ok   one CPU here: $out"
fi
if command -v taskset >/dev/null; then
    one=$(taskset -c "$first" "$link") || fail "cpu_link on one CPU exited $?"
    grep -q "one CPU to run on, no cross-core reading" <<<"$one" || fail "on one CPU: $one"
    echo "ok   on one CPU: $one"
fi
for bad in "--trials 0" "--trials 102" "--trials x" "--trials" "--frobnicate"; do
    read -r -a args <<<"$bad"
    set +e; msg=$("$link" "${args[@]}" 2>&1); rc=$?; set -e
    [ "$rc" -eq 2 ] || fail "cpu_link $bad exited $rc, not 2"
    grep -q "^cpu_link: " <<<"$msg" || fail "cpu_link $bad said: $msg"
    echo "ok   cpu_link $bad: exit 2, $msg"
done
# the benches' helper: NS/R from a build folder that holds cpu_link, '-' from one that does not
mkdir -p "$work/with" "$work/without"
ln -s "$(realpath "$link")" "$work/with/cpu_link"
# shellcheck source=/dev/null
. "$src/bench/cpu_link.sh"
got=$(cpu_link_reading "$work/with")
if [ "$ncpu" -ge 2 ]; then
    grep -Eq '^[0-9]+/[0-9]+\.[0-9]+$' <<<"$got" || fail "cpu_link_reading gave '$got'"
else
    [ "$got" = - ] || fail "cpu_link_reading on one CPU gave '$got'"
fi
[ "$(cpu_link_reading "$work/without")" = - ] || fail "cpu_link_reading without cpu_link: not '-'"
if command -v taskset >/dev/null; then
    got1=$(taskset -c "$first" bash -c '. "$1/bench/cpu_link.sh"; cpu_link_reading "$2"' _ "$src" "$work/with")
    [ "$got1" = - ] || fail "cpu_link_reading on one CPU gave '$got1'"
fi
echo "ok   cpu_link_reading: '$got', and '-' without cpu_link"
# and cpu_link_report: the line printed after a table's rows, and the same readings in the runs file
printed=$(cpu_link_report "resnet50        " resnet50 "27/1.00 165/0.98" "$work/runs.txt")
[ "$printed" = "resnet50        cross-core ns / paired compute, before each round and after the last: 27/1.00 165/0.98 (bench/cpu_link.c)" ] ||
    fail "cpu_link_report printed: $printed"
grep -qx "  resnet50 cross-core ns / paired compute, before each round and after the last: 27/1.00 165/0.98" "$work/runs.txt" ||
    fail "cpu_link_report wrote: $(cat "$work/runs.txt")"
echo "ok   cpu_link_report"
# and round_ratios: each round's time against the same round's fp32 run, and their median (odd and
# even counts; a round without a rate shows '-' and is left out of the median)
printed=$(round_ratios "" amp "100 150 160 163 163" "150 145 150 140 73")
[ "$printed" = "round by round, amp / FP32 time: 0.67 1.03 1.07 1.16 2.23 (median 1.07x)" ] ||
    fail "round_ratios printed: $printed"
printed=$(round_ratios "bert-base  " AMP "2.8 2.9 2.5 2.8" "2.7 0 2.0 2.6")
[ "$printed" = "bert-base  round by round, AMP / FP32 time: 1.04 - 1.25 1.08 (median 1.08x)" ] ||
    fail "round_ratios printed: $printed"
printed=$(round_ratios "m " bf16 "4 4" "8 2")
[ "$printed" = "m round by round, bf16 / FP32 time: 0.50 2.00 (median 1.25x)" ] || fail "round_ratios printed: $printed"
echo "ok   round_ratios"
[ "$(printf '3\n1\n2\n' | median)" = 2 ] && [ "$(printf '4\n1\n2\n8\n' | median)" = 3 ] &&
    [ -z "$(printf '' | median)" ] || fail "median: not 2, 3 and nothing"
echo "ok   median"
echo "PASS"
