#!/usr/bin/env python3
"""What any `.pth` startup hook costs, next to cudafix's: `python -c pass` in four venvs, one run.

The venvs are identical (tests/test_startup_helpers.make_venv, the torch 2.14.1+cu130 test venv's
site-packages on their path) except for site-packages' cudafix files:

  none        nothing
  pth-line    cudafix.pth holding only `import sys` (site.py reads and execs a line, no module)
  pth-module  cudafix.pth holding `import _cudafix_startup`, a 2-line module (the floor of any
              hook that runs code from a module at start)
  cudafix     cudafix as installed (warm cache)

Interleaved runs, medians; prints each venv's overhead over `none`.

    python3 bench/pth_floor.py [RUNS]
"""

from __future__ import annotations

import os
import pathlib
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent.parent))
from tests.test_startup_helpers import TORCH_CU_SITE, clean_env, make_venv  # noqa: E402


def main() -> None:
    runs = int(sys.argv[1]) if len(sys.argv) > 1 else 500
    tmp = pathlib.Path(tempfile.mkdtemp(prefix="cudafix-pth-floor-"))
    env = clean_env(str(tmp / "cache"))
    venvs = {n: make_venv(tmp / n, cudafix=(n == "cudafix"), deps=[TORCH_CU_SITE])
             for n in ("none", "pth-line", "pth-module", "cudafix")}

    def site(py: pathlib.Path) -> str:
        return subprocess.run([str(py), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                              capture_output=True, text=True, check=True).stdout.strip()

    with open(os.path.join(site(venvs["pth-line"]), "cudafix.pth"), "w") as fh:
        fh.write("import sys\n")
    with open(os.path.join(site(venvs["pth-module"]), "cudafix.pth"), "w") as fh:
        fh.write("import _cudafix_startup\n")
    with open(os.path.join(site(venvs["pth-module"]), "_cudafix_startup.py"), "w") as fh:
        fh.write("def run():\n    pass\n")
    for py in venvs.values():  # byte-compile, fill cudafix's cache
        for _ in range(3):
            subprocess.run([str(py), "-c", "import torch" if py == venvs["cudafix"] else "pass"],
                           env=env, cwd="/", capture_output=True)
    times = {k: [] for k in venvs}
    for _ in range(runs):
        for k, py in venvs.items():
            t = time.perf_counter()
            subprocess.run([str(py), "-c", "pass"], env=env, cwd="/")
            times[k].append(time.perf_counter() - t)
    med = {k: statistics.median(v) * 1e3 for k, v in times.items()}
    print("python %s, %d runs each, median wall ms (overhead over none):" % (sys.version.split()[0], runs))
    for k in venvs:
        print("  %-10s %7.3f  (+%.3f, ratio %.3f)" % (k, med[k], med[k] - med["none"], med[k] / med["none"]))


if __name__ == "__main__":
    main()
