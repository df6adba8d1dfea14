"""Benchmark: the finder's work when `import torch` begins (warm cache), this tree vs another.

What the startup hook does at `import torch` (the check: fingerprint, the cache read through
cudafix.store.safefs, corrections; preloads; warnings), called as importlib calls it, in a fresh
interpreter of a venv seeing the torch 2.13.0 CPU test venv (or --torch-site), torch itself not
imported.  Two venvs, in one run: cudafix from this tree, and cudafix (package, start module,
.pth) from DIR (e.g. an earlier commit's worktree), runs interleaved; and, where valgrind is
installed, the instructions of one such run each (callgrind: repeatable, unlike time on a shared
machine).  Timed twice: as it is, and with `json` imported before (torch imports json, re, enum
and functools itself, so a finder that imports them first only moves their cost, which the second
timing leaves out).

    python3 bench/finder_work.py --baseline DIR [--runs N] [--torch-site DIR]
"""

from __future__ import annotations

import argparse
import os
import pathlib
import shutil
import statistics
import subprocess
import sys
import tempfile

REPO = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from bench.startup import AT_TORCH, instructions  # noqa: E402
from tests.test_startup_helpers import TORCH_CPU_SITE, clean_env, make_venv, site_packages  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--baseline", type=pathlib.Path, required=True, help="a tree holding the cudafix to compare with")
    ap.add_argument("--runs", type=int, default=41)
    ap.add_argument("--torch-site", type=pathlib.Path, default=TORCH_CPU_SITE)
    args = ap.parse_args()
    tmp = pathlib.Path(tempfile.mkdtemp(prefix="cudafix-bench-finder-"))
    env = clean_env(tmp / "cache")
    print("python %s, %d CPUs, load %.2f" % (sys.version.split()[0], os.cpu_count() or 0, os.getloadavg()[0]))
    this = make_venv(tmp / "this", deps=[args.torch_site])
    base = make_venv(tmp / "base", deps=[args.torch_site])
    site = site_packages(tmp / "base")
    shutil.rmtree(str(site / "cudafix"))
    shutil.copytree(str(args.baseline / "cudafix"), str(site / "cudafix"), ignore=shutil.ignore_patterns("__pycache__"))
    for name in ("_cudafix_startup.py", "cudafix.pth"):
        shutil.copy2(str(args.baseline / name), str(site / name))
    for py in (this, base):
        subprocess.run([str(py), "-c", "import torch"], env=env, cwd="/", capture_output=True)  # warm the caches
    for pre in ("", "import json\n"):
        _compare(this, base, args, env, pre)
    shutil.rmtree(str(tmp), ignore_errors=True)


def _compare(this, base, args, env, pre):
    cmds = {"this tree": [str(this), "-W", "ignore", "-c", pre + AT_TORCH],
            "baseline %s" % args.baseline: [str(base), "-W", "ignore", "-c", pre + AT_TORCH]}
    times = {k: [] for k in cmds}
    for i in range(args.runs):
        for k in (list(cmds) if i % 2 == 0 else list(cmds)[::-1]):
            out = subprocess.run(cmds[k], env=env, cwd="/", capture_output=True, text=True)
            if out.returncode != 0:
                raise SystemExit(out.stderr)
            times[k].append(float(out.stdout))
    (a, ta), (b, tb) = times.items()
    print("the finder's work at `import torch`, warm cache%s, %d interleaved runs each (median, min):"
          % (", json imported before" if pre else "", args.runs))
    for k, t in times.items():
        print("  %s: %.3f ms (min %.3f)" % (k, statistics.median(t), min(t)))
    print("  ratio this/baseline: %.2f (medians), %.2f (minima)" % (statistics.median(ta) / statistics.median(tb), min(ta) / min(tb)))
    # valgrind puts its LD_PRELOAD into the environment at exec, which the fingerprint includes:
    # a first run under it writes that fingerprint's entry (cold), the second is the warm one
    counts = {k: (instructions(cmd, env), instructions(cmd, env))[1] for k, cmd in cmds.items()}
    if all(counts.values()):
        print("  instructions (callgrind, one run each, the whole interpreter): this %d, baseline %d: %+d"
              % (counts[a], counts[b], counts[a] - counts[b]))


if __name__ == "__main__":
    main()
