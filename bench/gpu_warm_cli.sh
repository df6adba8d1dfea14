#!/bin/bash
# `cudafix warm` as users meet it, on the H200 (docs/gpu.md): the CLI (--status, warm, --status)
# and activation's background start, each with its own empty JIT cache and cudafix cache, then
# the program's first call (bench/gpu_warm.py --program).  Run from the directory holding
# cudafix/, tests/ and bench/ (and _deps/ with click, packaging, pynvml where the python lacks them).
# Usage: bash bench/gpu_warm_cli.sh OUTDIR
set -u
out=$1; mkdir -p "$out"
export PYTHONPATH=$PWD:$PWD/_deps CUDAFIX_NVCC=${CUDAFIX_NVCC:-$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)}
ext=$(python3 tests/extbuild.py python3 cfx_ptx75 "7.5+PTX" 300) || exit 1
export PYTHONPATH=$PYTHONPATH:$(dirname "$ext")
t() { python3 -c 'import time; print("%.3f" % time.time())'; }
prog() { python3 bench/gpu_warm.py --program "$ext" "$CUDA_CACHE_PATH"; }
{
echo "== extension: $ext"
echo "== control: empty cache, no warm"
export CUDA_CACHE_PATH=/tmp/cfx-c0 XDG_CACHE_HOME=/tmp/cfx-x0; prog
echo "== A: the CLI"
export CUDA_CACHE_PATH=/tmp/cfx-cA XDG_CACHE_HOME=/tmp/cfx-xA
python3 -m cudafix warm --status
s=$(t); python3 -m cudafix warm; echo "exit $? after $(python3 -c "print('%.2f s' % ($(t)-$s))")"
python3 -m cudafix warm --status
prog
echo "== B: activation starts it in the background"
export CUDA_CACHE_PATH=/tmp/cfx-cB XDG_CACHE_HOME=/tmp/cfx-xB
s=$(t); python3 -m cudafix shell --shell bash --activate > /tmp/cfx-act.sh; echo "activation exit $? in $(python3 -c "print('%.2f s' % ($(t)-$s))")"
cat /tmp/cfx-act.sh | grep -v '^ *$' | tail -3
log=$(ls /tmp/cfx-xB/cudafix/envs/*/warm.log 2>/dev/null | head -1)
for i in $(seq 1 240); do grep -q "done in\|failed\|nothing to warm" "$log" 2>/dev/null && break; sleep 0.5; done
echo "-- warm.log after $(python3 -c "print('%.1f s' % ($(t)-$s))"):"; cat "$log"
ps -eo pid,ni,args | grep "cudafix warm" | grep -v grep
prog
echo "-- second activation (already warm: must not start again)"
python3 -m cudafix shell --shell bash --activate > /dev/null; sleep 3; wc -l < "$log"
python3 -m cudafix warm --status
echo "== C: status -v"
python3 -m cudafix status -v
} > "$out/gpu_warm_cli.txt" 2>&1
cat "$out/gpu_warm_cli.txt"
