#!/usr/bin/env bash
# Installs what ampbench builds, tests and plots with, from Debian's packages (idempotent).
# The CUDA toolkit (nvcc, cuBLAS, cuDNN, NCCL) is not installed here: when present, CMake finds
# it and builds the CUDA backend too. Debian's PyTorch and torchvision are the CPU peers
# (bench/pytorch) and the reference of tests/torch_check.py.
set -euo pipefail
pkgs=(build-essential cmake pkg-config libcjson-dev libopenblas-dev zlib1g-dev libpng-dev
      openmpi-bin libopenmpi-dev gnuplot-nox dataset-fashion-mnist curl ca-certificates
      python3-torch python3-torchvision clang libclang-rt-14-dev)
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0
sudo=""
[ "$(id -u)" -eq 0 ] || sudo=sudo
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -qq
$sudo apt-get install -y -qq --no-install-recommends "${missing[@]}"
