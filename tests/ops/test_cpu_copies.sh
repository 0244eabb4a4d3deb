#!/usr/bin/env bash
# The CPU backend's element loops exist in an AVX-512 copy, an AVX2-with-FMA copy and the build's
# baseline (SSE2 on x86-64, with no F16C), the widest the CPU has taken at run time. They must give
# the same bits: AB_CPU_ISA=avx2 and AB_CPU_ISA=sse2 make this machine take the copies another
# machine would (each record says which it took), and short training runs (the MLP in fp32 and
# AMP, a small ResNet in AMP and bf16, a small BERT in fp32, AMP and bf16) must give the same loss
# at every step, the same test losses and the same test predictions as the widest copies. An
# unknown AB_CPU_ISA is refused in one line, exit 2, as a bad option is.
# usage: test_cpu_copies.sh AMPBENCH
set -u
ampbench=$1
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
failures=0
fail() { echo "FAIL: $*" >&2; failures=$((failures + 1)); }

# the copies a run took, as its record's host.blas says ("element loops in AVX-512, ...")
loops() {
    python3 -c 'import json, re, sys
m = re.search(r"element loops in ([A-Z0-9-]+)", json.load(open(sys.argv[1]))["host"]["blas"])
print(m.group(1) if m else "unsaid")' "$1"
}

# the loss at every step (scale included), the test loss and the test predictions: one line
summary() {
    python3 -c 'import json, sys
d = json.load(open(sys.argv[1]))
print(json.dumps([d["loss_curve"], [e["test_loss"] for e in d["epochs"]], d["test_predictions"]]))' "$1"
}

n=0
check() { # name args...
    local name=$1 isa
    shift
    n=$((n + 1))
    for isa in avx512 avx2 sse2; do
        AB_CPU_ISA=$isa "$ampbench" train --quiet --threads 2 --log-interval 1 --out "$tmp/$name-$isa.json" "$@" \
            >"$tmp/$name-$isa.out" 2>&1 || { fail "$name with AB_CPU_ISA=$isa: $(tail -3 "$tmp/$name-$isa.out")"; return; }
        summary "$tmp/$name-$isa.json" >"$tmp/$name-$isa.sum" || { fail "$name with AB_CPU_ISA=$isa: no record"; return; }
    done
    local steps widest
    steps=$(python3 -c 'import json, sys; print(len(json.load(open(sys.argv[1]))["loss_curve"]))' "$tmp/$name-avx512.json")
    [ "$steps" -ge 4 ] || fail "$name: $steps logged steps, expected at least 4"
    # each cap took the copies it names, unless the CPU lacks them (then the widest it has)
    widest=$(loops "$tmp/$name-avx512.json")
    case "$widest:$(loops "$tmp/$name-avx2.json"):$(loops "$tmp/$name-sse2.json")" in
    AVX-512:AVX2:SSE2 | AVX2:AVX2:SSE2 | SSE2:SSE2:SSE2) ;;
    *) fail "$name: the records say the loops ran in $widest, $(loops "$tmp/$name-avx2.json") and" \
        "$(loops "$tmp/$name-sse2.json") under AB_CPU_ISA=avx512, avx2 and sse2" ;;
    esac
    for isa in avx2 sse2; do
        cmp -s "$tmp/$name-avx512.sum" "$tmp/$name-$isa.sum" ||
            fail "$name: the $isa copies differ from the widest: $(diff <(tr ',' '\n' <"$tmp/$name-avx512.sum") \
                <(tr ',' '\n' <"$tmp/$name-$isa.sum") | head -4 | tr '\n' ' ')"
    done
    echo "$name: $steps steps, the same bits in the copies ($widest, AVX2, SSE2; a copy the CPU lacks runs its widest)"
}

check mlp-fp32 --max-steps 6 --train-subset 512 --test-subset 128
check mlp-amp --max-steps 6 --train-subset 512 --test-subset 128 --precision amp
check resnet-amp --model resnet-tiny --dataset cifar10 --batch-size 16 --max-steps 4 --train-subset 128 --test-subset 64 \
    --precision amp
check resnet-bf16 --model resnet-tiny --dataset cifar10 --batch-size 16 --max-steps 4 --train-subset 128 --test-subset 64 \
    --precision bf16
check bert-fp32 --model bert-tiny --dataset sst2 --max-seq-len 32 --max-steps 6 --train-subset 256 --test-subset 64
check bert-amp --model bert-tiny --dataset sst2 --max-seq-len 32 --max-steps 6 --train-subset 256 --test-subset 64 \
    --precision amp
check bert-bf16 --model bert-tiny --dataset sst2 --max-seq-len 32 --max-steps 6 --train-subset 256 --test-subset 64 \
    --precision bf16

AB_CPU_ISA=avx3 "$ampbench" train --quiet --max-steps 1 --out "$tmp/x.json" >/dev/null 2>"$tmp/err"
rc=$?
[ $rc -eq 2 ] && [ "$(wc -l <"$tmp/err")" -eq 1 ] && grep -q "AB_CPU_ISA must be avx512, avx2 or sse2.*'avx3'" "$tmp/err" &&
    [ ! -e "$tmp/x.json" ] || fail "AB_CPU_ISA=avx3: exit $rc, stderr: $(head -3 "$tmp/err")"

[ "$failures" -eq 0 ] || { echo "test_cpu_copies: $failures failure(s)"; exit 1; }
echo "test_cpu_copies: ok ($n runs, under three caps each)"
