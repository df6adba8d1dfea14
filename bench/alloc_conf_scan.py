"""Benchmark: reading PYTORCH_CUDA_ALLOC_CONF option names from torch's libraries vs `import torch`.

    python3 bench/alloc_conf_scan.py [--venv torch-cu] [--runs N]

Measured in one run, each the median of N runs, on the same torch install:
  uncached   fresh cache dir: the .rodata (and, for names not found whole, .text) of
             libc10_cuda.so / libc10.so read and searched (cudafix.probes.pyenv.alloc_conf)
  cached     result cache hit (stat + small JSON read)
  baseline   `python -c "import torch"` in that venv (what a user's process pays anyway; the
             probe runs in the hook's cold path at `import torch` only when its cache misses)
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

from tools.alloc_conf_proof import torch_dir, venv_root  # noqa: E402
from cudafix.knowledge.alloc_conf import KNOWN_NAMES  # noqa: E402
from cudafix.probes.pyenv.alloc_conf import read_alloc_keys  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--venv", default="torch-cu")
    ap.add_argument("--runs", type=int, default=5)
    args = ap.parse_args()
    venv = os.path.join(venv_root(), args.venv)
    tdir = torch_dir(venv)
    if tdir is None:
        print("no torch in %s" % venv, file=sys.stderr)
        return 2
    names = list(KNOWN_NAMES) + ["bogus_key"]
    uncached, cached, baseline = [], [], []
    for _ in range(args.runs):
        with tempfile.TemporaryDirectory() as cache:
            t = time.perf_counter()
            info = read_alloc_keys(tdir, names, cache_dir=cache)
            uncached.append(time.perf_counter() - t)
            t = time.perf_counter()
            read_alloc_keys(tdir, names, cache_dir=cache)
            cached.append(time.perf_counter() - t)
        env = dict(os.environ, CUDAFIX_DISABLE="1")
        t = time.perf_counter()
        subprocess.run([os.path.join(venv, "bin", "python"), "-c", "import torch"], env=env, check=True,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        baseline.append(time.perf_counter() - t)
    u, c, b = (statistics.median(x) * 1000 for x in (uncached, cached, baseline))
    print("torch %s (%s), %d names, parser %s, median of %d runs" % (os.path.basename(venv), tdir, len(names), info.parser, args.runs))
    print("  uncached scan   %8.1f ms   %.3f x import torch" % (u, u / b))
    print("  cached          %8.1f ms   %.4f x import torch" % (c, c / b))
    print("  import torch    %8.1f ms   (baseline)" % b)
    return 0


if __name__ == "__main__":
    sys.exit(main())
