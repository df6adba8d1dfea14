"""cuda-home-missing names a CUDA_HOME that cannot work as written, with the corrected value.

Public reports trace extension builds failing to exactly these values: NVIDIA/apex#368
(':/usr/local/cuda:/usr/local/cuda-10.1/bin/nvcc', from `export CUDA_HOME=$CUDA_HOME:/usr/local/cuda`),
rusty1s/pytorch_cluster#55 ('/usr/local/cuda:/bin/nvcc'), aim-uofa/AdelaiDet#338
(':/usr/local/cuda/bin/nvcc: not found').  The truth, independent of cudafix: torch's own
torch.utils.cpp_extension in the torch-cu venv, asked which nvcc it would run with the value
(``_join_cuda_home('bin', 'nvcc')``) and whether that file can run; then the same with cudafix's
corrected value.  The toolkit is this machine's real /usr/local/cuda-13.0.
"""

from __future__ import annotations

import os
import pathlib
import subprocess

import pytest

from cudafix.model.findings import PROBLEM
from cudafix.model.snapshot import Snapshot
from cudafix.probes.pyenv.toolkits import probe_toolkits
from cudafix.rules import toolkit as rtk
from tests.conftest import require

TOOLKIT = "/usr/local/cuda-13.0"
VENVS = pathlib.Path.home() / ".cache" / "cudafix-venvs"
ASK = ("import os, torch.utils.cpp_extension as c; p = c._join_cuda_home('bin', 'nvcc'); "
       "print(p); print(os.path.isfile(p) and os.access(p, os.X_OK))")


def _torch_runs(value: str, cwd: pathlib.Path):
    py = VENVS / "torch-cu" / "bin" / "python"
    require(py.exists(), "torch-cu venv")
    env = {k: v for k, v in os.environ.items() if k not in ("CUDA_HOME", "CUDA_PATH")}
    env["CUDA_HOME"] = value
    out = subprocess.run([str(py), "-c", ASK], env=env, cwd=str(cwd), capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    path, ok = out.stdout.split()
    return path, ok == "True"


@pytest.mark.parametrize("value, what", [
    (":" + TOOLKIT, "leading"),             # export CUDA_HOME=$CUDA_HOME:/usr/local/cuda-13.0, CUDA_HOME empty before
    (TOOLKIT + ":", "trailing"),
    (":/usr/local/cuda-missing:" + TOOLKIT, "list"),  # apex#368's shape
    ("cuda-13.0", "relative"),
    (TOOLKIT + "/bin/nvcc", "file"),
])
def test_named_with_a_corrected_value_torch_agrees(tmp_path, value, what):
    require(os.access(TOOLKIT + "/bin/nvcc", os.X_OK), "the CUDA 13.0 toolkit at " + TOOLKIT)
    env = {"CUDA_HOME": value, "PATH": "/usr/bin:/bin"}
    snap = Snapshot()
    snap.env = dict(env)
    snap.toolkits = probe_toolkits(env, sys_path=[], cache_dir=str(tmp_path / "cache"))
    out = [o for o in rtk.check_cuda_home_missing(snap) if o.subject == "CUDA_HOME"]
    assert len(out) == 1, [o.message for o in out]  # one cause, one finding
    [o] = out
    assert o.verdict == PROBLEM and "cannot work as written" in o.message
    # torch, as written: the nvcc it would run does not exist (from a build directory, tmp_path)
    nvcc, runs = _torch_runs(value, tmp_path)
    assert not runs, nvcc
    assert repr(nvcc) in " ".join(o.evidence)  # the path cudafix says torch runs is the one torch builds
    # cudafix's correction, given to torch: its nvcc runs
    [cmd] = o.fix.commands
    assert cmd.startswith("export CUDA_HOME=")
    fixed = cmd.split("=", 1)[1]
    assert fixed == TOOLKIT
    assert _torch_runs(fixed, tmp_path)[1]


def test_a_good_value_is_ok(tmp_path):
    require(os.access(TOOLKIT + "/bin/nvcc", os.X_OK), "the CUDA 13.0 toolkit at " + TOOLKIT)
    env = {"CUDA_HOME": TOOLKIT, "PATH": "/usr/bin:/bin"}
    snap = Snapshot()
    snap.env = dict(env)
    snap.toolkits = probe_toolkits(env, sys_path=[], cache_dir=str(tmp_path / "cache"))
    assert [o.verdict for o in rtk.check_cuda_home_missing(snap)] == ["ok"]
    assert _torch_runs(TOOLKIT, tmp_path)[1]
