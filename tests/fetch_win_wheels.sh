#!/bin/sh
# Real Windows wheels for the PE reader, the fatbin scan on a .pyd and the Windows DLL-search
# simulation (tests/test_pe.py, tests/test_windows_dlls.py; pywin32 for its delay-load imports): downloaded with pip's own
# cross-platform download, unpacked once.  Location: $CUDAFIX_WIN_WHEELS (default
# ~/.cache/cudafix-win-wheels).  pefile (a second, independent PE parser) is the ground truth for
# the version resource, which binutils' objdump does not decode.
set -eu
root=${CUDAFIX_WIN_WHEELS:-$HOME/.cache/cudafix-win-wheels}
stamp=$root/.cudafix-ready-2
if [ -f "$stamp" ]; then exit 0; fi
mkdir -p "$root/wheels" "$root/x"
python3 -m pip download -q --platform win_amd64 --only-binary=:all: --no-deps --python-version 3.12 \
    -d "$root/wheels" torch==2.13.0 nvidia-cuda-runtime-cu12==12.9.79 nvidia-cuda-nvrtc-cu12==12.9.86 cupy-cuda12x==14.2.0 \
    pywin32==312
python3 -m pip download -q --no-deps -d "$root/wheels" pefile==2024.8.26
for w in "$root"/wheels/*win_amd64.whl; do
    n=$(basename "$w" .whl)
    mkdir -p "$root/x/$n"
    python3 -m zipfile -e "$w" "$root/x/$n"
done
touch "$stamp"
