"""docs/accuracy.md is current: every cudafix run and every ground-truth command behind it is
executed again (python -m tools.accuracy --check), and every row agrees.

Needs the test venvs of tests/make_venvs.sh (torch-cu, torch-cpu, torch-251, py38) and the CUDA
13.0 toolkit (nvcc) that ./run test installs; under CI=true a missing one is a failure."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys

import pytest

from tests.conftest import REPO, VENVS


def _prerequisites():
    missing = [str(VENVS / v / "bin" / "python") for v in ("torch-cu", "torch-cpu", "torch-251", "py38")
               if not (VENVS / v / "bin" / "python").exists()]
    if not shutil.which("nvcc"):
        missing.append("nvcc on PATH")
    if not os.path.isfile("/usr/local/cuda-13.0/bin/nvcc"):
        missing.append("/usr/local/cuda-13.0/bin/nvcc")
    return missing


def test_accuracy_doc_is_current_and_every_row_agrees():
    missing = _prerequisites()
    if missing:
        msg = "accuracy table needs: %s" % ", ".join(missing)
        if os.environ.get("CI") == "true":
            pytest.fail(msg)
        pytest.skip(msg)
    p = subprocess.run([sys.executable, "-m", "tools.accuracy", "--check"], cwd=str(REPO),
                       capture_output=True, text=True, timeout=1800)
    assert p.returncode == 0, p.stderr[-4000:]
    text = (REPO / "docs" / "accuracy.md").read_text()
    assert "false alarms" in text and ": 0.**" in text
    assert "**(differs)**" not in text
