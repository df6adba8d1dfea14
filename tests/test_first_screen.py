"""Issue 35: the first screen says it first and plainly.

- The verdict is line 1 (`healthy`, or `N problems — the first: ... Fix: cudafix fix (K steps)`),
  the fix command within the first 6 lines; a machine without an NVIDIA driver says so within
  its first 6 lines, with at most one line of unknowns; "healthy" only where a torch was checked.
- `--python` must be a Python interpreter: anything else is one line on stderr, exit 2, and a
  script or an executable without CPython's entry point is never run.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys

import pytest
from click.testing import CliRunner

from cudafix import cli
from tests.conftest import REPO, require, run_dev_cudafix

A100 = "NVIDIA A100-SXM4-40GB"


def _no_driver_here():
    return not (os.path.exists("/sys/module/nvidia/version") or os.path.exists("/proc/driver/nvidia/version"))


@pytest.fixture(scope="module")
def yolov9_file(tmp_path_factory):
    """The yolov9 env with torch 1.10.0+cu102 (tests/test_plan_whole_env.py: real scans of the
    PyPI wheels), as `cudafix snapshot` would write it."""
    from tests.test_plan_whole_env import yolov9_cu102

    path = tmp_path_factory.mktemp("y") / "yolov9-cu102.json"
    path.write_text(yolov9_cu102().to_json())
    return str(path)


def _invoke(*args):
    res = CliRunner().invoke(cli.main, list(args))
    return res.exit_code, res.stdout


def test_yolov9_what_if_says_the_verdict_and_the_fix_first(yolov9_file):
    what_if = ["--from", yolov9_file, "--assume-driver", "530.30.02", "--assume-gpu", A100]
    code, out = _invoke("status", *what_if)
    assert code == 0
    head = out.splitlines()[:6]
    text = " ".join(" ".join(head).split())
    assert re.match(r"\d+ problems \u2014 the first: arch-unsupported: GPU0 %s \(sm_80\) has no compatible kernels" % A100, text), head
    assert "Fix (1 step):" in text and any(ln.startswith("  $ cudafix fix --from ") for ln in head)
    cmd = next(ln.strip()[2:] for ln in head if ln.strip().startswith("$ cudafix fix"))
    assert "what-if: assumed driver=530.30.02; gpus=%s" % A100 in text
    # the line pastes: the same plan, whose step 1 installs the torch that runs on sm_80
    argv = [a.strip("'") for a in re.findall(r"'[^']*'|\S+", cmd)][2:]
    code, plan = _invoke("fix", *argv)
    assert code == 0 and "1. $ /opt/conda/envs/yolov9/bin/python -m pip install torch==1.10.0+cu113" in plan
    # each finding one line, with the plan step that answers it
    rows = out.split("\nFindings: ", 1)[1].split("\n\n", 1)[0].splitlines()[1:]
    assert rows[0].startswith("  error   arch-unsupported \u2192 step 1: ")
    assert all(len(r) <= 80 for r in rows)


def test_check_says_the_same_verdict_first(yolov9_file):
    code, out = _invoke("check", "--from", yolov9_file, "--assume-driver", "530.30.02", "--assume-gpu", A100)
    assert code == 1
    assert re.match(r"\d+ problems \u2014 the first: arch-unsupported", out)


def test_a_healthy_env_says_healthy_in_its_first_3_lines(torch_cpu_python):
    """The real torch 2.13.0 CPU venv: a torch, every rule decided, nothing wrong."""
    r = run_dev_cudafix("status", "--python", str(torch_cpu_python), env=dict(os.environ, NO_COLOR="1"), timeout=600)
    assert r.returncode == 0, r.stderr
    assert any(ln.startswith("healthy") for ln in r.stdout.splitlines()[:3]), r.stdout[:1000]


def test_this_machine_without_a_driver_says_so_first(no_torch_python):
    require(_no_driver_here(), "needs a machine without an NVIDIA driver")
    r = run_dev_cudafix("status", "--python", str(no_torch_python), env=dict(os.environ, NO_COLOR="1"), timeout=600)
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert "no NVIDIA driver on this machine" in "\n".join(lines[:6])
    assert " ".join(" ".join(lines[:3]).split()).startswith("no torch installed for %s" % no_torch_python)
    assert sum("unknown" in ln for ln in lines) <= 1, [ln for ln in lines if "unknown" in ln]
    assert "healthy" not in r.stdout


def test_an_env_without_torch_is_never_healthy(no_torch_python):
    for args in (["status"], ["check"], ["fix"]):
        r = run_dev_cudafix(*args, "--python", str(no_torch_python), env=dict(os.environ, NO_COLOR="1"), timeout=600)
        assert r.returncode == 0, (args, r.stderr)
        assert "healthy" not in r.stdout, (args, r.stdout)
        assert "no torch installed for %s" % no_torch_python in " ".join(r.stdout.split()), (args, r.stdout)


# -- --python must be a Python interpreter ----------------------------------------------------------


def _one_line_exit_2(r, what, why="not a Python interpreter"):
    assert r.returncode == 2, (r.returncode, r.stdout[-500:], r.stderr)
    assert r.stdout == ""
    err = r.stderr.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("cudafix: error: --python %s: %s" % (what, why)), r.stderr
    return err[0]


@pytest.mark.parametrize("command", ["status", "check", "fix", "snapshot"])
def test_python_at_a_non_interpreter_is_one_line_and_exit_2(command):
    _one_line_exit_2(run_dev_cudafix(command, "--python", "/bin/ls"), "/bin/ls")


def test_python_at_pip_names_the_interpreter_and_runs_nothing(tmp_path):
    """bin/pip: a Python script (its #! names the interpreter to give); it never runs."""
    mark = tmp_path / "ran"
    pip = tmp_path / "pip"
    pip.write_text("#!%s\nopen(%r, 'w').close()\n" % (sys.executable, str(mark)))
    pip.chmod(0o755)
    for command in ("status", "check", "fix"):
        line = _one_line_exit_2(run_dev_cudafix(command, "--python", str(pip)), str(pip))
        assert "a Python script run by %s (give that: --python %s)" % (sys.executable, sys.executable) in line
    assert not mark.exists()


def test_python_at_a_launcher_is_judged_by_its_answer(tmp_path):
    """A launcher script (a pyenv shim is one) runs: a real interpreter behind it works, anything
    else is one line, exit 2."""
    good = tmp_path / "python3"
    good.write_text('#!/bin/sh\nexec %s "$@"\n' % sys.executable)
    good.chmod(0o755)
    r = run_dev_cudafix("check", "--python", str(good), timeout=600)
    assert r.returncode == 0, r.stderr
    bad = tmp_path / "python"
    bad.write_text('#!/bin/sh\nexec /bin/ls "$@"\n')
    bad.chmod(0o755)
    _one_line_exit_2(run_dev_cudafix("status", "--python", str(bad), timeout=600), str(bad), "did not answer as a Python interpreter")


def test_python_at_a_real_interpreter_passes_the_check():
    from cudafix.cli.analysis import _not_an_interpreter

    assert _not_an_interpreter(sys.executable) is None
    assert _not_an_interpreter(os.path.realpath(sys.executable)) is None
