#!/usr/bin/env python3
"""Benchmark: `cudafix fleet --from DIR` over N real-size node snapshots, against parsing the same files.

The fleet (synthetic, generated here): N copies of the bundled real H200 recording
(cudafix/data/examples/h200-torch2.11-cu130.json, ~36 KB as `cudafix snapshot -o` writes it:
indent 2, the node section after "host"), each with its own node identity and snapshot time;
one node in 500 has a foreign NCCL first on LD_LIBRARY_PATH and one in 500 an older driver
(tests/fleet_gen.py's alterations).  Each timed run is a fresh process (wall clock from spawn to
exit; CPU: user + system of the process and its children; peak RSS: the largest of the process
and its children ("peak"), and the sampled sum over the process tree ("tree", shared pages counted
in each process)):
  baseline  python -c "json.load every file, one at a time"   (the floor any aggregator pays)
  fleet     python -m cudafix fleet --from DIR --json
  before    the same command from another checkout (--also-repo, e.g. main 51656f0), and the check
            that both print the same cudafix.fleet/1 document
Prints medians and the ratio fleet / baseline.  Targets (issue 23): at 10,000 nodes <= 1.5x the
parse-only baseline and <= 500 MiB; --check exits 1 when the largest size misses one.

Engines (optional, on clusters you started): --slurm-conf FILE times `srun -N K true` against
`cudafix fleet --slurm -- -N K`; --ray-address ADDR times an empty task per node against
`cudafix fleet --ray ADDR` (run with the ray venv's python).

    python3 bench/fleet.py [-n 5] [--nodes 1000 --nodes 10000] [--also-repo /tmp/fleet-before] [--check]
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

RECORDING = os.path.join(REPO, "cudafix", "data", "examples", "h200-torch2.11-cu130.json")
TARGET_RATIO, TARGET_MIB = 1.5, 500.0
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


def snapshot_text(d: dict) -> str:
    """As `cudafix snapshot -o` writes it: the dataclass order (node after host), indent 2."""
    order = ["schema", "created", "cudafix_version", "source", "host", "node"]
    ordered = {k: d[k] for k in order if k in d}
    ordered.update((k, v) for k, v in d.items() if k not in ordered)
    return json.dumps(ordered, indent=2)


def fleet_dir(n: int) -> str:
    """N node files; identical content but for identity and time, except the altered nodes."""
    base = json.loads(open(RECORDING, encoding="utf-8").read())
    d = tempfile.mkdtemp(prefix="fleetbench-")
    alter = {}
    for i in range(17, n + 1, 500):
        alter[i] = fleet_gen.foreign_nccl
    for i in range(233, n + 1, 500):
        alter[i] = fleet_gen.older_driver
    marker = "@@NODE@@"
    template = None
    for i in range(1, n + 1):
        name = "node%05d" % i
        created = "2026-12-01T%02d:%02d:%02d+00:00" % (i // 3600 % 24, i // 60 % 60, i % 60)
        if i in alter or template is None:
            doc = json.loads(json.dumps(base))
            doc["node"] = {"hostname": marker, "engine": "slurm", "node_id": marker,
                           "net_interfaces": ["eth0", "ib0", "lo"], "ib_devices": ["mlx5_0"], "found_via": {}, "unknown": {}}
            doc["created"] = "@@CREATED@@"
            if i in alter:
                alter[i](doc)
            text = snapshot_text(doc)
            if i not in alter:
                template = text
        else:
            text = template
        with open(os.path.join(d, name + ".json"), "w", encoding="utf-8") as fh:
            fh.write(text.replace(marker, name).replace("@@CREATED@@", created))
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
    ap.add_argument("-n", type=int, default=5, help="timed runs of each command")
    ap.add_argument("--nodes", type=int, action="append", help="fleet sizes (default: 1000 and 10000)")
    ap.add_argument("--also-repo", help="another checkout (e.g. a worktree of main 51656f0): time its fleet too, compare results")
    ap.add_argument("--check", action="store_true", help="exit 1 when the largest size misses a target")
    ap.add_argument("--slurm-conf")
    ap.add_argument("--slurm-nodes", type=int, default=3)
    ap.add_argument("--ray-address")
    args = ap.parse_args(argv)
    sizes = sorted(set(args.nodes or [1000, 10000]))
    env = dict(os.environ, PYTHONPATH=REPO)
    repos = [("after", REPO)] + ([("before", os.path.abspath(args.also_repo))] if args.also_repo else [])
    for _, repo in repos:
        subprocess.run([sys.executable, "-m", "compileall", "-q", os.path.join(repo, "cudafix")], check=True,
                       env=dict(env, PYTHONDONTWRITEBYTECODE=""), stdout=subprocess.DEVNULL)
    print("fleet bench: %s, %d CPUs, %s, load average before: %s" % (sys.version.split()[0], os.cpu_count() or 0,
          time.strftime("%Y-%m-%d %H:%M"), " ".join("%.2f" % x for x in os.getloadavg())))
    print("%-46s %9s %8s %9s %8s %9s %9s" % ("command", "median s", "x parse", "CPU s", "x parse", "peak MiB", "tree MiB"))
    missed = []
    scratch = tempfile.mkdtemp(prefix="fleetbench-out-")
    try:
        for n in sizes:
            d = fleet_dir(n)
            try:
                base = timed([sys.executable, "-c", PARSE_ONLY, d], env, args.n, os.devnull)
                print("%-46s %9.3f %8s %9.3f %8s %9.1f %9.1f" % ("baseline: json.load %d snapshots" % n, base[0], "1.00", base[3],
                                                               "1.00", base[1], base[2]))
                outs = {}
                for label, repo in repos:
                    outs[label] = os.path.join(scratch, "%s-%d.json" % (label, n))
                    r = timed([sys.executable, "-m", "cudafix", "fleet", "--from", d, "--json"], dict(env, PYTHONPATH=repo),
                              args.n, outs[label], cwd=repo)
                    print("%-46s %9.3f %8.2f %9.3f %8.2f %9.1f %9.1f" % ("%s: cudafix fleet --from (%d nodes)" % (label, n), r[0],
                                                                      r[0] / base[0], r[3], r[3] / base[3], r[1], r[2]))
                    if label == "after" and n == sizes[-1]:
                        if r[0] / base[0] > TARGET_RATIO:
                            missed.append("%d nodes: %.2fx parse-only (target <= %.1fx)" % (n, r[0] / base[0], TARGET_RATIO))
                        if max(r[1], r[2]) > TARGET_MIB:
                            missed.append("%d nodes: %.0f MiB (target <= %.0f MiB)" % (n, max(r[1], r[2]), TARGET_MIB))
                if "before" in outs:
                    same = _same_result(outs["before"], outs["after"])
                    print("  results before/after at %d nodes: %s" % (n, "identical" if same else "DIFFERENT"))
                    if not same:
                        missed.append("%d nodes: before and after differ" % n)
            finally:
                shutil.rmtree(d, ignore_errors=True)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    print("targets at %d nodes (<= %.1fx parse-only, <= %.0f MiB): %s" % (sizes[-1], TARGET_RATIO, TARGET_MIB,
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
