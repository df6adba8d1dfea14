#!/bin/sh
# Issue 23's H200 figures in one device run, before (commit 51656f0's tree in ../speed-before) and
# after (this tree): bench/status_vs_collect_env.py, an importtime / cProfile view of a warm
# `cudafix status --json`, bench/startup.py --pass-only.  Results under $OUT (the device tool's).
# Set-up (here): copy this tree to /work/main/.devrun/speed/ and `git archive 51656f0` to
# /work/main/.devrun/speed-before/, then run `sh .devrun/speed/bench/issue23_h200.sh` with both
# carried.  ~70 s of device time; run on 2026-12-01 at 23:02 and 23:23 UTC (docs/benchmarks.md).
cd "$(dirname "$0")/.." || exit 1
HERE=$(pwd)
PY=/opt/torch/.venv/bin/python3
[ -x "$PY" ] || PY=$(command -v python3)
export PYTHONUNBUFFERED=1
{ date -u; uptime; nproc; "$PY" -c 'import sys; print(sys.version)'; env | grep -E '^PYTHON' ; } > "$OUT"/env.txt 2>&1
SITE=$("$PY" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
# 1. status vs collect_env, the before tree timed in the same rounds
timeout 110 "$PY" bench/status_vs_collect_env.py --python "$PY" --also-repo ../speed-before -n 5 --check --speed-target 40 --warm-max-s 0.120 --cold-max-s 0.300 --json-out "$OUT"/status-bench.json > "$OUT"/status-bench.txt 2>&1
echo "rc=$?" >> "$OUT"/status-bench.txt
# 2. where a warm status's time goes there now (importtime min-of-1 after a warm run; cProfile)
( cd /; for t in "$HERE" "$HERE/../speed-before"; do echo "== $t"; PYTHONPATH=$t "$PY" -m cudafix status --json >/dev/null 2>&1;
  PYTHONPATH=$t "$PY" -X importtime -m cudafix status --json 2>/tmp/imp.txt >/dev/null; sort -t'|' -k2 -n /tmp/imp.txt | tail -30;
  PYTHONPATH=$t timeout 20 "$PY" -m cProfile -s cumtime -m cudafix status --json 2>&1 | grep -A50 'Ordered by' | cut -c1-160; done ) > "$OUT"/profile.txt 2>&1
# 3. python -c pass, hook vs bare venv, the before hook in the same rounds
timeout 75 "$PY" bench/startup.py --runs 250 --pass-only --no-instructions --torch-site "$SITE" --also-hook ../speed-before > "$OUT"/startup.txt 2>&1
echo "rc=$?" >> "$OUT"/startup.txt
