#!/bin/bash
# Issue 38 on the H200 in ONE device call.  ESTIMATED WALL TIME: ~6.5 min (hard cap BUDGET=470 s):
#   build the PTX-only module with nvcc 20-40 s | machine info + warm preflight 15 s |
#   the program's own timers, 3 rounds x (empty, warm) 50 s | verify --first-run -- CMD, twice, 2 x ~95 s
#   (12 runs + 3 warm children each) | built-in detector 320 px + the module, --repeat 2, ~110 s | compare 1 s
# Each step is cut to the budget left (the log says which); the steps run in order of priority.
#
#   bash bench/issue38_h200.sh            # repository root of this checkout; results in $OUT (or $1)
#
# What it proves (docs/gpu.md "verify --first-run -- CMD", issue 38's "done when"):
# - own.json: bench/issue38/prog.py (a conv net that sets torch.backends.cudnn.benchmark = True and
#   calls a PTX-only module of 300 kernels) in fresh processes, k=3 interleaved rounds of an empty and a
#   warm JIT cache, its own timers: the module's JIT (first call), cuDNN's kernels' JIT (first forward),
#   the whole process;
# - cmd1.json, cmd2.json: `cudafix verify --first-run --json -- python prog.py`, twice, consecutively
#   (3 rounds each; the module's share measured with cudafix warm's own child, the rest named);
# - fr320ext.json: the built-in detector, 320 px, fp16, batch 8, the module on PYTHONPATH (ext-jit) and
#   the EAGER case (module-loading-eager, re-measured after the init_s change), --repeat 2;
# - summary.json + the end of log.txt: bench/issue38/compare.py's checks (25% against the own timers,
#   the split naming libcfx_ptx75.so, the two runs agreeing within 25%, "not used").
# The module: tests/ext_src/kernels.cu built by tests/extbuild.py build_kernels with
# -gencode=arch=compute_75,code=compute_75 (PTX only), -cudart shared, a RUNPATH to the torch wheel's
# libcudart.so.13 dir and the toolkit's (so cudafix warm's child, which does not import torch for a
# module that does not link torch, can dlopen it), loaded by bench/gpu/ptxprog/cfx_ptx75.py (ctypes).
# Everything is copied to /tmp/cfx38, outside the checkout: only the runs given PYTHONPATH see it.
set -u
umask 022  # the module and its dir writable by us alone: warm's trust check (store/safefs.py) loads only such
R=$(cd "$(dirname "$0")/.." && pwd) || exit 1
O=${OUT:-${1:-/tmp/issue38-out}}
mkdir -p "$O"
PY=${PYTHON:-/opt/torch/.venv/bin/python3}
[ -x "$PY" ] || PY=$(command -v python3)
NVCC=${CUDAFIX_NVCC:-/usr/local/cuda/bin/nvcc}
[ -x "$NVCC" ] || NVCC=$(command -v nvcc)
X=/tmp/cfx38
export PYTHONUNBUFFERED=1
START=$(date +%s); BUDGET=${BUDGET:-470}
echo "issue38_h200.sh: estimated ~6.5 min, at most ${BUDGET}s; results in $O" | tee "$O/log.txt"
left() { echo $(( BUDGET - ($(date +%s) - START) )); }
step() {  # step NAME SECONDS CMD...: run with a timeout inside the budget, log its rc and time
  local name=$1 t=$2 l s; shift 2
  l=$(left); [ "$l" -lt "$t" ] && t=$l
  if [ "$t" -le 5 ]; then echo "== $name: skipped (budget)" >>"$O/log.txt"; return 1; fi
  echo "== $name ($(date -u +%T), limit ${t}s): $*" >>"$O/log.txt"
  s=$(date +%s)
  timeout "$t" "$@"; local rc=$?
  echo "== $name rc=$rc in $(( $(date +%s) - s ))s (total $(( $(date +%s) - START ))s)" >>"$O/log.txt"
  return $rc
}

# 1. the module, built here with the image's nvcc (CUDA 13.0), and the program beside it
SITE=$("$PY" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
RUNPATH=$(find "$SITE/nvidia" -name 'libcudart.so.13*' -printf '%h\n' 2>/dev/null | sort -u | head -1)
RUNPATH=${RUNPATH:+$RUNPATH:}$(dirname "$(dirname "$(readlink -f "$NVCC")")")/lib64
mkdir -p "$X"
step build 150 env CUDAFIX_TEST_EXT=/tmp/issue38-ext CUDAFIX_NVCC="$NVCC" "$PY" -c "
import shutil, sys; sys.path.insert(0, '$R/tests'); import extbuild
p = extbuild.build_kernels('cfx_ptx75', ['-gencode=arch=compute_75,code=compute_75'], cudart='shared', nkernels=300,
                           extra=['-Xlinker', '-rpath=$RUNPATH'])
shutil.copy(p, '$X/libcfx_ptx75.so'); print(p)" >>"$O/log.txt" 2>&1
cp "$R"/bench/gpu/ptxprog/cfx_ptx75.py "$R"/bench/issue38/prog.py "$X"/
if [ ! -f "$X/libcfx_ptx75.so" ]; then echo "build failed: see above" >>"$O/log.txt"; exit 1; fi

# 2. the machine, the module as cudafix sees it, and cudafix warm's child on it alone (what verify does)
{ date -u; uname -r; nvidia-smi --query-gpu=name,driver_version,compute_cap,memory.total --format=csv,noheader
  "$PY" -c 'import sys, torch; print(sys.version.split()[0], torch.__version__, torch.version.cuda, torch.backends.cudnn.version())'
  "$NVCC" --version | tail -1; git -C "$R" log -1 --format='tree %H %cI' 2>/dev/null; echo "RUNPATH=$RUNPATH"
  CUOBJDUMP=$(dirname "$(readlink -f "$NVCC")")/cuobjdump; [ -x "$CUOBJDUMP" ] || CUOBJDUMP=cuobjdump
  "$CUOBJDUMP" --list-elf --list-ptx "$X/libcfx_ptx75.so"; readelf -d "$X/libcfx_ptx75.so" | grep -E 'NEEDED|RUNPATH'
  env PYTHONPATH="$X:$R" timeout 60 "$PY" -m cudafix warm --status
  env PYTHONPATH="$X:$R" timeout 90 "$PY" -c "
import os, tempfile, time
from cudafix.probes import take_snapshot
from cudafix.cli.verify import units_from
units, unwarmable = units_from(take_snapshot())
print('verify units:', [u.label for u in units], 'unwarmable:', unwarmable)
for u in units:
    d = tempfile.mkdtemp(); t = time.perf_counter(); err = u.warm(d)
    n = sum(os.path.getsize(os.path.join(a, f)) for a, _, fs in os.walk(d) for f in fs)
    print('warm child for %s: %.2f s, error %s, JIT cache %d bytes' % (u.label, time.perf_counter() - t, err, n))"
} >"$O/machine.txt" 2>&1

# 3. the program's own timers: fresh processes, 3 interleaved rounds of (empty, warm) JIT cache
step own 120 env PYTHONPATH="$X" "$PY" "$R"/bench/issue38/own_timers.py "$O/own.json" 3 -- "$PY" "$X/prog.py" >>"$O/log.txt" 2>&1

# 4. verify --first-run -- CMD, twice in a row (3 rounds each, the default)
for i in 1 2; do
  step cmd$i 170 env PYTHONPATH="$X:$R" "$PY" -m cudafix verify --first-run --json -- "$PY" "$X/prog.py" \
    >"$O/cmd$i.json" 2>>"$O/log.txt"
done

# 5. the built-in detector, 320 px, the module on PYTHONPATH: ext-jit, cudnn-benchmark(-jit), EAGER
step fr320ext 200 env PYTHONPATH="$X:$R" "$PY" -m cudafix verify --first-run --imgsz 320 --batch 8 --half --repeat 2 \
  --no-compile --json >"$O/fr320ext.json" 2>>"$O/log.txt"

# 6. the checks, from the files above
"$PY" "$R"/bench/issue38/compare.py "$O" >>"$O/log.txt" 2>&1
echo "compare rc=$?; total $(( $(date +%s) - START ))s" >>"$O/log.txt"
find "$O" -maxdepth 1 -type f -empty -delete
tail -40 "$O/log.txt"
