#!/usr/bin/env bash
# The ampbench command line: --name VALUE and --name=VALUE set the same thing; an unknown option,
# a missing or bad value, a stray argument, a missing or corrupt data file each give one clear
# line and a non-zero exit; --help lists each option of the parser's table once, and every option
# README.md's ampbench section names is one the parser knows; an interrupted run exits 130 and
# keeps the epochs it finished in its JSON result.
set -u
AMPBENCH=${1:?usage: test_cli.sh path/to/ampbench}
README=$(dirname "$0")/../../README.md
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

expect_error 2 "unknown option '--bogus' (see ampbench --help)" -- train --bogus 1
expect_error 2 "unknown option '--bogus' (see ampbench --help)" -- train --bogus=1
expect_error 2 "unknown option '-x'" -- train -x
expect_error 2 "unknown option '--epoch' (did you mean --epochs?" -- train --epoch 2
expect_error 2 "--precision: unknown precision 'fp8'" -- train --precision fp8
expect_error 2 "--epochs: 'x' is not an integer" -- train --epochs x
expect_error 2 "--epochs: '0' is not an integer in [1, 100000]" -- train --epochs=0
expect_error 2 "--lr: 'nan' is not a finite number" -- train --lr nan
expect_error 2 "--lr: 'abc' is not a finite number" -- train --lr=abc
expect_error 2 "--lr needs a value (LR)" -- train --lr
expect_error 2 "--lr needs a value (LR), got an empty one" -- train --lr=
expect_error 2 "--lr needs a value (LR), got the option '--quiet'" -- train --lr --quiet
expect_error 2 "--quiet takes no value, got '1'" -- train --quiet=1
expect_error 2 "unexpected argument 'extra'" -- train --quiet extra
expect_error 2 "unexpected argument 'extra'" -- train -- extra
# model-step (the GPU step model): bad input gets one line, and the table names every precision
expect_error 2 "model-step: unknown GPU 'b200'" -- model-step --model mlp --gpu b200
expect_error 2 "model-step: unknown option '--bogus'" -- model-step --model mlp --bogus 1
expect_error 2 "model-step: --model NAME is required" -- model-step --gpu a100
expect_error 2 "model-step: --input 'x' is not CxHxW" -- model-step --model resnet50 --input x
expect_error 2 "model-step: --max-seq-len is for BERT" -- model-step --model resnet50 --max-seq-len 64
expect_error 2 "--proj-gpu: 'b200' is not a GPU of the step model's table" -- train --proj-gpu b200
"$AMPBENCH" model-step --model mlp --gpu v100 >"$tmp/ms" 2>&1 || fail "model-step --model mlp --gpu v100 failed: $(cat "$tmp/ms")"
for p in fp32 amp; do grep -qE "^  $p +[0-9.]+ +[0-9.]+ +[0-9.]+x" "$tmp/ms" || fail "model-step: no $p row: $(cat "$tmp/ms")"; done
grep -q "^  bf16 .*has no BF16" "$tmp/ms" || fail "model-step: the V100's missing bf16 not said: $(cat "$tmp/ms")"
# --profile-ops: the run as usual, then the table by op kind
"$AMPBENCH" train --max-steps 5 --test-subset 64 --profile-ops >"$tmp/prof" 2>&1 || fail "train --profile-ops failed: $(tail -3 "$tmp/prof")"
grep -q "^  GEMM (linear, attention products) " "$tmp/prof" || fail "--profile-ops printed no GEMM line: $(cat "$tmp/prof")"
grep -q "fp32 GEMM at 2048^3: [0-9.]* GFLOP/s" "$tmp/prof" || fail "--profile-ops printed no reference GEMM rate"
expect_error 2 "--profile-ops profiles a training run" -- train --profile-ops --find-max-batch --memory-limit 1G
expect_error 2 "--blocks: '1,1,x,1' is not four values A,B,C,D (bottleneck blocks per stage)" -- train --blocks 1,1,x,1
expect_error 2 "--blocks: '1,1,1' is not four values A,B,C,D (bottleneck blocks per stage)" -- train --blocks 1,1,1
expect_error 2 "--blocks: '1,1,1,1,1' is not four values A,B,C,D (bottleneck blocks per stage)" -- train --blocks=1,1,1,1,1
expect_error 2 "--blocks: '1,0,1,1' is not four values A,B,C,D (bottleneck blocks per stage)" -- train --blocks 1,0,1,1
expect_error 2 "--width: '0' is not an integer" -- train --width 0
expect_error 2 "--train-subset: '-1' is not an integer" -- train --train-subset -1
expect_error 2 "--warmup-steps: '-1' is not an integer" -- train --warmup-steps -1
expect_error 2 "--lr-schedule: unknown learning-rate schedule 'exp'" -- train --lr-schedule exp
expect_error 2 "--comm-timeout: '0' must be positive" -- train --comm-timeout=0
expect_error 2 "--repeats: '0' is not an integer" -- bench --repeats 0
# --loss-scale dynamic|S: a bad S names the flag and the value; a static S belongs to amp alone and
# excludes the dynamic scaler's options
for v in 0 -1 -0.5 nan inf -inf; do
  expect_error 2 "--loss-scale: '$v' is not a positive finite scale (or dynamic)" -- train --precision amp --loss-scale "$v"
done
expect_error 2 "--loss-scale: '12abc' is neither dynamic nor a number" -- train --precision amp --loss-scale 12abc
expect_error 2 "--loss-scale: 'Dynamic' is neither dynamic nor a number" -- train --precision amp --loss-scale=Dynamic
expect_error 2 "--loss-scale: '1e39' is beyond the range of a float" -- train --precision amp --loss-scale 1e39
expect_error 2 "--loss-scale: '1e-9' is below 2^-24" -- train --precision amp --loss-scale 1e-9
expect_error 2 "--loss-scale 1024: a static loss scale needs --precision amp (fp32 trains without a loss scale)" -- \
  train --loss-scale 1024
expect_error 2 "--loss-scale 1: a static loss scale needs --precision amp (bf16 trains without a loss scale)" -- \
  train --loss-scale 1 --precision bf16
expect_error 2 "--loss-scale 8 is static: --init-scale belongs to the dynamic scaler" -- \
  train --precision amp --init-scale 8 --loss-scale 8
expect_error 2 "--loss-scale 8 is static: --growth-interval belongs to the dynamic scaler" -- \
  train --precision amp --loss-scale=8 --growth-interval 10
expect_error 2 "unknown command 'fly'" -- fly
expect_error 1 "unknown model 'vgg'" -- train --model vgg --max-steps 1 --quiet
models=$(sed -n "s/.*(available: \(.*\))$/\1/p" "$tmp/err" | tr -d ,)
expect_error 1 "$tmp/none/train-images-idx3-ubyte[.gz]: no such file" -- train --data "$tmp/none" --quiet

# a corrupt data file: a truncated copy of the real training images
mkdir -p "$tmp/bad"
src=$("$AMPBENCH" --help | sed -n 's/.*\[mnist: \([^,]*\), .*/\1/p')
[ -d "$src" ] || fail "cannot find the default MNIST folder in --help ($src)"
for f in train-labels-idx1-ubyte.gz t10k-images-idx3-ubyte.gz t10k-labels-idx1-ubyte.gz; do cp "$src/$f" "$tmp/bad/"; done
gzip -dc "$src/train-images-idx3-ubyte.gz" | head -c 100000 >"$tmp/bad/train-images-idx3-ubyte"
expect_error 1 "$tmp/bad/train-images-idx3-ubyte: truncated" -- train --data "$tmp/bad" --quiet

# --help: generated from the option table, on stdout (exit 0), and on stderr (exit 2) when
# ampbench is given nothing to do
"$AMPBENCH" --help >"$tmp/help" 2>"$tmp/err"; rc=$?
[ "$rc" -eq 0 ] && [ ! -s "$tmp/err" ] || fail "ampbench --help: exit $rc, stderr $(cat "$tmp/err")"
"$AMPBENCH" train --lr 0.1 --help >"$tmp/out" 2>&1 || fail "ampbench train --lr 0.1 --help exited $?"
cmp -s "$tmp/help" "$tmp/out" || fail "ampbench train --help differs from ampbench --help"
"$AMPBENCH" >"$tmp/out" 2>"$tmp/err"; rc=$?
[ "$rc" -eq 2 ] && [ ! -s "$tmp/out" ] && cmp -s "$tmp/help" "$tmp/err" || fail "ampbench alone: exit $rc, not the help on stderr"
"$AMPBENCH" train --version | grep -q '^ampbench ' || fail "ampbench train --version"

# recognised: the parser names the option itself (a value option refuses the empty value, a flag
# refuses any value), where an unknown one gets "unknown option"
recognised() {
  "$AMPBENCH" train "--$1=" >/dev/null 2>"$tmp/err"
  local rc=$?
  [ "$rc" -eq 2 ] && grep -q -- "^ampbench: --$1 " "$tmp/err"
}
listed=$(grep -oE '^  --[a-z0-9-]+' "$tmp/help" | sed 's/^  --//')
[ "$(wc -l <<<"$listed")" -ge 40 ] || fail "--help lists only $(wc -l <<<"$listed") options"
dups=$(sort <<<"$listed" | uniq -d)
[ -z "$dups" ] || fail "--help lists these options more than once: $dups"
for o in $listed; do recognised "$o" || fail "--$o is in --help but the parser does not take it: $(cat "$tmp/err")"; done
recognised bogus && fail "recognised() takes --bogus"
# every option named in README.md's ampbench section (up to its first subsection)
# (the tokenize and recipe lines name those commands' own options, checked against them below)
documented=$(sed -n '/^## ampbench$/,/^###/p' "$README" | grep -v 'ampbench tokenize\|ampbench recipe' |
  grep -oE -- '--[a-z][a-z0-9-]*[a-z0-9]' | sort -u | sed 's/^--//')
[ "$(wc -l <<<"$documented")" -ge 40 ] || fail "README.md's ampbench section names only $(wc -l <<<"$documented") options"
for o in $documented; do recognised "$o" || fail "README.md documents --$o, which the parser does not take"; done
rec_documented=$(sed -n '/^## ampbench$/,/^###/p' "$README" | grep 'ampbench recipe' |
  grep -oE -- '--[a-z][a-z0-9-]*[a-z0-9]' | sort -u | sed 's/^--//')
[ -n "$rec_documented" ] || fail "README.md's ampbench section shows no ampbench recipe usage"
for o in $rec_documented; do
  "$AMPBENCH" recipe "--$o" x --model mlp >"$tmp/out" 2>"$tmp/err"
  grep -q "unknown option" "$tmp/err" && fail "README.md documents recipe --$o, which recipe does not take"
done
tok_documented=$(sed -n '/^## ampbench$/,/^###/p' "$README" | grep 'ampbench tokenize' |
  grep -oE -- '--[a-z][a-z0-9-]*[a-z0-9]' | sort -u | sed 's/^--//')
[ -n "$tok_documented" ] || fail "README.md's ampbench section shows no ampbench tokenize usage"
for o in $tok_documented; do
  "$AMPBENCH" tokenize "--$o" >"$tmp/out" 2>"$tmp/err"
  grep -q "unknown option" "$tmp/err" && fail "README.md documents tokenize --$o, which tokenize does not take"
done
# run_all.sh knows a model is built when its name is a word of --help
[ -n "$models" ] || fail "no model list in the unknown-model message"
for m in $models; do grep -qw -- "$m" "$tmp/help" || fail "model $m missing from --help"; done

# --name=VALUE and --name VALUE set the same field, as the result record shows
field() { grep -E "^[[:space:]]*\"$2\":" "$1" | head -n 1 | sed -E 's/.*:[[:space:]]*//; s/,$//'; }
tiny=(--max-steps 1 --train-subset 64 --test-subset 64 --batch-size 32 --quiet)
if "$AMPBENCH" train "${tiny[@]}" --lr=0.5 --lr-schedule=cosine --warmup-steps 2 --no-augment --seed=7 \
    --out "$tmp/eq.json" 2>"$tmp/err" &&
   "$AMPBENCH" train "${tiny[@]}" --lr 0.5 --lr-schedule cosine --warmup-steps=2 --no-augment --seed 7 \
    --out "$tmp/sp.json" 2>>"$tmp/err"; then
  for f in eq sp; do
    for kv in lr=0.5 lr_schedule='"cosine"' warmup_steps=2 augment=false seed=7 train_subset=64 test_samples=64; do
      [ "$(field "$tmp/$f.json" "${kv%%=*}")" = "${kv#*=}" ] ||
        fail "$f.json: ${kv%%=*} is $(field "$tmp/$f.json" "${kv%%=*}"), expected ${kv#*=}"
    done
  done
else
  fail "tiny MNIST runs failed: $(cat "$tmp/err")"
fi
# an overflow arising in the backward itself (a loss scale of 1e30 makes the fp16 loss gradient
# infinite): in one process the ops that fold the MLP's gradients are what checks them (the pass
# after them reads only what they did not fold), and every step is skipped, the scale halved each time
small=(--train-subset 256 --test-subset 64 --batch-size 32)
"$AMPBENCH" train "${small[@]}" --precision amp --init-scale 1e30 --max-steps 3 --log-interval 1 --out "$tmp/ovf.json" \
  >"$tmp/out" 2>"$tmp/err" || fail "an overflowing AMP run failed: $(cat "$tmp/err")"
[ "$(grep -c 'step skipped: gradient overflow' "$tmp/out")" -eq 3 ] && [ "$(field "$tmp/ovf.json" skipped_steps)" = 3 ] ||
  fail "a loss scale of 1e30: not 3 skipped steps: $(cat "$tmp/out")"
# a static loss scale: the recipe line states it, the record names the mode and keeps the scale
# through an overflow, which is skipped and recorded (an injected inf at step 2); dynamic, given or
# not, is today's scaler, and under fp32 it changes nothing
"$AMPBENCH" train "${small[@]}" --precision amp --loss-scale 1024 --max-steps 4 --inject-inf-step 2 --log-interval 1 \
  --out "$tmp/ls.json" >"$tmp/out" 2>"$tmp/err" || fail "static loss scale run failed: $(cat "$tmp/err")"
sed -n 2p "$tmp/out" | grep -qF 'amp (fp16 compute, fp32 master weights; static loss scale 1024: a step with an inf/NaN gradient is skipped, the scale never changes)' ||
  fail "recipe line of a static scale: $(sed -n 2p "$tmp/out")"
[ "$(grep -c 'step skipped: gradient overflow' "$tmp/out")" -eq 1 ] || fail "static scale: not one skipped step: $(cat "$tmp/out")"
for kv in loss_scale_mode='"static"' dynamic=false init_scale=1024 final_scale=1024 skipped_steps=1; do
  [ "$(field "$tmp/ls.json" "${kv%%=*}")" = "${kv#*=}" ] ||
    fail "static scale record: ${kv%%=*} is $(field "$tmp/ls.json" "${kv%%=*}"), expected ${kv#*=}"
done
flat=$(tr -d '[:space:]' <"$tmp/ls.json")
grep -qF '"overflow_events":[{"step":2,"epoch":1,"scale_before":1024,"scale_after":1024}]' <<<"$flat" ||
  fail "static scale: the overflow event is not recorded with the scale unchanged"
grep -qF '"changes":[{"step":0,"scale":1024}]' <<<"$flat" || fail "static scale: the scale changed"
grep -q '"growth_interval"' "$tmp/ls.json" && fail "static scale record keeps the dynamic scaler's growth_interval"
"$AMPBENCH" train "${small[@]}" --precision amp --loss-scale 1 --max-steps 2 --out "$tmp/ls1.json" >"$tmp/out" 2>"$tmp/err" ||
  fail "--loss-scale 1 run failed: $(cat "$tmp/err")"
sed -n 2p "$tmp/out" | grep -qF 'static loss scale 1, i.e. no loss scaling' || fail "recipe line at scale 1: $(sed -n 2p "$tmp/out")"
[ "$(field "$tmp/ls1.json" loss_scale_mode)" = '"static"' ] && [ "$(field "$tmp/ls1.json" final_scale)" = 1 ] ||
  fail "--loss-scale 1: mode $(field "$tmp/ls1.json" loss_scale_mode), final scale $(field "$tmp/ls1.json" final_scale)"
for p in amp fp32; do
  "$AMPBENCH" train "${small[@]}" --quiet --precision $p --max-steps 3 --log-interval 1 --out "$tmp/d0-$p.json" 2>"$tmp/err" &&
    "$AMPBENCH" train "${small[@]}" --quiet --precision $p --loss-scale dynamic --max-steps 3 --log-interval 1 \
      --out "$tmp/d1-$p.json" 2>>"$tmp/err" || fail "--loss-scale dynamic $p: $(cat "$tmp/err")"
  mode=$([ $p = amp ] && echo '"dynamic"' || echo '"none"')
  [ "$(field "$tmp/d1-$p.json" loss_scale_mode)" = "$mode" ] || fail "$p: loss_scale_mode $(field "$tmp/d1-$p.json" loss_scale_mode)"
  [ "$(sed -n '/"loss_curve"/,$p' "$tmp/d0-$p.json")" = "$(sed -n '/"loss_curve"/,$p' "$tmp/d1-$p.json")" ] ||
    fail "--loss-scale dynamic ($p) changed the losses"
done

# --grad-census K reads gradients and never writes them: with and without it the same per-step
# losses and the same weights, bit for bit (the MLP in amp; resnet-tiny in amp with two
# micro-batches, so that conv, batch norm and linear layers are observed and pooled); censuses at
# steps 1 and 1 + K; a bad K exits 2 naming the flag
expect_error 2 "--grad-census: '-1' is not an integer in [0," -- train --grad-census -1
expect_error 2 "--grad-census: 'x' is not an integer in [0," -- train --grad-census x
for args in "--model mlp" "--model resnet-tiny --accum-steps 2 --batch-size 8"; do
  # shellcheck disable=SC2206
  run=(train $args --precision amp --train-subset 512 --test-subset 16 --max-steps 5 --log-interval 1 --quiet)
  if "$AMPBENCH" "${run[@]}" --save "$tmp/c0.safetensors" --out "$tmp/c0.json" 2>"$tmp/err" &&
     "$AMPBENCH" "${run[@]}" --grad-census 2 --save "$tmp/c1.safetensors" --out "$tmp/c1.json" 2>>"$tmp/err"; then
    cmp -s "$tmp/c0.safetensors" "$tmp/c1.safetensors" || fail "--grad-census changed the weights ($args)"
    python3 -c 'import json, sys; a, b = (json.load(open(f))["loss_curve"] for f in sys.argv[1:]); sys.exit(a != b or len(a) < 4)' \
      "$tmp/c0.json" "$tmp/c1.json" || fail "--grad-census changed the losses ($args)"
    steps=$(python3 -c 'import json, sys; g = json.load(open(sys.argv[1]))["grad_census"]
print(g["interval"], *[r["step"] for r in g["records"]], *sorted({t["kind"] for r in g["records"] for t in r["tensors"]}))' "$tmp/c1.json")
    [ "$steps" = "2 1 3 5 activation weight" ] || fail "--grad-census 2 over 5 steps ($args): '$steps', want '2 1 3 5 activation weight'"
    grep -q '"grad_census"' "$tmp/c0.json" && fail "a run without --grad-census records one ($args)"
  else
    fail "--grad-census runs ($args): $(cat "$tmp/err")"
  fi
done

# the first line of a run names the model, its parameter count and multiply-adds per sample
# (784 x 256 + 256 x 10 = 203,264 for the MLP), as the record has them; --quiet drops it
"$AMPBENCH" train --max-steps 1 --train-subset 64 --test-subset 64 --batch-size 32 --out "$tmp/m.json" \
  >"$tmp/out" 2>"$tmp/err" || fail "MLP run failed: $(cat "$tmp/err")"
head -n 1 "$tmp/out" | grep -qx 'Model mlp: 203530 parameters, 0.2033 M multiply-adds per sample; mnist, 64 train and 64 test samples' ||
  fail "first line of a run: $(head -n 1 "$tmp/out")"
# the second line states the effective recipe; a constant schedule keeps the recipe's warm-up, and
# the line says so (and that 3 steps never reach the rate)
sed -n 2p "$tmp/out" | grep -qx 'Recipe: sgd (no momentum), lr 0.01, constant, no warm-up; 1 step in all, no weight decay; batch 32 x 1 micro-batch x 1 rank; fp32 (no loss scaling)' ||
  fail "second line of a run: $(sed -n 2p "$tmp/out")"
"$AMPBENCH" train --model resnet-tiny --precision amp --lr-schedule constant --max-steps 3 --train-subset 64 --test-subset 8 \
  --batch-size 16 --out "$tmp/rt.json" >"$tmp/out2" 2>"$tmp/err" || fail "resnet-tiny run failed: $(cat "$tmp/err")"
sed -n 2p "$tmp/out2" | grep -qx 'Recipe: sgd (momentum 0.9), lr 0.1, linear warm-up from 0 over 100 steps, then constant; 3 steps in all (the warm-up outlasts the run: the rate never reaches lr), weight decay 0.0005 (L2, on every parameter); batch 16 x 1 micro-batch x 1 rank; amp (fp16 compute, fp32 master weights; dynamic loss scale from 65536, x2 after 2000 clean steps, x0.5 on an overflow)' ||
  fail "second line of a resnet-tiny amp run: $(sed -n 2p "$tmp/out2")"
[ "$(field "$tmp/m.json" parameters)" = 203530 ] && [ "$(field "$tmp/m.json" macs_per_sample)" = 203264 ] ||
  fail "record: parameters $(field "$tmp/m.json" parameters), macs_per_sample $(field "$tmp/m.json" macs_per_sample)"
"$AMPBENCH" train "${tiny[@]}" >"$tmp/out" 2>&1 && ! grep -q '^Model' "$tmp/out" || fail "--quiet still prints the model line"
# --width and --blocks reach the model: each changes resnet-tiny's parameter count
p=()
for shape in "" "--width 4" "--width=4 --blocks=1,1,2,1"; do
  # shellcheck disable=SC2086  # shape splits into options
  "$AMPBENCH" train --model resnet-tiny $shape "${tiny[@]}" --batch-size 8 --out "$tmp/rn.json" 2>"$tmp/err" ||
    fail "resnet-tiny $shape: $(cat "$tmp/err")"
  p+=("$(field "$tmp/rn.json" parameters)")
done
[ "${p[1]:-0}" -lt "${p[0]:-0}" ] && [ "${p[2]:-0}" -gt "${p[1]:-0}" ] ||
  fail "resnet-tiny parameters: default ${p[0]}, --width 4 ${p[1]}, with --blocks 1,1,2,1 ${p[2]}"

# a model's recipe gives the defaults (resnet: CIFAR-10, SGD lr 0.1 momentum 0.9, wd 5e-4, cosine
# with warm-up); an option overrides its part only
"$AMPBENCH" train --model resnet-tiny "${tiny[@]}" --batch-size 8 --out "$tmp/rc.json" 2>"$tmp/err" &&
  "$AMPBENCH" train --lr 0.05 --model resnet-tiny "${tiny[@]}" --batch-size 8 --out "$tmp/rc2.json" 2>>"$tmp/err" ||
  fail "resnet-tiny with its recipe: $(cat "$tmp/err")"
near() { awk -v a="$1" -v b="$2" 'BEGIN { d = a - b; exit !(d < 1e-6 && d > -1e-6) }'; }
[ "$(field "$tmp/rc.json" dataset)" = '"cifar10"' ] && [ "$(field "$tmp/rc.json" lr_schedule)" = '"cosine"' ] &&
  [ "$(field "$tmp/rc.json" warmup_steps)" = 100 ] || fail "resnet-tiny's recipe: dataset, schedule or warm-up"
for kv in lr=0.1 momentum=0.9 weight_decay=5e-4; do
  near "$(field "$tmp/rc.json" "${kv%%=*}")" "${kv#*=}" ||
    fail "resnet-tiny's recipe: ${kv%%=*} is $(field "$tmp/rc.json" "${kv%%=*}"), expected ${kv#*=}"
done
near "$(field "$tmp/rc2.json" lr)" 0.05 && near "$(field "$tmp/rc2.json" momentum)" 0.9 ||
  fail "--lr 0.05 before --model: lr $(field "$tmp/rc2.json" lr), momentum $(field "$tmp/rc2.json" momentum)"

# weights out and in: --save writes safetensors that --init-from reads back; a file that is not
# one, or another model's, is refused in one line naming it
"$AMPBENCH" train --model resnet-tiny "${tiny[@]}" --batch-size 8 --save "$tmp/w.safetensors" --out "$tmp/s1.json" \
  2>"$tmp/err" || fail "--save: $(cat "$tmp/err")"
"$AMPBENCH" train --model resnet-tiny "${tiny[@]}" --batch-size 8 --init-from "$tmp/w.safetensors" --out "$tmp/s2.json" \
  2>"$tmp/err" || fail "--init-from: $(cat "$tmp/err")"
grep -q "\"weights\":[[:space:]]*\"all [0-9]* tensors from $tmp/w.safetensors (F32)\"" "$tmp/s2.json" ||
  fail "the record does not say the weights came from the file: $(field "$tmp/s2.json" weights)"
printf 'not a safetensors file' >"$tmp/lie.safetensors"
expect_error 1 "$tmp/lie.safetensors: header of" -- train --model resnet-tiny "${tiny[@]}" --init-from "$tmp/lie.safetensors"
"$AMPBENCH" train "${tiny[@]}" --save "$tmp/mlp.safetensors" --out "$tmp/m.json" 2>"$tmp/err" || fail "mlp --save: $(cat "$tmp/err")"
expect_error 1 "no tensor 'conv1.weight'" -- train --model resnet-tiny "${tiny[@]}" --init-from "$tmp/mlp.safetensors"
expect_error 1 "$tmp/none.safetensors: cannot open" -- train "${tiny[@]}" --init-from "$tmp/none.safetensors"

# ampbench tokenize: BERT's ids, one line an example (ids as transformers' BertTokenizer gives them)
vocab_file="$(dirname "$src")/bert-base-uncased/vocab.txt"
if [ -r "$vocab_file" ]; then
  printf 'H\xc3\xa9llo, w\xc3\xb6rld!\n\n' >"$tmp/t.txt"
  out=$("$AMPBENCH" tokenize --vocab "$vocab_file" "$tmp/t.txt" 2>"$tmp/err") || fail "tokenize: $(cat "$tmp/err")"
  [ "$out" = "101 7592 1010 2088 999 102
101 102" ] || fail "tokenize gave '$out'"
  printf 'fine\n\xff bad\n' >"$tmp/bad.txt"
  expect_error 1 "$tmp/bad.txt:2: invalid UTF-8" -- tokenize --vocab "$vocab_file" "$tmp/bad.txt"
  expect_error 2 "tokenize: --vocab FILE is required" -- tokenize "$tmp/t.txt"
  expect_error 2 "tokenize: unknown option '--bogus'" -- tokenize --bogus "$tmp/t.txt"
  expect_error 1 "unknown GLUE task" -- tokenize --vocab "$vocab_file" --task nope "$tmp/t.txt"
  # a run that does not fit under --memory-limit: exit 3, one line naming the tensor, the record
  # kept with fits_in_memory false; --find-max-batch --out writes the search
  tiny=(train --model bert-tiny --train-subset 64 --test-subset 16 --max-seq-len 32 --max-steps 1 --quiet)
  expect_error 3 "out of memory: " -- "${tiny[@]}" --memory-limit 4M --out "$tmp/oom.json"
  grep -q '"fits_in_memory":[[:space:]]*false' "$tmp/oom.json" || fail "the out-of-memory record does not say it did not fit"
  grep -q '"would_need_bytes"' "$tmp/oom.json" || fail "the out-of-memory record lacks what it would need"
  "$AMPBENCH" "${tiny[@]}" --memory-limit 48M --find-max-batch --out "$tmp/fit.json" >"$tmp/out" 2>"$tmp/err" ||
    fail "--find-max-batch failed: $(cat "$tmp/err")"
  grep -q '^largest batch that fits: [1-9]' "$tmp/out" || fail "--find-max-batch printed no largest batch: $(cat "$tmp/out")"
  grep -q '"tool":[[:space:]]*"ampbench-fit"' "$tmp/fit.json" || fail "--find-max-batch --out wrote no fit record"
  # the search's answer (from the line through batches 1 and 2, checked by probes) is what real
  # training steps give: the largest batch trains two steps under the limit, the next one is
  # refused (exit 3), in both precisions; and the search took at most 6 probes (the doubling and
  # bisection alone take 12 here)
  for p in fp32 amp; do
    "$AMPBENCH" "${tiny[@]}" --precision "$p" --memory-limit 48M --find-max-batch --out "$tmp/fit-$p.json" >"$tmp/out" 2>"$tmp/err" ||
      fail "--find-max-batch $p failed: $(cat "$tmp/err")"
    b=$(sed -n 's/^largest batch that fits: \([0-9]*\) .*/\1/p' "$tmp/out")
    [ -n "$b" ] && [ "$b" -gt 2 ] || fail "--find-max-batch $p: no largest batch above 2: $(cat "$tmp/out")"
    n=$(grep -c '^  batch ' "$tmp/out")
    [ "$n" -le 6 ] || fail "--find-max-batch $p took $n probes, more than 6: $(cat "$tmp/out")"
    "$AMPBENCH" "${tiny[@]}" --precision "$p" --max-steps 2 --memory-limit 48M --batch-size "$b" --out "$tmp/at-$p.json" \
      >/dev/null 2>"$tmp/err" || fail "$p at the largest batch $b did not train under the limit: $(cat "$tmp/err")"
    expect_error 3 "out of memory: " -- "${tiny[@]}" --precision "$p" --max-steps 2 --memory-limit 48M --batch-size $((b + 1))
  done
  expect_error 1 "--find-max-batch on the CPU needs --memory-limit" -- "${tiny[@]}" --find-max-batch
else
  echo "SKIPPED (part): no $vocab_file for ampbench tokenize and the memory cap"
fi

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

# the recipe: one source (models/registry.c), printed as options that train to the same weights as
# the defaults they stand for, and as JSON; bad use is one line and exit 2
for m in mlp resnet50 resnet50-cifar bert bert-base; do
    r=$("$AMPBENCH" recipe --model "$m") || fail "ampbench recipe --model $m failed"
    case "$r" in --dataset\ *--batch-size\ *--optimizer\ *--lr\ *--lr-schedule\ *--clip-grad-norm\ *) ;;
        *) fail "ampbench recipe --model $m: '$r'" ;; esac
    "$AMPBENCH" recipe --model "$m" --format json | python3 -c 'import json, sys
d = json.load(sys.stdin)
assert set(d) == {"dataset", "batch_size", "optimizer", "lr", "momentum", "weight_decay", "wd_exclude", "lr_schedule",
                  "warmup_steps", "clip_grad_norm"}, d' || fail "ampbench recipe --model $m --format json"
done
"$AMPBENCH" train --model mlp --max-steps 20 --quiet --save "$tmp/d.safetensors" --out "$tmp/d.json" &&
    "$AMPBENCH" train --model mlp $("$AMPBENCH" recipe --model mlp) --max-steps 20 --quiet --save "$tmp/e.safetensors" \
        --out "$tmp/e.json" || fail "training with the recipe's options failed"
cmp -s "$tmp/d.safetensors" "$tmp/e.safetensors" || fail "the recipe's options train other weights than the defaults"
for bad in "--model nope" "--model mlp --format xml" "--format json" "--model"; do
    # shellcheck disable=SC2086
    "$AMPBENCH" recipe $bad > /dev/null 2> "$tmp/err"
    rc=$?
    [ "$rc" = 2 ] && [ "$(wc -l < "$tmp/err")" = 1 ] || fail "ampbench recipe $bad: exit $rc, $(cat "$tmp/err")"
done

# a bf16 run says how it multiplies bf16: emulated when asked (AB_CPU_BF16=emulated), and natively
# or emulated with the reason otherwise; the two runs agree within bf16's rounding
AB_CPU_BF16=emulated "$AMPBENCH" train --model mlp --precision bf16 --max-steps 10 --threads 2 --out "$tmp/b1.json" \
    > "$tmp/b1.out" 2>&1 || fail "bf16 emulated run failed: $(tail -1 "$tmp/b1.out")"
grep -qx "bf16 products: emulated (AB_CPU_BF16=emulated)" "$tmp/b1.out" || fail "bf16 run with AB_CPU_BF16=emulated: $(sed -n 3p "$tmp/b1.out")"
"$AMPBENCH" train --model mlp --precision bf16 --max-steps 10 --threads 2 --out "$tmp/b2.json" > "$tmp/b2.out" 2>&1 ||
    fail "bf16 run failed: $(tail -1 "$tmp/b2.out")"
grep -qE "^bf16 products: (native \((AVX512-BF16|AMX), oneDNN .* matmul\)|emulated \(.+\))$" "$tmp/b2.out" ||
    fail "bf16 run: no line saying how it multiplies bf16: $(sed -n 3p "$tmp/b2.out")"
grep -q "native" "$tmp/b2.out" && ! grep -qw avx512_bf16 /proc/cpuinfo && ! grep -qw amx_bf16 /proc/cpuinfo &&
    fail "bf16 said native on a CPU without AVX512-BF16 or AMX"
python3 - "$tmp/b1.json" "$tmp/b2.json" <<'PY' || fail "bf16 native and emulated losses differ by more than bf16's rounding"
import json, sys
a, b = (json.load(open(p))["epochs"][-1]["test_loss"] for p in sys.argv[1:])
sys.exit(0 if abs(a - b) <= 2e-2 * abs(a) else 1)
PY

echo "test_cli: $failures failures"
[ "$failures" -eq 0 ]
