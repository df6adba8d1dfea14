"""Issue 12: verdicts users can trust.

- unknown is structural: a failed needed probe or a rule that says nothing is unknown, never ok;
  `check --strict` fails on it;
- the driver cannot drive the GPU (driver-gpu-unsupported), judged also without torch (what-if);
- no NVIDIA hardware is not a problem: decided from the PCI bus (a fake sysfs root, and this
  real GPU-less machine), a device without a driver stays an error;
- CUDA_HOME / CUDA_PATH pointing nowhere (cuda-home-missing);
- build-time findings never reach the startup hook's warnings.
"""

from __future__ import annotations

import json
import os
import pathlib
import subprocess

import pytest

from cudafix import rules
from cudafix.knowledge import arch_drivers
from cudafix.model.findings import BUILD, ERROR, INFO, OK, PROBLEM, UNKNOWN, WARNING, Rule
from cudafix.model.snapshot import Snapshot
from cudafix.hook import plan as hookplan
from cudafix.probes import take_snapshot
from cudafix.probes.machine import assume, pci
from tests.conftest import FIXTURES, VENVS, run_dev_cudafix
from tests.snapbuild import snap

H200 = FIXTURES / "h200" / "snapshot.json"
SNAPS = FIXTURES / "snapshots"


def verdicts(snap: Snapshot):
    return {r.rule.id: r for r in rules.run(snap)}


def _need_venv(name: str) -> pathlib.Path:
    py = VENVS / name / "bin" / "python"
    if not py.exists():
        if os.environ.get("CI") == "true":
            pytest.fail("test venv %s missing: tests/make_venvs.sh builds it" % py)
        pytest.skip("test venv %s missing: run tests/make_venvs.sh" % py)
    return py


# -- 1. unknown is structural --------------------------------------------------------------


def _failed_torch_probe(tmp_path) -> pathlib.Path:
    """The recorded H200 snapshot with its torch probe failed (torch: [], an entry in probe_errors)."""
    data = json.loads(H200.read_text())
    data["torch"] = []
    data["probe_errors"] = {"torch": "PermissionError: [Errno 13] Permission denied: '/opt/env/lib/python3.12/site-packages'"}
    out = tmp_path / "failed_torch.json"
    out.write_text(json.dumps(data))
    return out


def test_failed_torch_probe_makes_every_rule_needing_torch_unknown_with_the_reason(tmp_path):
    snap = Snapshot.load(str(_failed_torch_probe(tmp_path)))
    runs = verdicts(snap)
    needing = [r for r in rules.REGISTRY if "torch" in r.needs]
    assert len(needing) >= 10
    for rule in needing:
        run = runs[rule.id]
        assert run.verdict == UNKNOWN, rule.id
        assert "the torch probe failed: PermissionError" in run.outcomes[0].message
    # rules that do not need torch still judge (the recorded H200 is healthy)
    assert runs["launch-blocking"].verdict == OK
    assert runs["driver-gpu-unsupported"].verdict == OK


def test_check_strict_fails_on_a_failed_torch_probe_and_says_why(tmp_path):
    path = _failed_torch_probe(tmp_path)
    p = run_dev_cudafix("check", "--strict", "--from", str(path))
    assert p.returncode == 1, p.stdout + p.stderr
    assert "unknown cpu-only-torch: not judged: the torch probe failed: PermissionError" in " ".join(p.stdout.split())
    # without --strict there is no error to fail on: exit 0, the unknowns still listed
    p = run_dev_cudafix("check", "--from", str(path))
    assert p.returncode == 0 and "unknown" in p.stdout


def test_a_rule_that_yields_nothing_is_unknown_never_ok():
    silent = Rule(id="silent", severity=ERROR, title="says nothing", check=lambda s: [])
    run = rules.run(Snapshot.load(str(H200)), (silent,))[0]
    assert run.verdict == UNKNOWN
    assert run.outcomes[0].verdict == UNKNOWN and "no verdict" in run.outcomes[0].message


def test_what_if_replaces_a_failed_driver_probe():
    snap = Snapshot.load(str(H200))
    snap.probe_errors["driver"] = "OSError: boom"
    assert verdicts(snap)["driver-gpu-unsupported"].verdict == UNKNOWN
    snap = assume.apply(snap, "470.57.02", [])
    assert verdicts(snap)["driver-gpu-unsupported"].verdict == PROBLEM


def test_what_if_in_a_venv_without_torch_says_no_torch_and_flags_the_driver():
    py38 = _need_venv("py38")  # a real CPython 3.8 venv with cudafix's deps and no torch
    p = subprocess.run([str(py38), "-c", "import torch"], capture_output=True, text=True, timeout=60)
    assert p.returncode == 1 and "No module named 'torch'" in p.stderr  # ground truth: no torch there
    p = run_dev_cudafix("check", "--python", str(py38), "--assume-driver", "470.57.02", "--assume-gpu", "NVIDIA H100")
    assert p.returncode == 1, p.stdout + p.stderr
    lines = p.stdout.splitlines()
    assert sum("no torch installed for %s" % py38 in ln for ln in lines) == 1
    # the report wraps at 80 columns: compare words
    assert "error driver-gpu-unsupported [GPU]: driver 470.57.02 (R470) is too old for GPU0 NVIDIA H100 (sm_90)" in " ".join(p.stdout.split())
    assert "R520" in p.stdout


# -- 2. driver-gpu-unsupported -------------------------------------------------------------


@pytest.mark.parametrize("driver,gpu,verdict", [
    # NVIDIA's matrix: Blackwell first CUDA 12.8 (RN: >= 570.26), Hopper first CUDA 11.8 (RN: >= 520.61.05)
    ("565.57.01", "NVIDIA GeForce RTX 5090", PROBLEM),
    ("570.26", "NVIDIA GeForce RTX 5090", OK),
    ("515.65.01", "NVIDIA H100 PCIe", PROBLEM),
    ("520.61.05", "NVIDIA H100 PCIe", OK),
    ("450.51.05", "NVIDIA A100-SXM4-80GB", OK),
    # Pascal / Volta: last driver branch R580
    ("580.95.05", "Tesla V100-SXM2-16GB", OK),
    ("590.44.01", "Tesla V100-SXM2-16GB", PROBLEM),
    ("590.44.01", "sm_61", PROBLEM),
    # Kepler: last driver branch R470
    ("470.57.02", "Tesla K80", OK),
    ("525.60.13", "Tesla K80", PROBLEM),
    # not in the table: unknown, never ok
    ("580.95.05", "sm_87", UNKNOWN),
])
def test_driver_gpu_table(driver, gpu, verdict):
    snap = assume.apply(Snapshot.load(str(H200)), driver, [gpu])
    assert verdicts(snap)["driver-gpu-unsupported"].verdict == verdict


def test_every_arch_row_cites_a_public_url():
    for row in arch_drivers.ROWS:
        assert row.sources and all(s.startswith("https://") for s in row.sources), row.arch
        if row.min_branch is not None:
            assert row.min_driver and row.min_driver.startswith(str(row.min_branch)), row.arch


# -- 3. no NVIDIA hardware is not a problem --------------------------------------------------


def _pci(root: pathlib.Path, addr: str, vendor: str, cls: str, device: str = "0x0000") -> None:
    d = root / "sys" / "bus" / "pci" / "devices" / addr
    d.mkdir(parents=True)
    (d / "vendor").write_text(vendor + "\n")
    (d / "class").write_text(cls + "\n")
    (d / "device").write_text(device + "\n")


def test_pci_probe_on_a_fake_sysfs(tmp_path):
    _pci(tmp_path, "0000:00:02.0", "0x8086", "0x030000")  # Intel iGPU: not NVIDIA
    _pci(tmp_path, "0000:01:00.1", "0x10de", "0x040300")  # NVIDIA HDMI audio: not a GPU
    _pci(tmp_path, "0000:01:00.0", "0x10de", "0x030200", "0x2335")  # NVIDIA 3D controller (H200)
    hw = pci.probe_hardware(str(tmp_path))
    assert [(d.address, d.device_id, d.pci_class) for d in hw.nvidia_pci] == [("0000:01:00.0", "0x2335", "0x030200")]
    assert hw.unknown is None and not hw.dxg


def test_pci_probe_dxg_and_unreadable_bus(tmp_path):
    hw = pci.probe_hardware(str(tmp_path))
    assert hw.unknown and "/sys/bus/pci/devices" in hw.unknown  # nothing to read: unknown, not "no GPU"
    (tmp_path / "dev").mkdir()
    (tmp_path / "dev" / "dxg").write_text("")
    hw = pci.probe_hardware(str(tmp_path))
    assert hw.dxg and hw.unknown is None


def _probe_fake(root: pathlib.Path, torch_python: pathlib.Path) -> Snapshot:
    env = {"PATH": "/usr/bin:/bin"}
    return take_snapshot(python=str(torch_python), env=env, root=str(root), usr_local=str(root / "usr" / "local"),
                         use_nvml=False, call_driver_api=False, scan_arch=False)


def test_fake_root_cpu_only_is_a_note_and_a_device_without_driver_an_error(tmp_path, torch_cu_python):
    cpu = tmp_path / "cpu"
    _pci(cpu, "0000:00:02.0", "0x8086", "0x030000")
    snap = _probe_fake(cpu, torch_cu_python)
    assert snap.hardware is not None and snap.hardware.nvidia_pci == []
    f = {x.rule: x for x in rules.findings(rules.run(snap))}
    assert f["no-driver"].severity == INFO and f["no-driver"].message == "CPU-only machine; this CUDA build of torch runs on the CPU"
    assert not [x for x in f.values() if x.severity in (ERROR, WARNING)]
    assert hookplan.build_entry(list(f.values()), {}, []).warns == ()

    gpu = tmp_path / "gpu"
    _pci(gpu, "0000:01:00.0", "0x10de", "0x030200", "0x2335")
    snap = _probe_fake(gpu, torch_cu_python)
    f = {x.rule: x for x in rules.findings(rules.run(snap))}
    assert f["no-driver"].severity == ERROR
    assert "0000:01:00.0" in "\n".join(f["no-driver"].evidence)
    assert [w[0] for w in hookplan.build_entry(list(f.values()), {}, []).warns] == ["no-driver"]


def test_old_snapshot_without_hardware_section_is_unknown():
    data = json.loads((SNAPS / "real_torch_cu_no_driver.json").read_text())
    assert "hardware" not in data
    runs = verdicts(Snapshot.from_dict(data))
    assert runs["no-driver"].verdict == UNKNOWN
    assert "older cudafix" in " ".join(runs["no-driver"].outcomes[0].evidence)


def test_this_machine_has_no_nvidia_device_and_check_strict_passes(torch_cu_python):
    # ground truth, without cudafix: no PCI function of vendor 0x10de on this machine
    vendors = [p.read_text().strip() for p in pathlib.Path("/sys/bus/pci/devices").glob("*/vendor")]
    if "0x10de" in vendors:
        pytest.skip("this machine has an NVIDIA device")
    p = run_dev_cudafix("check", "--strict", "--python", str(torch_cu_python))
    assert p.returncode == 0, p.stdout + p.stderr
    assert "info no-driver [driver]: CPU-only machine; this CUDA build of torch runs on the CPU" in " ".join(p.stdout.split())
    p = run_dev_cudafix("status", "--python", str(torch_cu_python))
    assert "CPU-only machine" in p.stdout and "0 errors, 0 warnings, 1 note, 0 unknown" in p.stdout


def test_import_torch_in_the_cuda_venv_prints_nothing_from_cudafix(tmp_path, torch_cu_python):
    vendors = [p.read_text().strip() for p in pathlib.Path("/sys/bus/pci/devices").glob("*/vendor")]
    if "0x10de" in vendors:
        pytest.skip("this machine has an NVIDIA device")
    from tests.test_startup_helpers import TORCH_CU_SITE, clean_env, make_venv, run

    py = make_venv(tmp_path / "v", deps=[TORCH_CU_SITE])
    env = clean_env(tmp_path / "cache")
    base = run(py, "import torch", dict(env, CUDAFIX_DISABLE="1"), timeout=300)
    assert base.returncode == 0, base.stderr
    for cache in ("cold", "warm"):
        p = run(py, "import torch", env, timeout=300)
        assert p.returncode == 0, p.stderr
        assert p.stdout == "" and p.stderr == base.stderr, (cache, p.stderr)  # torch's own output only
    p = run(py, "import torch", dict(env, CUDAFIX_DEBUG="1"), timeout=300)
    assert "0 findings to report" in p.stderr or "cudafix" in p.stderr  # the hook did run


# -- 5. CUDA_HOME / CUDA_PATH pointing nowhere -------------------------------------------------


def _home_snap(tmp_path, **env) -> Snapshot:
    e = {"PATH": "/usr/bin:/bin"}
    e.update(env)
    return take_snapshot(python=None, env=e, root=str(tmp_path), usr_local=str(tmp_path / "usr" / "local"),
                         use_nvml=False, call_driver_api=False, scan_arch=False)


def test_cuda_home_missing_dir_no_nvcc_and_ok(tmp_path):
    no_nvcc = tmp_path / "cuda-x"
    no_nvcc.mkdir()
    snap = _home_snap(tmp_path, CUDA_HOME=str(tmp_path / "gone"))
    f = [x for x in rules.findings(rules.run(snap)) if x.rule == "cuda-home-missing"]
    # a build-time problem in an env that builds no extension: a warning (rules/toolkit.py severity_why)
    assert [(x.severity, x.subject) for x in f] == [(WARNING, "CUDA_HOME")] and "does not exist" in f[0].message
    assert f[0].scope == BUILD
    snap = _home_snap(tmp_path, CUDA_PATH=str(no_nvcc))
    f = [x for x in rules.findings(rules.run(snap)) if x.rule == "cuda-home-missing"]
    assert [(x.severity, x.subject) for x in f] == [(WARNING, "CUDA_PATH")] and "no bin/nvcc" in f[0].message
    # the /usr/local/cuda fallback (not set by the user) without nvcc: a warning
    (tmp_path / "usr" / "local" / "cuda").mkdir(parents=True)
    snap = _home_snap(tmp_path)
    f = [x for x in rules.findings(rules.run(snap)) if x.rule == "cuda-home-missing"]
    assert [x.severity for x in f] == [WARNING]
    real = pathlib.Path("/usr/local/cuda-13.0")
    if (real / "bin" / "nvcc").exists():
        snap = take_snapshot(python=None, env={"PATH": "/usr/bin:/bin", "CUDA_HOME": str(real)}, use_nvml=False,
                             call_driver_api=False, scan_arch=False)
        assert verdicts(snap)["cuda-home-missing"].verdict == OK


# -- 6. the hook speaks only about this process ----------------------------------------------


def test_build_findings_never_reach_the_hook_but_show_in_check():
    for name, rid in (("../yolov9/yolov9-a100-conda-cudahome.json", "cuda-home-mismatch"), ("real_cuda_home_missing.json", "cuda-home-missing")):
        found = rules.findings(rules.run(Snapshot.load(str(SNAPS / name))))
        assert rid in [f.rule for f in found]
        assert all(f.scope == BUILD for f in found if f.rule == rid)
        entry = hookplan.build_entry(found, {}, [])
        assert rid not in [w[0] for w in entry.warns], name
        msg = [f for f in found if f.rule == rid][0]
        assert "CUDA extension builds" in msg.message
        # activation (and status / check) still report it
        from cudafix.activation import plan as activation

        summary = activation.plan_from_findings([msg], {}).summary
        assert ("set CUDA_HOME to /usr/local/cuda-11.3" in summary) if msg.auto else ("%s: %s" % (rid, msg.message) in summary), summary
    # a runtime finding still does
    found = rules.findings(rules.run(snap("h200/snapshot.json", {"env.CUDA_LAUNCH_BLOCKING": "1"})))
    assert "launch-blocking" in [w[0] for w in hookplan.build_entry(found, {}, []).warns]


def test_every_rule_declares_needs_and_a_scope():
    from cudafix.model.findings import SCOPES

    names = {"driver", "gpus", "hardware", "torch", "torchvision", "toolkits", "libraries", "jit_cache", "env", "python", "wsl", "windows",
             "torch_import",
             "node", "extensions"}
    for r in rules.REGISTRY:
        assert r.needs and set(r.needs) <= names, r.id
        assert r.scope in SCOPES
    assert {r.id for r in rules.REGISTRY if r.scope == BUILD} == {"cuda-home-mismatch", "cuda-home-missing", "wsl-libcuda-not-symlink"}


def test_gpu_named_by_proc_without_compute_capability_is_judged_from_the_product_table():
    snap = assume.apply(Snapshot.load(str(H200)), "470.57.02", [])
    snap.gpus.gpus[0].compute_capability = None  # as /proc/driver/nvidia/gpus records it
    snap.gpus.gpus[0].found_via = "/proc/driver/nvidia/gpus/0000:00:06.0/information"
    run = verdicts(snap)["driver-gpu-unsupported"]
    assert run.verdict == PROBLEM and "Hopper" in " ".join(run.findings()[0].evidence)
