"""The real Windows wheels unpacked by tests/fetch_win_wheels.sh (torch CPU, cudart, nvrtc, cupy)."""

from __future__ import annotations

import os
import pathlib
from typing import List

from tests.conftest import require

WIN_ROOT = pathlib.Path(os.environ.get("CUDAFIX_WIN_WHEELS") or pathlib.Path.home() / ".cache" / "cudafix-win-wheels")


def win_root() -> pathlib.Path:
    require((WIN_ROOT / ".cudafix-ready-2").exists(), "no unpacked Windows wheels in %s (run tests/fetch_win_wheels.sh)" % WIN_ROOT)
    return WIN_ROOT


def wheel_dir(prefix: str) -> pathlib.Path:
    hits = sorted((win_root() / "x").glob(prefix + "-*"))
    require(hits, "no unpacked %s wheel under %s" % (prefix, WIN_ROOT))
    return hits[0]


def pe_files() -> List[pathlib.Path]:
    x = win_root() / "x"
    return sorted(p for p in x.rglob("*") if p.suffix.lower() in (".dll", ".pyd") and p.is_file())


def pefile_wheel() -> pathlib.Path:
    hits = sorted((win_root() / "wheels").glob("pefile-*.whl"))
    require(hits, "no pefile wheel in %s/wheels" % WIN_ROOT)
    return hits[0]
