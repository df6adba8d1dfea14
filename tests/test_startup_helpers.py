"""Helpers for the startup-hook tests: real venvs with cudafix copied in, children run with a
private cache dir.  (No tests here; pytest collects the module harmlessly.)

A venv "has" a torch by a ``_deps.pth`` line naming another venv's site-packages: ``_`` sorts
before ``cudafix.pth``, so the path is on sys.path when the hook runs, as an installed torch is.
"""

from __future__ import annotations

import os
import pathlib
import shutil
import subprocess
import sys
from typing import Dict, Iterable, Optional

REPO = pathlib.Path(__file__).resolve().parent.parent
VENVS = pathlib.Path(os.environ.get("CUDAFIX_TEST_VENVS", str(pathlib.Path.home() / ".cache" / "cudafix-venvs")))
TORCH_CPU_SITE = VENVS / "torch-cpu" / "lib" / "python3.11" / "site-packages"
TORCH_CU_SITE = VENVS / "torch-cu" / "lib" / "python3.11" / "site-packages"
# A .pth line that counts its own runs in sys.<name> (site.py runs a venv's .pth files twice).
COUNT_PTH = "import sys; sys.__dict__.setdefault(%r, []).append(1)\n"


def site_packages(venv: pathlib.Path) -> pathlib.Path:
    """A venv's site-packages (its one lib/python3.X, whichever Python made it)."""
    found = sorted(venv.glob("lib/python3.*/site-packages"))
    if len(found) != 1:
        raise RuntimeError("%s: expected one lib/python3.*/site-packages, found %s" % (venv, found))
    return found[0]


def install_cudafix(site: pathlib.Path) -> None:
    """What the wheel puts into site-packages: the package, the startup module, .pth, .start."""
    shutil.copytree(str(REPO / "cudafix"), str(site / "cudafix"), ignore=shutil.ignore_patterns("__pycache__"), dirs_exist_ok=True)
    for name in ("_cudafix_startup.py", "cudafix.pth", "cudafix.start"):
        shutil.copy2(str(REPO / name), str(site / name))


def make_venv(path: pathlib.Path, cudafix: bool = True, deps: Iterable[os.PathLike] = (),
              python: str = sys.executable) -> pathlib.Path:
    """A fresh venv (no pip) at ``path``, made by ``python``; returns its python."""
    subprocess.run([python, "-m", "venv", "--without-pip", str(path)], check=True, timeout=120)
    site = site_packages(path)
    if cudafix:
        install_cudafix(site)
    deps = [str(d) for d in deps]
    if deps:
        (site / "_deps.pth").write_text("\n".join(deps) + "\n")
    return path / "bin" / "python"


def stub_torch(root: pathlib.Path, version: Optional[str] = "2.5.1+cu124", cuda: Optional[str] = "12.4") -> pathlib.Path:
    """A directory holding a minimal importable ``torch`` package (for hook mechanics only)."""
    pkg = root / "torch"
    pkg.mkdir(parents=True, exist_ok=True)
    (pkg / "__init__.py").write_text("import os\nSEEN_ENV = dict(os.environ)\n__version__ = %r\n" % version)
    if version is not None:
        (pkg / "version.py").write_text("__version__ = %r\ncuda = %r\nhip = None\n" % (version, cuda))
    return root


def clean_env(cache_home: os.PathLike, **extra: str) -> Dict[str, str]:
    """A child environment: no inherited CUDA/cudafix variables, a private cache dir."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("CUDA", "PYTORCH", "LD_", "PYTHON", "TORCH", "CONDA", "VIRTUAL_ENV"))}
    env["XDG_CACHE_HOME"] = str(cache_home)
    env.update(extra)
    return env


def run(python: os.PathLike, code: str, env: Dict[str, str], args: Iterable[str] = (), timeout: float = 120,
        **kw) -> subprocess.CompletedProcess:
    kw.setdefault("cwd", "/")  # never the checkout: `-c` puts the cwd on sys.path
    # its own process group, as a command of an interactive shell has: warnings are said once per
    # process group (cudafix.hook.runtime.claim_warnings), and each run here is a new command
    kw.setdefault("start_new_session", True)
    return subprocess.run([str(python), *args, "-c", code], env=env, capture_output=True, text=True, timeout=timeout, **kw)


# Writes a cache entry for the given plan exactly as the cold path would, from inside the child
# venv (its own sys.path / prefix / fingerprint).  argv[1]: JSON list of Finding dicts.
WRITE_PLAN = r"""
import json, os, sys
from cudafix.hook import cache as hookcache
from cudafix.hook import runtime as hook
from cudafix.hook import plan as hookplan
from cudafix.model.findings import Finding
found = [Finding.from_dict(d) for d in json.loads(sys.argv[1])]
entry = hookplan.build_entry(found, os.environ, hook.check().syspath)
path = os.path.join(hookcache.cache_dir(sys.prefix, os.environ), hookcache.CACHE_FILE)
assert hookplan.write_entry(path, entry), path
print(path)
"""


def write_plan(python: os.PathLike, findings_json: str, env: Dict[str, str]) -> str:
    p = subprocess.run([str(python), "-c", WRITE_PLAN, findings_json], env=env, capture_output=True, text=True, timeout=120, cwd="/")
    assert p.returncode == 0, p.stderr
    return p.stdout.strip()
