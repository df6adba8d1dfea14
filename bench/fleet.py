#!/usr/bin/env python3
"""Benchmark: `cudafix fleet --from DIR` over N real-size node snapshots, against parsing the same files.

The fleet (synthetic, tests/fleet_gen.py real_size_texts): every node is one of the bundled
recordings (cudafix/data/examples: the H200 machine's plain env, 7 nodes in 10, ~37 KB, and its
rich image env, ~53 KB) as `cudafix snapshot -o` writes it (indent 2), with its own identity
(hostname, Slurm node id, snapshot time, GPU UUID, and on every 4th node another PCI slot) and,
on ~3.5% of the nodes, one alteration: another driver, another torch, a stray LD_LIBRARY_PATH
entry, a missing GPU.  Each timed run is a fresh process (wall clock from spawn to exit; CPU:
user + system of the process and its children; peak RSS: the largest of the process and its
children ("peak"), and the sampled sum over the process tree ("tree")):
  baseline  python -c "json.load every file, one at a time"   (the floor any aggregator pays)
  fleet     python -m cudafix fleet --from DIR --json
  jobs N    the same with CUDAFIX_JOBS=N (--jobs N)
  stdin     every file concatenated into `cudafix fleet --from - --json` (--stdin; CPU includes cat)
  before    the same command from another checkout (--also-repo), and the check that both print
            the same cudafix.fleet/1 document
Prints medians and the ratio fleet / baseline.  Targets (issue 37): 10,000 nodes <= 1.5x the
parse-only baseline and <= 500 MiB; 100,000 nodes <= 2x and <= 1 GiB; --check exits 1 when a
size misses one.  100,000 nodes are ~4 GB under $TMPDIR (checked against its free space first;
removed after).

Engines (optional, on clusters you started): --slurm-conf FILE times `srun -N K true` against
`cudafix fleet --slurm -- -N K`; --ray-address ADDR times an empty task per node against
`cudafix fleet --ray ADDR` (run with the ray venv's python).

    python3 bench/fleet.py [-n 3] [--nodes 10000 --nodes 100000] [--jobs 2] [--stdin] [--also-repo DIR] [--check]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, REPO)

from tests import fleet_gen  # noqa: E402

TARGETS = {10000: (1.5, 500.0), 100000: (2.0, 1024.0)}  # nodes: (x parse-only, MiB)
# Runs the command; samples the RSS of it and its descendants (/proc) for the sum over processes.
WRAPPER = r"""
import json, os, resource, subprocess, sys, time
spec = json.loads(sys.argv[1])
def tree_rss(root):
    kids, total = [root], 0
    while kids:
        pid = kids.pop()
        try:
            with open("/proc/%d/statm" % pid) as fh:
                total += int(fh.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
            for tid in os.listdir("/proc/%d/task" % pid):
                with open("/proc/%d/task/%s/children" % (pid, tid)) as fh:
                    kids += [int(x) for x in fh.read().split()]
        except (OSError, ValueError):
            pass
    return total
t0 = time.perf_counter()
p = subprocess.Popen(spec["cmd"], env=spec["env"], cwd=spec["cwd"], stdout=open(spec["out"], "wb"), stderr=subprocess.PIPE)
peak = 0
while p.poll() is None:
    peak = max(peak, tree_rss(p.pid))
    time.sleep(0.02)
wall = time.perf_counter() - t0
err = p.stderr.read()
ru = resource.getrusage(resource.RUSAGE_CHILDREN)
print(json.dumps({"rc": p.returncode, "wall_s": wall, "maxrss_kib": ru.ru_maxrss, "cpu_s": ru.ru_utime + ru.ru_stime,
                  "tree_peak_kib": peak // 1024, "stderr": err.decode("utf-8", "replace")[-500:]}))
"""
# Each document is dropped once parsed: keeping them all (a list of 10,000 parsed snapshots) would
# cost the baseline ~800 MiB and the collector's time, a floor no aggregator needs to pay.
PARSE_ONLY = ("import json, os, sys\nd = sys.argv[1]\nfor f in sorted(os.listdir(d)):\n"
              "    with open(os.path.join(d, f)) as fh:\n        json.load(fh)\n")


def measure(cmd, env, out, cwd):
    # cwd: the checkout itself, since `python -m` puts the current directory first on sys.path
    spec = json.dumps({"cmd": cmd, "env": env, "out": out, "cwd": cwd})
    got = subprocess.run([sys.executable, "-c", WRAPPER, spec], stdout=subprocess.PIPE, check=True, timeout=1800)
    return json.loads(got.stdout)


def fleet_dir(n: int) -> str:
    """N node files (tests/fleet_gen.py real_size_texts) in a new directory under $TMPDIR."""
    d = tempfile.mkdtemp(prefix="fleetbench-")
    need = n * 45000 * 1.2
    if shutil.disk_usage(d).free < need:
        shutil.rmtree(d)
        raise SystemExit("%d nodes need ~%.1f GB in %s: not free" % (n, need / 1e9, os.path.dirname(d)))
    for name, text in fleet_gen.real_size_texts(n):
        with open(os.path.join(d, name), "w", encoding="utf-8") as fh:
            fh.write(text)
    return d


def timed(cmd, env, n, out, cwd=REPO):
    runs = [measure(cmd, env, out, cwd) for _ in range(n)]
    bad = [r for r in runs if r["rc"] not in (0, 1)]
    if bad:
        raise SystemExit("%s failed: %s" % (" ".join(cmd[:4]), bad[0]["stderr"]))
    return (statistics.median(r["wall_s"] for r in runs), max(r["maxrss_kib"] for r in runs) / 1024.0,
            max(r["tree_peak_kib"] for r in runs) / 1024.0, statistics.median(r["cpu_s"] for r in runs))


def _same_result(a: str, b: str) -> bool:
    with open(a, encoding="utf-8") as fa, open(b, encoding="utf-8") as fb:
        return json.load(fa) == json.load(fb)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("-n", type=int, default=3, help="timed runs of each command")
    ap.add_argument("--nodes", type=int, action="append", help="fleet sizes (default: 10000 and 100000)")
    ap.add_argument("--jobs", type=int, action="append", default=[], help="also time CUDAFIX_JOBS=N")
    ap.add_argument("--stdin", action="store_true", help="also time the files piped into --from -")
    ap.add_argument("--also-repo", help="another checkout (e.g. a worktree of main): time its fleet too, compare results")
    ap.add_argument("--check", action="store_true", help="exit 1 when a size misses its target")
    ap.add_argument("--slurm-conf")
    ap.add_argument("--slurm-nodes", type=int, default=3)
    ap.add_argument("--ray-address")
    args = ap.parse_args(argv)
    sizes = sorted(set(args.nodes or [10000, 100000]))
    env = dict(os.environ, PYTHONPATH=REPO)
    env.pop("CUDAFIX_JOBS", None)
    env.pop("CUDAFIX_SERIAL", None)
    repos = [("after", REPO)] + ([("before", os.path.abspath(args.also_repo))] if args.also_repo else [])
    for _, repo in repos:
        subprocess.run([sys.executable, "-m", "compileall", "-q", os.path.join(repo, "cudafix")], check=True,
                       env=dict(env, PYTHONDONTWRITEBYTECODE=""), stdout=subprocess.DEVNULL)
    print("fleet bench: %s, %d CPUs, %s, load average before: %s" % (sys.version.split()[0], os.cpu_count() or 0,
          time.strftime("%Y-%m-%d %H:%M"), " ".join("%.2f" % x for x in os.getloadavg())))
    print("%-52s %9s %8s %9s %8s %9s %9s" % ("command", "median s", "x parse", "CPU s", "x parse", "peak MiB", "tree MiB"))
    missed = []
    scratch = tempfile.mkdtemp(prefix="fleetbench-out-")
    row = "%-52s %9.3f %8.2f %9.3f %8.2f %9.1f %9.1f"
    try:
        for n in sizes:
            t0 = time.perf_counter()
            d = fleet_dir(n)
            print("  (%d node files written in %.0f s, %.2f GB)" % (n, time.perf_counter() - t0,
                                                                  sum(e.stat().st_size for e in os.scandir(d)) / 1e9))
            try:
                base = timed([sys.executable, "-c", PARSE_ONLY, d], env, args.n, os.devnull)
                print(row % ("baseline: json.load %d snapshots" % n, base[0], 1.0, base[3], 1.0, base[1], base[2]))
                outs = {}
                runs = [("after", REPO, {}, None)] + [("after, CUDAFIX_JOBS=%d" % j, REPO, {"CUDAFIX_JOBS": str(j)}, None)
                                                     for j in args.jobs]
                if args.stdin:
                    runs.append(("after, piped into --from -", REPO, {}, d))
                runs += [("before", os.path.abspath(args.also_repo), {}, None)] if args.also_repo else []
                for label, repo, extra, piped in runs:
                    outs[label] = os.path.join(scratch, "%s-%d.json" % (label.replace(" ", "_"), n))
                    cmd = [sys.executable, "-m", "cudafix", "fleet", "--from", d, "--json"]
                    if piped:
                        cmd = ["sh", "-c", 'cd "$1" && ls | xargs cat | "$2" -m cudafix fleet --from - --json', "sh", d,
                               sys.executable]
                    r = timed(cmd, dict(env, PYTHONPATH=repo, **extra), args.n, outs[label], cwd=repo)
                    print(row % ("%s (%d nodes)" % (label, n), r[0], r[0] / base[0], r[3], r[3] / base[3], r[1], r[2]))
                    ratio, mib = TARGETS.get(n, (None, None))
                    if label.startswith("after") and ratio is not None:
                        if r[0] / base[0] > ratio:
                            missed.append("%s, %d nodes: %.2fx parse-only (target <= %.1fx)" % (label, n, r[0] / base[0], ratio))
                        if r[1] > mib:
                            missed.append("%s, %d nodes: %.0f MiB (target <= %.0f MiB)" % (label, n, r[1], mib))
                for label in outs:
                    if label != "after" and not label.startswith("after, piped"):
                        same = _same_result(outs["after"], outs[label])
                        print("  %s and after at %d nodes: %s" % (label, n, "identical" if same else "DIFFERENT"))
                        if not same and label != "before":
                            missed.append("%d nodes: %s differs" % (n, label))
            finally:
                shutil.rmtree(d, ignore_errors=True)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    print("targets (%s): %s" % ("; ".join("%d nodes <= %.1fx parse-only, <= %.0f MiB" % (k, v[0], v[1]) for k, v in sorted(TARGETS.items())),
                                "met" if not missed else "MISSED: " + "; ".join(missed)))
    if args.slurm_conf:
        senv = dict(env, SLURM_CONF=args.slurm_conf)
        k = str(args.slurm_nodes)
        e = timed(["srun", "-N", k, "--ntasks-per-node=1", "true"], senv, args.n, os.devnull)
        f = timed([sys.executable, "-m", "cudafix", "fleet", "--slurm", "--", "-N", k], senv, args.n, os.devnull)
        print("%-46s %9.3f" % ("srun -N %s true (the engine alone)" % k, e[0]))
        print("%-46s %9.3f  (+%.3f s over the engine)" % ("cudafix fleet --slurm -N %s" % k, f[0], f[0] - e[0]))
    if args.ray_address:
        empty = ("import ray; ray.init(address=%r, logging_level='ERROR', log_to_driver=False); "
                 "from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy as S; "
                 "f = ray.remote(num_cpus=0)(lambda: 0); "
                 "ray.get([f.options(scheduling_strategy=S(n['NodeID'], soft=False)).remote() for n in ray.nodes() if n['Alive']])"
                 % args.ray_address)
        e = timed([sys.executable, "-c", empty], env, args.n, os.devnull)
        f = timed([sys.executable, "-m", "cudafix", "fleet", "--ray", args.ray_address], env, args.n, os.devnull)
        print("%-46s %9.3f" % ("ray: an empty task per node (the engine alone)", e[0]))
        print("%-46s %9.3f  (+%.3f s over the engine)" % ("cudafix fleet --ray", f[0], f[0] - e[0]))
    return 1 if args.check and missed else 0


if __name__ == "__main__":
    sys.exit(main())
