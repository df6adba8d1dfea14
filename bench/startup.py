"""Benchmark: what the startup hook costs, against a baseline measured in the same run.

1. `python -c pass` in a venv with cudafix installed (warm cache) vs an otherwise identical venv
   without it (both see a real torch site-packages through a .pth line: by default the torch
   2.14.1+cu130 test venv's, or --torch-site).  Runs are interleaved (the order alternates);
   reported: the median of the per-pair differences and ratios (the goal's measure), the
   difference of the two sides' medians, CPU
   time (user+sys), a control (a second venv identical to the one without cudafix: its
   difference is the run's noise), and, where valgrind is installed, the instructions each start
   executes (callgrind, one run each: repeatable, unlike time on a shared machine).
   Goal: overhead <= 0.5 ms and ratio <= 1.05.
2. The cold recompute (probes + rules + cache write, what runs at `import torch` when the cache
   is stale), in-process in a fresh interpreter: first ever (empty cache dir: includes the
   fatbin scan) and a typical recompute (only the hook entry stale).
3. The cost added to `import torch` (torch 2.13.0 CPU venv by default: quicker to import; or
   --torch-site), warm cache: the finder's work timed in-process, then `import torch` end to end
   with vs without cudafix (torch's own import varies by far more than the finder's work).

    python3 bench/startup.py [--runs N] [--torch-runs N] [--torch-site DIR] [--no-instructions] [--pass-only]
                             [--also-hook DIR] [--raw FILE]

Prints one line per measurement and the ratios; results are recorded in docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import os
import pathlib
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

REPO = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from tests.test_startup_helpers import TORCH_CPU_SITE, TORCH_CU_SITE, clean_env, make_venv, site_packages  # noqa: E402


def _spawn(cmd, env):
    """(wall seconds, CPU seconds user+sys) of one run, stdout and stderr to /dev/null."""
    devnull = os.open(os.devnull, os.O_RDWR)
    try:
        acts = [(os.POSIX_SPAWN_DUP2, devnull, 1), (os.POSIX_SPAWN_DUP2, devnull, 2)]
        t0 = time.perf_counter()
        pid = os.posix_spawn(cmd[0], cmd, env, file_actions=acts)
        _, status, ru = os.wait4(pid, 0)
        dt = time.perf_counter() - t0
    finally:
        os.close(devnull)
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit("failed: %s (run it by hand to see why)" % cmd)
    return dt, ru.ru_utime + ru.ru_stime


def _quiet_check(cmd, env):
    """Each command is run once first: it must succeed and print nothing (no stray warning)."""
    p = subprocess.run(cmd, env=env, capture_output=True, cwd="/")
    if p.returncode != 0 or p.stdout or p.stderr:
        raise SystemExit("%s: exit %d, output %r" % (cmd, p.returncode, (p.stdout + p.stderr)[:2000]))


class Interleaved:
    """Runs of several commands, interleaved (the order alternates run by run), medians."""

    def __init__(self, cmds, env, runs, warmup=5):
        self.wall = [[] for _ in cmds]
        self.cpu = [[] for _ in cmds]
        idx = list(range(len(cmds)))
        for i in range(warmup + runs):
            for k in idx if i % 2 else idx[::-1]:
                dt, cpu = _spawn(cmds[k], env)
                if i >= warmup:
                    self.wall[k].append(dt)
                    self.cpu[k].append(cpu)

    def line(self, label, k, base=0, what="wall"):
        """``label``: command k against command ``base``.  First the median of the per-pair
        differences and ratios (runs k and base of the same round, next to each other in time: a
        machine whose speed drifts, or flips between two states, moves both), then the difference
        of the two sides' medians (which such a machine can move by several tenths of a ms)."""
        a, b = (self.wall if what == "wall" else self.cpu)[k], (self.wall if what == "wall" else self.cpu)[base]
        ma, mb = statistics.median(a), statistics.median(b)
        diff = statistics.median(x - y for x, y in zip(a, b))
        ratio = statistics.median(x / y for x, y in zip(a, b))
        return ("  %s, %s: overhead %.3f ms, ratio %.3f (per pair, median); medians %.2f vs %.2f ms: %+.3f ms, %.3f"
                % (label, what, diff * 1000, ratio, ma * 1000, mb * 1000, (ma - mb) * 1000, ma / mb))

    def drift(self, k, base=0, parts=8):
        """The run cut in ``parts`` stretches of rounds: each one's baseline median and per-pair
        overhead of command k, to show a machine that changed speed during the run."""
        a, b = self.wall[k], self.wall[base]
        n = max(1, len(a) // parts)
        cuts = [(statistics.median(b[i:i + n]), statistics.median(x - y for x, y in zip(a[i:i + n], b[i:i + n])))
                for i in range(0, n * parts, n) if b[i:i + n]]
        return "  drift, per %d rounds: baseline ms / overhead ms: %s" % (
            n, "  ".join("%.2f/%.3f" % (m * 1000, d * 1000) for m, d in cuts))


def instructions(cmd, env):
    """Instructions one run executes (valgrind's callgrind), or None without valgrind."""
    if shutil.which("valgrind") is None:
        return None
    env = dict(env, PYTHONHASHSEED="0")  # the same string hashes in every run: a repeatable count
    p = subprocess.run(["valgrind", "--tool=callgrind", "--callgrind-out-file=/dev/null"] + cmd,
                       env=env, capture_output=True, text=True, cwd="/")
    m = re.search(r"Collected : (\d+)", p.stderr)
    return int(m.group(1)) if m and p.returncode == 0 else None


COLD = r"""
import os, shutil, sys, time
from cudafix.hook import runtime as hook
from cudafix.hook import plan as hookplan
if sys.argv[1] == "first":
    shutil.rmtree(os.path.dirname(hook.check().cache_path), ignore_errors=True)
t0 = time.perf_counter()
entry = hookplan.compute(os.environ, hook.check().syspath)
t1 = time.perf_counter()
hookplan.write_entry(hook.check().cache_path, entry)
t2 = time.perf_counter()
print("%.1f %.1f" % ((t1 - t0) * 1000, (t2 - t1) * 1000))
"""


# What the finder does when `import torch` begins (hookenv: the check, corrections, preloads,
# warnings), timed in-process: called as importlib would call it, then torch is not imported.
AT_TORCH = r"""
import sys, time
finder = [f for f in sys.meta_path if getattr(f, "cudafix", 0) is True][0]
t0 = time.perf_counter()
finder.find_spec("torch", None, None)
print("%.3f" % ((time.perf_counter() - t0) * 1000))
"""


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=400)
    ap.add_argument("--torch-runs", type=int, default=11)
    ap.add_argument("--torch-site", type=pathlib.Path, default=None,
                    help="site-packages holding torch, for every part (default: the test venvs')")
    ap.add_argument("--no-instructions", action="store_true", help="skip the callgrind counts")
    ap.add_argument("--pass-only", action="store_true", help="only part 1, python -c pass")
    ap.add_argument("--raw", type=pathlib.Path, default=None, help="write part 1's per-run times (JSON) to this file")
    ap.add_argument("--also-hook", type=pathlib.Path, default=None,
                    help="part 1 also times a venv whose _cudafix_startup.py and cudafix.pth come from DIR "
                         "(e.g. an earlier version's, for a before/after in one run)")
    args = ap.parse_args()
    tmp = pathlib.Path(tempfile.mkdtemp(prefix="cudafix-bench-"))
    env = clean_env(tmp / "cache")
    print("python %s, %d CPUs, load %.2f" % (sys.version.split()[0], os.cpu_count() or 0, os.getloadavg()[0]))
    cu_site = args.torch_site or TORCH_CU_SITE
    cpu_site = args.torch_site or TORCH_CPU_SITE

    # 1. python -c pass
    without = make_venv(tmp / "without", cudafix=False, deps=[cu_site])
    with_ = make_venv(tmp / "with", deps=[cu_site])
    subprocess.run([str(with_), "-c", "import torch"], env=env, cwd="/", capture_output=True)  # warm the cache
    chk = subprocess.run([str(with_), "-c", "import cudafix.hook.runtime as h; print(h.check().entry is not None)"],
                         env=env, cwd="/", capture_output=True, text=True).stdout.strip()
    assert chk == "True", "cache not warm"
    # the control: a second venv identical to "without"; its difference is this run's noise floor
    control = make_venv(tmp / "without-2", cudafix=False, deps=[cu_site])
    pythons = [without, with_, control]
    if args.also_hook:
        other = make_venv(tmp / "with-other", deps=[cu_site])
        for name in ("_cudafix_startup.py", "cudafix.pth"):
            shutil.copy2(str(args.also_hook / name), str(site_packages(tmp / "with-other") / name))
        pythons.append(other)
    cmds = [[str(py), "-c", "pass"] for py in pythons]
    for cmd in cmds:
        _quiet_check(cmd, env)  # also writes the .pyc files, as pip install does
    runs = Interleaved(cmds, env, args.runs)
    if args.raw:
        import json

        args.raw.write_text(json.dumps({"venvs": [str(py) for py in pythons], "wall": runs.wall, "cpu": runs.cpu}))
    print("python -c pass, %d interleaved runs each, warm cache (goal: overhead <= 0.5 ms, ratio <= 1.05)" % args.runs)
    print(runs.line("with cudafix vs without", 1))
    print(runs.line("with cudafix vs without", 1, what="cpu"))
    print(runs.line("control (an identical venv without cudafix) vs without: the noise", 2))
    print(runs.drift(1))
    if args.also_hook:
        print(runs.line("with the hook files of %s vs without" % args.also_hook, 3))
    if not args.no_instructions:
        counts = [instructions(cmd, env) for cmd in cmds]
        if all(counts):
            for label, k in (("with cudafix", 1), ("control", 2), ("with %s" % args.also_hook, 3))[:len(cmds) - 1]:
                print("  instructions (callgrind, one run each), %s vs without: %d vs %d: %+d, ratio %.4f"
                      % (label, counts[k], counts[0], counts[k] - counts[0], counts[k] / counts[0]))
        else:
            print("  instructions: not measured (no valgrind)")

    if args.pass_only:
        shutil.rmtree(str(tmp), ignore_errors=True)
        return

    # 2. cold recompute
    cpu_with = make_venv(tmp / "cpu-with", deps=[cpu_site])
    cpu_without = make_venv(tmp / "cpu-without", cudafix=False, deps=[cpu_site])
    for label, py in (("torch at %s" % cu_site, with_), ("torch at %s" % cpu_site, cpu_with)):
        rows = []
        for kind in ["first"] + ["again"] * 5:
            out = subprocess.run([str(py), "-c", COLD, kind], env=env, cwd="/", capture_output=True, text=True)
            if out.returncode != 0:
                raise SystemExit(out.stderr)
            rows.append([float(x) for x in out.stdout.split()])
        again = statistics.median(r[0] for r in rows[1:])
        print("cold recompute (%s): first ever %.0f ms (probes+rules) + %.1f ms write; typical %.0f ms (median of 5)"
              % (label, rows[0][0], rows[0][1], again))
        if args.torch_site:
            break

    # 3. import torch
    subprocess.run([str(cpu_with), "-c", "import torch"], env=env, cwd="/", capture_output=True)
    at = []
    for _ in range(9):
        out = subprocess.run([str(cpu_with), "-W", "ignore", "-c", AT_TORCH], env=env, cwd="/", capture_output=True, text=True)
        if out.returncode != 0:
            raise SystemExit(out.stderr)
        at.append(float(out.stdout))
    print("the finder's work when `import torch` begins (in-process, warm cache, median of 9): %.2f ms (min %.2f, max %.2f)"
          % (statistics.median(at), min(at), max(at)))
    t = Interleaved([[str(cpu_without), "-c", "import torch"], [str(cpu_with), "-c", "import torch"]], env,
                    args.torch_runs, warmup=1)
    print("import torch (%s), %d interleaved runs each, warm cache:" % (cpu_site, args.torch_runs))
    print(t.line("with cudafix vs without", 1))
    shutil.rmtree(str(tmp), ignore_errors=True)


if __name__ == "__main__":
    main()
