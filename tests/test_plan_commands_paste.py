"""Every command cudafix prints pastes and works (issue 27, point 4).

Collected from what `status`, `check` and `fix` print for every recorded/transcribed snapshot
fixture (and the what-ifs of tests/test_plan_whole_env.py) and the real test venvs: each line
must parse in POSIX sh (`sh -n`); each `pip install` PyPI serves is resolved by the real pip
(`pip install --dry-run` for the env's Python and platform; the PyTorch index is not reachable
here, so those are parsed only); each `pip uninstall` names only packages the env has.  Then
`fix --apply --yes` carries out a real plan end to end in a venv of the test's own (a stray CUDA 12
runtime wheel beside torch 2.14.1+cu130: removed) and the re-check is clean.
"""

from __future__ import annotations

import glob
import os
import pathlib
import re
import shlex
import subprocess
import sys

import pytest

from cudafix import rules
from cudafix.knowledge import torch_builds as tb
from cudafix.knowledge.cuda_packages import normalize
from cudafix.model.snapshot import Snapshot
from cudafix.plans import planner
from cudafix.probes.machine import assume
from cudafix.render.plan import plan_lines
from cudafix.render.report import render_check, render_status
from tests.conftest import require, run_cudafix, venv_site_packages
from tests.test_plan_whole_env import FIX, h200_rich, yolov9_cu102

STEP = re.compile(r"^\s+\d+\. (?:\$ )?\s*(\S.*)$")
OPEN_CMD = re.compile(r"^\s+open\s.* \u2014 (\S+ -m pip .*)$")
# Linux x86_64 with glibc 2.28 (the H200 image, this machine): every manylinux tag it accepts
PLATFORMS = tuple(x for t in ("manylinux_2_28", "manylinux_2_27", "manylinux_2_24", "manylinux_2_17", "manylinux2014", "manylinux1")
                  for x in ("--platform", t + "_x86_64"))
CLEAN_ENV = {k: v for k, v in os.environ.items() if not k.startswith(("CUDA", "CUDAFIX", "LD_LIBRARY_PATH", "PYTORCH"))}


def _cases():
    out = []
    for path in sorted(glob.glob(os.path.join(FIX, "snapshots", "*.json")) + glob.glob(os.path.join(FIX, "yolov9", "*.json"))
                       + [os.path.join(FIX, "h200rich", "h200-rich-snapshot.json"), os.path.join(FIX, "h200", "snapshot.json")]):
        out.append((os.path.basename(path), Snapshot.load(path)))
    out.append(("h200-rich @550", assume.apply(h200_rich(), "550.54.14", [])))
    out.append(("yolov9 cu102 A100 @530", assume.apply(yolov9_cu102(), "530.30.02", ["NVIDIA A100-SXM4-40GB"])))
    out.append(("h200-rich RTX 4090 @550", assume.apply(h200_rich(), "550.54.14", ["NVIDIA GeForce RTX 4090"])))
    return out


def commands(text: str):
    """The command lines of a status/check/fix output: numbered plan steps, open lines' commands."""
    out = []
    for line in text.splitlines():
        m = STEP.match(line) or OPEN_CMD.match(line)
        if m:
            out.append(m.group(1))
    return out


def _printed(snap: Snapshot):
    runs = rules.run(snap)
    plan = planner.make_plan(snap, runs)
    texts = [render_status(snap, runs, plan=plan), render_check(runs, snap=snap, plan=plan), "\n".join(plan_lines(plan))]
    return snap, [c for t in texts for c in commands(t)]


def _real_cases():
    """The real test venvs (snapshots probed now), on what-if machines."""
    from tests.conftest import _venv_python
    from tests.test_plan_matrix import _snap

    out = []
    for venv, drv, gpu in (("torch-cpu", "580.95.05", "NVIDIA H200"), ("torch-cpu", "550.54.14", "NVIDIA GeForce RTX 4090"),
                           ("torch-cu", "550.54.14", "NVIDIA H200"), ("torch-cu", "470.82.01", "NVIDIA A100"),
                           ("torch-251", "580.95.05", "NVIDIA H200"), ("torch-251", "535.104.05", "NVIDIA A100")):
        out.append(("%s %s @%s" % (venv, gpu, drv), assume.apply(_snap(_venv_python(venv)), drv, [gpu])))
    return out


@pytest.fixture(scope="module")
def printed():
    return [(name,) + _printed(s) for name, s in _cases() + _real_cases()]


def test_every_printed_command_parses_in_sh(printed):
    n = 0
    for name, _snap, cmds in printed:
        for cmd in cmds:
            res = subprocess.run(["sh", "-n", "-c", cmd], capture_output=True, text=True, timeout=30)
            assert res.returncode == 0, (name, cmd, res.stderr)
            n += 1
    assert n >= 20, n  # the fixtures really print commands


def _installed(snap: Snapshot):
    names = {normalize(d.name) for d in snap.toolkits.nvidia_wheels} | {normalize(m.package or "") for m in snap.extensions.modules}
    names |= {"torch"} | {"torchvision" for _ in snap.torchvision[:1]} | {normalize(d.name) for d in snap.torch_pinned}
    return names


def _pip_parts(cmd: str):
    """[(argv after `-m pip`)] of each pip invocation in a command line (`a && b` gives two)."""
    out = []
    for part in cmd.split(" && "):
        argv = shlex.split(part)
        if len(argv) > 3 and argv[1:3] == ["-m", "pip"]:
            out.append(argv[3:])
    return out


def test_uninstalls_name_only_what_the_env_has(printed):
    seen = 0
    for name, snap, cmds in printed:
        for cmd in cmds:
            for argv in _pip_parts(cmd):
                if argv[0] == "uninstall":
                    assert argv[1] == "-y", cmd
                    missing = {normalize(a) for a in argv[2:]} - _installed(snap)
                    assert not missing, (name, cmd, missing)
                    seen += 1
    assert seen >= 3, seen


def test_pypi_installs_resolve_with_the_real_pip(printed, tmp_path):
    """`pip install --dry-run` for the env's Python on Linux x86_64: PyPI really has what the plan
    names (the PyTorch index's local versions cannot be checked here: parsed only)."""
    done = set()
    checked = 0
    for name, snap, cmds in printed:
        py = "%d.%d" % tuple(int(x) for x in (snap.python.version or "3.11").split(".")[:2])
        for cmd in cmds:
            for argv in _pip_parts(cmd):
                if argv[0] != "install" or any(a.startswith(tb.INDEX_BASE) for a in argv):
                    continue
                specs = tuple(a for a in argv[1:] if not a.startswith("-"))
                if (py, specs) in done:
                    continue
                done.add((py, specs))
                # a real CPython of the env's version judges Requires-Python and the wheel tags
                real = sorted(glob.glob(os.path.expanduser("~/.pyenv/versions/%s.*/bin/python%s" % (py, py))))
                require(real, "no CPython %s under ~/.pyenv to resolve %s with" % (py, cmd))
                res = subprocess.run(
                    [real[-1], "-m", "pip", "install", "--dry-run", "--no-deps", "--ignore-installed", "--only-binary=:all:",
                     "--python-version", py, *PLATFORMS, "--target", str(tmp_path / "t"), *specs],
                    capture_output=True, text=True, timeout=900, env=CLEAN_ENV)
                assert res.returncode == 0, (name, cmd, res.stderr[-1500:])
                assert "Would install" in res.stdout, res.stdout[-500:]
                checked += 1
    assert checked >= 1, done


# -- fix --apply, end to end, on a real venv ------------------------------------------------------


def _venv_with_stray_wheel(root: pathlib.Path, torch_cu_python: pathlib.Path) -> pathlib.Path:
    base = subprocess.run([str(torch_cu_python), "-c", "import sys; print(sys._base_executable)"],
                          capture_output=True, text=True, check=True).stdout.strip()
    subprocess.run([base, "-m", "venv", str(root)], check=True, timeout=300)
    py = root / "bin" / "python"
    (venv_site_packages(py) / "cudafix-test-torch-cu.pth").write_text(str(venv_site_packages(torch_cu_python)) + "\n")
    res = subprocess.run([str(py), "-m", "pip", "install", "-q", "--no-deps", "nvidia-cuda-runtime-cu12==12.8.90"],
                         capture_output=True, text=True, timeout=900, env=CLEAN_ENV)
    if res.returncode != 0:
        pytest.fail("cannot install nvidia-cuda-runtime-cu12 from PyPI: %s" % res.stderr[-2000:])
    return py


def test_fix_apply_removes_a_stray_cuda_wheel(tmp_path, torch_cu_python):
    py = _venv_with_stray_wheel(tmp_path / "stray", torch_cu_python)
    dev = pathlib.Path(sys.executable)
    plan = run_cudafix(dev, "fix", "--python", str(py), env=CLEAN_ENV, timeout=600)
    assert "1. $ %s -m pip uninstall -y nvidia-cuda-runtime-cu12" % py in plan.stdout, plan.stdout
    assert "nothing to do" not in plan.stdout
    res = run_cudafix(dev, "fix", "--python", str(py), "--apply", "--yes", env=CLEAN_ENV, timeout=900)
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-2000:]
    assert "after:  no errors or warnings" in res.stdout, res.stdout[-2000:]
    # independent truth: pip itself no longer lists it
    listed = subprocess.run([str(py), "-m", "pip", "list", "--format=freeze"], capture_output=True, text=True, timeout=300).stdout
    assert "nvidia-cuda-runtime-cu12" not in listed
    again = run_cudafix(dev, "fix", "--python", str(py), env=CLEAN_ENV, timeout=600)
    assert "  healthy\n  nothing to do\n" in again.stdout, again.stdout


def test_explain_names_only_real_cudafix_commands():
    """`cudafix explain RULE` names commands in backticks: each is a cudafix subcommand that exists."""
    from cudafix.cli import main as cli_main
    from cudafix.render.findings import render_explain

    names = set(cli_main.commands)
    seen = 0
    for rule in rules.REGISTRY:
        text = " ".join(render_explain(rule).split())  # paragraphs wrap inside backticks
        for cmd in re.findall(r"`(cudafix [a-z-]+)[^`]*`", text):
            assert cmd.split()[1] in names, (rule.id, cmd)
            seen += 1
    assert seen >= 5, seen
