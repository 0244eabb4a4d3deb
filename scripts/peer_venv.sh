#!/usr/bin/env bash
# Makes the virtual environment that runs the PyTorch peers at the versions the GPU machines have
# (torch 2.11, torchvision 0.26, transformers 5.17: the lent H100/H200 machines' image), from PyPI,
# so that an API change in the peers is found on a CPU machine before the one GPU run. PyPI's
# torch wheel pulls CUDA's libraries with it (a few GB); on a machine without a GPU it runs on the
# CPU. Idempotent: a venv that already imports the pinned versions is left as it is.
# Usage: scripts/peer_venv.sh [DIR]    (default $AB_PEER_VENV, else ~/.cache/ampbench/peers-venv)
# Then: tests/peers/peer_smoke.sh (CTest: peer_smoke_torch2) runs each peer 2 steps in it.
set -euo pipefail
dir=${1:-${AB_PEER_VENV:-$HOME/.cache/ampbench/peers-venv}}
pins=(torch==2.11.0 torchvision==0.26.0 transformers==5.17.0 numpy safetensors)
py=${PYTHON:-python3}
check='import torch, torchvision, transformers, sys
want = {"torch": "2.11.0", "torchvision": "0.26.0", "transformers": "5.17.0"}
have = {"torch": torch.__version__.split("+")[0], "torchvision": torchvision.__version__.split("+")[0],
        "transformers": transformers.__version__}
sys.exit(0 if have == want else 1)'
if [ -x "$dir/bin/python" ] && "$dir/bin/python" -c "$check" 2>/dev/null; then
    echo "peer_venv.sh: $dir already has ${pins[*]:0:3}"
    exit 0
fi
"$py" -m venv "$dir" || { echo "peer_venv.sh: '$py -m venv $dir' failed (Debian: apt-get install python3-venv)" >&2; exit 1; }
"$dir/bin/python" -m pip install -q --disable-pip-version-check --no-warn-script-location "${pins[@]}" ||
    { echo "peer_venv.sh: pip could not install ${pins[*]} into $dir (no PyPI?)" >&2; exit 1; }
"$dir/bin/python" -c "$check" || { echo "peer_venv.sh: $dir does not import the pinned versions" >&2; exit 1; }
echo "peer_venv.sh: $dir: $("$dir/bin/python" -c 'import torch, transformers; print("torch", torch.__version__, "transformers", transformers.__version__)')"
