#!/usr/bin/env python3
"""Benchmark: `cudafix status --json` vs `python -m torch.utils.collect_env`, in one run.

Both run with the same interpreter (default: the torch 2.14.1+cu130 test venv built by
tests/make_venvs.sh), alternately, N times each after one untimed warm-up of each.  Every timed
run happens in a fresh wrapper process that starts the command, times it (wall clock, from
spawn to exit) and reads resource.getrusage(RUSAGE_CHILDREN).ru_maxrss: the peak resident set
of the largest process of that run's tree (collect_env spawns pip, nvcc, lscpu ...; cudafix
status spawns nothing), measured fresh because the wrapper has no other children.

cudafix is measured twice: "warm" (its per-user cache filled by the warm-up, the state users
are in after the first run) and "cold" (an empty XDG_CACHE_HOME per run: arch scan and every
probe redone; the OS page cache stays warm for both tools).

Prints medians, the speed ratio collect_env / cudafix against the targets (>= 30x faster by
default, --speed-target X; --warm-max-s / --cold-max-s add limits in seconds; <= 100 MiB peak).  --check exits 1 when a target is missed; --json-out FILE keeps the raw runs.

    python3 bench/status_vs_collect_env.py [-n 5] [--python VENV/bin/python] [--also-repo DIR]

--also-repo DIR times a second cudafix checkout (e.g. `git worktree add /tmp/before <commit>`)
warm and cold, in the same rounds (which of the two runs first alternates round by round): a
before/after of a change, with its ratios.

`cudafix status` is run as users run it: the console script `pip install` writes for each
checkout's setup.cfg entry point (pip's launcher text, distlib's ScriptMaker template), not
`python -m cudafix` (runpy and importlib.util, ~6 ms here, are not on the user's path), with
the checkout's `cudafix/` package alone on PYTHONPATH (a directory holding a symlink to it, as
site-packages holds an installed one): the checkout's other files (tests, docs, build trees)
are not part of what a user's scan walks.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
VENVS = os.environ.get("CUDAFIX_TEST_VENVS", os.path.join(os.path.expanduser("~"), ".cache", "cudafix-venvs"))
DEFAULT_PYTHON = os.path.join(VENVS, "torch-cu", "bin", "python")

SPEED_TARGET = 30.0  # collect_env wall / cudafix wall (issue 23: >= 30x here, >= 40x on the H200)
MEMORY_TARGET_MIB = 100.0

# What pip writes to <env>/bin/cudafix for a console_scripts entry (distlib SCRIPT_TEMPLATE).
LAUNCHER = """# -*- coding: utf-8 -*-
import re
import sys
from %(module)s import %(func)s
if __name__ == '__main__':
    sys.argv[0] = re.sub(r'(-script\\.pyw|\\.exe)?$', '', sys.argv[0])
    sys.exit(%(func)s())
"""


def install_dir(repo: str) -> str:
    """A directory holding only ``repo``'s package (a symlink), for PYTHONPATH."""
    where = tempfile.mkdtemp(prefix="statusbench-site-")
    os.symlink(os.path.join(os.path.abspath(repo), "cudafix"), os.path.join(where, "cudafix"))
    return where


def console_script(repo: str, where: str) -> str:
    """The `cudafix` launcher pip would install for ``repo`` (its setup.cfg entry point), in ``where``."""
    import configparser

    cfg = configparser.ConfigParser()
    cfg.read(os.path.join(repo, "setup.cfg"))
    if not cfg.has_option("options.entry_points", "console_scripts"):  # e.g. `git archive <commit> cudafix` alone
        raise SystemExit("%s: no setup.cfg with the console_scripts entry point (copy the tree's setup.cfg beside cudafix/)" % repo)
    entry = {k.strip(): v.strip() for k, v in (line.split("=", 1) for line in
             cfg["options.entry_points"]["console_scripts"].strip().splitlines())}
    module, func = entry["cudafix"].split(":")
    path = os.path.join(where, "cudafix")
    with open(path, "w") as fh:
        fh.write(LAUNCHER % {"module": module, "func": func})
    return path


# Runs in a fresh interpreter per measurement: its only child is the measured command.
WRAPPER = r"""
import json, resource, subprocess, sys, time
spec = json.loads(sys.argv[1])
t0 = time.perf_counter()
p = subprocess.run(spec["cmd"], env=spec["env"], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
wall = time.perf_counter() - t0
ru = resource.getrusage(resource.RUSAGE_CHILDREN)
print(json.dumps({"rc": p.returncode, "wall_s": wall, "maxrss_kib": ru.ru_maxrss,
                  "stdout": p.stdout.decode("utf-8", "replace"), "stderr": p.stderr.decode("utf-8", "replace")[-2000:]}))
"""


# `python -m` puts the working directory first on sys.path: run from a checkout, --also-repo would
# import that checkout's cudafix, whatever PYTHONPATH says.  Every measured command starts here.
NEUTRAL_CWD = tempfile.mkdtemp(prefix="statusbench-cwd-")


def measure(cmd, env):
    spec = json.dumps({"cmd": cmd, "env": env})
    out = subprocess.run([sys.executable, "-c", WRAPPER, spec], stdout=subprocess.PIPE, check=True, timeout=600,
                         cwd=NEUTRAL_CWD)
    return json.loads(out.stdout)


def measure_cold(cmd, env):
    """``measure`` with an empty cache of cudafix's own (XDG_CACHE_HOME), removed afterwards."""
    cache = tempfile.mkdtemp(prefix="statusbench-")
    try:
        return measure(cmd, dict(env, XDG_CACHE_HOME=cache))
    finally:
        shutil.rmtree(cache, ignore_errors=True)


def validate_cudafix(run):
    if run["rc"] != 0:
        raise SystemExit("cudafix status --json failed (rc %d): %s" % (run["rc"], run["stderr"].strip()))
    doc = json.loads(run["stdout"])
    if doc.get("schema") != "cudafix.status/1" or not doc["snapshot"].get("torch"):
        raise SystemExit("cudafix status --json did not report a torch: %s" % run["stdout"][:300])
    return doc


def validate_collect_env(run):
    if run["rc"] != 0 or "PyTorch version:" not in run["stdout"]:
        raise SystemExit("collect_env failed (rc %d): %s" % (run["rc"], run["stderr"].strip()[-500:]))


def summarise(runs):
    walls = [r["wall_s"] for r in runs]
    return {
        "n": len(runs),
        "median_s": statistics.median(walls),
        "min_s": min(walls),
        "max_s": max(walls),
        "peak_mib": max(r["maxrss_kib"] for r in runs) / 1024.0,
        "median_peak_mib": statistics.median(r["maxrss_kib"] for r in runs) / 1024.0,
    }


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--python", default=DEFAULT_PYTHON, help="interpreter of the env to inspect (default: %(default)s)")
    ap.add_argument("-n", type=int, default=5, help="timed runs of each command (default: %(default)s)")
    ap.add_argument("--json-out", metavar="FILE", help="write the raw runs and the summary here")
    ap.add_argument("--check", action="store_true", help="exit 1 when a target is missed")
    ap.add_argument("--also-repo", metavar="DIR", help="another cudafix checkout to time warm in the same rounds")
    ap.add_argument("--speed-target", type=float, default=SPEED_TARGET, metavar="X",
                    help="collect_env / cudafix warm medians to reach (default: %(default)s)")
    ap.add_argument("--warm-max-s", type=float, metavar="S", help="also a target: warm median <= S seconds")
    ap.add_argument("--cold-max-s", type=float, metavar="S", help="also a target: cold median <= S seconds")
    args = ap.parse_args(argv)
    if not os.path.exists(args.python):
        raise SystemExit("no interpreter at %s: run tests/make_venvs.sh first" % args.python)

    base_env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    collect_cmd = [args.python, "-m", "torch.utils.collect_env"]

    load_before = os.getloadavg()
    # Byte-compile the checkout with the measured interpreter, as `pip install` does for an
    # installed cudafix (this workplace sets PYTHONDONTWRITEBYTECODE; without .pyc files every
    # run would recompile ~60 modules, which is not what users run).
    repos = [REPO] + ([os.path.abspath(args.also_repo)] if args.also_repo else [])
    for repo in repos:
        subprocess.run([args.python, "-m", "compileall", "-q", os.path.join(repo, "cudafix")], check=True,
                       env=dict(base_env, PYTHONDONTWRITEBYTECODE=""), stdout=subprocess.DEVNULL)
    launchers = [console_script(repo, tempfile.mkdtemp(prefix="statusbench-bin-")) for repo in repos]
    cudafix_cmd = [args.python, launchers[0], "status", "--json"]
    other_cmd = [args.python, launchers[-1], "status", "--json"]
    # the other checkout keeps its own cache dir: both are measured warm on their own cache
    cudafix_env = dict(base_env, PYTHONPATH=install_dir(REPO))
    other_env = dict(base_env, PYTHONPATH=install_dir(repos[-1]), XDG_CACHE_HOME=tempfile.mkdtemp(prefix="statusbench-other-")) \
        if args.also_repo else None

    # Warm-up (untimed): fills cudafix's cache and the OS page cache for both tools.
    doc = validate_cudafix(measure(cudafix_cmd, cudafix_env))
    validate_collect_env(measure(collect_cmd, base_env))
    if other_env is not None:
        validate_cudafix(measure(other_cmd, other_env))

    # Floors, for where the time goes: the interpreter alone, and with click (which any
    # click-based CLI pays before doing anything).
    floor_cmds = {"bare": [args.python, "-c", "pass"], "click": [args.python, "-c", "import click"]}
    floors = {k: [] for k in floor_cmds}

    warm, cold, collect, other, other_cold = [], [], [], [], []
    sides = [(cudafix_cmd, cudafix_env, warm, cold)]
    if other_env is not None:
        sides.append((other_cmd, other_env, other, other_cold))
    for i in range(args.n):
        for k, c in floor_cmds.items():
            floors[k].append(measure(c, base_env))
        # the two checkouts' order alternates round by round: neither always runs right after
        # the same command (collect_env, the floors), whose after-effects differ
        for cmd, env, w, c in (sides if i % 2 == 0 else sides[::-1]):
            w.append(measure(cmd, env))
            validate_cudafix(w[-1])
            c.append(measure_cold(cmd, env))
            validate_cudafix(c[-1])
        collect.append(measure(collect_cmd, base_env))
        validate_collect_env(collect[-1])

    s_warm, s_cold, s_coll = summarise(warm), summarise(cold), summarise(collect)
    ratio_warm = s_coll["median_s"] / s_warm["median_s"]
    ratio_cold = s_coll["median_s"] / s_cold["median_s"]
    peak = max(s_warm["peak_mib"], s_cold["peak_mib"])
    torch = doc["snapshot"]["torch"][0]

    print("status_vs_collect_env: %s (torch %s), %d runs each, %s, %d CPUs, %s"
          % (args.python, torch.get("version"), args.n, platform.platform(), os.cpu_count() or 0,
             time.strftime("%Y-%m-%d")))
    print("load average before: %s" % " ".join("%.2f" % x for x in load_before))
    print("%-36s %10s %10s %10s %12s" % ("command", "median s", "min s", "max s", "peak MiB"))
    for label, s in (("cudafix status --json (warm cache)", s_warm), ("cudafix status --json (cold cache)", s_cold),
                     ("python -m torch.utils.collect_env", s_coll),
                     ("floor: python -c pass", summarise(floors["bare"])),
                     # an env without click (cudafix's status/check never import it) times a failed import
                     ("floor: python -c 'import click'" if all(r["rc"] == 0 for r in floors["click"])
                      else "floor: 'import click' (not installed)", summarise(floors["click"]))):
        print("%-36s %10.3f %10.3f %10.3f %12.1f" % (label, s["median_s"], s["min_s"], s["max_s"], s["peak_mib"]))
    if other:
        s_other, s_other_cold = summarise(other), summarise(other_cold)
        for label, s in (("--also-repo (warm cache)", s_other), ("--also-repo (cold cache)", s_other_cold)):
            print("%-36s %10.3f %10.3f %10.3f %12.1f" % (label, s["median_s"], s["min_s"], s["max_s"], s["peak_mib"]))
        print("this checkout / --also-repo %s: %.3f warm, %.3f cold (medians; < 1 is faster)"
              % (repos[-1], s_warm["median_s"] / s_other["median_s"], s_cold["median_s"] / s_other_cold["median_s"]))
    speed_ok = ratio_warm >= args.speed_target
    mem_ok = peak <= MEMORY_TARGET_MIB
    print("speed ratio collect_env / cudafix: %.1fx warm, %.1fx cold (target >= %.0fx warm: %s)"
          % (ratio_warm, ratio_cold, args.speed_target, "met" if speed_ok else "MISSED"))
    for label, limit, s in (("warm", args.warm_max_s, s_warm), ("cold", args.cold_max_s, s_cold)):
        if limit is not None:
            ok = s["median_s"] <= limit
            speed_ok = speed_ok and ok
            print("cudafix %s median %.3f s (target <= %.3f s: %s)" % (label, s["median_s"], limit, "met" if ok else "MISSED"))
    print("cudafix peak memory: %.1f MiB (target <= %.0f MiB: %s); collect_env peak: %.1f MiB"
          % (peak, MEMORY_TARGET_MIB, "met" if mem_ok else "MISSED", s_coll["peak_mib"]))

    if args.json_out:
        with open(args.json_out, "w") as fh:
            json.dump({"summary": {"cudafix_warm": s_warm, "cudafix_cold": s_cold, "collect_env": s_coll,
                                   "ratio_warm": ratio_warm, "ratio_cold": ratio_cold},
                       "runs": {"cudafix_warm": warm, "cudafix_cold": cold, "collect_env": collect,
                                "also_repo_warm": other, "also_repo_cold": other_cold,
                                "floor_bare": floors["bare"], "floor_click": floors["click"]}}, fh, indent=1)
    return 0 if (speed_ok and mem_ok) or not args.check else 1


if __name__ == "__main__":
    sys.exit(main())
