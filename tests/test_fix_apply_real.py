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


def _make_mismatched(root: pathlib.Path, torch_cu_python: pathlib.Path) -> pathlib.Path:
    base = subprocess.run([str(torch_cu_python), "-c", "import sys; print(sys._base_executable)"],
                          capture_output=True, text=True, check=True).stdout.strip()
    subprocess.run([base, "-m", "venv", str(root)], check=True, timeout=300)
    py = root / "bin" / "python"
    site = venv_site_packages(py)
    (site / "cudafix-test-torch-cu.pth").write_text(str(venv_site_packages(torch_cu_python)) + "\n")
    res = _pip(py, "install", "-q", "--no-deps", "torchvision==0.28.0")
    if res.returncode != 0:
        pytest.fail("cannot install torchvision 0.28.0 from PyPI: %s" % res.stderr[-2000:])
    return py


@pytest.fixture(scope="module")
def mismatched_venv(tmp_path_factory, torch_cu_python) -> pathlib.Path:
    return _make_mismatched(tmp_path_factory.mktemp("fix") / "tv-mismatch", torch_cu_python)


def _tv_dists(py: pathlib.Path):
    return sorted(p.name for p in venv_site_packages(py).glob("torchvision-*.dist-info"))


def test_declined_or_failing_apply_changes_nothing(tmp_path, torch_cu_python):
    py = _make_mismatched(tmp_path / "tv-fail", torch_cu_python)
    dev = pathlib.Path(sys.executable)
    # declined at the prompt: nothing runs
    no = subprocess.run([str(dev), "-m", "cudafix", "fix", "--python", str(py), "--apply"], input="n\n", capture_output=True,
                        text=True, env=dict(CLEAN_ENV, PYTHONPATH=str(pathlib.Path(__file__).resolve().parent.parent)), timeout=600)
    assert no.returncode == 1 and "cudafix: fix: nothing changed" in no.stderr and "[1/" not in no.stdout
    # pip cannot find the wheel (an offline machine: no index, an empty find-links dir): the step
    # fails, cudafix says so, and the env is as before (pip never got to uninstall anything)
    empty = tmp_path / "no-wheels"
    empty.mkdir()
    offline = dict(CLEAN_ENV, PIP_NO_INDEX="1", PIP_FIND_LINKS=str(empty))
    before = _tv_dists(py)
    res = run_cudafix(dev, "fix", "--python", str(py), "--apply", "--yes", env=offline, timeout=600)
    assert res.returncode == 1, res.stdout[-2000:]
    assert "cudafix: fix: step 1 exited 1: %s -m pip install" % py in res.stdout
    assert "ERROR: Cannot install torchvision==0.29.1" in res.stderr  # pip's own words, streamed through
    assert "after:  error torchvision-mismatch" in res.stdout
    assert _tv_dists(py) == before == ["torchvision-0.28.0.dist-info"]


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


def test_fix_on_a_healthy_env_has_nothing_to_do_and_json(torch_cpu_python):
    dev = pathlib.Path(sys.executable)
    res = run_cudafix(dev, "fix", "--python", str(torch_cpu_python), "--apply", "--yes", env=CLEAN_ENV)
    assert res.returncode == 0, res.stderr
    assert "nothing to do" in res.stdout and "[1/" not in res.stdout
    doc = run_cudafix(dev, "fix", "--python", str(torch_cpu_python), "--assume-driver", "580.95.05", "--assume-gpu", "NVIDIA H200",
                      "--json", env=CLEAN_ENV)
    import json

    plan = json.loads(doc.stdout)
    assert plan["schema"] == "cudafix.plan/1"
    p = plan["plan"]
    assert p["target"] == "torch 2.13.0+cu130" and p["owner"] == "pip"
    assert p["steps"][0]["argv"] == [str(torch_cpu_python), "-m", "pip", "install", "torch==2.13.0+cu130",
                                     "--index-url", "https://download.pytorch.org/whl/cu130"]
