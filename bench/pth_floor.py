#!/usr/bin/env python3
"""What any `.pth` startup hook costs, next to cudafix's: `python -c pass` in four venvs, one run.

The venvs are identical (tests/test_startup_helpers.make_venv, the torch 2.14.1+cu130 test venv's
site-packages on their path) except for site-packages' cudafix files:

  none        nothing
  pth-line    cudafix.pth holding only `import sys` (site.py reads and execs a line, no module)
  pth-module  cudafix.pth holding `import _cudafix_startup`, a 2-line module (the floor of any
              hook that runs code from a module at start)
  cudafix     cudafix as installed (warm cache)

Interleaved runs (bench/startup.py's Interleaved); prints each venv's overhead over `none`, per
pair and as medians.

    python3 bench/pth_floor.py [RUNS]
"""

from __future__ import annotations

import pathlib
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent.parent))
from bench.startup import Interleaved  # noqa: E402  (the same interleaved, per-pair timing)
from tests.test_startup_helpers import TORCH_CU_SITE, clean_env, make_venv, site_packages  # noqa: E402


def main() -> None:
    runs = int(sys.argv[1]) if len(sys.argv) > 1 else 500
    tmp = pathlib.Path(tempfile.mkdtemp(prefix="cudafix-pth-floor-"))
    env = clean_env(str(tmp / "cache"))
    names = ("none", "pth-line", "pth-module", "cudafix")
    venvs = {n: make_venv(tmp / n, cudafix=(n == "cudafix"), deps=[TORCH_CU_SITE]) for n in names}
    (site_packages(tmp / "pth-line") / "cudafix.pth").write_text("import sys\n")
    (site_packages(tmp / "pth-module") / "cudafix.pth").write_text("import _cudafix_startup\n")
    (site_packages(tmp / "pth-module") / "_cudafix_startup.py").write_text("def run():\n    pass\n")
    for py in venvs.values():  # byte-compile, fill cudafix's cache
        subprocess.run([str(py), "-c", "import torch" if py == venvs["cudafix"] else "pass"],
                       env=env, cwd="/", capture_output=True)
    timed = Interleaved([[str(venvs[n]), "-c", "pass"] for n in names], env, runs)
    print("python %s, %d interleaved runs each, against none:" % (sys.version.split()[0], runs))
    for k, n in enumerate(names[1:], 1):
        print(timed.line(n, k))
    shutil.rmtree(str(tmp), ignore_errors=True)


if __name__ == "__main__":
    main()
