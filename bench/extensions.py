"""Benchmark: the extension scan of a whole env vs `cuobjdump --list-elf --list-ptx` on its files.

    python3 bench/extensions.py [--python PY] [--extra DIR ...] [--runs N]

Default env: the torchvision-cu test venv (torch 2.14.1+cu130 + torchvision 0.29.1 from PyPI) plus
the extension modules tests/test_extensions.py builds (~/.cache/cudafix-test-ext/*), put on its
sys.path as PYTHONPATH would.  Measured, each the median of N runs, same process, same files:

  cold, evicted  fresh result cache, and the pages of every shared object under the scanned
                 directories and of torch's libraries dropped (posix_fadvise DONTNEED; a VM's host
                 may still cache the disk: a first-touch approximation)
  cold, warm pc  fresh result cache, page cache warm
  cached         result-cache hit (stat of each file + one JSON read)
  baseline       NVIDIA's cuobjdump --list-elf --list-ptx, once per CUDA-bearing file the scan found
                 (device code only: no ownership, runtime or symbol check), warm page cache
"""

from __future__ import annotations

import argparse
import glob
import os
import pathlib
import statistics
import subprocess
import sys
import tempfile
import time

REPO = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from cudafix.probes import query_python  # noqa: E402
from cudafix.probes.pyenv.extensions import is_shared_object_name, probe_extensions  # noqa: E402

VENVS = pathlib.Path.home() / ".cache" / "cudafix-venvs"


def evict_tree(roots):
    n = 0
    for root in roots:
        for d, _dirs, files in os.walk(root):
            for f in files:
                if is_shared_object_name(f):
                    try:
                        fd = os.open(os.path.join(d, f), os.O_RDONLY)
                    except OSError:
                        continue
                    try:
                        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
                        n += 1
                    finally:
                        os.close(fd)
    return n


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--python", default=str(VENVS / "torchvision-cu" / "bin" / "python"))
    ap.add_argument("--extra", nargs="*", default=None)
    ap.add_argument("--runs", type=int, default=7)
    ap.add_argument("--cuobjdump", default=str(VENVS / "torch-cu/lib/python3.11/site-packages/triton/backends/nvidia/bin/cuobjdump"))
    a = ap.parse_args()
    extra = a.extra if a.extra is not None else sorted(glob.glob(str(pathlib.Path.home() / ".cache/cudafix-test-ext/[kt]-*[0-9a-f]")))
    env = dict(os.environ, CUDAFIX_DISABLE="1", PYTHONPATH=os.pathsep.join(extra))
    info, sys_path = query_python(a.python, env)
    env.pop("TORCH_EXTENSIONS_DIR", None)
    torch_dir = None
    for p in sys_path:
        if os.path.isdir(os.path.join(p, "torch", "lib")):
            torch_dir = os.path.join(p, "torch")
            break
    roots = [p for p in sys_path if os.path.isdir(p)] + ([os.path.join(torch_dir, "lib")] if torch_dir else [])

    def scan(cache):
        t = time.perf_counter()
        res = probe_extensions(sys_path, env, torch_dir=torch_dir, cache_dir=cache)
        return time.perf_counter() - t, res

    cold_ev, cold_pc, cached = [], [], []
    res = None
    for _ in range(a.runs):
        evict_tree(roots)
        with tempfile.TemporaryDirectory() as d:
            dt, res = scan(d)
            cold_ev.append(dt)
        with tempfile.TemporaryDirectory() as d:
            cold_pc.append(scan(d)[0])
            cached.append(min(scan(d)[0] for _ in range(3)))
    cuda_files = [m.path for m in res.modules if m.sass or m.ptx]
    base = []
    if os.path.exists(a.cuobjdump):
        for _ in range(max(1, a.runs // 2)):
            t = time.perf_counter()
            for f in cuda_files:
                subprocess.run([a.cuobjdump, "--list-elf", "--list-ptx", f], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            base.append(time.perf_counter() - t)
    med = lambda xs: statistics.median(xs) * 1000  # noqa: E731
    print("env: %s (Python %s), %d sys.path dirs + %d extension dirs" % (a.python, info.version, len(sys_path) - len(extra), len(extra)))
    print("scan: %d shared objects examined, %d modules recorded (%d with device code, %d torch-linked, %d torch symbols looked up)" % (
        res.files_seen, len(res.modules), len(cuda_files), sum(m.torch_linked for m in res.modules),
        sum(m.torch_symbols_checked for m in res.modules)))
    for m in res.modules:
        print("  %-45s %-22s SASS %-40s PTX %-14s %s%s" % (os.path.basename(m.path)[:45], (m.package or "-")[:22], " ".join(m.sass)[:40],
                                                         " ".join(m.ptx), m.cudart_linkage, (" missing %d" % m.missing_torch_symbols_count) if m.missing_torch_symbols_count else ""))
    print("runs: %d" % a.runs)
    print("cudafix cold, pages evicted : %8.1f ms" % med(cold_ev))
    print("cudafix cold, page cache warm: %8.1f ms" % med(cold_pc))
    print("cudafix cached              : %8.2f ms" % med(cached))
    if base:
        print("baseline cuobjdump --list-elf --list-ptx on the %d CUDA-bearing files: %8.1f ms" % (len(cuda_files), med(base)))
        print("ratio baseline / cudafix cold evicted: %.1fx" % (med(base) / med(cold_ev)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
