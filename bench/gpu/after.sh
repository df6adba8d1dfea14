#!/bin/bash
# cudafix on the GPU machine: record the real snapshot, run verify, and show what cudafix detects
# and what its corrections change for each failure mode (before/after, same machine, same run).
#
#   bash bench/gpu/after.sh OUTDIR [fixes]   (repository root; the python3 that holds torch;
#                                             "fixes" runs only the before/after part)
#
# Writes OUTDIR/*.json|*.txt; docs/gpu.md quotes them.  ultralytics must be importable for the
# CUDA_VISIBLE_DEVICES case (docs/gpu.md says how it was installed there).
set -u
O=$1
mkdir -p "$O"
repo=$(pwd)
py=python3
export YOLO_OFFLINE=1
compat=$(dirname "$(ls /usr/local/cuda*/compat/libcuda.so.1 2>/dev/null | head -n 1)")
ldp0=${LD_LIBRARY_PATH:-}
cf() { PYTHONPATH=$repo${PYTHONPATH:+:$PYTHONPATH} "$py" -m cudafix "$@"; }
TIMEFORMAT='wall %R s'

if [ "${2:-all}" = all ]; then
# 1. The healthy machine: snapshot, nvidia-smi beside it, status, check.
cf snapshot -o "$O/h200-snapshot.json"
nvidia-smi --query-gpu=index,name,compute_cap,memory.total,uuid,pci.bus_id,driver_version,mig.mode.current \
    --format=csv > "$O/nvidia-smi-query.csv"
{ nvidia-smi; cf status; cf check --strict; echo "check --strict exit: $?"; } > "$O/status.txt" 2>&1
td=$("$py" -c "import os,importlib.util as u; print(os.path.dirname(u.find_spec('torch').origin))")
{ for lib in libtorch_cuda.so libtorch_cuda_linalg.so; do
    echo "== cuobjdump --list-elf $lib"; cuobjdump --list-elf "$td/lib/$lib" 2>&1 | grep -o 'sm_[0-9]*[af]*' | sort -u | tr '\n' ' '; echo
  done; } > "$O/cuobjdump-archs.txt"

# 2. verify: healthy (full, and --quick timed), launch blocking, hidden GPU.
mkdir -p "$O/verify"
cf verify --json > "$O/verify/h200-verify.json"; echo "verify exit $?" >> "$O/status.txt"
{ time cf verify --quick; echo "verify --quick exit $?"; } >> "$O/status.txt" 2>&1
CUDA_LAUNCH_BLOCKING=1 cf verify --quick --json > "$O/verify/h200-verify-launch-blocking.json"
CUDA_VISIBLE_DEVICES= cf verify --quick --json > "$O/verify/h200-verify-cvd-empty.json"
fi

# A venv that sees the machine's torch, with cudafix installed the way a wheel installs it
# (package + top-level startup module + .pth in site-packages) — the startup hook is live there.
hv=/tmp/cudafix-hook-venv
rm -rf "$hv"; "$py" -m venv --system-site-packages "$hv"
sp=$("$hv/bin/python" -c "import sysconfig; print(sysconfig.get_paths()['purelib'])")
cp -r cudafix _cudafix_startup*.py cudafix.pth "$sp/"
# The machine's torch lives in another venv's site-packages: make it part of this one (first,
# as if installed here) so `import torch` finds it.
"$py" -c "import os, torch; print(os.path.dirname(os.path.dirname(torch.__file__)))" > "$sp/00-machine-torch.pth"
hpy=$hv/bin/python

PROBE='
import json, sys, time, warnings
warnings.simplefilter("always")
t = time.perf_counter()
import torch
r = {"import_s": round(time.perf_counter() - t, 2), "is_available": torch.cuda.is_available()}
try:
    torch.zeros(1, device="cuda"); torch.cuda.synchronize(); r["first_op"] = "ok"
except Exception as e:
    r["first_op"] = "%s: %s" % (type(e).__name__, str(e).splitlines()[0])
with open("/proc/self/maps") as fh:
    maps = fh.read()
r["libcuda_loaded"] = sorted({l.split()[-1] for l in maps.splitlines() if "libcuda.so" in l})
print(json.dumps(r))
'
{
  echo "### 3. forward-compat libcuda first on LD_LIBRARY_PATH ($compat)"
  echo "--- cudafix check (detection)"
  LD_LIBRARY_PATH=$compat:$ldp0 cf check; echo "exit $?"
  echo "--- before: plain python3"
  LD_LIBRARY_PATH=$compat:$ldp0 "$py" -c "$PROBE" 2>&1 | tail -n 3
  echo "--- after, in-process: the same command in the venv with cudafix's startup hook (first run: cold cache)"
  LD_LIBRARY_PATH=$compat:$ldp0 "$hpy" -c "$PROBE" 2>&1 | tail -n 4
  echo "--- after, in-process, second run (warm cache), CUDAFIX_DEBUG=1"
  LD_LIBRARY_PATH=$compat:$ldp0 CUDAFIX_DEBUG=1 "$hpy" -c "$PROBE" 2>&1 | tail -n 12
  echo "--- after, activation: eval \"\$(cudafix shell --shell bash --activate)\" then python3"
  LD_LIBRARY_PATH=$compat:$ldp0 PYTHONPATH=$repo bash -c 'eval "$(python3 -m cudafix shell --shell bash --activate)"; echo "LD_LIBRARY_PATH=$LD_LIBRARY_PATH"; python3 -c "$0"' "$PROBE" 2>&1 | tail -n 4

  echo "### 4. CUDA_VISIBLE_DEVICES='' before a yolov9c run"
  echo "--- cudafix check"
  CUDA_VISIBLE_DEVICES= cf check; echo "exit $?"
  echo "--- the startup hook's warning at import torch (venv with cudafix), then the run"
  CUDA_VISIBLE_DEVICES= "$hpy" -c '
import time, torch
from ultralytics import YOLO
dev = "cuda" if torch.cuda.is_available() else "cpu"
m = YOLO("yolov9c.yaml").model.to(dev).eval(); x = torch.randn(1, 3, 640, 640, device=dev)
with torch.inference_mode():
    m(x); t = time.perf_counter(); m(x); print("yolov9c on", dev, "%.1f ms/image" % ((time.perf_counter() - t) * 1e3))
' 2>&1 | grep -v -e "^ *$" -e "Ultralytics Settings" -e "yolo settings" | tail -n 6

  echo "### 5. CUDA_LAUNCH_BLOCKING=1 and CUDA_MODULE_LOADING=EAGER"
  CUDA_LAUNCH_BLOCKING=1 CUDA_MODULE_LOADING=EAGER cf check; echo "exit $?"
  echo "--- the startup hook's warnings"
  CUDA_LAUNCH_BLOCKING=1 CUDA_MODULE_LOADING=EAGER "$hpy" -c "import torch" 2>&1 | tail -n 4

} > "$O/fixes.txt" 2>&1
echo done
