#!/usr/bin/env python3
"""What each speed switch of a warm `cudafix status --json` is worth, measured in one run (issue 37:
keep a switch a bench shows worth >= 5 ms on the device, drop the rest).

Each variant is the same command with one switch undone by a launcher that patches it before the
command runs; every round runs the baseline and every variant once, in a shuffled order, each a
fresh process (wall clock from spawn to exit), caches warm (one untimed run first), from `/`.
Per variant: the median of its per-round differences to the baseline (ms), their spread
(interquartile range), and the medians' ratio.

  baseline       what `python -m cudafix status --json` does (cudafix/__main__.py: cli.run)
  sys-exit       `sys.exit` instead of `os._exit` after atexit (cli/__init__.py `_leave`)
  serial         no child at all (CUDAFIX_JOBS=1): the whole head start

    python3 bench/switches.py [-n 30] [--python PY]     (cudafix on PYTHONPATH or installed in PY's env)
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import subprocess
import sys
import time

RUN = "from cudafix.cli import run; run(['status', '--json'])"
VARIANTS = {
    "baseline": (RUN, {}),
    "sys-exit": ("import sys; import cudafix.cli as c; c._leave = lambda rc: sys.exit(rc); " + RUN, {}),
    "serial": (RUN, {"CUDAFIX_JOBS": "1"}),
}


def once(python: str, code: str, env: dict) -> float:
    began = time.perf_counter()
    p = subprocess.run([python, "-c", code], env=env, cwd="/", stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    took = time.perf_counter() - began
    if p.returncode not in (0, 1):
        raise SystemExit("switches: %s exited %d: %s" % (code[:60], p.returncode, p.stderr.decode()[-300:]))
    return took * 1e3


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("-n", type=int, default=30)
    ap.add_argument("--python", default=sys.executable)
    a = ap.parse_args()
    base_env = {k: v for k, v in os.environ.items() if not k.startswith("CUDAFIX_")}
    for name, (code, extra) in VARIANTS.items():  # warm every cache, once each
        once(a.python, code, dict(base_env, **extra))
    times = {name: [] for name in VARIANTS}
    for _ in range(a.n):
        order = list(VARIANTS)
        random.shuffle(order)
        for name in order:
            code, extra = VARIANTS[name]
            times[name].append(once(a.python, code, dict(base_env, **extra)))
    load = os.getloadavg()
    print("switches: %s, %d rounds, %d CPUs, load %.2f %.2f %.2f, %s" % (a.python, a.n, os.cpu_count() or 0, *load,
                                                                        time.strftime("%Y-%m-%d %H:%M")))
    base = times["baseline"]
    print("%-11s %10s %10s %14s %10s %8s" % ("variant", "median ms", "min ms", "diff ms (med)", "IQR ms", "ratio"))
    for name, t in times.items():
        diffs = sorted(x - b for x, b in zip(t, base))
        q = statistics.quantiles(diffs, n=4) if len(diffs) >= 4 else [0, 0, 0]
        print("%-11s %10.1f %10.1f %+14.1f %10.1f %8.3f" % (name, statistics.median(t), min(t), statistics.median(diffs),
                                                           q[2] - q[0], statistics.median(t) / statistics.median(base)))
    print("a switch is worth keeping where undoing it costs >= 5 ms (diff) beyond its spread")
    return 0


if __name__ == "__main__":
    sys.exit(main())
