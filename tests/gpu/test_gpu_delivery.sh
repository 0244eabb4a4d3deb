#!/usr/bin/env bash
# The GPU run rehearsed end to end on this machine (CTest test_gpu_delivery, label cpu), so that a
# change that would break the one remote GPU run fails here first:
#   1. scripts/bundle.sh builds a fresh bundle and reports its size within the budget; with a budget
#      it cannot meet it fails with one line;
#   2. docs/gpu.md's remote command, taken from the page verbatim, runs in a folder holding only the
#      tarball, into an empty $OUT: it returns at most 8 files (3 expected), none deeper than two
#      folders; summary.txt has a line for every step of the check (GPU steps SKIPPED here, with
#      the reason), the canary's record is there; the PyTorch peers' library path is not the bundle's;
#   3. a planted hang (AB_CHECK_PLANT_HANG) under a short deadline is cut within the deadline and
#      the files still come back, the steps after it listed as not run;
#   4. scripts/gpu_unpack.sh puts the answer under <root>/<date>-<device>/ with schema-valid
#      records, refuses to overwrite it, and refuses a corrupt answer with one line.
# Usage: test_gpu_delivery.sh SOURCE_DIR WORK_DIR. Exit 77 (skipped) without nvcc: the bundle
# carries the CUDA backend.
set -uo pipefail
src=$(cd "$1" && pwd)
work=$2
fails=0
fail() { echo "FAIL: $*" >&2; fails=$((fails + 1)); }
ok() { echo "ok   $*"; }

command -v nvcc >/dev/null || [ -x /usr/local/cuda/bin/nvcc ] || { echo "SKIPPED: no nvcc: the bundle needs the CUDA toolkit"; exit 77; }
rm -rf "$work"
mkdir -p "$work" || exit 1

# ---- 1. the bundle and its size budget ----
export AB_BUNDLE_BUILD=$work/bundle-build
if ! bash "$src/scripts/bundle.sh" "$work/dist/ampbench-gpu" >"$work/bundle.log" 2>&1; then
    tail -20 "$work/bundle.log" >&2
    echo "FAIL: scripts/bundle.sh failed" >&2
    exit 1
fi
size_line=$(grep -m1 'MiB budget' "$work/bundle.log")
total=$(echo "$size_line" | sed -n 's/.*: \([0-9.]*\) MiB of the \([0-9]*\) MiB budget.*/\1 \2/p')
[ -n "$total" ] || fail "bundle.sh printed no size against its budget: '$size_line'"
set -- $total
awk -v t="${1:-99}" -v b="${2:-0}" 'BEGIN {exit !(t <= b && b <= 56)}' && ok "bundle: $size_line" ||
    fail "bundle over budget or budget above 56 MiB: $size_line"
tarball=$work/dist/ampbench-gpu.tar.xz
[ -f "$tarball" ] || fail "no $tarball"
for p in "$work"/dist/ampbench-gpu/libexec/*; do
    readelf -d "$p" | grep -qE 'R(UN)?PATH' && fail "$(basename "$p") keeps an RPATH"
done
for p in test_backend_ops; do
    readelf -d "$work/dist/ampbench-gpu/libexec/$p" | grep -qE 'libnccl|libmpi' && fail "$p links NCCL or MPI, which it does not use"
done
ok "no RPATH in the bundle's programs; the op tests link neither NCCL nor MPI"
# a budget it cannot meet: one line, non-zero (the build is reused; only the packing runs again)
AB_BUNDLE_BUDGET_MIB=5 bash "$src/scripts/bundle.sh" "$work/dist-small/ampbench-gpu" >"$work/bundle-small.log" 2>&1
rc=$?
msg=$(grep 'bundle.sh: ' "$work/bundle-small.log" | tail -1)
[ $rc -ne 0 ] && echo "$msg" | grep -q 'over the 5 MiB budget' && ok "a 5 MiB budget: exit $rc, '$msg'" ||
    fail "a 5 MiB budget: exit $rc, last line '$msg'"

# ---- 2. the remote command, as docs/gpu.md gives it ----
cmd=$(awk '/<!-- gpu-remote-command/ {m = 1; next} m && /^```/ {if (in_block) exit; in_block = 1; next} in_block {print}' "$src/docs/gpu.md")
[ -n "$cmd" ] || { echo "FAIL: no remote command found in docs/gpu.md (the block after <!-- gpu-remote-command -->)" >&2; exit 1; }
[ ${#cmd} -le 2000 ] || fail "the remote command is ${#cmd} characters (at most 2,000)"
echo "$cmd" | grep -q 'dist/ampbench-gpu.tar.xz' || fail "the remote command does not unpack dist/ampbench-gpu.tar.xz"
remote() { # DIR: the job runner's copy of the tree (here only the tarball) and an empty $OUT
    local dir=$1
    mkdir -p "$dir/tree/dist" "$dir/out"
    cp "$tarball" "$dir/tree/dist/"
    (cd "$dir/tree" && OUT=$dir/out bash -c "$cmd") >"$dir/command.log" 2>&1
}
answer_ok() { # DIR WHAT: the answer's shape
    local out=$1/out what=$2 n deep
    n=$(find "$out" -type f | wc -l)
    deep=$(find "$out" -mindepth 4 -type f | wc -l)
    [ "$n" -ge 1 ] && [ "$n" -le 8 ] && [ "$deep" -eq 0 ] || fail "$what: $n files back, $deep deeper than two folders"
    for f in summary.txt log.txt results.tar.gz; do [ -s "$out/$f" ] || fail "$what: no $f in \$OUT"; done
    [ "$n" -eq 3 ] || fail "$what: $n files in \$OUT, expected summary.txt, log.txt, results.tar.gz"
    ok "$what: $n files back ($(cd "$out" && ls | tr '\n' ' '))"
}
t0=$SECONDS
remote "$work/r1"
rc=$?
answer_ok "$work/r1" "the remote command (no GPU here)"
summary=$work/r1/out/summary.txt
steps="canary_mlp_cpu ops_backend nccl_single"
for m in mlp resnet50-cifar resnet50 bert-base; do for p in fp32 amp bf16; do steps="$steps step_${m}_$p"; done; done
steps="$steps train_parity memcheck_ops ampbench_mlp_fp32 ampbench_mlp_amp ampbench_resnet50-cifar_fp32"
steps="$steps ampbench_resnet50-cifar_amp ampbench_resnet50_fp32 ampbench_resnet50_amp ampbench_bert-base_fp32"
steps="$steps ampbench_bert-base_amp pytorch_mlp_fp32 pytorch_mlp_amp pytorch_resnet50-cifar_fp32"
steps="$steps pytorch_resnet50-cifar_amp pytorch_resnet50_fp32 pytorch_resnet50_amp pytorch_bert-base_fp32"
steps="$steps pytorch_bert-base_amp ampbench_bert-base_fp32_fit ampbench_bert-base_amp_fit resume_cuda"
missing=""
for s in $steps; do grep -qE "^$s +(passed|FAILED|SKIPPED|TIMED-OUT|NOT-RUN) " "$summary" || missing="$missing $s"; done
[ -z "$missing" ] && ok "summary.txt has a line for each of the $(echo $steps | wc -w) steps (exit $rc, $((SECONDS - t0)) s)" ||
    fail "summary.txt lacks lines for:$missing"
grep -qE '^canary_mlp_cpu +passed ' "$summary" || fail "the canary (the bundle's ampbench on the CPU) did not pass: $(grep canary "$summary")"
if [ -z "$(nvidia-smi -L 2>/dev/null)" ]; then
    grep -qE '^ops_backend +SKIPPED +[0-9]+ +.+' "$summary" || fail "ops_backend is not a SKIPPED line with its reason"
    grep -qE '^step_bert-base_bf16 +SKIPPED +[0-9]+ +no usable GPU' "$summary" || fail "the GPU steps do not say they skipped for want of a GPU"
fi
mkdir -p "$work/r1/x" && tar -xzf "$work/r1/out/results.tar.gz" -C "$work/r1/x" || fail "results.tar.gz does not unpack"
envf=$work/r1/x/results/environment.txt
peer_path=$(sed -n 's/^LD_LIBRARY_PATH of the check and the PyTorch peers: //p' "$envf")
bundle_path=$(sed -n 's/^LD_LIBRARY_PATH of the bundle.s programs (env.sh): //p' "$envf")
echo "$bundle_path" | grep -q 'ampbench-gpu/lib' || fail "environment.txt does not show the bundle's library path: '$bundle_path'"
case "$peer_path" in *ampbench-gpu/lib*) fail "the peers inherit the bundle's library path: $peer_path" ;; esac
[ -s "$work/r1/x/results/ldd.txt" ] && grep -q 'ldd ampbench' "$work/r1/x/results/ldd.txt" || fail "no ldd.txt in the results"
ok "the peers keep the machine's library path ('${peer_path}'); ldd.txt in the results"

# ---- 3. a planted hang under a short deadline ----
t0=$SECONDS
AB_GPU_DEADLINE=24 AB_CHECK_PLANT_HANG=canary_mlp_cpu remote "$work/r2"
dt=$((SECONDS - t0))
answer_ok "$work/r2" "a planted hang, deadline 24 s"
[ $dt -le $((24 + 40)) ] && ok "the hang was cut: the command returned after $dt s" || fail "the planted hang ran $dt s past a 24 s deadline"
grep -qE '^canary_mlp_cpu +TIMED-OUT ' "$work/r2/out/summary.txt" || fail "the hung step is not TIMED-OUT: $(grep canary "$work/r2/out/summary.txt")"
grep -qE '^resume_cuda +(NOT-RUN|SKIPPED) ' "$work/r2/out/summary.txt" || fail "the last step has no NOT-RUN/SKIPPED line after the hang"

# ---- 4. the answer unpacked here ----
if python3 -c 'import jsonschema' 2>/dev/null || /usr/bin/python3 -c 'import jsonschema' 2>/dev/null; then
    bash "$src/scripts/gpu_unpack.sh" "$work/r1/out" --root "$work/results-gpu" >"$work/unpack.log" 2>&1
    rc=$?
    day=$(sed -n 's/^date: \([0-9-]*\)T.*/\1/p' "$summary")
    dev=$(sed -n 's/^device: //p' "$summary" | tr 'A-Z' 'a-z' | sed 's/^nvidia //' | tr -cs 'a-z0-9' '-' | sed 's/^-//; s/-$//')
    dest=$work/results-gpu/$day-$dev
    [ $rc -eq 0 ] && [ -f "$dest/summary.txt" ] && [ -f "$dest/canary_mlp_cpu.json" ] && [ -f "$dest/remote-log.txt" ] &&
        grep -q 'validate_records: [1-9][0-9]* run record(s), 0 invalid' "$work/unpack.log" &&
        ok "gpu_unpack.sh: $(basename "$dest")/ with schema-valid records" ||
        { cat "$work/unpack.log" >&2; fail "gpu_unpack.sh: exit $rc, no valid records in $dest"; }
    bash "$src/scripts/gpu_unpack.sh" "$work/r1/out" --root "$work/results-gpu" >"$work/unpack2.log" 2>&1
    rc=$?
    [ $rc -eq 2 ] && grep -q 'nothing overwritten' "$work/unpack2.log" && ok "gpu_unpack.sh refuses to overwrite" ||
        fail "gpu_unpack.sh over an existing folder: exit $rc, $(cat "$work/unpack2.log")"
    mkdir -p "$work/bad" && cp "$work/r1/out/summary.txt" "$work/bad/" && head -c 100 "$work/r1/out/results.tar.gz" >"$work/bad/results.tar.gz"
    bash "$src/scripts/gpu_unpack.sh" "$work/bad" --root "$work/results-bad" >"$work/unpack3.log" 2>&1
    rc=$?
    [ $rc -eq 2 ] && [ "$(wc -l <"$work/unpack3.log")" -eq 1 ] && [ ! -e "$work/results-bad" ] &&
        ok "a truncated answer: exit 2, '$(cat "$work/unpack3.log")'" || fail "a truncated answer: exit $rc, $(cat "$work/unpack3.log")"
else
    echo "SKIPPED (part): no python3 jsonschema: the unpacking is not checked"
fi

if [ $fails -gt 0 ]; then
    echo "test_gpu_delivery: $fails failure(s)" >&2
    exit 1
fi
echo "test_gpu_delivery: the bundle, the remote command, its deadline and the unpacking hold"
