#!/bin/sh
# Issue 23's H200 figures in one device run, this tree against a before tree timed in the same
# rounds: bench/status_vs_collect_env.py; bench/status_ab.py against the before tree and against
# this tree with its probes in one process (CUDAFIX_SERIAL=1); bench/switches.py (each speed
# switch undone, same rounds); bench/ahead_timeline.py (the
# probes run ahead: when each child ran, whether the parent waited); `status --json` with and
# without the head start, diffed; an importtime / cProfile view of a warm `status --json`;
# bench/startup.py --pass-only.  Results under $OUT (the device tool's).
#   sh bench/issue23_h200.sh BEFORE_DIR      (SWITCHES=0: without bench/switches.py, ~3 min less)
# BEFORE_DIR: a copy of the before tree outside this checkout (`git archive <commit> | tar -x -C
# .devrun/before` here, with .devrun ignored and carried; moved out of the checkout there, as the
# A/B runs put this checkout on sys.path and the scan would walk a copy inside it).  ~4 min of
# device time.
cd "$(dirname "$0")/.." || exit 1
HERE=$(pwd)
BEFORE=$(cd "${1:?usage: issue23_h200.sh BEFORE_DIR}" && pwd) || exit 1
PY=/opt/torch/.venv/bin/python3
[ -x "$PY" ] || PY=$(command -v python3)
export PYTHONUNBUFFERED=1
for t in "$HERE" "$BEFORE"; do PYTHONDONTWRITEBYTECODE= "$PY" -m compileall -q "$t/cudafix" >/dev/null; done
{ date -u; uptime; nproc; "$PY" -c 'import sys; print(sys.version)'; env | grep -E '^PYTHON'; git -C "$HERE" log -1 --format=%H 2>/dev/null; } > "$OUT"/env.txt 2>&1
SITE=$("$PY" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
# 1. the head start gives the serial answer (real NVML, the image's env), then where its time goes
( cd /; X=$(mktemp -d); for m in 1 0 1 0; do CUDAFIX_SERIAL=$m XDG_CACHE_HOME=$X PYTHONPATH=$HERE "$PY" -m cudafix status --json > "$X/$m.json"; echo "CUDAFIX_SERIAL=$m rc=$?"; done
  "$PY" - "$X/1.json" "$X/0.json" <<'EOF'
import json, sys
a, b = (json.load(open(p)) for p in sys.argv[1:])
for d in (a, b):
    d["snapshot"].pop("created"); d["snapshot"]["env"].pop("CUDAFIX_SERIAL", None)
print("status --json, serial vs ahead, warm: %s; %d GPUs, %d extension modules" % (
    "identical" if a == b else "DIFFERENT", len(a["snapshot"]["gpus"]["gpus"]), len(a["snapshot"]["extensions"]["modules"])))
EOF
  cp "$X/0.json" "$OUT"/status-ahead.json
  XDG_CACHE_HOME=$X PYTHONPATH=$HERE "$PY" "$HERE"/bench/ahead_timeline.py -n 5
  XDG_CACHE_HOME=$X PYTHONPATH=$HERE "$PY" "$HERE"/bench/ahead_timeline.py -n 3 --always
  PYTHONPATH=$HERE "$PY" "$HERE"/bench/ahead_timeline.py -n 3 --cold
  find "$X" -name '*.json' -path '*envs*' -exec ls -l {} + ) > "$OUT"/ahead.txt 2>&1
# 2. same-run A/Bs: against the before tree, against this tree serial, and each speed switch undone
( cd /; timeout 120 "$PY" "$HERE"/bench/status_ab.py --python "$PY" --other "$BEFORE" -n 30
  timeout 120 "$PY" "$HERE"/bench/status_ab.py --python "$PY" --other "$HERE" --other-env CUDAFIX_SERIAL=1 -n 30
  [ "${SWITCHES:-1}" = 0 ] || PYTHONPATH=$HERE timeout 200 "$PY" "$HERE"/bench/switches.py -n 50 --python "$PY" ) > "$OUT"/ab.txt 2>&1
# 3. status vs collect_env, the before tree timed in the same rounds
timeout 240 "$PY" bench/status_vs_collect_env.py --python "$PY" --also-repo "$BEFORE" -n 9 --check --speed-target 40 --warm-max-s 0.120 --cold-max-s 0.300 --json-out "$OUT"/status-bench.json > "$OUT"/status-bench.txt 2>&1
echo "rc=$?" >> "$OUT"/status-bench.txt
# 4. where a warm status's time goes there now (importtime after a warm run; cProfile)
( cd /; for t in "$HERE" "$BEFORE"; do echo "== $t"; PYTHONPATH=$t "$PY" -m cudafix status --json >/dev/null 2>&1;
  PYTHONPATH=$t "$PY" -X importtime -m cudafix status --json 2>/tmp/imp.txt >/dev/null; sort -t'|' -k2 -n /tmp/imp.txt | tail -30;
  PYTHONPATH=$t timeout 20 "$PY" -m cProfile -s cumtime -m cudafix status --json 2>&1 | grep -A50 'Ordered by' | cut -c1-160; done ) > "$OUT"/profile.txt 2>&1
# 5. python -c pass, hook vs bare venv, the before hook in the same rounds
timeout 75 "$PY" bench/startup.py --runs 250 --pass-only --no-instructions --torch-site "$SITE" --also-hook "$BEFORE" > "$OUT"/startup.txt 2>&1
echo "rc=$?" >> "$OUT"/startup.txt
