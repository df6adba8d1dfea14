"""Benchmark: what the startup hook costs, against a baseline measured in the same run.

1. `python -c pass` in a venv with cudafix installed (warm cache) vs an otherwise identical venv
   without it (both see the real torch 2.14.1+cu130 site-packages through a .pth line).
   Runs are interleaved; medians; goal: overhead <= 0.5 ms and ratio <= 1.05.
2. The cold recompute (probes + rules + cache write, what runs at `import torch` when the cache
   is stale), in-process in a fresh interpreter: first ever (empty cache dir: includes the
   fatbin scan) and a typical recompute (only the hook entry stale).
3. The cost added to `import torch` (torch 2.13.0 CPU venv: quicker to import), warm cache,
   with vs without cudafix.

    python3 bench/startup.py [--runs N] [--torch-runs N]

Prints one line per measurement and the ratios; results are recorded in docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import os
import pathlib
import statistics
import subprocess
import sys
import tempfile
import time

REPO = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from tests.test_startup_helpers import TORCH_CPU_SITE, TORCH_CU_SITE, clean_env, make_venv  # noqa: E402


CPU = []  # (label, cpu seconds) of the last interleaved() call


def _time(cmd, env):
    """Wall seconds of one run; its CPU seconds (user+sys, from wait4) go to _time.cpu."""
    t0 = time.perf_counter()
    p = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, cwd="/")
    err = p.stderr.read()
    _, status, ru = os.wait4(p.pid, 0)
    dt = time.perf_counter() - t0
    p.returncode = os.waitstatus_to_exitcode(status)
    if p.returncode != 0:
        raise SystemExit("failed: %s\n%s" % (cmd, err.decode(errors="replace")))
    _time.cpu = ru.ru_utime + ru.ru_stime
    return dt


def interleaved(cmd_a, cmd_b, env, runs, warmup=5):
    a, b, ca, cb = [], [], [], []
    for _ in range(warmup):
        _time(cmd_a, env)
        _time(cmd_b, env)
    for i in range(runs):
        for cmd, w, c in ((cmd_a, a, ca), (cmd_b, b, cb)) if i % 2 else ((cmd_b, b, cb), (cmd_a, a, ca)):
            w.append(_time(cmd, env))
            c.append(_time.cpu)
    CPU[:] = [statistics.median(ca), statistics.median(cb)]
    return statistics.median(a), statistics.median(b)


COLD = r"""
import os, shutil, sys, time
import _cudafix_startup as hook
from cudafix import hookplan
if sys.argv[1] == "first":
    shutil.rmtree(os.path.dirname(hook.state.cache_path), ignore_errors=True)
t0 = time.perf_counter()
entry = hookplan.compute(os.environ, hook.state.syspath)
t1 = time.perf_counter()
hookplan.write_entry(hook.state.cache_path, entry)
t2 = time.perf_counter()
print("%.1f %.1f" % ((t1 - t0) * 1000, (t2 - t1) * 1000))
"""


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=300)
    ap.add_argument("--torch-runs", type=int, default=11)
    args = ap.parse_args()
    tmp = pathlib.Path(tempfile.mkdtemp(prefix="cudafix-bench-"))
    env = clean_env(tmp / "cache")
    print("python %s, %d CPUs" % (sys.version.split()[0], os.cpu_count() or 0))

    # 1. python -c pass
    without = make_venv(tmp / "without", cudafix=False, deps=[TORCH_CU_SITE])
    with_ = make_venv(tmp / "with", deps=[TORCH_CU_SITE])
    subprocess.run([str(with_), "-c", "import torch"], env=env, cwd="/", capture_output=True)  # warm the cache
    chk = subprocess.run([str(with_), "-c", "import _cudafix_startup as h; print(h.state.entry is not None)"],
                         env=env, cwd="/", capture_output=True, text=True).stdout.strip()
    assert chk == "True", "cache not warm"
    m_with, m_without = interleaved([str(with_), "-c", "pass"], [str(without), "-c", "pass"], env, args.runs)
    print("python -c pass, %d runs each, median: without cudafix %.2f ms, with cudafix (warm cache) %.2f ms"
          % (args.runs, m_without * 1000, m_with * 1000))
    print("  wall: overhead %.3f ms, ratio %.3f  (goal <= 0.5 ms, <= 1.05)" % ((m_with - m_without) * 1000, m_with / m_without))
    print("  cpu (user+sys, median): without %.2f ms, with %.2f ms: overhead %.3f ms, ratio %.3f"
          % (CPU[1] * 1000, CPU[0] * 1000, (CPU[0] - CPU[1]) * 1000, CPU[0] / CPU[1]))

    # 2. cold recompute
    cpu_with = make_venv(tmp / "cpu-with", deps=[TORCH_CPU_SITE])
    cpu_without = make_venv(tmp / "cpu-without", cudafix=False, deps=[TORCH_CPU_SITE])
    for label, py in (("torch 2.14.1+cu130", with_), ("torch 2.13.0 cpu", cpu_with)):
        rows = []
        for kind in ["first"] + ["again"] * 5:
            out = subprocess.run([str(py), "-c", COLD, kind], env=env, cwd="/", capture_output=True, text=True)
            if out.returncode != 0:
                raise SystemExit(out.stderr)
            rows.append([float(x) for x in out.stdout.split()])
        again = statistics.median(r[0] for r in rows[1:])
        print("cold recompute (%s): first ever %.0f ms (probes+rules) + %.1f ms write; typical %.0f ms (median of 5)"
              % (label, rows[0][0], rows[0][1], again))

    # 3. import torch
    subprocess.run([str(cpu_with), "-c", "import torch"], env=env, cwd="/", capture_output=True)
    t_with, t_without = interleaved([str(cpu_with), "-c", "import torch"], [str(cpu_without), "-c", "import torch"], env,
                                    args.torch_runs, warmup=1)
    print("import torch (2.13.0 cpu), %d runs each, median: without %.0f ms, with cudafix (warm) %.0f ms: +%.1f ms, ratio %.3f"
          % (args.torch_runs, t_without * 1000, t_with * 1000, (t_with - t_without) * 1000, t_with / t_without))


if __name__ == "__main__":
    main()
