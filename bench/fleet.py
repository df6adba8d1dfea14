#!/usr/bin/env python3
"""Benchmark: `cudafix fleet` over N node snapshots, against reading and parsing the same files.

The fleet is tests/fleet_gen.py's: N copies of the real H200 recording with node identities, two
of them altered (a foreign NCCL, an older driver).  Each timed run is a fresh process (wall clock
from spawn to exit, peak RSS of the child):
  baseline  python -c "read and json.loads every file"   (the floor any aggregator pays)
  fleet     python -m cudafix fleet --from DIR --json
Prints medians, the ratio fleet / baseline, the targets (1,000 nodes: < 2 s, < 200 MiB), and the
parts a 10,000-node estimate is built from: per-node cost (parse, facts, content hash) and the
per-distinct-snapshot cost (the rules), measured at two fleet sizes.

Engines (optional, on clusters you started): --slurm-conf FILE times `srun -N K true` against
`cudafix fleet --slurm -- -N K`; --ray-address ADDR times an empty task per node against
`cudafix fleet --ray ADDR` (run with the ray venv's python).

    python3 bench/fleet.py [-n 5] [--nodes 1000] [--slurm-conf F --slurm-nodes 3] [--ray-address A]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, REPO)

from tests import fleet_gen  # noqa: E402

WRAPPER = r"""
import json, resource, subprocess, sys, time
spec = json.loads(sys.argv[1])
t0 = time.perf_counter()
p = subprocess.run(spec["cmd"], env=spec["env"], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
wall = time.perf_counter() - t0
print(json.dumps({"rc": p.returncode, "wall_s": wall, "maxrss_kib": resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss,
                  "stderr": p.stderr.decode("utf-8", "replace")[-500:]}))
"""
PARSE_ONLY = "import json, os, sys; d = sys.argv[1]; [json.load(open(os.path.join(d, f))) for f in sorted(os.listdir(d))]"


def measure(cmd, env):
    out = subprocess.run([sys.executable, "-c", WRAPPER, json.dumps({"cmd": cmd, "env": env})], stdout=subprocess.PIPE, check=True, timeout=900)
    return json.loads(out.stdout)


def fleet_dir(n: int) -> str:
    d = tempfile.mkdtemp(prefix="fleetbench-")
    fleet_gen.write(fleet_gen.make_fleet(n, {17: fleet_gen.foreign_nccl, min(233, n): fleet_gen.older_driver}),
                    __import__("pathlib").Path(d))
    return d


def timed(cmd, env, n):
    runs = [measure(cmd, env) for _ in range(n)]
    bad = [r for r in runs if r["rc"] not in (0, 1)]
    if bad:
        raise SystemExit("%s failed: %s" % (" ".join(cmd[:4]), bad[0]["stderr"]))
    return statistics.median(r["wall_s"] for r in runs), max(r["maxrss_kib"] for r in runs) / 1024.0


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("-n", type=int, default=5, help="timed runs of each command")
    ap.add_argument("--nodes", type=int, default=1000)
    ap.add_argument("--slurm-conf")
    ap.add_argument("--slurm-nodes", type=int, default=3)
    ap.add_argument("--ray-address")
    args = ap.parse_args(argv)
    env = dict(os.environ, PYTHONPATH=REPO)
    subprocess.run([sys.executable, "-m", "compileall", "-q", os.path.join(REPO, "cudafix")], check=True,
                   env=dict(env, PYTHONDONTWRITEBYTECODE=""), stdout=subprocess.DEVNULL)
    print("fleet bench: %s, %d CPUs, %s, load average before: %s" % (sys.version.split()[0], os.cpu_count() or 0,
          time.strftime("%Y-%m-%d"), " ".join("%.2f" % x for x in os.getloadavg())))
    print("%-44s %10s %10s" % ("command", "median s", "peak MiB"))
    rows = {}
    for n in sorted({args.nodes // 10 or 1, args.nodes}):
        d = fleet_dir(n)
        base = timed([sys.executable, "-c", PARSE_ONLY, d], env, args.n)
        fl = timed([sys.executable, "-m", "cudafix", "fleet", "--from", d, "--json"], env, args.n)
        rows[n] = (base, fl)
        print("%-44s %10.3f %10.1f" % ("baseline: parse %d snapshots" % n, base[0], base[1]))
        print("%-44s %10.3f %10.1f" % ("cudafix fleet --from (%d nodes)" % n, fl[0], fl[1]))
    n = args.nodes
    base, fl = rows[n]
    print("ratio fleet / parse-only at %d nodes: %.2f" % (n, fl[0] / base[0]))
    ok = fl[0] < 2.0 and fl[1] < 200.0
    print("target %d nodes < 2 s and < 200 MiB: %s (%.3f s, %.1f MiB)" % (n, "met" if ok else "MISSED", fl[0], fl[1]))
    small = min(rows)
    if small != n:
        per_node = (rows[n][1][0] - rows[small][1][0]) / (n - small)
        fixed = rows[n][1][0] - per_node * n
        print("parts: %.3f ms per node (parse, facts, hash; slope between %d and %d nodes), %.3f s fixed "
              "(interpreter, imports, the rules on the 3 distinct snapshots)" % (per_node * 1e3, small, n, fixed))
        print("estimate for 10,000 identical-but-for-a-few nodes: %.1f s" % (fixed + per_node * 10000))
    if args.slurm_conf:
        senv = dict(env, SLURM_CONF=args.slurm_conf)
        k = str(args.slurm_nodes)
        e = timed(["srun", "-N", k, "--ntasks-per-node=1", "true"], senv, args.n)
        f = timed([sys.executable, "-m", "cudafix", "fleet", "--slurm", "--", "-N", k], senv, args.n)
        print("%-44s %10.3f" % ("srun -N %s true (the engine alone)" % k, e[0]))
        print("%-44s %10.3f  (+%.3f s over the engine)" % ("cudafix fleet --slurm -N %s" % k, f[0], f[0] - e[0]))
    if args.ray_address:
        empty = ("import ray; ray.init(address=%r, logging_level='ERROR', log_to_driver=False); "
                 "from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy as S; "
                 "f = ray.remote(num_cpus=0)(lambda: 0); "
                 "ray.get([f.options(scheduling_strategy=S(n['NodeID'], soft=False)).remote() for n in ray.nodes() if n['Alive']])"
                 % args.ray_address)
        e = timed([sys.executable, "-c", empty], env, args.n)
        f = timed([sys.executable, "-m", "cudafix", "fleet", "--ray", args.ray_address], env, args.n)
        print("%-44s %10.3f" % ("ray: an empty task per node (the engine alone)", e[0]))
        print("%-44s %10.3f  (+%.3f s over the engine)" % ("cudafix fleet --ray", f[0], f[0] - e[0]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
