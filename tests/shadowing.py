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
(``CUDAFIX_TEST_WHEELS`` overrides) and unpacked with their dist-info, so the version of each file
can be read from the wheel's RECORD like in a real site-packages.
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


def wheel_dir(dist: str, version: str) -> pathlib.Path:
    """Download ``dist==version`` (no deps) once and unpack it; return the unpack root."""
    wheels = CACHE / "wheels"
    dest = CACHE / "x" / ("%s-%s" % (dist, version))
    marker = dest / ".complete"
    if marker.exists():
        return dest
    wheels.mkdir(parents=True, exist_ok=True)
    norm = dist.replace("-", "_")
    found = sorted(wheels.glob("%s-%s-*.whl" % (norm, version)))
    if not found:
        _run([sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:", "-d", str(wheels), "%s==%s" % (dist, version)], 900)
        found = sorted(wheels.glob("%s-%s-*.whl" % (norm, version)))
    if not found:
        raise RuntimeError("pip did not produce a wheel for %s==%s" % (dist, version))
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
    lib = _lib_in(wheel_dir("nvidia-nvjitlink", "13.0.39"), "libnvJitLink.so.13")
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
