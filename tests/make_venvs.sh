#!/bin/sh
# Build (idempotently) the real-torch test venvs the test suite inspects.
#   torch-cpu: torch 2.13.0, CPU build
#   torch-cu:  torch 2.14.1 + cu130 with real fatbins and nvidia-* wheels (~5.5 GB)
#   torch-251: torch 2.5.1 + cu124 with its nvidia-*-cu12 wheels (~5 GB): the last torch line whose
#              `import torch` really breaks on a shadowed libnvJitLink (tests/shadowing.py)
#   torch-110, torch-201: see the end (allocator-config proof); torch-201-full: 2.0.1 complete (~1.7 GB more)
#   torchvision-cu: torchvision 0.29.1 (PyPI) over torch-cu's torch (tests/test_extensions.py)
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
here=$(cd "$(dirname "$0")" && pwd)

# torchvision-cu: torchvision 0.29.1 from PyPI (its real CUDA _C_stable.so, ~15 MB) over torch-cu's
# torch, which a .pth line puts on its path (no second 5.5 GB torch): tests/test_extensions.py.
mk_tv() {
    tv=$root/torchvision-cu
    if [ -f "$tv/.cudafix-ready-torchvision==0.29.1" ]; then return 0; fi
    rm -rf "$tv"
    python3 -m venv "$tv"
    site=$("$tv/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
    "$root/torch-cu/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])' > "$site/cudafix-test-torch-cu.pth"
    "$tv/bin/python" -m pip install -q --no-deps torchvision==0.29.1
    touch "$tv/.cudafix-ready-torchvision==0.29.1"
}

# A real Python 3.8 (yolov9 images ship 3.8) with cudafix's runtime dependencies, for the tests
# that run cudafix under 3.8 itself (tests/test_py38_real.py).  pyenv's 3.8 where present; else
# the tests say it is missing.
py38=${CUDAFIX_PY38:-}
if [ -z "$py38" ]; then
    for c in "$HOME"/.pyenv/versions/3.8.*/bin/python3.8 /usr/bin/python3.8 /usr/local/bin/python3.8; do
        if [ -x "$c" ] && "$c" -c 'import venv' 2>/dev/null; then py38=$c; break; fi
    done
fi
mk_py38() {
    if [ -n "$py38" ] && [ ! -f "$root/py38/.cudafix-ready-deps" ]; then
        rm -rf "$root/py38"
        "$py38" -m venv "$root/py38"
        "$root/py38/bin/python" -m pip install -q click packaging nvidia-ml-py
        touch "$root/py38/.cudafix-ready-deps"
    fi
}
# torch 1.10.2 (cu102, its CUDA runtime bundled; PyPI's cp38 wheel, ~0.9 GB) on the real Python 3.8,
# and torch 2.0.1 (cu117) without its nvidia-* wheels except the CUDA runtime (~0.6 GB): the
# allocator-config proof runs their own parsers through ctypes, without importing torch
# (tools/alloc_conf_proof.py, docs/alloc-conf.md).
mk38() {  # mk38 NAME PIP-ARGS...
    name=$1; shift
    stamp=$root/$name/.cudafix-ready-$(echo "$*" | tr ' =' '_-')
    if [ -f "$stamp" ]; then return 0; fi
    if [ -z "$py38" ]; then echo "no Python 3.8 for $name" >&2; return 1; fi
    rm -rf "$root/$name"
    "$py38" -m venv "$root/$name"
    "$root/$name/bin/python" -m pip install -q "$@"
    touch "$stamp"
}

# torch-201-full: torch 2.0.1 (cu117) COMPLETE: torch-201's torch hard-linked (no second download)
# plus the nvidia-*-cu11 wheels torch 2.0.1 pins (~1.7 GB) and its pure-Python requirements: a
# working install, for "complete installs have no torch-install-broken / ext-torch-symbols
# finding" (tests/test_broken_installs.py).  After torch-201 (same chain).
T201_WHEELS="nvidia-cuda-nvrtc-cu11==11.7.99 nvidia-cuda-runtime-cu11==11.7.99 nvidia-cuda-cupti-cu11==11.7.101
 nvidia-cudnn-cu11==8.5.0.96 nvidia-cublas-cu11==11.10.3.66 nvidia-cufft-cu11==10.9.0.58 nvidia-curand-cu11==10.2.10.91
 nvidia-cusolver-cu11==11.4.0.1 nvidia-cusparse-cu11==11.7.4.91 nvidia-nccl-cu11==2.14.3 nvidia-nvtx-cu11==11.7.91"
mk_201full() {
    full=$root/torch-201-full
    stamp=$full/.cudafix-ready-2.0.1-cu11-wheels
    if [ -f "$stamp" ]; then return 0; fi
    if [ -z "$py38" ]; then echo "no Python 3.8 for torch-201-full" >&2; return 1; fi
    rm -rf "$full"
    "$py38" -m venv "$full"
    src=$("$root/torch-201/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
    dst=$("$full/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
    for e in torch torchgen functorch nvfuser torch-2.0.1.dist-info; do
        cp -al "$src/$e" "$dst/$e" 2>/dev/null || cp -a "$src/$e" "$dst/$e"
    done
    # shellcheck disable=SC2086
    "$full/bin/python" -m pip install -q --no-deps $T201_WHEELS
    "$full/bin/python" -m pip install -q filelock typing-extensions sympy networkx jinja2
    touch "$stamp"
}

# The venvs are independent: build them in parallel (downloads and unpacking overlap; pip's cache
# is safe to share).  Each chain is a subshell under `set -e`; a stamp is written only after its
# pip install succeeded, and any failed chain fails the script once all have finished.
( mk torch-cpu torch==2.13.0
  # the older nvJitLink wheels of the shadowing scenarios (tests/shadowing.py): fetched here, never by a test
  "$root/torch-cpu/bin/python" "$here/shadowing.py" --fetch ) &
p1=$!
( mk torch-cu torch==2.14.1
  mk_tv ) &
p2=$!
( mk torch-251 torch==2.5.1 ) &
p3=$!
# Ray for `cudafix fleet --ray` against a real local cluster (tests/test_fleet_engines.py)
( mk ray ray==2.60.0 ) &
p4=$!
( mk_py38
  mk38 torch-110 torch==1.10.2 click packaging nvidia-ml-py
  mk38 torch-201 --no-deps torch==2.0.1 nvidia-cuda-runtime-cu11==11.7.99
  mk_201full ) &
p5=$!
# Real Windows wheels (PE reader, Windows DLL search): tests/fetch_win_wheels.sh
( sh "$here/fetch_win_wheels.sh" ) &
p6=$!
failed=
for p in $p1 $p2 $p3 $p4 $p5 $p6; do
    wait "$p" || failed="$failed $p"
done
if [ -n "$failed" ]; then
    echo "make_venvs.sh: a venv build failed (see above)" >&2
    exit 1
fi
echo "test venvs ready in $root"
