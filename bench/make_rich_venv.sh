#!/bin/sh
# The "rich" venv of docs/benchmarks.md (issue 23): what a YOLO / PyTorch user's env holds besides
# torch -- torchvision, cupy, jax with its CUDA 13 plugins, the scientific stack -- for
# bench/status_vs_collect_env.py --python ~/.cache/cudafix-venvs/rich/bin/python.
# Built on 2026-12-01 with these commands (Python 3.11; ~4 GB of wheels, the nvidia-* ones included).
set -eu
V=${1:-$HOME/.cache/cudafix-venvs/rich}
PY=${PYTHON:-python3.11}
"$PY" -m venv "$V"
"$V/bin/pip" install -q numpy scipy pandas matplotlib opencv-python-headless pillow ml_dtypes opt_einsum fastrlock \
  pyyaml requests tqdm seaborn psutil ultralytics-thop sympy networkx jinja2   # ultralytics-thop brings torch 2.14.1
"$V/bin/pip" install -q cupy-cuda13x torchvision==0.29.1 "jax[cuda13]<0.11"    # jax 0.11 needs Python 3.12
"$V/bin/python" -m pip list 2>/dev/null | wc -l
