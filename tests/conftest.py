"""Shared fixtures: the real torch venvs built by tests/make_venvs.sh, a venv without torch, the
repo root and its snapshot files."""

from __future__ import annotations

import os
import pathlib
import subprocess
import sys

import pytest

REPO = pathlib.Path(__file__).resolve().parent.parent
FIXTURES = REPO / "tests" / "fixtures"
VENVS = pathlib.Path(os.environ.get("CUDAFIX_TEST_VENVS", str(pathlib.Path.home() / ".cache" / "cudafix-venvs")))


def _venv_python(name: str) -> pathlib.Path:
    py = VENVS / name / "bin" / "python"
    if not py.exists():
        pytest.fail("test venv %s missing: run tests/make_venvs.sh (CI does)" % py)
    return py


@pytest.fixture(scope="session")
def torch_cpu_python() -> pathlib.Path:
    """python of a venv holding the real torch 2.13.0 CPU wheel."""
    return _venv_python("torch-cpu")


@pytest.fixture(scope="session")
def torch_cu_python() -> pathlib.Path:
    """python of a venv holding the real torch 2.14.1 (cu130) wheel with nvidia-* wheels."""
    return _venv_python("torch-cu")


@pytest.fixture
def no_torch_python(tmp_path) -> pathlib.Path:
    """python of a fresh venv (no pip) without torch."""
    venv = tmp_path / "notorch"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120)
    return venv / "bin" / "python"


def snapshot_files() -> list:
    """Every recorded, transcribed or synthetic snapshot in the repo (the bundled examples and the
    test fixtures whose schema is cudafix.snapshot/1), sorted."""
    import json

    found = sorted((REPO / "cudafix" / "data" / "examples").glob("*.json"))
    for p in sorted(FIXTURES.rglob("*.json")):
        try:
            doc = json.loads(p.read_text(encoding="utf-8"))
        except (ValueError, UnicodeDecodeError):
            continue
        if isinstance(doc, dict) and doc.get("schema") == "cudafix.snapshot/1":
            found.append(p)
    return found


def venv_site_packages(python: pathlib.Path) -> pathlib.Path:
    out = subprocess.run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        check=True, capture_output=True, text=True, timeout=60,
    ).stdout.strip()
    return pathlib.Path(out)


def run_cudafix(python: pathlib.Path, *args: str, env: dict = None, timeout: float = 120) -> subprocess.CompletedProcess:
    """Run `python -m cudafix ARGS` with this checkout importable (not installed)."""
    e = dict(os.environ if env is None else env)
    e["PYTHONPATH"] = str(REPO)
    return subprocess.run([str(python), "-m", "cudafix", *args], capture_output=True, text=True, env=e, timeout=timeout)


def run_dev_cudafix(*args: str, env: dict = None, timeout: float = 120) -> subprocess.CompletedProcess:
    return run_cudafix(pathlib.Path(sys.executable), *args, env=env, timeout=timeout)


# -- prerequisites: a skip is a failure under CI ---------------------------------------------------
# Green must never mean "skipped": under CI=true (the CI job, .ci/run) a test whose prerequisite is
# missing fails with the reason; locally it skips, and the reason is printed in the summary.  Only
# a test that needs a real NVIDIA GPU (marked ``gpu``) may skip in CI.

IN_CI = os.environ.get("CI", "").strip().lower() in ("1", "true", "yes")


def require(cond, reason: str) -> None:
    """Assert a test prerequisite (a tool, a toolkit, a venv, root): skip locally, fail in CI."""
    if cond:
        return
    if IN_CI:
        pytest.fail("prerequisite missing (CI=true, so this is a failure): " + reason, pytrace=False)
    pytest.skip(reason)


def pytest_configure(config):
    config.addinivalue_line("markers", "gpu: needs a real NVIDIA GPU; the only test allowed to skip under CI=true")
    if "s" not in (config.option.reportchars or "") and "a" not in (config.option.reportchars or ""):
        config.option.reportchars = (config.option.reportchars or "") + "s"  # print every skip's reason


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    """Safety net for skips that bypass require() (skipif marks, importorskip, a stray pytest.skip)."""
    outcome = yield
    rep = outcome.get_result()
    if IN_CI and rep.skipped and not hasattr(rep, "wasxfail") and item.get_closest_marker("gpu") is None:
        reason = rep.longrepr[2] if isinstance(rep.longrepr, tuple) else str(rep.longrepr)
        reason = reason[len("Skipped: "):] if reason.startswith("Skipped: ") else reason
        rep.outcome = "failed"
        rep.longrepr = "skipped under CI=true (a missing prerequisite is a failure): %s" % reason
