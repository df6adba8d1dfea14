#!/usr/bin/env python3
"""Benchmark: `cudafix status --json` of this checkout against another one (a before/after), interleaved.

N rounds; in each, both checkouts run once with the same interpreter (the order alternates round
by round), each with its own warm cache dir (filled by an untimed run first).  Per run: wall time
from spawn to exit and the child's CPU time (user + sys, from wait4), which a shared machine
disturbs less than wall time.  Prints medians and minima of both and the ratios this / other.

    python3 bench/status_ab.py --other DIR [--this DIR] [--python ENV/bin/python] [-n 40] [--other-env NAME=VALUE ...]

--this: the checkout to time instead of this one.  Each side's PYTHONPATH is a directory holding
only its package (status_vs_collect_env.install_dir, as site-packages holds an installed one): the
extension scan walks every PYTHONPATH entry, and a checkout's tests and fixtures would be in one
side's walk and not the other's.

--other-env sets a variable for the other side's runs only: ``--other . --other-env
CUDAFIX_SERIAL=1`` times this checkout against itself with its probes in one process.  Page
faults (ru_minflt, the process and the children it waited for) are printed with the times.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from status_vs_collect_env import install_dir  # noqa: E402

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
VENVS = os.environ.get("CUDAFIX_TEST_VENVS", os.path.join(os.path.expanduser("~"), ".cache", "cudafix-venvs"))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--other", required=True, help="the other cudafix checkout (e.g. a worktree of an earlier commit)")
    ap.add_argument("--this", default=REPO, help="the checkout timed as 'this' (default: the one holding this script)")
    ap.add_argument("--python", default=os.path.join(VENVS, "torch-cu", "bin", "python"))
    ap.add_argument("-n", type=int, default=40)
    ap.add_argument("--other-env", action="append", default=[], metavar="NAME=VALUE")
    args = ap.parse_args(argv)
    other_env = dict(kv.split("=", 1) for kv in args.other_env)
    trees = {"this": os.path.abspath(args.this), "other": os.path.abspath(args.other)}
    paths = {k: install_dir(tree) for k, tree in trees.items()}
    caches = {k: tempfile.mkdtemp(prefix="status-ab-%s-" % k) for k in trees}
    base = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    cmd = [args.python, "-m", "cudafix", "status", "--json"]
    devnull = os.open(os.devnull, os.O_RDWR)
    # `python -m` puts the working directory first on sys.path: run from a checkout, both sides would
    # import that checkout's cudafix, whatever PYTHONPATH says.  Spawn from an empty directory.
    os.chdir(tempfile.mkdtemp(prefix="status-ab-cwd-"))

    def once(k):
        env = dict(base, PYTHONPATH=paths[k], XDG_CACHE_HOME=caches[k], **(other_env if k == "other" else {}))
        t = time.perf_counter()
        pid = os.posix_spawn(args.python, cmd, env, file_actions=[(os.POSIX_SPAWN_DUP2, devnull, 1),
                                                                 (os.POSIX_SPAWN_DUP2, devnull, 2)])
        _, status, ru = os.wait4(pid, 0)
        if os.waitstatus_to_exitcode(status) not in (0, 1):
            raise SystemExit("%s failed: PYTHONPATH=%s %s" % (k, paths[k], " ".join(cmd)))
        return time.perf_counter() - t, ru.ru_utime + ru.ru_stime, ru.ru_minflt

    for k in trees:
        once(k)  # fills its cache
    runs = {k: [] for k in trees}
    for i in range(args.n):
        for k in (("this", "other") if i % 2 == 0 else ("other", "this")):
            runs[k].append(once(k))
    print("status_ab: %s, %d rounds, load %.2f, %s" % (args.python, args.n, os.getloadavg()[0], time.strftime("%Y-%m-%d %H:%M")))
    med = {}
    for k, r in runs.items():
        wall, cpu = [x[0] for x in r], [x[1] for x in r]
        med[k] = (statistics.median(wall), statistics.median(cpu))
        print("%-5s %s%s: wall median %.1f ms (min %.1f), cpu median %.1f ms (min %.1f), %d page faults"
              % (k, trees[k], "".join(" " + kv for kv in args.other_env) if k == "other" else "", med[k][0] * 1e3,
                 min(wall) * 1e3, med[k][1] * 1e3, min(cpu) * 1e3, statistics.median(x[2] for x in r)))
    print("this / other: wall %.3f, cpu %.3f (medians; < 1 is faster)"
          % (med["this"][0] / med["other"][0], med["this"][1] / med["other"][1]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
