#!/usr/bin/env bash
# The test command: installs dependencies, builds with -Wall -Wextra -Werror, runs the whole
# CTest suite (with the GPU run rehearsed and the PyTorch peers at the GPU machines' versions),
# fuzzes the data-set readers for a few seconds each, then builds again under
# AddressSanitizer + UndefinedBehaviorSanitizer and runs the CPU and MPI tests there. GPU tests
# skip visibly without a device.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
bash scripts/install_deps.sh
# the PyTorch peers at the GPU machines' versions (test_peer_smoke); without PyPI that test skips
bash scripts/peer_venv.sh || echo "test.sh: no peer environment: test_peer_smoke will skip" >&2
jobs=$(nproc)

cmake -S . -B build -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build -j"$jobs"
(cd build && ctest --output-on-failure -j1)

# The readers under libFuzzer for a few seconds each (a smoke run; scripts/fuzz.sh --seconds N
# for longer): a reader that crashes, leaks or allocates what a header claims fails the tests.
bash scripts/fuzz.sh --seconds 10

# Sanitizers: CPU build (CUDA code cannot run here, so it is left out of this build).
cmake -S . -B build-asan -DCMAKE_BUILD_TYPE=RelWithDebInfo -DAB_SANITIZE=ON -DAB_WITH_CUDA=OFF >/dev/null
cmake --build build-asan -j"$jobs"
export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
# (the delivery tests build and run what they test themselves: once, above, is enough)
(cd build-asan && ctest --output-on-failure -j1 -LE 'gpu|delivery')
