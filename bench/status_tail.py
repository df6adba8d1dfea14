#!/usr/bin/env python3
"""What the parent of a `cudafix status` does after the last section's answer, step by step: the
rules, the plan, the JSON document (`--json`) and the text screen, on a bundled snapshot, with
every module imported first (in a real run they are imported while the children probe).  The
first round is a fresh process's, the rest repeat it.

    PYTHONPATH=<dir holding cudafix/> python3 bench/status_tail.py [--example NAME] [-n 6]

Used for docs/benchmarks.md ("Issue 37: what a warm run is made of")."""

from __future__ import annotations

import argparse
import time

from cudafix import rules
from cudafix.cli import analysis
from cudafix.plans.planner import plan_or_error
from cudafix.render import report


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--example", default="h200-rich-torch2.11-cu130")
    ap.add_argument("-n", type=int, default=6)
    args = ap.parse_args()
    opts = {"example": args.example}  # what `cudafix status --example NAME` loads and prints
    print("status's last step on %s, %d rounds (ms)" % (args.example, args.n))
    for i in range(args.n):
        snap, origin = analysis.load_snapshot(None, args.example, None)
        t0 = time.perf_counter()
        runs = rules.run(snap, None)
        t1 = time.perf_counter()
        plan, err = plan_or_error(snap, runs)
        t2 = time.perf_counter()
        analysis._json(report.status_document(snap, runs, plan=plan))
        t3 = time.perf_counter()
        report.render_status(snap, runs, origin=origin, color=False, verbose=False, plan=plan, plan_error=err,
                             width=report.WIDTH, fix_command=analysis.fix_command(opts))
        t4 = time.perf_counter()
        print("round %d: rules %.1f, plan %.1f, json %.1f, text %.1f" % (
            i + 1, (t1 - t0) * 1e3, (t2 - t1) * 1e3, (t3 - t2) * 1e3, (t4 - t3) * 1e3))


if __name__ == "__main__":
    main()
