"""take_snapshot(): this machine, the real venvs, another interpreter, guards, JSON round trip."""

from __future__ import annotations

import sys

import pytest

import cudafix.probes as probes
from cudafix.probes.machine import driver as driver_probe
from cudafix.model.snapshot import SCHEMA, Snapshot

MINE = ("host", "python", "env", "driver", "gpus", "toolkits", "torch", "torchvision", "jit_cache")


def test_this_machine_without_driver():
    snap = probes.take_snapshot()
    assert snap.schema == SCHEMA and snap.source == "probed" and snap.created.endswith("+00:00")
    assert not [k for k in snap.probe_errors if k in MINE], snap.probe_errors
    assert snap.host["os"] == "linux" and snap.host.get("glibc")
    assert snap.python.executable == sys.executable and snap.python.prefix == sys.prefix
    if snap.driver.kernel_version is None:
        assert "kernel_version" in snap.driver.unknown
        assert snap.gpus.gpus == [] and "gpus" in snap.gpus.unknown


def test_cu130_venv_and_json_round_trip(torch_cu_python, tmp_path):
    snap = probes.take_snapshot(python=str(torch_cu_python), cache_dir=str(tmp_path / "cache"))
    assert not [k for k in snap.probe_errors if k in MINE], snap.probe_errors
    assert snap.python.executable == str(torch_cu_python)
    t = snap.primary_torch
    assert t is not None and (t.version, t.cuda) == ("2.14.1+cu130", "13.0")
    assert any("sm_90" in a.sass for a in t.arch)
    names = {w.name for w in snap.toolkits.nvidia_wheels}
    assert {"cuda-toolkit", "nvidia-cuda-runtime", "nvidia-cudnn-cu13"} <= names
    back = Snapshot.from_json(snap.to_json())
    assert back.to_dict() == snap.to_dict()
    assert back.primary_torch.arch[0].sass == t.arch[0].sass


def test_cpu_venv(torch_cpu_python):
    snap = probes.take_snapshot(python=str(torch_cpu_python))
    (t,) = snap.torch
    assert (t.version, t.cuda) == ("2.13.0+cpu", None)
    assert snap.python.conda_prefix is None


def test_env_is_the_one_given(torch_cpu_python):
    snap = probes.take_snapshot(python=str(torch_cpu_python), env={"PATH": "/usr/bin:/bin", "CUDA_VISIBLE_DEVICES": ""},
                                use_nvml=False, scan_arch=False)
    assert snap.env == {"CUDA_VISIBLE_DEVICES": ""}
    assert snap.gpus.visible == []


def test_missing_interpreter_is_recorded_not_raised():
    snap = probes.take_snapshot(python="/nonexistent/bin/python")
    assert "cannot run /nonexistent/bin/python" in snap.probe_errors["python"]
    assert snap.python.executable == "/nonexistent/bin/python"
    assert snap.torch == [] and "torch" in snap.probe_errors
    assert snap.host and snap.jit_cache.path  # the rest still filled


def test_a_crashing_probe_is_contained(monkeypatch):
    def boom(*a, **k):
        raise RuntimeError("boom")

    monkeypatch.setattr(driver_probe, "probe_driver", boom)
    snap = probes.take_snapshot(use_nvml=False, scan_arch=False)
    assert snap.probe_errors["driver"] == "RuntimeError: boom"
    assert snap.driver.kernel_version is None and snap.host and snap.toolkits is not None


def test_parse_python_query_ignores_pth_noise():
    out = 'hello from a .pth\n{"bogus": 1}\n{"executable": "/e/bin/python", "version": "3.8.18", "prefix": "/e", "path": ["/e/lib"], "platform": "linux-x86_64"}\n'
    assert probes.parse_python_query(out)["prefix"] == "/e"
    with pytest.raises(probes.ProbeError):
        probes.parse_python_query("nothing useful")


def test_interpreter_that_fails_reports_its_error(tmp_path):
    bad = tmp_path / "python"
    bad.write_text("#!/bin/sh\necho 'ImportError: site broken' >&2\nexit 3\n")
    bad.chmod(0o755)
    snap = probes.take_snapshot(python=str(bad), use_nvml=False)
    assert snap.probe_errors["python"].endswith("exited with 3: ImportError: site broken")


def test_hanging_interpreter_is_bounded(tmp_path, monkeypatch):
    slow = tmp_path / "python"
    slow.write_text("#!/bin/sh\nsleep 30\n")
    slow.chmod(0o755)
    monkeypatch.setattr(probes, "PYTHON_QUERY_TIMEOUT_S", 0.5)
    with pytest.raises(probes.ProbeError, match="did not answer"):
        probes.query_python(str(slow), {}, timeout=0.5)


def test_conda_layout_end_to_end(tmp_path):
    """A real interpreter whose prefix carries the yolov9 conda-meta records and a conda torch 1.10."""
    import shutil
    import subprocess

    from tests.test_probe_torch import CONDA_META, TORCH_110_VERSION_PY, TORCHVISION_011_VERSION_PY

    prefix = tmp_path / "yolov9"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(prefix)], check=True, timeout=120)
    shutil.copytree(str(CONDA_META), str(prefix / "conda-meta"))
    site = prefix / "lib" / ("python%d.%d" % sys.version_info[:2]) / "site-packages"
    (site / "torch").mkdir(parents=True)
    (site / "torch" / "__init__.py").write_text("")
    (site / "torch" / "version.py").write_text(TORCH_110_VERSION_PY)
    (site / "torch-1.10.0-py3.8.egg-info").mkdir()
    (site / "torch-1.10.0-py3.8.egg-info" / "PKG-INFO").write_text("Name: torch\nVersion: 1.10.0\n")
    (site / "torchvision").mkdir()
    (site / "torchvision" / "version.py").write_text(TORCHVISION_011_VERSION_PY)
    snap = probes.take_snapshot(python=str(prefix / "bin" / "python"), env={"PATH": "/usr/bin:/bin"}, use_nvml=False)
    assert snap.python.conda_prefix == snap.python.prefix
    t = snap.primary_torch
    assert (t.version, t.cuda, t.dist.origin, t.dist.conda_build) == ("1.10.0", "11.3", "conda", "py3.8_cuda11.3_cudnn8.2.0_0")
    (tv,) = snap.torchvision
    assert tv.cuda == "11.3" and tv.dist.origin == "conda"
    assert {p.name for p in snap.toolkits.conda_packages} >= {"cudatoolkit", "pytorch", "pytorch-mutex"}
    assert Snapshot.from_json(snap.to_json()).to_dict() == snap.to_dict()


def test_recorded_h200_snapshot_loads_and_agrees_with_nvidia_smi():
    from tests.conftest import FIXTURES

    snap = Snapshot.load(str(FIXTURES / "probe" / "h200_snapshot.json"))
    # nvidia-smi on the same kind of machine: "0, NVIDIA H200, 00000000:00:06.0, …, 9.0, 143771 MiB, Disabled"
    assert (snap.driver.kernel_version, snap.driver.libcuda_version, snap.driver.cuda_version) == ("580.159.04", "580.159.04", 13000)
    (g,) = snap.gpus.gpus
    assert (g.name, g.compute_capability, g.memory_mib, g.pci_bus_id, g.mig_mode) == ("NVIDIA H200", "9.0", 143771, "00000000:00:06.0", False)
    assert snap.visible_gpus() == [g]
    t = snap.primary_torch
    assert (t.version, t.cuda) == ("2.11.0+cu130", "13.0") and "sm_90" in t.arch[0].sass
    assert snap.probe_errors == {}
