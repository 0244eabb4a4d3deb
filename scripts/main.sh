#!/usr/bin/env bash
# The main job on a fresh machine: install the dependencies, build, and run the article's MNIST
# MLP experiment (784-256-10, SGD lr 0.01, batch 64, 10 epochs) in FP32 and in AMP, writing
# results/mnist-mlp-fp32.json and results/mnist-mlp-amp.json. Runs on a GPU when one is usable
# (--device auto), else on the CPU, where fp16 is emulated bit-exactly.
#   scripts/main.sh [--epochs N] [any other ampbench train option]
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
bash scripts/install_deps.sh
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build -j"$(nproc)"
mkdir -p results
for p in fp32 amp; do
  echo "== MNIST MLP, $p =="
  ./build/ampbench train --model mlp --precision "$p" --device auto --epochs 10 --batch-size 64 --lr 0.01 \
    --seed 1 --out "results/mnist-mlp-$p.json" "$@"
done
echo "results: results/mnist-mlp-fp32.json results/mnist-mlp-amp.json"
