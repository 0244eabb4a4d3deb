#!/usr/bin/env bash
# Installs what ampbench builds, tests and plots with, from Debian's packages (idempotent).
# The CUDA toolkit (nvcc, cuBLAS, cuDNN, NCCL) is not installed here: when present, CMake finds
# it and builds the CUDA backend too. Debian's PyTorch and torchvision are the CPU peers
# (peers) and the reference of peers/checks/torch_check.py; Hugging Face transformers 4.30 (the
# last to support Debian's PyTorch 1.13, from PyPI: Debian has none) is the BERT peer's and the
# reference of peers/checks/bert_check.py and the tokenizer test. Without PyPI those say so and skip.
# python3-jsonschema checks result records against harness/schema (tests/harness/schema_check.py).
set -euo pipefail
pkgs=(build-essential cmake pkg-config libcjson-dev libopenblas-dev libdnnl-dev zlib1g-dev libpng-dev
      openmpi-bin libopenmpi-dev gnuplot-nox dataset-fashion-mnist curl ca-certificates
      python3-torch python3-torchvision python3-pip python3-jsonschema clang libclang-rt-14-dev)
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
sudo=""
[ "$(id -u)" -eq 0 ] || sudo=sudo
if [ ${#missing[@]} -gt 0 ]; then
  export DEBIAN_FRONTEND=noninteractive
  $sudo apt-get update -qq
  $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi
if ! /usr/bin/python3 -c 'import transformers' 2> /dev/null; then
  $sudo /usr/bin/python3 -m pip install -q --break-system-packages --no-warn-script-location \
      'transformers==4.30.2' 'tokenizers==0.13.3' ||
    echo "install_deps: transformers did not install (no PyPI?): the BERT peer and the checks against Hugging Face skip" >&2
fi
