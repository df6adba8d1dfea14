#!/bin/sh
# Issue 37 on the GPU machine after the sections redesign (~3 min): this tree against BEFORE (the
# tree with the old claim / hand-over head start) timed in the same rounds, and what each speed
# switch is worth (bench/switches.py).  Results under $OUT.
#   git archive <before> cudafix | tar -x -C .devrun/head     # here; carry .devrun
#   sh bench/sections_device.sh .devrun/head                  # there
cd "$(dirname "$0")/.." || exit 1
HERE=$(pwd)
rm -rf /tmp/cfx-before; cp -a "${1:?usage: sections_device.sh BEFORE_DIR}" /tmp/cfx-before; rm -rf "$1"
PY=/opt/torch/.venv/bin/python3
[ -x "$PY" ] || PY=$(command -v python3)
for t in "$HERE" /tmp/cfx-before; do PYTHONDONTWRITEBYTECODE= "$PY" -m compileall -q "$t/cudafix" >/dev/null; done
{ date -u; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; nproc; git -C "$HERE" log -1 --format=%H 2>/dev/null; } > "$OUT"/env.txt 2>&1
timeout 200 "$PY" bench/status_vs_collect_env.py --python "$PY" --also-repo /tmp/cfx-before -n 7 --check --speed-target 40 \
  --warm-max-s 0.120 --cold-max-s 0.300 > "$OUT"/status-bench.txt 2>&1; echo "rc=$?" >> "$OUT"/status-bench.txt
( cd /; timeout 120 "$PY" "$HERE"/bench/status_ab.py --python "$PY" --other /tmp/cfx-before -n 30 ) > "$OUT"/ab.txt 2>&1
( cd /; PYTHONPATH=$HERE timeout 200 "$PY" "$HERE"/bench/switches.py -n 30 --python "$PY" ) > "$OUT"/switches.txt 2>&1
( cd /; X=$(mktemp -d); for m in 1 0; do CUDAFIX_JOBS=$m XDG_CACHE_HOME=$X PYTHONPATH=$HERE "$PY" -m cudafix status --json > "$X/$m.json"; done
  for m in 1 0; do CUDAFIX_JOBS=$m XDG_CACHE_HOME=$X PYTHONPATH=$HERE "$PY" -m cudafix status --json > "$X/$m.json"; done
  "$PY" - "$X/1.json" "$X/0.json" <<'PYEOF'
import json, sys
a, b = (json.load(open(p)) for p in sys.argv[1:])
for d in (a, b):
    d["snapshot"].pop("created"); d["snapshot"]["env"].pop("CUDAFIX_JOBS", None)
print("status --json, serial vs sections forked, warm: %s; %d GPUs, %d extension modules" % (
    "identical" if a == b else "DIFFERENT", len(a["snapshot"]["gpus"]["gpus"]), len(a["snapshot"]["extensions"]["modules"])))
PYEOF
  PYTHONPATH=$HERE "$PY" "$HERE"/bench/ahead_timeline.py -n 3 ) > "$OUT"/ahead.txt 2>&1
ls -la "$OUT"
