"""One cause is one finding (issue 34): a package's files are one finding; an add-on whose own CUDA
runtime fails on a driver that is too old for torch as well is evidence of driver-too-old; torch's
companions that fail where torch cannot run are evidence of torch's finding; a driver too old for
the GPU itself and for torch is one driver upgrade.

The envs are recordings (the H200 image's rich env, tests/fixtures/h200rich; the yolov9 A100 env
with the real cu102 scans, tests/test_plan_whole_env.py) judged under what-if drivers.  The cupy
modules' static runtime version is the one cudafix read from those very files on the GPU machine
(docs/gpu-raw/compat-proof-h100-2026-12-06.txt's run recorded 13020 for all three; the rich
recording predates that reader)."""

from __future__ import annotations

from cudafix import rules
from cudafix.model.findings import ERROR, OK, PROBLEM, WARNING
from cudafix.probes.machine import assume
from tests.test_plan_whole_env import h200_rich, yolov9_cu102

CUPY_RUNTIME = 13020


def _rich(driver: str):
    s = h200_rich()
    for m in s.extensions.modules:
        if m.package == "cupy_cuda13x" and m.cudart_linkage == "static":
            m.cudart_version = CUPY_RUNTIME
            m.unknown.pop("cudart", None)
    return assume.apply(s, driver, []) if driver else s


def _outcomes(runs, rule):
    return [o for r in runs if r.rule.id == rule for o in r.outcomes]


def _serious(runs):
    return sorted((f.rule, f.subject) for f in rules.findings(runs) if f.severity in (ERROR, WARNING))


def test_cupy_static_runtime_13_2_on_r580_is_one_ok_not_three_errors():
    runs = rules.run(_rich(""))  # the recording's own driver, 580.159.04 (CUDA 13.0)
    cupy = [o for o in _outcomes(runs, "ext-cuda-major") if "cupy" in o.message]
    assert len(cupy) == 1, [o.message for o in cupy]
    (o,) = cupy
    assert o.verdict == OK and "3 files" in o.message and "minor-version compatibility" in o.message, o.message
    assert _serious(runs) == []


def test_cupy_on_a_driver_too_old_for_torch_is_evidence_not_another_error():
    runs = rules.run(_rich("550.54.14"))  # CUDA 12.4: neither torch cu130 nor cupy's 13.2 runtime runs
    assert [o for o in _outcomes(runs, "ext-cuda-major") if o.verdict == PROBLEM] == []
    (too_old,) = [f for f in rules.findings(runs) if f.rule == "driver-too-old"]
    assert any("cupy_cuda13x" in e and "3 files" in e and "fails on this driver as well" in e for e in too_old.evidence), too_old.evidence


def test_yolov9_a100_torchvision_is_torchs_finding():
    s = assume.apply(yolov9_cu102(), "530.30.02", ["NVIDIA A100-SXM4-40GB"])
    runs = rules.run(s)
    # torch 1.10.0+cu102 has no sm_80 code; its torchvision only PTX for it: one cause, torch's build
    assert _serious(runs) == [("arch-unsupported", "GPU0"), ("cuda-home-mismatch", "CUDA_HOME")]
    (arch,) = [f for f in rules.findings(runs) if f.rule == "arch-unsupported"]
    assert any(e.startswith("torchvision 0.11.1") and "the torch build that fixes this brings its own" in e for e in arch.evidence), arch.evidence
    tv = [o for o in _outcomes(runs, "ext-ptx-jit") if "torchvision" in o.message]
    assert tv and all(o.verdict == OK and "reported by arch-unsupported" in o.message for o in tv)


def test_driver_too_old_for_the_gpu_and_for_torch_is_one_upgrade():
    s = assume.apply(yolov9_cu102(), "418.39", ["NVIDIA A100-SXM4-40GB"])
    runs = rules.run(s)
    serious = _serious(runs)
    assert ("driver-gpu-unsupported", "GPU") in serious and not any(r == "driver-too-old" for r, _ in serious), serious
    (gpu,) = [f for f in rules.findings(runs) if f.rule == "driver-gpu-unsupported"]
    assert any("torch 1.10.0+cu102 (CUDA 10.2) fails on this driver as well" in e for e in gpu.evidence), gpu.evidence
    # a driver new enough for the GPU but not for torch: driver-too-old stands on its own
    s2 = assume.apply(yolov9_cu102(), "450.51.05", ["NVIDIA A100-SXM4-40GB"])
    assert ("driver-too-old", "driver") not in _serious(rules.run(s2))  # R450 (11.0) runs 10.2 natively
