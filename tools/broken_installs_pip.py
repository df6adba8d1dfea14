"""Proof for torch-install-broken's fix: the plan's pip command passes `pip install --dry-run` and,
really run, installs the wheels and makes `import torch` work (docs/broken-installs.md).

    python -m tools.broken_installs_pip CASE[:install] ...   (needs the package index; GBs for some)

Each CASE is a view of a real venv (tests/broken_installs.py) built with pip in it; cudafix takes
the view's snapshot, makes the one plan, and the plan's INSTALL step is run with --dry-run (and,
with ``:install``, for real, then `import torch` again).  Views go under tests/broken_installs'
views_root(/tmp).
"""

from __future__ import annotations

import pathlib
import shlex
import subprocess
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent.parent / "tests"))

import broken_installs as bi  # noqa: E402

from cudafix.plans.planner import INSTALL, make_plan  # noqa: E402
from cudafix.probes import take_snapshot  # noqa: E402

CASES = {
    "251-oldjit": ("torch-251", [], [("nvidia-nvjitlink-cu12", "nvidia-nvjitlink-cu12", "12.3.101")]),
    "251-oldnccl": ("torch-251", [], [("nvidia-nccl-cu12", "nvidia-nccl-cu12", "2.18.1")]),
    "251-none": ("torch-251", ["*"], []),
    "cu-none": ("torch-cu", ["*"], []),
    "cu-nccl12": ("torch-cu", [], [("nvidia-nccl-cu13", "nvidia-nccl-cu12", "2.18.1")]),
    "cu-oldjit": ("torch-cu", [], [("nvidia-nvjitlink", "nvidia-nvjitlink", "13.0.39")]),
    "241-oldjit": ("/tmp/w34/v241", [], [("nvidia-nvjitlink-cu12", "nvidia-nvjitlink-cu12", "12.0.140")]),
    "1131-none": ("/tmp/w34/v1131", ["*"], []),
    "201-none": ("/tmp/w34/v201", ["*"], []),
}


def main(args: list) -> int:
    root = bi.views_root(pathlib.Path("/tmp"))
    for arg in args:
        name, _, mode = arg.partition(":")
        src, drop, rep = CASES[name]
        src_venv = pathlib.Path(src) if src.startswith("/") else bi.VENVS / src
        py = bi.make_view(src_venv, root / ("pip-" + name), drop, rep, with_pip=True)
        rc, before = bi.real_import(py)
        snap = take_snapshot(python=str(py), use_nvml=False, call_driver_api=False, scan_extensions=False)
        plan = make_plan(snap)
        steps = [s for s in plan.steps if s.kind == INSTALL]
        print("== %s: import torch -> %s" % (name, before or "ok"))
        for st in steps:
            print("   plan: %s" % st.text)
            argv = list(st.argv)
            dry = argv[:4] + ["--dry-run"] + argv[4:]
            p = subprocess.run(dry, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
            out = p.stdout.decode("utf-8", "replace").splitlines()
            print("   dry-run rc=%d: %s" % (p.returncode, " | ".join(ln for ln in out if ln.startswith(("Would install", "ERROR", "Requirement already")))))
            if mode == "install":
                p = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
                out = p.stdout.decode("utf-8", "replace").splitlines()
                print("   install rc=%d: %s" % (p.returncode, " | ".join(ln for ln in out if ln.startswith(("Successfully", "ERROR", "Requirement already")))))
                rc, after = bi.real_import(py)
                print("   import torch after: %s" % (after or "ok"))
        if not steps:
            print("   no install step: %s" % shlex.quote(str(plan.unresolved)))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
