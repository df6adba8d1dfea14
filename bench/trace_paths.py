#!/usr/bin/env python3
"""How far one automatic path travels through the package: the files and folders of cudafix it
runs code in, and the moves between files, for this checkout and a baseline one, in one run.

    python3 bench/trace_paths.py --baseline DIR [--python PY]

DIR is another checkout (e.g. `git worktree add /tmp/before 51656f0`).  Two paths are traced,
each in a fresh child interpreter with sys.setprofile (Python-level calls only):

- activation, cold: `python -m cudafix shell --shell sh --activate --write-cache` (what
  activate.d runs when its cache is stale), with an empty cache dir;
- the hook, cold: `import torch` in an interpreter whose startup hook has an empty cache (the
  finder, the check, the recompute), over a stub `torch` package so that no real torch loads.

Counted: the cudafix files (and folders) whose code ran, and the "moves": how often a call passed
from one cudafix file to another, leaving out the pipeline's shared stages (probes/, rules/,
model/, knowledge/, store/), which every path uses alike, and calls that are no step of the
path's logic (module and class bodies run by an import, the startup finder's look at each
import, comprehensions).  The moves are what a reader
follows to trace that path's own logic; docs/architecture.md records the figures.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile

SHARED = ("probes", "rules", "model", "knowledge", "store")

TRACER = r"""
import json, os, sys
root = os.path.realpath(sys.argv[1])
pkg = os.path.join(root, "cudafix")
seen, moves, last, seq = set(), [0], [None], []
def prof(frame, event, arg):
    if event != "call":
        return
    f = os.path.realpath(frame.f_code.co_filename)
    if not (f.startswith(pkg + os.sep) or f == os.path.join(root, "_cudafix_startup.py")):
        return
    rel = os.path.relpath(f, root)
    seen.add(rel)
    if not frame.f_code.co_flags & 0x2 or frame.f_code.co_name in ("_find_spec", "<genexpr>", "<listcomp>", "<dictcomp>", "<setcomp>"):
        return  # a module or class body (no CO_NEWLOCALS), the finder seeing an import, a comprehension: no step of logic
    stage = rel.split(os.sep)[1] if rel.count(os.sep) >= 1 else rel
    if stage in %(shared)r:
        return
    if last[0] is not None and last[0] != rel:
        moves[0] += 1
        seq.append(last[0] + " -> " + rel + ":" + frame.f_code.co_name)
    last[0] = rel
sys.setprofile(prof)
import runpy
what = sys.argv[2]
try:
    if what == "activation":
        sys.argv = ["cudafix", "shell", "--shell", "sh", "--activate", "--write-cache"]
        try:
            runpy.run_module("cudafix", run_name="__main__", alter_sys=True)
        except SystemExit:
            pass
    else:
        import _cudafix_startup
        _cudafix_startup._started = False
        _cudafix_startup.run()
        import torch  # noqa: F401  (the stub)
finally:
    sys.setprofile(None)
    out = sys.__stdout__
    out.write("\n@@" + json.dumps({"files": sorted(seen), "moves": moves[0], "sequence": seq}) + "\n")
""" % {"shared": SHARED}


def trace(repo: str, what: str, python: str) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        stub = os.path.join(tmp, "stub")
        os.makedirs(os.path.join(stub, "torch"))
        with open(os.path.join(stub, "torch", "__init__.py"), "w") as fh:
            fh.write("__version__ = '0.0.0'\n")
        with open(os.path.join(stub, "torch", "version.py"), "w") as fh:
            fh.write("__version__ = '0.0.0'\ncuda = None\n")
        env = dict(os.environ, PYTHONPATH=os.pathsep.join([repo, stub]), XDG_CACHE_HOME=os.path.join(tmp, "cache"),
                   CONDA_PREFIX=os.path.join(tmp, "env"), HOME=tmp)
        env.pop("CUDAFIX_DISABLE", None)
        p = subprocess.run([python, "-c", TRACER, repo, what], capture_output=True, text=True, env=env, cwd=tmp, timeout=300)
        line = [ln for ln in p.stdout.splitlines() if ln.startswith("@@")]
        if not line:
            raise SystemExit("trace of %s in %s failed: %s" % (what, repo, p.stderr[-2000:]))
        return json.loads(line[-1][2:])


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--baseline", required=True, help="another checkout to compare with")
    ap.add_argument("--python", default=sys.executable)
    ap.add_argument("--moves", action="store_true", help="also print each move (from file -> to file:function)")
    args = ap.parse_args()
    here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    print("%-22s %-10s %6s %8s %6s  %s" % ("path", "tree", "files", "folders", "moves", "own files (outside the shared stages)"))
    for what in ("activation", "hook"):
        rows = {}
        for label, repo in (("baseline", os.path.abspath(args.baseline)), ("this", here)):
            r = trace(repo, what, args.python)
            own = [f for f in r["files"] if not (f.count(os.sep) >= 1 and f.split(os.sep)[1] in SHARED)]
            folders = sorted({os.path.dirname(f) for f in own})
            rows[label] = (len(r["files"]), len(folders), r["moves"])
            print("%-22s %-10s %6d %8d %6d  %s" % (what, label, len(r["files"]), len(folders), r["moves"], ", ".join(own)))
            if args.moves:
                print("\n".join("    " + m for m in r["sequence"]))
        b, t = rows["baseline"][2], rows["this"][2]
        print("%-22s moves this/baseline: %s" % (what, "%.2f" % (t / b) if b else "n/a"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
