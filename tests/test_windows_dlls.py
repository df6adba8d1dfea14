"""The simulation of torch's Windows DLL loading (cudafix.probes.loader.windlls) on the real torch 2.13.0
win_amd64 wheel (tests/fetch_win_wheels.sh), one dependency removed at a time.

The expected failure is computed from binutils' objdump -p import tables (independent of
cudafix.probes.binfmt.pe) and the order torch/__init__.py loads torch\\lib\\*.dll in (glob: NTFS name order).
"""

from __future__ import annotations

import functools
import os
import re
import shutil
import subprocess

import pytest

from cudafix.knowledge import windows as K
from cudafix.probes.loader.windlls import simulate_import
from tests.conftest import require
from tests.wintree import wheel_dir


@pytest.fixture(scope="module")
def torch_dir():
    d = wheel_dir("torch-2.13.0") / "torch"
    require((d / "lib" / "torch_cpu.dll").exists(), "torch 2.13.0 win_amd64 wheel not unpacked")
    return d


def tree(tmp_path, torch_dir, drop=()):
    """A copy of the wheel's torch\\ (symlinks) without the DLLs in ``drop``."""
    out = tmp_path / "torch"
    (out / "lib").mkdir(parents=True)
    for f in (torch_dir / "lib").iterdir():
        if f.name not in drop:
            (out / "lib" / f.name).symlink_to(f)
    for f in torch_dir.glob("_C*.pyd"):
        (out / f.name).symlink_to(f)
    return out


def objdump_imports(path):
    return _objdump_imports(os.path.realpath(str(path)))


@functools.lru_cache(maxsize=None)
def _objdump_imports(path):
    tool = shutil.which("objdump")
    require(tool, "objdump not installed")
    out = subprocess.run([tool, "-p", str(path)], capture_output=True, text=True, timeout=300).stdout
    return re.findall(r"^\tDLL Name: (.*)$", out, re.M)


def expected_failure(lib_dir, removed):
    """(loading, chain) of the first torch\\lib DLL whose import closure inside lib_dir needs ``removed``."""
    names = {p.name.lower(): p for p in lib_dir.iterdir()}
    imports = {n: [i.lower() for i in objdump_imports(p)] for n, p in names.items()}
    for start in sorted(names):
        seen, todo = set(), [(start, [names[start].name])]
        while todo:
            n, chain = todo.pop(0)
            if n in seen:
                continue
            seen.add(n)
            for i in imports.get(n, []):
                if i == removed.lower():
                    return names[start].name, chain
                if i in names:
                    todo.append((i, chain + [names[i].name]))
    return None


def test_complete_wheel_imports(tmp_path, torch_dir):
    assert simulate_import(str(tree(tmp_path, torch_dir)), "3.12") is None


@pytest.mark.parametrize("removed", ["uv.dll", "c10.dll", "libiomp5md.dll", "torch_cpu.dll"])
def test_one_dependency_removed_names_the_missing_dll(tmp_path, torch_dir, removed):
    t = tree(tmp_path, torch_dir, drop=(removed,))
    got = simulate_import(str(t), "3.12")
    want = expected_failure(t / "lib", removed)
    assert want is not None
    assert got is not None and (got.loading, got.missing.lower(), got.chain) == (want[0], removed, want[1])
    assert got.error.startswith("OSError: [WinError 126] The specified module could not be found. Error loading \"")
    assert got.error.endswith("\\lib\\%s\" or one of its dependencies." % want[0])


def test_missing_vc_redist_fails_at_c10(tmp_path, torch_dir):
    # c10.dll imports MSVCP140.dll (objdump), which neither the wheel nor python.exe's directory ships
    assert "MSVCP140.dll" in objdump_imports(torch_dir / "lib" / "c10.dll")
    got = simulate_import(str(tree(tmp_path, torch_dir)), "3.12", system32=K.SYSTEM32)
    assert (got.loading, got.missing) == ("c10.dll", "MSVCP140.dll")


def test_conda_library_bin_and_path_fallback(tmp_path, torch_dir):
    """A DLL in the env's Library\\bin (conda) is found via os.add_dll_directory; one only on PATH via torch's retry."""
    t = tree(tmp_path, torch_dir, drop=("uv.dll",))
    prefix = tmp_path / "env"
    (prefix / "Library" / "bin").mkdir(parents=True)
    (prefix / "Library" / "bin" / "uv.dll").symlink_to(torch_dir / "lib" / "uv.dll")
    assert simulate_import(str(t), "3.12", exec_prefix=str(prefix)) is None
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "UV.DLL").symlink_to(torch_dir / "lib" / "uv.dll")  # case-insensitive names
    assert simulate_import(str(t), "3.12", env={"PATH": str(elsewhere)}) is None
