"""cuDriverGetVersion's answer is kept per libcuda file (cudafix/probes/machine/driver.py
cached_driver_cuda_version, issue 23: loading libcuda is the costly part of asking it).  On real
shared objects built here with the C compiler, exporting cuDriverGetVersion as libcuda does: the
answer is the library's own, a warm run does not load the library again, a changed file is asked
again, a failure is never kept, and without a cache directory nothing is written."""

from __future__ import annotations

import os
import shutil
import subprocess

import pytest

from cudafix.probes.machine import driver
from tests.conftest import require

PAST = 1_600_000_000


def _libcuda(tmp_path, name: str, version: int, symbol: bool = True, mtime: int = PAST) -> str:
    require(shutil.which("cc") is not None, "a C compiler (cc)")
    src = tmp_path / (name + ".c")
    fn = "cuDriverGetVersion" if symbol else "cuSomethingElse"
    src.write_text("int %s(int *v) { *v = %d; return 0; }\n" % (fn, version))
    out = tmp_path / name
    subprocess.run(["cc", "-shared", "-fPIC", "-o", str(out), str(src)], check=True, timeout=120)
    os.utime(str(out), (mtime, mtime))
    return str(out)


@pytest.fixture
def calls(monkeypatch):
    seen = []
    real = driver.query_driver_cuda_version

    def counting(path):
        seen.append(path)
        return real(path)

    monkeypatch.setattr(driver, "query_driver_cuda_version", counting)
    return seen


def test_warm_run_does_not_load_the_library(tmp_path, calls):
    lib = _libcuda(tmp_path, "libcuda.so.1", 13000)
    cache = str(tmp_path / "cache")
    os.mkdir(cache, 0o700)
    assert driver.cached_driver_cuda_version(lib, cache) == (13000, None)
    assert driver.cached_driver_cuda_version(lib, cache) == (13000, None)
    assert len(calls) == 1  # asked once: the second answer came from the cache
    assert os.path.exists(os.path.join(cache, driver.DRIVER_API_CACHE))


STEP = (
    "import sys; sys.path.insert(0, %r); from cudafix.probes.machine import driver\n"
    "asked = []; real = driver.query_driver_cuda_version\n"
    "driver.query_driver_cuda_version = lambda p: asked.append(p) or real(p)\n"
    "print(driver.cached_driver_cuda_version(sys.argv[1], sys.argv[2])[0], len(asked))\n"
)


def _step(lib: str, cache: str):
    """One status run's question, in its own process (dlopen keeps a loaded library by inode)."""
    import sys

    from tests.conftest import REPO

    out = subprocess.run([sys.executable, "-c", STEP % str(REPO), lib, cache], capture_output=True, text=True,
                         timeout=120, check=True).stdout.split()
    return int(out[0]), int(out[1])


def test_a_changed_library_is_asked_again(tmp_path):
    cache = str(tmp_path / "cache")
    os.mkdir(cache, 0o700)
    lib = _libcuda(tmp_path, "libcuda.so.1", 12080)
    assert _step(lib, cache) == (12080, 1) and _step(lib, cache) == (12080, 0)
    os.remove(lib)
    lib = _libcuda(tmp_path, "libcuda.so.1", 13010, mtime=PAST + 100)  # a driver update, same path
    assert _step(lib, cache) == (13010, 1) and _step(lib, cache) == (13010, 0)


def test_a_failure_is_not_kept_and_no_dir_means_no_cache(tmp_path, calls):
    cache = str(tmp_path / "cache")
    os.mkdir(cache, 0o700)
    bad = _libcuda(tmp_path, "libbad.so", 0, symbol=False)
    for _ in range(2):
        v, why = driver.cached_driver_cuda_version(bad, cache)
        assert v is None and "no cuDriverGetVersion symbol" in why
    assert len(calls) == 2 and not os.listdir(cache)
    lib = _libcuda(tmp_path, "libcuda.so.1", 13000)
    assert driver.cached_driver_cuda_version(lib, None) == (13000, None)
    assert driver.cached_driver_cuda_version(lib, None) == (13000, None)
    assert len(calls) == 4


def test_a_just_written_library_is_not_kept(tmp_path, calls):
    import time

    cache = str(tmp_path / "cache")
    os.mkdir(cache, 0o700)
    lib = _libcuda(tmp_path, "libcuda.so.1", 13000, mtime=int(time.time()))
    assert driver.cached_driver_cuda_version(lib, cache) == (13000, None)
    assert driver.cached_driver_cuda_version(lib, cache) == (13000, None)
    assert len(calls) == 2  # racy: a change in the same tick could keep the stat equal
