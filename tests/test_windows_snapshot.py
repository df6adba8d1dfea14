"""A Windows snapshot, synthetic from real files: the Windows code paths (cudafix.probes.loader.windows,
windlls, pe; torch_build on the wheel's own version.py) run over the real torch 2.13.0 win_amd64
wheel unpacked here (no Windows machine exists here: System32 is assumed standard and the commit
limit is stated per test).  Then `cudafix status --from` / `check --from` on it."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from cudafix import rules
from cudafix.model.snapshot import GPU, PythonInfo, Snapshot
from cudafix.probes.loader.windows import probe_windows
from cudafix.probes.pyenv import torch_build
from tests.conftest import REPO
from tests.test_windows_dlls import tree
from tests.wintree import wheel_dir

GIB = 1 << 30


def win_snapshot(site: str, commit_limit=None) -> Snapshot:
    torch = torch_build.probe_torch([site], scan_arch=False)
    assert torch and torch[0].version == "2.13.0+cpu" and torch[0].cuda is None  # the wheel's version.py: the CPU build
    snap = Snapshot(source="synthetic from real files: the Windows code paths over the torch 2.13.0 win_amd64 wheel (tests/test_windows_snapshot.py)")
    snap.python = PythonInfo(executable=r"C:\Users\u\venv\Scripts\python.exe", version="3.12.7", prefix=r"C:\Users\u\venv",
                             platform="win-amd64")
    snap.torch = torch
    snap.windows = probe_windows(torch[0].package_dir, "3.12", {}, on_windows=False, site_dirs=[site])
    snap.windows.commit_limit_bytes = commit_limit
    # Stated, as a Windows recording would hold them: the machine of entbappy/YOLO-v8-Object-Detection#7
    # (nvidia-smi: NVIDIA GeForce RTX 3060 Laptop GPU, 6 GiB, driver 560.94, CUDA 12.6), the GPU from
    # NVML (nvml.dll), the driver from nvcuda.dll's version resource (cudafix.probes.loader.windows.read_nvcuda).
    snap.gpus.gpus = [GPU(index=0, name="NVIDIA GeForce RTX 3060 Laptop GPU", compute_capability="8.6", memory_mib=6144,
                          found_via="NVML (stated from the report)")]
    snap.driver.libcuda_path = r"C:\Windows\System32\nvcuda.dll"
    snap.driver.libcuda_version = "560.94"
    snap.driver.cuda_version = 12060
    snap.driver.found_via["libcuda_version"] = "stated from the report (nvcuda.dll's version resource on Windows)"
    return snap


def site_with(tmp_path, drop=()):
    site = tmp_path / "site-packages"
    site.mkdir(parents=True)
    src = wheel_dir("torch-2.13.0")
    t = tree(site, src / "torch", drop=drop)
    for f in (src / "torch").glob("*.py"):
        (t / f.name).symlink_to(f)
    for d in src.glob("torch-*.dist-info"):
        (site / d.name).symlink_to(d)
    return str(site)


def verdict(snap, rid):
    (run,) = [r for r in rules.run(snap) if r.rule.id == rid]
    return run


def test_healthy_windows_tree_and_the_cpu_wheel(tmp_path):
    snap = win_snapshot(site_with(tmp_path), commit_limit=64 * GIB)
    assert verdict(snap, "windows-dll-missing").verdict == "ok"
    run = verdict(snap, "cpu-only-torch")  # PyPI's Windows wheel is the CPU build
    assert run.verdict == "problem" and any("PyPI serves only CPU builds" in e for e in run.outcomes[0].evidence)
    from cudafix.plans.planner import INSTALL, make_plan

    (step,) = [s for s in make_plan(snap).steps if s.kind == INSTALL]
    argv = list(step.argv)
    # the driver (560.94: CUDA 12.6, stated) runs cu126 natively: that variant from the PyTorch index
    assert argv[-4:] == ["install", "torch==2.13.0+cu126", "--index-url", "https://download.pytorch.org/whl/cu126"], argv
    assert verdict(snap, "no-driver").verdict == "ok" and verdict(snap, "driver-library-mismatch").verdict == "ok"
    assert verdict(snap, "windows-commit-charge").verdict == "ok"
    assert {r.rule.id for r in rules.run(snap) if r.rule.id.startswith("wsl-") and r.verdict != "ok"} == set()


def test_commit_charge_from_the_real_dll_sizes(tmp_path):
    snap = win_snapshot(site_with(tmp_path), commit_limit=2 * GIB)
    total = sum(os.path.getsize(p) for p in (wheel_dir("torch-2.13.0") / "torch" / "lib").glob("*.dll"))
    assert snap.windows.dll_bytes == total
    run = verdict(snap, "windows-commit-charge")
    assert (run.verdict == "problem") == (2 * GIB // total - 1 < 8)
    assert verdict(win_snapshot(site_with(tmp_path / "b"), commit_limit=None), "windows-commit-charge").verdict == "unknown"


def test_status_from_a_windows_snapshot(tmp_path):
    snap = win_snapshot(site_with(tmp_path, drop=("c10.dll",)), commit_limit=64 * GIB)
    path = tmp_path / "win.json"
    path.write_text(snap.to_json())
    env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "PYTHONPATH": str(REPO)}
    # -v: each finding in full (issue 35: the first screen gives each one line)
    st = subprocess.run([sys.executable, "-m", "cudafix", "status", "-v", "--from", str(path)], env=env, capture_output=True, text=True, timeout=120)
    assert st.returncode == 0, st.stderr
    assert "windows-dll-missing" in st.stdout and "c10.dll" in st.stdout and "WinError 126" in st.stdout, st.stdout
    assert "cpu-only-torch" in st.stdout and "download.pytorch.org/whl/cu126" in st.stdout
    chk = subprocess.run([sys.executable, "-m", "cudafix", "check", "--json", "--from", str(path)], env=env, capture_output=True,
                         text=True, timeout=120)
    assert chk.returncode == 1
    data = json.loads(chk.stdout)
    rows = data["findings"] if isinstance(data, dict) else data
    (f,) = [r for r in rows if r["rule"] == "windows-dll-missing"]
    assert f["severity"] == "error"


def test_take_snapshot_as_on_windows(tmp_path):
    """The snapshot code paths with what Windows lacks removed (os.uname, os.getuid, os.geteuid) and
    the platform win-amd64, over the real wheel: no probe crashes, the Windows section is filled, and
    the cp312 wheel under this CPython 3.11 fails where Windows would: torch_python.dll needs python312.dll."""
    site = str(wheel_dir("torch-2.13.0"))
    env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "PYTHONPATH": str(REPO)}
    proc = subprocess.run([sys.executable, str(REPO / "tests" / "winprobe_child.py"), site, str(tmp_path)], env=env,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    assert out["errors"] == {} and out["windows"] and out["platform"] == "win-amd64" and out["torch"] == ["2.13.0+cpu"]
    if sys.version_info[:2] != (3, 12):
        assert (out["failure"]["loading"], out["failure"]["missing"]) == ("torch_python.dll", "python312.dll")
    else:
        assert out["failure"] is None
