"""`cudafix verify`: the CPU-side logic on real children here; GPU runs recorded on the H200.

The GPU verdicts are judged from measurements `cudafix verify --json` recorded on the H200 device
machine (tests/fixtures/verify/, see docs/gpu.md for the commands); the tests that need a GPU
themselves are marked `gpu` and skipped where none exists.
"""

from __future__ import annotations

import json
import pathlib
import shutil
import sys

import pytest

from cudafix import verify
from tests.conftest import REPO, run_cudafix

FIX = REPO / "tests" / "fixtures" / "verify"


def test_cpu_only_torch_is_cpu_fallback(torch_cpu_python):
    m = verify.run_child(str(torch_cpu_python), quick=True, timeout=180)
    r = verify.judge(m, {}, None, [])
    assert r.verdict == verify.CPU_FALLBACK and r.exit_code == 3
    assert "CPU-only build" in r.reasons[0] and "2.13.0" in r.reasons[0]


def test_cuda_torch_without_gpu_is_cpu_fallback(torch_cu_python):
    proc = run_cudafix(torch_cu_python, "verify", "--quick", "--json", timeout=300)
    assert proc.returncode == 3, proc.stderr
    out = json.loads(proc.stdout)
    assert out["verdict"] == "CPU fallback"
    assert out["measurements"]["torch_cuda"] == "13.0"
    assert "torch.cuda.is_available() is False" in out["reasons"]


def test_env_without_torch_is_no_torch(no_torch_python):
    m = verify.run_child(str(no_torch_python), quick=True, timeout=60)
    r = verify.judge(m, {}, None, [])
    assert r.verdict == verify.NO_TORCH and r.exit_code == 4
    assert "No module named 'torch'" in r.reasons[0]


def test_unrunnable_python_is_a_one_line_error(tmp_path):
    proc = run_cudafix(pathlib.Path(sys.executable), "verify", "--python", str(tmp_path / "nope"))
    assert proc.returncode == 2
    assert proc.stderr.count("\n") == 1 and proc.stderr.startswith("cudafix verify: cannot run")


def _recorded(name: str) -> dict:
    path = FIX / name
    if not path.exists():
        pytest.fail("missing recorded fixture %s" % path)
    return json.loads(path.read_text())


def test_recorded_h200_healthy_is_gpu_used():
    rec = _recorded("h200-verify.json")
    m = rec["measurements"]
    r = verify.judge(m, verify._expected_peaks(m["devices"]), 1, [])
    assert r.verdict == verify.GPU_USED, r.reasons
    assert m["devices"][0]["name"] == "NVIDIA H200" and m["devices"][0]["compute_capability"] == "9.0"


def test_recorded_h200_launch_blocking_is_degraded():
    rec = _recorded("h200-verify-launch-blocking.json")
    m = rec["measurements"]
    r = verify.judge(m, verify._expected_peaks(m["devices"]), 1, [])
    assert r.verdict == verify.DEGRADED
    assert any("CUDA_LAUNCH_BLOCKING=1" in x for x in r.reasons)


def test_recorded_h200_hidden_gpu_is_cpu_fallback():
    rec = _recorded("h200-verify-cvd-empty.json")
    r = verify.judge(rec["measurements"], {}, 1, [])
    assert r.verdict == verify.CPU_FALLBACK
    assert "CUDA_VISIBLE_DEVICES=''" in r.reasons


def test_no_native_sass_is_degraded():
    # The measurement a PTX-only torch gives on an sm_90 GPU (arch list without any sm_9x).
    m = dict(_recorded("h200-verify.json")["measurements"])
    m["arch_list"] = ["sm_75", "sm_80", "sm_86", "compute_86"]
    r = verify.judge(m, {}, 1, [])
    assert r.verdict == verify.DEGRADED
    assert any("no native kernels" in x for x in r.reasons)


@pytest.mark.gpu  # the one test allowed to skip under CI: it needs a real GPU
@pytest.mark.skipif(shutil.which("nvidia-smi") is None, reason="needs an NVIDIA GPU and driver (nvidia-smi not found)")
def test_verify_on_a_real_gpu_quick():
    proc = run_cudafix(pathlib.Path(sys.executable), "verify", "--quick", "--json", timeout=120)
    out = json.loads(proc.stdout)
    assert out["verdict"] in ("GPU used", "degraded")
