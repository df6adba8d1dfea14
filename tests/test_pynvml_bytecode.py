"""Where Python writes no bytecode (PYTHONDONTWRITEBYTECODE, as in the H200 image) and the env holds
none for pynvml, cudafix keeps pynvml's bytecode in its private per-user cache: the first `status`
compiles pynvml.py once, the next ones load it compiled (issue 23: 60-90 ms a run there).  Run on a
source-only copy of the real nvidia-ml-py module of the torch-cu test venv, each step its own
process; Python's audit event "compile" (fired for every compile of source) is the witness."""

from __future__ import annotations

import glob
import os
import shutil
import subprocess

from tests.conftest import REPO, require

VENVS = os.environ.get("CUDAFIX_TEST_VENVS", os.path.join(os.path.expanduser("~"), ".cache", "cudafix-venvs"))
PY = os.path.join(VENVS, "torch-cu", "bin", "python")

PROBE = r"""
import sys
compiled = []
sys.addaudithook(lambda ev, args: ev == "compile" and "pynvml" in str(args[1]) and compiled.append(args[1]))
from cudafix.probes.machine.nvml import import_pynvml
m = import_pynvml()
print(m.__file__, len(compiled), sys.dont_write_bytecode, sys.pycache_prefix)
"""


def _run(tmp_path, env_extra=None):
    env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": "%s:%s" % (tmp_path / "site", REPO), "PYTHONDONTWRITEBYTECODE": "1",
           "XDG_CACHE_HOME": str(tmp_path / "cache"), "HOME": str(tmp_path)}
    env.update(env_extra or {})
    p = subprocess.run([PY, "-c", PROBE], env=env, capture_output=True, text=True, timeout=120,
                       cwd=str(tmp_path))
    assert p.returncode == 0, p.stderr
    f, n, dwb, prefix = p.stdout.split()
    return f, int(n), dwb, prefix


def _site(tmp_path):
    src = glob.glob(os.path.join(VENVS, "torch-cu", "lib", "python3*", "site-packages", "pynvml.py"))
    require(os.path.exists(PY) and src, "the torch-cu test venv with nvidia-ml-py (tests/make_venvs.sh)")
    site = tmp_path / "site"
    site.mkdir()
    shutil.copy(src[0], str(site / "pynvml.py"))  # source only: no __pycache__
    return site


def test_compiled_once_then_loaded_from_the_private_cache(tmp_path):
    site = _site(tmp_path)
    f1, n1, dwb, prefix = _run(tmp_path)
    assert f1 == str(site / "pynvml.py") and n1 == 1  # compiled, the first time
    assert dwb == "True" and prefix == "None"  # the interpreter's settings are given back
    cached = glob.glob(str(tmp_path / "cache" / "cudafix" / "pycache" / "**" / "pynvml.*.pyc"), recursive=True)
    assert len(cached) == 1
    assert not (site / "__pycache__").exists()  # nothing written next to the env's files
    f2, n2, _, _ = _run(tmp_path)
    assert f2 == f1 and n2 == 0  # loaded compiled
    # the source changes: Python's own check (mtime, size) recompiles it
    with open(str(site / "pynvml.py"), "a") as fh:
        fh.write("\nCUDAFIX_TEST_MARK = 1\n")
    os.utime(str(site / "pynvml.py"), (1_700_000_000, 1_700_000_000))
    assert _run(tmp_path)[1] == 1 and _run(tmp_path)[1] == 0


def test_a_cache_dir_others_can_write_is_not_used(tmp_path):
    _site(tmp_path)
    cache = tmp_path / "cache"
    cache.mkdir()
    cache.chmod(0o777)
    assert _run(tmp_path)[1] == 1 and _run(tmp_path)[1] == 1  # compiled every time, as without cudafix's cache
    assert not (cache / "cudafix").exists()


def test_where_python_writes_bytecode_nothing_changes(tmp_path):
    site = _site(tmp_path)
    env = {"PYTHONDONTWRITEBYTECODE": ""}
    assert _run(tmp_path, env)[1] == 1 and _run(tmp_path, env)[1] == 0
    assert (site / "__pycache__").is_dir() and not (tmp_path / "cache" / "cudafix").exists()
