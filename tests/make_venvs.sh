#!/bin/sh
# Build (idempotently) the real-torch test venvs the test suite inspects.
#   torch-cpu: torch 2.13.0, CPU build
#   torch-cu:  torch 2.14.1 + cu130 with real fatbins and nvidia-* wheels (~5.5 GB)
#   torch-251: torch 2.5.1 + cu124 with its nvidia-*-cu12 wheels (~5 GB): the last torch line whose
#              `import torch` really breaks on a shadowed libnvJitLink (tests/shadowing.py)
# Both also get cudafix's runtime dependencies so `venv/bin/python -m cudafix` works with the
# checkout on PYTHONPATH.  Location: $CUDAFIX_TEST_VENVS (default ~/.cache/cudafix-venvs).
set -eu
root=${CUDAFIX_TEST_VENVS:-$HOME/.cache/cudafix-venvs}
mkdir -p "$root"
mk() {  # mk NAME TORCH_SPEC
    dir=$root/$1
    stamp=$dir/.cudafix-ready-$2
    if [ -f "$stamp" ]; then return 0; fi
    rm -rf "$dir"
    python3 -m venv "$dir"
    "$dir/bin/python" -m pip install -q "$2" click packaging nvidia-ml-py
    touch "$stamp"
}
mk torch-cpu torch==2.13.0
mk torch-cu torch==2.14.1
mk torch-251 torch==2.5.1
echo "test venvs ready in $root"
