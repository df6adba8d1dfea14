"""`cudafix fix --apply --yes` repairs a REAL torch/torchvision mismatch end to end.

The env: a fresh venv (in the test's tmp dir) that sees the real torch 2.14.1 (cu130, from PyPI)
of the torch-cu test venv through a .pth file (like --system-site-packages: no 3 GB copy), and a
real torchvision 0.28.0 wheel from PyPI installed beside it with --no-deps: its metadata pins
torch==2.13.0, so `import torchvision` fails.  The plan must change torchvision only, to the
release paired with 2.14.1, through the venv's own pip; pip really installs it; a fresh snapshot
shows the mismatch gone, `import torchvision` works, and a second run has nothing to do.
"""

from __future__ import annotations

import os
import pathlib
import subprocess
import sys

import pytest

from tests.conftest import run_cudafix, venv_site_packages

CLEAN_ENV = {k: v for k, v in os.environ.items() if not k.startswith(("CUDA", "CUDAFIX", "LD_LIBRARY_PATH", "PYTORCH"))}


def _pip(python: pathlib.Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([str(python), "-m", "pip", *args], capture_output=True, text=True, timeout=900, env=CLEAN_ENV)


@pytest.fixture(scope="module")
def mismatched_venv(tmp_path_factory, torch_cu_python) -> pathlib.Path:
    base = subprocess.run([str(torch_cu_python), "-c", "import sys; print(sys._base_executable)"],
                          capture_output=True, text=True, check=True).stdout.strip()
    root = tmp_path_factory.mktemp("fix") / "tv-mismatch"
    subprocess.run([base, "-m", "venv", str(root)], check=True, timeout=300)
    py = root / "bin" / "python"
    site = venv_site_packages(py)
    (site / "cudafix-test-torch-cu.pth").write_text(str(venv_site_packages(torch_cu_python)) + "\n")
    res = _pip(py, "install", "-q", "--no-deps", "torchvision==0.28.0")
    if res.returncode != 0:
        pytest.fail("cannot install torchvision 0.28.0 from PyPI: %s" % res.stderr[-2000:])
    return py


def _import_torchvision(py: pathlib.Path) -> subprocess.CompletedProcess:
    return subprocess.run([str(py), "-c", "import torchvision, torch; print(torchvision.__version__, torch.__version__)"],
                          capture_output=True, text=True, timeout=600, env=CLEAN_ENV)


def test_fix_apply_repairs_a_real_torchvision_mismatch(mismatched_venv):
    py = mismatched_venv
    # independent truth before: the real import fails
    assert _import_torchvision(py).returncode != 0
    shown = run_cudafix(pathlib.Path(sys.executable), "fix", "--python", str(py), env=CLEAN_ENV, timeout=600)
    assert shown.returncode == 0, shown.stderr
    assert "change  torchvision 0.28.0+cu130 -> 0.29.1+cu130" in shown.stdout
    assert "change  torch " not in shown.stdout  # torch fits: only what pairs with it changes
    cmd = "$ %s -m pip install torch==2.14.1 torchvision==0.29.1" % py
    assert cmd in shown.stdout, shown.stdout  # the env's own interpreter; PyPI serves cu130 for 2.14
    assert shown.stdout.count(" -m pip install ") == 1

    applied = run_cudafix(pathlib.Path(sys.executable), "fix", "--python", str(py), "--apply", "--yes", env=CLEAN_ENV, timeout=900)
    assert applied.returncode == 0, applied.stdout[-3000:] + applied.stderr[-3000:]
    assert "[1/1] $ %s -m pip install torch==2.14.1 torchvision==0.29.1" % py in applied.stdout
    assert "Successfully installed" in applied.stdout  # pip's own output streamed through
    assert "before: error torchvision-mismatch" in applied.stdout
    assert "torchvision-mismatch" not in applied.stdout.split("after:", 1)[1]
    # independent truth after: torchvision really imports with this torch
    imp = _import_torchvision(py)
    assert imp.returncode == 0, imp.stderr[-2000:]
    assert imp.stdout.split()[0].startswith("0.29.1") and imp.stdout.split()[1].startswith("2.14.1")
    # torch was not touched (still the torch-cu venv's copy)
    assert not list(venv_site_packages(py).glob("torch-*.dist-info"))

    again = run_cudafix(pathlib.Path(sys.executable), "fix", "--python", str(py), "--apply", "--yes", env=CLEAN_ENV, timeout=600)
    assert again.returncode == 0, again.stderr
    assert "nothing to do" in again.stdout and "[1/" not in again.stdout


def test_fix_refuses_what_if_and_driver_upgrades(torch_cu_python):
    what_if = run_cudafix(pathlib.Path(sys.executable), "fix", "--python", str(torch_cu_python), "--assume-driver", "535.104.05",
                          "--assume-gpu", "NVIDIA H200", "--apply", "--yes", env=CLEAN_ENV)
    assert what_if.returncode == 3
    assert what_if.stderr.count("\n") == 1 and "refused: a what-if plan" in what_if.stderr
    # a driver that predates the GPU: no torch helps, the plan is a driver upgrade (root): refused too
    old = run_cudafix(pathlib.Path(sys.executable), "fix", "--python", str(torch_cu_python), "--assume-driver", "470.82.01",
                      "--assume-gpu", "NVIDIA H200", env=CLEAN_ENV)
    assert old.returncode == 0
    assert "blocked upgrade the NVIDIA driver to >= 520.61.05 (CUDA 11.8)" in old.stdout
    assert " -m pip install" not in old.stdout
