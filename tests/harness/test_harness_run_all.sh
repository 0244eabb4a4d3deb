#!/usr/bin/env bash
# bench/run_all.sh --quick end to end on this machine (CPU only is fine): a short run of every
# workload this ampbench knows, then checks that the run folder holds the JSON results, a run.json
# manifest, REPORT.md with the measured ratios and the plots. Skips (77) without the MNIST data.
# usage: test_harness_run_all.sh SOURCE_DIR BUILD_DIR DATA_ROOT
set -u -o pipefail
src=$1 build=$2 data=$3
if [ ! -e "$data/mnist/train-images-idx3-ubyte.gz" ] && [ ! -e "$data/mnist/train-images-idx3-ubyte" ]; then
    echo "SKIPPED: no MNIST under $data/mnist"
    exit 77
fi
tmp=$(mktemp -d /tmp/ab_harness_run_all_XXXXXX)
fail() { echo "FAIL: $*" >&2; echo "(files kept in $tmp)" >&2; exit 1; }

# the MLP, the reduced ResNet and BERT (tests/harness/fixtures/workloads-quick.conf) keep the whole
# matrix well under a minute on two cores
"$src/bench/run_all.sh" --quick --config "$src/tests/harness/fixtures/workloads-quick.conf" --no-build \
    --modes fp32,amp,dp-amp,dp-amp-ps,dp-amp-off,dp-amp-acc4,tp-amp,pp-amp --build-dir "$build" --run-dir "$tmp/run" \
    --no-copy-plots > "$tmp/out.log" 2>&1
rc=$?
cat "$tmp/out.log"
[ "$rc" = 0 ] || fail "run_all.sh exited $rc"
run=$tmp/run
for f in run.json REPORT.md mlp-fp32.json mlp-amp.json resnet50-fp32.json resnet50-amp.json; do
    [ -s "$run/$f" ] || fail "$run/$f is missing"
done
# every result is complete and trained the steps its config line asks for
for f in "$run"/mlp-*.json; do
    grep -q '"complete":[[:space:]]*true' "$f" || fail "$f is not complete"
    grep -q '"max_steps":[[:space:]]*100' "$f" || fail "$f did not run with --max-steps 100"
done
for f in "$run"/resnet50-*.json; do
    grep -q '"complete":[[:space:]]*true' "$f" || fail "$f is not complete"
    grep -q '"max_steps":[[:space:]]*20' "$f" || fail "$f did not run with --max-steps 20"
done
[ -s "$run/plots/memory_resnet-tiny.png" ] || fail "no memory-by-category plot of the ResNet"
# one progress line per run and a summary
grep -q '^\[1/[0-9]*\] mlp *fp32 *ok' "$tmp/out.log" || fail "no progress line for mlp fp32"
# the PyTorch peer beside ampbench where PyTorch is importable (run_all.sh's own search)
if grep -q '^peers: PyTorch' "$tmp/out.log"; then
    [ -s "$run/mlp-fp32-pytorch.json" ] || fail "PyTorch is here but the MLP peer's fp32 result is missing"
    grep -q '"tool":[[:space:]]*"pytorch"' "$run/mlp-fp32-pytorch.json" || fail "the peer's result is not a pytorch record"
    grep -q 'ampbench beside the PyTorch peer' "$run/REPORT.md" || fail "REPORT.md has no peer table"
    grep -q '"tool": "pytorch", "seed": 1, "status": "\(ok\|skipped\)"' "$run/run.json" || fail "run.json lists no peer run"
else
    grep -q 'PyTorch peer not run' "$run/REPORT.md" || fail "no peers and REPORT.md does not say why"
fi
grep -q '^summary: ' "$tmp/out.log" || fail "no summary line"
# the report holds a measured time saving (a signed percentage) beside the reported 40%
grep -Eq '^\| AMP time saving vs FP32 \| 40% .*\| [+-][0-9]+\.[0-9]% \(FP32 [0-9]+ -> AMP [0-9]+ samples/s\)' "$run/REPORT.md" ||
    fail "REPORT.md has no measured AMP time saving row"
grep -q '^| `mlp-fp32` | fp32 | 1 | cpu' "$run/REPORT.md" || fail "REPORT.md lists no mlp-fp32 run"
# the data-parallel run: measured with 2 MPI ranks when MPI is there, else listed as skipped
if [ -f "$run/mlp-dp-amp.json" ]; then
    grep -q '"world_size":[[:space:]]*2' "$run/mlp-dp-amp.json" || fail "mlp-dp-amp.json is not a 2-rank run"
    grep -q 'with 2 ranks, efficiency' "$run/REPORT.md" || fail "REPORT.md has no measured speed-up"
    # the other patterns: a parameter server, the ring after backward, 4x the micro-batches per sync
    grep -q '"sync":[[:space:]]*"ps"' "$run/mlp-dp-amp-ps.json" || fail "mlp-dp-amp-ps.json is not a parameter server's run"
    grep -q '"overlap":[[:space:]]*false' "$run/mlp-dp-amp-off.json" || fail "mlp-dp-amp-off.json overlapped"
    grep -q '"accum_steps":[[:space:]]*4' "$run/mlp-dp-amp-acc4.json" || fail "mlp-dp-amp-acc4.json is not at 4 micro-batches"
    # the model's splits: the MLP's matrices on 2 tensor ranks and its layers on 2 stages; the ResNet
    # refuses tensor groups, and the report says why in the split's place; every workload's part
    # sets the three side by side, measured, then projected
    grep -q '"tensor":[[:space:]]*2' "$run/mlp-tp-amp.json" || fail "mlp-tp-amp.json is not a 2-rank tensor split"
    grep -q '"pipeline_schedule":[[:space:]]*"1f1b"' "$run/mlp-pp-amp.json" || fail "mlp-pp-amp.json is not a 1f1b pipeline"
    grep -q '"mode": "tp-amp", "tool": "ampbench", "seed": 1, "status": "refused"' "$run/run.json" ||
        fail "run.json does not mark the ResNet's tensor split refused"
    [ "$(grep -c '^### Data, tensor and pipeline parallelism' "$run/REPORT.md")" = 3 ] ||
        fail "REPORT.md does not compare the three splits for each of the 3 workloads"
    grep -q '^| tp-amp | refused: resnet-tiny: --tensor-parallel 2 is not defined for ResNet' "$run/REPORT.md" ||
        fail "REPORT.md does not say why the ResNet has no tensor split"
    grep -Eq '^\| pp-amp \| data 1 x tensor 1 x pipeline 2 \| 2 \| [0-9.]+ \| [0-9.]+x \| .* \| [0-9.]+ / 0\.25 \|' "$run/REPORT.md" ||
        fail "REPORT.md has no measured pipeline row with its idle share beside (P-1)/M"
    grep -q '^PROJECTED, not measured: the speed-up over one GPU at the same samples' "$run/REPORT.md" ||
        fail "REPORT.md has no projection of the splits"
    for v in dp-amp dp-amp-ps dp-amp-off dp-amp-acc4; do
        grep -q "^| .* | \`mlp-$v\` |\$" "$run/REPORT.md" || fail "REPORT.md's comparison of patterns has no row for mlp-$v"
    done
    # the variants stay out of the runs table, so that the standard run's ratios are the ring's
    grep -q '^| `mlp-dp-amp-ps` |' "$run/REPORT.md" && fail "the parameter server's run is in the runs table"
else
    grep -q '`mlp-dp-amp` | skipped' "$run/REPORT.md" || fail "the data-parallel run is neither there nor listed as skipped"
fi
grep -q '(\*\*projected\*\*)' "$run/REPORT.md" || fail "REPORT.md has no projected 4-GPU figure"
grep -Eq '^\| parameter server, 1 server \| on \| [0-9.]+x \| [0-9.]+x \| [0-9]+% \|$' "$run/REPORT.md" ||
    fail "REPORT.md has no projected ring against parameter server table"
[ -s "$run/plots/dp_patterns_mlp.png" ] || fail "no plot of the patterns' projected speed-up against nodes"
# BERT (the tiny configuration) under a --memory-limit: the runs fit, and the largest batch that fits
# comes from --find-max-batch in FP32 and AMP; {data} in the config is the data root
for m in fp32 amp; do
    [ -s "$run/bert-$m.json" ] || fail "bert-$m.json is missing"
    grep -q '"tool":[[:space:]]*"ampbench-fit"' "$run/bert-$m-fit.json" || fail "no --find-max-batch record for bert $m"
    grep -Eq '"max_batch":[[:space:]]*[1-9]' "$run/bert-$m-fit.json" || fail "bert-$m-fit.json has no largest batch"
done
grep -q '{data}' "$run/logs/bert-fp32.log" && fail "{data} was not replaced in the BERT options"
head -n 1 "$run/logs/bert-fp32.log" | grep -q -- "--vocab $data/bert-base-uncased/vocab.txt" ||
    fail "bert-fp32 did not get the vocabulary under the data root $data"
grep -Eq '^\| FP32 fits in memory \|.*\| yes at batch 16: .* the largest batch that fits 50\.3 MB at sequence 32: [0-9]+' \
    "$run/REPORT.md" || fail "REPORT.md has no FP32 fit row for BERT"

# a batch FP32 cannot hold under the limit while AMP can: a measured "no" (exit 3, its record kept,
# status did-not-fit), not a failure of run_all.sh, and the report says so
printf 'bert  bert-tiny  sst2  1  2  2  -  -  --max-seq-len 32 --batch-size 60 --train-subset 128 --test-subset 32 --memory-limit 48M\n' \
    > "$tmp/oom.conf"
"$src/bench/run_all.sh" --quick --config "$tmp/oom.conf" --no-build --no-mpi --no-peers --build-dir "$build" \
    --run-dir "$tmp/oom" --no-copy-plots > "$tmp/oom.log" 2>&1
rc=$?
cat "$tmp/oom.log"
[ "$rc" = 0 ] || fail "run_all.sh exited $rc on a run that did not fit"
grep -q '"fits_in_memory":[[:space:]]*false' "$tmp/oom/bert-fp32.json" || fail "the FP32 record does not say it did not fit"
grep -q '"fits_in_memory":[[:space:]]*true' "$tmp/oom/bert-amp.json" || fail "the AMP run should fit"
grep -q '"name": "bert-fp32", "workload": "bert", "mode": "fp32", "tool": "ampbench", "seed": 1, "status": "did-not-fit"' \
    "$tmp/oom/run.json" || fail "run.json does not mark the FP32 run did-not-fit"
grep -Eq '^\| FP32 fits in memory \|.*\| no at batch 60: it needed [0-9.]+ MB of a 50\.3 MB limit' "$tmp/oom/REPORT.md" ||
    fail "REPORT.md does not say FP32 did not fit"
for p in amp_savings loss_mlp scale_mlp accuracy_mlp; do
    [ -s "$run/plots/$p.png" ] || fail "plot $p.png is missing"
    grep -q "plots/$p.png" "$run/REPORT.md" || fail "REPORT.md does not link $p.png"
done

# Interrupted (SIGTERM, as CI cancels a job; Ctrl-C sends SIGINT to the same handler) once the FP32
# result is there: exit 130, the finished result kept, the rest marked, a report from what exists.
"$src/bench/run_all.sh" --quick --max-steps 5000 --workloads mlp --no-mpi --no-build --build-dir "$build" \
    --run-dir "$tmp/int" --no-copy-plots > "$tmp/int.log" 2>&1 &
pid=$!
for _ in $(seq 1 600); do
    [ -s "$tmp/int/mlp-fp32.json" ] && break
    kill -0 "$pid" 2> /dev/null || break
    sleep 0.1
done
kill -TERM "$pid" 2> /dev/null
wait "$pid"
rc=$?
cat "$tmp/int.log"
[ "$rc" = 130 ] || fail "interrupted run_all.sh exited $rc, want 130"
grep -q '"complete":[[:space:]]*true' "$tmp/int/mlp-fp32.json" || fail "the finished FP32 result was not kept"
grep -q '"status": "interrupted"' "$tmp/int/run.json" || fail "run.json does not mark the interrupted runs"
grep -q 'interrupted' "$tmp/int/REPORT.md" || fail "REPORT.md does not list the interrupted runs"
grep -q '^| `mlp-fp32` | fp32 ' "$tmp/int/REPORT.md" || fail "REPORT.md lacks the finished FP32 run"

# --resume in the interrupted folder: the finished FP32 result is kept, not run again, and the rest runs
"$src/bench/run_all.sh" --quick --max-steps 5000 --workloads mlp --no-mpi --no-build --build-dir "$build" \
    --run-dir "$tmp/int" --no-copy-plots --resume > "$tmp/resume.log" 2>&1 || { cat "$tmp/resume.log"; fail "--resume exited non-zero"; }
grep -q '^\[1/[0-9]*\] mlp *fp32 *kept' "$tmp/resume.log" || fail "--resume did not keep the finished FP32 result: $(cat "$tmp/resume.log")"
grep -q '^\[[0-9]*/[0-9]*\] mlp *amp *ok' "$tmp/resume.log" || fail "--resume did not run AMP: $(cat "$tmp/resume.log")"
grep -q '"complete":[[:space:]]*true' "$tmp/int/mlp-amp.json" || fail "the resumed AMP result is not complete"

# --full: each ampbench run checkpoints every epoch into RUN_DIR/checkpoints/<run>; the whole
# harness killed (SIGKILL: a lost machine) midway through a run, then --resume continues that run
# from its last epoch and ends with the record of a harness never stopped (tests/checkpoint/resume_check.py)
full=(--full --epochs 4 --workloads resnet50 --modes amp --no-mpi --no-peers --no-build --build-dir "$build"
      --config "$src/tests/harness/fixtures/workloads-quick.conf" --no-copy-plots)
"$src/bench/run_all.sh" "${full[@]}" --run-dir "$tmp/full-ref" > "$tmp/full-ref.log" 2>&1 ||
    { cat "$tmp/full-ref.log"; fail "run_all.sh --full exited non-zero"; }
[ ! -e "$tmp/full-ref/checkpoints" ] || fail "a finished --full run left its checkpoints: $(ls -R "$tmp/full-ref/checkpoints")"
"$src/bench/run_all.sh" "${full[@]}" --run-dir "$tmp/full" > "$tmp/full.log" 2>&1 &
pid=$!
for _ in $(seq 1 600); do
    ls "$tmp/full/checkpoints/resnet50-amp" 2> /dev/null | grep -q '^ckpt-0*80$' && break
    kill -0 "$pid" 2> /dev/null || break
    sleep 0.05
done
kill -9 "$pid" 2> /dev/null
pkill -9 -f -- "$tmp/full/" 2> /dev/null
wait "$pid" 2> /dev/null
ls "$tmp/full/checkpoints/resnet50-amp" 2> /dev/null | grep -q '^ckpt-' || fail "the killed --full run left no checkpoint"
"$src/bench/run_all.sh" "${full[@]}" --run-dir "$tmp/full" --resume > "$tmp/full-resume.log" 2>&1 ||
    { cat "$tmp/full-resume.log"; fail "run_all.sh --full --resume exited non-zero"; }
grep -q 'resuming from ckpt-' "$tmp/full-resume.log" || fail "--resume did not continue from a checkpoint: $(cat "$tmp/full-resume.log")"
grep -q '"resumed_at_steps"' "$tmp/full/resnet50-amp.json" || fail "the resumed record does not say it was resumed"
python3 "$src/tests/checkpoint/resume_check.py" "$tmp/full-ref/resnet50-amp.json" "$tmp/full/resnet50-amp.json" --min-resumes 1 ||
    fail "the resumed --full run's record differs from the uninterrupted one's"
[ ! -e "$tmp/full/checkpoints" ] || fail "the resumed run left its checkpoints"
grep -q '^| `resnet50-amp` .*| complete, resumed 1 time from checkpoints |$' "$tmp/full/REPORT.md" ||
    fail "REPORT.md does not say the run was resumed: $(grep 'resnet50-amp' "$tmp/full/REPORT.md" | head -n 3)"

# --seeds 2 --modes fp32,amp: every run twice (<run>-s<seed>.json, workload.seed), the CPU profile
# named in run.json and REPORT.md, and the report's accuracy over seeds
"$src/bench/run_all.sh" --quick --max-steps 20 --workloads mlp --seeds 2 --modes fp32,amp --no-mpi --no-peers \
    --no-build --build-dir "$build" --config "$src/tests/harness/fixtures/workloads-quick.conf" \
    --run-dir "$tmp/seeds" --no-copy-plots > "$tmp/seeds.log" 2>&1 || { cat "$tmp/seeds.log"; fail "--seeds 2 exited non-zero"; }
for m in fp32 amp; do
    for k in 1 2; do
        grep -Eq '"seed":[[:space:]]*'$k',' "$tmp/seeds/mlp-$m-s$k.json" || fail "mlp-$m-s$k.json is missing or not seed $k"
    done
done
[ ! -e "$tmp/seeds/mlp-dp-amp-s1.json" ] || fail "--modes fp32,amp ran data-parallel"
grep -q '"profile": "quick-cpu"' "$tmp/seeds/run.json" || fail "run.json does not name the CPU profile"
grep -q '"seeds": 2' "$tmp/seeds/run.json" || fail "run.json does not say 2 seeds"
grep -q '^Profile: quick-cpu' "$tmp/seeds/REPORT.md" || fail "REPORT.md does not name the profile"
grep -Eq '^\| ampbench \| fp32 \| 2 \(1, 2\) \| [0-9.]+ ± [0-9.]+ \|' "$tmp/seeds/REPORT.md" ||
    fail "REPORT.md has no accuracy-over-seeds row for FP32"
grep -Eq '^\| ampbench AMP - FP32 \| 2 pairs \|' "$tmp/seeds/REPORT.md" || fail "REPORT.md has no AMP - FP32 interval"

# --loss-scale-ablation: AMP at --loss-scale 1 beside FP32 and AMP, each with a gradient census
# (a tenth of the steps); REPORT.md's gradient-range part with its three rows; both plots
"$src/bench/run_all.sh" --quick --max-steps 40 --workloads mlp --modes fp32,amp --loss-scale-ablation --no-mpi \
    --no-peers --no-build --build-dir "$build" --config "$src/tests/harness/fixtures/workloads-quick.conf" \
    --run-dir "$tmp/abl" --no-copy-plots > "$tmp/abl.log" 2>&1 || { cat "$tmp/abl.log"; fail "--loss-scale-ablation exited non-zero"; }
grep -q '"loss_scale_mode":[[:space:]]*"static"' "$tmp/abl/mlp-amp-ls1.json" || fail "mlp-amp-ls1.json is not at a static scale"
for m in fp32 amp amp-ls1; do
    grep -Eq '"interval":[[:space:]]*4,' "$tmp/abl/mlp-$m.json" || fail "mlp-$m.json has no census every 4 steps"
done
grep -q '^### Gradient range: what loss scaling rescues' "$tmp/abl/REPORT.md" || fail "REPORT.md has no gradient-range part"
for row in 'FP32' 'AMP, dynamic scale'; do
    grep -Eq "^\| $row \| [^|]+ \| [0-9]+ \| [0-9.]+ \| [0-9.]+% \| [0-9.]+% \| [0-9.e-]+% / [0-9.e-]+% \|" "$tmp/abl/REPORT.md" ||
        fail "the gradient-range table has no '$row' row with figures"
done
# at scale 1 fp16 has already made the flushed values zeros: the row says so, and gives no flushed share
grep -Eq "^\| AMP, static scale 1 \| [^|]+ \| [0-9]+ \| [0-9.]+ \| [0-9.]+% \| [0-9.]+% \| not observable: fp16 made them zeros" \
    "$tmp/abl/REPORT.md" || fail "the gradient-range table has no 'AMP, static scale 1' row saying its flushed share is not observable"

grep -q '^What it means: in the FP32 run, ' "$tmp/abl/REPORT.md" || fail "the gradient-range part says nothing of what it means"
for p in grad_hist_mlp grad_layers_mlp; do
    [ -s "$tmp/abl/plots/$p.png" ] || fail "plot $p.png is missing"
    grep -q "plots/$p.png" "$tmp/abl/REPORT.md" || fail "REPORT.md does not link $p.png"
done

# a config in the old layout (no cpu_steps, cpu_test columns) and an unknown mode: exit 2, one line
printf 'mlp  mlp  mnist  10  200  peers/mnist_mlp.py  --batch-size 64\n' > "$tmp/old.conf"
"$src/bench/run_all.sh" --quick --config "$tmp/old.conf" --no-build --build-dir "$build" --run-dir "$tmp/old" \
    > "$tmp/old.log" 2>&1
rc=$?
[ "$rc" = 2 ] && grep -q "is not a whole number where full_epochs, quick_steps and cpu_steps go" "$tmp/old.log" ||
    fail "an old-layout config gave exit $rc: $(cat "$tmp/old.log")"
"$src/bench/run_all.sh" --quick --modes fp32,fp8 --no-build --build-dir "$build" --run-dir "$tmp/bad" > "$tmp/bad.log" 2>&1
rc=$?
[ "$rc" = 2 ] && grep -q "unknown mode 'fp8'" "$tmp/bad.log" || fail "--modes fp8 gave exit $rc: $(cat "$tmp/bad.log")"

rm -rf "$tmp"
echo "test_harness_run_all: ok"
