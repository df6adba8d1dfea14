#!/bin/sh
# Issues 34 and 37 on the GPU machine in one device run (~8 min), each part packed as it ends
# (compat.tgz, status.tgz: the device tool brings back 8 files at most, and a run cut off at its
# limit still brings back the parts that ended):
#   compat/  sh bench/compat_h200.sh MODS: the model against the real driver, cupy's kernels, the
#            image's env recorded with this tree (issue 34)
#   status/  sh bench/issue23_h200.sh BEFORE: status vs collect_env, warm and cold, the same-run A/B
#            against BEFORE, the hook (issue 37)
#   first-run.txt  `pip install` of this tree into the image's env, then `cudafix status --json`
#            with cudafix's caches empty, as a user's first run (issue 37: <= 400 ms); last,
#            because the install puts cudafix's hook into the image's env.
#   python -m tools.compat_proof build .carry/compat; git archive <before> | tar -x -C .devrun/before
#   sh bench/wave4_device.sh .carry/compat .devrun/before      # there, carry: .carry, .devrun
#   PARTS="status first-run" sh bench/wave4_device.sh ...   # a subset (default: all three)
cd "$(dirname "$0")/.." || exit 1
HERE=$(pwd)
PARTS=${PARTS:-compat status first-run}
has() { case " $PARTS " in *" $1 "*) return 0 ;; esac; return 1; }
MODS=${1:?usage: wave4_device.sh MODULE_DIR BEFORE_DIR}
BEFORE=${2:?usage: wave4_device.sh MODULE_DIR BEFORE_DIR}
# both move out of this checkout: the runs put it on sys.path, and the extension scan would walk them
rm -rf /tmp/cfx-before; cp -a "$BEFORE" /tmp/cfx-before; rm -rf "$BEFORE"
rm -rf /tmp/cfx-mods; cp -a "$MODS" /tmp/cfx-mods; rm -rf "$MODS"; MODS=/tmp/cfx-mods
TOP=$OUT
mkdir -p "$TOP/compat" "$TOP/status"
if has compat; then
  OUT=$TOP/compat sh bench/compat_h200.sh "$MODS" > "$TOP/compat/run.txt" 2>&1
  (cd "$TOP" && tar czf compat.tgz compat)
fi
rm -rf "$TOP/compat"
PY=/opt/torch/.venv/bin/python3
[ -x "$PY" ] || PY=$(command -v python3)
if has status; then
  OUT=$TOP/status sh bench/issue23_h200.sh /tmp/cfx-before > "$TOP/status/run.txt" 2>&1
  (cd "$TOP" && tar czf status.tgz status)
fi
rm -rf "$TOP/status"
has first-run || { ls -la "$TOP"; exit 0; }
{
  echo "== pip install (no index: the device has no registry)"
  cp -a "$HERE" /tmp/cfx-src && rm -rf /tmp/cfx-src/.git /tmp/cfx-src/.carry /tmp/cfx-src/.devrun
  if "$PY" -m pip install -q --no-deps --no-index --no-build-isolation /tmp/cfx-src; then echo "installed by pip"; else
    echo "pip could not build here: FAILED"; fi
  "$PY" -m pip show cudafix 2>/dev/null | head -3
  for i in 1 2 3 4 5 6 7; do
    X=$(mktemp -d)
    t0=$(date +%s%N); (cd / && XDG_CACHE_HOME=$X "$PY" -m cudafix status --json > /tmp/fr.json); rc=$?; t1=$(date +%s%N)
    t2=$(date +%s%N); (cd / && XDG_CACHE_HOME=$X "$PY" -m cudafix status --json > /dev/null); t3=$(date +%s%N)
    echo "run $i: first (caches empty) $(( (t1 - t0) / 1000000 )) ms rc=$rc; the next (warm) $(( (t3 - t2) / 1000000 )) ms"
  done
  head -c 300 /tmp/fr.json; echo
} > "$TOP/first-run.txt" 2>&1
ls -la "$TOP"
