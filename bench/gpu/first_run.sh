#!/bin/bash
# `cudafix verify --first-run` and `--nccl` on the GPU machine (docs/gpu.md, docs/fleet.md).
# Usage (repository root, the python that holds torch): bash bench/gpu/first_run.sh OUTDIR EXTDIR
# EXTDIR holds libcfx_ptx75.so (tests/extbuild.py build_kernels, 300 kernels,
# -gencode=arch=compute_75,code=compute_75, -cudart shared); it is copied with bench/gpu/ptxprog/
# to /tmp/cfxext, outside the repository, so only the runs that put it on PYTHONPATH see it.
set -u
OUT=$1; EXT=$2; R=$PWD; PY=${PYTHON:-python3}
export PYTHONUNBUFFERED=1
START=$(date +%s); BUDGET=${BUDGET:-470}
STEPS=" ${STEPS:-nccl fr640 direct fr320ext cmd fr640nc direct3 fr320nc fr320r5 direct320r5 fr320r3b direct320x2 status} "  # a subset, to split the runs over device calls
left() { echo $(( BUDGET - ($(date +%s) - START) )); }
step() {  # step NAME SECONDS CMD...: run with a timeout inside the budget, log its rc
  local name=$1 t=$2; shift 2
  case $STEPS in *" $name "*) ;; *) return;; esac
  local l; l=$(left); [ "$l" -lt "$t" ] && t=$l
  if [ "$t" -le 5 ]; then echo "== $name: skipped (budget)" >>"$OUT/log.txt"; return; fi
  echo "== $name ($(date -u +%T), limit ${t}s): $*" >>"$OUT/log.txt"
  timeout "$t" "$@"; echo "== $name rc=$? after $(( $(date +%s) - START ))s" >>"$OUT/log.txt"
}
mkdir -p /tmp/cfxext && cp "$R"/bench/gpu/ptxprog/*.py "$EXT"/libcfx_ptx75.so /tmp/cfxext/
{ date -u; uname -a; nvidia-smi --query-gpu=name,driver_version,compute_cap,memory.total --format=csv,noheader
  $PY -c 'import torch,sys;print(sys.version.split()[0],torch.__version__,torch.version.cuda,torch.cuda.nccl.version())'
  /usr/local/cuda/bin/cuobjdump --list-elf --list-ptx /tmp/cfxext/libcfx_ptx75.so; git -C "$R" log -1 --format=%H 2>/dev/null
} >"$OUT/machine.txt" 2>&1
step nccl 60 env PYTHONPATH="$R" $PY -m cudafix verify --nccl --json >"$OUT/nccl.json" 2>>"$OUT/log.txt"
step cmd 60 env PYTHONPATH="/tmp/cfxext:$R" $PY -m cudafix verify --first-run --json -- $PY /tmp/cfxext/program.py \
  >"$OUT/cmd.json" 2>>"$OUT/log.txt"
step fr640 240 env PYTHONPATH="$R" $PY -m cudafix verify --first-run --imgsz 640 --batch 8 --half --repeat 2 --json \
  >"$OUT/fr640.json" 2>>"$OUT/log.txt"
step direct 320 $PY bench/gpu/first_run_direct.py "$OUT/direct.json" /tmp/cfxext 2 640,320 >>"$OUT/log.txt" 2>&1
step fr320ext 200 env PYTHONPATH="/tmp/cfxext:$R" $PY -m cudafix verify --first-run --imgsz 320 --batch 8 --half --repeat 2 \
  --no-compile --json >"$OUT/fr320ext.json" 2>>"$OUT/log.txt"
# the same-call comparison (docs/gpu.md): verify and the direct bench minutes apart on one machine, 3 repeats each
step fr640nc 150 env PYTHONPATH="$R" $PY -m cudafix verify --first-run --imgsz 640 --batch 8 --half --repeat 3 --no-compile \
  --json >"$OUT/fr640nc.json" 2>>"$OUT/log.txt"
step direct3 200 $PY bench/gpu/first_run_direct.py "$OUT/direct3.json" /tmp/cfxext 3 640,320 benchmark,eager >>"$OUT/log.txt" 2>&1
step fr320nc 150 env PYTHONPATH="$R" $PY -m cudafix verify --first-run --imgsz 320 --batch 8 --half --repeat 3 --no-compile \
  --json >"$OUT/fr320nc.json" 2>>"$OUT/log.txt"
# 320 pixels again, 5 repeats each (the 3-repeat pair above split tuning and its JIT 0.66 / 1.50 of direct)
step fr320r5 200 env PYTHONPATH="$R" $PY -m cudafix verify --first-run --imgsz 320 --batch 8 --half --repeat 5 --no-compile \
  --json >"$OUT/fr320r5.json" 2>>"$OUT/log.txt"
step direct320r5 200 $PY bench/gpu/first_run_direct.py "$OUT/direct320r5.json" /tmp/cfxext 5 320 benchmark,eager >>"$OUT/log.txt" 2>&1
# the 320-pixel pair again with the direct program allocating the child's second input too
step fr320r3b 120 env PYTHONPATH="$R" $PY -m cudafix verify --first-run --imgsz 320 --batch 8 --half --repeat 3 --no-compile \
  --json >"$OUT/fr320r3b.json" 2>>"$OUT/log.txt"
step direct320x2 200 env DIRECT_CHILD_WORKLOAD=1 $PY bench/gpu/first_run_direct.py "$OUT/direct320x2.json" /tmp/cfxext 5 320 \
  benchmark >>"$OUT/log.txt" 2>&1
step status 30 env PYTHONPATH="/tmp/cfxext:$R" $PY -m cudafix status >>"$OUT/machine.txt" 2>&1
echo "total $(( $(date +%s) - START ))s" >>"$OUT/log.txt"
find "$OUT" -maxdepth 1 -type f -empty -delete  # the skipped steps' redirections made them
