"""Real library-shadowing scenarios built from real wheels (the nvJitLink shadowing of docs/rules.md).

Measured on this machine (2026-11-30):

* ``torch_251_nvjitlink_scenario()``: torch 2.5.1+cu124 (its own nvidia-*-cu12 wheels, cuSPARSE
  12.3.1.170 needs ``__nvJitLinkComplete_12_4``) with the real ``nvidia-nvjitlink-cu12==12.3.101``
  wheel's ``libnvJitLink.so.12`` on LD_LIBRARY_PATH.  ``import torch`` FAILS:
  ``ImportError: .../torch/lib/../../nvidia/cusparse/lib/libcusparse.so.12: undefined symbol:
  __nvJitLinkComplete_12_4, version libnvJitLink.so.12``.
  libcusparse has DT_RUNPATH=$ORIGIN only, so its libnvJitLink is searched in LD_LIBRARY_PATH
  before its RUNPATH, and torch 2.5.1 preloads the nvidia libs only after a failed load.
* ``torch_cu_nvjitlink_dir()``: ``nvidia-nvjitlink==13.0.39`` for the torch 2.14.1+cu130 venv.
  The loader really picks the shadowing file for libtorch_cuda.so's closure (checked through
  /proc/self/maps), but ``import torch`` survives: torch >= 2.10 preloads every nvidia lib by
  absolute path from sys.path before loading libtorch (torch/__init__.py ``_preload_cuda_deps``),
  and 13.0.39 still has the ``_13_0`` symbols cuSPARSE 12.6.3.3 needs.

Wheels are downloaded once (pip, ``--no-deps``) into ``~/.cache/cudafix-test-wheels``
(``CUDAFIX_TEST_WHEELS`` overrides) by tests/make_venvs.sh (``python shadowing.py --fetch``), never
by a test, and unpacked with their dist-info, so the version of each file can be read from the
wheel's RECORD like in a real site-packages.
"""

from __future__ import annotations

import dataclasses
import os
import pathlib
import subprocess
import sys
import zipfile
from typing import Optional

CACHE = pathlib.Path(os.environ.get("CUDAFIX_TEST_WHEELS", str(pathlib.Path.home() / ".cache" / "cudafix-test-wheels")))

F1_TORCH = "torch==2.5.1"
F1_SHADOW_WHEEL = ("nvidia-nvjitlink-cu12", "12.3.101")
F1_ERROR = "undefined symbol: __nvJitLinkComplete_12_4, version libnvJitLink.so.12"
CU_SHADOW_WHEEL = ("nvidia-nvjitlink", "13.0.39")
# an NCCL older than torch 2.5.1 needs (ncclCommRegister): tests/test_broken_installs.py (~210 MB)
OLD_NCCL_WHEEL = ("nvidia-nccl-cu12", "2.18.1")
WHEELS = (F1_SHADOW_WHEEL, CU_SHADOW_WHEEL, OLD_NCCL_WHEEL)  # what `--fetch` downloads


@dataclasses.dataclass(frozen=True)
class ShadowScenario:
    python: pathlib.Path  # interpreter of the venv whose torch is shadowed
    ld_library_path: str  # the directory to put on LD_LIBRARY_PATH
    shadow_file: pathlib.Path  # the older library in it
    soname: str
    shadow_version: str
    expected_error: Optional[str]  # substring of the ImportError, None when import survives


def _run(cmd: list, timeout: float) -> None:
    subprocess.run(cmd, check=True, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=timeout)


def _wheels(dist: str, version: str) -> list:
    return sorted((CACHE / "wheels").glob("%s-%s-*.whl" % (dist.replace("-", "_"), version)))


def fetch(python: str = sys.executable) -> None:
    """Download every scenario wheel not yet in the cache (tests/make_venvs.sh runs this)."""
    (CACHE / "wheels").mkdir(parents=True, exist_ok=True)
    for dist, version in WHEELS:
        if not _wheels(dist, version):
            _run([python, "-m", "pip", "download", "--no-deps", "--only-binary=:all:", "-d", str(CACHE / "wheels"),
                  "%s==%s" % (dist, version)], 900)
        if not _wheels(dist, version):
            raise RuntimeError("pip did not produce a wheel for %s==%s" % (dist, version))


def wheel_dir(dist: str, version: str) -> pathlib.Path:
    """Unpack the downloaded ``dist==version`` wheel once; return the unpack root."""
    dest = CACHE / "x" / ("%s-%s" % (dist, version))
    marker = dest / ".complete"
    if marker.exists():
        return dest
    found = _wheels(dist, version)
    if not found:
        raise RuntimeError("%s==%s not in %s: run tests/make_venvs.sh (CI does)" % (dist, version, CACHE / "wheels"))
    with zipfile.ZipFile(str(found[0])) as zf:
        zf.extractall(str(dest))
    marker.write_text("ok")
    return dest


def _lib_in(root: pathlib.Path, soname: str) -> pathlib.Path:
    hits = sorted(root.rglob(soname))
    if not hits:
        raise RuntimeError("%s not in %s" % (soname, root))
    return hits[0]


def torch_cu_nvjitlink_dir() -> ShadowScenario:
    """Older libnvJitLink.so.13 (13.0.39) for the torch 2.14.1+cu130 venv (shipped: 13.5.37)."""
    lib = _lib_in(wheel_dir(*CU_SHADOW_WHEEL), "libnvJitLink.so.13")
    python = pathlib.Path(os.environ.get("CUDAFIX_TEST_VENVS", str(pathlib.Path.home() / ".cache" / "cudafix-venvs"))) / "torch-cu" / "bin" / "python"
    return ShadowScenario(python, str(lib.parent), lib, "libnvJitLink.so.13", "13.0.39", None)


def torch_251_venv() -> pathlib.Path:
    """The venv with the real torch 2.5.1+cu124 wheel and its nvidia-*-cu12 wheels (~5 GB),
    built by tests/make_venvs.sh (CI runs it) as $CUDAFIX_TEST_VENVS/torch-251."""
    venvs = pathlib.Path(os.environ.get("CUDAFIX_TEST_VENVS", str(pathlib.Path.home() / ".cache" / "cudafix-venvs")))
    py = venvs / "torch-251" / "bin" / "python"
    if not py.exists():
        raise RuntimeError("%s missing: run tests/make_venvs.sh" % py)
    return py


def torch_251_nvjitlink_scenario() -> ShadowScenario:
    """F1 for real: `import torch` fails with an undefined nvJitLink symbol."""
    py = torch_251_venv()
    lib = _lib_in(wheel_dir(*F1_SHADOW_WHEEL), "libnvJitLink.so.12")
    return ShadowScenario(py, str(lib.parent), lib, "libnvJitLink.so.12", F1_SHADOW_WHEEL[1], F1_ERROR)


if __name__ == "__main__":
    if sys.argv[1:] != ["--fetch"]:
        sys.exit("usage: python tests/shadowing.py --fetch")
    fetch()
