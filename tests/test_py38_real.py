"""cudafix under a real Python 3.8 (yolov9 images ship 3.8), not only vermin's static check.

tests/make_venvs.sh builds $CUDAFIX_TEST_VENVS/py38 from a Python 3.8 (pyenv's on this image) with
cudafix's runtime dependencies; the checkout is put on PYTHONPATH, as a user's env would have the
installed package.
"""

from __future__ import annotations

import json
import os
import pathlib
import subprocess
import sys

import pytest

from tests.conftest import FIXTURES, REPO, VENVS, run_cudafix

PY38 = VENVS / "py38" / "bin" / "python"


@pytest.fixture(scope="module")
def py38():
    if not PY38.exists():
        pytest.fail("%s missing: tests/make_venvs.sh builds it from a Python 3.8" % PY38)
    out = subprocess.run([str(PY38), "-c", "import sys; print(sys.version_info[:2])"],
                         capture_output=True, text=True, timeout=60).stdout.strip()
    assert out == "(3, 8)"
    return PY38


def test_status_json_on_this_machine(py38):
    proc = run_cudafix(py38, "status", "--json", timeout=300)
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    assert out["schema"] == "cudafix.status/1"
    assert out["snapshot"]["python"]["version"].startswith("3.8.")


def test_findings_under_38_equal_those_under_this_python(py38):
    snap = str(FIXTURES / "yolov9" / "yolov9-h100-conda-nocudahome.json")
    got = [run_cudafix(p, "check", "--strict", "--json", "--from", snap) for p in (py38, pathlib.Path(sys.executable))]
    assert [g.returncode for g in got] == [1, 1], [g.stderr for g in got]
    a, b = (json.loads(g.stdout)["findings"] for g in got)
    assert a == b and {f["rule"] for f in a} >= {"arch-ptx-jit", "cuda-home-mismatch"}


def test_snapshot_round_trip_and_explain(py38, tmp_path):
    out = tmp_path / "s.json"
    assert run_cudafix(py38, "snapshot", "-o", str(out)).returncode == 0
    proc = run_cudafix(py38, "status", "--from", str(out))
    assert proc.returncode == 0 and "Findings:" in proc.stdout
    assert run_cudafix(py38, "explain", "lib-shadowed").returncode == 0


def test_activation_code_under_38(py38):
    snap = str(FIXTURES / "yolov9" / "yolov9-a100-conda-nocudahome.json")
    proc = run_cudafix(py38, "shell", "--shell", "bash", "--activate", "--from", snap)
    assert proc.returncode == 0, proc.stderr
    script = proc.stdout + '\nprintf "%s" "$CUDA_HOME"\n'
    done = subprocess.run(["bash", "-c", script], capture_output=True, text=True, timeout=60,
                          env={k: v for k, v in os.environ.items() if k != "CUDA_HOME"})
    assert done.stdout.endswith("/usr/local/cuda-11.3")



def test_fix_plan_under_38_equals_the_one_under_this_python(py38):
    """`cudafix fix` runs in the user's env (yolov9 images ship 3.8): same plan, byte for byte."""
    snap = str(REPO / "tests" / "fixtures" / "yolov9" / "yolov9-h100-conda-cudahome.json")
    got = [run_cudafix(p, "fix", "--json", "--from", snap) for p in (py38, pathlib.Path(sys.executable))]
    assert [g.returncode for g in got] == [0, 0], got[0].stderr
    assert got[0].stdout == got[1].stdout
    assert '"conda"' in got[0].stdout and "pytorch-cuda=11.8" in got[0].stdout
