"""Issue 34: a real, working GPU machine is healthy in status, check, `check --strict` and
activation, because cudafix reads the facts it once lacked -- not because an unknown was
relabelled.  The recordings (cudafix/data/examples/README.md, tests/fixtures/h100/SOURCES.md) were
taken on the device machine, where every module of the image's env ran (cupy's kernels with its
static CUDA 13.2 runtime on driver 580: docs/gpu-raw/compat-cupy-h100-2026-12-06.txt), and where
the PTX-only module built by nvcc 13.2 failed every launch with 222."""

from __future__ import annotations

import pathlib
import subprocess
import sys

import pytest

from cudafix import rules
from cudafix.activation.plan import plan_from_findings
from cudafix.model.findings import ERROR, OK
from cudafix.model.snapshot import Snapshot

REPO = pathlib.Path(__file__).resolve().parent.parent
HEALTHY = ("h100-rich-torch2.11-cu130", "h100-torch2.11-cu130")


def _cli(*args):
    return subprocess.run([sys.executable, "-m", "cudafix", *args], capture_output=True, text=True, timeout=120, cwd=str(REPO))


@pytest.mark.parametrize("name", HEALTHY)
def test_recorded_working_machine_is_healthy_everywhere(name):
    path = REPO / "cudafix" / "data" / "examples" / (name + ".json")
    snap = Snapshot.load(str(path))
    runs = rules.run(snap)
    assert [r.rule.id for r in runs if r.verdict != OK] == []  # no unknown either: the facts were read
    statics = [m for m in snap.extensions.modules if m.cudart_linkage == "static"]
    assert not statics or all(m.cudart_version for m in statics)  # read, not relabelled
    assert snap.torch_import is not None
    strict = _cli("check", "--strict", "--example", name)
    assert strict.returncode == 0, strict.stdout + strict.stderr
    status = _cli("status", "--example", name)
    assert status.stdout.splitlines()[0].startswith("healthy"), status.stdout[:400]
    # conda activate's line: nothing to say on a healthy env
    assert plan_from_findings(rules.findings(runs), snap.env).summary is None


def test_rich_env_reads_cupys_runtime_and_ptx_isa():
    snap = Snapshot.load(str(REPO / "cudafix" / "data" / "examples" / "h100-rich-torch2.11-cu130.json"))
    cupy = [m for m in snap.extensions.modules if m.package == "cupy_cuda13x"]
    assert len(cupy) == 3 and {m.cudart_version for m in cupy} == {13020}
    assert all(m.ptx_isa for m in cupy if m.ptx)
    (o,) = [o for r in rules.run(snap) if r.rule.id == "ext-cuda-major" for o in r.outcomes if "cupy" in o.message]
    assert "minor-version compatibility" in o.message


def test_recorded_ptx_from_a_newer_toolkit_is_the_error_the_driver_gave():
    snap = Snapshot.load(str(REPO / "tests" / "fixtures" / "h100" / "ptx132-snapshot.json"))
    fs = [f for f in rules.findings(rules.run(snap)) if f.severity == ERROR]
    assert [f.rule for f in fs] == ["ext-ptx-unsupported"]
    assert "the provided PTX was compiled with an unsupported toolchain." in fs[0].message
    assert any("(ISA 9.2)" in e for e in fs[0].evidence)
    strict = _cli("check", "--from", "tests/fixtures/h100/ptx132-snapshot.json")
    assert strict.returncode == 1
